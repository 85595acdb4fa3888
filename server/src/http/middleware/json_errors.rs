//! Errors that the framework answers without a JSON body (404, 405, 413, 415, ...) get the
//! contract's `{error, message}` (docs/api.md § Errors).

use axum::{
    body::Body,
    http::{header, HeaderValue, StatusCode},
    response::Response,
};

use crate::http::error::reason;

/// Replaces a non-JSON error body with `{error, message}`.
pub(super) fn json_errors(response: Response) -> Response {
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
