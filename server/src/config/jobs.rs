//! The jobs part: the background workers of this instance.

use anyhow::Context;

use super::var;

/// How much background work ([`crate::jobs`]) this instance takes from the database's two
/// queues: start-up spawns the knowledge workers and the webhook delivery worker by it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobsConfig {
    /// `JOB_WORKERS`: background job workers (ingestion, crawls), default 2; 0 runs none
    /// (jobs wait for another instance) and no webhook delivery worker either.
    pub workers: usize,
}

impl Default for JobsConfig {
    fn default() -> Self {
        Self { workers: 2 }
    }
}

impl JobsConfig {
    /// Replaces the default with `JOB_WORKERS` when set.
    ///
    /// Errors: not a whole number.
    pub(super) fn override_from_env(&mut self) -> anyhow::Result<()> {
        if let Some(v) = var("JOB_WORKERS") {
            self.workers = v.parse().context("JOB_WORKERS must be a whole number")?;
        }
        Ok(())
    }
}
