//! Extractors: JSON bodies with contract errors, the authenticated caller, the client IP.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    sync::Arc,
};

use axum::{
    body::Bytes,
    extract::{rejection::JsonRejection, ConnectInfo, FromRequest, FromRequestParts, Request},
    http::{header, request::Parts, HeaderMap},
};
use serde::de::DeserializeOwned;

use crate::{
    auth::Principal,
    forwarded::TrustedProxies,
    http::error::{ApiError, NOT_JSON_MESSAGE},
};

/// A JSON request body like `axum::Json`, but only a JSON object (serde would read an
/// array as the fields in order), with the contract's body for each refusal: 415 not JSON,
/// 413 over 1 MiB (README § Limits), 400 malformed, not an object, or not fitting `T`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        require_json_content_type(request.headers())?;
        let body = Bytes::from_request(request, state)
            .await
            .map_err(JsonRejection::from)?;
        require_object(&body)?;
        let axum::Json(value) = axum::Json::<T>::from_bytes(&body)?;
        Ok(Self(value))
    }
}

/// Whether `Content-Type` is `application/json` or `+json` (RFC 6839 § 3.1), with any
/// parameters, compared without case (RFC 9110 § 8.3.1).
pub fn is_json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    let subtype = subtype.to_ascii_lowercase();
    kind.eq_ignore_ascii_case("application") && (subtype == "json" || subtype.ends_with("+json"))
}

/// Errors: 415 with the contract's body unless [`is_json_content_type`].
pub fn require_json_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    if is_json_content_type(headers) {
        Ok(())
    } else {
        Err(ApiError::UnsupportedMediaType(NOT_JSON_MESSAGE.into()))
    }
}

/// Errors: 400 when `body` is well-formed JSON whose top-level value is not an object; a
/// malformed or empty body passes, for the parser to report.
pub fn require_object(body: &[u8]) -> Result<(), ApiError> {
    // Insignificant whitespace may precede the value (RFC 8259 § 2).
    let first = body
        .iter()
        .copied()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    let kind = match first {
        None | Some(b'{') => return Ok(()),
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b'n') => "null",
        Some(b't' | b'f') => "a boolean",
        Some(_) => "a number",
    };
    if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err() {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "The request body must be a JSON object, not {kind}"
    )))
}

/// [`require_json_content_type`] and [`require_object`] for a handler that reads the raw
/// body itself (to check a signature over it first, or to word its own parse errors).
pub fn require_json_object(headers: &HeaderMap, body: &[u8]) -> Result<(), ApiError> {
    require_json_content_type(headers)?;
    require_object(body)
}

/// `axum::extract::Query` with contract errors.
#[derive(Debug, Clone, Copy, Default, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// `axum::extract::Path` with contract errors.
#[derive(Debug, Clone, Copy, Default, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// What the API middleware learned about the caller, stored in request extensions.
#[derive(Debug, Clone)]
pub enum Identity {
    /// No credentials were sent.
    Anonymous,
    /// Credentials were sent but are not valid (malformed, expired, revoked, wrong type).
    Invalid,
    /// A cookie-authenticated unsafe request without its session's CSRF token.
    CsrfRejected,
    /// A valid session or API key.
    Authenticated(Arc<Principal>),
}

/// The authenticated caller; 401 otherwise, 403 for a failed CSRF check. An invalid token
/// is an error, never anonymous.
///
/// An API key bound to agents ([`Principal::may_use`]) gets 404 on `/api/agents/{agentId}`
/// and everything below it for any other agent, as if the agent were absent, and 403 on
/// creating an agent and on the webhooks (docs/api.md § API keys).
#[derive(Debug, Clone)]
pub struct Auth(pub Arc<Principal>);

impl<S: Send + Sync> FromRequestParts<S> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        match parts.extensions.get::<Identity>() {
            Some(Identity::Authenticated(p)) => {
                if p.agent_scope().is_some() {
                    bound_key_may_call(p, parts)?;
                }
                Ok(Auth(p.clone()))
            }
            Some(Identity::CsrfRejected) => Err(crate::auth::AuthError::CsrfRejected.into()),
            _ => Err(ApiError::Unauthorized),
        }
    }
}

/// Whether an API key bound to agents may make the request of `parts`: not on another
/// agent's paths (404), nor to create an agent or reach the account's webhooks, which carry
/// every agent's events (403).
fn bound_key_may_call(principal: &Principal, parts: &Parts) -> Result<(), ApiError> {
    let path = parts.uri.path();
    if path.trim_end_matches('/') == "/api/agents" && parts.method == axum::http::Method::POST {
        return Err(ApiError::ForbiddenWith(
            "This API key works only for the agents it is bound to; it cannot create agents".into(),
        ));
    }
    if path.trim_end_matches('/') == "/api/integrations/webhooks"
        || path.starts_with("/api/integrations/webhooks/")
    {
        return Err(ApiError::ForbiddenWith(
            "This API key works only for the agents it is bound to; webhooks carry every agent's events, so it cannot reach them".into(),
        ));
    }
    if let Some(rest) = path.strip_prefix("/api/agents/") {
        let agent = rest.split('/').next().unwrap_or_default();
        if !principal.may_use(&crate::ids::AgentId::from(agent)) {
            return Err(ApiError::not_found("Agent"));
        }
    }
    Ok(())
}

/// The client's IP: the TCP peer, or behind `TRUSTED_PROXIES` what they report in
/// `X-Forwarded-For` ([`TrustedProxies::client_ip`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientIp(pub IpAddr);

impl ClientIp {
    /// The client's address of a request: the one [`ClientIp::resolve`] recorded, else the
    /// peer address recorded by the server, else 0.0.0.0 (served without it).
    pub fn of(extensions: &http::Extensions) -> Self {
        if let Some(resolved) = extensions.get::<ClientIp>() {
            return *resolved;
        }
        Self(
            extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(addr)| addr.ip())
                .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        )
    }

    /// Records `request`'s client address behind `trusted` proxies for [`ClientIp::of`],
    /// when it differs from the peer (nothing is read when no proxy is trusted).
    pub fn resolve(trusted: &TrustedProxies, request: &mut Request) {
        if trusted.is_empty() {
            return;
        }
        let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<SocketAddr>>() else {
            return;
        };
        let peer = peer.ip();
        let client = trusted.client_ip(peer, request.headers());
        if client != peer {
            request.extensions_mut().insert(ClientIp(client));
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::of(&parts.extensions))
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn with_content_type(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn json_media_types_are_recognised() {
        for value in [
            "application/json",
            "application/json; charset=utf-8",
            "application/json;charset=UTF-8",
            "Application/JSON",
            "application/cloudevents+json",
        ] {
            assert!(is_json_content_type(&with_content_type(value)), "{value}");
        }
        for value in [
            "text/json",
            "application/x-www-form-urlencoded",
            "application/jsonp",
            "json",
            "",
        ] {
            assert!(!is_json_content_type(&with_content_type(value)), "{value}");
        }
        assert!(!is_json_content_type(&HeaderMap::new()));
        assert_eq!(
            require_json_content_type(&HeaderMap::new())
                .unwrap_err()
                .status(),
            axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
    }

    #[test]
    fn only_an_object_is_a_request_body() {
        for body in [
            &b"{}"[..],
            b" \r\n\t{\"a\": 1}",
            b"{\"a\": ",
            b"",
            b"  ",
            b"[1,",
            b"nope",
        ] {
            assert!(
                require_object(body).is_ok(),
                "{body:?} is left to the parser"
            );
        }
        for (body, kind) in [
            (&b"[]"[..], "an array"),
            (b" [{\"name\": \"x\"}]", "an array"),
            (b"null", "null"),
            (b"\"x\"", "a string"),
            (b"1", "a number"),
            (b"-2.5e3", "a number"),
            (b"true", "a boolean"),
            (b"false", "a boolean"),
        ] {
            let err = require_object(body).unwrap_err();
            assert_eq!(err.status(), axum::http::StatusCode::BAD_REQUEST);
            assert_eq!(
                err.body().message,
                format!("The request body must be a JSON object, not {kind}")
            );
        }
    }
}
