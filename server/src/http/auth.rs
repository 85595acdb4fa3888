//! `/api/auth/*`: signup, email verification, login, refresh, logout, the profile,
//! sessions and password reset (docs/api.md § Signup, § Login, § Refresh token,
//! § Authentication, § Auth).

use app::api::{
    ClientInfo, EmailRequest, ErrorBody, LoginRequest, LoginResponse, MeResponse, MessageResponse,
    PlanLimits, RefreshRequest, RefreshResponse, ResetPasswordRequest, SessionInfo,
    SessionsResponse, SignupRequest, SignupResponse, SuccessResponse, TokenRequest, UserProfile,
    UserSummary, REFRESH_COOKIE,
};
use axum::{
    extract::State,
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Redirect, Response},
    Json,
};
use serde::Deserialize;
use tracing::instrument;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::openapi::{BadRequest, JsonBodyErrors, RateLimited};
use super::{
    cookies,
    extract::{ApiJson, ApiPath, ApiQuery, Auth, ClientIp},
    AppState,
};
use crate::{
    accounts::{Client, SignUp},
    domain::{parse_country, parse_name, parse_optional, parse_phone, Email, Password},
    http::error::{ApiError, ApiResult},
    ids::SessionId,
    store::UserRecord,
    views::iso,
};

/// Longest user name at signup, in characters after trimming.
pub const USER_NAME_MAX: usize = app::api::limits::USER_NAME_MAX;
/// Longest company name at signup, in characters after trimming.
pub const COMPANY_MAX: usize = app::api::limits::COMPANY_MAX;

/// The auth routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(signup))
        .routes(routes!(verify_email_link, verify_email))
        .routes(routes!(resend_verification))
        .routes(routes!(login))
        .routes(routes!(refresh))
        .routes(routes!(logout))
        .routes(routes!(me))
        .routes(routes!(list_sessions))
        .routes(routes!(end_session))
        .routes(routes!(forgot_password))
        .routes(routes!(reset_password))
}

fn summary(user: &UserRecord) -> UserSummary {
    UserSummary {
        id: user.id.clone().into(),
        email: user.email.clone(),
        name: user.name.clone(),
    }
}

/// Create an account; a verification link is emailed.
#[utoipa::path(post, path = "/api/auth/signup", tag = "auth", request_body = SignupRequest,
    responses((status = 201, body = SignupResponse), (status = 400, response = BadRequest), (status = 409, description = "Email taken", body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id))]
async fn signup(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<SignupRequest>,
) -> ApiResult<(StatusCode, Json<SignupResponse>)> {
    let name = parse_name("name", &body.name, USER_NAME_MAX).map_err(ApiError::BadRequest)?;
    let email = Email::parse(&body.email).map_err(ApiError::BadRequest)?;
    let password = Password::parse(body.password).map_err(ApiError::BadRequest)?;
    let company = parse_optional("company", body.company.as_deref(), COMPANY_MAX)
        .map_err(ApiError::BadRequest)?;
    let country = match body
        .country
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
    {
        Some(c) => Some(parse_country(c).map_err(ApiError::BadRequest)?),
        None => None,
    };
    let phone = match body
        .phone
        .as_deref()
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        Some(p) => Some(parse_phone(p).map_err(ApiError::BadRequest)?),
        None => None,
    };
    let user = state
        .accounts
        .sign_up(SignUp {
            name,
            email,
            password,
            company,
            country,
            phone,
        })
        .await?;
    tracing::Span::current().record("user.id", user.id.as_str());
    Ok((
        StatusCode::CREATED,
        Json(SignupResponse {
            success: true,
            user: summary(&user),
            message: "Account created. Check your email for a link to verify your address before signing in.".into(),
        }),
    ))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct TokenQuery {
    /// The token from the emailed link.
    token: String,
}

/// The emailed verification link: verifies, then redirects (303) to the dashboard's
/// sign-in page with `?verified=1`, or `?verifyError=1` for a used or expired link, or one
/// voided by the use of another of the account's links.
#[utoipa::path(get, path = "/api/auth/verify-email", tag = "auth", params(TokenQuery),
    responses((status = 303, description = "Redirect to /login?verified=1 or /login?verifyError=1"), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all)]
async fn verify_email_link(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<TokenQuery>,
) -> ApiResult<Redirect> {
    Ok(if state.accounts.verify_email(&q.token).await? {
        Redirect::to("/login?verified=1")
    } else {
        Redirect::to("/login?verifyError=1")
    })
}

/// Verify an email address with the token from the emailed link.
#[utoipa::path(post, path = "/api/auth/verify-email", tag = "auth", request_body = TokenRequest,
    responses((status = 200, body = MessageResponse), (status = 400, description = "Invalid, used or expired token", body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all)]
async fn verify_email(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<TokenRequest>,
) -> ApiResult<Json<MessageResponse>> {
    if !state.accounts.verify_email(body.token.trim()).await? {
        return Err(ApiError::bad_request(
            "This verification link is invalid, already used or expired; request a new one",
        ));
    }
    Ok(Json(MessageResponse {
        success: true,
        message: "Email verified. You can sign in now.".into(),
    }))
}

/// Send a new verification link. The answer is the same whether or not the account
/// exists (no account enumeration).
#[utoipa::path(post, path = "/api/auth/resend-verification", tag = "auth", request_body = EmailRequest,
    responses((status = 200, body = MessageResponse), (status = 400, response = BadRequest), JsonBodyErrors, RateLimited))]
#[instrument(skip_all)]
async fn resend_verification(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<EmailRequest>,
) -> ApiResult<Json<MessageResponse>> {
    let email = Email::parse(&body.email).map_err(ApiError::BadRequest)?;
    state.accounts.resend_verification(&email).await?;
    Ok(Json(MessageResponse {
        success: true,
        message:
            "If an unverified account exists for this email, a new verification link has been sent."
                .into(),
    }))
}

/// Sign in with email and password. Also sets the dashboard's httpOnly session cookies.
/// Besides the client IP's budget, failed sign-ins are throttled per email and IP, per IP
/// and per email from unknown IPs (README § Limits): 429 with `Retry-After` then too.
#[utoipa::path(post, path = "/api/auth/login", tag = "auth", request_body = LoginRequest,
    responses((status = 200, body = LoginResponse), (status = 400, response = BadRequest),
        (status = 401, description = "Wrong email or password (same answer for both)", body = ErrorBody),
        (status = 403, description = "Email not verified", body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id))]
async fn login(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    ApiJson(body): ApiJson<LoginRequest>,
) -> ApiResult<Response> {
    let email = Email::parse(&body.email).map_err(ApiError::BadRequest)?;
    if body.password.is_empty() {
        return Err(ApiError::bad_request("password is required"));
    }
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let (user, issued) = state
        .accounts
        .sign_in(&email, &body.password, Client { ip, user_agent })
        .await?;
    tracing::Span::current().record("user.id", user.id.as_str());
    let mut response = Json(LoginResponse {
        success: true,
        user: summary(&user),
        tokens: issued.tokens.clone(),
    })
    .into_response();
    cookies::set_session(
        response.headers_mut(),
        &issued,
        state.server.secure_cookies(),
    );
    Ok(response)
}

/// Exchange a refresh token for a new token pair. The refresh token is rotated: using an
/// old one again ends the session (401). Without `refreshToken` in the body, the
/// dashboard's refresh cookie is used, and the CSRF header must carry the session's token
/// (403 otherwise).
#[utoipa::path(post, path = "/api/auth/refresh", tag = "auth", request_body = RefreshRequest,
    responses((status = 200, body = RefreshResponse), (status = 401, body = ErrorBody), (status = 403, description = "CSRF check failed", body = ErrorBody), (status = 400, response = BadRequest), JsonBodyErrors, RateLimited))]
#[instrument(skip_all)]
async fn refresh(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<RefreshRequest>,
) -> ApiResult<Response> {
    let from_cookie = body.refresh_token.is_none();
    let (token, csrf) = match body.refresh_token {
        Some(t) => (t, None),
        None => {
            let token = cookies::get(&headers, REFRESH_COOKIE).ok_or(ApiError::Unauthorized)?;
            let csrf =
                cookies::csrf_header(&headers).ok_or(crate::auth::AuthError::CsrfRejected)?;
            (token, Some(csrf))
        }
    };
    let issued = state.auth.refresh(token.trim(), csrf).await?;
    let mut response = Json(RefreshResponse {
        success: true,
        tokens: issued.tokens.clone(),
    })
    .into_response();
    if from_cookie {
        cookies::set_session(
            response.headers_mut(),
            &issued,
            state.server.secure_cookies(),
        );
    }
    Ok(response)
}

/// End the current session (and clear the dashboard cookies).
#[utoipa::path(post, path = "/api/auth/logout", tag = "auth", security(("bearer" = [])),
    responses((status = 200, body = SuccessResponse), (status = 401, body = ErrorBody), (status = 403, description = "API keys cannot sign out", body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn logout(State(state): State<AppState>, Auth(principal): Auth) -> ApiResult<Response> {
    let session_id = principal.require_session()?;
    state
        .auth
        .end_session(&principal.user_id, session_id, "logout")
        .await?;
    let mut response = Json(SuccessResponse { success: true }).into_response();
    cookies::clear_session(response.headers_mut(), state.server.secure_cookies());
    Ok(response)
}

/// The signed-in user's profile.
#[utoipa::path(get, path = "/api/auth/me", tag = "auth", security(("bearer" = [])),
    responses((status = 200, body = MeResponse), (status = 401, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn me(State(state): State<AppState>, Auth(principal): Auth) -> ApiResult<Json<MeResponse>> {
    let user = state.accounts.user(&principal.user_id).await?;
    let limits = PlanLimits {
        requests_per_minute: state.limits.rate_limit(user.plan),
        agents: state.limits.agent_limit(user.plan),
        monthly_tokens: state.limits.token_quota(user.plan),
    };
    Ok(Json(MeResponse {
        limits,
        user: UserProfile {
            id: user.id.into_string(),
            email: user.email,
            name: user.name,
            company: user.company,
            country: user.country,
            phone: user.phone,
            plan: user.plan.as_str().into(),
            email_verified: user.email_verified_at.is_some(),
            created_at: iso(user.created_at),
        },
    }))
}

/// The user's live sessions, newest first. Session credentials only.
#[utoipa::path(get, path = "/api/auth/sessions", tag = "auth", security(("bearer" = [])),
    responses((status = 200, body = SessionsResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn list_sessions(
    State(state): State<AppState>,
    Auth(principal): Auth,
) -> ApiResult<Json<SessionsResponse>> {
    let current = principal.require_session()?;
    let sessions = state
        .auth
        .live_sessions(&principal.user_id)
        .await?
        .into_iter()
        .map(|s| SessionInfo {
            current: &s.id == current,
            id: s.id.into_string(),
            created_at: iso(s.created_at),
            last_seen_at: iso(s.last_seen_at),
            client: s.user_agent.as_deref().map(client_info),
            user_agent: s.user_agent,
            ip: s.ip,
        })
        .collect();
    Ok(Json(SessionsResponse { sessions }))
}

/// The browser, system and device a user agent names, as the woothee project's dataset
/// reads it (https://github.com/woothee/woothee).
fn client_info(user_agent: &str) -> ClientInfo {
    let known = |s: &str| !s.is_empty() && s != "UNKNOWN";
    let Some(r) = woothee::parser::Parser::new().parse(user_agent) else {
        return ClientInfo {
            browser: "Unknown browser".into(),
            os: "Unknown system".into(),
            device: "Unknown".into(),
        };
    };
    let (name, version) = (r.name.to_string(), r.version.to_string());
    let (os, os_version) = (r.os.to_string(), r.os_version.to_string());
    let major = version.split('.').next().unwrap_or_default();
    ClientInfo {
        browser: match (known(&name), known(major)) {
            (true, true) => format!("{name} {major}"),
            (true, false) => name,
            _ => "Unknown browser".into(),
        },
        os: match (known(&os), known(&os_version)) {
            // "Windows 10" names its version already (its os_version is "NT 10.0").
            (true, true) if !os.chars().any(|c| c.is_ascii_digit()) => format!("{os} {os_version}"),
            (true, _) => os,
            _ => "Unknown system".into(),
        },
        device: match r.category.to_string().as_str() {
            "pc" => "Desktop",
            "smartphone" => "Phone",
            "mobilephone" => "Mobile phone",
            "appliance" => "Appliance",
            "crawler" => "Crawler",
            _ => "Unknown",
        }
        .into(),
    }
}

/// End one of the user's sessions; its tokens stop working at once.
#[utoipa::path(delete, path = "/api/auth/sessions/{id}", tag = "auth", security(("bearer" = [])),
    params(("id" = String, Path, description = "Session id")),
    responses((status = 200, body = SuccessResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn end_session(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(id): ApiPath<SessionId>,
) -> ApiResult<Json<SuccessResponse>> {
    principal.require_session()?;
    if !state
        .auth
        .end_session(&principal.user_id, &id, "ended_by_user")
        .await?
    {
        return Err(ApiError::not_found("Session"));
    }
    Ok(Json(SuccessResponse { success: true }))
}

/// Email a password reset link. The answer is the same whether or not the account exists.
#[utoipa::path(post, path = "/api/auth/forgot-password", tag = "auth", request_body = EmailRequest,
    responses((status = 200, body = MessageResponse), (status = 400, response = BadRequest), JsonBodyErrors, RateLimited))]
#[instrument(skip_all)]
async fn forgot_password(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<EmailRequest>,
) -> ApiResult<Json<MessageResponse>> {
    let email = Email::parse(&body.email).map_err(ApiError::BadRequest)?;
    state.accounts.forgot_password(&email).await?;
    Ok(Json(MessageResponse {
        success: true,
        message: "If an account exists for this email, a password reset link has been sent.".into(),
    }))
}

/// Set a new password with the emailed reset token; every session of the user ends, and
/// every other reset link of the account stops working (OWASP Forgot Password Cheat Sheet).
/// A voided link gets the same 400 as an unknown or expired one.
#[utoipa::path(post, path = "/api/auth/reset-password", tag = "auth", request_body = ResetPasswordRequest,
    responses((status = 200, body = MessageResponse), (status = 400, response = BadRequest), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id))]
async fn reset_password(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<ResetPasswordRequest>,
) -> ApiResult<Json<MessageResponse>> {
    let password = Password::parse(body.password).map_err(ApiError::BadRequest)?;
    let user_id = state
        .accounts
        .reset_password(body.token.trim(), password)
        .await?;
    tracing::Span::current().record("user.id", user_id.as_str());
    Ok(Json(MessageResponse {
        success: true,
        message: "Password changed. Sign in with your new password.".into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_agent_is_shown_as_browser_system_and_device() {
        let chrome = client_info(
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) \
             Chrome/120.0.6099.109 Safari/537.36",
        );
        assert_eq!(chrome.browser, "Chrome 120");
        assert_eq!(chrome.os, "Windows 10");
        assert_eq!(chrome.device, "Desktop");
        let iphone = client_info(
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 \
             (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
        );
        assert_eq!(iphone.browser, "Safari 17");
        assert!(iphone.os.starts_with("iPhone"), "{}", iphone.os);
        assert_eq!(iphone.device, "Phone");
        let unknown = client_info("something/1.0");
        assert_eq!(unknown.browser, "Unknown browser");
        assert_eq!(unknown.device, "Unknown");
    }
}
