//! [`crate::store::IntegrationStore`] on PostgreSQL, every statement shared with SQLite. The
//! limit is kept by [`super::lock_account`]; each inbound event is answered once by
//! `INSERT … ON CONFLICT DO NOTHING` on `(integration_id, event_id)`.

crate::store::integrations::integration_store!(PgStore, sqlx::Postgres, pool, pool);
