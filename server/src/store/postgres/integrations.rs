//! [`IntegrationStore`] on PostgreSQL (`migrations/postgres/0001_baseline.sql`:
//! `integrations`, `channel_threads`, `channel_events`).
//!
//! Rules kept here, under READ COMMITTED:
//! - the plan's integration limit: `create_integration` locks the owner's `users` row
//!   ([`super::lock_account`]) in the transaction before its conditional insert, so
//!   parallel creations of one account count each other's integrations;
//! - each inbound event is answered once: `INSERT … ON CONFLICT DO NOTHING` on the primary
//!   key `(integration_id, event_id)`; of inserts at once, one inserts and the others wait
//!   for it and then insert nothing (`first_channel_event`);
//! - one thread per external conversation: an upsert on `(integration_id,
//!   conversation_key)`, made with the turn that creates the thread
//!   (`ChatStore::record_turns`, `store/postgres/chat.rs`).

use super::{
    begin, lock_account,
    rows::{integration, ms, INTEGRATION_COLUMNS},
    PgStore,
};
use crate::ids::{IntegrationId, PublicId, ThreadId, UserId};
use crate::store::{
    integrations::{IntegrationRecord, IntegrationStore},
    StoreResult,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

#[async_trait]
impl IntegrationStore for PgStore {
    async fn create_integration(&self, r: &IntegrationRecord, limit: u32) -> StoreResult<bool> {
        // The owner's creations one at a time: each counts what the others wrote.
        let mut tx = begin(&self.pool).await?;
        lock_account(&mut tx, &r.user_id).await?;
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

    async fn list_integrations(&self, user_id: &UserId) -> StoreResult<Vec<IntegrationRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {INTEGRATION_COLUMNS} FROM integrations WHERE user_id = $1 ORDER BY created_at, id"
        ))
        .bind(user_id)
        .fetch_all(&self.pool)
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
        .fetch_optional(&self.pool)
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
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn delete_integration(&self, user_id: &UserId, id: &IntegrationId) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM integrations WHERE user_id = $1 AND id = $2")
            .bind(user_id)
            .bind(id)
            .execute(&self.pool)
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
        .fetch_optional(&self.pool)
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
        .fetch_optional(&self.pool)
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
        .fetch_optional(&self.pool)
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
        .execute(&self.pool)
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
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn prune_channel_events(&self, before: DateTime<Utc>) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM channel_events WHERE received_at < $1")
            .bind(ms(before))
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}
