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
//! method concerned and proven by [`conformance`], which `server/tests/store.rs` runs on
//! every backend.

pub mod accounts;
pub mod agents;
pub mod api_keys;
pub mod chat;
#[doc(hidden)]
pub mod conformance;
pub mod copy;
pub mod documents;
pub mod error;
pub mod identity;
pub mod integrations;
pub mod jobs;
pub mod postgres;
mod rows;
#[doc(hidden)]
pub mod scratch;
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

/// Whether the commit of a chat turn ([`ChatStore::record_turns`]) waits until the database
/// server has flushed it to disk (`CHAT_SYNCHRONOUS_COMMIT`, README § Configuration). On
/// PostgreSQL this is the turn's `synchronous_commit`
/// (<https://www.postgresql.org/docs/current/wal-async-commit.html>); every other write
/// keeps the server's setting. SQLite ignores it: its writer commits every transaction the
/// same way (`synchronous = NORMAL` in WAL mode, which flushes at checkpoints, not at each
/// commit: <https://www.sqlite.org/pragma.html#pragma_synchronous>).
///
/// Either way a committed turn is visible to every reader at once, survives a crash of
/// AgentChat, and is whole (its thread, messages and counters commit together or not at
/// all). They differ in a crash of the database server or its machine: an asynchronous
/// commit can be lost if it came less than three times `wal_writer_delay` (600 ms by
/// default) before the crash, a synchronous one cannot. In exchange the reply does not
/// wait for a disk flush (0.3–4 ms on the machines of bench/HISTORY.md, § Chat turns commit
/// without waiting for the flush on PostgreSQL).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TurnCommit {
    /// `off`, the default: the commit returns once the turn is in the server's write-ahead
    /// log buffers; the server's WAL writer flushes it within `3 × wal_writer_delay`.
    #[default]
    Asynchronous,
    /// `on`: the turn commits as every other write does, by the server's own
    /// `synchronous_commit` (`on` unless its operator changed it: the commit returns once
    /// the turn is flushed, and waits for synchronous replicas as configured).
    Synchronous,
}

impl TurnCommit {
    /// Parses `CHAT_SYNCHRONOUS_COMMIT`: `on` or `off` (any case).
    ///
    /// Errors: any other value, named in the message.
    pub fn parse(raw: &str) -> anyhow::Result<Self> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "off" => Ok(Self::Asynchronous),
            "on" => Ok(Self::Synchronous),
            _ => anyhow::bail!("CHAT_SYNCHRONOUS_COMMIT must be on or off, not {raw:?}"),
        }
    }

    /// The value of PostgreSQL's `synchronous_commit` that the turns' connections set, or
    /// `None` to keep the server's.
    pub fn setting(self) -> Option<&'static str> {
        match self {
            Self::Asynchronous => Some("off"),
            Self::Synchronous => None,
        }
    }
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

/// The database backends, told apart by the scheme of `DATABASE_URL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `sqlite:`: the embedded database, one instance.
    Sqlite,
    /// `postgres:` or `postgresql:`: a database server any number of instances share.
    Postgres,
}

impl Backend {
    /// The backend `url` names, or `None` for another scheme.
    pub fn of(url: &str) -> Option<Self> {
        if url.starts_with("sqlite:") {
            Some(Self::Sqlite)
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Some(Self::Postgres)
        } else {
            None
        }
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

#[cfg(test)]
mod tests {
    use super::TurnCommit;

    #[test]
    fn chat_synchronous_commit_is_on_or_off_and_off_by_default() {
        assert_eq!(TurnCommit::default(), TurnCommit::Asynchronous);
        assert_eq!(TurnCommit::parse("off").unwrap(), TurnCommit::Asynchronous);
        assert_eq!(TurnCommit::parse(" ON ").unwrap(), TurnCommit::Synchronous);
        assert_eq!(TurnCommit::Asynchronous.setting(), Some("off"));
        assert_eq!(TurnCommit::Synchronous.setting(), None);
        for bad in ["", "yes", "local", "1"] {
            assert_eq!(
                TurnCommit::parse(bad).unwrap_err().to_string(),
                format!("CHAT_SYNCHRONOUS_COMMIT must be on or off, not {bad:?}")
            );
        }
    }
}
