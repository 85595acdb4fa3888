//! The owner's use cases of integrations (docs/api.md § Integration): create within
//! [`MAX_INTEGRATIONS`], read, update, delete, with credentials checked and sealed
//! ([`prepare`]) and live channels set up or torn down.

use std::sync::Arc;

use serde_json::Value;

use super::{
    catalog::{self, ProviderCode},
    prepare, MAX_INTEGRATIONS, MAX_NAME_CHARS,
};
use crate::{
    agents::{AgentError, AgentService},
    auth::Principal,
    channels::{self, Channels},
    clock::Clock,
    crypto::SecretBox,
    domain::parse_name,
    ids::{AgentId, IntegrationId},
    store::{
        integrations::{IntegrationRecord, IntegrationStatus},
        IntegrationStore, StoreError,
    },
    views::integration_view,
    webhooks::{EventType, Events},
};

/// Why an integration operation failed. The texts are the messages clients are shown.
#[derive(Debug, thiserror::Error)]
pub enum IntegrationError {
    /// An unknown provider, a bad name, or unfitting credentials or config; the message says which.
    #[error("{0}")]
    Invalid(String),
    /// The account already has [`MAX_INTEGRATIONS`] integrations.
    #[error("An account can have at most {MAX_INTEGRATIONS} integrations; delete one first")]
    Limit,
    /// No integration with this id belongs to the caller.
    #[error("Integration not found")]
    NotFound,
    /// The agent to link is not the caller's, or the agent store failed.
    #[error(transparent)]
    Agent(#[from] AgentError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Stored credentials or config that no longer open or parse; not shown to clients.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// An integration to create, as the caller sent it.
#[derive(Debug, Clone)]
pub struct NewIntegration {
    /// A provider code of [`catalog::PROVIDERS`], surrounding spaces ignored.
    pub provider_code: String,
    /// Its name: 1 to [`MAX_NAME_CHARS`] characters after trimming.
    pub name: String,
    pub agent_id: Option<String>,
    pub credentials: Value,
    /// The provider's config fields; `None` or null for none.
    pub config: Option<Value>,
}

/// Changes to an integration; `None` keeps a field as it is.
#[derive(Debug, Clone, Default)]
pub struct IntegrationChanges {
    pub name: Option<String>,
    /// A new linked agent (`Some(None)` unlinks).
    pub agent_id: Option<Option<String>>,
    /// Credential fields replacing the stored ones of the same names (others kept).
    pub credentials: Option<Value>,
    pub config: Option<Value>,
}

/// The integrations of every account: store, sealed credentials, live channels.
#[derive(Clone)]
pub struct Integrations {
    store: Arc<dyn IntegrationStore>,
    secrets: SecretBox,
    channels: Channels,
    agents: AgentService,
    events: Events,
    clock: Clock,
    /// `PUBLIC_URL`, for the `integration.created` event.
    public_url: String,
}

impl Integrations {
    /// The service over `store`, with `secrets`, `channels`, `agents` and `events`.
    pub fn new(
        store: Arc<dyn IntegrationStore>,
        secrets: SecretBox,
        channels: Channels,
        agents: AgentService,
        events: Events,
        clock: Clock,
        public_url: &str,
    ) -> Self {
        Self {
            store,
            secrets,
            channels,
            agents,
            events,
            clock,
            public_url: public_url.to_string(),
        }
    }

    /// The id of the caller's agent `id` (trimmed) to link an integration to: one of its
    /// agents, and for an API key bound to agents one of those; `None` (unlinked) is refused
    /// to such a key, which reaches only integrations linked to its agents.
    /// Errors: [`IntegrationError::Agent`] (not found), [`IntegrationError::Invalid`].
    async fn link(
        &self,
        caller: &Principal,
        id: Option<&str>,
    ) -> Result<Option<AgentId>, IntegrationError> {
        let Some(id) = id else {
            return match caller.agent_scope() {
                Some(_) => Err(IntegrationError::Invalid(
                    "agentId: this API key works only for the agents it is bound to; link the integration to one of them".into(),
                )),
                None => Ok(None),
            };
        };
        let id = AgentId::from(id.trim());
        if !caller.may_use(&id) {
            return Err(AgentError::NotFound.into());
        }
        Ok(Some(
            self.agents.owned(&caller.user_id, &id).await?.id.clone(),
        ))
    }

    /// The caller's integrations, oldest first; for an API key bound to agents, those linked
    /// to one of them ([`Principal::may_reach_linked`]). Errors: the store's.
    pub async fn list(
        &self,
        caller: &Principal,
    ) -> Result<Vec<IntegrationRecord>, IntegrationError> {
        let mut all = self.store.list_integrations(&caller.user_id).await?;
        all.retain(|r| caller.may_reach_linked(r.agent_id.as_ref()));
        Ok(all)
    }

    /// The caller's integration `id`, if it may reach it ([`Principal::may_reach_linked`]).
    /// Errors: [`IntegrationError::NotFound`], the store's.
    pub async fn get(
        &self,
        caller: &Principal,
        id: &IntegrationId,
    ) -> Result<IntegrationRecord, IntegrationError> {
        self.store
            .integration(&caller.user_id, id)
            .await?
            .filter(|r| caller.may_reach_linked(r.agent_id.as_ref()))
            .ok_or(IntegrationError::NotFound)
    }

    /// Creates an integration: checked, sealed, stored within [`MAX_INTEGRATIONS`], its channel set
    /// up (a failure goes to `status_detail`), announced. Errors: [`IntegrationError::Invalid`],
    /// [`IntegrationError::Agent`], [`IntegrationError::Limit`], the store's.
    pub async fn create(
        &self,
        caller: &Principal,
        new: NewIntegration,
    ) -> Result<IntegrationRecord, IntegrationError> {
        let user_id = &caller.user_id;
        let provider = new
            .provider_code
            .trim()
            .parse::<ProviderCode>()
            .map(catalog::provider)
            .map_err(|unknown| IntegrationError::Invalid(unknown.to_string()))?;
        let name =
            parse_name("name", &new.name, MAX_NAME_CHARS).map_err(IntegrationError::Invalid)?;
        let agent_id = self.link(caller, new.agent_id.as_deref()).await?;
        let id = IntegrationId::new();
        tracing::Span::current().record("integration.id", id.as_str());
        let prepared = prepare(
            &self.secrets,
            provider,
            user_id,
            &id,
            &new.credentials,
            new.config.as_ref(),
        )
        .map_err(IntegrationError::Invalid)?;
        let now = self.clock.now();
        let mut record = IntegrationRecord {
            id,
            user_id: user_id.clone(),
            provider_code: provider.code,
            name,
            agent_id,
            config: prepared.config,
            credentials_sealed: prepared.credentials_sealed,
            key_id: prepared.key_id,
            credential_hints: prepared.credential_hints,
            status: IntegrationStatus::Active,
            status_detail: None,
            public_id: (provider.code == ProviderCode::Website)
                .then(channels::widget::new_public_id),
            inbound_secret_hash: None,
            created_at: now,
            updated_at: now,
        };
        if !self
            .store
            .create_integration(&record, MAX_INTEGRATIONS)
            .await?
        {
            return Err(IntegrationError::Limit);
        }
        if provider.live {
            self.channels.connect(&mut record).await;
            self.store.update_integration(&record).await?;
        }
        self.events
            .emit(
                &record.user_id,
                EventType::IntegrationCreated,
                serde_json::json!({ "integration": integration_view(&record, &self.public_url) }),
            )
            .await;
        Ok(record)
    }

    /// Applies `changes`; the channel is set up again if credentials changed or it had failed.
    /// Errors: [`IntegrationError::NotFound`], [`IntegrationError::Invalid`],
    /// [`IntegrationError::Agent`], the store's.
    pub async fn update(
        &self,
        caller: &Principal,
        id: &IntegrationId,
        changes: IntegrationChanges,
    ) -> Result<IntegrationRecord, IntegrationError> {
        let mut record = self.get(caller, id).await?;
        let provider = catalog::provider(record.provider_code);
        if let Some(name) = &changes.name {
            record.name =
                parse_name("name", name, MAX_NAME_CHARS).map_err(IntegrationError::Invalid)?;
        }
        if let Some(agent) = &changes.agent_id {
            record.agent_id = self.link(caller, agent.as_deref()).await?;
        }
        if changes.credentials.is_some() || changes.config.is_some() {
            let mut credentials = self
                .secrets
                .open_credentials(&record.user_id, &record.id, &record.credentials_sealed)
                .map_err(|e| anyhow::anyhow!("stored credentials do not open: {e}"))?;
            if let Some(new) = &changes.credentials {
                let new = new.as_object().ok_or_else(|| {
                    IntegrationError::Invalid(
                        "credentials must be an object of the fields to replace".into(),
                    )
                })?;
                for (name, value) in new {
                    credentials.insert(name.clone(), value.clone());
                }
            }
            let config = match &changes.config {
                Some(config) => config.clone(),
                None => serde_json::from_str(&record.config).map_err(anyhow::Error::from)?,
            };
            let prepared = prepare(
                &self.secrets,
                provider,
                &record.user_id,
                &record.id,
                &Value::Object(credentials),
                Some(&config),
            )
            .map_err(IntegrationError::Invalid)?;
            record.config = prepared.config;
            record.credentials_sealed = prepared.credentials_sealed;
            record.key_id = prepared.key_id;
            record.credential_hints = prepared.credential_hints;
        }
        // New credentials (a new bot token), or a channel that failed before: set it up again.
        if provider.live
            && (changes.credentials.is_some() || record.status == IntegrationStatus::Error)
        {
            self.channels.connect(&mut record).await;
        }
        record.updated_at = self.clock.now();
        if !self.store.update_integration(&record).await? {
            return Err(IntegrationError::NotFound);
        }
        Ok(record)
    }

    /// Deletes the integration and its credentials, then tears down its live channel.
    /// Errors: [`IntegrationError::NotFound`], the store's.
    pub async fn delete(
        &self,
        caller: &Principal,
        id: &IntegrationId,
    ) -> Result<(), IntegrationError> {
        let record = self.get(caller, id).await?;
        if !self.store.delete_integration(&caller.user_id, id).await? {
            return Err(IntegrationError::NotFound);
        }
        self.channels.disconnect(&record).await;
        Ok(())
    }
}
