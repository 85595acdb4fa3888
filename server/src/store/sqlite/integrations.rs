//! [`IntegrationStore`] on SQLite (`migrations/sqlite/0008_integrations.sql`).

use async_trait::async_trait;
use sqlx::{sqlite::SqliteRow, Row};

use super::{ms, time, SqliteStore};
use crate::store::{
    integrations::{IntegrationRecord, IntegrationStore},
    StoreResult,
};

const COLUMNS: &str = "id, user_id, provider_code, name, agent_id, config, credentials_sealed, \
     key_id, credential_hints, status, created_at, updated_at";

fn integration(row: &SqliteRow) -> Result<IntegrationRecord, sqlx::Error> {
    Ok(IntegrationRecord {
        id: row.try_get("id")?,
        user_id: row.try_get("user_id")?,
        provider_code: row.try_get("provider_code")?,
        name: row.try_get("name")?,
        agent_id: row.try_get("agent_id")?,
        config: row.try_get("config")?,
        credentials_sealed: row.try_get("credentials_sealed")?,
        key_id: row.try_get("key_id")?,
        credential_hints: row.try_get("credential_hints")?,
        status: row.try_get("status")?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
    })
}

#[async_trait]
impl IntegrationStore for SqliteStore {
    async fn create_integration(&self, r: &IntegrationRecord, limit: u32) -> StoreResult<bool> {
        // One statement: the count and the insert cannot interleave with another create.
        let done = sqlx::query(&format!(
            "INSERT INTO integrations ({COLUMNS}) \
             SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? \
             WHERE (SELECT COUNT(*) FROM integrations WHERE user_id = ?) < ?"
        ))
        .bind(&r.id)
        .bind(&r.user_id)
        .bind(&r.provider_code)
        .bind(&r.name)
        .bind(&r.agent_id)
        .bind(&r.config)
        .bind(&r.credentials_sealed)
        .bind(&r.key_id)
        .bind(&r.credential_hints)
        .bind(&r.status)
        .bind(ms(r.created_at))
        .bind(ms(r.updated_at))
        .bind(&r.user_id)
        .bind(i64::from(limit))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn list_integrations(&self, user_id: &str) -> StoreResult<Vec<IntegrationRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM integrations WHERE user_id = ? ORDER BY created_at, id"
        ))
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(integration).collect::<Result<_, _>>()?)
    }

    async fn integration(&self, user_id: &str, id: &str) -> StoreResult<Option<IntegrationRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM integrations WHERE user_id = ? AND id = ?"
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
             key_id = ?, credential_hints = ?, status = ?, updated_at = ? \
             WHERE user_id = ? AND id = ?",
        )
        .bind(&r.name)
        .bind(&r.agent_id)
        .bind(&r.config)
        .bind(&r.credentials_sealed)
        .bind(&r.key_id)
        .bind(&r.credential_hints)
        .bind(&r.status)
        .bind(ms(r.updated_at))
        .bind(&r.user_id)
        .bind(&r.id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn delete_integration(&self, user_id: &str, id: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM integrations WHERE user_id = ? AND id = ?")
            .bind(user_id)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}
