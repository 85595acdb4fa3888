//! The HTTP server: accept loop, routing, request recording, model listing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::HeaderMap;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::markers::StatusMarker;
use crate::stream::ConnectionKiller;
use crate::{anthropic, embeddings, openai, MockConfig, MockTls, RecordedRequest};

/// The largest request body accepted.
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// State shared by the server and its [`crate::MockProvider`] handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: MockConfig,
    pub requests: Mutex<Vec<RecordedRequest>>,
    pub open_streams: AtomicUsize,
    pub connections: AtomicUsize,
    pub http2_connections: AtomicUsize,
    pub cancelled_streams: AtomicUsize,
    pub completed_streams: AtomicUsize,
    /// `POST /v1/embeddings` requests received (failed ones included).
    pub embedding_requests: AtomicUsize,
    /// The status every embeddings request fails with; 0 answers normally.
    pub embeddings_status: AtomicU16,
    /// How many requests carried each `[[status:CODExN]]` marker.
    status_counts: Mutex<HashMap<String, u32>>,
    next_id: AtomicU64,
}

impl Shared {
    pub(crate) fn new(config: MockConfig) -> Self {
        Self {
            config,
            requests: Mutex::new(Vec::new()),
            open_streams: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            http2_connections: AtomicUsize::new(0),
            cancelled_streams: AtomicUsize::new(0),
            completed_streams: AtomicUsize::new(0),
            embedding_requests: AtomicUsize::new(0),
            embeddings_status: AtomicU16::new(0),
            status_counts: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        }
    }

    /// A fresh number for response ids.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether a request carrying `marker` must fail (counting it).
    pub(crate) fn status_fails(&self, marker: &StatusMarker) -> bool {
        let Some(times) = marker.times else {
            return true;
        };
        let mut counts = lock(&self.status_counts);
        let count = counts.entry(marker.key.clone()).or_insert(0);
        *count = count.saturating_add(1);
        *count <= times
    }
}

/// Locks a mutex, recovering the data if a holder panicked.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The API flavour a request is answered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    OpenAi,
    Anthropic,
}

impl Flavor {
    /// Anthropic when the request carries an `anthropic-version` or `x-api-key` header.
    pub(crate) fn detect(headers: &HeaderMap) -> Self {
        if headers.contains_key("anthropic-version") || headers.contains_key("x-api-key") {
            Self::Anthropic
        } else {
            Self::OpenAi
        }
    }
}

/// The TLS acceptor of `tls`: the certificate and key of this crate's `tls/` folder.
pub(crate) fn acceptor(tls: MockTls) -> anyhow::Result<TlsAcceptor> {
    use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_slice_iter(include_bytes!("../tls/cert.pem"))
        .collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(include_bytes!("../tls/key.pem"))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = match tls.http2 {
        true => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        false => vec![b"http/1.1".to_vec()],
    };
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Accepts connections (over TLS with `tls`) until the task is aborted; aborting it drops
/// every connection.
pub(crate) async fn serve(listener: TcpListener, tls: Option<TlsAcceptor>, shared: Arc<Shared>) {
    let router = router(Arc::clone(&shared));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => {
                    shared.connections.fetch_add(1, Ordering::SeqCst);
                    if let Err(error) = tcp.set_nodelay(true) {
                        tracing::debug!(%error, "set_nodelay failed");
                    }
                    let (router, tls, shared) = (router.clone(), tls.clone(), Arc::clone(&shared));
                    connections.spawn(async move {
                        let Some(tls) = tls else {
                            return serve_connection(tcp, false, router).await;
                        };
                        match tls.accept(tcp).await {
                            Ok(stream) => {
                                let http2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                                if http2 {
                                    shared.http2_connections.fetch_add(1, Ordering::SeqCst);
                                }
                                serve_connection(stream, http2, router).await;
                            }
                            Err(error) => tracing::debug!(%error, "TLS handshake failed"),
                        }
                    });
                }
                Err(error) => {
                    // E.g. out of file descriptors: wait for some to be released.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Serves one connection (HTTP/2 when `http2`) until it ends or a handler asks for it to
/// be dropped.
async fn serve_connection<I>(io: I, http2: bool, router: Router)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let notify = Arc::new(Notify::new());
    let killer = ConnectionKiller(Arc::clone(&notify));
    let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
        request.extensions_mut().insert(killer.clone());
        router.clone().oneshot(request.map(Body::new))
    });
    let io = TokioIo::new(io);
    let result = async {
        match http2 {
            true => {
                hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .timer(TokioTimer::new())
                    .serve_connection(io, service)
                    .await
            }
            false => {
                hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .serve_connection(io, service)
                    .await
            }
        }
    };
    tokio::select! {
        result = result => {
            if let Err(error) = result {
                tracing::debug!(%error, "connection ended with an error");
            }
        }
        () = notify.notified() => {}
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/v1/messages", post(anthropic::messages))
        .route("/v1/embeddings", post(embeddings::embeddings))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(Arc::clone(&shared), record))
        .with_state(shared)
}

/// Records the request, then waits the configured delay before handing it on.
async fn record(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    if !shared.config.record_requests {
        if !shared.config.delay.is_zero() {
            tokio::time::sleep(shared.config.delay).await;
        }
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(_) => {
            let message = "The request body is too large or could not be read.";
            return match Flavor::detect(&parts.headers) {
                Flavor::OpenAi => openai::error(413, message, "invalid_request_error", None),
                Flavor::Anthropic => anthropic::error(413, "request_too_large", message),
            };
        }
    };
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    let headers = parts
        .headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    lock(&shared.requests).push(RecordedRequest {
        method: parts.method.as_str().to_owned(),
        path: parts.uri.path().to_owned(),
        headers,
        body,
    });

    if !shared.config.delay.is_zero() {
        tokio::time::sleep(shared.config.delay).await;
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// `GET /v1/models` in the flavour of the request.
async fn models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let flavor = Flavor::detect(&headers);
    let failure = match flavor {
        Flavor::OpenAi => openai::auth_failure(&shared, &headers),
        Flavor::Anthropic => anthropic::auth_failure(&shared, &headers),
    };
    if let Some(response) = failure {
        return response;
    }
    let body = match flavor {
        Flavor::OpenAi => {
            let data: Vec<Value> = shared
                .config
                .models_openai
                .iter()
                .map(|id| json!({"id": id, "object": "model", "created": 1_700_000_000, "owned_by": "mock"}))
                .collect();
            json!({"object": "list", "data": data})
        }
        Flavor::Anthropic => {
            let ids = &shared.config.models_anthropic;
            let data: Vec<Value> = ids
                .iter()
                .map(|id| {
                    json!({
                        "type": "model",
                        "id": id,
                        "display_name": display_name(id),
                        "created_at": "2025-01-01T00:00:00Z",
                    })
                })
                .collect();
            json!({
                "data": data,
                "has_more": false,
                "first_id": ids.first(),
                "last_id": ids.last(),
            })
        }
    };
    axum::Json(body).into_response()
}

/// A readable model name: `claude-sonnet-4-5` gives `Claude Sonnet 4.5` (a date suffix is left out).
fn display_name(id: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut previous_numeric = false;
    for part in id.split('-').filter(|part| !part.is_empty()) {
        let numeric = part.chars().all(|ch| ch.is_ascii_digit());
        if numeric && part.len() >= 6 {
            continue;
        }
        match words.last_mut() {
            Some(last) if numeric && previous_numeric => {
                last.push('.');
                last.push_str(part);
            }
            _ => {
                let mut chars = part.chars();
                let word = match chars.next() {
                    Some(first) => first.to_uppercase().chain(chars).collect(),
                    None => String::new(),
                };
                words.push(word);
            }
        }
        previous_numeric = numeric;
    }
    words.join(" ")
}

/// Any other path: 404 in the flavour of the request.
async fn not_found(request: Request) -> Response {
    let message = format!(
        "Unknown request URL: {} {}.",
        request.method(),
        request.uri().path()
    );
    match Flavor::detect(request.headers()) {
        Flavor::OpenAi => {
            openai::error(404, &message, "invalid_request_error", Some("unknown_url"))
        }
        Flavor::Anthropic => anthropic::error(404, "not_found_error", &message),
    }
}

#[cfg(test)]
mod tests {
    use super::display_name;

    #[test]
    fn display_names() {
        assert_eq!(display_name("claude-sonnet-4-5"), "Claude Sonnet 4.5");
        assert_eq!(
            display_name("claude-haiku-4-5-20251001"),
            "Claude Haiku 4.5"
        );
        assert_eq!(display_name("x"), "X");
    }
}
