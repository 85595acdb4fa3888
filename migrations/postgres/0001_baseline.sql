-- The whole schema of the PostgreSQL backend, equal to what migrations/sqlite/0001..0011
-- leave in a SQLite database, in PostgreSQL's terms:
-- - times are Unix epoch milliseconds (UTC) in BIGINT columns, as on SQLite;
-- - integers are BIGINT (the row mappers read i64), flags BOOLEAN, bytes BYTEA;
-- - the counters SQLite keeps with row triggers are kept by plpgsql triggers, and the chunk
--   and embedding generations by statement triggers (one bump per statement, not per row);
-- - chunk ids come from the sequence `chunk_ids` instead of SQLite's `chunk_id_seq` table;
-- - uploads are stored in `document_uploads`, so that every instance reads them.
-- Every later change comes as a pair: the same-numbered file in migrations/sqlite/ and
-- here (server/tests/store.rs compares the two schemas).

-- Accounts, email tokens, sessions and API keys (sqlite 0001).

CREATE TABLE users (
    id                TEXT PRIMARY KEY,
    email             TEXT NOT NULL UNIQUE,
    name              TEXT NOT NULL,
    -- NULL for accounts that only sign in through a third-party provider.
    password_hash     TEXT,
    company           TEXT,
    country           TEXT,
    phone             TEXT,
    plan              TEXT NOT NULL DEFAULT 'free'
                      CHECK (plan IN ('free', 'starter', 'business', 'pro')),
    email_verified_at BIGINT,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL
);

-- Single-use links sent by email; only the SHA-256 of the token is kept.
CREATE TABLE email_tokens (
    token_hash TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    purpose    TEXT NOT NULL CHECK (purpose IN ('verify_email', 'reset_password')),
    expires_at BIGINT NOT NULL,
    used_at    BIGINT,
    created_at BIGINT NOT NULL
);
CREATE INDEX email_tokens_user ON email_tokens (user_id, purpose);

CREATE TABLE sessions (
    id             TEXT PRIMARY KEY,
    user_id        TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- The jti of the one refresh token that may still be used; older ones are replays.
    refresh_jti    TEXT NOT NULL,
    user_agent     TEXT,
    ip             TEXT,
    created_at     BIGINT NOT NULL,
    last_seen_at   BIGINT NOT NULL,
    revoked_at     BIGINT,
    revoked_reason TEXT
);
CREATE INDEX sessions_user ON sessions (user_id, revoked_at, created_at);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    -- Hex SHA-256 of the whole key; the key itself is never stored.
    key_hash     TEXT NOT NULL UNIQUE,
    -- Space-separated scope names.
    scopes       TEXT NOT NULL,
    expires_at   BIGINT,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT
);
CREATE INDEX api_keys_user ON api_keys (user_id, created_at);

-- Agents, conversation threads and their messages (sqlite 0002).

CREATE TABLE agents (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    system_prompt TEXT NOT NULL DEFAULT '',
    -- Empty: the server's default model at chat time.
    model         TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL DEFAULT 'active',
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
CREATE INDEX agents_user ON agents (user_id, created_at);

CREATE TABLE threads (
    id            TEXT PRIMARY KEY,
    agent_id      TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    user_id       TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    title         TEXT NOT NULL,
    message_count BIGINT NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
CREATE INDEX threads_agent ON threads (agent_id, updated_at);

CREATE TABLE messages (
    id                TEXT PRIMARY KEY,
    thread_id         TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    role              TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content           TEXT NOT NULL,
    model             TEXT,
    prompt_tokens     BIGINT,
    completion_tokens BIGINT,
    -- JSON array of sources, as the chat reply gives them.
    sources           TEXT,
    latency_ms        BIGINT,
    -- complete, failed (provider error) or cancelled (client went away).
    status            TEXT NOT NULL DEFAULT 'complete' CHECK (status IN ('complete', 'failed', 'cancelled')),
    error             TEXT,
    created_at        BIGINT NOT NULL
);
CREATE INDEX messages_thread ON messages (thread_id, created_at, id);

-- Knowledge base: documents, pages, chunks and durable jobs (sqlite 0003).

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
    pages        BIGINT,
    chunks       BIGINT NOT NULL DEFAULT 0,
    bytes        BIGINT NOT NULL DEFAULT 0,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    indexed_at   BIGINT
);
CREATE INDEX documents_agent ON documents (agent_id, created_at);

-- The bytes of an uploaded file until its ingestion job has run, kept in the database so
-- that the worker of any instance can read them (SQLite keeps them in DATA_DIR/uploads).
CREATE TABLE document_uploads (
    document_id TEXT PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
    bytes       BYTEA NOT NULL
);

-- The pages of a crawled document (one row per canonical URL) with a hash of their text,
-- so that a refresh can skip unchanged pages.
CREATE TABLE document_pages (
    document_id  TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    url          TEXT NOT NULL,
    title        TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    fetched_at   BIGINT NOT NULL,
    PRIMARY KEY (document_id, url)
);

-- Chunk ids only grow (never reused after a delete), so an index that has seen every id
-- up to some value knows that the chunks added since are exactly those above it. A chunk
-- writer takes its agent's `chunk_generations` row lock before it draws ids, so an agent's
-- ids also become visible in increasing order (server/src/store/postgres/documents.rs).
CREATE SEQUENCE chunk_ids AS BIGINT;

CREATE TABLE chunks (
    id           BIGINT PRIMARY KEY DEFAULT nextval('chunk_ids'),
    document_id  TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    agent_id     TEXT NOT NULL,
    -- The page a crawled chunk came from (NULL for uploads).
    page_url     TEXT,
    title        TEXT NOT NULL,
    -- Enclosing headings joined with ' > '.
    heading_path TEXT NOT NULL DEFAULT '',
    -- Order of the chunk in its document (or page); 1-based PDF page number when known.
    position     BIGINT NOT NULL,
    page         BIGINT,
    tokens       BIGINT NOT NULL,
    text         TEXT NOT NULL,
    -- Unused (as on SQLite since 0004): vectors live in chunk_embeddings.
    embedding    BYTEA
);
ALTER SEQUENCE chunk_ids OWNED BY chunks.id;
CREATE INDEX chunks_document ON chunks (document_id, page_url);
CREATE INDEX chunks_agent ON chunks (agent_id, id);

CREATE TABLE jobs (
    id             TEXT PRIMARY KEY,
    -- 'ingest' (index an upload) or 'crawl' (crawl a site); refreshes reuse them.
    kind           TEXT NOT NULL CHECK (kind IN ('ingest', 'crawl')),
    document_id    TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    user_id        TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    status         TEXT NOT NULL DEFAULT 'queued'
                   CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
    progress_done  BIGINT NOT NULL DEFAULT 0,
    progress_total BIGINT NOT NULL DEFAULT 0,
    error          TEXT,
    attempts       BIGINT NOT NULL DEFAULT 0,
    -- A running job whose lease has passed belongs to a worker that died; it is retried.
    lease_until    BIGINT,
    created_at     BIGINT NOT NULL,
    started_at     BIGINT,
    finished_at    BIGINT
);
CREATE INDEX jobs_pending ON jobs (status, created_at);
CREATE INDEX jobs_document ON jobs (document_id);
-- A document has at most one queued or running job, whichever instance enqueues it.
CREATE UNIQUE INDEX jobs_one_open_per_document ON jobs (document_id)
    WHERE status IN ('queued', 'running');

-- Chunk embeddings (sqlite 0004).

CREATE TABLE chunk_embeddings (
    chunk_id   BIGINT PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
    -- The chunk's agent (copied from `chunks`), so an agent's vectors are read by index.
    agent_id   TEXT NOT NULL,
    -- The EMBEDDING_MODEL that produced the vector; another model's vectors are ignored
    -- and replaced.
    model      TEXT NOT NULL,
    -- Number of components; 0 marks a chunk the endpoint refused to embed.
    dimensions BIGINT NOT NULL CHECK (dimensions >= 0),
    -- `dimensions` little-endian IEEE 754 f32 values.
    vector     BYTEA NOT NULL CHECK (length(vector) = 4 * dimensions)
);
CREATE INDEX chunk_embeddings_agent ON chunk_embeddings (agent_id, model);

-- A counter per agent that every change to its vectors bumps.
CREATE TABLE embedding_generations (
    agent_id   TEXT PRIMARY KEY,
    generation BIGINT NOT NULL
);

-- Third-party sign-in (sqlite 0005).

CREATE TABLE user_identities (
    provider   TEXT NOT NULL CHECK (provider IN ('github', 'google', 'microsoft')),
    -- GitHub's numeric user id, or the OpenID Connect `sub` claim.
    subject    TEXT NOT NULL,
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    email      TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (provider, subject),
    UNIQUE (user_id, provider)
);

-- Authorization requests in progress, by the SHA-256 of their `state`; single use, 10 minutes.
CREATE TABLE oauth_flows (
    state_hash      TEXT PRIMARY KEY,
    provider        TEXT NOT NULL,
    -- SHA-256 of the browser-binding cookie set when the flow started.
    browser_hash    TEXT NOT NULL,
    pkce_verifier   TEXT NOT NULL,
    nonce           TEXT,
    link_user_id    TEXT REFERENCES users (id) ON DELETE CASCADE,
    client_redirect TEXT,
    expires_at      BIGINT NOT NULL,
    created_at      BIGINT NOT NULL
);
CREATE INDEX oauth_flows_expiry ON oauth_flows (expires_at);

-- One-time codes that native clients exchange for a token pair; only the SHA-256 is kept.
CREATE TABLE oauth_exchange_codes (
    code_hash  TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX oauth_exchange_codes_expiry ON oauth_exchange_codes (expires_at);

-- Per-account usage by UTC day (sqlite 0006).
CREATE TABLE usage_daily (
    user_id           TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- YYYY-MM-DD (UTC).
    day               TEXT NOT NULL,
    chats             BIGINT NOT NULL DEFAULT 0,
    prompt_tokens     BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, day)
);

-- Webhooks (sqlite 0007).

CREATE TABLE webhooks (
    id              TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    url             TEXT NOT NULL,
    -- JSON array of event types.
    events          TEXT NOT NULL,
    description     TEXT NOT NULL DEFAULT '',
    -- 12-byte nonce followed by the AES-256-GCM ciphertext of the signing key; the
    -- associated data is "{user_id}:{id}".
    secret_sealed   BYTEA NOT NULL,
    active          BOOLEAN NOT NULL DEFAULT TRUE,
    disabled_reason TEXT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
CREATE INDEX webhooks_user ON webhooks (user_id, created_at);

-- One event for one webhook. The id is also the Standard Webhooks message id.
CREATE TABLE webhook_deliveries (
    id              TEXT PRIMARY KEY,
    webhook_id      TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    user_id         TEXT NOT NULL,
    event           TEXT NOT NULL,
    payload         TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'sending', 'succeeded', 'failed')),
    attempts        BIGINT NOT NULL DEFAULT 0,
    response_status BIGINT,
    last_error      TEXT,
    created_at      BIGINT NOT NULL,
    -- When a pending delivery is due; NULL once it has ended.
    next_attempt_at BIGINT,
    -- Start of the retry window (the event, or the last redelivery request).
    retry_from      BIGINT NOT NULL,
    -- While sending: the worker's claim ends here; a crashed worker's claim runs out.
    lease_until     BIGINT
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, created_at);

CREATE TABLE webhook_attempts (
    delivery_id     TEXT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt         BIGINT NOT NULL,
    started_at      BIGINT NOT NULL,
    duration_ms     BIGINT NOT NULL,
    response_status BIGINT,
    error           TEXT,
    PRIMARY KEY (delivery_id, attempt)
);

-- Integrations (sqlite 0008, 0009).
CREATE TABLE integrations (
    id                  TEXT PRIMARY KEY,
    user_id             TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    provider_code       TEXT NOT NULL,
    name                TEXT NOT NULL,
    -- Unlinked when the agent is deleted.
    agent_id            TEXT REFERENCES agents (id) ON DELETE SET NULL,
    config              TEXT NOT NULL,
    credentials_sealed  BYTEA NOT NULL,
    -- Which ENCRYPTION_KEY sealed the credentials (first 8 bytes of its SHA-256, hex).
    key_id              TEXT NOT NULL,
    credential_hints    TEXT NOT NULL,
    status              TEXT NOT NULL DEFAULT 'active',
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    -- The id a website widget is embedded with (`pub_...`), public by design.
    public_id           TEXT,
    -- Why a channel is not working (e.g. Telegram refused the webhook).
    status_detail       TEXT,
    -- SHA-256 of the secret an inbound request must carry.
    inbound_secret_hash BYTEA
);
CREATE INDEX integrations_user ON integrations (user_id, created_at);
CREATE UNIQUE INDEX integrations_public_id ON integrations (public_id) WHERE public_id IS NOT NULL;

-- One conversation per external chat: a Telegram chat, a Slack thread, a widget visitor.
CREATE TABLE channel_threads (
    integration_id   TEXT NOT NULL REFERENCES integrations (id) ON DELETE CASCADE,
    conversation_key TEXT NOT NULL,
    thread_id        TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    created_at       BIGINT NOT NULL,
    PRIMARY KEY (integration_id, conversation_key)
);

-- Inbound events already taken (Telegram `update_id`, Slack `event_id`).
CREATE TABLE channel_events (
    integration_id TEXT NOT NULL REFERENCES integrations (id) ON DELETE CASCADE,
    event_id       TEXT NOT NULL,
    received_at    BIGINT NOT NULL,
    PRIMARY KEY (integration_id, event_id)
);
CREATE INDEX channel_events_received ON channel_events (received_at);

-- Message counters (sqlite 0010): appending a message keeps its thread's count and
-- activity time and, for an assistant message, the owner's daily usage, in the same
-- statement.
CREATE FUNCTION messages_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE threads
    SET message_count = message_count + 1,
        updated_at = GREATEST(updated_at, NEW.created_at)
    WHERE id = NEW.thread_id;
    IF NEW.role = 'assistant' THEN
        INSERT INTO usage_daily AS u (user_id, day, chats, prompt_tokens, completion_tokens)
        SELECT t.user_id,
               to_char(to_timestamp(NEW.created_at / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD'),
               1, COALESCE(NEW.prompt_tokens, 0), COALESCE(NEW.completion_tokens, 0)
        FROM threads t WHERE t.id = NEW.thread_id
        ON CONFLICT (user_id, day) DO UPDATE SET
            chats = u.chats + 1,
            prompt_tokens = u.prompt_tokens + excluded.prompt_tokens,
            completion_tokens = u.completion_tokens + excluded.completion_tokens;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER messages_count AFTER INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION messages_count();

-- BM25 generations (sqlite 0011): a counter per agent that every statement inserting or
-- deleting its chunks bumps, so an in-memory index can tell cheaply whether it is still
-- current (any instance, any writer).
CREATE TABLE chunk_generations (
    agent_id   TEXT PRIMARY KEY,
    generation BIGINT NOT NULL
);

CREATE FUNCTION chunks_generation_ins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chunk_generations AS g (agent_id, generation)
    SELECT DISTINCT agent_id, 1 FROM new_chunks
    ON CONFLICT (agent_id) DO UPDATE SET generation = g.generation + 1;
    RETURN NULL;
END;
$$;
CREATE TRIGGER chunks_generation_ins AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS new_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION chunks_generation_ins();

-- Only an update on delete: a cascade from a deleted agent must not recreate its counter.
CREATE FUNCTION chunks_generation_del() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE chunk_generations SET generation = generation + 1
    WHERE agent_id IN (SELECT DISTINCT agent_id FROM old_chunks);
    RETURN NULL;
END;
$$;
CREATE TRIGGER chunks_generation_del AFTER DELETE ON chunks
    REFERENCING OLD TABLE AS old_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION chunks_generation_del();

CREATE FUNCTION chunk_embeddings_generation_ins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO embedding_generations AS g (agent_id, generation)
    SELECT DISTINCT agent_id, 1 FROM new_embeddings
    ON CONFLICT (agent_id) DO UPDATE SET generation = g.generation + 1;
    RETURN NULL;
END;
$$;
CREATE TRIGGER chunk_embeddings_generation_ins AFTER INSERT ON chunk_embeddings
    REFERENCING NEW TABLE AS new_embeddings
    FOR EACH STATEMENT EXECUTE FUNCTION chunk_embeddings_generation_ins();

CREATE FUNCTION chunk_embeddings_generation_upd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE embedding_generations SET generation = generation + 1
    WHERE agent_id IN (SELECT DISTINCT agent_id FROM new_embeddings);
    RETURN NULL;
END;
$$;
CREATE TRIGGER chunk_embeddings_generation_upd AFTER UPDATE ON chunk_embeddings
    REFERENCING NEW TABLE AS new_embeddings
    FOR EACH STATEMENT EXECUTE FUNCTION chunk_embeddings_generation_upd();

CREATE FUNCTION chunk_embeddings_generation_del() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE embedding_generations SET generation = generation + 1
    WHERE agent_id IN (SELECT DISTINCT agent_id FROM old_embeddings);
    RETURN NULL;
END;
$$;
CREATE TRIGGER chunk_embeddings_generation_del AFTER DELETE ON chunk_embeddings
    REFERENCING OLD TABLE AS old_embeddings
    FOR EACH STATEMENT EXECUTE FUNCTION chunk_embeddings_generation_del();

-- A deleted agent's counters go with it.
CREATE FUNCTION agents_generations_del() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM chunk_generations WHERE agent_id = OLD.id;
    DELETE FROM embedding_generations WHERE agent_id = OLD.id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER agents_generations_del AFTER DELETE ON agents
    FOR EACH ROW EXECUTE FUNCTION agents_generations_del();
