//! Agents and the models they may use (docs/api.md § Agents, models and chat).

use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use utoipa::ToSchema;

/// An agent (docs/api.md § Agent; docs/api.md § Agents, models and chat).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    pub id: String,
    pub name: String,
    pub description: String,
    pub system_prompt: String,
    /// The model id; empty means the server's default model.
    pub model: String,
    /// `active`.
    pub status: String,
    pub created_at: String,
    pub updated_at: String,
}

/// `POST /api/agents` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateAgentRequest {
    /// 1..=100 characters.
    pub name: String,
    /// At most 2,000 characters.
    #[serde(default)]
    pub description: Option<String>,
    /// At most 32,000 characters.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// One of the ids of `GET /api/models`; omitted: the server's default.
    #[serde(default)]
    pub model: Option<String>,
}

/// `PUT /api/agents/{agentId}` body: omitted fields stay unchanged.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateAgentRequest {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub system_prompt: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
}

/// `{agent}` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct AgentResponse {
    pub agent: Agent,
}

/// `GET /api/agents` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct AgentsResponse {
    pub agents: Vec<Agent>,
}

/// A model usable as `agent.model`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ModelEntry {
    pub id: String,
    /// `openai`, `anthropic` or `builtin`.
    pub provider: String,
    /// Context window in tokens, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u32>,
}

/// `GET /api/models` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ModelsResponse {
    pub models: Vec<ModelEntry>,
    /// The model used by agents that name none.
    pub default_model: String,
}
