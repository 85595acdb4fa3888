//! [`crate::store::IdentityStore`] on PostgreSQL, every statement shared with SQLite. One
//! account per identity and one identity per provider are the keys on `(provider,
//! subject)` and `(user_id, provider)`; `unlink_identity` locks the account first
//! ([`super::lock_account`]); states and exchange codes are taken by `DELETE … RETURNING`.

crate::store::identity::identity_store!(PgStore, sqlx::Postgres, pool, pool);
