//! Authentication rules: who a bearer token or API key is, sessions and their limits,
//! refresh-token rotation with replay detection.

pub mod keys;
pub mod oauth;
pub mod password;
pub mod throttle;
pub mod tokens;

use std::{
    net::IpAddr,
    sync::{
        atomic::{AtomicI64, Ordering},
        Arc,
    },
    time::Duration as StdDuration,
};

use app::api::TokenPair;
use chrono::{DateTime, Duration, Utc};
use moka::sync::Cache;

use crate::{
    domain::{Plan, Scope, ScopeSet},
    error::ApiError,
    store::{ApiKeyAuth, SessionAuth, SessionRecord, Store},
};

use self::{
    password::PasswordHasher,
    throttle::LoginThrottle,
    tokens::{Claims, JwtKeys, TokenType},
};

/// Live sessions allowed per user; the next sign-in ends the oldest (contract § Session
/// and token lifetimes).
pub const MAX_SESSIONS: usize = 5;
/// A session unused this long ends (contract § Session and token lifetimes: 24 hours).
pub const SESSION_IDLE: Duration = Duration::hours(24);
/// How long a checked session or API key is trusted before the store is asked again; a
/// session ended on another instance stops working within this time.
pub const AUTH_CACHE_TTL: StdDuration = StdDuration::from_secs(2);
/// Minimum interval between `last_seen_at` / `last_used_at` writes for one session or key.
pub const TOUCH_INTERVAL: StdDuration = StdDuration::from_secs(60);

/// The service's clock: real time plus an offset that tests may advance.
#[derive(Clone, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicI64>,
}

impl Clock {
    /// Now, as the service sees it.
    pub fn now(&self) -> DateTime<Utc> {
        Utc::now() + Duration::milliseconds(self.offset_ms.load(Ordering::Relaxed))
    }

    /// Moves the clock forward by `by` (tests of lifetimes).
    pub fn advance(&self, by: Duration) {
        self.offset_ms
            .fetch_add(by.num_milliseconds(), Ordering::Relaxed);
    }
}

/// How a request authenticated.
#[derive(Debug, Clone)]
pub enum Credential {
    /// A user session (access token, by header or cookie): holds every scope.
    Session {
        /// The session id (`sid` claim).
        session_id: String,
    },
    /// An API key: holds the scopes it was created with.
    ApiKey {
        /// The key's id.
        key_id: String,
        /// Its scopes.
        scopes: ScopeSet,
    },
}

/// The authenticated caller.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The account's user id (an API key's owner).
    pub user_id: String,
    /// The account's plan.
    pub plan: Plan,
    /// Session or API key.
    pub credential: Credential,
}

impl Principal {
    /// Ok when the caller holds `scope`; otherwise 403 with the contract's fixed body
    /// (api.md § Authentication and scopes: sessions hold every scope).
    pub fn require(&self, scope: Scope) -> Result<(), ApiError> {
        match &self.credential {
            Credential::Session { .. } => Ok(()),
            Credential::ApiKey { scopes, .. } if scopes.contains(scope) => Ok(()),
            Credential::ApiKey { .. } => Err(ApiError::Forbidden),
        }
    }

    /// The session id when the caller is a user session; API keys get 403 (api.md: "API
    /// keys can never manage API keys, sessions, passwords or the account").
    pub fn require_session(&self) -> Result<&str, ApiError> {
        match &self.credential {
            Credential::Session { session_id } => Ok(session_id),
            Credential::ApiKey { .. } => Err(ApiError::Forbidden),
        }
    }
}

/// A new session's tokens.
pub struct IssuedSession {
    /// The session id.
    pub session_id: String,
    /// Access and refresh tokens.
    pub tokens: TokenPair,
}

fn auth_cache<V: Clone + Send + Sync + 'static>() -> Cache<String, V> {
    Cache::builder()
        .max_capacity(100_000)
        .time_to_live(AUTH_CACHE_TTL)
        .build()
}

/// Authentication service shared by the HTTP layer.
#[derive(Clone)]
pub struct AuthService {
    store: Arc<dyn Store>,
    jwt: JwtKeys,
    /// Password hashing.
    pub hasher: PasswordHasher,
    /// Failed sign-in counters.
    pub throttle: LoginThrottle,
    /// The service clock.
    pub clock: Clock,
    /// Recipients mailed in the last minute, per purpose (guards against mail bombing).
    pub mail_cooldown: Cache<String, ()>,
    sessions: Cache<String, Arc<SessionAuth>>,
    /// API key lookups by the presented key, so that a cached key costs no hashing;
    /// entries are dropped by key hash on revocation (see [`AuthService::forget_key`]).
    keys: Cache<String, Option<Arc<KeyAuth>>>,
    /// Access tokens whose signature, issuer, audience and type were checked, by token;
    /// their `nbf`/`exp` are checked again on every use.
    access_tokens: Cache<String, Arc<Claims>>,
    touched: Cache<String, ()>,
}

/// A cached API key lookup with its scopes already parsed.
struct KeyAuth {
    auth: ApiKeyAuth,
    scopes: ScopeSet,
}

/// How long a verified access token is remembered (its expiry is still checked per use).
const ACCESS_TOKEN_CACHE_TTL: StdDuration = StdDuration::from_secs(60);

impl AuthService {
    /// A service over `store` signing with `jwt`.
    pub fn new(store: Arc<dyn Store>, jwt: JwtKeys, hasher: PasswordHasher, clock: Clock) -> Self {
        Self {
            store,
            jwt,
            hasher,
            throttle: LoginThrottle::default(),
            clock,
            mail_cooldown: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(StdDuration::from_secs(60))
                .build(),
            sessions: auth_cache(),
            keys: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(AUTH_CACHE_TTL)
                .support_invalidation_closures()
                .build(),
            access_tokens: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(ACCESS_TOKEN_CACHE_TTL)
                .build(),
            touched: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(TOUCH_INTERVAL)
                .build(),
        }
    }

    /// Resolves a bearer value (access token or API key). `Ok(None)` when it is not valid
    /// (→ 401); `Err` only when the store fails.
    pub async fn authenticate(&self, bearer: &str) -> Result<Option<Principal>, ApiError> {
        if keys::looks_like_key(bearer) {
            self.authenticate_key(bearer).await
        } else {
            self.authenticate_access_token(bearer).await
        }
    }

    async fn authenticate_access_token(&self, token: &str) -> Result<Option<Principal>, ApiError> {
        let now = self.clock.now();
        let claims = match self.access_tokens.get(token) {
            Some(claims) if claims.in_time(now) => claims,
            Some(_) => return Ok(None),
            None => {
                let Some(claims) = self.jwt.verify(token, TokenType::Access, now) else {
                    return Ok(None);
                };
                let claims = Arc::new(claims);
                self.access_tokens.insert(token.to_string(), claims.clone());
                claims
            }
        };
        let Some(auth) = self.live_session(&claims.sid, now).await? else {
            return Ok(None);
        };
        if auth.session.user_id != claims.sub {
            return Ok(None);
        }
        if !self.touched.contains_key(&claims.sid) {
            self.touched.insert(claims.sid.clone(), ());
            self.store.touch_session(&claims.sid, now).await?;
        }
        Ok(Some(Principal {
            user_id: claims.sub.clone(),
            plan: auth.plan,
            credential: Credential::Session {
                session_id: claims.sid.clone(),
            },
        }))
    }

    /// The session if it is live (not revoked, used within [`SESSION_IDLE`]).
    async fn live_session(
        &self,
        sid: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<Arc<SessionAuth>>, ApiError> {
        let auth = match self.sessions.get(sid) {
            Some(auth) => auth,
            None => match self.store.session_auth(sid).await? {
                Some(auth) => {
                    let auth = Arc::new(auth);
                    self.sessions.insert(sid.to_string(), auth.clone());
                    auth
                }
                None => return Ok(None),
            },
        };
        let live =
            auth.session.revoked_at.is_none() && auth.session.last_seen_at + SESSION_IDLE > now;
        Ok(live.then_some(auth))
    }

    async fn authenticate_key(&self, key: &str) -> Result<Option<Principal>, ApiError> {
        let found = match self.keys.get(key) {
            Some(found) => found,
            None => {
                let hash = keys::sha256_hex(key);
                let found = match self.store.api_key_by_hash(&hash).await? {
                    Some(auth) => {
                        let scopes = ScopeSet::parse(&auth.key.scopes)
                            .map_err(|e| ApiError::Internal(anyhow::anyhow!(e)))?;
                        Some(Arc::new(KeyAuth { auth, scopes }))
                    }
                    None => None,
                };
                // The store found the key by its hash, so the entry belongs to `key`.
                let found = found.filter(|k| keys::constant_time_eq(&k.auth.key.key_hash, &hash));
                self.keys.insert(key.to_string(), found.clone());
                found
            }
        };
        let Some(found) = found else { return Ok(None) };
        let auth = &found.auth;
        let now = self.clock.now();
        let usable =
            auth.key.revoked_at.is_none() && auth.key.expires_at.is_none_or(|exp| exp > now);
        if !usable {
            return Ok(None);
        }
        if !self.touched.contains_key(&auth.key.id) {
            self.touched.insert(auth.key.id.clone(), ());
            self.store.touch_api_key(&auth.key.id, now).await?;
        }
        Ok(Some(Principal {
            user_id: auth.key.user_id.clone(),
            plan: auth.plan,
            credential: Credential::ApiKey {
                key_id: auth.key.id.clone(),
                scopes: found.scopes.clone(),
            },
        }))
    }

    fn token_pair(
        &self,
        user_id: &str,
        session_id: &str,
        refresh_jti: &str,
        now: DateTime<Utc>,
    ) -> anyhow::Result<TokenPair> {
        let access_jti = uuid::Uuid::now_v7().to_string();
        let (access_token, _) =
            self.jwt
                .issue(TokenType::Access, user_id, session_id, &access_jti, now)?;
        let (refresh_token, _) =
            self.jwt
                .issue(TokenType::Refresh, user_id, session_id, refresh_jti, now)?;
        Ok(TokenPair {
            access_token,
            refresh_token,
        })
    }

    /// Starts a session for a signed-in user, ending the oldest live sessions beyond
    /// [`MAX_SESSIONS`] at once.
    pub async fn start_session(
        &self,
        user_id: &str,
        user_agent: Option<String>,
        ip: Option<IpAddr>,
    ) -> Result<IssuedSession, ApiError> {
        let now = self.clock.now();
        let session_id = uuid::Uuid::now_v7().to_string();
        let refresh_jti = uuid::Uuid::now_v7().to_string();
        let record = SessionRecord {
            id: session_id.clone(),
            user_id: user_id.to_string(),
            refresh_jti: refresh_jti.clone(),
            user_agent: user_agent.map(|ua| ua.chars().take(300).collect()),
            ip: ip.map(|ip| ip.to_string()),
            created_at: now,
            last_seen_at: now,
            revoked_at: None,
        };
        let evicted = self
            .store
            .create_session(record, MAX_SESSIONS, now - SESSION_IDLE)
            .await?;
        for id in evicted {
            self.sessions.invalidate(&id);
        }
        let tokens = self.token_pair(user_id, &session_id, &refresh_jti, now)?;
        Ok(IssuedSession { session_id, tokens })
    }

    /// Exchanges a refresh token for a new pair, rotating the refresh token. A rotated
    /// (already used) refresh token revokes its session: RFC 9700 § 4.14.2 (refresh token
    /// rotation with reuse detection). Any failure is 401.
    pub async fn refresh(&self, refresh_token: &str) -> Result<IssuedSession, ApiError> {
        let now = self.clock.now();
        let claims = self
            .jwt
            .verify(refresh_token, TokenType::Refresh, now)
            .ok_or(ApiError::Unauthorized)?;
        self.sessions.invalidate(&claims.sid);
        let auth = self
            .live_session(&claims.sid, now)
            .await?
            .ok_or(ApiError::Unauthorized)?;
        if auth.session.user_id != claims.sub {
            return Err(ApiError::Unauthorized);
        }
        let new_jti = uuid::Uuid::now_v7().to_string();
        if !self
            .store
            .rotate_refresh(&claims.sid, &claims.jti, &new_jti, now)
            .await?
        {
            tracing::warn!(session.id = %claims.sid, "refresh token reuse detected; session revoked");
            self.end_session(&claims.sub, &claims.sid, "refresh_reuse")
                .await?;
            return Err(ApiError::Unauthorized);
        }
        self.sessions.invalidate(&claims.sid);
        let tokens = self.token_pair(&claims.sub, &claims.sid, &new_jti, now)?;
        Ok(IssuedSession {
            session_id: claims.sid,
            tokens,
        })
    }

    /// Ends one session of the user; false when it was not live.
    pub async fn end_session(
        &self,
        user_id: &str,
        session_id: &str,
        reason: &str,
    ) -> Result<bool, ApiError> {
        let ended = self
            .store
            .revoke_session(user_id, session_id, reason, self.clock.now())
            .await?;
        self.sessions.invalidate(session_id);
        Ok(ended)
    }

    /// Ends every session of the user (password reset).
    pub async fn end_all_sessions(&self, user_id: &str, reason: &str) -> Result<(), ApiError> {
        for id in self
            .store
            .revoke_all_sessions(user_id, reason, self.clock.now())
            .await?
        {
            self.sessions.invalidate(&id);
        }
        Ok(())
    }

    /// Live sessions of the user, newest first.
    pub async fn live_sessions(&self, user_id: &str) -> Result<Vec<SessionRecord>, ApiError> {
        Ok(self
            .store
            .live_sessions(user_id, self.clock.now() - SESSION_IDLE)
            .await?)
    }

    /// Drops a cached API key lookup (after revocation) so it stops working at once.
    pub fn forget_key(&self, key_hash: &str) {
        let hash = key_hash.to_string();
        // Cannot fail: the cache is built with invalidation closures.
        let _ = self.keys.invalidate_entries_if(move |_, found| {
            found.as_ref().is_some_and(|k| k.auth.key.key_hash == hash)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_principal(scopes: &[&str]) -> Principal {
        Principal {
            user_id: "u".into(),
            plan: Plan::Free,
            credential: Credential::ApiKey {
                key_id: "k".into(),
                scopes: ScopeSet::parse(scopes).unwrap(),
            },
        }
    }

    #[test]
    fn api_keys_hold_only_their_scopes_and_sessions_hold_all() {
        let key = key_principal(&["agents:read", "chat:write"]);
        assert!(key.require(Scope::AgentsRead).is_ok());
        assert!(key.require(Scope::ChatWrite).is_ok());
        for scope in Scope::ALL
            .into_iter()
            .filter(|s| ![Scope::AgentsRead, Scope::ChatWrite].contains(s))
        {
            assert!(
                matches!(key.require(scope), Err(ApiError::Forbidden)),
                "{scope:?}"
            );
        }
        assert!(matches!(key.require_session(), Err(ApiError::Forbidden)));
        let session = Principal {
            user_id: "u".into(),
            plan: Plan::Free,
            credential: Credential::Session {
                session_id: "s".into(),
            },
        };
        assert!(Scope::ALL.into_iter().all(|s| session.require(s).is_ok()));
        assert_eq!(session.require_session().unwrap(), "s");
    }

    #[test]
    fn the_clock_advances() {
        let clock = Clock::default();
        let before = clock.now();
        clock.advance(Duration::hours(25));
        assert!(clock.now() - before >= Duration::hours(25));
    }
}
