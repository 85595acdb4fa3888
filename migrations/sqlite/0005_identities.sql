-- Third-party sign-in (Google, GitHub, Microsoft). Times are Unix epoch milliseconds (UTC).

-- A provider identity linked to one account; an account has at most one per provider.
CREATE TABLE user_identities (
    provider   TEXT NOT NULL CHECK (provider IN ('github', 'google', 'microsoft')),
    -- GitHub's numeric user id, or the OpenID Connect `sub` claim.
    subject    TEXT NOT NULL,
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    email      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (provider, subject),
    UNIQUE (user_id, provider)
);

-- Authorization requests in progress, by the SHA-256 of their `state`; single use, 10 minutes.
CREATE TABLE oauth_flows (
    state_hash      TEXT PRIMARY KEY,
    provider        TEXT NOT NULL,
    -- SHA-256 of the browser-binding cookie set when the flow started.
    browser_hash    TEXT NOT NULL,
    pkce_verifier   TEXT NOT NULL,
    nonce           TEXT,
    link_user_id    TEXT REFERENCES users (id) ON DELETE CASCADE,
    client_redirect TEXT,
    expires_at      INTEGER NOT NULL,
    created_at      INTEGER NOT NULL
);
CREATE INDEX oauth_flows_expiry ON oauth_flows (expires_at);

-- One-time codes that native clients exchange for a token pair; only the SHA-256 is kept.
CREATE TABLE oauth_exchange_codes (
    code_hash  TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX oauth_exchange_codes_expiry ON oauth_exchange_codes (expires_at);
