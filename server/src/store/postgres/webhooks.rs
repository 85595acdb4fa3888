//! [`WebhookStore`] on PostgreSQL (`migrations/postgres/0001_baseline.sql`: `webhooks`,
//! `webhook_deliveries`, `webhook_attempts`). `webhooks.events` is TEXT holding a JSON
//! array of event names, as on SQLite; queries read it with the `jsonb` operators
//! (`events::jsonb ? $n`: <https://www.postgresql.org/docs/current/functions-json.html>).
//!
//! Rules kept here, under READ COMMITTED:
//! - the plan's webhook limit: `create_webhook` locks the owner's `users` row
//!   ([`super::lock_account`]) in the transaction before its conditional insert;
//! - one claimer per delivery, at most `limit` per claim: `claim_deliveries` picks the
//!   due rows in a materialised CTE with `FOR UPDATE SKIP LOCKED` (a claimer skips the
//!   rows another is taking instead of waiting and then taking them again; the CTE runs
//!   once, so the limit holds) and repeats the due predicate in the `UPDATE`'s `WHERE` (a
//!   row whose claim committed after this statement's snapshot is re-checked on its new
//!   version and left out);
//! - only the claim that holds a delivery ends it: `record_attempt` moves the delivery on
//!   only `WHERE status = 'sending' AND attempts = $claimed`, so a worker whose lease ran
//!   out, and whose delivery another worker claimed again, does not overwrite the other's
//!   result (nor a redelivery requested meanwhile).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{
    begin, lock_account,
    rows::{delivery, ms, time, webhook, DELIVERY_COLUMNS, WEBHOOK_COLUMNS},
    PgStore,
};
use crate::ids::{DeliveryId, UserId, WebhookId};
use crate::store::{
    webhooks::{
        AfterAttempt, AttemptRecord, ClaimedDelivery, DeliveryRecord, DeliveryStatus,
        WebhookRecord, WebhookStore,
    },
    StoreError, StoreResult,
};
use crate::webhooks::EventType;

#[async_trait]
impl WebhookStore for PgStore {
    async fn create_webhook(&self, w: &WebhookRecord, limit: u32) -> StoreResult<bool> {
        let events =
            serde_json::to_string(&w.events).map_err(|e| StoreError::Other(anyhow::anyhow!(e)))?;
        // The owner's creations one at a time: each counts what the others wrote.
        let mut tx = begin(&self.pool).await?;
        lock_account(&mut tx, &w.user_id).await?;
        let done = sqlx::query(
            "INSERT INTO webhooks (id, user_id, url, events, description, secret_sealed, active, \
             disabled_reason, created_at, updated_at) \
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 \
             WHERE (SELECT COUNT(*) FROM webhooks WHERE user_id = $11) < $12",
        )
        .bind(&w.id)
        .bind(&w.user_id)
        .bind(&w.url)
        .bind(events)
        .bind(&w.description)
        .bind(&w.secret_sealed)
        .bind(w.active)
        .bind(&w.disabled_reason)
        .bind(ms(w.created_at))
        .bind(ms(w.created_at))
        .bind(&w.user_id)
        .bind(i64::from(limit))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    async fn list_webhooks(&self, user_id: &UserId) -> StoreResult<Vec<WebhookRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE user_id = $1 ORDER BY created_at, id"
        ))
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(webhook).collect()
    }

    async fn webhook(
        &self,
        user_id: &UserId,
        id: &WebhookId,
    ) -> StoreResult<Option<WebhookRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE user_id = $1 AND id = $2"
        ))
        .bind(user_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(webhook).transpose()
    }

    async fn delete_webhook(&self, user_id: &UserId, id: &WebhookId) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM webhooks WHERE user_id = $1 AND id = $2")
            .bind(user_id)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn enqueue_event(
        &self,
        user_id: &UserId,
        event: EventType,
        payload: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<usize> {
        let subscribed: Vec<WebhookId> = sqlx::query_scalar(
            "SELECT id FROM webhooks WHERE user_id = $1 AND active AND events::jsonb ? $2",
        )
        .bind(user_id)
        .bind(event)
        .fetch_all(&self.pool)
        .await?;
        let mut queued = 0;
        for webhook_id in subscribed {
            // Inserted only while the webhook still exists and is active.
            let done = sqlx::query(
                "INSERT INTO webhook_deliveries (id, webhook_id, user_id, event, payload, status, \
                 created_at, next_attempt_at, retry_from) \
                 SELECT $1, id, user_id, $2, $3, $4, $5, $6, $7 FROM webhooks WHERE id = $8 AND active",
            )
            .bind(DeliveryId::new())
            .bind(event)
            .bind(payload)
            .bind(DeliveryStatus::Pending)
            .bind(ms(now))
            .bind(ms(now))
            .bind(ms(now))
            .bind(&webhook_id)
            .execute(&self.pool)
            .await?;
            queued += done.rows_affected() as usize;
        }
        Ok(queued)
    }

    async fn claim_deliveries(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<ClaimedDelivery>> {
        // Due pending deliveries in due order (index webhook_deliveries_due), then claims
        // whose worker stopped renewing; only of active webhooks. The subquery locks the
        // rows it picks and skips those another claimer holds; the outer WHERE repeats the
        // due predicate, which is checked again on the latest version of each row. The
        // subquery is a materialised CTE, run once: as an `IN (…)` subquery the planner
        // may run it again for each row of the UPDATE, and a second run skips the rows
        // this statement has just updated and picks more, beyond the limit.
        let rows = sqlx::query(&format!(
            "WITH due AS MATERIALIZED ( \
               SELECT d.id FROM webhook_deliveries d \
               WHERE ((d.status = $3 AND d.next_attempt_at <= $4) \
                      OR (d.status = $1 AND d.lease_until < $4)) \
                 AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.active) \
               ORDER BY d.next_attempt_at, d.id LIMIT $5 \
               FOR UPDATE OF d SKIP LOCKED) \
             UPDATE webhook_deliveries SET status = $1, lease_until = $2, attempts = attempts + 1 \
             WHERE id IN (SELECT id FROM due) \
               AND ((status = $3 AND next_attempt_at <= $4) OR (status = $1 AND lease_until < $4)) \
             RETURNING {DELIVERY_COLUMNS}"
        ))
        .bind(DeliveryStatus::Sending)
        .bind(ms(lease_until))
        .bind(DeliveryStatus::Pending)
        .bind(ms(now))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let deliveries: Vec<DeliveryRecord> =
            rows.iter().map(delivery).collect::<Result<_, _>>()?;
        let mut claimed = Vec::with_capacity(deliveries.len());
        let mut targets: std::collections::HashMap<WebhookId, (String, Vec<u8>)> =
            std::collections::HashMap::new();
        for d in deliveries {
            if !targets.contains_key(&d.webhook_id) {
                let row = sqlx::query("SELECT url, secret_sealed FROM webhooks WHERE id = $1")
                    .bind(&d.webhook_id)
                    .fetch_optional(&self.pool)
                    .await?;
                let Some(row) = row else {
                    // Deleted meanwhile; its deliveries went with it.
                    continue;
                };
                targets.insert(
                    d.webhook_id.clone(),
                    (row.try_get("url")?, row.try_get("secret_sealed")?),
                );
            }
            let (url, secret_sealed) = targets[&d.webhook_id].clone();
            claimed.push(ClaimedDelivery {
                delivery: d,
                url,
                secret_sealed,
            });
        }
        Ok(claimed)
    }

    async fn record_attempt(
        &self,
        a: &AttemptRecord,
        after: AfterAttempt,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let mut tx = begin(&self.pool).await?;
        // The attempt was made, so it is recorded even when its claim was lost.
        sqlx::query(
            "INSERT INTO webhook_attempts \
             (delivery_id, attempt, started_at, duration_ms, response_status, error) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (delivery_id, attempt) DO UPDATE SET started_at = excluded.started_at, \
             duration_ms = excluded.duration_ms, response_status = excluded.response_status, \
             error = excluded.error",
        )
        .bind(&a.delivery_id)
        .bind(i64::from(a.attempt))
        .bind(ms(a.started_at))
        .bind(i64::try_from(a.duration_ms).unwrap_or(i64::MAX))
        .bind(a.response_status.map(i64::from))
        .bind(&a.error)
        .execute(&mut *tx)
        .await?;
        let (status, next) = match after {
            AfterAttempt::Succeeded => (DeliveryStatus::Succeeded, None),
            AfterAttempt::RetryAt(t) => (DeliveryStatus::Pending, Some(ms(t))),
            AfterAttempt::Failed | AfterAttempt::DisableWebhook => (DeliveryStatus::Failed, None),
        };
        // Only the claim this attempt belongs to moves the delivery on: not a worker whose
        // lease ran out and whose delivery was claimed again (attempts moved on), nor over
        // a redelivery requested meanwhile (status moved on). The row lock makes a
        // concurrent claim or redelivery wait, and this predicate is re-checked after it.
        let applied = sqlx::query(
            "UPDATE webhook_deliveries SET status = $1, next_attempt_at = $2, lease_until = NULL, \
             response_status = $3, last_error = $4 WHERE id = $5 AND status = $6 AND attempts = $7",
        )
        .bind(status)
        .bind(next)
        .bind(a.response_status.map(i64::from))
        .bind(&a.error)
        .bind(&a.delivery_id)
        .bind(DeliveryStatus::Sending)
        .bind(i64::from(a.attempt))
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if applied && after == AfterAttempt::DisableWebhook {
            let webhook_id: Option<WebhookId> =
                sqlx::query_scalar("SELECT webhook_id FROM webhook_deliveries WHERE id = $1")
                    .bind(&a.delivery_id)
                    .fetch_optional(&mut *tx)
                    .await?;
            if let Some(webhook_id) = webhook_id {
                sqlx::query(
                    "UPDATE webhooks SET active = FALSE, disabled_reason = $1, updated_at = $2 WHERE id = $3",
                )
                .bind("The receiver answered 410 Gone")
                .bind(ms(now))
                .bind(&webhook_id)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "UPDATE webhook_deliveries SET status = $1, next_attempt_at = NULL, \
                     lease_until = NULL, last_error = $2 WHERE webhook_id = $3 AND status = $4",
                )
                .bind(DeliveryStatus::Failed)
                .bind("Not sent: the webhook was disabled (410 Gone)")
                .bind(&webhook_id)
                .bind(DeliveryStatus::Pending)
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(applied)
    }

    async fn next_delivery_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let next: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(d.next_attempt_at) FROM webhook_deliveries d WHERE d.status = $1 \
             AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.active)",
        )
        .bind(DeliveryStatus::Pending)
        .fetch_one(&self.pool)
        .await?;
        Ok(next.map(crate::store::from_millis))
    }

    async fn list_deliveries(
        &self,
        user_id: &UserId,
        webhook_id: &WebhookId,
        limit: u32,
    ) -> StoreResult<Vec<DeliveryRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE user_id = $1 AND webhook_id = $2 \
             ORDER BY created_at DESC, id DESC LIMIT $3"
        ))
        .bind(user_id)
        .bind(webhook_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(delivery).collect::<Result<_, _>>()?)
    }

    async fn delivery_attempts(&self, delivery_id: &DeliveryId) -> StoreResult<Vec<AttemptRecord>> {
        let rows = sqlx::query(
            "SELECT delivery_id, attempt, started_at, duration_ms, response_status, error \
             FROM webhook_attempts WHERE delivery_id = $1 ORDER BY attempt",
        )
        .bind(delivery_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(AttemptRecord {
                    delivery_id: row.try_get("delivery_id")?,
                    attempt: row.try_get::<i64, _>("attempt")?.try_into().unwrap_or(0),
                    started_at: time(row, "started_at")?,
                    duration_ms: row
                        .try_get::<i64, _>("duration_ms")?
                        .try_into()
                        .unwrap_or(0),
                    response_status: row
                        .try_get::<Option<i64>, _>("response_status")?
                        .and_then(|s| u16::try_from(s).ok()),
                    error: row.try_get("error")?,
                })
            })
            .collect()
    }

    async fn redeliver(
        &self,
        user_id: &UserId,
        webhook_id: &WebhookId,
        delivery_id: &DeliveryId,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<bool>> {
        let done = sqlx::query(
            "UPDATE webhook_deliveries SET status = $1, next_attempt_at = $2, retry_from = $3, \
             lease_until = NULL WHERE user_id = $4 AND webhook_id = $5 AND id = $6 AND status != $7",
        )
        .bind(DeliveryStatus::Pending)
        .bind(ms(now))
        .bind(ms(now))
        .bind(user_id)
        .bind(webhook_id)
        .bind(delivery_id)
        .bind(DeliveryStatus::Sending)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 1 {
            return Ok(Some(true));
        }
        let exists: Option<String> = sqlx::query_scalar(
            "SELECT id FROM webhook_deliveries WHERE user_id = $1 AND webhook_id = $2 AND id = $3",
        )
        .bind(user_id)
        .bind(webhook_id)
        .bind(delivery_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(exists.map(|_| false))
    }
}
