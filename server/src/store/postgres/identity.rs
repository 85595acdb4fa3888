//! [`crate::store::IdentityStore`] on PostgreSQL, every statement shared with SQLite.

crate::store::identity::identity_store!(PgStore, sqlx::Postgres, pool, pool);
