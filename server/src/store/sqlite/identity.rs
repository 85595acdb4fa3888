//! [`crate::store::IdentityStore`] on SQLite (`migrations/sqlite/0005_identities.sql`).
//! Every statement is shared with PostgreSQL ([`crate::store::identity::identity_store`]).

crate::store::identity::identity_store!(SqliteStore, sqlx::Sqlite, writer, pool);
