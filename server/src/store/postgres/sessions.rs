//! [`crate::store::SessionStore`] on PostgreSQL.

/// `GREATEST`, which SQLite lacks (its two-argument `MAX`).
const TOUCH_SESSION: &str =
    "UPDATE sessions SET last_seen_at = GREATEST(last_seen_at, $1) WHERE id = $2";

crate::store::sessions::session_store!(PgStore, sqlx::Postgres, pool, pool);
