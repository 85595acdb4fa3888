//! The in-process limiter: GCRA from the `governor` crate, one state per key in this
//! process (one instance; and the fallback of [`super::RedisLimiter`]).

use std::{
    collections::HashMap,
    hash::Hash,
    net::IpAddr,
    num::NonZeroU32,
    sync::{Arc, RwLock},
    time::Duration,
};

use ::governor::{
    clock::{Clock, DefaultClock},
    middleware::StateInformationMiddleware,
    state::keyed::DefaultKeyedStateStore,
    Quota,
};
use async_trait::async_trait;

use super::{RateDecision, RateKey, RateLimiter};

type KeyedLimiter<K> =
    ::governor::RateLimiter<K, DefaultKeyedStateStore<K>, DefaultClock, StateInformationMiddleware>;
type DirectLimiter = ::governor::RateLimiter<
    ::governor::state::NotKeyed,
    ::governor::state::InMemoryState,
    DefaultClock,
    StateInformationMiddleware,
>;
type Checked = Result<
    ::governor::middleware::StateSnapshot,
    ::governor::NotUntil<::governor::clock::QuantaInstant>,
>;

/// How long a worker thread uses an account's limiter before asking the shared map again.
const FRONT_LIMITER_TTL: Duration = Duration::from_secs(60);
/// An account's limiter unused this long is dropped (its budget has refilled); longer than
/// [`FRONT_LIMITER_TTL`], so no thread still uses a dropped one.
const ACCOUNT_LIMITER_IDLE: Duration = Duration::from_secs(120);
/// Most accounts one worker thread remembers; it starts over when full.
const FRONT_LIMITER_CAPACITY: usize = 4_096;

/// Per-account GCRA limiters in a concurrent map; each worker thread caches the ones it
/// used lately, so a check touches only the account's own atomic state (a keyed limiter's
/// shard lock would be contended across cores).
struct AccountBudgets {
    shared: moka::sync::Cache<(u32, String), Arc<DirectLimiter>>,
    front: thread_local::ThreadLocal<std::cell::RefCell<HashMap<String, FrontLimiter>>>,
}

struct FrontLimiter {
    per_minute: u32,
    limiter: Arc<DirectLimiter>,
    fetched: std::time::Instant,
}

impl Default for AccountBudgets {
    fn default() -> Self {
        Self {
            shared: moka::sync::Cache::builder()
                .time_to_idle(ACCOUNT_LIMITER_IDLE)
                .build(),
            front: thread_local::ThreadLocal::new(),
        }
    }
}

impl AccountBudgets {
    fn check(&self, user_id: &str, per_minute: NonZeroU32) -> Checked {
        let mut front = self.front.get_or_default().borrow_mut();
        if let Some(f) = front.get(user_id) {
            if f.per_minute == per_minute.get() && f.fetched.elapsed() < FRONT_LIMITER_TTL {
                return f.limiter.check();
            }
        }
        let limiter = self
            .shared
            .get_with((per_minute.get(), user_id.to_owned()), || {
                Arc::new(
                    ::governor::RateLimiter::direct(Quota::per_minute(per_minute))
                        .with_middleware::<StateInformationMiddleware>(),
                )
            });
        if front.len() >= FRONT_LIMITER_CAPACITY {
            front.clear();
        }
        front.insert(
            user_id.to_owned(),
            FrontLimiter {
                per_minute: per_minute.get(),
                limiter: limiter.clone(),
                fetched: std::time::Instant::now(),
            },
        );
        limiter.check()
    }

    fn prune(&self) {
        self.shared.run_pending_tasks();
    }
}

/// Keyed GCRA limiters of one kind of key, one per distinct budget.
struct Budgets<K: Hash + Eq + Clone> {
    /// Budgets known at start-up, read without a lock.
    known: HashMap<u32, KeyedLimiter<K>>,
    more: RwLock<HashMap<u32, Arc<KeyedLimiter<K>>>>,
}

fn keyed<K: Hash + Eq + Clone>(per_minute: NonZeroU32) -> KeyedLimiter<K> {
    ::governor::RateLimiter::keyed(Quota::per_minute(per_minute))
        .with_middleware::<StateInformationMiddleware>()
}

impl<K: Hash + Eq + Clone> Budgets<K> {
    fn new(known: &[u32]) -> Self {
        Self {
            known: known
                .iter()
                .filter_map(|&n| Some((n, keyed(NonZeroU32::new(n)?))))
                .collect(),
            more: RwLock::default(),
        }
    }

    /// Counts a request: its state when allowed, else the earliest time it would be.
    fn check(&self, key: &K, per_minute: NonZeroU32) -> Checked {
        if let Some(limiter) = self.known.get(&per_minute.get()) {
            return limiter.check_key(key);
        }
        {
            let more = self.more.read().unwrap_or_else(|e| e.into_inner());
            if let Some(limiter) = more.get(&per_minute.get()) {
                return limiter.check_key(key);
            }
        }
        let limiter = self
            .more
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(per_minute.get())
            .or_insert_with(|| Arc::new(keyed(per_minute)))
            .clone();
        limiter.check_key(key)
    }

    fn prune(&self) {
        let more = self.more.read().unwrap_or_else(|e| e.into_inner());
        for limiter in self.known.values().chain(more.values().map(|l| l.as_ref())) {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }
}

/// In-process GCRA limiter: accounts, client IPs, widgets and channel endpoints in separate
/// keyed limiters, one per distinct budget.
pub struct GovernorLimiter {
    accounts: AccountBudgets,
    ips: Budgets<IpAddr>,
    widgets: Budgets<String>,
    channels: Budgets<(String, IpAddr)>,
}

impl Default for GovernorLimiter {
    fn default() -> Self {
        Self::new(&[], &[])
    }
}

impl GovernorLimiter {
    /// A limiter with client-IP limiters ready for `budgets` and channel limiters for
    /// `channel_budgets` (requests per minute); other budgets and accounts get theirs on first use.
    pub fn new(budgets: &[u32], channel_budgets: &[u32]) -> Self {
        Self {
            accounts: AccountBudgets::default(),
            ips: Budgets::new(budgets),
            widgets: Budgets::new(&[]),
            channels: Budgets::new(channel_budgets),
        }
    }

    /// Forgets keys whose budget is full again (bounded memory); call periodically.
    pub fn prune(&self) {
        self.accounts.prune();
        self.ips.prune();
        self.widgets.prune();
        self.channels.prune();
    }
}

fn epoch_after(wait: Duration) -> i64 {
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        + wait;
    i64::try_from(at.as_secs()).unwrap_or(i64::MAX) + i64::from(at.subsec_nanos() > 0)
}

#[async_trait]
impl RateLimiter for GovernorLimiter {
    async fn check(&self, key: RateKey<'_>, per_minute: u32) -> RateDecision {
        self.decide(key, per_minute)
    }

    fn check_now(&self, key: RateKey<'_>, per_minute: u32) -> Option<RateDecision> {
        Some(self.decide(key, per_minute))
    }
}

impl GovernorLimiter {
    /// The decision for one request of `key` against `per_minute` (0 counts as 1).
    pub(super) fn decide(&self, key: RateKey<'_>, per_minute: u32) -> RateDecision {
        let limit = NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN);
        let period = Duration::from_secs(60) / limit.get();
        let checked = match key {
            RateKey::Account(user_id) => self.accounts.check(user_id, limit),
            RateKey::Ip(ip) => self.ips.check(&ip, limit),
            RateKey::Widget(id) => self.widgets.check(&id.to_owned(), limit),
            RateKey::Channel { integration, ip } => {
                self.channels.check(&(integration.to_owned(), ip), limit)
            }
        };
        match checked {
            Ok(snapshot) => {
                let remaining = snapshot.remaining_burst_capacity();
                RateDecision {
                    allowed: true,
                    limit: limit.get(),
                    remaining,
                    reset_at: epoch_after(period * (limit.get() - remaining)),
                    retry_after_secs: 0,
                }
            }
            Err(not_until) => {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                RateDecision {
                    allowed: false,
                    limit: limit.get(),
                    remaining: 0,
                    reset_at: epoch_after(wait + period * (limit.get() - 1)),
                    retry_after_secs: wait.as_secs_f64().ceil().max(1.0) as u64,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_budget_allows_its_burst_then_refuses_with_retry_after() {
        // 5 is created on first use; 7 is known from the start.
        let l = GovernorLimiter::new(&[7], &[]);
        for _ in 0..7 {
            assert!(l.check(RateKey::Account("c"), 7).await.allowed);
        }
        assert!(!l.check(RateKey::Account("c"), 7).await.allowed);
        // check_now counts against the same budget as check.
        let d = l.check_now(RateKey::Account("d"), 7).unwrap();
        assert_eq!((d.allowed, d.remaining), (true, 6));
        assert_eq!(l.check(RateKey::Account("d"), 7).await.remaining, 5);
        let now = chrono::Utc::now().timestamp();
        for i in 0..5 {
            let d = l.check(RateKey::Account("a"), 5).await;
            assert!(d.allowed);
            assert_eq!((d.limit, d.remaining), (5, 4 - i));
            assert!(d.reset_at >= now && d.reset_at <= now + 61);
        }
        let d = l.check(RateKey::Account("a"), 5).await;
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
        assert!((1..=12).contains(&d.retry_after_secs), "{d:?}");
        assert!(
            l.check(RateKey::Account("b"), 5).await.allowed,
            "keys are independent"
        );
    }

    #[test]
    fn threads_share_an_accounts_budget() {
        let l = GovernorLimiter::default();
        let allowed: u32 = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        (0..50)
                            .filter(|_| l.check_now(RateKey::Account("a"), 60).unwrap().allowed)
                            .count() as u32
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).sum()
        });
        // 60 per minute: a burst of 60 (plus at most one refilled while the threads ran).
        assert!((60..=61).contains(&allowed), "{allowed}");
        // Another budget for the account (a plan change) starts full.
        assert!(l.check_now(RateKey::Account("a"), 100).unwrap().allowed);
    }

    #[tokio::test]
    async fn accounts_client_ips_widgets_and_channels_have_separate_budgets() {
        let l = GovernorLimiter::new(&[1], &[1]);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(l.check(RateKey::Account("127.0.0.1"), 1).await.allowed);
        assert!(!l.check(RateKey::Account("127.0.0.1"), 1).await.allowed);
        assert!(
            l.check(RateKey::Ip(ip), 1).await.allowed,
            "not the account's"
        );
        assert!(!l.check(RateKey::Ip(ip), 1).await.allowed);
        assert!(l.check(RateKey::Widget("127.0.0.1"), 1).await.allowed);
        let channel = |integration, ip| RateKey::Channel { integration, ip };
        assert!(l.check(channel("127.0.0.1", ip), 1).await.allowed);
        assert!(!l.check(channel("127.0.0.1", ip), 1).await.allowed);
        assert!(
            l.check(channel("other", ip), 1).await.allowed,
            "per integration"
        );
        let elsewhere: IpAddr = "127.0.0.5".parse().unwrap();
        assert!(
            l.check(channel("127.0.0.1", elsewhere), 1).await.allowed,
            "per client IP"
        );
        l.prune();
        assert!(
            !l.check(RateKey::Ip(ip), 1).await.allowed,
            "pruning keeps used budgets"
        );
    }
}
