//! `/api/api-keys`: create, list, revoke and rotate API keys (docs/api.md § API key, § API key
//! lifecycle, § API keys). Only a user session may manage keys: an API key gets 403.

use app::api::{
    ApiKeyInfo, ApiKeysResponse, CreateApiKeyRequest, CreatedApiKey, ErrorBody, SuccessResponse,
};
use axum::{extract::State, http::StatusCode, Json};
use chrono::{DateTime, NaiveDate, Utc};
use tracing::instrument;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::openapi::{BadRequest, JsonBodyErrors, RateLimited};
use super::{
    extract::{ApiJson, ApiPath, Auth},
    AppState,
};
use crate::{
    auth::keys,
    domain::{parse_name, ScopeSet},
    http::error::{ApiError, ApiResult},
    ids::{ApiKeyId, UserId},
    store::ApiKeyRecord,
    views::iso,
};

/// Longest API key name, in characters after trimming.
pub const NAME_MAX: usize = 100;

/// Live keys one account may hold.
pub const MAX_KEYS_PER_USER: usize = 100;

/// The API key routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(revoke))
        .routes(routes!(rotate))
}

fn info(k: &ApiKeyRecord) -> ApiKeyInfo {
    ApiKeyInfo {
        id: k.id.clone().into(),
        name: k.name.clone(),
        prefix: k.prefix.clone(),
        scopes: k.scopes.clone(),
        expires_at: k.expires_at.map(iso),
        created_at: iso(k.created_at),
        last_used_at: k.last_used_at.map(iso),
    }
}

/// Parses an expiry: an RFC 3339 timestamp, or a date (`2027-01-31`) meaning the end of
/// that day in UTC.
fn parse_expiry(raw: &str) -> Result<DateTime<Utc>, String> {
    let raw = raw.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(raw) {
        return Ok(t.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(raw, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(23, 59, 59))
        .map(|t| t.and_utc())
        .ok_or_else(|| format!("expiresAt `{raw}` is not an ISO 8601 timestamp or date"))
}

/// A new key for `user_id` (not yet stored): its record and its one-time secret.
fn new_key(
    state: &AppState,
    user_id: &UserId,
    name: String,
    scopes: &ScopeSet,
    expires_at: Option<DateTime<Utc>>,
) -> (ApiKeyRecord, String) {
    let generated = keys::generate();
    let record = ApiKeyRecord {
        id: ApiKeyId::new(),
        user_id: user_id.clone(),
        name,
        prefix: generated.prefix,
        key_hash: generated.hash,
        scopes: scopes.names(),
        expires_at,
        created_at: state.clock.now(),
        last_used_at: None,
        revoked_at: None,
    };
    (record, generated.key)
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
    let name = parse_name("name", &body.name, NAME_MAX).map_err(ApiError::BadRequest)?;
    let scopes = ScopeSet::parse(&body.scopes).map_err(ApiError::BadRequest)?;
    let expires_at = match body.expires_at.as_deref().filter(|s| !s.trim().is_empty()) {
        Some(raw) => {
            let t = parse_expiry(raw).map_err(ApiError::BadRequest)?;
            if t <= state.clock.now() {
                return Err(ApiError::bad_request("expiresAt must be in the future"));
            }
            Some(t)
        }
        None => None,
    };
    let (record, key) = new_key(&state, &principal.user_id, name, &scopes, expires_at);
    // The cap is checked by the store in the same step as the insert, so concurrent
    // creations cannot pass it together.
    if !state
        .store
        .create_api_key(record.clone(), MAX_KEYS_PER_USER)
        .await?
    {
        return Err(ApiError::bad_request(format!(
            "An account may hold at most {MAX_KEYS_PER_USER} API keys; revoke one first"
        )));
    }
    Ok((
        StatusCode::CREATED,
        Json(CreatedApiKey {
            api_key: info(&record),
            key,
        }),
    ))
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
    let keys = state.store.list_api_keys(&principal.user_id).await?;
    Ok(Json(ApiKeysResponse {
        api_keys: keys.iter().map(info).collect(),
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
    let key = state
        .store
        .api_key(&principal.user_id, &id)
        .await?
        .ok_or_else(|| ApiError::not_found("API key"))?;
    state
        .store
        .revoke_api_key(&principal.user_id, &id, state.clock.now())
        .await?;
    state.auth.forget_key(&key.id);
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
    let old = state
        .store
        .api_key(&principal.user_id, &id)
        .await?
        .ok_or_else(|| ApiError::not_found("API key"))?;
    if old.expires_at.is_some_and(|t| t <= state.clock.now()) {
        return Err(ApiError::bad_request(
            "This API key has expired; create a new key instead",
        ));
    }
    let scopes =
        ScopeSet::parse(&old.scopes).map_err(|e| ApiError::Internal(anyhow::anyhow!(e)))?;
    let (record, key) = new_key(
        &state,
        &principal.user_id,
        old.name.clone(),
        &scopes,
        old.expires_at,
    );
    if !state
        .store
        .rotate_api_key(
            &principal.user_id,
            &old.id,
            record.clone(),
            state.clock.now(),
        )
        .await?
    {
        return Err(ApiError::not_found("API key"));
    }
    state.auth.forget_key(&old.id);
    Ok((
        StatusCode::CREATED,
        Json(CreatedApiKey {
            api_key: info(&record),
            key,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_accepts_timestamps_and_dates() {
        assert_eq!(
            iso(parse_expiry("2027-01-31").unwrap()),
            "2027-01-31T23:59:59Z"
        );
        assert_eq!(
            iso(parse_expiry("2027-01-31T10:00:00+02:00").unwrap()),
            "2027-01-31T08:00:00Z"
        );
        assert!(parse_expiry("next week").is_err());
    }
}
