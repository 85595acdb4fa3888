//! The webhooks part: delivery retries.

use super::Settings;

/// What [`crate::webhooks::Webhooks`] is built from (besides the outbound rules of
/// [`super::OutboundConfig`] and the secret box made from [`super::SecretsConfig`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhooksConfig {
    /// `WEBHOOK_RETRY_BASE_MS`: the first retry's longest wait; every retry time scales with
    /// it (`webhooks::RetryPolicy`).
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
    /// Takes `WEBHOOK_RETRY_BASE_MS` from `settings` (at least 1, checked there).
    pub(super) fn apply(&mut self, settings: &Settings) {
        self.retry_base = std::time::Duration::from_millis(settings.webhook_retry_base_ms);
    }
}
