//! `/dashboard/agents/{id}/chat`: threads and the conversation with the agent
//! (`GET .../conversations`, `GET .../conversations/{threadId}/messages`, `POST .../chat`
//! streamed).
//!
//! The reply is read from a `fetch` response body as it arrives and grows in place. Replies
//! are resumable (docs/api.md § Resumable streams): a stream cut before `[DONE]` is
//! followed again from its last frame (`GET .../conversations/{threadId}/stream`), a thread
//! opened while its reply is still being written shows that reply growing, and "Stop"
//! cancels the reply on the server (`POST .../cancel`; stored as `cancelled`). Messages
//! are rendered from Markdown with every piece of HTML in them escaped
//! ([`crate::markdown`]).

use super::{agent::use_agent, dashboard::short_time};
use crate::{
    api::{
        ApprovalRequest, ChatMessage, ChatRequest, ConversationsResponse, FeedbackRequest,
        MessagesResponse, PendingApproval, Source, StreamOptions, TokensUsed, ToolCallView,
    },
    client::{self, Abort, ApiError, ReplyStream, StreamEnd},
    components::{
        copy_to_clipboard, fetch_signed_in, load_error_view, loading_view, use_hydrated, Notice,
        Tone,
    },
    markdown,
    sse::{resume_delay_ms, stopped_status, ReplyCursor, StreamFrame, StreamToolCall},
};
use leptos::{prelude::*, task::spawn_local};
use leptos_meta::Title;

/// A thumb pointing up (Material Design's `thumb_up` icon); turned over for "Not helpful"
/// by the stylesheet. Also used by the conversation inbox.
pub(super) const THUMB_PATH: &str = "M1 21h4V9H1v12zm22-11c0-1.1-.9-2-2-2h-6.31l.95-4.57.03-.32c0-.41-.17-.79-.44-1.06L14.17 1 7.59 7.59C7.22 7.95 7 8.45 7 9v10c0 1.1.9 2 2 2h9c.83 0 1.54-.5 1.84-1.22l3.02-7.05c.09-.23.14-.47.14-.73v-2z";

/// Longest message the server accepts by default (`MAX_MESSAGE_CHARS`).
pub const MESSAGE_MAX: usize = 32_000;

/// The state of one tool call on screen: while it runs, once it ended, or while it waits
/// for the user's decision.
#[derive(Debug, Clone, PartialEq)]
struct CallState {
    /// The model provider's call id (the `toolCallId` of an approval).
    id: String,
    name: String,
    /// The tool's type; empty while unknown.
    tool_type: String,
    arguments: serde_json::Value,
    /// `running`, `succeeded`, `failed` or `denied` as the server says; `pending` while it
    /// waits for approval, `approving` / `denying` while the decision is sent.
    status: String,
    output: String,
    error: Option<String>,
    duration_ms: Option<u64>,
    /// Why the decision could not be sent (e.g. already decided, expired).
    decision_error: Option<String>,
}

impl CallState {
    fn from_view(view: ToolCallView) -> Self {
        Self {
            id: view.id,
            name: view.name,
            tool_type: view.tool_type,
            arguments: view.arguments,
            status: view.status,
            output: view.output,
            error: view.error,
            duration_ms: Some(view.duration_ms),
            decision_error: None,
        }
    }

    fn pending(approval: PendingApproval) -> Self {
        Self {
            id: approval.tool_call_id,
            name: approval.name,
            tool_type: String::new(),
            arguments: approval.arguments,
            status: "pending".into(),
            output: String::new(),
            error: None,
            duration_ms: None,
            decision_error: None,
        }
    }

    /// Takes what a stream frame says of this call: a start keeps the arguments, an end
    /// brings the outcome.
    fn apply(&mut self, frame: StreamToolCall) {
        self.name = frame.name;
        if !frame.tool_type.is_empty() {
            self.tool_type = frame.tool_type;
        }
        if let Some(arguments) = frame.arguments {
            self.arguments = arguments;
        }
        self.status = frame.status;
        self.output = frame.output;
        self.error = frame.error;
        self.duration_ms = frame.duration_ms;
        self.decision_error = None;
    }

    fn from_frame(frame: StreamToolCall) -> Self {
        let mut state = Self {
            id: frame.id.clone(),
            name: String::new(),
            tool_type: String::new(),
            arguments: serde_json::json!({}),
            status: String::new(),
            output: String::new(),
            error: None,
            duration_ms: None,
            decision_error: None,
        };
        state.apply(frame);
        state
    }
}

/// A piece of a reply, in the order it happened: text, or a tool call's card.
#[derive(Debug, Clone, Copy)]
enum Part {
    Text { key: u64, text: RwSignal<String> },
    Call { key: u64, call: RwSignal<CallState> },
}

impl Part {
    fn key(&self) -> u64 {
        match self {
            Part::Text { key, .. } | Part::Call { key, .. } => *key,
        }
    }
}

/// A message on screen. Its parts are signals, so a streamed reply updates in place.
#[derive(Debug, Clone, Copy)]
struct Bubble {
    key: u64,
    /// `user` or `assistant`.
    role: &'static str,
    /// The whole text (what "Copy" copies).
    content: RwSignal<String>,
    /// The text and the tool calls, in order.
    parts: RwSignal<Vec<Part>>,
    /// `streaming`, `complete`, `failed`, `cancelled`, `interrupted` (or the server's word).
    status: RwSignal<String>,
    error: RwSignal<Option<String>>,
    model: RwSignal<Option<String>>,
    usage: RwSignal<Option<TokensUsed>>,
    sources: RwSignal<Vec<Source>>,
    /// The stored message's id, once known (a streamed reply's after it ends).
    id: RwSignal<Option<String>>,
    /// The reply's rating, `up` or `down`.
    rating: RwSignal<Option<String>>,
}

impl Bubble {
    fn new(key: u64, role: &'static str, content: String, status: &str) -> Self {
        Self {
            key,
            role,
            parts: RwSignal::new(vec![Part::Text {
                key: 0,
                text: RwSignal::new(content.clone()),
            }]),
            content: RwSignal::new(content),
            status: RwSignal::new(status.to_owned()),
            error: RwSignal::new(None),
            model: RwSignal::new(None),
            usage: RwSignal::new(None),
            sources: RwSignal::new(Vec::new()),
            id: RwSignal::new(None),
            rating: RwSignal::new(None),
        }
    }

    /// A stored message (see [`Bubble::set_stored`]).
    fn from_stored(key: u64, message: ChatMessage) -> Self {
        let role = if message.role == "user" {
            "user"
        } else {
            "assistant"
        };
        let bubble = Self::new(key, role, String::new(), &message.status);
        bubble.set_stored(message);
        bubble
    }

    /// Shows the stored `message`: its text, tool calls, state, model, usage, sources, id
    /// and rating, in place of what the bubble held. The order of a stored reply's text and
    /// tool calls is not kept, so its calls come first (the model calls tools before it
    /// answers).
    fn set_stored(&self, message: ChatMessage) {
        // Its calls, then those still waiting for a decision (the latest reply's only).
        let calls: Vec<CallState> = message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(CallState::from_view)
            .chain(
                message
                    .pending_approvals
                    .unwrap_or_default()
                    .into_iter()
                    .map(CallState::pending),
            )
            .collect();
        // Keys not used yet: the parts on screen are replaced, not kept.
        let base = self.next_part_key();
        let mut parts: Vec<Part> = calls
            .into_iter()
            .enumerate()
            .map(|(i, state)| Part::Call {
                key: base + i as u64,
                call: RwSignal::new(state),
            })
            .collect();
        parts.push(Part::Text {
            key: base + parts.len() as u64,
            text: RwSignal::new(message.content.clone()),
        });
        self.parts.set(parts);
        self.content.set(message.content);
        self.status.set(message.status);
        self.error.set(None);
        self.model.set(message.model);
        self.usage.set(message.tokens_used);
        self.sources.set(message.sources.unwrap_or_default());
        self.id.set(Some(message.id));
        self.rating.set(message.feedback.map(|f| f.rating));
    }

    /// Appends a fragment of the reply: to the text after the last tool call, or as new
    /// text after it.
    fn push_text(&self, fragment: &str) {
        self.content.update(|c| c.push_str(fragment));
        let last = self.parts.with_untracked(|parts| parts.last().copied());
        match last {
            Some(Part::Text { text, .. }) => text.update(|t| t.push_str(fragment)),
            _ => {
                let key = self.next_part_key();
                self.parts.update(|parts| {
                    parts.push(Part::Text {
                        key,
                        text: RwSignal::new(fragment.to_owned()),
                    });
                });
            }
        }
    }

    /// Adds a tool call's card after what the reply holds so far.
    fn push_call(&self, state: CallState) -> RwSignal<CallState> {
        let call = RwSignal::new(state);
        let key = self.next_part_key();
        self.parts
            .update(|parts| parts.push(Part::Call { key, call }));
        call
    }

    fn next_part_key(&self) -> u64 {
        self.parts
            .with_untracked(|parts| parts.iter().map(Part::key).max().unwrap_or(0) + 1)
    }

    /// The card of the call `id` in this message, if it has one.
    fn call(&self, id: &str) -> Option<RwSignal<CallState>> {
        self.parts.with_untracked(|parts| {
            parts.iter().find_map(|part| match part {
                Part::Call { call, .. } if call.with_untracked(|c| c.id == id) => Some(*call),
                _ => None,
            })
        })
    }

    /// Whether the message shows nothing: no text, no tool call, no error.
    fn is_blank(&self) -> bool {
        self.content.with_untracked(String::is_empty)
            && self.error.with_untracked(Option::is_none)
            && self
                .parts
                .with_untracked(|parts| parts.iter().all(|p| matches!(p, Part::Text { .. })))
    }
}

/// The card of the call `id` anywhere in the conversation.
fn find_call(bubbles: &[Bubble], id: &str) -> Option<RwSignal<CallState>> {
    bubbles.iter().rev().find_map(|bubble| bubble.call(id))
}

/// The last page of a thread's messages (its latest ones, oldest first); `None` if it
/// cannot be read.
async fn last_page(agent_id: &str, thread_id: &str) -> Option<Vec<ChatMessage>> {
    let base = format!("/api/agents/{agent_id}/conversations/{thread_id}/messages?limit=200");
    let mut page = client::get_json_signed_in::<MessagesResponse>(&base)
        .await
        .ok()?;
    while let Some(cursor) = page.next_cursor.take() {
        page = client::get_json_signed_in(&format!("{base}&cursor={cursor}"))
            .await
            .ok()?;
    }
    Some(page.messages)
}

/// The id of the thread's latest reply if its text is `content` (the server stores a reply
/// before its stream's `[DONE]`), for a stream that did not name its reply; `None` if it
/// cannot be read or another reply came after it.
async fn latest_reply_id(agent_id: &str, thread_id: &str, content: &str) -> Option<String> {
    last_page(agent_id, thread_id)
        .await?
        .into_iter()
        .rev()
        .find(|m| m.role == "assistant")
        .filter(|m| m.content == content)
        .map(|m| m.id)
}

/// The stored reply `reply_id` among the thread's latest messages; `None` while it is not
/// stored (its turn is stored when it ends) or cannot be read.
async fn stored_reply(agent_id: &str, thread_id: &str, reply_id: &str) -> Option<ChatMessage> {
    last_page(agent_id, thread_id)
        .await?
        .into_iter()
        .rev()
        .find(|m| m.id == reply_id)
}

/// The first page of a thread's messages (up to 200, oldest first), as the page shows a
/// thread.
async fn first_page(agent_id: &str, thread_id: &str) -> Result<Vec<ChatMessage>, ApiError> {
    let path = format!("/api/agents/{agent_id}/conversations/{thread_id}/messages?limit=200");
    client::get_json_signed_in::<MessagesResponse>(&path)
        .await
        .map(|answer| answer.messages)
}

/// What to show when the server refuses a message before its reply starts: its own words,
/// and for a 409 first what it means here (the thread's previous reply, perhaps sent from
/// another tab, is still being written).
fn refusal_message(err: &ApiError) -> String {
    if err.status == 409 {
        format!(
            "The previous reply in this conversation is still being written, perhaps in \
             another tab. Open the thread again to follow it, or send your message once it \
             has ended. (The server said: {})",
            err.message()
        )
    } else {
        err.message().to_owned()
    }
}

/// How reading a reply's stream ended, resumes included.
enum Followed {
    /// The stream ended, or was cut and could not be resumed.
    Ended(StreamEnd),
    /// The server no longer streams the reply (a resume answered 404, or the thread has
    /// moved on to another reply): its stored message holds it now.
    Gone,
}

/// Reads `stream` into the page with `on_frame`, `cursor` keeping its reply and last frame
/// id. A `resumable` reply whose stream is cut is followed again from the last frame
/// received (`GET .../conversations/{thread_id}/stream`), after [`resume_delay_ms`], into
/// the same bubble, until it ends, is stopped, or the resumes give up.
async fn read_reply(
    agent_id: &str,
    thread_id: Option<&str>,
    stream: ReplyStream,
    cursor: &mut ReplyCursor,
    resumable: bool,
    controller: &Abort,
    on_frame: impl FnMut(StreamFrame) + Copy,
) -> Followed {
    cursor.follows(stream.reply_id().as_deref());
    let mut end = stream.read(cursor, on_frame).await;
    let mut attempt = 0;
    while let (StreamEnd::Cut(_), true, Some(thread_id)) = (&end, resumable, thread_id) {
        let Some(delay) = resume_delay_ms(attempt) else {
            break;
        };
        client::sleep(delay).await;
        if controller.is_aborted() {
            return Followed::Ended(StreamEnd::Stopped);
        }
        let before = cursor.last_event_id();
        match client::open_resume(agent_id, thread_id, before, controller).await {
            Ok(stream) => {
                if !cursor.follows(stream.reply_id().as_deref()) {
                    stream.close().await;
                    return Followed::Gone;
                }
                end = stream.read(cursor, on_frame).await;
            }
            Err(err) if err.status == 404 => return Followed::Gone,
            Err(_) if controller.is_aborted() => return Followed::Ended(StreamEnd::Stopped),
            // No connection yet, or a passing refusal: try again.
            Err(_) => {}
        }
        attempt = if cursor.last_event_id() > before {
            0
        } else {
            attempt + 1
        };
    }
    Followed::Ended(end)
}

/// Rates reply `id` of the page's thread `up` or `down`, or clears its rating (`None`);
/// `Err` with the message to show.
async fn rate(
    agent_id: &str,
    thread_id: &str,
    id: &str,
    rating: Option<&str>,
) -> Result<(), String> {
    let path = format!("/api/agents/{agent_id}/conversations/{thread_id}/messages/{id}/feedback");
    let done = match rating {
        Some(rating) => client::put_signed_in::<_, serde_json::Value>(
            &path,
            &FeedbackRequest {
                rating: rating.to_owned(),
                comment: None,
            },
        )
        .await
        .map(drop),
        None => client::delete_signed_in::<serde_json::Value>(&path)
            .await
            .map(drop),
    };
    done.map_err(|e| e.message().to_owned())
}

/// Puts one frame of a streamed reply into `reply`. Tool call frames update the card of
/// their call wherever it is in the conversation (a decided call's outcome lands on the
/// card that asked for the decision), or add a card to `reply`; pending approvals turn
/// their calls' cards into questions.
fn apply_frame(reply: Bubble, bubbles: RwSignal<Vec<Bubble>>, frame: StreamFrame) {
    match frame {
        StreamFrame::Chunk(text) => {
            if !text.is_empty() {
                reply.push_text(&text);
            }
        }
        StreamFrame::Usage(usage) => {
            reply.usage.set(Some(usage.usage));
            reply.model.set(Some(usage.model));
            reply.sources.set(usage.sources);
        }
        StreamFrame::ToolCall(frame) => {
            let known = bubbles.with_untracked(|list| find_call(list, &frame.id));
            match known {
                Some(call) => call.update(|c| c.apply(*frame)),
                None => {
                    reply.push_call(CallState::from_frame(*frame));
                }
            }
        }
        StreamFrame::PendingApprovals(list) => {
            for approval in list {
                let known = bubbles.with_untracked(|all| find_call(all, &approval.tool_call_id));
                match known {
                    Some(call) => call.update(|c| {
                        if !matches!(c.status.as_str(), "succeeded" | "failed" | "denied") {
                            c.arguments = approval.arguments.clone();
                            c.status = "pending".into();
                            c.decision_error = None;
                        }
                    }),
                    None => {
                        reply.push_call(CallState::pending(approval));
                    }
                }
            }
        }
        // A reply stopped on purpose (cancelled, or its server shut down) is not a failure.
        StreamFrame::Error(body) => match stopped_status(&body) {
            Some(status) => reply.status.set(status.into()),
            None => {
                reply.status.set("failed".into());
                reply.error.set(Some(body.message));
            }
        },
        StreamFrame::Done => {}
    }
}

/// Reads the outcome of a decided call from the stored conversation (the continued reply
/// keeps it) onto its card; without one, the card says what was decided.
async fn resolve_decided(agent_id: &str, thread_id: &str, call: RwSignal<CallState>) {
    let id = call.with_untracked(|c| c.id.clone());
    let stored = client::get_json_signed_in::<MessagesResponse>(&format!(
        "/api/agents/{agent_id}/conversations/{thread_id}/messages?limit=200"
    ))
    .await
    .ok()
    .and_then(|answer| {
        answer
            .messages
            .into_iter()
            .rev()
            .flat_map(|m| m.tool_calls.unwrap_or_default())
            .find(|view| view.id == id)
    });
    call.update(|c| match stored {
        Some(view) => *c = CallState::from_view(view),
        None => {
            c.status = if c.status == "approving" {
                "approved"
            } else {
                "denied"
            }
            .into();
        }
    });
}

/// What a stream is for: a message the user sent, a decision on a waiting tool call, or the
/// reply in progress of a thread just opened.
enum Outbound {
    Chat(ChatRequest),
    Decision {
        thread_id: String,
        body: ApprovalRequest,
        call: RwSignal<CallState>,
    },
    /// Follows the thread's latest resumable reply from its first frame, if it is not
    /// among the messages shown (the turn of a reply still being written is stored when it
    /// ends).
    Follow {
        thread_id: String,
    },
}

/// The stream options of the dashboard's requests: usage, and a frame per tool call.
fn stream_options() -> Option<StreamOptions> {
    Some(StreamOptions {
        include_usage: true,
        include_tool_calls: true,
    })
}

/// The thread list, the messages of the chosen thread and the composer.
#[component]
pub fn ChatPage() -> impl IntoView {
    let hydrated = use_hydrated();
    let agent = use_agent();
    let thread = RwSignal::new(None::<String>);
    let bubbles = RwSignal::new(Vec::<Bubble>::new());
    let next_key = StoredValue::new(0_u64);
    let draft = RwSignal::new(String::new());
    let send_error = RwSignal::new(None::<String>);
    let streaming = RwSignal::new(false);
    let abort = StoredValue::new_local(None::<Abort>);
    // The thread of the reply streaming, once its answer named it: what "Stop" cancels.
    let live_thread = StoredValue::new(None::<String>);
    // "Stop" was pressed and the cancel is on its way.
    let stopping = RwSignal::new(false);
    // Counts the threads shown: a reply in progress found for one is not shown in another.
    let shown = StoredValue::new(0_u64);
    // The page's own owner: the signals of messages belong to it, not to the view or task
    // that happened to create them (a thread list entry, a tool call card), which re-render
    // and dispose of what they own while the messages live on.
    let owner = StoredValue::new(Owner::current().unwrap_or_default());

    let key = move || {
        next_key.update_value(|k| *k += 1);
        next_key.get_value()
    };
    let show_other = move || shown.update_value(|n| *n += 1);

    let threads = fetch_signed_in(
        move || format!("/api/agents/{}/conversations?limit=50", agent.id.get()),
        |answer: ConversationsResponse| answer.conversations,
    );
    let load_threads = move || threads.refetch();

    Effect::new(move || {
        agent.id.track();
        show_other();
        thread.set(None);
        bubbles.set(Vec::new());
    });

    // Streams a reply into `reply`: the answer to a message (`asked` is its bubble), the
    // continuation after a decision on a waiting tool call, or the reply in progress of a
    // thread just opened (shown once its stream answers). A resumable reply whose stream
    // is cut is resumed where it was; one the server no longer streams is shown as stored.
    let run = move |outbound: Outbound, reply: Bubble, asked: Option<Bubble>, controller: Abort| {
        let following = matches!(outbound, Outbound::Follow { .. });
        if !following {
            streaming.set(true);
        }
        let agent_id = agent.id.get_untracked();
        let showing = shown.get_value();
        owner.get_value().with(|| {
            // spawn_local: the reader of the reply's event stream, which feeds the bubbles
            // frame by frame until the stream ends or is stopped.
            spawn_local(async move {
                let was_new = matches!(&outbound, Outbound::Chat(body) if body.thread_id.is_none());
                let opened = match &outbound {
                    Outbound::Chat(body) => client::open_chat(&agent_id, body, &controller).await,
                    Outbound::Decision {
                        thread_id, body, ..
                    } => client::open_approval(&agent_id, thread_id, body, &controller).await,
                    Outbound::Follow { thread_id } => {
                        client::open_resume(&agent_id, thread_id, 0, &controller).await
                    }
                };
                let stream = match opened {
                    Ok(stream) => stream,
                    Err(err) => {
                        bubbles.update(|list| list.retain(|b| b.key != reply.key));
                        match (&outbound, asked) {
                            // No reply in progress (404), or none to show: nothing to do.
                            (Outbound::Follow { .. }, _) => return,
                            (Outbound::Decision { call, .. }, _) => {
                                // Refused: a call decided elsewhere or expired cannot be
                                // decided again; otherwise the buttons come back.
                                call.update(|c| {
                                    c.status = if err.status == 409 {
                                        "expired"
                                    } else {
                                        "pending"
                                    }
                                    .into();
                                    c.decision_error = Some(err.message().to_owned());
                                });
                            }
                            (Outbound::Chat(_), Some(asked)) => {
                                // Refused before the stream started: nothing was stored, so
                                // the message goes back into the composer.
                                bubbles.update(|list| list.retain(|b| b.key != asked.key));
                                draft.set(asked.content.get_untracked());
                                send_error.set(Some(refusal_message(&err)));
                            }
                            (Outbound::Chat(_), None) => {
                                send_error.set(Some(refusal_message(&err)));
                            }
                        }
                        abort.set_value(None);
                        stopping.set(false);
                        streaming.set(false);
                        return;
                    }
                };
                if following {
                    // Shown unless the thread shows it already (it ended and is stored),
                    // another thread is shown now, or another reply streams meanwhile.
                    let stored = stream.reply_id().is_some_and(|id| {
                        bubbles.with_untracked(|list| {
                            list.iter()
                                .any(|b| b.id.with_untracked(|known| known.as_ref() == Some(&id)))
                        })
                    });
                    if stored || streaming.get_untracked() || shown.get_value() != showing {
                        stream.close().await;
                        return;
                    }
                    streaming.set(true);
                    abort.set_value(Some(controller.clone()));
                    bubbles.update(|list| list.push(reply));
                }
                let thread_id = stream.thread_id().or_else(|| thread.get_untracked());
                if let Some(thread_id) = &thread_id {
                    thread.set(Some(thread_id.clone()));
                    live_thread.set_value(Some(thread_id.clone()));
                }
                // Decisions are not resumable: their stream is the reply.
                let resumable = !matches!(outbound, Outbound::Decision { .. });
                let mut cursor = ReplyCursor::default();
                let on_frame = move |frame| apply_frame(reply, bubbles, frame);
                let followed = read_reply(
                    &agent_id,
                    thread_id.as_deref(),
                    stream,
                    &mut cursor,
                    resumable,
                    &controller,
                    on_frame,
                )
                .await;
                // Whether the reply is stored now, as the bubble shows it.
                let settled = match followed {
                    Followed::Ended(StreamEnd::Done) => {
                        if reply.status.get_untracked() == "streaming" {
                            reply.status.set("complete".into());
                        }
                        // Stored before `[DONE]`: the stream named it, else it is looked up.
                        let id = match (cursor.reply_id(), &thread_id) {
                            (Some(id), _) => Some(id.to_owned()),
                            (None, Some(thread_id)) => {
                                let content = reply.content.get_untracked();
                                latest_reply_id(&agent_id, thread_id, &content).await
                            }
                            (None, None) => None,
                        };
                        reply.id.set(id);
                        true
                    }
                    Followed::Ended(StreamEnd::Stopped) => {
                        reply.status.set("cancelled".into());
                        false
                    }
                    Followed::Ended(StreamEnd::Cut(reason)) => {
                        reply.status.set("failed".into());
                        let message = if resumable {
                            "The connection was lost before the reply was complete, and it could \
                             not be resumed. Open the thread again to see the reply once it is \
                             stored."
                                .to_owned()
                        } else {
                            reason.map(|r| r.message).unwrap_or_else(|| {
                                "The connection closed before the reply was complete.".to_owned()
                            })
                        };
                        reply.error.set(Some(message));
                        false
                    }
                    Followed::Gone => {
                        let stored = match (&thread_id, cursor.reply_id()) {
                            (Some(thread_id), Some(id)) => {
                                stored_reply(&agent_id, thread_id, id).await
                            }
                            _ => None,
                        };
                        match stored {
                            Some(message) => {
                                owner.get_value().with(|| reply.set_stored(message));
                                true
                            }
                            None => {
                                reply.status.set("failed".into());
                                reply.error.set(Some(
                                    "The reply could not be resumed. Open the thread again to \
                                     see it once it is stored."
                                        .into(),
                                ));
                                false
                            }
                        }
                    }
                };
                if let Outbound::Decision {
                    thread_id, call, ..
                } = &outbound
                {
                    // A continuation that said nothing (other calls still wait) leaves no
                    // empty reply behind.
                    if reply.is_blank() && reply.status.get_untracked() == "complete" {
                        bubbles.update(|list| list.retain(|b| b.key != reply.key));
                    }
                    // The continued reply's stream does not repeat the decided call; its
                    // outcome is stored with the reply.
                    if matches!(
                        call.get_untracked().status.as_str(),
                        "approving" | "denying"
                    ) {
                        resolve_decided(&agent_id, thread_id, *call).await;
                    }
                }
                if let (Outbound::Follow { thread_id }, true) =
                    (&outbound, settled && shown.get_value() == showing)
                {
                    // The followed reply's turn is stored now: the thread as stored shows
                    // the message it answers too.
                    if let Ok(messages) = first_page(&agent_id, thread_id).await {
                        let list = owner.get_value().with(|| {
                            messages
                                .into_iter()
                                .map(|m| Bubble::from_stored(key(), m))
                                .collect()
                        });
                        bubbles.set(list);
                    }
                }
                abort.set_value(None);
                live_thread.set_value(None);
                stopping.set(false);
                streaming.set(false);
                if was_new || !matches!(outbound, Outbound::Chat(_)) {
                    load_threads();
                }
            })
        });
    };

    // Loads the messages of a thread into the bubbles; created here, so the signals of the
    // messages belong to the page. Then follows the thread's reply in progress, if any.
    let load_messages = Action::new_local(move |(id, thread_id): &(String, String)| {
        let (id, thread_id) = (id.clone(), thread_id.clone());
        async move {
            let messages = first_page(&id, &thread_id).await?;
            // Another thread was opened meanwhile: its own load shows it.
            if thread.get_untracked().as_deref() != Some(thread_id.as_str()) {
                return Ok(());
            }
            let list = messages
                .into_iter()
                .map(|m| Bubble::from_stored(key(), m))
                .collect();
            bubbles.set(list);
            if let Ok(controller) = Abort::new() {
                let reply = owner
                    .get_value()
                    .with(|| Bubble::new(key(), "assistant", String::new(), "streaming"));
                run(Outbound::Follow { thread_id }, reply, None, controller);
            }
            Ok::<(), ApiError>(())
        }
    });
    let messages_loading = load_messages.pending();
    let messages_failed = move || {
        load_messages
            .value()
            .with(|outcome| outcome.as_ref().and_then(|o| o.as_ref().err().cloned()))
    };

    let open_thread = move |thread_id: String| {
        if streaming.get_untracked() {
            return;
        }
        let id = agent.id.get_untracked();
        show_other();
        thread.set(Some(thread_id.clone()));
        bubbles.set(Vec::new());
        send_error.set(None);
        load_messages.dispatch((id, thread_id));
    };

    let new_thread = move |_| {
        if streaming.get_untracked() {
            return;
        }
        show_other();
        thread.set(None);
        bubbles.set(Vec::new());
        send_error.set(None);
        load_messages.clear();
    };

    let send = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if streaming.get_untracked() {
            return;
        }
        let message = draft.get_untracked();
        if message.trim().is_empty() {
            send_error.set(Some("Write a message first.".into()));
            return;
        }
        if message.chars().count() > MESSAGE_MAX {
            send_error.set(Some(format!(
                "A message can have at most {MESSAGE_MAX} characters."
            )));
            return;
        }
        let controller = match Abort::new() {
            Ok(controller) => controller,
            Err(err) => {
                send_error.set(Some(err.message().to_owned()));
                return;
            }
        };
        abort.set_value(Some(controller.clone()));
        send_error.set(None);
        draft.set(String::new());
        let (asked, reply) = owner.get_value().with(|| {
            (
                Bubble::new(key(), "user", message.clone(), "complete"),
                Bubble::new(key(), "assistant", String::new(), "streaming"),
            )
        });
        bubbles.update(|list| list.extend([asked, reply]));
        let body = ChatRequest {
            message,
            thread_id: thread.get_untracked(),
            stream: true,
            stream_options: stream_options(),
            // Generated to its end whatever happens to this connection, so that a cut
            // stream or a reloaded page picks it up again.
            resumable: true,
            ..ChatRequest::default()
        };
        run(Outbound::Chat(body), reply, Some(asked), controller);
    };

    // Approve or deny a waiting tool call; the continued reply streams in as a new reply.
    let decide = Callback::new(move |(call, approved): (RwSignal<CallState>, bool)| {
        if streaming.get_untracked() {
            return;
        }
        let Some(thread_id) = thread.get_untracked() else {
            return;
        };
        let controller = match Abort::new() {
            Ok(controller) => controller,
            Err(err) => {
                call.update(|c| c.decision_error = Some(err.message().to_owned()));
                return;
            }
        };
        abort.set_value(Some(controller.clone()));
        send_error.set(None);
        let tool_call_id = call.with_untracked(|c| c.id.clone());
        call.update(|c| {
            c.status = if approved { "approving" } else { "denying" }.into();
            c.decision_error = None;
        });
        let reply = owner
            .get_value()
            .with(|| Bubble::new(key(), "assistant", String::new(), "streaming"));
        bubbles.update(|list| list.push(reply));
        let body = ApprovalRequest {
            tool_call_id,
            approved,
            stream: true,
            stream_options: stream_options(),
        };
        run(
            Outbound::Decision {
                thread_id,
                body,
                call,
            },
            reply,
            None,
            controller,
        );
    });

    // Cancels the reply on the server, whose stream then ends by itself with the cancelled
    // frame and `[DONE]`. Before the answer named its thread, or when the cancel fails,
    // the request is aborted instead.
    let stop = move |_| {
        if stopping.get_untracked() {
            return;
        }
        let Some(controller) = abort.get_value() else {
            return;
        };
        let Some(thread_id) = live_thread.get_value() else {
            controller.abort();
            return;
        };
        stopping.set(true);
        let agent_id = agent.id.get_untracked();
        spawn_local(async move {
            // Refused (the thread is not stored before its first reply ends, or the reply
            // has just ended) or not sent: the stream stops being read here at least.
            if client::cancel_reply(&agent_id, &thread_id).await.is_err() {
                controller.abort();
            }
        });
    };

    view! {
        <Title text="Chat"/>
        <div class="chat">
            <aside class="card threads" aria-label="Threads">
                <button
                    type="button"
                    class="button button-block"
                    on:click=new_thread
                    disabled=move || !hydrated.get() || streaming.get()
                >
                    "New thread"
                </button>
                <Transition fallback=|| loading_view("threads")>
                {move || Suspend::new(async move { match threads.await {
                    Err(err) => load_error_view(&err, "threads"),
                    Ok(list) if list.is_empty() => {
                        view! { <p class="empty">"No threads yet."</p> }.into_any()
                    }
                    Ok(list) => {
                        view! {
                            <ul class="thread-list" data-testid="thread-list">
                                {list
                                    .into_iter()
                                    .map(|c| {
                                        let id = c.thread_id.clone();
                                        let current = {
                                            let id = id.clone();
                                            move || {
                                                (thread.read().as_deref() == Some(id.as_str()))
                                                    .then_some("true")
                                            }
                                        };
                                        view! {
                                            <li>
                                                <button
                                                    type="button"
                                                    class="thread"
                                                    aria-current=current
                                                    on:click=move |_| open_thread(id.clone())
                                                >
                                                    <span class="thread-title">{c.title.clone()}</span>
                                                    <span class="muted small">
                                                        {format!(
                                                            "{} {} · {}",
                                                            c.message_count,
                                                            if c.message_count == 1 { "message" } else { "messages" },
                                                            short_time(&c.updated_at),
                                                        )}
                                                    </span>
                                                </button>
                                            </li>
                                        }
                                    })
                                    .collect_view()}
                            </ul>
                        }
                            .into_any()
                    }
                }})}
                </Transition>
            </aside>
            <section class="card conversation" aria-label="Conversation">
                <div class="messages" aria-live="polite" data-testid="messages">
                    {move || match (messages_loading.get(), messages_failed()) {
                        (true, _) => loading_view("messages"),
                        (false, Some(err)) => load_error_view(&err, "messages"),
                        (false, None) => ().into_any(),
                    }}
                    <Show when=move || {
                        bubbles.read().is_empty() && !messages_loading.get()
                            && messages_failed().is_none()
                    }>
                        <p class="empty" data-testid="chat-empty">
                            "Ask the agent something. Its reply appears here as it is written."
                        </p>
                    </Show>
                    <For each=move || bubbles.get() key=|bubble| bubble.key let(bubble)>
                        <MessageView bubble decide busy=streaming thread/>
                    </For>
                </div>
                <form class="composer" on:submit=send>
                    <label for="chat-message" class="visually-hidden">"Message"</label>
                    <textarea
                        id="chat-message"
                        rows="3"
                        placeholder="Message the agent (Enter sends, Shift+Enter adds a line)"
                        prop:value=move || draft.get()
                        on:input=move |ev| draft.set(event_target_value(&ev))
                        on:keydown=move |ev: leptos::ev::KeyboardEvent| {
                            if ev.key() == "Enter" && !ev.shift_key() && !ev.is_composing() {
                                ev.prevent_default();
                                if let Some(form) = event_target::<web_sys::HtmlTextAreaElement>(&ev).form() {
                                    let _ = form.request_submit();
                                }
                            }
                        }
                    ></textarea>
                    {move || {
                        send_error
                            .get()
                            .map(|message| {
                                view! { <Notice tone=Tone::Error testid="chat-error">{message}</Notice> }
                            })
                    }}
                    <div class="composer-actions">
                        <Show
                            when=move || streaming.get()
                            fallback=move || {
                                view! {
                                    <button type="submit" class="button" disabled=move || !hydrated.get()>
                                        "Send"
                                    </button>
                                }
                            }
                        >
                            <button
                                type="button"
                                class="button button-danger"
                                on:click=stop
                                disabled=move || stopping.get()
                            >
                                {move || if stopping.get() { "Stopping…" } else { "Stop" }}
                            </button>
                        </Show>
                    </div>
                </form>
            </section>
        </div>
    }
    .into_any()
}

/// One message: its text (Markdown) and tool calls in order, and for replies the state,
/// sources, token usage and "Copy".
#[component]
fn MessageView(
    bubble: Bubble,
    /// Sends the user's decision on a waiting tool call.
    decide: Callback<(RwSignal<CallState>, bool)>,
    /// Whether a reply is streaming (decisions wait for it).
    busy: RwSignal<bool>,
    /// The thread shown.
    thread: RwSignal<Option<String>>,
) -> impl IntoView {
    let agent = use_agent();
    let rate_action = Action::new_local(move |next: &Option<String>| {
        let next = next.clone();
        let (agent_id, thread_id, id) = (
            agent.id.get_untracked(),
            thread.get_untracked(),
            bubble.id.get_untracked(),
        );
        async move {
            let (Some(thread_id), Some(id)) = (thread_id, id) else {
                return Err("This reply is not stored yet.".to_owned());
            };
            rate(&agent_id, &thread_id, &id, next.as_deref()).await?;
            bubble.rating.set(next);
            Ok(())
        }
    });
    let rate_failed = move || rate_action.value().get().and_then(Result::err);
    let thumb = move |rating: &'static str, label: &'static str| {
        view! {
            <button
                type="button"
                class=format!("button button-secondary button-small thumb thumb-{rating}")
                aria-label=label
                title=label
                aria-pressed=move || (bubble.rating.get().as_deref() == Some(rating)).to_string()
                disabled=move || rate_action.pending().get()
                on:click=move |_| {
                    let next = (bubble.rating.get_untracked().as_deref() != Some(rating))
                        .then(|| rating.to_owned());
                    rate_action.dispatch(next);
                }
            >
                <svg viewBox="0 0 24 24" width="14" height="14" aria-hidden="true">
                    <path fill="currentColor" d=THUMB_PATH></path>
                </svg>
            </button>
        }
    };
    let copy_action = copy_to_clipboard();
    let copied = copy_action.value();
    let copy = move |_| {
        copy_action.dispatch(bubble.content.get_untracked());
    };
    let is_reply = bubble.role == "assistant";
    view! {
        <article
            class=format!("message message-{}", bubble.role)
            data-testid=if is_reply { "reply" } else { "question" }
            data-status=move || bubble.status.get()
            aria-busy=move || (bubble.status.get() == "streaming").to_string()
        >
            <header class="message-head">
                <span class="message-role">{if is_reply { "Agent" } else { "You" }}</span>
                {move || match bubble.status.get().as_str() {
                    "streaming" => Some(view! { <span class="pill">"writing…"</span> }.into_any()),
                    "cancelled" => {
                        Some(view! { <span class="pill" data-testid="reply-stopped">"stopped"</span> }.into_any())
                    }
                    "interrupted" => {
                        Some(
                            view! { <span class="pill" data-testid="reply-interrupted">"interrupted"</span> }
                                .into_any(),
                        )
                    }
                    "failed" => Some(view! { <span class="pill pill-error">"failed"</span> }.into_any()),
                    _ => None,
                }}
            </header>
            <div class="message-body" data-testid="message-body">
                <For each=move || bubble.parts.get() key=|part| part.key() let(part)>
                    {match part {
                        Part::Text { text, .. } => {
                            let html = move || markdown::render(&text.read());
                            view! { <div class="markdown" inner_html=html></div> }.into_any()
                        }
                        Part::Call { call, .. } => view! { <ToolCallCard call decide busy/> }.into_any(),
                    }}
                </For>
            </div>
            {move || {
                bubble
                    .error
                    .get()
                    .map(|message| {
                        view! { <Notice tone=Tone::Error testid="reply-error">{message}</Notice> }
                    })
            }}
            <Show when=move || is_reply && !bubble.sources.read().is_empty()>
                <details class="sources" data-testid="sources">
                    <summary>{move || format!("Sources ({})", bubble.sources.read().len())}</summary>
                    <ol>
                        {move || {
                            bubble
                                .sources
                                .get()
                                .into_iter()
                                .map(|source| {
                                    let title = source.title.clone();
                                    view! {
                                        <li>
                                            {match source.url.clone() {
                                                Some(url) if url.starts_with("http") => {
                                                    view! {
                                                        <a href=url rel="noopener noreferrer" target="_blank">
                                                            {title}
                                                        </a>
                                                    }
                                                        .into_any()
                                                }
                                                _ => view! { <strong>{title}</strong> }.into_any(),
                                            }}
                                            <blockquote>{source.snippet.clone()}</blockquote>
                                        </li>
                                    }
                                })
                                .collect_view()
                        }}
                    </ol>
                </details>
            </Show>
            <Show when=move || is_reply && bubble.status.get() != "streaming">
                <footer class="message-foot">
                    {move || {
                        bubble
                            .usage
                            .get()
                            .map(|usage| {
                                view! {
                                    <span class="muted small" data-testid="usage">
                                        {format!(
                                            "{} tokens ({} prompt, {} reply){}",
                                            usage.total,
                                            usage.prompt,
                                            usage.completion,
                                            bubble.model.get().map(|m| format!(" · {m}")).unwrap_or_default(),
                                        )}
                                    </span>
                                }
                            })
                    }}
                    <button type="button" class="button button-secondary button-small" on:click=copy>
                        "Copy"
                    </button>
                    <Show when=move || bubble.id.read().is_some()>
                        <span class="thumbs" data-testid="feedback">
                            {thumb("up", "Helpful")}
                            {thumb("down", "Not helpful")}
                        </span>
                    </Show>
                    {move || {
                        rate_failed()
                            .map(|message| view! { <span class="error-text small" role="alert">{message}</span> })
                    }}
                    {move || match copied.get() {
                        Some(Ok(())) => Some(view! { <span class="muted small" role="status">"Copied"</span> }.into_any()),
                        Some(Err(message)) => {
                            Some(view! { <span class="error-text small" role="alert">{message}</span> }.into_any())
                        }
                        None => None,
                    }}
                </footer>
            </Show>
        </article>
    }
    .into_any()
}

/// The words and colour of a tool call's state (also of the inbox's transcripts).
pub(super) fn call_status(status: &str) -> (&'static str, &'static str) {
    match status {
        "running" => ("running…", "pill status-processing"),
        "succeeded" => ("succeeded", "pill status-indexed"),
        "failed" => ("failed", "pill pill-error"),
        "denied" => ("denied", "pill"),
        "pending" => ("waiting for your approval", "pill status-pending"),
        "approving" => ("approved, running…", "pill status-processing"),
        "denying" => ("denying…", "pill status-processing"),
        "approved" => ("approved", "pill status-indexed"),
        "expired" => ("not decided", "pill"),
        // A call of a client's own tool (OpenAI-compatible API), which the client runs.
        "requested" => ("run by the client", "pill"),
        _ => ("", "pill"),
    }
}

/// One tool call of a reply: the tool's name, its arguments, its state, and once it ended
/// its output or error and how long it took. A call that waits for approval asks for it
/// with "Approve" and "Deny".
#[component]
fn ToolCallCard(
    call: RwSignal<CallState>,
    decide: Callback<(RwSignal<CallState>, bool)>,
    busy: RwSignal<bool>,
) -> impl IntoView {
    let name = move || call.with(|c| c.name.clone());
    let status = move || call.with(|c| c.status.clone());
    let arguments =
        move || call.with(|c| serde_json::to_string(&c.arguments).unwrap_or_else(|_| "{}".into()));
    let label = move || format!("Tool call {}", name());
    view! {
        <section class="tool-call" data-testid="tool-call" data-status=status aria-label=label>
            <header class="tool-call-head">
                <span class="tool-call-kind">"Tool"</span>
                <code class="tool-call-name" data-testid="tool-call-name">{name}</code>
                {move || {
                    let (words, class) = call_status(&status());
                    (!words.is_empty())
                        .then(|| view! { <span class=class data-testid="tool-call-status">{words}</span> })
                }}
                {move || {
                    call.with(|c| c.duration_ms.filter(|_| c.status != "running"))
                        .map(|ms| view! { <span class="muted small" data-testid="tool-call-duration">{format!("{ms} ms")}</span> })
                }}
            </header>
            <p class="tool-call-args">
                <span class="muted small">"Arguments "</span>
                <code data-testid="tool-call-arguments">{arguments}</code>
            </p>
            {move || {
                let output = call.with(|c| c.output.clone());
                (!output.is_empty())
                    .then(|| {
                        view! {
                            <details class="tool-call-output" open>
                                <summary>"Output"</summary>
                                <pre data-testid="tool-call-output">{output}</pre>
                            </details>
                        }
                    })
            }}
            {move || {
                call.with(|c| c.error.clone())
                    .map(|error| view! { <p class="error-text small" data-testid="tool-call-error">{error}</p> })
            }}
            <Show when=move || status() == "pending">
                <div class="tool-call-decision" role="group" aria-label=move || format!("Decide on {}", name())>
                    <p class="small">
                        "The agent wants to run this tool. It runs only if you approve."
                    </p>
                    <button
                        type="button"
                        class="button button-small"
                        disabled=move || busy.get()
                        on:click=move |_| decide.run((call, true))
                    >
                        "Approve"
                    </button>
                    <button
                        type="button"
                        class="button button-secondary button-small"
                        disabled=move || busy.get()
                        on:click=move |_| decide.run((call, false))
                    >
                        "Deny"
                    </button>
                </div>
            </Show>
            {move || {
                call.with(|c| c.decision_error.clone())
                    .map(|message| {
                        view! { <Notice tone=Tone::Error testid="tool-call-decision-error">{message}</Notice> }
                    })
            }}
        </section>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ErrorBody;

    fn refused(status: u16, message: &str) -> ApiError {
        ApiError {
            status,
            body: ErrorBody {
                error: "x".into(),
                message: message.into(),
            },
        }
    }

    #[test]
    fn a_reply_in_progress_elsewhere_is_explained_with_the_servers_words() {
        let busy = refusal_message(&refused(
            409,
            "A reply is in progress in this conversation: resume it (GET .../stream) or cancel it (POST .../cancel), or send the message with \"queue\": true",
        ));
        assert!(busy.starts_with("The previous reply in this conversation is still being written, perhaps in another tab."), "{busy}");
        assert!(busy.ends_with("(The server said: A reply is in progress in this conversation: resume it (GET .../stream) or cancel it (POST .../cancel), or send the message with \"queue\": true)"), "{busy}");
        assert_eq!(
            refusal_message(&refused(400, "The message is empty.")),
            "The message is empty."
        );
    }
}
