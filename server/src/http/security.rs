//! Protections of every answer (README.md § Security): the request-head limit
//! ([`HeadLimitLayer`]) and the security headers [`crate::startup::service`] sets:
//! `nosniff`, `Referrer-Policy`, `X-Frame-Options: DENY`, [`DEFAULT_CSP`] unless the answer
//! set its own, and [`HSTS`] under an https `PUBLIC_URL`; dashboard pages get a per-page
//! nonce policy ([`DashboardPolicy`]).

use std::{
    convert::Infallible,
    task::{Context, Poll},
};

use axum::{
    extract::Request,
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use futures::future::Either;
use tower::{Layer, Service};

use crate::http::error::ApiError;

/// Largest request head accepted, in bytes, counted as `name: value` plus CRLF per field
/// (RFC 9112 § 2.1). Larger: 431 (RFC 6585 § 5) with the contract's body.
pub const MAX_HEAD_BYTES: usize = 32 * 1024;
/// Most header fields accepted in one request (each repetition of a name counts). More:
/// 431 with the contract's JSON body.
pub const MAX_HEADER_FIELDS: usize = 100;

/// The size of `request`'s head as [`MAX_HEAD_BYTES`] counts it, in bytes: `METHOD SP
/// request-target SP HTTP/1.1 CRLF`, then `name: value CRLF` per field, then CRLF.
pub fn head_bytes<B>(request: &http::Request<B>) -> usize {
    let uri = request.uri();
    let target = uri.scheme_str().map_or(0, |s| s.len() + 3)
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(1, |p| p.as_str().len());
    let line = request.method().as_str().len() + 1 + target + 1 + "HTTP/1.1\r\n".len();
    request.headers().iter().fold(line + 2, |n, (name, value)| {
        n + name.as_str().len() + 2 + value.len() + 2
    })
}

/// Whether `request`'s head is within [`MAX_HEAD_BYTES`] and [`MAX_HEADER_FIELDS`].
pub fn head_within_limits<B>(request: &http::Request<B>) -> bool {
    request.headers().len() <= MAX_HEADER_FIELDS && head_bytes(request) <= MAX_HEAD_BYTES
}

/// The answer to a head over the limits: 431 `{"error": "Request Header Fields Too Large",
/// "message": ...}`.
pub fn head_too_large() -> Response {
    ApiError::Status {
        status: StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        message: format!(
            "The request's header fields are too large: at most {MAX_HEADER_FIELDS} fields \
             and {MAX_HEAD_BYTES} bytes with the request line"
        ),
    }
    .into_response()
}

/// Answers requests whose head is over [`MAX_HEAD_BYTES`] or [`MAX_HEADER_FIELDS`] with
/// [`head_too_large`] (hyper itself refuses heads over twice these, with a bare 431).
#[derive(Clone, Copy, Debug, Default)]
pub struct HeadLimitLayer;

impl<S> Layer<S> for HeadLimitLayer {
    type Service = HeadLimit<S>;

    fn layer(&self, inner: S) -> HeadLimit<S> {
        HeadLimit { inner }
    }
}

/// The service of [`HeadLimitLayer`].
#[derive(Clone, Debug)]
pub struct HeadLimit<S> {
    inner: S,
}

impl<S> Service<Request> for HeadLimit<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<std::future::Ready<Result<Response, Infallible>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if head_within_limits(&request) {
            Either::Right(self.inner.call(request))
        } else {
            Either::Left(std::future::ready(Ok(head_too_large())))
        }
    }
}

/// `X-Content-Type-Options` on every answer: browsers take the declared `Content-Type`
/// as it is and never guess another.
pub const NOSNIFF: HeaderValue = HeaderValue::from_static("nosniff");
/// `Referrer-Policy` of answers that set none: only the origin goes to other sites, and
/// nothing from https to http.
pub const REFERRER_POLICY: HeaderValue =
    HeaderValue::from_static("strict-origin-when-cross-origin");
/// `Referrer-Policy` of dashboard pages: no referrer at all to other sites (the dashboard's
/// URLs carry ids and, for email links, single-use tokens).
pub const DASHBOARD_REFERRER_POLICY: HeaderValue = HeaderValue::from_static("same-origin");
/// `X-Frame-Options` of every answer: no page of this site may be framed (the dashboard's
/// CSP says the same with `frame-ancestors 'none'` for browsers that read it).
pub const FRAME_OPTIONS: HeaderValue = HeaderValue::from_static("DENY");
/// Content Security Policy of answers that set none: nothing may be loaded, run or framed.
pub const DEFAULT_CSP: HeaderValue = HeaderValue::from_static(
    "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
);
/// `Strict-Transport-Security` with an https `PUBLIC_URL`: browsers use https only for a
/// year, subdomains included (RFC 6797 § 6.1).
pub const HSTS: HeaderValue = HeaderValue::from_static("max-age=31536000; includeSubDomains");

/// [`HSTS`] when `public_url` is https, none otherwise.
pub fn hsts(public_url: &str) -> Option<HeaderValue> {
    public_url.starts_with("https://").then_some(HSTS)
}

/// The Content Security Policy of dashboard pages (W3C CSP Level 3): scripts from this site
/// and the hydration script by nonce, `'wasm-unsafe-eval'`, everything else from this site
/// only, no framing; under `LEPTOS_WATCH` the live-reload websocket too.
#[derive(Clone, Debug)]
pub struct DashboardPolicy {
    /// `connect-src` sources besides `'self'`.
    connect_extra: String,
}

impl DashboardPolicy {
    /// The policy; `live_reload_port` is the live-reload websocket's port when the site
    /// runs under `cargo leptos watch`.
    pub fn new(live_reload_port: Option<u16>) -> Self {
        Self {
            connect_extra: live_reload_port
                .map(|port| format!(" ws://*:{port} wss://*:{port}"))
                .unwrap_or_default(),
        }
    }

    /// The policy's header value for a page whose inline scripts carry `nonce` (base64
    /// characters only, as Leptos makes it).
    pub fn header(&self, nonce: &str) -> Option<HeaderValue> {
        HeaderValue::try_from(format!(
            "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
             style-src 'self'; img-src 'self'; font-src 'self'; connect-src 'self'{}; \
             object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
            self.connect_extra
        ))
        .ok()
    }
}

/// Leptos page-render context that sets the page's CSP with Leptos's nonce and
/// [`DASHBOARD_REFERRER_POLICY`]; does nothing for static files.
pub fn page_headers(policy: DashboardPolicy) -> impl Fn() + Clone + Send + Sync + 'static {
    move || {
        let Some(response) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>() else {
            return;
        };
        let Some(value) = leptos::nonce::use_nonce().and_then(|nonce| policy.header(&nonce)) else {
            return;
        };
        response.insert_header(header::CONTENT_SECURITY_POLICY, value);
        response.insert_header(header::REFERRER_POLICY, DASHBOARD_REFERRER_POLICY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, String)]) -> http::Request<()> {
        let mut builder = http::Request::get("/api/health");
        for (name, value) in headers {
            builder = builder.header(*name, value);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn the_head_is_counted_as_it_was_sent() {
        let head = request(&[("host", "localhost".into())]);
        assert_eq!(
            head_bytes(&head),
            "GET /api/health HTTP/1.1\r\nhost: localhost\r\n\r\n".len()
        );
    }

    #[test]
    fn heads_over_the_limits_are_refused() {
        let fits = request(&[("x-big", "a".repeat(MAX_HEAD_BYTES - 100))]);
        assert!(head_within_limits(&fits));
        let large = request(&[("x-big", "a".repeat(MAX_HEAD_BYTES))]);
        assert!(!head_within_limits(&large));
        let many: Vec<(&str, String)> = (0..=MAX_HEADER_FIELDS)
            .map(|i| ("x-n", i.to_string()))
            .collect();
        assert!(!head_within_limits(&request(&many)));
        assert!(head_within_limits(&request(&many[1..])));
    }

    #[test]
    fn the_dashboard_policy_carries_the_nonce() {
        let csp = DashboardPolicy::new(None).header("abc_-123").unwrap();
        let csp = csp.to_str().unwrap();
        assert!(csp.contains("script-src 'self' 'nonce-abc_-123' 'wasm-unsafe-eval';"));
        assert!(csp.contains("frame-ancestors 'none'"));
        assert!(!csp.contains("ws:"));
        let watched = DashboardPolicy::new(Some(3001)).header("n").unwrap();
        assert!(watched
            .to_str()
            .unwrap()
            .contains("connect-src 'self' ws://*:3001 wss://*:3001;"));
    }

    #[test]
    fn hsts_only_for_https() {
        assert_eq!(hsts("https://chat.example.com"), Some(HSTS));
        assert_eq!(hsts("http://127.0.0.1:3000"), None);
    }
}
