//! The storage part: the database and the data folder.

use std::path::PathBuf;

use super::var;

/// Where the service keeps its state: the database, and the folder of its files (the
/// parts that keep files there, such as [`super::MailConfig`] and
/// [`super::KnowledgeConfig`], hold their own folder inside it).
#[derive(Clone)]
pub struct StorageConfig {
    /// `DATABASE_URL`, default `sqlite://{DATA_DIR}/agentchat.db`.
    pub database_url: String,
    /// `DATA_DIR`, default `data`: mail outbox, uploads, generated secrets.
    pub data_dir: PathBuf,
}

impl StorageConfig {
    /// The defaults for `data_dir`, with no environment read.
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            database_url: format!("sqlite://{}/agentchat.db", data_dir.display()),
            data_dir,
        }
    }

    /// Replaces the default database with `DATABASE_URL` when set. (`DATA_DIR` is read
    /// before, by [`super::Config::from_env`].)
    pub(super) fn override_from_env(&mut self) {
        if let Some(url) = var("DATABASE_URL") {
            self.database_url = url;
        }
    }
}
