//! Streamed chat completions: a reply's frames ([`Relay`]) as OpenAI's
//! `chat.completion.chunk` events, in OpenAI's order (role, text, tool calls, finish with
//! the `agentchat` extension, optional usage, `[DONE]`). The first frame is awaited before
//! answering, so an early provider failure is an HTTP error (502, 504) as OpenAI's SDKs
//! expect; a later one is an `error` event before `[DONE]`.

use std::{collections::VecDeque, convert::Infallible};

use axum::{
    http::HeaderValue,
    response::{sse::Event as SseEvent, Response},
};

use super::{
    error::OpenAiError,
    extension,
    wire::{
        finish_reason, AgentChatExtension, ChatCompletionChunk, ChatCompletionChunkChoice,
        ChatCompletionDelta, ChatCompletionToolCallDelta, CompletionUsage, FunctionCallDelta,
    },
};
use crate::{
    chat::{Frame, PreparedChat, Relay},
    services::AppState,
};

/// What every chunk of one stream repeats.
pub struct Meta {
    /// `chatcmpl-` and the conversation's id.
    pub id: String,
    /// Unix seconds.
    pub created: i64,
    /// The agent id, as requested.
    pub model: String,
}

/// A stream's state between two events.
struct Chunks {
    relay: Relay,
    meta: Meta,
    include_usage: bool,
    /// Sent with the finishing chunk.
    extension: Option<AgentChatExtension>,
    /// Events made and not yet sent.
    queued: VecDeque<SseEvent>,
}

impl Chunks {
    fn chunk(
        &self,
        delta: ChatCompletionDelta,
        finish: Option<String>,
        extension: Option<AgentChatExtension>,
    ) -> ChatCompletionChunk {
        ChatCompletionChunk {
            id: self.meta.id.clone(),
            object: "chat.completion.chunk".into(),
            created: self.meta.created,
            model: self.meta.model.clone(),
            choices: vec![ChatCompletionChunkChoice {
                index: 0,
                delta,
                logprobs: None,
                finish_reason: finish,
            }],
            usage: self.include_usage.then_some(None),
            agentchat: extension,
        }
    }

    /// Queues the events of `frame`.
    fn push(&mut self, frame: Frame) {
        match frame {
            Frame::Chunk(text) => {
                let chunk = self.chunk(
                    ChatCompletionDelta {
                        content: Some(text),
                        ..ChatCompletionDelta::default()
                    },
                    None,
                    None,
                );
                self.queued.push_back(event(&chunk));
            }
            Frame::ClientToolCalls(calls) => {
                // As OpenAI streams a call: its id, type and name with empty arguments,
                // then the arguments' text.
                for (index, call) in calls.into_iter().enumerate() {
                    let index = index as u32;
                    let opening = ChatCompletionToolCallDelta {
                        index,
                        id: Some(call.id),
                        kind: Some("function".into()),
                        function: FunctionCallDelta {
                            name: Some(call.name),
                            arguments: Some(String::new()),
                        },
                    };
                    let arguments = ChatCompletionToolCallDelta {
                        index,
                        id: None,
                        kind: None,
                        function: FunctionCallDelta {
                            name: None,
                            arguments: Some(call.arguments),
                        },
                    };
                    for piece in [opening, arguments] {
                        let chunk = self.chunk(
                            ChatCompletionDelta {
                                tool_calls: Some(vec![piece]),
                                ..ChatCompletionDelta::default()
                            },
                            None,
                            None,
                        );
                        self.queued.push_back(event(&chunk));
                    }
                }
            }
            Frame::Summary { usage, finish, .. } => {
                let extension = self.extension.take();
                let last = self.chunk(
                    ChatCompletionDelta::default(),
                    Some(finish_reason(finish)),
                    extension,
                );
                self.queued.push_back(event(&last));
                if self.include_usage {
                    let mut usage_chunk = self.chunk(ChatCompletionDelta::default(), None, None);
                    usage_chunk.choices.clear();
                    usage_chunk.usage = Some(Some(CompletionUsage::from(usage)));
                    self.queued.push_back(event(&usage_chunk));
                }
            }
            Frame::Failed(e) => {
                let body = OpenAiError::from(e).body();
                self.queued.push_back(
                    SseEvent::default().data(serde_json::to_string(&body).unwrap_or_default()),
                );
            }
            Frame::Done => self.queued.push_back(SseEvent::default().data("[DONE]")),
            // The agent's own tool calls run inside the reply; OpenAI's stream has no event
            // for them.
            Frame::ToolCall(_) | Frame::Pending(_) => {}
        }
    }

    /// The next event; `None` after `[DONE]`, which is sent once the relay has persisted the
    /// reply.
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(event) = self.queued.pop_front() {
                return Some(event);
            }
            match self.relay.next_frame().await {
                Some(Frame::Done) => {
                    // The reply is persisted before `[DONE]` is sent: clients stop reading
                    // there, and may look the conversation up at once.
                    while self.relay.next_frame().await.is_some() {}
                    self.push(Frame::Done);
                }
                Some(frame) => self.push(frame),
                None => return None,
            }
        }
    }
}

fn event(chunk: &ChatCompletionChunk) -> SseEvent {
    SseEvent::default().data(serde_json::to_string(chunk).unwrap_or_default())
}

/// Streams `prepared`'s reply as `chat.completion.chunk` events.
///
/// Errors: a provider failure before the first token, as [`OpenAiError`] (502, 504); the
/// reply is stored as failed all the same.
pub async fn reply(
    state: &AppState,
    prepared: PreparedChat,
    meta: Meta,
    include_usage: bool,
) -> Result<Response, OpenAiError> {
    let extension = Some(extension(&prepared));
    let thread_id = HeaderValue::from_str(prepared.thread.id.as_str()).ok();
    // The relay always makes the summary: it carries the finish reason.
    let mut relay = Relay::new(state.chat.clone(), prepared, true);
    let first = relay.next_frame().await;
    if let Some(Frame::Failed(e)) = first {
        // Dropping the relay persists the failed reply.
        return Err(e.into());
    }
    let mut chunks = Chunks {
        relay,
        meta,
        include_usage,
        extension,
        queued: VecDeque::new(),
    };
    let opening = chunks.chunk(
        ChatCompletionDelta {
            role: Some("assistant".into()),
            content: Some(String::new()),
            tool_calls: None,
        },
        None,
        None,
    );
    chunks.queued.push_back(event(&opening));
    if let Some(frame) = first {
        chunks.push(frame);
    }
    // Boxed, as the native stream's relay is (`http::chat::stream_reply`).
    let events = futures::stream::unfold(Box::new(chunks), |mut chunks| async move {
        let event = chunks.next().await?;
        Some((Ok::<_, Infallible>(event), chunks))
    });
    Ok(crate::http::chat::sse_response(state, events, thread_id))
}
