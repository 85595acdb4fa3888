//! The persistence boundary, one trait per aggregate, each in its own module with its
//! records: [`accounts`], [`sessions`], [`api_keys`], [`agents`], [`chat`], [`documents`],
//! [`jobs`], [`identity`], [`integrations`], [`webhooks`] and [`tools`]. Services hold only the part
//! they use; [`Store`] is all of them, for the composition root. Uploaded files are kept
//! by an [`uploads::UploadStore`]: a folder beside the embedded database, or the server
//! database's own table. Each database backend implements every part in its own module
//! with its own migrations (`migrations/<backend>/`), and [`connect`] picks the backend
//! from the URL scheme. A statement that is the same on both backends is written once,
//! beside its trait, in that part's `*_store!` macro (SQLite reads `$n` placeholders as
//! PostgreSQL does); each backend's file invokes it with its store type, its database and
//! its writer and reader pools, and keeps only what differs there, each with its reason.
//! The macros are written against a small seam of each store: `begin_write`,
//! `begin_for_account` (how a per-account check-then-act begins) and `KEY_SHARE`. The
//! store holds no HTTP types; its records and methods name rows by the typed ids of
//! [`crate::ids`], stored as the same text (or number, for chunks) as before.
//!
//! Every rule a backend must keep (atomic limits, one claimer per job and per delivery,
//! chunk generations and ids, the counters triggers keep on SQLite) is stated on the trait
//! method concerned and proven by the conformance suite of the `test-support` crate, which `server/tests/store.rs` runs on
//! every backend.

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
/// holds one `Arc<dyn Store>` and hands each service only the part it uses
/// (`Arc<dyn Store>` coerces to `Arc<dyn AgentStore>` and the others). One implementation
/// per database backend; every method is tenant-scoped where a user id is given (another
/// user's row is "not found").
///
/// Every method may be dropped part-way (a client that hung up drops its request):
/// whatever it had begun is then rolled back or finished, never left open, so the writes
/// that follow are committed and wait on none of its locks
/// (`conformance::writes_dropped_while_they_begin_leave_no_transaction_open`).
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
    /// The [`uploads::UploadStore`] kept in this database, for a backend that several
    /// instances share (PostgreSQL: the table `document_uploads`); `None` for the embedded
    /// backend, whose uploads are files beside it ([`uploads::UploadDir`]). Picked by
    /// [`uploads::for_backend`].
    fn database_uploads(&self) -> Option<Arc<dyn uploads::UploadStore>> {
        None
    }
}

/// Opens the store named by `url`: `sqlite://path` (embedded; the file is created) or
/// `postgres://...` (with a pool of [`postgres::DEFAULT_MAX_CONNECTIONS`]).
///
/// Errors: an unknown scheme or a connection failure.
pub async fn connect(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    connect_with(
        url,
        postgres::DEFAULT_MAX_CONNECTIONS,
        TurnCommit::default(),
    )
    .await
}

/// [`connect`] with at most `max_connections` to a PostgreSQL server
/// (`DATABASE_MAX_CONNECTIONS`), whose chat turns commit as `turn_commit` says
/// (`CHAT_SYNCHRONOUS_COMMIT`). SQLite ignores both: its connections are fixed, and every
/// commit of its writer is the same (see [`sqlite::SqliteStore`]).
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

/// Opens the store `config` names: its `database_url`, with its `max_connections` and
/// `turn_commit` for PostgreSQL.
///
/// Errors: an unknown scheme or a connection failure.
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
