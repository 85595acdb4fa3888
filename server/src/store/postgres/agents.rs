//! [`crate::store::AgentStore`] on PostgreSQL, every statement shared with SQLite.

crate::store::agents::agent_store!(PgStore, sqlx::Postgres, pool, pool);
