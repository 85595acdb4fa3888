//! [`AccountStore`] on PostgreSQL (`migrations/postgres/0001_baseline.sql`: `users`,
//! `email_tokens`).
//!
//! Rules kept here, under READ COMMITTED:
//! - one account per email: the unique index on `users.email`; of creations at once, the
//!   others fail with a unique violation, answered as [`Conflict::Email`]
//!   (`create_user`, and `create_user_with_identity` in `identity.rs` through
//!   [`insert_user`]);
//! - a token, and of an account's outstanding tokens of one purpose only one, is consumed
//!   once: one conditional `UPDATE … RETURNING` whose competitors wait for the rows it
//!   marks and then find them used (`consume_email_token`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{
    is_unique_violation,
    rows::{ms, user, USER_COLUMNS},
    PgStore,
};
use crate::ids::UserId;
use crate::{
    domain::{Email, Plan},
    store::{AccountStore, Conflict, NewUser, StoreError, StoreResult, TokenPurpose, UserRecord},
};

/// Inserts a user on the `free` plan; `Conflict` when the email is taken.
pub(super) async fn insert_user(conn: &mut sqlx::PgConnection, u: &NewUser) -> StoreResult<()> {
    let now = ms(u.now);
    let verified = u.email_verified.then_some(now);
    let result = sqlx::query(
        "INSERT INTO users (id, email, name, password_hash, company, country, phone, plan, \
         email_verified_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 'free', $8, $9, $10)",
    )
    .bind(&u.id)
    .bind(u.email.as_str())
    .bind(&u.name)
    .bind(&u.password_hash)
    .bind(&u.company)
    .bind(&u.country)
    .bind(&u.phone)
    .bind(verified)
    .bind(now)
    .bind(now)
    .execute(conn)
    .await;
    match result {
        Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict(Conflict::Email)),
        Err(e) => Err(e.into()),
        Ok(_) => Ok(()),
    }
}

#[async_trait]
impl AccountStore for PgStore {
    async fn create_user(&self, u: NewUser) -> StoreResult<UserRecord> {
        let mut conn = self.pool.acquire().await?;
        insert_user(&mut conn, &u).await?;
        drop(conn);
        self.user_by_id(&u.id).await?.ok_or(StoreError::NotFound)
    }

    async fn user_by_id(&self, id: &UserId) -> StoreResult<Option<UserRecord>> {
        let row = sqlx::query(&format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(user).transpose()
    }

    async fn user_by_email(&self, email: &Email) -> StoreResult<Option<UserRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {USER_COLUMNS} FROM users WHERE email = $1"
        ))
        .bind(email.as_str())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(user).transpose()
    }

    async fn mark_email_verified(&self, user_id: &UserId, now: DateTime<Utc>) -> StoreResult<()> {
        sqlx::query(
            "UPDATE users SET email_verified_at = COALESCE(email_verified_at, $1), updated_at = $2 WHERE id = $3",
        )
        .bind(ms(now))
        .bind(ms(now))
        .bind(user_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn set_plan(&self, email: &Email, plan: Plan, now: DateTime<Utc>) -> StoreResult<()> {
        let done = sqlx::query("UPDATE users SET plan = $1, updated_at = $2 WHERE email = $3")
            .bind(plan.as_str())
            .bind(ms(now))
            .bind(email.as_str())
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    async fn set_password_hash(
        &self,
        user_id: &UserId,
        hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query("UPDATE users SET password_hash = $1, updated_at = $2 WHERE id = $3")
            .bind(hash)
            .bind(ms(now))
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn create_email_token(
        &self,
        user_id: &UserId,
        purpose: TokenPurpose,
        token_hash: &str,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO email_tokens (token_hash, user_id, purpose, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(token_hash)
        .bind(user_id)
        .bind(purpose)
        .bind(ms(expires_at))
        .bind(ms(now))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn consume_email_token(
        &self,
        purpose: TokenPurpose,
        token_hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<UserId>> {
        // One statement: the presented token's user is found and all of that user's unused
        // tokens of the purpose, the presented one among them, are marked used together.
        // A concurrent consumer of the same account (READ COMMITTED) waits for the rows
        // this one locks and re-checks the outer `used_at IS NULL` on their committed
        // version, so it marks none of them; a row it marks that is not the presented
        // token (one created meanwhile) is not a success.
        let rows = sqlx::query(
            "UPDATE email_tokens SET used_at = $1 WHERE purpose = $2 AND used_at IS NULL \
             AND user_id = (SELECT user_id FROM email_tokens WHERE token_hash = $3 AND purpose = $4 \
             AND used_at IS NULL AND expires_at > $5) RETURNING user_id, token_hash",
        )
        .bind(ms(now))
        .bind(purpose)
        .bind(token_hash)
        .bind(purpose)
        .bind(ms(now))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .find(|r| r.get::<&str, _>("token_hash") == token_hash)
            .map(|r| r.get("user_id")))
    }
}
