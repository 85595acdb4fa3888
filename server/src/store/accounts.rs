//! Users, their plan and password, and single-use email tokens ([`AccountStore`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;
use crate::domain::{Email, Plan};
use crate::ids::UserId;

/// A user account.
#[derive(Debug, Clone)]
pub struct UserRecord {
    pub id: UserId,
    pub email: String,
    pub name: String,
    /// PHC string of the argon2id hash; `None` for provider-only accounts.
    pub password_hash: Option<String>,
    pub company: Option<String>,
    pub country: Option<String>,
    pub phone: Option<String>,
    pub plan: Plan,
    pub email_verified_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What signup stores.
#[derive(Debug, Clone)]
pub struct NewUser {
    pub id: UserId,
    pub email: Email,
    pub name: String,
    pub password_hash: Option<String>,
    pub company: Option<String>,
    pub country: Option<String>,
    pub phone: Option<String>,
    pub email_verified: bool,
    pub now: DateTime<Utc>,
}

/// Purpose of a single-use email token (docs/api.md § Auth).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "TEXT", rename_all = "snake_case")]
pub enum TokenPurpose {
    /// Email verification link, valid 24 hours.
    VerifyEmail,
    /// Password reset link, valid 1 hour.
    ResetPassword,
}

impl TokenPurpose {
    pub const ALL: [Self; 2] = [Self::VerifyEmail, Self::ResetPassword];

    /// Stored name: `verify_email` or `reset_password`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::VerifyEmail => "verify_email",
            Self::ResetPassword => "reset_password",
        }
    }
}

/// Persistence of accounts and their email tokens.
#[async_trait]
pub trait AccountStore: Send + Sync {
    /// Creates a user on the `free` plan; `Conflict::Email` when the email is taken.
    async fn create_user(&self, user: NewUser) -> StoreResult<UserRecord>;
    async fn user_by_id(&self, id: &UserId) -> StoreResult<Option<UserRecord>>;
    async fn user_by_email(&self, email: &Email) -> StoreResult<Option<UserRecord>>;
    /// Marks the email verified (idempotent).
    async fn mark_email_verified(&self, user_id: &UserId, now: DateTime<Utc>) -> StoreResult<()>;
    /// Sets the plan of the account with `email`; `NotFound` when there is none.
    async fn set_plan(&self, email: &Email, plan: Plan, now: DateTime<Utc>) -> StoreResult<()>;
    async fn set_password_hash(
        &self,
        user_id: &UserId,
        hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;

    /// Stores a single-use token by its hash.
    async fn create_email_token(
        &self,
        user_id: &UserId,
        purpose: TokenPurpose,
        token_hash: &str,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Consumes a valid token, atomically voiding the user's others of that purpose; its user
    /// id, or `None`. Of two consumed at once, at most one succeeds.
    async fn consume_email_token(
        &self,
        purpose: TokenPurpose,
        token_hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<UserId>>;
}

/// Defines the [`AccountStore`] of `$store` (`$writer` pool writes, `$reader` reads).
macro_rules! account_store {
    ($store:ident, $db:ty, $writer:ident, $reader:ident) => {
        pub(super) mod shared {
            use chrono::{DateTime, Utc};
            use sqlx::Row;

            use super::super::{
                is_unique_violation,
                rows::{ms, user, USER_COLUMNS},
                $store,
            };
            use crate::ids::UserId;
            use crate::{
                domain::{Email, Plan},
                store::{
                    AccountStore, Conflict, NewUser, StoreError, StoreResult, TokenPurpose,
                    UserRecord,
                },
            };

            /// Inserts a user on the `free` plan; `Conflict` when the email is taken.
            pub(crate) async fn insert_user(
                conn: &mut <$db as sqlx::Database>::Connection,
                u: &NewUser,
            ) -> StoreResult<()> {
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

            #[async_trait::async_trait]
            impl AccountStore for $store {
                async fn create_user(&self, u: NewUser) -> StoreResult<UserRecord> {
                    let mut conn = self.$writer.acquire().await?;
                    insert_user(&mut conn, &u).await?;
                    drop(conn);
                    self.user_by_id(&u.id).await?.ok_or(StoreError::NotFound)
                }

                async fn user_by_id(&self, id: &UserId) -> StoreResult<Option<UserRecord>> {
                    let row =
                        sqlx::query(&format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1"))
                            .bind(id)
                            .fetch_optional(&self.$reader)
                            .await?;
                    row.as_ref().map(user).transpose()
                }

                async fn user_by_email(&self, email: &Email) -> StoreResult<Option<UserRecord>> {
                    let row = sqlx::query(&format!(
                        "SELECT {USER_COLUMNS} FROM users WHERE email = $1"
                    ))
                    .bind(email.as_str())
                    .fetch_optional(&self.$reader)
                    .await?;
                    row.as_ref().map(user).transpose()
                }

                async fn mark_email_verified(
                    &self,
                    user_id: &UserId,
                    now: DateTime<Utc>,
                ) -> StoreResult<()> {
                    sqlx::query(
                        "UPDATE users SET email_verified_at = COALESCE(email_verified_at, $1), updated_at = $2 WHERE id = $3",
                    )
                    .bind(ms(now))
                    .bind(ms(now))
                    .bind(user_id)
                    .execute(&self.$writer)
                    .await?;
                    Ok(())
                }

                async fn set_plan(
                    &self,
                    email: &Email,
                    plan: Plan,
                    now: DateTime<Utc>,
                ) -> StoreResult<()> {
                    let done =
                        sqlx::query("UPDATE users SET plan = $1, updated_at = $2 WHERE email = $3")
                            .bind(plan.as_str())
                            .bind(ms(now))
                            .bind(email.as_str())
                            .execute(&self.$writer)
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
                    sqlx::query(
                        "UPDATE users SET password_hash = $1, updated_at = $2 WHERE id = $3",
                    )
                    .bind(hash)
                    .bind(ms(now))
                    .bind(user_id)
                    .execute(&self.$writer)
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
                    .execute(&self.$writer)
                    .await?;
                    Ok(())
                }

                async fn consume_email_token(
                    &self,
                    purpose: TokenPurpose,
                    token_hash: &str,
                    now: DateTime<Utc>,
                ) -> StoreResult<Option<UserId>> {
                    // One statement: the presented token's user is found and all of that user's
                    // unused tokens of the purpose, the presented one among them, are marked used
                    // together. A concurrent consumer of the same account (READ COMMITTED) waits
                    // for the rows this one locks and re-checks the outer `used_at IS NULL` on
                    // their committed version, so it marks none of them; a row it marks that is not
                    // the presented token (one created meanwhile) is not a success.
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
                    .fetch_all(&self.$writer)
                    .await?;
                    Ok(rows
                        .iter()
                        .find(|r| r.get::<&str, _>("token_hash") == token_hash)
                        .map(|r| r.get("user_id")))
                }
            }
        }
    };
}
pub(crate) use account_store;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_purposes_are_the_stored_text() {
        // The CHECK list of `email_tokens.purpose` (migrations/sqlite/0001_accounts.sql).
        assert_eq!(
            TokenPurpose::ALL.map(TokenPurpose::as_str),
            ["verify_email", "reset_password"]
        );
        for p in TokenPurpose::ALL {
            let json = serde_json::to_value(p).unwrap();
            assert_eq!(json, p.as_str());
            assert_eq!(serde_json::from_value::<TokenPurpose>(json).unwrap(), p);
        }
    }
}
