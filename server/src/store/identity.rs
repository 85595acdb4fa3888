//! The third-party sign-in part of the persistence boundary: identities linked to accounts,
//! pending authorization flows and one-time exchange codes. Every backend implements
//! [`IdentityStore`] (the SQLite backend in `sqlite/identity.rs`); [`super::Store`]
//! requires it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{StoreResult, UserRecord};
use crate::{auth::oauth::Provider, ids::UserId};

/// An identity at a provider, linked to one account. A provider identity is linked to at
/// most one account, and an account has at most one identity per provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityRecord {
    /// Stored as its code: `github`, `google` or `microsoft`.
    pub provider: Provider,
    /// The provider's stable id of the person: GitHub's numeric user id, the OpenID
    /// Connect `sub` claim.
    pub subject: String,
    pub user_id: UserId,
    /// The verified email the provider gave when the identity was linked.
    pub email: String,
    pub created_at: DateTime<Utc>,
}

/// An authorization request in progress, found again by the hash of its `state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthFlowRecord {
    /// Hex SHA-256 of the `state` parameter (the state itself is not stored).
    pub state_hash: String,
    /// The provider the flow signs in with.
    pub provider: Provider,
    /// Hex SHA-256 of the browser-binding cookie set when the flow started.
    pub browser_hash: String,
    /// The PKCE code verifier (RFC 7636), sent with the code exchange.
    pub pkce_verifier: String,
    /// The OpenID Connect `nonce` (Google, Microsoft); `None` for GitHub.
    pub nonce: Option<String>,
    /// Set when a signed-in user connects the provider to their account.
    pub link_user_id: Option<UserId>,
    /// A native client's loopback redirect URI (RFC 8252 § 7.3) that receives a one-time
    /// exchange code instead of the dashboard cookies.
    pub client_redirect: Option<String>,
    pub expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
}

/// A one-time code a native client exchanges for a token pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeCodeRecord {
    /// Hex SHA-256 of the code.
    pub code_hash: String,
    pub user_id: UserId,
    pub expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
}

/// Persistence of third-party sign-in.
#[async_trait]
pub trait IdentityStore: Send + Sync {
    /// The identity `(provider, subject)`, when linked.
    async fn identity(
        &self,
        provider: Provider,
        subject: &str,
    ) -> StoreResult<Option<IdentityRecord>>;
    /// The identities linked to the user, oldest first.
    async fn identities(&self, user_id: &UserId) -> StoreResult<Vec<IdentityRecord>>;
    /// Links an identity. [`Conflict::LinkedIdentity`] when the identity belongs to an
    /// account already or the account has an identity at that provider.
    ///
    /// [`Conflict::LinkedIdentity`]: crate::store::Conflict::LinkedIdentity
    async fn link_identity(&self, identity: &IdentityRecord) -> StoreResult<()>;
    /// Creates a verified account (without password) and links `identity` to it, in one
    /// transaction. `Conflict` ([`Conflict::Email`] or [`Conflict::LinkedIdentity`]) when
    /// the email is taken or the identity linked; nothing is written then.
    ///
    /// [`Conflict::Email`]: crate::store::Conflict::Email
    /// [`Conflict::LinkedIdentity`]: crate::store::Conflict::LinkedIdentity
    async fn create_user_with_identity(
        &self,
        user: super::NewUser,
        identity: &IdentityRecord,
    ) -> StoreResult<UserRecord>;
    /// Unlinks the user's identity at `provider` unless it is the account's last way to
    /// sign in (no password and no other identity). `NotFound` when none is linked;
    /// [`Conflict::LastSignIn`] when it is the last. The check and the delete are one
    /// atomic step (SQLite: a `BEGIN IMMEDIATE` transaction; a server backend locks the
    /// owner's `users` row first), so two unlinks at once never leave an account without
    /// a way to sign in.
    ///
    /// [`Conflict::LastSignIn`]: crate::store::Conflict::LastSignIn
    async fn unlink_identity(&self, user_id: &UserId, provider: Provider) -> StoreResult<()>;

    /// Stores a flow (and forgets expired ones).
    async fn create_oauth_flow(&self, flow: &OAuthFlowRecord) -> StoreResult<()>;
    /// Removes and returns the flow with `state_hash`, whether or not it has expired (the
    /// caller checks): a state works once.
    async fn take_oauth_flow(&self, state_hash: &str) -> StoreResult<Option<OAuthFlowRecord>>;

    /// Stores a one-time exchange code.
    async fn create_exchange_code(&self, code: &ExchangeCodeRecord) -> StoreResult<()>;
    /// Removes an unexpired code and returns its user id; `None` for an unknown, used or
    /// expired code.
    async fn take_exchange_code(
        &self,
        code_hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<UserId>>;
}
