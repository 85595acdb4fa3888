//! [`crate::store::SessionStore`] on PostgreSQL: `create_session` locks the account first
//! ([`super::lock_account`]); `rotate_refresh` is one conditional `UPDATE`; `touch_session`
//! uses `GREATEST` so `last_seen_at` never moves back.

use chrono::{DateTime, Utc};

use super::rows::ms;
use crate::ids::{SessionId, UserId};

/// Ends the account's live sessions beyond the newest `max_live` at `now`, in one statement
/// (`= ANY`); answers their ids.
async fn end_sessions_over_cap(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    user_id: &UserId,
    idle_cutoff: DateTime<Utc>,
    max_live: usize,
    now: DateTime<Utc>,
) -> Result<Vec<SessionId>, sqlx::Error> {
    let over: Vec<SessionId> = sqlx::query_scalar(
        "SELECT id FROM sessions WHERE user_id = $1 AND revoked_at IS NULL AND last_seen_at >= $2 \
         ORDER BY created_at DESC, id DESC OFFSET $3",
    )
    .bind(user_id)
    .bind(ms(idle_cutoff))
    .bind(max_live as i64)
    .fetch_all(&mut **tx)
    .await?;
    if !over.is_empty() {
        sqlx::query(
            "UPDATE sessions SET revoked_at = $1, revoked_reason = 'evicted' WHERE id = ANY($2)",
        )
        .bind(ms(now))
        .bind(&over)
        .execute(&mut **tx)
        .await?;
    }
    Ok(over)
}

/// `GREATEST`, which SQLite lacks (its two-argument `MAX`).
const TOUCH_SESSION: &str =
    "UPDATE sessions SET last_seen_at = GREATEST(last_seen_at, $1) WHERE id = $2";

crate::store::sessions::session_store!(PgStore, sqlx::Postgres, pool, pool);
