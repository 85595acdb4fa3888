//! Dashboard sign-in sessions and their refresh-token rotation ([`SessionStore`]).

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
    /// Creates a session and, atomically, evicts the live ones (not revoked, seen since
    /// `idle_cutoff`) beyond the newest `max_live`; answers their ids.
    async fn create_session(
        &self,
        session: SessionRecord,
        max_live: usize,
        idle_cutoff: DateTime<Utc>,
    ) -> StoreResult<Vec<SessionId>>;
    async fn session_auth(&self, session_id: &SessionId) -> StoreResult<Option<SessionAuth>>;
    /// Replaces the refresh jti if it still is `old_jti` on a live session; of rotations
    /// from one `old_jti`, exactly one answers true.
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

/// Defines the [`SessionStore`] of `$store` (`$writer` pool writes, `$reader` reads) with
/// the invoking file's `TOUCH_SESSION` (moves `last_seen_at` up, never back).
macro_rules! session_store {
    ($store:ident, $db:ty, $writer:ident, $reader:ident) => {
        mod shared {
            use chrono::{DateTime, Utc};

            use super::super::{
                rows::{ms, plan, session, SESSION_COLUMNS},
                $store,
            };
            use super::super::{in_list, list};
            use super::TOUCH_SESSION;
            use crate::ids::{SessionId, UserId};
            use crate::store::{SessionAuth, SessionRecord, SessionStore, StoreResult};

            /// Evicts the account's live sessions beyond the newest `max_live`; their ids.
            async fn end_sessions_over_cap(
                tx: &mut sqlx::Transaction<'_, $db>,
                user_id: &UserId,
                idle_cutoff: DateTime<Utc>,
                max_live: usize,
                now: DateTime<Utc>,
            ) -> Result<Vec<SessionId>, sqlx::Error> {
                let over: Vec<SessionId> = sqlx::query_scalar(
                    "SELECT id FROM (SELECT id, row_number() OVER \
                     (ORDER BY created_at DESC, id DESC) AS n FROM sessions \
                     WHERE user_id = $1 AND revoked_at IS NULL AND last_seen_at >= $2) AS live \
                     WHERE n > $3 ORDER BY n",
                )
                .bind(user_id)
                .bind(ms(idle_cutoff))
                .bind(max_live as i64)
                .fetch_all(&mut **tx)
                .await?;
                if !over.is_empty() {
                    let sql = format!(
                        "UPDATE sessions SET revoked_at = $1, revoked_reason = 'evicted' WHERE id {}",
                        in_list("$2")
                    );
                    sqlx::query(&sql)
                        .bind(ms(now))
                        .bind(list(&over))
                        .execute(&mut **tx)
                        .await?;
                }
                Ok(over)
            }

            #[async_trait::async_trait]
            impl SessionStore for $store {
                async fn create_session(
                    &self,
                    s: SessionRecord,
                    max_live: usize,
                    idle_cutoff: DateTime<Utc>,
                ) -> StoreResult<Vec<SessionId>> {
                    // The owner's sign-ins one at a time: each counts the sessions the
                    // others wrote.
                    let mut tx = self.begin_for_account(&s.user_id).await?;
                    sqlx::query(
                        "INSERT INTO sessions (id, user_id, refresh_jti, user_agent, ip, \
                         created_at, last_seen_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    )
                    .bind(&s.id)
                    .bind(&s.user_id)
                    .bind(&s.refresh_jti)
                    .bind(&s.user_agent)
                    .bind(&s.ip)
                    .bind(ms(s.created_at))
                    .bind(ms(s.last_seen_at))
                    .execute(&mut *tx)
                    .await?;
                    let over = end_sessions_over_cap(
                        &mut tx,
                        &s.user_id,
                        idle_cutoff,
                        max_live,
                        s.created_at,
                    )
                    .await?;
                    tx.commit().await?;
                    Ok(over)
                }

                async fn session_auth(
                    &self,
                    session_id: &SessionId,
                ) -> StoreResult<Option<SessionAuth>> {
                    let row = sqlx::query(&format!(
                        "SELECT {SESSION_COLUMNS}, u.plan FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = $1"
                    ))
                    .bind(session_id)
                    .fetch_optional(&self.$reader)
                    .await?;
                    row.map(|r| {
                        Ok(SessionAuth {
                            session: session(&r)?,
                            plan: plan(&r, "plan")?,
                        })
                    })
                    .transpose()
                }

                async fn rotate_refresh(
                    &self,
                    session_id: &SessionId,
                    old_jti: &str,
                    new_jti: &str,
                    now: DateTime<Utc>,
                ) -> StoreResult<bool> {
                    let done = sqlx::query(
                        "UPDATE sessions SET refresh_jti = $1, last_seen_at = $2 \
                         WHERE id = $3 AND refresh_jti = $4 AND revoked_at IS NULL",
                    )
                    .bind(new_jti)
                    .bind(ms(now))
                    .bind(session_id)
                    .bind(old_jti)
                    .execute(&self.$writer)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn touch_session(
                    &self,
                    session_id: &SessionId,
                    now: DateTime<Utc>,
                ) -> StoreResult<()> {
                    sqlx::query(TOUCH_SESSION)
                        .bind(ms(now))
                        .bind(session_id)
                        .execute(&self.$writer)
                        .await?;
                    Ok(())
                }

                async fn revoke_session(
                    &self,
                    user_id: &UserId,
                    session_id: &SessionId,
                    reason: &str,
                    now: DateTime<Utc>,
                ) -> StoreResult<bool> {
                    let done = sqlx::query(
                        "UPDATE sessions SET revoked_at = $1, revoked_reason = $2 WHERE id = $3 AND user_id = $4 AND revoked_at IS NULL",
                    )
                    .bind(ms(now))
                    .bind(reason)
                    .bind(session_id)
                    .bind(user_id)
                    .execute(&self.$writer)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn revoke_all_sessions(
                    &self,
                    user_id: &UserId,
                    reason: &str,
                    now: DateTime<Utc>,
                ) -> StoreResult<Vec<SessionId>> {
                    let ids = sqlx::query_scalar(
                        "UPDATE sessions SET revoked_at = $1, revoked_reason = $2 WHERE user_id = $3 AND revoked_at IS NULL RETURNING id",
                    )
                    .bind(ms(now))
                    .bind(reason)
                    .bind(user_id)
                    .fetch_all(&self.$writer)
                    .await?;
                    Ok(ids)
                }

                async fn live_sessions(
                    &self,
                    user_id: &UserId,
                    idle_cutoff: DateTime<Utc>,
                ) -> StoreResult<Vec<SessionRecord>> {
                    let rows = sqlx::query(&format!(
                        "SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.user_id = $1 AND s.revoked_at IS NULL \
                         AND s.last_seen_at >= $2 ORDER BY s.created_at DESC, s.id DESC"
                    ))
                    .bind(user_id)
                    .bind(ms(idle_cutoff))
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows.iter().map(session).collect::<Result<_, _>>()?)
                }
            }
        }
    };
}
pub(crate) use session_store;
