//! The API's one error type: every failure becomes `{"error", "message"}` with its status
//! (docs/api.md § Errors); the `From` impls here alone map service errors to answers.

use app::api::ErrorBody;
use axum::{
    extract::rejection::{JsonRejection, PathRejection, QueryRejection},
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};

/// The fixed 401 message of docs/api.md § Errors.
pub const UNAUTHORIZED_MESSAGE: &str = "Invalid or expired token";
/// The fixed 403 message of docs/api.md § Errors (missing scope).
pub const FORBIDDEN_MESSAGE: &str = "Insufficient permissions";
/// The fixed 429 `error` value of docs/api.md § Errors.
pub const RATE_LIMITED_ERROR: &str = "Rate limit exceeded";
/// The fixed 429 message of docs/api.md § Errors.
pub const RATE_LIMITED_MESSAGE: &str = "Too many requests. Please try again later.";
/// The 415 message for a JSON body sent with another `Content-Type`.
pub const NOT_JSON_MESSAGE: &str = "Expected a request with `Content-Type: application/json`";

/// An error answered to an API client. `error` is the reason phrase except for the fixed
/// 401, 403 and 429 bodies; internal errors are logged with the request id and answered
/// generically.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400 with a message saying what to fix.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// 401 with the contract's fixed body.
    #[error("unauthorized")]
    Unauthorized,
    /// 401 with another message (bad login credentials).
    #[error("unauthorized: {0}")]
    UnauthorizedWith(String),
    /// 403 with the contract's fixed body (missing scope or an API key on an account
    /// endpoint).
    #[error("forbidden")]
    Forbidden,
    /// 403 with a specific message (unverified email, CSRF, plan limit).
    #[error("forbidden: {0}")]
    ForbiddenWith(String),
    /// 404; another tenant's resource answers exactly like a missing one.
    #[error("not found: {0}")]
    NotFound(String),
    /// 409, e.g. a unique violation.
    #[error("conflict: {0}")]
    Conflict(String),
    /// 413.
    #[error("payload too large: {0}")]
    PayloadTooLarge(String),
    /// 415.
    #[error("unsupported media type: {0}")]
    UnsupportedMediaType(String),
    /// 429 with the contract's fixed body and `Retry-After` in seconds.
    #[error("rate limited")]
    RateLimited {
        /// Seconds until a request may succeed again.
        retry_after_secs: u64,
    },
    /// 429 `Quota exceeded`: a monthly token quota or key budget is spent; the message names
    /// it and its reset, with `Retry-After` and the `X-Quota-*` headers.
    #[error("quota exceeded")]
    QuotaExceeded {
        state: Box<crate::chat::quota::QuotaState>,
        /// What the caller is told: the limit and its reset, or less for a visitor.
        message: String,
    },
    /// Any other status with a message (405, 502, 504, ...).
    #[error("{status}: {message}")]
    Status {
        /// The HTTP status.
        status: StatusCode,
        /// What went wrong, safe to show.
        message: String,
    },
    /// 500; the cause is logged, never sent.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    /// 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::BadRequest(message.into())
    }

    /// 404 naming what was not found, e.g. `not_found("Agent")` → "Agent not found".
    pub fn not_found(what: &str) -> Self {
        Self::NotFound(format!("{what} not found"))
    }

    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized | Self::UnauthorizedWith(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden | Self::ForbiddenWith(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::RateLimited { .. } | Self::QuotaExceeded { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Status { status, .. } => *status,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The `{error, message}` body of this error.
    pub fn body(&self) -> ErrorBody {
        let status = self.status();
        let (error, message) = match self {
            Self::Unauthorized => ("Unauthorized".into(), UNAUTHORIZED_MESSAGE.into()),
            Self::Forbidden => ("Forbidden".into(), FORBIDDEN_MESSAGE.into()),
            Self::RateLimited { .. } => (RATE_LIMITED_ERROR.into(), RATE_LIMITED_MESSAGE.into()),
            Self::QuotaExceeded { message, .. } => (QUOTA_EXCEEDED_ERROR.into(), message.clone()),
            Self::Internal(_) => (
                reason(status),
                "An internal error occurred. Please try again later.".into(),
            ),
            Self::BadRequest(m)
            | Self::UnauthorizedWith(m)
            | Self::ForbiddenWith(m)
            | Self::NotFound(m)
            | Self::Conflict(m)
            | Self::PayloadTooLarge(m)
            | Self::UnsupportedMediaType(m)
            | Self::Status { message: m, .. } => (reason(status), m.clone()),
        };
        ErrorBody { error, message }
    }
}

/// The `error` of a 429 over a monthly token quota (docs/api.md § Token quotas).
pub const QUOTA_EXCEEDED_ERROR: &str = "Quota exceeded";

/// `X-Quota-Limit` (tokens per month), `X-Quota-Remaining` (tokens left) and
/// `X-Quota-Reset` (Unix epoch seconds of the next month's start, UTC) of `state`.
pub fn add_quota_headers(
    headers: &mut axum::http::HeaderMap,
    state: &crate::chat::quota::QuotaState,
) {
    headers.insert("x-quota-limit", HeaderValue::from(state.limit));
    headers.insert("x-quota-remaining", HeaderValue::from(state.remaining()));
    headers.insert("x-quota-reset", HeaderValue::from(state.reset.timestamp()));
}

/// The canonical reason phrase of `status`, e.g. `Bad Request`.
pub fn reason(status: StatusCode) -> String {
    status.canonical_reason().unwrap_or("Error").to_string()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Self::Internal(err) = &self {
            tracing::error!(error = ?err, "internal error");
        }
        let mut response = (self.status(), Json(self.body())).into_response();
        match &self {
            Self::RateLimited { retry_after_secs } => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
            }
            Self::QuotaExceeded { state, .. } => {
                let wait = state.seconds_to_reset(chrono::Utc::now());
                let headers = response.headers_mut();
                headers.insert(header::RETRY_AFTER, HeaderValue::from(wait));
                add_quota_headers(headers, state);
            }
            _ => {}
        }
        response
    }
}

impl From<crate::store::StoreError> for ApiError {
    /// A conflict answers 409 with the sentence for what is taken, a missing row 404, and
    /// a database that failed (or could not be reached) 500.
    fn from(err: crate::store::StoreError) -> Self {
        use crate::store::{Conflict, StoreError};
        match err {
            StoreError::Conflict(what) => Self::Conflict(
                match what {
                    Conflict::Email => "An account with this email already exists",
                    Conflict::LinkedIdentity => "This sign-in is already connected to an account",
                    Conflict::LastSignIn => "This is the account's only way to sign in",
                    Conflict::ToolName => "The agent already has a tool with this name",
                }
                .into(),
            ),
            StoreError::NotFound => Self::NotFound("Not found".into()),
            StoreError::Unavailable(e) | StoreError::Other(e) => Self::Internal(e),
        }
    }
}

impl From<crate::auth::AuthError> for ApiError {
    fn from(err: crate::auth::AuthError) -> Self {
        use crate::auth::AuthError;
        match err {
            AuthError::InvalidCredential => Self::Unauthorized,
            e @ AuthError::CsrfRejected => Self::ForbiddenWith(e.to_string()),
            AuthError::MissingScope | AuthError::SessionRequired => Self::Forbidden,
            AuthError::Store(e) => e.into(),
            AuthError::Internal(e) => Self::Internal(e),
        }
    }
}

impl From<crate::accounts::AccountError> for ApiError {
    fn from(err: crate::accounts::AccountError) -> Self {
        use crate::accounts::AccountError;
        match err {
            e @ AccountError::EmailTaken | e @ AccountError::LastSignIn(_) => {
                Self::Conflict(e.to_string())
            }
            e @ (AccountError::InvalidVerification
            | AccountError::InvalidReset
            | AccountError::InvalidExchangeCode
            | AccountError::AccountGone) => Self::BadRequest(e.to_string()),
            e @ AccountError::WrongCredentials => Self::UnauthorizedWith(e.to_string()),
            e @ AccountError::EmailNotVerified => Self::ForbiddenWith(e.to_string()),
            AccountError::Throttled { retry_after } => Self::RateLimited {
                retry_after_secs: retry_after.as_secs().max(1),
            },
            AccountError::UnknownUser => Self::Unauthorized,
            e @ AccountError::NotConnected(_) => Self::NotFound(e.to_string()),
            AccountError::Auth(e) => e.into(),
            AccountError::Store(e) => e.into(),
            AccountError::Internal(e) => Self::Internal(e),
        }
    }
}

impl From<crate::auth::api_keys::ApiKeyError> for ApiError {
    /// 400 for invalid fields, the cap and an expired key's rotation; 404 for a key the
    /// caller does not hold.
    fn from(err: crate::auth::api_keys::ApiKeyError) -> Self {
        use crate::auth::api_keys::ApiKeyError;
        match err {
            ApiKeyError::Invalid(message) => Self::BadRequest(message),
            e @ (ApiKeyError::TooMany | ApiKeyError::Expired) => Self::BadRequest(e.to_string()),
            ApiKeyError::NotFound => Self::not_found("API key"),
            ApiKeyError::Store(e) => e.into(),
            ApiKeyError::Internal(e) => Self::Internal(e),
        }
    }
}

impl From<crate::integrations::IntegrationError> for ApiError {
    /// 400 for invalid fields, 403 at the account's limit, 404 for an integration or agent
    /// the caller does not own.
    fn from(err: crate::integrations::IntegrationError) -> Self {
        use crate::integrations::IntegrationError;
        match err {
            IntegrationError::Invalid(message) => Self::BadRequest(message),
            e @ IntegrationError::Limit => Self::ForbiddenWith(e.to_string()),
            IntegrationError::NotFound => Self::not_found("Integration"),
            IntegrationError::Agent(e) => e.into(),
            IntegrationError::Store(e) => e.into(),
            IntegrationError::Internal(e) => Self::Internal(e),
        }
    }
}

impl From<crate::agents::AgentError> for ApiError {
    fn from(err: crate::agents::AgentError) -> Self {
        use crate::agents::AgentError;
        match err {
            AgentError::NotFound => Self::not_found("Agent"),
            AgentError::Invalid(message) => Self::BadRequest(message),
            e @ AgentError::UnknownModel { .. } => Self::BadRequest(e.to_string()),
            e @ AgentError::PlanLimit { .. } => Self::ForbiddenWith(e.to_string()),
            AgentError::Store(e) => e.into(),
        }
    }
}

impl From<crate::tools::ToolError> for ApiError {
    fn from(err: crate::tools::ToolError) -> Self {
        use crate::tools::ToolError;
        match err {
            ToolError::AgentNotFound => Self::not_found("Agent"),
            ToolError::NotFound => Self::not_found("Tool"),
            ToolError::Invalid(message) => Self::BadRequest(message),
            e @ ToolError::Limit => Self::Conflict(e.to_string()),
            ToolError::IntegrationNotFound => Self::not_found("Integration"),
            ToolError::Mcp(e) => Self::Status {
                status: StatusCode::BAD_GATEWAY,
                message: {
                    // "The MCP server could not be reached: ...": a sentence for the API.
                    let text = e.to_string();
                    let mut chars = text.chars();
                    chars
                        .next()
                        .map(|c| c.to_uppercase().chain(chars).collect())
                        .unwrap_or(text)
                },
            },
            ToolError::Store(e) => e.into(),
        }
    }
}

impl From<crate::chat::ChatError> for ApiError {
    fn from(err: crate::chat::ChatError) -> Self {
        use crate::chat::ChatError;
        match err {
            e @ (ChatError::TooLong { .. } | ChatError::AttachmentNotBase64 { .. }) => {
                Self::BadRequest(e.to_string())
            }
            e @ ChatError::AttachmentsTooLarge => Self::PayloadTooLarge(e.to_string()),
            e @ (ChatError::AttachmentType { .. } | ChatError::AttachmentNotUtf8 { .. }) => {
                Self::UnsupportedMediaType(e.to_string())
            }
            ChatError::AgentGone => Self::not_found("Agent"),
            ChatError::ThreadNotFound => Self::not_found("Thread"),
            ChatError::MessageNotFound => Self::not_found("Message"),
            ChatError::Invalid(message) => Self::BadRequest(message),
            ChatError::QuotaExceeded(state) => Self::QuotaExceeded {
                message: state.exceeded_message(),
                state,
            },
            e @ ChatError::ModelUnavailable { .. } => Self::Status {
                status: StatusCode::BAD_GATEWAY,
                message: e.to_string(),
            },
            // 504 on a timeout, else 502.
            ChatError::Upstream(e) => Self::Status {
                status: if e.kind == crate::llm::ProviderErrorKind::Timeout {
                    StatusCode::GATEWAY_TIMEOUT
                } else {
                    StatusCode::BAD_GATEWAY
                },
                message: e.message,
            },
            e @ (ChatError::ReplyInProgress | ChatError::Cancelled) => {
                Self::Conflict(e.to_string())
            }
            ChatError::Store(e) => e.into(),
        }
    }
}

impl From<crate::channels::ChannelError> for ApiError {
    /// For channels that answer over HTTP (the widget): 409 while no agent is linked, 400
    /// for a message that is too long.
    fn from(err: crate::channels::ChannelError) -> Self {
        use crate::channels::ChannelError;
        match err {
            e @ ChannelError::NotLinked => Self::Conflict(e.to_string()),
            e @ ChannelError::TooLong(_) => Self::BadRequest(e.to_string()),
            // The visitor is told without the owner's figures; the headers keep them.
            ChannelError::OverQuota(state) => Self::QuotaExceeded {
                state,
                message: crate::channels::OVER_QUOTA.into(),
            },
            ChannelError::Failed(e) => e.into(),
        }
    }
}

impl From<crate::webhooks::WebhookError> for ApiError {
    fn from(err: crate::webhooks::WebhookError) -> Self {
        use crate::webhooks::WebhookError;
        match err {
            WebhookError::Invalid(message) => Self::BadRequest(message),
            WebhookError::Url(e) => e.into(),
            e @ WebhookError::Limit => Self::ForbiddenWith(e.to_string()),
            WebhookError::NotFound => Self::not_found("Webhook"),
            WebhookError::DeliveryNotFound => Self::not_found("Delivery"),
            e @ (WebhookError::Disabled | WebhookError::InFlight) => Self::Conflict(e.to_string()),
            WebhookError::Store(e) => e.into(),
            WebhookError::Internal(e) => Self::Internal(e),
        }
    }
}

impl From<crate::public_url::UrlError> for ApiError {
    fn from(err: crate::public_url::UrlError) -> Self {
        Self::BadRequest(err.to_string())
    }
}

impl From<crate::knowledge::service::KnowledgeError> for ApiError {
    fn from(err: crate::knowledge::service::KnowledgeError) -> Self {
        use crate::knowledge::service::KnowledgeError;
        match err {
            e @ (KnowledgeError::EmptyFile
            | KnowledgeError::InvalidCrawlOptions(_)
            | KnowledgeError::NotASite) => Self::BadRequest(e.to_string()),
            e @ KnowledgeError::UnsupportedFormat(_) => Self::UnsupportedMediaType(e.to_string()),
            KnowledgeError::Url(e) => e.into(),
            KnowledgeError::DocumentNotFound => Self::not_found("Document"),
            KnowledgeError::JobNotFound => Self::not_found("Job"),
            KnowledgeError::Store(e) => e.into(),
            KnowledgeError::Internal(e) => Self::Internal(e),
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection {
            JsonRejection::MissingJsonContentType(_) => {
                Self::UnsupportedMediaType(NOT_JSON_MESSAGE.into())
            }
            JsonRejection::JsonSyntaxError(e) => {
                Self::BadRequest(format!("Malformed JSON body: {}", e.body_text()))
            }
            JsonRejection::JsonDataError(e) => {
                Self::BadRequest(format!("Invalid request body: {}", e.body_text()))
            }
            JsonRejection::BytesRejection(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Self::PayloadTooLarge("The request body is larger than allowed (1 MiB)".into())
            }
            other => Self::Status {
                status: other.status(),
                message: other.body_text(),
            },
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        Self::BadRequest(format!("Invalid query string: {}", rejection.body_text()))
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        Self::BadRequest(format!("Invalid path parameter: {}", rejection.body_text()))
    }
}

/// Result alias for handlers.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_bodies_match_the_contract() {
        let b = ApiError::Unauthorized.body();
        assert_eq!(
            (b.error.as_str(), b.message.as_str()),
            ("Unauthorized", "Invalid or expired token")
        );
        let b = ApiError::Forbidden.body();
        assert_eq!(
            (b.error.as_str(), b.message.as_str()),
            ("Forbidden", "Insufficient permissions")
        );
        let b = ApiError::RateLimited {
            retry_after_secs: 3,
        }
        .body();
        assert_eq!(
            (b.error.as_str(), b.message.as_str()),
            (
                "Rate limit exceeded",
                "Too many requests. Please try again later."
            )
        );
    }

    #[test]
    fn other_statuses_use_the_reason_phrase_and_hide_internals() {
        assert_eq!(ApiError::bad_request("x").body().error, "Bad Request");
        assert_eq!(
            ApiError::not_found("Agent").body().message,
            "Agent not found"
        );
        let b = ApiError::Internal(anyhow::anyhow!("secret db path /x")).body();
        assert_eq!(b.error, "Internal Server Error");
        assert!(!b.message.contains("secret"));
    }

    #[test]
    fn service_errors_are_answered_with_the_contracts_statuses_and_messages() {
        use crate::{
            agents::AgentError,
            auth::AuthError,
            channels::{ChannelError, NOT_LINKED},
            chat::ChatError,
            domain::Plan,
            knowledge::service::KnowledgeError,
            llm::{ProviderError, ProviderErrorKind},
            public_url::UrlError,
            webhooks::WebhookError,
        };
        let upstream = |kind| {
            ChatError::Upstream(ProviderError {
                kind,
                message: "The provider failed".into(),
            })
        };
        let cases: Vec<(ApiError, u16, &str, &str)> = vec![
            (AuthError::InvalidCredential.into(), 401, "Unauthorized", UNAUTHORIZED_MESSAGE),
            (AuthError::MissingScope.into(), 403, "Forbidden", FORBIDDEN_MESSAGE),
            (AuthError::SessionRequired.into(), 403, "Forbidden", FORBIDDEN_MESSAGE),
            (
                AuthError::CsrfRejected.into(),
                403,
                "Forbidden",
                "Missing or invalid CSRF token: send the ac_csrf cookie's value in the X-CSRF-Token header",
            ),
            (AgentError::NotFound.into(), 404, "Not Found", "Agent not found"),
            (
                AgentError::PlanLimit {
                    plan: Plan::Free,
                    limit: 3,
                }
                .into(),
                403,
                "Forbidden",
                "Your free plan allows 3 agents and you have reached that limit; delete an agent or upgrade your plan",
            ),
            (
                ChatError::TooLong {
                    max: 5,
                    total: 6,
                    with_attachments: false,
                }
                .into(),
                400,
                "Bad Request",
                "message must be at most 5 characters",
            ),
            (
                ChatError::AttachmentsTooLarge.into(),
                413,
                "Payload Too Large",
                "Attachments may total at most 10 MiB",
            ),
            (
                ChatError::AttachmentNotUtf8 {
                    filename: "a.txt".into(),
                }
                .into(),
                415,
                "Unsupported Media Type",
                "attachment `a.txt` is not UTF-8 text",
            ),
            (ChatError::ThreadNotFound.into(), 404, "Not Found", "Thread not found"),
            (ChatError::AgentGone.into(), 404, "Not Found", "Agent not found"),
            (
                ChatError::ModelUnavailable { model: "m".into() }.into(),
                502,
                "Bad Gateway",
                "The agent's model `m` is not offered by any configured provider right now",
            ),
            (
                upstream(ProviderErrorKind::Timeout).into(),
                504,
                "Gateway Timeout",
                "The provider failed",
            ),
            (
                upstream(ProviderErrorKind::Status(503)).into(),
                502,
                "Bad Gateway",
                "The provider failed",
            ),
            (ChannelError::NotLinked.into(), 409, "Conflict", NOT_LINKED),
            (
                ChannelError::TooLong(7).into(),
                400,
                "Bad Request",
                "message must be at most 7 characters",
            ),
            (KnowledgeError::EmptyFile.into(), 400, "Bad Request", "The file is empty"),
            (KnowledgeError::DocumentNotFound.into(), 404, "Not Found", "Document not found"),
            (KnowledgeError::JobNotFound.into(), 404, "Not Found", "Job not found"),
            (UrlError::Missing.into(), 400, "Bad Request", "url is required"),
            (
                WebhookError::Limit.into(),
                403,
                "Forbidden",
                "An account may hold at most 20 webhooks; delete one first",
            ),
            (
                WebhookError::InFlight.into(),
                409,
                "Conflict",
                "This delivery is being sent right now; try again shortly",
            ),
            (WebhookError::DeliveryNotFound.into(), 404, "Not Found", "Delivery not found"),
        ];
        for (err, status, error, message) in cases {
            assert_eq!(err.status().as_u16(), status, "{err:?}");
            let body = err.body();
            assert_eq!(
                (body.error.as_str(), body.message.as_str()),
                (error, message)
            );
        }
    }
}
