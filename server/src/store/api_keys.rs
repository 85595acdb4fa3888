//! The API-key part of the persistence boundary ([`ApiKeyStore`]); keys kept by hash only.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;
use crate::domain::Plan;
use crate::ids::{AgentId, ApiKeyId, UserId};

/// An API key as stored (never the key itself).
#[derive(Debug, Clone)]
pub struct ApiKeyRecord {
    pub id: ApiKeyId,
    pub user_id: UserId,
    pub name: String,
    pub prefix: String,
    pub key_hash: String,
    pub scopes: Vec<String>,
    /// The agents the key works for; `None`: every agent of its owner.
    pub agent_ids: Option<Vec<AgentId>>,
    /// Tokens the key may use per calendar month (UTC); `None`: no budget.
    pub monthly_token_budget: Option<u64>,
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// An API key joined with its owner's plan.
#[derive(Debug, Clone)]
pub struct ApiKeyAuth {
    pub key: ApiKeyRecord,
    pub plan: Plan,
}

/// Persistence of API keys. Methods taking a user id are tenant-scoped.
#[async_trait]
pub trait ApiKeyStore: Send + Sync {
    /// Creates the key unless its owner holds `cap` live keys (false), atomically.
    async fn create_api_key(&self, key: ApiKeyRecord, cap: usize) -> StoreResult<bool>;
    /// Atomically revokes live key `old_id` and inserts `new` (no cap); false: no such key.
    async fn rotate_api_key(
        &self,
        user_id: &UserId,
        old_id: &ApiKeyId,
        new: ApiKeyRecord,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Keys of the user that are not revoked, newest first.
    async fn list_api_keys(&self, user_id: &UserId) -> StoreResult<Vec<ApiKeyRecord>>;
    async fn api_key(&self, user_id: &UserId, id: &ApiKeyId) -> StoreResult<Option<ApiKeyRecord>>;
    async fn api_key_by_hash(&self, key_hash: &str) -> StoreResult<Option<ApiKeyAuth>>;
    /// Revokes a key of the user; false when none was live.
    async fn revoke_api_key(
        &self,
        user_id: &UserId,
        id: &ApiKeyId,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    async fn touch_api_key(&self, id: &ApiKeyId, now: DateTime<Utc>) -> StoreResult<()>;
}

/// The stored form of a key's agents: their ids, space-separated; `None` for every agent.
pub(crate) fn agent_ids_text(k: &ApiKeyRecord) -> Option<String> {
    k.agent_ids.as_ref().map(|ids| {
        ids.iter()
            .map(AgentId::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// The stored form of a key's monthly budget.
pub(crate) fn budget_number(k: &ApiKeyRecord) -> Option<i64> {
    k.monthly_token_budget
        .map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

/// Defines the [`ApiKeyStore`] of `$store` (`$writer` pool writes, `$reader` reads).
macro_rules! api_key_store {
    ($store:ident, $db:ty, $writer:ident, $reader:ident) => {
        mod shared {
            use chrono::{DateTime, Utc};

            use super::super::{
                rows::{api_key, ms, plan, KEY_COLUMNS},
                $store,
            };
            use crate::ids::{ApiKeyId, UserId};
            use crate::store::{ApiKeyAuth, ApiKeyRecord, ApiKeyStore, StoreResult};

            #[async_trait::async_trait]
            impl ApiKeyStore for $store {
                async fn create_api_key(&self, k: ApiKeyRecord, cap: usize) -> StoreResult<bool> {
                    let mut tx = self.begin_for_account(&k.user_id).await?;
                    let done = sqlx::query(
                        "INSERT INTO api_keys (id, user_id, name, prefix, key_hash, scopes, expires_at, created_at, \
                         agent_ids, monthly_token_budget) \
                         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $11, $12 \
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
                    .bind(crate::store::api_keys::agent_ids_text(&k))
                    .bind(crate::store::api_keys::budget_number(&k))
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
                    let mut tx = self.begin_write().await?;
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
                        "INSERT INTO api_keys (id, user_id, name, prefix, key_hash, scopes, expires_at, created_at, \
                         agent_ids, monthly_token_budget) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                    )
                    .bind(&k.id)
                    .bind(user_id)
                    .bind(&k.name)
                    .bind(&k.prefix)
                    .bind(&k.key_hash)
                    .bind(k.scopes.join(" "))
                    .bind(k.expires_at.map(ms))
                    .bind(ms(k.created_at))
                    .bind(crate::store::api_keys::agent_ids_text(&k))
                    .bind(crate::store::api_keys::budget_number(&k))
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
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows.iter().map(api_key).collect::<Result<_, _>>()?)
                }

                async fn api_key(
                    &self,
                    user_id: &UserId,
                    id: &ApiKeyId,
                ) -> StoreResult<Option<ApiKeyRecord>> {
                    let row = sqlx::query(&format!(
                        "SELECT {KEY_COLUMNS} FROM api_keys k WHERE k.user_id = $1 AND k.id = $2 AND k.revoked_at IS NULL"
                    ))
                    .bind(user_id)
                    .bind(id)
                    .fetch_optional(&self.$reader)
                    .await?;
                    Ok(row.as_ref().map(api_key).transpose()?)
                }

                async fn api_key_by_hash(&self, key_hash: &str) -> StoreResult<Option<ApiKeyAuth>> {
                    let row = sqlx::query(&format!(
                        "SELECT {KEY_COLUMNS}, u.plan FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.key_hash = $1"
                    ))
                    .bind(key_hash)
                    .fetch_optional(&self.$reader)
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
                    .execute(&self.$writer)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn touch_api_key(
                    &self,
                    id: &ApiKeyId,
                    now: DateTime<Utc>,
                ) -> StoreResult<()> {
                    sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2")
                        .bind(ms(now))
                        .bind(id)
                        .execute(&self.$writer)
                        .await?;
                    Ok(())
                }
            }
        }
    };
}
pub(crate) use api_key_store;
