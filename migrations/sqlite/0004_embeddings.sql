-- Chunk embeddings (EMBEDDING_MODEL): one vector per chunk, for the model that made it.
-- A chunk's vector goes with the chunk (ON DELETE CASCADE), so deleting a document or an
-- agent drops its vectors in the same statement. The `embedding` column of `chunks`
-- (0003) stays unused: a vector needs its model and dimensions beside it.

CREATE TABLE chunk_embeddings (
    chunk_id   INTEGER PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
    -- The chunk's agent (copied from `chunks`), so an agent's vectors are read by index.
    agent_id   TEXT NOT NULL,
    -- The EMBEDDING_MODEL that produced the vector; another model's vectors are ignored
    -- and replaced.
    model      TEXT NOT NULL,
    -- Number of components; 0 marks a chunk the endpoint refused to embed (e.g. too long
    -- for the model), so it is not retried for this model.
    dimensions INTEGER NOT NULL CHECK (dimensions >= 0),
    -- `dimensions` little-endian IEEE 754 f32 values.
    vector     BLOB NOT NULL CHECK (length(vector) = 4 * dimensions)
);
CREATE INDEX chunk_embeddings_agent ON chunk_embeddings (agent_id, model);

-- A counter per agent that every change to its vectors bumps, so an in-memory copy of
-- the vectors can tell cheaply whether it is still current (any instance, any writer).
CREATE TABLE embedding_generations (
    agent_id   TEXT PRIMARY KEY,
    generation INTEGER NOT NULL
);
CREATE TRIGGER chunk_embeddings_ai AFTER INSERT ON chunk_embeddings BEGIN
    INSERT INTO embedding_generations (agent_id, generation) VALUES (new.agent_id, 1)
    ON CONFLICT (agent_id) DO UPDATE SET generation = generation + 1;
END;
CREATE TRIGGER chunk_embeddings_au AFTER UPDATE ON chunk_embeddings BEGIN
    UPDATE embedding_generations SET generation = generation + 1 WHERE agent_id = new.agent_id;
END;
-- Only an update here: a cascade from a deleted agent must not recreate its counter.
CREATE TRIGGER chunk_embeddings_ad AFTER DELETE ON chunk_embeddings BEGIN
    UPDATE embedding_generations SET generation = generation + 1 WHERE agent_id = old.agent_id;
END;
CREATE TRIGGER agents_embedding_generation_ad AFTER DELETE ON agents BEGIN
    DELETE FROM embedding_generations WHERE agent_id = old.id;
END;
