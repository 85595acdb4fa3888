//! The knowledge part: uploads and how documents are read.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use super::Settings;

/// `EXTRACT_TIMEOUT_SECS`'s default: the wall-clock budget of one extraction task.
pub const DEFAULT_EXTRACT_TIMEOUT: Duration = Duration::from_secs(120);

/// How extraction children are run (`EXTRACT_*` variables; docs/security.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractionConfig {
    /// The `agentchat` binary to start as `agentchat extract`; the running executable by
    /// default (tests point it at the built binary).
    pub program: PathBuf,
    /// `EXTRACT_TIMEOUT_SECS`, default [`DEFAULT_EXTRACT_TIMEOUT`]: the wall-clock budget of
    /// one task (one upload, one page); the child is killed shortly after it.
    pub timeout: Duration,
    /// `EXTRACT_MEMORY_MB`, default 1,024 MiB: the child's address-space limit in bytes
    /// (`RLIMIT_AS`; 0 sets none), which includes the binary's own mappings.
    pub memory_limit: u64,
    /// `EXTRACT_PROCESSES`, default the number of CPU cores: children working at once.
    pub processes: usize,
}

impl Default for ExtractionConfig {
    fn default() -> Self {
        Self {
            program: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("agentchat")),
            timeout: DEFAULT_EXTRACT_TIMEOUT,
            memory_limit: 1024 << 20,
            processes: std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }
}

/// What [`crate::knowledge::Knowledge`] is built from (besides the outbound rules of
/// [`super::OutboundConfig`] and the embedding model of [`super::ProvidersConfig`]).
#[derive(Clone)]
pub struct KnowledgeConfig {
    /// `MAX_UPLOAD_BYTES`: largest knowledge upload, default 20 MiB; larger is 413.
    pub max_upload_bytes: usize,
    /// How uploads and crawled pages are read: `EXTRACT_TIMEOUT_SECS`, `EXTRACT_MEMORY_MB`,
    /// `EXTRACT_PROCESSES` (see [`ExtractionConfig`]).
    pub extraction: ExtractionConfig,
    /// `DATA_DIR/uploads`: where uploads are kept, one file per document, with the embedded
    /// (SQLite) store; unused with PostgreSQL, which keeps them in the database.
    pub uploads: PathBuf,
}

impl KnowledgeConfig {
    /// The defaults for a service keeping its files in `data_dir`; no environment read.
    pub fn new(data_dir: &Path) -> Self {
        Self {
            max_upload_bytes: 20 * 1024 * 1024,
            extraction: ExtractionConfig::default(),
            uploads: data_dir.join("uploads"),
        }
    }

    /// Takes the upload and extraction variables from `settings` (rules checked there).
    pub(super) fn apply(&mut self, settings: &Settings) {
        self.max_upload_bytes = settings.max_upload_bytes;
        self.extraction.timeout = Duration::from_secs(settings.extract_timeout_secs);
        self.extraction.memory_limit = settings.extract_memory_mb << 20;
        if let Some(n) = settings.extract_processes {
            self.extraction.processes = n;
        }
    }
}
