//! The PostgreSQL backend, for several instances on one database: one `PgPool`
//! (`DATABASE_MAX_CONNECTIONS`), a second of [`TURN_CONNECTIONS`] for the chat-turn writer,
//! and the embedded `migrations/postgres`. Transactions run side by side at READ
//! COMMITTED, so the rules SQLite's single writer keeps for free are kept explicitly:
//! `lock_account` before per-account check-then-act, `FOR UPDATE SKIP LOCKED` claims,
//! chunk-id locks, and `begin` for every transaction (docs/architecture.md § Store).

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

/// The oldest PostgreSQL server the backend runs on: 14, the oldest release still
/// supported upstream (<https://www.postgresql.org/support/versioning/>).
pub const MIN_SERVER_VERSION: i32 = 140_000;

/// A pooled connection used less than this long ago is handed out without a ping; one
/// idle longer is pinged first, so connections the server closed meanwhile are replaced
/// rather than failing a request. HikariCP's rule and default (`aliveBypassWindowMs`).
pub const ALIVE_BYPASS_WINDOW: Duration = Duration::from_millis(500);

/// Connections of a [`PgStore`]'s second pool, which stores chat turns
/// ([`crate::store::ChatStore::record_turns`]); opened when first needed, on top of
/// `DATABASE_MAX_CONNECTIONS`.
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
    /// Connects to `url` with a pool of at most `max_connections`; chat turns commit as
    /// [`TurnCommit::default`] says. Errors: as [`PgStore::connect_with`].
    pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<Self> {
        Self::connect_with(url, max_connections, TurnCommit::default()).await
    }

    /// Connects to `url` with a pool of at most `max_connections`, plus a pool of
    /// [`TURN_CONNECTIONS`] for chat turns whose sessions set `synchronous_commit` to
    /// `turn_commit` (overriding `url`'s `options`).
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

/// Begins a transaction on a connection of `pool`, in a task of its own so that `BEGIN`
/// always runs to its answer: a caller dropped meanwhile leaves a begun transaction, rolled
/// back on drop, never a pooled connection stuck inside a transaction (sqlx's own `begin`
/// can, <https://github.com/transact-rs/sqlx/issues/4393>). Every transaction of this
/// backend begins here.
///
/// Errors: the pool's and the server's; [`StoreError::Other`] if the runtime is shutting
/// down.
pub(super) async fn begin(pool: &PgPool) -> StoreResult<sqlx::Transaction<'static, Postgres>> {
    let pool = pool.clone();
    match tokio::spawn(async move { pool.begin().await }).await {
        Ok(begun) => Ok(begun?),
        Err(stopped) => Err(StoreError::Other(stopped.into())),
    }
}

/// Locks `user_id`'s `users` row until `tx` ends (`FOR UPDATE`), so the per-account
/// check-then-act that follows runs for one account at a time; under READ COMMITTED two
/// transactions would otherwise both count `limit - 1` and both insert. A missing account
/// locks nothing.
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

/// Appended to a shared statement's read of a row its write references (an agent, an
/// integration): `FOR KEY SHARE` makes a delete of that row wait for the transaction.
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
