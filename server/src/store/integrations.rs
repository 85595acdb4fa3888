//! The integrations part of the persistence boundary. Credentials arrive sealed
//! ([`crate::crypto::SecretBox`]); the store never sees them in clear. Every backend
//! implements [`IntegrationStore`] (SQLite: `sqlite/integrations.rs`); [`super::Store`]
//! requires it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;

/// An integration as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntegrationRecord {
    pub id: String,
    pub user_id: String,
    /// A catalogue code (`telegram`, `slack`, ...).
    pub provider_code: String,
    pub name: String,
    /// The linked agent; `None` when unlinked (or the agent was deleted).
    pub agent_id: Option<String>,
    /// The config object, as JSON text.
    pub config: String,
    /// The credentials object as JSON, sealed with the owner and integration ids as
    /// associated data.
    pub credentials_sealed: Vec<u8>,
    /// Id of the key that sealed the credentials (for key rotation).
    pub key_id: String,
    /// Masked hints of the credentials, as a JSON object (what answers show).
    pub credential_hints: String,
    /// `active` (the only status of this build).
    pub status: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Persistence of integrations; every method is scoped to the owner.
#[async_trait]
pub trait IntegrationStore: Send + Sync {
    /// Stores a new integration unless the owner has `limit` already (checked
    /// atomically); false at the limit.
    async fn create_integration(&self, record: &IntegrationRecord, limit: u32)
        -> StoreResult<bool>;
    /// The owner's integrations, oldest first.
    async fn list_integrations(&self, user_id: &str) -> StoreResult<Vec<IntegrationRecord>>;
    async fn integration(&self, user_id: &str, id: &str) -> StoreResult<Option<IntegrationRecord>>;
    /// Replaces the mutable fields (name, agent, config, credentials, hints, key id,
    /// status, updated time); false when the owner has no such integration.
    async fn update_integration(&self, record: &IntegrationRecord) -> StoreResult<bool>;
    /// False when the owner has no such integration.
    async fn delete_integration(&self, user_id: &str, id: &str) -> StoreResult<bool>;
}
