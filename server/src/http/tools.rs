//! `/api/agents/{agentId}/tools`: an agent's tools and their test runs (docs/api.md
//! § Tools). Reading takes `agents:read`; changing and testing take `agents:write`.

use app::api::{
    CreateToolRequest, ErrorBody, SuccessResponse, TestToolRequest, ToolResponse, ToolTestResult,
    ToolsResponse, UpdateToolRequest,
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
    ids::{AgentId, ToolId},
    tools::{NewTool, ToolPatch},
};

/// The tool routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get, update, delete))
        .routes(routes!(test))
}

/// The agent's tools, oldest first.
#[utoipa::path(get, path = "/api/agents/{agentId}/tools", tag = "tools", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id")),
    responses((status = 200, body = ToolsResponse), (status = 400, response = BadRequest), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn list(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(agent_id): ApiPath<AgentId>,
) -> ApiResult<Json<ToolsResponse>> {
    principal.require(Scope::AgentsRead)?;
    let tools = state.tools.list(&principal.user_id, &agent_id).await?;
    Ok(Json(ToolsResponse { tools }))
}

/// Add a tool to the agent; 409 when the name is taken or the agent has 32 tools.
#[utoipa::path(post, path = "/api/agents/{agentId}/tools", tag = "tools", security(("bearer" = [])), request_body = CreateToolRequest,
    params(("agentId" = String, Path, description = "Agent id")),
    responses((status = 201, body = ToolResponse), (status = 400, response = BadRequest), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn create(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(agent_id): ApiPath<AgentId>,
    ApiJson(body): ApiJson<CreateToolRequest>,
) -> ApiResult<(StatusCode, Json<ToolResponse>)> {
    principal.require(Scope::AgentsWrite)?;
    let input = NewTool {
        tool_type: body.tool_type,
        name: body.name,
        description: body.description,
        enabled: body.enabled,
        requires_approval: body.requires_approval,
        config: body.config,
    };
    let tool = state.tools.create(&principal, &agent_id, input).await?;
    Ok((StatusCode::CREATED, Json(ToolResponse { tool })))
}

/// One tool of the agent (secret headers by name only).
#[utoipa::path(get, path = "/api/agents/{agentId}/tools/{toolId}", tag = "tools", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id"), ("toolId" = String, Path, description = "Tool id")),
    responses((status = 200, body = ToolResponse), (status = 400, response = BadRequest), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn get(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath((agent_id, tool_id)): ApiPath<(AgentId, ToolId)>,
) -> ApiResult<Json<ToolResponse>> {
    principal.require(Scope::AgentsRead)?;
    let tool = state
        .tools
        .get(&principal.user_id, &agent_id, &tool_id)
        .await?;
    Ok(Json(ToolResponse { tool }))
}

/// Change a tool: the fields given; a `config` without `secretHeaders` keeps the stored ones.
#[utoipa::path(put, path = "/api/agents/{agentId}/tools/{toolId}", tag = "tools", security(("bearer" = [])), request_body = UpdateToolRequest,
    params(("agentId" = String, Path, description = "Agent id"), ("toolId" = String, Path, description = "Tool id")),
    responses((status = 200, body = ToolResponse), (status = 400, response = BadRequest), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn update(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath((agent_id, tool_id)): ApiPath<(AgentId, ToolId)>,
    ApiJson(body): ApiJson<UpdateToolRequest>,
) -> ApiResult<Json<ToolResponse>> {
    principal.require(Scope::AgentsWrite)?;
    let patch = ToolPatch {
        name: body.name,
        description: body.description,
        enabled: body.enabled,
        requires_approval: body.requires_approval,
        config: body.config,
    };
    let tool = state
        .tools
        .update(&principal, &agent_id, &tool_id, patch)
        .await?;
    Ok(Json(ToolResponse { tool }))
}

/// Delete a tool.
#[utoipa::path(delete, path = "/api/agents/{agentId}/tools/{toolId}", tag = "tools", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id"), ("toolId" = String, Path, description = "Tool id")),
    responses((status = 200, body = SuccessResponse), (status = 400, response = BadRequest), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn delete(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath((agent_id, tool_id)): ApiPath<(AgentId, ToolId)>,
) -> ApiResult<Json<SuccessResponse>> {
    principal.require(Scope::AgentsWrite)?;
    state
        .tools
        .delete(&principal.user_id, &agent_id, &tool_id)
        .await?;
    Ok(Json(SuccessResponse { success: true }))
}

/// Run a tool once with `arguments`, as a chat would: `{status, output, error?,
/// durationMs}`; a failed run still answers 200.
#[utoipa::path(post, path = "/api/agents/{agentId}/tools/{toolId}/test", tag = "tools", security(("bearer" = [])), request_body = TestToolRequest,
    params(("agentId" = String, Path, description = "Agent id"), ("toolId" = String, Path, description = "Tool id")),
    responses((status = 200, body = ToolTestResult), (status = 400, response = BadRequest), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn test(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath((agent_id, tool_id)): ApiPath<(AgentId, ToolId)>,
    ApiJson(body): ApiJson<TestToolRequest>,
) -> ApiResult<Json<ToolTestResult>> {
    principal.require(Scope::AgentsWrite)?;
    let result = state
        .tools
        .test(
            &principal.user_id,
            &agent_id,
            &tool_id,
            body.arguments,
            body.tool_name.as_deref(),
        )
        .await?;
    Ok(Json(result))
}
