//! Structured logs through `tracing`: human-readable by default, JSON lines with
//! `LOG_FORMAT=json`; the level comes from `RUST_LOG` (default `info`). Every request's
//! handler runs in a `request` span ([`RequestSpanLayer`]) carrying its `X-Request-Id`.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Instant,
};

use http::{HeaderName, Request, Response};
use tower::{Layer, Service};
use tracing::{Instrument as _, Span};
use tracing_subscriber::{fmt, EnvFilter};

/// The log filter without `RUST_LOG`; genai is held to errors (it warns once per chat on the
/// role-only first chunk of OpenAI-compatible streams).
pub const DEFAULT_FILTER: &str = "info,sqlx=warn,tower_http=info,leptos=warn,genai=error";

/// Installs the global subscriber (once; later calls do nothing). Text logs are coloured
/// only on a terminal ([`colour`]).
pub fn init() {
    use std::io::IsTerminal as _;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let json = std::env::var("LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    let ansi = colour(
        std::io::stdout().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let builder = fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(ansi);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// Whether text logs carry ANSI colours: only on a terminal and unless `NO_COLOR` is set
/// non-empty (<https://no-color.org>).
pub fn colour(to_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    to_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// The `X-Request-Id` header naming a request in logs and answers (set when missing, echoed;
/// `crate::startup::service`).
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Runs each handler in an `info` span `request` (`request.id`, `method`, `path`) and logs 5xx
/// answers at `error` with `status` and `latency_ms`, like tower-http's `TraceLayer`. Unlike
/// it, the span does not wrap the body (entered on every chunk poll it costs CPU);
/// [`crate::chat::stream::Relay`] enters it where the body logs.
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestSpanLayer;

impl<S> Layer<S> for RequestSpanLayer {
    type Service = RequestSpan<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestSpan { inner }
    }
}

/// The service of [`RequestSpanLayer`].
#[derive(Clone, Debug)]
pub struct RequestSpan<S> {
    inner: S,
}

impl<S, A, B> Service<Request<A>> for RequestSpan<S>
where
    S: Service<Request<A>, Response = Response<B>>,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = RequestSpanFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<A>) -> Self::Future {
        let span = request_span(&request);
        let started = Instant::now();
        let inner = span.in_scope(|| self.inner.call(request));
        RequestSpanFuture {
            inner: inner.instrument(span),
            started,
        }
    }
}

/// The `request` span of `request` (see [`RequestSpanLayer`]).
fn request_span<A>(request: &Request<A>) -> Span {
    let id = request
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    tracing::info_span!("request", request.id = %id, method = %request.method(), path = %request.uri().path())
}

pin_project_lite::pin_project! {
    /// The answer of [`RequestSpan`]: the handler's future in its span.
    pub struct RequestSpanFuture<F> {
        #[pin]
        inner: tracing::instrument::Instrumented<F>,
        started: Instant,
    }
}

impl<F, B, E> Future for RequestSpanFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let answer = std::task::ready!(this.inner.as_mut().poll(cx));
        if let Ok(response) = &answer {
            if response.status().is_server_error() {
                let latency_ms = this.started.elapsed().as_millis() as u64;
                let _in = this.inner.span().enter();
                tracing::error!(
                    status = response.status().as_u16(),
                    latency_ms,
                    "response failed"
                );
            }
        }
        Poll::Ready(answer)
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io::Write,
        sync::{Arc, Mutex},
    };

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn logs_are_coloured_only_on_a_terminal_without_no_color() {
        use std::ffi::OsStr;
        assert!(colour(true, None));
        assert!(!colour(false, None), "a file or the journal");
        assert!(!colour(true, Some(OsStr::new("1"))));
        assert!(
            colour(true, Some(OsStr::new(""))),
            "an empty NO_COLOR is unset"
        );
    }

    #[test]
    fn the_default_filter_keeps_genai_to_errors() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = fmt()
            .with_env_filter(EnvFilter::new(DEFAULT_FILTER))
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(target: "genai::adapter::adapters::openai::streamer", "EMPTY CHOICE CONTENT");
            tracing::error!(target: "genai::webc", "genai failure");
            tracing::info!(target: "agentchat::chat", "service line");
        });
        let logged = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(!logged.contains("EMPTY CHOICE CONTENT"), "{logged}");
        assert!(logged.contains("genai failure"), "{logged}");
        assert!(logged.contains("service line"), "{logged}");
    }

    fn logged_while<F: Future<Output = ()>>(work: impl FnOnce() -> F) -> String {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = fmt()
            .with_env_filter(EnvFilter::new(DEFAULT_FILTER))
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(work());
        });
        let logged = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        logged
    }

    fn request(path: &str, id: &str) -> Request<()> {
        Request::get(path)
            .header("x-request-id", id)
            .body(())
            .unwrap()
    }

    /// A handler answering `/fail` with 500, anything else with 404, logging as it runs.
    fn handler() -> impl Service<
        Request<()>,
        Response = Response<axum::body::Body>,
        Error = std::convert::Infallible,
        Future: Send,
    > + Clone {
        RequestSpanLayer.layer(tower::service_fn(|request: Request<()>| async move {
            tracing::info!("handling {}", request.uri().path());
            let status = if request.uri().path() == "/fail" {
                500
            } else {
                404
            };
            let body = axum::body::Body::from_stream(futures::stream::once(async {
                tracing::info!("polling the body");
                Ok::<_, std::convert::Infallible>("frame")
            }));
            Ok(Response::builder().status(status).body(body).unwrap())
        }))
    }

    fn line<'a>(logged: &'a str, containing: &str) -> &'a str {
        logged
            .lines()
            .find(|l| l.contains(containing))
            .unwrap_or_else(|| panic!("no line with {containing:?} in:\n{logged}"))
    }

    #[test]
    fn a_handler_logs_inside_its_request_span() {
        let logged = logged_while(|| async {
            let mut service = handler();
            let _ = service.call(request("/found", "id-1")).await;
        });
        let handled = line(&logged, "handling /found");
        assert!(handled.contains("request{request.id=id-1"), "{logged}");
        assert!(handled.contains("method=GET path=/found"), "{logged}");
    }

    #[test]
    fn a_server_error_is_logged_with_its_request_and_a_client_error_is_not() {
        let logged = logged_while(|| async {
            let mut service = handler();
            let _ = service.call(request("/fail", "id-5xx")).await;
            let _ = service.call(request("/missing", "id-4xx")).await;
        });
        let failed = line(&logged, "response failed");
        assert!(failed.contains("ERROR"), "{logged}");
        assert!(failed.contains("request.id=id-5xx"), "{logged}");
        assert!(failed.contains("status=500"), "{logged}");
        assert!(failed.contains("latency_ms="), "{logged}");
        assert_eq!(logged.matches("response failed").count(), 1, "{logged}");
    }

    /// The span covers the handler, not the body's polls.
    #[test]
    fn the_response_body_is_polled_outside_the_request_span() {
        let logged = logged_while(|| async {
            let mut service = handler();
            let response = service.call(request("/found", "id-body")).await.unwrap();
            let body = axum::body::to_bytes(response.into_body(), 1024)
                .await
                .unwrap();
            assert_eq!(&body[..], b"frame");
        });
        let polled = line(&logged, "polling the body");
        assert!(!polled.contains("id-body"), "{logged}");
    }
}
