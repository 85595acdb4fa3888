//! [`crate::store::WebhookStore`] on SQLite: the one statement that differs.

/// SQLite reads the JSON array of `events` with `json_each`.
const SUBSCRIBED_WEBHOOKS: &str = "SELECT id FROM webhooks WHERE user_id = $1 AND active \
     AND EXISTS (SELECT 1 FROM json_each(webhooks.events) WHERE value = $2)";

crate::store::webhooks::webhook_store!(SqliteStore, sqlx::Sqlite, writer, pool);
