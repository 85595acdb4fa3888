//! The OpenAI-compatible API (docs/api.md § OpenAI-compatible API) at
//! `{PUBLIC_URL}/api/openai/v1`: agents as models, and chat completions run through
//! [`crate::chat::ChatService`] as stateless new conversations, with caller-run `tools`
//! (<https://platform.openai.com/docs/guides/function-calling>). Wire types in [`wire`],
//! errors in [`error`], streaming in [`stream`].

pub mod error;
pub mod stream;
pub mod wire;

use axum::{
    body::Bytes,
    extract::{rejection::BytesRejection, State},
    http::HeaderMap,
    response::{IntoResponse, Response},
    Extension, Json,
};
use tracing::instrument;
use utoipa_axum::{router::OpenApiRouter, routes};

pub use self::error::{is_openai_path, rewrite, OpenAiError, OpenAiErrorBody, PREFIX};
use self::wire::{
    finish_reason, AgentChatExtension, AgentModel, AgentModelExtension, AgentModelList,
    ChatCompletion, ChatCompletionAssistantMessage, ChatCompletionChoice,
    ChatCompletionMessageToolCall, ChatCompletionRequest, ChatCompletionStreamEvent,
};
use super::{
    error::{ApiError, NOT_JSON_MESSAGE},
    extract::{is_json_content_type, require_object, ApiPath, Identity},
    AppState,
};
use crate::{
    agents::AgentError,
    auth::Principal,
    chat::{quota::Payer, PreparedChat, ThreadChoice, TurnOptions},
    domain::{Channel, Scope},
    ids::AgentId,
    store::AgentRecord,
};

/// The 429 of every operation of the OpenAI-compatible API: the account's budget (README §
/// Limits) is spent; OpenAI's error body (`type` `requests`, `code` `rate_limit_exceeded`)
/// with the API's rate-limit headers.
#[derive(utoipa::IntoResponses)]
#[response(
    status = 429,
    description = "The account's request budget is spent (`rate_limit_exceeded`)",
    headers(
        ("Retry-After" = u64, description = "Seconds to wait before a request can succeed (RFC 9110 § 10.2.3)"),
        ("X-RateLimit-Limit" = u32, description = "Requests per minute of the budget"),
        ("X-RateLimit-Remaining" = u32, description = "Requests that may still be made now: 0"),
        ("X-RateLimit-Reset" = i64, description = "Unix epoch seconds at which the full budget is back")
    )
)]
pub struct RateLimited(#[to_schema] pub OpenAiErrorBody);

/// The routes under [`PREFIX`].
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_models))
        .routes(routes!(get_model))
        .routes(routes!(chat_completions))
}

/// The caller, or the 401 OpenAI answers: without a credential, or with one that is not
/// valid. A cookie-authenticated request without its CSRF token is refused with 403.
fn caller(identity: Option<Extension<Identity>>) -> Result<std::sync::Arc<Principal>, OpenAiError> {
    match identity.map(|Extension(i)| i) {
        Some(Identity::Authenticated(p)) => Ok(p),
        Some(Identity::CsrfRejected) => {
            Err(ApiError::from(crate::auth::AuthError::CsrfRejected).into())
        }
        Some(Identity::Invalid) => Err(OpenAiError::invalid_key()),
        Some(Identity::Anonymous) | None => Err(OpenAiError::missing_key()),
    }
}

/// Refuses a caller without `scope` (an API key created without it) with OpenAI's 403.
fn require(principal: &Principal, scope: Scope) -> Result<(), OpenAiError> {
    principal
        .require(scope)
        .map_err(|_| OpenAiError::missing_scope(scope.as_str()))
}

/// The agent `id` of `principal`; 404 `model_not_found` when it is unknown or someone
/// else's.
async fn agent_of(
    state: &AppState,
    principal: &Principal,
    id: &str,
    param: Option<&str>,
) -> Result<std::sync::Arc<AgentRecord>, OpenAiError> {
    if !principal.may_use(&AgentId::from(id)) {
        return Err(OpenAiError::model_not_found(id, param));
    }
    match state
        .agents
        .owned(&principal.user_id, &AgentId::from(id))
        .await
    {
        Ok(agent) => Ok(agent),
        Err(AgentError::NotFound) => Err(OpenAiError::model_not_found(id, param)),
        Err(e) => Err(ApiError::from(e).into()),
    }
}

fn model_of(agent: &AgentRecord) -> AgentModel {
    AgentModel {
        id: agent.id.as_str().to_string(),
        object: "model".into(),
        created: agent.created_at.timestamp(),
        owned_by: "agentchat".into(),
        agentchat: AgentModelExtension {
            name: agent.name.clone(),
            description: agent.description.clone(),
            model: agent.model.clone(),
        },
    }
}

/// List the caller's agents as models.
///
/// Each agent is a `model` whose `id` is the agent id, `created` its creation (Unix
/// seconds) and `owned_by` `agentchat`; the `agentchat` extension adds its name,
/// description and language model.
#[utoipa::path(get, path = "/api/openai/v1/models", tag = "openai", security(("bearer" = [])),
    responses(
        (status = 200, body = AgentModelList),
        (status = 401, description = "Missing or invalid API key or access token", body = OpenAiErrorBody),
        (status = 403, description = "The API key lacks `agents:read`", body = OpenAiErrorBody),
        RateLimited))]
#[instrument(skip_all)]
async fn list_models(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
) -> Result<Json<AgentModelList>, OpenAiError> {
    let principal = caller(identity)?;
    require(&principal, Scope::AgentsRead)?;
    let agents = state
        .agents
        .usable(&principal)
        .await
        .map_err(ApiError::from)?;
    Ok(Json(AgentModelList {
        object: "list".into(),
        data: agents.iter().map(model_of).collect(),
    }))
}

/// One of the caller's agents as a model.
#[utoipa::path(get, path = "/api/openai/v1/models/{model}", tag = "openai", security(("bearer" = [])),
    params(("model" = String, Path, description = "The agent id")),
    responses(
        (status = 200, body = AgentModel),
        (status = 400, description = "Malformed path", body = OpenAiErrorBody),
        (status = 401, description = "Missing or invalid API key or access token", body = OpenAiErrorBody),
        (status = 403, description = "The API key lacks `agents:read`", body = OpenAiErrorBody),
        (status = 404, description = "Not one of the caller's agents (`model_not_found`)", body = OpenAiErrorBody),
        RateLimited))]
#[instrument(skip_all)]
async fn get_model(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    path: Result<ApiPath<String>, ApiError>,
) -> Result<Json<AgentModel>, OpenAiError> {
    let principal = caller(identity)?;
    require(&principal, Scope::AgentsRead)?;
    let ApiPath(id) = path?;
    let agent = agent_of(&state, &principal, &id, None).await?;
    Ok(Json(model_of(&agent)))
}

/// The request body: JSON (415 otherwise), at most 1 MiB (413), an object (400), of the
/// request's shape (400 naming the field at fault).
fn parse_body(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<ChatCompletionRequest, OpenAiError> {
    if !is_json_content_type(headers) {
        return Err(ApiError::UnsupportedMediaType(NOT_JSON_MESSAGE.into()).into());
    }
    let body =
        body.map_err(|e| ApiError::from(axum::extract::rejection::JsonRejection::from(e)))?;
    require_object(&body)?;
    let mut deserializer = serde_json::Deserializer::from_slice(&body);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            OpenAiError::invalid(
                format!("We could not parse the JSON body of your request: {inner}"),
                None,
            )
        } else {
            let param = (path != ".").then_some(path);
            let at = param
                .as_deref()
                .map_or_else(String::new, |p| format!("`{p}`: "));
            OpenAiError::invalid(format!("Invalid request body: {at}{inner}"), param)
        }
    })
}

/// Create a chat completion with an agent.
///
/// `model` is the agent id. The agent's system prompt, knowledge (retrieved for the last
/// user message) and language model answer the conversation in `messages`; the call is
/// recorded as a new conversation of the agent.
///
/// With `tools` (at most 128 functions), the caller runs the tools: the agent's own are
/// neither offered nor run, and when the model calls some of the request's tools the answer
/// ends with `finish_reason: "tool_calls"` and `message.tool_calls` (streamed:
/// `delta.tool_calls` pieces). The caller sends the conversation again with that assistant
/// message and a `tool` message per call (`tool_call_id`). Without `tools`, the agent's own
/// tools run inside the completion and are not shown.
///
/// With `stream: true` the answer is
/// `text/event-stream`: `data: {chat.completion.chunk}` events (the first delta carries the
/// role, then content deltas, then a chunk with `finish_reason` and the `agentchat`
/// extension; with `stream_options.include_usage`, a usage chunk with `choices: []`), then
/// `data: [DONE]`; `: ping` comments during silences. A provider failure before the first
/// token is answered with its status (502, 504); after it, as a
/// `data: {"error": {...}}` event before `data: [DONE]`.
#[utoipa::path(post, path = "/api/openai/v1/chat/completions", tag = "openai", security(("bearer" = [])),
    request_body = ChatCompletionRequest,
    responses(
        (status = 200, description = "`application/json`: a `chat.completion`; with `stream: true`, `text/event-stream` of \
            `chat.completion.chunk` events, then `data: [DONE]`",
            content((ChatCompletion = "application/json"), (ChatCompletionStreamEvent = "text/event-stream"))),
        (status = 400, description = "Invalid request: `param` names the field (a bad tool, `tool_choice`, a `tool` message answering no call, a call without its `tool` message, tool calls without `tools`; unsupported features: images, `functions`, `custom` tools, `n` > 1)", body = OpenAiErrorBody),
        (status = 401, description = "Missing or invalid API key or access token", body = OpenAiErrorBody),
        (status = 403, description = "The API key lacks `chat:write`", body = OpenAiErrorBody),
        (status = 404, description = "`model` is not one of the caller's agents (`model_not_found`)", body = OpenAiErrorBody),
        (status = 413, description = "The body is over 1 MiB", body = OpenAiErrorBody),
        (status = 415, description = "The body is not sent as `application/json`", body = OpenAiErrorBody),
        (status = 502, description = "The model provider failed (`upstream_error`)", body = OpenAiErrorBody),
        (status = 504, description = "The model provider did not answer in time (`upstream_timeout`)", body = OpenAiErrorBody),
        RateLimited))]
#[instrument(skip_all, fields(agent.id = tracing::field::Empty))]
async fn chat_completions(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, OpenAiError> {
    let principal = caller(identity)?;
    require(&principal, Scope::ChatWrite)?;
    let checked = parse_body(&headers, body)?.check()?;
    state.chat.check_message(&checked.message)?;
    let agent = agent_of(&state, &principal, &checked.agent_id, Some("model")).await?;
    tracing::Span::current().record("agent.id", agent.id.as_str());
    let options = TurnOptions {
        instructions: checked.instructions,
        sampling: checked.sampling,
        // OpenAI's answer has no place for a call waiting for approval.
        approvals: false,
        client_tools: checked.client_tools,
        after: checked.after,
        channel: Channel::Openai,
        payer: Payer::of(&principal),
        // Its conversations are the request's own history: no stored thread to wait for.
        queue: false,
    };
    let prepared = state
        .chat
        .prepare_with(
            &agent,
            &principal.user_id,
            ThreadChoice::Given(checked.history),
            &checked.message,
            &[],
            &options,
        )
        .await?;
    let meta = stream::Meta {
        id: completion_id(&prepared),
        created: state.clock.now().timestamp(),
        model: checked.agent_id,
    };
    if checked.stream {
        stream::reply(&state, prepared, meta, checked.include_usage).await
    } else {
        let mut prepared = prepared;
        let reply = state.chat.complete(&mut prepared).await?;
        let tool_calls = (!reply.client_calls.is_empty()).then(|| {
            reply
                .client_calls
                .iter()
                .map(ChatCompletionMessageToolCall::from)
                .collect::<Vec<_>>()
        });
        // OpenAI's `content` is null in a reply of tool calls alone.
        let content = Some(reply.text).filter(|t| tool_calls.is_none() || !t.is_empty());
        Ok(Json(ChatCompletion {
            id: meta.id,
            object: "chat.completion".into(),
            created: meta.created,
            model: meta.model,
            choices: vec![ChatCompletionChoice {
                index: 0,
                message: ChatCompletionAssistantMessage {
                    role: "assistant".into(),
                    content,
                    refusal: None,
                    tool_calls,
                },
                logprobs: None,
                finish_reason: finish_reason(reply.finish),
            }],
            usage: reply.usage.into(),
            agentchat: extension(&prepared),
        })
        .into_response())
    }
}

/// The completion's id: `chatcmpl-` and the id of the conversation it is recorded as.
fn completion_id(prepared: &PreparedChat) -> String {
    format!("chatcmpl-{}", prepared.thread.id.as_str())
}

/// The `agentchat` extension of a reply.
fn extension(prepared: &PreparedChat) -> AgentChatExtension {
    AgentChatExtension {
        thread_id: prepared.thread.id.as_str().to_string(),
        model: prepared.model.id.clone(),
        rag_chunks_used: prepared.sources.len() as u32,
        sources: prepared.sources.clone(),
    }
}
