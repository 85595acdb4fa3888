//! [`AgentStore`] on PostgreSQL (`migrations/postgres/0001_baseline.sql`: `agents`).
//!
//! Rules kept here, under READ COMMITTED:
//! - the plan's agent limit: `create_agent` locks the owner's `users` row
//!   ([`super::lock_account`]) in the transaction before its conditional insert, so
//!   parallel creations of one account count each other's agents (a single
//!   `INSERT … SELECT … WHERE (SELECT count(*) …) < $n` lets two creations at a limit of
//!   3 both see 2 and leave 4);
//! - deleting an agent deletes its threads, documents, chunks and jobs by the foreign
//!   keys' `ON DELETE CASCADE`, and its chunk and embedding generations by the trigger
//!   `agents_generations_del`, in the same statement (`delete_agent`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{
    begin, lock_account,
    rows::{agent, ms, AGENT_COLUMNS},
    PgStore,
};
use crate::ids::{AgentId, UserId};
use crate::store::{AgentPatch, AgentRecord, AgentStore, StoreResult};

#[async_trait]
impl AgentStore for PgStore {
    async fn create_agent(&self, a: &AgentRecord, limit: u32) -> StoreResult<bool> {
        let mut tx = begin(&self.pool).await?;
        lock_account(&mut tx, &a.user_id).await?;
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
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(agent).collect::<Result<_, _>>()?)
    }

    async fn agent(&self, user_id: &UserId, id: &AgentId) -> StoreResult<Option<AgentRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE user_id = $1 AND id = $2"
        ))
        .bind(user_id)
        .bind(id)
        .fetch_optional(&self.pool)
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
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(agent).transpose()?)
    }

    async fn delete_agent(&self, user_id: &UserId, id: &AgentId) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM agents WHERE user_id = $1 AND id = $2")
            .bind(user_id)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}
