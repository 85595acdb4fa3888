//! Agent tools and their approvals ([`ToolStore`], docs/api.md § Tools).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;
use crate::{
    domain::ToolType,
    ids::{AgentId, MessageId, ThreadId, ToolCallId, ToolId, UserId},
};

/// A tool as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRecord {
    pub id: ToolId,
    pub agent_id: AgentId,
    pub user_id: UserId,
    pub tool_type: ToolType,
    /// `^[a-zA-Z0-9_-]{1,64}$`, unique among the agent's tools.
    pub name: String,
    pub description: String,
    pub enabled: bool,
    pub requires_approval: bool,
    /// The config object as JSON text, without secrets.
    pub config: String,
    /// The secret headers' JSON object, sealed ([`crate::crypto::SecretBox`]); `None`: none.
    pub secrets_sealed: Option<Vec<u8>>,
    /// Id of the key that sealed `secrets_sealed`.
    pub key_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A tool call that waits for a person's decision (docs/api.md § Approvals).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRecord {
    pub thread_id: ThreadId,
    pub tool_call_id: ToolCallId,
    /// The reply that stopped for it; its group is every approval of that reply.
    pub message_id: MessageId,
    pub user_id: UserId,
    pub agent_id: AgentId,
    /// The tool's name, as the model called it.
    pub name: String,
    /// The arguments as the model wrote them.
    pub arguments: String,
    /// `pending`, `approved` or `denied`.
    pub status: String,
    /// The decided call's outcome (a `toolCalls` entry as JSON), once run or denied.
    pub result: Option<String>,
    pub created_at: DateTime<Utc>,
    /// After this a pending call can no longer be decided (24 h after it was made).
    pub expires_at: DateTime<Utc>,
}

/// The columns of [`ApprovalRecord`].
pub(crate) const APPROVAL_COLUMNS: &str = "thread_id, tool_call_id, message_id, user_id, \
     agent_id, name, arguments, status, result, created_at, expires_at";

/// The columns of [`ToolRecord`], in the order the statements bind them.
pub(crate) const TOOL_COLUMNS: &str = "id, agent_id, user_id, type, name, description, enabled, \
     requires_approval, config, secrets_sealed, key_id, created_at, updated_at";

/// Inserts a tool unless its agent (of its owner) has `$14` tools already.
pub(crate) const INSERT_TOOL: &str = "INSERT INTO agent_tools (id, agent_id, user_id, type, \
     name, description, enabled, requires_approval, config, secrets_sealed, key_id, \
     created_at, updated_at) \
     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13 \
     WHERE EXISTS (SELECT 1 FROM agents WHERE id = $2 AND user_id = $3) \
     AND (SELECT COUNT(*) FROM agent_tools WHERE agent_id = $2) < $14";

/// Replaces a tool's mutable fields.
pub(crate) const UPDATE_TOOL: &str = "UPDATE agent_tools SET name = $1, description = $2, \
     enabled = $3, requires_approval = $4, config = $5, secrets_sealed = $6, key_id = $7, \
     updated_at = $8 WHERE id = $9 AND agent_id = $10 AND user_id = $11";

/// Persistence of agent tools; every method is scoped to the owner and agent.
#[async_trait]
pub trait ToolStore: Send + Sync {
    /// Stores a new tool unless its agent has `limit` or is not the owner's (false), atomically
    /// per agent. Errors: [`crate::store::Conflict::ToolName`] for a name taken.
    async fn create_tool(&self, record: &ToolRecord, limit: u32) -> StoreResult<bool>;
    /// The agent's tools, oldest first.
    async fn list_tools(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
    ) -> StoreResult<Vec<ToolRecord>>;
    async fn tool(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        id: &ToolId,
    ) -> StoreResult<Option<ToolRecord>>;
    /// Replaces the mutable fields; false when the owner's agent has no such tool. Errors:
    /// [`crate::store::Conflict::ToolName`] for a name taken.
    async fn update_tool(&self, record: &ToolRecord) -> StoreResult<bool>;
    /// False when the owner's agent has no such tool.
    async fn delete_tool(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        id: &ToolId,
    ) -> StoreResult<bool>;

    /// Stores pending approvals (all of one reply); nothing for an empty list.
    async fn create_approvals(&self, records: &[ApprovalRecord]) -> StoreResult<()>;
    /// One approval of the owner's thread, whatever its status.
    async fn approval(
        &self,
        user_id: &UserId,
        thread_id: &ThreadId,
        tool_call_id: &ToolCallId,
    ) -> StoreResult<Option<ApprovalRecord>>;
    /// Decides a pending, unexpired approval at `now`; of concurrent decisions exactly one
    /// answers true.
    async fn decide_approval(
        &self,
        record: &ApprovalRecord,
        approved: bool,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Records a decided call's outcome (a `toolCalls` entry as JSON).
    async fn set_approval_result(
        &self,
        thread_id: &ThreadId,
        tool_call_id: &ToolCallId,
        result: &str,
    ) -> StoreResult<()>;
    /// The approvals of reply `message_id` that are still pending.
    async fn pending_approvals(&self, message_id: &MessageId) -> StoreResult<Vec<ApprovalRecord>>;
    /// Once every approval of reply `message_id` has its result and none was claimed, claims
    /// and answers them oldest first (one claimer gets them); otherwise an empty list.
    async fn claim_continuation(&self, message_id: &MessageId) -> StoreResult<Vec<ApprovalRecord>>;
}

/// Defines the row mapper `tool` over the rows of database `$db`.
macro_rules! tool_mapper {
    ($db:ty) => {
        pub(crate) fn tool(
            row: &<$db as sqlx::Database>::Row,
        ) -> Result<crate::store::tools::ToolRecord, sqlx::Error> {
            use sqlx::Row;
            Ok(crate::store::tools::ToolRecord {
                id: row.try_get("id")?,
                agent_id: row.try_get("agent_id")?,
                user_id: row.try_get("user_id")?,
                tool_type: row.try_get("type")?,
                name: row.try_get("name")?,
                description: row.try_get("description")?,
                enabled: row.try_get("enabled")?,
                requires_approval: row.try_get("requires_approval")?,
                config: row.try_get("config")?,
                secrets_sealed: row.try_get("secrets_sealed")?,
                key_id: row.try_get("key_id")?,
                created_at: crate::store::from_millis(row.try_get("created_at")?),
                updated_at: crate::store::from_millis(row.try_get("updated_at")?),
            })
        }
    };
}
pub(crate) use tool_mapper;

/// Defines the row mapper `approval` over the rows of database `$db`.
macro_rules! approval_mapper {
    ($db:ty) => {
        pub(crate) fn approval(
            row: &<$db as sqlx::Database>::Row,
        ) -> Result<crate::store::tools::ApprovalRecord, sqlx::Error> {
            use sqlx::Row;
            Ok(crate::store::tools::ApprovalRecord {
                thread_id: row.try_get("thread_id")?,
                tool_call_id: row.try_get("tool_call_id")?,
                message_id: row.try_get("message_id")?,
                user_id: row.try_get("user_id")?,
                agent_id: row.try_get("agent_id")?,
                name: row.try_get("name")?,
                arguments: row.try_get("arguments")?,
                status: row.try_get("status")?,
                result: row.try_get("result")?,
                created_at: crate::store::from_millis(row.try_get("created_at")?),
                expires_at: crate::store::from_millis(row.try_get("expires_at")?),
            })
        }
    };
}
pub(crate) use approval_mapper;

/// Defines the [`ToolStore`] of `$store` (`$writer` pool writes, `$reader` reads).
macro_rules! tool_store {
    ($store:ident, $db:ty, $writer:ident, $reader:ident) => {
        mod shared {
            use chrono::{DateTime, Utc};

            use super::super::{row_lock, $store};
            use crate::ids::{AgentId, MessageId, ThreadId, ToolCallId, ToolId, UserId};
            use crate::store::{
                to_millis,
                tools::{
                    name_conflict, ApprovalRecord, ToolRecord, ToolStore, APPROVAL_COLUMNS,
                    TOOL_COLUMNS, UPDATE_TOOL,
                },
                StoreResult,
            };

            mod tool_rows {
                crate::store::tools::tool_mapper!($db);
                crate::store::tools::approval_mapper!($db);
            }

            #[async_trait::async_trait]
            impl ToolStore for $store {
                async fn create_tool(&self, r: &ToolRecord, limit: u32) -> StoreResult<bool> {
                    // The agent's row locked first (where transactions run side by side), so
                    // parallel creations count each other's tools.
                    let mut tx = self.begin_write().await?;
                    let sql = format!("SELECT 1 FROM agents WHERE id = $1{}", row_lock(" FOR UPDATE"));
                    sqlx::query(&sql).bind(&r.agent_id).execute(&mut *tx).await?;
                    let done = crate::store::tools::insert_tool_query!(r, limit)
                        .execute(&mut *tx)
                        .await
                        .map_err(name_conflict)?;
                    tx.commit().await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn list_tools(
                    &self,
                    user_id: &UserId,
                    agent_id: &AgentId,
                ) -> StoreResult<Vec<ToolRecord>> {
                    let rows = sqlx::query(&format!(
                        "SELECT {} FROM agent_tools WHERE user_id = $1 AND agent_id = $2 \
                         ORDER BY created_at, id",
                        TOOL_COLUMNS
                    ))
                    .bind(user_id)
                    .bind(agent_id)
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows.iter().map(tool_rows::tool).collect::<Result<_, _>>()?)
                }

                async fn tool(
                    &self,
                    user_id: &UserId,
                    agent_id: &AgentId,
                    id: &ToolId,
                ) -> StoreResult<Option<ToolRecord>> {
                    let row = sqlx::query(&format!(
                        "SELECT {} FROM agent_tools WHERE user_id = $1 AND agent_id = $2 AND id = $3",
                        TOOL_COLUMNS
                    ))
                    .bind(user_id)
                    .bind(agent_id)
                    .bind(id)
                    .fetch_optional(&self.$reader)
                    .await?;
                    Ok(row.as_ref().map(tool_rows::tool).transpose()?)
                }

                async fn update_tool(&self, r: &ToolRecord) -> StoreResult<bool> {
                    let done = sqlx::query(UPDATE_TOOL)
                        .bind(&r.name)
                        .bind(&r.description)
                        .bind(r.enabled)
                        .bind(r.requires_approval)
                        .bind(&r.config)
                        .bind(&r.secrets_sealed)
                        .bind(&r.key_id)
                        .bind(to_millis(r.updated_at))
                        .bind(&r.id)
                        .bind(&r.agent_id)
                        .bind(&r.user_id)
                        .execute(&self.$writer)
                        .await
                        .map_err(name_conflict)?;
                    Ok(done.rows_affected() == 1)
                }

                async fn delete_tool(
                    &self,
                    user_id: &UserId,
                    agent_id: &AgentId,
                    id: &ToolId,
                ) -> StoreResult<bool> {
                    let done = sqlx::query(
                        "DELETE FROM agent_tools WHERE user_id = $1 AND agent_id = $2 AND id = $3",
                    )
                    .bind(user_id)
                    .bind(agent_id)
                    .bind(id)
                    .execute(&self.$writer)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn create_approvals(&self, records: &[ApprovalRecord]) -> StoreResult<()> {
                    let mut tx = self.begin_write().await?;
                    for r in records {
                        sqlx::query(&format!(
                            "INSERT INTO tool_approvals ({}) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                            APPROVAL_COLUMNS
                        ))
                        .bind(&r.thread_id)
                        .bind(&r.tool_call_id)
                        .bind(&r.message_id)
                        .bind(&r.user_id)
                        .bind(&r.agent_id)
                        .bind(&r.name)
                        .bind(&r.arguments)
                        .bind(&r.status)
                        .bind(&r.result)
                        .bind(to_millis(r.created_at))
                        .bind(to_millis(r.expires_at))
                        .execute(&mut *tx)
                        .await?;
                    }
                    tx.commit().await?;
                    Ok(())
                }

                async fn approval(
                    &self,
                    user_id: &UserId,
                    thread_id: &ThreadId,
                    tool_call_id: &ToolCallId,
                ) -> StoreResult<Option<ApprovalRecord>> {
                    let row = sqlx::query(&format!(
                        "SELECT {} FROM tool_approvals \
                         WHERE user_id = $1 AND thread_id = $2 AND tool_call_id = $3",
                        APPROVAL_COLUMNS
                    ))
                    .bind(user_id)
                    .bind(thread_id)
                    .bind(tool_call_id)
                    .fetch_optional(&self.$reader)
                    .await?;
                    Ok(row.as_ref().map(tool_rows::approval).transpose()?)
                }

                async fn decide_approval(
                    &self,
                    r: &ApprovalRecord,
                    approved: bool,
                    now: DateTime<Utc>,
                ) -> StoreResult<bool> {
                    let done = sqlx::query(
                        "UPDATE tool_approvals SET status = $1, decided_at = $2 \
                         WHERE thread_id = $3 AND tool_call_id = $4 AND user_id = $5 \
                         AND status = 'pending' AND expires_at > $2",
                    )
                    .bind(if approved { "approved" } else { "denied" })
                    .bind(to_millis(now))
                    .bind(&r.thread_id)
                    .bind(&r.tool_call_id)
                    .bind(&r.user_id)
                    .execute(&self.$writer)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn set_approval_result(
                    &self,
                    thread_id: &ThreadId,
                    tool_call_id: &ToolCallId,
                    result: &str,
                ) -> StoreResult<()> {
                    sqlx::query(
                        "UPDATE tool_approvals SET result = $1 \
                         WHERE thread_id = $2 AND tool_call_id = $3",
                    )
                    .bind(result)
                    .bind(thread_id)
                    .bind(tool_call_id)
                    .execute(&self.$writer)
                    .await?;
                    Ok(())
                }

                async fn pending_approvals(
                    &self,
                    message_id: &MessageId,
                ) -> StoreResult<Vec<ApprovalRecord>> {
                    let rows = sqlx::query(&format!(
                        "SELECT {} FROM tool_approvals WHERE message_id = $1 AND status = 'pending' \
                         ORDER BY created_at, tool_call_id",
                        APPROVAL_COLUMNS
                    ))
                    .bind(message_id)
                    .fetch_all(&self.$writer)
                    .await?;
                    Ok(rows
                        .iter()
                        .map(tool_rows::approval)
                        .collect::<Result<_, _>>()?)
                }

                async fn claim_continuation(
                    &self,
                    message_id: &MessageId,
                ) -> StoreResult<Vec<ApprovalRecord>> {
                    // One statement: SQLite's one writer runs it alone; on PostgreSQL a second
                    // claim waits for the first's row locks, then finds `continued` set and
                    // updates nothing.
                    let mut rows = sqlx::query(&format!(
                        "UPDATE tool_approvals SET continued = TRUE \
                         WHERE message_id = $1 AND NOT continued AND NOT EXISTS ( \
                             SELECT 1 FROM tool_approvals \
                             WHERE message_id = $1 AND (status = 'pending' OR result IS NULL)) \
                         RETURNING {}",
                        APPROVAL_COLUMNS
                    ))
                    .bind(message_id)
                    .fetch_all(&self.$writer)
                    .await?
                    .iter()
                    .map(tool_rows::approval)
                    .collect::<Result<Vec<_>, _>>()?;
                    rows.sort_by(|a, b| {
                        (a.created_at, a.tool_call_id.as_str())
                            .cmp(&(b.created_at, b.tool_call_id.as_str()))
                    });
                    Ok(rows)
                }
            }
        }
    };
}
pub(crate) use tool_store;

/// [`INSERT_TOOL`] with `$r` (a [`ToolRecord`]) and `$limit` bound.
macro_rules! insert_tool_query {
    ($r:expr, $limit:expr) => {
        sqlx::query(crate::store::tools::INSERT_TOOL)
            .bind(&$r.id)
            .bind(&$r.agent_id)
            .bind(&$r.user_id)
            .bind($r.tool_type)
            .bind(&$r.name)
            .bind(&$r.description)
            .bind($r.enabled)
            .bind($r.requires_approval)
            .bind(&$r.config)
            .bind(&$r.secrets_sealed)
            .bind(&$r.key_id)
            .bind(crate::store::to_millis($r.created_at))
            .bind(crate::store::to_millis($r.updated_at))
            .bind(i64::from($limit))
    };
}
pub(crate) use insert_tool_query;

/// A unique violation as [`crate::store::Conflict::ToolName`], any other error as is.
pub(crate) fn name_conflict(err: sqlx::Error) -> super::StoreError {
    if super::sqlx_error::is_unique_violation(&err) {
        super::StoreError::Conflict(super::Conflict::ToolName)
    } else {
        err.into()
    }
}
