//! The PostgreSQL backend, for running several instances on one database: one `PgPool`
//! (`DATABASE_MAX_CONNECTIONS` connections) and a second one of [`TURN_CONNECTIONS`] for
//! the chat-turn writer (committing as [`TurnCommit`] says), migrations from `migrations/postgres`
//! embedded in the binary (sqlx's migrator takes an advisory lock, so instances starting
//! at once apply them one after the other).
//!
//! PostgreSQL runs transactions side by side at READ COMMITTED, so the rules SQLite's
//! single writer keeps for free are kept here explicitly (each stated where it is kept):
//!
//! - **Per-account check-then-act** ([`lock_account`]): a transaction that first locks
//!   the account's `users` row, then counts and writes. Under READ COMMITTED a single
//!   `INSERT … SELECT … WHERE (SELECT count(*) …) < $n` is not enough: two such inserts
//!   each count `n - 1` and both write. Kept by `create_agent` (`agents.rs`),
//!   `create_session` (`sessions.rs`), `create_api_key` (`api_keys.rs`),
//!   `unlink_identity` (`identity.rs`), `create_integration` (`integrations.rs`) and
//!   `create_webhook` (`webhooks.rs`).
//! - **Claims** of jobs and deliveries take rows with `FOR UPDATE SKIP LOCKED` in the
//!   subquery and repeat its predicate in the outer `WHERE` (`jobs.rs`,
//!   `webhooks.rs::claim_deliveries`); the end of a claimed item is written only under
//!   the claim that holds it (`complete_job`, `record_attempt`: `attempts = $claimed`).
//! - **Chunk ids**: a chunk writer locks its agent's `chunk_generations` row before it
//!   draws chunk ids, so that an agent's ids become visible in increasing order
//!   (`documents.rs`).
//! - **A request dropped part-way** (a client that hung up, a shutdown cancelling the
//!   chat-turn writer) leaves no pooled connection inside a transaction: every
//!   transaction begins through [`begin`], the chat turns' batches too (`chat.rs`).
//! - **Single statements** that are already atomic on a server with row locks (a
//!   concurrent writer waits for the row and re-checks the `WHERE` on its new version):
//!   `rotate_refresh`, `consume_email_token`, `take_oauth_flow`, `take_exchange_code`,
//!   `first_channel_event`, and the unique indexes behind `create_user` and
//!   `link_identity`.

use std::{str::FromStr, sync::Arc, time::Duration};

use async_trait::async_trait;
use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    PgPool, Postgres,
};

use crate::store::{
    sqlx_error::is_unique_violation, uploads::UploadStore, Store, StoreError, StoreResult,
    TurnCommit,
};

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
mod uploads;
mod webhooks;

/// Connections of a [`PgStore`]'s pool when `DATABASE_MAX_CONNECTIONS` is not set.
pub const DEFAULT_MAX_CONNECTIONS: u32 = crate::config::DEFAULT_DATABASE_CONNECTIONS;

/// The oldest PostgreSQL server the backend runs on (the statement triggers with
/// transition tables and the `FOR UPDATE SKIP LOCKED` claims it uses are older, but 14 is
/// the oldest release still supported upstream: <https://www.postgresql.org/support/versioning/>).
pub const MIN_SERVER_VERSION: i32 = 140_000;

/// A pooled connection used less than this long ago is handed out without a liveness
/// check (a ping, one round trip to the server); one idle for longer is pinged first, so
/// that connections the server closed meanwhile (a restart, an idle timeout) are replaced
/// rather than failing a request. The rule and its default are HikariCP's
/// (`com.zaxxer.hikari.aliveBypassWindowMs`, 500 ms, in `HikariPool.getConnection`:
/// <https://github.com/brettwooldridge/HikariCP/blob/dev/src/main/java/com/zaxxer/hikari/pool/HikariPool.java>).
/// A connection that breaks in use is closed by sqlx when it is returned (it pings every
/// returned connection).
pub const ALIVE_BYPASS_WINDOW: Duration = Duration::from_millis(500);

/// Connections of a [`PgStore`]'s second pool, the one that stores chat turns
/// ([`crate::store::ChatStore::record_turns`]): the chat-turn writer stores one batch at a
/// time, and a second connection serves a caller beside it (tests, tools). Opened when
/// first needed, on top of `DATABASE_MAX_CONNECTIONS`.
pub const TURN_CONNECTIONS: u32 = 2;

/// [`Store`] on PostgreSQL.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// [`TURN_CONNECTIONS`] connections whose `synchronous_commit` is the [`TurnCommit`]
    /// the store was opened with; only chat turns are written through them.
    turns: PgPool,
}

impl PgStore {
    /// Connects to the database at `url` with a pool of at most `max_connections`; chat
    /// turns commit as [`TurnCommit::default`] says.
    ///
    /// Errors: as [`PgStore::connect_with`].
    pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<Self> {
        Self::connect_with(url, max_connections, TurnCommit::default()).await
    }

    /// Connects to the database at `url` with a pool of at most `max_connections`, and a
    /// second one of [`TURN_CONNECTIONS`] (opened when first used), for the chat turns
    /// alone, whose sessions set `synchronous_commit` as `turn_commit` says
    /// (<https://www.postgresql.org/docs/current/runtime-config-wal.html#GUC-SYNCHRONOUS-COMMIT>;
    /// after any `options` of `url`, so it wins over them).
    ///
    /// Errors: the URL does not parse, the server cannot be reached, or it is older than
    /// [`MIN_SERVER_VERSION`].
    pub async fn connect_with(
        url: &str,
        max_connections: u32,
        turn_commit: TurnCommit,
    ) -> anyhow::Result<Self> {
        let options = PgConnectOptions::from_str(url)?;
        let turn_options = match turn_commit.setting() {
            Some(setting) => options.clone().options([("synchronous_commit", setting)]),
            None => options.clone(),
        };
        let turns = pool_options(TURN_CONNECTIONS).connect_lazy_with(turn_options);
        let pool = pool_options(max_connections).connect_with(options).await?;
        let version: String = sqlx::query_scalar("SHOW server_version_num")
            .fetch_one(&pool)
            .await?;
        let version: i32 = version.trim().parse().unwrap_or(0);
        if version < MIN_SERVER_VERSION {
            anyhow::bail!(
                "PostgreSQL {}.{} is too old; AgentChat needs 14 or later",
                version / 10_000,
                version % 10_000 / 100
            );
        }
        Ok(Self { pool, turns })
    }

    /// The connection pool (for backend-specific tests and tools).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The pool that chat turns are written through ([`PgStore::connect_with`]).
    pub fn turn_pool(&self) -> &PgPool {
        &self.turns
    }
}

/// The options of a [`PgStore`]'s pools, of at most `max_connections` (at least one).
fn pool_options(max_connections: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections.max(1))
        .acquire_timeout(Duration::from_secs(10))
        // sqlx's own check pings every connection it hands out: one more round trip
        // to the server before every query. Only connections idle for
        // [`ALIVE_BYPASS_WINDOW`] or longer are pinged; one that fails the ping is
        // closed and another one handed out.
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= ALIVE_BYPASS_WINDOW {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
}

/// Begins a transaction on a connection of `pool`, in a task of its own so that the
/// `BEGIN` always runs to its answer: a caller dropped meanwhile (a client that hung up,
/// a timeout, a shutdown) leaves behind a begun transaction, which is rolled back when it
/// is dropped, and never a connection inside a transaction nobody knows of.
///
/// sqlx 0.8.6's own `begin` cannot be dropped safely while the server's answer to `BEGIN`
/// is awaited: it then queues no `ROLLBACK`, and returns the connection to the pool still
/// inside the transaction (<https://github.com/transact-rs/sqlx/issues/4393>). Every later
/// statement on that connection would run inside a transaction that never commits, holding
/// its row locks. Every transaction of this backend begins here. The extra task costs a
/// wake-up on the caller's own thread, not a round trip: on the chat turns' batches, the
/// only transactions of a streamed conversation, CPU per stream at 500 streams was the
/// same with it as with a connection closed when abandoned, the way those batches used
/// instead (bench/HISTORY.md, § A dropped BEGIN with a runtime per core).
///
/// Errors: the pool's and the server's; [`StoreError::Other`] if the task was cancelled
/// (the runtime is shutting down).
pub(super) async fn begin(pool: &PgPool) -> StoreResult<sqlx::Transaction<'static, Postgres>> {
    let pool = pool.clone();
    match tokio::spawn(async move { pool.begin().await }).await {
        Ok(begun) => Ok(begun?),
        Err(stopped) => Err(StoreError::Other(stopped.into())),
    }
}

/// Locks the `users` row of `user_id` until the end of the transaction `tx` runs in
/// (`SELECT 1 FROM users WHERE id = $1 FOR UPDATE`), so that the per-account
/// check-then-act that follows (count the account's rows, then insert or delete) runs for
/// one account at a time: another transaction calling this for the same account waits
/// here until `tx` ends, then counts what `tx` wrote. A missing account locks nothing
/// (the insert that follows then fails its foreign key, or finds nothing to change).
///
/// PostgreSQL's default isolation is READ COMMITTED
/// (<https://www.postgresql.org/docs/current/transaction-iso.html#XACT-READ-COMMITTED>):
/// each statement sees what was committed when it started, so without this lock two
/// transactions both count `limit - 1` and both insert.
pub(super) async fn lock_account(
    tx: &mut sqlx::PgConnection,
    user_id: &crate::ids::UserId,
) -> StoreResult<()> {
    sqlx::query("SELECT 1 FROM users WHERE id = $1 FOR UPDATE")
        .bind(user_id)
        .execute(tx)
        .await?;
    Ok(())
}

/// The clause a shared statement appends to its read of a row that the write it guards
/// references (an agent, an integration), so that the row is not deleted meanwhile.
/// `FOR KEY SHARE` (<https://www.postgresql.org/docs/current/explicit-locking.html#LOCKING-ROWS>):
/// a delete of the row waits for the transaction.
const KEY_SHARE: &str = " FOR KEY SHARE";

/// The seam the statements shared with the other backend are written against (the
/// `*_store!` macros of [`crate::store`]): how a write transaction begins.
impl PgStore {
    /// Begins a transaction on the pool, through [`begin`].
    async fn begin_write(&self) -> StoreResult<sqlx::Transaction<'static, Postgres>> {
        begin(&self.pool).await
    }

    /// Begins the transaction of a per-account check-then-act (count the account's rows,
    /// then write) for `user_id`, holding the account's row lock ([`lock_account`]).
    async fn begin_for_account(
        &self,
        user_id: &crate::ids::UserId,
    ) -> StoreResult<sqlx::Transaction<'static, Postgres>> {
        let mut tx = begin(&self.pool).await?;
        lock_account(&mut tx, user_id).await?;
        Ok(tx)
    }
}

#[async_trait]
impl Store for PgStore {
    async fn migrate(&self) -> StoreResult<()> {
        sqlx::migrate!("../migrations/postgres")
            .run(&self.pool)
            .await
            .map_err(|e| StoreError::Other(e.into()))
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    fn database_uploads(&self) -> Option<Arc<dyn UploadStore>> {
        Some(Arc::new(self.clone()))
    }
}
