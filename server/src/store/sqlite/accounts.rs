//! [`crate::store::AccountStore`] on SQLite (`migrations/sqlite/0001_accounts.sql`).
//! Every statement is shared with PostgreSQL ([`crate::store::accounts::account_store`]).

crate::store::accounts::account_store!(SqliteStore, sqlx::Sqlite, writer, pool);
