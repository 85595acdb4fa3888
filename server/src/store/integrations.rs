//! Integrations ([`IntegrationStore`]); credentials arrive sealed ([`crate::crypto::SecretBox`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;
use crate::domain::ProviderCode;
use crate::ids::{AgentId, IntegrationId, PublicId, ThreadId, UserId};

/// Whether an integration's channel works (docs/api.md § States and transitions).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "TEXT", rename_all = "lowercase")]
pub enum IntegrationStatus {
    /// Created, or its live channel was set up (`channels::Channels::connect`).
    Active,
    /// Its live channel could not be set up; `status_detail` says why.
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
    /// The credentials object as JSON, sealed.
    pub credentials_sealed: Vec<u8>,
    /// Id of the key that sealed the credentials (for key rotation).
    pub key_id: String,
    /// Masked hints of the credentials, as a JSON object (what answers show).
    pub credential_hints: String,
    /// `active`, or `error` when a live channel could not be set up (see `status_detail`).
    pub status: IntegrationStatus,
    /// Why the status is `error` (e.g. what Telegram answered to `setWebhook`).
    pub status_detail: Option<String>,
    /// The public id a website widget is embedded with; `None` for other providers.
    pub public_id: Option<PublicId>,
    /// SHA-256 of the secret inbound requests must carry; `None`: no webhook registered.
    pub inbound_secret_hash: Option<Vec<u8>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Persistence of integrations; every method is scoped to the owner.
#[async_trait]
pub trait IntegrationStore: Send + Sync {
    /// Stores a new integration unless the owner has `limit` (false), atomically.
    async fn create_integration(&self, record: &IntegrationRecord, limit: u32)
        -> StoreResult<bool>;
    /// The owner's integrations, oldest first.
    async fn list_integrations(&self, user_id: &UserId) -> StoreResult<Vec<IntegrationRecord>>;
    async fn integration(
        &self,
        user_id: &UserId,
        id: &IntegrationId,
    ) -> StoreResult<Option<IntegrationRecord>>;
    /// Replaces the mutable fields; false when the owner has no such integration.
    async fn update_integration(&self, record: &IntegrationRecord) -> StoreResult<bool>;
    /// False when the owner has no such integration.
    async fn delete_integration(&self, user_id: &UserId, id: &IntegrationId) -> StoreResult<bool>;
    /// An integration by id alone, for inbound provider requests.
    async fn integration_by_id(&self, id: &IntegrationId)
        -> StoreResult<Option<IntegrationRecord>>;
    /// A website integration by its public id.
    async fn integration_by_public_id(
        &self,
        public_id: &PublicId,
    ) -> StoreResult<Option<IntegrationRecord>>;
    /// The thread of an external conversation of `integration_id`.
    async fn channel_thread(
        &self,
        integration_id: &IntegrationId,
        conversation_key: &str,
    ) -> StoreResult<Option<ThreadId>>;
    /// Ends an external conversation: its next message starts a new thread (the old stays).
    async fn end_channel_thread(
        &self,
        integration_id: &IntegrationId,
        conversation_key: &str,
    ) -> StoreResult<()>;
    /// Records an inbound event id; exactly one call per event answers true.
    async fn first_channel_event(
        &self,
        integration_id: &IntegrationId,
        event_id: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Forgets event ids received before `before`; returns how many.
    async fn prune_channel_events(&self, before: DateTime<Utc>) -> StoreResult<u64>;
}

/// Defines the [`IntegrationStore`] of `$store` (`$writer` pool writes, `$reader` reads).
macro_rules! integration_store {
    ($store:ident, $db:ty, $writer:ident, $reader:ident) => {
        mod shared {
            use chrono::{DateTime, Utc};

            use super::super::{
                rows::{integration, ms, INTEGRATION_COLUMNS},
                $store,
            };
            use crate::ids::{IntegrationId, PublicId, ThreadId, UserId};
            use crate::store::{
                integrations::{IntegrationRecord, IntegrationStore},
                StoreResult,
            };

            #[async_trait::async_trait]
            impl IntegrationStore for $store {
                async fn create_integration(
                    &self,
                    r: &IntegrationRecord,
                    limit: u32,
                ) -> StoreResult<bool> {
                    // The owner's creations one at a time: each counts what the others wrote.
                    let mut tx = self.begin_for_account(&r.user_id).await?;
                    let done = sqlx::query(&format!(
                        "INSERT INTO integrations ({INTEGRATION_COLUMNS}) \
                         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15 \
                         WHERE (SELECT COUNT(*) FROM integrations WHERE user_id = $16) < $17"
                    ))
                    .bind(&r.id)
                    .bind(&r.user_id)
                    .bind(r.provider_code)
                    .bind(&r.name)
                    .bind(&r.agent_id)
                    .bind(&r.config)
                    .bind(&r.credentials_sealed)
                    .bind(&r.key_id)
                    .bind(&r.credential_hints)
                    .bind(r.status)
                    .bind(&r.status_detail)
                    .bind(&r.public_id)
                    .bind(&r.inbound_secret_hash)
                    .bind(ms(r.created_at))
                    .bind(ms(r.updated_at))
                    .bind(&r.user_id)
                    .bind(i64::from(limit))
                    .execute(&mut *tx)
                    .await?;
                    tx.commit().await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn list_integrations(
                    &self,
                    user_id: &UserId,
                ) -> StoreResult<Vec<IntegrationRecord>> {
                    let rows = sqlx::query(&format!(
                        "SELECT {INTEGRATION_COLUMNS} FROM integrations WHERE user_id = $1 ORDER BY created_at, id"
                    ))
                    .bind(user_id)
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows.iter().map(integration).collect::<Result<_, _>>()?)
                }

                async fn integration(
                    &self,
                    user_id: &UserId,
                    id: &IntegrationId,
                ) -> StoreResult<Option<IntegrationRecord>> {
                    let row = sqlx::query(&format!(
                        "SELECT {INTEGRATION_COLUMNS} FROM integrations WHERE user_id = $1 AND id = $2"
                    ))
                    .bind(user_id)
                    .bind(id)
                    .fetch_optional(&self.$reader)
                    .await?;
                    Ok(row.as_ref().map(integration).transpose()?)
                }

                async fn update_integration(&self, r: &IntegrationRecord) -> StoreResult<bool> {
                    let done = sqlx::query(
                        "UPDATE integrations SET name = $1, agent_id = $2, config = $3, credentials_sealed = $4, \
                         key_id = $5, credential_hints = $6, status = $7, status_detail = $8, \
                         inbound_secret_hash = $9, updated_at = $10 \
                         WHERE user_id = $11 AND id = $12",
                    )
                    .bind(&r.name)
                    .bind(&r.agent_id)
                    .bind(&r.config)
                    .bind(&r.credentials_sealed)
                    .bind(&r.key_id)
                    .bind(&r.credential_hints)
                    .bind(r.status)
                    .bind(&r.status_detail)
                    .bind(&r.inbound_secret_hash)
                    .bind(ms(r.updated_at))
                    .bind(&r.user_id)
                    .bind(&r.id)
                    .execute(&self.$writer)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn delete_integration(
                    &self,
                    user_id: &UserId,
                    id: &IntegrationId,
                ) -> StoreResult<bool> {
                    let done =
                        sqlx::query("DELETE FROM integrations WHERE user_id = $1 AND id = $2")
                            .bind(user_id)
                            .bind(id)
                            .execute(&self.$writer)
                            .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn integration_by_id(
                    &self,
                    id: &IntegrationId,
                ) -> StoreResult<Option<IntegrationRecord>> {
                    let row = sqlx::query(&format!(
                        "SELECT {INTEGRATION_COLUMNS} FROM integrations WHERE id = $1"
                    ))
                    .bind(id)
                    .fetch_optional(&self.$reader)
                    .await?;
                    Ok(row.as_ref().map(integration).transpose()?)
                }

                async fn integration_by_public_id(
                    &self,
                    public_id: &PublicId,
                ) -> StoreResult<Option<IntegrationRecord>> {
                    let row = sqlx::query(&format!(
                        "SELECT {INTEGRATION_COLUMNS} FROM integrations WHERE public_id = $1"
                    ))
                    .bind(public_id)
                    .fetch_optional(&self.$reader)
                    .await?;
                    Ok(row.as_ref().map(integration).transpose()?)
                }

                async fn channel_thread(
                    &self,
                    integration_id: &IntegrationId,
                    conversation_key: &str,
                ) -> StoreResult<Option<ThreadId>> {
                    Ok(sqlx::query_scalar(
                        "SELECT thread_id FROM channel_threads WHERE integration_id = $1 AND conversation_key = $2",
                    )
                    .bind(integration_id)
                    .bind(conversation_key)
                    .fetch_optional(&self.$reader)
                    .await?)
                }

                async fn end_channel_thread(
                    &self,
                    integration_id: &IntegrationId,
                    conversation_key: &str,
                ) -> StoreResult<()> {
                    sqlx::query(
                        "DELETE FROM channel_threads WHERE integration_id = $1 AND conversation_key = $2",
                    )
                    .bind(integration_id)
                    .bind(conversation_key)
                    .execute(&self.$writer)
                    .await?;
                    Ok(())
                }

                async fn first_channel_event(
                    &self,
                    integration_id: &IntegrationId,
                    event_id: &str,
                    at: DateTime<Utc>,
                ) -> StoreResult<bool> {
                    let done = sqlx::query(
                        "INSERT INTO channel_events (integration_id, event_id, received_at) VALUES ($1, $2, $3) \
                         ON CONFLICT DO NOTHING",
                    )
                    .bind(integration_id)
                    .bind(event_id)
                    .bind(ms(at))
                    .execute(&self.$writer)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn prune_channel_events(&self, before: DateTime<Utc>) -> StoreResult<u64> {
                    let done = sqlx::query("DELETE FROM channel_events WHERE received_at < $1")
                        .bind(ms(before))
                        .execute(&self.$writer)
                        .await?;
                    Ok(done.rows_affected())
                }
            }
        }
    };
}
pub(crate) use integration_store;

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
