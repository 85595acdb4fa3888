//! The chat part: messages and their streams.

use anyhow::Context;

use super::var;

/// What [`crate::chat::ChatService`] is built from: the length rule it checks, and the
/// heartbeat of the event streams its replies are sent in (docs/api.md § Chat stream).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatConfig {
    /// `MAX_MESSAGE_CHARS`: longest chat message in characters, default 32,000.
    pub max_message_chars: usize,
    /// `SSE_HEARTBEAT_SECS`: interval of `: ping` comments in a silent stream, default 15 s.
    pub sse_heartbeat: std::time::Duration,
}

impl Default for ChatConfig {
    fn default() -> Self {
        Self {
            max_message_chars: 32_000,
            sse_heartbeat: std::time::Duration::from_secs(15),
        }
    }
}

impl ChatConfig {
    /// Replaces the defaults with `MAX_MESSAGE_CHARS` and `SSE_HEARTBEAT_SECS` where set.
    ///
    /// Errors: a value that is not a whole number.
    pub(super) fn override_from_env(&mut self) -> anyhow::Result<()> {
        if let Some(v) = var("MAX_MESSAGE_CHARS") {
            self.max_message_chars = v
                .parse()
                .context("MAX_MESSAGE_CHARS must be a whole number")?;
        }
        if let Some(v) = var("SSE_HEARTBEAT_SECS") {
            self.sse_heartbeat = std::time::Duration::from_secs(
                v.parse()
                    .context("SSE_HEARTBEAT_SECS must be whole seconds")?,
            );
        }
        Ok(())
    }
}
