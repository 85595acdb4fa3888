//! [`crate::store::WebhookStore`] on SQLite: the shared statements and the two that differ.

/// SQLite reads the JSON array of `events` with `json_each`.
const SUBSCRIBED_WEBHOOKS: &str = "SELECT id FROM webhooks WHERE user_id = $1 AND active \
     AND EXISTS (SELECT 1 FROM json_each(webhooks.events) WHERE value = $2)";

/// Due pending deliveries in due order, then claims whose worker stopped renewing, of
/// active webhooks; the one writer runs one claim at a time.
const CLAIM_DUE_DELIVERIES: &str =
    "UPDATE webhook_deliveries SET status = $1, lease_until = $2, attempts = attempts + 1 \
     WHERE id IN ( \
       SELECT d.id FROM webhook_deliveries d \
       WHERE ((d.status = $3 AND d.next_attempt_at <= $4) \
              OR (d.status = $1 AND d.lease_until < $4)) \
         AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.active) \
       ORDER BY d.next_attempt_at LIMIT $5)";

crate::store::webhooks::webhook_store!(SqliteStore, sqlx::Sqlite, writer, pool);
