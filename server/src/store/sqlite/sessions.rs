//! [`crate::store::SessionStore`] on SQLite (`migrations/sqlite/0001_accounts.sql`).

/// SQLite's two-argument `MAX` is PostgreSQL's `GREATEST`, which it lacks.
const TOUCH_SESSION: &str =
    "UPDATE sessions SET last_seen_at = MAX(last_seen_at, $1) WHERE id = $2";

crate::store::sessions::session_store!(SqliteStore, sqlx::Sqlite, writer, pool);
