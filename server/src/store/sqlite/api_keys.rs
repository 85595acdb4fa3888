//! [`crate::store::ApiKeyStore`] on SQLite (`migrations/sqlite/0001_accounts.sql`).
//! Every statement is shared with PostgreSQL ([`crate::store::api_keys::api_key_store`]).

crate::store::api_keys::api_key_store!(SqliteStore, sqlx::Sqlite, writer, pool);
