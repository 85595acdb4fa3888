//! The persistence boundary, one trait per aggregate, each in its own module with its
//! records ([`accounts`], [`sessions`], [`api_keys`], [`agents`], [`chat`], [`documents`],
//! [`jobs`], [`identity`], [`integrations`], [`webhooks`], [`tools`]); [`Store`] is all of
//! them, uploads are an [`uploads::UploadStore`], and [`connect`] picks the backend from
//! the URL scheme. Each rule a backend must keep is stated on its trait method and proven
//! by the `test-support` conformance suite (`server/tests/store.rs`). How the backends
//! share statements: docs/architecture.md § Store.

pub mod accounts;
pub mod agents;
pub mod api_keys;
pub mod chat;
pub mod copy;
pub mod documents;
pub mod error;
pub mod identity;
pub mod integrations;
pub mod jobs;
pub mod postgres;
mod rows;
pub mod sessions;
pub mod sqlite;
mod sqlx_error;
pub mod tools;
pub mod uploads;
pub mod webhooks;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};

pub use accounts::{AccountStore, NewUser, TokenPurpose, UserRecord};
pub use agents::{AgentPatch, AgentRecord, AgentStore};
pub use api_keys::{ApiKeyAuth, ApiKeyRecord, ApiKeyStore};
pub use chat::{ChannelLink, ChatStore, Cursor, MessageRecord, ThreadRecord, TurnRecord, UsageDay};
pub use documents::DocumentStore;
pub use error::{Conflict, StoreError, StoreResult};
pub use identity::IdentityStore;
pub use integrations::IntegrationStore;
pub use jobs::JobQueue;
pub use sessions::{SessionAuth, SessionRecord, SessionStore};
pub use tools::{ToolRecord, ToolStore};
pub use webhooks::WebhookStore;

pub use crate::config::{Backend, TurnCommit};

/// Everything the service persists: the supertrait of every part, so the composition root
/// holds one `Arc<dyn Store>` and hands each service only the part it uses. Tenant-scoped
/// where a user id is given (another user's row is "not found"). Any method may be dropped
/// part-way and leaves no transaction open.
#[async_trait]
pub trait Store:
    AccountStore
    + SessionStore
    + ApiKeyStore
    + AgentStore
    + ChatStore
    + DocumentStore
    + JobQueue
    + IdentityStore
    + IntegrationStore
    + WebhookStore
    + ToolStore
    + Send
    + Sync
    + 'static
{
    /// Applies this backend's embedded migrations.
    async fn migrate(&self) -> StoreResult<()>;
    /// Whether the database answers.
    async fn ping(&self) -> StoreResult<()>;
    /// The [`uploads::UploadStore`] kept in this database, for a shared backend
    /// (PostgreSQL); `None` for the embedded one, whose uploads are files beside it.
    fn database_uploads(&self) -> Option<Arc<dyn uploads::UploadStore>> {
        None
    }
}

/// Opens the store named by `url`: `sqlite://path` (file created) or `postgres://...` (pool
/// of [`postgres::DEFAULT_MAX_CONNECTIONS`]). Errors: an unknown scheme or a connection failure.
pub async fn connect(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    connect_with(
        url,
        postgres::DEFAULT_MAX_CONNECTIONS,
        TurnCommit::default(),
    )
    .await
}

/// [`connect`] with at most `max_connections` to PostgreSQL, whose chat turns commit as
/// `turn_commit` says; SQLite ignores both.
pub async fn connect_with(
    url: &str,
    max_connections: u32,
    turn_commit: TurnCommit,
) -> anyhow::Result<Arc<dyn Store>> {
    match Backend::of(url) {
        Some(Backend::Sqlite) => Ok(Arc::new(sqlite::SqliteStore::connect(url).await?)),
        Some(Backend::Postgres) => Ok(Arc::new(
            postgres::PgStore::connect_with(url, max_connections, turn_commit).await?,
        )),
        None => anyhow::bail!("DATABASE_URL must start with sqlite:// or postgres://"),
    }
}

/// Opens the store `config` names. Errors: an unknown scheme or a connection failure.
pub async fn open(config: &crate::config::StorageConfig) -> anyhow::Result<Arc<dyn Store>> {
    connect_with(
        &config.database_url,
        config.max_connections,
        config.turn_commit,
    )
    .await
}

/// Epoch milliseconds of `t` (the stored form of times).
pub fn to_millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// The time of stored epoch milliseconds.
pub fn from_millis(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}
