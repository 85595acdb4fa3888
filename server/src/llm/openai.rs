//! Streamed replies of an OpenAI-compatible endpoint, read per token without a JSON tree:
//! `POST {base}/chat/completions` with `"stream": true` answers server-sent events, one per
//! token, then a usage chunk and `data: [DONE]` (OpenAI API reference, "The chat completion
//! chunk object": <https://platform.openai.com/docs/api-reference/chat-streaming>).
//! `delta.tool_calls` fragments are gathered per `index` and given out whole at
//! `finish_reason`. Each event is deserialized into [`ChunkData`], borrowing from its text,
//! so a token costs one allocation. The request body is the one `genai` sends for the same
//! options; every other provider call goes through `genai` ([`super::remote`]).

use std::{borrow::Cow, collections::VecDeque, fmt, sync::Arc, time::Duration};

use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};
use secrecy::{ExposeSecret, SecretString};
use serde::{
    de::{self, IgnoredAny, SeqAccess, Visitor},
    Deserialize, Deserializer, Serialize,
};

use super::{
    lanes::{Lanes, STREAMS_PER_LANE},
    remote::{complaint, shown_error, system_text, transport, Flavor, TransportError},
    Event, EventStream, FinishReason, Prompt, ProviderError, ProviderErrorKind, Role, ToolCall,
    ToolChoice, Usage,
};

/// Largest error body read from a failed answer, in bytes.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// An OpenAI-compatible endpoint's streamed chat completions.
pub(crate) struct OpenAiStreams {
    /// The HTTP clients (each with its connection pool) of each calling thread, so a reply is
    /// read on the runtime that relays it ([`crate::startup::Runtimes::PerCore`]) and chunks
    /// never cross threads; lanes of [`STREAMS_PER_LANE`] requests ([`super::lanes`]).
    clients: thread_local::ThreadLocal<Lanes>,
    tls: rustls::ClientConfig,
    per_lane: usize,
    url: String,
    key: Arc<SecretString>,
    header_timeout: Duration,
}

impl OpenAiStreams {
    /// Streams of the endpoint at `base_url` (ending in `/`), with `key` as bearer token (none
    /// when empty). Errors: the HTTP client cannot be built.
    pub(crate) fn new(
        base_url: &str,
        key: Arc<SecretString>,
        header_timeout: Duration,
    ) -> anyhow::Result<Self> {
        let tls = super::lanes::provider_tls()
            .map_err(|e| anyhow::anyhow!("building the model client failed: {e}"))?;
        super::lanes::client(&tls)
            .map_err(|e| anyhow::anyhow!("building the model client failed: {e}"))?;
        Ok(Self::with_tls(
            base_url,
            key,
            header_timeout,
            tls,
            STREAMS_PER_LANE,
        ))
    }

    /// [`Self::new`] over `tls`, with lanes of `per_lane` requests.
    fn with_tls(
        base_url: &str,
        key: Arc<SecretString>,
        header_timeout: Duration,
        tls: rustls::ClientConfig,
        per_lane: usize,
    ) -> Self {
        Self {
            clients: thread_local::ThreadLocal::new(),
            tls,
            per_lane,
            url: format!("{base_url}chat/completions"),
            key,
            header_timeout,
        }
    }

    fn lanes(&self) -> &Lanes {
        self.clients.get_or(|| {
            Lanes::new(
                self.tls.clone(),
                self.per_lane,
                self.url.starts_with("https://"),
            )
        })
    }

    /// Sends the request and answers its events once the headers say it succeeded.
    /// Errors: a non-2xx status with the complaint ([`ProviderErrorKind::Status`]); no headers
    /// in time ([`ProviderErrorKind::Timeout`]); transport failure
    /// ([`ProviderErrorKind::Connection`]). Later failures come as stream items.
    pub(crate) async fn stream(
        &self,
        model: &str,
        prompt: &Prompt,
    ) -> Result<EventStream, ProviderError> {
        let system = system_text(prompt);
        let body = RequestBody::new(model, &system, prompt);
        let fail = |kind, detail: String, cause: Option<&dyn fmt::Display>| {
            shown_error(Flavor::OpenAi, &self.key, kind, detail, cause)
        };
        let (client, seat, mut opening) = match self.lanes().take() {
            Ok(taken) => taken,
            Err(e) => {
                let (kind, detail) = transport(&e);
                return Err(fail(kind, detail, Some(&e)));
            }
        };
        let mut request = client.post(&self.url).json(&body);
        let key = self.key.expose_secret();
        if !key.is_empty() {
            request = request.bearer_auth(key);
        }
        let sent = async {
            opening.ready().await;
            request.send().await
        };
        let response = match tokio::time::timeout(self.header_timeout, sent).await {
            Err(_) => return Err(fail(ProviderErrorKind::Timeout, "timed out".into(), None)),
            Ok(Err(e)) => {
                let (kind, detail) = transport(&e);
                return Err(fail(kind, detail, Some(&e)));
            }
            Ok(Ok(response)) => response,
        };
        // The lane's connection is open (and its protocol known): its other requests may go.
        drop(opening);
        let status = response.status();
        if !status.is_success() {
            let body = error_body(response).await;
            return Err(fail(
                ProviderErrorKind::Status(status.as_u16()),
                complaint(&body),
                None,
            ));
        }
        let key = Arc::clone(&self.key);
        // The seat goes with the stream: the lane has room again once the reply is dropped.
        Ok(Reading::new(response.bytes_stream().eventsource())
            .map(move |item| {
                let _seat = &seat;
                item.map_err(|(kind, detail)| shown_error(Flavor::OpenAi, &key, kind, detail, None))
            })
            .boxed())
    }
}

async fn error_body(mut response: genai_reqwest::Response) -> String {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() >= MAX_ERROR_BODY {
            body.truncate(MAX_ERROR_BODY);
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// The body of `POST /chat/completions` for a streamed reply, with tools and `tool_choice`
/// when offered (OpenAI API reference, "Create chat completion":
/// <https://platform.openai.com/docs/api-reference/chat/create>).
#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
}

/// A system, user, assistant (`content` `null` for calls alone) or tool (`role: "tool"`) message.
#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tool_calls: Vec<WireToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

impl<'a> Message<'a> {
    fn text(role: &'static str, content: &'a str) -> Self {
        Self {
            role,
            content: Some(content),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    parameters: &'a serde_json::Value,
}

#[derive(Serialize)]
#[serde(untagged)]
enum WireToolChoice<'a> {
    Mode(&'static str),
    Named {
        #[serde(rename = "type")]
        kind: &'static str,
        function: ToolName<'a>,
    },
}

#[derive(Serialize)]
struct ToolName<'a> {
    name: &'a str,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

impl<'a> RequestBody<'a> {
    fn new(model: &'a str, system: &'a str, prompt: &'a Prompt) -> Self {
        let exchanges: usize = prompt.turns.iter().map(|t| t.tool_calls.len()).sum();
        let mut messages = Vec::with_capacity(prompt.turns.len() + exchanges + 1);
        if !system.trim().is_empty() {
            messages.push(Message::text("system", system));
        }
        for turn in &prompt.turns {
            match turn.role {
                Role::User => messages.push(Message::text("user", &turn.content)),
                Role::Assistant if turn.tool_calls.is_empty() => {
                    messages.push(Message::text("assistant", &turn.content))
                }
                Role::Assistant => {
                    // The assistant's message with its calls, then each call's result in
                    // the order of the calls: OpenAI refuses a `tool` message that does not
                    // answer a call of the assistant message before it.
                    messages.push(Message {
                        role: "assistant",
                        content: Some(turn.content.as_str()).filter(|c| !c.is_empty()),
                        tool_calls: turn
                            .tool_calls
                            .iter()
                            .map(|exchange| WireToolCall {
                                id: &exchange.call.id,
                                kind: "function",
                                function: WireFunctionCall {
                                    name: &exchange.call.name,
                                    arguments: &exchange.call.arguments,
                                },
                            })
                            .collect(),
                        tool_call_id: None,
                    });
                    // OpenAI has no error flag for a result: an error's text says it.
                    messages.extend(turn.tool_calls.iter().map(|exchange| Message {
                        role: "tool",
                        content: Some(&exchange.result),
                        tool_calls: Vec::new(),
                        tool_call_id: Some(&exchange.call.id),
                    }));
                }
            }
        }
        let sampling = &prompt.sampling;
        let (max_tokens, max_completion_tokens) = if needs_max_completion_tokens(model) {
            (None, sampling.max_tokens)
        } else {
            (sampling.max_tokens, None)
        };
        let tools: Vec<WireTool> = prompt
            .tools
            .iter()
            .map(|tool| WireTool {
                kind: "function",
                function: WireFunction {
                    name: &tool.name,
                    description: &tool.description,
                    parameters: &tool.parameters,
                },
            })
            .collect();
        let tool_choice = (!tools.is_empty()).then(|| match &prompt.tool_choice {
            ToolChoice::Auto => WireToolChoice::Mode("auto"),
            ToolChoice::None => WireToolChoice::Mode("none"),
            ToolChoice::Required => WireToolChoice::Mode("required"),
            ToolChoice::Named(name) => WireToolChoice::Named {
                kind: "function",
                function: ToolName { name },
            },
        });
        Self {
            model,
            messages,
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            temperature: sampling.temperature,
            stop: &sampling.stop,
            max_tokens,
            max_completion_tokens,
            top_p: sampling.top_p,
            user: sampling.user.as_deref(),
            tools,
            tool_choice,
        }
    }
}

/// Whether `model` takes `max_completion_tokens` and refuses `max_tokens`: the o-series and
/// `gpt-5`/`gpt-6` (OpenAI API reference, "Create chat completion").
fn needs_max_completion_tokens(model: &str) -> bool {
    ["gpt-5", "gpt-6", "o1", "o3", "o4"]
        .iter()
        .any(|p| model.starts_with(p))
}

/// One chunk event's data, borrowing from its text; every field may be absent.
#[derive(Deserialize)]
struct ChunkData<'a> {
    #[serde(borrow, default, deserialize_with = "first_choice")]
    choices: Option<Choice<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(borrow, default)]
    error: Option<WireError<'a>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    content: Option<Content<'a>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallDelta<'a>>>,
}

/// A `delta.tool_calls` fragment: the first has id and name; each adds to the arguments.
#[derive(Deserialize)]
struct ToolCallDelta<'a> {
    /// Which call this continues; some servers leave it out when sending calls whole.
    #[serde(default)]
    index: Option<u32>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

struct PendingCall {
    index: u32,
    id: String,
    name: String,
    arguments: String,
}

impl PendingCall {
    fn add(&mut self, fragment: &ToolCallDelta) {
        if let Some(id) = fragment.id.as_deref() {
            if self.id.is_empty() {
                self.id.push_str(id);
            }
        }
        let Some(function) = &fragment.function else {
            return;
        };
        if let Some(name) = function.name.as_deref() {
            // Some servers repeat the name in every fragment.
            if self.name != name {
                self.name.push_str(name);
            }
        }
        if let Some(arguments) = function.arguments.as_deref() {
            self.arguments.push_str(arguments);
        }
    }

    /// The whole call; empty arguments are the empty object.
    fn into_call(self) -> ToolCall {
        ToolCall {
            id: self.id,
            name: self.name,
            arguments: if self.arguments.trim().is_empty() {
                "{}".to_string()
            } else {
                self.arguments
            },
        }
    }
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u32>,
    #[serde(default)]
    completion_tokens: Option<u32>,
}

#[derive(Deserialize)]
struct WireError<'a> {
    #[serde(borrow, default)]
    message: Option<Cow<'a, str>>,
}

/// `delta.content`: a string, or typed parts whose `text` parts are the reply (Mistral).
struct Content<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ContentVisitor;
        impl<'de> Visitor<'de> for ContentVisitor {
            type Value = Content<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an array of content parts")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Content(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Content(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Content(Cow::Owned(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Content(Cow::Borrowed("")))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut text = String::new();
                while let Some(part) = seq.next_element::<Part>()? {
                    if part.kind.as_deref() == Some("text") {
                        text.push_str(part.text.as_deref().unwrap_or_default());
                    }
                }
                Ok(Content(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_any(ContentVisitor)
    }
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
}

fn first_choice<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Choice<'de>>, D::Error> {
    struct FirstVisitor;
    impl<'de> Visitor<'de> for FirstVisitor {
        type Value = Option<Choice<'de>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an array of choices")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let first = seq.next_element::<Choice<'de>>()?;
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(first)
        }
    }
    deserializer.deserialize_any(FirstVisitor)
}

type Failure = (ProviderErrorKind, String);

/// The events of a reply: a [`Event::Delta`] per non-empty content; the tool calls in index
/// order once a `finish_reason` is seen or the body ends; then one [`Event::End`] at
/// `[DONE]` or the body's end (the usage chunk may follow the finish reason). A failure ends
/// the stream.
struct Reading<S> {
    events: S,
    usage: Option<Usage>,
    finish: FinishReason,
    calls: Vec<PendingCall>,
    ready: VecDeque<Event>,
    called: bool,
    ended: bool,
}

impl<S> Reading<S> {
    fn new(events: S) -> Self {
        Self {
            events,
            usage: None,
            finish: FinishReason::Stop,
            calls: Vec::new(),
            ready: VecDeque::new(),
            called: false,
            ended: false,
        }
    }

    fn end(&mut self) -> Option<Result<Event, Failure>> {
        if self.ended {
            return None;
        }
        self.ended = true;
        self.flush_calls();
        let finish = if self.called {
            FinishReason::ToolCalls
        } else {
            self.finish
        };
        self.ready.push_back(Event::End(self.usage.take(), finish));
        self.ready.pop_front().map(Ok)
    }

    fn gather(&mut self, fragments: &[ToolCallDelta]) {
        for fragment in fragments {
            let at = match fragment.index {
                Some(index) => self.calls.iter().position(|c| c.index == index),
                // Without an index, a new id starts a new call and anything else continues
                // the last one.
                None => match fragment.id.as_deref() {
                    Some(id) => self.calls.iter().position(|c| c.id == id),
                    None => self.calls.len().checked_sub(1),
                },
            };
            let at = at.unwrap_or_else(|| {
                let index = fragment.index.unwrap_or_else(|| {
                    self.calls
                        .iter()
                        .map(|c| c.index.saturating_add(1))
                        .max()
                        .unwrap_or(0)
                });
                self.calls.push(PendingCall {
                    index,
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                });
                self.calls.len() - 1
            });
            self.calls[at].add(fragment);
        }
    }

    fn flush_calls(&mut self) {
        if self.calls.is_empty() {
            return;
        }
        self.called = true;
        let mut calls = std::mem::take(&mut self.calls);
        calls.sort_by_key(|c| c.index);
        self.ready
            .extend(calls.into_iter().map(|c| Event::ToolCall(c.into_call())));
    }

    /// Reads one event's data: its delta or a failure; calls made whole are queued after it.
    fn read(&mut self, data: &str) -> Result<Option<Event>, Failure> {
        let chunk: ChunkData = serde_json::from_str(data).map_err(|_| {
            (
                ProviderErrorKind::Other,
                "its answer could not be read".to_string(),
            )
        })?;
        if let Some(error) = chunk.error {
            let message = error.message.as_deref().unwrap_or_default();
            return Err((ProviderErrorKind::Other, complaint(message)));
        }
        if let Some(usage) = chunk.usage {
            if usage.prompt_tokens.is_some() || usage.completion_tokens.is_some() {
                self.usage = Some(Usage {
                    prompt: usage.prompt_tokens.unwrap_or(0),
                    completion: usage.completion_tokens.unwrap_or(0),
                });
            }
        }
        let Some(choice) = chunk.choices else {
            return Ok(None);
        };
        let mut content = None;
        if let Some(delta) = choice.delta {
            if let Some(fragments) = &delta.tool_calls {
                self.gather(fragments);
            }
            content = delta.content;
        }
        if let Some(reason) = choice.finish_reason {
            self.finish = match reason.as_ref() {
                "length" => FinishReason::Length,
                "content_filter" => FinishReason::ContentFilter,
                // `tool_calls` too: the end says ToolCalls only when calls were read.
                _ => FinishReason::Stop,
            };
            self.flush_calls();
        }
        Ok(content
            .filter(|c| !c.0.is_empty())
            .map(|c| Event::Delta(c.0.into_owned())))
    }
}

impl<S, E> Stream for Reading<S>
where
    S: Stream<Item = Result<eventsource_stream::Event, eventsource_stream::EventStreamError<E>>>
        + Unpin,
    E: TransportError,
{
    type Item = Result<Event, Failure>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let this = &mut *self;
        loop {
            if let Some(event) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(event)));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match std::task::ready!(this.events.poll_next_unpin(cx)) {
                None => return Poll::Ready(this.end()),
                Some(Err(e)) => {
                    this.ended = true;
                    let failure = match e {
                        eventsource_stream::EventStreamError::Transport(e) => transport(&e),
                        _ => (
                            ProviderErrorKind::Other,
                            "its answer could not be read".to_string(),
                        ),
                    };
                    return Poll::Ready(Some(Err(failure)));
                }
                Some(Ok(event)) => {
                    if event.data == "[DONE]" {
                        return Poll::Ready(this.end());
                    }
                    match this.read(&event.data) {
                        Ok(Some(delta)) => return Poll::Ready(Some(Ok(delta))),
                        Ok(None) => {}
                        Err(failure) => {
                            this.ended = true;
                            return Poll::Ready(Some(Err(failure)));
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Sampling, ToolExchange, ToolSpec, Turn};

    fn read_all(events: &[&str]) -> Vec<Result<Event, Failure>> {
        let items: Vec<Result<eventsource_stream::Event, _>> = events
            .iter()
            .map(|data| {
                Ok::<_, eventsource_stream::EventStreamError<reqwest::Error>>(
                    eventsource_stream::Event {
                        event: "message".into(),
                        data: data.to_string(),
                        id: String::new(),
                        retry: None,
                    },
                )
            })
            .collect();
        futures::executor::block_on(Reading::new(futures::stream::iter(items)).collect())
    }

    #[test]
    fn chunks_become_deltas_then_the_end_with_usage_and_finish_reason() {
        let seen = read_all(&[
            r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"Hel\"lo"},"finish_reason":null}]}"#,
            r#"{"choices":[{"delta":{"content":[{"type":"thinking","thinking":[]},{"type":"text","text":" world"}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}"#,
            "[DONE]",
        ]);
        let seen: Vec<Event> = seen.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            seen,
            [
                Event::Delta("Hel\"lo".into()),
                Event::Delta(" world".into()),
                Event::End(
                    Some(Usage {
                        prompt: 7,
                        completion: 3
                    }),
                    FinishReason::Length
                ),
            ]
        );
    }

    #[test]
    fn a_body_that_ends_without_done_still_ends_the_reply_once() {
        let seen = read_all(&[r#"{"choices":[{"delta":{"content":"hi"}}]}"#]);
        assert_eq!(seen.len(), 2);
        assert_eq!(
            seen[1].as_ref().unwrap(),
            &Event::End(None, FinishReason::Stop)
        );
    }

    #[test]
    fn errors_inside_the_stream_and_unreadable_events_end_it() {
        let seen = read_all(&[
            r#"{"choices":[{"delta":{"content":"a"}}]}"#,
            r#"{"error":{"message":"Overloaded","type":"server_error"}}"#,
            r#"{"choices":[{"delta":{"content":"never"}}]}"#,
        ]);
        assert_eq!(seen.len(), 2);
        assert_eq!(
            seen[1].as_ref().unwrap_err(),
            &(ProviderErrorKind::Other, "Overloaded".to_string())
        );
        let seen = read_all(&["not json", r#"{"choices":[{"delta":{"content":"b"}}]}"#]);
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].as_ref().unwrap_err().0, ProviderErrorKind::Other);
    }

    #[test]
    fn the_request_body_names_each_setting_as_openai_does() {
        let prompt = Prompt {
            system: "Be brief".into(),
            turns: vec![
                Turn::text(Role::User, "hi"),
                Turn::text(Role::Assistant, "hello"),
            ],
            sampling: Sampling {
                temperature: Some(0.5),
                top_p: None,
                max_tokens: Some(20),
                stop: vec!["END".into()],
                user: Some("u-1".into()),
            },
            ..Prompt::default()
        };
        let body = |model| {
            let system = system_text(&prompt);
            serde_json::to_value(RequestBody::new(model, &system, &prompt)).unwrap()
        };
        assert_eq!(
            body("gpt-4o-mini"),
            serde_json::json!({
                "model": "gpt-4o-mini",
                "messages": [
                    {"role": "system", "content": "Be brief"},
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hello"},
                ],
                "stream": true,
                "stream_options": {"include_usage": true},
                "temperature": 0.5,
                "stop": ["END"],
                "max_tokens": 20,
                "user": "u-1",
            })
        );
        let reasoning = body("o3-mini");
        assert_eq!(reasoning["max_completion_tokens"], 20);
        assert!(reasoning.get("max_tokens").is_none());
        let none = Prompt::default();
        let bare = serde_json::to_value(RequestBody::new("m", "", &none)).unwrap();
        assert_eq!(bare["messages"], serde_json::json!([]));
        assert!(bare.get("temperature").is_none() && bare.get("stop").is_none());
    }

    fn call(id: &str, name: &str, arguments: &str) -> Event {
        Event::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        })
    }

    #[test]
    fn parallel_tool_calls_are_reassembled_from_their_fragments_in_index_order() {
        let seen = read_all(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{\"zone\""}}]},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}},{"index":1,"function":{"arguments":":\"CET\"}"}}]},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"id":"call_3","type":"function","function":{"name":"now"}}]},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":9}}"#,
            "[DONE]",
        ]);
        let seen: Vec<Event> = seen.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            seen,
            [
                call("call_1", "get_weather", r#"{"city":"Paris"}"#),
                call("call_2", "get_time", r#"{"zone":"CET"}"#),
                call("call_3", "now", "{}"),
                Event::End(
                    Some(Usage {
                        prompt: 12,
                        completion: 9
                    }),
                    FinishReason::ToolCalls
                ),
            ]
        );
    }

    #[test]
    fn text_then_a_call_gives_the_text_then_the_call_even_when_the_reason_is_stop() {
        let seen = read_all(&[
            r#"{"choices":[{"delta":{"role":"assistant","content":"Let me"}}]}"#,
            r#"{"choices":[{"delta":{"content":" check."}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c-9","type":"function","function":{"name":"lookup","arguments":"{\"q\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"x\"}"}}]},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]);
        let seen: Vec<Event> = seen.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            seen,
            [
                Event::Delta("Let me".into()),
                Event::Delta(" check.".into()),
                call("c-9", "lookup", r#"{"q":"x"}"#),
                Event::End(None, FinishReason::ToolCalls),
            ]
        );
        // Calls without a finish reason or `[DONE]`, and without indexes (a server that
        // sends each call whole), still come out whole before the end.
        let seen = read_all(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"one","arguments":"{}"}},{"id":"b","function":{"name":"two","arguments":"{\"n\":2}"}}]}}]}"#,
        ]);
        let seen: Vec<Event> = seen.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            seen,
            [
                call("a", "one", "{}"),
                call("b", "two", r#"{"n":2}"#),
                Event::End(None, FinishReason::ToolCalls),
            ]
        );
        // A reason of `tool_calls` without any call is an ordinary end.
        let seen = read_all(&[
            r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        assert_eq!(
            seen.last().unwrap().as_ref().unwrap(),
            &Event::End(None, FinishReason::Stop)
        );
    }

    #[test]
    fn the_request_body_offers_the_tools_and_sends_the_calls_with_their_results() {
        let weather = ToolExchange {
            call: ToolCall {
                id: "call_1".into(),
                name: "get_weather".into(),
                arguments: r#"{"city":"Paris"}"#.into(),
            },
            result: "18 °C".into(),
            is_error: false,
        };
        let failed = ToolExchange {
            call: ToolCall {
                id: "call_2".into(),
                name: "get_time".into(),
                arguments: "{}".into(),
            },
            result: "unknown zone".into(),
            is_error: true,
        };
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        });
        let mut prompt = Prompt {
            turns: vec![
                Turn::text(Role::User, "weather?"),
                Turn {
                    role: Role::Assistant,
                    content: String::new(),
                    tool_calls: vec![weather.clone(), failed],
                },
                Turn {
                    role: Role::Assistant,
                    content: "Checking again.".into(),
                    tool_calls: vec![weather],
                },
                Turn::text(Role::Assistant, "It is 18 °C."),
            ],
            tools: vec![
                ToolSpec {
                    name: "get_weather".into(),
                    description: "The weather in a city".into(),
                    parameters: schema.clone(),
                },
                ToolSpec {
                    name: "get_time".into(),
                    description: String::new(),
                    parameters: serde_json::json!({"type": "object"}),
                },
            ],
            tool_choice: ToolChoice::Named("get_weather".into()),
            ..Prompt::default()
        };
        let body = |prompt: &Prompt| {
            let system = system_text(prompt);
            serde_json::to_value(RequestBody::new("gpt-4o-mini", &system, prompt)).unwrap()
        };
        assert_eq!(
            body(&prompt),
            serde_json::json!({
                "model": "gpt-4o-mini",
                "messages": [
                    {"role": "user", "content": "weather?"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                        {"id": "call_2", "type": "function",
                         "function": {"name": "get_time", "arguments": "{}"}},
                    ]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "18 °C"},
                    {"role": "tool", "tool_call_id": "call_2", "content": "unknown zone"},
                    {"role": "assistant", "content": "Checking again.", "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                    ]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "18 °C"},
                    {"role": "assistant", "content": "It is 18 °C."},
                ],
                "stream": true,
                "stream_options": {"include_usage": true},
                "tools": [
                    {"type": "function", "function": {
                        "name": "get_weather",
                        "description": "The weather in a city",
                        "parameters": schema,
                    }},
                    {"type": "function", "function": {
                        "name": "get_time",
                        "parameters": {"type": "object"},
                    }},
                ],
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            })
        );
        for (choice, wire) in [
            (ToolChoice::Auto, "auto"),
            (ToolChoice::None, "none"),
            (ToolChoice::Required, "required"),
        ] {
            prompt.tool_choice = choice;
            assert_eq!(body(&prompt)["tool_choice"], wire);
        }
        // Without tools, neither field is sent, whatever the choice.
        prompt.tools.clear();
        let bare = body(&prompt);
        assert!(bare.get("tools").is_none() && bare.get("tool_choice").is_none());
    }

    /// The text of a streamed reply, read to its end.
    async fn text_of(mut stream: EventStream) -> String {
        let mut text = String::new();
        while let Some(event) = stream.next().await {
            match event.unwrap() {
                Event::Delta(delta) => text.push_str(&delta),
                Event::End(..) => return text,
                Event::ToolCall(call) => panic!("unexpected call {call:?}"),
            }
        }
        panic!("the reply ended without its end event")
    }

    /// The mock provider over TLS, offering HTTP/2 besides HTTP/1.1 when `http2`.
    async fn tls_mock(http2: bool) -> mock_provider::MockProvider {
        mock_provider::MockProvider::start(mock_provider::MockConfig {
            tls: Some(mock_provider::MockTls { http2 }),
            ..mock_provider::MockConfig::default()
        })
        .await
        .unwrap()
    }

    /// Streams to `mock` that trust its test authority alone, in lanes of `per_lane`.
    fn trusting(mock: &mock_provider::MockProvider, per_lane: usize) -> OpenAiStreams {
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        let authority = mock_provider::TEST_CA_PEM.as_bytes();
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(authority).unwrap())
            .unwrap();
        let tls = super::super::lanes::tls_with_roots(roots).unwrap();
        OpenAiStreams::with_tls(
            &mock.base_url(),
            Arc::new(SecretString::from("")),
            Duration::from_secs(10),
            tls,
            per_lane,
        )
    }

    /// A prompt of one user message.
    fn asking(text: impl Into<String>) -> Prompt {
        Prompt {
            turns: vec![Turn::text(Role::User, text)],
            ..Prompt::default()
        }
    }

    /// Against a provider that speaks HTTP/2 over TLS (the mock, with a test authority's
    /// certificate), streamed replies share a connection per lane: five replies started
    /// together with lanes of two take three connections, all HTTP/2 (a lane's second
    /// request waits for its first to open the connection), and each reply arrives whole.
    /// A lane whose replies ended takes the next one on its connection.
    #[tokio::test]
    async fn replies_share_an_http2_connection_per_lane_of_streams() {
        let mock = tls_mock(true).await;
        assert!(mock.base_url().starts_with("https://"));
        let streams = trusting(&mock, 2);
        let prompts: Vec<Prompt> = (0..5).map(|i| asking(format!("reply {i}"))).collect();
        let open: Vec<EventStream> =
            futures::future::join_all(prompts.iter().map(|p| streams.stream("gpt-4o-mini", p)))
                .await
                .into_iter()
                .map(Result::unwrap)
                .collect();
        assert_eq!(streams.lanes().count(), 3);
        assert_eq!(mock.connections(), (3, 3), "one HTTP/2 connection per lane");
        for (i, stream) in open.into_iter().enumerate() {
            assert_eq!(text_of(stream).await, format!("Echo: reply {i}"));
        }
        let again = streams
            .stream("gpt-4o-mini", &asking("reply 5"))
            .await
            .unwrap();
        assert_eq!(text_of(again).await, "Echo: reply 5");
        assert_eq!(
            mock.connections(),
            (3, 3),
            "the first lane's connection is reused"
        );
    }

    /// A provider over TLS that offers HTTP/1.1 alone is served too, a connection a reply.
    #[tokio::test]
    async fn a_provider_offering_only_http1_over_tls_is_streamed_from() {
        let mock = tls_mock(false).await;
        let streams = trusting(&mock, STREAMS_PER_LANE);
        let prompt = asking("over one");
        let first = streams.stream("gpt-4o-mini", &prompt).await.unwrap();
        let second = streams.stream("gpt-4o-mini", &prompt).await.unwrap();
        assert_eq!(mock.connections(), (2, 0));
        assert_eq!(text_of(first).await, "Echo: over one");
        assert_eq!(text_of(second).await, "Echo: over one");
    }

    /// A certificate no trusted authority issued is refused: the reply fails to connect.
    #[tokio::test]
    async fn a_provider_certificate_from_an_unknown_authority_is_refused() {
        let mock = tls_mock(true).await;
        let streams = OpenAiStreams::new(
            &mock.base_url(),
            Arc::new(SecretString::from("")),
            Duration::from_secs(10),
        )
        .unwrap();
        let prompt = asking("hello");
        let Err(error) = streams.stream("gpt-4o-mini", &prompt).await else {
            panic!("a certificate of the test authority was trusted");
        };
        assert_eq!(error.kind, ProviderErrorKind::Connection, "{error:?}");
    }
}
