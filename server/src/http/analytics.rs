//! `GET /api/analytics`: the account's conversations counted per day or week, with the
//! period's top and unanswered questions (docs/api.md § Analytics).

use app::api::{
    AnalyticsPoint, AnalyticsResponse, ErrorBody, FeedbackCounts, QuestionCount, TokenCounts,
    ToolCallCounts,
};
use axum::{extract::State, Json};
use serde::Deserialize;
use tracing::instrument;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::openapi::{day, one_of, BadRequest, RateLimited};
use super::{
    extract::{ApiQuery, Auth},
    AppState,
};
use crate::{
    chat::{
        analytics::{period, Interval},
        history::parse_day,
    },
    domain::Scope,
    http::error::{ApiError, ApiResult},
    ids::AgentId,
};

/// The analytics route.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(analytics))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AnalyticsQueryParams {
    /// First day, `YYYY-MM-DD` (UTC); default: 29 days before `to`.
    #[param(schema_with = day)]
    from: Option<String>,
    /// Last day, `YYYY-MM-DD` (UTC); default: today. Not before `from`, and at most 366
    /// days from it.
    #[param(schema_with = day)]
    to: Option<String>,
    /// Only this agent's conversations.
    agent_id: Option<String>,
    /// `day` (the default) or `week` (Monday to Sunday).
    #[param(schema_with = intervals)]
    interval: Option<String>,
}

fn intervals() -> utoipa::openapi::schema::Object {
    one_of(&["day", "week"])
}

fn counts(list: Vec<(String, u64)>) -> Vec<QuestionCount> {
    list.into_iter()
        .map(|(text, count)| QuestionCount { text, count })
        .collect()
}

/// The account's conversations per day or week: conversations started, user messages,
/// replies, tokens, live-channel visitors, ratings, replies without knowledge, failed
/// replies and tool calls; and the period's ten most frequent questions, answered or not.
#[utoipa::path(get, path = "/api/analytics", tag = "chat", security(("bearer" = [])),
    params(AnalyticsQueryParams),
    responses((status = 200, body = AnalyticsResponse), (status = 400, response = BadRequest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn analytics(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiQuery(query): ApiQuery<AnalyticsQueryParams>,
) -> ApiResult<Json<AnalyticsResponse>> {
    principal.require(Scope::ChatRead)?;
    let interval = match query.interval.as_deref() {
        None => Interval::Day,
        Some(name) => Interval::parse(name)
            .ok_or_else(|| ApiError::bad_request("interval must be day or week"))?,
    };
    let from = query
        .from
        .as_deref()
        .map(|t| parse_day("from", t))
        .transpose()?;
    let to = query
        .to
        .as_deref()
        .map(|t| parse_day("to", t))
        .transpose()?;
    let days = period(from, to, state.clock.now().date_naive())?;
    let scope = (
        query.agent_id.map(AgentId::from),
        principal.agent_scope().map(<[AgentId]>::to_vec),
    );
    let found = state
        .chat
        .analytics(&principal.user_id, scope, days, interval)
        .await?;
    let n = |v: i64| v.max(0) as u64;
    Ok(Json(AnalyticsResponse {
        series: found
            .series
            .into_iter()
            .map(|p| AnalyticsPoint {
                start: p.start.format("%Y-%m-%d").to_string(),
                conversations: n(p.counts.conversations),
                user_messages: n(p.counts.user_messages),
                replies: n(p.counts.replies),
                tokens: TokenCounts {
                    prompt: n(p.counts.prompt_tokens),
                    completion: n(p.counts.completion_tokens),
                },
                visitors: n(p.counts.visitors),
                feedback: FeedbackCounts {
                    up: n(p.counts.feedback_up) as u32,
                    down: n(p.counts.feedback_down) as u32,
                },
                unanswered: n(p.counts.unanswered),
                failed: n(p.counts.failed),
                tool_calls: ToolCallCounts {
                    total: p.tool_calls,
                    failed: p.tool_calls_failed,
                },
            })
            .collect(),
        top_questions: counts(found.top_questions),
        unanswered: counts(found.unanswered),
    }))
}
