//! Monthly token quotas (docs/api.md § Token quotas): the plan's (`TOKEN_QUOTAS`) and an API
//! key's (`monthlyTokenBudget`), counted from the stored usage of the calendar month (UTC),
//! and the alerts at 80 % and 100 % of each.
//!
//! A turn is admitted while what is stored is below the limit, so turns already running
//! when the last tokens go can overshoot it by their own tokens: at most the replies in
//! flight at that moment, on every instance together.

use std::sync::Arc;

use chrono::{DateTime, Datelike, NaiveDate, Utc};
use serde_json::json;

use crate::{
    clock::Clock,
    domain::Plan,
    ids::{ApiKeyId, UserId},
    mail::{Mail, Mailer},
    store::{AccountStore, ChatStore, StoreError},
    webhooks::{EventType, Events},
};

/// The shares of a quota at which its owner is told, in percent.
pub const ALERT_THRESHOLDS: [u8; 2] = [80, 100];

/// Who pays for a chat turn: the owner's plan and, for a turn made with an API key, the key
/// and its monthly budget.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Payer {
    /// The owner's plan; `None`: read from the account when a plan has a quota (live
    /// channels, whose callers are not the owner).
    pub plan: Option<Plan>,
    /// The API key, and its monthly budget in tokens (`None`: no budget).
    pub key: Option<(ApiKeyId, Option<u64>)>,
}

impl Payer {
    /// The payer of a turn `principal` makes: its plan, and its API key with the key's
    /// budget.
    pub fn of(principal: &crate::auth::Principal) -> Self {
        Self {
            plan: Some(principal.plan),
            key: match &principal.credential {
                crate::auth::Credential::ApiKey {
                    key_id,
                    monthly_token_budget,
                    ..
                } => Some((key_id.clone(), *monthly_token_budget)),
                crate::auth::Credential::Session { .. } => None,
            },
        }
    }
}

/// Which limit a [`QuotaState`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaKind {
    /// The plan's monthly quota (`TOKEN_QUOTAS`).
    Plan,
    /// An API key's `monthlyTokenBudget`.
    Key(ApiKeyId),
}

/// A limit a turn counts against, as the `X-Quota-*` headers show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaState {
    pub kind: QuotaKind,
    /// Tokens (prompt + completion) per calendar month.
    pub limit: u64,
    /// Tokens stored this month.
    pub used: u64,
    /// The start of next month (UTC), when the count starts again from zero.
    pub reset: DateTime<Utc>,
}

impl QuotaState {
    /// Tokens left this month (0 when spent or overshot).
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }

    /// Seconds from `now` until the reset, at least 1 (`Retry-After`).
    pub fn seconds_to_reset(&self, now: DateTime<Utc>) -> u64 {
        (self.reset - now).num_seconds().max(1) as u64
    }

    /// Whether no token is left.
    pub fn spent(&self) -> bool {
        self.used >= self.limit
    }

    /// What an answer over this limit says: which limit, and when it resets.
    pub fn exceeded_message(&self) -> String {
        let whose = match self.kind {
            QuotaKind::Plan => "The account's monthly token quota",
            QuotaKind::Key(_) => "This API key's monthly token budget",
        };
        format!(
            "{whose} of {} tokens is used up; it resets at {}",
            self.limit,
            crate::views::iso(self.reset)
        )
    }
}

/// The first day of `day`'s month and of the next one.
pub fn month_of(day: NaiveDate) -> (NaiveDate, NaiveDate) {
    let first = day.with_day(1).unwrap_or(day);
    let next = first
        .checked_add_months(chrono::Months::new(1))
        .unwrap_or(first);
    (first, next)
}

/// The monthly quotas, read from the store each time: exact on every instance.
#[derive(Clone)]
pub struct Quotas {
    plans: [Option<u64>; 4],
    chat: Arc<dyn ChatStore>,
    accounts: Arc<dyn AccountStore>,
    mailer: Mailer,
    events: Events,
    clock: Clock,
}

impl Quotas {
    /// The quotas of `plans` (`TOKEN_QUOTAS`, per [`Plan::index`]) and of API keys.
    pub fn new(
        plans: [Option<u64>; 4],
        chat: Arc<dyn ChatStore>,
        accounts: Arc<dyn AccountStore>,
        mailer: Mailer,
        events: Events,
        clock: Clock,
    ) -> Self {
        Self {
            plans,
            chat,
            accounts,
            mailer,
            events,
            clock,
        }
    }

    /// Whether any plan has a quota.
    fn any_plan_quota(&self) -> bool {
        self.plans.iter().any(Option::is_some)
    }

    /// The limits `payer` has this month with their use, the plan's first; none without
    /// quotas. Reads the plan of `user_id` when `payer` does not name it.
    /// Errors: the store's.
    pub async fn states(
        &self,
        user_id: &UserId,
        payer: &Payer,
    ) -> Result<Vec<QuotaState>, StoreError> {
        let key_budget = payer.key.as_ref().and_then(|(id, b)| b.map(|b| (id, b)));
        if key_budget.is_none() && !self.any_plan_quota() {
            return Ok(Vec::new());
        }
        let now = self.clock.now();
        let (first, next) = month_of(now.date_naive());
        let reset = next.and_time(chrono::NaiveTime::MIN).and_utc();
        let mut states = Vec::new();
        let plan = match payer.plan {
            Some(plan) => Some(plan),
            None if self.any_plan_quota() => {
                self.accounts.user_by_id(user_id).await?.map(|u| u.plan)
            }
            None => None,
        };
        if let Some(limit) = plan.and_then(|p| self.plans[p.index()]) {
            let used: i64 = self
                .chat
                .usage(user_id, first)
                .await?
                .iter()
                .map(|d| d.prompt_tokens + d.completion_tokens)
                .sum();
            states.push(QuotaState {
                kind: QuotaKind::Plan,
                limit,
                used: used.max(0) as u64,
                reset,
            });
        }
        if let Some((key, limit)) = key_budget {
            let used = self
                .chat
                .key_usage(key, &first.format("%Y-%m").to_string())
                .await?;
            states.push(QuotaState {
                kind: QuotaKind::Key(key.clone()),
                limit,
                used,
                reset,
            });
        }
        Ok(states)
    }

    /// Admits a turn of `payer`: the limit with the fewest tokens left (for the `X-Quota-*`
    /// headers; `None` without quotas), or the spent one as the error, whose alerts are
    /// then sent if they were not. Errors: the store's, as `Err(Err(_))`.
    pub async fn admit(
        &self,
        user_id: &UserId,
        payer: &Payer,
    ) -> Result<Option<QuotaState>, Result<QuotaState, StoreError>> {
        let states = self.states(user_id, payer).await.map_err(Err)?;
        if let Some(spent) = states.iter().find(|s| s.spent()) {
            self.alert(user_id, &states).await;
            return Err(Ok(spent.clone()));
        }
        Ok(states.into_iter().min_by_key(QuotaState::remaining))
    }

    /// After a turn of `payer` was stored: sends the alerts its use has reached, in a task
    /// of its own. Nothing is read without quotas.
    pub fn after_turn(&self, user_id: &UserId, payer: &Payer) {
        if payer.key.as_ref().is_none_or(|(_, b)| b.is_none()) && !self.any_plan_quota() {
            return;
        }
        let (quotas, user_id, payer) = (self.clone(), user_id.clone(), payer.clone());
        tokio::spawn(async move {
            match quotas.states(&user_id, &payer).await {
                Ok(states) => quotas.alert(&user_id, &states).await,
                Err(e) => tracing::warn!(error = %e, "reading the usage for quota alerts failed"),
            }
        });
    }

    /// Sends each alert `states` have reached and no instance has sent yet this month: an
    /// email to the owner and a `usage.threshold` event. The store's claim of the alert
    /// (one row per account, quota, month and threshold) makes it once.
    async fn alert(&self, user_id: &UserId, states: &[QuotaState]) {
        for state in states {
            for threshold in ALERT_THRESHOLDS {
                if u128::from(state.used) * 100 < u128::from(state.limit) * u128::from(threshold) {
                    continue;
                }
                let month = state.reset - chrono::Duration::days(1);
                let month = month.format("%Y-%m").to_string();
                let subject = match &state.kind {
                    QuotaKind::Plan => "plan",
                    QuotaKind::Key(id) => id.as_str(),
                };
                let claimed = self
                    .chat
                    .claim_usage_alert(user_id, subject, &month, threshold, self.clock.now())
                    .await;
                match claimed {
                    Ok(true) => self.send_alert(user_id, state, threshold, &month).await,
                    Ok(false) => {}
                    Err(e) => tracing::warn!(error = %e, "claiming a usage alert failed"),
                }
            }
        }
    }

    async fn send_alert(&self, user_id: &UserId, state: &QuotaState, threshold: u8, month: &str) {
        let (quota, key_id) = match &state.kind {
            QuotaKind::Plan => ("plan", None),
            QuotaKind::Key(id) => ("apiKey", Some(id.as_str())),
        };
        self.events
            .emit(
                user_id,
                EventType::UsageThreshold,
                json!({
                    "quota": quota,
                    "apiKeyId": key_id,
                    "threshold": threshold,
                    "limit": state.limit,
                    "used": state.used,
                    "month": month,
                    "resetAt": crate::views::iso(state.reset),
                }),
            )
            .await;
        let user = match self.accounts.user_by_id(user_id).await {
            Ok(Some(user)) => user,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "reading the account for a usage alert failed");
                return;
            }
        };
        let what = match &state.kind {
            QuotaKind::Plan => "Your account's monthly token quota".to_string(),
            QuotaKind::Key(id) => format!("The monthly token budget of API key {id}"),
        };
        self.mailer.send_later(Mail {
            to: user.email.as_str().to_string(),
            subject: format!("AgentChat: {threshold} % of your monthly tokens used"),
            body: format!(
                "{what} is {threshold} % used: {} of {} tokens in {month}.\n\n{}It starts again at {} (UTC).\n",
                state.used,
                state.limit,
                if threshold >= 100 {
                    "Chats counted against it are refused until then. "
                } else {
                    ""
                },
                crate::views::iso(state.reset),
            ),
            link: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_month_runs_to_the_first_of_the_next() {
        let day = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).unwrap();
        assert_eq!(
            month_of(day(2026, 11, 30)),
            (day(2026, 11, 1), day(2026, 12, 1))
        );
        assert_eq!(
            month_of(day(2026, 12, 31)),
            (day(2026, 12, 1), day(2027, 1, 1))
        );
        assert_eq!(
            month_of(day(2028, 2, 29)),
            (day(2028, 2, 1), day(2028, 3, 1))
        );
    }

    #[test]
    fn a_state_is_spent_at_its_limit_and_names_its_reset() {
        let state = QuotaState {
            kind: QuotaKind::Plan,
            limit: 1_000,
            used: 999,
            reset: NaiveDate::from_ymd_opt(2026, 12, 1)
                .unwrap()
                .and_time(chrono::NaiveTime::MIN)
                .and_utc(),
        };
        assert!(!state.spent());
        assert_eq!(state.remaining(), 1);
        let over = QuotaState {
            used: 1_500,
            ..state
        };
        assert!(over.spent());
        assert_eq!(over.remaining(), 0);
        assert_eq!(
            over.exceeded_message(),
            "The account's monthly token quota of 1000 tokens is used up; it resets at 2026-12-01T00:00:00Z"
        );
    }
}
