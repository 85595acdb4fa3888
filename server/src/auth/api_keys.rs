//! The account's API keys (docs/api.md § API keys): created within [`MAX_KEYS_PER_USER`],
//! listed, revoked and rotated; a secret exists only in its creation's answer, and a
//! revoked key stops at once.

use chrono::{DateTime, NaiveDate, Utc};

use super::{keys, AuthService};
use crate::{
    domain::{parse_name, ScopeSet},
    ids::{AgentId, ApiKeyId, UserId},
    store::{ApiKeyRecord, StoreError},
};

/// Longest API key name, in characters after trimming.
pub const NAME_MAX: usize = app::api::limits::API_KEY_NAME_MAX;

/// Live keys one account may hold.
pub const MAX_KEYS_PER_USER: usize = 100;

/// Why an API key operation failed. The texts are the messages clients are shown.
#[derive(Debug, thiserror::Error)]
pub enum ApiKeyError {
    /// A field is missing or malformed (name, scopes, `expiresAt`), or the expiry is past.
    #[error("{0}")]
    Invalid(String),
    /// The account already holds [`MAX_KEYS_PER_USER`] live keys.
    #[error("An account may hold at most {MAX_KEYS_PER_USER} API keys; revoke one first")]
    TooMany,
    /// A rotation of a key whose expiry has passed.
    #[error("This API key has expired; create a new key instead")]
    Expired,
    /// No live key with this id belongs to the caller.
    #[error("API key not found")]
    NotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored key's scopes no longer parse; not shown to clients.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// A key to create, as the caller sent it.
#[derive(Debug, Clone)]
pub struct NewApiKey {
    pub name: String,
    /// Scope names ([`ScopeSet::parse`]), at least one.
    pub scopes: Vec<String>,
    /// Its expiry ([`parse_expiry`]); `None` or blank for a key that does not expire.
    pub expires_at: Option<String>,
    /// The agents it works for, each checked to be the owner's; `None`: every agent.
    pub agent_ids: Option<Vec<AgentId>>,
    /// Tokens it may use per calendar month; `None`: no budget.
    pub monthly_token_budget: Option<u64>,
}

/// A key just created or rotated: its record and its secret, shown this once.
#[derive(Debug, Clone)]
pub struct CreatedKey {
    /// Prefix and hash, never the secret.
    pub record: ApiKeyRecord,
    /// The full key, `key_…`.
    pub key: String,
}

/// Parses an expiry: RFC 3339, or a date meaning the end of that UTC day. Errors: in words.
pub fn parse_expiry(raw: &str) -> Result<DateTime<Utc>, String> {
    let raw = raw.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(raw) {
        return Ok(t.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(raw, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(23, 59, 59))
        .map(|t| t.and_utc())
        .ok_or_else(|| format!("expiresAt `{raw}` is not an ISO 8601 timestamp or date"))
}

impl AuthService {
    /// A new key for `user_id` (not yet stored) with its agents and monthly budget: its
    /// record and its one-time secret.
    fn new_key(
        &self,
        user_id: &UserId,
        name: String,
        scopes: &ScopeSet,
        expires_at: Option<DateTime<Utc>>,
        (agent_ids, monthly_token_budget): (Option<Vec<AgentId>>, Option<u64>),
    ) -> CreatedKey {
        let generated = keys::generate();
        let record = ApiKeyRecord {
            id: ApiKeyId::new(),
            user_id: user_id.clone(),
            name,
            prefix: generated.prefix,
            key_hash: generated.hash,
            scopes: scopes.names(),
            agent_ids,
            monthly_token_budget,
            expires_at,
            created_at: self.clock.now(),
            last_used_at: None,
            revoked_at: None,
        };
        CreatedKey {
            record,
            key: generated.key,
        }
    }

    /// Creates a key for `user_id` (the cap checked atomically with the insert). Errors:
    /// [`ApiKeyError::Invalid`] (name, scopes, expiry, in that order), `TooMany`, the store's.
    pub async fn create_api_key(
        &self,
        user_id: &UserId,
        new: NewApiKey,
    ) -> Result<CreatedKey, ApiKeyError> {
        let name = parse_name("name", &new.name, NAME_MAX).map_err(ApiKeyError::Invalid)?;
        let scopes = ScopeSet::parse(&new.scopes).map_err(ApiKeyError::Invalid)?;
        let expires_at = match new.expires_at.as_deref().filter(|s| !s.trim().is_empty()) {
            Some(raw) => {
                let t = parse_expiry(raw).map_err(ApiKeyError::Invalid)?;
                if t <= self.clock.now() {
                    return Err(ApiKeyError::Invalid(
                        "expiresAt must be in the future".into(),
                    ));
                }
                Some(t)
            }
            None => None,
        };
        let created = self.new_key(
            user_id,
            name,
            &scopes,
            expires_at,
            (new.agent_ids, new.monthly_token_budget),
        );
        if !self
            .key_store
            .create_api_key(created.record.clone(), MAX_KEYS_PER_USER)
            .await?
        {
            return Err(ApiKeyError::TooMany);
        }
        Ok(created)
    }

    /// The live keys of `user_id`, newest first. Errors: the store's.
    pub async fn list_api_keys(&self, user_id: &UserId) -> Result<Vec<ApiKeyRecord>, ApiKeyError> {
        Ok(self.key_store.list_api_keys(user_id).await?)
    }

    /// The live key `id` of `user_id`.
    async fn owned_key(
        &self,
        user_id: &UserId,
        id: &ApiKeyId,
    ) -> Result<ApiKeyRecord, ApiKeyError> {
        self.key_store
            .api_key(user_id, id)
            .await?
            .ok_or(ApiKeyError::NotFound)
    }

    /// Revokes key `id`, at once everywhere. Errors: [`ApiKeyError::NotFound`], the store's.
    pub async fn revoke_api_key(&self, user_id: &UserId, id: &ApiKeyId) -> Result<(), ApiKeyError> {
        let key = self.owned_key(user_id, id).await?;
        self.key_store
            .revoke_api_key(user_id, id, self.clock.now())
            .await?;
        self.forget_key(&key.id);
        Ok(())
    }

    /// Rotates key `id`: a new key with the same name, scopes, agents, budget and expiry, the old one revoked in
    /// the same step (works at the cap; one of concurrent rotations wins). Errors: `NotFound`,
    /// `Expired`, the store's.
    pub async fn rotate_api_key(
        &self,
        user_id: &UserId,
        id: &ApiKeyId,
    ) -> Result<CreatedKey, ApiKeyError> {
        let old = self.owned_key(user_id, id).await?;
        if old.expires_at.is_some_and(|t| t <= self.clock.now()) {
            return Err(ApiKeyError::Expired);
        }
        let scopes = ScopeSet::parse(&old.scopes).map_err(|e| anyhow::anyhow!(e))?;
        let created = self.new_key(
            user_id,
            old.name.clone(),
            &scopes,
            old.expires_at,
            (old.agent_ids.clone(), old.monthly_token_budget),
        );
        if !self
            .key_store
            .rotate_api_key(user_id, &old.id, created.record.clone(), self.clock.now())
            .await?
        {
            return Err(ApiKeyError::NotFound);
        }
        self.forget_key(&old.id);
        Ok(created)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::iso;

    #[test]
    fn expiry_accepts_timestamps_and_dates() {
        assert_eq!(
            iso(parse_expiry("2027-01-31").unwrap()),
            "2027-01-31T23:59:59Z"
        );
        assert_eq!(
            iso(parse_expiry("2027-01-31T10:00:00+02:00").unwrap()),
            "2027-01-31T08:00:00Z"
        );
        assert!(parse_expiry("next week").is_err());
    }
}
