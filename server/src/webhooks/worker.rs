//! The delivery worker: takes due deliveries under a lease ([`crate::jobs::lease`]), sends up
//! to [`MAX_IN_FLIGHT`] at once and records every attempt. At least once: a worker that dies
//! mid-send never records, and the delivery is sent again after [`LEASE`] with the same
//! `webhook-id` (receivers deduplicate on it). `webhook-timestamp` is real time; everything
//! else reads the service clock.

use std::time::Duration;

use axum::http::{header, HeaderMap, HeaderValue};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use tokio::{sync::Notify, time::Instant};
use tracing::{debug, warn};

use super::{after_attempt, judge, sign, Webhooks};
use crate::{
    clock::Clock,
    jobs::lease::{self, LeaseQueue, LeaseRules},
    outbound::NetError,
    store::{
        webhooks::{AfterAttempt, AttemptRecord, ClaimedDelivery},
        StoreError,
    },
};

/// How long a claimed delivery belongs to its worker.
pub const LEASE: Duration = Duration::from_secs(60);
/// Deliveries sent at the same time by one worker.
pub const MAX_IN_FLIGHT: usize = 32;
/// How often an idle worker looks for work it was not woken for (expired leases).
const POLL: Duration = Duration::from_secs(2);

/// Starts the delivery worker; it runs until the runtime stops or its handle is aborted.
pub fn spawn(webhooks: Webhooks) -> tokio::task::JoinHandle<()> {
    lease::spawn(Deliveries(webhooks))
}

/// The `webhook_deliveries` table as a lease queue: leases of [`LEASE`] never renewed (an
/// attempt ends within [`super::ATTEMPT_TIMEOUT`]).
struct Deliveries(Webhooks);

/// One attempt's result and timing.
struct Sent {
    result: Result<u16, NetError>,
    started_at: DateTime<Utc>,
    duration_ms: u64,
}

impl LeaseQueue for Deliveries {
    type Item = ClaimedDelivery;
    type Outcome = Sent;
    type Error = StoreError;
    const CLAIM_FAILED: &'static str = "cannot take webhook deliveries";

    fn rules(&self) -> LeaseRules {
        LeaseRules {
            lease: LEASE,
            renew_every: None,
            concurrency: MAX_IN_FLIGHT,
            poll: POLL,
        }
    }

    fn clock(&self) -> &Clock {
        &self.0.clock
    }

    fn wake(&self) -> &Notify {
        &self.0.events.wake
    }

    async fn claim(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        max: usize,
    ) -> Result<Vec<ClaimedDelivery>, StoreError> {
        let limit = u32::try_from(max).unwrap_or(u32::MAX);
        self.0.store.claim_deliveries(now, lease_until, limit).await
    }

    async fn next_due(&self) -> Option<DateTime<Utc>> {
        self.0.store.next_delivery_due().await.ok().flatten()
    }

    async fn work(&self, claimed: &ClaimedDelivery, _slot: usize) -> Sent {
        let started_at = self.0.clock.now();
        let clock = Instant::now();
        let result = send(&self.0, claimed).await;
        Sent {
            result,
            started_at,
            duration_ms: clock.elapsed().as_millis() as u64,
        }
    }

    async fn finish(&self, claimed: &ClaimedDelivery, sent: Sent) {
        record(&self.0, claimed, sent).await;
    }
}

/// Records an attempt while the claim is still this worker's (fenced by attempt number); a
/// lost claim or a failure to record is logged, and the lease then runs out.
async fn record(w: &Webhooks, claimed: &ClaimedDelivery, sent: Sent) {
    let d = &claimed.delivery;
    let Sent {
        result,
        started_at,
        duration_ms,
    } = sent;
    let verdict = judge(&result);
    let now = w.clock.now();
    let after = after_attempt(verdict, &w.retry, d.attempts, d.retry_from, now);
    let (response_status, error) = match &result {
        Ok(status) if (200..300).contains(status) => (Some(*status), None),
        Ok(status) => (
            Some(*status),
            Some(format!("the receiver answered with HTTP status {status}")),
        ),
        Err(err) => (None, Some(err.to_string())),
    };
    debug!(delivery = %d.id, webhook = %d.webhook_id, attempt = d.attempts, ?response_status, duration_ms, ?after, "webhook attempt");
    crate::metrics::delivery_attempted(&after);
    if matches!(after, AfterAttempt::DisableWebhook) {
        warn!(webhook = %d.webhook_id, "the receiver answered 410 Gone; webhook disabled");
    }
    let record = AttemptRecord {
        delivery_id: d.id.clone(),
        attempt: d.attempts,
        started_at,
        duration_ms,
        response_status,
        error,
    };
    match w.store.record_attempt(&record, after, now).await {
        Ok(true) => {}
        // The lease ran out during the attempt and the delivery was claimed again (or a
        // redelivery was requested): the current claim's result stands.
        Ok(false) => {
            warn!(delivery = %d.id, attempt = d.attempts, "a webhook attempt ended after its claim was lost; recorded without moving the delivery on");
        }
        Err(err) => {
            warn!(delivery = %d.id, error = %err, "cannot record a webhook attempt; it will be retried after its lease");
        }
    }
}

/// One signed POST of the payload; non-network failures (secret, stored URL) are final.
async fn send(w: &Webhooks, claimed: &ClaimedDelivery) -> Result<u16, NetError> {
    let d = &claimed.delivery;
    let key = w
        .secrets
        .open(&d.user_id, &d.webhook_id, &claimed.secret_sealed)
        .map_err(|e| NetError::InvalidUrl(e.to_string()))?;
    let url = url::Url::parse(&claimed.url).map_err(|e| NetError::InvalidUrl(e.to_string()))?;
    let timestamp = Utc::now().timestamp();
    let signature = sign(&key, d.id.as_str(), timestamp, d.payload.as_bytes());
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let value = |s: &str| HeaderValue::from_str(s).map_err(|e| NetError::InvalidUrl(e.to_string()));
    headers.insert("webhook-id", value(d.id.as_str())?);
    headers.insert("webhook-timestamp", HeaderValue::from(timestamp));
    let mut signature = value(&signature)?;
    signature.set_sensitive(true);
    headers.insert("webhook-signature", signature);
    w.client
        .post_once(&url, headers, Bytes::from(d.payload.clone()))
        .await
}
