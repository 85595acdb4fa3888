//! [`crate::store::IntegrationStore`] on PostgreSQL (`migrations/postgres/0001_baseline.sql`:
//! `integrations`, `channel_threads`, `channel_events`).
//!
//! Rules kept here, under READ COMMITTED:
//! - the plan's integration limit: `create_integration` locks the owner's `users` row
//!   ([`super::lock_account`]) in the transaction before its conditional insert, so
//!   parallel creations of one account count each other's integrations;
//! - each inbound event is answered once: `INSERT … ON CONFLICT DO NOTHING` on the primary
//!   key `(integration_id, event_id)`; of inserts at once, one inserts and the others wait
//!   for it and then insert nothing (`first_channel_event`);
//! - one thread per external conversation: an upsert on `(integration_id,
//!   conversation_key)`, made with the turn that creates the thread
//!   (`ChatStore::record_turns`, `store/postgres/chat.rs`).
//!
//! Every statement is shared with SQLite ([`crate::store::integrations::integration_store`]).

crate::store::integrations::integration_store!(PgStore, sqlx::Postgres, pool, pool);
