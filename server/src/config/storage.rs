//! The storage part: the database and the data folder.

use std::path::PathBuf;

use super::{bounded, var};
use crate::store::{postgres::DEFAULT_MAX_CONNECTIONS, Backend, TurnCommit};

/// Most connections `DATABASE_MAX_CONNECTIONS` may ask for.
pub const MAX_DATABASE_CONNECTIONS: u32 = 10_000;

/// Where the service keeps its state: the database, and the folder of its files (the
/// parts that keep files there, such as [`super::MailConfig`] and
/// [`super::KnowledgeConfig`], hold their own folder inside it).
#[derive(Clone)]
pub struct StorageConfig {
    /// `DATABASE_URL`, default `sqlite://{DATA_DIR}/agentchat.db`; `postgres://...` for a
    /// database several instances share.
    pub database_url: String,
    /// `DATABASE_MAX_CONNECTIONS`: connections of this instance's pool to a PostgreSQL
    /// database, default [`DEFAULT_MAX_CONNECTIONS`] (16), 1 to
    /// [`MAX_DATABASE_CONNECTIONS`]. Every instance holds up to this many, so their sum
    /// must stay under the server's `max_connections`. SQLite's connections are fixed
    /// (one writer, a few readers) and ignore it.
    pub max_connections: u32,
    /// `CHAT_SYNCHRONOUS_COMMIT` (`on` or `off`, default `off`): whether a chat turn's
    /// commit waits for the database server's flush to disk ([`TurnCommit`]; PostgreSQL
    /// only).
    pub turn_commit: TurnCommit,
    /// `DATA_DIR`, default `data`: mail outbox, uploads, generated secrets.
    pub data_dir: PathBuf,
}

impl StorageConfig {
    /// The defaults for `data_dir`, with no environment read.
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            database_url: format!("sqlite://{}/agentchat.db", data_dir.display()),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            turn_commit: TurnCommit::default(),
            data_dir,
        }
    }

    /// The backend `database_url` names (`None`: an unknown scheme, refused when the
    /// store is opened).
    pub fn backend(&self) -> Option<Backend> {
        Backend::of(&self.database_url)
    }

    /// Opens the store these settings name ([`crate::store::connect_with`]): `database_url`,
    /// with `max_connections` and `turn_commit` for PostgreSQL.
    ///
    /// Errors: an unknown scheme or a connection failure.
    pub async fn open_store(&self) -> anyhow::Result<std::sync::Arc<dyn crate::store::Store>> {
        crate::store::connect_with(&self.database_url, self.max_connections, self.turn_commit).await
    }

    /// `database_url` with its password, if any, replaced by `***`: for logs and `Debug`.
    pub fn database_url_redacted(&self) -> String {
        match url::Url::parse(&self.database_url) {
            Ok(mut url) if url.password().is_some() => {
                let _ = url.set_password(Some("***"));
                url.to_string()
            }
            _ => self.database_url.clone(),
        }
    }

    /// Replaces the defaults with `DATABASE_URL`, `DATABASE_MAX_CONNECTIONS` and
    /// `CHAT_SYNCHRONOUS_COMMIT` when set. (`DATA_DIR` is read before, by
    /// [`super::Config::from_env`].)
    ///
    /// Errors: `DATABASE_MAX_CONNECTIONS` is not a whole number from 1 to
    /// [`MAX_DATABASE_CONNECTIONS`]; `CHAT_SYNCHRONOUS_COMMIT` is neither `on` nor `off`.
    pub(super) fn override_from_env(&mut self) -> anyhow::Result<()> {
        if let Some(url) = var("DATABASE_URL") {
            self.database_url = url;
        }
        if let Some(v) = var("DATABASE_MAX_CONNECTIONS") {
            self.max_connections = bounded(
                "DATABASE_MAX_CONNECTIONS",
                &v,
                1..=MAX_DATABASE_CONNECTIONS,
                "a whole number",
            )?;
        }
        if let Some(v) = var("CHAT_SYNCHRONOUS_COMMIT") {
            self.turn_commit = TurnCommit::parse(&v)?;
        }
        Ok(())
    }
}
