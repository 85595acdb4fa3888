-- A reply still generating when its instance's shutdown grace period ended is stored as
-- `interrupted`, with the text generated so far (docs/api.md § Drains): `messages.status`
-- takes the new value.
--
-- SQLite cannot change a CHECK constraint: the table is rebuilt as
-- https://sqlite.org/lang_altertable.html#otheralter says, keeping each row's rowid (the
-- key of its words in `messages_fts`). The migrations run with foreign keys off
-- (`SqliteStore::migrate`), so dropping the old table does not cascade to the feedback that
-- references it. Its triggers go with it and are made again after, as they were.

CREATE TABLE messages_new (
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
    -- complete, failed (provider error), cancelled (client went away or cancel) or
    -- interrupted (the instance shut down while it was generated).
    status            TEXT NOT NULL DEFAULT 'complete'
                      CHECK (status IN ('complete', 'failed', 'cancelled', 'interrupted')),
    error             TEXT,
    created_at        INTEGER NOT NULL,
    tool_calls        TEXT,
    api_key_id        TEXT
);
INSERT INTO messages_new (rowid, id, thread_id, role, content, model, prompt_tokens,
    completion_tokens, sources, latency_ms, status, error, created_at, tool_calls, api_key_id)
SELECT rowid, id, thread_id, role, content, model, prompt_tokens, completion_tokens, sources,
    latency_ms, status, error, created_at, tool_calls, api_key_id
FROM messages;
DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;
CREATE INDEX messages_thread ON messages (thread_id, created_at, id);

-- As in 0012_without_rowid.sql.
CREATE TRIGGER messages_count_in_thread AFTER INSERT ON messages
BEGIN
    UPDATE threads
    SET message_count = message_count + 1,
        updated_at = MAX(updated_at, NEW.created_at)
    WHERE id = NEW.thread_id;
END;

CREATE TRIGGER messages_count_in_usage AFTER INSERT ON messages
WHEN NEW.role = 'assistant'
BEGIN
    INSERT INTO usage_daily (user_id, day, chats, prompt_tokens, completion_tokens)
    SELECT user_id, strftime('%Y-%m-%d', NEW.created_at / 1000, 'unixepoch'), 1,
           COALESCE(NEW.prompt_tokens, 0), COALESCE(NEW.completion_tokens, 0)
    FROM threads WHERE id = NEW.thread_id
    ON CONFLICT (user_id, day) DO UPDATE SET
        chats = chats + 1,
        prompt_tokens = prompt_tokens + excluded.prompt_tokens,
        completion_tokens = completion_tokens + excluded.completion_tokens;
END;

-- As in 0016_inbox.sql.
CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages
BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (NEW.rowid, NEW.content);
END;
CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages
BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', OLD.rowid, OLD.content);
END;

-- As in 0017_quotas.sql.
CREATE TRIGGER messages_count_in_key_usage AFTER INSERT ON messages
WHEN NEW.api_key_id IS NOT NULL AND NEW.role = 'assistant'
BEGIN
    INSERT INTO api_key_usage (key_id, month, prompt_tokens, completion_tokens)
    SELECT NEW.api_key_id, strftime('%Y-%m', NEW.created_at / 1000, 'unixepoch'),
           COALESCE(NEW.prompt_tokens, 0), COALESCE(NEW.completion_tokens, 0)
    WHERE EXISTS (SELECT 1 FROM api_keys WHERE id = NEW.api_key_id)
    ON CONFLICT (key_id, month) DO UPDATE SET
        prompt_tokens = prompt_tokens + excluded.prompt_tokens,
        completion_tokens = completion_tokens + excluded.completion_tokens;
END;
