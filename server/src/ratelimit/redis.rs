//! Budgets shared by every instance through Redis (`REDIS_URL`; README § Running several
//! instances): an atomic GCRA script on Redis's clock ([`RedisLimiter`]) over one
//! self-reconnecting connection ([`SharedRedis`]). When Redis does not answer, each call
//! falls back to this instance's own state and a warning is logged at most once a minute.

use std::{
    collections::HashMap,
    future::Future,
    hash::BuildHasher as _,
    net::IpAddr,
    sync::{
        atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use ::redis::{
    aio::{ConnectionManager, ConnectionManagerConfig},
    RedisResult, Script,
};
use anyhow::Context as _;
use async_trait::async_trait;
use sha2::{Digest, Sha256};

use super::{GovernorLimiter, RateDecision, RateKey, RateLimiter};

/// Longest wait for one Redis call, connecting included; slower or failed calls fall back.
pub const REDIS_TIMEOUT: Duration = Duration::from_millis(50);
/// At most one warning about Redis per this interval.
pub const WARNING_INTERVAL: Duration = Duration::from_secs(60);
/// Failed calls in a row after which Redis is skipped for [`PAUSE_AFTER_FAILURES`].
pub const FAILURES_BEFORE_PAUSE: u32 = 3;
/// How long calls skip Redis after [`FAILURES_BEFORE_PAUSE`] failures in a row.
pub const PAUSE_AFTER_FAILURES: Duration = Duration::from_secs(1);
const WARM_UP_TIMEOUT: Duration = Duration::from_secs(2);
const MAINTENANCE_TIMEOUT: Duration = Duration::from_secs(10);
/// Ids longer than this (bytes) are replaced by their SHA-256 in keys.
const MAX_ID_IN_KEY: usize = 64;
/// Budgets of at least this many requests per minute are served from reservations.
pub const RESERVE_FROM: u32 = 2_000;
/// The most requests a key's first reservation takes.
pub const FIRST_RESERVATION: u32 = 64;
/// The most requests any reservation takes.
pub const MAX_RESERVATION: u32 = 1_024;
/// How long a reservation is sized to last at its key's pace.
pub const RESERVATION_SPAN: Duration = Duration::from_millis(20);
/// How long unused requests of a reservation are kept before going back to Redis.
pub const RESERVATION_TTL: Duration = Duration::from_millis(100);
const MAX_RESERVATIONS: usize = 10_000;

/// One self-reconnecting Redis connection shared by the limiter, sign-in throttle and mail
/// cooldown, with the key prefix and the failure record (warn, pause). Cheap to clone.
#[derive(Clone)]
pub struct SharedRedis {
    connection: ConnectionManager,
    prefix: Arc<str>,
    health: Arc<Health>,
}

impl SharedRedis {
    /// A lazy handle on the Redis at `url` (`redis://…` or `redis+unix:///path`) with key `prefix`.
    /// Errors: `url` is not a Redis URL (not echoed: it may hold a password).
    pub fn connect(url: &str, prefix: &str) -> anyhow::Result<Self> {
        let client = ::redis::Client::open(url).context("REDIS_URL is not a valid Redis URL")?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(Duration::from_secs(1)))
            .set_max_delay(Duration::from_secs(1));
        let connection = ConnectionManager::new_lazy_with_config(client, config)
            .context("cannot set up the Redis connection of REDIS_URL")?;
        Ok(Self {
            connection,
            prefix: prefix.into(),
            health: Arc::new(Health::new()),
        })
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `rest` after the key prefix.
    pub fn key(&self, rest: &str) -> String {
        format!("{}{rest}", self.prefix)
    }

    /// Connects and loads `scripts` within 2 s: `true` when Redis answered, else warns once.
    pub async fn warm_up(&self, scripts: &[&Script]) -> bool {
        let mut connection = self.connection.clone();
        let loaded = tokio::time::timeout(WARM_UP_TIMEOUT, async {
            ::redis::cmd("PING")
                .query_async::<()>(&mut connection)
                .await?;
            for script in scripts {
                script.prepare_invoke().load_async(&mut connection).await?;
            }
            RedisResult::Ok(())
        })
        .await;
        match loaded {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                self.health.failed(self.health.now_ms(), "at start", &e);
                false
            }
            Err(_) => {
                self.health
                    .failed(self.health.now_ms(), "at start", &"no answer within 2 s");
                false
            }
        }
    }

    /// The shared connection, for callers with waits of their own (streams of replies).
    pub(crate) fn connection(&self) -> ConnectionManager {
        self.connection.clone()
    }

    /// Whether Redis answers a `PING` within [`REDIS_TIMEOUT`] (a readiness check).
    pub async fn ping(&self) -> bool {
        let mut connection = self.connection.clone();
        matches!(
            tokio::time::timeout(
                REDIS_TIMEOUT,
                ::redis::cmd("PING").query_async::<()>(&mut connection)
            )
            .await,
            Ok(Ok(()))
        )
    }

    /// Runs `call` within [`REDIS_TIMEOUT`]; `None` (fall back) when it failed, timed out or was
    /// skipped during a pause. `what` names the call in the warning.
    pub(crate) async fn run<T, F>(
        &self,
        what: &'static str,
        call: impl FnOnce(ConnectionManager) -> F,
    ) -> Option<T>
    where
        F: Future<Output = RedisResult<T>>,
    {
        let health = &self.health;
        if health.paused(health.now_ms()) {
            health.fallbacks.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        match tokio::time::timeout(REDIS_TIMEOUT, call(self.connection.clone())).await {
            Ok(Ok(answer)) => {
                health.succeeded();
                Some(answer)
            }
            Ok(Err(e)) => {
                health.failed(health.now_ms(), what, &e);
                None
            }
            Err(_) => {
                health.failed(health.now_ms(), what, &"no answer within 50 ms");
                None
            }
        }
    }

    /// Deletes this prefix's keys matching glob `pattern` (`SCAN`; tests and resets only); returns
    /// how many. Errors: Redis fails or takes more than 10 s.
    pub async fn clear(&self, pattern: &str) -> anyhow::Result<u64> {
        let mut connection = self.connection.clone();
        let pattern = format!("{}{pattern}", glob_escape(&self.prefix));
        let deleted = tokio::time::timeout(MAINTENANCE_TIMEOUT, async {
            let mut cursor = 0u64;
            let mut deleted = 0u64;
            loop {
                let (next, keys): (u64, Vec<Vec<u8>>) = ::redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut connection)
                    .await?;
                if !keys.is_empty() {
                    deleted += ::redis::cmd("DEL")
                        .arg(&keys)
                        .query_async::<u64>(&mut connection)
                        .await?;
                }
                if next == 0 {
                    return RedisResult::Ok(deleted);
                }
                cursor = next;
            }
        })
        .await
        .context("Redis did not finish deleting keys within 10 s")??;
        Ok(deleted)
    }

    /// Calls answered from this instance's own state so far.
    pub fn fallbacks(&self) -> u64 {
        self.health.fallbacks.load(Ordering::Relaxed)
    }

    /// Warnings about Redis logged so far.
    pub fn warnings(&self) -> u64 {
        self.health.warnings.load(Ordering::Relaxed)
    }
}

/// `s` with the glob characters of Redis's `MATCH` (`*`, `?`, `[`, `]`, `\`) escaped.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `id` as it goes into a key: itself, or `#` and its hex SHA-256 when over 64 bytes.
pub(crate) fn key_part(id: &str) -> std::borrow::Cow<'_, str> {
    if id.len() <= MAX_ID_IN_KEY {
        id.into()
    } else {
        format!("#{}", hex::encode(Sha256::digest(id.as_bytes()))).into()
    }
}

/// The record of failed Redis calls (ms on its own clock; methods take the time for tests).
struct Health {
    started: Instant,
    failures_in_a_row: AtomicU32,
    paused_until_ms: AtomicU64,
    next_warning_ms: AtomicU64,
    since_warning: AtomicU64,
    /// Set after a warning until a call succeeds (then recovery is logged).
    warned: AtomicBool,
    fallbacks: AtomicU64,
    warnings: AtomicU64,
}

impl Health {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            failures_in_a_row: AtomicU32::new(0),
            paused_until_ms: AtomicU64::new(0),
            next_warning_ms: AtomicU64::new(0),
            since_warning: AtomicU64::new(0),
            warned: AtomicBool::new(false),
            fallbacks: AtomicU64::new(0),
            warnings: AtomicU64::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn paused(&self, now_ms: u64) -> bool {
        now_ms < self.paused_until_ms.load(Ordering::Relaxed)
    }

    fn succeeded(&self) {
        if self.failures_in_a_row.load(Ordering::Relaxed) != 0 {
            self.failures_in_a_row.store(0, Ordering::Relaxed);
        }
        if self.warned.load(Ordering::Relaxed) && self.warned.swap(false, Ordering::Relaxed) {
            tracing::info!("Redis answers again: rate limits and throttles are shared again");
        }
    }

    /// A failure: pause after [`FAILURES_BEFORE_PAUSE`] in a row; warn once per [`WARNING_INTERVAL`].
    fn failed(&self, now_ms: u64, what: &str, error: &dyn std::fmt::Display) {
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        let in_a_row = self.failures_in_a_row.fetch_add(1, Ordering::Relaxed) + 1;
        if in_a_row >= FAILURES_BEFORE_PAUSE {
            self.paused_until_ms.fetch_max(
                now_ms.saturating_add(PAUSE_AFTER_FAILURES.as_millis() as u64),
                Ordering::Relaxed,
            );
        }
        let failures = self.since_warning.fetch_add(1, Ordering::Relaxed) + 1;
        if self.may_warn(now_ms) {
            self.since_warning.fetch_sub(failures, Ordering::Relaxed);
            self.warnings.fetch_add(1, Ordering::Relaxed);
            self.warned.store(true, Ordering::Relaxed);
            tracing::warn!(
                failures,
                %error,
                "Redis failed {what}: rate limits, the sign-in throttle and the mail cooldown \
                 are per instance until it answers (this warning repeats at most once a minute)"
            );
        }
    }

    /// Whether a warning may be logged at `now_ms` (one caller wins when several fail at once).
    fn may_warn(&self, now_ms: u64) -> bool {
        let next = self.next_warning_ms.load(Ordering::Relaxed);
        now_ms >= next
            && self
                .next_warning_ms
                .compare_exchange(
                    next,
                    now_ms.saturating_add(WARNING_INTERVAL.as_millis() as u64),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }
}

/// Rate limits in Redis, exact across instances: one atomic `EVALSHA` of a GCRA script (the rule
/// of [`GovernorLimiter`]) per check; keys `{prefix}rl:{kind}:{id}:{per_minute}` (kind `a`, `ip`,
/// `w`, `ch`) expire within a minute, so Redis must not evict early (`noeviction` or
/// `volatile-*`). Budgets of `RESERVE_FROM`+ are served from reservations of at most 1/64 of
/// what is left, so instances never exceed the budget together. Without Redis, checks fall back
/// to per-instance limits.
pub struct RedisLimiter {
    redis: SharedRedis,
    script: Script,
    fallback: Arc<GovernorLimiter>,
    shared: std::sync::Mutex<HashMap<String, Arc<Slot>>>,
    /// Each worker thread's recently used slots, by the hash of their [`Budget`].
    front: thread_local::ThreadLocal<std::cell::RefCell<Front>>,
    hasher: foldhash::fast::RandomState,
}

type Front = HashMap<u64, (Arc<Slot>, Instant), foldhash::fast::FixedState>;

/// How long a thread uses a slot before asking the shared map again.
const FRONT_TTL: Duration = Duration::from_secs(10);
const FRONT_CAPACITY: usize = 4_096;

/// Which budget a slot counts: the parts of a [`RateKey`] and its limit, without a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Budget<'a> {
    kind: u8,
    id: &'a str,
    ip: Option<IpAddr>,
    limit: u32,
}

impl<'a> Budget<'a> {
    fn of(key: RateKey<'a>, limit: u32) -> Self {
        let (kind, id, ip) = match key {
            RateKey::Account(user) => (0, user, None),
            RateKey::Ip(ip) => (1, "", Some(ip)),
            RateKey::Widget(id) => (2, id, None),
            RateKey::Channel { integration, ip } => (3, integration, Some(ip)),
        };
        Self {
            kind,
            id,
            ip,
            limit,
        }
    }
}

/// One budget's reservation on this instance, shared by the worker threads.
#[derive(Debug)]
struct Slot {
    kind: u8,
    id: Box<str>,
    ip: Option<IpAddr>,
    limit: u32,
    redis_key: String,
    state: std::sync::Mutex<Reservation>,
}

impl Slot {
    fn counts(&self, budget: &Budget<'_>) -> bool {
        self.limit == budget.limit
            && self.kind == budget.kind
            && self.ip == budget.ip
            && *self.id == *budget.id
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Reservation> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Requests an instance took from Redis and has not used yet.
#[derive(Debug)]
struct Reservation {
    left: u32,
    remaining: u32,
    /// Redis's reset time (Unix epoch µs) when they were taken.
    reset_at_us: i64,
    /// Deadline of the call taking the next reservation; past it, another may lead.
    leading_until: Option<Instant>,
    expires: Instant,
    size: u32,
    /// When the last reservation arrived and the requests allowed since: the pace to size for.
    arrived_at: Instant,
    used: u32,
    arrived: Arc<tokio::sync::Notify>,
}

impl Reservation {
    fn new(limit: u32, now: Instant) -> Self {
        Self {
            left: 0,
            remaining: 0,
            reset_at_us: 0,
            leading_until: None,
            expires: now,
            size: reservation_size(limit),
            arrived_at: now,
            used: 0,
            arrived: Arc::new(tokio::sync::Notify::new()),
        }
    }

    fn leading_at(&self, now: Instant) -> bool {
        self.leading_until.is_some_and(|until| now < until)
    }

    fn serve(&mut self, limit: u32) -> RateDecision {
        self.left -= 1;
        self.used = self.used.saturating_add(1);
        RateDecision {
            allowed: true,
            limit,
            remaining: self.remaining.saturating_add(self.left).min(limit),
            reset_at: whole_seconds_up(self.reset_at_us),
            retry_after_secs: 0,
        }
    }

    /// Starts the call taking the next reservation, sized by [`next_reservation_size`].
    fn lead(&mut self, limit: u32, now: Instant) -> u32 {
        self.leading_until = Some(now + 2 * REDIS_TIMEOUT);
        self.size = next_reservation_size(
            limit,
            self.size,
            self.used,
            now.saturating_duration_since(self.arrived_at),
        );
        self.size
    }
}

/// First reservation for `limit`/min: 1 below [`RESERVE_FROM`], else limit/1000, at most
/// [`FIRST_RESERVATION`].
pub fn reservation_size(limit: u32) -> u32 {
    if limit < RESERVE_FROM {
        1
    } else {
        (limit / 1000).clamp(1, FIRST_RESERVATION)
    }
}

/// Next reservation size: lasts [`RESERVATION_SPAN`] at the pace of `used` in `elapsed`, within
/// half and twice `size`, up to min(budget/1000, [`MAX_RESERVATION`]).
pub fn next_reservation_size(limit: u32, size: u32, used: u32, elapsed: Duration) -> u32 {
    let first = reservation_size(limit);
    if first <= 1 || elapsed >= 10 * RESERVATION_SPAN {
        return first;
    }
    let largest = (limit / 1000).clamp(first, MAX_RESERVATION);
    let span = RESERVATION_SPAN.as_micros();
    let at_pace = u128::from(used) * span / elapsed.as_micros().max(1);
    let at_pace = u32::try_from(at_pace).unwrap_or(u32::MAX);
    at_pace
        .clamp(size / 2, size.saturating_mul(2))
        .clamp(first, largest)
}

impl RedisLimiter {
    /// A limiter on `redis` that answers from `fallback` while Redis does not.
    pub fn new(redis: SharedRedis, fallback: Arc<GovernorLimiter>) -> Self {
        Self {
            redis,
            script: Script::new(include_str!("gcra.lua")),
            fallback,
            shared: std::sync::Mutex::new(HashMap::new()),
            front: thread_local::ThreadLocal::new(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// Connects and loads the script ([`SharedRedis::warm_up`]): `true` when Redis answered.
    pub async fn warm_up(&self) -> bool {
        self.redis.warm_up(&[&self.script]).await
    }

    /// The Redis key of `key`'s budget of `per_minute` requests per minute.
    pub fn key(&self, key: RateKey<'_>, per_minute: u32) -> String {
        let prefix = self.redis.prefix();
        match key {
            RateKey::Account(user) => format!("{prefix}rl:a:{}:{per_minute}", key_part(user)),
            RateKey::Ip(ip) => format!("{prefix}rl:ip:{ip}:{per_minute}"),
            RateKey::Widget(id) => format!("{prefix}rl:w:{}:{per_minute}", key_part(id)),
            RateKey::Channel { integration, ip } => {
                format!("{prefix}rl:ch:{}:{ip}:{per_minute}", key_part(integration))
            }
        }
    }

    /// Runs `f` on `key`'s slot, from this thread's map when fresher than [`FRONT_TTL`].
    fn with_slot<R>(
        &self,
        key: RateKey<'_>,
        limit: u32,
        now: Instant,
        f: impl FnOnce(&Arc<Slot>) -> R,
    ) -> R {
        let budget = Budget::of(key, limit);
        let hash = self.hasher.hash_one(budget);
        let mut front = self.front.get_or_default().borrow_mut();
        if let Some((slot, fetched)) = front.get(&hash) {
            if slot.counts(&budget) && now.saturating_duration_since(*fetched) < FRONT_TTL {
                return f(slot);
            }
        }
        let slot = self.shared_slot(key, &budget, now);
        if front.len() >= FRONT_CAPACITY {
            front.clear();
        }
        front.insert(hash, (Arc::clone(&slot), now));
        f(&slot)
    }

    /// The shared slot of `budget`, made on first use (when full, slots idle 2×[`FRONT_TTL`] go).
    fn shared_slot(&self, key: RateKey<'_>, budget: &Budget<'_>, now: Instant) -> Arc<Slot> {
        let redis_key = self.key(key, budget.limit);
        let mut shared = self
            .shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(slot) = shared.get(&redis_key) {
            return Arc::clone(slot);
        }
        if shared.len() >= MAX_RESERVATIONS {
            shared.retain(|_, slot| {
                let r = slot.state();
                r.leading_at(now) || now.saturating_duration_since(r.expires) < 2 * FRONT_TTL
            });
        }
        let slot = Arc::new(Slot {
            kind: budget.kind,
            id: budget.id.into(),
            ip: budget.ip,
            limit: budget.limit,
            redis_key: redis_key.clone(),
            state: std::sync::Mutex::new(Reservation::new(budget.limit, now)),
        });
        shared.insert(redis_key, Arc::clone(&slot));
        slot
    }

    /// Serves one request from the reservation if possible, else says: call Redis or wait;
    /// one call per key and instance leads, the others wait (≤ [`REDIS_TIMEOUT`]).
    fn take_reserved(slot: &Slot, limit: u32, now: Instant) -> Reserved {
        let mut r = slot.state();
        let leading = r.leading_at(now);
        if now < r.expires && r.left > 0 {
            let decision = r.serve(limit);
            if !leading && r.left < r.size / 2 {
                let size = r.lead(limit, now);
                return Reserved::Refill { decision, size };
            }
            return Reserved::Served(decision);
        }
        if leading {
            // Enabled before the lock is released: the leader's wake-up cannot be missed.
            let mut arrived = Box::pin(Arc::clone(&r.arrived).notified_owned());
            arrived.as_mut().enable();
            return Reserved::Wait(arrived);
        }
        let give_back = r.left;
        r.left = 0;
        let size = r.lead(limit, now);
        Reserved::Lead { size, give_back }
    }

    /// Ends the leading call; `kept` of the granted requests are this instance's to use later.
    fn keep_reserved(slot: &Slot, kept: i64, answer: Option<GcraAnswer>) {
        let (_, remaining, _, reset_at_us) = answer.unwrap_or_default();
        let left = u32::try_from(kept.max(0)).unwrap_or(0);
        let remaining = u32::try_from(remaining.max(0)).unwrap_or(0);
        let now = Instant::now();
        let mut r = slot.state();
        r.left = r.left.saturating_add(left);
        r.remaining = remaining;
        r.reset_at_us = reset_at_us;
        r.leading_until = None;
        r.expires = now + RESERVATION_TTL;
        r.arrived_at = now;
        r.used = 0;
        r.arrived.notify_waiters();
    }

    #[cfg(test)]
    fn next_size(&self, key: RateKey<'_>, per_minute: u32) -> u32 {
        self.with_slot(key, per_minute, Instant::now(), |slot| slot.state().size)
    }
}

enum Reserved {
    /// Allowed from the reservation.
    Served(RateDecision),
    /// Reserve `size`, giving back `give_back`; end with [`RedisLimiter::keep_reserved`].
    Lead { size: u32, give_back: u32 },
    /// Another request is taking the reservation: wait for it, then try again.
    Wait(std::pin::Pin<Box<tokio::sync::futures::OwnedNotified>>),
    /// Allowed, and half the reservation is spent: take the next one of `size` first.
    Refill { decision: RateDecision, size: u32 },
}

const MAX_WAITS: u32 = 3;

/// The script's answer: granted (0: refused), remaining, retry after (µs), reset at (epoch µs).
type GcraAnswer = (i64, i64, i64, i64);

fn whole_seconds_up(us: i64) -> i64 {
    us.max(0).saturating_add(999_999) / 1_000_000
}

fn decision(
    limit: u32,
    (granted, remaining, retry_after_us, reset_at_us): GcraAnswer,
) -> RateDecision {
    let allowed = granted >= 1;
    let remaining = remaining.saturating_add((granted - 1).max(0));
    RateDecision {
        allowed,
        limit,
        remaining: u32::try_from(remaining.clamp(0, i64::from(limit))).unwrap_or(0),
        reset_at: whole_seconds_up(reset_at_us),
        retry_after_secs: if allowed {
            0
        } else {
            u64::try_from(whole_seconds_up(retry_after_us))
                .unwrap_or(0)
                .max(1)
        },
    }
}

#[async_trait]
impl RateLimiter for RedisLimiter {
    async fn check(&self, key: RateKey<'_>, per_minute: u32) -> RateDecision {
        let limit = per_minute.max(1);
        if reservation_size(limit) <= 1 {
            let answer = self.count(&self.key(key, limit), limit, 1, 0).await;
            return match answer {
                Some(answer) => decision(limit, answer),
                None => self.fallback.decide(key, per_minute),
            };
        }
        let slot = self.with_slot(key, limit, Instant::now(), Arc::clone);
        let mut waits = 0;
        let (size, give_back, leads) = loop {
            match Self::take_reserved(&slot, limit, Instant::now()) {
                Reserved::Served(decision) => return decision,
                Reserved::Refill { decision, size } => {
                    self.refill(&slot, limit, size).await;
                    return decision;
                }
                Reserved::Lead { size, give_back } => break (size, give_back, true),
                Reserved::Wait(arrived) => {
                    waits += 1;
                    if waits > MAX_WAITS {
                        break (1, 0, false);
                    }
                    let _ = tokio::time::timeout(REDIS_TIMEOUT, arrived).await;
                }
            }
        };
        let answer = self.count(&slot.redis_key, limit, size, give_back).await;
        if leads {
            // This request uses one of the requests granted; the others are kept.
            let granted = answer.map_or(0, |(granted, ..)| granted);
            Self::keep_reserved(&slot, granted - 1, answer);
        }
        match answer {
            Some(answer) => decision(limit, answer),
            None => self.fallback.decide(key, per_minute),
        }
    }

    /// Answers from the reservation when no Redis call is needed; else `None`, counting nothing.
    fn check_now(&self, key: RateKey<'_>, per_minute: u32) -> Option<RateDecision> {
        let limit = per_minute.max(1);
        if reservation_size(limit) <= 1 {
            return None;
        }
        let now = Instant::now();
        self.with_slot(key, limit, now, |slot| {
            let mut r = slot.state();
            let serves =
                now < r.expires && r.left > 0 && (r.left > r.size / 2 || r.leading_at(now));
            serves.then(|| r.serve(limit))
        })
    }
}

impl RedisLimiter {
    /// Runs the GCRA script (take `size`, give back `give_back`); `None` when Redis did not answer.
    async fn count(
        &self,
        redis_key: &str,
        limit: u32,
        size: u32,
        give_back: u32,
    ) -> Option<GcraAnswer> {
        let script = &self.script;
        self.redis
            .run("to count a request", |mut connection| async move {
                script
                    .key(redis_key)
                    .arg(limit)
                    .arg(size)
                    .arg(give_back)
                    .invoke_async::<GcraAnswer>(&mut connection)
                    .await
            })
            .await
    }

    async fn refill(&self, slot: &Slot, limit: u32, size: u32) {
        let answer = self.count(&slot.redis_key, limit, size, 0).await;
        let granted = answer.map_or(0, |(granted, ..)| granted);
        Self::keep_reserved(slot, granted, answer);
    }
}

/// Test support: the tests' Redis (`AGENTCHAT_TEST_REDIS_URL`) under its own prefix.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    pub fn redis_url() -> String {
        std::env::var("AGENTCHAT_TEST_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
    }

    /// A key prefix no other test uses.
    pub fn unique_prefix() -> String {
        format!("t_{}:", uuid::Uuid::new_v4().simple())
    }

    /// A plain connection to the tests' Redis, to look at keys.
    pub async fn raw_connection() -> ::redis::aio::MultiplexedConnection {
        ::redis::Client::open(redis_url())
            .expect("a Redis URL")
            .get_multiplexed_async_connection()
            .await
            .unwrap_or_else(|e| panic!("Redis at {} does not answer: {e}", redis_url()))
    }

    /// A handle on the tests' Redis with `prefix`; panics when it does not answer within 2 s.
    pub async fn connect(prefix: &str) -> SharedRedis {
        let url = redis_url();
        let redis = SharedRedis::connect(&url, prefix).expect("a Redis URL");
        assert!(
            redis.warm_up(&[]).await,
            "Redis at {url} does not answer: start it (scripts/services.sh) or set \
             AGENTCHAT_TEST_REDIS_URL"
        );
        redis
    }
}

#[cfg(test)]
mod tests {
    use std::{collections::BTreeSet, net::IpAddr};

    use super::{testing::*, *};

    fn limiter(redis: SharedRedis) -> RedisLimiter {
        RedisLimiter::new(redis, Arc::new(GovernorLimiter::default()))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_checks_from_two_instances_allow_exactly_the_budget() {
        let prefix = unique_prefix();
        let a = Arc::new(limiter(connect(&prefix).await));
        let b = Arc::new(limiter(connect(&prefix).await));
        let checks: Vec<_> = (0..60)
            .map(|n| {
                let l = if n % 2 == 0 { a.clone() } else { b.clone() };
                tokio::spawn(async move { l.check(RateKey::Account("u1"), 30).await })
            })
            .collect();
        let mut decisions = Vec::new();
        for c in checks {
            decisions.push(c.await.unwrap());
        }
        assert_eq!(
            a.redis.fallbacks() + b.redis.fallbacks(),
            0,
            "Redis answered"
        );
        let allowed: Vec<_> = decisions.iter().filter(|d| d.allowed).collect();
        assert_eq!(allowed.len(), 30, "{decisions:?}");
        let remaining: BTreeSet<u32> = allowed.iter().map(|d| d.remaining).collect();
        assert_eq!(remaining, (0..30).collect(), "29..0, each once");
        for refused in decisions.iter().filter(|d| !d.allowed) {
            assert_eq!((refused.limit, refused.remaining), (30, 0));
            assert!((1..=2).contains(&refused.retry_after_secs), "{refused:?}");
        }
        a.redis.clear("*").await.unwrap();
    }

    #[tokio::test]
    async fn decisions_are_the_in_process_limiters() {
        let redis = limiter(connect(&unique_prefix()).await);
        let local = GovernorLimiter::default();
        let now = chrono::Utc::now().timestamp();
        for _ in 0..7 {
            let shared = redis.check(RateKey::Account("u"), 5).await;
            let own = local.check(RateKey::Account("u"), 5).await;
            assert_eq!(
                (shared.allowed, shared.limit, shared.remaining),
                (own.allowed, own.limit, own.remaining)
            );
            assert!(
                shared.reset_at.abs_diff(own.reset_at) <= 1,
                "{shared:?} {own:?}"
            );
            assert!(shared.reset_at >= now && shared.reset_at <= now + 61);
            assert!(
                shared.retry_after_secs.abs_diff(own.retry_after_secs) <= 1,
                "{shared:?} {own:?}"
            );
            if !shared.allowed {
                // A refill every 12 s; the wait is the rest of it.
                assert!((1..=12).contains(&shared.retry_after_secs), "{shared:?}");
            }
        }
        assert_eq!(redis.redis.fallbacks(), 0);
        redis.redis.clear("*").await.unwrap();
    }

    async fn redis_now_us(connection: &mut ::redis::aio::MultiplexedConnection) -> i64 {
        let (secs, micros): (i64, i64) =
            ::redis::cmd("TIME").query_async(connection).await.unwrap();
        secs * 1_000_000 + micros
    }

    async fn leave_available(
        connection: &mut ::redis::aio::MultiplexedConnection,
        key: &str,
        limit: i64,
        available: i64,
    ) {
        let t = 60_000_000 / limit;
        let tat = redis_now_us(connection).await + t * (limit - 1) - t * (available - 1);
        let () = ::redis::cmd("SET")
            .arg(key)
            .arg(tat)
            .arg("PX")
            .arg(120_000)
            .query_async(connection)
            .await
            .unwrap();
    }

    async fn budget(
        limit: u32,
        available: i64,
    ) -> (RedisLimiter, ::redis::aio::MultiplexedConnection, String) {
        let l = limiter(connect(&unique_prefix()).await);
        let mut raw = raw_connection().await;
        let key = l.key(RateKey::Account("u"), limit);
        leave_available(&mut raw, &key, i64::from(limit), available).await;
        (l, raw, key)
    }

    async fn tat(connection: &mut ::redis::aio::MultiplexedConnection, key: &str) -> i64 {
        ::redis::cmd("GET")
            .arg(key)
            .query_async(connection)
            .await
            .unwrap()
    }

    #[test]
    fn budgets_of_2000_a_minute_or_more_are_reserved_a_thousandth_at_a_time() {
        for (limit, size) in [
            (1, 1),
            (30, 1),
            (1_999, 1),
            (2_000, 2),
            (5_500, 5),
            (64_000, 64),
            (1_000_000_000, 64),
        ] {
            assert_eq!(reservation_size(limit), size, "{limit}");
        }
    }

    #[test]
    fn the_next_reservation_lasts_20_ms_at_the_keys_pace_within_bounds() {
        let ms = Duration::from_millis;
        let billion = 1_000_000_000;
        // 32 requests in 2 ms: 320 would last 20 ms, but a reservation at most doubles.
        assert_eq!(next_reservation_size(billion, 64, 32, ms(2)), 128);
        assert_eq!(next_reservation_size(billion, 512, 256, ms(2)), 1_024);
        assert_eq!(
            next_reservation_size(billion, 1_024, 512, ms(1)),
            MAX_RESERVATION,
            "at most 1,024"
        );
        // 300 requests in 20 ms: 300.
        assert_eq!(next_reservation_size(billion, 256, 300, ms(20)), 300);
        // Slower: at least half the last one, never under the first size.
        assert_eq!(next_reservation_size(billion, 1_024, 10, ms(100)), 512);
        assert_eq!(next_reservation_size(billion, 100, 1, ms(100)), 64);
        // A thousandth of the budget at most.
        assert_eq!(next_reservation_size(200_000, 128, 1_000, ms(1)), 200);
        assert_eq!(next_reservation_size(5_000, 5, 1_000, ms(1)), 5);
        // Idle for ten spans: the first size again.
        assert_eq!(next_reservation_size(billion, 1_024, 10_000, ms(200)), 64);
        assert_eq!(next_reservation_size(1_999, 1, 1_000, ms(1)), 1, "none");
    }

    #[tokio::test]
    async fn a_busy_key_takes_larger_reservations_and_an_idle_one_the_first_size_again() {
        // 50 µs per request; reservations from 64 up to 1,024 (a thousandth is 1,200).
        let limit = 1_200_000;
        let (l, mut raw, key) = budget(limit, 1_000_000).await;
        let account = RateKey::Account("u");
        assert!(l.check(account, limit).await.allowed);
        assert_eq!(l.next_size(account, limit), 64);
        let before = tat(&mut raw, &key).await;
        let started = Instant::now();
        // As the middleware asks: from the reservation without a future when it can.
        for _ in 0..20_000 {
            let d = match l.check_now(account, limit) {
                Some(d) => d,
                None => l.check(account, limit).await,
            };
            assert!(d.allowed);
        }
        let elapsed = started.elapsed();
        if elapsed < Duration::from_millis(200) {
            assert_eq!(l.next_size(account, limit), MAX_RESERVATION, "{elapsed:?}");
        }
        // 20,000 requests, less the 63 left of the first reservation, plus what is left of
        // the last one (at most 1,024 and the one taken ahead of need).
        let taken = (tat(&mut raw, &key).await - before) / 50;
        assert!(
            (20_000 - 63..=20_000 + 2 * 1_024).contains(&taken),
            "{taken} taken"
        );
        assert_eq!(l.redis.fallbacks(), 0);
        tokio::time::sleep(10 * RESERVATION_SPAN + Duration::from_millis(20)).await;
        assert!(l.check(account, limit).await.allowed);
        assert_eq!(l.next_size(account, limit), 64, "idle: the first size");
        l.redis.clear("*").await.unwrap();
    }

    #[tokio::test]
    async fn a_reservation_serves_the_next_requests_without_redis_and_reports_the_same_counts() {
        let (l, mut raw, key) = budget(5_000, 1_000).await;
        let first = l.check(RateKey::Account("u"), 5_000).await;
        assert_eq!((first.allowed, first.remaining), (true, 999));
        let after_first = tat(&mut raw, &key).await;
        // Five taken at once (12 ms each): the next two come from them.
        for remaining in [998, 997] {
            let d = l.check(RateKey::Account("u"), 5_000).await;
            assert_eq!((d.allowed, d.remaining), (true, remaining));
            assert_eq!(d.reset_at, first.reset_at);
        }
        assert_eq!(tat(&mut raw, &key).await, after_first, "no Redis call");
        // The fourth leaves fewer than half: it takes the next five ahead of need.
        let fourth = l.check(RateKey::Account("u"), 5_000).await;
        assert_eq!((fourth.allowed, fourth.remaining), (true, 996));
        assert_eq!(tat(&mut raw, &key).await, after_first + 5 * 12_000);
        for remaining in [995, 994, 993] {
            let d = l.check(RateKey::Account("u"), 5_000).await;
            assert_eq!((d.allowed, d.remaining), (true, remaining));
        }
        assert_eq!(tat(&mut raw, &key).await, after_first + 5 * 12_000);
        l.redis.clear("*").await.unwrap();
    }

    #[tokio::test]
    async fn near_the_end_of_a_budget_requests_are_counted_one_by_one() {
        // Fewer than 64 × 2 left: a reservation would be more than 1/64 of them.
        let (l, mut raw, key) = budget(5_000, 100).await;
        let before = tat(&mut raw, &key).await;
        let d = l.check(RateKey::Account("u"), 5_000).await;
        assert_eq!((d.allowed, d.remaining), (true, 99));
        assert_eq!(
            tat(&mut raw, &key).await,
            before + 12_000,
            "one request taken"
        );
        let d = l.check(RateKey::Account("u"), 5_000).await;
        // 98, or 99 when more than the 12 ms of one request's share passed since the first
        // (a loaded machine): what is exact is the one call per request below.
        assert!(d.allowed && (98..=99).contains(&d.remaining), "{d:?}");
        assert_eq!(
            tat(&mut raw, &key).await,
            before + 2 * 12_000,
            "one call each"
        );
        l.redis.clear("*").await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_burst_on_one_instance_waits_for_one_reservation_instead_of_calling_redis() {
        // 937 µs per request; reservations of 64.
        let (l, mut raw, key) = budget(64_000, 10_000).await;
        let l = Arc::new(l);
        let before = tat(&mut raw, &key).await;
        let checks: Vec<_> = (0..64)
            .map(|_| {
                let l = l.clone();
                tokio::spawn(async move { l.check(RateKey::Account("u"), 64_000).await })
            })
            .collect();
        for c in checks {
            assert!(c.await.unwrap().allowed);
        }
        assert_eq!(l.redis.fallbacks(), 0);
        // One reservation of 64, and perhaps the next one taken when half was spent; a
        // call per waiting request would have taken 937 µs each.
        let taken = tat(&mut raw, &key).await - before;
        assert!(
            taken == 64 * 937 || taken == 128 * 937,
            "{} requests taken",
            taken / 937
        );
        l.redis.clear("*").await.unwrap();
    }

    #[tokio::test]
    async fn check_now_serves_from_the_first_half_of_a_reservation_only() {
        let (l, mut raw, key) = budget(64_000, 10_000).await;
        assert_eq!(l.check_now(RateKey::Account("u"), 64_000), None, "none yet");
        let first = l.check(RateKey::Account("u"), 64_000).await;
        // 9,999 left when no time passed since the budget was set; more when it did (one
        // request comes back every 937 µs), so the counts below start from this answer.
        assert!(first.allowed && first.remaining >= 9_999, "{first:?}");
        let held = tat(&mut raw, &key).await;
        for n in 0..31 {
            let d = l
                .check_now(RateKey::Account("u"), 64_000)
                .expect("from the reservation");
            assert_eq!((d.allowed, d.remaining), (true, first.remaining - 1 - n));
        }
        // 32 left: the next request takes the next reservation, through `check`.
        assert_eq!(l.check_now(RateKey::Account("u"), 64_000), None);
        assert_eq!(
            l.check_now(RateKey::Account("u"), 1_999),
            None,
            "no reservations"
        );
        assert_eq!(tat(&mut raw, &key).await, held, "no Redis call");
        l.redis.clear("*").await.unwrap();
    }

    #[tokio::test]
    async fn unused_reserved_requests_go_back_to_redis_after_100_ms() {
        let (l, mut raw, key) = budget(2_000, 500).await;
        assert!(l.check(RateKey::Account("u"), 2_000).await.allowed);
        // Two taken (30 ms each), one used.
        let held = tat(&mut raw, &key).await;
        tokio::time::sleep(RESERVATION_TTL + Duration::from_millis(20)).await;
        assert!(l.check(RateKey::Account("u"), 2_000).await.allowed);
        // The unused one went back, and two more were taken.
        assert_eq!(tat(&mut raw, &key).await, held - 30_000 + 2 * 30_000);
        l.redis.clear("*").await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn two_instances_with_reservations_never_allow_more_than_the_budget() {
        let prefix = unique_prefix();
        let a = Arc::new(limiter(connect(&prefix).await));
        let b = Arc::new(limiter(connect(&prefix).await));
        let mut raw = raw_connection().await;
        let key = a.key(RateKey::Account("u"), 2_000);
        // Reservations of 2 while 128 or more are left, then one at a time.
        leave_available(&mut raw, &key, 2_000, 150).await;
        let started = Instant::now();
        let checks: Vec<_> = (0..400)
            .map(|n| {
                let l = if n % 2 == 0 { a.clone() } else { b.clone() };
                tokio::spawn(async move { l.check(RateKey::Account("u"), 2_000).await })
            })
            .collect();
        let mut allowed = 0u64;
        for c in checks {
            allowed += u64::from(c.await.unwrap().allowed);
        }
        // One request comes back every 30 ms.
        let refilled = started.elapsed().as_micros() as u64 / 30_000 + 1;
        assert_eq!(a.redis.fallbacks() + b.redis.fallbacks(), 0);
        assert!(allowed <= 150 + refilled, "{allowed} allowed");
        // One reservation at a time per instance, and the last requests counted one at a
        // time: at most one reservation (of 2) left unused per instance.
        assert!(allowed >= 146, "{allowed} allowed");
        a.redis.clear("*").await.unwrap();
    }

    #[tokio::test]
    async fn a_plan_change_starts_a_full_budget() {
        let l = limiter(connect(&unique_prefix()).await);
        for _ in 0..3 {
            assert!(l.check(RateKey::Account("u"), 3).await.allowed);
        }
        assert!(!l.check(RateKey::Account("u"), 3).await.allowed);
        let upgraded = l.check(RateKey::Account("u"), 10).await;
        assert!(upgraded.allowed);
        assert_eq!((upgraded.limit, upgraded.remaining), (10, 9));
        l.redis.clear("*").await.unwrap();
    }

    #[tokio::test]
    async fn keys_have_the_prefix_and_expire_within_a_minute() {
        let prefix = unique_prefix();
        let l = limiter(connect(&prefix).await);
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        let long = "x".repeat(1000);
        let keys = [
            (RateKey::Account("u"), format!("{prefix}rl:a:u:7")),
            (RateKey::Ip(ip), format!("{prefix}rl:ip:10.1.2.3:7")),
            (RateKey::Widget("w"), format!("{prefix}rl:w:w:7")),
            (
                RateKey::Channel {
                    integration: "i",
                    ip,
                },
                format!("{prefix}rl:ch:i:10.1.2.3:7"),
            ),
        ];
        let mut connection = l.redis.connection.clone();
        for (key, expected) in keys {
            assert_eq!(l.key(key, 7), expected);
            let d = l.check(key, 7).await;
            assert_eq!((d.allowed, d.remaining), (true, 6), "separate budgets");
            let ttl: i64 = ::redis::cmd("PTTL")
                .arg(&expected)
                .query_async(&mut connection)
                .await
                .unwrap();
            assert!((1..=60_000).contains(&ttl), "{expected}: {ttl}");
        }
        let hashed = l.key(RateKey::Widget(&long), 7);
        assert!(hashed.len() < prefix.len() + 90, "{hashed}");
        assert_ne!(hashed, l.key(RateKey::Widget(&"y".repeat(1000)), 7));
        assert_eq!(l.redis.clear("*").await.unwrap(), 4);
    }

    #[tokio::test]
    async fn without_redis_the_instances_own_limits_answer_and_one_warning_is_logged() {
        // Nothing listens on port 9 (discard) of the loopback.
        let redis = SharedRedis::connect("redis://127.0.0.1:9", "t:").unwrap();
        let l = limiter(redis.clone());
        assert!(!l.warm_up().await);
        let started = Instant::now();
        let decisions =
            futures::future::join_all((0..20).map(|_| l.check(RateKey::Account("u"), 5))).await;
        assert_eq!(decisions.iter().filter(|d| d.allowed).count(), 5);
        for _ in 0..20 {
            let d = l.check(RateKey::Account("u"), 5).await;
            assert!(!d.allowed && d.retry_after_secs >= 1, "{d:?}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "calls do not wait once Redis is known to be away: {:?}",
            started.elapsed()
        );
        assert_eq!(
            redis.fallbacks(),
            41,
            "the warm-up and every check fell back"
        );
        assert_eq!(redis.warnings(), 1, "one warning, not one per request");
    }

    async fn forward_to_redis(listener: tokio::net::TcpListener) {
        let url = url::Url::parse(&redis_url()).expect("a Redis URL");
        let target = format!(
            "{}:{}",
            url.host_str().unwrap_or("127.0.0.1"),
            url.port().unwrap_or(6379)
        );
        while let Ok((mut client, _)) = listener.accept().await {
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut server) = tokio::net::TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn when_redis_answers_again_the_shared_budgets_are_used_again() {
        let prefix = unique_prefix();
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = closed.local_addr().unwrap();
        drop(closed);
        let redis = SharedRedis::connect(&format!("redis://{addr}"), &prefix).unwrap();
        let l = limiter(redis.clone());
        assert!(!l.warm_up().await, "nothing listens yet");
        assert!(l.check(RateKey::Account("u"), 5).await.allowed);
        let away = redis.fallbacks();
        assert!(away >= 2, "{away}");
        // Redis comes back at that address.
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        tokio::spawn(forward_to_redis(listener));
        let started = Instant::now();
        let shared = loop {
            let before = redis.fallbacks();
            let d = l.check(RateKey::Account("u"), 5).await;
            if redis.fallbacks() == before {
                break d;
            }
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "the connection is made again by itself"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(
            (shared.allowed, shared.remaining),
            (true, 4),
            "the first request Redis counted"
        );
        redis.clear("*").await.unwrap();
    }

    #[test]
    fn warnings_are_logged_at_most_once_a_minute() {
        let h = Health::new();
        let err = "connection refused";
        h.failed(0, "x", &err);
        assert_eq!(h.warnings.load(Ordering::Relaxed), 1);
        for ms in [1, 1_000, 30_000, 59_999] {
            h.failed(ms, "x", &err);
        }
        assert_eq!(h.warnings.load(Ordering::Relaxed), 1, "within the minute");
        h.failed(60_000, "x", &err);
        assert_eq!(h.warnings.load(Ordering::Relaxed), 2, "a minute later");
        h.succeeded();
        h.failed(60_001, "x", &err);
        h.failed(119_999, "x", &err);
        assert_eq!(h.warnings.load(Ordering::Relaxed), 2);
        h.failed(120_000, "x", &err);
        assert_eq!(h.warnings.load(Ordering::Relaxed), 3);
        assert_eq!(h.fallbacks.load(Ordering::Relaxed), 9);
    }

    #[test]
    fn redis_is_left_alone_for_a_second_after_three_failures_in_a_row() {
        let h = Health::new();
        let err = "timeout";
        h.failed(0, "x", &err);
        h.failed(10, "x", &err);
        assert!(!h.paused(11), "two failures do not pause");
        h.succeeded();
        h.failed(20, "x", &err);
        h.failed(30, "x", &err);
        assert!(!h.paused(31), "a success starts the count again");
        h.failed(40, "x", &err);
        assert!(h.paused(41) && h.paused(1_039));
        assert!(!h.paused(1_040), "tried again after a second");
        h.failed(1_050, "x", &err);
        assert!(h.paused(1_051), "a further failure pauses again");
    }
}
