//! The dashboard's cookies: access token (httpOnly, Lax, `/`), refresh token (httpOnly,
//! Strict, `/api/auth`) and a readable CSRF token echoed in `X-CSRF-Token` (OWASP "Signed
//! Double-Submit Cookie", [`crate::auth::csrf`]). `Secure` under an https `PUBLIC_URL`.

use app::api::{ACCESS_COOKIE, CSRF_COOKIE, CSRF_HEADER, REFRESH_COOKIE};
use axum::http::{header, HeaderMap, HeaderValue};
use axum_extra::extract::cookie::{Cookie, SameSite};

use crate::auth::{keys, tokens, IssuedSession};

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn get(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| Cookie::parse(pair.trim().to_string()).ok())
        .find(|c| c.name() == name)
        .map(|c| c.value().to_string())
        .filter(|v| !v.is_empty())
}

/// The `X-CSRF-Token` header when it equals the CSRF cookie; `None` otherwise. The caller
/// checks it against the session ([`crate::auth::AuthService::csrf_matches`]).
pub fn csrf_header(headers: &HeaderMap) -> Option<&str> {
    let header = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok())?;
    let cookie = get(headers, CSRF_COOKIE)?;
    keys::constant_time_eq(&cookie, header).then_some(header)
}

fn cookie(
    name: &str,
    value: String,
    path: &str,
    http_only: bool,
    same_site: SameSite,
    max_age_secs: i64,
    secure: bool,
) -> HeaderValue {
    let c = Cookie::build((name.to_string(), value))
        .path(path.to_string())
        .http_only(http_only)
        .same_site(same_site)
        .secure(secure)
        .max_age(cookie_duration(max_age_secs))
        .build();
    HeaderValue::from_str(&c.to_string()).expect("cookie values are URL-safe")
}

fn cookie_duration(secs: i64) -> time::Duration {
    time::Duration::seconds(secs)
}

/// `Set-Cookie` values that store a session's tokens and its CSRF token.
pub fn set_session(headers: &mut HeaderMap, session: &IssuedSession, secure: bool) {
    let access = tokens::ACCESS_TTL.num_seconds();
    let refresh = tokens::REFRESH_TTL.num_seconds();
    let tokens = &session.tokens;
    for value in [
        cookie(
            ACCESS_COOKIE,
            tokens.access_token.clone(),
            "/",
            true,
            SameSite::Lax,
            refresh,
            secure,
        ),
        cookie(
            REFRESH_COOKIE,
            tokens.refresh_token.clone(),
            "/api/auth",
            true,
            SameSite::Strict,
            refresh,
            secure,
        ),
        cookie(
            CSRF_COOKIE,
            session.csrf_token.clone(),
            "/",
            false,
            SameSite::Lax,
            refresh.max(access),
            secure,
        ),
    ] {
        headers.append(header::SET_COOKIE, value);
    }
}

/// `Set-Cookie` values that delete the session cookies.
pub fn clear_session(headers: &mut HeaderMap, secure: bool) {
    for (name, path, http_only, same_site) in [
        (ACCESS_COOKIE, "/", true, SameSite::Lax),
        (REFRESH_COOKIE, "/api/auth", true, SameSite::Strict),
        (CSRF_COOKIE, "/", false, SameSite::Lax),
    ] {
        headers.append(
            header::SET_COOKIE,
            cookie(name, String::new(), path, http_only, same_site, 0, secure),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csrf_requires_a_matching_header() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; ac_csrf=tok123"),
        );
        assert_eq!(get(&h, "ac_csrf").as_deref(), Some("tok123"));
        assert!(csrf_header(&h).is_none());
        h.insert(CSRF_HEADER, HeaderValue::from_static("nope"));
        assert!(csrf_header(&h).is_none());
        h.insert(CSRF_HEADER, HeaderValue::from_static("tok123"));
        assert_eq!(csrf_header(&h), Some("tok123"));
    }

    #[test]
    fn session_cookies_are_http_only_and_secure_on_https() {
        let mut h = HeaderMap::new();
        let t = IssuedSession {
            session_id: "s1".into(),
            tokens: app::api::TokenPair {
                access_token: "a.b.c".into(),
                refresh_token: "d.e.f".into(),
            },
            csrf_token: "tok123".into(),
        };
        set_session(&mut h, &t, true);
        let all: Vec<String> = h
            .get_all(header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect();
        assert!(
            all[0].starts_with("ac_access=a.b.c")
                && all[0].contains("HttpOnly")
                && all[0].contains("Secure")
        );
        assert!(all[1].contains("Path=/api/auth") && all[1].contains("SameSite=Strict"));
        assert!(!all[2].contains("HttpOnly"));
        assert!(all[2].starts_with("ac_csrf=tok123"), "the session's token");
    }
}
