//! Webhooks: an account's events POSTed to the URLs its owner subscribed, signed per
//! Standard Webhooks v1 (<https://www.standardwebhooks.com/>). [`Events::emit`] queues one
//! delivery per subscribed active webhook and never fails a request; the [`worker`] sends
//! them at least once under a lease; [`sign`] makes the `webhook-signature`; secrets
//! ([`WebhookSecrets`]) are `whsec_` + base64 of 32 random bytes, shown once, stored sealed;
//! retries ([`RetryPolicy`], [`judge`]) back off for about a day and 410 disables the webhook;
//! [`service`] holds the account's use cases. Catalogue: docs/api.md § Event types.

pub mod service;
pub mod worker;

use std::{sync::Arc, time::Duration};

use base64::{engine::general_purpose::STANDARD, Engine};
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use rand::{Rng, RngCore};
use serde_json::{json, Value};
use sha2::Sha256;
use tokio::sync::Notify;

pub use self::service::WebhookError;
use crate::{
    clock::Clock,
    cluster::{Bus, Invalidation, LocalCache, Queue},
    config::{OutboundConfig, WebhooksConfig},
    ids::{UserId, WebhookId},
    outbound::{self, NetError, NetPolicy, Purpose, SafeClient},
    store::{webhooks::AfterAttempt, WebhookStore},
};

/// Prefix of a signing secret (Standard Webhooks v1 § Signature scheme).
pub const SECRET_PREFIX: &str = "whsec_";
/// Random bytes in a signing secret (the spec asks for 24 to 64).
pub const SECRET_BYTES: usize = 32;
/// Time allowed for one delivery attempt: connection, request and answer.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of a receiver's answer read (and discarded) before the connection is dropped.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

pub use crate::domain::EventType;

/// Queues events for the webhooks that subscribed to them. Cheap to clone.
#[derive(Clone)]
pub struct Events {
    store: Arc<dyn WebhookStore>,
    pub wake: Arc<Notify>,
    /// Per user, event bits no active webhook takes (trusted [`QUIET_TTL`]; [`Events::forget`]).
    quiet: moka::sync::Cache<UserId, u32>,
    clock: Clock,
    /// Where forgotten subscriptions and queued deliveries are announced.
    bus: Bus,
}

/// How long "nobody listens" is trusted; the cluster bus ([`crate::cluster`]) usually tells sooner.
pub const QUIET_TTL: std::time::Duration = std::time::Duration::from_secs(2);

/// [`Events::quiet`] as the cluster bus reaches it (forgetting through it never publishes).
struct Quiet(moka::sync::Cache<UserId, u32>);

impl LocalCache for Quiet {
    fn forget(&self, what: &Invalidation) {
        if let Invalidation::Webhooks { id } = what {
            self.0.invalidate(id);
        }
    }

    fn forget_all(&self) {
        self.0.invalidate_all();
    }
}

/// A user's entry expires [`QUIET_TTL`] after it was made; later additions do not extend it.
struct QuietExpiry;

impl moka::Expiry<UserId, u32> for QuietExpiry {
    fn expire_after_create(
        &self,
        _user_id: &UserId,
        _quiet: &u32,
        _created_at: std::time::Instant,
    ) -> Option<std::time::Duration> {
        Some(QUIET_TTL)
    }
}

impl Events {
    pub fn new(store: Arc<dyn WebhookStore>, clock: Clock) -> Self {
        Self {
            store,
            clock,
            wake: Arc::new(Notify::new()),
            quiet: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .expire_after(QuietExpiry)
                .build(),
            bus: Bus::local(),
        }
    }

    /// This emitter on `bus`: forgotten subscriptions and queued deliveries reach every instance.
    pub fn with_bus(mut self, bus: &Bus) -> Self {
        bus.add_cache(Arc::new(Quiet(self.quiet.clone())));
        bus.wake_on(Queue::Webhooks, self.wake.clone());
        self.bus = bus.clone();
        self
    }

    /// Drops what is known of `user_id`'s subscriptions everywhere (after creating or deleting).
    pub fn forget(&self, user_id: &UserId) {
        self.quiet.invalidate(user_id);
        self.bus.publish(Invalidation::Webhooks {
            id: user_id.clone(),
        });
    }

    /// Wakes the delivery workers of every instance (call after queueing deliveries).
    pub fn deliveries_queued(&self) {
        self.wake.notify_one();
        self.bus.work_queued(Queue::Webhooks);
    }

    /// Whether `event` is known to reach none of `user_id`'s webhooks; [`Events::emit`] then does
    /// nothing, so a caller may skip building the data.
    pub fn is_quiet(&self, user_id: &UserId, event: EventType) -> bool {
        self.quiet
            .get(user_id)
            .is_some_and(|q| q & event.bit() != 0)
    }

    /// Queues `{type, timestamp, data}` (RFC 3339 UTC, ms) for `user_id`'s active webhooks of
    /// `event`. Never fails (a store error is logged and the event lost).
    pub async fn emit(&self, user_id: &UserId, event: EventType, data: Value) {
        if self.is_quiet(user_id, event) {
            return;
        }
        let now = self.clock.now();
        let payload = json!({
            "type": event.as_str(),
            "timestamp": now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "data": data,
        })
        .to_string();
        match self
            .store
            .enqueue_event(user_id, event, &payload, now)
            .await
        {
            Ok(0) => {
                let known = self.quiet.get(user_id).unwrap_or(0);
                self.quiet.insert(user_id.clone(), known | event.bit());
            }
            Ok(queued) => {
                tracing::debug!(event = event.as_str(), queued, "webhook deliveries queued");
                self.deliveries_queued();
            }
            Err(err) => {
                tracing::warn!(event = event.as_str(), error = %err, "queuing webhook deliveries failed");
            }
        }
    }
}

/// `data` of document events: `{agentId, document}` as `GET .../knowledge/{documentId}` shows it.
pub fn document_data(d: &crate::store::documents::DocumentRecord) -> Value {
    json!({
        "agentId": d.agent_id,
        "document": crate::views::document_view(d),
    })
}

/// `data` of `agent.created` and `agent.updated`: `{agent}` as `GET /api/agents/{id}` shows it.
pub fn agent_data(a: &crate::store::AgentRecord) -> Value {
    json!({ "agent": crate::views::agent_view(a) })
}

/// A new signing secret: the `whsec_...` string shown once, and its key bytes.
pub fn new_secret() -> (String, Vec<u8>) {
    let mut key = vec![0u8; SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut key);
    (format!("{SECRET_PREFIX}{}", STANDARD.encode(&key)), key)
}

/// The `webhook-signature`: `v1,` + padded base64 HMAC-SHA256, with `key` (after `whsec_`), of
/// `{msg_id}.{timestamp}.{body}` (Standard Webhooks v1 § Signature scheme).
pub fn sign(key: &[u8], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// Signing keys sealed ([`crate::crypto::SecretBox`]) to `webhook-secret|{user_id}|{webhook_id}`.
pub struct WebhookSecrets {
    inner: crate::crypto::SecretBox,
}

impl WebhookSecrets {
    pub fn new(inner: crate::crypto::SecretBox) -> Self {
        Self { inner }
    }

    fn aad(user_id: &UserId, webhook_id: &WebhookId) -> Vec<u8> {
        format!("webhook-secret|{user_id}|{webhook_id}").into_bytes()
    }

    /// `key` sealed for this row.
    pub fn seal(
        &self,
        user_id: &UserId,
        webhook_id: &WebhookId,
        key: &[u8],
    ) -> anyhow::Result<Vec<u8>> {
        Ok(self.inner.seal(key, &Self::aad(user_id, webhook_id)))
    }

    /// The key sealed for this row. Errors: short value, unknown key id, or another row's value.
    pub fn open(
        &self,
        user_id: &UserId,
        webhook_id: &WebhookId,
        sealed: &[u8],
    ) -> anyhow::Result<Vec<u8>> {
        self.inner
            .open(sealed, &Self::aad(user_id, webhook_id))
            .map_err(|e| anyhow::anyhow!("the webhook secret cannot be decrypted: {e}"))
    }
}

/// Retries: full-jitter exponential backoff (`[0, min(base·2^(n-1), 720·base)]`) within
/// `2,880·base` of the event or redelivery; base 30 s gives waits ≤ 6 h over 24 h.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// `WEBHOOK_RETRY_BASE_MS`.
    pub base: Duration,
}

impl RetryPolicy {
    /// The longest wait between two attempts, as a multiple of the base.
    pub const CAP_FACTOR: u32 = 720;
    /// The retry window, as a multiple of the base.
    pub const WINDOW_FACTOR: u32 = 2_880;

    /// The largest wait after `attempts` failed attempts (1-based).
    pub fn max_wait(&self, attempts: u32) -> Duration {
        let exp = attempts.saturating_sub(1).min(20);
        (self.base * 2u32.pow(exp)).min(self.base * Self::CAP_FACTOR)
    }

    /// When to try again after `attempts` failures (jitter from `rng`); `None` past the window
    /// begun at `retry_from`.
    pub fn next_attempt(
        &self,
        attempts: u32,
        retry_from: DateTime<Utc>,
        now: DateTime<Utc>,
        rng: &mut impl Rng,
    ) -> Option<DateTime<Utc>> {
        let max = self.max_wait(attempts).as_millis() as u64;
        let wait = rng.gen_range(0..=max);
        let next = now + chrono::Duration::milliseconds(wait as i64);
        let end = retry_from
            + chrono::Duration::from_std(self.base * Self::WINDOW_FACTOR).unwrap_or_default();
        (next <= end).then_some(next)
    }
}

/// What an attempt's result means for its delivery, before the retry window is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// 2xx.
    Delivered,
    /// Worth another attempt: timeouts, connection and DNS errors, 3xx, 408, 429, 5xx.
    Retry,
    /// Final: any other 4xx, or a URL the SSRF rule refuses.
    Fail,
    /// 410 Gone (RFC 9110 § 15.5.11): the webhook is disabled.
    Gone,
}

/// Judges an attempt's result: the receiver's status, or why no answer came.
pub fn judge(result: &Result<u16, NetError>) -> Verdict {
    match result {
        Ok(status) if (200..300).contains(status) => Verdict::Delivered,
        Ok(410) => Verdict::Gone,
        Ok(408 | 429) => Verdict::Retry,
        Ok(status) if (400..500).contains(status) => Verdict::Fail,
        Ok(_) => Verdict::Retry,
        Err(
            NetError::Forbidden(_)
            | NetError::Scheme
            | NetError::UserInfo
            | NetError::InvalidUrl(_),
        ) => Verdict::Fail,
        Err(_) => Verdict::Retry,
    }
}

/// The next state of a delivery after an attempt judged `verdict`.
pub fn after_attempt(
    verdict: Verdict,
    retry: &RetryPolicy,
    attempts: u32,
    retry_from: DateTime<Utc>,
    now: DateTime<Utc>,
) -> AfterAttempt {
    match verdict {
        Verdict::Delivered => AfterAttempt::Succeeded,
        Verdict::Gone => AfterAttempt::DisableWebhook,
        Verdict::Fail => AfterAttempt::Failed,
        Verdict::Retry => retry
            .next_attempt(attempts, retry_from, now, &mut rand::thread_rng())
            .map_or(AfterAttempt::Failed, AfterAttempt::RetryAt),
    }
}

/// The webhook service: the emitter, the delivery client and the rules the worker follows.
#[derive(Clone)]
pub struct Webhooks {
    pub store: Arc<dyn WebhookStore>,
    pub events: Events,
    /// The SSRF rule URLs are checked against at creation.
    pub policy: Arc<NetPolicy>,
    /// POSTs deliveries through the guarded resolver, no redirects, [`ATTEMPT_TIMEOUT`].
    pub client: SafeClient,
    pub secrets: Arc<WebhookSecrets>,
    pub retry: RetryPolicy,
    pub clock: Clock,
}

impl Webhooks {
    /// The service over `store` within `outbound`'s exceptions. Errors: a malformed
    /// `ALLOWED_PRIVATE_HOSTS` entry, or an HTTP client that cannot be built.
    pub fn new(
        config: &WebhooksConfig,
        outbound: &OutboundConfig,
        secrets: crate::crypto::SecretBox,
        store: Arc<dyn WebhookStore>,
        clock: Clock,
    ) -> anyhow::Result<Self> {
        let policy = NetPolicy::from_list(&outbound.allowed_private_hosts)?;
        let client = SafeClient::for_purpose(
            policy.clone(),
            outbound::FetchLimits {
                max_body_bytes: MAX_ANSWER_BYTES,
                timeout: ATTEMPT_TIMEOUT,
                max_redirects: 0,
            },
            Purpose::Webhooks,
        )?;
        Ok(Self {
            events: Events::new(store.clone(), clock.clone()),
            store,
            policy: Arc::new(policy),
            client,
            secrets: Arc::new(WebhookSecrets::new(secrets)),
            retry: RetryPolicy {
                base: config.retry_base,
            },
            clock,
        })
    }

    /// This service's event emitter on `bus` ([`Events::with_bus`]).
    pub fn with_bus(mut self, bus: &Bus) -> Self {
        self.events = self.events.with_bus(bus);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Marking a second event quiet does not keep the first one quiet any longer.
    #[test]
    fn quiet_events_are_trusted_for_two_seconds_from_the_first() {
        let quiet: moka::sync::Cache<UserId, u32> = moka::sync::Cache::builder()
            .expire_after(QuietExpiry)
            .build();
        let u = UserId::from("u");
        quiet.insert(u.clone(), EventType::AgentCreated.bit());
        std::thread::sleep(QUIET_TTL * 3 / 5);
        let known = quiet.get(&u).unwrap();
        quiet.insert(u.clone(), known | EventType::MessageCreated.bit());
        std::thread::sleep(QUIET_TTL * 3 / 5);
        assert_eq!(quiet.get(&u), None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn subscriptions_and_deliveries_cross_instances() {
        use crate::cluster::tests::{bus, eventually, scratch};
        let database = scratch().await;
        let (_dir, store) = crate::store::sqlite::tests::store().await;
        crate::store::sqlite::tests::verified_user(&store, Utc::now()).await;
        let store: Arc<dyn WebhookStore> = Arc::new(store);
        let a = Events::new(store.clone(), Clock::default()).with_bus(&bus(&database).await);
        let b = Events::new(store.clone(), Clock::default()).with_bus(&bus(&database).await);
        let user = UserId::from("u1");

        // Nobody listens yet: B learns that and keeps it.
        b.emit(&user, EventType::AgentCreated, json!({})).await;
        assert!(b.is_quiet(&user, EventType::AgentCreated));
        assert!(
            !b.is_quiet(&user, EventType::MessageCreated),
            "only the event the store was asked about is known to be quiet"
        );
        // A webhook created through A: A forgets what it knew, and so does B.
        let webhook = crate::store::webhooks::WebhookRecord {
            id: "w1".into(),
            user_id: user.clone(),
            url: "https://example.com/hook".into(),
            events: vec![EventType::AgentCreated],
            description: String::new(),
            secret_sealed: vec![0; 44],
            active: true,
            disabled_reason: None,
            created_at: Utc::now(),
        };
        assert!(store.create_webhook(&webhook, 10).await.unwrap());
        a.forget(&user);
        let took = eventually(Duration::from_secs(1), "B forgets the quiet events", || {
            b.quiet.get(&user).is_none()
        })
        .await;
        assert!(took < QUIET_TTL);
        assert!(!b.is_quiet(&user, EventType::AgentCreated));

        // A delivery queued through A wakes B's delivery worker (and A's own).
        while tokio::time::timeout(Duration::from_millis(50), b.wake.notified())
            .await
            .is_ok()
        {}
        a.emit(&user, EventType::AgentCreated, json!({})).await;
        tokio::time::timeout(Duration::from_secs(1), b.wake.notified())
            .await
            .expect("B's delivery worker is woken");
        tokio::time::timeout(Duration::from_secs(1), a.wake.notified())
            .await
            .expect("A's delivery worker is woken");
    }

    #[test]
    fn every_event_has_its_own_bit() {
        let all = EventType::ALL.iter().fold(0u32, |acc, e| {
            assert_eq!(acc & e.bit(), 0, "{e:?}");
            acc | e.bit()
        });
        assert_eq!(all.count_ones() as usize, EventType::ALL.len());
    }

    #[test]
    fn signatures_match_the_standard_webhooks_test_vector() {
        // The published test vector of Standard Webhooks v1 (used by its reference
        // libraries' tests); also checked with Python's hmac module.
        let key = STANDARD.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn secrets_are_prefixed_base64_of_32_random_bytes() {
        let (secret, key) = new_secret();
        let encoded = secret.strip_prefix(SECRET_PREFIX).unwrap();
        assert_eq!(STANDARD.decode(encoded).unwrap(), key);
        assert_eq!(key.len(), 32);
        assert_ne!(new_secret().1, key);
    }

    #[test]
    fn sealed_secrets_open_only_on_their_own_row() {
        let sb = WebhookSecrets::new(crate::crypto::SecretBox::new(&[7u8; 32], &[]));
        let (u1, u2) = (UserId::from("u1"), UserId::from("u2"));
        let (w1, w2) = (WebhookId::from("w1"), WebhookId::from("w2"));
        let sealed = sb.seal(&u1, &w1, b"key bytes").unwrap();
        assert!(!sealed.windows(9).any(|w| w == b"key bytes"));
        assert_eq!(sb.open(&u1, &w1, &sealed).unwrap(), b"key bytes");
        assert!(sb.open(&u2, &w1, &sealed).is_err());
        assert!(sb.open(&u1, &w2, &sealed).is_err());
        assert!(
            WebhookSecrets::new(crate::crypto::SecretBox::new(&[8u8; 32], &[]))
                .open(&u1, &w1, &sealed)
                .is_err()
        );
    }

    #[test]
    fn answers_are_judged_by_status_class() {
        for s in [200, 201, 204, 299] {
            assert_eq!(judge(&Ok(s)), Verdict::Delivered, "{s}");
        }
        for s in [301, 302, 307, 408, 429, 500, 502, 503] {
            assert_eq!(judge(&Ok(s)), Verdict::Retry, "{s}");
        }
        for s in [400, 401, 403, 404, 422] {
            assert_eq!(judge(&Ok(s)), Verdict::Fail, "{s}");
        }
        assert_eq!(judge(&Ok(410)), Verdict::Gone);
        assert_eq!(judge(&Err(NetError::Timeout)), Verdict::Retry);
        assert_eq!(
            judge(&Err(NetError::Connect("refused".into()))),
            Verdict::Retry
        );
        assert_eq!(judge(&Err(NetError::Dns("x".into()))), Verdict::Retry);
        assert_eq!(
            judge(&Err(NetError::Forbidden("private".into()))),
            Verdict::Fail
        );
    }

    #[test]
    fn backoff_grows_with_full_jitter_up_to_a_cap_and_stops_after_a_day() {
        let p = RetryPolicy {
            base: Duration::from_secs(30),
        };
        assert_eq!(p.max_wait(1), Duration::from_secs(30));
        assert_eq!(p.max_wait(2), Duration::from_secs(60));
        assert_eq!(p.max_wait(5), Duration::from_secs(480));
        assert_eq!(p.max_wait(40), Duration::from_secs(6 * 3600));
        let start = Utc::now();
        let mut rng = rand::thread_rng();
        let mut waits = Vec::new();
        for attempt in 1..=6 {
            let next = p.next_attempt(attempt, start, start, &mut rng).unwrap();
            let wait = (next - start).to_std().unwrap();
            assert!(wait <= p.max_wait(attempt));
            waits.push(wait);
        }
        // Full jitter: some draws land well below the cap.
        let low = (0..200)
            .filter(|_| {
                let next = p.next_attempt(10, start, start, &mut rng).unwrap();
                (next - start).to_std().unwrap() < p.max_wait(10) / 2
            })
            .count();
        assert!((40..160).contains(&low), "{low}");
        let late = start + chrono::Duration::hours(24);
        assert_eq!(p.next_attempt(30, start, late, &mut rng), None);
        assert!(p
            .next_attempt(3, start, start + chrono::Duration::hours(23), &mut rng)
            .is_some_and(|t| t <= late));
        // Simulated: a delivery that always fails is retried for about a day.
        let mut now = start;
        let mut attempts = 1;
        while let Some(next) = p.next_attempt(attempts, start, now, &mut rng) {
            now = next;
            attempts += 1;
        }
        assert!(attempts > 8, "{attempts}");
        assert!(now - start <= chrono::Duration::hours(24));
    }

    #[test]
    fn the_catalogue_names_parse_back() {
        for e in EventType::ALL {
            assert_eq!(EventType::parse(e.as_str()), Some(e));
            assert!(!e.description().is_empty());
        }
        assert_eq!(EventType::parse("*"), None);
    }

    #[test]
    fn event_types_are_the_stored_and_wire_text() {
        // docs/api.md § Event types, in its order.
        let names: Vec<&str> = EventType::ALL.iter().map(|e| e.as_str()).collect();
        assert_eq!(
            names,
            [
                "agent.created",
                "agent.updated",
                "agent.deleted",
                "conversation.created",
                "message.created",
                "document.indexed",
                "document.failed",
                "crawl.completed",
                "integration.created",
                "document.refreshed",
                "feedback.created",
                "usage.threshold",
            ]
        );
        for e in EventType::ALL {
            let json = serde_json::to_value(e).unwrap();
            assert_eq!(json, e.as_str());
            assert_eq!(serde_json::from_value::<EventType>(json).unwrap(), e);
        }
    }
}
