//! [`crate::store::SessionStore`] on SQLite (`migrations/sqlite/0001_accounts.sql`).

use chrono::{DateTime, Utc};

use super::rows::ms;
use crate::ids::{SessionId, UserId};

/// Ends the account's live sessions beyond the newest `max_live` at `now`, one by one
/// (SQLite writes `LIMIT -1 OFFSET` and binds no arrays); answers their ids.
async fn end_sessions_over_cap(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    user_id: &UserId,
    idle_cutoff: DateTime<Utc>,
    max_live: usize,
    now: DateTime<Utc>,
) -> Result<Vec<SessionId>, sqlx::Error> {
    let over: Vec<SessionId> = sqlx::query_scalar(
        "SELECT id FROM sessions WHERE user_id = ? AND revoked_at IS NULL AND last_seen_at >= ? \
         ORDER BY created_at DESC, id DESC LIMIT -1 OFFSET ?",
    )
    .bind(user_id)
    .bind(ms(idle_cutoff))
    .bind(max_live as i64)
    .fetch_all(&mut **tx)
    .await?;
    for id in &over {
        sqlx::query("UPDATE sessions SET revoked_at = ?, revoked_reason = 'evicted' WHERE id = ?")
            .bind(ms(now))
            .bind(id)
            .execute(&mut **tx)
            .await?;
    }
    Ok(over)
}

/// SQLite's two-argument `MAX` is PostgreSQL's `GREATEST`, which it lacks.
const TOUCH_SESSION: &str =
    "UPDATE sessions SET last_seen_at = MAX(last_seen_at, $1) WHERE id = $2";

crate::store::sessions::session_store!(SqliteStore, sqlx::Sqlite, writer, pool);
