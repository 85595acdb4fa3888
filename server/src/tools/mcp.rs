//! The MCP client: an MCP server integration's tools, listed and called over the Streamable
//! HTTP transport of MCP 2025-06-18
//! (<https://modelcontextprotocol.io/specification/2025-06-18/basic/transports>) with `rmcp`.
//! Requests follow the outbound policy ([`crate::outbound`]; redirects are not followed,
//! answers are capped at [`MAX_RESPONSE_BYTES`]). Sessions and tool lists are cached per
//! instance ([`McpClients`]): at most [`MAX_SESSIONS`], closed after [`IDLE_TIMEOUT`], tool
//! lists kept until `notifications/tools/list_changed` or [`TOOLS_TTL`]; a failed session
//! is replaced and the request retried once; a changed integration gets a new session.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use app::api::McpServerTool;
use rmcp::{
    model::{
        CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
        Implementation, ProtocolVersion, ResourceContents,
    },
    service::{NotificationContext, RunningService},
    transport::{
        streamable_http_client::StreamableHttpClientTransportConfig, StreamableHttpClientTransport,
    },
    ClientHandler, RoleClient, ServiceError, ServiceExt,
};
use serde_json::{Map, Value};
use url::Url;

use crate::{
    crypto::SecretBox,
    domain::ProviderCode,
    ids::IntegrationId,
    outbound::{check_url, GuardedResolver, NetPolicy, Purpose},
    store::integrations::IntegrationRecord,
};

/// Open sessions one instance keeps; opening one more closes the least recently used.
pub const MAX_SESSIONS: usize = 64;
/// A session unused this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// The longest a session's tool list is kept without a `list_changed` notification.
pub const TOOLS_TTL: Duration = Duration::from_secs(5 * 60);
/// The longest a session takes to start (connection and `initialize`) or to list its tools.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// The largest answer (a JSON body or one server-sent event) accepted from a server.
pub const MAX_RESPONSE_BYTES: usize = 2 * 1024 * 1024;
/// The MCP version the client asks for; servers may answer with an older one they support.
pub const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion::V_2025_06_18;

/// Why an MCP server could not be used. The texts are shown to the integration's owner.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// The integration's stored credentials are not an MCP server's (or do not open).
    #[error("the integration's settings cannot be used: {0}")]
    Settings(String),
    /// No session could be started or kept: connection, policy, HTTP or protocol failure.
    #[error("the MCP server could not be reached: {0}")]
    Unreachable(String),
    /// The server answered the request with an error.
    #[error("the MCP server answered with an error: {0}")]
    Server(String),
}

/// Where an MCP server is and how to authenticate: an `mcp` integration's credentials in clear.
#[derive(Clone)]
pub struct McpServer {
    pub integration_id: IntegrationId,
    /// Changes with the integration's `updatedAt`; a session of another version is replaced.
    pub version: i64,
    /// The Streamable HTTP endpoint.
    pub url: Url,
    /// The `Authorization` value: the stored one, or `Bearer <token>` for a bare token.
    pub authorization: Option<String>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("integration_id", &self.integration_id)
            .field("url", &self.url.as_str())
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "••••"),
            )
            .finish()
    }
}

impl McpServer {
    /// The server of an `mcp` integration. Errors: [`McpError::Settings`] (wrong provider,
    /// credentials, URL).
    pub fn of(secrets: &SecretBox, record: &IntegrationRecord) -> Result<Self, McpError> {
        if record.provider_code != ProviderCode::Mcp {
            return Err(McpError::Settings(
                "it is not an MCP server integration".into(),
            ));
        }
        let credentials = secrets
            .open_credentials(&record.user_id, &record.id, &record.credentials_sealed)
            .map_err(|e| McpError::Settings(format!("its credentials do not open: {e}")))?;
        let url = credentials
            .get("url")
            .and_then(Value::as_str)
            .and_then(|u| Url::parse(u).ok())
            .ok_or_else(|| McpError::Settings("its url is missing or invalid".into()))?;
        let authorization = credentials
            .get("authorization")
            .and_then(Value::as_str)
            .map(authorization_value);
        Ok(Self {
            integration_id: record.id.clone(),
            version: record.updated_at.timestamp_micros(),
            url,
            authorization,
        })
    }
}

/// An `Authorization` value: as given when it names a scheme, else a bearer token (RFC 6750 § 2.1).
fn authorization_value(value: &str) -> String {
    let value = value.trim();
    if value.contains(' ') {
        value.to_string()
    } else {
        format!("Bearer {value}")
    }
}

/// The MCP sessions of one instance, shared by every request. Cheap to clone.
#[derive(Clone)]
pub struct McpClients {
    inner: Arc<Inner>,
}

struct Inner {
    http: genai_reqwest::Client,
    policy: NetPolicy,
    slots: Mutex<HashMap<IntegrationId, Arc<Slot>>>,
}

/// One integration's session place; its lock shares one handshake between concurrent requests.
struct Slot {
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    last_used: Mutex<Instant>,
}

struct Session {
    version: i64,
    service: RunningService<RoleClient, Listener>,
    stale: Arc<AtomicBool>,
    tools: Mutex<Option<(Instant, Arc<Vec<McpServerTool>>)>>,
}

/// The client side of a session; marks the tool list stale when the server says it changed.
#[derive(Clone)]
struct Listener {
    stale: Arc<AtomicBool>,
}

impl ClientHandler for Listener {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.stale.store(true, Ordering::Release);
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("agentchat", env!("CARGO_PKG_VERSION")).with_title("AgentChat"),
        )
        .with_protocol_version(PROTOCOL_VERSION)
    }
}

struct Resolver(GuardedResolver);

impl genai_reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: genai_reqwest::dns::Name) -> genai_reqwest::dns::Resolving {
        let resolver = self.0.clone();
        Box::pin(async move {
            let ips = resolver.resolve_host(name.as_str()).await?;
            let addrs: genai_reqwest::dns::Addrs =
                Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

impl McpClients {
    /// The sessions of an instance following `policy`. Errors: no HTTP client (no TLS roots).
    pub fn new(policy: &NetPolicy) -> anyhow::Result<Self> {
        let http = genai_reqwest::Client::builder()
            .user_agent(Purpose::Tools.user_agent())
            .redirect(genai_reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(Resolver(GuardedResolver::new(policy))))
            .connect_timeout(CONNECT_TIMEOUT)
            .build()?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                policy: policy.clone(),
                slots: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The server's tools: cached, or fresh when changed, stale or on a new session.
    /// Errors: [`McpError::Unreachable`] (after one retry), [`McpError::Server`].
    pub async fn tools(&self, server: &McpServer) -> Result<Arc<Vec<McpServerTool>>, McpError> {
        let mut retried = false;
        loop {
            let session = self.session(server).await?;
            if let Some(tools) = session.cached_tools() {
                return Ok(tools);
            }
            let listed =
                tokio::time::timeout(CONNECT_TIMEOUT, session.service.peer().list_all_tools())
                    .await;
            match listed {
                Ok(Ok(tools)) => {
                    let tools: Arc<Vec<McpServerTool>> =
                        Arc::new(tools.into_iter().map(tool_view).collect());
                    // A notification that arrived while listing leaves the list stale.
                    *lock(&session.tools) = Some((Instant::now(), tools.clone()));
                    return Ok(tools);
                }
                Ok(Err(ServiceError::McpError(e))) => {
                    return Err(McpError::Server(e.message.into()))
                }
                Ok(Err(e)) if !retried => {
                    tracing::info!(integration.id = %server.integration_id, error = %e, "an MCP session failed; opening a new one");
                    self.forget(server, &session).await;
                    retried = true;
                }
                Ok(Err(e)) => return Err(McpError::Unreachable(describe(&e))),
                Err(_) => {
                    self.forget(server, &session).await;
                    return Err(McpError::Unreachable(format!(
                        "it did not list its tools within {} s",
                        CONNECT_TIMEOUT.as_secs()
                    )));
                }
            }
        }
    }

    /// Calls tool `name`; answers the result's text content (other content as a short note) or its
    /// structured content. The caller bounds the time. Errors: [`McpError::Server`] (error or
    /// `isError`), [`McpError::Unreachable`] (after one retry on a new session).
    pub async fn call(
        &self,
        server: &McpServer,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<String, McpError> {
        let mut retried = false;
        loop {
            let session = self.session(server).await?;
            let params =
                CallToolRequestParams::new(name.to_string()).with_arguments(arguments.clone());
            match session.service.peer().call_tool(params).await {
                Ok(result) => return render(result),
                Err(ServiceError::McpError(e)) => return Err(McpError::Server(e.message.into())),
                Err(e) if !retried => {
                    tracing::info!(integration.id = %server.integration_id, error = %e, "an MCP session failed; opening a new one");
                    self.forget(server, &session).await;
                    retried = true;
                }
                Err(e) => return Err(McpError::Unreachable(describe(&e))),
            }
        }
    }

    /// Open sessions (for tests and metrics).
    pub fn open_sessions(&self) -> usize {
        lock(&self.inner.slots).len()
    }

    /// The server's open session, started anew when closed, idle or of an older version.
    async fn session(&self, server: &McpServer) -> Result<Arc<Session>, McpError> {
        let slot = self.slot(&server.integration_id);
        let mut current = slot.session.lock().await;
        if let Some(session) = current.as_ref() {
            if session.version == server.version && !session.service.is_closed() {
                return Ok(session.clone());
            }
        }
        *current = None;
        let session = Arc::new(self.connect(server).await?);
        *current = Some(session.clone());
        Ok(session)
    }

    /// The slot of `id`; closes idle sessions and the least recently used past [`MAX_SESSIONS`].
    fn slot(&self, id: &IntegrationId) -> Arc<Slot> {
        let now = Instant::now();
        let mut slots = lock(&self.inner.slots);
        slots.retain(|key, slot| {
            key == id || now.duration_since(*lock(&slot.last_used)) < IDLE_TIMEOUT
        });
        let slot = slots
            .entry(id.clone())
            .or_insert_with(|| {
                Arc::new(Slot {
                    session: tokio::sync::Mutex::new(None),
                    last_used: Mutex::new(now),
                })
            })
            .clone();
        *lock(&slot.last_used) = now;
        while slots.len() > MAX_SESSIONS {
            let oldest = slots
                .iter()
                .filter(|(key, _)| *key != id)
                .min_by_key(|(_, slot)| *lock(&slot.last_used))
                .map(|(key, _)| key.clone());
            match oldest {
                Some(key) => {
                    slots.remove(&key);
                }
                None => break,
            }
        }
        // Removed slots close their sessions when the last request using them ends.
        slot
    }

    async fn forget(&self, server: &McpServer, failed: &Arc<Session>) {
        let slot = self.slot(&server.integration_id);
        let mut current = slot.session.lock().await;
        if current.as_ref().is_some_and(|s| Arc::ptr_eq(s, failed)) {
            *current = None;
        }
    }

    /// Starts a session: URL judged by the policy, then `initialize` within [`CONNECT_TIMEOUT`].
    async fn connect(&self, server: &McpServer) -> Result<Session, McpError> {
        check_url(&server.url, &self.inner.policy)
            .await
            .map_err(|e| McpError::Unreachable(e.to_string()))?;
        let mut headers = HashMap::new();
        if let Some(value) = &server.authorization {
            let mut value = http::HeaderValue::from_str(value).map_err(|_| {
                McpError::Settings("its authorization is not a valid header value".into())
            })?;
            value.set_sensitive(true);
            headers.insert(http::header::AUTHORIZATION, value);
        }
        let config = StreamableHttpClientTransportConfig::with_uri(server.url.as_str())
            .custom_headers(headers)
            .max_json_response_size(MAX_RESPONSE_BYTES)
            .max_sse_event_size(MAX_RESPONSE_BYTES)
            // A new session is this module's to open, with a fresh tool list.
            .reinit_on_expired_session(false);
        let transport = StreamableHttpClientTransport::with_client(self.inner.http.clone(), config);
        let stale = Arc::new(AtomicBool::new(false));
        let listener = Listener {
            stale: stale.clone(),
        };
        let service = match tokio::time::timeout(CONNECT_TIMEOUT, listener.serve(transport)).await {
            Ok(Ok(service)) => service,
            Ok(Err(e)) => return Err(McpError::Unreachable(describe(&e))),
            Err(_) => {
                return Err(McpError::Unreachable(format!(
                    "it did not answer the MCP handshake within {} s",
                    CONNECT_TIMEOUT.as_secs()
                )))
            }
        };
        Ok(Session {
            version: server.version,
            service,
            stale,
            tools: Mutex::new(None),
        })
    }
}

impl Session {
    fn cached_tools(&self) -> Option<Arc<Vec<McpServerTool>>> {
        if self.stale.swap(false, Ordering::AcqRel) {
            *lock(&self.tools) = None;
            return None;
        }
        lock(&self.tools)
            .as_ref()
            .filter(|(at, _)| at.elapsed() < TOOLS_TTL)
            .map(|(_, tools)| tools.clone())
    }
}

/// An `rmcp` transport or handshake error as a sentence for the owner.
fn describe(error: &dyn std::fmt::Display) -> String {
    let text = error.to_string();
    const MARK: &str = "] error: ";
    let detail = match text.find(MARK) {
        Some(i) => &text[i + MARK.len()..],
        None => text.as_str(),
    };
    let detail = detail.trim_end_matches(", when send initialize request");
    if detail.starts_with("Auth required") || detail.starts_with("Insufficient scope") {
        "it refused the authorization (HTTP 401 or 403): check the integration's authorization"
            .into()
    } else {
        detail.to_string()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn tool_view(tool: rmcp::model::Tool) -> McpServerTool {
    McpServerTool {
        name: tool.name.into_owned(),
        description: tool.description.map(|d| d.into_owned()).unwrap_or_default(),
        input_schema: Value::Object((*tool.input_schema).clone()),
    }
}

fn render(result: CallToolResult) -> Result<String, McpError> {
    let mut parts: Vec<String> = result.content.iter().map(content_text).collect();
    if parts.is_empty() {
        if let Some(structured) = &result.structured_content {
            parts.push(structured.to_string());
        }
    }
    let text = parts.join("\n");
    if result.is_error == Some(true) {
        return Err(McpError::Server(if text.is_empty() {
            "the tool failed without saying why".into()
        } else {
            text
        }));
    }
    Ok(text)
}

fn content_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!(
            "[an image ({}) was returned; it is not shown to the model]",
            image.mime_type
        ),
        ContentBlock::Audio(audio) => format!(
            "[audio ({}) was returned; it is not shown to the model]",
            audio.mime_type
        ),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents { uri, .. } => {
                format!("[binary resource {uri}; it is not shown to the model]")
            }
            _ => "[a resource of a kind this client does not read]".into(),
        },
        ContentBlock::ResourceLink(link) => format!("[resource link: {} {}]", link.uri, link.name),
        #[allow(unreachable_patterns)]
        _ => "[content of a kind this client does not read]".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_names_a_scheme_or_is_a_bearer_token() {
        assert_eq!(authorization_value("abc123"), "Bearer abc123");
        assert_eq!(
            authorization_value(" Basic dXNlcjpwdw== "),
            "Basic dXNlcjpwdw=="
        );
        assert_eq!(authorization_value("Bearer t"), "Bearer t");
    }

    #[test]
    fn results_become_text_and_errors_stay_errors() {
        let ok = CallToolResult::success(vec![
            ContentBlock::text("first"),
            ContentBlock::image("aGk=", "image/png"),
        ]);
        assert_eq!(
            render(ok).unwrap(),
            "first\n[an image (image/png) was returned; it is not shown to the model]"
        );
        let failed = CallToolResult::error(vec![ContentBlock::text("no such city")]);
        assert_eq!(
            render(failed).unwrap_err(),
            McpError::Server("no such city".into())
        );
        let structured = CallToolResult::structured(serde_json::json!({"sum": 5}));
        assert!(render(structured).unwrap().contains("\"sum\":5"));
    }

    #[tokio::test]
    async fn the_session_cache_is_bounded() {
        let clients = McpClients::new(&NetPolicy::strict()).unwrap();
        for i in 0..MAX_SESSIONS + 10 {
            clients.slot(&IntegrationId::from(format!("i{i}").as_str()));
        }
        assert_eq!(clients.open_sessions(), MAX_SESSIONS);
        // The most recent ones stay.
        let slots = lock(&clients.inner.slots);
        assert!(slots.contains_key(&IntegrationId::from(
            format!("i{}", MAX_SESSIONS + 9).as_str()
        )));
        assert!(!slots.contains_key(&IntegrationId::from("i0")));
    }

    #[tokio::test]
    async fn private_servers_are_refused_before_any_request() {
        let clients = McpClients::new(&NetPolicy::strict()).unwrap();
        let server = McpServer {
            integration_id: "i".into(),
            version: 1,
            url: Url::parse("http://127.0.0.1:9/mcp").unwrap(),
            authorization: None,
        };
        let e = clients.tools(&server).await.unwrap_err();
        assert!(matches!(e, McpError::Unreachable(_)), "{e:?}");
        assert!(e.to_string().contains("private"), "{e}");
    }
}
