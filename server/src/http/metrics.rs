//! `GET /metrics`: the Prometheus exposition of [`crate::metrics`] (README § Metrics). On
//! the main port only with `METRICS_TOKEN` as bearer (401 otherwise, 404 when unset); on
//! `METRICS_ADDR` ([`listener_service`]) for anyone who reaches it, unless the token is set.

use axum::{
    extract::State,
    http::{header, HeaderMap, HeaderValue},
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::error::ApiError;
use crate::{metrics::RouteTemplates, services::AppState};

/// The path of the exposition.
pub const PATH: &str = "/metrics";

/// `Content-Type` of the text exposition format, version 0.0.4
/// (<https://prometheus.io/docs/instrumenting/exposition_formats/>).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /metrics` on the service's port.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_metrics))
}

/// The metrics of this process in the Prometheus text exposition format (version 0.0.4),
/// after reading the knowledge queue's depth from the database. Only with
/// `METRICS_TOKEN` as the bearer token: without it or with another one 401; when
/// `METRICS_TOKEN` is not set, 404 (the metrics are then served, if at all, on
/// `METRICS_ADDR` only). Not rate limited.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    security(("metricsToken" = [])),
    responses(
        (status = 200, description = "Prometheus text exposition format 0.0.4 (README § Metrics lists the series)", content_type = "text/plain; version=0.0.4"),
        (status = 401, description = "No bearer token, or not METRICS_TOKEN", body = app::api::ErrorBody),
        (status = 404, description = "METRICS_TOKEN is not set: metrics are not served on this port", body = app::api::ErrorBody)))]
async fn get_metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let Some(token) = &state.metrics.token else {
        return not_found();
    };
    if !presents(&headers, token) {
        return unauthorized();
    }
    scrape(&state).await
}

/// The service of the `METRICS_ADDR` listener: `GET /metrics` (with `METRICS_TOKEN` as the
/// bearer token when it is set), and 404 for every other path.
pub fn listener_service(state: AppState) -> Router {
    Router::new()
        .route(PATH, get(listener_metrics))
        .fallback(|| async { not_found() })
        .with_state(state)
}

async fn listener_metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(token) = &state.metrics.token {
        if !presents(&headers, token) {
            return unauthorized();
        }
    }
    scrape(&state).await
}

/// The exposition, after the queue depth is read from the store (a failure to read it is
/// logged and leaves the last value).
async fn scrape(state: &AppState) -> Response {
    match state.knowledge.jobs.queued_jobs().await {
        Ok(queued) => crate::metrics::set_queue_depth(&queued),
        Err(err) => {
            tracing::warn!(error = %err, "metrics: cannot read the knowledge queue's depth")
        }
    }
    let Some(body) = crate::metrics::render() else {
        return not_found();
    };
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE))],
        body,
    )
        .into_response()
}

/// Whether `headers` carry `Authorization: Bearer <token>` (RFC 9110 § 11.1), compared on
/// hashes in constant time.
fn presents(headers: &HeaderMap, token: &SecretString) -> bool {
    let Some(presented) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, credential)| credential.trim())
    else {
        return false;
    };
    let presented = Sha256::digest(presented.as_bytes());
    let expected = Sha256::digest(token.expose_secret().as_bytes());
    presented.as_slice().ct_eq(expected.as_slice()).into()
}

/// 401 with the contract's body and `WWW-Authenticate: Bearer` (RFC 6750 § 3).
fn unauthorized() -> Response {
    let mut response = ApiError::Unauthorized.into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"metrics\""),
    );
    response
}

fn not_found() -> Response {
    ApiError::NotFound("No endpoint at this path".into()).into_response()
}

/// The route templates for the `route` label: every documented endpoint, the dashboard's
/// pages and files, `/widget.js`; paths that only answer 404 are `unmatched`.
pub fn service_routes(leptos: &leptos::prelude::LeptosOptions) -> RouteTemplates {
    let (_, doc) = super::api_router().split_for_parts();
    let pages = leptos_axum::generate_route_list(app::App);
    let files = format!("/{}/{{*file}}", leptos.site_pkg_dir);
    RouteTemplates::new(
        doc.paths
            .paths
            .keys()
            .map(String::as_str)
            .chain(pages.iter().map(|page| page.path()))
            .chain([files.as_str(), "/widget.js"]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn only_the_configured_bearer_token_is_accepted() {
        let token = SecretString::from("s3cret-metrics-token-0123");
        assert!(presents(&with("Bearer s3cret-metrics-token-0123"), &token));
        assert!(presents(&with("bearer s3cret-metrics-token-0123"), &token));
        for wrong in [
            "Bearer s3cret-metrics-token-012",
            "Bearer s3cret-metrics-token-01234",
            "Bearer ",
            "Basic s3cret-metrics-token-0123",
            "s3cret-metrics-token-0123",
            "Bearer",
        ] {
            assert!(!presents(&with(wrong), &token), "{wrong}");
        }
        assert!(!presents(&HeaderMap::new(), &token));
    }
}
