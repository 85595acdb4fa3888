//! The knowledge part: uploads and how documents are read.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::var;
use crate::knowledge::sandbox::ExtractionConfig;

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
    /// The defaults for a service keeping its files in `data_dir`, with no environment
    /// read.
    pub fn new(data_dir: &Path) -> Self {
        Self {
            max_upload_bytes: 20 * 1024 * 1024,
            extraction: ExtractionConfig::default(),
            uploads: data_dir.join("uploads"),
        }
    }

    /// Replaces the defaults with `MAX_UPLOAD_BYTES`, `EXTRACT_TIMEOUT_SECS`,
    /// `EXTRACT_MEMORY_MB` and `EXTRACT_PROCESSES` where set.
    ///
    /// Errors: a value that is not a whole number, a zero timeout or process count, or a
    /// memory limit from 1 to 127 MiB.
    pub(super) fn override_from_env(&mut self) -> anyhow::Result<()> {
        if let Some(v) = var("MAX_UPLOAD_BYTES") {
            self.max_upload_bytes = v
                .parse()
                .context("MAX_UPLOAD_BYTES must be a whole number of bytes")?;
        }
        if let Some(v) = var("EXTRACT_TIMEOUT_SECS") {
            let secs: u64 = v
                .parse()
                .context("EXTRACT_TIMEOUT_SECS must be whole seconds")?;
            anyhow::ensure!(secs > 0, "EXTRACT_TIMEOUT_SECS must be at least 1");
            self.extraction.timeout = std::time::Duration::from_secs(secs);
        }
        if let Some(v) = var("EXTRACT_MEMORY_MB") {
            let mib: u64 = v
                .parse()
                .context("EXTRACT_MEMORY_MB must be a whole number of MiB")?;
            anyhow::ensure!(
                mib == 0 || mib >= 128,
                "EXTRACT_MEMORY_MB must be 0 (no limit) or at least 128"
            );
            self.extraction.memory_limit = mib << 20;
        }
        if let Some(v) = var("EXTRACT_PROCESSES") {
            let n: usize = v
                .parse()
                .context("EXTRACT_PROCESSES must be a whole number")?;
            anyhow::ensure!(n > 0, "EXTRACT_PROCESSES must be at least 1");
            self.extraction.processes = n;
        }
        Ok(())
    }
}
