//! The events of the chat stream (`text/event-stream` answers of `POST
//! /api/agents/{agentId}/chat` and `.../approvals` with `stream: true`, and of the widget's
//! chat), as the OpenAPI document describes them (docs/api.md § Events): each event's `data`
//! is one JSON frame ([`ChatStreamFrame`]) or, last, the text `[DONE]`. A frame is told
//! apart by the key it carries: `error`, `toolCall`, `pendingApprovals`, `usage`, else
//! `chunk` alone. The dashboard reads them with `crate::sse`.

use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use utoipa::ToSchema;

use super::{ErrorBody, PendingApproval, Source, TokensUsed};

/// `{"chunk": "..."}`: the next piece of the reply's text, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ChunkFrame {
    pub chunk: String,
}

/// After the last chunk of a complete reply, when the request set
/// `streamOptions.includeUsage`: token usage, the model, and the knowledge sources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UsageFrame {
    /// Always empty.
    #[cfg_attr(feature = "ssr", schema(max_length = 0))]
    pub chunk: String,
    pub usage: TokensUsed,
    /// The model that answered.
    pub model: String,
    /// Knowledge passages put into the prompt (`sources`' length).
    pub rag_chunks_used: u32,
    pub thread_id: String,
    /// The reply's message id, as in the stream's `X-Reply-Id` header.
    pub reply_id: String,
    /// The passages behind the reply's `[n]` markers, best first.
    pub sources: Vec<Source>,
}

/// `running` when a call starts; `succeeded`, `failed` or `denied` when it has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ToolCallEventStatus {
    Running,
    Succeeded,
    Failed,
    Denied,
}

/// A tool call as a stream frame shows it: a start (`running`, with `arguments`) or an end
/// (with `output`, `durationMs` and, when it failed, `error`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolCallEvent {
    /// The model provider's call id: the start and the end of a call share it.
    pub id: String,
    pub name: String,
    /// `knowledge_search`, `web_fetch`, `http`, `mcp`, or `unknown` for a tool the agent
    /// does not have.
    #[serde(rename = "type")]
    pub tool_type: String,
    /// The arguments the model gave; in start frames only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ssr", schema(value_type = Option<Object>))]
    pub arguments: Option<serde_json::Value>,
    pub status: ToolCallEventStatus,
    /// What the model was given; in end frames only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// In end frames only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Why the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A tool call started or ended; sent when the request set
/// `streamOptions.includeToolCalls`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolCallFrame {
    /// Always empty.
    #[cfg_attr(feature = "ssr", schema(max_length = 0))]
    pub chunk: String,
    pub tool_call: ToolCallEvent,
}

/// The turn stopped: these calls wait for a person's decision (`POST .../approvals`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PendingApprovalsFrame {
    /// Always empty.
    #[cfg_attr(feature = "ssr", schema(max_length = 0))]
    pub chunk: String,
    pub pending_approvals: Vec<PendingApproval>,
}

/// One JSON frame of the chat stream: exactly one of these shapes, told apart by its keys
/// (`error`, `toolCall`, `pendingApprovals`, `usage`, else `chunk` alone). An error frame
/// is the error body of the status the failure would have had, sent when the reply fails
/// after the stream started; `[DONE]` follows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(untagged)]
pub enum ChatStreamFrame {
    Chunk(ChunkFrame),
    Usage(UsageFrame),
    ToolCall(ToolCallFrame),
    PendingApprovals(PendingApprovalsFrame),
    Error(ErrorBody),
}

/// One server-sent event of the chat stream: `data` is a JSON [`ChatStreamFrame`], or
/// `[DONE]` on the last event. Comments (`: ping`) keep a silent stream open.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct ChatStreamEvent {
    /// The frame's id within its reply: 1 for the first, one more for each next; send the
    /// last one received as `Last-Event-ID` to resume. Absent on the frame a shutting-down
    /// server ends a stream with (an error telling the client to resume).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ssr", schema(pattern = "^[1-9][0-9]*$"))]
    pub id: Option<String>,
    #[cfg_attr(feature = "ssr", schema(schema_with = chat_stream_data))]
    pub data: String,
}

/// The text that ends every stream (chat, widget and the OpenAI-compatible API).
pub const STREAM_DONE: &str = "[DONE]";

/// The `data` of an event whose JSON has the schema `frame` (a component name), or
/// [`STREAM_DONE`]: `oneOf` the two, the JSON one with `contentMediaType` and
/// `contentSchema` (JSON Schema 2020-12 § 8).
#[cfg(feature = "ssr")]
pub fn stream_data_schema(frame: &str, description: &str) -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::{
        extensions::Extensions,
        schema::{ObjectBuilder, OneOfBuilder, Type},
    };
    let done = ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some([STREAM_DONE]))
        .description(Some("The last event"));
    let json = ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some("^\\{"))
        .content_media_type("application/json")
        .extensions(Some(Extensions::from_iter([(
            "contentSchema",
            serde_json::json!({ "$ref": format!("#/components/schemas/{frame}") }),
        )])))
        .description(Some(format!("A JSON `{frame}`")));
    utoipa::openapi::schema::Schema::OneOf(
        OneOfBuilder::new()
            .item(done)
            .item(json)
            .description(Some(description))
            .build(),
    )
}

#[cfg(feature = "ssr")]
fn chat_stream_data() -> utoipa::openapi::schema::Schema {
    stream_data_schema(
        "ChatStreamFrame",
        "A JSON `ChatStreamFrame`, or `[DONE]` on the last event",
    )
}
