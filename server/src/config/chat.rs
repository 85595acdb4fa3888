//! The chat part: messages and their streams.

use super::Settings;

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
    /// `SHUTDOWN_GRACE_SECONDS`: how long a shutting-down instance lets its streams finish
    /// before it ends them (docs/api.md § Drains), 0–3600, default 30 s.
    pub shutdown_grace: std::time::Duration,
    /// After the grace period, how long resumable replies go on generating for clients
    /// that resume elsewhere before they are stored as `interrupted`: 10 s (no variable).
    pub shutdown_handover: std::time::Duration,
}

impl Default for ChatConfig {
    fn default() -> Self {
        Self {
            max_message_chars: 32_000,
            sse_heartbeat: std::time::Duration::from_secs(15),
            max_tool_rounds: 8,
            tool_timeout: std::time::Duration::from_secs(30),
            shutdown_grace: std::time::Duration::from_secs(30),
            shutdown_handover: crate::chat::replies::HANDOVER,
        }
    }
}

impl ChatConfig {
    /// Takes the chat variables from `settings` (ranges checked there).
    pub(super) fn apply(&mut self, settings: &Settings) {
        self.max_message_chars = settings.max_message_chars;
        self.sse_heartbeat = std::time::Duration::from_secs(settings.sse_heartbeat_secs);
        self.max_tool_rounds = settings.max_tool_rounds;
        self.tool_timeout = std::time::Duration::from_secs(settings.tool_timeout_seconds);
        self.shutdown_grace = std::time::Duration::from_secs(settings.shutdown_grace_seconds);
    }
}
