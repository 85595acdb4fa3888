//! [`crate::store::ApiKeyStore`] on PostgreSQL, every statement shared with SQLite.

crate::store::api_keys::api_key_store!(PgStore, sqlx::Postgres, pool, pool);
