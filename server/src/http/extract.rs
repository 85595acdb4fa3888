//! Extractors: JSON bodies with contract errors, the authenticated caller, the client IP.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    sync::Arc,
};

use axum::{
    extract::{ConnectInfo, FromRequest, FromRequestParts},
    http::request::Parts,
};

use crate::{auth::Principal, error::ApiError};

/// `axum::Json` whose rejections become the contract's `{error, message}` (400 malformed
/// or invalid body, 413 too large, 415 wrong content type).
#[derive(Debug, Clone, Copy, Default, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

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

/// The authenticated caller; 401 with the contract's body otherwise, 403 for a failed CSRF
/// check. An invalid token is an error, never silently anonymous. The principal is shared
/// with the authentication cache (a clone is a reference-count increment).
#[derive(Debug, Clone)]
pub struct Auth(pub Arc<Principal>);

impl<S: Send + Sync> FromRequestParts<S> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        match parts.extensions.get::<Identity>() {
            Some(Identity::Authenticated(p)) => Ok(Auth(p.clone())),
            Some(Identity::CsrfRejected) => Err(crate::auth::csrf_rejected()),
            _ => Err(ApiError::Unauthorized),
        }
    }
}

/// The client's IP address: the TCP peer (a reverse proxy's own address when there is one).
#[derive(Debug, Clone, Copy)]
pub struct ClientIp(pub IpAddr);

impl ClientIp {
    /// The peer address recorded by the server, or 0.0.0.0 when served without it.
    pub fn of(extensions: &http::Extensions) -> Self {
        Self(
            extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(addr)| addr.ip())
                .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        )
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::of(&parts.extensions))
    }
}
