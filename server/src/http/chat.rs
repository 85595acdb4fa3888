//! `POST /api/agents/{agentId}/chat` (JSON or server-sent events) and an agent's
//! conversations (docs/api.md § Send message, § Events).

use std::{collections::VecDeque, convert::Infallible};

use app::api::{
    ApprovalRequest, ChatReply, ChatRequest, ChatStreamEvent, ConversationsResponse, ErrorBody,
    Feedback, FeedbackRequest, MessagesResponse, StreamOptions, SuccessResponse, TokensUsed,
    ToolCallView, STREAM_DONE,
};
use axum::{
    extract::State,
    http::{header, HeaderMap, HeaderValue},
    response::{
        sse::{Event as SseEvent, Sse},
        IntoResponse, Response,
    },
    Json,
};
use futures::StreamExt as _;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::instrument;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::openapi::{BadRequest, JsonBodyErrors, PayloadTooLarge, RateLimited};
use super::{
    extract::{ApiJson, ApiPath, ApiQuery, Auth},
    AppState,
};
use crate::{
    chat::ReplyStatus,
    chat::{
        history::PageRequest,
        quota::Payer,
        replies::{FrameStream, FramesGone, Owner, CANCELLED, INTERRUPTED},
        Attachment, Frame, PreparedChat, Relay, ThreadChoice, TurnOptions,
    },
    domain::{Channel, Scope},
    http::error::{add_quota_headers, ApiError, ApiResult},
    ids::{AgentId, MessageId, ThreadId},
    store::Rating,
    tools::{service::pending_view, ApprovalError, Decided},
    views::{conversation_view, feedback_view, message_view},
};

/// The chat routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(send))
        .routes(routes!(conversations))
        .routes(routes!(messages))
        .routes(routes!(delete_conversation))
        .routes(routes!(rate, clear_rating))
        .routes(routes!(approve))
        .routes(routes!(resume))
        .routes(routes!(cancel))
}

/// Approve or deny a tool call the turn stopped for, and continue the turn: answered as
/// chat answers (JSON, or with `stream: true` server-sent events). While other calls of
/// the same reply still wait, the answer carries this call's outcome and the calls left.
#[utoipa::path(post, path = "/api/agents/{agentId}/conversations/{threadId}/approvals", tag = "chat", security(("bearer" = [])),
    request_body = ApprovalRequest,
    params(("agentId" = String, Path, description = "Agent id"), ("threadId" = String, Path, description = "Thread id")),
    responses(
        (status = 200, description = "The continued reply, as chat answers it", content((ChatReply = "application/json"), (ChatStreamEvent = "text/event-stream"))),
        (status = 400, response = BadRequest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "Unknown agent, thread or tool call", body = ErrorBody),
        (status = 409, description = "The call was already decided, or its approval expired, or another reply of the conversation is in progress", body = ErrorBody),
        (status = 502, body = ErrorBody), (status = 504, body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn approve(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath((agent_id, thread_id)): ApiPath<(AgentId, ThreadId)>,
    ApiJson(body): ApiJson<ApprovalRequest>,
) -> ApiResult<Response> {
    principal.require(Scope::ChatWrite)?;
    let agent = state.agents.owned(&principal.user_id, &agent_id).await?;
    let thread = state
        .chat
        .thread(&principal.user_id, &agent_id, &thread_id)
        .await?;
    let call_id = crate::ids::ToolCallId::from(body.tool_call_id.as_str());
    let decided = state
        .tools
        .decide(&agent, &thread.id, &call_id, body.approved)
        .await
        .map_err(|e| match e {
            ApprovalError::NotFound => ApiError::not_found("Tool call"),
            e @ (ApprovalError::Decided(_) | ApprovalError::Expired) => {
                ApiError::Conflict(e.to_string())
            }
            ApprovalError::Store(e) => e.into(),
        })?;
    let options = body.stream_options.unwrap_or_default();
    match decided {
        Decided::Continue(views) => {
            let prepared = state
                .chat
                .continue_turn(&agent, thread, views, Payer::of(&principal))
                .await?;
            if body.stream {
                Ok(stream_reply(&state, prepared, options, false))
            } else {
                json_reply(&state, prepared).await
            }
        }
        Decided::Waiting(view, pending) => {
            let reply = ChatReply {
                message: String::new(),
                model: agent.model.clone(),
                tokens_used: TokensUsed {
                    prompt: 0,
                    completion: 0,
                    total: 0,
                },
                rag_chunks_used: 0,
                thread_id: thread.id.to_string(),
                sources: Vec::new(),
                tool_calls: vec![(*view).clone()],
                pending_approvals: pending,
            };
            if !body.stream {
                return Ok(Json(reply).into_response());
            }
            let mut frames = Vec::new();
            if options.include_tool_calls {
                frames.extend(sse(Frame::ToolCall(*view), true));
            }
            frames.extend(sse(Frame::Pending(reply.pending_approvals), false));
            frames.extend(sse(Frame::Done, false));
            let events = futures::stream::iter(
                frames
                    .into_iter()
                    .enumerate()
                    .map(|(i, event)| Ok::<_, Infallible>(event.id((i + 1).to_string()))),
            );
            Ok(sse_response(
                &state,
                events,
                HeaderValue::from_str(thread.id.as_str()).ok(),
            ))
        }
    }
}

/// Send a message and receive the reply, as JSON or (with `stream: true`) as server-sent
/// events: `data: {"chunk": "..."}` frames in order, each with an `id:` from 1, then
/// `data: [DONE]`. With `resumable: true` the reply outlives its client and can be resumed
/// (`GET .../stream`) or cancelled (`POST .../cancel`); with `queue: true` a message sent
/// while the conversation's previous reply is in progress waits for it instead of 409.
#[utoipa::path(post, path = "/api/agents/{agentId}/chat", tag = "chat", security(("bearer" = [])), request_body = ChatRequest,
    params(("agentId" = String, Path, description = "Agent id")),
    responses(
        (status = 200, description = "The reply: `application/json` by default; with `stream: true`, `text/event-stream` of \
            `data: {\"chunk\": \"...\"}` frames (with `streamOptions.includeUsage`, a usage frame after them), then `data: [DONE]`; \
            a failure after the stream started is a `data: {\"error\", \"message\"}` frame, then `data: [DONE]`",
            content((ChatReply = "application/json"), (ChatStreamEvent = "text/event-stream")),
            headers(("X-Thread-Id" = String, description = "The reply's thread id (streams)"),
                ("X-Reply-Id" = String, description = "The reply's message id (streams)"))),
        (status = 400, response = BadRequest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "The conversation's previous reply is still in progress (without `queue`), or this JSON reply was cancelled", body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
        (status = 415, description = "The body is not sent as `application/json`, or an attachment is not UTF-8 text or Markdown", body = ErrorBody),
        (status = 502, body = ErrorBody), (status = 504, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn send(
    State(state): State<AppState>,
    Auth(principal): Auth,
    headers: HeaderMap,
    ApiPath(agent_id): ApiPath<AgentId>,
    ApiJson(body): ApiJson<ChatRequest>,
) -> ApiResult<Response> {
    principal.require(Scope::ChatWrite)?;
    if body.message.trim().is_empty() {
        return Err(ApiError::bad_request("message must not be empty"));
    }
    // The message alone first, before anything is read; with its attachments' text once
    // they are decoded ([`crate::chat::ChatService::prepare`]).
    state.chat.check_message(&body.message)?;
    let agent = state.agents.owned(&principal.user_id, &agent_id).await?;
    let thread_id = body.thread_id.as_deref().map(ThreadId::from);
    let thread = match &thread_id {
        Some(id) => ThreadChoice::Id(id),
        None => ThreadChoice::New,
    };
    // A person reads this reply: tools that need approval may be offered. The identity
    // middleware reads a bearer value first: without one, the caller is the dashboard's
    // session cookie.
    let turn = TurnOptions {
        approvals: true,
        channel: match headers.contains_key(header::AUTHORIZATION) {
            true => Channel::Api,
            false => Channel::Dashboard,
        },
        payer: Payer::of(&principal),
        queue: body.queue,
        ..TurnOptions::default()
    };
    let attachments: Vec<Attachment> = body
        .attachments
        .into_iter()
        .map(|a| Attachment {
            filename: a.filename,
            content_type: a.content_type,
            data: a.data,
        })
        .collect();
    let prepared = state
        .chat
        .prepare_with(
            &agent,
            &principal.user_id,
            thread,
            &body.message,
            &attachments,
            &turn,
        )
        .await?;
    let options = body.stream_options.unwrap_or_default();
    let quota = prepared.quota.clone();
    let mut response = if body.stream {
        stream_reply(&state, prepared, options, body.resumable)
    } else {
        json_reply(&state, prepared).await?
    };
    if let Some(quota) = &quota {
        add_quota_headers(response.headers_mut(), quota);
    }
    Ok(response)
}

async fn json_reply(state: &AppState, mut prepared: PreparedChat) -> ApiResult<Response> {
    let reply = state.chat.complete(&mut prepared).await?;
    Ok(Json(ChatReply {
        message: reply.text,
        model: prepared.model.id.clone(),
        tokens_used: reply.usage,
        rag_chunks_used: prepared.sources.len() as u32,
        thread_id: prepared.thread.id.clone().into(),
        sources: prepared.sources,
        tool_calls: reply.tool_calls,
        pending_approvals: reply.pending_approvals,
    })
    .into_response())
}

fn frame(value: serde_json::Value) -> SseEvent {
    SseEvent::default().data(value.to_string())
}

/// The data of a chunk frame, `{"chunk":"..."}`, serialized straight from the text.
#[derive(serde::Serialize)]
struct ChunkData<'a> {
    chunk: &'a str,
}

/// A tool call frame's `toolCall`: a starting call with its arguments, an ended one with
/// its outcome (docs/api.md § Tools).
fn tool_call_frame(view: ToolCallView) -> serde_json::Value {
    let call = if view.status == "running" {
        json!({"id": view.id, "name": view.name, "type": view.tool_type,
               "arguments": view.arguments, "status": view.status})
    } else {
        let mut call = json!({"id": view.id, "name": view.name, "type": view.tool_type,
               "status": view.status, "output": view.output, "durationMs": view.duration_ms});
        if let Some(error) = view.error {
            call["error"] = json!(error);
        }
        call
    };
    json!({"chunk": "", "toolCall": call})
}

/// A streamed frame as a server-sent event; tool-call frames only with
/// `include_tool_calls`.
fn sse(f: Frame, include_tool_calls: bool) -> Option<SseEvent> {
    Some(match f {
        Frame::ToolCall(view) if include_tool_calls => frame(tool_call_frame(view)),
        Frame::ToolCall(_) => return None,
        // Native chat never offers client tools.
        Frame::ClientToolCalls(_) => return None,
        Frame::Pending(list) => frame(json!({"chunk": "", "pendingApprovals": list})),
        // `json_data` writes the JSON into the event's own buffer: no intermediate value.
        Frame::Chunk(d) => SseEvent::default()
            .json_data(ChunkData { chunk: &d })
            .unwrap_or_else(|_| SseEvent::default().data("{}")),
        Frame::Summary {
            usage,
            model,
            thread_id,
            reply_id,
            sources,
            ..
        } => frame(summary_json(usage, model, thread_id, reply_id, sources)),
        Frame::Failed(e) => {
            let err = ApiError::from(e).body();
            frame(json!({ "error": err.error, "message": err.message }))
        }
        Frame::Done => SseEvent::default().data("[DONE]"),
    })
}

/// The SSE data of a frame as [`sse`] writes it, for the frames kept for resumption.
fn sse_data(f: Frame, include_tool_calls: bool) -> Option<String> {
    Some(match f {
        Frame::Chunk(d) => serde_json::to_string(&ChunkData { chunk: &d }).ok()?,
        Frame::Done => STREAM_DONE.to_string(),
        Frame::ToolCall(view) if include_tool_calls => tool_call_frame(view).to_string(),
        Frame::ToolCall(_) | Frame::ClientToolCalls(_) => return None,
        Frame::Pending(list) => json!({"chunk": "", "pendingApprovals": list}).to_string(),
        Frame::Failed(e) => error_data(ApiError::from(e)),
        Frame::Summary {
            usage,
            model,
            thread_id,
            reply_id,
            sources,
            ..
        } => summary_json(usage, model, thread_id, reply_id, sources).to_string(),
    })
}

/// A usage frame (docs/api.md § Chat stream).
fn summary_json(
    usage: TokensUsed,
    model: String,
    thread_id: ThreadId,
    reply_id: MessageId,
    sources: Vec<app::api::Source>,
) -> serde_json::Value {
    json!({
        "chunk": "",
        "usage": usage,
        "model": model,
        "ragChunksUsed": sources.len(),
        "threadId": thread_id,
        "replyId": reply_id,
        "sources": sources,
    })
}

/// An error frame's data: `{"error", "message"}`.
fn error_data(err: ApiError) -> String {
    let body = err.body();
    json!({ "error": body.error, "message": body.message }).to_string()
}

/// How a reply stopped before its end is stored, and the error frame that tells its clients.
fn stopped_frame(status: ReplyStatus) -> (&'static str, String) {
    match status {
        ReplyStatus::Interrupted => (
            INTERRUPTED,
            error_data(ApiError::Status {
                status: axum::http::StatusCode::SERVICE_UNAVAILABLE,
                message: format!("The reply was interrupted: {INTERRUPTED}. It is stored as interrupted with the text generated so far."),
            }),
        ),
        _ => (
            CANCELLED,
            error_data(crate::chat::ChatError::Cancelled.into()),
        ),
    }
}

/// The frame that ends a stream when its instance's grace period is over: no id, no
/// `[DONE]`; the client resumes elsewhere.
fn resume_elsewhere(agent_id: &AgentId, thread_id: &ThreadId) -> SseEvent {
    SseEvent::default().data(error_data(ApiError::Status {
        status: axum::http::StatusCode::SERVICE_UNAVAILABLE,
        message: format!(
            "This server is shutting down: resume the reply with GET /api/agents/{agent_id}/conversations/{thread_id}/stream and the Last-Event-ID of the last frame received"
        ),
    }))
}

/// Streams the reply. Without `resumable` the body polls the provider through [`Relay`]: a
/// client that leaves drops it, cancelling the provider request and storing the partial
/// reply as cancelled. With `resumable` the reply is generated by a task of its own whose
/// frames are kept ([`crate::chat::replies`]); the body follows them. Either way each frame
/// has an SSE id from 1, and `X-Reply-Id` names the reply.
pub(crate) fn stream_reply(
    state: &AppState,
    prepared: PreparedChat,
    options: StreamOptions,
    resumable: bool,
) -> Response {
    let ids = (
        crate::chat::owner_of(&prepared.thread),
        prepared.thread.id.clone(),
        prepared.reply_id.clone(),
    );
    // Boxed: each frame's future takes the relay and gives it back, a pointer's move
    // rather than the whole relay's.
    let relay = Box::new(Relay::new(
        state.chat.clone(),
        prepared,
        options.include_usage,
    ));
    if resumable {
        return stream_resumable(state, relay, options.include_tool_calls, ids);
    }
    let include_tool_calls = options.include_tool_calls;
    struct Direct {
        relay: Option<Box<Relay>>,
        cancel: CancellationToken,
        grace: CancellationToken,
        sent: u64,
        last: VecDeque<String>,
    }
    let direct = Direct {
        cancel: relay.cancel_token(),
        relay: Some(relay),
        grace: state.chat.replies().grace_token(),
        sent: 0,
        last: VecDeque::new(),
    };
    let events = futures::stream::unfold(direct, move |mut st| async move {
        loop {
            if let Some(data) = st.last.pop_front() {
                st.sent += 1;
                let event = SseEvent::default().id(st.sent.to_string()).data(data);
                return Some((Ok::<_, Infallible>(event), st));
            }
            let relay = st.relay.as_mut()?;
            match next_or_stop(relay, &st.cancel, &st.grace).await {
                Ok(Some(frame)) => {
                    if let Some(event) = sse(frame, include_tool_calls) {
                        st.sent += 1;
                        return Some((Ok(event.id(st.sent.to_string())), st));
                    }
                }
                Ok(None) => return None,
                Err(status) => {
                    let relay = st.relay.take()?;
                    let (reason, frame) = stopped_frame(status);
                    // Boxed: storing the reply is a large future, needed once, that would
                    // otherwise widen every open stream's state.
                    Box::pin(relay.stop(status, reason)).await;
                    st.last.extend([frame, STREAM_DONE.to_string()]);
                }
            }
        }
    });
    let mut response = sse_response(state, events, HeaderValue::from_str(ids.1.as_str()).ok());
    add_reply_id(&mut response, &ids.2);
    response
}

/// The relay's next frame, or why the reply must stop now: cancelled once `cancel` is,
/// interrupted once `shutdown` is.
async fn next_or_stop(
    relay: &mut Relay,
    cancel: &CancellationToken,
    shutdown: &CancellationToken,
) -> Result<Option<Frame>, ReplyStatus> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(ReplyStatus::Cancelled),
        () = shutdown.cancelled() => Err(ReplyStatus::Interrupted),
        frame = relay.next_frame() => Ok(frame),
    }
}

fn add_reply_id(response: &mut Response, reply_id: &MessageId) {
    if let Ok(v) = HeaderValue::from_str(reply_id.as_str()) {
        response.headers_mut().insert("x-reply-id", v);
    }
}

/// [`stream_reply`] of a resumable reply: its generation runs to its end, cancel or the end of
/// the shutdown's handover whatever the client does, keeping every frame in the reply's log.
fn stream_resumable(
    state: &AppState,
    mut relay: Box<Relay>,
    include_tool_calls: bool,
    (owner, thread_id, reply_id): (Owner, ThreadId, MessageId),
) -> Response {
    let agent_id = owner.agent_id.clone();
    let replies = state.chat.replies().clone();
    let log = replies.open_log(&thread_id, &reply_id, &owner);
    let cancel = relay.cancel_token();
    let handover = replies.handover_token();
    let generation = {
        let (log, replies) = (log.clone(), replies.clone());
        async move {
            loop {
                match next_or_stop(&mut relay, &cancel, &handover).await {
                    Ok(Some(frame)) => {
                        if let Some(data) = sse_data(frame, include_tool_calls) {
                            log.push(data.into());
                        }
                    }
                    Ok(None) => break,
                    Err(status) => {
                        let (reason, frame) = stopped_frame(status);
                        Box::pin(relay.stop(status, reason)).await;
                        log.push(frame.into());
                        log.push(STREAM_DONE.into());
                        break;
                    }
                }
            }
            replies.finish_log(&log);
        }
    };
    replies.spawn(generation);
    let frames = replies.frames(log, 0);
    follow_response(state, frames, (&agent_id, &thread_id, &reply_id))
}

/// The `text/event-stream` answer that follows a reply's kept frames, each with its id; at
/// the end of the shutdown's grace period it ends with [`resume_elsewhere`].
fn follow_response(
    state: &AppState,
    frames: FrameStream,
    (agent_id, thread_id, reply_id): (&AgentId, &ThreadId, &MessageId),
) -> Response {
    let grace = state.chat.replies().grace_token();
    let cut = resume_elsewhere(agent_id, thread_id);
    // `cut` is taken by the last event: the stream ends after it.
    let events = futures::stream::unfold(
        (frames, grace, Some(cut)),
        |(mut frames, grace, mut cut)| async move {
            cut.as_ref()?;
            let event = tokio::select! {
                // Checked first: a reply whose frames keep coming is still cut.
                biased;
                () = grace.cancelled() => cut.take()?,
                frame = frames.next() => match frame? {
                    Ok((id, data)) => SseEvent::default().id(id.to_string()).data(&*data),
                    Err(FramesGone) => {
                        cut = None;
                        SseEvent::default().data(error_data(ApiError::Status {
                            status: axum::http::StatusCode::GONE,
                            message: "Frames of this reply were dropped before they were sent: read the reply from the conversation's messages".into(),
                        }))
                    }
                },
            };
            Some((Ok::<_, Infallible>(event), (frames, grace, cut)))
        },
    );
    let mut response = sse_response(
        state,
        events,
        HeaderValue::from_str(thread_id.as_str()).ok(),
    );
    add_reply_id(&mut response, reply_id);
    response
}

/// The header of a resume, as browsers' `EventSource` send it when they reconnect (read from
/// the request's headers by [`resume`]; this type only documents it).
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)]
struct ResumeHeaders {
    /// The id of the last frame received, a whole number (0: from the first).
    #[param(
        rename = "Last-Event-ID",
        nullable = false,
        minimum = 0,
        maximum = 9007199254740991_i64
    )]
    last_event_id: Option<u64>,
}

/// `Last-Event-ID` of a resume: the header, else `?lastEventId=`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ResumeQuery {
    /// The id of the last frame received (0 or absent: from the first); the
    /// `Last-Event-ID` header wins when both are sent.
    #[param(minimum = 0, maximum = 9007199254740991_i64)]
    last_event_id: Option<u64>,
}

/// Continue the thread's reply in progress (or finished within the last 10 minutes) from the
/// frame after `Last-Event-ID`: the frames are those of its stream, with their ids, each
/// sent once, ending with `[DONE]`. Works on any instance (docs/api.md § Resumable streams).
#[utoipa::path(get, path = "/api/agents/{agentId}/conversations/{threadId}/stream", tag = "chat", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id"), ("threadId" = String, Path, description = "Thread id"),
        ResumeHeaders, ResumeQuery),
    responses(
        (status = 200, description = "The rest of the reply's stream", content_type = "text/event-stream", body = ChatStreamEvent,
            headers(("X-Thread-Id" = String, description = "The thread"), ("X-Reply-Id" = String, description = "The reply's message id"))),
        (status = 400, response = BadRequest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "Unknown agent or thread, or no resumable reply of the thread in progress or finished in the last 10 minutes, or its frames after that id are no longer kept", body = ErrorBody),
        RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn resume(
    State(state): State<AppState>,
    Auth(principal): Auth,
    headers: HeaderMap,
    ApiPath((agent_id, thread_id)): ApiPath<(AgentId, ThreadId)>,
    ApiQuery(query): ApiQuery<ResumeQuery>,
) -> ApiResult<Response> {
    principal.require(Scope::ChatRead)?;
    let last = match headers.get("last-event-id") {
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| {
                ApiError::bad_request("Last-Event-ID must be a frame id, a whole number")
            })?,
        None => query.last_event_id.unwrap_or(0),
    };
    // The registry knows whose each reply is: a new conversation is stored only when its
    // first reply ends.
    let owner = Owner {
        user_id: principal.user_id.clone(),
        agent_id: agent_id.clone(),
    };
    match state.chat.replies().follow(&thread_id, &owner, last).await {
        Ok(Some((reply_id, frames))) => Ok(follow_response(
            &state,
            frames,
            (&agent_id, &thread_id, &reply_id),
        )),
        Ok(None) => Err(ApiError::NotFound(
            "No resumable reply of this conversation is in progress or finished in the last 10 minutes".into(),
        )),
        Err(FramesGone) => Err(ApiError::NotFound(
            "The frames after that id are no longer kept: read the reply from the conversation's messages".into(),
        )),
    }
}

/// Stop the thread's reply in progress, on whichever instance generates it: it is stored as
/// `cancelled` with the text so far, and its stream ends with an error frame and `[DONE]`.
/// Answers once the thread is free for the next message (at most 5 s).
#[utoipa::path(post, path = "/api/agents/{agentId}/conversations/{threadId}/cancel", tag = "chat", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id"), ("threadId" = String, Path, description = "Thread id")),
    responses((status = 200, body = SuccessResponse), (status = 400, response = BadRequest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "Unknown agent or thread, or no reply in progress", body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn cancel(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath((agent_id, thread_id)): ApiPath<(AgentId, ThreadId)>,
) -> ApiResult<Json<SuccessResponse>> {
    principal.require(Scope::ChatWrite)?;
    let owner = Owner {
        user_id: principal.user_id.clone(),
        agent_id: agent_id.clone(),
    };
    let replies = state.chat.replies();
    if !replies.cancel(&thread_id, &owner).await {
        return Err(ApiError::NotFound(
            "No reply of this conversation is in progress".into(),
        ));
    }
    replies.wait_idle(&thread_id, CANCEL_WAIT).await;
    Ok(Json(SuccessResponse { success: true }))
}

/// The longest a cancel waits for the reply to be stored and the thread free.
const CANCEL_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The `text/event-stream` answer of a streamed reply: `events`, a `: ping` after each
/// `SSE_HEARTBEAT_SECS` of silence, `Cache-Control: no-cache`, `X-Accel-Buffering: no` and
/// `X-Thread-Id`.
pub(crate) fn sse_response(
    state: &AppState,
    events: impl futures::Stream<Item = Result<SseEvent, Infallible>> + Send + 'static,
    thread_id: Option<HeaderValue>,
) -> Response {
    let heartbeat = state.chat.config().sse_heartbeat;
    let events = crate::idle::idle(
        events,
        heartbeat,
        || Ok(SseEvent::default().comment("ping")),
    );
    let mut response = Sse::new(events).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if let Some(v) = thread_id {
        headers.insert("x-thread-id", v);
    }
    response
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct PageQuery {
    /// Page size, 1..=200 (default 50).
    limit: Option<u32>,
    /// `nextCursor` of the previous page.
    cursor: Option<String>,
}

impl From<PageQuery> for PageRequest {
    fn from(q: PageQuery) -> Self {
        Self {
            limit: q.limit,
            cursor: q.cursor,
        }
    }
}

/// The agent's conversation threads, most recently active first.
#[utoipa::path(get, path = "/api/agents/{agentId}/conversations", tag = "chat", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id"), PageQuery),
    responses((status = 200, body = ConversationsResponse), (status = 400, response = BadRequest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn conversations(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(agent_id): ApiPath<AgentId>,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> ApiResult<Json<ConversationsResponse>> {
    principal.require(Scope::ChatRead)?;
    state.agents.owned(&principal.user_id, &agent_id).await?;
    let page = state
        .chat
        .threads(&principal.user_id, &agent_id, &page.into())
        .await?;
    Ok(Json(ConversationsResponse {
        next_cursor: page.next_cursor,
        conversations: page.items.iter().map(conversation_view).collect(),
    }))
}

/// The messages of a thread, oldest first.
#[utoipa::path(get, path = "/api/agents/{agentId}/conversations/{threadId}/messages", tag = "chat", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id"), ("threadId" = String, Path, description = "Thread id"), PageQuery),
    responses((status = 200, body = MessagesResponse), (status = 400, response = BadRequest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn messages(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath((agent_id, thread_id)): ApiPath<(AgentId, ThreadId)>,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> ApiResult<Json<MessagesResponse>> {
    principal.require(Scope::ChatRead)?;
    let found = state
        .chat
        .messages(&principal.user_id, &agent_id, &thread_id, &page.into())
        .await?;
    let mut messages: Vec<_> = found.page.items.iter().map(message_view).collect();
    // The thread's latest reply (on the last page) shows the calls that still wait.
    if let Some((message_id, pending)) = found.pending {
        if let Some((_, view)) = found
            .page
            .items
            .iter()
            .zip(messages.iter_mut())
            .find(|(m, _)| m.id == message_id)
        {
            view.pending_approvals = Some(pending.iter().map(pending_view).collect());
        }
    }
    for feedback in &found.feedback {
        if let Some((_, view)) = found
            .page
            .items
            .iter()
            .zip(messages.iter_mut())
            .find(|(m, _)| m.id == feedback.message_id)
        {
            view.feedback = Some(feedback_view(feedback));
        }
    }
    Ok(Json(MessagesResponse {
        next_cursor: found.page.next_cursor,
        messages,
    }))
}

/// Rate a reply `up` or `down`, with an optional comment; replaces the reply's earlier
/// feedback (docs/api.md § Feedback).
#[utoipa::path(put, path = "/api/agents/{agentId}/conversations/{threadId}/messages/{messageId}/feedback", tag = "chat", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id"), ("threadId" = String, Path, description = "Thread id"), ("messageId" = String, Path, description = "Id of an assistant message")),
    request_body = FeedbackRequest,
    responses((status = 200, body = Feedback), (status = 400, response = BadRequest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn rate(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath((agent_id, thread_id, message_id)): ApiPath<(AgentId, ThreadId, MessageId)>,
    ApiJson(body): ApiJson<FeedbackRequest>,
) -> ApiResult<Json<Feedback>> {
    principal.require(Scope::ChatWrite)?;
    let rating = rating(&body.rating)?;
    let feedback = state
        .chat
        .rate(
            &principal.user_id,
            &agent_id,
            &thread_id,
            &message_id,
            rating,
            body.comment.as_deref(),
        )
        .await?;
    Ok(Json(feedback_view(&feedback)))
}

/// The rating `text` names. Errors: 400 unless `up` or `down`.
pub(super) fn rating(text: &str) -> ApiResult<Rating> {
    match text {
        "up" => Ok(Rating::Up),
        "down" => Ok(Rating::Down),
        other => Err(ApiError::BadRequest(format!(
            "rating must be \"up\" or \"down\", not {other:?}"
        ))),
    }
}

/// Remove a reply's feedback (answered alike whether it had any).
#[utoipa::path(delete, path = "/api/agents/{agentId}/conversations/{threadId}/messages/{messageId}/feedback", tag = "chat", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id"), ("threadId" = String, Path, description = "Thread id"), ("messageId" = String, Path, description = "Message id")),
    responses((status = 200, body = SuccessResponse), (status = 400, response = BadRequest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn clear_rating(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath((agent_id, thread_id, message_id)): ApiPath<(AgentId, ThreadId, MessageId)>,
) -> ApiResult<Json<SuccessResponse>> {
    principal.require(Scope::ChatWrite)?;
    state
        .chat
        .clear_rating(&principal.user_id, &agent_id, &thread_id, &message_id)
        .await?;
    Ok(Json(SuccessResponse { success: true }))
}

/// Delete a conversation thread with its messages.
#[utoipa::path(delete, path = "/api/agents/{agentId}/conversations/{threadId}", tag = "chat", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id"), ("threadId" = String, Path, description = "Thread id")),
    responses((status = 200, body = SuccessResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn delete_conversation(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath((agent_id, thread_id)): ApiPath<(AgentId, ThreadId)>,
) -> ApiResult<Json<SuccessResponse>> {
    principal.require(Scope::ChatWrite)?;
    state
        .chat
        .delete_thread(&principal.user_id, &agent_id, &thread_id)
        .await?;
    Ok(Json(SuccessResponse { success: true }))
}
