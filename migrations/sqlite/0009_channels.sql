-- Live channels of integrations (Telegram, Slack, the website widget).
-- `public_id`: the id a website widget is embedded with (`pub_...`), public by design.
-- `status_detail`: why a channel is not working (e.g. Telegram refused the webhook).
-- `inbound_secret_hash`: SHA-256 of the secret an inbound request must carry (Telegram's
-- `X-Telegram-Bot-Api-Secret-Token`); the secret itself is only ever sent to the provider.
ALTER TABLE integrations ADD COLUMN public_id TEXT;
ALTER TABLE integrations ADD COLUMN status_detail TEXT;
ALTER TABLE integrations ADD COLUMN inbound_secret_hash BLOB;
CREATE UNIQUE INDEX integrations_public_id ON integrations (public_id) WHERE public_id IS NOT NULL;

-- One conversation per external chat: a Telegram chat, a Slack thread, a widget visitor.
CREATE TABLE channel_threads (
    integration_id   TEXT NOT NULL REFERENCES integrations (id) ON DELETE CASCADE,
    conversation_key TEXT NOT NULL,
    thread_id        TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    created_at       INTEGER NOT NULL,
    PRIMARY KEY (integration_id, conversation_key)
);

-- Inbound events already taken (Telegram `update_id`, Slack `event_id`): providers retry,
-- and a retried event must not be answered twice. Rows older than a day are pruned.
CREATE TABLE channel_events (
    integration_id TEXT NOT NULL REFERENCES integrations (id) ON DELETE CASCADE,
    event_id       TEXT NOT NULL,
    received_at    INTEGER NOT NULL,
    PRIMARY KEY (integration_id, event_id)
);
CREATE INDEX channel_events_received ON channel_events (received_at);
