-- Cost control (docs/api.md § Token quotas): API keys bound to agents and given a monthly
-- budget, each reply's key, the keys' monthly use, and the usage alerts already sent
-- (sqlite 0017).

ALTER TABLE api_keys ADD COLUMN agent_ids TEXT;
ALTER TABLE api_keys ADD COLUMN monthly_token_budget BIGINT;

ALTER TABLE messages ADD COLUMN api_key_id TEXT;

CREATE TABLE api_key_usage (
    key_id            TEXT NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    month             TEXT NOT NULL,
    prompt_tokens     BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (key_id, month)
);

-- As 0001's, and an assistant message sent with an API key counts in the key's month too.
CREATE OR REPLACE FUNCTION messages_count() RETURNS trigger LANGUAGE plpgsql AS $$
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
        IF NEW.api_key_id IS NOT NULL THEN
            INSERT INTO api_key_usage AS k (key_id, month, prompt_tokens, completion_tokens)
            SELECT NEW.api_key_id,
                   to_char(to_timestamp(NEW.created_at / 1000) AT TIME ZONE 'UTC', 'YYYY-MM'),
                   COALESCE(NEW.prompt_tokens, 0), COALESCE(NEW.completion_tokens, 0)
            WHERE EXISTS (SELECT 1 FROM api_keys WHERE id = NEW.api_key_id)
            ON CONFLICT (key_id, month) DO UPDATE SET
                prompt_tokens = k.prompt_tokens + excluded.prompt_tokens,
                completion_tokens = k.completion_tokens + excluded.completion_tokens;
        END IF;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TABLE usage_alerts (
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    subject    TEXT NOT NULL,
    month      TEXT NOT NULL,
    threshold  BIGINT NOT NULL CHECK (threshold IN (80, 100)),
    created_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, subject, month, threshold)
);
