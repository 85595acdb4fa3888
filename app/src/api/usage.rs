//! An account's chat use per month and per day, and the limits of its plan (docs/api.md
//! § Limits).

use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use utoipa::ToSchema;

// Only for the doc link below: a path written into the link would show in the OpenAPI
// description, which is the doc comment as written.
#[cfg(doc)]
use super::chat::TokensUsed;

/// The limits of the user's plan (docs/api.md § Limits; `RATE_LIMITS`, `AGENT_LIMITS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PlanLimits {
    /// Requests per minute, counted per account (API keys count toward their owner).
    pub requests_per_minute: u32,
    /// Agents the account may own at once; creating one more answers 403.
    pub agents: u32,
    /// Tokens (prompt + completion) per calendar month (UTC, `TOKEN_QUOTAS`); null:
    /// unlimited.
    #[serde(default)]
    pub monthly_tokens: Option<u64>,
}

/// A monthly token quota or an API key's budget, and its use this month.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct QuotaInfo {
    /// Tokens per calendar month.
    pub limit: u64,
    /// Tokens used this month.
    pub used: u64,
    /// Tokens left (0 once spent).
    pub remaining: u64,
    /// When the month's count starts again (the next month's first second, UTC).
    pub reset_at: String,
}

/// Tokens over a period (may exceed `u32`, unlike one reply's [`TokensUsed`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct TokenTotals {
    pub prompt: u64,
    pub completion: u64,
    pub total: u64,
}

/// One UTC day of an account's chat use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct UsageDayInfo {
    /// `YYYY-MM-DD` (UTC).
    pub date: String,
    /// Chat replies that day.
    pub chats: u64,
    pub tokens: TokenTotals,
}

/// `GET /api/usage` answer: the account's chat use this calendar month (UTC) and per day.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct UsageResponse {
    /// The current month, `YYYY-MM` (UTC).
    pub month: String,
    pub chats_this_month: u64,
    pub tokens_this_month: TokenTotals,
    /// Every day of the requested window, oldest first, today last (zeros included).
    pub days: Vec<UsageDayInfo>,
    /// The plan's monthly token quota; null: unlimited.
    #[serde(default)]
    pub quota: Option<QuotaInfo>,
    /// For a call with an API key that has a monthly budget: the budget and its use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_budget: Option<QuotaInfo>,
}
