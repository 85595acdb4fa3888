//! [`crate::store::IdentityStore`] on PostgreSQL (`migrations/postgres/0001_baseline.sql`:
//! `user_identities`, `oauth_flows`, `oauth_exchange_codes`).
//!
//! Rules kept here, under READ COMMITTED:
//! - a provider identity belongs to one account, and an account has one identity per
//!   provider: the primary key `(provider, subject)` and the unique `(user_id, provider)`;
//!   a violation is [`crate::store::Conflict::LinkedIdentity`] (`link_identity`,
//!   `create_user_with_identity`, which writes the account and the identity in one
//!   transaction);
//! - an account keeps a way to sign in: `unlink_identity` locks the owner's `users` row
//!   ([`super::lock_account`]) before it checks for a password or another identity and
//!   deletes, so two unlinks of one account run one after the other and the second sees
//!   the first's delete;
//! - a state and an exchange code work once: `DELETE … RETURNING` (`take_oauth_flow`,
//!   `take_exchange_code`); of two at once, the second waits for the row and deletes
//!   nothing.
//!
//! Every statement is shared with SQLite ([`crate::store::identity::identity_store`]).

crate::store::identity::identity_store!(PgStore, sqlx::Postgres, pool, pool);
