//! Streaming a reply: [`open_stream`] with retries before the first token,
//! [`usage_or_counted`], and [`Relay`], which a transport polls for [`Frame`]s.

use std::{collections::VecDeque, sync::Arc, time::Duration};

use app::api::{PendingApproval, Source, TokensUsed, ToolCallView};
use futures::StreamExt;
use tracing::{Instrument as _, Span};

use super::{writer::Urgency, ChatError, ChatService, PreparedChat, ReplyStatus};
use crate::{
    ids::{MessageId, ThreadId},
    llm::{
        tokens, Event, EventStream, FinishReason, ProviderError, ProviderErrorKind, ToolCall, Usage,
    },
};

/// Attempts at an upstream call before its first token (1 + 2 retries).
pub const UPSTREAM_ATTEMPTS: u32 = 3;
/// Backoff before the first retry; each later retry waits four times longer.
pub const RETRY_BACKOFF: Duration = Duration::from_millis(250);

/// Opens the upstream stream and waits for its first event, retrying retryable failures with
/// [`RETRY_BACKOFF`] up to [`UPSTREAM_ATTEMPTS`]; `timeout` is one deadline for all attempts.
pub async fn open_stream(
    prepared: &PreparedChat,
    timeout: Duration,
) -> Result<EventStream, ProviderError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let started = std::time::Instant::now();
    let model = prepared.model.id.as_str();
    let provider = &prepared.model.provider;
    let timed_out = |attempt: u32| {
        tracing::warn!(
            provider = provider.code(),
            attempt,
            timeout_ms = timeout.as_millis() as u64,
            "the model provider did not answer in time"
        );
        ProviderError {
            kind: ProviderErrorKind::Timeout,
            message: format!(
                "{} failed: no answer within {}",
                crate::llm::sentence_start(provider.name()),
                spoken(timeout)
            ),
        }
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let opening = async {
            let mut stream = provider
                .stream(&prepared.model.name, &prepared.prompt)
                .await?;
            match stream.next().await {
                Some(Ok(first)) => Ok(futures::stream::once(async { Ok(first) })
                    .chain(stream)
                    .boxed()),
                None => Ok(futures::stream::empty().boxed()),
                Some(Err(e)) => Err(e),
            }
        };
        let failure = match tokio::time::timeout_at(deadline, opening).await {
            Ok(Ok(stream)) => {
                crate::metrics::first_token(model, started.elapsed());
                return Ok(stream);
            }
            // The provider's own wait for an answer is `timeout` too: when it ends, so has
            // (or about) the whole wait.
            Ok(Err(e)) if e.kind == ProviderErrorKind::Timeout => timed_out(attempt),
            Ok(Err(e)) => e,
            Err(_) => timed_out(attempt),
        };
        crate::metrics::provider_failed(model, &failure);
        if failure.kind == ProviderErrorKind::Timeout {
            return Err(failure);
        }
        let wait = RETRY_BACKOFF * 4u32.pow(attempt - 1);
        if !failure.retryable()
            || attempt >= UPSTREAM_ATTEMPTS
            || tokio::time::Instant::now() + wait >= deadline
        {
            return Err(failure);
        }
        tracing::warn!(attempt, error = %failure, wait_ms = wait.as_millis() as u64, "retrying the model provider");
        tokio::time::sleep(wait).await;
    }
}

/// A duration as messages say it: whole seconds (`60 s`), else milliseconds (`500 ms`).
fn spoken(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// Usage as reported, else `prompt_tokens` ([`PreparedChat::prompt_tokens`]) and the reply counted.
pub fn usage_or_counted(reported: Option<Usage>, prompt_tokens: u32, reply: &str) -> TokensUsed {
    let usage = reported
        .filter(|u| u.prompt > 0 || u.completion > 0)
        .unwrap_or_else(|| Usage {
            prompt: prompt_tokens,
            completion: tokens::count(reply),
        });
    TokensUsed {
        prompt: usage.prompt,
        completion: usage.completion,
        total: usage.prompt + usage.completion,
    }
}

/// One frame of a streamed reply, in send order: chunks, summary or failure, then the end.
#[derive(Debug)]
pub enum Frame {
    /// The next piece of the reply's text.
    Chunk(String),
    /// After the last chunk of a complete reply, when the caller asked for usage.
    Summary {
        usage: TokensUsed,
        model: String,
        thread_id: ThreadId,
        /// The reply's message id (`X-Reply-Id`).
        reply_id: MessageId,
        /// The knowledge sources, best first.
        sources: Vec<Source>,
        finish: FinishReason,
        tool_calls: Vec<ToolCallView>,
    },
    /// A tool call starts (`running`) or ended; sent to clients that asked for them.
    ToolCall(ToolCallView),
    /// The turn stopped for these approvals; sent once stored, before the end.
    Pending(Vec<PendingApproval>),
    /// Client tool calls ([`super::TurnOptions::client_tools`]) that end the turn.
    ClientToolCalls(Vec<ToolCall>),
    /// The provider failed ([`ChatError::Upstream`]); the reply ends.
    Failed(ChatError),
    Done,
}

/// Where a streamed reply is.
enum Phase {
    Opening,
    Relaying(EventStream),
    /// Tools were called: they run, then the model is called again ([`ChatService::run_tools`]).
    Tools(Vec<ToolCall>),
    /// The reply ended (summary or failure queued): it is stored, then `[DONE]` is queued.
    Ending(Ended),
    Done,
}

/// How a streamed reply ended: what [`ChatService::finish`] records besides its text.
struct Ended {
    status: ReplyStatus,
    usage: Option<TokensUsed>,
    error: Option<String>,
}

/// The task storing an ended reply ([`Relay::store_ended`]).
type Storing = tokio::task::JoinHandle<Result<(), ChatError>>;

/// One streamed reply, polled through [`Relay::next_frame`] with no task between provider and
/// client. Dropping it cancels the request and stores a partial reply as cancelled.
pub struct Relay {
    chat: Option<(Arc<ChatService>, PreparedChat)>,
    include_usage: bool,
    text: String,
    /// Where the current model call's text starts in `text`.
    round_start: usize,
    calls: Vec<ToolCall>,
    reported: Option<Usage>,
    finish: FinishReason,
    phase: Phase,
    queued: VecDeque<Frame>,
    _open: crate::metrics::StreamOpen,
    /// The request's span, entered only to log ([`crate::telemetry::RequestSpanLayer`]).
    span: Span,
}

impl Relay {
    /// The relay of `prepared`'s reply; `include_usage` adds a [`Frame::Summary`].
    pub fn new(chat: Arc<ChatService>, prepared: PreparedChat, include_usage: bool) -> Self {
        Self {
            chat: Some((chat, prepared)),
            include_usage,
            text: String::new(),
            round_start: 0,
            calls: Vec::new(),
            reported: None,
            finish: FinishReason::Stop,
            phase: Phase::Opening,
            queued: VecDeque::new(),
            _open: crate::metrics::StreamOpen::new(),
            span: Span::current(),
        }
    }

    /// Stops the reply before its end and stores it with the text so far as `status`
    /// (cancelled or interrupted), `reason` as its error; a reply already ending is stored
    /// as it ended. Resolves once stored (a failure is logged).
    pub async fn stop(mut self, status: ReplyStatus, reason: &'static str) {
        let Some((chat, prepared)) = self.chat.take() else {
            return;
        };
        let ended = match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Ending(ended) => ended,
            _ => Ended {
                status,
                usage: None,
                error: Some(reason.to_string()),
            },
        };
        let text = std::mem::take(&mut self.text);
        let span = self.span.clone();
        let _ = persist(&chat, &prepared, &text, ended)
            .instrument(span)
            .await;
    }

    /// Cancelled when the reply is asked to stop (`POST .../cancel`); never for a turn
    /// without a stored thread.
    pub fn cancel_token(&self) -> tokio_util::sync::CancellationToken {
        self.chat
            .as_ref()
            .and_then(|(_, prepared)| prepared.turn.as_ref())
            .map(|turn| turn.cancel_token().clone())
            .unwrap_or_default()
    }

    /// Stores the ended reply in a task of its own (a client leaving now cannot cut the write
    /// short); answers the task and the calls waiting for approval. Not async, so the turn it
    /// moves stays out of [`Relay::next_frame`]'s state, which every open stream holds.
    fn store_ended(&mut self) -> Option<(Storing, Vec<PendingApproval>)> {
        let Phase::Ending(ended) = std::mem::replace(&mut self.phase, Phase::Done) else {
            return None;
        };
        let (chat, prepared) = self.chat.take()?;
        let text = std::mem::take(&mut self.text);
        let span = std::mem::replace(&mut self.span, Span::none());
        let pending = prepared.pending_approvals();
        let stored = tokio::spawn(
            async move { persist(&chat, &prepared, &text, ended).await }.instrument(span),
        );
        Some((stored, pending))
    }

    /// The next frame to send; `None` once the reply has ended and been persisted.
    pub async fn next_frame(&mut self) -> Option<Frame> {
        loop {
            if let Some(frame) = self.queued.pop_front() {
                return Some(frame);
            }
            match &mut self.phase {
                Phase::Opening => {
                    let (chat, prepared) = self.chat.as_mut()?;
                    // Boxed: the opening's state (retries, backoff timer) is needed once,
                    // and would otherwise widen the state this relay keeps while it is open.
                    let timeout = chat.provider_timeout;
                    let opened =
                        Box::pin(open_stream(prepared, timeout).instrument(self.span.clone()))
                            .await;
                    prepared.release_prompt();
                    // The first event: what follows until the first frame is sent is
                    // latency a client sees, so background work waits.
                    chat.knowledge.foreground.touch();
                    self.phase = match opened {
                        Ok(upstream) => Phase::Relaying(upstream),
                        Err(e) => self.failed(e),
                    };
                }
                Phase::Relaying(upstream) => match upstream.next().await {
                    Some(Ok(Event::Delta(d))) => {
                        self.text.push_str(&d);
                        return Some(Frame::Chunk(d));
                    }
                    Some(Ok(Event::ToolCall(call))) => self.calls.push(call),
                    Some(Ok(Event::End(usage, finish))) => {
                        self.reported = usage;
                        self.finish = finish;
                    }
                    Some(Err(e)) => {
                        if let Some((_, prepared)) = &self.chat {
                            crate::metrics::provider_failed(&prepared.model.id, &e);
                        }
                        self.phase = self.failed(e);
                    }
                    None => {
                        // The end: what follows until `[DONE]` is latency a client sees.
                        if let Some((chat, _)) = &self.chat {
                            chat.knowledge.foreground.touch();
                        }
                        self.phase = self.round_ended();
                    }
                },
                Phase::Tools(calls) => {
                    let calls = std::mem::take(calls);
                    let (chat, prepared) = self.chat.as_mut()?;
                    let text = self.text[self.round_start..].to_string();
                    self.round_start = self.text.len();
                    let reported = self.reported.take();
                    let views = Box::pin(
                        chat.run_tools(prepared, reported, text, calls)
                            .instrument(self.span.clone()),
                    )
                    .await;
                    self.queued.extend(views.into_iter().map(Frame::ToolCall));
                    self.finish = FinishReason::Stop;
                    let stopped = self
                        .chat
                        .as_ref()
                        .is_some_and(|(_, prepared)| !prepared.pending.is_empty());
                    self.phase = if stopped {
                        self.completed()
                    } else {
                        Phase::Opening
                    };
                }
                Phase::Ending(..) => {
                    // `[DONE]` follows once the turn is stored, so that a client reading the
                    // conversation then sees it.
                    if let Some((stored, pending)) = self.store_ended() {
                        match stored.await {
                            Ok(Err(e)) => self.queued.push_back(Frame::Failed(e)),
                            Ok(Ok(())) if !pending.is_empty() => {
                                self.queued.push_back(Frame::Pending(pending))
                            }
                            _ => {}
                        }
                    }
                    self.queued.push_back(Frame::Done);
                }
                Phase::Done => return None,
            }
        }
    }

    /// The end of one model call: its tool calls run next, or the reply is complete.
    fn round_ended(&mut self) -> Phase {
        let may_call = self
            .chat
            .as_ref()
            .is_some_and(|(_, prepared)| prepared.may_call_tools());
        if self.calls.is_empty() || !may_call {
            // The calls of client tools end the turn ([`Relay::completed`]); others are
            // ignored.
            return self.completed();
        }
        let calls = std::mem::take(&mut self.calls);
        self.queued.extend(calls.iter().map(|call| {
            Frame::ToolCall(ToolCallView {
                id: call.id.clone(),
                name: call.name.clone(),
                tool_type: String::new(),
                arguments: serde_json::from_str(&call.arguments)
                    .unwrap_or_else(|_| serde_json::json!({})),
                status: "running".into(),
                output: String::new(),
                error: None,
                duration_ms: 0,
            })
        }));
        Phase::Tools(calls)
    }

    /// Queues the model's client-tool calls, if any, then the summary when asked for.
    fn completed(&mut self) -> Phase {
        let Some((_, prepared)) = &mut self.chat else {
            return Phase::Done;
        };
        prepared.release_prompt();
        let calls = std::mem::take(&mut self.calls);
        let client_calls = prepared.request_client_calls(&calls);
        let usage = match prepared.usage_so_far {
            // Stopped for approvals: every call of the turn is counted already.
            Some(usage) if !prepared.pending.is_empty() => usage,
            _ => prepared.total_usage(self.reported, &self.text[self.round_start..]),
        };
        if client_calls {
            self.finish = FinishReason::ToolCalls;
            self.queued.push_back(Frame::ClientToolCalls(calls));
        } else if self.finish == FinishReason::ToolCalls {
            self.finish = FinishReason::Stop;
        }
        if self.include_usage {
            self.queued.push_back(Frame::Summary {
                usage,
                model: prepared.model.id.clone(),
                thread_id: prepared.thread.id.clone(),
                reply_id: prepared.reply_id.clone(),
                sources: prepared.sources.clone(),
                finish: self.finish,
                tool_calls: prepared.tool_calls.clone(),
            });
        }
        Phase::Ending(Ended {
            status: ReplyStatus::Complete,
            usage: Some(usage),
            error: None,
        })
    }

    /// Queues the failure; the end follows once the reply is stored.
    fn failed(&mut self, e: ProviderError) -> Phase {
        let error = Some(e.message.clone());
        self.queued.push_back(Frame::Failed(ChatError::Upstream(e)));
        Phase::Ending(Ended {
            status: ReplyStatus::Failed,
            usage: None,
            error,
        })
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let Some((chat, prepared)) = self.chat.take() else {
            return;
        };
        let ended = match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Ending(ended) => ended,
            _ => Ended {
                status: ReplyStatus::Cancelled,
                usage: None,
                error: Some("the client disconnected".to_string()),
            },
        };
        let text = std::mem::take(&mut self.text);
        let span = std::mem::replace(&mut self.span, Span::none());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(
                    async move {
                        let _ = persist(&chat, &prepared, &text, ended).await;
                    }
                    .instrument(span),
                );
            }
            Err(_) => {
                let _in = span.enter();
                tracing::error!("a streamed reply ended outside the runtime and was not persisted")
            }
        }
    }
}

/// Persists a streamed reply ([`ChatService::finish`]); a failure is logged and returned.
async fn persist(
    chat: &ChatService,
    prepared: &PreparedChat,
    text: &str,
    ended: Ended,
) -> Result<(), ChatError> {
    let Ended {
        status,
        usage,
        error,
    } = ended;
    // The client has had every chunk: the turn may wait a moment for others to share its
    // commit ([`Urgency::Grouped`]).
    let stored = chat
        .finish(prepared, text, usage, status, error, Urgency::Grouped)
        .await;
    match &stored {
        Err(ChatError::AgentGone | ChatError::ThreadNotFound) => {
            tracing::info!(
                "a streamed reply was not stored: its agent or thread was deleted meanwhile"
            )
        }
        Err(err) => tracing::error!(error = ?err, "persisting the streamed reply failed"),
        Ok(()) => {}
    }
    stored
}
