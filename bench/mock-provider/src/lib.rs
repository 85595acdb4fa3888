//! A mock model provider for integration tests and benchmarks.
//!
//! It speaks the real wire formats of two provider APIs on one HTTP server:
//!
//! - the OpenAI Chat Completions API (`POST /v1/chat/completions`), non-streaming JSON and
//!   streaming server-sent events with `data: [DONE]` and optional usage chunk;
//! - the Anthropic Messages API (`POST /v1/messages`), non-streaming JSON and streaming
//!   server-sent events (`message_start`, `content_block_start`, `ping`,
//!   `content_block_delta`…, `content_block_stop`, `message_delta`, `message_stop`) with token
//!   usage; it requires the `anthropic-version` header and `max_tokens`, as the real API does;
//! - `GET /v1/models` in either provider's shape (Anthropic when the request carries an
//!   `anthropic-version` or `x-api-key` header, OpenAI otherwise);
//! - the OpenAI Embeddings API (`POST /v1/embeddings`, a string or an array of strings),
//!   answering deterministic vectors ([`embedding`]: a hashed bag of words in
//!   [`EMBEDDING_DIMENSIONS`] dimensions, unit length, with a few synonym groups folded so
//!   that a text can be near a query it shares no word with). Requests are counted
//!   ([`MockProvider::embedding_requests`]) and can be made to fail
//!   ([`MockProvider::set_embeddings_status`]).
//!
//! Clients are pointed at [`MockProvider::base_url`] (`http://127.0.0.1:PORT/v1/`), to which
//! they append `chat/completions`, `messages`, `models` or `embeddings`.
//!
//! # Identity providers
//!
//! The [`identity`] module adds mock sign-in providers on their own ports: [`MockIdp`] speaks
//! GitHub's OAuth 2.0 web flow and REST `/user` API ([`IdpKind::Github`]) or OpenID Connect
//! shaped like Google or Microsoft, with PKCE, single-use codes, RS256 ID tokens and switchable
//! defects ([`IdTokenTamper`]).
//!
//! # Chat platforms
//!
//! The [`channels`] module mocks the chat platforms of live integrations: [`MockTelegram`]
//! (Bot API `setWebhook`, `sendMessage`, ...; delivers updates to the registered webhook with
//! its secret token) and [`MockSlack`] (`chat.postMessage`; sends signed Events API requests).
//!
//! # Replies
//!
//! The reply is [`MockConfig::reply`] when set, otherwise `Echo: ` followed by the text of the
//! last user message. Streamed replies are split into words that keep their leading
//! whitespace (`"Echo:"`, `" hello"`, `" world"`), so the chunks concatenate to the exact reply.
//! Usage is deterministic: the prompt token count is the number of whitespace-separated words
//! across all input messages (the system prompt included), the completion token count is the
//! number of chunks. A request's `max_tokens` (or `max_completion_tokens`) below that count
//! truncates the reply, which then ends with `length` / `max_tokens`. Any model name is accepted
//! and echoed back.
//!
//! # Control markers
//!
//! Markers inside the last user message (tool results aside) steer a single request; they
//! are removed from the echoed text:
//!
//! | marker | effect |
//! |---|---|
//! | `[[status:429]]` | answer that status (any 400–599) with the provider's error JSON, message `mock failure 429` |
//! | `[[status:503x2]]` | the first 2 requests carrying this exact marker fail with 503, later ones succeed |
//! | `[[cut:3]]` | streaming: send 3 token chunks, then drop the connection; non-streaming: drop it without answering |
//! | `[[pause:MS]]` | streaming: wait MS milliseconds after the first token chunk |
//! | `[[delay:MS]]` | wait MS milliseconds before answering at all |
//! | `[[tokens:N]]` | reply with exactly the N words `w1 w2 … wN` (at most [`MAX_TOKENS_MARKER`]) |
//! | `[[usage:none]]` | OpenAI format: report no token usage, as some OpenAI-compatible servers do (no `usage` in the JSON reply, no usage chunk in a stream) |
//! | `[[call:NAME:ARGS]]` | when the request offers tools and ends with this user message, answer with a call of tool NAME with arguments ARGS (a JSON object, without `]]` in it) instead of text; several markers are parallel calls of one reply, in order (see [Tool calls](#tool-calls)) |
//! | `[[call-always:NAME:ARGS]]` | like `call`, but on every request that offers tools, after tool results too (to test limits on tool rounds) |
//!
//! # Tool calls
//!
//! A request offers tools with a non-empty `tools` array (OpenAI
//! `[{type: "function", function: {name, description?, parameters?}}]`; Anthropic
//! `[{name, description?, input_schema}]`). A `tool_choice` of none (OpenAI `"none"`,
//! Anthropic `{"type": "none"}`) forbids calls. A forced choice is obeyed like the real APIs
//! do, after tool results too: a named one (OpenAI `{type: "function", function: {name}}`,
//! Anthropic `{type: "tool", name}`) keeps only the marker calls of that tool, and
//! `required` (Anthropic `any`) or a named choice without a marker call left calls the
//! named tool, or the first offered, with arguments `{}`. The calls a `[[call:…]]` marker
//! asks for are answered
//!
//! - OpenAI: `message.tool_calls: [{id: "call_N", type: "function", function: {name,
//!   arguments}}]` with `content: null`, or streamed as `delta.tool_calls` fragments — the
//!   first of each call with its `index`, `id`, `type`, `name` and empty `arguments`, then
//!   its arguments in at least two pieces —, and `finish_reason: "tool_calls"`;
//! - Anthropic: `tool_use` blocks `{id: "toolu_N", name, input}`, or streamed as a
//!   `content_block_start` of type `tool_use` per call followed by `input_json_delta`
//!   pieces of its input (at least two), and `stop_reason: "tool_use"`.
//!
//! Call ids are unique within the process. The completion token count of such a reply is
//! one per call plus one per piece of its arguments (streamed or not); `max_tokens` does not
//! cut calls, `[[cut:N]]` counts their frames.
//!
//! When the request ends with tool results (OpenAI: its last messages are `role: "tool"`
//! messages; Anthropic: its last message is a user message of `tool_result` blocks), the reply
//! is `Tool results: ` followed by the content of each result of that last round, joined
//! with ` | ` (an Anthropic `content` array gives the text of its blocks), streamed word by
//! word like any reply — unless a `call-always` marker calls again.
//!
//! The history is checked as the real APIs check it, with their 400 answers: OpenAI tool
//! messages must carry a `tool_call_id` answering a call of the assistant message before
//! them, every call must be answered, `arguments` must be a string, `tool_choice` needs
//! `tools`; an Anthropic `tool_use` (with an object `input`) must be answered by a
//! `tool_result` with its id in the next message, and every `tool_result` must answer a
//! `tool_use` of the message before it.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use mock_provider::{MockConfig, MockProvider};
//!
//! let mock = MockProvider::start(MockConfig::default()).await?;
//! let base_url = mock.base_url(); // "http://127.0.0.1:PORT/v1/"
//! // ... point a client at base_url ...
//! assert_eq!(mock.open_streams(), 0);
//! # Ok(()) }
//! ```

mod anthropic;
pub mod channels;
mod common;
mod embeddings;
pub mod identity;
mod markers;
mod openai;
mod server;
mod stream;
mod tools;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

pub use channels::{MockSlack, MockTelegram};
pub use embeddings::{embedding, EMBEDDING_DIMENSIONS};
pub use identity::{AuthorizeRequest, IdTokenTamper, IdpKind, MockIdentity, MockIdp};
pub use markers::MAX_TOKENS_MARKER;

/// Configuration of a [`MockProvider`].
#[derive(Debug, Clone)]
pub struct MockConfig {
    /// The API key clients must present (`Authorization: Bearer KEY` for OpenAI requests,
    /// `x-api-key: KEY` for Anthropic ones). `None` accepts any request, with or without a key.
    pub api_key: Option<String>,
    /// Waited before the first byte of every answer (error answers included).
    pub delay: Duration,
    /// Waited between two streamed token chunks.
    pub token_interval: Duration,
    /// The models listed by `GET /v1/models` in the OpenAI shape.
    pub models_openai: Vec<String>,
    /// The models listed by `GET /v1/models` in the Anthropic shape.
    pub models_anthropic: Vec<String>,
    /// A fixed reply text; `None` echoes the last user message as `Echo: TEXT`.
    pub reply: Option<String>,
    /// Whether requests are kept for [`MockProvider::requests`]. Long benchmark runs turn this
    /// off so that memory stays flat.
    pub record_requests: bool,
    /// Serve over TLS ([`MockTls`]) instead of plain HTTP/1.1.
    pub tls: Option<MockTls>,
}

/// TLS for a [`MockProvider`]: the certificate of `tls/cert.pem` in this crate (for
/// `127.0.0.1` and `localhost`, issued by the test authority [`TEST_CA_PEM`], whose key was
/// not kept), offering HTTP/2 and HTTP/1.1 by ALPN like a hosted provider, or HTTP/1.1 only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MockTls {
    /// Whether `h2` is offered besides `http/1.1`.
    pub http2: bool,
}

/// The test certificate authority (PEM) that issued the TLS certificate of [`MockTls`]:
/// clients trust it to reach the mock over `https://`. For tests only.
pub const TEST_CA_PEM: &str = include_str!("../tls/ca.pem");

impl Default for MockConfig {
    fn default() -> Self {
        Self {
            api_key: None,
            delay: Duration::ZERO,
            token_interval: Duration::ZERO,
            models_openai: vec!["gpt-4o-mini".to_owned(), "gpt-4o".to_owned()],
            models_anthropic: vec![
                "claude-sonnet-4-5".to_owned(),
                "claude-haiku-4-5".to_owned(),
            ],
            reply: None,
            record_requests: true,
            tls: None,
        }
    }
}

/// One HTTP request received by the mock, as recorded before it was answered.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The HTTP method, e.g. `POST`.
    pub method: String,
    /// The request path without the query string, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The request headers in the order received; names are lower case.
    pub headers: Vec<(String, String)>,
    /// The JSON body; `Null` when the body is empty, a JSON string holding the raw text when
    /// it is not valid JSON.
    pub body: serde_json::Value,
}

impl RecordedRequest {
    /// The value of the first header named `name` (case-insensitive), if any.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// A running mock provider. The server stops when this value is dropped.
#[derive(Debug)]
pub struct MockProvider {
    /// The address the server listens on.
    pub addr: SocketAddr,
    shared: Arc<server::Shared>,
    task: JoinHandle<()>,
}

impl MockProvider {
    /// Starts a mock provider on `127.0.0.1` with a port chosen by the system.
    pub async fn start(config: MockConfig) -> anyhow::Result<Self> {
        Self::start_on(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), config).await
    }

    /// Starts a mock provider listening on `addr` (port 0 lets the system choose).
    pub async fn start_on(addr: SocketAddr, config: MockConfig) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let tls = config.tls.map(server::acceptor).transpose()?;
        let shared = Arc::new(server::Shared::new(config));
        let task = tokio::spawn(server::serve(listener, tls, Arc::clone(&shared)));
        Ok(Self { addr, shared, task })
    }

    /// The base URL clients append API paths to: `http://127.0.0.1:PORT/v1/` (`https://`
    /// with [`MockConfig::tls`]).
    ///
    /// When listening on an unspecified address (`0.0.0.0` or `::`), the loopback address of
    /// the same family is used.
    pub fn base_url(&self) -> String {
        let ip = match self.addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let scheme = match self.shared.config.tls {
            Some(_) => "https",
            None => "http",
        };
        format!("{scheme}://{}/v1/", SocketAddr::new(ip, self.addr.port()))
    }

    /// Every request received so far, in order of arrival (empty when
    /// [`MockConfig::record_requests`] is off).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        server::lock(&self.shared.requests).clone()
    }

    /// Forgets the requests recorded so far.
    pub fn clear_requests(&self) {
        server::lock(&self.shared.requests).clear();
    }

    /// Connections accepted so far, and how many of them speak HTTP/2.
    pub fn connections(&self) -> (usize, usize) {
        (
            self.shared.connections.load(Ordering::SeqCst),
            self.shared.http2_connections.load(Ordering::SeqCst),
        )
    }

    /// The number of streamed answers currently being written.
    pub fn open_streams(&self) -> usize {
        self.shared.open_streams.load(Ordering::SeqCst)
    }

    /// The number of streamed answers whose client went away before the end.
    ///
    /// Streams cut on purpose by a `[[cut:N]]` marker are not counted.
    pub fn cancelled_streams(&self) -> usize {
        self.shared.cancelled_streams.load(Ordering::SeqCst)
    }

    /// The number of streamed answers written to the end.
    pub fn completed_streams(&self) -> usize {
        self.shared.completed_streams.load(Ordering::SeqCst)
    }

    /// The number of `POST /v1/embeddings` requests received so far, failed ones included
    /// (counted even when [`MockConfig::record_requests`] is off).
    pub fn embedding_requests(&self) -> usize {
        self.shared.embedding_requests.load(Ordering::SeqCst)
    }

    /// Makes every later embeddings request fail with `status` (400–599, with the
    /// provider's error JSON, message `mock failure STATUS`), or answer normally again
    /// with `None` — an embedding endpoint that goes down and comes back.
    pub fn set_embeddings_status(&self, status: Option<u16>) {
        self.shared
            .embeddings_status
            .store(status.unwrap_or(0), Ordering::SeqCst);
    }
}

impl Drop for MockProvider {
    fn drop(&mut self) {
        self.task.abort();
    }
}
