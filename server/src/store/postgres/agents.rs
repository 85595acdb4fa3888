//! [`crate::store::AgentStore`] on PostgreSQL (`migrations/postgres/0001_baseline.sql`: `agents`).
//!
//! Rules kept here, under READ COMMITTED:
//! - the plan's agent limit: `create_agent` locks the owner's `users` row
//!   ([`super::lock_account`]) in the transaction before its conditional insert, so
//!   parallel creations of one account count each other's agents (a single
//!   `INSERT … SELECT … WHERE (SELECT count(*) …) < $n` lets two creations at a limit of
//!   3 both see 2 and leave 4);
//! - deleting an agent deletes its threads, documents, chunks and jobs by the foreign
//!   keys' `ON DELETE CASCADE`, and its chunk and embedding generations by the trigger
//!   `agents_generations_del`, in the same statement (`delete_agent`).
//!
//! Every statement is shared with SQLite ([`crate::store::agents::agent_store`]).

crate::store::agents::agent_store!(PgStore, sqlx::Postgres, pool, pool);
