//! Errors of the OpenAI-compatible API in OpenAI's shape
//! `{"error": {"message", "type", "param", "code"}}`, with the statuses OpenAI's SDKs map to
//! their exceptions. Errors made outside a handler come in the contract's shape and are
//! rewritten by [`rewrite`], applied to every answer under [`PREFIX`].

use axum::{
    body::Body,
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    chat::ChatError,
    http::{error::ApiError, X_RATELIMIT_LIMIT},
};

/// Where the OpenAI-compatible API lives: `{PUBLIC_URL}/api/openai/v1` is its base URL.
pub const PREFIX: &str = "/api/openai/v1";

/// Whether `path` is under [`PREFIX`] (or is it).
pub fn is_openai_path(path: &str) -> bool {
    path.strip_prefix(PREFIX)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Largest error body [`rewrite`] reads; longer ones are left as they are.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The body of an error answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OpenAiErrorBody {
    pub error: OpenAiErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OpenAiErrorDetail {
    /// What went wrong and how to fix it.
    pub message: String,
    /// `invalid_request_error` (400, 401, 403, 404, 413, 415), `requests` (429),
    /// `insufficient_quota` (429, a monthly token quota spent) or `server_error` (5xx).
    #[serde(rename = "type")]
    pub kind: String,
    /// The request field at fault, e.g. `messages[1].content`; null when none.
    pub param: Option<String>,
    /// A machine-readable code, e.g. `invalid_api_key`, `model_not_found`,
    /// `insufficient_permissions`, `unsupported_parameter`, `rate_limit_exceeded`,
    /// `insufficient_quota`,
    /// `upstream_error`, `upstream_timeout`; null when none.
    pub code: Option<String>,
}

/// An error answered by the OpenAI-compatible API.
#[derive(Debug)]
pub struct OpenAiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// `error.message`.
    pub message: String,
    /// `error.type`.
    pub kind: &'static str,
    /// `error.param`.
    pub param: Option<String>,
    /// `error.code`.
    pub code: Option<&'static str>,
    /// `Retry-After` in seconds (429).
    pub retry_after: Option<u64>,
    /// The spent quota of a 429 `insufficient_quota`, for its `X-Quota-*` headers.
    pub quota: Option<Box<crate::chat::quota::QuotaState>>,
}

impl OpenAiError {
    /// An error of `status` with the type OpenAI gives it ([`kind_of`]) and no param or code.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            kind: kind_of(status),
            param: None,
            code: None,
            retry_after: None,
            quota: None,
        }
    }

    /// 400 `invalid_request_error` about `param`.
    pub fn invalid(message: impl Into<String>, param: Option<String>) -> Self {
        Self {
            param,
            ..Self::new(StatusCode::BAD_REQUEST, message)
        }
    }

    /// The same error with `code`.
    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    /// 401 for a request without a credential.
    pub fn missing_key() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "You didn't provide an API key. Send an AgentChat API key or access token in an \
             Authorization header using Bearer auth (Authorization: Bearer YOUR_KEY).",
        )
        .with_code("invalid_api_key")
    }

    /// 401 for a malformed, expired, revoked or unknown credential.
    pub fn invalid_key() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "Incorrect API key provided: the API key or access token is invalid, expired or revoked.",
        )
        .with_code("invalid_api_key")
    }

    /// 403 for an API key without `scope`.
    pub fn missing_scope(scope: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            format!(
                "You have insufficient permissions for this operation. Missing scopes: {scope}."
            ),
        )
        .with_code("insufficient_permissions")
    }

    /// 404 for an agent id that is not one of the caller's agents; `param` is `model` when
    /// the id came in a request body.
    pub fn model_not_found(id: &str, param: Option<&str>) -> Self {
        Self {
            param: param.map(str::to_string),
            ..Self::new(
                StatusCode::NOT_FOUND,
                format!("The model `{id}` does not exist or you do not have access to it."),
            )
            .with_code("model_not_found")
        }
    }

    /// The body of this error.
    pub fn body(&self) -> OpenAiErrorBody {
        OpenAiErrorBody {
            error: OpenAiErrorDetail {
                message: self.message.clone(),
                kind: self.kind.to_string(),
                param: self.param.clone(),
                code: self.code.map(str::to_string),
            },
        }
    }
}

/// The `type` OpenAI gives errors of `status`.
pub fn kind_of(status: StatusCode) -> &'static str {
    match status.as_u16() {
        429 => "requests",
        s if s >= 500 => "server_error",
        _ => "invalid_request_error",
    }
}

/// The `code` of errors of `status` made outside the handlers.
fn code_of(status: StatusCode) -> Option<&'static str> {
    match status.as_u16() {
        401 => Some("invalid_api_key"),
        403 => Some("insufficient_permissions"),
        429 => Some("rate_limit_exceeded"),
        502 => Some("upstream_error"),
        504 => Some("upstream_timeout"),
        _ => None,
    }
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if let Some(quota) = &self.quota {
            crate::http::error::add_quota_headers(response.headers_mut(), quota);
        }
        response
    }
}

impl From<ApiError> for OpenAiError {
    /// The status of `err` with its message (internals stay hidden: [`ApiError`] logs them
    /// and shows a generic message), OpenAI's type and the code of its status.
    fn from(err: ApiError) -> Self {
        if let ApiError::Internal(e) = &err {
            tracing::error!(error = ?e, "internal error");
        }
        let status = err.status();
        if let ApiError::QuotaExceeded { state, .. } = err {
            // OpenAI's own answer when an account's quota is spent.
            return Self {
                kind: "insufficient_quota",
                code: Some("insufficient_quota"),
                retry_after: Some(state.seconds_to_reset(chrono::Utc::now())),
                message: state.exceeded_message(),
                quota: Some(state),
                ..Self::new(status, String::new())
            };
        }
        let retry_after = match &err {
            ApiError::RateLimited { retry_after_secs } => Some(*retry_after_secs),
            _ => None,
        };
        Self {
            code: code_of(status),
            retry_after,
            ..Self::new(status, err.body().message)
        }
    }
}

impl From<ChatError> for OpenAiError {
    /// As the native chat answers it: 502 provider failure or unknown model, 504 timeout,
    /// 400 too long.
    fn from(err: ChatError) -> Self {
        let param = matches!(err, ChatError::TooLong { .. }).then(|| "messages".to_string());
        Self {
            param,
            ..ApiError::from(err).into()
        }
    }
}

/// Rewrites an error answer of the contract's shape (or without JSON body) into OpenAI's;
/// others pass unchanged. Headers stay; a 429 says which budget ran out.
pub async fn rewrite(response: Response) -> Response {
    let status = response.status();
    if status.as_u16() < 400 {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ERROR_BODY).await else {
        // Too long to be an error body of ours; nothing useful is left to send.
        let mut fallback = OpenAiError::new(status, reason(status)).into_response();
        *fallback.headers_mut() = parts.headers;
        return fallback;
    };
    let parsed: Option<serde_json::Value> = serde_json::from_slice(&bytes).ok();
    if parsed
        .as_ref()
        .is_some_and(|v| v.get("error").is_some_and(serde_json::Value::is_object))
    {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let contract_message = parsed
        .as_ref()
        .and_then(|v| v.get("message"))
        .and_then(serde_json::Value::as_str)
        .map(str::to_string);
    let message = match status {
        StatusCode::TOO_MANY_REQUESTS => rate_limited_message(&parts.headers),
        StatusCode::UNAUTHORIZED => OpenAiError::invalid_key().message,
        _ => contract_message.unwrap_or_else(|| reason(status)),
    };
    let error = OpenAiError {
        code: code_of(status),
        ..OpenAiError::new(status, message)
    };
    let body = serde_json::to_vec(&error.body()).unwrap_or_default();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

/// The canonical reason phrase of `status`.
fn reason(status: StatusCode) -> String {
    status.canonical_reason().unwrap_or("Error").to_string()
}

/// The message of a 429: the budget (`X-RateLimit-Limit`) and the wait (`Retry-After`).
fn rate_limited_message(headers: &HeaderMap) -> String {
    let number = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
    };
    match (number(X_RATELIMIT_LIMIT.as_str()), number("retry-after")) {
        (Some(limit), Some(wait)) => format!(
            "Rate limit reached for requests: your plan allows {limit} requests per minute. Please try again in {wait}s."
        ),
        _ => "Rate limit reached for requests. Please try again later.".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_of(response: Response) -> serde_json::Value {
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[test]
    fn only_paths_under_the_base_url_are_openai_paths() {
        for path in [
            "/api/openai/v1",
            "/api/openai/v1/models",
            "/api/openai/v1/x/y",
        ] {
            assert!(is_openai_path(path), "{path}");
        }
        for path in [
            "/api/openai",
            "/api/openai/v10",
            "/api/agents",
            "/api/openai/v1x",
        ] {
            assert!(!is_openai_path(path), "{path}");
        }
    }

    #[tokio::test]
    async fn contract_errors_are_rewritten_in_openais_shape() {
        let mut limited = ApiError::RateLimited {
            retry_after_secs: 7,
        }
        .into_response();
        limited
            .headers_mut()
            .insert(X_RATELIMIT_LIMIT, HeaderValue::from(100));
        let rewritten = rewrite(limited).await;
        assert_eq!(rewritten.status(), 429);
        assert_eq!(rewritten.headers()[header::RETRY_AFTER], "7");
        let body = body_of(rewritten).await;
        assert_eq!(body["error"]["type"], "requests");
        assert_eq!(body["error"]["code"], "rate_limit_exceeded");
        assert!(body["error"]["param"].is_null());
        assert!(body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("100 requests per minute"));

        let missing = rewrite(ApiError::not_found("Thing").into_response()).await;
        assert_eq!(missing.status(), 404);
        let body = body_of(missing).await;
        assert_eq!(body["error"]["message"], "Thing not found");
        assert_eq!(body["error"]["type"], "invalid_request_error");

        let bare = rewrite(StatusCode::METHOD_NOT_ALLOWED.into_response()).await;
        assert_eq!(bare.headers()[header::CONTENT_TYPE], "application/json");
        let body = body_of(bare).await;
        assert_eq!(body["error"]["message"], "Method Not Allowed");
    }

    #[tokio::test]
    async fn openai_errors_and_successes_pass_unchanged() {
        let ok = rewrite((StatusCode::OK, "fine").into_response()).await;
        assert_eq!(ok.status(), 200);
        let err = rewrite(OpenAiError::model_not_found("a", Some("model")).into_response()).await;
        let body = body_of(err).await;
        assert_eq!(body["error"]["code"], "model_not_found");
        assert_eq!(body["error"]["param"], "model");
    }

    #[test]
    fn service_errors_keep_their_statuses() {
        use crate::llm::{ProviderError, ProviderErrorKind};
        let timeout: OpenAiError = ChatError::Upstream(ProviderError {
            kind: ProviderErrorKind::Timeout,
            message: "Anthropic failed: timed out".into(),
        })
        .into();
        assert_eq!(timeout.status, 504);
        assert_eq!(timeout.kind, "server_error");
        assert_eq!(timeout.code, Some("upstream_timeout"));
        let failed: OpenAiError = ChatError::Upstream(ProviderError {
            kind: ProviderErrorKind::Status(503),
            message: "Anthropic failed (503): overloaded".into(),
        })
        .into();
        assert_eq!(
            (failed.status.as_u16(), failed.code),
            (502, Some("upstream_error"))
        );
        let internal: OpenAiError = ApiError::Internal(anyhow::anyhow!("db at /secret")).into();
        assert_eq!(internal.status, 500);
        assert!(!internal.message.contains("secret"));
    }
}
