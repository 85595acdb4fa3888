//! The PostgreSQL backend, for running several instances on one database: one `PgPool`
//! (`DATABASE_MAX_CONNECTIONS` connections), migrations from `migrations/postgres`
//! embedded in the binary (sqlx's migrator takes an advisory lock, so instances starting
//! at once apply them one after the other).
//!
//! PostgreSQL runs transactions side by side at READ COMMITTED, so the rules SQLite's
//! single writer keeps for free are kept here explicitly (each stated where it is kept):
//! per-account limits lock the account's `users` row first; claims of jobs and deliveries
//! take rows with `FOR UPDATE SKIP LOCKED`; a chunk writer locks its agent's
//! `chunk_generations` row before it draws chunk ids, so that an agent's ids become
//! visible in increasing order.

use std::{str::FromStr, sync::Arc, time::Duration};

use async_trait::async_trait;
use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    PgPool,
};

use crate::store::{
    sqlx_error::is_unique_violation, uploads::UploadStore, Store, StoreError, StoreResult,
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
mod uploads;
mod webhooks;

/// Connections of a [`PgStore`]'s pool when `DATABASE_MAX_CONNECTIONS` is not set.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 16;

/// The oldest PostgreSQL server the backend runs on (the statement triggers with
/// transition tables and the `FOR UPDATE SKIP LOCKED` claims it uses are older, but 14 is
/// the oldest release still supported upstream: <https://www.postgresql.org/support/versioning/>).
pub const MIN_SERVER_VERSION: i32 = 140_000;

/// [`Store`] on PostgreSQL.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects to the database at `url` with a pool of at most `max_connections`.
    ///
    /// Errors: the URL does not parse, the server cannot be reached, or it is older than
    /// [`MIN_SERVER_VERSION`].
    pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<Self> {
        let options = PgConnectOptions::from_str(url)?;
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
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
        Ok(Self { pool })
    }

    /// The connection pool (for backend-specific tests and tools).
    pub fn pool(&self) -> &PgPool {
        &self.pool
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
