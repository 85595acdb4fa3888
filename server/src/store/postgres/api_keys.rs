//! [`crate::store::ApiKeyStore`] on PostgreSQL (`migrations/postgres/0001_baseline.sql`:
//! `api_keys`).
//!
//! Rules kept here, under READ COMMITTED:
//! - the cap of live keys per account: `create_api_key` locks the owner's `users` row
//!   ([`super::lock_account`]) in the transaction before its conditional insert, so parallel
//!   creations of one account count each other's keys;
//! - a rotation revokes the old key and inserts the new one in one transaction, and only while the
//!   old key is live: of two rotations at once, the second waits for the row and finds it revoked
//!   (`rotate_api_key`).
//!
//! Every statement is shared with SQLite ([`crate::store::api_keys::api_key_store`]).

crate::store::api_keys::api_key_store!(PgStore, sqlx::Postgres, pool, pool);
