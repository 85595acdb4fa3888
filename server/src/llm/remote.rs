//! Remote providers: any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, llama.cpp,
//! LM Studio, OpenRouter, Groq) and the Anthropic Messages API, through `genai`, except the
//! OpenAI-compatible streamed replies, read per token by `super::openai`.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use futures::StreamExt;
use genai::{
    adapter::AdapterKind,
    chat::{
        ChatMessage, ChatOptions, ChatRequest, ChatStreamEvent, ContentPart, CustomPart,
        MessageContent, StopReason, StreamEnd, ToolResponse,
    },
    resolver::{AuthData, Endpoint, ProviderConfig},
    ModelIden, ServiceTarget,
};
use secrecy::{ExposeSecret, SecretString};

use super::{
    Event, EventStream, FinishReason, Prompt, Provider, ProviderError, ProviderErrorKind, Role,
    Sampling, ToolCall, ToolChoice, ToolSpec, Turn, Usage,
};

/// Which wire protocol a remote provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    OpenAi,
    Anthropic,
}

/// A configured remote provider.
pub struct RemoteProvider {
    flavor: Flavor,
    timeout: Duration,
    base_url: String,
    /// Shared with reply streams, which mask it in their errors.
    key: Arc<SecretString>,
    client: genai::Client,
    /// OpenAI-compatible streamed replies ([`super::openai`]); `None` for Anthropic.
    openai: Option<super::openai::OpenAiStreams>,
}

impl RemoteProvider {
    /// A provider at `base_url` (e.g. `https://api.openai.com/v1/`) with `key`; `timeout` bounds
    /// the first byte and every silence in a reply. Errors: the HTTP client cannot be built.
    pub fn new(
        flavor: Flavor,
        base_url: &str,
        key: SecretString,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let client = genai::Client::new()
            .map_err(|e| anyhow::anyhow!("building the model client failed: {e}"))?;
        let base_url = endpoint_url(base_url);
        let key = Arc::new(key);
        let openai = match flavor {
            Flavor::OpenAi => Some(super::openai::OpenAiStreams::new(
                &base_url,
                Arc::clone(&key),
                timeout,
            )?),
            Flavor::Anthropic => None,
        };
        Ok(Self {
            flavor,
            timeout,
            base_url,
            key,
            client,
            openai,
        })
    }

    fn kind(&self) -> AdapterKind {
        match self.flavor {
            Flavor::OpenAi => AdapterKind::OpenAI,
            Flavor::Anthropic => AdapterKind::Anthropic,
        }
    }

    fn target(&self, model: &str) -> ServiceTarget {
        target(&self.base_url, &self.key, self.kind(), model)
    }

    fn error(&self, err: genai::Error) -> ProviderError {
        provider_error(self.flavor, &self.key, err)
    }
}

impl Flavor {
    /// The provider's code in model ids and messages (`openai`, `anthropic`).
    pub fn code(self) -> &'static str {
        match self {
            Flavor::OpenAi => "openai",
            Flavor::Anthropic => "anthropic",
        }
    }
}

impl Flavor {
    /// How messages shown to users name the provider ([`Provider::name`]).
    pub fn name(self) -> &'static str {
        match self {
            Flavor::OpenAi => "the OpenAI-compatible provider",
            Flavor::Anthropic => "Anthropic",
        }
    }
}

/// A `genai` error as a [`ProviderError`] naming the provider and quoting only its complaint
/// ([`classify`]), `key` masked; the whole error goes to the log at warn, masked too.
fn provider_error(flavor: Flavor, key: &SecretString, err: genai::Error) -> ProviderError {
    let (kind, detail) = classify(&err);
    tracing::warn!(
        provider = flavor.code(),
        error = %mask(&err.to_string(), key),
        "the model provider failed"
    );
    shown(flavor, key, kind, &detail)
}

/// A failure of `kind` of which `detail` (never an address) may be shown, `key` masked;
/// logged at warn with `cause` (which may name the URL) or `detail`.
pub(crate) fn shown_error(
    flavor: Flavor,
    key: &SecretString,
    kind: ProviderErrorKind,
    detail: String,
    cause: Option<&dyn std::fmt::Display>,
) -> ProviderError {
    let logged = cause.map_or_else(|| detail.clone(), ToString::to_string);
    tracing::warn!(
        provider = flavor.code(),
        error = %mask(&logged, key),
        "the model provider failed"
    );
    shown(flavor, key, kind, &detail)
}

/// The message users see: `"{Provider} failed ({status}): {detail}"`, `key` masked.
fn shown(
    flavor: Flavor,
    key: &SecretString,
    kind: ProviderErrorKind,
    detail: &str,
) -> ProviderError {
    let detail = mask(detail, key);
    let status = match kind {
        ProviderErrorKind::Status(s) => format!(" ({s})"),
        _ => String::new(),
    };
    ProviderError {
        message: format!(
            "{} failed{status}: {detail}",
            super::sentence_start(flavor.name())
        ),
        kind,
    }
}

/// A reply in which the provider sent nothing for `timeout` (`PROVIDER_TIMEOUT_SECS`).
fn silence(flavor: Flavor, timeout: Duration) -> ProviderError {
    tracing::warn!(
        provider = flavor.code(),
        timeout_ms = timeout.as_millis() as u64,
        "the model provider went silent in the middle of a reply"
    );
    ProviderError {
        kind: ProviderErrorKind::Timeout,
        message: format!("{} failed: timed out", super::sentence_start(flavor.name())),
    }
}

/// `base_url` trimmed and ending in `/`, as `genai` joins paths onto it.
pub(crate) fn endpoint_url(base_url: &str) -> String {
    let mut url = base_url.trim().to_string();
    if !url.ends_with('/') {
        url.push('/');
    }
    url
}

/// The `genai` target for `model` of adapter `kind` at `base_url`, with `key`.
pub(crate) fn target(
    base_url: &str,
    key: &SecretString,
    kind: AdapterKind,
    model: &str,
) -> ServiceTarget {
    ServiceTarget {
        endpoint: Endpoint::from_owned(base_url.to_owned()),
        auth: AuthData::Key(key.expose_secret().to_string()),
        model: ModelIden::new(kind, model.to_string()),
    }
}

/// `text` with every occurrence of `key` as `[redacted]` (an empty key changes nothing).
pub(crate) fn mask(text: &str, key: &SecretString) -> String {
    let key = key.expose_secret();
    if key.is_empty() {
        text.to_string()
    } else {
        text.replace(key, "[redacted]")
    }
}

/// What a failed answer that could not be read is called in messages.
const UNREADABLE: &str = "its answer could not be read";

/// The kind of a `genai` error and what may be shown: the provider's complaint, else a fixed
/// phrase ("timed out"). Never the error's own text, which names the URL. Callers mask
/// their key in the complaint.
pub(crate) fn classify(err: &genai::Error) -> (ProviderErrorKind, String) {
    match err {
        genai::Error::HttpError { status, body, .. } => {
            (ProviderErrorKind::Status(status.as_u16()), complaint(body))
        }
        genai::Error::WebStream { error, .. } => {
            if let Some(inner) = error.downcast_ref::<genai::Error>() {
                classify(inner)
            } else if let Some(e) = error.downcast_ref::<genai_reqwest::Error>() {
                transport(e)
            } else if error.downcast_ref::<genai::webc::StreamTimeout>().is_some() {
                (ProviderErrorKind::Timeout, "timed out".into())
            } else {
                (ProviderErrorKind::Connection, "the connection broke".into())
            }
        }
        genai::Error::WebModelCall { webc_error, .. }
        | genai::Error::WebAdapterCall { webc_error, .. } => match webc_error {
            genai::webc::Error::ResponseFailedStatus { status, body, .. } => {
                (ProviderErrorKind::Status(status.as_u16()), complaint(body))
            }
            genai::webc::Error::Reqwest(e) => transport(e),
            _ => (ProviderErrorKind::Other, UNREADABLE.into()),
        },
        genai::Error::ChatResponse { body, .. } => {
            (ProviderErrorKind::Other, complaint(&body.to_string()))
        }
        genai::Error::StreamParse { .. }
        | genai::Error::NoChatResponse { .. }
        | genai::Error::InvalidJsonResponseElement { .. }
        | genai::Error::ChatResponseGeneration { .. }
        | genai::Error::SerdeJson(_)
        | genai::Error::JsonValueExt(_) => (ProviderErrorKind::Other, UNREADABLE.into()),
        genai::Error::RequiresApiKey { .. }
        | genai::Error::NoAuthResolver { .. }
        | genai::Error::NoAuthData { .. } => {
            (ProviderErrorKind::Other, "no API key is configured".into())
        }
        _ => (
            ProviderErrorKind::Other,
            "the request could not be made".into(),
        ),
    }
}

/// What [`transport`] reads of a `reqwest` error (`genai`'s version and the service's).
pub(crate) trait TransportError {
    fn status(&self) -> Option<u16>;
    fn is_timeout(&self) -> bool;
    fn is_connect(&self) -> bool;
    fn is_body(&self) -> bool;
}

macro_rules! transport_error {
    ($error:ty) => {
        impl TransportError for $error {
            fn status(&self) -> Option<u16> {
                <$error>::status(self).map(|s| s.as_u16())
            }
            fn is_timeout(&self) -> bool {
                <$error>::is_timeout(self)
            }
            fn is_connect(&self) -> bool {
                <$error>::is_connect(self)
            }
            fn is_body(&self) -> bool {
                <$error>::is_body(self) || <$error>::is_decode(self)
            }
        }
    };
}
transport_error!(genai_reqwest::Error);
transport_error!(reqwest::Error);

pub(crate) fn transport(err: &impl TransportError) -> (ProviderErrorKind, String) {
    if let Some(status) = err.status() {
        (ProviderErrorKind::Status(status), "no details given".into())
    } else if err.is_timeout() {
        (ProviderErrorKind::Timeout, "timed out".into())
    } else if err.is_connect() {
        (ProviderErrorKind::Connection, "could not connect".into())
    } else if err.is_body() {
        (ProviderErrorKind::Connection, "the connection broke".into())
    } else {
        (
            ProviderErrorKind::Connection,
            "the connection failed".into(),
        )
    }
}

/// The provider's `error.message` from an error body, shortened.
pub(crate) fn complaint(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/message").or_else(|| v.get("message")))
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| body.to_string());
    let mut message: String = without_urls(&message).chars().take(300).collect();
    if message.trim().is_empty() {
        message = "no details given".into();
    }
    message
}

/// `text` with `http(s)://` URLs as `[address]` (a proxy's complaint may name addresses).
fn without_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = [rest.find("http://"), rest.find("https://")]
        .into_iter()
        .flatten()
        .min()
    {
        let (before, url) = rest.split_at(at);
        out.push_str(before);
        out.push_str("[address]");
        let end = url
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | ')'))
            .unwrap_or(url.len());
        rest = &url[end..];
    }
    out.push_str(rest);
    out
}

/// The system text sent upstream: the system prompt, then the passages with their markers.
pub fn system_text(prompt: &Prompt) -> String {
    let mut system = prompt.system.clone();
    if !prompt.passages.is_empty() {
        system.push_str(
            "\n\nAnswer using the knowledge base passages below when they are relevant, and cite them by their \
             markers, e.g. [1].\n",
        );
        for p in &prompt.passages {
            let source = p
                .url
                .as_deref()
                .map_or_else(|| p.title.clone(), |u| format!("{} — {u}", p.title));
            system.push_str(&format!("\n{} {}\n{}\n", p.marker, source, p.text.trim()));
        }
    }
    system
}

/// The options of `sampling` in `flavor`'s wire format (`stop` or `stop_sequences`; the end
/// user as OpenAI `user` or Anthropic `metadata.user_id`).
fn sampling_options(flavor: Flavor, sampling: &Sampling) -> ChatOptions {
    let mut options = ChatOptions::default();
    if let Some(t) = sampling.temperature {
        options = options.with_temperature(t);
    }
    if let Some(p) = sampling.top_p {
        options = options.with_top_p(p);
    }
    if let Some(n) = sampling.max_tokens {
        options = options.with_max_tokens(n);
    }
    if !sampling.stop.is_empty() {
        options = options.with_stop_sequences(sampling.stop.clone());
    }
    if let Some(user) = &sampling.user {
        options = options.with_extra_body(match flavor {
            Flavor::OpenAi => serde_json::json!({ "user": user }),
            Flavor::Anthropic => serde_json::json!({ "metadata": { "user_id": user } }),
        });
    }
    options
}

/// Why a reply ended (Anthropic's `tool_use` is [`FinishReason::ToolCalls`]).
fn finish_reason(reason: &StopReason) -> FinishReason {
    match reason {
        StopReason::MaxTokens(_) => FinishReason::Length,
        StopReason::ContentFilter(_) => FinishReason::ContentFilter,
        StopReason::ToolCall(_) => FinishReason::ToolCalls,
        _ => FinishReason::Stop,
    }
}

/// The `genai` messages of `turns`: an assistant turn's text and calls (`tool_use` blocks),
/// then its results, which `genai` sends as a user message of `tool_result` blocks
/// (Anthropic, "Tool use": <https://docs.anthropic.com/en/docs/build-with-claude/tool-use>).
fn genai_messages(turns: &[Turn]) -> Vec<ChatMessage> {
    let mut messages = Vec::with_capacity(turns.len());
    for turn in turns {
        match turn.role {
            Role::User => messages.push(ChatMessage::user(turn.content.clone())),
            Role::Assistant if turn.tool_calls.is_empty() => {
                messages.push(ChatMessage::assistant(turn.content.clone()))
            }
            Role::Assistant => {
                let mut parts = Vec::with_capacity(turn.tool_calls.len() + 1);
                if !turn.content.is_empty() {
                    parts.push(ContentPart::Text(turn.content.clone()));
                }
                parts.extend(turn.tool_calls.iter().map(|exchange| {
                    ContentPart::ToolCall(genai::chat::ToolCall {
                        call_id: exchange.call.id.clone(),
                        fn_name: exchange.call.name.clone(),
                        fn_arguments: tool_input(&exchange.call.arguments),
                        thought_signatures: None,
                    })
                }));
                messages.push(ChatMessage::assistant(MessageContent::from_parts(parts)));
                let results: Vec<ContentPart> = turn
                    .tool_calls
                    .iter()
                    .map(|exchange| {
                        if exchange.is_error {
                            // `genai`'s `ToolResponse` has no error flag; a custom part is
                            // sent as it is, so the block says `is_error` in Anthropic's
                            // own terms.
                            ContentPart::Custom(CustomPart {
                                model_iden: None,
                                data: serde_json::json!({
                                    "type": "tool_result",
                                    "tool_use_id": exchange.call.id,
                                    "content": exchange.result,
                                    "is_error": true,
                                }),
                            })
                        } else {
                            ContentPart::ToolResponse(ToolResponse::new(
                                exchange.call.id.clone(),
                                exchange.result.clone(),
                            ))
                        }
                    })
                    .collect();
                messages.push(ChatMessage::tool(MessageContent::from_parts(results)));
            }
        }
    }
    messages
}

/// A call's arguments as Anthropic's `input` object: the model's JSON object, else `{}`.
fn tool_input(arguments: &str) -> serde_json::Value {
    match serde_json::from_str(arguments) {
        Ok(input @ serde_json::Value::Object(_)) => input,
        _ => serde_json::Value::Object(serde_json::Map::new()),
    }
}

#[derive(Debug)]
enum AnthropicTools {
    Genai(Vec<genai::chat::Tool>),
    /// In the body as Anthropic defines them: needed when a tool is named `web_search`, which
    /// `genai` 0.7 sends as Anthropic's built-in server tool.
    Body(serde_json::Value),
}

fn anthropic_tools(tools: &[ToolSpec]) -> AnthropicTools {
    if tools.iter().any(|t| t.name == "web_search") {
        let tools: Vec<serde_json::Value> = tools
            .iter()
            .map(|t| {
                let mut tool = serde_json::json!({"name": t.name, "input_schema": t.parameters});
                if !t.description.is_empty() {
                    tool["description"] = t.description.clone().into();
                }
                tool
            })
            .collect();
        return AnthropicTools::Body(tools.into());
    }
    AnthropicTools::Genai(
        tools
            .iter()
            .map(|t| {
                let tool = genai::chat::Tool::new(t.name.clone()).with_schema(t.parameters.clone());
                if t.description.is_empty() {
                    tool
                } else {
                    tool.with_description(t.description.clone())
                }
            })
            .collect(),
    )
}

fn genai_tool_choice(choice: &ToolChoice) -> genai::chat::ToolChoice {
    match choice {
        ToolChoice::Auto => genai::chat::ToolChoice::Auto,
        ToolChoice::None => genai::chat::ToolChoice::None,
        ToolChoice::Required => genai::chat::ToolChoice::Required,
        ToolChoice::Named(name) => genai::chat::ToolChoice::tool(name.clone()),
    }
}

fn genai_request(flavor: Flavor, prompt: &Prompt) -> (ChatRequest, ChatOptions) {
    let mut request = ChatRequest::new(genai_messages(&prompt.turns));
    let system = system_text(prompt);
    if !system.trim().is_empty() {
        request = request.with_system(system);
    }
    let mut options = sampling_options(flavor, &prompt.sampling);
    if !prompt.tools.is_empty() {
        match anthropic_tools(&prompt.tools) {
            AnthropicTools::Genai(tools) => request = request.with_tools(tools),
            AnthropicTools::Body(tools) => {
                let mut extra = options
                    .extra_body
                    .take()
                    .unwrap_or_else(|| serde_json::json!({}));
                extra["tools"] = tools;
                options = options.with_extra_body(extra);
            }
        }
        options = options
            .with_tool_choice(genai_tool_choice(&prompt.tool_choice))
            .with_capture_tool_calls(true);
    }
    (request, options)
}

/// The end of a `genai` reply: an [`Event::ToolCall`] per call, then [`Event::End`].
fn end_events(end: StreamEnd) -> Vec<Event> {
    let usage = end.captured_usage.as_ref().map(|u| Usage {
        prompt: u.prompt_tokens.unwrap_or(0).max(0) as u32,
        completion: u.completion_tokens.unwrap_or(0).max(0) as u32,
    });
    let finish = end
        .captured_stop_reason
        .as_ref()
        .map_or(FinishReason::Stop, finish_reason);
    let calls = end.captured_into_tool_calls().unwrap_or_default();
    let finish = match (calls.is_empty(), finish) {
        (false, _) => FinishReason::ToolCalls,
        (true, FinishReason::ToolCalls) => FinishReason::Stop,
        (true, finish) => finish,
    };
    let mut events: Vec<Event> = calls
        .into_iter()
        .map(|call| {
            let arguments = match call.fn_arguments {
                // Input that did not parse (a call cut short), as far as it got.
                serde_json::Value::String(text) => text,
                serde_json::Value::Null => String::new(),
                input => input.to_string(),
            };
            Event::ToolCall(ToolCall {
                id: call.call_id,
                name: call.fn_name,
                arguments: if arguments.trim().is_empty() {
                    "{}".to_string()
                } else {
                    arguments
                },
            })
        })
        .collect();
    events.push(Event::End(usage, finish));
    events
}

#[async_trait]
impl Provider for RemoteProvider {
    fn code(&self) -> &'static str {
        self.flavor.code()
    }

    fn name(&self) -> &'static str {
        self.flavor.name()
    }

    async fn models(&self) -> Result<Vec<String>, ProviderError> {
        let config = ProviderConfig::from_endpoint(Endpoint::from_owned(self.base_url.clone()))
            .with_auth(AuthData::Key(self.key.expose_secret().to_string()));
        self.client
            .all_model_names(self.kind(), config)
            .await
            .map_err(|e| self.error(e))
    }

    /// The reply's events; a provider silence ends it with [`ProviderErrorKind::Timeout`].
    async fn stream(&self, model: &str, prompt: &Prompt) -> Result<EventStream, ProviderError> {
        let events = match &self.openai {
            Some(openai) => openai.stream(model, prompt).await?,
            None => self.genai_stream(model, prompt).await?,
        };
        let (flavor, timeout) = (self.flavor, self.timeout);
        let silent = move || Err(silence(flavor, timeout));
        Ok(crate::idle::idle(events, timeout, silent).boxed())
    }
}

impl RemoteProvider {
    /// The reply's events through `genai` (Anthropic); tool calls are read whole at the end.
    async fn genai_stream(
        &self,
        model: &str,
        prompt: &Prompt,
    ) -> Result<EventStream, ProviderError> {
        let (request, options) = genai_request(self.flavor, prompt);
        // The silences inside the reply are watched below, with one timer per reply rather
        // than one per read.
        let options = options
            .with_capture_usage(true)
            .with_stream_header_timeout(self.timeout);
        let response = self
            .client
            .exec_chat_stream(self.target(model), request, Some(&options))
            .await
            .map_err(|e| self.error(e))?;
        // What mapping a failure needs, and no more: an open stream keeps it.
        let (flavor, key) = (self.flavor, Arc::clone(&self.key));
        let events = response.stream.flat_map(move |event| {
            use futures::{future::Either, stream::iter};
            let one = match event {
                Ok(ChatStreamEvent::Chunk(chunk)) if !chunk.content.is_empty() => {
                    Some(Ok(Event::Delta(chunk.content)))
                }
                Ok(ChatStreamEvent::End(end)) => {
                    return Either::Right(iter(end_events(end).into_iter().map(Ok)));
                }
                Ok(_) => None,
                Err(e) => Some(Err(provider_error(flavor, &key, e))),
            };
            Either::Left(iter(one))
        });
        Ok(events.boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complaints_come_from_the_error_body() {
        assert_eq!(
            complaint(r#"{"error":{"message":"Rate limit reached","type":"x"}}"#),
            "Rate limit reached"
        );
        assert_eq!(
            complaint(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "Overloaded"
        );
        assert_eq!(complaint("plain text"), "plain text");
        assert_eq!(complaint(""), "no details given");
    }

    #[test]
    fn what_is_shown_of_an_error_never_quotes_the_request_url() {
        let refused = genai::Error::WebStream {
            model_iden: ModelIden::new(AdapterKind::OpenAI, "gpt-4o-mini"),
            cause: "error sending request for url (http://10.1.2.3:8088/v1/chat/completions)"
                .into(),
            error: Box::new(std::io::Error::other("connection refused")),
        };
        let (kind, detail) = classify(&refused);
        assert_eq!(kind, ProviderErrorKind::Connection);
        assert_eq!(detail, "the connection broke");
        let parse = genai::Error::Internal("http://10.1.2.3:8088/v1/ answered nonsense".into());
        assert!(!classify(&parse).1.contains("10.1.2.3"));
        // A proxy's complaint keeps its words, not its addresses.
        assert_eq!(
            complaint("no upstream at http://10.1.2.3:8088/v1/chat (tried https://b.internal)"),
            "no upstream at [address] (tried [address])"
        );
        let shown = provider_error(
            Flavor::Anthropic,
            &SecretString::from("sk-ant-secret"),
            refused,
        );
        assert_eq!(
            shown.message, "Anthropic failed: the connection broke",
            "named, never by address"
        );
    }

    #[test]
    fn sampling_is_named_in_each_protocol() {
        let sampling = Sampling {
            temperature: Some(0.2),
            top_p: Some(0.9),
            max_tokens: Some(64),
            stop: vec!["END".into()],
            user: Some("u-1".into()),
        };
        let openai = sampling_options(Flavor::OpenAi, &sampling);
        assert_eq!(
            (openai.temperature, openai.top_p, openai.max_tokens),
            (Some(0.2), Some(0.9), Some(64))
        );
        assert_eq!(openai.stop_sequences, ["END"]);
        assert_eq!(openai.extra_body, Some(serde_json::json!({"user": "u-1"})));
        let anthropic = sampling_options(Flavor::Anthropic, &sampling);
        assert_eq!(
            anthropic.extra_body,
            Some(serde_json::json!({"metadata": {"user_id": "u-1"}}))
        );
        let none = sampling_options(Flavor::OpenAi, &Sampling::default());
        assert!(none.temperature.is_none() && none.max_tokens.is_none());
        assert!(none.stop_sequences.is_empty() && none.extra_body.is_none());
        assert_eq!(
            finish_reason(&StopReason::from("length".to_string())),
            FinishReason::Length
        );
        assert_eq!(
            finish_reason(&StopReason::from("max_tokens".to_string())),
            FinishReason::Length
        );
        assert_eq!(
            finish_reason(&StopReason::from("end_turn".to_string())),
            FinishReason::Stop
        );
    }

    #[test]
    fn passages_are_added_to_the_system_text_with_markers() {
        let prompt = Prompt {
            system: "You are helpful.".into(),
            passages: vec![super::super::Passage {
                marker: "[1]".into(),
                title: "Doc".into(),
                url: None,
                text: "Fact.".into(),
            }],
            ..Prompt::default()
        };
        let s = system_text(&prompt);
        assert!(s.starts_with("You are helpful.") && s.contains("[1] Doc\nFact."));
    }

    fn exchange(
        id: &str,
        name: &str,
        arguments: &str,
        result: &str,
        is_error: bool,
    ) -> super::super::ToolExchange {
        super::super::ToolExchange {
            call: ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: arguments.into(),
            },
            result: result.into(),
            is_error,
        }
    }

    fn weather_tool(name: &str, description: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters: serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        }
    }

    #[test]
    fn tool_calls_of_the_history_become_tool_use_then_tool_results() {
        let prompt = Prompt {
            system: "Be brief".into(),
            turns: vec![
                Turn::text(Role::User, "weather?"),
                Turn {
                    role: Role::Assistant,
                    content: "Let me look.".into(),
                    tool_calls: vec![
                        exchange(
                            "toolu_1",
                            "get_weather",
                            r#"{"city":"Paris"}"#,
                            "18 °C",
                            false,
                        ),
                        exchange("toolu_2", "get_weather", "{not json", "bad arguments", true),
                    ],
                },
                Turn {
                    role: Role::Assistant,
                    content: String::new(),
                    tool_calls: vec![exchange("toolu_3", "get_weather", "", "20 °C", false)],
                },
                Turn::text(Role::Assistant, "18 °C in Paris."),
            ],
            ..Prompt::default()
        };
        let (request, options) = genai_request(Flavor::Anthropic, &prompt);
        assert_eq!(request.system.as_deref(), Some("Be brief"));
        let roles: Vec<_> = request.messages.iter().map(|m| m.role.clone()).collect();
        use genai::chat::ChatRole;
        assert_eq!(
            roles,
            [
                ChatRole::User,
                ChatRole::Assistant,
                ChatRole::Tool,
                ChatRole::Assistant,
                ChatRole::Tool,
                ChatRole::Assistant,
            ]
        );
        let calls = request.messages[1].content.parts();
        assert_eq!(calls[0].as_text(), Some("Let me look."));
        let calls = request.messages[1].content.tool_calls();
        assert_eq!(
            calls
                .iter()
                .map(|c| (
                    c.call_id.as_str(),
                    c.fn_name.as_str(),
                    c.fn_arguments.clone()
                ))
                .collect::<Vec<_>>(),
            [
                (
                    "toolu_1",
                    "get_weather",
                    serde_json::json!({"city": "Paris"})
                ),
                // Arguments that do not parse go back as the empty object Anthropic accepts.
                ("toolu_2", "get_weather", serde_json::json!({})),
            ]
        );
        let results = request.messages[2].content.parts();
        assert_eq!(results.len(), 2);
        let ContentPart::ToolResponse(ok) = &results[0] else {
            panic!("{results:?}")
        };
        assert_eq!(
            (ok.call_id.as_str(), ok.content.as_str()),
            ("toolu_1", "18 °C")
        );
        let ContentPart::Custom(failed) = &results[1] else {
            panic!("{results:?}")
        };
        assert_eq!(
            failed.data,
            serde_json::json!({
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "content": "bad arguments",
                "is_error": true,
            })
        );
        // A turn of calls alone has no text part.
        let parts = request.messages[3].content.parts();
        assert_eq!(parts.len(), 1);
        assert_eq!(
            request.messages[3].content.tool_calls()[0].fn_arguments,
            serde_json::json!({})
        );
        assert_eq!(
            request.messages[5].content.first_text(),
            Some("18 °C in Paris.")
        );
        // No tools offered: neither tools, nor a choice, nor capture.
        assert!(request.tools.is_none());
        assert!(options.tool_choice.is_none() && options.capture_tool_calls.is_none());
    }

    #[test]
    fn tools_and_the_tool_choice_are_given_to_genai() {
        let mut prompt = Prompt {
            turns: vec![Turn::text(Role::User, "weather?")],
            tools: vec![
                weather_tool("get_weather", "The weather in a city"),
                weather_tool("nothing_said", ""),
            ],
            tool_choice: ToolChoice::Named("get_weather".into()),
            sampling: Sampling {
                user: Some("u-1".into()),
                ..Sampling::default()
            },
            ..Prompt::default()
        };
        let (request, options) = genai_request(Flavor::Anthropic, &prompt);
        let tools = request.tools.expect("tools");
        assert_eq!(tools.len(), 2);
        assert_eq!(tools[0].name.as_str(), "get_weather");
        assert_eq!(
            tools[0].description.as_deref(),
            Some("The weather in a city")
        );
        assert_eq!(tools[0].schema, Some(prompt.tools[0].parameters.clone()));
        assert_eq!(tools[1].description, None);
        assert_eq!(
            options.tool_choice,
            Some(genai::chat::ToolChoice::tool("get_weather"))
        );
        assert_eq!(options.capture_tool_calls, Some(true));
        for (ours, theirs) in [
            (ToolChoice::Auto, genai::chat::ToolChoice::Auto),
            (ToolChoice::None, genai::chat::ToolChoice::None),
            (ToolChoice::Required, genai::chat::ToolChoice::Required),
        ] {
            assert_eq!(genai_tool_choice(&ours), theirs);
        }

        // `genai` would send a tool named `web_search` as Anthropic's own web search: the
        // tools go in the body as Anthropic defines them, next to the end user.
        prompt
            .tools
            .push(weather_tool("web_search", "Searches our wiki"));
        let (request, options) = genai_request(Flavor::Anthropic, &prompt);
        assert!(request.tools.is_none());
        let body = options.extra_body.expect("extra body");
        assert_eq!(body["metadata"], serde_json::json!({"user_id": "u-1"}));
        assert_eq!(
            body["tools"][2],
            serde_json::json!({
                "name": "web_search",
                "description": "Searches our wiki",
                "input_schema": prompt.tools[2].parameters,
            })
        );
        assert!(body["tools"][1].get("description").is_none());
        assert_eq!(options.capture_tool_calls, Some(true));
    }

    #[test]
    fn captured_tool_calls_end_the_reply_with_tool_calls() {
        let end = StreamEnd {
            captured_usage: Some(genai::chat::Usage {
                prompt_tokens: Some(10),
                completion_tokens: Some(4),
                ..Default::default()
            }),
            captured_stop_reason: Some(StopReason::from("tool_use".to_string())),
            captured_content: Some(MessageContent::from_tool_calls(vec![
                genai::chat::ToolCall {
                    call_id: "toolu_1".into(),
                    fn_name: "get_weather".into(),
                    fn_arguments: serde_json::json!({"city": "Paris"}),
                    thought_signatures: None,
                },
                genai::chat::ToolCall {
                    call_id: "toolu_2".into(),
                    fn_name: "now".into(),
                    fn_arguments: serde_json::Value::String(String::new()),
                    thought_signatures: None,
                },
                genai::chat::ToolCall {
                    call_id: "toolu_3".into(),
                    fn_name: "cut".into(),
                    fn_arguments: serde_json::Value::String(r#"{"a":"#.into()),
                    thought_signatures: None,
                },
            ])),
            ..StreamEnd::default()
        };
        let call = |id: &str, name: &str, arguments: &str| {
            Event::ToolCall(ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: arguments.into(),
            })
        };
        assert_eq!(
            end_events(end),
            [
                call("toolu_1", "get_weather", r#"{"city":"Paris"}"#),
                call("toolu_2", "now", "{}"),
                call("toolu_3", "cut", r#"{"a":"#),
                Event::End(
                    Some(Usage {
                        prompt: 10,
                        completion: 4
                    }),
                    FinishReason::ToolCalls
                ),
            ]
        );
        assert_eq!(
            finish_reason(&StopReason::from("tool_use".to_string())),
            FinishReason::ToolCalls
        );
        // A `tool_use` stop without any call captured is an ordinary end.
        let end = StreamEnd {
            captured_stop_reason: Some(StopReason::from("tool_use".to_string())),
            ..StreamEnd::default()
        };
        assert_eq!(end_events(end), [Event::End(None, FinishReason::Stop)]);
    }
}
