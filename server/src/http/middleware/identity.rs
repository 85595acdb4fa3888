//! Who the caller of an `/api` request is: the bearer value (access token or API key), else
//! the access-token cookie, which on unsafe methods needs its session's CSRF token
//! (docs/api.md § Authentication and scopes).

use std::sync::Arc;

use axum::http::{header, HeaderMap, Method};

use crate::{
    auth::Principal,
    http::{cookies, error::ApiError, extract::Identity},
    services::AppState,
};

/// The `Authorization` bearer value: `None` without the header, `Some(Err(()))` when it is
/// not `Bearer <token>` (scheme in any case, RFC 9110 § 11.1) with a non-empty ASCII token.
pub(super) fn bearer(headers: &HeaderMap) -> Option<Result<&str, ()>> {
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
    /// A bearer value or the access-token cookie, with the CSRF token an unsafe cookie
    /// request sent.
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

/// The caller's identity, refused unless `csrf` is its session's token; checked on every
/// request, cached credentials too.
fn admitted(state: &AppState, principal: Arc<Principal>, csrf: Option<&str>) -> Identity {
    match csrf {
        Some(csrf) if !state.auth.csrf_matches(&principal, csrf) => Identity::CsrfRejected,
        _ => Identity::Authenticated(principal),
    }
}

/// Works out who the caller is (see [`Identity`]), looking the credential up when needed.
pub(super) async fn identify(
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
/// cache ([`crate::auth::AuthService::cached`]).
pub(super) fn identify_now(
    state: &AppState,
    headers: &HeaderMap,
    method: &Method,
) -> Option<Identity> {
    match presented(headers, method) {
        Presented::Known(identity) => Some(identity),
        Presented::Credential { token, csrf } => {
            state.auth.cached(&token).map(|p| admitted(state, p, csrf))
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

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
