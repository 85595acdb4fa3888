//! Request rate limits per plan (docs/api.md § Limits, § Plans and limits).
//! [`RateLimiter`] is the boundary: the in-process [`GovernorLimiter`] serves one instance,
//! the [`RedisLimiter`] (`REDIS_URL`) any number, falling back to a [`GovernorLimiter`] while
//! Redis does not answer. A budget of `n` per minute allows bursts of `n` and refills one
//! request every `60/n` seconds (GCRA).

mod governor;
mod redis;

use std::net::IpAddr;

use async_trait::async_trait;

#[cfg(test)]
pub(crate) use self::redis::testing as redis_testing;
pub use self::{
    governor::GovernorLimiter,
    redis::{RedisLimiter, SharedRedis, REDIS_TIMEOUT},
};

/// Whose budget a request counts against (docs/api.md § Plans and limits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateKey<'a> {
    Account(&'a str),
    Ip(IpAddr),
    /// A website widget's public chat, by integration id (its own budget).
    Widget(&'a str),
    /// A channel's inbound endpoint, by integration and client IP (`CHANNEL_REQUESTS_PER_MINUTE`).
    Channel {
        integration: &'a str,
        ip: IpAddr,
    },
}

/// The outcome of one check, with what the `X-RateLimit-*` headers report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateDecision {
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
    async fn check(&self, key: RateKey<'_>, per_minute: u32) -> RateDecision;

    /// [`RateLimiter::check`] without a boxed future, for limiters that answer at once; `None`
    /// (the default) means "call `check`" and counts nothing.
    fn check_now(&self, key: RateKey<'_>, per_minute: u32) -> Option<RateDecision> {
        let _ = (key, per_minute);
        None
    }
}
