//! [`ApiKeyStore`] on PostgreSQL (`migrations/postgres/0001_baseline.sql`: `api_keys`).
//!
//! Rules kept here, under READ COMMITTED:
//! - the cap of live keys per account: `create_api_key` locks the owner's `users` row
//!   ([`super::lock_account`]) in the transaction before its conditional insert, so
//!   parallel creations of one account count each other's keys;
//! - a rotation revokes the old key and inserts the new one in one transaction, and only
//!   while the old key is live: of two rotations at once, the second waits for the row
//!   and finds it revoked (`rotate_api_key`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{
    begin, lock_account,
    rows::{api_key, ms, plan, KEY_COLUMNS},
    PgStore,
};
use crate::ids::{ApiKeyId, UserId};
use crate::store::{ApiKeyAuth, ApiKeyRecord, ApiKeyStore, StoreResult};

#[async_trait]
impl ApiKeyStore for PgStore {
    async fn create_api_key(&self, k: ApiKeyRecord, cap: usize) -> StoreResult<bool> {
        let mut tx = begin(&self.pool).await?;
        lock_account(&mut tx, &k.user_id).await?;
        let done = sqlx::query(
            "INSERT INTO api_keys (id, user_id, name, prefix, key_hash, scopes, expires_at, created_at) \
             SELECT $1, $2, $3, $4, $5, $6, $7, $8 \
             WHERE (SELECT COUNT(*) FROM api_keys WHERE user_id = $9 AND revoked_at IS NULL) < $10",
        )
        .bind(&k.id)
        .bind(&k.user_id)
        .bind(&k.name)
        .bind(&k.prefix)
        .bind(&k.key_hash)
        .bind(k.scopes.join(" "))
        .bind(k.expires_at.map(ms))
        .bind(ms(k.created_at))
        .bind(&k.user_id)
        .bind(i64::try_from(cap).unwrap_or(i64::MAX))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    async fn rotate_api_key(
        &self,
        user_id: &UserId,
        old_id: &ApiKeyId,
        k: ApiKeyRecord,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let mut tx = begin(&self.pool).await?;
        let revoked = sqlx::query(
            "UPDATE api_keys SET revoked_at = $1 WHERE user_id = $2 AND id = $3 AND revoked_at IS NULL",
        )
        .bind(ms(now))
        .bind(user_id)
        .bind(old_id)
        .execute(&mut *tx)
        .await?;
        if revoked.rows_affected() != 1 {
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO api_keys (id, user_id, name, prefix, key_hash, scopes, expires_at, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&k.id)
        .bind(user_id)
        .bind(&k.name)
        .bind(&k.prefix)
        .bind(&k.key_hash)
        .bind(k.scopes.join(" "))
        .bind(k.expires_at.map(ms))
        .bind(ms(k.created_at))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn list_api_keys(&self, user_id: &UserId) -> StoreResult<Vec<ApiKeyRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {KEY_COLUMNS} FROM api_keys k WHERE k.user_id = $1 AND k.revoked_at IS NULL \
             ORDER BY k.created_at DESC, k.id DESC"
        ))
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(api_key).collect::<Result<_, _>>()?)
    }

    async fn api_key(&self, user_id: &UserId, id: &ApiKeyId) -> StoreResult<Option<ApiKeyRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {KEY_COLUMNS} FROM api_keys k WHERE k.user_id = $1 AND k.id = $2 AND k.revoked_at IS NULL"
        ))
        .bind(user_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(api_key).transpose()?)
    }

    async fn api_key_by_hash(&self, key_hash: &str) -> StoreResult<Option<ApiKeyAuth>> {
        let row = sqlx::query(&format!(
            "SELECT {KEY_COLUMNS}, u.plan FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.key_hash = $1"
        ))
        .bind(key_hash)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            Ok(ApiKeyAuth {
                key: api_key(&r)?,
                plan: plan(&r, "plan")?,
            })
        })
        .transpose()
    }

    async fn revoke_api_key(
        &self,
        user_id: &UserId,
        id: &ApiKeyId,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE api_keys SET revoked_at = $1 WHERE user_id = $2 AND id = $3 AND revoked_at IS NULL",
        )
        .bind(ms(now))
        .bind(user_id)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn touch_api_key(&self, id: &ApiKeyId, now: DateTime<Utc>) -> StoreResult<()> {
        sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2")
            .bind(ms(now))
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
