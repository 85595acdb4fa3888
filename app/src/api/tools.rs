//! Agent tools and the tool calls of a reply (docs/api.md § Tools).

use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use utoipa::ToSchema;

/// A tool of an agent. `config` depends on `type`: `knowledge_search` and `web_fetch`
/// take `{}`; `http` `{method, url, parameters, headers?, secretHeaders?, timeoutMs?}`
/// (a read shows `secretHeaders` as a list of names only); `mcp` `{integrationId,
/// allowedTools?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    pub id: String,
    /// `knowledge_search`, `web_fetch`, `http` or `mcp`.
    #[serde(rename = "type")]
    pub tool_type: String,
    /// `^[a-zA-Z0-9_-]{1,64}$`, unique among the agent's tools.
    pub name: String,
    pub description: String,
    pub enabled: bool,
    pub requires_approval: bool,
    #[cfg_attr(feature = "ssr", schema(value_type = Object))]
    pub config: serde_json::Value,
    pub created_at: String,
    pub updated_at: String,
}

/// `POST /api/agents/{agentId}/tools` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateToolRequest {
    /// `knowledge_search`, `web_fetch`, `http` or `mcp` (the document's `enum`).
    #[serde(rename = "type")]
    #[cfg_attr(feature = "ssr", schema(min_length = 1))]
    pub tool_type: String,
    /// Defaults to the type for the built-ins; required for `http`.
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(pattern = "^[a-zA-Z0-9_-]{1,64}$"))]
    pub name: Option<String>,
    /// At most 1,024 characters; built-ins have a default.
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(max_length = 1024))]
    pub description: Option<String>,
    /// Default true.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Default false.
    #[serde(default)]
    pub requires_approval: Option<bool>,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(value_type = Object))]
    pub config: Option<serde_json::Value>,
}

/// `PUT /api/agents/{agentId}/tools/{toolId}` body: every field optional; the type does
/// not change. A `config` replaces the config; its `secretHeaders`, when omitted, keep
/// the stored ones.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateToolRequest {
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(pattern = "^[a-zA-Z0-9_-]{1,64}$"))]
    pub name: Option<String>,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(max_length = 1024))]
    pub description: Option<String>,
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default)]
    pub requires_approval: Option<bool>,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(value_type = Object))]
    pub config: Option<serde_json::Value>,
}

/// `{tool}`: one tool.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct ToolResponse {
    pub tool: Tool,
}

/// `{tools}`: an agent's tools, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct ToolsResponse {
    pub tools: Vec<Tool>,
}

/// `POST /api/agents/{agentId}/tools/{toolId}/test` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestToolRequest {
    /// The arguments, as the model would give them.
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(value_type = Object))]
    pub arguments: serde_json::Value,
    /// For an `mcp` tool: which of the MCP server's tools to run (its name on the server).
    /// Required when the tool offers more than one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
}

/// What one run of a tool gave: `status` `succeeded` or `failed`, its output (empty when it
/// failed), the error, and how long it took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolTestResult {
    pub status: String,
    pub output: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub duration_ms: u64,
}

/// A tool call of a reply (`toolCalls` of a chat reply and of a stored message).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolCallView {
    /// The model provider's call id.
    pub id: String,
    pub name: String,
    /// The tool's type (`knowledge_search`, `web_fetch`, `http`, `mcp`), `unknown` when
    /// the model called a tool the agent does not have, or `client` for a tool the caller
    /// of the OpenAI-compatible API defined and runs (docs/api.md § Tools the client runs).
    #[serde(rename = "type")]
    pub tool_type: String,
    /// The arguments the model gave (an object; `{}` when they were not JSON).
    #[cfg_attr(feature = "ssr", schema(value_type = Object))]
    pub arguments: serde_json::Value,
    /// `succeeded`, `failed` or `denied`; `requested` for a `client` call whose result the
    /// caller has not sent in this conversation.
    pub status: String,
    /// What the model was given (at most 16 KiB of text).
    pub output: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub duration_ms: u64,
}

/// A tool call that waits for a person's decision (`pendingApprovals`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PendingApproval {
    pub tool_call_id: String,
    pub name: String,
    #[cfg_attr(feature = "ssr", schema(value_type = Object))]
    pub arguments: serde_json::Value,
}

/// `POST /api/agents/{agentId}/conversations/{threadId}/approvals` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalRequest {
    /// A `pendingApprovals` entry's `toolCallId`.
    #[cfg_attr(feature = "ssr", schema(min_length = 1))]
    pub tool_call_id: String,
    pub approved: bool,
    /// Answer as a server-sent event stream, as chat does.
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<super::StreamOptions>,
}
