//! Authentication rules: who a bearer token or API key is, sessions and their limits,
//! refresh-token rotation with replay detection.

pub mod api_keys;
pub mod cooldown;
pub mod csrf;
pub mod keys;
pub mod oauth;
pub mod password;
pub mod throttle;
pub mod tokens;

use std::{
    net::IpAddr,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::{Duration as StdDuration, Instant},
};

use app::api::TokenPair;
use chrono::{DateTime, Duration, Utc};
use moka::sync::Cache;

pub use crate::clock::Clock;

use crate::{
    cluster::{Bus, Invalidation, LocalCache},
    domain::{Plan, Scope, ScopeSet},
    ids::{AgentId, ApiKeyId, SessionId, UserId},
    store::{ApiKeyAuth, ApiKeyStore, SessionAuth, SessionRecord, SessionStore, StoreError},
};

use self::{
    cooldown::MailCooldown,
    password::PasswordHasher,
    throttle::Throttle,
    tokens::{Claims, JwtKeys, TokenType},
};

/// Live sessions per user; the next sign-in ends the oldest (docs/api.md § Session and token
/// lifetimes).
pub const MAX_SESSIONS: usize = 5;
/// A session unused this long ends (docs/api.md § Session and token lifetimes).
pub const SESSION_IDLE: Duration = Duration::hours(24);
/// How long a checked session or key is trusted before the store is asked again.
pub const AUTH_CACHE_TTL: StdDuration = StdDuration::from_secs(2);
/// Minimum interval between `last_seen_at` / `last_used_at` writes for one session or key.
pub const TOUCH_INTERVAL: StdDuration = StdDuration::from_secs(60);
const TOUCH_INTERVAL_CHRONO: Duration = Duration::seconds(TOUCH_INTERVAL.as_secs() as i64);

/// Why a caller is not let in; the texts are shown to clients (docs/api.md § Errors).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The credential is malformed, expired, revoked, of the wrong type, or a reused refresh token.
    #[error("Invalid or expired token")]
    InvalidCredential,
    /// A cookie-authenticated unsafe request or refresh without its CSRF token ([`csrf`]).
    #[error(
        "Missing or invalid CSRF token: send the ac_csrf cookie's value in the X-CSRF-Token header"
    )]
    CsrfRejected,
    /// The caller's API key does not hold the scope the operation needs.
    #[error("Insufficient permissions")]
    MissingScope,
    /// An API key on a session-only operation (API keys, sessions, passwords, the account).
    #[error("Insufficient permissions")]
    SessionRequired,
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Anything else (signing, a stored scope that does not parse); not shown to clients.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// How a request authenticated.
#[derive(Debug, Clone)]
pub enum Credential {
    /// A user session (access token, by header or cookie): holds every scope.
    Session {
        /// The `sid` claim.
        session_id: SessionId,
    },
    /// An API key: holds the scopes it was created with.
    ApiKey {
        key_id: ApiKeyId,
        scopes: ScopeSet,
        /// The agents it works for; `None`: every agent of its owner.
        agents: Option<Arc<[AgentId]>>,
        /// Tokens it may use per calendar month; `None`: no budget of its own.
        monthly_token_budget: Option<u64>,
    },
}

/// The authenticated caller.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The user id (an API key's owner).
    pub user_id: UserId,
    pub plan: Plan,
    pub credential: Credential,
}

impl Principal {
    /// Ok when the caller holds `scope` (sessions hold all). Errors: [`AuthError::MissingScope`].
    pub fn require(&self, scope: Scope) -> Result<(), AuthError> {
        match &self.credential {
            Credential::Session { .. } => Ok(()),
            Credential::ApiKey { scopes, .. } if scopes.contains(scope) => Ok(()),
            Credential::ApiKey { .. } => Err(AuthError::MissingScope),
        }
    }

    /// Whether the caller may use agent `agent_id`: an API key bound to agents works for those
    /// alone; others answer as if absent (docs/api.md § API keys).
    pub fn may_use(&self, agent_id: &AgentId) -> bool {
        self.agent_scope()
            .is_none_or(|agents| agents.iter().any(|a| a == agent_id))
    }

    /// Whether the caller may reach a resource linked to `agent` (an integration): an API key
    /// bound to agents reaches only what is linked to one of them, never what is linked to
    /// none (docs/api.md § API keys).
    pub fn may_reach_linked(&self, agent: Option<&AgentId>) -> bool {
        match self.agent_scope() {
            None => true,
            Some(agents) => agent.is_some_and(|a| agents.contains(a)),
        }
    }

    /// The agents an API key is bound to; `None` for sessions and unbound keys.
    pub fn agent_scope(&self) -> Option<&[AgentId]> {
        match &self.credential {
            Credential::ApiKey {
                agents: Some(agents),
                ..
            } => Some(agents),
            _ => None,
        }
    }

    /// The caller's session id; API keys have none. Errors: [`AuthError::SessionRequired`].
    pub fn require_session(&self) -> Result<&SessionId, AuthError> {
        match &self.credential {
            Credential::Session { session_id } => Ok(session_id),
            Credential::ApiKey { .. } => Err(AuthError::SessionRequired),
        }
    }
}

/// A new session's tokens.
pub struct IssuedSession {
    pub session_id: SessionId,
    pub tokens: TokenPair,
    /// The session's CSRF token for the dashboard's `ac_csrf` cookie ([`csrf`]).
    pub csrf_token: String,
}

/// Hasher of the credential caches: foldhash, randomly seeded.
type FastHash = foldhash::fast::RandomState;

/// A session read from the store, shared by the cache entries of its access tokens.
struct SessionSlot {
    auth: SessionAuth,
    /// When it was read; trusted for [`AUTH_CACHE_TTL`] from then.
    loaded: Instant,
    /// Set by the first use that recorded activity (one write per read).
    touched: AtomicBool,
}

impl SessionSlot {
    /// Not revoked and used within [`SESSION_IDLE`] of `now`.
    fn live(&self, now: DateTime<Utc>) -> bool {
        let session = &self.auth.session;
        session.revoked_at.is_none() && session.last_seen_at + SESSION_IDLE > now
    }
}

/// A verified access token and, once its session was found live, whom it authenticates.
struct AccessEntry {
    claims: Claims,
    grant: Option<Grant>,
}

/// An access token's caller while its session is known to be live.
struct Grant {
    principal: Arc<Principal>,
    session: Arc<SessionSlot>,
    /// [`AuthService`]'s session epoch at the read; any session ended here since makes it stale.
    epoch: u64,
}

/// Most credentials one thread's [`Front`] cache keeps; it starts over when full.
const FRONT_CAPACITY: usize = 1_024;

/// One worker thread's copies of its recent callers ([`FrontEntry`]), so a repeat request
/// touches no memory another core writes.
#[derive(Default)]
struct Front {
    entries: std::collections::HashMap<Box<str>, FrontEntry, FastHash>,
}

/// A caller, the window (service-clock Unix ms) in which every shared check passes (token,
/// idle limit, key expiry, [`AUTH_CACHE_TTL`], next last-use write), and its epoch.
struct FrontEntry {
    principal: Arc<Principal>,
    valid_from_ms: i64,
    valid_until_ms: i64,
    kind: FrontKind,
    epoch: u64,
}

#[derive(Clone, Copy)]
enum FrontKind {
    Token,
    Key,
}

impl Front {
    fn remember(&mut self, bearer: &str, entry: FrontEntry) {
        if self.entries.len() >= FRONT_CAPACITY {
            self.entries.clear();
        }
        self.entries.insert(bearer.into(), entry);
    }
}

/// `at` in Unix epoch milliseconds.
fn ms(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

/// What is left of [`AUTH_CACHE_TTL`] for a row read at `loaded`, in milliseconds.
fn trust_left_ms(loaded: Instant) -> i64 {
    let left = AUTH_CACHE_TTL.saturating_sub(loaded.elapsed());
    i64::try_from(left.as_millis()).unwrap_or(0)
}

/// A cached API key lookup with its scopes parsed and its caller built.
struct KeyAuth {
    auth: ApiKeyAuth,
    principal: Arc<Principal>,
    /// When the row was read; trusted for [`AUTH_CACHE_TTL`] from then.
    loaded: Instant,
    /// Set by the first use that recorded the key's last use (one write per read).
    touched: AtomicBool,
}

/// Authentication service shared by the HTTP layer.
#[derive(Clone)]
pub struct AuthService {
    session_store: Arc<dyn SessionStore>,
    key_store: Arc<dyn ApiKeyStore>,
    jwt: JwtKeys,
    pub hasher: PasswordHasher,
    /// Failed sign-in counters: in process, or in Redis ([`AuthService::share_limits`]).
    pub throttle: Throttle,
    pub clock: Clock,
    /// Recipients mailed in the last minute, per purpose (against mail bombing).
    pub mail_cooldown: MailCooldown,
    /// Sessions read from the store, by id, trusted for [`AUTH_CACHE_TTL`].
    sessions: Cache<SessionId, Arc<SessionSlot>>,
    /// Bumped when this instance ends or changes a session: every cached grant is rechecked.
    session_epoch: Arc<AtomicU64>,
    /// API key lookups by presented key (no hashing when cached); see [`AuthService::forget_key`].
    keys: Cache<String, Option<Arc<KeyAuth>>, FastHash>,
    /// Checked access tokens with their grant; `nbf`/`exp` and liveness are checked per use.
    access_tokens: Cache<String, Arc<AccessEntry>, FastHash>,
    /// Bumped whenever a key is forgotten (revoked), so that no thread's [`Front`] keeps it.
    key_epoch: Arc<AtomicU64>,
    /// Each worker thread's [`Front`] cache, in front of the shared caches above.
    front: Arc<thread_local::ThreadLocal<std::cell::RefCell<Front>>>,
    /// Where forgotten sessions and keys are published ([`AuthService::with_bus`]).
    bus: Bus,
}

/// How long a verified access token is remembered (its expiry is still checked per use).
const ACCESS_TOKEN_CACHE_TTL: StdDuration = StdDuration::from_secs(60);

impl AuthService {
    /// A service over one store's `session_store` and `key_store`, signing with `jwt`.
    pub fn new(
        session_store: Arc<dyn SessionStore>,
        key_store: Arc<dyn ApiKeyStore>,
        jwt: JwtKeys,
        hasher: PasswordHasher,
        clock: Clock,
    ) -> Self {
        Self {
            session_store,
            key_store,
            jwt,
            hasher,
            throttle: Throttle::default(),
            clock,
            mail_cooldown: MailCooldown::default(),
            sessions: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(AUTH_CACHE_TTL)
                .build(),
            session_epoch: Arc::default(),
            keys: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(AUTH_CACHE_TTL)
                .support_invalidation_closures()
                .build_with_hasher(FastHash::default()),
            access_tokens: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(ACCESS_TOKEN_CACHE_TTL)
                .build_with_hasher(FastHash::default()),
            key_epoch: Arc::default(),
            front: Arc::default(),
            bus: Bus::local(),
        }
    }

    /// Shares the sign-in throttle and mail cooldown through `redis`, in process while it is down.
    pub fn share_limits(&mut self, redis: &crate::ratelimit::SharedRedis) {
        self.throttle = Throttle::shared(redis.clone());
        self.mail_cooldown = MailCooldown::shared(redis.clone());
    }

    /// Publishes forgotten sessions and keys on `bus`, forgets others' ([`crate::cluster`]).
    pub fn with_bus(mut self, bus: &Bus) -> Self {
        bus.add_cache(Arc::new(self.local_caches()));
        self.bus = bus.clone();
        self
    }

    /// This instance's session and key caches, without the bus.
    fn local_caches(&self) -> LocalCredentials {
        LocalCredentials {
            sessions: self.sessions.clone(),
            session_epoch: self.session_epoch.clone(),
            keys: self.keys.clone(),
            key_epoch: self.key_epoch.clone(),
        }
    }

    /// Forgets the session `sid` and every grant, here and on every other instance.
    fn forget_session(&self, sid: &SessionId) {
        self.local_caches().forget_session(sid);
        self.bus.publish(Invalidation::Session { id: sid.clone() });
    }

    /// Resolves a bearer value (access token or API key); `Ok(None)` when not valid, `Err` only
    /// when the store fails. Call [`AuthService::cached`] first.
    pub async fn authenticate(&self, bearer: &str) -> Result<Option<Arc<Principal>>, AuthError> {
        if let Some(principal) = self.cached(bearer) {
            return Ok(Some(principal));
        }
        let is_key = keys::looks_like_key(bearer);
        let found = if is_key {
            self.authenticate_key(bearer).await?
        } else {
            self.authenticate_access_token(bearer).await?
        };
        if let Some(principal) = &found {
            let entry = if is_key {
                self.front_key(bearer, principal)
            } else {
                self.front_token(bearer, principal)
            };
            if let Some(entry) = entry {
                self.front
                    .get_or_default()
                    .borrow_mut()
                    .remember(bearer, entry);
            }
        }
        Ok(found)
    }

    /// The front entry of an access token that the shared path just accepted.
    fn front_token(&self, token: &str, principal: &Principal) -> Option<FrontEntry> {
        let epoch = self.session_epoch.load(Ordering::Acquire);
        let entry = self.access_tokens.get(token)?;
        let grant = entry.grant.as_ref()?;
        if grant.epoch != epoch {
            return None;
        }
        let leeway_ms = tokens::LEEWAY_SECS as i64 * 1_000;
        let session = &grant.session;
        let until = [
            entry.claims.exp.saturating_mul(1_000) + leeway_ms,
            ms(session.auth.session.last_seen_at + SESSION_IDLE),
            self.clock.now_ms() + trust_left_ms(session.loaded),
        ];
        Some(FrontEntry {
            principal: Arc::new(principal.clone()),
            valid_from_ms: entry.claims.nbf.saturating_mul(1_000) - leeway_ms,
            valid_until_ms: until.into_iter().min().unwrap_or(i64::MIN),
            kind: FrontKind::Token,
            epoch,
        })
    }

    /// The front entry of an API key that the shared path just accepted.
    fn front_key(&self, key: &str, principal: &Principal) -> Option<FrontEntry> {
        let epoch = self.key_epoch.load(Ordering::Acquire);
        let found = self.keys.get(key).flatten()?;
        let record = &found.auth.key;
        let mut until = self.clock.now_ms() + trust_left_ms(found.loaded);
        if let Some(expires_at) = record.expires_at {
            until = until.min(ms(expires_at));
        }
        if !found.touched.load(Ordering::Acquire) {
            // The next write of its last use goes through the shared path.
            let next_touch = record
                .last_used_at
                .map_or(i64::MIN, |at| ms(at + TOUCH_INTERVAL_CHRONO));
            until = until.min(next_touch);
        }
        Some(FrontEntry {
            principal: Arc::new(principal.clone()),
            valid_from_ms: i64::MIN,
            valid_until_ms: until,
            kind: FrontKind::Key,
            epoch,
        })
    }

    /// The caller of `bearer` from this thread's cache if still valid; `None` means "ask
    /// [`AuthService::authenticate`]", not "invalid".
    pub fn cached(&self, bearer: &str) -> Option<Arc<Principal>> {
        let mut front = self.front.get_or_default().borrow_mut();
        let entry = front.entries.get(bearer)?;
        let now = self.clock.now_ms();
        let epoch = match entry.kind {
            FrontKind::Token => &self.session_epoch,
            FrontKind::Key => &self.key_epoch,
        };
        if entry.epoch == epoch.load(Ordering::Acquire)
            && entry.valid_from_ms <= now
            && now < entry.valid_until_ms
        {
            return Some(entry.principal.clone());
        }
        front.entries.remove(bearer);
        None
    }

    async fn authenticate_access_token(
        &self,
        token: &str,
    ) -> Result<Option<Arc<Principal>>, AuthError> {
        let now = self.clock.now();
        let entry = match self.access_tokens.get(token) {
            Some(entry) if entry.claims.in_time(now) => entry,
            Some(_) => return Ok(None),
            None => {
                let Some(claims) = self.jwt.verify(token, TokenType::Access, now) else {
                    return Ok(None);
                };
                let entry = Arc::new(AccessEntry {
                    claims,
                    grant: None,
                });
                self.access_tokens.insert(token.to_string(), entry.clone());
                entry
            }
        };
        if let Some(grant) = &entry.grant {
            if grant.epoch == self.session_epoch.load(Ordering::Acquire)
                && grant.session.loaded.elapsed() < AUTH_CACHE_TTL
            {
                return Ok(grant.session.live(now).then(|| grant.principal.clone()));
            }
        }
        // First use, or the session must be read again.
        let epoch = self.session_epoch.load(Ordering::Acquire);
        let claims = &entry.claims;
        let Some(session) = self.live_session(&claims.sid, now).await? else {
            return Ok(None);
        };
        if session.auth.session.user_id != claims.sub {
            return Ok(None);
        }
        self.touch_session(&session, now).await?;
        let principal = Arc::new(Principal {
            user_id: claims.sub.clone(),
            plan: session.auth.plan,
            credential: Credential::Session {
                session_id: claims.sid.clone(),
            },
        });
        let granted = Arc::new(AccessEntry {
            claims: claims.clone(),
            grant: Some(Grant {
                principal: principal.clone(),
                session,
                epoch,
            }),
        });
        self.access_tokens.insert(token.to_string(), granted);
        Ok(Some(principal))
    }

    /// Records the session's activity, at most once per [`TOUCH_INTERVAL`].
    async fn touch_session(
        &self,
        session: &SessionSlot,
        now: DateTime<Utc>,
    ) -> Result<(), AuthError> {
        let due = session.auth.session.last_seen_at + TOUCH_INTERVAL_CHRONO <= now;
        if due && !session.touched.swap(true, Ordering::AcqRel) {
            self.session_store
                .touch_session(&session.auth.session.id, now)
                .await?;
        }
        Ok(())
    }

    /// The session if it is live (not revoked, used within [`SESSION_IDLE`]).
    async fn live_session(
        &self,
        sid: &SessionId,
        now: DateTime<Utc>,
    ) -> Result<Option<Arc<SessionSlot>>, AuthError> {
        let slot = match self.sessions.get(sid) {
            Some(slot) => slot,
            None => match self.session_store.session_auth(sid).await? {
                Some(auth) => {
                    let slot = Arc::new(SessionSlot {
                        auth,
                        loaded: Instant::now(),
                        touched: AtomicBool::new(false),
                    });
                    self.sessions.insert(sid.clone(), slot.clone());
                    slot
                }
                None => return Ok(None),
            },
        };
        Ok(slot.live(now).then_some(slot))
    }

    async fn authenticate_key(&self, key: &str) -> Result<Option<Arc<Principal>>, AuthError> {
        let found = match self.keys.get(key) {
            Some(found) => found,
            None => {
                let hash = keys::sha256_hex(key);
                let found = match self.key_store.api_key_by_hash(&hash).await? {
                    // The store found the key by its hash; compare it all the same.
                    Some(auth) if keys::constant_time_eq(&auth.key.key_hash, &hash) => {
                        let scopes = ScopeSet::parse(&auth.key.scopes)
                            .map_err(|e| AuthError::Internal(anyhow::anyhow!(e)))?;
                        let principal = Arc::new(Principal {
                            user_id: auth.key.user_id.clone(),
                            plan: auth.plan,
                            credential: Credential::ApiKey {
                                key_id: auth.key.id.clone(),
                                scopes,
                                agents: auth.key.agent_ids.clone().map(Arc::from),
                                monthly_token_budget: auth.key.monthly_token_budget,
                            },
                        });
                        Some(Arc::new(KeyAuth {
                            auth,
                            principal,
                            loaded: Instant::now(),
                            touched: AtomicBool::new(false),
                        }))
                    }
                    _ => None,
                };
                self.keys.insert(key.to_string(), found.clone());
                found
            }
        };
        let Some(found) = found else { return Ok(None) };
        let key = &found.auth.key;
        let now = self.clock.now();
        let usable = key.revoked_at.is_none() && key.expires_at.is_none_or(|exp| exp > now);
        if !usable {
            return Ok(None);
        }
        // Last use is written at most once per TOUCH_INTERVAL: the row read says when it
        // was last written, and only the first use after reading it may write.
        let due = key
            .last_used_at
            .is_none_or(|at| at + TOUCH_INTERVAL_CHRONO <= now);
        if due && !found.touched.swap(true, Ordering::AcqRel) {
            self.key_store.touch_api_key(&key.id, now).await?;
        }
        Ok(Some(found.principal.clone()))
    }

    fn token_pair(
        &self,
        user_id: &UserId,
        session_id: &SessionId,
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

    /// Starts a session, ending the oldest live sessions beyond [`MAX_SESSIONS`].
    pub async fn start_session(
        &self,
        user_id: &UserId,
        user_agent: Option<String>,
        ip: Option<IpAddr>,
    ) -> Result<IssuedSession, AuthError> {
        let now = self.clock.now();
        let session_id = SessionId::new();
        let refresh_jti = uuid::Uuid::now_v7().to_string();
        let record = SessionRecord {
            id: session_id.clone(),
            user_id: user_id.clone(),
            refresh_jti: refresh_jti.clone(),
            user_agent: user_agent.map(|ua| ua.chars().take(300).collect()),
            ip: ip.map(|ip| ip.to_string()),
            created_at: now,
            last_seen_at: now,
            revoked_at: None,
        };
        let evicted = self
            .session_store
            .create_session(record, MAX_SESSIONS, now - SESSION_IDLE)
            .await?;
        for id in evicted {
            self.forget_session(&id);
        }
        let tokens = self.token_pair(user_id, &session_id, &refresh_jti, now)?;
        Ok(IssuedSession {
            csrf_token: self.jwt.csrf().token(&session_id),
            session_id,
            tokens,
        })
    }

    /// Exchanges a refresh token for a new pair; reuse of a rotated token revokes the session
    /// (RFC 9700 § 4.14.2). Cookie refresh without the session's `csrf`: 403; other failures 401.
    pub async fn refresh(
        &self,
        refresh_token: &str,
        csrf: Option<&str>,
    ) -> Result<IssuedSession, AuthError> {
        let now = self.clock.now();
        let claims = self
            .jwt
            .verify(refresh_token, TokenType::Refresh, now)
            .ok_or(AuthError::InvalidCredential)?;
        if csrf.is_some_and(|token| !self.jwt.csrf().verify(&claims.sid, token)) {
            return Err(AuthError::CsrfRejected);
        }
        self.forget_session(&claims.sid);
        let auth = self
            .live_session(&claims.sid, now)
            .await?
            .ok_or(AuthError::InvalidCredential)?;
        if auth.auth.session.user_id != claims.sub {
            return Err(AuthError::InvalidCredential);
        }
        let new_jti = uuid::Uuid::now_v7().to_string();
        if !self
            .session_store
            .rotate_refresh(&claims.sid, &claims.jti, &new_jti, now)
            .await?
        {
            tracing::warn!(session.id = %claims.sid, "refresh token reuse detected; session revoked");
            self.end_session(&claims.sub, &claims.sid, "refresh_reuse")
                .await?;
            return Err(AuthError::InvalidCredential);
        }
        self.forget_session(&claims.sid);
        let tokens = self.token_pair(&claims.sub, &claims.sid, &new_jti, now)?;
        Ok(IssuedSession {
            csrf_token: self.jwt.csrf().token(&claims.sid),
            session_id: claims.sid,
            tokens,
        })
    }

    /// Whether `csrf` is the caller's session's CSRF token ([`csrf`]); never for an API key.
    pub fn csrf_matches(&self, principal: &Principal, csrf: &str) -> bool {
        match &principal.credential {
            Credential::Session { session_id } => self.jwt.csrf().verify(session_id, csrf),
            Credential::ApiKey { .. } => false,
        }
    }

    /// Ends one session of the user; false when it was not live.
    pub async fn end_session(
        &self,
        user_id: &UserId,
        session_id: &SessionId,
        reason: &str,
    ) -> Result<bool, AuthError> {
        let ended = self
            .session_store
            .revoke_session(user_id, session_id, reason, self.clock.now())
            .await?;
        self.forget_session(session_id);
        Ok(ended)
    }

    /// Ends every session of the user (password reset).
    pub async fn end_all_sessions(&self, user_id: &UserId, reason: &str) -> Result<(), AuthError> {
        for id in self
            .session_store
            .revoke_all_sessions(user_id, reason, self.clock.now())
            .await?
        {
            self.forget_session(&id);
        }
        Ok(())
    }

    /// Live sessions of the user, newest first.
    pub async fn live_sessions(&self, user_id: &UserId) -> Result<Vec<SessionRecord>, AuthError> {
        Ok(self
            .session_store
            .live_sessions(user_id, self.clock.now() - SESSION_IDLE)
            .await?)
    }

    /// Drops the cached lookups of `key_id` here and, via the bus, everywhere, at once.
    pub fn forget_key(&self, key_id: &ApiKeyId) {
        self.local_caches().forget_key(key_id);
        self.bus
            .publish(Invalidation::ApiKey { id: key_id.clone() });
    }
}

/// The caches of one [`AuthService`] as the cluster bus reaches them: forgetting never publishes.
struct LocalCredentials {
    sessions: Cache<SessionId, Arc<SessionSlot>>,
    session_epoch: Arc<AtomicU64>,
    keys: Cache<String, Option<Arc<KeyAuth>>, FastHash>,
    key_epoch: Arc<AtomicU64>,
}

impl LocalCredentials {
    /// Drops the session `sid` and every access token's grant.
    fn forget_session(&self, sid: &SessionId) {
        self.sessions.invalidate(sid);
        self.session_epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// Drops the lookups of the key `key_id` and every thread's [`Front`] entry of a key.
    fn forget_key(&self, key_id: &ApiKeyId) {
        self.key_epoch.fetch_add(1, Ordering::AcqRel);
        let key_id = key_id.clone();
        // Cannot fail: the cache is built with invalidation closures.
        let _ = self.keys.invalidate_entries_if(move |_, found| {
            found.as_ref().is_some_and(|k| k.auth.key.id == key_id)
        });
    }
}

impl LocalCache for LocalCredentials {
    fn forget(&self, what: &Invalidation) {
        match what {
            Invalidation::Session { id } => self.forget_session(id),
            Invalidation::ApiKey { id } => self.forget_key(id),
            Invalidation::Agent { .. } | Invalidation::Webhooks { .. } => {}
        }
    }

    /// Drops every session and key read, and with the epochs every grant and [`Front`] entry.
    fn forget_all(&self) {
        self.sessions.invalidate_all();
        self.keys.invalidate_all();
        self.session_epoch.fetch_add(1, Ordering::AcqRel);
        self.key_epoch.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_principal(scopes: &[&str]) -> Principal {
        Principal {
            user_id: UserId::from("u"),
            plan: Plan::Free,
            credential: Credential::ApiKey {
                key_id: "k".into(),
                scopes: ScopeSet::parse(scopes).unwrap(),
                agents: None,
                monthly_token_budget: None,
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
                matches!(key.require(scope), Err(AuthError::MissingScope)),
                "{scope:?}"
            );
        }
        assert!(matches!(
            key.require_session(),
            Err(AuthError::SessionRequired)
        ));
        let session = Principal {
            user_id: UserId::from("u"),
            plan: Plan::Free,
            credential: Credential::Session {
                session_id: "s".into(),
            },
        };
        assert!(Scope::ALL.into_iter().all(|s| session.require(s).is_ok()));
        assert_eq!(session.require_session().unwrap(), "s");
    }

    /// A service over a fresh SQLite store holding one verified user `u1`.
    async fn service() -> (tempfile::TempDir, Arc<dyn crate::store::Store>, AuthService) {
        let (dir, store) = crate::store::sqlite::tests::store().await;
        crate::store::sqlite::tests::verified_user(&store, Utc::now()).await;
        let store: Arc<dyn crate::store::Store> = Arc::new(store);
        let jwt = JwtKeys::new(&secrecy::SecretString::from("s".repeat(64)), "http://test");
        let auth = AuthService::new(
            store.clone(),
            store.clone(),
            jwt,
            PasswordHasher::new(1).unwrap(),
            Clock::default(),
        );
        (dir, store, auth)
    }

    /// Forgets what the caches hold, as [`AUTH_CACHE_TTL`] passing would.
    fn expire_caches(auth: &AuthService) {
        auth.sessions.invalidate_all();
        auth.keys.invalidate_all();
        auth.session_epoch.fetch_add(1, Ordering::AcqRel);
    }

    #[tokio::test]
    async fn an_api_keys_last_use_is_written_at_most_once_a_minute() {
        let (_dir, store, auth) = service().await;
        let generated = keys::generate();
        let t0 = auth.clock.now();
        store
            .create_api_key(
                crate::store::ApiKeyRecord {
                    id: "k1".into(),
                    user_id: "u1".into(),
                    name: "CI".into(),
                    prefix: generated.prefix.clone(),
                    key_hash: generated.hash.clone(),
                    scopes: vec!["agents:read".into()],
                    agent_ids: None,
                    monthly_token_budget: None,
                    expires_at: None,
                    created_at: t0,
                    last_used_at: None,
                    revoked_at: None,
                },
                100,
            )
            .await
            .unwrap();
        let last_used = || async {
            store
                .api_key(&"u1".into(), &"k1".into())
                .await
                .unwrap()
                .unwrap()
                .last_used_at
        };
        let principal = auth.authenticate(&generated.key).await.unwrap().unwrap();
        assert_eq!(principal.user_id, "u1");
        let first = last_used().await.expect("the first use is recorded");

        auth.clock.advance(Duration::seconds(30));
        expire_caches(&auth);
        assert!(auth.authenticate(&generated.key).await.unwrap().is_some());
        assert_eq!(last_used().await, Some(first), "30 s later: not written");

        auth.clock.advance(Duration::seconds(31));
        expire_caches(&auth);
        assert!(auth.authenticate(&generated.key).await.unwrap().is_some());
        assert!(last_used().await.unwrap() > first, "61 s later: written");
    }

    #[tokio::test]
    async fn a_cached_access_token_stops_with_its_session_and_records_activity() {
        let (_dir, store, auth) = service().await;
        let issued = auth.start_session(&"u1".into(), None, None).await.unwrap();
        let token = issued.tokens.access_token;
        let seen = || async {
            store
                .session_auth(&issued.session_id)
                .await
                .unwrap()
                .unwrap()
                .session
                .last_seen_at
        };
        let started = seen().await;
        let principal = auth.authenticate(&token).await.unwrap().unwrap();
        assert_eq!(principal.require_session().unwrap(), &issued.session_id);
        assert_eq!(
            seen().await,
            started,
            "a session just started is not written"
        );

        // Used again after more than TOUCH_INTERVAL: its activity is written once.
        auth.clock.advance(Duration::seconds(61));
        expire_caches(&auth);
        assert!(auth.authenticate(&token).await.unwrap().is_some());
        let touched = seen().await;
        assert!(touched > started);
        assert!(auth.authenticate(&token).await.unwrap().is_some());
        assert_eq!(seen().await, touched);

        // Ending the session on this instance ends the cached token at once.
        assert!(auth
            .end_session(&"u1".into(), &issued.session_id, "logout")
            .await
            .unwrap());
        assert!(auth.authenticate(&token).await.unwrap().is_none());
    }

    /// Polls `authenticate` on `auth` until `bearer` is refused; panics after `within`.
    async fn refused_within(auth: &AuthService, bearer: &str, within: StdDuration) -> StdDuration {
        let start = Instant::now();
        while auth.authenticate(bearer).await.unwrap().is_some() {
            assert!(start.elapsed() < within, "still accepted after {within:?}");
            tokio::time::sleep(StdDuration::from_millis(5)).await;
        }
        start.elapsed()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_session_ended_or_a_key_revoked_on_one_instance_is_refused_by_the_other_at_once() {
        use crate::cluster::tests::{bus, scratch};
        let database = scratch().await;
        // Two instances of the service on one store, each with its own bus.
        let (_dir, store, a) = service().await;
        let b = AuthService::new(
            store.clone(),
            store.clone(),
            JwtKeys::new(&secrecy::SecretString::from("s".repeat(64)), "http://test"),
            PasswordHasher::new(1).unwrap(),
            Clock::default(),
        );
        let (a, b) = (
            a.with_bus(&bus(&database).await),
            b.with_bus(&bus(&database).await),
        );

        let issued = a.start_session(&"u1".into(), None, None).await.unwrap();
        let token = issued.tokens.access_token;
        assert!(b.authenticate(&token).await.unwrap().is_some());
        let read_by_b = Instant::now();
        assert!(a
            .end_session(&"u1".into(), &issued.session_id, "logout")
            .await
            .unwrap());
        let took = refused_within(&b, &token, StdDuration::from_secs(1)).await;
        assert!(
            read_by_b.elapsed() < AUTH_CACHE_TTL,
            "refused through the bus, not because B's cached session expired"
        );
        eprintln!("session ended on A refused by B after {took:?}");

        let generated = keys::generate();
        store
            .create_api_key(
                crate::store::ApiKeyRecord {
                    id: "k1".into(),
                    user_id: "u1".into(),
                    name: "CI".into(),
                    prefix: generated.prefix.clone(),
                    key_hash: generated.hash.clone(),
                    scopes: vec!["agents:read".into()],
                    agent_ids: None,
                    monthly_token_budget: None,
                    expires_at: None,
                    created_at: a.clock.now(),
                    last_used_at: None,
                    revoked_at: None,
                },
                100,
            )
            .await
            .unwrap();
        assert!(b.authenticate(&generated.key).await.unwrap().is_some());
        let read_by_b = Instant::now();
        store
            .revoke_api_key(&"u1".into(), &"k1".into(), a.clock.now())
            .await
            .unwrap();
        assert!(
            b.authenticate(&generated.key).await.unwrap().is_some(),
            "revoked in the store only: B's cache still holds the key"
        );
        a.forget_key(&"k1".into());
        let took = refused_within(&b, &generated.key, StdDuration::from_secs(1)).await;
        assert!(read_by_b.elapsed() < AUTH_CACHE_TTL);
        eprintln!("key revoked on A refused by B after {took:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_cached_session_and_key_is_dropped_when_the_bus_may_have_missed_one() {
        let (_dir, store, auth) = service().await;
        let issued = auth.start_session(&"u1".into(), None, None).await.unwrap();
        let token = issued.tokens.access_token;
        let generated = keys::generate();
        store
            .create_api_key(
                crate::store::ApiKeyRecord {
                    id: "k1".into(),
                    user_id: "u1".into(),
                    name: "CI".into(),
                    prefix: generated.prefix.clone(),
                    key_hash: generated.hash.clone(),
                    scopes: vec!["agents:read".into()],
                    agent_ids: None,
                    monthly_token_budget: None,
                    expires_at: None,
                    created_at: auth.clock.now(),
                    last_used_at: None,
                    revoked_at: None,
                },
                100,
            )
            .await
            .unwrap();
        assert!(auth.authenticate(&token).await.unwrap().is_some());
        assert!(auth.authenticate(&generated.key).await.unwrap().is_some());
        // Both ended in the store, with no message: the caches still hold them.
        let now = auth.clock.now();
        store
            .revoke_session(&"u1".into(), &issued.session_id, "logout", now)
            .await
            .unwrap();
        store
            .revoke_api_key(&"u1".into(), &"k1".into(), now)
            .await
            .unwrap();
        assert!(auth.authenticate(&token).await.unwrap().is_some());
        assert!(auth.authenticate(&generated.key).await.unwrap().is_some());
        auth.local_caches().forget_all();
        assert!(auth.authenticate(&token).await.unwrap().is_none());
        assert!(auth.authenticate(&generated.key).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_cached_access_token_still_expires() {
        let (_dir, _store, auth) = service().await;
        let issued = auth.start_session(&"u1".into(), None, None).await.unwrap();
        let token = issued.tokens.access_token;
        assert!(auth.authenticate(&token).await.unwrap().is_some());
        // Within the caches' lifetime the clock passes the token's expiry (15 min + leeway).
        auth.clock.advance(Duration::minutes(16));
        assert!(auth.authenticate(&token).await.unwrap().is_none());
    }

    #[test]
    fn the_clock_advances() {
        let clock = Clock::default();
        let before = clock.now();
        clock.advance(Duration::hours(25));
        assert!(clock.now() - before >= Duration::hours(25));
    }
}
