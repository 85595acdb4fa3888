//! [`crate::store::AccountStore`] on PostgreSQL (`migrations/postgres/0001_baseline.sql`: `users`,
//! `email_tokens`).
//!
//! Rules kept here, under READ COMMITTED:
//! - one account per email: the unique index on `users.email`; of creations at once, the
//!   others fail with a unique violation, answered as [`crate::store::Conflict::Email`]
//!   (`create_user`, and `create_user_with_identity` in `identity.rs` through
//!   `insert_user`);
//! - a token, and of an account's outstanding tokens of one purpose only one, is consumed
//!   once: one conditional `UPDATE … RETURNING` whose competitors wait for the rows it
//!   marks and then find them used (`consume_email_token`).
//!
//! Every statement is shared with SQLite ([`crate::store::accounts::account_store`]).

crate::store::accounts::account_store!(PgStore, sqlx::Postgres, pool, pool);
pub(super) use shared::insert_user;
