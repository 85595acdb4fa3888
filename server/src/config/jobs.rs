//! The jobs part: the background workers of this instance.

use super::Settings;

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
    /// Takes `JOB_WORKERS` from `settings`.
    pub(super) fn apply(&mut self, settings: &Settings) {
        self.workers = settings.job_workers;
    }
}
