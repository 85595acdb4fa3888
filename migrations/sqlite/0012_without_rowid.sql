-- `threads` and `usage_daily` become WITHOUT ROWID tables (https://sqlite.org/withoutrowid.html):
-- their rows are small and found by their primary key, which is then the table itself
-- instead of a separate index beside a rowid table. A stored chat turn writes one page of
-- each fewer to the write-ahead log (BENCHMARKS.md § Fewer pages and commits per stored turn).
--
-- The tables are rebuilt as https://sqlite.org/lang_altertable.html#otheralter says. The
-- migrations run with foreign keys off (`SqliteStore::migrate`), so dropping the old
-- `threads` does not cascade to the messages and channel links that reference it; the
-- triggers that name the tables are dropped first and made again after.

DROP TRIGGER messages_count_in_thread;
DROP TRIGGER messages_count_in_usage;

CREATE TABLE threads_new (
    id            TEXT PRIMARY KEY,
    agent_id      TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    user_id       TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    title         TEXT NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO threads_new (id, agent_id, user_id, title, message_count, created_at, updated_at)
SELECT id, agent_id, user_id, title, message_count, created_at, updated_at FROM threads;
DROP TABLE threads;
ALTER TABLE threads_new RENAME TO threads;
CREATE INDEX threads_agent ON threads (agent_id, updated_at);

CREATE TABLE usage_daily_new (
    user_id           TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- YYYY-MM-DD (UTC).
    day               TEXT NOT NULL,
    chats             INTEGER NOT NULL DEFAULT 0,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, day)
) WITHOUT ROWID;
INSERT INTO usage_daily_new (user_id, day, chats, prompt_tokens, completion_tokens)
SELECT user_id, day, chats, prompt_tokens, completion_tokens FROM usage_daily;
DROP TABLE usage_daily;
ALTER TABLE usage_daily_new RENAME TO usage_daily;

-- As in 0010_message_triggers.sql.
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
