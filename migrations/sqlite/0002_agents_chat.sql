-- Agents, conversation threads and their messages. Times are Unix epoch milliseconds.

CREATE TABLE agents (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    system_prompt TEXT NOT NULL DEFAULT '',
    -- Empty: the server's default model at chat time.
    model         TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL DEFAULT 'active',
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX agents_user ON agents (user_id, created_at);

CREATE TABLE threads (
    id            TEXT PRIMARY KEY,
    agent_id      TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    user_id       TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    title         TEXT NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX threads_agent ON threads (agent_id, updated_at);

CREATE TABLE messages (
    id                TEXT PRIMARY KEY,
    thread_id         TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    role              TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content           TEXT NOT NULL,
    model             TEXT,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    -- JSON array of sources, as the chat reply gives them.
    sources           TEXT,
    latency_ms        INTEGER,
    -- complete, failed (provider error) or cancelled (client went away).
    status            TEXT NOT NULL DEFAULT 'complete' CHECK (status IN ('complete', 'failed', 'cancelled')),
    error             TEXT,
    created_at        INTEGER NOT NULL
);
CREATE INDEX messages_thread ON messages (thread_id, created_at, id);
