//! [`crate::store::ToolStore`] on SQLite, every statement shared with PostgreSQL.

crate::store::tools::tool_store!(SqliteStore, sqlx::Sqlite, writer, pool);
