//! [`SessionStore`] on PostgreSQL (`migrations/postgres/0001_baseline.sql`: `sessions`).
//!
//! Rules kept here, under READ COMMITTED:
//! - the cap of live sessions per account: `create_session` locks the owner's `users` row
//!   ([`super::lock_account`]) before it inserts and ends the oldest beyond the cap, so
//!   parallel sign-ins of one account run one after the other;
//! - refresh rotation is compare-and-set: one conditional `UPDATE` (`rotate_refresh`);
//!   a concurrent rotation waits for the row and re-checks `refresh_jti` on its new value;
//! - `last_seen_at` never moves back: `GREATEST` in one `UPDATE` (`touch_session`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{
    begin, lock_account,
    rows::{ms, plan, session, SESSION_COLUMNS},
    PgStore,
};
use crate::ids::{SessionId, UserId};
use crate::store::{SessionAuth, SessionRecord, SessionStore, StoreResult};

#[async_trait]
impl SessionStore for PgStore {
    async fn create_session(
        &self,
        s: SessionRecord,
        max_live: usize,
        idle_cutoff: DateTime<Utc>,
    ) -> StoreResult<Vec<SessionId>> {
        let mut tx = begin(&self.pool).await?;
        // The owner's sign-ins one at a time: each counts the sessions the others wrote.
        lock_account(&mut tx, &s.user_id).await?;
        sqlx::query(
            "INSERT INTO sessions (id, user_id, refresh_jti, user_agent, ip, created_at, last_seen_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
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
        let over: Vec<SessionId> = sqlx::query_scalar(
            "SELECT id FROM sessions WHERE user_id = $1 AND revoked_at IS NULL AND last_seen_at >= $2 \
             ORDER BY created_at DESC, id DESC OFFSET $3",
        )
        .bind(&s.user_id)
        .bind(ms(idle_cutoff))
        .bind(max_live as i64)
        .fetch_all(&mut *tx)
        .await?;
        if !over.is_empty() {
            sqlx::query(
                "UPDATE sessions SET revoked_at = $1, revoked_reason = 'evicted' \
                 WHERE id = ANY($2)",
            )
            .bind(ms(s.created_at))
            .bind(&over)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(over)
    }

    async fn session_auth(&self, session_id: &SessionId) -> StoreResult<Option<SessionAuth>> {
        let row = sqlx::query(&format!(
            "SELECT {SESSION_COLUMNS}, u.plan FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = $1"
        ))
        .bind(session_id)
        .fetch_optional(&self.pool)
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
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn touch_session(&self, session_id: &SessionId, now: DateTime<Utc>) -> StoreResult<()> {
        sqlx::query("UPDATE sessions SET last_seen_at = GREATEST(last_seen_at, $1) WHERE id = $2")
            .bind(ms(now))
            .bind(session_id)
            .execute(&self.pool)
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
        .execute(&self.pool)
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
        .fetch_all(&self.pool)
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
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(session).collect::<Result<_, _>>()?)
    }
}
