//! The webhook part of the persistence boundary: subscriptions, the durable delivery queue
//! and the record of every attempt. Every backend implements [`WebhookStore`] (the SQLite
//! backend in `sqlite/webhooks.rs`, `migrations/sqlite/0007_webhooks.sql`); [`super::Store`]
//! requires it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;
use crate::ids::{DeliveryId, UserId, WebhookId};

/// Delivery states as stored.
pub mod delivery_status {
    /// Waiting for `next_attempt_at`.
    pub const PENDING: &str = "pending";
    /// Claimed by a worker under a lease; an expired lease makes it claimable again.
    pub const SENDING: &str = "sending";
    /// A 2xx answer arrived.
    pub const SUCCEEDED: &str = "succeeded";
    /// Given up: a final answer, the retry window ran out, or the webhook was disabled.
    pub const FAILED: &str = "failed";
}

/// A webhook as stored. The signing secret is kept only encrypted.
#[derive(Clone)]
pub struct WebhookRecord {
    pub id: WebhookId,
    pub user_id: UserId,
    pub url: String,
    pub events: Vec<String>,
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
    pub event: String,
    /// The exact JSON body every attempt sends (the signature covers it).
    pub payload: String,
    /// One of [`delivery_status`].
    pub status: String,
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
    /// 1-based attempt number (the delivery's `attempts` after the claim).
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
    /// Delivered (2xx).
    Succeeded,
    /// Try again at the given time.
    RetryAt(DateTime<Utc>),
    /// Give up on this delivery.
    Failed,
    /// Give up, disable the webhook and fail its other pending deliveries (410 Gone).
    DisableWebhook,
}

/// Webhooks and their delivery queue. Methods taking a user id are tenant-scoped: another
/// user's row is "not found".
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Creates a webhook unless its owner already has `limit`; false at the limit, and
    /// nothing is written.
    ///
    /// The count and the insert are one atomic step: however many creations run at once,
    /// the owner never has more than `limit` webhooks (SQLite: one conditional
    /// `INSERT … SELECT … WHERE (SELECT count(*) …) < limit`; a server backend locks the
    /// owner's `users` row first). Proven by
    /// `conformance::parallel_webhook_and_integration_creates_stop_at_the_limit`.
    async fn create_webhook(&self, webhook: &WebhookRecord, limit: u32) -> StoreResult<bool>;
    /// The user's webhooks, oldest first.
    async fn list_webhooks(&self, user_id: &UserId) -> StoreResult<Vec<WebhookRecord>>;
    async fn webhook(&self, user_id: &UserId, id: &WebhookId)
        -> StoreResult<Option<WebhookRecord>>;
    /// Deletes the webhook with its deliveries and attempts; false when there was none.
    async fn delete_webhook(&self, user_id: &UserId, id: &WebhookId) -> StoreResult<bool>;

    /// Queues `payload` for every active webhook of `user_id` subscribed to `event`, due at
    /// `now`; returns how many deliveries were queued (usually 0 or 1, one query when 0).
    async fn enqueue_event(
        &self,
        user_id: &UserId,
        event: &str,
        payload: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<usize>;
    /// Takes up to `limit` deliveries of active webhooks that are due (pending and
    /// `next_attempt_at <= now`, or sending with a lease that ended before `now`), marks
    /// them sending until `lease_until` and counts the attempt (the delivery's `attempts`
    /// after the claim numbers the attempt).
    ///
    /// One claimer per delivery: of any number of claims running at once, each delivery is
    /// returned to at most one, and a sending delivery is returned again only after its
    /// lease ended. SQLite: one `UPDATE … WHERE id IN (SELECT …) RETURNING`; a server
    /// backend needs `FOR UPDATE SKIP LOCKED` in the subquery and the predicate repeated
    /// in the outer `WHERE`. Proven by `conformance::parallel_delivery_claims_are_distinct`.
    async fn claim_deliveries(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<ClaimedDelivery>>;
    /// Stores the attempt and moves its delivery on as `after` says, in one transaction.
    /// The delivery moves on only while it is still sending: a redelivery requested during
    /// the attempt ([`WebhookStore::redeliver`]) is not overwritten.
    async fn record_attempt(
        &self,
        attempt: &AttemptRecord,
        after: AfterAttempt,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
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
    /// Makes a delivery of the user's webhook pending and due at `now` with a fresh retry
    /// window. `Ok(None)` when there is no such delivery; `Ok(Some(false))` when it is
    /// being sent right now (left alone).
    async fn redeliver(
        &self,
        user_id: &UserId,
        webhook_id: &WebhookId,
        delivery_id: &DeliveryId,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<bool>>;
}
