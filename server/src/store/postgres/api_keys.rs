//! [`crate::store::ApiKeyStore`] on PostgreSQL, every statement shared with SQLite. The
//! live-key cap is kept by [`super::lock_account`]; of two rotations at once, the second
//! waits for the row and finds it revoked.

crate::store::api_keys::api_key_store!(PgStore, sqlx::Postgres, pool, pool);
