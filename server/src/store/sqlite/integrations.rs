//! [`crate::store::IntegrationStore`] on SQLite (`migrations/sqlite/0008_integrations.sql`).
//! Every statement is shared with PostgreSQL ([`crate::store::integrations::integration_store`]).

crate::store::integrations::integration_store!(SqliteStore, sqlx::Sqlite, writer, pool);
