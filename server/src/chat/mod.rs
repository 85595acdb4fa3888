//! Chat orchestration, independent of HTTP: resolve thread and model, build the prompt
//! ([`prompt`]), stream with retries before the first token ([`stream`]), run tools, and
//! store the turn when it ends, announcing `conversation.created` and `message.created`.

pub mod analytics;
pub mod export;
pub mod feedback;
pub mod history;
pub mod prompt;
pub mod quota;
pub mod replies;
pub mod stream;
pub mod writer;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use app::api::{PendingApproval, Source, TokensUsed, ToolCallView};
use futures::StreamExt;
use serde_json::json;

use self::prompt::PASSAGE_OVERHEAD;
use self::quota::{Payer, QuotaState, Quotas};
pub use self::{
    prompt::{
        attachments_text, check_length, trim_history, Attachment, MAX_ATTACHMENTS_BYTES,
        SNIPPET_CHARS,
    },
    stream::{open_stream, usage_or_counted, Frame, Relay, RETRY_BACKOFF, UPSTREAM_ATTEMPTS},
    writer::{TurnWriter, Urgency},
};
/// How a reply ended: the status of the message that stores it.
pub use crate::store::chat::ReplyStatus;
use crate::{
    clock::Clock,
    config::ChatConfig,
    domain::Channel,
    ids::{AgentId, MessageId, ThreadId, UserId},
    knowledge::{search::retrieve, Knowledge},
    llm::{
        tokens, Event, FinishReason, Models, Passage, Prompt, ProviderError, ResolvedModel, Role,
        Sampling, ToolCall, ToolChoice, ToolExchange, Turn, Usage,
    },
    store::{
        AgentRecord, ChannelLink, ChatStore, MessageRecord, StoreError, ThreadRecord, ToolStore,
        TurnRecord,
    },
    tools::{Toolbox, Tools},
    views::iso,
    webhooks::{EventType, Events},
};

/// Earlier messages considered for the prompt before trimming to the context window.
pub const HISTORY_LIMIT: u32 = 200;

/// Why a chat turn failed. The texts are the messages clients are shown.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The message plus its attachments' text is longer than `MAX_MESSAGE_CHARS`.
    #[error("{}", too_long_message(*.max, *.total, *.with_attachments))]
    TooLong {
        max: usize,
        /// Characters of the message and its attachments' text.
        total: usize,
        with_attachments: bool,
    },
    /// An attachment's data is not base64.
    #[error("attachment `{filename}`: data is not valid base64")]
    AttachmentNotBase64 { filename: String },
    /// The attachments total more than [`MAX_ATTACHMENTS_BYTES`].
    #[error("Attachments may total at most 10 MiB")]
    AttachmentsTooLarge,
    /// An attachment is not text or Markdown.
    #[error("attachment `{filename}` has type `{content_type}`; attach text or Markdown files")]
    AttachmentType {
        filename: String,
        content_type: String,
    },
    /// A text attachment is not UTF-8.
    #[error("attachment `{filename}` is not UTF-8 text")]
    AttachmentNotUtf8 { filename: String },
    /// The agent was deleted while the turn was prepared.
    #[error("Agent not found")]
    AgentGone,
    /// The thread is unknown, someone else's, or of another agent.
    #[error("Thread not found")]
    ThreadNotFound,
    /// The message is not in the thread.
    #[error("Message not found")]
    MessageNotFound,
    /// A list's or the usage's query is out of range or malformed; the message names it.
    #[error("{0}")]
    Invalid(String),
    /// A monthly token quota or API key budget is spent (docs/api.md § Token quotas).
    #[error("{}", .0.exceeded_message())]
    QuotaExceeded(Box<quota::QuotaState>),
    /// No configured provider offers the agent's model.
    #[error("The agent's model `{model}` is not offered by any configured provider right now")]
    ModelUnavailable { model: String },
    /// The model provider failed or did not answer in time.
    #[error(transparent)]
    Upstream(ProviderError),
    /// The thread's previous reply is still in progress (docs/api.md § Turns in order).
    #[error("A reply is in progress in this conversation: resume it (GET .../stream) or cancel it (POST .../cancel), or send the message with \"queue\": true")]
    ReplyInProgress,
    /// The reply was cancelled (`POST .../cancel`) before it ended; stored as `cancelled`.
    #[error("The reply was cancelled")]
    Cancelled,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The message of [`ChatError::TooLong`].
fn too_long_message(max: usize, total: usize, with_attachments: bool) -> String {
    if with_attachments {
        format!(
            "message and the text of its attachments must together be at most {max} characters; they have {total}"
        )
    } else {
        format!("message must be at most {max} characters")
    }
}

/// A chat turn ready to be sent upstream.
pub struct PreparedChat {
    /// The turn's thread; stored with the turn if new ([`PreparedChat::new_thread`]).
    pub thread: ThreadRecord,
    pub new_thread: bool,
    /// The user's message, stored with the reply; `None` for a continuation after approvals.
    pub user_message: Option<MessageRecord>,
    pub reply_id: MessageId,
    /// Calls waiting for approval: the turn stopped for them ([`Tools::hold`]).
    pub pending: Vec<ToolCall>,
    /// Whether approval-requiring tools are offered: only where a person can approve (chat).
    pub approvals: bool,
    /// The channel conversation the new thread holds, linked when stored.
    pub channel: Option<ChannelLink>,
    pub model: ResolvedModel,
    /// What goes upstream; dropped once answered ([`PreparedChat::release_prompt`]).
    pub prompt: Prompt,
    /// Prompt tokens counted while built: the usage of a reply whose provider reports none.
    pub prompt_tokens: u32,
    pub sources: Vec<Source>,
    pub started: Instant,
    pub toolbox: Toolbox,
    pub tool_calls: Vec<ToolCallView>,
    /// Tool rounds run so far; at `MAX_TOOL_ROUNDS` the model is called with `tool_choice: none`.
    pub tool_rounds: u32,
    /// Usage of the tool-calling rounds, summed ([`PreparedChat::total_usage`] adds the last).
    pub usage_so_far: Option<TokensUsed>,
    /// Whether the caller defined the tools: the model's calls then end the turn for it to run.
    pub client_tools: bool,
    /// Who pays for the turn; its quotas are checked again once it is stored (alerts).
    pub payer: Payer,
    /// The limit with the fewest tokens left when the turn was admitted (`X-Quota-*`).
    pub quota: Option<QuotaState>,
    /// The thread's turn, held until the reply is stored; `None` for a turn without a
    /// stored thread (the OpenAI-compatible API's given history).
    pub turn: Option<replies::TurnGuard>,
}

impl PreparedChat {
    /// Whether the model's calls are run: tools offered, the last call not past `MAX_TOOL_ROUNDS`.
    pub fn may_call_tools(&self) -> bool {
        !self.toolbox.is_empty() && self.prompt.tool_choice != ToolChoice::None
    }

    /// Drops the prompt once answered, unless the turn has tools (a tool round sends it again).
    pub fn release_prompt(&mut self) {
        if self.toolbox.is_empty() {
            self.prompt = Prompt::default();
        }
    }

    /// Ends a client-tools turn on `calls` (recorded `requested`); answers whether there were any.
    pub fn request_client_calls(&mut self, calls: &[ToolCall]) -> bool {
        if !self.client_tools || calls.is_empty() {
            return false;
        }
        self.tool_calls
            .extend(calls.iter().map(|call| client_call_view(call, None)));
        true
    }

    /// The calls the turn stopped for, as the API shows them.
    pub fn pending_approvals(&self) -> Vec<PendingApproval> {
        self.pending
            .iter()
            .map(|c| PendingApproval {
                tool_call_id: c.id.clone(),
                name: c.name.clone(),
                arguments: serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!({})),
            })
            .collect()
    }

    /// The turn's usage: [`PreparedChat::usage_so_far`] + the last call's ([`usage_or_counted`]).
    pub fn total_usage(&self, reported: Option<Usage>, last_text: &str) -> TokensUsed {
        add_usage(
            self.usage_so_far,
            usage_or_counted(reported, self.prompt_tokens, last_text),
        )
    }
}

/// The `type` of a stored call of a tool the caller defined ([`TurnOptions::client_tools`]).
pub const CLIENT_TOOL_TYPE: &str = "client";
/// The `status` of a stored call of a client tool whose result the caller has not sent.
pub const REQUESTED_STATUS: &str = "requested";

/// A client tool's stored call: `requested` without `result`, else `succeeded` with it.
fn client_call_view(call: &ToolCall, result: Option<&str>) -> ToolCallView {
    ToolCallView {
        id: call.id.clone(),
        name: call.name.clone(),
        tool_type: CLIENT_TOOL_TYPE.into(),
        arguments: serde_json::from_str::<serde_json::Value>(&call.arguments)
            .ok()
            .filter(serde_json::Value::is_object)
            .unwrap_or_else(|| json!({})),
        status: result.map_or(REQUESTED_STATUS, |_| "succeeded").into(),
        output: result.unwrap_or_default().to_string(),
        error: None,
        duration_ms: 0,
    }
}

/// `a` + `b`, field by field.
fn add_usage(a: Option<TokensUsed>, b: TokensUsed) -> TokensUsed {
    let a = a.unwrap_or(TokensUsed {
        prompt: 0,
        completion: 0,
        total: 0,
    });
    TokensUsed {
        prompt: a.prompt + b.prompt,
        completion: a.completion + b.completion,
        total: a.total + b.total,
    }
}

/// The thread a chat turn belongs to.
pub enum ThreadChoice<'a> {
    /// A new thread, titled after the message.
    New,
    /// A new thread with earlier turns the caller sends (OpenAI API); only the new turn is stored.
    Given(Vec<Turn>),
    /// The caller's thread with this id ([`ChatError::ThreadNotFound`] if unknown or another's).
    Id(&'a ThreadId),
    /// A thread the caller has already looked up.
    Known(ThreadRecord),
}

/// What a caller adds to a turn: instructions after the agent's system prompt, and sampling.
#[derive(Debug, Clone, Default)]
pub struct TurnOptions {
    /// Put after the agent's system prompt, a blank line between; empty for none.
    pub instructions: String,
    pub sampling: Sampling,
    /// Whether tools that require approval may be offered ([`PreparedChat::approvals`]).
    pub approvals: bool,
    /// Tools the caller defines and runs (OpenAI `tools`); the agent's own are then not offered.
    pub client_tools: Option<ClientTools>,
    /// Turns after the message (earlier client-tool calls and results), not stored as messages;
    /// their calls are recorded with the reply as `succeeded`.
    pub after: Vec<Turn>,
    /// Where the turn comes from; recorded on the thread if the turn starts one.
    pub channel: Channel,
    /// Who pays for it ([`quota::Quotas::admit`]).
    pub payer: Payer,
    /// Whether the turn waits for the thread's reply in progress, if any, rather than failing
    /// with [`ChatError::ReplyInProgress`].
    pub queue: bool,
}

/// The tools of [`TurnOptions::client_tools`] and how the model may use them.
#[derive(Debug, Clone, Default)]
pub struct ClientTools {
    pub specs: Vec<crate::llm::ToolSpec>,
    /// `auto`, `none`, `required`, or one of `specs` by name.
    pub choice: ToolChoice,
}

/// A complete reply ([`ChatService::complete`]).
#[derive(Debug, Clone)]
pub struct Reply {
    pub text: String,
    pub usage: TokensUsed,
    pub finish: FinishReason,
    pub tool_calls: Vec<ToolCallView>,
    /// Calls that wait for approval: the turn stopped for them.
    pub pending_approvals: Vec<PendingApproval>,
    /// Calls of client tools for the caller to run (`finish` is then `ToolCalls`); else empty.
    pub client_calls: Vec<ToolCall>,
}

/// Whose `thread`'s replies are ([`replies::Owner`]).
pub fn owner_of(thread: &ThreadRecord) -> replies::Owner {
    replies::Owner {
        user_id: thread.user_id.clone(),
        agent_id: thread.agent_id.clone(),
    }
}

/// A new, unstored thread of `agent` for `user_id` from `channel`, titled after `message`'s
/// first 80 characters.
fn new_thread(
    agent: &AgentRecord,
    user_id: &UserId,
    message: &str,
    channel: Channel,
    now: chrono::DateTime<chrono::Utc>,
) -> ThreadRecord {
    ThreadRecord {
        id: ThreadId::new(),
        agent_id: agent.id.clone(),
        user_id: user_id.clone(),
        title: message.trim().chars().take(80).collect(),
        message_count: 0,
        channel,
        feedback_up: 0,
        feedback_down: 0,
        created_at: now,
        updated_at: now,
    }
}

/// A stored message as upstream turns: its tool calls with results, then its text if any.
fn history_turns(m: MessageRecord) -> Vec<Turn> {
    let calls: Vec<ToolCallView> = m
        .tool_calls
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default();
    let mut turns = Vec::with_capacity(2);
    if !calls.is_empty() {
        turns.push(Turn {
            role: Role::Assistant,
            content: String::new(),
            tool_calls: calls.into_iter().map(exchange_of).collect(),
        });
    }
    // An empty reply (one that stopped for approvals before saying anything) sends
    // nothing: providers refuse empty assistant text.
    if !m.content.is_empty() || m.role == Role::User {
        turns.push(Turn::text(m.role, m.content));
    }
    turns
}

/// A stored tool call as sent back to the model, with its result or error.
fn exchange_of(view: ToolCallView) -> ToolExchange {
    let is_error = view.status != "succeeded";
    if view.status == REQUESTED_STATUS {
        // A call of a client tool whose result went to another conversation.
        return ToolExchange {
            call: ToolCall {
                id: view.id,
                name: view.name,
                arguments: view.arguments.to_string(),
            },
            result: "Error: the caller was asked to run this call; its result is not known here"
                .into(),
            is_error,
        };
    }
    ToolExchange {
        call: ToolCall {
            id: view.id,
            name: view.name,
            arguments: view.arguments.to_string(),
        },
        result: if is_error {
            format!(
                "Error: {}",
                view.error.unwrap_or_else(|| view.status.clone())
            )
        } else {
            view.output
        },
        is_error,
    }
}

/// The tokens a turn adds to a prompt: its text, and its calls' arguments and results.
fn turn_tokens(turn: &Turn) -> u32 {
    tokens::count(&turn.content)
        + turn
            .tool_calls
            .iter()
            .map(|e| tokens::count(&e.call.arguments) + tokens::count(&e.result))
            .sum::<u32>()
}

pub struct ChatService {
    store: Arc<dyn ChatStore>,
    approvals: Arc<dyn ToolStore>,
    /// Stores each turn when it ends, group-committed with the others ending then.
    writer: TurnWriter,
    models: Models,
    knowledge: Knowledge,
    events: Events,
    clock: Clock,
    config: ChatConfig,
    /// `PROVIDER_TIMEOUT_SECS`: the wait for a provider's first event ([`open_stream`]).
    provider_timeout: Duration,
    tools: Tools,
    quotas: Quotas,
    replies: Arc<replies::Replies>,
}

impl ChatService {
    /// The service; `provider_timeout` bounds the wait for a provider's first answer.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: Arc<dyn ChatStore>,
        approvals: Arc<dyn ToolStore>,
        models: Models,
        knowledge: Knowledge,
        events: Events,
        clock: Clock,
        config: &ChatConfig,
        provider_timeout: Duration,
        tools: Tools,
        quotas: Quotas,
        replies: Arc<replies::Replies>,
    ) -> Self {
        Self {
            quotas,
            replies,
            writer: TurnWriter::start(store.clone()),
            store,
            approvals,
            models,
            knowledge,
            events,
            clock,
            config: config.clone(),
            provider_timeout,
            tools,
        }
    }

    /// Replies in progress and just finished: turns, resumption, cancel, drain.
    pub fn replies(&self) -> &Arc<replies::Replies> {
        &self.replies
    }

    /// The message length rule and the streams' heartbeat (applied by the HTTP layer).
    pub fn config(&self) -> &ChatConfig {
        &self.config
    }

    /// Checks a message's length before anything is read. Errors: [`ChatError::TooLong`].
    pub fn check_message(&self, message: &str) -> Result<(), ChatError> {
        check_length(message, 0, self.config.max_message_chars)
    }

    /// Knowledge for `message` within `budget` tokens (`score`: BM25 or the fused share).
    /// Errors: the store's.
    pub async fn retrieve(
        &self,
        agent_id: &AgentId,
        message: &str,
        budget: u32,
    ) -> Result<(Vec<Passage>, Vec<Source>, u32), ChatError> {
        let hits = retrieve::hybrid(&self.knowledge, agent_id, message, retrieve::TOP_K).await?;
        Ok(prompt::passages(hits, budget))
    }

    /// The turn's thread ([`ThreadChoice`]; a new one unstored, from `channel`), its turn
    /// for `reply` (waiting for it with `queue`), and its earlier turns for upstream.
    /// Errors: [`ChatError::ThreadNotFound`], [`ChatError::ReplyInProgress`], the store's.
    #[allow(clippy::too_many_arguments)]
    async fn thread_and_history(
        &self,
        agent: &AgentRecord,
        user_id: &UserId,
        thread: ThreadChoice<'_>,
        message: &str,
        channel: Channel,
        now: chrono::DateTime<chrono::Utc>,
        (reply, queue): (&MessageId, bool),
    ) -> Result<(ThreadRecord, Vec<Turn>, bool, Option<replies::TurnGuard>), ChatError> {
        let continued = matches!(thread, ThreadChoice::Id(_) | ThreadChoice::Known(_));
        let mut given = Vec::new();
        let stored = !matches!(thread, ThreadChoice::Given(_));
        let thread = match thread {
            ThreadChoice::Known(thread) => thread,
            ThreadChoice::Id(id) => match self.store.thread(user_id, &agent.id, id).await? {
                Some(thread) => thread,
                None => {
                    self.new_thread_after_reply(agent, user_id, id, queue)
                        .await?
                }
            },
            ThreadChoice::Given(turns) => {
                given = turns;
                new_thread(agent, user_id, message, channel, now)
            }
            // Stored with the user's message ([`ChatService::prepare`]).
            ThreadChoice::New => new_thread(agent, user_id, message, channel, now),
        };
        // Taken before the history is read: a queued turn then sees the one it waited for.
        let turn = if stored {
            Some(
                self.replies
                    .begin_turn(&thread.id, reply, &owner_of(&thread), queue)
                    .await
                    .map_err(|replies::TurnBusy| ChatError::ReplyInProgress)?,
            )
        } else {
            None
        };
        // A new thread has no stored history: no need to ask the store.
        let earlier = if continued {
            self.store
                .recent_messages(&thread.id, HISTORY_LIMIT)
                .await?
        } else {
            Vec::new()
        };
        let history = earlier
            .into_iter()
            .filter(|m| m.status == ReplyStatus::Complete || m.role == Role::User)
            .flat_map(history_turns)
            .chain(given)
            .collect();
        Ok((thread, history, !continued, turn))
    }

    /// The thread `id` that is not stored yet because its first reply is still in progress:
    /// with `queue`, once that reply is stored. Errors: [`ChatError::ReplyInProgress`]
    /// without `queue`; [`ChatError::ThreadNotFound`] when no reply of the caller's is in
    /// progress there (or it was not stored).
    async fn new_thread_after_reply(
        &self,
        agent: &AgentRecord,
        user_id: &UserId,
        id: &ThreadId,
        queue: bool,
    ) -> Result<ThreadRecord, ChatError> {
        let owner = replies::Owner {
            user_id: user_id.clone(),
            agent_id: agent.id.clone(),
        };
        if !self.replies.in_progress(id, &owner).await {
            return Err(ChatError::ThreadNotFound);
        }
        if !queue {
            return Err(ChatError::ReplyInProgress);
        }
        self.replies.wait_idle(id, replies::QUEUE_WAIT).await;
        self.store
            .thread(user_id, &agent.id, id)
            .await?
            .ok_or(ChatError::ThreadNotFound)
    }

    /// Resolves thread, model and prompt without writing: the turn is stored whole at its end.
    /// Errors: [`attachments_text`]'s, [`ChatError::TooLong`], [`ChatError::ModelUnavailable`],
    /// [`ChatError::ThreadNotFound`], the store's.
    pub async fn prepare(
        &self,
        agent: &AgentRecord,
        user_id: &UserId,
        thread: ThreadChoice<'_>,
        message: &str,
        attachments: &[Attachment],
    ) -> Result<PreparedChat, ChatError> {
        self.prepare_with(
            agent,
            user_id,
            thread,
            message,
            attachments,
            &TurnOptions::default(),
        )
        .await
    }

    /// [`ChatService::prepare`] with the caller's `options`. Errors: as `prepare`.
    pub async fn prepare_with(
        &self,
        agent: &AgentRecord,
        user_id: &UserId,
        thread: ThreadChoice<'_>,
        message: &str,
        attachments: &[Attachment],
        options: &TurnOptions,
    ) -> Result<PreparedChat, ChatError> {
        let (attached, attachment_chars) = attachments_text(attachments)?;
        check_length(message, attachment_chars, self.config.max_message_chars)?;
        let quota = self.admit(user_id, &options.payer).await?;
        let model = self.model_of(agent).await?;
        let now = self.clock.now();
        // In this order: messages of one time are listed by id.
        let user_message_id = MessageId::new();
        let reply_id = MessageId::new();
        let user_content = format!("{message}{attached}");
        let system = match (
            agent.system_prompt.trim().is_empty(),
            options.instructions.trim().is_empty(),
        ) {
            (_, true) => agent.system_prompt.clone(),
            (true, false) => options.instructions.clone(),
            (false, false) => format!("{}\n\n{}", agent.system_prompt, options.instructions),
        };
        let fixed = tokens::count(&system) + tokens::count(&user_content);
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
        let (thread, retrieved, toolbox) = tokio::join!(
            self.thread_and_history(
                agent,
                user_id,
                thread,
                message,
                options.channel,
                now,
                (&reply_id, options.queue)
            ),
            async {
                if agent.has_knowledge {
                    self.retrieve(&agent.id, message, room / 2).await
                } else {
                    Ok((Vec::new(), Vec::new(), 0))
                }
            },
            async {
                if options.client_tools.is_some() {
                    // The caller has taken control of the tools: the agent's are not offered.
                    Ok(Toolbox::default())
                } else {
                    self.tools.toolbox(agent, options.approvals).await
                }
            },
        );
        let toolbox = toolbox?;
        let (thread, history, new_thread, turn) = thread?;
        let (passages, sources, passage_tokens) = retrieved?;
        let budget = room.saturating_sub(passage_tokens);
        let (mut turns, history_tokens) = trim_history(history, budget);
        if toolbox.is_empty() && options.client_tools.is_none() {
            // Without tools in the request, providers refuse earlier tool calls (Anthropic
            // requires `tools` once the history holds `tool_use` blocks): the turns keep
            // their text alone.
            turns.retain(|t| t.tool_calls.is_empty());
        }
        let after_tokens: u32 = options.after.iter().map(turn_tokens).sum();
        // What `offline::prompt_tokens` would count: every text the prompt sends.
        let prompt_tokens = fixed
            + history_tokens
            + after_tokens
            + passage_tokens.saturating_sub(PASSAGE_OVERHEAD * passages.len() as u32);
        turns.push(Turn::text(Role::User, user_content.clone()));
        turns.extend(options.after.iter().cloned());
        let (tools, tool_choice) = match &options.client_tools {
            Some(client) => (client.specs.clone(), client.choice.clone()),
            None => (toolbox.specs(), ToolChoice::Auto),
        };
        // The calls the caller answered are the reply's, with the results it sent.
        let answered: Vec<ToolCallView> = options
            .after
            .iter()
            .flat_map(|t| &t.tool_calls)
            .map(|e| client_call_view(&e.call, Some(&e.result)))
            .collect();
        let user_message = MessageRecord {
            id: user_message_id,
            thread_id: thread.id.clone(),
            role: Role::User,
            content: user_content,
            model: None,
            prompt_tokens: None,
            completion_tokens: None,
            sources: None,
            latency_ms: None,
            status: ReplyStatus::Complete,
            error: None,
            // When the turn starts: a queued one after the reply it waited for.
            created_at: self.clock.now().max(now),
            tool_calls: None,
            api_key_id: options.payer.key.as_ref().map(|(id, _)| id.clone()),
        };
        Ok(PreparedChat {
            thread,
            new_thread,
            user_message: Some(user_message),
            reply_id,
            pending: Vec::new(),
            approvals: options.approvals,
            channel: None,
            model,
            prompt: Prompt {
                system,
                turns,
                passages,
                sampling: options.sampling.clone(),
                tools,
                tool_choice,
            },
            prompt_tokens,
            sources,
            started: Instant::now(),
            toolbox,
            tool_calls: answered,
            tool_rounds: 0,
            payer: options.payer.clone(),
            quota,
            usage_so_far: None,
            client_tools: options.client_tools.is_some(),
            turn,
        })
    }

    /// Continues a turn stopped for approvals once all are decided; the reply is stored alone.
    /// Errors: [`ChatError::ModelUnavailable`]; the store's.
    pub async fn continue_turn(
        &self,
        agent: &AgentRecord,
        thread: ThreadRecord,
        decided: Vec<ToolCallView>,
        payer: Payer,
    ) -> Result<PreparedChat, ChatError> {
        let quota = self.admit(&thread.user_id, &payer).await?;
        let model = self.model_of(agent).await?;
        let now = self.clock.now();
        let user_id = thread.user_id.clone();
        let reply_id = MessageId::new();
        let (history, toolbox) = tokio::join!(
            self.thread_and_history(
                agent,
                &user_id,
                ThreadChoice::Known(thread),
                "",
                Channel::default(),
                now,
                (&reply_id, false)
            ),
            self.tools.toolbox(agent, true),
        );
        let ((thread, history, _, turn), toolbox) = (history?, toolbox?);
        let system = agent.system_prompt.clone();
        let fixed = tokens::count(&system);
        let reserve = (model.context_window / 4).max(1_024);
        let room = model
            .context_window
            .saturating_sub(reserve)
            .saturating_sub(fixed);
        let (mut turns, history_tokens) = trim_history(history, room);
        let exchanges: Vec<ToolExchange> = decided.iter().cloned().map(exchange_of).collect();
        let exchange_tokens: u32 = exchanges
            .iter()
            .map(|e| tokens::count(&e.call.arguments) + tokens::count(&e.result))
            .sum();
        turns.push(Turn {
            role: Role::Assistant,
            content: String::new(),
            tool_calls: exchanges,
        });
        Ok(PreparedChat {
            thread,
            new_thread: false,
            user_message: None,
            reply_id,
            pending: Vec::new(),
            approvals: true,
            channel: None,
            model,
            prompt: Prompt {
                system,
                turns,
                passages: Vec::new(),
                sampling: Sampling::default(),
                tools: toolbox.specs(),
                tool_choice: ToolChoice::Auto,
            },
            prompt_tokens: fixed + history_tokens + exchange_tokens,
            sources: Vec::new(),
            started: Instant::now(),
            toolbox,
            tool_calls: decided,
            tool_rounds: 1,
            usage_so_far: None,
            client_tools: false,
            payer,
            quota,
            turn,
        })
    }

    /// Admits a turn of `payer` ([`Quotas::admit`]): the limit shown in `X-Quota-*`.
    /// Errors: [`ChatError::QuotaExceeded`], the store's.
    async fn admit(
        &self,
        user_id: &UserId,
        payer: &Payer,
    ) -> Result<Option<QuotaState>, ChatError> {
        self.quotas
            .admit(user_id, payer)
            .await
            .map_err(|spent| match spent {
                Ok(state) => ChatError::QuotaExceeded(Box::new(state)),
                Err(e) => ChatError::Store(e),
            })
    }

    /// The agent's own model, or the default. Errors: [`ChatError::ModelUnavailable`].
    async fn model_of(&self, agent: &AgentRecord) -> Result<ResolvedModel, ChatError> {
        let model_id = if agent.model.is_empty() {
            self.models.default_model().await
        } else {
            agent.model.clone()
        };
        self.models
            .resolve(&model_id)
            .await
            .ok_or(ChatError::ModelUnavailable { model: model_id })
    }

    /// Runs a prepared turn to its end unstreamed (tool rounds included) and stores the reply.
    /// Errors: [`ChatError::Upstream`] (stored as a failed reply); the store's.
    pub async fn complete(&self, prepared: &mut PreparedChat) -> Result<Reply, ChatError> {
        let mut text = String::new();
        let mut client_calls = Vec::new();
        let cancel = prepared
            .turn
            .as_ref()
            .map(|t| t.cancel_token().clone())
            .unwrap_or_default();
        let run = async {
            loop {
                let mut upstream = open_stream(prepared, self.provider_timeout).await?;
                let mut ended = (None, FinishReason::Stop);
                let mut round_text = String::new();
                let mut calls = Vec::new();
                // The first event, then the end: what follows each until the reply is sent
                // is latency a client sees, so background work waits.
                self.knowledge.foreground.touch();
                while let Some(event) = upstream.next().await {
                    let event = event.inspect_err(|e| {
                        crate::metrics::provider_failed(&prepared.model.id, e);
                    });
                    match event? {
                        Event::Delta(d) => round_text.push_str(&d),
                        Event::ToolCall(call) => calls.push(call),
                        Event::End(usage, finish) => ended = (usage, finish),
                    }
                }
                self.knowledge.foreground.touch();
                text.push_str(&round_text);
                if prepared.request_client_calls(&calls) {
                    client_calls = calls;
                    return Ok::<_, ProviderError>((
                        prepared.total_usage(ended.0, &round_text),
                        FinishReason::ToolCalls,
                    ));
                }
                if calls.is_empty() || !prepared.may_call_tools() {
                    let finish = match ended.1 {
                        FinishReason::ToolCalls => FinishReason::Stop,
                        other => other,
                    };
                    return Ok((prepared.total_usage(ended.0, &round_text), finish));
                }
                self.run_tools(prepared, ended.0, round_text, calls).await;
                if let (false, Some(usage)) = (prepared.pending.is_empty(), prepared.usage_so_far) {
                    return Ok((usage, FinishReason::ToolCalls));
                }
            }
        };
        let outcome: Option<Result<(TokensUsed, FinishReason), ProviderError>> = tokio::select! {
            outcome = run => Some(outcome),
            () = cancel.cancelled() => None,
        };
        prepared.release_prompt();
        let Some(outcome) = outcome else {
            self.finish(
                prepared,
                &text,
                None,
                ReplyStatus::Cancelled,
                Some(replies::CANCELLED.to_string()),
                Urgency::Now,
            )
            .await?;
            return Err(ChatError::Cancelled);
        };
        match outcome {
            Ok((usage, finish)) => {
                self.finish(
                    prepared,
                    &text,
                    Some(usage),
                    ReplyStatus::Complete,
                    None,
                    Urgency::Now,
                )
                .await?;
                Ok(Reply {
                    text,
                    usage,
                    finish,
                    tool_calls: prepared.tool_calls.clone(),
                    pending_approvals: prepared.pending_approvals(),
                    client_calls,
                })
            }
            Err(e) => {
                self.finish(
                    prepared,
                    &text,
                    None,
                    ReplyStatus::Failed,
                    Some(e.message.clone()),
                    Urgency::Now,
                )
                .await?;
                Err(ChatError::Upstream(e))
            }
        }
    }

    /// Runs one round of `calls` at once ([`Tools::run`]) and adds them with results to the prompt.
    /// Past `MAX_TOOL_ROUNDS` the next call gets `tool_choice: none` (tools stay listed for
    /// Anthropic). Calls needing approval go to `prepared.pending` and stop the turn.
    pub async fn run_tools(
        &self,
        prepared: &mut PreparedChat,
        reported: Option<Usage>,
        text: String,
        calls: Vec<ToolCall>,
    ) -> Vec<ToolCallView> {
        prepared.usage_so_far = Some(prepared.total_usage(reported, &text));
        let (held, calls): (Vec<ToolCall>, Vec<ToolCall>) = calls
            .into_iter()
            .partition(|c| prepared.toolbox.requires_approval(&c.name));
        prepared.pending = held;
        let toolbox = prepared.toolbox.clone();
        let views =
            futures::future::join_all(calls.iter().map(|call| self.tools.run(&toolbox, call)))
                .await;
        let exchanges: Vec<ToolExchange> = calls
            .into_iter()
            .zip(&views)
            .map(|(call, view)| ToolExchange {
                call,
                result: match &view.error {
                    Some(error) => format!("Error: {error}"),
                    None => view.output.clone(),
                },
                is_error: view.error.is_some(),
            })
            .collect();
        // The next call's prompt grows by what this round added.
        prepared.prompt_tokens += tokens::count(&text)
            + exchanges
                .iter()
                .map(|e| tokens::count(&e.call.arguments) + tokens::count(&e.result))
                .sum::<u32>();
        prepared.prompt.turns.push(Turn {
            role: Role::Assistant,
            content: text,
            tool_calls: exchanges,
        });
        prepared.tool_calls.extend(views.iter().cloned());
        prepared.tool_rounds += 1;
        if prepared.tool_rounds >= self.config.max_tool_rounds {
            prepared.prompt.tool_choice = ToolChoice::None;
        }
        views
    }

    /// Stores the turn in one transaction shared with other ending turns ([`Urgency`]), then
    /// announces `conversation.created` / `message.created`. Errors: [`ChatError::AgentGone`],
    /// [`ChatError::ThreadNotFound`] (nothing stored); the store's.
    pub async fn finish(
        &self,
        prepared: &PreparedChat,
        text: &str,
        usage: Option<TokensUsed>,
        status: ReplyStatus,
        error: Option<String>,
        urgency: Urgency,
    ) -> Result<(), ChatError> {
        crate::metrics::chat_finished(
            &prepared.model.id,
            status,
            usage.map(|u| (u.prompt, u.completion)),
        );
        let sources = (!prepared.sources.is_empty())
            .then(|| serde_json::to_string(&prepared.sources).unwrap_or_default());
        let tool_calls = (!prepared.tool_calls.is_empty())
            .then(|| serde_json::to_string(&prepared.tool_calls).unwrap_or_default());
        let reply = MessageRecord {
            id: prepared.reply_id.clone(),
            thread_id: prepared.thread.id.clone(),
            role: Role::Assistant,
            content: text.to_string(),
            model: Some(prepared.model.id.clone()),
            prompt_tokens: usage.map(|u| i64::from(u.prompt)),
            completion_tokens: usage.map(|u| i64::from(u.completion)),
            sources,
            latency_ms: Some(prepared.started.elapsed().as_millis() as i64),
            status,
            error,
            // Never before the user's message, whatever the clock did meanwhile.
            created_at: prepared
                .user_message
                .as_ref()
                .map_or_else(|| self.clock.now(), |m| self.clock.now().max(m.created_at)),
            tool_calls,
            api_key_id: prepared.payer.key.as_ref().map(|(id, _)| id.clone()),
        };
        let turn = TurnRecord {
            thread: prepared.thread.clone(),
            new_thread: prepared.new_thread,
            messages: prepared
                .user_message
                .iter()
                .cloned()
                .chain([reply])
                .collect(),
            channel: prepared.channel.clone(),
        };
        let Some(turn) = self.writer.record(turn, urgency).await? else {
            return Err(if prepared.new_thread {
                ChatError::AgentGone
            } else {
                ChatError::ThreadNotFound
            });
        };
        if status == ReplyStatus::Complete && !prepared.pending.is_empty() {
            self.tools
                .hold(
                    &prepared.thread.agent_id,
                    &prepared.thread.user_id,
                    &prepared.thread.id,
                    &prepared.reply_id,
                    &prepared.pending,
                )
                .await?;
        }
        self.quotas
            .after_turn(&prepared.thread.user_id, &prepared.payer);
        self.announce(turn);
        // Before the client hears that the reply ended: its next message finds the
        // conversation free on any instance.
        if let Some(turn) = &prepared.turn {
            turn.release().await;
        }
        Ok(())
    }

    /// Emits a stored turn's webhook events in their own task (`message.created` if complete).
    fn announce(&self, turn: TurnRecord) {
        let TurnRecord {
            thread,
            new_thread,
            mut messages,
            ..
        } = turn;
        let Some(reply) = messages.pop() else {
            return;
        };
        // Nothing is built or spawned for the events that reach no webhook of the owner's
        // (the common case, known without a store call for a while after the first).
        let created = new_thread
            && !self
                .events
                .is_quiet(&thread.user_id, EventType::ConversationCreated);
        let message = reply.status == ReplyStatus::Complete
            && !self
                .events
                .is_quiet(&thread.user_id, EventType::MessageCreated);
        if !created && !message {
            return;
        }
        let events = self.events.clone();
        tokio::spawn(async move {
            if created {
                events
                    .emit(
                        &thread.user_id,
                        EventType::ConversationCreated,
                        json!({
                            "conversationId": thread.id,
                            "agentId": thread.agent_id,
                            "title": thread.title,
                            "createdAt": iso(thread.created_at),
                        }),
                    )
                    .await;
            }
            if message {
                events
                    .emit(
                        &thread.user_id,
                        EventType::MessageCreated,
                        json!({
                            "messageId": reply.id,
                            "conversationId": thread.id,
                            "agentId": thread.agent_id,
                            "role": reply.role.as_str(),
                            "content": reply.content,
                            "model": reply.model,
                            "usage": {
                                "promptTokens": reply.prompt_tokens,
                                "completionTokens": reply.completion_tokens,
                            },
                            "createdAt": iso(reply.created_at),
                        }),
                    )
                    .await;
            }
        });
    }

    /// Waits until every ended turn is written ([`TurnWriter::flush`]); for graceful shutdown.
    pub async fn flush(&self) {
        self.writer.flush().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_length_rule_names_the_limit_and_what_counted() {
        let err = check_length("abcd", 0, 3).unwrap_err();
        assert_eq!(err.to_string(), "message must be at most 3 characters");
        let err = check_length("ab", 2, 3).unwrap_err();
        assert_eq!(
            err.to_string(),
            "message and the text of its attachments must together be at most 3 characters; they have 4"
        );
        assert!(check_length("abc", 0, 3).is_ok());
        assert!(check_length("é", 2, 3).is_ok());
    }
}
