//! `/api/mcp`: a Model Context Protocol server for the caller's account over Streamable HTTP
//! (MCP 2025-06-18, <https://modelcontextprotocol.io/specification/2025-06-18>; docs/api.md
//! § MCP server), built on `rmcp`, behind the usual `/api` middleware. Each request is
//! authorized on its own (the principal travels with the request, never the session).
//! Tools, each offered only when the caller's scopes allow: `list_agents` (`agents:read`),
//! `ask_agent` (`chat:write`), `search_knowledge` (`knowledge:read`).

use std::{
    borrow::Cow,
    sync::{Arc, LazyLock},
};

use app::api::ErrorBody;
use axum::{
    extract::{Request, State},
    http::{header, HeaderValue},
    response::{IntoResponse, Response},
    Extension, Json,
};
use rmcp::{
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
        ErrorData, Implementation, JsonObject, ListToolsResult, PaginatedRequestParams,
        ProtocolVersion, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
    },
    service::RequestContext,
    transport::streamable_http_server::{
        session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
    },
    RoleServer, ServerHandler,
};
use serde::Serialize;
use serde_json::{json, Value};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    error::{reason, ApiError},
    extract::Auth,
    openapi::RateLimited,
    MAX_JSON_BODY,
};
use crate::{
    auth::Principal,
    chat::{quota::Payer, ThreadChoice, TurnOptions},
    domain::{Channel, Scope},
    ids::{AgentId, ThreadId},
    knowledge::search::retrieve,
    services::AppState,
    tools::service::{SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX},
};

/// The MCP revision this server speaks; a client asking for a newer one gets this one (MCP
/// 2025-06-18 § Lifecycle).
pub const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion::V_2025_06_18;

/// The Streamable HTTP transport with its sessions (kept in this instance's memory, closed
/// after 5 minutes without a request: rmcp's `SessionConfig::DEFAULT_KEEP_ALIVE`).
type McpService = StreamableHttpService<McpServer, LocalSessionManager>;

/// The `/api/mcp` routes, each with its own transport and session table (one per
/// application built from [`crate::http::api_router`]).
pub fn router() -> OpenApiRouter<AppState> {
    let config = StreamableHttpServerConfig::default()
        // rmcp checks `Host` against loopback names by default, against DNS rebinding: a
        // page of another site that made its name resolve to a local, unauthenticated
        // server. Here every request needs a credential that such a page does not have (a
        // bearer token; a cookie is sent to its own site only, and an unsafe method by
        // cookie needs the CSRF header), and the service is reached under `PUBLIC_URL`'s
        // host, through proxies that may rewrite `Host`, and by internal names of the
        // instances: any `Host` is accepted, as on the rest of the API.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(MAX_JSON_BODY);
    let service: McpService = StreamableHttpService::new(
        || Ok(McpServer),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    OpenApiRouter::new()
        .routes(routes!(post_mcp, get_mcp, delete_mcp))
        .layer(Extension(service))
}

/// One server-sent event of an MCP answer or session stream: `data` is one JSON-RPC 2.0
/// message.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
struct McpStreamEvent {
    #[schema(schema_with = json_rpc_data)]
    data: String,
}

fn json_rpc_data() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .content_media_type("application/json")
        .description(Some("A JSON-RPC 2.0 message"))
        .build()
}

/// Send one JSON-RPC message of the Model Context Protocol (Streamable HTTP transport,
/// MCP 2025-06-18): `initialize` first (its answer carries `Mcp-Session-Id`, to send with
/// every later request), then `notifications/initialized`, `tools/list`, `tools/call`.
/// Requests are answered as `text/event-stream` (the JSON-RPC response as an event) and
/// notifications with 202. Send `Accept: application/json, text/event-stream`.
#[utoipa::path(post, path = "/api/mcp", tag = "mcp", security(("bearer" = [])),
    request_body(content = Object, content_type = "application/json", description = "A JSON-RPC 2.0 request or notification"),
    responses(
        (status = 200, description = "The JSON-RPC response, as a server-sent event (or JSON)", content((Object = "application/json"), (McpStreamEvent = "text/event-stream")),
            headers(("Mcp-Session-Id" = String, description = "The session's id (answer to `initialize`)"))),
        (status = 202, description = "A notification or response was accepted"),
        (status = 400, description = "Not JSON-RPC, a missing `Mcp-Session-Id`, or an unsupported `MCP-Protocol-Version`", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "The session is unknown or closed: initialize again", body = ErrorBody),
        (status = 406, description = "`Accept` lacks `application/json` or `text/event-stream`", body = ErrorBody),
        (status = 413, description = "The body is over 1 MiB", body = ErrorBody),
        (status = 415, description = "The body is not sent as `application/json`", body = ErrorBody),
        RateLimited))]
async fn post_mcp(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Extension(service): Extension<McpService>,
    request: Request,
) -> Response {
    serve(state, principal, service, request).await
}

/// Open the session's stream of server-initiated messages (server-sent events; MCP
/// 2025-06-18 Streamable HTTP transport), with `Mcp-Session-Id`.
#[utoipa::path(get, path = "/api/mcp", tag = "mcp", security(("bearer" = [])),
    responses(
        (status = 200, description = "The session's server-sent event stream", content_type = "text/event-stream", body = McpStreamEvent),
        (status = 400, description = "A missing `Mcp-Session-Id`", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "The session is unknown or closed", body = ErrorBody),
        (status = 406, description = "`Accept` lacks `text/event-stream`", body = ErrorBody),
        RateLimited))]
async fn get_mcp(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Extension(service): Extension<McpService>,
    request: Request,
) -> Response {
    serve(state, principal, service, request).await
}

/// End the session named by `Mcp-Session-Id` (MCP 2025-06-18 Streamable HTTP transport,
/// session management).
#[utoipa::path(delete, path = "/api/mcp", tag = "mcp", security(("bearer" = [])),
    responses(
        (status = 202, description = "The session is closed"),
        (status = 400, description = "A missing `Mcp-Session-Id`", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "The session is unknown or closed", body = ErrorBody),
        RateLimited))]
async fn delete_mcp(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Extension(service): Extension<McpService>,
    request: Request,
) -> Response {
    serve(state, principal, service, request).await
}

/// The caller of one MCP request, put in its extensions for the tool handlers.
#[derive(Clone)]
struct Caller {
    state: AppState,
    principal: Arc<Principal>,
}

/// Hands `request` to the transport with its [`Caller`], giving the transport's plain-text
/// refusals the contract's `{error, message}` body; JSON answers pass as they are.
async fn serve(
    state: AppState,
    principal: Arc<Principal>,
    mut service: McpService,
    mut request: Request,
) -> Response {
    request.extensions_mut().insert(Caller { state, principal });
    let Ok(response) = tower::Service::call(&mut service, request).await;
    let response = response.map(axum::body::Body::new);
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 16 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let error = reason(status);
    let message = match text.strip_prefix(&format!("{error}: ")) {
        Some(rest) => rest.to_string(),
        None if text.is_empty() => format!("The request failed: {error}"),
        None => text,
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let body = Json(ErrorBody { error, message })
        .into_response()
        .into_body();
    Response::from_parts(parts, body)
}

/// The MCP server: its tools, listed and run for the caller of each request.
#[derive(Debug, Clone, Copy)]
pub struct McpServer;

/// A tool with the scope it needs.
struct Offered {
    scope: Scope,
    tool: Tool,
}

/// The JSON object of a schema written with `json!`.
fn schema(value: Value) -> Arc<JsonObject> {
    Arc::new(match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    })
}

/// The tools, in the order they are listed.
static TOOLS: LazyLock<[Offered; 3]> = LazyLock::new(|| {
    let agent_id = json!({"type": "string", "description": "The agent's id (see list_agents)"});
    let source = json!({
        "type": "object",
        "properties": {
            "documentId": {"type": "string"},
            "title": {"type": "string"},
            "url": {"type": "string"},
            "chunkId": {"type": "string"},
            "score": {"type": "number"},
            "snippet": {"type": "string"}
        },
        "required": ["documentId", "title", "chunkId", "score", "snippet"]
    });
    [
        Offered {
            scope: Scope::AgentsRead,
            tool: Tool::new(
                "list_agents",
                "List the agents of this AgentChat account: their ids, names, descriptions \
                 and models.",
                schema(json!({"type": "object", "properties": {}, "additionalProperties": false})),
            )
            .with_title("List agents")
            .with_raw_output_schema(schema(json!({
                "type": "object",
                "properties": {"agents": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "name": {"type": "string"},
                        "description": {"type": "string"},
                        "model": {"type": "string", "description": "Empty: the server's default model"}
                    },
                    "required": ["id", "name", "description", "model"]
                }}},
                "required": ["agents"]
            })))
            .with_annotations(ToolAnnotations::new().read_only(true).open_world(false)),
        },
        Offered {
            scope: Scope::ChatWrite,
            tool: Tool::new(
                "ask_agent",
                "Send a message to an agent and get its reply, answered from its knowledge \
                 base. Pass the threadId of an earlier reply to continue that conversation.",
                schema(json!({
                    "type": "object",
                    "properties": {
                        "agentId": agent_id,
                        "message": {"type": "string", "minLength": 1, "description": "The message to the agent"},
                        "threadId": {"type": "string", "description": "Continue this conversation (the threadId of an earlier reply); omitted, a new one starts"}
                    },
                    "required": ["agentId", "message"],
                    "additionalProperties": false
                })),
            )
            .with_title("Ask an agent")
            .with_raw_output_schema(schema(json!({
                "type": "object",
                "properties": {
                    "message": {"type": "string", "description": "The agent's reply"},
                    "threadId": {"type": "string", "description": "The conversation, to continue it"},
                    "sources": {"type": "array", "items": source, "description": "The knowledge base passages used, best first"}
                },
                "required": ["message", "threadId", "sources"]
            })))
            .with_annotations(
                ToolAnnotations::new()
                    .read_only(false)
                    .destructive(false)
                    .idempotent(false)
                    .open_world(false),
            ),
        },
        Offered {
            scope: Scope::KnowledgeRead,
            tool: Tool::new(
                "search_knowledge",
                "Search an agent's knowledge base and get its best passages, best first.",
                schema(json!({
                    "type": "object",
                    "properties": {
                        "agentId": agent_id,
                        "query": {"type": "string", "minLength": 1, "description": "What to search for"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_LIMIT_MAX,
                                  "default": SEARCH_LIMIT_DEFAULT, "description": "Most passages to return"}
                    },
                    "required": ["agentId", "query"],
                    "additionalProperties": false
                })),
            )
            .with_title("Search an agent's knowledge")
            .with_raw_output_schema(schema(json!({
                "type": "object",
                "properties": {"results": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "chunkId": {"type": "string"},
                        "title": {"type": "string"},
                        "url": {"type": "string"},
                        "text": {"type": "string"},
                        "score": {"type": "number"}
                    },
                    "required": ["chunkId", "title", "text", "score"]
                }}},
                "required": ["results"]
            })))
            .with_annotations(ToolAnnotations::new().read_only(true).open_world(false)),
        },
    ]
});

/// The caller [`serve`] put on the request. Errors: an internal JSON-RPC error when missing.
fn caller(context: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("the request's caller is unknown", None))
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_protocol_version(PROTOCOL_VERSION)
            .with_server_info(
                Implementation::new("agentchat", env!("CARGO_PKG_VERSION")).with_title("AgentChat"),
            )
            .with_instructions(
                "The agents of one AgentChat account. list_agents gives their ids; ask_agent \
                 chats with one (pass threadId back to continue a conversation); \
                 search_knowledge searches an agent's knowledge base.",
            )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&PROTOCOL_VERSION))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        TOOLS
            .iter()
            .find(|o| o.tool.name == name)
            .map(|o| o.tool.clone())
    }

    /// The tools the caller's scopes allow (a session holds every scope).
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = caller(&context)?;
        let tools = TOOLS
            .iter()
            .filter(|o| caller.principal.require(o.scope).is_ok())
            .map(|o| o.tool.clone())
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    /// Runs a tool. An unknown or disallowed tool, or arguments breaking its schema, are
    /// JSON-RPC `-32602` (MCP 2025-06-18 § Tools, error handling); failures while it runs are
    /// a result with `isError: true` and the reason as text.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller(&context)?;
        let name = request.name.as_ref();
        let Some(offered) = TOOLS.iter().find(|o| o.tool.name == name) else {
            return Err(invalid(
                format!("Unknown tool: {name}"),
                json!({"tool": name}),
            ));
        };
        if caller.principal.require(offered.scope).is_err() {
            let scope = offered.scope.as_str();
            return Err(invalid(
                format!(
                    "The tool {name} needs the {scope} scope, which this credential does not hold"
                ),
                json!({"tool": name, "requiredScope": scope}),
            ));
        }
        let arguments = Arguments(request.arguments.unwrap_or_default());
        let result = match name {
            "list_agents" => list_agents(&caller, &arguments).await?,
            "ask_agent" => ask_agent(&caller, &arguments).await?,
            _ => search_knowledge(&caller, &arguments).await?,
        };
        Ok(result.into())
    }
}

/// A JSON-RPC invalid params error (`-32602`) with `data`.
fn invalid(message: String, data: Value) -> ErrorData {
    ErrorData::new(ErrorCode::INVALID_PARAMS, message, Some(data))
}

/// A tool call's arguments, checked against its input schema field by field.
struct Arguments(JsonObject);

impl Arguments {
    /// Errors: `-32602` naming the first argument not in `known`.
    fn only(&self, known: &[&str]) -> Result<(), ErrorData> {
        match self.0.keys().find(|k| !known.contains(&k.as_str())) {
            Some(field) => Err(invalid(
                format!("Unknown argument `{field}`"),
                json!({"field": field}),
            )),
            None => Ok(()),
        }
    }

    /// The string `field`; `None` when absent or null. Errors: `-32602` for another type.
    fn string(&self, field: &str) -> Result<Option<&str>, ErrorData> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(invalid(
                format!("Argument `{field}` must be a string"),
                json!({"field": field}),
            )),
        }
    }

    /// The string `field`. Errors: `-32602` when missing or not a string.
    fn required(&self, field: &str) -> Result<&str, ErrorData> {
        self.string(field)?.ok_or_else(|| {
            invalid(
                format!("Argument `{field}` is required (a string)"),
                json!({"field": field}),
            )
        })
    }

    /// The integer `field` in `min..=max`; `None` when absent or null.
    /// Errors: `-32602` when it is not such an integer.
    fn integer(&self, field: &str, min: u32, max: u32) -> Result<Option<u32>, ErrorData> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value
                .as_u64()
                .filter(|n| (u64::from(min)..=u64::from(max)).contains(n))
                .map(|n| Some(n as u32))
                .ok_or_else(|| {
                    invalid(
                        format!("Argument `{field}` must be an integer from {min} to {max}"),
                        json!({"field": field}),
                    )
                }),
        }
    }
}

/// A result with `structured` as `structuredContent` and `text` as its text content.
fn structured(text: String, structured: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    result
}

/// A result with `structured` as `structuredContent` and its JSON as text (MCP 2025-06-18
/// § Tools, structured content).
fn structured_json(value: Value) -> CallToolResult {
    structured(value.to_string(), value)
}

/// A failed tool execution: `isError: true` with the contract's message of `err` (internal
/// errors are logged and answered with the generic message).
fn failed(err: impl Into<ApiError>) -> CallToolResult {
    let err = err.into();
    if let ApiError::Internal(e) = &err {
        tracing::error!(error = ?e, "an MCP tool call failed");
    }
    CallToolResult::error(vec![ContentBlock::text(err.body().message)])
}

/// `list_agents`: `{agents: [{id, name, description, model}]}`, oldest first.
async fn list_agents(caller: &Caller, arguments: &Arguments) -> Result<CallToolResult, ErrorData> {
    arguments.only(&[])?;
    let agents = match caller.state.agents.usable(&caller.principal).await {
        Ok(agents) => agents,
        Err(e) => return Ok(failed(e)),
    };
    let agents: Vec<Value> = agents
        .iter()
        .map(|a| {
            json!({"id": a.id.to_string(), "name": a.name, "description": a.description,
                   "model": a.model})
        })
        .collect();
    Ok(structured_json(json!({ "agents": agents })))
}

/// `ask_agent`: one chat turn as `POST /api/agents/{agentId}/chat` answers it in JSON, with
/// no approval tools; text is the reply, `structuredContent` `{message, threadId, sources}`.
async fn ask_agent(caller: &Caller, arguments: &Arguments) -> Result<CallToolResult, ErrorData> {
    arguments.only(&["agentId", "message", "threadId"])?;
    let agent_id = AgentId::from(arguments.required("agentId")?);
    let message = arguments.required("message")?;
    let thread_id = arguments.string("threadId")?.map(ThreadId::from);
    if message.trim().is_empty() {
        return Ok(failed(ApiError::bad_request("message must not be empty")));
    }
    let state = &caller.state;
    if let Err(e) = state.chat.check_message(message) {
        return Ok(failed(e));
    }
    if !caller.principal.may_use(&agent_id) {
        return Ok(failed(ApiError::not_found("Agent")));
    }
    let agent = match state
        .agents
        .owned(&caller.principal.user_id, &agent_id)
        .await
    {
        Ok(agent) => agent,
        Err(e) => return Ok(failed(e)),
    };
    let thread = match &thread_id {
        Some(id) => ThreadChoice::Id(id),
        None => ThreadChoice::New,
    };
    let prepared = state
        .chat
        .prepare_with(
            &agent,
            &caller.principal.user_id,
            thread,
            message,
            &[],
            &TurnOptions {
                channel: Channel::Mcp,
                payer: Payer::of(&caller.principal),
                ..TurnOptions::default()
            },
        )
        .await;
    let mut prepared = match prepared {
        Ok(prepared) => prepared,
        Err(e) => return Ok(failed(e)),
    };
    let reply = match state.chat.complete(&mut prepared).await {
        Ok(reply) => reply,
        Err(e) => return Ok(failed(e)),
    };
    let value = json!({
        "message": reply.text,
        "threadId": prepared.thread.id.to_string(),
        "sources": prepared.sources,
    });
    Ok(structured(reply.text, value))
}

/// One passage of `search_knowledge`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Passage {
    chunk_id: String,
    title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    text: String,
    score: f64,
}

/// `search_knowledge`: the agent's best chunks for `query` (docs/api.md § Retrieval),
/// `limit` 1–20 (default 5), as `{results: [{chunkId, title, url?, text, score}]}`.
async fn search_knowledge(
    caller: &Caller,
    arguments: &Arguments,
) -> Result<CallToolResult, ErrorData> {
    arguments.only(&["agentId", "query", "limit"])?;
    let agent_id = AgentId::from(arguments.required("agentId")?);
    let query = arguments.required("query")?;
    let limit = arguments
        .integer("limit", 1, SEARCH_LIMIT_MAX)?
        .unwrap_or(SEARCH_LIMIT_DEFAULT);
    if query.trim().is_empty() {
        return Ok(failed(ApiError::bad_request("query must not be empty")));
    }
    let state = &caller.state;
    if !caller.principal.may_use(&agent_id) {
        return Ok(failed(ApiError::not_found("Agent")));
    }
    if let Err(e) = state
        .agents
        .owned(&caller.principal.user_id, &agent_id)
        .await
    {
        return Ok(failed(e));
    }
    let hits = match retrieve::hybrid(&state.knowledge, &agent_id, query, limit).await {
        Ok(hits) => hits,
        Err(e) => return Ok(failed(e)),
    };
    let results: Vec<Passage> = hits
        .into_iter()
        .map(|h| Passage {
            chunk_id: h.chunk_id.to_string(),
            title: h.title,
            url: h.url,
            text: h.text,
            score: (h.score * 1000.0).round() / 1000.0,
        })
        .collect();
    Ok(structured_json(json!({ "results": results })))
}
