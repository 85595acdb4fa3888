//! The session part of the persistence boundary: dashboard sign-in sessions and their
//! refresh-token rotation. Every backend implements [`SessionStore`] (SQLite:
//! `sqlite/sessions.rs`); [`super::Store`] requires it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;
use crate::domain::Plan;
use crate::ids::{SessionId, UserId};

/// A sign-in session as stored.
#[derive(Debug, Clone)]
pub struct SessionRecord {
    pub id: SessionId,
    pub user_id: UserId,
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
    /// live when not revoked and seen at or after `idle_cutoff`; oldest by `created_at`,
    /// then id). Returns the ids ended (revoked at the new session's `created_at`, reason
    /// `evicted`).
    ///
    /// The insert and the eviction are one atomic step: however many sessions of one user
    /// are created at once (parallel sign-ins), once they are all created the user has at
    /// most `max_live` live sessions, the newest. SQLite: one write transaction; a server
    /// backend locks the owner's `users` row first. Proven by
    /// `conformance::ten_parallel_sign_ins_leave_at_most_five_live_sessions` and
    /// `conformance::the_oldest_sessions_beyond_the_cap_are_ended`.
    async fn create_session(
        &self,
        session: SessionRecord,
        max_live: usize,
        idle_cutoff: DateTime<Utc>,
    ) -> StoreResult<Vec<SessionId>>;
    async fn session_auth(&self, session_id: &SessionId) -> StoreResult<Option<SessionAuth>>;
    /// Replaces the refresh jti if it still is `old_jti` and the session is not revoked;
    /// false when it was not (a replay or a race lost).
    ///
    /// A compare-and-set: of any number of rotations from one `old_jti`, running at once
    /// or not, exactly one answers true (one conditional `UPDATE`). Proven by
    /// `conformance::refresh_rotation_is_compare_and_set`.
    async fn rotate_refresh(
        &self,
        session_id: &SessionId,
        old_jti: &str,
        new_jti: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Records activity at `now`; `last_seen_at` never moves back.
    async fn touch_session(&self, session_id: &SessionId, now: DateTime<Utc>) -> StoreResult<()>;
    /// Revokes one session of `user_id`; false when there was no live one.
    async fn revoke_session(
        &self,
        user_id: &UserId,
        session_id: &SessionId,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Revokes every session of the user; returns their ids.
    async fn revoke_all_sessions(
        &self,
        user_id: &UserId,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<SessionId>>;
    /// Live sessions, newest first.
    async fn live_sessions(
        &self,
        user_id: &UserId,
        idle_cutoff: DateTime<Utc>,
    ) -> StoreResult<Vec<SessionRecord>>;
}
