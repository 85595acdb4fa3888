//! [`crate::store::WebhookStore`] on PostgreSQL. `webhooks.events` is TEXT holding a JSON
//! array, read with `jsonb` operators; the limit is kept by [`super::lock_account`];
//! claims and attempts follow docs/architecture.md § Store.

/// PostgreSQL reads the JSON array of `events` with the `jsonb` `?` operator.
const SUBSCRIBED_WEBHOOKS: &str =
    "SELECT id FROM webhooks WHERE user_id = $1 AND active AND events::jsonb ? $2";

/// Due pending deliveries in due order, then claims whose worker stopped renewing, of
/// active webhooks. Rows are picked `FOR UPDATE SKIP LOCKED` in a materialised CTE, run
/// once (an `IN (…)` subquery may be re-run per row and pick beyond the limit), and the
/// outer `WHERE` re-checks the due predicate on each row's latest version.
const CLAIM_DUE_DELIVERIES: &str = "WITH due AS MATERIALIZED ( \
       SELECT d.id FROM webhook_deliveries d \
       WHERE ((d.status = $3 AND d.next_attempt_at <= $4) \
              OR (d.status = $1 AND d.lease_until < $4)) \
         AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.active) \
       ORDER BY d.next_attempt_at, d.id LIMIT $5 \
       FOR UPDATE OF d SKIP LOCKED) \
     UPDATE webhook_deliveries SET status = $1, lease_until = $2, attempts = attempts + 1 \
     WHERE id IN (SELECT id FROM due) \
       AND ((status = $3 AND next_attempt_at <= $4) OR (status = $1 AND lease_until < $4))";

crate::store::webhooks::webhook_store!(PgStore, sqlx::Postgres, pool, pool);
