//! The account part of the persistence boundary: users, their plan and password, and the
//! single-use email tokens (verification and password reset links). Every backend
//! implements [`AccountStore`] (SQLite: `sqlite/accounts.rs`); [`super::Store`] requires it.

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

/// Purpose of a single-use email token (docs/api.md § Auth). Stored as its text
/// ([`TokenPurpose::as_str`]) in `email_tokens.purpose` (`migrations/sqlite/0001_accounts.sql`).
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
    /// Both purposes.
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
    /// Creates a user on the `free` plan; [`Conflict::Email`] when the email is taken. Of
    /// any number of creations with one email, running at once or not, exactly one
    /// succeeds (a unique index). Proven by `conformance::an_email_is_taken_once`.
    ///
    /// [`Conflict::Email`]: crate::store::Conflict::Email
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
    /// Consumes an unused, unexpired token and, in the same atomic step, voids every other
    /// unused token of its user and purpose (OWASP Forgot Password Cheat Sheet: once a
    /// reset succeeds, the account's other outstanding links stop working); returns its
    /// user id, or `None` (unknown, used, voided or expired, all alike). Of two tokens of
    /// one account consumed at once, at most one succeeds. Proven by
    /// `conformance::an_email_token_works_once` and
    /// `conformance::of_an_accounts_outstanding_links_only_one_is_ever_consumed`.
    async fn consume_email_token(
        &self,
        purpose: TokenPurpose,
        token_hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<UserId>>;
}

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
