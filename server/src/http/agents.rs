//! `/api/agents` and `/api/models`: agent CRUD with plan limits (docs/api.md § Agent, § List,
//! Create, Get, Update agent, § Agents, models and chat).

use std::sync::Arc;

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
    domain::{parse_name, Scope},
    error::{ApiError, ApiResult},
    store::{AgentPatch, AgentRecord},
    views::agent_view,
    webhooks::{agent_data, EventType},
};

/// Longest agent name in characters.
pub const NAME_MAX: usize = 100;
/// Longest description in characters.
pub const DESCRIPTION_MAX: usize = 2_000;
/// Longest system prompt in characters.
pub const SYSTEM_PROMPT_MAX: usize = 32_000;

/// The agent routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get, update, delete))
        .routes(routes!(models))
}

fn bounded(field: &str, value: Option<String>, max: usize) -> ApiResult<Option<String>> {
    match value {
        Some(v) if v.chars().count() > max => Err(ApiError::bad_request(format!(
            "{field} must be at most {max} characters"
        ))),
        other => Ok(other),
    }
}

/// Checks that `model` is offered; empty means the default model. 400 lists the valid ids.
async fn check_model(state: &AppState, model: Option<String>) -> ApiResult<Option<String>> {
    let Some(model) = model.map(|m| m.trim().to_string()) else {
        return Ok(None);
    };
    if model.is_empty() || state.models.resolve(&model).await.is_some() {
        return Ok(Some(model));
    }
    let valid: Vec<String> = state
        .models
        .list()
        .await
        .into_iter()
        .map(|m| m.id)
        .collect();
    Err(ApiError::bad_request(format!(
        "model `{model}` is not available; use one of: {}",
        valid.join(", ")
    )))
}

/// How long an agent read by [`owned_agent`] is reused without asking the store. Updates
/// and deletions through this instance take effect at once ([`AgentCache::forget`]); made
/// through another instance of the service, within this time (the same bound as
/// [`crate::auth::AUTH_CACHE_TTL`] for sessions).
pub const AGENT_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(2);

/// Agents recently read, by id, so that a busy agent's chats do not each read it again.
#[derive(Clone)]
pub struct AgentCache(moka::sync::Cache<String, Arc<AgentRecord>>);

impl Default for AgentCache {
    fn default() -> Self {
        Self(
            moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(AGENT_CACHE_TTL)
                .build(),
        )
    }
}

impl AgentCache {
    /// Drops the agent `id` (after an update or a deletion).
    pub fn forget(&self, id: &str) {
        self.0.invalidate(id);
    }
}

/// Loads the caller's agent, 404 for a missing or someone else's one (through
/// [`AgentCache`]).
pub async fn owned_agent(
    state: &AppState,
    user_id: &str,
    agent_id: &str,
) -> ApiResult<Arc<AgentRecord>> {
    if let Some(agent) = state.agents.0.get(agent_id) {
        if agent.user_id == user_id {
            return Ok(agent);
        }
        return Err(ApiError::not_found("Agent"));
    }
    let agent = state
        .store
        .agent(user_id, agent_id)
        .await?
        .map(Arc::new)
        .ok_or_else(|| ApiError::not_found("Agent"))?;
    state.agents.0.insert(agent.id.clone(), agent.clone());
    Ok(agent)
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
    let agents = state.store.list_agents(&principal.user_id).await?;
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
    let name = parse_name("name", &body.name, NAME_MAX).map_err(ApiError::BadRequest)?;
    let description =
        bounded("description", body.description, DESCRIPTION_MAX)?.unwrap_or_default();
    let system_prompt =
        bounded("systemPrompt", body.system_prompt, SYSTEM_PROMPT_MAX)?.unwrap_or_default();
    let model = check_model(&state, body.model).await?.unwrap_or_default();
    let now = state.auth.clock.now();
    let agent = AgentRecord {
        id: uuid::Uuid::now_v7().to_string(),
        user_id: principal.user_id.clone(),
        name,
        description,
        system_prompt,
        model,
        status: "active".into(),
        created_at: now,
        updated_at: now,
        has_knowledge: false,
    };
    let limit = state.config.agent_limit(principal.plan);
    if !state.store.create_agent(&agent, limit).await? {
        return Err(ApiError::ForbiddenWith(format!(
            "Your {} plan allows {limit} agents and you have reached that limit; delete an agent or upgrade your plan",
            principal.plan
        )));
    }
    tracing::Span::current().record("agent.id", &agent.id);
    state
        .webhooks
        .events
        .emit(&agent.user_id, EventType::AgentCreated, agent_data(&agent))
        .await;
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
    ApiPath(agent_id): ApiPath<String>,
) -> ApiResult<Json<AgentResponse>> {
    principal.require(Scope::AgentsRead)?;
    let agent = owned_agent(&state, &principal.user_id, &agent_id).await?;
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
    ApiPath(agent_id): ApiPath<String>,
    ApiJson(body): ApiJson<UpdateAgentRequest>,
) -> ApiResult<Json<AgentResponse>> {
    principal.require(Scope::AgentsWrite)?;
    owned_agent(&state, &principal.user_id, &agent_id).await?;
    let patch = AgentPatch {
        name: body
            .name
            .map(|n| parse_name("name", &n, NAME_MAX))
            .transpose()
            .map_err(ApiError::BadRequest)?,
        description: bounded("description", body.description, DESCRIPTION_MAX)?,
        system_prompt: bounded("systemPrompt", body.system_prompt, SYSTEM_PROMPT_MAX)?,
        model: check_model(&state, body.model).await?,
    };
    let agent = state
        .store
        .update_agent(
            &principal.user_id,
            &agent_id,
            &patch,
            state.auth.clock.now(),
        )
        .await?
        .ok_or_else(|| ApiError::not_found("Agent"))?;
    state.agents.forget(&agent_id);
    state
        .webhooks
        .events
        .emit(&agent.user_id, EventType::AgentUpdated, agent_data(&agent))
        .await;
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
    ApiPath(agent_id): ApiPath<String>,
) -> ApiResult<Json<SuccessResponse>> {
    principal.require(Scope::AgentsWrite)?;
    let documents = state
        .store
        .list_documents(&principal.user_id, &agent_id)
        .await?;
    if !state
        .store
        .delete_agent(&principal.user_id, &agent_id)
        .await?
    {
        return Err(ApiError::not_found("Agent"));
    }
    state.agents.forget(&agent_id);
    // Threads, documents, chunks and jobs went with the agent (ON DELETE CASCADE); the
    // stored uploads are files.
    for doc in documents {
        let _ = tokio::fs::remove_file(state.knowledge.upload_path(&doc.id)).await;
    }
    state
        .webhooks
        .events
        .emit(
            &principal.user_id,
            EventType::AgentDeleted,
            serde_json::json!({ "agentId": agent_id }),
        )
        .await;
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
