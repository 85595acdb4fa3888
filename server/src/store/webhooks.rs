//! Webhooks, the durable delivery queue and every attempt's record ([`WebhookStore`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;
use crate::{
    domain::EventType,
    ids::{DeliveryId, UserId, WebhookId},
};

/// A webhook delivery's state (docs/api.md § States and transitions), stored and answered
/// as its text.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "TEXT", rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Waiting for `next_attempt_at`: when queued, after a retryable attempt, or redelivered.
    Pending,
    /// Claimed by a worker under a lease ([`WebhookStore::claim_deliveries`]).
    Sending,
    /// A 2xx answer arrived ([`WebhookStore::record_attempt`]).
    Succeeded,
    /// Given up ([`WebhookStore::record_attempt`]).
    Failed,
}

impl DeliveryStatus {
    pub const ALL: [Self; 4] = [Self::Pending, Self::Sending, Self::Succeeded, Self::Failed];

    /// The stored and wire text: `pending`, `sending`, `succeeded` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Sending => "sending",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
        }
    }
}

impl std::fmt::Display for DeliveryStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A webhook as stored. The signing secret is kept only encrypted.
#[derive(Clone)]
pub struct WebhookRecord {
    pub id: WebhookId,
    pub user_id: UserId,
    pub url: String,
    /// The event types subscribed, in the order given, each once (stored as a JSON array).
    pub events: Vec<EventType>,
    pub description: String,
    /// Nonce (12 bytes) followed by the AES-256-GCM ciphertext of the secret's key bytes.
    pub secret_sealed: Vec<u8>,
    pub active: bool,
    /// Why the webhook was disabled (e.g. the receiver answered 410 Gone).
    pub disabled_reason: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl std::fmt::Debug for WebhookRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookRecord")
            .field("id", &self.id)
            .field("user_id", &self.user_id)
            .field("events", &self.events)
            .field("active", &self.active)
            .finish_non_exhaustive()
    }
}

/// One event for one webhook, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRecord {
    /// Also the Standard Webhooks message id (`webhook-id`), stable across attempts.
    pub id: DeliveryId,
    pub webhook_id: WebhookId,
    pub user_id: UserId,
    /// The event type, e.g. `agent.created`.
    pub event: EventType,
    /// The exact JSON body every attempt sends (the signature covers it).
    pub payload: String,
    pub status: DeliveryStatus,
    /// Attempts started (a claim counts, so a crash mid-send counts too).
    pub attempts: u32,
    pub response_status: Option<u16>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    /// When a pending delivery is due; `None` once it has ended.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Start of the retry window: the event's time, or the last redelivery request.
    pub retry_from: DateTime<Utc>,
}

/// A claimed delivery with what sending it needs.
#[derive(Clone)]
pub struct ClaimedDelivery {
    pub delivery: DeliveryRecord,
    pub url: String,
    pub secret_sealed: Vec<u8>,
}

/// The outcome of one attempt, recorded with [`WebhookStore::record_attempt`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    pub delivery_id: DeliveryId,
    /// 1-based: the delivery's `attempts` after the claim it was made under (the fence).
    pub attempt: u32,
    pub started_at: DateTime<Utc>,
    /// Wall time of the attempt in milliseconds.
    pub duration_ms: u64,
    /// The receiver's HTTP status, when an answer arrived.
    pub response_status: Option<u16>,
    /// Why the attempt failed, when it did.
    pub error: Option<String>,
}

/// What happens to a delivery after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterAttempt {
    Succeeded,
    /// Try again at the given time.
    RetryAt(DateTime<Utc>),
    /// Give up on this delivery.
    Failed,
    /// Give up, disable the webhook and fail its other pending deliveries (410 Gone).
    DisableWebhook,
}

/// Webhooks and their delivery queue; another user's row is "not found".
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Creates a webhook unless its owner has `limit` (false); concurrent creations never
    /// pass the limit.
    async fn create_webhook(&self, webhook: &WebhookRecord, limit: u32) -> StoreResult<bool>;
    /// The user's webhooks, oldest first.
    async fn list_webhooks(&self, user_id: &UserId) -> StoreResult<Vec<WebhookRecord>>;
    async fn webhook(&self, user_id: &UserId, id: &WebhookId)
        -> StoreResult<Option<WebhookRecord>>;
    /// Deletes the webhook with its deliveries and attempts; false when there was none.
    async fn delete_webhook(&self, user_id: &UserId, id: &WebhookId) -> StoreResult<bool>;

    /// Queues `payload` for every active webhook of `user_id` subscribed to `event`, due at
    /// `now`; answers how many.
    async fn enqueue_event(
        &self,
        user_id: &UserId,
        event: EventType,
        payload: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<usize>;
    /// Takes up to `limit` due deliveries of active webhooks (pending and due, or with an
    /// ended lease), earliest first, sending until `lease_until`, their attempt counted; one
    /// claimer per delivery under any concurrency.
    async fn claim_deliveries(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<ClaimedDelivery>>;
    /// Stores the attempt and moves its delivery on as `after` says while it is still
    /// sending under this claim; otherwise stores only the attempt and answers false.
    async fn record_attempt(
        &self,
        attempt: &AttemptRecord,
        after: AfterAttempt,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// The earliest `next_attempt_at` of a pending delivery (the worker sleeps until then).
    async fn next_delivery_due(&self) -> StoreResult<Option<DateTime<Utc>>>;
    /// The newest `limit` deliveries of the user's webhook, newest first.
    async fn list_deliveries(
        &self,
        user_id: &UserId,
        webhook_id: &WebhookId,
        limit: u32,
    ) -> StoreResult<Vec<DeliveryRecord>>;
    /// The attempts of a delivery, oldest first.
    async fn delivery_attempts(&self, delivery_id: &DeliveryId) -> StoreResult<Vec<AttemptRecord>>;
    /// Makes a delivery pending, due at `now`, with a fresh retry window; `None`: no such
    /// delivery, `Some(false)`: being sent now, left alone.
    async fn redeliver(
        &self,
        user_id: &UserId,
        webhook_id: &WebhookId,
        delivery_id: &DeliveryId,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<bool>>;
}

/// Defines the [`WebhookStore`] of `$store` (`$writer` pool writes, `$reader` reads) from
/// the invoking file's `SUBSCRIBED_WEBHOOKS` (owner `$1`, event `$2`).
macro_rules! webhook_store {
    ($store:ident, $db:ty, $writer:ident, $reader:ident) => {
        mod shared {
            use chrono::{DateTime, Utc};
            use sqlx::Row;

            use super::super::{
                rows::{delivery, ms, time, webhook, DELIVERY_COLUMNS, WEBHOOK_COLUMNS},
                $store,
            };
            use super::super::row_lock;
            use super::SUBSCRIBED_WEBHOOKS;
            use crate::ids::{DeliveryId, UserId, WebhookId};
            use crate::store::{
                webhooks::{
                    AfterAttempt, AttemptRecord, ClaimedDelivery, DeliveryRecord, DeliveryStatus,
                    WebhookRecord, WebhookStore,
                },
                StoreError, StoreResult,
            };
            use crate::domain::EventType;

            #[async_trait::async_trait]
            impl WebhookStore for $store {
                async fn create_webhook(&self, w: &WebhookRecord, limit: u32) -> StoreResult<bool> {
                    let events = serde_json::to_string(&w.events)
                        .map_err(|e| StoreError::Other(anyhow::anyhow!(e)))?;
                    // The owner's creations one at a time: each counts what the others wrote.
                    let mut tx = self.begin_for_account(&w.user_id).await?;
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
                    .fetch_all(&self.$reader)
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
                    .fetch_optional(&self.$reader)
                    .await?;
                    row.as_ref().map(webhook).transpose()
                }

                async fn delete_webhook(
                    &self,
                    user_id: &UserId,
                    id: &WebhookId,
                ) -> StoreResult<bool> {
                    let done = sqlx::query("DELETE FROM webhooks WHERE user_id = $1 AND id = $2")
                        .bind(user_id)
                        .bind(id)
                        .execute(&self.$writer)
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
                    let subscribed: Vec<WebhookId> = sqlx::query_scalar(SUBSCRIBED_WEBHOOKS)
                        .bind(user_id)
                        .bind(event)
                        .fetch_all(&self.$reader)
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
                        .execute(&self.$writer)
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
                    // Due pending deliveries, then claims whose worker stopped renewing, of
                    // active webhooks, picked once in a materialised CTE (an `IN` subquery may
                    // be re-run per row and pick beyond the limit); where claimers run side by
                    // side, rows are locked `SKIP LOCKED` and the outer `WHERE` re-checks each.
                    let sql = format!(
                        "WITH due AS MATERIALIZED ( \
                           SELECT d.id FROM webhook_deliveries d \
                           WHERE ((d.status = $3 AND d.next_attempt_at <= $4) \
                                  OR (d.status = $1 AND d.lease_until < $4)) \
                             AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.active) \
                           ORDER BY d.next_attempt_at, d.id LIMIT $5{}) \
                         UPDATE webhook_deliveries SET status = $1, lease_until = $2, attempts = attempts + 1 \
                         WHERE id IN (SELECT id FROM due) \
                           AND ((status = $3 AND next_attempt_at <= $4) OR (status = $1 AND lease_until < $4)) \
                         RETURNING {DELIVERY_COLUMNS}",
                        row_lock(" FOR UPDATE OF d SKIP LOCKED")
                    );
                    let rows = sqlx::query(&sql)
                    .bind(DeliveryStatus::Sending)
                    .bind(ms(lease_until))
                    .bind(DeliveryStatus::Pending)
                    .bind(ms(now))
                    .bind(i64::from(limit))
                    .fetch_all(&self.$writer)
                    .await?;
                    let deliveries: Vec<DeliveryRecord> =
                        rows.iter().map(delivery).collect::<Result<_, _>>()?;
                    let mut claimed = Vec::with_capacity(deliveries.len());
                    let mut targets: std::collections::HashMap<WebhookId, (String, Vec<u8>)> =
                        std::collections::HashMap::new();
                    for d in deliveries {
                        if !targets.contains_key(&d.webhook_id) {
                            let row = sqlx::query(
                                "SELECT url, secret_sealed FROM webhooks WHERE id = $1",
                            )
                            .bind(&d.webhook_id)
                            .fetch_optional(&self.$writer)
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
                    let mut tx = self.begin_write().await?;
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
                        AfterAttempt::Failed | AfterAttempt::DisableWebhook => {
                            (DeliveryStatus::Failed, None)
                        }
                    };
                    // Only the claim this attempt belongs to moves the delivery on: not a worker
                    // whose lease ran out and whose delivery was claimed again (attempts moved on),
                    // nor over a redelivery requested meanwhile (status moved on). The row lock
                    // makes a concurrent claim or redelivery wait, and this predicate is re-checked
                    // after it.
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
                        let webhook_id: Option<WebhookId> = sqlx::query_scalar(
                            "SELECT webhook_id FROM webhook_deliveries WHERE id = $1",
                        )
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
                    .fetch_one(&self.$reader)
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
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows.iter().map(delivery).collect::<Result<_, _>>()?)
                }

                async fn delivery_attempts(
                    &self,
                    delivery_id: &DeliveryId,
                ) -> StoreResult<Vec<AttemptRecord>> {
                    let rows = sqlx::query(
                        "SELECT delivery_id, attempt, started_at, duration_ms, response_status, error \
                         FROM webhook_attempts WHERE delivery_id = $1 ORDER BY attempt",
                    )
                    .bind(delivery_id)
                    .fetch_all(&self.$reader)
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
                    .execute(&self.$writer)
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
                    .fetch_optional(&self.$writer)
                    .await?;
                    Ok(exists.map(|_| false))
                }
            }
        }
    };
}
pub(crate) use webhook_store;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_states_are_the_stored_and_wire_text() {
        // The CHECK list of `webhook_deliveries.status` (migrations/sqlite/0007_webhooks.sql)
        // and docs/api.md § States and transitions.
        let states: Vec<&str> = DeliveryStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(states, ["pending", "sending", "succeeded", "failed"]);
        for s in DeliveryStatus::ALL {
            let json = serde_json::to_value(s).unwrap();
            assert_eq!(json, s.as_str());
            assert_eq!(serde_json::from_value::<DeliveryStatus>(json).unwrap(), s);
            assert_eq!(s.to_string(), s.as_str());
        }
    }
}
