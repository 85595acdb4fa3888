//! The session part of the persistence boundary: dashboard sign-in sessions and their
//! refresh-token rotation. Every backend implements [`SessionStore`] (SQLite:
//! `sqlite/sessions.rs`); [`super::Store`] requires it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;
use crate::domain::Plan;

/// A sign-in session as stored.
#[derive(Debug, Clone)]
pub struct SessionRecord {
    pub id: String,
    pub user_id: String,
    pub refresh_jti: String,
    pub user_agent: Option<String>,
    pub ip: Option<String>,
    pub created_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A session joined with what authorisation needs of its user.
#[derive(Debug, Clone)]
pub struct SessionAuth {
    pub session: SessionRecord,
    pub plan: Plan,
}

/// Persistence of sign-in sessions. Methods taking a user id are tenant-scoped.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Creates a session, then ends the oldest live ones beyond `max_live` (a session is
    /// live when not revoked and seen at or after `idle_cutoff`). Returns the ids ended.
    async fn create_session(
        &self,
        session: SessionRecord,
        max_live: usize,
        idle_cutoff: DateTime<Utc>,
    ) -> StoreResult<Vec<String>>;
    async fn session_auth(&self, session_id: &str) -> StoreResult<Option<SessionAuth>>;
    /// Replaces the refresh jti if it still is `old_jti` and the session is not revoked;
    /// false when it was not (a replay or a race lost).
    async fn rotate_refresh(
        &self,
        session_id: &str,
        old_jti: &str,
        new_jti: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    async fn touch_session(&self, session_id: &str, now: DateTime<Utc>) -> StoreResult<()>;
    /// Revokes one session of `user_id`; false when there was no live one.
    async fn revoke_session(
        &self,
        user_id: &str,
        session_id: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Revokes every session of the user; returns their ids.
    async fn revoke_all_sessions(
        &self,
        user_id: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<String>>;
    /// Live sessions, newest first.
    async fn live_sessions(
        &self,
        user_id: &str,
        idle_cutoff: DateTime<Utc>,
    ) -> StoreResult<Vec<SessionRecord>>;
}
