//! The agent part of the persistence boundary. Every backend implements [`AgentStore`]
//! (SQLite: `sqlite/agents.rs`); [`super::Store`] requires it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;
use crate::ids::{AgentId, UserId};

/// An agent's state (docs/api.md § States and transitions: every agent is `active` from
/// its creation until it is deleted). Stored as its text ([`AgentStatus::as_str`]) in
/// `agents.status` (`migrations/sqlite/0002_agents_chat.sql`), and answered as that text
/// (docs/api.md § Agent).
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
    /// Every state.
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
    /// Whether the agent had a knowledge document (in any status) when it was read; not a
    /// stored column. Chat skips retrieval, and its query, when it is false; a new agent
    /// has none. Adding a document forgets the agent from the service's agent cache, so
    /// the next chat reads it again; a copy cached by another instance, or by a chat that
    /// read the agent while the document was being added, is replaced within
    /// `AGENT_CACHE_TTL` (2 s), while the new document is still being indexed.
    pub has_knowledge: bool,
    /// Whether the agent had an enabled tool when it was read; not a stored column. Chat
    /// reads the agent's tools only when it is true; every tool change forgets the agent
    /// from the agent cache on every instance ([`crate::agents::AgentService::tools_changed`]).
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
    /// Creates the agent unless its owner already has `limit` agents (the plan limit);
    /// false at the limit, and nothing is written.
    ///
    /// The count and the insert are one atomic step: however many creations run at once,
    /// the owner never has more than `limit` agents. SQLite: one conditional
    /// `INSERT … SELECT … WHERE (SELECT count(*) …) < limit` (write statements run one at a
    /// time); a server backend under read committed locks the owner's `users` row
    /// (`SELECT … FOR UPDATE`) in the transaction first, or two inserts each count
    /// `limit - 1`. Proven by
    /// `conformance::ten_parallel_agent_creates_at_a_limit_of_three_leave_three`.
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
    /// Deletes the agent with its threads and messages, its documents with their chunks,
    /// pages, jobs and embeddings, and its chunk generation; false when there was none.
    /// The owner's daily usage stays.
    async fn delete_agent(&self, user_id: &UserId, id: &AgentId) -> StoreResult<bool>;
}

/// Defines, in a private module `shared` of the backend file that invokes it, the
/// [`AgentStore`] implementation of `$store` (database `$db`), whose `$writer` field runs
/// writes and `$reader` field reads (the same pool on PostgreSQL). The statements are the
/// same on both backends (SQLite reads `$n` placeholders as PostgreSQL does); a creation begins as
/// `$store`'s per-account check-then-act (`begin_for_account`). The backend's `rows` module
/// supplies the row mappers.
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
