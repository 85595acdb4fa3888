//! Remote providers through the `genai` client library: any OpenAI-compatible endpoint
//! (OpenAI, Ollama, vLLM, llama.cpp server, LM Studio, OpenRouter, Groq) and the Anthropic
//! Messages API. Both stream, and both report token usage.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use futures::StreamExt;
use genai::{
    adapter::AdapterKind,
    chat::{ChatMessage, ChatOptions, ChatRequest, ChatStreamEvent},
    resolver::{AuthData, Endpoint, ProviderConfig},
    ModelIden, ServiceTarget,
};
use secrecy::{ExposeSecret, SecretString};

use super::{Event, EventStream, Prompt, Provider, ProviderError, ProviderErrorKind, Role, Usage};

/// Which wire protocol a remote provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// OpenAI Chat Completions.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

/// A configured remote provider.
pub struct RemoteProvider {
    flavor: Flavor,
    timeout: Duration,
    base_url: String,
    /// Shared with the streams of replies, which mask it in the errors they report.
    key: Arc<SecretString>,
    client: genai::Client,
}

impl RemoteProvider {
    /// A provider at `base_url` (e.g. `https://api.openai.com/v1/`) with `key`; `timeout`
    /// bounds the wait for the first byte and every silence inside a reply.
    /// Errors: the HTTP client cannot be built (TLS set-up).
    pub fn new(
        flavor: Flavor,
        base_url: &str,
        key: SecretString,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let client = genai::Client::new()
            .map_err(|e| anyhow::anyhow!("building the model client failed: {e}"))?;
        Ok(Self {
            flavor,
            timeout,
            base_url: endpoint_url(base_url),
            key: Arc::new(key),
            client,
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

    /// Maps a `genai` error to a [`ProviderError`] ([`provider_error`]).
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

/// A `genai` error of the provider of `flavor` as a [`ProviderError`] whose message names
/// the provider's complaint, with `key` masked.
fn provider_error(flavor: Flavor, key: &SecretString, err: genai::Error) -> ProviderError {
    let (kind, detail) = classify(&err);
    let detail = mask(&detail, key);
    let status = match kind {
        ProviderErrorKind::Status(s) => format!(" ({s})"),
        _ => String::new(),
    };
    ProviderError {
        message: format!(
            "The model provider `{}` failed{status}: {detail}",
            flavor.code()
        ),
        kind,
    }
}

/// `base_url` trimmed and ending in `/`, as `genai` joins paths (`chat/completions`,
/// `embeddings`) onto it.
pub(crate) fn endpoint_url(base_url: &str) -> String {
    let mut url = base_url.trim().to_string();
    if !url.ends_with('/') {
        url.push('/');
    }
    url
}

/// The `genai` target for `model` of adapter `kind` at `base_url` (from [`endpoint_url`]),
/// authenticated with `key`.
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

/// `text` with every occurrence of `key` replaced by `[redacted]`; an empty key (an
/// endpoint that needs none) leaves the text as it is.
pub(crate) fn mask(text: &str, key: &SecretString) -> String {
    let key = key.expose_secret();
    if key.is_empty() {
        text.to_string()
    } else {
        text.replace(key, "[redacted]")
    }
}

/// The kind of a `genai` error and the provider's complaint; stream errors are unwrapped.
/// The complaint may quote the request, so callers mask their key in it.
pub(crate) fn classify(err: &genai::Error) -> (ProviderErrorKind, String) {
    match err {
        genai::Error::HttpError { status, body, .. } => {
            (ProviderErrorKind::Status(status.as_u16()), complaint(body))
        }
        genai::Error::WebStream { error, cause, .. } => {
            match error.downcast_ref::<genai::Error>() {
                Some(inner) => classify(inner),
                None => match err.status() {
                    Some(status) => (ProviderErrorKind::Status(status.as_u16()), complaint(cause)),
                    None => by_text(cause),
                },
            }
        }
        genai::Error::WebModelCall { webc_error, .. }
        | genai::Error::WebAdapterCall { webc_error, .. } => match webc_error {
            genai::webc::Error::ResponseFailedStatus { status, body, .. } => {
                (ProviderErrorKind::Status(status.as_u16()), complaint(body))
            }
            genai::webc::Error::Reqwest(e) if e.is_timeout() => {
                (ProviderErrorKind::Timeout, "timed out".into())
            }
            genai::webc::Error::Reqwest(e) if e.is_connect() => {
                (ProviderErrorKind::Connection, "could not connect".into())
            }
            genai::webc::Error::Reqwest(_) => (
                ProviderErrorKind::Connection,
                "the connection failed".into(),
            ),
            other => (ProviderErrorKind::Other, other.to_string()),
        },
        genai::Error::ChatResponse { body, .. } => {
            (ProviderErrorKind::Other, complaint(&body.to_string()))
        }
        other => match other.status() {
            Some(status) => (
                ProviderErrorKind::Status(status.as_u16()),
                other.to_string(),
            ),
            None => by_text(&other.to_string()),
        },
    }
}

/// Classifies an error known only by its text.
fn by_text(text: &str) -> (ProviderErrorKind, String) {
    let lower = text.to_lowercase();
    if lower.contains("timed out") || lower.contains("timeout") {
        (ProviderErrorKind::Timeout, "timed out".into())
    } else if lower.contains("connect") || lower.contains("stream") || lower.contains("closed") {
        (ProviderErrorKind::Connection, "the connection broke".into())
    } else {
        (
            ProviderErrorKind::Other,
            text.lines().next().unwrap_or_default().to_string(),
        )
    }
}

/// The provider's own message from an error body (`error.message` in both protocols),
/// shortened.
fn complaint(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/message").or_else(|| v.get("message")))
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| body.to_string());
    let mut message: String = message.chars().take(300).collect();
    if message.trim().is_empty() {
        message = "no details given".into();
    }
    message
}

/// The system text sent upstream: the agent's system prompt, then the retrieved passages
/// with their source markers.
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

#[async_trait]
impl Provider for RemoteProvider {
    fn code(&self) -> &'static str {
        self.flavor.code()
    }

    async fn models(&self) -> Result<Vec<String>, ProviderError> {
        let config = ProviderConfig::from_endpoint(Endpoint::from_owned(self.base_url.clone()))
            .with_auth(AuthData::Key(self.key.expose_secret().to_string()));
        self.client
            .all_model_names(self.kind(), config)
            .await
            .map_err(|e| self.error(e))
    }

    async fn stream(&self, model: &str, prompt: &Prompt) -> Result<EventStream, ProviderError> {
        let messages = prompt
            .turns
            .iter()
            .map(|t| match t.role {
                Role::User => ChatMessage::user(t.content.clone()),
                Role::Assistant => ChatMessage::assistant(t.content.clone()),
            })
            .collect();
        let mut request = ChatRequest::new(messages);
        let system = system_text(prompt);
        if !system.trim().is_empty() {
            request = request.with_system(system);
        }
        let options = ChatOptions::default()
            .with_capture_usage(true)
            .with_stream_header_timeout(self.timeout)
            .with_stream_read_timeout(self.timeout);
        let response = self
            .client
            .exec_chat_stream(self.target(model), request, Some(&options))
            .await
            .map_err(|e| self.error(e))?;
        // What mapping a failure needs, and no more: an open stream keeps it.
        let (flavor, key) = (self.flavor, Arc::clone(&self.key));
        let events = response.stream.filter_map(move |event| {
            let mapped = match event {
                Ok(ChatStreamEvent::Chunk(chunk)) if !chunk.content.is_empty() => {
                    Some(Ok(Event::Delta(chunk.content)))
                }
                Ok(ChatStreamEvent::End(end)) => {
                    Some(Ok(Event::End(end.captured_usage.map(|u| Usage {
                        prompt: u.prompt_tokens.unwrap_or(0).max(0) as u32,
                        completion: u.completion_tokens.unwrap_or(0).max(0) as u32,
                    }))))
                }
                Ok(_) => None,
                Err(e) => Some(Err(provider_error(flavor, &key, e))),
            };
            futures::future::ready(mapped)
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
}
