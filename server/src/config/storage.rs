//! The storage part: the database and the data folder.

use std::path::PathBuf;

use super::Settings;

/// `DATABASE_MAX_CONNECTIONS`'s default.
pub const DEFAULT_DATABASE_CONNECTIONS: u32 = 16;

/// Most connections `DATABASE_MAX_CONNECTIONS` may ask for.
pub const MAX_DATABASE_CONNECTIONS: u32 = 10_000;

/// Where the service keeps its state: the database and its data folder.
#[derive(Clone)]
pub struct StorageConfig {
    /// `DATABASE_URL`, default `sqlite://{DATA_DIR}/agentchat.db`; `postgres://...` to share.
    pub database_url: String,
    /// `DATABASE_MAX_CONNECTIONS`: the PostgreSQL pool size; the instances' sum must stay under the
    /// server's `max_connections`.
    pub max_connections: u32,
    /// `CHAT_SYNCHRONOUS_COMMIT` (PostgreSQL only).
    pub turn_commit: TurnCommit,
    /// `DATA_DIR`, default `data`: mail outbox, uploads, generated secrets.
    pub data_dir: PathBuf,
}

impl StorageConfig {
    /// The defaults for `data_dir`, with no environment read.
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            database_url: format!("sqlite://{}/agentchat.db", data_dir.display()),
            max_connections: DEFAULT_DATABASE_CONNECTIONS,
            turn_commit: TurnCommit::default(),
            data_dir,
        }
    }

    /// The backend `database_url` names; `None` for an unknown scheme.
    pub fn backend(&self) -> Option<Backend> {
        Backend::of(&self.database_url)
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

    /// Takes the database variables from `settings` (checked there).
    pub(super) fn apply(&mut self, settings: &Settings) {
        if let Some(url) = &settings.database_url {
            self.database_url = url.clone();
        }
        self.max_connections = settings.database_max_connections;
        self.turn_commit = settings.chat_synchronous_commit;
    }
}

/// Whether a chat turn's commit waits for the database's flush to disk: PostgreSQL's per-turn
/// `synchronous_commit` (<https://www.postgresql.org/docs/current/wal-async-commit.html>).
/// A committed turn is visible at once and survives an AgentChat crash; an asynchronous one may
/// be lost if the database server crashes within about `3 × wal_writer_delay`. SQLite ignores it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TurnCommit {
    /// `off`, the default: the commit returns once the turn is in the WAL buffers.
    #[default]
    Asynchronous,
    /// `on`: by the server's own `synchronous_commit`.
    Synchronous,
}

impl TurnCommit {
    /// Parses `on` or `off` (any case). Errors: any other value, named.
    pub fn parse(raw: &str) -> anyhow::Result<Self> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "off" => Ok(Self::Asynchronous),
            "on" => Ok(Self::Synchronous),
            _ => anyhow::bail!("CHAT_SYNCHRONOUS_COMMIT must be on or off, not {raw:?}"),
        }
    }

    /// The `synchronous_commit` the turns' connections set; `None` keeps the server's.
    pub fn setting(self) -> Option<&'static str> {
        match self {
            Self::Asynchronous => Some("off"),
            Self::Synchronous => None,
        }
    }
}

/// The database backends, told apart by the scheme of `DATABASE_URL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `sqlite:`: embedded, one instance.
    Sqlite,
    /// `postgres:` or `postgresql:`: shared by any number of instances.
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
