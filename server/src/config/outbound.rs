//! The outbound part: which private addresses the service's own requests may reach.

use super::Settings;

/// The exceptions to [`crate::outbound`]'s SSRF rule, for crawls and webhook deliveries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutboundConfig {
    /// `ALLOWED_PRIVATE_HOSTS`: `host:port` entries the crawler may reach although they
    /// resolve to private addresses (development, tests); default none.
    pub allowed_private_hosts: Vec<String>,
}

impl OutboundConfig {
    /// Takes `ALLOWED_PRIVATE_HOSTS` from `settings` when set (comma-separated).
    pub(super) fn apply(&mut self, settings: &Settings) {
        if let Some(v) = &settings.allowed_private_hosts {
            self.allowed_private_hosts = v
                .split(',')
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(str::to_string)
                .collect();
        }
    }
}
