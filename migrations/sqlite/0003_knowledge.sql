-- Knowledge base: documents (uploaded files and crawled sites), their pages and chunks,
-- the BM25 full-text index over the chunks, and durable background jobs.
-- Times are Unix epoch milliseconds.

CREATE TABLE documents (
    id           TEXT PRIMARY KEY,
    agent_id     TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- 'file' (an upload) or 'url' (a crawled site).
    kind         TEXT NOT NULL CHECK (kind IN ('file', 'url')),
    -- File name of an upload, or the start URL of a crawl.
    name         TEXT NOT NULL,
    url          TEXT,
    -- pdf, docx, markdown or text (uploads); NULL for crawls.
    format       TEXT,
    -- Crawl options as JSON (url documents).
    crawl_config TEXT,
    status       TEXT NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'processing', 'indexed', 'failed')),
    error        TEXT,
    pages        INTEGER,
    chunks       INTEGER NOT NULL DEFAULT 0,
    bytes        INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    indexed_at   INTEGER
);
CREATE INDEX documents_agent ON documents (agent_id, created_at);

-- The pages of a crawled document (one row per canonical URL) with a hash of their text,
-- so that a refresh can skip unchanged pages.
CREATE TABLE document_pages (
    document_id  TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    url          TEXT NOT NULL,
    title        TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    fetched_at   INTEGER NOT NULL,
    PRIMARY KEY (document_id, url)
);

CREATE TABLE chunks (
    id           INTEGER PRIMARY KEY,
    document_id  TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    agent_id     TEXT NOT NULL,
    -- The page a crawled chunk came from (NULL for uploads).
    page_url     TEXT,
    title        TEXT NOT NULL,
    -- Enclosing headings joined with ' > '.
    heading_path TEXT NOT NULL DEFAULT '',
    -- Order of the chunk in its document (or page); 1-based PDF page number when known.
    position     INTEGER NOT NULL,
    page         INTEGER,
    tokens       INTEGER NOT NULL,
    text         TEXT NOT NULL,
    -- Little-endian f32 vector when EMBEDDING_MODEL is configured.
    embedding    BLOB
);
CREATE INDEX chunks_document ON chunks (document_id, page_url);
CREATE INDEX chunks_agent ON chunks (agent_id);

-- BM25 index (FTS5, external content). `agent` holds the agent id without its dashes (one
-- token), so that a query is scoped to one agent through the index itself; its BM25
-- weight is 0.
CREATE VIRTUAL TABLE chunks_fts USING fts5 (
    agent, title, heading, text,
    content = 'chunks', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, agent, title, heading, text)
    VALUES (new.id, replace(new.agent_id, '-', ''), new.title, new.heading_path, new.text);
END;
CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, agent, title, heading, text)
    VALUES ('delete', old.id, replace(old.agent_id, '-', ''), old.title, old.heading_path, old.text);
END;

CREATE TABLE jobs (
    id             TEXT PRIMARY KEY,
    -- 'ingest' (index an upload) or 'crawl' (crawl a site); refreshes reuse them.
    kind           TEXT NOT NULL CHECK (kind IN ('ingest', 'crawl')),
    document_id    TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    user_id        TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    status         TEXT NOT NULL DEFAULT 'queued'
                   CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
    progress_done  INTEGER NOT NULL DEFAULT 0,
    progress_total INTEGER NOT NULL DEFAULT 0,
    error          TEXT,
    attempts       INTEGER NOT NULL DEFAULT 0,
    -- A running job whose lease has passed belongs to a worker that died; it is retried.
    lease_until    INTEGER,
    created_at     INTEGER NOT NULL,
    started_at     INTEGER,
    finished_at    INTEGER
);
CREATE INDEX jobs_pending ON jobs (status, created_at);
CREATE INDEX jobs_document ON jobs (document_id);
