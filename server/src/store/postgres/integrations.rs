//! [`crate::store::IntegrationStore`] on PostgreSQL, every statement shared with SQLite.

crate::store::integrations::integration_store!(PgStore, sqlx::Postgres, pool, pool);
