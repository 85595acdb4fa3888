//! The persistence boundary. Handlers and services talk to [`Store`]; each database backend
//! implements it in its own module with its own migrations (`migrations/<backend>/`), and
//! [`connect`] picks the backend from the URL scheme. The store holds no HTTP types.

pub mod identity;
pub mod integrations;
pub mod knowledge;
pub mod sqlite;
pub mod webhooks;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, TimeZone, Utc};

use crate::domain::{Email, Plan};

/// Errors of the persistence layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule was violated; the text names what is taken.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The row does not exist (or belongs to someone else).
    #[error("not found")]
    NotFound,
    /// The database failed.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// Anything else (e.g. a stored value that does not parse).
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// Result alias of the store.
pub type StoreResult<T> = Result<T, StoreError>;

/// A user account.
#[derive(Debug, Clone)]
pub struct UserRecord {
    pub id: String,
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
    pub id: String,
    pub email: Email,
    pub name: String,
    pub password_hash: Option<String>,
    pub company: Option<String>,
    pub country: Option<String>,
    pub phone: Option<String>,
    pub email_verified: bool,
    pub now: DateTime<Utc>,
}

/// Purpose of a single-use email token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenPurpose {
    /// Email verification link, valid 24 hours.
    VerifyEmail,
    /// Password reset link, valid 1 hour.
    ResetPassword,
}

impl TokenPurpose {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::VerifyEmail => "verify_email",
            Self::ResetPassword => "reset_password",
        }
    }
}

/// A sign-in session as stored.
#[derive(Debug, Clone)]
pub struct SessionRecord {
    pub id: String,
    pub user_id: String,
    pub refresh_jti: String,
    pub user_agent: Option<String>,
    pub ip: Option<String>,
    pub created_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A session joined with what authorisation needs of its user.
#[derive(Debug, Clone)]
pub struct SessionAuth {
    pub session: SessionRecord,
    pub plan: Plan,
}

/// An API key as stored (never the key itself).
#[derive(Debug, Clone)]
pub struct ApiKeyRecord {
    pub id: String,
    pub user_id: String,
    pub name: String,
    pub prefix: String,
    pub key_hash: String,
    pub scopes: Vec<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// An API key joined with its owner's plan.
#[derive(Debug, Clone)]
pub struct ApiKeyAuth {
    pub key: ApiKeyRecord,
    pub plan: Plan,
}

/// An agent as stored.
#[derive(Debug, Clone)]
pub struct AgentRecord {
    pub id: String,
    pub user_id: String,
    pub name: String,
    pub description: String,
    pub system_prompt: String,
    /// Empty: the server's default model.
    pub model: String,
    /// `active` for every agent today.
    pub status: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Whether the agent had a knowledge document (in any status) when it was read; not a
    /// stored column. Chat skips retrieval, and its query, when it is false; a new agent
    /// has none. Adding a document forgets the agent from the service's agent cache, so
    /// the next chat reads it again; a copy cached by another instance, or by a chat that
    /// read the agent while the document was being added, is replaced within
    /// `AGENT_CACHE_TTL` (2 s), while the new document is still being indexed.
    pub has_knowledge: bool,
}

/// Fields of an agent update; `None` leaves the field unchanged.
#[derive(Debug, Clone, Default)]
pub struct AgentPatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub system_prompt: Option<String>,
    pub model: Option<String>,
}

/// A conversation thread of one user with one agent.
#[derive(Debug, Clone)]
pub struct ThreadRecord {
    pub id: String,
    pub agent_id: String,
    pub user_id: String,
    pub title: String,
    pub message_count: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// One message of a thread.
#[derive(Debug, Clone)]
pub struct MessageRecord {
    pub id: String,
    pub thread_id: String,
    /// `user` or `assistant`.
    pub role: String,
    pub content: String,
    pub model: Option<String>,
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
    /// JSON array of the reply's sources.
    pub sources: Option<String>,
    pub latency_ms: Option<i64>,
    /// `complete`, `failed` or `cancelled`.
    pub status: String,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// One account's use of chat on one UTC day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageDay {
    pub day: NaiveDate,
    /// Chat replies (each chat request makes one, whatever its outcome).
    pub chats: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
}

/// A keyset pagination position: the sort time and id of the last row returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub at: i64,
    pub id: String,
}

/// Everything the service persists. One implementation per database backend; every
/// method is tenant-scoped where a user id is given (another user's row is "not found").
#[async_trait]
pub trait Store:
    knowledge::KnowledgeStore
    + identity::IdentityStore
    + integrations::IntegrationStore
    + webhooks::WebhookStore
    + Send
    + Sync
    + 'static
{
    /// Applies this backend's embedded migrations.
    async fn migrate(&self) -> StoreResult<()>;
    /// Whether the database answers.
    async fn ping(&self) -> StoreResult<()>;

    /// Creates a user; `Conflict` when the email is taken.
    async fn create_user(&self, user: NewUser) -> StoreResult<UserRecord>;
    async fn user_by_id(&self, id: &str) -> StoreResult<Option<UserRecord>>;
    async fn user_by_email(&self, email: &Email) -> StoreResult<Option<UserRecord>>;
    /// Marks the email verified (idempotent).
    async fn mark_email_verified(&self, user_id: &str, now: DateTime<Utc>) -> StoreResult<()>;
    /// Sets the plan of the account with `email`; `NotFound` when there is none.
    async fn set_plan(&self, email: &Email, plan: Plan, now: DateTime<Utc>) -> StoreResult<()>;
    async fn set_password_hash(
        &self,
        user_id: &str,
        hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;

    /// Stores a single-use token by its hash.
    async fn create_email_token(
        &self,
        user_id: &str,
        purpose: TokenPurpose,
        token_hash: &str,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Consumes an unused, unexpired token and, in the same atomic step, voids every other
    /// unused token of its user and purpose (OWASP Forgot Password Cheat Sheet: once a
    /// reset succeeds, the account's other outstanding links stop working); returns its
    /// user id, or `None` (unknown, used, voided or expired, all alike). Of two tokens of
    /// one account consumed at once, at most one succeeds.
    async fn consume_email_token(
        &self,
        purpose: TokenPurpose,
        token_hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<String>>;

    /// Creates a session, then ends the oldest live ones beyond `max_live` (a session is
    /// live when not revoked and seen at or after `idle_cutoff`). Returns the ids ended.
    async fn create_session(
        &self,
        session: SessionRecord,
        max_live: usize,
        idle_cutoff: DateTime<Utc>,
    ) -> StoreResult<Vec<String>>;
    async fn session_auth(&self, session_id: &str) -> StoreResult<Option<SessionAuth>>;
    /// Replaces the refresh jti if it still is `old_jti` and the session is not revoked;
    /// false when it was not (a replay or a race lost).
    async fn rotate_refresh(
        &self,
        session_id: &str,
        old_jti: &str,
        new_jti: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    async fn touch_session(&self, session_id: &str, now: DateTime<Utc>) -> StoreResult<()>;
    /// Revokes one session of `user_id`; false when there was no live one.
    async fn revoke_session(
        &self,
        user_id: &str,
        session_id: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Revokes every session of the user; returns their ids.
    async fn revoke_all_sessions(
        &self,
        user_id: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<String>>;
    /// Live sessions, newest first.
    async fn live_sessions(
        &self,
        user_id: &str,
        idle_cutoff: DateTime<Utc>,
    ) -> StoreResult<Vec<SessionRecord>>;

    /// Creates the key unless its owner already holds `cap` live (not revoked) keys; false
    /// at the cap, and nothing is written.
    ///
    /// The count and the insert are one atomic step: however many creations run at once,
    /// the owner never holds more than `cap` live keys. SQLite: one conditional
    /// `INSERT … SELECT … WHERE (SELECT count(*) …) < cap` (SQLite runs write statements
    /// one at a time, each on the latest data). A PostgreSQL backend keeps the guarantee by
    /// locking the owner's `users` row (`SELECT … FOR UPDATE`) in the transaction before
    /// that same conditional insert: under read committed, two inserts not serialised by
    /// the lock could each count `cap - 1`.
    async fn create_api_key(&self, key: ApiKeyRecord, cap: usize) -> StoreResult<bool>;
    /// Replaces the user's live key `old_id` with `new` atomically: `old_id` is revoked at
    /// `now` and `new` inserted, or nothing is written and the answer is false (no such
    /// live key, e.g. a concurrent rotation revoked it first). The number of live keys
    /// stays the same, so no cap applies.
    async fn rotate_api_key(
        &self,
        user_id: &str,
        old_id: &str,
        new: ApiKeyRecord,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Keys of the user that are not revoked, newest first.
    async fn list_api_keys(&self, user_id: &str) -> StoreResult<Vec<ApiKeyRecord>>;
    async fn api_key(&self, user_id: &str, id: &str) -> StoreResult<Option<ApiKeyRecord>>;
    async fn api_key_by_hash(&self, key_hash: &str) -> StoreResult<Option<ApiKeyAuth>>;
    /// Revokes a key of the user; false when none was live.
    async fn revoke_api_key(
        &self,
        user_id: &str,
        id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    async fn touch_api_key(&self, id: &str, now: DateTime<Utc>) -> StoreResult<()>;

    /// Creates the agent unless its owner already has `limit` agents (checked atomically);
    /// false at the limit.
    async fn create_agent(&self, agent: &AgentRecord, limit: u32) -> StoreResult<bool>;
    /// The user's agents, oldest first.
    async fn list_agents(&self, user_id: &str) -> StoreResult<Vec<AgentRecord>>;
    async fn agent(&self, user_id: &str, id: &str) -> StoreResult<Option<AgentRecord>>;
    /// Applies `patch`; `None` when the user has no such agent.
    async fn update_agent(
        &self,
        user_id: &str,
        id: &str,
        patch: &AgentPatch,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<AgentRecord>>;
    /// Deletes the agent with its threads and messages; false when there was none.
    async fn delete_agent(&self, user_id: &str, id: &str) -> StoreResult<bool>;

    /// Creates the thread with its first message (the user's, whose `thread_id` is ignored:
    /// it goes to `thread`) when its agent exists and belongs to its user; false otherwise
    /// (the agent was deleted meanwhile) and nothing is written, so a caller holding an
    /// agent read earlier never gets a foreign-key error. One call, so that starting a
    /// conversation costs the writer one round trip, not two.
    async fn create_thread(
        &self,
        thread: &ThreadRecord,
        first: &MessageRecord,
    ) -> StoreResult<bool>;
    async fn thread(
        &self,
        user_id: &str,
        agent_id: &str,
        thread_id: &str,
    ) -> StoreResult<Option<ThreadRecord>>;
    /// Threads by most recent activity, after `cursor`.
    async fn list_threads(
        &self,
        user_id: &str,
        agent_id: &str,
        limit: u32,
        cursor: Option<&Cursor>,
    ) -> StoreResult<Vec<ThreadRecord>>;
    async fn delete_thread(
        &self,
        user_id: &str,
        agent_id: &str,
        thread_id: &str,
    ) -> StoreResult<bool>;
    /// Appends a message and bumps the thread's count and activity time; an assistant
    /// message (one per chat request) also counts into its owner's [`UsageDay`] of
    /// `created_at` (UTC), which outlives the thread.
    async fn append_message(&self, message: &MessageRecord) -> StoreResult<()>;
    /// The user's usage on the days from `from` (UTC) on, oldest first; days without any
    /// use are absent.
    async fn usage(&self, user_id: &str, from: NaiveDate) -> StoreResult<Vec<UsageDay>>;
    /// Messages oldest first, after `cursor`.
    async fn list_messages(
        &self,
        thread_id: &str,
        limit: u32,
        cursor: Option<&Cursor>,
    ) -> StoreResult<Vec<MessageRecord>>;
    /// The newest `limit` messages, returned oldest first (prompt history).
    async fn recent_messages(&self, thread_id: &str, limit: u32)
        -> StoreResult<Vec<MessageRecord>>;
}

/// Opens the store named by `url`: `sqlite://path` (embedded; the file is created) or
/// `postgres://...`.
///
/// Errors: an unknown scheme, a backend not built in, or a connection failure.
pub async fn connect(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    if url.starts_with("sqlite:") {
        Ok(Arc::new(sqlite::SqliteStore::connect(url).await?))
    } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        anyhow::bail!(
            "the PostgreSQL backend is not available in this build; use a sqlite:// DATABASE_URL"
        )
    } else {
        anyhow::bail!("DATABASE_URL must start with sqlite:// or postgres://")
    }
}

/// Epoch milliseconds of `t` (the stored form of times).
pub fn to_millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// The time of stored epoch milliseconds.
pub fn from_millis(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}
