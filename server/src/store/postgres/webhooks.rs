//! [`crate::store::WebhookStore`] on PostgreSQL (`migrations/postgres/0001_baseline.sql`:
//! `webhooks`, `webhook_deliveries`, `webhook_attempts`). `webhooks.events` is TEXT holding
//! a JSON array of event names, as on SQLite; queries read it with the `jsonb` operators
//! (`events::jsonb ? $n`: <https://www.postgresql.org/docs/current/functions-json.html>).
//!
//! Rules kept here, under READ COMMITTED:
//! - the plan's webhook limit: `create_webhook` locks the owner's `users` row
//!   ([`super::lock_account`]) in the transaction before its conditional insert;
//! - one claimer per delivery, at most `limit` per claim: `claim_deliveries` picks the due rows in
//!   a materialised CTE with `FOR UPDATE SKIP LOCKED` (a claimer skips the rows another is taking
//!   instead of waiting and then taking them again; the CTE runs once, so the limit holds) and
//!   repeats the due predicate in the `UPDATE`'s `WHERE` (a row whose claim committed after this
//!   statement's snapshot is re-checked on its new version and left out);
//! - only the claim that holds a delivery ends it: `record_attempt` moves the delivery on only
//!   `WHERE status = 'sending' AND attempts = $claimed`, so a worker whose lease ran out, and whose
//!   delivery another worker claimed again, does not overwrite the other's result (nor a redelivery
//!   requested meanwhile).

/// PostgreSQL reads the JSON array of `events` with the `jsonb` `?` operator.
const SUBSCRIBED_WEBHOOKS: &str =
    "SELECT id FROM webhooks WHERE user_id = $1 AND active AND events::jsonb ? $2";

/// Due pending deliveries in due order (index `webhook_deliveries_due`), then claims whose
/// worker stopped renewing; only of active webhooks. Claimers run side by side: the
/// subquery locks the rows it picks and skips those another claimer holds; the outer
/// `WHERE` repeats the due predicate, which is checked again on the latest version of each
/// row. The subquery is a materialised CTE, run once: as an `IN (…)` subquery the planner
/// may run it again for each row of the `UPDATE`, and a second run skips the rows this
/// statement has just updated and picks more, beyond the limit.
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
