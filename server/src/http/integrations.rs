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
    ids::IntegrationId,
    integrations::{
        catalog::{self, Field},
        service::{IntegrationChanges, NewIntegration},
    },
    views::integration_view,
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

/// The integrations of the user, oldest first, credentials masked.
#[utoipa::path(get, path = "/api/integrations", tag = "integrations", security(("bearer" = [])),
    responses((status = 200, body = IntegrationsResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn list(
    State(state): State<AppState>,
    Auth(principal): Auth,
) -> ApiResult<Json<IntegrationsResponse>> {
    principal.require(Scope::IntegrationsRead)?;
    let integrations = state.integrations.list(&principal).await?;
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
        (status = 400, description = "Unknown provider, missing or malformed credential or config fields, or no agentId from an API key bound to agents", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, description = "Missing scope, or the account's integration limit", body = ErrorBody),
        (status = 404, description = "agentId is not one of the caller's agents (for an API key bound to agents, one of those)", body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, integration.id))]
async fn create(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiJson(body): ApiJson<CreateIntegrationRequest>,
) -> ApiResult<(StatusCode, Json<CreatedResponse>)> {
    principal.require(Scope::IntegrationsWrite)?;
    let new = NewIntegration {
        provider_code: body.provider_code,
        name: body.name,
        agent_id: body.agent_id,
        credentials: body.credentials,
        config: body.config,
    };
    let record = state.integrations.create(&principal, new).await?;
    let provider = catalog::provider(record.provider_code);
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
            id: record.id.into_string(),
            message,
        }),
    ))
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
    let record = state.integrations.get(&principal, &id).await?;
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
    let changes = IntegrationChanges {
        name: body.name,
        agent_id: body.agent_id,
        credentials: body.credentials,
        config: body.config,
    };
    let record = state.integrations.update(&principal, &id, changes).await?;
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
    state.integrations.delete(&principal, &id).await?;
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
    let tools = state.tools.integration_tools(&principal, &id).await?;
    Ok(Json(McpServerToolsResponse {
        tools: tools.as_ref().clone(),
    }))
}
