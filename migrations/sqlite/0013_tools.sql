-- Agent tools (docs/api.md § Tools) and the tool calls a reply made.

CREATE TABLE agent_tools (
    id                TEXT PRIMARY KEY,
    agent_id          TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    user_id           TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- knowledge_search, web_fetch, http or mcp.
    type              TEXT NOT NULL,
    name              TEXT NOT NULL,
    description       TEXT NOT NULL DEFAULT '',
    enabled           INTEGER NOT NULL DEFAULT 1,
    requires_approval INTEGER NOT NULL DEFAULT 0,
    -- The config object as JSON, without its secrets.
    config            TEXT NOT NULL DEFAULT '{}',
    -- The secret headers of an HTTP action as a JSON object, sealed with the owner and tool
    -- ids as associated data (like integration credentials); NULL when there are none.
    secrets_sealed    BLOB,
    key_id            TEXT,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    UNIQUE (agent_id, name)
);

-- JSON array of the tool calls of an assistant message (`toolCalls`); NULL when none.
ALTER TABLE messages ADD COLUMN tool_calls TEXT;

-- Tool calls that wait for a person's approval (docs/api.md § Approvals): the reply that
-- stopped for them is `message_id`; `result` is the decided call's outcome as JSON (the
-- `toolCalls` entry), set once it has run or was denied; `continued` marks the group whose
-- turn went on.
CREATE TABLE tool_approvals (
    thread_id    TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    tool_call_id TEXT NOT NULL,
    message_id   TEXT NOT NULL,
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    agent_id     TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    arguments    TEXT NOT NULL,
    -- pending, approved or denied
    status       TEXT NOT NULL DEFAULT 'pending',
    result       TEXT,
    continued    INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    decided_at   INTEGER,
    PRIMARY KEY (thread_id, tool_call_id)
);
CREATE INDEX tool_approvals_message ON tool_approvals (message_id);
