//! The webhooks part: delivery retries.

use super::Settings;

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
    /// Takes `WEBHOOK_RETRY_BASE_MS` from `settings` (at least 1, checked there).
    pub(super) fn apply(&mut self, settings: &Settings) {
        self.retry_base = std::time::Duration::from_millis(settings.webhook_retry_base_ms);
    }
}
