//! [`crate::store::AgentStore`] on SQLite (`migrations/sqlite/0002_agents_chat.sql`).
//! Every statement is shared with PostgreSQL ([`crate::store::agents::agent_store`]).

crate::store::agents::agent_store!(SqliteStore, sqlx::Sqlite, writer, pool);
