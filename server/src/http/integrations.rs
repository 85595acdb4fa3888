//! `/api/integrations`: the provider catalogue and the user's integrations (docs/api.md
//! § Integration, § Create integration, § Integrations and webhooks). Scopes
//! `integrations:read` / `integrations:write`; another user's integration is 404.
//! Credentials are checked against the provider, sealed at rest and never returned: answers
//! carry masked hints only.

use app::api::{
    CreateIntegrationRequest, CreatedResponse, ErrorBody, IntegrationField, IntegrationProvider,
    IntegrationProvidersResponse, IntegrationResponse, IntegrationsResponse,
    McpServerToolsResponse, SuccessResponse, UpdateIntegrationRequest,
};
use axum::{extract::State, http::StatusCode, Json};
use serde_json::Value;
use tracing::instrument;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::openapi::{BadRequest, JsonBodyErrors, RateLimited};
use super::{
    extract::{ApiJson, ApiPath, Auth},
    AppState,
};
use crate::{
    channels,
    domain::{parse_name, Scope},
    http::error::{ApiError, ApiResult},
    ids::{AgentId, IntegrationId, UserId},
    integrations::{
        catalog::{self, Field, ProviderCode},
        open_credentials, prepare, MAX_INTEGRATIONS, MAX_NAME_CHARS,
    },
    store::integrations::{IntegrationRecord, IntegrationStatus},
    views::integration_view,
    webhooks::EventType,
};

/// The integration routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(providers))
        .routes(routes!(list, create))
        .routes(routes!(get_one, update, delete))
        .routes(routes!(mcp_tools))
}

fn fields(fields: &[Field]) -> Vec<IntegrationField> {
    fields
        .iter()
        .map(|f| IntegrationField {
            name: f.name.into(),
            label: f.label.into(),
            secret: f.secret,
            required: f.required,
        })
        .collect()
}

/// The providers integrations can be made with, and the fields each needs.
#[utoipa::path(get, path = "/api/integrations/providers", tag = "integrations", security(("bearer" = [])),
    responses((status = 200, body = IntegrationProvidersResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn providers(Auth(principal): Auth) -> ApiResult<Json<IntegrationProvidersResponse>> {
    principal.require(Scope::IntegrationsRead)?;
    Ok(Json(IntegrationProvidersResponse {
        providers: catalog::PROVIDERS
            .iter()
            .map(|p| IntegrationProvider {
                code: p.code.as_str().into(),
                name: p.name.into(),
                description: p.description.into(),
                credential_fields: fields(p.credential_fields),
                config_fields: fields(p.config_fields),
                live: p.live,
            })
            .collect(),
    }))
}

/// 404 unless the caller owns agent `id`.
async fn own_agent(state: &AppState, user_id: &UserId, id: &str) -> ApiResult<AgentId> {
    let id = AgentId::from(id.trim());
    Ok(state.agents.owned(user_id, &id).await?.id.clone())
}

/// The integrations of the user, oldest first, credentials masked.
#[utoipa::path(get, path = "/api/integrations", tag = "integrations", security(("bearer" = [])),
    responses((status = 200, body = IntegrationsResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn list(
    State(state): State<AppState>,
    Auth(principal): Auth,
) -> ApiResult<Json<IntegrationsResponse>> {
    principal.require(Scope::IntegrationsRead)?;
    let integrations = state.store.list_integrations(&principal.user_id).await?;
    Ok(Json(IntegrationsResponse {
        integrations: integrations
            .iter()
            .map(|r| integration_view(r, &state.server.public_url))
            .collect(),
    }))
}

/// Create an integration, optionally linked to one of the user's agents. Credentials are
/// checked against the provider's fields and stored encrypted; they are never shown again.
#[utoipa::path(post, path = "/api/integrations", tag = "integrations", security(("bearer" = [])),
    request_body = CreateIntegrationRequest,
    responses((status = 201, body = CreatedResponse),
        (status = 400, description = "Unknown provider, missing or malformed credential or config fields", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, description = "Missing scope, or the account's integration limit", body = ErrorBody),
        (status = 404, description = "agentId is not one of the caller's agents", body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, integration.id))]
async fn create(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiJson(body): ApiJson<CreateIntegrationRequest>,
) -> ApiResult<(StatusCode, Json<CreatedResponse>)> {
    principal.require(Scope::IntegrationsWrite)?;
    let provider = body
        .provider_code
        .trim()
        .parse::<ProviderCode>()
        .map(catalog::provider)
        .map_err(|unknown| ApiError::bad_request(unknown.to_string()))?;
    let name = parse_name("name", &body.name, MAX_NAME_CHARS).map_err(ApiError::BadRequest)?;
    let agent_id = match body.agent_id.as_deref() {
        Some(id) => Some(own_agent(&state, &principal.user_id, id).await?),
        None => None,
    };
    let id = IntegrationId::new();
    tracing::Span::current().record("integration.id", id.as_str());
    let prepared = prepare(
        &state.secrets,
        provider,
        &principal.user_id,
        &id,
        &body.credentials,
        body.config.as_ref(),
    )
    .map_err(ApiError::BadRequest)?;
    let now = state.clock.now();
    let mut record = IntegrationRecord {
        id: id.clone(),
        user_id: principal.user_id.clone(),
        provider_code: provider.code,
        name,
        agent_id,
        config: prepared.config,
        credentials_sealed: prepared.credentials_sealed,
        key_id: prepared.key_id,
        credential_hints: prepared.credential_hints,
        status: IntegrationStatus::Active,
        status_detail: None,
        public_id: (provider.code == ProviderCode::Website).then(channels::widget::new_public_id),
        inbound_secret_hash: None,
        created_at: now,
        updated_at: now,
    };
    if !state
        .store
        .create_integration(&record, MAX_INTEGRATIONS)
        .await?
    {
        return Err(ApiError::ForbiddenWith(format!(
            "An account can have at most {MAX_INTEGRATIONS} integrations; delete one first"
        )));
    }
    if provider.live {
        state.channels.connect(&mut record).await;
        state.store.update_integration(&record).await?;
    }
    state
        .webhooks
        .events
        .emit(
            &record.user_id,
            EventType::IntegrationCreated,
            serde_json::json!({ "integration": integration_view(&record, &state.server.public_url) }),
        )
        .await;
    let message = match &record.status_detail {
        Some(detail) => format!(
            "{} integration created, but its channel is not working: {detail}. Update its credentials to try again.",
            provider.name
        ),
        None => format!("{} integration created", provider.name),
    };
    Ok((
        StatusCode::CREATED,
        Json(CreatedResponse {
            id: id.into_string(),
            message,
        }),
    ))
}

async fn owned(
    state: &AppState,
    user_id: &UserId,
    id: &IntegrationId,
) -> ApiResult<IntegrationRecord> {
    state
        .store
        .integration(user_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found("Integration"))
}

/// One integration, credentials masked.
#[utoipa::path(get, path = "/api/integrations/{id}", tag = "integrations", security(("bearer" = [])),
    params(("id" = String, Path, description = "Integration id")),
    responses((status = 200, body = IntegrationResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, integration.id = %id))]
async fn get_one(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(id): ApiPath<IntegrationId>,
) -> ApiResult<Json<IntegrationResponse>> {
    principal.require(Scope::IntegrationsRead)?;
    let record = owned(&state, &principal.user_id, &id).await?;
    Ok(Json(IntegrationResponse {
        integration: integration_view(&record, &state.server.public_url),
    }))
}

/// Update an integration: name, linked agent (`null` unlinks), config (replaced whole)
/// and credentials (the fields given replace the stored ones; the others are kept).
#[utoipa::path(put, path = "/api/integrations/{id}", tag = "integrations", security(("bearer" = [])),
    params(("id" = String, Path, description = "Integration id")), request_body = UpdateIntegrationRequest,
    responses((status = 200, body = IntegrationResponse), (status = 400, response = BadRequest), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, integration.id = %id))]
async fn update(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(id): ApiPath<IntegrationId>,
    ApiJson(body): ApiJson<UpdateIntegrationRequest>,
) -> ApiResult<Json<IntegrationResponse>> {
    principal.require(Scope::IntegrationsWrite)?;
    let mut record = owned(&state, &principal.user_id, &id).await?;
    let provider = catalog::provider(record.provider_code);
    if let Some(name) = &body.name {
        record.name = parse_name("name", name, MAX_NAME_CHARS).map_err(ApiError::BadRequest)?;
    }
    if let Some(agent) = &body.agent_id {
        record.agent_id = match agent {
            Some(agent_id) => Some(own_agent(&state, &principal.user_id, agent_id).await?),
            None => None,
        };
    }
    if body.credentials.is_some() || body.config.is_some() {
        let mut credentials = open_credentials(&state.secrets, &record).map_err(|e| {
            ApiError::Internal(anyhow::anyhow!("stored credentials do not open: {e}"))
        })?;
        if let Some(new) = &body.credentials {
            let new = new.as_object().ok_or_else(|| {
                ApiError::bad_request("credentials must be an object of the fields to replace")
            })?;
            for (name, value) in new {
                credentials.insert(name.clone(), value.clone());
            }
        }
        let config = match &body.config {
            Some(config) => config.clone(),
            None => {
                serde_json::from_str(&record.config).map_err(|e| ApiError::Internal(e.into()))?
            }
        };
        let prepared = prepare(
            &state.secrets,
            provider,
            &record.user_id,
            &record.id,
            &Value::Object(credentials),
            Some(&config),
        )
        .map_err(ApiError::BadRequest)?;
        record.config = prepared.config;
        record.credentials_sealed = prepared.credentials_sealed;
        record.key_id = prepared.key_id;
        record.credential_hints = prepared.credential_hints;
    }
    // New credentials (a new bot token), or a channel that failed before: set it up again.
    if provider.live && (body.credentials.is_some() || record.status == IntegrationStatus::Error) {
        state.channels.connect(&mut record).await;
    }
    record.updated_at = state.clock.now();
    if !state.store.update_integration(&record).await? {
        return Err(ApiError::not_found("Integration"));
    }
    Ok(Json(IntegrationResponse {
        integration: integration_view(&record, &state.server.public_url),
    }))
}

/// Delete an integration and its stored credentials.
#[utoipa::path(delete, path = "/api/integrations/{id}", tag = "integrations", security(("bearer" = [])),
    params(("id" = String, Path, description = "Integration id")),
    responses((status = 200, body = SuccessResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, integration.id = %id))]
async fn delete(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(id): ApiPath<IntegrationId>,
) -> ApiResult<Json<SuccessResponse>> {
    principal.require(Scope::IntegrationsWrite)?;
    let record = owned(&state, &principal.user_id, &id).await?;
    if !state
        .store
        .delete_integration(&principal.user_id, &id)
        .await?
    {
        return Err(ApiError::not_found("Integration"));
    }
    state.channels.disconnect(&record).await;
    Ok(Json(SuccessResponse { success: true }))
}

/// The tools of an MCP server integration (provider `mcp`), listed live from the server
/// (through this instance's session cache: a list is reused until the server says it
/// changed, at most 5 minutes).
#[utoipa::path(get, path = "/api/integrations/{id}/tools", tag = "integrations", security(("bearer" = [])),
    params(("id" = String, Path, description = "Integration id")),
    responses((status = 200, body = McpServerToolsResponse),
        (status = 400, description = "The integration is not an MCP server integration", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 502, description = "The MCP server could not be reached or refused to list its tools; the message says why", body = ErrorBody),
        RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, integration.id = %id))]
async fn mcp_tools(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(id): ApiPath<IntegrationId>,
) -> ApiResult<Json<McpServerToolsResponse>> {
    principal.require(Scope::IntegrationsRead)?;
    let tools = state
        .tools
        .integration_tools(&principal.user_id, &id)
        .await?;
    Ok(Json(McpServerToolsResponse {
        tools: tools.as_ref().clone(),
    }))
}
