-- Appending a message is one INSERT: these triggers keep the thread's count and activity
-- time and the owner's daily usage inside the same statement (so inside its implicit
-- transaction), instead of three statements in an explicit transaction, each a round trip
-- to the database connection.

-- Every message bumps its thread's count and activity time.
CREATE TRIGGER messages_count_in_thread AFTER INSERT ON messages
BEGIN
    UPDATE threads
    SET message_count = message_count + 1,
        updated_at = MAX(updated_at, NEW.created_at)
    WHERE id = NEW.thread_id;
END;

-- An assistant message (one per chat request) counts into its owner's day (UTC) of
-- usage_daily, which outlives the thread.
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
