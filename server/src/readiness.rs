//! Readiness (`GET /api/health/ready`, docs/api.md § Operations): whether every dependency
//! answers now (the database; Redis when `REDIS_URL` is set). Liveness (`GET /api/health`) is
//! answered by the process itself.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;

use crate::store::Store;

/// Longest wait for one dependency's answer before it counts as down.
pub const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// A dependency the readiness check asks whether it answers.
#[async_trait]
pub trait Ping: Send + Sync {
    /// The dependency's name in answers and logs: `database`, `redis`.
    fn name(&self) -> &'static str;

    /// Asks the dependency for a trivial answer. Errors: no answer, or an error.
    async fn ping(&self) -> anyhow::Result<()>;
}

/// The store as a dependency: `SELECT 1` ([`Store::ping`]).
pub struct StorePing(pub Arc<dyn Store>);

#[async_trait]
impl Ping for StorePing {
    fn name(&self) -> &'static str {
        "database"
    }

    async fn ping(&self) -> anyhow::Result<()> {
        Ok(self.0.ping().await?)
    }
}

/// The dependencies of this instance, asked together.
#[derive(Clone, Default)]
pub struct Readiness {
    dependencies: Vec<Arc<dyn Ping>>,
}

/// The outcome of [`Readiness::check`]: each dependency's name, and whether it answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report(pub Vec<(&'static str, bool)>);

impl Report {
    /// Whether every dependency answered.
    pub fn ready(&self) -> bool {
        self.0.iter().all(|(_, up)| *up)
    }

    /// The names of the dependencies that did not answer, in order.
    pub fn down(&self) -> Vec<&'static str> {
        self.0
            .iter()
            .filter(|(_, up)| !up)
            .map(|(name, _)| *name)
            .collect()
    }

    /// Whether the dependency `name` was asked and answered.
    pub fn is_up(&self, name: &str) -> bool {
        self.0.iter().any(|(n, up)| *n == name && *up)
    }
}

impl Readiness {
    /// Readiness over `dependencies`, asked in this order.
    pub fn new(dependencies: Vec<Arc<dyn Ping>>) -> Self {
        Self { dependencies }
    }

    /// Asks every dependency at once, each within [`READY_TIMEOUT`]; failures are logged with
    /// their cause (sqlx and redis errors hold no passwords).
    pub async fn check(&self) -> Report {
        let answers = futures::future::join_all(self.dependencies.iter().map(|d| async move {
            let up = match tokio::time::timeout(READY_TIMEOUT, d.ping()).await {
                Ok(Ok(())) => true,
                Ok(Err(err)) => {
                    tracing::warn!(dependency = d.name(), error = %err, "readiness: no answer");
                    false
                }
                Err(_) => {
                    tracing::warn!(
                        dependency = d.name(),
                        timeout_ms = READY_TIMEOUT.as_millis() as u64,
                        "readiness: no answer in time"
                    );
                    false
                }
            };
            (d.name(), up)
        }))
        .await;
        Report(answers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(&'static str, Option<bool>);

    #[async_trait]
    impl Ping for Fixed {
        fn name(&self) -> &'static str {
            self.0
        }

        async fn ping(&self) -> anyhow::Result<()> {
            match self.1 {
                Some(true) => Ok(()),
                Some(false) => anyhow::bail!("refused"),
                None => std::future::pending().await,
            }
        }
    }

    fn readiness(deps: Vec<Fixed>) -> Readiness {
        Readiness::new(
            deps.into_iter()
                .map(|d| Arc::new(d) as Arc<dyn Ping>)
                .collect(),
        )
    }

    #[tokio::test]
    async fn ready_when_every_dependency_answers() {
        let report = readiness(vec![
            Fixed("database", Some(true)),
            Fixed("redis", Some(true)),
        ])
        .check()
        .await;
        assert!(report.ready());
        assert!(report.down().is_empty());
        assert!(report.is_up("redis"));
        assert!(Readiness::default().check().await.ready());
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_or_a_silence_is_down() {
        let report = readiness(vec![
            Fixed("database", Some(false)),
            Fixed("redis", None),
            Fixed("other", Some(true)),
        ])
        .check()
        .await;
        assert!(!report.ready());
        assert_eq!(report.down(), vec!["database", "redis"]);
        assert!(!report.is_up("redis"));
        assert!(report.is_up("other"));
        assert!(!report.is_up("absent"));
    }
}
