//! `GET /api/conversations`: the account's conversations of every agent and channel in one
//! list, filtered and paged (docs/api.md § Conversation inbox).

use app::api::{ErrorBody, InboxResponse};
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
    chat::history::{day_range, search_words, PageRequest},
    domain::{Channel, Scope},
    http::error::{ApiError, ApiResult},
    ids::AgentId,
    store::{FeedbackFilter, InboxFilter},
    views::inbox_view,
};

/// The inbox route.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(inbox))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct InboxQuery {
    /// Only this agent's conversations.
    agent_id: Option<String>,
    /// Only conversations started in this channel: `api`, `dashboard`, `widget`,
    /// `telegram`, `slack`, `openai` or `mcp`.
    #[param(schema_with = channels)]
    channel: Option<String>,
    /// Last activity on or after this day (`YYYY-MM-DD`, UTC).
    #[param(schema_with = day)]
    from: Option<String>,
    /// Last activity on or before this day (`YYYY-MM-DD`, UTC); not before `from`.
    #[param(schema_with = day)]
    to: Option<String>,
    /// `up`, `down` or `any`: only conversations with a reply rated so.
    #[param(schema_with = feedback_kinds)]
    feedback: Option<String>,
    /// Words that one message of the conversation holds, each as a word or a word's start
    /// (case and accents ignored; at most 200 characters).
    q: Option<String>,
    /// Page size, 1..=200 (default 50).
    limit: Option<u32>,
    /// `nextCursor` of the previous page.
    cursor: Option<String>,
}

fn channels() -> utoipa::openapi::schema::Object {
    one_of(&Channel::ALL.map(Channel::as_str))
}

fn feedback_kinds() -> utoipa::openapi::schema::Object {
    one_of(&["up", "down", "any"])
}

impl InboxQuery {
    /// The filters asked for. Errors: 400 naming the parameter that is not valid.
    fn filter(&self) -> ApiResult<InboxFilter> {
        let channel = match self.channel.as_deref() {
            None => None,
            Some(name) => Some(Channel::parse(name).ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "channel must be one of: {}",
                    Channel::ALL.map(Channel::as_str).join(", ")
                ))
            })?),
        };
        let feedback = match self.feedback.as_deref() {
            None => None,
            Some("up") => Some(FeedbackFilter::Up),
            Some("down") => Some(FeedbackFilter::Down),
            Some("any") => Some(FeedbackFilter::Any),
            Some(_) => {
                return Err(ApiError::bad_request(
                    "feedback must be one of: up, down, any",
                ))
            }
        };
        let (from, until) = day_range(self.from.as_deref(), self.to.as_deref())?;
        Ok(InboxFilter {
            agent_id: self.agent_id.as_deref().map(AgentId::from),
            within: None,
            channel,
            from,
            until,
            feedback,
            words: search_words(self.q.as_deref().unwrap_or_default())?,
        })
    }
}

/// The account's conversations across agents and channels, newest activity first.
#[utoipa::path(get, path = "/api/conversations", tag = "chat", security(("bearer" = [])),
    params(InboxQuery),
    responses((status = 200, body = InboxResponse), (status = 400, response = BadRequest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn inbox(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiQuery(query): ApiQuery<InboxQuery>,
) -> ApiResult<Json<InboxResponse>> {
    principal.require(Scope::ChatRead)?;
    let mut filter = query.filter()?;
    filter.within = principal.agent_scope().map(<[AgentId]>::to_vec);
    let page = PageRequest {
        limit: query.limit,
        cursor: query.cursor,
    };
    let page = state.chat.inbox(&principal.user_id, &filter, &page).await?;
    Ok(Json(InboxResponse {
        next_cursor: page.next_cursor,
        conversations: page.items.iter().map(inbox_view).collect(),
    }))
}
