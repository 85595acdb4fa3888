//! Request budgets of `/api` (README § Limits): whose budget a request counts against, the
//! 429 over it, and the `X-RateLimit-*` headers of every answer.

use axum::{
    extract::Request,
    http::{HeaderName, HeaderValue},
    response::{IntoResponse, Response},
};

use crate::{
    http::{
        error::ApiError,
        extract::{ClientIp, Identity},
    },
    ratelimit::{RateDecision, RateKey},
    services::AppState,
};

/// Requests per minute allowed to one client IP on unauthenticated endpoints (the Free
/// plan's budget; docs/api.md: "unauthenticated endpoints count per client IP").
pub const ANONYMOUS_PER_MINUTE: u32 = 100;

/// `X-RateLimit-Limit`: the budget's requests per minute (docs/api.md § Limits).
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining`: requests that may still be made now.
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset`: Unix epoch seconds at which the full budget is available again.
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// Health checks, liveness and readiness: neither identified nor counted (README §
/// Limits, docs/api.md § Operations).
pub(super) fn is_unmetered(path: &str) -> bool {
    matches!(path, "/api/health" | "/api/health/ready")
}

/// The integration id of an inbound channel request (`/api/channels/{provider}/{id}`).
/// Such requests are not identified and count against their own budget per integration
/// and client IP (`CHANNEL_REQUESTS_PER_MINUTE`), before any secret is checked.
pub(super) fn channel_integration(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/api/channels/")?;
    Some(rest.split_once('/').map_or(rest, |(_, id)| id))
}

/// Whose budget the request counts against, and its size.
pub(super) fn rate_key<'a>(
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
            state.limits.channel_requests_per_minute,
        );
    }
    match identity {
        Identity::Authenticated(p) => (
            RateKey::Account(p.user_id.as_str()),
            state.limits.rate_limit(p.plan),
        ),
        _ => (
            RateKey::Ip(ClientIp::of(request.extensions()).0),
            ANONYMOUS_PER_MINUTE,
        ),
    }
}

/// 429 with the contract's body, `Retry-After` and the `X-RateLimit-*` headers; counted
/// as a refusal of `kind` (`agentchat_rate_limit_refusals_total`).
pub(super) fn refused(decision: RateDecision, kind: crate::metrics::Refusal) -> Response {
    crate::metrics::refused(kind);
    let mut response = ApiError::RateLimited {
        retry_after_secs: decision.retry_after_secs,
    }
    .into_response();
    add_rate_headers(&mut response, &decision);
    response
}

/// A header value made from a number, reused while the number repeats (a clone is cheaper).
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
pub(super) fn add_rate_headers(response: &mut Response, decision: &RateDecision) {
    let limit = LAST_LIMIT.with_borrow_mut(|last| last.get(i64::from(decision.limit)));
    let reset = LAST_RESET.with_borrow_mut(|last| last.get(decision.reset_at));
    let headers = response.headers_mut();
    headers.reserve(3);
    headers.insert(X_RATELIMIT_LIMIT, limit);
    headers.insert(X_RATELIMIT_REMAINING, HeaderValue::from(decision.remaining));
    headers.insert(X_RATELIMIT_RESET, reset);
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(is_unmetered("/api/health/ready"));
        assert!(!is_unmetered("/api/health/other"));
        assert!(!is_unmetered("/api/channels/telegram/x"));
    }
}
