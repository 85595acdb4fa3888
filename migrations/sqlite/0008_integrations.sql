-- Integrations with third-party providers. Credentials are sealed (AES-256-GCM, bound to
-- the owner and the integration) before they reach the database; `credential_hints` holds
-- their masked hints. Times are Unix epoch milliseconds (UTC).
CREATE TABLE integrations (
    id                 TEXT PRIMARY KEY,
    user_id            TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    provider_code      TEXT NOT NULL,
    name               TEXT NOT NULL,
    -- Unlinked when the agent is deleted.
    agent_id           TEXT REFERENCES agents (id) ON DELETE SET NULL,
    config             TEXT NOT NULL,
    credentials_sealed BLOB NOT NULL,
    -- Which ENCRYPTION_KEY sealed the credentials (first 8 bytes of its SHA-256, hex).
    key_id             TEXT NOT NULL,
    credential_hints   TEXT NOT NULL,
    status             TEXT NOT NULL DEFAULT 'active',
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
);
CREATE INDEX integrations_user ON integrations (user_id, created_at);
