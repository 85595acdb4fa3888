//! [`crate::store::AccountStore`] on PostgreSQL, every statement shared with SQLite. One
//! account per email is the unique index on `users.email` (a violation is
//! `Conflict::Email`); a token is consumed once by one conditional `UPDATE … RETURNING`.

crate::store::accounts::account_store!(PgStore, sqlx::Postgres, pool, pool);
