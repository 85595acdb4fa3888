//! The dashboard's HTTP client for the REST API under `/api`, used from the browser only.
//!
//! Every request goes through `fetch` with `credentials: same-origin`, so the session
//! cookies the server sets at sign-in travel with it; the dashboard never stores a token
//! itself. Unsafe requests (POST, PUT, PATCH, DELETE) echo the readable CSRF cookie
//! ([`CSRF_COOKIE`](crate::api::CSRF_COOKIE)) in the [`CSRF_HEADER`](crate::api::CSRF_HEADER)
//! header, the double-submit defence the server checks on cookie-authenticated requests
//! (OWASP CSRF Prevention Cheat Sheet, "Signed Double-Submit Cookie").
//!
//! Server-side rendering never calls these functions (they run in event handlers and
//! effects only); without the `hydrate` feature they answer an error instead of fetching.

use crate::api::ErrorBody;
use serde::{de::DeserializeOwned, Serialize};

/// A failed API call: the HTTP status (0 when no answer arrived) and the contract's
/// `{error, message}` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status code, or 0 for a network failure or an unreadable answer.
    pub status: u16,
    /// The error body; synthesised when the answer carried none.
    pub body: ErrorBody,
}

impl ApiError {
    /// The human-readable message to show next to the form.
    pub fn message(&self) -> &str {
        &self.body.message
    }

    /// An error that did not come from the server (network failure, unreadable answer).
    fn local(message: impl Into<String>) -> Self {
        Self {
            status: 0,
            body: ErrorBody {
                error: "Network error".to_owned(),
                message: message.into(),
            },
        }
    }

    /// The error for an answer with `status` whose body is not the contract's JSON.
    fn from_status(status: u16, text: &str) -> Self {
        match serde_json::from_str::<ErrorBody>(text) {
            Ok(body) => Self { status, body },
            Err(_) => Self {
                status,
                body: ErrorBody {
                    error: format!("HTTP {status}"),
                    message: format!("The server answered with status {status}. Please try again."),
                },
            },
        }
    }
}

/// `GET path` and decode the JSON answer.
///
/// # Errors
/// Any non-2xx answer as its [`ApiError`], or a network failure with status 0.
pub async fn get_json<T: DeserializeOwned>(path: &str) -> Result<T, ApiError> {
    request("GET", path, None).await
}

/// `POST path` with `body` as JSON and decode the JSON answer.
///
/// # Errors
/// Any non-2xx answer as its [`ApiError`], or a network failure with status 0.
pub async fn post_json<B: Serialize, T: DeserializeOwned>(
    path: &str,
    body: &B,
) -> Result<T, ApiError> {
    let body = serde_json::to_string(body)
        .map_err(|err| ApiError::local(format!("Could not encode the request: {err}")))?;
    request("POST", path, Some(body)).await
}

/// `GET path` for the signed-in user. When the access token has expired (401), rotates
/// the session once with `POST /api/auth/refresh` (the refresh cookie carries the refresh
/// token, so the body is `{}`) and retries once.
///
/// # Errors
/// 401 when the session cannot be refreshed, or the retried request's error.
pub async fn get_json_signed_in<T: DeserializeOwned>(path: &str) -> Result<T, ApiError> {
    match get_json(path).await {
        Err(err) if err.status == 401 => {
            refresh_session().await.map_err(|_| err)?;
            get_json(path).await
        }
        other => other,
    }
}

/// Rotates the session tokens held in cookies (`POST /api/auth/refresh` with `{}`).
///
/// # Errors
/// 401 when the refresh cookie is missing, expired or revoked.
pub async fn refresh_session() -> Result<(), ApiError> {
    post_json::<_, serde::de::IgnoredAny>("/api/auth/refresh", &serde_json::Map::new())
        .await
        .map(|_| ())
}

/// Sends one request and decodes the answer: 2xx as `T` (an empty body reads as JSON
/// `null`), anything else as [`ApiError`].
async fn request<T: DeserializeOwned>(
    method: &str,
    path: &str,
    body: Option<String>,
) -> Result<T, ApiError> {
    let (status, text) = browser::fetch(method, path, body).await?;
    if (200..300).contains(&status) {
        let text = if text.trim().is_empty() {
            "null"
        } else {
            &text
        };
        serde_json::from_str(text)
            .map_err(|err| ApiError::local(format!("Unexpected answer from the server: {err}")))
    } else {
        Err(ApiError::from_status(status, &text))
    }
}

#[cfg(feature = "hydrate")]
mod browser {
    use super::ApiError;
    use crate::api::{CSRF_COOKIE, CSRF_HEADER};
    use wasm_bindgen::{JsCast, JsValue};
    use wasm_bindgen_futures::JsFuture;
    use web_sys::{Headers, HtmlDocument, RequestCredentials, RequestInit, Response};

    /// Performs the request with `window.fetch` and reads the whole answer as text.
    pub(super) async fn fetch(
        method: &str,
        path: &str,
        body: Option<String>,
    ) -> Result<(u16, String), ApiError> {
        let window = web_sys::window().ok_or_else(|| ApiError::local("No browser window"))?;
        let headers = Headers::new().map_err(js_error)?;
        headers
            .set("Accept", "application/json")
            .map_err(js_error)?;
        let init = RequestInit::new();
        init.set_method(method);
        init.set_credentials(RequestCredentials::SameOrigin);
        if let Some(body) = body {
            headers
                .set("Content-Type", "application/json")
                .map_err(js_error)?;
            init.set_body(&JsValue::from_str(&body));
        }
        if !matches!(method, "GET" | "HEAD" | "OPTIONS") {
            if let Some(token) = cookie(CSRF_COOKIE) {
                headers.set(CSRF_HEADER, &token).map_err(js_error)?;
            }
        }
        init.set_headers(&headers);

        let response: Response = JsFuture::from(window.fetch_with_str_and_init(path, &init))
            .await
            .map_err(js_error)?
            .dyn_into()
            .map_err(js_error)?;
        let text = JsFuture::from(response.text().map_err(js_error)?)
            .await
            .map_err(js_error)?
            .as_string()
            .unwrap_or_default();
        Ok((response.status(), text))
    }

    /// The value of the cookie `name` readable from `document.cookie`, if set.
    fn cookie(name: &str) -> Option<String> {
        let cookies = web_sys::window()?
            .document()?
            .dyn_into::<HtmlDocument>()
            .ok()?
            .cookie()
            .ok()?;
        cookies.split(';').find_map(|pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key == name && !value.is_empty()).then(|| value.to_owned())
        })
    }

    /// A JavaScript exception (e.g. a network failure) as an [`ApiError`] with status 0.
    fn js_error(err: JsValue) -> ApiError {
        let detail = err
            .dyn_ref::<js_sys::Error>()
            .map(|e| String::from(e.message()))
            .or_else(|| err.as_string())
            .unwrap_or_else(|| "unknown error".to_owned());
        ApiError::local(format!("Could not reach the server ({detail})."))
    }
}

#[cfg(not(feature = "hydrate"))]
mod browser {
    use super::ApiError;

    /// Without a browser there is nothing to fetch with: the server renders the loading
    /// state and the browser does the work after hydration.
    pub(super) async fn fetch(
        _method: &str,
        _path: &str,
        _body: Option<String>,
    ) -> Result<(u16, String), ApiError> {
        Err(ApiError::local("Requests are made from the browser only."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_body_is_kept_when_the_server_sends_one() {
        let err = ApiError::from_status(
            401,
            r#"{"error":"Unauthorized","message":"Invalid email or password"}"#,
        );
        assert_eq!(err.status, 401);
        assert_eq!(err.message(), "Invalid email or password");
    }

    #[test]
    fn a_body_that_is_not_json_gets_a_generic_message() {
        let err = ApiError::from_status(502, "<html>Bad Gateway</html>");
        assert_eq!(err.status, 502);
        assert_eq!(err.body.error, "HTTP 502");
        assert!(err.message().contains("502"));
    }
}
