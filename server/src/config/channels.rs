//! The channels part: the chat platforms' API bases.

use super::Settings;

/// The Telegram Bot API (core.telegram.org/bots/api, "Making requests").
pub const TELEGRAM_API_URL: &str = "https://api.telegram.org";
/// The Slack Web API (api.slack.com/web, "Basics").
pub const SLACK_API_URL: &str = "https://slack.com/api";

/// What [`crate::channels::Channels`] is built from (besides `PUBLIC_URL`, under which
/// the platforms reach the inbound endpoints).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelsConfig {
    /// `TELEGRAM_API_URL`: the Telegram Bot API base, default `https://api.telegram.org`
    /// (a self-hosted Bot API server, tests). Methods are called at `{base}/bot{token}/{method}`.
    pub telegram_api_url: String,
    /// `SLACK_API_URL`: the Slack Web API base, default `https://slack.com/api`; methods are
    /// called at `{base}/{method}` (e.g. `chat.postMessage`).
    pub slack_api_url: String,
}

impl Default for ChannelsConfig {
    fn default() -> Self {
        Self {
            telegram_api_url: TELEGRAM_API_URL.into(),
            slack_api_url: SLACK_API_URL.into(),
        }
    }
}

impl ChannelsConfig {
    /// Takes `TELEGRAM_API_URL` and `SLACK_API_URL` from `settings`, no trailing slash.
    pub(super) fn apply(&mut self, settings: &Settings) {
        self.telegram_api_url = settings.telegram_api_url.trim_end_matches('/').to_string();
        self.slack_api_url = settings.slack_api_url.trim_end_matches('/').to_string();
    }
}
