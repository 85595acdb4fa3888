//! The persistence boundary: one trait per aggregate module, [`Store`] all of them, and
//! [`connect`] picking the backend from the URL. Each rule a backend keeps is stated on its
//! trait method and proven by the conformance suite (`server/tests/store.rs`); how the
//! backends share statements: docs/architecture.md § Store.

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
pub use chat::{
    AnalyticsBucket, AnalyticsQuery, AskedQuestion, ChannelLink, ChatStore, Cursor, ExportCursor,
    ExportedMessage, FeedbackFilter, FeedbackRecord, FeedbackWrite, InboxFilter, InboxThread,
    MessageRecord, Rating, ThreadRecord, TurnRecord, UsageDay,
};
pub use documents::DocumentStore;
pub use error::{Conflict, StoreError, StoreResult};
pub use identity::IdentityStore;
pub use integrations::IntegrationStore;
pub use jobs::JobQueue;
pub use sessions::{SessionAuth, SessionRecord, SessionStore};
pub use tools::{ToolRecord, ToolStore};
pub use webhooks::WebhookStore;

pub use crate::config::{Backend, TurnCommit};

/// Everything the service persists. Tenant-scoped where a user id is given (another user's
/// row is "not found"); any method may be dropped part-way, leaving no transaction open.
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
    /// The uploads kept in this database (PostgreSQL); `None` when they are files (SQLite).
    fn database_uploads(&self) -> Option<Arc<dyn uploads::UploadStore>> {
        None
    }
}

/// Opens the store at `url` (`sqlite://path`, created, or `postgres://...`). Errors: an
/// unknown scheme or a connection failure.
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

/// Declares a backend's aggregate modules, implements [`Store`] for `$store` (on database
/// `$db`) through its `run_migrations`, its `$reader` pool and the further methods
/// `$extra`, and gives it the seam method `begin_for_account`.
macro_rules! backend {
    ($store:ident, $db:ty, $reader:ident $(, $($extra:tt)+)?) => {
        mod accounts;
        mod agents;
        mod api_keys;
        mod chat;
        mod documents;
        mod identity;
        mod integrations;
        mod jobs;
        mod rows;
        mod sessions;
        mod tools;
        mod webhooks;

        #[async_trait::async_trait]
        impl crate::store::Store for $store {
            async fn migrate(&self) -> crate::store::StoreResult<()> {
                self.run_migrations().await
            }

            async fn ping(&self) -> crate::store::StoreResult<()> {
                sqlx::query("SELECT 1").execute(&self.$reader).await?;
                Ok(())
            }

            $($($extra)+)?
        }

        impl $store {
            /// The pool the store reads through (for backend-specific tests and tools).
            pub fn pool(&self) -> &sqlx::Pool<$db> {
                &self.$reader
            }

            /// Begins a per-account check-then-act (count the account's rows, then write):
            /// the account's row is locked where transactions run side by side, or two could
            /// both count `limit - 1` and both insert.
            async fn begin_for_account(
                &self,
                user_id: &crate::ids::UserId,
            ) -> crate::store::StoreResult<sqlx::Transaction<'static, $db>> {
                let mut tx = self.begin_write().await?;
                let sql = format!("SELECT 1 FROM users WHERE id = $1{}", row_lock(" FOR UPDATE"));
                sqlx::query(&sql).bind(user_id).execute(&mut *tx).await?;
                Ok(tx)
            }
        }
    };
}
use backend;

/// Begins a transaction on `pool` (with `statement`, such as SQLite's `BEGIN IMMEDIATE`, in
/// place of the plain `BEGIN` when given) in a task of its own, so that a caller dropped
/// meanwhile never leaves a pooled connection inside a transaction: the task runs the begin
/// to its end, and a transaction nobody waits for any more is dropped and so rolled back.
/// Without it, PostgreSQL's begin can be cut between the `BEGIN` and its answer
/// (<https://github.com/transact-rs/sqlx/issues/4393>), and SQLite's custom begin between
/// the `BEGIN` and its check that a transaction is open, with no `Transaction` yet to roll
/// it back. Every transaction of the stores begins here.
pub(crate) async fn begin_in_task<DB: sqlx::Database>(
    pool: &sqlx::Pool<DB>,
    statement: Option<&'static str>,
) -> StoreResult<sqlx::Transaction<'static, DB>> {
    let pool = pool.clone();
    let begun = tokio::spawn(async move {
        match statement {
            Some(statement) => pool.begin_with(statement).await,
            None => pool.begin().await,
        }
    });
    match begun.await {
        Ok(begun) => Ok(begun?),
        Err(stopped) => Err(StoreError::Other(stopped.into())),
    }
}
