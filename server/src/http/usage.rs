//! `GET /api/usage`: the account's chat use — replies and tokens this calendar month and
//! per day — for the dashboard's account page and for programs. Counted per UTC day when
//! each reply is stored (`Store::append_message`), so deleting threads or agents does not
//! lower it ([`crate::chat::ChatService::usage`]). API keys need `chat:read`.

use app::api::{ErrorBody, QuotaInfo, TokenTotals, UsageDayInfo, UsageResponse};
use axum::{extract::State, Json};
use chrono::NaiveDate;
use serde::Deserialize;
use tracing::instrument;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::openapi::{BadRequest, RateLimited};
use super::{
    extract::{ApiQuery, Auth},
    AppState,
};
use crate::{auth::Credential, domain::Scope, http::error::ApiResult, store::UsageDay};

/// The usage route.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(usage))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct UsageQuery {
    /// Days in the per-day list, today included (1..=366, default 30).
    days: Option<u32>,
}

fn totals(days: &[&UsageDay]) -> (u64, TokenTotals) {
    let mut chats = 0u64;
    let mut t = TokenTotals::default();
    for d in days {
        chats += d.chats.max(0) as u64;
        t.prompt += d.prompt_tokens.max(0) as u64;
        t.completion += d.completion_tokens.max(0) as u64;
    }
    t.total = t.prompt + t.completion;
    (chats, t)
}

/// Every day from `first` to `last` with its use (zeros for days without any).
fn per_day(used: &[UsageDay], first: NaiveDate, last: NaiveDate) -> Vec<UsageDayInfo> {
    first
        .iter_days()
        .take_while(|d| *d <= last)
        .map(|date| {
            let on_day: Vec<&UsageDay> = used.iter().filter(|u| u.day == date).collect();
            let (chats, tokens) = totals(&on_day);
            UsageDayInfo {
                date: date.format("%Y-%m-%d").to_string(),
                chats,
                tokens,
            }
        })
        .collect()
}

/// The account's chat replies and tokens this month (UTC) and on each of the last `days`
/// days.
#[utoipa::path(get, path = "/api/usage", tag = "auth", security(("bearer" = [])), params(UsageQuery),
    responses((status = 200, body = UsageResponse), (status = 400, response = BadRequest), (status = 401, body = ErrorBody),
        (status = 403, description = "API key without chat:read", body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn usage(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiQuery(q): ApiQuery<UsageQuery>,
) -> ApiResult<Json<UsageResponse>> {
    principal.require(Scope::ChatRead)?;
    let window = state.chat.usage(&principal.user_id, q.days).await?;
    let this_month: Vec<&UsageDay> = window
        .used
        .iter()
        .filter(|u| u.day >= window.month_start)
        .collect();
    let (chats_this_month, tokens_this_month) = totals(&this_month);
    let month = window.today.format("%Y-%m").to_string();
    let (_, reset) = crate::chat::quota::month_of(window.today);
    let quota_info = |limit: u64, used: u64| QuotaInfo {
        limit,
        used,
        remaining: limit.saturating_sub(used),
        reset_at: format!("{}T00:00:00Z", reset.format("%Y-%m-%d")),
    };
    let quota = state
        .limits
        .token_quota(principal.plan)
        .map(|limit| quota_info(limit, tokens_this_month.total));
    let key_budget = match &principal.credential {
        Credential::ApiKey {
            key_id,
            monthly_token_budget: Some(limit),
            ..
        } => Some(quota_info(
            *limit,
            state.chat.key_usage(key_id, &month).await?,
        )),
        _ => None,
    };
    Ok(Json(UsageResponse {
        month,
        chats_this_month,
        tokens_this_month,
        days: per_day(&window.used, window.first_day, window.today),
        quota,
        key_budget,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(d: &str, chats: i64, p: i64, c: i64) -> UsageDay {
        UsageDay {
            day: NaiveDate::parse_from_str(d, "%Y-%m-%d").unwrap(),
            chats,
            prompt_tokens: p,
            completion_tokens: c,
        }
    }

    #[test]
    fn every_day_of_the_window_is_listed_with_zeros() {
        let used = [day("2026-11-02", 2, 10, 5), day("2026-11-04", 1, 1, 1)];
        let first = NaiveDate::from_ymd_opt(2026, 11, 1).unwrap();
        let last = NaiveDate::from_ymd_opt(2026, 11, 4).unwrap();
        let list = per_day(&used, first, last);
        let chats: Vec<u64> = list.iter().map(|d| d.chats).collect();
        assert_eq!(chats, [0, 2, 0, 1]);
        assert_eq!(list[1].tokens.total, 15);
        assert_eq!(list[0].date, "2026-11-01");
        assert_eq!(list[3].date, "2026-11-04");
    }
}
