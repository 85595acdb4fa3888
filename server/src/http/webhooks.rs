//! `/api/integrations/webhooks`: webhook subscriptions, the event catalogue and the
//! delivery history with redelivery (docs/api.md § Integrations and webhooks). Deliveries are
//! signed per Standard Webhooks v1 and sent by [`crate::webhooks::worker`].

use app::api::{
    CreateWebhookRequest, CreatedWebhook, ErrorBody, SuccessResponse, WebhookDeliveriesResponse,
    WebhookEventType, WebhookEventsResponse, WebhooksResponse,
};
use axum::{extract::State, http::StatusCode, Json};
use tracing::instrument;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::openapi::{BadRequest, JsonBodyErrors, RateLimited};
use super::{
    extract::{ApiJson, ApiPath, Auth},
    AppState,
};
use crate::{
    domain::Scope,
    error::{ApiError, ApiResult},
    store::webhooks::WebhookRecord,
    views::{delivery_view, webhook_view},
    webhooks::{new_secret, EventType},
};

/// Webhooks one account may hold.
pub const MAX_WEBHOOKS_PER_USER: u32 = 20;
/// Longest description in characters.
pub const DESCRIPTION_MAX: usize = 500;
/// Deliveries listed per webhook (the newest).
pub const DELIVERIES_LISTED: u32 = 100;

/// The webhook routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(events))
        .routes(routes!(delete))
        .routes(routes!(deliveries))
        .routes(routes!(redeliver))
}

async fn owned_webhook(state: &AppState, user_id: &str, id: &str) -> ApiResult<WebhookRecord> {
    state
        .store
        .webhook(user_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found("Webhook"))
}

/// Checks the subscribed events: non-empty, each in the catalogue; duplicates dropped.
fn checked_events(names: &[String]) -> ApiResult<Vec<String>> {
    if names.is_empty() {
        return Err(ApiError::bad_request(
            "events must name at least one event type; see GET /api/integrations/webhooks/events",
        ));
    }
    let unknown: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| EventType::parse(n).is_none())
        .collect();
    if !unknown.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Unknown event types: {}; see GET /api/integrations/webhooks/events",
            unknown.join(", ")
        )));
    }
    let mut events: Vec<String> = Vec::with_capacity(names.len());
    for n in names {
        if !events.contains(n) {
            events.push(n.clone());
        }
    }
    Ok(events)
}

/// The account's webhooks, oldest first.
#[utoipa::path(get, path = "/api/integrations/webhooks", tag = "webhooks", security(("bearer" = [])),
    responses((status = 200, body = WebhooksResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn list(
    State(state): State<AppState>,
    Auth(principal): Auth,
) -> ApiResult<Json<WebhooksResponse>> {
    principal.require(Scope::WebhooksRead)?;
    let webhooks = state.store.list_webhooks(&principal.user_id).await?;
    Ok(Json(WebhooksResponse {
        webhooks: webhooks.iter().map(webhook_view).collect(),
    }))
}

/// Create a webhook. The answer holds its signing secret (`whsec_...`), shown this once:
/// verify deliveries with it (Standard Webhooks v1). 400 for a URL that is not http(s) or
/// reaches a private address, an empty or unknown event list, or a description over 500
/// characters; 403 at 20 webhooks.
#[utoipa::path(post, path = "/api/integrations/webhooks", tag = "webhooks", security(("bearer" = [])), request_body = CreateWebhookRequest,
    responses((status = 201, body = CreatedWebhook), (status = 400, response = BadRequest), (status = 401, body = ErrorBody),
        (status = 403, description = "Missing scope or the webhook limit reached", body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, webhook.id))]
async fn create(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiJson(body): ApiJson<CreateWebhookRequest>,
) -> ApiResult<(StatusCode, Json<CreatedWebhook>)> {
    principal.require(Scope::WebhooksWrite)?;
    let events = checked_events(&body.events)?;
    let description = body.description.unwrap_or_default().trim().to_string();
    if description.chars().count() > DESCRIPTION_MAX {
        return Err(ApiError::bad_request(format!(
            "description must be at most {DESCRIPTION_MAX} characters"
        )));
    }
    // The same SSRF rule as crawls; it is applied again at every send, through the
    // resolver the connection uses.
    let url = crate::public_url::check(&body.url, &state.webhooks.policy, "receive webhooks")
        .await?
        .to_string();
    let id = uuid::Uuid::now_v7().to_string();
    tracing::Span::current().record("webhook.id", id.as_str());
    let (secret, key) = new_secret();
    let secret_sealed = state.webhooks.secrets.seal(&principal.user_id, &id, &key)?;
    let record = WebhookRecord {
        id,
        user_id: principal.user_id.clone(),
        url,
        events,
        description,
        secret_sealed,
        active: true,
        disabled_reason: None,
        created_at: state.auth.clock.now(),
    };
    if !state
        .store
        .create_webhook(&record, MAX_WEBHOOKS_PER_USER)
        .await?
    {
        return Err(ApiError::ForbiddenWith(format!(
            "An account may hold at most {MAX_WEBHOOKS_PER_USER} webhooks; delete one first"
        )));
    }
    state.webhooks.events.forget(&principal.user_id);
    Ok((
        StatusCode::CREATED,
        Json(CreatedWebhook {
            webhook: webhook_view(&record),
            secret,
        }),
    ))
}

/// The event catalogue ("Webhook Events"): every type a webhook can subscribe to, with
/// what its `data` holds.
#[utoipa::path(get, path = "/api/integrations/webhooks/events", tag = "webhooks", security(("bearer" = [])),
    responses((status = 200, body = WebhookEventsResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn events(Auth(principal): Auth) -> ApiResult<Json<WebhookEventsResponse>> {
    principal.require(Scope::WebhooksRead)?;
    Ok(Json(WebhookEventsResponse {
        events: EventType::ALL
            .into_iter()
            .map(|e| WebhookEventType {
                kind: e.as_str().to_string(),
                description: e.description().to_string(),
            })
            .collect(),
    }))
}

/// Delete a webhook with its delivery history; nothing more is sent to it.
#[utoipa::path(delete, path = "/api/integrations/webhooks/{id}", tag = "webhooks", security(("bearer" = [])),
    params(("id" = String, Path, description = "Webhook id")),
    responses((status = 200, body = SuccessResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, webhook.id = %id))]
async fn delete(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<SuccessResponse>> {
    principal.require(Scope::WebhooksWrite)?;
    if !state.store.delete_webhook(&principal.user_id, &id).await? {
        return Err(ApiError::not_found("Webhook"));
    }
    state.webhooks.events.forget(&principal.user_id);
    Ok(Json(SuccessResponse { success: true }))
}

/// The webhook's newest 100 deliveries, newest first, with their state and last answer.
#[utoipa::path(get, path = "/api/integrations/webhooks/{id}/deliveries", tag = "webhooks", security(("bearer" = [])),
    params(("id" = String, Path, description = "Webhook id")),
    responses((status = 200, body = WebhookDeliveriesResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, webhook.id = %id))]
async fn deliveries(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<WebhookDeliveriesResponse>> {
    principal.require(Scope::WebhooksRead)?;
    owned_webhook(&state, &principal.user_id, &id).await?;
    let deliveries = state
        .store
        .list_deliveries(&principal.user_id, &id, DELIVERIES_LISTED)
        .await?;
    Ok(Json(WebhookDeliveriesResponse {
        deliveries: deliveries.iter().map(delivery_view).collect(),
    }))
}

/// Send a delivery again now, with the same `webhook-id` and body and a fresh retry
/// window. 202: queued. 409 while it is being sent, or when the webhook was disabled.
#[utoipa::path(post, path = "/api/integrations/webhooks/{id}/deliveries/{deliveryId}/redeliver", tag = "webhooks", security(("bearer" = [])),
    params(("id" = String, Path, description = "Webhook id"), ("deliveryId" = String, Path, description = "Delivery id")),
    responses((status = 202, body = SuccessResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, webhook.id = %id, delivery.id = %delivery_id))]
async fn redeliver(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath((id, delivery_id)): ApiPath<(String, String)>,
) -> ApiResult<(StatusCode, Json<SuccessResponse>)> {
    principal.require(Scope::WebhooksWrite)?;
    let webhook = owned_webhook(&state, &principal.user_id, &id).await?;
    if !webhook.active {
        return Err(ApiError::Conflict(
            "This webhook was disabled because its receiver answered 410 Gone; create a new webhook"
                .into(),
        ));
    }
    match state
        .store
        .redeliver(
            &principal.user_id,
            &id,
            &delivery_id,
            state.auth.clock.now(),
        )
        .await?
    {
        Some(true) => {
            state.webhooks.events.wake.notify_one();
            Ok((
                StatusCode::ACCEPTED,
                Json(SuccessResponse { success: true }),
            ))
        }
        Some(false) => Err(ApiError::Conflict(
            "This delivery is being sent right now; try again shortly".into(),
        )),
        None => Err(ApiError::not_found("Delivery")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_must_be_known_and_present() {
        assert!(checked_events(&[]).is_err());
        let err = checked_events(&["agent.created".into(), "agent.exploded".into(), "*".into()])
            .unwrap_err();
        assert!(err.body().message.contains("agent.exploded, *"), "{err}");
        assert_eq!(
            checked_events(&["agent.created".into(), "agent.created".into()]).unwrap(),
            vec!["agent.created".to_string()]
        );
    }
}
