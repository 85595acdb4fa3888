-- Cost control (docs/api.md § Token quotas): API keys bound to agents and given a monthly
-- budget, each reply's key, the keys' monthly use, and the usage alerts already sent.

-- Space-separated agent ids the key works for; NULL: every agent of its owner.
ALTER TABLE api_keys ADD COLUMN agent_ids TEXT;
-- Tokens (prompt + completion) the key may use per calendar month (UTC); NULL: no budget.
ALTER TABLE api_keys ADD COLUMN monthly_token_budget INTEGER;

-- The API key a message was sent with (no foreign key: keys are revoked, never deleted but
-- with their owner, whose messages go then too).
ALTER TABLE messages ADD COLUMN api_key_id TEXT;

-- Each key's tokens per month (YYYY-MM, UTC), counted as `usage_daily` counts the account's.
CREATE TABLE api_key_usage (
    key_id            TEXT NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    month             TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (key_id, month)
) WITHOUT ROWID;

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

-- The alerts sent: one per account, quota (`plan`, or an API key's id), month and
-- threshold. Whichever instance inserts the row sends the alert, so it goes once.
CREATE TABLE usage_alerts (
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    subject    TEXT NOT NULL,
    month      TEXT NOT NULL,
    threshold  INTEGER NOT NULL CHECK (threshold IN (80, 100)),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, subject, month, threshold)
);
