//! Agents: the caller's agents read (through a short-lived [`cache`]), created within the
//! plan's limit, updated and deleted, each change announced as a webhook event (docs/api.md
//! § Agent, § Plans and limits). Every change that affects a cached agent drops it here.

pub mod cache;

use std::sync::Arc;

use crate::{
    clock::Clock,
    domain::{parse_name, Plan},
    ids::{AgentId, DocumentId, UserId},
    llm::Models,
    store::{
        agents::AgentStatus, uploads::UploadStore, AgentPatch, AgentRecord, AgentStore,
        DocumentStore, StoreError,
    },
    webhooks::{agent_data, EventType, Events},
};

pub use self::cache::{AgentCache, AGENT_CACHE_TTL};

/// Longest agent name in characters.
pub const NAME_MAX: usize = app::api::limits::AGENT_NAME_MAX;
/// Longest description in characters.
pub const DESCRIPTION_MAX: usize = app::api::limits::AGENT_DESCRIPTION_MAX;
/// Longest system prompt in characters.
pub const SYSTEM_PROMPT_MAX: usize = app::api::limits::SYSTEM_PROMPT_MAX;

/// Why an agent operation failed. The texts are the messages clients are shown.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// No agent with this id belongs to the caller (another tenant's reads the same).
    #[error("Agent not found")]
    NotFound,
    /// A field breaks its rule; the text names the field and the rule.
    #[error("{0}")]
    Invalid(String),
    /// `model` is not offered by any configured provider; `valid` lists those that are.
    #[error("model `{model}` is not available; use one of: {}", valid.join(", "))]
    UnknownModel {
        model: String,
        /// The offered model ids.
        valid: Vec<String>,
    },
    /// The account holds as many agents as its plan allows (`AGENT_LIMITS`).
    #[error("Your {plan} plan allows {limit} agents and you have reached that limit; delete an agent or upgrade your plan")]
    PlanLimit { plan: Plan, limit: u32 },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An agent's editable fields, checked by [`AgentService::create`] (`None`: empty or default
/// model) and [`AgentService::update`] (`None`: unchanged).
#[derive(Debug, Clone, Default)]
pub struct AgentFields {
    pub name: Option<String>,
    pub description: Option<String>,
    pub system_prompt: Option<String>,
    /// One of [`Models`]' ids.
    pub model: Option<String>,
}

/// The agents service. Cheap to clone (shared parts).
#[derive(Clone)]
pub struct AgentService {
    store: Arc<dyn AgentStore>,
    models: Models,
    events: Events,
    clock: Clock,
    documents: Arc<dyn DocumentStore>,
    uploads: Arc<dyn UploadStore>,
    /// Agents per plan, indexed by [`Plan::index`] (`AGENT_LIMITS`).
    agent_limits: [u32; 4],
    cache: AgentCache,
}

impl AgentService {
    /// The service over `store`, with `agent_limits` per plan (`AGENT_LIMITS`).
    pub fn new(
        store: Arc<dyn AgentStore>,
        models: Models,
        events: Events,
        clock: Clock,
        (documents, uploads): (Arc<dyn DocumentStore>, Arc<dyn UploadStore>),
        agent_limits: [u32; 4],
    ) -> Self {
        Self {
            store,
            models,
            events,
            clock,
            documents,
            uploads,
            agent_limits,
            cache: AgentCache::default(),
        }
    }

    /// This service with its agent cache shared over `bus` ([`crate::cluster`]).
    pub fn with_bus(mut self, bus: &crate::cluster::Bus) -> Self {
        self.cache = self.cache.with_bus(bus);
        self
    }

    /// The agent of `user_id`, cached [`AGENT_CACHE_TTL`].
    /// Errors: [`AgentError::NotFound`]; the store's.
    pub async fn owned(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
    ) -> Result<Arc<AgentRecord>, AgentError> {
        self.find(user_id, agent_id)
            .await?
            .ok_or(AgentError::NotFound)
    }

    /// As [`AgentService::owned`], `None` for a missing or someone else's agent.
    pub async fn find(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
    ) -> Result<Option<Arc<AgentRecord>>, StoreError> {
        if let Some(agent) = self.cache.get(agent_id) {
            return Ok((&agent.user_id == user_id).then_some(agent));
        }
        let Some(agent) = self.store.agent(user_id, agent_id).await? else {
            return Ok(None);
        };
        let agent = Arc::new(agent);
        self.cache.insert(agent.clone());
        Ok(Some(agent))
    }

    /// The agents of `user_id`, oldest first. Errors: the store's.
    pub async fn list(&self, user_id: &UserId) -> Result<Vec<AgentRecord>, AgentError> {
        Ok(self.store.list_agents(user_id).await?)
    }

    /// The agents `principal` may use ([`crate::auth::Principal::may_use`]), oldest first.
    /// Errors: the store's.
    pub async fn usable(
        &self,
        principal: &crate::auth::Principal,
    ) -> Result<Vec<AgentRecord>, AgentError> {
        let mut agents = self.list(&principal.user_id).await?;
        agents.retain(|a| principal.may_use(&a.id));
        Ok(agents)
    }

    /// Creates an agent and emits `agent.created`. Errors: [`AgentError::Invalid`] (the `*_MAX`
    /// limits), [`AgentError::UnknownModel`], [`AgentError::PlanLimit`]; the store's.
    pub async fn create(
        &self,
        user_id: &UserId,
        plan: Plan,
        request: AgentFields,
    ) -> Result<AgentRecord, AgentError> {
        let name = parse_name(
            "name",
            request.name.as_deref().unwrap_or_default(),
            NAME_MAX,
        )
        .map_err(AgentError::Invalid)?;
        let description =
            bounded("description", request.description, DESCRIPTION_MAX)?.unwrap_or_default();
        let system_prompt =
            bounded("systemPrompt", request.system_prompt, SYSTEM_PROMPT_MAX)?.unwrap_or_default();
        let model = self.check_model(request.model).await?.unwrap_or_default();
        let now = self.clock.now();
        let agent = AgentRecord {
            id: AgentId::new(),
            user_id: user_id.clone(),
            name,
            description,
            system_prompt,
            model,
            status: AgentStatus::Active,
            created_at: now,
            updated_at: now,
            has_knowledge: false,
            has_tools: false,
        };
        let limit = self.agent_limits[plan.index()];
        if !self.store.create_agent(&agent, limit).await? {
            return Err(AgentError::PlanLimit { plan, limit });
        }
        self.events
            .emit(&agent.user_id, EventType::AgentCreated, agent_data(&agent))
            .await;
        Ok(agent)
    }

    /// Updates the agent (omitted fields stay), emits `agent.updated`.
    /// Errors: [`AgentError::NotFound`] first, then [`AgentService::create`]'s.
    pub async fn update(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        request: AgentFields,
    ) -> Result<AgentRecord, AgentError> {
        self.owned(user_id, agent_id).await?;
        let patch = AgentPatch {
            name: request
                .name
                .map(|n| parse_name("name", &n, NAME_MAX))
                .transpose()
                .map_err(AgentError::Invalid)?,
            description: bounded("description", request.description, DESCRIPTION_MAX)?,
            system_prompt: bounded("systemPrompt", request.system_prompt, SYSTEM_PROMPT_MAX)?,
            model: self.check_model(request.model).await?,
        };
        let agent = self
            .store
            .update_agent(user_id, agent_id, &patch, self.clock.now())
            .await?
            .ok_or(AgentError::NotFound)?;
        self.cache.forget(agent_id);
        self.events
            .emit(&agent.user_id, EventType::AgentUpdated, agent_data(&agent))
            .await;
        Ok(agent)
    }

    /// Deletes the agent with its conversations, knowledge and uploads; emits `agent.deleted`.
    /// Errors: [`AgentError::NotFound`]; the store's.
    pub async fn delete(&self, user_id: &UserId, agent_id: &AgentId) -> Result<(), AgentError> {
        let documents = self.documents.list_documents(user_id, agent_id).await?;
        if !self.store.delete_agent(user_id, agent_id).await? {
            return Err(AgentError::NotFound);
        }
        self.cache.forget(agent_id);
        // Threads, documents, chunks and jobs went with the agent (ON DELETE CASCADE), and
        // uploads kept in the database with them; uploads kept as files are removed here.
        let ids: Vec<DocumentId> = documents.into_iter().map(|d| d.id).collect();
        let _ = self.uploads.remove_uploads(&ids).await;
        self.events
            .emit(
                user_id,
                EventType::AgentDeleted,
                serde_json::json!({ "agentId": agent_id }),
            )
            .await;
        Ok(())
    }

    /// Records that the agent's knowledge changed (its cached `has_knowledge` may be stale).
    pub fn knowledge_changed(&self, agent_id: &AgentId) {
        self.cache.forget(agent_id);
    }

    /// Records that the agent's tools changed, on every instance.
    pub fn tools_changed(&self, agent_id: &AgentId) {
        self.cache.forget(agent_id);
    }

    /// Checks that `model` is offered; empty means the default model.
    async fn check_model(&self, model: Option<String>) -> Result<Option<String>, AgentError> {
        let Some(model) = model.map(|m| m.trim().to_string()) else {
            return Ok(None);
        };
        if model.is_empty() || self.models.resolve(&model).await.is_some() {
            return Ok(Some(model));
        }
        let valid = self.models.list().await.into_iter().map(|m| m.id).collect();
        Err(AgentError::UnknownModel { model, valid })
    }
}

/// `value` when it has at most `max` characters.
fn bounded(field: &str, value: Option<String>, max: usize) -> Result<Option<String>, AgentError> {
    match value {
        Some(v) if v.chars().count() > max => Err(AgentError::Invalid(format!(
            "{field} must be at most {max} characters"
        ))),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_checked_in_characters() {
        assert!(bounded("description", Some("é".repeat(5)), 5).is_ok());
        let err = bounded("description", Some("é".repeat(6)), 5).unwrap_err();
        assert_eq!(err.to_string(), "description must be at most 5 characters");
        assert!(matches!(bounded("x", None, 0), Ok(None)));
    }

    #[test]
    fn messages_name_what_went_wrong() {
        let err = AgentError::UnknownModel {
            model: "gpt-x".into(),
            valid: vec!["a".into(), "b".into()],
        };
        assert_eq!(
            err.to_string(),
            "model `gpt-x` is not available; use one of: a, b"
        );
        let err = AgentError::PlanLimit {
            plan: Plan::Free,
            limit: 3,
        };
        assert!(err
            .to_string()
            .starts_with("Your free plan allows 3 agents"));
    }
}
