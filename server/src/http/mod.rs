//! The HTTP layer: `/api` routes, their middleware, and the shared application state.
//!
//! A request flows one way: router → [`api_middleware`] (identity from bearer token, API
//! key or cookie; CSRF; rate limit and its headers) → handler (validates, calls the store
//! and services) → JSON. Every error leaving `/api`, including the framework's own
//! rejections, is the contract's `{error, message}` body.

pub mod agents;
pub mod api_keys;
pub mod auth;
pub mod channels;
pub mod chat;
pub mod cookies;
pub mod extract;
pub mod integrations;
pub mod knowledge;
pub mod oauth;
pub mod ops;
pub mod usage;
pub mod webhooks;
pub mod widget;

use std::sync::Arc;

use axum::{
    body::Body,
    extract::{FromRef, Request, State},
    http::{header, HeaderMap, HeaderValue, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};
use leptos::prelude::LeptosOptions;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::{
    auth::AuthService,
    config::Config,
    error::{reason, ApiError},
    mail::Mailer,
    ratelimit::RateLimiter,
    store::Store,
};

use self::extract::{ClientIp, Identity};

/// Requests per minute allowed to one client IP on unauthenticated endpoints (the Free
/// plan's budget; api.md: "unauthenticated endpoints count per client IP").
pub const ANONYMOUS_PER_MINUTE: u32 = 100;
/// Largest JSON body accepted (api.md § Conventions: over 1 MiB → 413).
pub const MAX_JSON_BODY: usize = 1024 * 1024;

/// The shared state of every handler: one pointer to [`Services`], so that the per-request
/// clones axum makes (router, middleware, extractors) cost one reference-count increment.
#[derive(Clone)]
pub struct AppState(Arc<Services>);

impl AppState {
    /// State over `services`.
    pub fn new(services: Services) -> Self {
        Self(Arc::new(services))
    }
}

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

/// The service's parts, built once at start-up (see [`crate::startup::Application::build`]).
pub struct Services {
    /// Start-up configuration.
    pub config: Arc<Config>,
    /// Persistence.
    pub store: Arc<dyn Store>,
    /// Authentication rules and sessions.
    pub auth: AuthService,
    /// Third-party sign-in (GitHub, Google, Microsoft).
    pub oauth: crate::auth::oauth::OAuth,
    /// Encryption of stored credentials (`ENCRYPTION_KEY`).
    pub secrets: crate::crypto::SecretBox,
    /// Per-plan request budgets.
    pub limiter: Arc<dyn RateLimiter>,
    /// Outgoing mail.
    pub mailer: Mailer,
    /// Language models.
    pub models: crate::llm::Models,
    /// The knowledge base (uploads, crawls, jobs).
    pub knowledge: crate::knowledge::Knowledge,
    /// Webhooks: the event emitter and the delivery rules.
    pub webhooks: crate::webhooks::Webhooks,
    /// Live channels of integrations (Telegram, Slack, the website widget).
    pub channels: crate::channels::Channels,
    /// Agents recently read by [`agents::owned_agent`].
    pub agents: agents::AgentCache,
    /// Leptos settings for the dashboard.
    pub leptos: LeptosOptions,
}

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

fn bearer(headers: &HeaderMap) -> Option<Result<&str, ()>> {
    let value = headers.get(header::AUTHORIZATION)?;
    let parsed = value
        .to_str()
        .ok()
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty());
    Some(parsed.ok_or(()))
}

fn is_unsafe(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Works out who the caller is (see [`Identity`]).
async fn identify(
    state: &AppState,
    headers: &HeaderMap,
    method: &Method,
) -> Result<Identity, ApiError> {
    if let Some(bearer) = bearer(headers) {
        let Ok(token) = bearer else {
            return Ok(Identity::Invalid);
        };
        return Ok(match state.auth.authenticate(token).await? {
            Some(p) => Identity::Authenticated(p),
            None => Identity::Invalid,
        });
    }
    let Some(token) = cookies::get(headers, app::api::ACCESS_COOKIE) else {
        return Ok(Identity::Anonymous);
    };
    if is_unsafe(method) && !cookies::csrf_ok(headers) {
        return Ok(Identity::CsrfRejected);
    }
    Ok(match state.auth.authenticate(&token).await? {
        Some(p) => Identity::Authenticated(p),
        None => Identity::Invalid,
    })
}

/// The `/api` middleware: identity, rate limit (per account, or per client IP when
/// unauthenticated), the `X-RateLimit-*` headers on every answer, and JSON bodies for
/// errors that the framework produced without one (404, 405, 413, ...).
pub async fn api_middleware(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    // Health checks, and providers' inbound channel requests, which authenticate with the
    // integration's own secrets and come from a few provider addresses that the per-IP
    // budget of anonymous callers would throttle.
    let path = request.uri().path();
    if path == "/api/health" || path.starts_with("/api/channels/") {
        return json_errors(next.run(request).await).await;
    }
    let identity = match identify(&state, request.headers(), request.method()).await {
        Ok(identity) => identity,
        Err(err) => return err.into_response(),
    };
    let (key, budget) = match &identity {
        Identity::Authenticated(p) => (
            format!("user:{}", p.user_id),
            state.config.rate_limit(p.plan),
        ),
        _ => (
            format!("ip:{}", ClientIp::of(request.extensions()).0),
            ANONYMOUS_PER_MINUTE,
        ),
    };
    let decision = state.limiter.check(&key, budget).await;
    let mut response = if decision.allowed {
        request.extensions_mut().insert(identity);
        json_errors(next.run(request).await).await
    } else {
        ApiError::RateLimited {
            retry_after_secs: decision.retry_after_secs,
        }
        .into_response()
    };
    let headers = response.headers_mut();
    headers.insert("x-ratelimit-limit", HeaderValue::from(decision.limit));
    headers.insert(
        "x-ratelimit-remaining",
        HeaderValue::from(decision.remaining),
    );
    headers.insert("x-ratelimit-reset", HeaderValue::from(decision.reset_at));
    response
}

/// Replaces a non-JSON error body with `{error, message}`.
async fn json_errors(response: Response) -> Response {
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

/// An ISO 8601 UTC timestamp with second precision, e.g. `2026-11-20T10:00:00Z`
/// (api.md § Conventions).
pub fn iso(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Longest URL accepted (crawl starts, webhook receivers), in bytes.
pub const URL_MAX: usize = 2_048;

/// Checks a URL the service will request: http or https, at most [`URL_MAX`] bytes, and not
/// a private or otherwise forbidden address as far as can be known now
/// ([`crate::knowledge::net::check_url`]; it is checked again when requested). `purpose`
/// ends the 400 message: "url cannot {purpose}: ...".
pub async fn checked_public_url(
    raw: &str,
    policy: &crate::knowledge::net::NetPolicy,
    purpose: &str,
) -> crate::error::ApiResult<url::Url> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(ApiError::bad_request("url is required"));
    }
    if raw.len() > URL_MAX {
        return Err(ApiError::bad_request(format!(
            "url must be at most {URL_MAX} bytes"
        )));
    }
    let url = url::Url::parse(raw)
        .map_err(|e| ApiError::bad_request(format!("url is not a valid URL ({e})")))?;
    crate::knowledge::net::check_url(&url, policy)
        .await
        .map_err(|e| ApiError::bad_request(format!("url cannot {purpose}: {e}")))?;
    Ok(url)
}

/// The answer for an unknown `/api` path.
pub async fn api_not_found() -> ApiError {
    ApiError::NotFound("No API endpoint at this path; see /api/docs".into())
}
