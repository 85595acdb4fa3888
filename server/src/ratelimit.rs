//! Request rate limits per plan (contract § Limits; api.md § Plans and limits).
//!
//! [`RateLimiter`] is the boundary: the in-process [`GovernorLimiter`] (GCRA from the
//! `governor` crate) serves one instance; a Redis-backed implementation can serve several
//! without touching the HTTP layer. A budget of `n` requests per minute allows bursts of
//! `n` and refills one request every `60/n` seconds.

use std::{
    collections::HashMap,
    num::NonZeroU32,
    sync::{Arc, RwLock},
    time::Duration,
};

use async_trait::async_trait;
use governor::{
    clock::{Clock, DefaultClock},
    middleware::StateInformationMiddleware,
    state::keyed::DefaultKeyedStateStore,
    Quota,
};

type KeyedLimiter = governor::RateLimiter<
    String,
    DefaultKeyedStateStore<String>,
    DefaultClock,
    StateInformationMiddleware,
>;

/// The outcome of one check, with what the `X-RateLimit-*` headers report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateDecision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// `X-RateLimit-Limit`: requests per minute of the budget.
    pub limit: u32,
    /// `X-RateLimit-Remaining`: requests that may still be made right now.
    pub remaining: u32,
    /// `X-RateLimit-Reset`: Unix epoch seconds at which the full budget is available again.
    pub reset_at: i64,
    /// `Retry-After` in seconds when refused (at least 1); 0 when allowed.
    pub retry_after_secs: u64,
}

/// Counts requests against per-key budgets.
#[async_trait]
pub trait RateLimiter: Send + Sync + 'static {
    /// Counts one request of `key` against a budget of `per_minute` requests per minute.
    async fn check(&self, key: &str, per_minute: u32) -> RateDecision;
}

/// In-process GCRA limiter, one keyed limiter per distinct budget.
#[derive(Default)]
pub struct GovernorLimiter {
    limiters: RwLock<HashMap<u32, Arc<KeyedLimiter>>>,
}

impl GovernorLimiter {
    fn limiter(&self, per_minute: NonZeroU32) -> Arc<KeyedLimiter> {
        if let Some(l) = self
            .limiters
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&per_minute.get())
        {
            return l.clone();
        }
        self.limiters
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(per_minute.get())
            .or_insert_with(|| {
                Arc::new(
                    governor::RateLimiter::keyed(Quota::per_minute(per_minute))
                        .with_middleware::<StateInformationMiddleware>(),
                )
            })
            .clone()
    }

    /// Forgets keys whose budget is full again (bounded memory); call periodically.
    pub fn prune(&self) {
        for limiter in self
            .limiters
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }
}

fn epoch_after(wait: Duration) -> i64 {
    let now = chrono::Utc::now();
    (now + chrono::Duration::from_std(wait).unwrap_or_default()).timestamp()
        + i64::from(wait.subsec_nanos() > 0)
}

#[async_trait]
impl RateLimiter for GovernorLimiter {
    async fn check(&self, key: &str, per_minute: u32) -> RateDecision {
        let limit = NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN);
        let limiter = self.limiter(limit);
        let period = Duration::from_secs(60) / limit.get();
        match limiter.check_key(&key.to_string()) {
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
        let l = GovernorLimiter::default();
        let now = chrono::Utc::now().timestamp();
        for i in 0..5 {
            let d = l.check("user:a", 5).await;
            assert!(d.allowed);
            assert_eq!((d.limit, d.remaining), (5, 4 - i));
            assert!(d.reset_at >= now && d.reset_at <= now + 61);
        }
        let d = l.check("user:a", 5).await;
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
        assert!((1..=12).contains(&d.retry_after_secs), "{d:?}");
        assert!(l.check("user:b", 5).await.allowed, "keys are independent");
    }
}
