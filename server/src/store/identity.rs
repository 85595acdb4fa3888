//! Linked identities, pending authorization flows and exchange codes ([`IdentityStore`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{StoreResult, UserRecord};
use crate::{domain::OAuthProvider, ids::UserId};

/// An identity at a provider, linked to one account (at most one per provider).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityRecord {
    /// Stored as its code: `github`, `google` or `microsoft`.
    pub provider: OAuthProvider,
    /// The provider's stable id of the person (GitHub's user id, OpenID Connect's `sub`).
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
    pub provider: OAuthProvider,
    /// Hex SHA-256 of the browser-binding cookie set when the flow started.
    pub browser_hash: String,
    /// The PKCE code verifier (RFC 7636), sent with the code exchange.
    pub pkce_verifier: String,
    /// The OpenID Connect `nonce` (Google, Microsoft); `None` for GitHub.
    pub nonce: Option<String>,
    /// Set when a signed-in user connects the provider to their account.
    pub link_user_id: Option<UserId>,
    /// A native client's loopback redirect URI (RFC 8252 § 7.3) for a one-time code.
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
        provider: OAuthProvider,
        subject: &str,
    ) -> StoreResult<Option<IdentityRecord>>;
    /// The identities linked to the user, oldest first.
    async fn identities(&self, user_id: &UserId) -> StoreResult<Vec<IdentityRecord>>;
    /// Links an identity; `Conflict::LinkedIdentity` when either side is linked already.
    async fn link_identity(&self, identity: &IdentityRecord) -> StoreResult<()>;
    /// Creates a verified account linked to `identity`; `Conflict::Email` or
    /// `Conflict::LinkedIdentity` (nothing written) otherwise.
    async fn create_user_with_identity(
        &self,
        user: super::NewUser,
        identity: &IdentityRecord,
    ) -> StoreResult<UserRecord>;
    /// Unlinks the user's identity at `provider`, atomically; `NotFound`, or
    /// `Conflict::LastSignIn` for the account's last way to sign in.
    async fn unlink_identity(&self, user_id: &UserId, provider: OAuthProvider) -> StoreResult<()>;

    /// Stores a flow (and forgets expired ones).
    async fn create_oauth_flow(&self, flow: &OAuthFlowRecord) -> StoreResult<()>;
    /// Removes and returns the flow with `state_hash`, expired or not: a state works once.
    async fn take_oauth_flow(&self, state_hash: &str) -> StoreResult<Option<OAuthFlowRecord>>;

    /// Stores a one-time exchange code.
    async fn create_exchange_code(&self, code: &ExchangeCodeRecord) -> StoreResult<()>;
    /// Removes an unexpired code and returns its user id; `None` otherwise.
    async fn take_exchange_code(
        &self,
        code_hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<UserId>>;
}

/// Defines the [`IdentityStore`] of `$store` (`$writer` pool writes, `$reader` reads).
macro_rules! identity_store {
    ($store:ident, $db:ty, $writer:ident, $reader:ident) => {
        mod shared {
            use chrono::{DateTime, Utc};
            use sqlx::Row;

            use super::super::{
                accounts::shared::insert_user,
                is_unique_violation,
                rows::{identity, ms, time, IDENTITY_COLUMNS},
                $store,
            };
            use crate::{
                domain::OAuthProvider,
                ids::UserId,
                store::{
                    identity::{
                        ExchangeCodeRecord, IdentityRecord, IdentityStore, OAuthFlowRecord,
                    },
                    AccountStore, Conflict, NewUser, StoreError, StoreResult, UserRecord,
                },
            };

            async fn insert_identity(
                conn: &mut <$db as sqlx::Database>::Connection,
                i: &IdentityRecord,
            ) -> StoreResult<()> {
                let result = sqlx::query(
                    "INSERT INTO user_identities (provider, subject, user_id, email, created_at) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(i.provider)
                .bind(&i.subject)
                .bind(&i.user_id)
                .bind(&i.email)
                .bind(ms(i.created_at))
                .execute(conn)
                .await;
                match result {
                    Err(e) if is_unique_violation(&e) => {
                        Err(StoreError::Conflict(Conflict::LinkedIdentity))
                    }
                    Err(e) => Err(e.into()),
                    Ok(_) => Ok(()),
                }
            }

            #[async_trait::async_trait]
            impl IdentityStore for $store {
                async fn identity(
                    &self,
                    provider: OAuthProvider,
                    subject: &str,
                ) -> StoreResult<Option<IdentityRecord>> {
                    let row = sqlx::query(&format!(
                        "SELECT {IDENTITY_COLUMNS} FROM user_identities WHERE provider = $1 AND subject = $2"
                    ))
                    .bind(provider)
                    .bind(subject)
                    .fetch_optional(&self.$reader)
                    .await?;
                    Ok(row.as_ref().map(identity).transpose()?)
                }

                async fn identities(&self, user_id: &UserId) -> StoreResult<Vec<IdentityRecord>> {
                    let rows = sqlx::query(&format!(
                        "SELECT {IDENTITY_COLUMNS} FROM user_identities WHERE user_id = $1 \
                         ORDER BY created_at, provider"
                    ))
                    .bind(user_id)
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows.iter().map(identity).collect::<Result<_, _>>()?)
                }

                async fn link_identity(&self, i: &IdentityRecord) -> StoreResult<()> {
                    let mut conn = self.$writer.acquire().await?;
                    insert_identity(&mut conn, i).await
                }

                async fn create_user_with_identity(
                    &self,
                    user: NewUser,
                    i: &IdentityRecord,
                ) -> StoreResult<UserRecord> {
                    let mut tx = self.begin_write().await?;
                    insert_user(&mut tx, &user).await?;
                    insert_identity(&mut tx, i).await?;
                    tx.commit().await?;
                    self.user_by_id(&user.id).await?.ok_or(StoreError::NotFound)
                }

                async fn unlink_identity(
                    &self,
                    user_id: &UserId,
                    provider: OAuthProvider,
                ) -> StoreResult<()> {
                    // The owner's unlinks one at a time: each sees what the others deleted.
                    let mut tx = self.begin_for_account(user_id).await?;
                    let linked: bool = sqlx::query_scalar(
                        "SELECT EXISTS (SELECT 1 FROM user_identities WHERE user_id = $1 AND provider = $2)",
                    )
                    .bind(user_id)
                    .bind(provider)
                    .fetch_one(&mut *tx)
                    .await?;
                    if !linked {
                        return Err(StoreError::NotFound);
                    }
                    // Another way to sign in must remain: a password or another provider.
                    let others: i64 = sqlx::query_scalar(
                        "SELECT (SELECT COUNT(*) FROM users WHERE id = $1 AND password_hash IS NOT NULL) \
                              + (SELECT COUNT(*) FROM user_identities WHERE user_id = $2 AND provider <> $3)",
                    )
                    .bind(user_id)
                    .bind(user_id)
                    .bind(provider)
                    .fetch_one(&mut *tx)
                    .await?;
                    if others == 0 {
                        return Err(StoreError::Conflict(Conflict::LastSignIn));
                    }
                    sqlx::query("DELETE FROM user_identities WHERE user_id = $1 AND provider = $2")
                        .bind(user_id)
                        .bind(provider)
                        .execute(&mut *tx)
                        .await?;
                    tx.commit().await?;
                    Ok(())
                }

                async fn create_oauth_flow(&self, f: &OAuthFlowRecord) -> StoreResult<()> {
                    let mut tx = self.begin_write().await?;
                    sqlx::query("DELETE FROM oauth_flows WHERE expires_at <= $1")
                        .bind(ms(f.created_at))
                        .execute(&mut *tx)
                        .await?;
                    sqlx::query(
                        "INSERT INTO oauth_flows (state_hash, provider, browser_hash, pkce_verifier, nonce, \
                         link_user_id, client_redirect, expires_at, created_at) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                    )
                    .bind(&f.state_hash)
                    .bind(f.provider)
                    .bind(&f.browser_hash)
                    .bind(&f.pkce_verifier)
                    .bind(&f.nonce)
                    .bind(&f.link_user_id)
                    .bind(&f.client_redirect)
                    .bind(ms(f.expires_at))
                    .bind(ms(f.created_at))
                    .execute(&mut *tx)
                    .await?;
                    tx.commit().await?;
                    Ok(())
                }

                async fn take_oauth_flow(
                    &self,
                    state_hash: &str,
                ) -> StoreResult<Option<OAuthFlowRecord>> {
                    let row = sqlx::query(
                        "DELETE FROM oauth_flows WHERE state_hash = $1 RETURNING state_hash, provider, \
                         browser_hash, pkce_verifier, nonce, link_user_id, client_redirect, expires_at, \
                         created_at",
                    )
                    .bind(state_hash)
                    .fetch_optional(&self.$writer)
                    .await?;
                    let Some(r) = row else { return Ok(None) };
                    Ok(Some(OAuthFlowRecord {
                        state_hash: r.try_get("state_hash")?,
                        provider: r.try_get("provider")?,
                        browser_hash: r.try_get("browser_hash")?,
                        pkce_verifier: r.try_get("pkce_verifier")?,
                        nonce: r.try_get("nonce")?,
                        link_user_id: r.try_get("link_user_id")?,
                        client_redirect: r.try_get("client_redirect")?,
                        expires_at: time(&r, "expires_at")?,
                        created_at: time(&r, "created_at")?,
                    }))
                }

                async fn create_exchange_code(&self, c: &ExchangeCodeRecord) -> StoreResult<()> {
                    let mut tx = self.begin_write().await?;
                    sqlx::query("DELETE FROM oauth_exchange_codes WHERE expires_at <= $1")
                        .bind(ms(c.created_at))
                        .execute(&mut *tx)
                        .await?;
                    sqlx::query(
                        "INSERT INTO oauth_exchange_codes (code_hash, user_id, expires_at, created_at) \
                         VALUES ($1, $2, $3, $4)",
                    )
                    .bind(&c.code_hash)
                    .bind(&c.user_id)
                    .bind(ms(c.expires_at))
                    .bind(ms(c.created_at))
                    .execute(&mut *tx)
                    .await?;
                    tx.commit().await?;
                    Ok(())
                }

                async fn take_exchange_code(
                    &self,
                    code_hash: &str,
                    now: DateTime<Utc>,
                ) -> StoreResult<Option<UserId>> {
                    let row = sqlx::query(
                        "DELETE FROM oauth_exchange_codes WHERE code_hash = $1 RETURNING user_id, expires_at",
                    )
                    .bind(code_hash)
                    .fetch_optional(&self.$writer)
                    .await?;
                    let Some(r) = row else { return Ok(None) };
                    if time(&r, "expires_at")? <= now {
                        return Ok(None);
                    }
                    Ok(Some(r.try_get("user_id")?))
                }
            }
        }
    };
}
pub(crate) use identity_store;
