//! The webhooks part: delivery retries.

use anyhow::Context;

use super::var;

/// What [`crate::webhooks::Webhooks`] is built from (besides the outbound rules of
/// [`super::OutboundConfig`] and the secret box made from [`super::SecretsConfig`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhooksConfig {
    /// `WEBHOOK_RETRY_BASE_MS`: the first webhook retry waits up to this long, default
    /// 30,000 ms; every retry time scales with it (see `webhooks::RetryPolicy`: waits are
    /// capped at 720 × base, 6 h, and retries stop 2,880 × base, 24 h, after the event).
    pub retry_base: std::time::Duration,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        Self {
            retry_base: std::time::Duration::from_secs(30),
        }
    }
}

impl WebhooksConfig {
    /// Replaces the default with `WEBHOOK_RETRY_BASE_MS` when set.
    ///
    /// Errors: not whole milliseconds, or 0.
    pub(super) fn override_from_env(&mut self) -> anyhow::Result<()> {
        if let Some(v) = var("WEBHOOK_RETRY_BASE_MS") {
            let ms: u64 = v
                .parse()
                .context("WEBHOOK_RETRY_BASE_MS must be whole milliseconds")?;
            anyhow::ensure!(ms > 0, "WEBHOOK_RETRY_BASE_MS must be at least 1");
            self.retry_base = std::time::Duration::from_millis(ms);
        }
        Ok(())
    }
}
