//! [`IdentityStore`] on PostgreSQL (`migrations/postgres/0001_baseline.sql`:
//! `user_identities`, `oauth_flows`, `oauth_exchange_codes`).
//!
//! Rules kept here, under READ COMMITTED:
//! - a provider identity belongs to one account, and an account has one identity per
//!   provider: the primary key `(provider, subject)` and the unique `(user_id, provider)`;
//!   a violation is [`Conflict::LinkedIdentity`] (`link_identity`,
//!   `create_user_with_identity`, which writes the account and the identity in one
//!   transaction);
//! - an account keeps a way to sign in: `unlink_identity` locks the owner's `users` row
//!   ([`super::lock_account`]) before it checks for a password or another identity and
//!   deletes, so two unlinks of one account run one after the other and the second sees
//!   the first's delete;
//! - a state and an exchange code work once: `DELETE … RETURNING` (`take_oauth_flow`,
//!   `take_exchange_code`); of two at once, the second waits for the row and deletes
//!   nothing.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{
    accounts::insert_user,
    begin, is_unique_violation, lock_account,
    rows::{identity, ms, time, IDENTITY_COLUMNS},
    PgStore,
};
use crate::{
    auth::oauth::Provider,
    ids::UserId,
    store::{
        identity::{ExchangeCodeRecord, IdentityRecord, IdentityStore, OAuthFlowRecord},
        AccountStore, Conflict, NewUser, StoreError, StoreResult, UserRecord,
    },
};

async fn insert_identity(conn: &mut sqlx::PgConnection, i: &IdentityRecord) -> StoreResult<()> {
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
        Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict(Conflict::LinkedIdentity)),
        Err(e) => Err(e.into()),
        Ok(_) => Ok(()),
    }
}

#[async_trait]
impl IdentityStore for PgStore {
    async fn identity(
        &self,
        provider: Provider,
        subject: &str,
    ) -> StoreResult<Option<IdentityRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {IDENTITY_COLUMNS} FROM user_identities WHERE provider = $1 AND subject = $2"
        ))
        .bind(provider)
        .bind(subject)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(identity).transpose()?)
    }

    async fn identities(&self, user_id: &UserId) -> StoreResult<Vec<IdentityRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {IDENTITY_COLUMNS} FROM user_identities WHERE user_id = $1 \
             ORDER BY created_at, provider"
        ))
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(identity).collect::<Result<_, _>>()?)
    }

    async fn link_identity(&self, i: &IdentityRecord) -> StoreResult<()> {
        let mut conn = self.pool.acquire().await?;
        insert_identity(&mut conn, i).await
    }

    async fn create_user_with_identity(
        &self,
        user: NewUser,
        i: &IdentityRecord,
    ) -> StoreResult<UserRecord> {
        let mut tx = begin(&self.pool).await?;
        insert_user(&mut tx, &user).await?;
        insert_identity(&mut tx, i).await?;
        tx.commit().await?;
        self.user_by_id(&user.id).await?.ok_or(StoreError::NotFound)
    }

    async fn unlink_identity(&self, user_id: &UserId, provider: Provider) -> StoreResult<()> {
        let mut tx = begin(&self.pool).await?;
        // The owner's unlinks one at a time: each sees what the others deleted.
        lock_account(&mut tx, user_id).await?;
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
        let mut tx = begin(&self.pool).await?;
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

    async fn take_oauth_flow(&self, state_hash: &str) -> StoreResult<Option<OAuthFlowRecord>> {
        let row = sqlx::query(
            "DELETE FROM oauth_flows WHERE state_hash = $1 RETURNING state_hash, provider, \
             browser_hash, pkce_verifier, nonce, link_user_id, client_redirect, expires_at, \
             created_at",
        )
        .bind(state_hash)
        .fetch_optional(&self.pool)
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
        let mut tx = begin(&self.pool).await?;
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
        .fetch_optional(&self.pool)
        .await?;
        let Some(r) = row else { return Ok(None) };
        if time(&r, "expires_at")? <= now {
            return Ok(None);
        }
        Ok(Some(r.try_get("user_id")?))
    }
}
