//! The PostgreSQL backend, for several instances on one database. Transactions run side
//! by side at READ COMMITTED, so the rules SQLite's single writer keeps for free are kept
//! by row locks (docs/architecture.md § Store).

use std::{str::FromStr, sync::Arc, time::Duration};

use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    PgPool, Postgres,
};

use crate::store::{
    sqlx_error::is_unique_violation, uploads::UploadStore, StoreError, StoreResult, TurnCommit,
};

super::backend!(
    PgStore,
    Postgres,
    pool,
    fn database_uploads(&self) -> Option<Arc<dyn UploadStore>> {
        Some(Arc::new(self.clone()))
    }
);
mod uploads;

/// Connections of a [`PgStore`]'s pool when `DATABASE_MAX_CONNECTIONS` is not set.
pub const DEFAULT_MAX_CONNECTIONS: u32 = crate::config::DEFAULT_DATABASE_CONNECTIONS;

/// The oldest PostgreSQL server the backend runs on: 14, the oldest release still
/// supported upstream (<https://www.postgresql.org/support/versioning/>).
pub const MIN_SERVER_VERSION: i32 = 140_000;

/// A pooled connection idle this long is pinged before it is handed out (HikariCP's
/// `aliveBypassWindowMs`), so one the server closed is replaced, not failing a request.
pub const ALIVE_BYPASS_WINDOW: Duration = Duration::from_millis(500);

/// Connections of a [`PgStore`]'s pool for chat turns, on top of `DATABASE_MAX_CONNECTIONS`.
pub const TURN_CONNECTIONS: u32 = 2;

/// [`crate::store::Store`] on PostgreSQL.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// Chat turns' connections, committing as the store's [`TurnCommit`] says.
    turns: PgPool,
}

impl PgStore {
    /// [`PgStore::connect_with`] the default [`TurnCommit`].
    pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<Self> {
        Self::connect_with(url, max_connections, TurnCommit::default()).await
    }

    /// Connects to `url` with a pool of at most `max_connections`, plus [`TURN_CONNECTIONS`]
    /// for chat turns with `synchronous_commit` set to `turn_commit`. Errors: a bad URL, an
    /// unreachable server, or one older than [`MIN_SERVER_VERSION`].
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

/// Begins a transaction on `pool` ([`crate::store::begin_in_task`]).
pub(super) async fn begin(pool: &PgPool) -> StoreResult<sqlx::Transaction<'static, Postgres>> {
    crate::store::begin_in_task(pool, None).await
}

/// A shared statement's row lock `clause`, kept: transactions run side by side here.
fn row_lock(clause: &'static str) -> &'static str {
    clause
}

/// The rows (column `value`) of the JSON array text bound as `param`.
fn json_rows(param: &str) -> String {
    format!("json_array_elements({param}::json)")
}

/// "Is in the list bound as `param`" for an array.
fn in_list(param: &str) -> String {
    format!("= ANY({param})")
}

/// `items` bound as an array for [`in_list`].
fn list<T>(items: &[T]) -> &[T] {
    items
}

/// How the shared statements' (`*_store!`) transactions begin.
impl PgStore {
    async fn begin_write(&self) -> StoreResult<sqlx::Transaction<'static, Postgres>> {
        begin(&self.pool).await
    }
}

impl PgStore {
    /// [`crate::store::Store::migrate`]: sqlx's migrator, which locks the database while it runs.
    async fn run_migrations(&self) -> StoreResult<()> {
        sqlx::migrate!("../migrations/postgres")
            .run(&self.pool)
            .await
            .map_err(|e| StoreError::Other(e.into()))
    }
}
