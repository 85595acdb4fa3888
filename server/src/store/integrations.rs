//! The integrations part of the persistence boundary. Credentials arrive sealed
//! ([`crate::crypto::SecretBox`]); the store never sees them in clear. Every backend
//! implements [`IntegrationStore`] (SQLite: `sqlite/integrations.rs`); [`super::Store`]
//! requires it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;
use crate::ids::{AgentId, IntegrationId, PublicId, ThreadId, UserId};
use crate::integrations::catalog::ProviderCode;

/// Whether an integration's channel works (docs/api.md § States and transitions). Stored
/// as its text ([`IntegrationStatus::as_str`]) in `integrations.status`
/// (`migrations/sqlite/0008_integrations.sql`), and answered as that text (docs/api.md
/// § Integration).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "TEXT", rename_all = "lowercase")]
pub enum IntegrationStatus {
    /// Created, or its live channel was set up (`channels::Channels::connect`).
    Active,
    /// Its live channel could not be set up (for example Telegram refused the webhook);
    /// `status_detail` says why (`channels::Channels::connect`). Updating the credentials,
    /// or any update while `error`, sets the channel up again.
    Error,
}

impl IntegrationStatus {
    /// Both states, in the order of docs/api.md § States and transitions.
    pub const ALL: [Self; 2] = [Self::Active, Self::Error];

    /// The stored and wire text: `active` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Error => "error",
        }
    }
}

impl std::fmt::Display for IntegrationStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An integration as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntegrationRecord {
    pub id: IntegrationId,
    pub user_id: UserId,
    /// The provider, from the catalogue.
    pub provider_code: ProviderCode,
    pub name: String,
    /// The linked agent; `None` when unlinked (or the agent was deleted).
    pub agent_id: Option<AgentId>,
    /// The config object, as JSON text.
    pub config: String,
    /// The credentials object as JSON, sealed with the owner and integration ids as
    /// associated data.
    pub credentials_sealed: Vec<u8>,
    /// Id of the key that sealed the credentials (for key rotation).
    pub key_id: String,
    /// Masked hints of the credentials, as a JSON object (what answers show).
    pub credential_hints: String,
    /// `active`, or `error` when a live channel could not be set up (see `status_detail`).
    pub status: IntegrationStatus,
    /// Why the status is `error` (e.g. what Telegram answered to `setWebhook`).
    pub status_detail: Option<String>,
    /// The public id a website widget is embedded with (`pub_` + 22 characters); `None`
    /// for other providers.
    pub public_id: Option<PublicId>,
    /// SHA-256 of the secret inbound requests must carry (Telegram's secret token); `None`
    /// while no webhook is registered.
    pub inbound_secret_hash: Option<Vec<u8>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Persistence of integrations; every method is scoped to the owner.
#[async_trait]
pub trait IntegrationStore: Send + Sync {
    /// Stores a new integration unless the owner has `limit` already; false at the limit,
    /// and nothing is written. The count and the insert are one atomic step, as for
    /// [`crate::store::AgentStore::create_agent`]. Proven by
    /// `conformance::parallel_webhook_and_integration_creates_stop_at_the_limit`.
    async fn create_integration(&self, record: &IntegrationRecord, limit: u32)
        -> StoreResult<bool>;
    /// The owner's integrations, oldest first.
    async fn list_integrations(&self, user_id: &UserId) -> StoreResult<Vec<IntegrationRecord>>;
    async fn integration(
        &self,
        user_id: &UserId,
        id: &IntegrationId,
    ) -> StoreResult<Option<IntegrationRecord>>;
    /// Replaces the mutable fields (name, agent, config, credentials, hints, key id,
    /// status, updated time); false when the owner has no such integration.
    async fn update_integration(&self, record: &IntegrationRecord) -> StoreResult<bool>;
    /// False when the owner has no such integration.
    async fn delete_integration(&self, user_id: &UserId, id: &IntegrationId) -> StoreResult<bool>;
    /// An integration by id alone, for inbound provider requests (which authenticate
    /// themselves with the integration's secrets, not as its owner).
    async fn integration_by_id(&self, id: &IntegrationId)
        -> StoreResult<Option<IntegrationRecord>>;
    /// A website integration by its public id.
    async fn integration_by_public_id(
        &self,
        public_id: &PublicId,
    ) -> StoreResult<Option<IntegrationRecord>>;
    /// The thread of an external conversation (a Telegram chat, a Slack thread, a widget
    /// visitor) of `integration_id`.
    async fn channel_thread(
        &self,
        integration_id: &IntegrationId,
        conversation_key: &str,
    ) -> StoreResult<Option<ThreadId>>;
    /// Ends an external conversation: its next message starts a new thread (the old thread
    /// stays, with its messages).
    async fn end_channel_thread(
        &self,
        integration_id: &IntegrationId,
        conversation_key: &str,
    ) -> StoreResult<()>;
    /// Records an inbound event id; false when it was recorded before (a provider's
    /// retry), so that each event is answered once: of any number of calls with one
    /// `(integration_id, event_id)`, running at once or not, exactly one answers true.
    async fn first_channel_event(
        &self,
        integration_id: &IntegrationId,
        event_id: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Forgets event ids received before `before`; returns how many.
    async fn prune_channel_events(&self, before: DateTime<Utc>) -> StoreResult<u64>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integration_states_are_the_stored_and_wire_text() {
        // docs/api.md § Integration: `status` is `active` or `error`.
        assert_eq!(
            IntegrationStatus::ALL.map(IntegrationStatus::as_str),
            ["active", "error"]
        );
        for s in IntegrationStatus::ALL {
            let json = serde_json::to_value(s).unwrap();
            assert_eq!(json, s.as_str());
            assert_eq!(
                serde_json::from_value::<IntegrationStatus>(json).unwrap(),
                s
            );
            assert_eq!(s.to_string(), s.as_str());
        }
    }
}
