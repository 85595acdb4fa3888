//! [`IntegrationStore`] on SQLite (`migrations/sqlite/0008_integrations.sql`).

use super::{
    rows::{integration, ms, INTEGRATION_COLUMNS},
    SqliteStore,
};
use crate::ids::{IntegrationId, PublicId, ThreadId, UserId};
use crate::store::{
    integrations::{IntegrationRecord, IntegrationStore},
    StoreResult,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

#[async_trait]
impl IntegrationStore for SqliteStore {
    async fn create_integration(&self, r: &IntegrationRecord, limit: u32) -> StoreResult<bool> {
        // One statement: the count and the insert cannot interleave with another create.
        let done = sqlx::query(&format!(
            "INSERT INTO integrations ({INTEGRATION_COLUMNS}) \
             SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? \
             WHERE (SELECT COUNT(*) FROM integrations WHERE user_id = ?) < ?"
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
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn list_integrations(&self, user_id: &UserId) -> StoreResult<Vec<IntegrationRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {INTEGRATION_COLUMNS} FROM integrations WHERE user_id = ? ORDER BY created_at, id"
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
            "SELECT {INTEGRATION_COLUMNS} FROM integrations WHERE user_id = ? AND id = ?"
        ))
        .bind(user_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(integration).transpose()?)
    }

    async fn update_integration(&self, r: &IntegrationRecord) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE integrations SET name = ?, agent_id = ?, config = ?, credentials_sealed = ?, \
             key_id = ?, credential_hints = ?, status = ?, status_detail = ?, \
             inbound_secret_hash = ?, updated_at = ? \
             WHERE user_id = ? AND id = ?",
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
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn delete_integration(&self, user_id: &UserId, id: &IntegrationId) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM integrations WHERE user_id = ? AND id = ?")
            .bind(user_id)
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn integration_by_id(
        &self,
        id: &IntegrationId,
    ) -> StoreResult<Option<IntegrationRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {INTEGRATION_COLUMNS} FROM integrations WHERE id = ?"
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
            "SELECT {INTEGRATION_COLUMNS} FROM integrations WHERE public_id = ?"
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
            "SELECT thread_id FROM channel_threads WHERE integration_id = ? AND conversation_key = ?",
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
            "DELETE FROM channel_threads WHERE integration_id = ? AND conversation_key = ?",
        )
        .bind(integration_id)
        .bind(conversation_key)
        .execute(&self.writer)
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
            "INSERT INTO channel_events (integration_id, event_id, received_at) VALUES (?, ?, ?) \
             ON CONFLICT DO NOTHING",
        )
        .bind(integration_id)
        .bind(event_id)
        .bind(ms(at))
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn prune_channel_events(&self, before: DateTime<Utc>) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM channel_events WHERE received_at < ?")
            .bind(ms(before))
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected())
    }
}
