//! Inbound Telegram updates and Slack events: no user credentials, each authenticated by
//! its integration's own secret, acknowledged at once and answered from a background task
//! ([`crate::channels`]); counted per integration and client IP before anything else.

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde_json::json;
use tracing::instrument;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::openapi::{BadRequest, JsonBodyErrors, RateLimited};
use super::{
    extract::{require_json_object, ApiPath},
    AppState,
};
use crate::{
    channels::{slack, telegram},
    domain::ProviderCode,
    http::error::{ApiError, ApiResult},
    ids::IntegrationId,
    store::integrations::IntegrationRecord,
};

/// The inbound channel routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(telegram_update))
        .routes(routes!(slack_event))
}

/// The integration `id` of `provider`; 404 for any other.
async fn integration(
    state: &AppState,
    provider: ProviderCode,
    id: &IntegrationId,
) -> ApiResult<IntegrationRecord> {
    state
        .channels
        .integration(provider, id)
        .await?
        .ok_or_else(|| ApiError::not_found("Integration"))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A Telegram update for a bot integration. Authenticated by the
/// `X-Telegram-Bot-Api-Secret-Token` that was given to `setWebhook`; answered 200 at once,
/// the reply is sent with `sendMessage`. `/start` and `/new` begin a new conversation.
#[utoipa::path(post, path = "/api/channels/telegram/{integrationId}", tag = "channels",
    params(("integrationId" = String, Path, description = "Integration id")),
    request_body(content = Object, description = "A Telegram Update object"),
    responses((status = 200, description = "Accepted (answered in the background)"),
        (status = 400, response = BadRequest), (status = 401, description = "Missing or wrong secret token", body = app::api::ErrorBody),
        (status = 404, body = app::api::ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(integration.id = %id))]
async fn telegram_update(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<IntegrationId>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let record = integration(&state, ProviderCode::Telegram, &id).await?;
    if !telegram::secret_matches(
        header(&headers, "x-telegram-bot-api-secret-token"),
        record.inbound_secret_hash.as_deref(),
    ) {
        return Err(ApiError::UnauthorizedWith(
            "The X-Telegram-Bot-Api-Secret-Token header is missing or wrong".into(),
        ));
    }
    require_json_object(&headers, &body)?;
    let update: telegram::Update = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("The body is not a Telegram update: {e}")))?;
    if state
        .channels
        .first_delivery(&record.id, &format!("update:{}", update.update_id))
        .await
    {
        tokio::spawn(answer_telegram(state, record, update));
    }
    Ok(Json(json!({})).into_response())
}

async fn answer_telegram(state: AppState, record: IntegrationRecord, update: telegram::Update) {
    let Some(message) = update.message else {
        return;
    };
    if message.from.as_ref().is_some_and(|u| u.is_bot) {
        return;
    }
    let Some(text) = message
        .text
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    else {
        return;
    };
    let token = match state.channels.credential(&record, "botToken") {
        Ok(token) => token,
        Err(e) => {
            tracing::error!(error = %e, "the Telegram integration cannot be used");
            return;
        }
    };
    let api = state.channels.telegram_bot(&token);
    let chat_id = message.chat.id;
    let key = telegram::conversation_key(chat_id);
    let reply = match telegram::command(text).as_deref() {
        Some("start" | "new") => {
            if let Err(e) = state.channels.end_conversation(&record.id, &key).await {
                tracing::error!(error = %e, "ending a Telegram conversation failed");
            }
            "Hello! Ask me anything; send /new to start a new conversation.".to_string()
        }
        _ => {
            api.send_typing(chat_id).await;
            match state.channels.answer(&record, &key, text).await {
                Ok(reply) => reply,
                Err(e) => {
                    tracing::warn!(error = ?e, "a Telegram message got no answer");
                    e.reply_text()
                }
            }
        }
    };
    if let Err(e) = api
        .send_message(chat_id, &reply, Some(message.message_id))
        .await
    {
        tracing::warn!(error = %e, "sendMessage failed");
    }
}

/// A Slack Events API request for an app integration: the URL verification challenge, or
/// an event. Authenticated by Slack's request signature (`X-Slack-Signature`,
/// `X-Slack-Request-Timestamp` within five minutes). Mentions of the app and direct
/// messages are answered in their thread with `chat.postMessage`; retries of an event
/// already taken are acknowledged and ignored.
#[utoipa::path(post, path = "/api/channels/slack/{integrationId}", tag = "channels",
    params(("integrationId" = String, Path, description = "Integration id")),
    request_body(content = Object, description = "A Slack Events API request"),
    responses((status = 200, description = "Accepted, or `{challenge}` for URL verification"),
        (status = 400, response = BadRequest), (status = 401, description = "Missing, stale or wrong signature", body = app::api::ErrorBody),
        (status = 404, body = app::api::ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(integration.id = %id))]
async fn slack_event(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<IntegrationId>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let record = integration(&state, ProviderCode::Slack, &id).await?;
    let credentials = state
        .secrets
        .open_credentials(&record.user_id, &record.id, &record.credentials_sealed)
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("stored credentials do not open: {e}")))?;
    let secret = credentials
        .get("signingSecret")
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    slack::verify(
        secret,
        header(&headers, "x-slack-request-timestamp"),
        header(&headers, "x-slack-signature"),
        &body,
        state.clock.now().timestamp(),
    )
    .map_err(|e| ApiError::UnauthorizedWith(format!("Not a request from Slack: {e}")))?;
    require_json_object(&headers, &body)?;
    let envelope: slack::Envelope = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("The body is not a Slack event: {e}")))?;
    match envelope {
        slack::Envelope::UrlVerification { challenge } => {
            Ok(Json(json!({ "challenge": challenge })).into_response())
        }
        slack::Envelope::EventCallback { event_id, event } => {
            if let Some(question) = event.question() {
                if state
                    .channels
                    .first_delivery(&record.id, &format!("event:{event_id}"))
                    .await
                {
                    let token = credentials
                        .get("botToken")
                        .and_then(|v| v.as_str())
                        .unwrap_or_default()
                        .to_string();
                    tokio::spawn(answer_slack(state, record, token, question));
                }
            }
            Ok(StatusCode::OK.into_response())
        }
        slack::Envelope::Other => Ok(StatusCode::OK.into_response()),
    }
}

async fn answer_slack(
    state: AppState,
    record: IntegrationRecord,
    token: String,
    question: slack::Question,
) {
    let key = slack::conversation_key(&question);
    let reply = match state.channels.answer(&record, &key, &question.text).await {
        Ok(reply) => reply,
        Err(e) => {
            tracing::warn!(error = ?e, "a Slack message got no answer");
            e.reply_text()
        }
    };
    if let Err(e) = slack::post_message(
        &state.channels.http,
        &state.channels.slack_api_url,
        &token,
        &question,
        &reply,
    )
    .await
    {
        tracing::warn!(error = %e, "chat.postMessage failed");
    }
}
