-- Agent tools (docs/api.md § Tools) and the tool calls a reply made (sqlite 0013).

CREATE TABLE agent_tools (
    id                TEXT PRIMARY KEY,
    agent_id          TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    user_id           TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    type              TEXT NOT NULL,
    name              TEXT NOT NULL,
    description       TEXT NOT NULL DEFAULT '',
    enabled           BOOLEAN NOT NULL DEFAULT TRUE,
    requires_approval BOOLEAN NOT NULL DEFAULT FALSE,
    config            TEXT NOT NULL DEFAULT '{}',
    secrets_sealed    BYTEA,
    key_id            TEXT,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    UNIQUE (agent_id, name)
);

ALTER TABLE messages ADD COLUMN tool_calls TEXT;

CREATE TABLE tool_approvals (
    thread_id    TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    tool_call_id TEXT NOT NULL,
    message_id   TEXT NOT NULL,
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    agent_id     TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    arguments    TEXT NOT NULL,
    status       TEXT NOT NULL DEFAULT 'pending',
    result       TEXT,
    continued    BOOLEAN NOT NULL DEFAULT FALSE,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    decided_at   BIGINT,
    PRIMARY KEY (thread_id, tool_call_id)
);
CREATE INDEX tool_approvals_message ON tool_approvals (message_id);
