-- BM25 ranking moves from FTS5 to an in-memory index per agent (server/src/knowledge/bm25.rs),
-- built from `chunks` and kept in step through the two tables below. FTS5 computed bm25()
-- for every matching row before the best ones were known, which cost 50–150 ms per query
-- over 100,000 chunks (BENCHMARKS.md § Knowledge base).

DROP TRIGGER chunks_ai;
DROP TRIGGER chunks_ad;
DROP TABLE chunks_fts;

-- A counter per agent that every chunk inserted or deleted bumps, so an in-memory index can
-- tell cheaply whether it is still current (any instance, any writer).
CREATE TABLE chunk_generations (
    agent_id   TEXT PRIMARY KEY,
    generation INTEGER NOT NULL
);
INSERT INTO chunk_generations (agent_id, generation)
    SELECT agent_id, 1 FROM chunks GROUP BY agent_id;
CREATE TRIGGER chunks_generation_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunk_generations (agent_id, generation) VALUES (new.agent_id, 1)
    ON CONFLICT (agent_id) DO UPDATE SET generation = generation + 1;
END;
-- Only an update here: a cascade from a deleted agent must not recreate its counter.
CREATE TRIGGER chunks_generation_ad AFTER DELETE ON chunks BEGIN
    UPDATE chunk_generations SET generation = generation + 1 WHERE agent_id = old.agent_id;
END;
CREATE TRIGGER agents_chunk_generation_ad AFTER DELETE ON agents BEGIN
    DELETE FROM chunk_generations WHERE agent_id = old.id;
END;

-- The next chunk id. Chunk ids only grow (SQLite alone would reuse the largest id after it
-- is deleted), so an index that has seen every id up to some value knows that the chunks
-- added since are exactly those above it.
CREATE TABLE chunk_id_seq (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    next INTEGER NOT NULL
);
INSERT INTO chunk_id_seq (id, next) SELECT 1, coalesce(max(id), 0) + 1 FROM chunks;
