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
    http::error::ApiResult,
    ids::{DeliveryId, WebhookId},
    views::{delivery_view, webhook_view},
    webhooks::{service::NewWebhook, EventType},
};

pub use crate::webhooks::service::{DELIVERIES_LISTED, DESCRIPTION_MAX, MAX_WEBHOOKS_PER_USER};

/// The webhook routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(events))
        .routes(routes!(delete))
        .routes(routes!(deliveries))
        .routes(routes!(redeliver))
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
    let webhooks = state.webhooks.list(&principal.user_id).await?;
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
    let webhook = NewWebhook {
        url: body.url,
        events: body.events,
        description: body.description,
    };
    let (record, secret) = state.webhooks.create(&principal.user_id, webhook).await?;
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
    ApiPath(id): ApiPath<WebhookId>,
) -> ApiResult<Json<SuccessResponse>> {
    principal.require(Scope::WebhooksWrite)?;
    state.webhooks.delete(&principal.user_id, &id).await?;
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
    ApiPath(id): ApiPath<WebhookId>,
) -> ApiResult<Json<WebhookDeliveriesResponse>> {
    principal.require(Scope::WebhooksRead)?;
    let deliveries = state.webhooks.deliveries(&principal.user_id, &id).await?;
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
    ApiPath((id, delivery_id)): ApiPath<(WebhookId, DeliveryId)>,
) -> ApiResult<(StatusCode, Json<SuccessResponse>)> {
    principal.require(Scope::WebhooksWrite)?;
    state
        .webhooks
        .redeliver(&principal.user_id, &id, &delivery_id)
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(SuccessResponse { success: true }),
    ))
}
