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
    /// `MAX_TOOL_ROUNDS`: model calls that may ask for tools in one turn, 1–50, default 8;
    /// then one last call without tools (docs/api.md § Tools).
    pub max_tool_rounds: u32,
    /// `TOOL_TIMEOUT_SECONDS`: the longest one tool call may take unless the tool sets its
    /// own `timeoutMs`, 1–600, default 30 s.
    pub tool_timeout: std::time::Duration,
}

impl Default for ChatConfig {
    fn default() -> Self {
        Self {
            max_message_chars: 32_000,
            sse_heartbeat: std::time::Duration::from_secs(15),
            max_tool_rounds: 8,
            tool_timeout: std::time::Duration::from_secs(30),
        }
    }
}

impl ChatConfig {
    /// Replaces the defaults with `MAX_MESSAGE_CHARS`, `SSE_HEARTBEAT_SECS`,
    /// `MAX_TOOL_ROUNDS` and `TOOL_TIMEOUT_SECONDS` where set.
    ///
    /// Errors: a value that is not a whole number, or out of its range (named).
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
        if let Some(v) = var("MAX_TOOL_ROUNDS") {
            self.max_tool_rounds = v
                .parse()
                .ok()
                .filter(|n| (1..=50).contains(n))
                .context("MAX_TOOL_ROUNDS must be a whole number from 1 to 50")?;
        }
        if let Some(v) = var("TOOL_TIMEOUT_SECONDS") {
            let secs: u64 = v
                .parse()
                .ok()
                .filter(|n| (1..=600).contains(n))
                .context("TOOL_TIMEOUT_SECONDS must be whole seconds from 1 to 600")?;
            self.tool_timeout = std::time::Duration::from_secs(secs);
        }
        Ok(())
    }
}
