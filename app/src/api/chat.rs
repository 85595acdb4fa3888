//! Chat with an agent: the request, the JSON reply, and the stored conversations and
//! messages (docs/api.md § Send message, § Chat reply). The frames of a streamed reply are
//! read by `crate::sse`.

use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use utoipa::ToSchema;

/// A file attached to one chat turn: a text-bearing kind, base64-encoded.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Attachment {
    pub filename: String,
    /// e.g. `text/plain` or `text/markdown`.
    pub content_type: String,
    /// The file's bytes, base64 (standard alphabet).
    pub data: String,
}

/// Stream options of a chat request.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamOptions {
    /// Adds a usage frame before `[DONE]`.
    #[serde(default)]
    pub include_usage: bool,
    /// Adds a `{"chunk": "", "toolCall": {...}}` frame when each tool call starts
    /// (`status: "running"`) and when it ends.
    #[serde(default)]
    pub include_tool_calls: bool,
}

/// `POST /api/agents/{agentId}/chat` body (docs/api.md § Send message).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatRequest {
    /// The message; 1..=32,000 characters by default.
    pub message: String,
    /// Continues this thread; omitted: a new thread.
    #[serde(default)]
    pub thread_id: Option<String>,
    /// Server-sent events when true.
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub attachments: Vec<Attachment>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// With `stream`: the reply keeps generating if the client goes away, and can be resumed
    /// (`GET .../conversations/{threadId}/stream`) or cancelled (`POST .../cancel`).
    #[serde(default)]
    pub resumable: bool,
    /// When the thread's previous reply is still in progress, wait for it (and see it in
    /// the history) instead of failing with 409.
    #[serde(default)]
    pub queue: bool,
}

/// Token usage of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct TokensUsed {
    pub prompt: u32,
    pub completion: u32,
    pub total: u32,
}

/// A knowledge base passage a reply used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Source {
    pub document_id: String,
    pub title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub chunk_id: String,
    pub score: f64,
    pub snippet: String,
}

/// The JSON chat reply (docs/api.md § Chat reply; the service adds threadId and sources).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ChatReply {
    pub message: String,
    pub model: String,
    pub tokens_used: TokensUsed,
    pub rag_chunks_used: u32,
    pub thread_id: String,
    pub sources: Vec<Source>,
    /// The tool calls the turn made, in order; `[]` when none.
    pub tool_calls: Vec<super::ToolCallView>,
    /// Calls that wait for a person's approval: the turn stopped for them. Absent when
    /// none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_approvals: Vec<super::PendingApproval>,
}

/// A conversation thread in a list.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    pub thread_id: String,
    pub title: String,
    pub message_count: u32,
    pub created_at: String,
    pub updated_at: String,
}

/// `GET /api/agents/{agentId}/conversations` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConversationsResponse {
    pub conversations: Vec<Conversation>,
    /// Pass as `?cursor=` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// Replies of a conversation rated up and down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct FeedbackCounts {
    pub up: u32,
    pub down: u32,
}

/// A conversation in the account's inbox (`GET /api/conversations`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct InboxConversation {
    pub thread_id: String,
    pub agent_id: String,
    pub agent_name: String,
    /// Where it started: `api`, `dashboard`, `widget`, `telegram`, `slack`, `openai` or `mcp`.
    pub channel: String,
    pub title: String,
    pub message_count: u32,
    pub feedback: FeedbackCounts,
    pub created_at: String,
    /// The latest message's time; the list's order.
    pub updated_at: String,
}

/// `GET /api/conversations` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct InboxResponse {
    pub conversations: Vec<InboxConversation>,
    /// Pass as `?cursor=` (with the same filters) for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// A stored message.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ChatMessage {
    pub id: String,
    /// `user` or `assistant`.
    pub role: String,
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_used: Option<TokensUsed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<Source>>,
    /// `complete`, or `failed` / `cancelled` for a reply cut short.
    pub status: String,
    /// The tool calls of an assistant message, in order; absent when it made none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<super::ToolCallView>>,
    /// On the thread's latest assistant message only: its tool calls still waiting for a
    /// decision (not expired), which `POST .../approvals` decides; absent when none wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_approvals: Option<Vec<super::PendingApproval>>,
    /// The reply's feedback; absent when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<Feedback>,
    pub created_at: String,
}

/// Feedback on a reply (docs/api.md § Feedback).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Feedback {
    /// `up` or `down`.
    pub rating: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// When this rating was given.
    pub created_at: String,
}

/// `PUT .../messages/{messageId}/feedback` body.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeedbackRequest {
    /// `up` or `down`.
    pub rating: String,
    /// At most 2,000 characters; trimmed, and an empty one is none.
    #[serde(default)]
    pub comment: Option<String>,
}

/// `GET .../conversations/{threadId}/messages` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MessagesResponse {
    pub messages: Vec<ChatMessage>,
    pub next_cursor: Option<String>,
}

/// Prompt and completion tokens over an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct TokenCounts {
    pub prompt: u64,
    pub completion: u64,
}

/// Tool calls over an interval and how many of them failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct ToolCallCounts {
    pub total: u64,
    pub failed: u64,
}

/// One interval of `GET /api/analytics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AnalyticsPoint {
    /// The interval's first day, `YYYY-MM-DD` (UTC; a week starts on Monday).
    pub start: String,
    /// Conversations started.
    pub conversations: u64,
    pub user_messages: u64,
    pub replies: u64,
    pub tokens: TokenCounts,
    /// Distinct people who wrote on the live channels (widget, Telegram, Slack).
    pub visitors: u64,
    /// Ratings given.
    pub feedback: FeedbackCounts,
    /// Complete replies that used no knowledge though their agent has a knowledge base.
    pub unanswered: u64,
    /// Replies the provider failed or broke off.
    pub failed: u64,
    pub tool_calls: ToolCallCounts,
}

/// A question and how often it was asked in the period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct QuestionCount {
    /// The question as counted: lower case, punctuation and spacing reduced to single spaces.
    pub text: String,
    pub count: u64,
}

/// `GET /api/analytics` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AnalyticsResponse {
    /// Every interval of the period, oldest first, zeros included.
    pub series: Vec<AnalyticsPoint>,
    /// The ten most frequent user messages.
    pub top_questions: Vec<QuestionCount>,
    /// The ten most frequent user messages whose reply used no knowledge.
    pub unanswered: Vec<QuestionCount>,
}
