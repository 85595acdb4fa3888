//! Accounts and sign-in: signup, login and token refresh, email verification, password
//! reset, the profile, live sessions and third-party sign-in providers (docs/api.md § Auth,
//! § Session and token lifetimes), and the names of the dashboard's cookies.

use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use utoipa::ToSchema;

use super::usage::PlanLimits;

/// `POST /api/auth/signup` body (docs/api.md § Signup, § Auth).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SignupRequest {
    /// The user's full name; required, 1..=200 characters after trimming.
    pub name: String,
    /// A syntactically valid email address (RFC 5322 addr-spec), at most 254 characters.
    pub email: String,
    /// 8..=128 characters.
    pub password: String,
    /// Optional company name, at most 200 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub company: Option<String>,
    /// Optional ISO 3166-1 alpha-2 country code such as `DE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// Optional phone number: digits with an optional leading `+`, spaces, dashes, dots
    /// and parentheses; 7..=15 digits (ITU-T E.164 length).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone: Option<String>,
}

/// The public view of a user returned by signup and login.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct UserSummary {
    pub id: String,
    pub email: String,
    pub name: String,
}

/// `201` answer of signup.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SignupResponse {
    pub success: bool,
    pub user: UserSummary,
    pub message: String,
}

/// `POST /api/auth/login` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LoginRequest {
    pub email: String,
    pub password: String,
}

/// An access token (JWT, 15 minutes) and a refresh token (JWT, 7 days).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TokenPair {
    pub access_token: String,
    pub refresh_token: String,
}

/// `200` answer of login.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LoginResponse {
    pub success: bool,
    pub user: UserSummary,
    pub tokens: TokenPair,
}

/// `POST /api/auth/refresh` body. The dashboard may omit `refreshToken`; the refresh
/// cookie is used then.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RefreshRequest {
    #[serde(default)]
    pub refresh_token: Option<String>,
}

/// `200` answer of refresh: a rotated token pair.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RefreshResponse {
    pub success: bool,
    pub tokens: TokenPair,
}

/// A neutral `{success, message}` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MessageResponse {
    pub success: bool,
    pub message: String,
}

/// `POST /api/auth/verify-email` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct TokenRequest {
    pub token: String,
}

/// Body with one email: resend-verification and forgot-password.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct EmailRequest {
    pub email: String,
}

/// `POST /api/auth/reset-password` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct ResetPasswordRequest {
    pub token: String,
    /// The new password, 8..=128 characters.
    pub password: String,
}

/// The full profile of the signed-in user (`GET /api/auth/me`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct UserProfile {
    pub id: String,
    pub email: String,
    pub name: String,
    pub company: Option<String>,
    pub country: Option<String>,
    pub phone: Option<String>,
    /// `free`, `starter`, `business` or `pro`.
    pub plan: String,
    pub email_verified: bool,
    pub created_at: String,
}

/// `GET /api/auth/me` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct MeResponse {
    pub user: UserProfile,
    /// The limits of `user.plan` on this server.
    pub limits: PlanLimits,
}

/// One live session of the user.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub id: String,
    pub created_at: String,
    pub last_seen_at: String,
    pub user_agent: Option<String>,
    /// What `user_agent` names, e.g. `{browser: "Chrome 120", os: "Windows 10", device:
    /// "Desktop"}`; null without a user agent.
    #[serde(default)]
    pub client: Option<ClientInfo>,
    pub ip: Option<String>,
    /// True for the session that made this request.
    pub current: bool,
}

/// A session's browser, operating system and kind of device, read from its user agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct ClientInfo {
    /// Browser name and major version, e.g. `Firefox 133`; `Unknown browser` when not
    /// recognised.
    pub browser: String,
    /// Operating system and version when known, e.g. `Mac OSX 10.15.7`.
    pub os: String,
    /// `Desktop`, `Phone`, `Mobile phone`, `Appliance`, `Crawler` or `Unknown`.
    pub device: String,
}

/// `GET /api/auth/sessions` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct SessionsResponse {
    pub sessions: Vec<SessionInfo>,
}

/// A configured third-party sign-in provider.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct AuthProvider {
    /// `google`, `github` or `microsoft`.
    pub code: String,
    pub name: String,
}

/// `GET /api/auth/providers` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct AuthProvidersResponse {
    pub providers: Vec<AuthProvider>,
}

/// `POST /api/auth/oauth/exchange` body: the one-time code a native client received on its
/// loopback redirect URI.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct OAuthExchangeRequest {
    pub code: String,
}

/// `POST /api/auth/oauth/{provider}/link` answer: where to send the browser to connect
/// the provider (valid 10 minutes).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct OAuthLinkResponse {
    pub url: String,
}

/// A sign-in provider connected to the account.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LinkedIdentity {
    /// `google`, `github` or `microsoft`.
    pub provider: String,
    /// The provider's display name.
    pub name: String,
    /// The email the provider gave when it was connected.
    pub email: String,
    pub created_at: String,
}

/// `GET /api/auth/identities` answer: how the account can sign in.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct IdentitiesResponse {
    pub identities: Vec<LinkedIdentity>,
    /// Whether the account has a password.
    pub has_password: bool,
}

/// Name of the httpOnly cookie that carries the dashboard's access token.
pub const ACCESS_COOKIE: &str = "ac_access";
/// Name of the httpOnly cookie that carries the dashboard's refresh token.
pub const REFRESH_COOKIE: &str = "ac_refresh";
/// Name of the readable cookie holding the CSRF token (double-submit pattern).
pub const CSRF_COOKIE: &str = "ac_csrf";
/// Header in which cookie-authenticated unsafe requests echo the CSRF cookie.
pub const CSRF_HEADER: &str = "x-csrf-token";
