//! The delivery worker: takes due deliveries from the `webhook_deliveries` table under a
//! lease, sends up to [`MAX_IN_FLIGHT`] at once, and records every attempt.
//!
//! Durability (at least once): a delivery is claimed with a lease of [`LEASE`], longer than
//! an attempt may take ([`super::ATTEMPT_TIMEOUT`]). A worker that dies mid-send (crash,
//! kill, restart) never records the attempt; once the lease has passed, any worker takes
//! the delivery again. A receiver may therefore see a message twice, with the same
//! `webhook-id` (Standard Webhooks v1 asks receivers to deduplicate on it).
//!
//! Claims, leases, due times and recorded times are read from the service clock
//! ([`Webhooks::clock`]); the `webhook-timestamp` header is the real time, which receivers
//! check against their own clocks.

use std::{sync::Arc, time::Duration};

use axum::http::{header, HeaderMap, HeaderValue};
use bytes::Bytes;
use chrono::Utc;
use tokio::{task::JoinSet, time::Instant};
use tracing::{debug, warn};

use super::{after_attempt, judge, sign, Webhooks};
use crate::{
    knowledge::net::NetError,
    store::webhooks::{AfterAttempt, AttemptRecord, ClaimedDelivery},
};

/// How long a claimed delivery belongs to its worker.
pub const LEASE: Duration = Duration::from_secs(60);
/// Deliveries sent at the same time by one worker.
pub const MAX_IN_FLIGHT: usize = 32;
/// How often an idle worker looks for work it was not woken for (expired leases).
const POLL: Duration = Duration::from_secs(2);

/// Starts the delivery worker; it runs until the runtime stops.
pub fn spawn(webhooks: Webhooks) -> tokio::task::JoinHandle<()> {
    tokio::spawn(dispatch(webhooks))
}

async fn dispatch(w: Webhooks) {
    let mut in_flight: JoinSet<()> = JoinSet::new();
    let w = Arc::new(w);
    loop {
        // Reap finished sends without waiting.
        while in_flight.try_join_next().is_some() {}
        let free = MAX_IN_FLIGHT - in_flight.len();
        let mut claimed = 0;
        if free > 0 {
            let now = w.clock.now();
            let lease = now + chrono::Duration::from_std(LEASE).unwrap_or_default();
            match w.store.claim_deliveries(now, lease, free as u32).await {
                Ok(batch) => {
                    claimed = batch.len();
                    for delivery in batch {
                        let w = w.clone();
                        in_flight.spawn(async move { attempt(&w, delivery).await });
                    }
                }
                Err(err) => {
                    warn!(error = %err, "cannot take webhook deliveries");
                    tokio::time::sleep(POLL).await;
                    continue;
                }
            }
        }
        if free > 0 && claimed == free {
            // There may be more due right now.
            continue;
        }
        let idle = match w.store.next_delivery_due().await {
            Ok(Some(due)) => (due - w.clock.now())
                .to_std()
                .unwrap_or_default()
                .clamp(Duration::from_millis(5), POLL),
            _ => POLL,
        };
        tokio::select! {
            Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
            _ = w.events.wake.notified() => {}
            _ = tokio::time::sleep(idle) => {}
        }
    }
}

/// Sends one claimed delivery and records the attempt; a failure to record is logged (the
/// lease then runs out and the delivery is sent again).
async fn attempt(w: &Webhooks, claimed: ClaimedDelivery) {
    let d = &claimed.delivery;
    let started_at = w.clock.now();
    let clock = Instant::now();
    let result = send(w, &claimed).await;
    let duration_ms = clock.elapsed().as_millis() as u64;
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
    if let Err(err) = w.store.record_attempt(&record, after, now).await {
        warn!(delivery = %d.id, error = %err, "cannot record a webhook attempt; it will be retried after its lease");
    }
}

/// One signed POST of the delivery's payload. Errors that are not the network's (a secret
/// that cannot be decrypted, a stored URL that no longer parses) are reported as
/// [`NetError::InvalidUrl`]-like final failures.
async fn send(w: &Webhooks, claimed: &ClaimedDelivery) -> Result<u16, NetError> {
    let d = &claimed.delivery;
    let key = w
        .secrets
        .open(&d.user_id, &d.webhook_id, &claimed.secret_sealed)
        .map_err(|e| NetError::InvalidUrl(e.to_string()))?;
    let url = url::Url::parse(&claimed.url).map_err(|e| NetError::InvalidUrl(e.to_string()))?;
    let timestamp = Utc::now().timestamp();
    let signature = sign(&key, &d.id, timestamp, d.payload.as_bytes());
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let value = |s: &str| HeaderValue::from_str(s).map_err(|e| NetError::InvalidUrl(e.to_string()));
    headers.insert("webhook-id", value(&d.id)?);
    headers.insert("webhook-timestamp", HeaderValue::from(timestamp));
    let mut signature = value(&signature)?;
    signature.set_sensitive(true);
    headers.insert("webhook-signature", signature);
    w.client
        .post_once(&url, headers, Bytes::from(d.payload.clone()))
        .await
}
