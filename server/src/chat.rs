//! Chat orchestration, independent of HTTP: resolve the thread and model, build the prompt
//! (system prompt, earlier turns trimmed oldest-first to the model's context window,
//! retrieved knowledge, the message with its attachments), persist the user message before
//! calling the model, retry upstream failures before the first token, and persist the
//! assistant message (content, model, usage, sources, latency, status) when it ends.

use std::time::{Duration, Instant};

use app::api::{Attachment, Source, TokensUsed};
use base64::{engine::general_purpose::STANDARD, Engine};
use futures::StreamExt;
use serde_json::json;

use crate::{
    error::{ApiError, ApiResult},
    http::AppState,
    knowledge::retrieve,
    llm::{
        tokens, Event, EventStream, Passage, Prompt, ProviderError, ProviderErrorKind,
        ResolvedModel, Role, Turn, Usage,
    },
    store::{AgentRecord, MessageRecord, ThreadRecord},
    webhooks::EventType,
};

/// Largest total size of one message's attachments (10 MiB, issue: agents and chat).
pub const MAX_ATTACHMENTS_BYTES: usize = 10 * 1024 * 1024;
/// Earlier messages considered for the prompt before trimming to the context window.
pub const HISTORY_LIMIT: u32 = 200;
/// Attempts at an upstream call before its first token (1 + 2 retries).
pub const UPSTREAM_ATTEMPTS: u32 = 3;
/// Backoff before the first retry; each later retry waits four times longer.
pub const RETRY_BACKOFF: Duration = Duration::from_millis(250);

/// A chat turn ready to be sent upstream.
pub struct PreparedChat {
    pub thread: ThreadRecord,
    pub model: ResolvedModel,
    /// What goes upstream. Only the upstream request needs it: a streamed reply drops it
    /// once the provider has answered ([`PreparedChat::release_prompt`]).
    pub prompt: Prompt,
    /// Tokens of everything the prompt sends ([`crate::llm::offline::prompt_tokens`]),
    /// counted while it was built: the prompt usage of a reply whose provider reports none.
    pub prompt_tokens: u32,
    pub sources: Vec<Source>,
    pub started: Instant,
}

impl PreparedChat {
    /// Drops the prompt (system prompt, earlier turns, retrieved passages), which nothing
    /// needs once the upstream request is answered: an open stream then holds only what it
    /// persists and reports.
    pub fn release_prompt(&mut self) {
        self.prompt = Prompt::default();
    }
}

/// Tokens a passage costs in the prompt besides its text (marker, title, source).
const PASSAGE_OVERHEAD: u32 = 16;
/// Tokens an earlier turn costs in the prompt besides its text (role, separators).
const TURN_OVERHEAD: u32 = 4;

/// How a reply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyStatus {
    /// Complete.
    Complete,
    /// The provider failed.
    Failed,
    /// The client went away.
    Cancelled,
}

impl ReplyStatus {
    fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// The text of attachments as the prompt carries it (each after a `--- Attachment: name ---`
/// line), and how many characters the attachments' own text has. Text and Markdown only
/// (decoded as UTF-8); anything else 415; more than [`MAX_ATTACHMENTS_BYTES`] decoded 413;
/// data that is not base64 400.
pub fn attachments_text(attachments: &[Attachment]) -> ApiResult<(String, usize)> {
    let mut total = 0usize;
    let mut chars = 0usize;
    let mut out = String::new();
    for a in attachments {
        let bytes = STANDARD.decode(a.data.trim()).map_err(|_| {
            ApiError::bad_request(format!(
                "attachment `{}`: data is not valid base64",
                a.filename
            ))
        })?;
        total += bytes.len();
        if total > MAX_ATTACHMENTS_BYTES {
            return Err(ApiError::PayloadTooLarge(
                "Attachments may total at most 10 MiB".into(),
            ));
        }
        let kind = a
            .content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let textual = kind.starts_with("text/")
            || kind == "application/json"
            || kind == "application/x-markdown";
        if !textual {
            return Err(ApiError::UnsupportedMediaType(format!(
                "attachment `{}` has type `{}`; attach text or Markdown files",
                a.filename, a.content_type
            )));
        }
        let text = String::from_utf8(bytes).map_err(|_| {
            ApiError::UnsupportedMediaType(format!("attachment `{}` is not UTF-8 text", a.filename))
        })?;
        chars += text.chars().count();
        out.push_str(&format!("\n\n--- Attachment: {} ---\n{}", a.filename, text));
    }
    Ok((out, chars))
}

/// Checks the length rule of what a chat request sends to the model: the message and the
/// text of its attachments ([`attachments_text`]) together have at most `max`
/// (`MAX_MESSAGE_CHARS`) characters, so attachments cannot carry more than a message may.
/// Errors: 400 naming the limit and the length sent.
pub fn check_length(message: &str, attachment_chars: usize, max: usize) -> ApiResult<()> {
    let total = message.chars().count() + attachment_chars;
    if total > max {
        return Err(ApiError::bad_request(if attachment_chars == 0 {
            format!("message must be at most {max} characters")
        } else {
            format!(
                "message and the text of its attachments must together be at most {max} characters; they have {total}"
            )
        }));
    }
    Ok(())
}

/// Longest snippet of a source in the chat reply, in characters.
pub const SNIPPET_CHARS: usize = 240;

/// The agent's knowledge for `message` ([`retrieve::hybrid`]): passages for the prompt
/// (marked `[1]`, `[2]`, ...) that fit in `budget` tokens, and the matching sources for
/// the reply, best first, and the tokens the passages take (with their markers,
/// [`PASSAGE_OVERHEAD`] each). A source's `score` (3 decimals) is the BM25 relevance without
/// `EMBEDDING_MODEL`, and with it the fused score as a share of the best possible (1.0:
/// ranked first by both BM25 and vector similarity).
pub async fn retrieve(
    state: &AppState,
    agent_id: &str,
    message: &str,
    budget: u32,
) -> ApiResult<(Vec<Passage>, Vec<Source>, u32)> {
    let hits = retrieve::hybrid(&state.knowledge, agent_id, message, retrieve::TOP_K).await?;
    let mut passages = Vec::new();
    let mut sources = Vec::new();
    let mut used = 0u32;
    for hit in hits {
        let cost = tokens::count(&hit.text) + PASSAGE_OVERHEAD;
        if used + cost > budget {
            break;
        }
        used += cost;
        let title = if hit.heading_path.is_empty() {
            hit.title.clone()
        } else {
            format!("{} — {}", hit.title, hit.heading_path)
        };
        passages.push(Passage {
            marker: format!("[{}]", passages.len() + 1),
            title,
            url: hit.url.clone(),
            text: hit.text.clone(),
        });
        let mut snippet: String = hit.text.chars().take(SNIPPET_CHARS).collect();
        if snippet.len() < hit.text.len() {
            snippet.push('…');
        }
        sources.push(Source {
            document_id: hit.document_id,
            title: hit.title,
            url: hit.url,
            chunk_id: hit.chunk_id.to_string(),
            score: (hit.score * 1000.0).round() / 1000.0,
            snippet,
        });
    }
    Ok((passages, sources, used))
}

/// Earlier turns that fit in `budget` tokens (their text and [`TURN_OVERHEAD`] each),
/// dropping the oldest first, and the tokens of the kept turns' text.
pub fn trim_history(history: Vec<Turn>, budget: u32) -> (Vec<Turn>, u32) {
    let mut used = 0u32;
    // The kept turns, newest first, and the tokens of each one's text.
    let mut kept: Vec<Turn> = Vec::new();
    let mut texts: Vec<u32> = Vec::new();
    for turn in history.into_iter().rev() {
        let text = tokens::count(&turn.content);
        let cost = text + TURN_OVERHEAD;
        if used + cost > budget {
            break;
        }
        used += cost;
        kept.push(turn);
        texts.push(text);
    }
    // A conversation sent upstream starts with the user: the oldest kept turns that are
    // assistant replies go.
    let starts = kept
        .iter()
        .rposition(|t| t.role == Role::User)
        .map_or(0, |i| i + 1);
    kept.truncate(starts);
    kept.reverse();
    (kept, texts[..starts].iter().sum())
}

/// The thread a chat turn belongs to.
pub enum ThreadChoice<'a> {
    /// A new thread, titled after the message.
    New,
    /// The caller's thread with this id (404 when it is unknown or someone else's).
    Id(&'a str),
    /// A thread the caller has already looked up.
    Known(ThreadRecord),
}

/// The thread of a chat turn ([`ThreadChoice`]; a new one is created and announced) and
/// its earlier turns that may go upstream (user messages, and complete assistant replies).
async fn thread_and_history(
    state: &AppState,
    agent: &AgentRecord,
    user_id: &str,
    thread: ThreadChoice<'_>,
    message: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> ApiResult<(ThreadRecord, Vec<Turn>, bool)> {
    let continued = !matches!(thread, ThreadChoice::New);
    let thread = match thread {
        ThreadChoice::Known(thread) => thread,
        ThreadChoice::Id(id) => state
            .store
            .thread(user_id, &agent.id, id)
            .await?
            .ok_or_else(|| ApiError::not_found("Thread"))?,
        // Stored with the user's message ([`prepare`]).
        ThreadChoice::New => ThreadRecord {
            id: uuid::Uuid::now_v7().to_string(),
            agent_id: agent.id.clone(),
            user_id: user_id.to_string(),
            title: message.trim().chars().take(80).collect(),
            message_count: 0,
            created_at: now,
            updated_at: now,
        },
    };
    // A new thread has no history: no need to ask the store.
    let earlier = if continued {
        state
            .store
            .recent_messages(&thread.id, HISTORY_LIMIT)
            .await?
    } else {
        Vec::new()
    };
    let history = earlier
        .into_iter()
        .filter(|m| m.status == "complete" || m.role == "user")
        .map(|m| Turn {
            role: if m.role == "user" {
                Role::User
            } else {
                Role::Assistant
            },
            content: m.content,
        })
        .collect();
    Ok((thread, history, !continued))
}

/// Resolves the thread ([`ThreadChoice`]), the model, and the prompt, and persists the
/// user's message — for a new thread together with the thread, in one store call, after
/// which the `conversation.created` webhook event is emitted. Errors: 400, 413 or 415 for
/// attachments ([`attachments_text`]) and 400 when the message and its attachments are
/// longer than `MAX_MESSAGE_CHARS` together ([`check_length`]), 404 `Agent` when the agent
/// was deleted meanwhile, 404 `Thread` for an unknown thread, 502 when no provider offers
/// the model, and the store's.
pub async fn prepare(
    state: &AppState,
    agent: &AgentRecord,
    user_id: &str,
    thread: ThreadChoice<'_>,
    message: &str,
    attachments: &[Attachment],
) -> ApiResult<PreparedChat> {
    let (attached, attachment_chars) = attachments_text(attachments)?;
    check_length(message, attachment_chars, state.config.max_message_chars)?;
    let model_id = if agent.model.is_empty() {
        state.models.default_model().await
    } else {
        agent.model.clone()
    };
    let model = state.models.resolve(&model_id).await.ok_or_else(|| ApiError::Status {
        status: axum::http::StatusCode::BAD_GATEWAY,
        message: format!("The agent's model `{model_id}` is not offered by any configured provider right now"),
    })?;
    let now = state.auth.clock.now();
    let user_content = format!("{message}{attached}");
    let fixed = tokens::count(&agent.system_prompt) + tokens::count(&user_content);
    // Room for the reply: a quarter of the window, at least 1,024 tokens.
    let reserve = (model.context_window / 4).max(1_024);
    let room = model
        .context_window
        .saturating_sub(reserve)
        .saturating_sub(fixed);
    // The thread (with its history) and the agent's knowledge are independent: both are
    // fetched at once. Retrieved knowledge may take up to half of what is left; history
    // gets the rest. An agent without any knowledge document has nothing to retrieve: no
    // query is made.
    let (thread, retrieved) = tokio::join!(
        thread_and_history(state, agent, user_id, thread, message, now),
        async {
            if agent.has_knowledge {
                retrieve(state, &agent.id, message, room / 2).await
            } else {
                Ok((Vec::new(), Vec::new(), 0))
            }
        },
    );
    let (thread, history, new_thread) = thread?;
    let (passages, sources, passage_tokens) = retrieved?;
    let budget = room.saturating_sub(passage_tokens);
    let (mut turns, history_tokens) = trim_history(history, budget);
    // What `offline::prompt_tokens` would count: every text the prompt sends.
    let prompt_tokens = fixed
        + history_tokens
        + passage_tokens.saturating_sub(PASSAGE_OVERHEAD * passages.len() as u32);
    turns.push(Turn {
        role: Role::User,
        content: user_content.clone(),
    });
    let first = MessageRecord {
        id: uuid::Uuid::now_v7().to_string(),
        thread_id: thread.id.clone(),
        role: "user".into(),
        content: user_content,
        model: None,
        prompt_tokens: None,
        completion_tokens: None,
        sources: None,
        latency_ms: None,
        status: "complete".into(),
        error: None,
        created_at: now,
    };
    if new_thread {
        if !state.store.create_thread(&thread, &first).await? {
            // Deleted since it was read.
            return Err(ApiError::not_found("Agent"));
        }
        state
            .webhooks
            .events
            .emit(
                user_id,
                EventType::ConversationCreated,
                json!({
                    "conversationId": thread.id,
                    "agentId": thread.agent_id,
                    "title": thread.title,
                    "createdAt": crate::views::iso(thread.created_at),
                }),
            )
            .await;
    } else {
        state.store.append_message(&first).await?;
    }
    Ok(PreparedChat {
        thread,
        model,
        prompt: Prompt {
            system: agent.system_prompt.clone(),
            turns,
            passages,
        },
        prompt_tokens,
        sources,
        started: Instant::now(),
    })
}

/// The API error for a provider failure: 504 on a timeout, else 502.
pub fn upstream_error(err: &ProviderError) -> ApiError {
    let status = if err.kind == ProviderErrorKind::Timeout {
        axum::http::StatusCode::GATEWAY_TIMEOUT
    } else {
        axum::http::StatusCode::BAD_GATEWAY
    };
    ApiError::Status {
        status,
        message: err.message.clone(),
    }
}

/// Opens the upstream stream and waits for its first event, retrying retryable failures
/// (429, 5xx, timeouts, connection errors) that happen before the first token, with
/// exponential backoff ([`RETRY_BACKOFF`], at most [`UPSTREAM_ATTEMPTS`] attempts).
///
/// `timeout` (`PROVIDER_TIMEOUT_SECS`) bounds the whole wait for the first event, retries
/// and backoff included: one deadline for every attempt, so a silent provider is answered
/// with a `Timeout` error once `timeout` has passed, not after three timeouts. A retry whose
/// backoff would end past the deadline is not made: the last failure is returned.
pub async fn open_stream(
    prepared: &PreparedChat,
    timeout: Duration,
) -> Result<EventStream, ProviderError> {
    let deadline = tokio::time::Instant::now() + timeout;
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
            Ok(Ok(stream)) => return Ok(stream),
            // The provider's own wait for an answer is `timeout` too: when it ends, so has
            // (or about) the whole wait.
            Ok(Err(e)) if e.kind == ProviderErrorKind::Timeout => return Err(timed_out(attempt)),
            Ok(Err(e)) => e,
            Err(_) => return Err(timed_out(attempt)),
        };
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

/// Usage as reported, or, when the provider gave none, `prompt_tokens` (the prompt's
/// tokens, [`PreparedChat::prompt_tokens`]) and the reply counted with the tokenizer.
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

/// Runs a prepared turn to its end without streaming: reads the whole reply, persists it,
/// and answers its text and token usage. A provider failure is persisted as a failed reply
/// (with what was received) and answered as 502 or 504 ([`upstream_error`]).
pub async fn complete(
    state: &AppState,
    prepared: &PreparedChat,
) -> ApiResult<(String, TokensUsed)> {
    let mut text = String::new();
    let outcome: Result<Option<Usage>, ProviderError> = async {
        let mut upstream = open_stream(prepared, state.config.provider_timeout).await?;
        let mut reported = None;
        while let Some(event) = upstream.next().await {
            match event? {
                Event::Delta(d) => text.push_str(&d),
                Event::End(usage) => reported = usage,
            }
        }
        Ok(reported)
    }
    .await;
    match outcome {
        Ok(reported) => {
            let usage = usage_or_counted(reported, prepared.prompt_tokens, &text);
            finish(
                state,
                prepared,
                &text,
                Some(usage),
                ReplyStatus::Complete,
                None,
            )
            .await?;
            Ok((text, usage))
        }
        Err(e) => {
            finish(
                state,
                prepared,
                &text,
                None,
                ReplyStatus::Failed,
                Some(e.message.clone()),
            )
            .await?;
            Err(upstream_error(&e))
        }
    }
}

/// Persists the assistant's reply.
pub async fn finish(
    state: &AppState,
    prepared: &PreparedChat,
    text: &str,
    usage: Option<TokensUsed>,
    status: ReplyStatus,
    error: Option<String>,
) -> ApiResult<()> {
    let sources = (!prepared.sources.is_empty())
        .then(|| serde_json::to_string(&prepared.sources).unwrap_or_default());
    let message = MessageRecord {
        id: uuid::Uuid::now_v7().to_string(),
        thread_id: prepared.thread.id.clone(),
        role: "assistant".into(),
        content: text.to_string(),
        model: Some(prepared.model.id.clone()),
        prompt_tokens: usage.map(|u| i64::from(u.prompt)),
        completion_tokens: usage.map(|u| i64::from(u.completion)),
        sources,
        latency_ms: Some(prepared.started.elapsed().as_millis() as i64),
        status: status.as_str().into(),
        error,
        created_at: state.auth.clock.now(),
    };
    state.store.append_message(&message).await?;
    // One event per completed reply; failed and cancelled replies are not messages the
    // owner would act on.
    if status == ReplyStatus::Complete {
        state
            .webhooks
            .events
            .emit(
                &prepared.thread.user_id,
                EventType::MessageCreated,
                json!({
                    "messageId": message.id,
                    "conversationId": prepared.thread.id,
                    "agentId": prepared.thread.agent_id,
                    "role": message.role,
                    "content": message.content,
                    "model": message.model,
                    "usage": {
                        "promptTokens": message.prompt_tokens,
                        "completionTokens": message.completion_tokens,
                    },
                    "createdAt": crate::views::iso(message.created_at),
                }),
            )
            .await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(role: Role, content: &str) -> Turn {
        Turn {
            role,
            content: content.into(),
        }
    }

    #[test]
    fn history_is_trimmed_oldest_first_and_starts_with_the_user() {
        let history = vec![
            turn(Role::User, &"old ".repeat(500)),
            turn(Role::Assistant, "reply one"),
            turn(Role::User, "second question"),
            turn(Role::Assistant, "second reply"),
        ];
        let (kept, text) = trim_history(history.clone(), 40);
        assert_eq!(
            kept.iter().map(|t| t.content.as_str()).collect::<Vec<_>>(),
            ["second question", "second reply"]
        );
        assert_eq!(
            text,
            tokens::count("second question") + tokens::count("second reply")
        );
        let (all, text) = trim_history(history.clone(), 100_000);
        assert_eq!(all.len(), 4);
        assert_eq!(
            text,
            history
                .iter()
                .map(|t| tokens::count(&t.content))
                .sum::<u32>()
        );
        // Trimmed to start with the user: the dropped reply's tokens are not counted.
        let (kept, text) = trim_history(history[1..].to_vec(), 100_000);
        assert_eq!(kept.len(), 2);
        assert_eq!(
            text,
            history[2..]
                .iter()
                .map(|t| tokens::count(&t.content))
                .sum::<u32>()
        );
        let (kept, text) = trim_history(history, 0);
        assert!(kept.is_empty());
        assert_eq!(text, 0);
    }

    #[test]
    fn attachments_must_be_text() {
        let text = Attachment {
            filename: "a.md".into(),
            content_type: "text/markdown".into(),
            data: STANDARD.encode("# Hi"),
        };
        let (text, chars) = attachments_text(&[text]).unwrap();
        assert!(text.contains("# Hi"));
        assert_eq!(chars, 4);
        let pdf = Attachment {
            filename: "a.pdf".into(),
            content_type: "application/pdf".into(),
            data: STANDARD.encode("%PDF"),
        };
        assert!(matches!(
            attachments_text(&[pdf]),
            Err(ApiError::UnsupportedMediaType(_))
        ));
        let bad = Attachment {
            filename: "a.txt".into(),
            content_type: "text/plain".into(),
            data: "***".into(),
        };
        assert!(matches!(
            attachments_text(&[bad]),
            Err(ApiError::BadRequest(_))
        ));
    }
}
