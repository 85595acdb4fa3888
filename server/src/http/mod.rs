//! The HTTP layer: `/api` routes and their middleware over the service's state
//! ([`crate::services`]).
//!
//! A request flows one way: router → [`ApiService`] (identity from bearer token, API
//! key or cookie; CSRF; rate limit and its headers) → handler (validates, calls the store
//! and services) → JSON. Every error leaving `/api`, including the framework's own
//! rejections, is the contract's `{error, message}` body.

pub mod agents;
pub mod api_keys;
pub mod auth;
pub mod channels;
pub mod chat;
pub mod cookies;
pub mod error;
pub mod extract;
pub mod integrations;
pub mod knowledge;
pub mod oauth;
pub mod openapi;
pub mod ops;
pub mod security;
pub mod usage;
pub mod webhooks;
pub mod widget;

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use axum::{
    body::Body,
    extract::{FromRef, Request},
    http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode},
    response::{IntoResponse, Response},
};
use leptos::prelude::LeptosOptions;
use tower::{Layer, Service};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

pub use crate::services::{AppState, Services};
use crate::{
    auth::Principal,
    http::error::{reason, ApiError},
    ratelimit::{RateDecision, RateKey},
};

use self::extract::{ClientIp, Identity};

/// Requests per minute allowed to one client IP on unauthenticated endpoints (the Free
/// plan's budget; docs/api.md: "unauthenticated endpoints count per client IP").
pub const ANONYMOUS_PER_MINUTE: u32 = 100;
/// Largest JSON body accepted (docs/api.md § Conventions: over 1 MiB → 413).
pub const MAX_JSON_BODY: usize = 1024 * 1024;

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos.clone()
    }
}

/// The OpenAPI document's fixed parts; paths come from the handlers' annotations.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "AgentChat API",
        description = "Configurable AI agents: accounts, API keys, agents, chat, knowledge, integrations and webhooks. \
            Authenticate with `Authorization: Bearer <accessToken | apiKey>`. Errors are `{error, message}`.",
        license(name = "Apache-2.0")
    ),
    modifiers(&SecurityAddon),
    components(responses(
        openapi::BadRequest,
        openapi::PayloadTooLarge,
        openapi::UnsupportedMediaType,
        openapi::TooManyRequests
    )),
    tags(
        (name = "auth", description = "Accounts, sessions and tokens"),
        (name = "api-keys", description = "API keys for programmatic access"),
        (name = "agents", description = "Agents and the models they can use"),
        (name = "chat", description = "Chat replies (JSON or server-sent events) and conversations"),
        (name = "knowledge", description = "Knowledge base: uploaded documents, crawled sites and their jobs"),
        (name = "integrations", description = "Integrations with third-party providers (credentials encrypted, never returned)"),
        (name = "webhooks", description = "Webhooks: signed event deliveries (Standard Webhooks v1) and their history"),
        (name = "channels", description = "Inbound requests of live channels: Telegram updates and Slack events (authenticated by the integration's secrets)"),
        (name = "widget", description = "The website widget's public API, for pages of the integration's allowed origins"),
        (name = "operations", description = "Health and API description")
    )
)]
pub struct ApiDoc;

struct SecurityAddon;

impl utoipa::Modify for SecurityAddon {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An access token (JWT) from login or refresh, or an API key `key_...`",
                    ))
                    .build(),
            ),
        );
    }
}

/// Every `/api` route with its OpenAPI description.
pub fn api_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(auth::router())
        .merge(oauth::router())
        .merge(api_keys::router())
        .merge(agents::router())
        .merge(chat::router())
        .merge(knowledge::router())
        .merge(ops::router())
        .merge(usage::router())
        .merge(integrations::router())
        .merge(webhooks::router())
        .merge(channels::router())
        .merge(widget::router())
}

/// The bearer value of the `Authorization` header: `None` without the header,
/// `Some(Err(()))` when it is not `Bearer <token>` (scheme case-insensitive, RFC 9110
/// § 11.1) with a non-empty ASCII token.
fn bearer(headers: &HeaderMap) -> Option<Result<&str, ()>> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    let parsed = value
        .split_at_checked(7)
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case(b"bearer "))
        .and_then(|(_, token)| std::str::from_utf8(token).ok())
        .map(str::trim)
        .filter(|t| !t.is_empty() && t.is_ascii());
    Some(parsed.ok_or(()))
}

fn is_unsafe(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// What a request presents: a credential to check, or an identity known without one.
enum Presented<'a> {
    /// A bearer value (borrowed from the header) or the access-token cookie's value; with
    /// the CSRF token that an unsafe request by cookie sent, which must be the token of the
    /// credential's session.
    Credential {
        token: std::borrow::Cow<'a, str>,
        csrf: Option<&'a str>,
    },
    /// Anonymous, a malformed `Authorization` header, or a cookie-authenticated unsafe
    /// request without a CSRF header equal to its CSRF cookie.
    Known(Identity),
}

/// Reads the request's credential: the `Authorization: Bearer` value first, else the
/// access-token cookie, which on unsafe methods only counts with the CSRF token.
fn presented<'a>(headers: &'a HeaderMap, method: &Method) -> Presented<'a> {
    match bearer(headers) {
        Some(Ok(token)) => Presented::Credential {
            token: token.into(),
            csrf: None,
        },
        Some(Err(())) => Presented::Known(Identity::Invalid),
        None => match cookies::get(headers, app::api::ACCESS_COOKIE) {
            None => Presented::Known(Identity::Anonymous),
            Some(token) if is_unsafe(method) => match cookies::csrf_header(headers) {
                Some(csrf) => Presented::Credential {
                    token: token.into(),
                    csrf: Some(csrf),
                },
                None => Presented::Known(Identity::CsrfRejected),
            },
            Some(token) => Presented::Credential {
                token: token.into(),
                csrf: None,
            },
        },
    }
}

/// The identity of an authenticated caller whose request sent `csrf` (see
/// [`Presented::Credential`]): refused unless it is the token of the caller's session.
/// Checked on every request, the cached ones too: caches hold credentials, not requests.
fn admitted(state: &AppState, principal: Arc<Principal>, csrf: Option<&str>) -> Identity {
    match csrf {
        Some(csrf) if !state.auth.csrf_matches(&principal, csrf) => Identity::CsrfRejected,
        _ => Identity::Authenticated(principal),
    }
}

/// Works out who the caller is (see [`Identity`]), looking the credential up when needed.
async fn identify(
    state: &AppState,
    headers: &HeaderMap,
    method: &Method,
) -> Result<Identity, ApiError> {
    Ok(match presented(headers, method) {
        Presented::Known(identity) => identity,
        Presented::Credential { token, csrf } => match state.auth.authenticate(&token).await? {
            Some(p) => admitted(state, p, csrf),
            None => Identity::Invalid,
        },
    })
}

/// [`identify`] when it needs no lookup: `None` when a credential is not in this thread's
/// cache ([`AuthService::cached`]).
fn identify_now(state: &AppState, headers: &HeaderMap, method: &Method) -> Option<Identity> {
    match presented(headers, method) {
        Presented::Known(identity) => Some(identity),
        Presented::Credential { token, csrf } => {
            state.auth.cached(&token).map(|p| admitted(state, p, csrf))
        }
    }
}

/// `X-RateLimit-Limit`: the budget's requests per minute (docs/api.md § Limits).
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining`: requests that may still be made now.
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset`: Unix epoch seconds at which the full budget is available again.
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The `/api` middleware as a tower layer: see [`ApiService`]. Apply it around the whole
/// router (`ApiLayer::new(state).layer(router)`, as [`crate::startup::service`] does), not
/// with `Router::layer`: that wraps every route on its own, and each request then clones
/// the boxed route twice more and the state once.
#[derive(Clone)]
pub struct ApiLayer {
    state: AppState,
}

impl ApiLayer {
    /// The middleware over the service's state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

impl<S> Layer<S> for ApiLayer {
    type Service = ApiService<S>;

    fn layer(&self, inner: S) -> ApiService<S> {
        ApiService {
            inner,
            state: self.state.clone(),
        }
    }
}

/// The `/api` middleware around `S`: for requests under `/api`, identity, rate limit (per
/// account, or per client IP when unauthenticated, or per integration and client IP on the
/// inbound channel endpoints; none on `/api/health`), the `X-RateLimit-*` headers on every
/// answer, and JSON bodies for errors that the framework produced without one (404, 405,
/// 413, ...). The caller's [`Identity`] is put in the request's extensions for the
/// [`extract::Auth`] extractor. Other paths (the dashboard, its files) go to `S` untouched.
///
/// Written as a tower service rather than with `axum::middleware::from_fn_with_state`: that
/// boxes the inner service and runs extractors on every request, which cost about as much
/// as the authentication itself (BENCHMARKS.md § Authentication and rate limiting overhead).
#[derive(Clone)]
pub struct ApiService<S> {
    inner: S,
    state: AppState,
}

impl<S> Service<Request> for ApiService<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = ApiFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    /// Decides at once when it can (no credential to look up, a rate limiter that answers
    /// without waiting): then the request costs no allocation and no shared reference count
    /// here. Otherwise the whole check runs in a boxed future.
    fn call(&mut self, mut request: Request) -> Self::Future {
        if !is_api(request.uri().path()) {
            return ApiFuture::Other {
                inner: self.inner.call(request),
            };
        }
        if is_unmetered(request.uri().path()) {
            return ApiFuture::Inner {
                inner: self.inner.call(request),
                decision: None,
            };
        }
        let state = &self.state;
        let identity = if channel_integration(request.uri().path()).is_some() {
            Some(Identity::Anonymous)
        } else {
            identify_now(state, request.headers(), request.method())
        };
        let decided = identity.and_then(|identity| {
            let (key, budget) = rate_key(state, &identity, &request);
            Some((state.limiter.check_now(key, budget)?, identity))
        });
        match decided {
            Some((decision, identity)) if decision.allowed => {
                request.extensions_mut().insert(identity);
                ApiFuture::Inner {
                    inner: self.inner.call(request),
                    decision: Some(decision),
                }
            }
            Some((decision, _)) => ApiFuture::Ready {
                response: Some(refused(decision)),
            },
            None => {
                // The instance that was polled ready serves this request; a clone takes
                // its place.
                let clone = self.inner.clone();
                let inner = std::mem::replace(&mut self.inner, clone);
                let state = self.state.clone();
                ApiFuture::Checking {
                    future: Box::pin(async move { api_middleware(&state, request, inner).await }),
                }
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// The answer of [`ApiService`].
    #[project = ApiFutureProjection]
    pub enum ApiFuture<F> {
        /// The request was let through: the inner service's answer, to which the
        /// `X-RateLimit-*` headers of `decision` are added.
        Inner {
            #[pin]
            inner: F,
            decision: Option<RateDecision>,
        },
        /// Not an `/api` request: the inner service's answer as it is.
        Other {
            #[pin]
            inner: F,
        },
        /// The request was refused (429).
        Ready { response: Option<Response> },
        /// The caller's credential or budget had to be looked up.
        Checking {
            future: Pin<Box<dyn Future<Output = Response> + Send + 'static>>,
        },
    }
}

impl<F> Future for ApiFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            ApiFutureProjection::Inner { inner, decision } => {
                let Ok(response) = std::task::ready!(inner.poll(cx));
                let mut response = json_errors(response);
                if let Some(decision) = decision {
                    add_rate_headers(&mut response, decision);
                }
                Poll::Ready(Ok(response))
            }
            ApiFutureProjection::Other { inner } => inner.poll(cx),
            ApiFutureProjection::Ready { response } => {
                Poll::Ready(Ok(response.take().unwrap_or_default()))
            }
            ApiFutureProjection::Checking { future } => future.as_mut().poll(cx).map(Ok),
        }
    }
}

/// Whether `path` is the REST API's (`/api` or under `/api/`).
fn is_api(path: &str) -> bool {
    path.strip_prefix("/api")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Health checks: neither identified nor counted (README § Limits).
fn is_unmetered(path: &str) -> bool {
    path == "/api/health"
}

/// The integration id of a providers' inbound channel request
/// (`/api/channels/{provider}/{id}`; for another path under `/api/channels/`, which is 404,
/// what follows that prefix). Such requests carry the integration's own secrets rather than
/// a caller's credential, and come from a few provider addresses that the anonymous per-IP
/// budget would throttle: they are not identified, and count against their own budget per
/// integration and client IP (`CHANNEL_REQUESTS_PER_MINUTE`), before any secret is checked.
fn channel_integration(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/api/channels/")?;
    Some(rest.split_once('/').map_or(rest, |(_, id)| id))
}

/// Whose budget the request counts against, and its size.
fn rate_key<'a>(
    state: &AppState,
    identity: &'a Identity,
    request: &'a Request,
) -> (RateKey<'a>, u32) {
    if let Some(integration) = channel_integration(request.uri().path()) {
        return (
            RateKey::Channel {
                integration,
                ip: ClientIp::of(request.extensions()).0,
            },
            state.config.channel_requests_per_minute,
        );
    }
    match identity {
        Identity::Authenticated(p) => (
            RateKey::Account(&p.user_id),
            state.config.rate_limit(p.plan),
        ),
        _ => (
            RateKey::Ip(ClientIp::of(request.extensions()).0),
            ANONYMOUS_PER_MINUTE,
        ),
    }
}

/// 429 with the contract's body, `Retry-After` and the `X-RateLimit-*` headers.
fn refused(decision: RateDecision) -> Response {
    let mut response = ApiError::RateLimited {
        retry_after_secs: decision.retry_after_secs,
    }
    .into_response();
    add_rate_headers(&mut response, &decision);
    response
}

/// A header value made from a number, remembered by the thread that made it: most answers
/// repeat the previous one's `X-RateLimit-Limit` (the plan's budget) and
/// `X-RateLimit-Reset` (a time in seconds), and a clone costs less than a new value.
#[derive(Default)]
struct LastValue(Option<(i64, HeaderValue)>);

impl LastValue {
    fn get(&mut self, n: i64) -> HeaderValue {
        match &self.0 {
            Some((last, value)) if *last == n => value.clone(),
            _ => {
                let value = HeaderValue::from(n);
                self.0 = Some((n, value.clone()));
                value
            }
        }
    }
}

thread_local! {
    static LAST_LIMIT: std::cell::RefCell<LastValue> = std::cell::RefCell::default();
    static LAST_RESET: std::cell::RefCell<LastValue> = std::cell::RefCell::default();
}

/// Adds `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (docs/api.md §
/// Limits) for `decision`.
fn add_rate_headers(response: &mut Response, decision: &RateDecision) {
    let limit = LAST_LIMIT.with_borrow_mut(|last| last.get(i64::from(decision.limit)));
    let reset = LAST_RESET.with_borrow_mut(|last| last.get(decision.reset_at));
    let headers = response.headers_mut();
    headers.reserve(3);
    headers.insert(X_RATELIMIT_LIMIT, limit);
    headers.insert(X_RATELIMIT_REMAINING, HeaderValue::from(decision.remaining));
    headers.insert(X_RATELIMIT_RESET, reset);
}

/// The whole check, for requests whose credential or budget had to be looked up.
async fn api_middleware<S>(state: &AppState, mut request: Request, mut inner: S) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let identity = if channel_integration(request.uri().path()).is_some() {
        Identity::Anonymous
    } else {
        match identify(state, request.headers(), request.method()).await {
            Ok(identity) => identity,
            Err(err) => return err.into_response(),
        }
    };
    let (key, budget) = rate_key(state, &identity, &request);
    let decision = match state.limiter.check_now(key, budget) {
        Some(decision) => decision,
        None => state.limiter.check(key, budget).await,
    };
    if !decision.allowed {
        return refused(decision);
    }
    request.extensions_mut().insert(identity);
    let Ok(response) = inner.call(request).await;
    let mut response = json_errors(response);
    add_rate_headers(&mut response, &decision);
    response
}

/// Replaces a non-JSON error body with `{error, message}`.
fn json_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if status.as_u16() < 400 || is_json {
        return response;
    }
    let message = match status {
        StatusCode::NOT_FOUND => "No API endpoint at this path; see /api/docs".to_string(),
        StatusCode::METHOD_NOT_ALLOWED => {
            "This method is not allowed on this path; see /api/docs".to_string()
        }
        StatusCode::PAYLOAD_TOO_LARGE => "The request body is larger than allowed".to_string(),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            "Unsupported Content-Type for this endpoint".to_string()
        }
        s if s.is_server_error() => {
            "An internal error occurred. Please try again later.".to_string()
        }
        s => format!("The request failed: {}", reason(s)),
    };
    let (mut parts, _) = response.into_parts();
    let body = serde_json::to_vec(&app::api::ErrorBody {
        error: reason(status),
        message,
    })
    .unwrap_or_default();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

pub use crate::public_url::URL_MAX;

/// The answer for an unknown `/api` path.
pub async fn api_not_found() -> ApiError {
    ApiError::NotFound("No API endpoint at this path; see /api/docs".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_authorization(value: &[u8]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_bytes(value).unwrap(),
        );
        headers
    }

    #[test]
    fn only_api_paths_go_through_the_api_middleware() {
        for path in ["/api", "/api/", "/api/agents", "/api/health"] {
            assert!(is_api(path), "{path}");
        }
        for path in ["/", "/apiary", "/api-docs", "/pkg/app.wasm", "/agents/api"] {
            assert!(!is_api(path), "{path}");
        }
    }

    #[test]
    fn channel_requests_are_counted_per_integration() {
        assert_eq!(
            channel_integration("/api/channels/telegram/0192-ab"),
            Some("0192-ab")
        );
        assert_eq!(channel_integration("/api/channels/slack/x"), Some("x"));
        assert_eq!(
            channel_integration("/api/channels/unknown"),
            Some("unknown")
        );
        assert_eq!(channel_integration("/api/channels/"), Some(""));
        for path in [
            "/api/health",
            "/api/channels",
            "/api/agents/x",
            "/api/widget/p/chat",
        ] {
            assert_eq!(channel_integration(path), None, "{path}");
        }
        assert!(is_unmetered("/api/health"));
        assert!(!is_unmetered("/api/channels/telegram/x"));
    }

    #[test]
    fn a_bearer_token_is_read_with_any_case_of_the_scheme() {
        assert_eq!(bearer(&HeaderMap::new()), None, "no header: anonymous");
        for value in [
            &b"Bearer abc.def"[..],
            b"bearer abc.def",
            b"BEARER  abc.def ",
        ] {
            assert_eq!(bearer(&with_authorization(value)), Some(Ok("abc.def")));
        }
        for value in [
            &b"Basic dXNlcjpwYXNz"[..],
            b"Bearer",
            b"Bearer    ",
            b"Bearerabc",
            b"Bearer caf\xc3\xa9",
        ] {
            assert_eq!(
                bearer(&with_authorization(value)),
                Some(Err(())),
                "{value:?}"
            );
        }
    }
}
