-- Per-account usage by UTC day: chat replies and their tokens. Kept apart from messages so
-- that deleting a thread or an agent does not erase what was used.
CREATE TABLE usage_daily (
    user_id           TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- YYYY-MM-DD (UTC).
    day               TEXT NOT NULL,
    chats             INTEGER NOT NULL DEFAULT 0,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, day)
);

-- What the messages kept so far say.
INSERT INTO usage_daily (user_id, day, chats, prompt_tokens, completion_tokens)
SELECT t.user_id,
       strftime('%Y-%m-%d', m.created_at / 1000, 'unixepoch'),
       COUNT(*),
       COALESCE(SUM(m.prompt_tokens), 0),
       COALESCE(SUM(m.completion_tokens), 0)
FROM messages m
JOIN threads t ON t.id = m.thread_id
WHERE m.role = 'assistant'
GROUP BY t.user_id, strftime('%Y-%m-%d', m.created_at / 1000, 'unixepoch');
