-- Accounts, email tokens, sessions and API keys. Times are Unix epoch milliseconds (UTC).

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
    email_verified_at INTEGER,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);

-- Single-use links sent by email; only the SHA-256 of the token is kept.
CREATE TABLE email_tokens (
    token_hash TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    purpose    TEXT NOT NULL CHECK (purpose IN ('verify_email', 'reset_password')),
    expires_at INTEGER NOT NULL,
    used_at    INTEGER,
    created_at INTEGER NOT NULL
);
CREATE INDEX email_tokens_user ON email_tokens (user_id, purpose);

CREATE TABLE sessions (
    id             TEXT PRIMARY KEY,
    user_id        TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- The jti of the one refresh token that may still be used; older ones are replays.
    refresh_jti    TEXT NOT NULL,
    user_agent     TEXT,
    ip             TEXT,
    created_at     INTEGER NOT NULL,
    last_seen_at   INTEGER NOT NULL,
    revoked_at     INTEGER,
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
    expires_at   INTEGER,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);
CREATE INDEX api_keys_user ON api_keys (user_id, created_at);
