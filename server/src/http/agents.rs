//! `/api/agents` and `/api/models`: agent CRUD with plan limits (docs/api.md § Agent, § List
//! agents, § Create agent, § Get agent, § Update agent, § Agents, models and chat).

use app::api::{
    AgentResponse, AgentsResponse, CreateAgentRequest, ErrorBody, ModelEntry, ModelsResponse,
    SuccessResponse, UpdateAgentRequest,
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
    agents::AgentFields, domain::Scope, http::error::ApiResult, ids::AgentId, views::agent_view,
};

pub use crate::agents::{DESCRIPTION_MAX, NAME_MAX, SYSTEM_PROMPT_MAX};

/// The agent routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get, update, delete))
        .routes(routes!(models))
}

/// The caller's agents, oldest first.
#[utoipa::path(get, path = "/api/agents", tag = "agents", security(("bearer" = [])),
    responses((status = 200, body = AgentsResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn list(
    State(state): State<AppState>,
    Auth(principal): Auth,
) -> ApiResult<Json<AgentsResponse>> {
    principal.require(Scope::AgentsRead)?;
    let agents = state.agents.usable(&principal).await?;
    Ok(Json(AgentsResponse {
        agents: agents.iter().map(agent_view).collect(),
    }))
}

/// Create an agent; 403 when the plan's agent limit is reached.
#[utoipa::path(post, path = "/api/agents", tag = "agents", security(("bearer" = [])), request_body = CreateAgentRequest,
    responses((status = 201, body = AgentResponse), (status = 400, response = BadRequest), (status = 401, body = ErrorBody),
        (status = 403, description = "Plan limit reached or missing scope", body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id))]
async fn create(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiJson(body): ApiJson<CreateAgentRequest>,
) -> ApiResult<(StatusCode, Json<AgentResponse>)> {
    principal.require(Scope::AgentsWrite)?;
    let agent = state
        .agents
        .create(
            &principal.user_id,
            principal.plan,
            AgentFields {
                name: Some(body.name),
                description: body.description,
                system_prompt: body.system_prompt,
                model: body.model,
            },
        )
        .await?;
    tracing::Span::current().record("agent.id", agent.id.as_str());
    Ok((
        StatusCode::CREATED,
        Json(AgentResponse {
            agent: agent_view(&agent),
        }),
    ))
}

/// One agent with all its details.
#[utoipa::path(get, path = "/api/agents/{agentId}", tag = "agents", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id")),
    responses((status = 200, body = AgentResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn get(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(agent_id): ApiPath<AgentId>,
) -> ApiResult<Json<AgentResponse>> {
    principal.require(Scope::AgentsRead)?;
    let agent = state.agents.owned(&principal.user_id, &agent_id).await?;
    Ok(Json(AgentResponse {
        agent: agent_view(&agent),
    }))
}

/// Update an agent; omitted fields stay unchanged.
#[utoipa::path(put, path = "/api/agents/{agentId}", tag = "agents", security(("bearer" = [])), request_body = UpdateAgentRequest,
    params(("agentId" = String, Path, description = "Agent id")),
    responses((status = 200, body = AgentResponse), (status = 400, response = BadRequest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn update(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(agent_id): ApiPath<AgentId>,
    ApiJson(body): ApiJson<UpdateAgentRequest>,
) -> ApiResult<Json<AgentResponse>> {
    principal.require(Scope::AgentsWrite)?;
    let agent = state
        .agents
        .update(
            &principal.user_id,
            &agent_id,
            AgentFields {
                name: body.name,
                description: body.description,
                system_prompt: body.system_prompt,
                model: body.model,
            },
        )
        .await?;
    Ok(Json(AgentResponse {
        agent: agent_view(&agent),
    }))
}

/// Delete an agent with its conversations and knowledge.
#[utoipa::path(delete, path = "/api/agents/{agentId}", tag = "agents", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id")),
    responses((status = 200, body = SuccessResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn delete(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(agent_id): ApiPath<AgentId>,
) -> ApiResult<Json<SuccessResponse>> {
    principal.require(Scope::AgentsWrite)?;
    state.agents.delete(&principal.user_id, &agent_id).await?;
    Ok(Json(SuccessResponse { success: true }))
}

/// The models usable as `agent.model`: the configured providers' (from their model lists)
/// and the built-in offline model.
#[utoipa::path(get, path = "/api/models", tag = "agents", security(("bearer" = [])),
    responses((status = 200, body = ModelsResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn models(
    State(state): State<AppState>,
    Auth(principal): Auth,
) -> ApiResult<Json<ModelsResponse>> {
    principal.require(Scope::AgentsRead)?;
    let models = state
        .models
        .list()
        .await
        .into_iter()
        .map(|m| ModelEntry {
            id: m.id,
            provider: m.provider,
            context_window: m.context_window,
        })
        .collect();
    Ok(Json(ModelsResponse {
        models,
        default_model: state.models.default_model().await,
    }))
}
