//! `/api/api-keys`: create, list, revoke and rotate API keys (docs/api.md § API key, § API key
//! lifecycle, § API keys). Only a user session may manage keys: an API key gets 403.

use app::api::{
    ApiKeyInfo, ApiKeysResponse, CreateApiKeyRequest, CreatedApiKey, ErrorBody, SuccessResponse,
};
use axum::{extract::State, http::StatusCode, Json};
use tracing::instrument;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::openapi::{BadRequest, JsonBodyErrors, RateLimited};
use super::{
    extract::{ApiJson, ApiPath, Auth},
    AppState,
};
pub use crate::auth::api_keys::NAME_MAX;
use crate::{
    auth::api_keys::{CreatedKey, NewApiKey},
    http::error::{ApiError, ApiResult},
    ids::{AgentId, ApiKeyId},
    store::ApiKeyRecord,
    views::iso,
};

/// The API key routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(revoke))
        .routes(routes!(rotate))
}

/// `k` as listed, with its tokens this month.
fn info(k: &ApiKeyRecord, tokens_this_month: u64) -> ApiKeyInfo {
    ApiKeyInfo {
        id: k.id.clone().into(),
        name: k.name.clone(),
        prefix: k.prefix.clone(),
        scopes: k.scopes.clone(),
        agent_ids: k
            .agent_ids
            .as_ref()
            .map(|ids| ids.iter().map(|id| id.as_str().to_string()).collect()),
        monthly_token_budget: k.monthly_token_budget,
        tokens_this_month,
        expires_at: k.expires_at.map(iso),
        created_at: iso(k.created_at),
        last_used_at: k.last_used_at.map(iso),
    }
}

/// The 201 answer of a created or rotated key: its listing and the secret.
fn created(c: CreatedKey) -> (StatusCode, Json<CreatedApiKey>) {
    (
        StatusCode::CREATED,
        Json(CreatedApiKey {
            api_key: info(&c.record, 0),
            key: c.key,
        }),
    )
}

/// Create an API key. The full key is in this answer only.
#[utoipa::path(post, path = "/api/api-keys", tag = "api-keys", security(("bearer" = [])), request_body = CreateApiKeyRequest,
    responses((status = 201, body = CreatedApiKey), (status = 400, description = "Invalid fields, or the account already holds 100 live keys", body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, description = "API keys cannot manage API keys", body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn create(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiJson(body): ApiJson<CreateApiKeyRequest>,
) -> ApiResult<(StatusCode, Json<CreatedApiKey>)> {
    principal.require_session()?;
    let agent_ids = match body.agent_ids {
        None => None,
        Some(ids) if ids.is_empty() => {
            return Err(ApiError::bad_request(
                "agentIds must name at least one agent; leave it out for every agent",
            ))
        }
        Some(ids) => {
            let mut agents: Vec<AgentId> = Vec::with_capacity(ids.len());
            for id in ids {
                let id = AgentId::from(id);
                if state.agents.find(&principal.user_id, &id).await?.is_none() {
                    return Err(ApiError::BadRequest(format!(
                        "agentIds: agent {} not found",
                        id.as_str()
                    )));
                }
                if !agents.contains(&id) {
                    agents.push(id);
                }
            }
            if body
                .scopes
                .iter()
                .any(|s| s.trim().starts_with("webhooks:"))
            {
                return Err(ApiError::bad_request(
                    "A key bound to agents (agentIds) cannot hold webhooks:read or webhooks:write: webhooks carry every agent's events",
                ));
            }
            Some(agents)
        }
    };
    if let Some(budget) = body.monthly_token_budget {
        if budget == 0 || i64::try_from(budget).is_err() {
            return Err(ApiError::BadRequest(format!(
                "monthlyTokenBudget must be from 1 to {} tokens; leave it out for no budget",
                i64::MAX
            )));
        }
    }
    let new = NewApiKey {
        name: body.name,
        scopes: body.scopes,
        expires_at: body.expires_at,
        agent_ids,
        monthly_token_budget: body.monthly_token_budget,
    };
    let key = state.auth.create_api_key(&principal.user_id, new).await?;
    Ok(created(key))
}

/// The account's API keys (prefix only, never the secret or its hash).
#[utoipa::path(get, path = "/api/api-keys", tag = "api-keys", security(("bearer" = [])),
    responses((status = 200, body = ApiKeysResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn list(
    State(state): State<AppState>,
    Auth(principal): Auth,
) -> ApiResult<Json<ApiKeysResponse>> {
    principal.require_session()?;
    let keys = state.auth.list_api_keys(&principal.user_id).await?;
    let month = state.clock.now().format("%Y-%m").to_string();
    let used = state.chat.key_usages(&principal.user_id, &month).await?;
    let tokens = |k: &ApiKeyRecord| {
        used.iter()
            .find(|(id, _)| *id == k.id)
            .map_or(0, |(_, n)| *n)
    };
    Ok(Json(ApiKeysResponse {
        api_keys: keys.iter().map(|k| info(k, tokens(k))).collect(),
    }))
}

/// Revoke an API key; it stops working at once.
#[utoipa::path(delete, path = "/api/api-keys/{id}", tag = "api-keys", security(("bearer" = [])),
    params(("id" = String, Path, description = "API key id")),
    responses((status = 200, body = SuccessResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn revoke(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(id): ApiPath<ApiKeyId>,
) -> ApiResult<Json<SuccessResponse>> {
    principal.require_session()?;
    state.auth.revoke_api_key(&principal.user_id, &id).await?;
    Ok(Json(SuccessResponse { success: true }))
}

/// Rotate an API key: a new key with the same name, scopes and expiry; the old one is
/// revoked at once, in the same step (so rotating works at the cap of live keys, and of
/// rotations of one key at once only one succeeds; the others answer 404).
#[utoipa::path(post, path = "/api/api-keys/{id}/rotate", tag = "api-keys", security(("bearer" = [])),
    params(("id" = String, Path, description = "API key id")),
    responses((status = 201, body = CreatedApiKey), (status = 400, description = "The key has expired", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn rotate(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(id): ApiPath<ApiKeyId>,
) -> ApiResult<(StatusCode, Json<CreatedApiKey>)> {
    principal.require_session()?;
    let key = state.auth.rotate_api_key(&principal.user_id, &id).await?;
    Ok(created(key))
}
