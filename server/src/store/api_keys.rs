//! The API-key part of the persistence boundary: keys are kept by their hash, never in
//! clear. Every backend implements [`ApiKeyStore`] (SQLite: `sqlite/api_keys.rs`);
//! [`super::Store`] requires it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;
use crate::domain::Plan;
use crate::ids::{ApiKeyId, UserId};

/// An API key as stored (never the key itself).
#[derive(Debug, Clone)]
pub struct ApiKeyRecord {
    pub id: ApiKeyId,
    pub user_id: UserId,
    pub name: String,
    pub prefix: String,
    pub key_hash: String,
    pub scopes: Vec<String>,
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
    /// Creates the key unless its owner already holds `cap` live (not revoked) keys; false
    /// at the cap, and nothing is written.
    ///
    /// The count and the insert are one atomic step: however many creations run at once,
    /// the owner never holds more than `cap` live keys. SQLite: one conditional
    /// `INSERT … SELECT … WHERE (SELECT count(*) …) < cap` (SQLite runs write statements
    /// one at a time, each on the latest data). A PostgreSQL backend keeps the guarantee by
    /// locking the owner's `users` row (`SELECT … FOR UPDATE`) in the transaction before
    /// that same conditional insert: under read committed, two inserts not serialised by
    /// the lock could each count `cap - 1`.
    async fn create_api_key(&self, key: ApiKeyRecord, cap: usize) -> StoreResult<bool>;
    /// Replaces the user's live key `old_id` with `new` atomically: `old_id` is revoked at
    /// `now` and `new` inserted, or nothing is written and the answer is false (no such
    /// live key, e.g. a concurrent rotation revoked it first). The number of live keys
    /// stays the same, so no cap applies.
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
