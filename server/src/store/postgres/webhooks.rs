//! [`crate::store::WebhookStore`] on PostgreSQL: the one statement that differs.

/// PostgreSQL reads the JSON array of `events` with the `jsonb` `?` operator.
const SUBSCRIBED_WEBHOOKS: &str =
    "SELECT id FROM webhooks WHERE user_id = $1 AND active AND events::jsonb ? $2";

crate::store::webhooks::webhook_store!(PgStore, sqlx::Postgres, pool, pool);
