//! The limits part: the plans' budgets and the inbound channel endpoints' budget.

use anyhow::Context;

use super::Settings;
use crate::domain::Plan;

/// Default of `REDIS_KEY_PREFIX`: what every key this service writes in Redis starts with.
pub const REDIS_KEY_PREFIX: &str = "agentchat:";

/// Default of `CHANNEL_REQUESTS_PER_MINUTE`: requests per minute from one client IP to one
/// integration's inbound channel endpoint (20 a second).
pub const CHANNEL_REQUESTS_PER_MINUTE: u32 = 1_200;

/// What the plans allow (docs/api.md § Plans and limits) and the inbound channel budget.
#[derive(Clone)]
pub struct LimitsConfig {
    /// `AGENT_LIMITS`: agents allowed per plan as `free=3,starter=10,business=50,pro=500`.
    pub agent_limits: [u32; 4],
    /// `RATE_LIMITS`: requests per minute per plan, same form; default 100/500/2000/10000.
    pub rate_limits: [u32; 4],
    /// `TOKEN_QUOTAS`: tokens per calendar month (UTC) per plan; `None` is unlimited.
    pub token_quotas: [Option<u64>; 4],
    /// `CHANNEL_REQUESTS_PER_MINUTE`: requests per minute one client IP may send to one
    /// integration's inbound channel endpoint, counted before its secret is checked; at
    /// least 1. Over it: 429 (README § Limits).
    pub channel_requests_per_minute: u32,
    /// `REDIS_URL`: when set, rate limits, the sign-in throttle and the mail cooldown are
    /// shared by every instance through it (README § Running several instances); unset,
    /// kept in process. May hold a password: never logged.
    pub redis_url: Option<String>,
    /// `REDIS_KEY_PREFIX`: what every Redis key starts with, so installations can share one.
    pub redis_key_prefix: String,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            agent_limits: Plan::ALL.map(Plan::default_agent_limit),
            rate_limits: Plan::ALL.map(Plan::requests_per_minute),
            token_quotas: [None; 4],
            channel_requests_per_minute: CHANNEL_REQUESTS_PER_MINUTE,
            redis_url: None,
            redis_key_prefix: REDIS_KEY_PREFIX.into(),
        }
    }
}

impl LimitsConfig {
    /// Takes the Redis, plan-limit and channel-budget variables from `settings`.
    pub(super) fn apply(&mut self, settings: &Settings) {
        self.redis_url = settings.redis_url.clone();
        self.redis_key_prefix = settings.redis_key_prefix.clone();
        self.agent_limits = settings.agent_limits;
        self.rate_limits = settings.rate_limits;
        self.token_quotas = settings.token_quotas;
        self.channel_requests_per_minute = settings.channel_requests_per_minute;
    }

    /// Agents allowed on `plan`.
    pub fn agent_limit(&self, plan: Plan) -> u32 {
        self.agent_limits[plan.index()]
    }

    /// Requests per minute allowed on `plan`.
    pub fn rate_limit(&self, plan: Plan) -> u32 {
        self.rate_limits[plan.index()]
    }

    /// Tokens per calendar month allowed on `plan`; `None`: unlimited.
    pub fn token_quota(&self, plan: Plan) -> Option<u64> {
        self.token_quotas[plan.index()]
    }
}

/// Parses monthly token quotas per plan such as `free=200000,starter=2000000` (any subset;
/// plans not named, and an empty text, are unlimited). `name` is the variable, for errors.
pub fn parse_plan_quotas(name: &str, raw: &str) -> anyhow::Result<[Option<u64>; 4]> {
    let mut quotas = [None; 4];
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (plan, n) = part
            .split_once('=')
            .with_context(|| format!("{name} entries look like plan=tokens"))?;
        let plan: Plan = plan.parse().map_err(anyhow::Error::msg)?;
        let n: u64 = n
            .trim()
            .parse()
            .with_context(|| format!("{name} numbers must be whole numbers of tokens"))?;
        anyhow::ensure!(n > 0, "{name} numbers must be at least 1");
        quotas[plan.index()] = Some(n);
    }
    Ok(quotas)
}

/// Parses per-plan numbers such as `free=3,starter=10,business=50,pro=500` (any subset;
/// plans not named keep `defaults`). `name` is the variable, for error messages.
pub fn parse_plan_numbers(name: &str, raw: &str, defaults: [u32; 4]) -> anyhow::Result<[u32; 4]> {
    let mut limits = defaults;
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (plan, n) = part
            .split_once('=')
            .with_context(|| format!("{name} entries look like plan=number"))?;
        let plan: Plan = plan.parse().map_err(anyhow::Error::msg)?;
        let n: u32 = n
            .trim()
            .parse()
            .with_context(|| format!("{name} numbers must be whole numbers"))?;
        anyhow::ensure!(n > 0, "{name} numbers must be at least 1");
        limits[plan.index()] = n;
    }
    Ok(limits)
}

/// Parses a budget in requests per minute such as `1200`: a whole number from 1 to
/// `u32::MAX`, surrounding spaces ignored. `name` is the variable, for error messages.
pub fn parse_per_minute(name: &str, raw: &str) -> anyhow::Result<u32> {
    let n: u32 = raw
        .trim()
        .parse()
        .with_context(|| format!("{name} must be a whole number of requests per minute"))?;
    anyhow::ensure!(n > 0, "{name} must be at least 1");
    Ok(n)
}
