-- Webhooks: subscriptions, the durable delivery queue, and every delivery attempt.
-- Times are Unix epoch milliseconds.

CREATE TABLE webhooks (
    id              TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    url             TEXT NOT NULL,
    -- JSON array of event types.
    events          TEXT NOT NULL,
    description     TEXT NOT NULL DEFAULT '',
    -- 12-byte nonce followed by the AES-256-GCM ciphertext of the signing key; the
    -- associated data is "{user_id}:{id}", so a sealed secret cannot be moved to another row.
    secret_sealed   BLOB NOT NULL,
    active          INTEGER NOT NULL DEFAULT 1,
    disabled_reason TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE INDEX webhooks_user ON webhooks (user_id, created_at);

-- One event for one webhook. The id is also the Standard Webhooks message id.
CREATE TABLE webhook_deliveries (
    id              TEXT PRIMARY KEY,
    webhook_id      TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    user_id         TEXT NOT NULL,
    event           TEXT NOT NULL,
    payload         TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'sending', 'succeeded', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    response_status INTEGER,
    last_error      TEXT,
    created_at      INTEGER NOT NULL,
    -- When a pending delivery is due; NULL once it has ended.
    next_attempt_at INTEGER,
    -- Start of the retry window (the event, or the last redelivery request).
    retry_from      INTEGER NOT NULL,
    -- While sending: the worker's claim ends here; a crashed worker's claim runs out.
    lease_until     INTEGER
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, created_at);

CREATE TABLE webhook_attempts (
    delivery_id     TEXT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt         INTEGER NOT NULL,
    started_at      INTEGER NOT NULL,
    duration_ms     INTEGER NOT NULL,
    response_status INTEGER,
    error           TEXT,
    PRIMARY KEY (delivery_id, attempt)
);
