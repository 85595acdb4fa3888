//! Streamed replies of an OpenAI-compatible endpoint, read without a JSON tree per token.
//!
//! `POST {base}/chat/completions` with `"stream": true` answers server-sent events, one per
//! token, each `data: {"choices":[{"delta":{"content":"…"},"finish_reason":null}], …}`,
//! then a usage chunk (`choices: []`, with `stream_options.include_usage`) and
//! `data: [DONE]` (OpenAI API reference, "The chat completion chunk object":
//! <https://platform.openai.com/docs/api-reference/chat-streaming>). Every other call of
//! the provider (model lists, Anthropic) goes through `genai` ([`super::remote`]); this path
//! is the one that runs per token.
//!
//! Why not through `genai`: a 50-token reply at the provider's pace spent a fifth of the
//! service's CPU inside `genai`'s stream (BENCHMARKS.md § Streamed conversations at the
//! provider's pace): every event was copied into new strings, parsed into a
//! `serde_json::Value` tree (an allocation per key and value), then walked by JSON pointer,
//! and every read was wrapped in a fresh timer. Here the event framing is the
//! `eventsource-stream` crate's, and each event is deserialized into [`ChunkData`], which
//! borrows from the event's text: the only allocation per token is the token's own string.
//! The request body is the one `genai` sends for the same options (tests in
//! `tests/api/providers.rs` and `tests/api/openai.rs` read it at the mock provider).

use std::{borrow::Cow, fmt, sync::Arc, time::Duration};

use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};
use secrecy::{ExposeSecret, SecretString};
use serde::{
    de::{self, IgnoredAny, SeqAccess, Visitor},
    Deserialize, Deserializer, Serialize,
};

use super::{
    remote::{complaint, shown_error, system_text, transport, Flavor, TransportError},
    Event, EventStream, FinishReason, Prompt, ProviderError, ProviderErrorKind, Role, Usage,
};

/// The largest error body read from a failed answer, in bytes: enough for any provider's
/// complaint, bounded so that a misbehaving endpoint cannot fill memory.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// An OpenAI-compatible endpoint's streamed chat completions.
pub(crate) struct OpenAiStreams {
    /// An HTTP client, with its own pool of connections, per thread that calls the
    /// endpoint. A pooled connection is read by a task on the runtime that opened it, so
    /// with one client shared by threads that each run a runtime of their own
    /// ([`crate::startup::Runtimes::PerCore`]) a reply could be read on another thread than
    /// the one relaying it, and every chunk would cross between them.
    clients: thread_local::ThreadLocal<reqwest::Client>,
    /// `{base}chat/completions`.
    url: String,
    key: Arc<SecretString>,
    /// Bounds the wait for the answer's status line and headers.
    header_timeout: Duration,
}

impl OpenAiStreams {
    /// Streams of the endpoint at `base_url` (ending in `/`), authenticated with `key` as a
    /// bearer token (no `Authorization` header when it is empty, for local servers).
    /// Errors: the HTTP client cannot be built (TLS set-up).
    pub(crate) fn new(
        base_url: &str,
        key: Arc<SecretString>,
        header_timeout: Duration,
    ) -> anyhow::Result<Self> {
        let clients = thread_local::ThreadLocal::new();
        clients
            .get_or_try(new_client)
            .map_err(|e| anyhow::anyhow!("building the model client failed: {e}"))?;
        Ok(Self {
            clients,
            url: format!("{base_url}chat/completions"),
            key,
            header_timeout,
        })
    }

    /// Sends the request for `model` and `prompt` and answers its events once the answer's
    /// headers say it succeeded.
    ///
    /// Errors: a status other than 2xx, with the provider's complaint
    /// ([`ProviderErrorKind::Status`]); no headers within the header timeout
    /// ([`ProviderErrorKind::Timeout`]); a transport failure
    /// ([`ProviderErrorKind::Connection`]). Later failures come as items of the stream.
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
        let client = match self.clients.get_or_try(new_client) {
            Ok(client) => client,
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
        let response = match tokio::time::timeout(self.header_timeout, request.send()).await {
            Err(_) => return Err(fail(ProviderErrorKind::Timeout, "timed out".into(), None)),
            Ok(Err(e)) => {
                let (kind, detail) = transport(&e);
                return Err(fail(kind, detail, Some(&e)));
            }
            Ok(Ok(response)) => response,
        };
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
        Ok(Reading::new(response.bytes_stream().eventsource())
            .map(move |item| {
                item.map_err(|(kind, detail)| shown_error(Flavor::OpenAi, &key, kind, detail, None))
            })
            .boxed())
    }
}

/// An HTTP client for the endpoint (reqwest's defaults: connections kept alive and reused,
/// TLS through rustls). Errors: the TLS set-up failed.
fn new_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder().build()
}

/// The start of a failed answer's body, as text.
async fn error_body(mut response: reqwest::Response) -> String {
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

/// The body of `POST /chat/completions` for a streamed reply: the fields `genai` sends for
/// the same options (model, system message first, turns, `stream`, usage requested, then
/// the sampling settings that are set).
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
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

impl<'a> RequestBody<'a> {
    fn new(model: &'a str, system: &'a str, prompt: &'a Prompt) -> Self {
        let mut messages = Vec::with_capacity(prompt.turns.len() + 1);
        if !system.trim().is_empty() {
            messages.push(Message {
                role: "system",
                content: system,
            });
        }
        messages.extend(prompt.turns.iter().map(|t| Message {
            role: match t.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            },
            content: &t.content,
        }));
        let sampling = &prompt.sampling;
        let (max_tokens, max_completion_tokens) = if needs_max_completion_tokens(model) {
            (None, sampling.max_tokens)
        } else {
            (sampling.max_tokens, None)
        };
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
        }
    }
}

/// Whether `model` takes its token limit as `max_completion_tokens` and refuses
/// `max_tokens`: OpenAI's reasoning models (`o1`, `o3`, `o4`) and `gpt-5`/`gpt-6`
/// (OpenAI API reference, "Create chat completion": `max_tokens` "is not compatible with
/// o-series models").
fn needs_max_completion_tokens(model: &str) -> bool {
    ["gpt-5", "gpt-6", "o1", "o3", "o4"]
        .iter()
        .any(|p| model.starts_with(p))
}

/// One chunk event's data, borrowing from its text. Every field may be absent: servers that
/// speak the protocol (vLLM, llama.cpp, Ollama, LM Studio) differ in what they send.
#[derive(Deserialize)]
struct ChunkData<'a> {
    /// The first choice; the service asks for one.
    #[serde(borrow, default, deserialize_with = "first_choice")]
    choices: Option<Choice<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    /// An error reported inside the stream.
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

/// `delta.content`: a string, or (Mistral's reasoning models) an array of typed parts, of
/// which the `text` parts are the reply.
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

/// A typed part of an array `delta.content`.
#[derive(Deserialize)]
struct Part<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
}

/// The first element of `choices`, the others skipped; `null` or `[]` is none.
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

/// A failure of the stream before it is shown: its kind and what may be shown of it.
type Failure = (ProviderErrorKind, String);

/// The events of a reply from its server-sent events: a [`Event::Delta`] per non-empty
/// content, then one [`Event::End`] with the usage and finish reason seen (at `[DONE]`, or
/// when the body ends without it), then the end. A failure ends the stream after it.
struct Reading<S> {
    events: S,
    usage: Option<Usage>,
    finish: FinishReason,
    ended: bool,
}

impl<S> Reading<S> {
    fn new(events: S) -> Self {
        Self {
            events,
            usage: None,
            finish: FinishReason::Stop,
            ended: false,
        }
    }

    /// The end of the reply, once.
    fn end(&mut self) -> Option<Result<Event, Failure>> {
        if self.ended {
            return None;
        }
        self.ended = true;
        Some(Ok(Event::End(self.usage.take(), self.finish)))
    }

    /// Reads one event's data: its delta, if any, or a failure.
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
        if let Some(reason) = choice.finish_reason {
            self.finish = match reason.as_ref() {
                "length" => FinishReason::Length,
                "content_filter" => FinishReason::ContentFilter,
                _ => FinishReason::Stop,
            };
        }
        Ok(choice
            .delta
            .and_then(|d| d.content)
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
    use crate::llm::{Sampling, Turn};

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
                Turn {
                    role: Role::User,
                    content: "hi".into(),
                },
                Turn {
                    role: Role::Assistant,
                    content: "hello".into(),
                },
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
}
