//! The agent part of the persistence boundary ([`AgentStore`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;
use crate::ids::{AgentId, UserId};

/// An agent's state (docs/api.md § States and transitions).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "TEXT", rename_all = "lowercase")]
pub enum AgentStatus {
    /// Set when the agent is created (`agents`); nothing changes it.
    Active,
}

impl AgentStatus {
    pub const ALL: [Self; 1] = [Self::Active];

    /// The stored and wire text: `active`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
        }
    }
}

impl std::fmt::Display for AgentStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An agent as stored.
#[derive(Debug, Clone)]
pub struct AgentRecord {
    pub id: AgentId,
    pub user_id: UserId,
    pub name: String,
    pub description: String,
    pub system_prompt: String,
    /// Empty: the server's default model.
    pub model: String,
    /// `active` for every agent today.
    pub status: AgentStatus,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Whether the agent had a knowledge document when read (not stored).
    pub has_knowledge: bool,
    /// Whether the agent had an enabled tool when read (not stored).
    pub has_tools: bool,
}

/// Fields of an agent update; `None` leaves the field unchanged.
#[derive(Debug, Clone, Default)]
pub struct AgentPatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub system_prompt: Option<String>,
    pub model: Option<String>,
}

/// Persistence of agents; every method is scoped to the owner.
#[async_trait]
pub trait AgentStore: Send + Sync {
    /// Creates the agent unless its owner has `limit` (false); concurrent creations never
    /// pass the limit.
    async fn create_agent(&self, agent: &AgentRecord, limit: u32) -> StoreResult<bool>;
    /// The user's agents, oldest first.
    async fn list_agents(&self, user_id: &UserId) -> StoreResult<Vec<AgentRecord>>;
    async fn agent(&self, user_id: &UserId, id: &AgentId) -> StoreResult<Option<AgentRecord>>;
    /// Applies `patch`; `None` when the user has no such agent.
    async fn update_agent(
        &self,
        user_id: &UserId,
        id: &AgentId,
        patch: &AgentPatch,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<AgentRecord>>;
    /// Deletes the agent with everything it owns but daily usage; false when there was none.
    async fn delete_agent(&self, user_id: &UserId, id: &AgentId) -> StoreResult<bool>;
}

/// Defines the [`AgentStore`] of `$store` (`$writer` pool writes, `$reader` reads).
macro_rules! agent_store {
    ($store:ident, $db:ty, $writer:ident, $reader:ident) => {
        mod shared {
            use chrono::{DateTime, Utc};

            use super::super::{
                rows::{agent, ms, AGENT_COLUMNS},
                $store,
            };
            use crate::ids::{AgentId, UserId};
            use crate::store::{AgentPatch, AgentRecord, AgentStore, StoreResult};

            #[async_trait::async_trait]
            impl AgentStore for $store {
                async fn create_agent(&self, a: &AgentRecord, limit: u32) -> StoreResult<bool> {
                    let mut tx = self.begin_for_account(&a.user_id).await?;
                    let done = sqlx::query(
                        "INSERT INTO agents (id, user_id, name, description, system_prompt, model, status, created_at, updated_at) \
                         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 WHERE (SELECT COUNT(*) FROM agents WHERE user_id = $10) < $11",
                    )
                    .bind(&a.id)
                    .bind(&a.user_id)
                    .bind(&a.name)
                    .bind(&a.description)
                    .bind(&a.system_prompt)
                    .bind(&a.model)
                    .bind(a.status)
                    .bind(ms(a.created_at))
                    .bind(ms(a.updated_at))
                    .bind(&a.user_id)
                    .bind(i64::from(limit))
                    .execute(&mut *tx)
                    .await?;
                    tx.commit().await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn list_agents(&self, user_id: &UserId) -> StoreResult<Vec<AgentRecord>> {
                    let rows = sqlx::query(&format!(
                        "SELECT {AGENT_COLUMNS} FROM agents WHERE user_id = $1 ORDER BY created_at, id"
                    ))
                    .bind(user_id)
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows.iter().map(agent).collect::<Result<_, _>>()?)
                }

                async fn agent(
                    &self,
                    user_id: &UserId,
                    id: &AgentId,
                ) -> StoreResult<Option<AgentRecord>> {
                    let row = sqlx::query(&format!(
                        "SELECT {AGENT_COLUMNS} FROM agents WHERE user_id = $1 AND id = $2"
                    ))
                    .bind(user_id)
                    .bind(id)
                    .fetch_optional(&self.$reader)
                    .await?;
                    Ok(row.as_ref().map(agent).transpose()?)
                }

                async fn update_agent(
                    &self,
                    user_id: &UserId,
                    id: &AgentId,
                    p: &AgentPatch,
                    now: DateTime<Utc>,
                ) -> StoreResult<Option<AgentRecord>> {
                    let row = sqlx::query(&format!(
                        "UPDATE agents SET name = COALESCE($1, name), description = COALESCE($2, description), \
                         system_prompt = COALESCE($3, system_prompt), model = COALESCE($4, model), updated_at = $5 \
                         WHERE user_id = $6 AND id = $7 RETURNING {AGENT_COLUMNS}"
                    ))
                    .bind(&p.name)
                    .bind(&p.description)
                    .bind(&p.system_prompt)
                    .bind(&p.model)
                    .bind(ms(now))
                    .bind(user_id)
                    .bind(id)
                    .fetch_optional(&self.$writer)
                    .await?;
                    Ok(row.as_ref().map(agent).transpose()?)
                }

                async fn delete_agent(&self, user_id: &UserId, id: &AgentId) -> StoreResult<bool> {
                    let done = sqlx::query("DELETE FROM agents WHERE user_id = $1 AND id = $2")
                        .bind(user_id)
                        .bind(id)
                        .execute(&self.$writer)
                        .await?;
                    Ok(done.rows_affected() == 1)
                }
            }
        }
    };
}
pub(crate) use agent_store;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_states_are_the_stored_and_wire_text() {
        // docs/api.md § States and transitions, and the default of `agents.status`
        // (migrations/sqlite/0002_agents_chat.sql).
        assert_eq!(AgentStatus::ALL.map(AgentStatus::as_str), ["active"]);
        for s in AgentStatus::ALL {
            let json = serde_json::to_value(s).unwrap();
            assert_eq!(json, s.as_str());
            assert_eq!(serde_json::from_value::<AgentStatus>(json).unwrap(), s);
            assert_eq!(s.to_string(), s.as_str());
        }
    }
}
