//! The website widget: `/widget.js` and the public API under `/api/widget/{publicId}`
//! ([`crate::channels::widget`] for the origin rules). Every answer names the page's
//! origin in `Access-Control-Allow-Origin`; only an allowed origin gets anything else.

use app::api::{
    ChatStreamEvent, ErrorBody, Feedback, SuccessResponse, WidgetChatRequest,
    WidgetFeedbackRequest, WidgetInfo, WidgetMessage, WidgetMessagesResponse,
};
use axum::{
    body::Bytes,
    extract::State,
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::options,
    Json,
};
use serde::Deserialize;
use tracing::instrument;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::openapi::{BadRequest, JsonBodyErrors, RateLimited};
use super::{
    chat::stream_reply,
    extract::{require_json_object, ApiPath, ApiQuery},
    AppState,
};
use crate::{
    channels::{self, widget::WidgetSettings},
    http::error::{ApiError, ApiResult},
    ids::{MessageId, PublicId},
    store::integrations::IntegrationRecord,
    views::{feedback_view, iso},
};

/// `Cross-Origin-Resource-Policy`.
const CROSS_ORIGIN_RESOURCE_POLICY: header::HeaderName =
    header::HeaderName::from_static("cross-origin-resource-policy");

/// The widget's script (vanilla JavaScript, no dependencies).
pub const SCRIPT: &str = include_str!("../../assets/widget.js");

/// `GET /widget.js`, cached five minutes, with a JavaScript type (so `nosniff` lets it
/// run) and `Cross-Origin-Resource-Policy: cross-origin` (so COEP pages can load it;
/// Fetch standard).
pub async fn script() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=300"),
            (CROSS_ORIGIN_RESOURCE_POLICY, "cross-origin"),
        ],
        SCRIPT,
    )
        .into_response()
}

/// The widget routes (with their CORS preflights).
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(info))
        .routes(routes!(send))
        .routes(routes!(messages))
        .routes(routes!(rate, clear_rating))
        .route("/api/widget/{publicId}", options(preflight))
        .route("/api/widget/{publicId}/chat", options(preflight))
        .route("/api/widget/{publicId}/messages", options(preflight))
        .route(
            "/api/widget/{publicId}/messages/{messageId}/feedback",
            options(feedback_preflight),
        )
}

/// A website integration, reached from an allowed origin.
struct Widget {
    record: IntegrationRecord,
    settings: WidgetSettings,
}

/// The website integration `public_id`, if the request's `Origin` may use it.
/// Errors: 404 unknown public id; 403 no `Origin`, or one not allowed.
async fn widget(state: &AppState, public_id: &PublicId, headers: &HeaderMap) -> ApiResult<Widget> {
    let record = state
        .channels
        .widget(public_id)
        .await?
        .ok_or_else(|| ApiError::not_found("Widget"))?;
    let settings = WidgetSettings::from_config(&record.config);
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    match origin {
        Some(origin) if settings.allows(origin) => Ok(Widget { record, settings }),
        Some(origin) => Err(ApiError::ForbiddenWith(format!(
            "This chat is not enabled on {origin}; its owner can add the site to the widget's allowed origins"
        ))),
        None => Err(ApiError::ForbiddenWith(
            "The widget's API answers web pages only (the Origin header is missing)".into(),
        )),
    }
}

/// `result` as a response that the requesting page may read.
fn with_cors(headers: &HeaderMap, result: ApiResult<Response>) -> Response {
    let mut response = result.unwrap_or_else(IntoResponse::into_response);
    if let Some(origin) = headers.get(header::ORIGIN) {
        let h = response.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        h.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("retry-after"),
        );
        h.append(header::VARY, HeaderValue::from_static("origin"));
    }
    response
}

/// The CORS preflight of a rating's requests ([`preflight`]).
async fn feedback_preflight(
    state: State<AppState>,
    ApiPath((public_id, _)): ApiPath<(PublicId, MessageId)>,
    headers: HeaderMap,
) -> Response {
    preflight(state, ApiPath(public_id), headers).await
}

/// The CORS preflight of the widget's requests: allowed for the integration's origins.
async fn preflight(
    State(state): State<AppState>,
    ApiPath(public_id): ApiPath<PublicId>,
    headers: HeaderMap,
) -> Response {
    let result = widget(&state, &public_id, &headers).await.map(|_| {
        (
            StatusCode::NO_CONTENT,
            [
                (
                    header::ACCESS_CONTROL_ALLOW_METHODS,
                    "GET, POST, PUT, DELETE",
                ),
                (header::ACCESS_CONTROL_ALLOW_HEADERS, "content-type"),
                (header::ACCESS_CONTROL_MAX_AGE, "600"),
            ],
        )
            .into_response()
    });
    with_cors(&headers, result)
}

/// What the widget shows before the first message. Only for pages of the integration's
/// allowed origins.
#[utoipa::path(get, path = "/api/widget/{publicId}", tag = "widget",
    params(("publicId" = String, Path, description = "The website integration's public id (pub_...)")),
    responses((status = 200, body = WidgetInfo), (status = 403, description = "Origin missing or not allowed", body = ErrorBody), (status = 404, body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(widget = %public_id))]
async fn info(
    State(state): State<AppState>,
    ApiPath(public_id): ApiPath<PublicId>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        let w = widget(&state, &public_id, &headers).await?;
        let available = match &w.record.agent_id {
            Some(id) => state.agents.find(&w.record.user_id, id).await?.is_some(),
            None => false,
        };
        Ok(Json(WidgetInfo {
            name: w.record.name,
            welcome_message: w.settings.welcome_message,
            available,
        })
        .into_response())
    }
    .await;
    with_cors(&headers, result)
}

/// Send a visitor's message; the reply streams as server-sent events exactly like
/// `POST /api/agents/{agentId}/chat` with `stream: true`. The visitor's conversation is one
/// thread of the linked agent, visible to the owner. Rate limited per integration (config
/// `requestsPerMinute`, default 60, all visitors together): 429 with `Retry-After`.
#[utoipa::path(post, path = "/api/widget/{publicId}/chat", tag = "widget", request_body = WidgetChatRequest,
    params(("publicId" = String, Path, description = "The website integration's public id (pub_...)")),
    responses((status = 200, description = "`data: {\"chunk\": \"...\"}` frames, then `data: [DONE]`",
            content_type = "text/event-stream", body = ChatStreamEvent),
        (status = 400, response = BadRequest), (status = 403, description = "Origin missing or not allowed", body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "No agent is linked", body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(widget = %public_id))]
async fn send(
    State(state): State<AppState>,
    ApiPath(public_id): ApiPath<PublicId>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let result = async {
        let w = widget(&state, &public_id, &headers).await?;
        let body: WidgetChatRequest = json_body(&headers, &body, "{visitorId, message}")?;
        let key = visitor(&body.visitor_id)?;
        let message = body.message.trim();
        if message.is_empty() {
            return Err(ApiError::bad_request("message must not be empty"));
        }
        limit(&state, &w).await?;
        let prepared = state
            .channels
            .prepare_turn(&w.record, &key, message)
            .await?;
        Ok(stream_reply(&state, prepared, Default::default(), false))
    }
    .await;
    with_cors(&headers, result)
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
struct VisitorQuery {
    /// The visitor's id (see `POST /api/widget/{publicId}/chat`).
    visitor_id: String,
}

/// The visitor's conversation so far (at most the last 200 messages), oldest first, so
/// that the widget can show it again after the page reloads.
#[utoipa::path(get, path = "/api/widget/{publicId}/messages", tag = "widget",
    params(("publicId" = String, Path, description = "The website integration's public id (pub_...)"), VisitorQuery),
    responses((status = 200, body = WidgetMessagesResponse), (status = 400, response = BadRequest),
        (status = 403, description = "Origin missing or not allowed", body = ErrorBody), (status = 404, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(widget = %public_id))]
async fn messages(
    State(state): State<AppState>,
    ApiPath(public_id): ApiPath<PublicId>,
    query: Result<ApiQuery<VisitorQuery>, ApiError>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        let w = widget(&state, &public_id, &headers).await?;
        let ApiQuery(query) = query?;
        let key = visitor(&query.visitor_id)?;
        let (messages, feedback) = state.channels.conversation(&w.record.id, &key).await?;
        let messages = messages
            .into_iter()
            .map(|m| WidgetMessage {
                feedback: feedback
                    .iter()
                    .find(|f| f.message_id == m.id)
                    .map(feedback_view),
                id: m.id.into(),
                role: m.role.as_str().into(),
                content: m.content,
                created_at: iso(m.created_at),
            })
            .collect();
        Ok(Json(WidgetMessagesResponse { messages }).into_response())
    }
    .await;
    with_cors(&headers, result)
}

/// The JSON object `body` as a `T`, whose fields `shape` names for the error.
/// Errors: 400 (or 415) when the body is not such an object.
fn json_body<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: &Bytes,
    shape: &str,
) -> ApiResult<T> {
    require_json_object(headers, body)?;
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("The body must be {shape}: {e}")))
}

/// Counts a request against the integration's `requestsPerMinute` (all visitors together).
/// Errors: 429 past it.
async fn limit(state: &AppState, w: &Widget) -> ApiResult<()> {
    let decision = state
        .limiter
        .check(
            crate::ratelimit::RateKey::Widget(w.record.id.as_str()),
            w.settings.requests_per_minute,
        )
        .await;
    if decision.allowed {
        return Ok(());
    }
    crate::metrics::refused(crate::metrics::Refusal::Widget);
    Err(ApiError::RateLimited {
        retry_after_secs: decision.retry_after_secs,
    })
}

/// The conversation key of visitor `visitor_id`. Errors: 400 when the id is malformed.
fn visitor(visitor_id: &str) -> ApiResult<String> {
    if channels::widget::valid_visitor_id(visitor_id) {
        Ok(channels::widget::conversation_key(visitor_id))
    } else {
        Err(ApiError::bad_request(
            "visitorId must be 16 to 64 characters of A-Z, a-z, 0-9, _ and -",
        ))
    }
}

/// A visitor rates a reply of its own conversation `up` or `down`, with an optional comment,
/// as the owner does (`PUT /api/agents/{agentId}/conversations/{threadId}/messages/{messageId}/feedback`);
/// a reply of another conversation is 404. Counted in the integration's rate limit.
#[utoipa::path(put, path = "/api/widget/{publicId}/messages/{messageId}/feedback", tag = "widget", request_body = WidgetFeedbackRequest,
    params(("publicId" = String, Path, description = "The website integration's public id (pub_...)"), ("messageId" = String, Path, description = "Id of a reply of the visitor's conversation")),
    responses((status = 200, body = Feedback), (status = 400, response = BadRequest),
        (status = 403, description = "Origin missing or not allowed", body = ErrorBody), (status = 404, body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(widget = %public_id))]
async fn rate(
    State(state): State<AppState>,
    ApiPath((public_id, message_id)): ApiPath<(PublicId, MessageId)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let result = async {
        let w = widget(&state, &public_id, &headers).await?;
        let body: WidgetFeedbackRequest =
            json_body(&headers, &body, "{visitorId, rating, comment?}")?;
        let key = visitor(&body.visitor_id)?;
        let rating = super::chat::rating(&body.rating)?;
        limit(&state, &w).await?;
        let feedback = state
            .channels
            .rate(
                &w.record,
                &key,
                &message_id,
                Some((rating, body.comment.as_deref())),
            )
            .await?
            .ok_or_else(|| ApiError::not_found("Message"))?;
        Ok(Json(feedback_view(&feedback)).into_response())
    }
    .await;
    with_cors(&headers, result)
}

/// A visitor removes its rating of a reply of its own conversation.
#[utoipa::path(delete, path = "/api/widget/{publicId}/messages/{messageId}/feedback", tag = "widget",
    params(("publicId" = String, Path, description = "The website integration's public id (pub_...)"), ("messageId" = String, Path, description = "Id of a reply of the visitor's conversation"), VisitorQuery),
    responses((status = 200, body = SuccessResponse), (status = 400, response = BadRequest),
        (status = 403, description = "Origin missing or not allowed", body = ErrorBody), (status = 404, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(widget = %public_id))]
async fn clear_rating(
    State(state): State<AppState>,
    ApiPath((public_id, message_id)): ApiPath<(PublicId, MessageId)>,
    query: Result<ApiQuery<VisitorQuery>, ApiError>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        let w = widget(&state, &public_id, &headers).await?;
        let ApiQuery(query) = query?;
        let key = visitor(&query.visitor_id)?;
        limit(&state, &w).await?;
        state
            .channels
            .rate(&w.record, &key, &message_id, None)
            .await?;
        Ok(Json(SuccessResponse { success: true }).into_response())
    }
    .await;
    with_cors(&headers, result)
}
