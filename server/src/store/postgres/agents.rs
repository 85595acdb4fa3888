//! [`crate::store::AgentStore`] on PostgreSQL, every statement shared with SQLite. The
//! agent limit is kept by [`super::lock_account`] before the conditional insert; deleting an
//! agent cascades by foreign keys and the trigger `agents_generations_del`.

crate::store::agents::agent_store!(PgStore, sqlx::Postgres, pool, pool);
