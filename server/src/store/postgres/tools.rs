//! [`crate::store::ToolStore`] on PostgreSQL, every statement shared with SQLite.

crate::store::tools::tool_store!(PgStore, sqlx::Postgres, pool, pool);
