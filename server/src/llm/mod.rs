//! Language models: the [`Provider`] boundary, the remote providers (OpenAI-compatible and
//! Anthropic, through `genai` except the per-token OpenAI-compatible stream in `openai`) and
//! the built-in offline model, gathered in a [`Models`] registry. No HTTP handlers here.

mod lanes;
pub mod offline;
mod openai;
pub mod remote;
pub mod tokens;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use futures::stream::BoxStream;
use moka::sync::Cache;

/// Id of the built-in offline model.
pub const OFFLINE_MODEL: &str = "agentchat-offline";

/// A model a chat can use (`GET /api/models`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// The id for `agent.model`: the provider's name, or `provider/name` when two offer it.
    pub id: String,
    /// `openai`, `anthropic` or `builtin`.
    pub provider: String,
    /// Context window in tokens, when known.
    pub context_window: Option<u32>,
}

/// Who said a turn: the role of the message it comes from.
pub use crate::domain::Role;

/// One turn sent to a model; an assistant turn may carry its tool calls with their results.
#[derive(Debug, Clone)]
pub struct Turn {
    pub role: Role,
    pub content: String,
    /// The calls of an assistant turn, in the model's order, with their results.
    pub tool_calls: Vec<ToolExchange>,
}

impl Turn {
    /// A turn of text alone.
    pub fn text(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
        }
    }
}

/// A tool: name (`^[a-zA-Z0-9_-]{1,64}$`), description, and a JSON Schema object of arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// A call the model made: call id, tool name, and the arguments' JSON text as written (unchecked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A tool call and its result for the model; `is_error` maps to Anthropic's `tool_result.is_error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolExchange {
    pub call: ToolCall,
    pub result: String,
    pub is_error: bool,
}

/// How the model may use the tools (OpenAI and Anthropic `tool_choice`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolChoice {
    #[default]
    Auto,
    None,
    Required,
    Named(String),
}

/// A knowledge base passage put into the prompt.
#[derive(Debug, Clone)]
pub struct Passage {
    /// Marker the model cites, e.g. `[1]`.
    pub marker: String,
    pub title: String,
    pub url: Option<String>,
    pub text: String,
}

/// What a model is asked: system prompt, earlier turns, new user message, passages, sampling.
#[derive(Debug, Clone, Default)]
pub struct Prompt {
    pub system: String,
    pub turns: Vec<Turn>,
    pub passages: Vec<Passage>,
    pub sampling: Sampling,
    /// Tools offered to the model; empty for none (no `tools` field is sent).
    pub tools: Vec<ToolSpec>,
    /// How the model may use `tools`; ignored when there are none.
    pub tool_choice: ToolChoice,
}

/// Sampling settings (OpenAI `temperature`, `top_p`, `max_tokens`, `stop`, `user`); unset
/// means the provider's default. The offline model applies `max_tokens` and `stop`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sampling {
    /// 0–2.
    pub temperature: Option<f64>,
    /// 0–1.
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    /// Sequences that end the reply where they would start (not included).
    pub stop: Vec<String>,
    /// End user id, for the provider's abuse monitoring.
    pub user: Option<String>,
}

/// Why a reply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FinishReason {
    /// The model finished, or met a stop sequence.
    #[default]
    Stop,
    /// The reply reached its token limit (`max_tokens`) or the context window.
    Length,
    /// The provider's content filter cut the reply.
    ContentFilter,
    /// The model stopped to call tools ([`Event::ToolCall`] came before the end).
    ToolCalls,
}

impl FinishReason {
    /// OpenAI's `finish_reason` name: `stop`, `length`, `content_filter`, `tool_calls`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ContentFilter => "content_filter",
            Self::ToolCalls => "tool_calls",
        }
    }
}

/// Token usage of one reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub prompt: u32,
    pub completion: u32,
}

/// An event of a streamed reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Delta(String),
    /// A complete tool call; the reply then ends with [`FinishReason::ToolCalls`].
    ToolCall(ToolCall),
    /// The reply is complete: usage if reported, and why it ended.
    End(Option<Usage>, FinishReason),
}

/// What went wrong upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderErrorKind {
    /// The provider answered with this HTTP status.
    Status(u16),
    Timeout,
    Connection,
    /// Anything else (an answer that does not parse, a missing key).
    Other,
}

/// A provider failure whose message is safe to show: no secret, URL, host or port.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    pub kind: ProviderErrorKind,
    pub message: String,
}

impl ProviderError {
    /// Whether trying again may help: 408, 429, 5xx, timeouts and connection errors.
    pub fn retryable(&self) -> bool {
        match self.kind {
            ProviderErrorKind::Status(s) => s == 408 || s == 429 || s >= 500,
            ProviderErrorKind::Timeout | ProviderErrorKind::Connection => true,
            ProviderErrorKind::Other => false,
        }
    }
}

/// `name` (a [`Provider::name`]) with its first letter in upper case.
pub fn sentence_start(name: &str) -> String {
    let mut chars = name.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// A stream of reply events.
pub type EventStream = BoxStream<'static, Result<Event, ProviderError>>;

/// A source of models.
#[async_trait]
pub trait Provider: Send + Sync + 'static {
    /// `openai`, `anthropic` or `builtin`.
    fn code(&self) -> &'static str;
    /// How messages name this provider mid-sentence (`the OpenAI-compatible provider`).
    fn name(&self) -> &'static str;
    async fn models(&self) -> Result<Vec<String>, ProviderError>;
    /// Starts a streamed reply of `model` to `prompt`.
    async fn stream(&self, model: &str, prompt: &Prompt) -> Result<EventStream, ProviderError>;
}

/// How long a provider's model list is trusted.
pub const MODEL_LIST_TTL: Duration = Duration::from_secs(300);

/// A resolved model: its provider and the name the provider knows it by.
#[derive(Clone)]
pub struct ResolvedModel {
    pub id: String,
    pub provider: Arc<dyn Provider>,
    pub name: String,
    pub context_window: u32,
}

/// The configured providers and the built-in model.
#[derive(Clone)]
pub struct Models {
    providers: Vec<Arc<dyn Provider>>,
    offline: Arc<dyn Provider>,
    lists: Cache<&'static str, Arc<Vec<String>>>,
    default_model: String,
}

impl Models {
    /// A registry over `providers` (priority order); default model: `default_model`, else the first
    /// provider's first, else offline.
    pub fn new(providers: Vec<Arc<dyn Provider>>, default_model: Option<String>) -> Self {
        Self {
            providers,
            offline: Arc::new(offline::OfflineModel),
            lists: Cache::builder().time_to_live(MODEL_LIST_TTL).build(),
            default_model: default_model.unwrap_or_default(),
        }
    }

    async fn names(&self, provider: &Arc<dyn Provider>) -> Arc<Vec<String>> {
        if let Some(list) = self.lists.get(provider.code()) {
            return list;
        }
        match provider.models().await {
            Ok(mut names) => {
                names.sort();
                let list = Arc::new(names);
                self.lists.insert(provider.code(), list.clone());
                list
            }
            Err(err) => {
                tracing::warn!(provider = provider.code(), error = %err, "listing models failed");
                Arc::new(Vec::new())
            }
        }
    }

    /// Every usable model (lists cached [`MODEL_LIST_TTL`]); a shared name as `provider/name`.
    pub async fn list(&self) -> Vec<ModelInfo> {
        let mut per_provider = Vec::new();
        for p in &self.providers {
            per_provider.push((p.code(), self.names(p).await));
        }
        let mut out = Vec::new();
        for (code, names) in &per_provider {
            for name in names.iter() {
                let shared = per_provider
                    .iter()
                    .filter(|(_, n)| n.contains(name))
                    .count()
                    > 1;
                let id = if shared {
                    format!("{code}/{name}")
                } else {
                    name.clone()
                };
                out.push(ModelInfo {
                    id,
                    provider: code.to_string(),
                    context_window: tokens::context_window(name),
                });
            }
        }
        out.push(ModelInfo {
            id: OFFLINE_MODEL.into(),
            provider: "builtin".into(),
            context_window: Some(tokens::OFFLINE_CONTEXT_WINDOW),
        });
        out
    }

    /// The model for `id` (as listed, or `provider/name`), if it is offered.
    pub async fn resolve(&self, id: &str) -> Option<ResolvedModel> {
        if id == OFFLINE_MODEL || id == format!("builtin/{OFFLINE_MODEL}") {
            return Some(ResolvedModel {
                id: OFFLINE_MODEL.into(),
                provider: self.offline.clone(),
                name: OFFLINE_MODEL.into(),
                context_window: tokens::OFFLINE_CONTEXT_WINDOW,
            });
        }
        let listed = self.list().await;
        let info = listed.iter().find(|m| m.id == id)?;
        let name = info
            .id
            .split_once('/')
            .filter(|(p, _)| *p == info.provider)
            .map_or(info.id.as_str(), |(_, n)| n);
        let provider = self
            .providers
            .iter()
            .find(|p| p.code() == info.provider)?
            .clone();
        Some(ResolvedModel {
            id: info.id.clone(),
            provider,
            name: name.to_string(),
            context_window: info
                .context_window
                .unwrap_or(tokens::DEFAULT_CONTEXT_WINDOW),
        })
    }

    /// The model of agents that name none (see [`Models::new`]).
    pub async fn default_model(&self) -> String {
        if !self.default_model.is_empty() {
            return self.default_model.clone();
        }
        for p in &self.providers {
            if let Some(first) = self.names(p).await.first() {
                return first.clone();
            }
        }
        OFFLINE_MODEL.into()
    }

    /// Whether any remote provider is configured.
    pub fn has_providers(&self) -> bool {
        !self.providers.is_empty()
    }
}
