//! `/api/auth/oauth/*` and `/api/auth/identities`: sign-in with GitHub, Google and
//! Microsoft (docs/api.md § Auth).
//!
//! The flow: `GET /api/auth/oauth/{provider}` stores a flow (hash of a random `state`, the
//! PKCE verifier, the OpenID Connect nonce, the hash of a browser-binding cookie it sets)
//! and redirects to the provider. The provider sends the browser back to
//! `GET /api/auth/oauth/{provider}/callback?code&state`, which takes the flow (a state
//! works once, for 10 minutes, and only in the browser that started it), exchanges the
//! code, reads the identity and then:
//! - an identity already connected signs into its account;
//! - a new identity with a verified email creates a verified account without password;
//! - an email that belongs to an existing account is never connected silently: the
//!   person is told to sign in with the password and connect the provider from the
//!   account page (`POST /api/auth/oauth/{provider}/link`);
//! - an unverified provider email is refused.
//!
//! Success starts a session under the usual rules (5 live sessions, 24 h inactivity),
//! sets the dashboard cookies and redirects (303) to `/dashboard`. A native or CLI client
//! starts the flow with `?redirectUri=http://127.0.0.1:PORT/...` (a loopback address,
//! RFC 8252 § 7.3) and receives `?code=` there instead, a one-time code (60 s) it trades
//! for the token pair at `POST /api/auth/oauth/exchange`. Every failure redirects to the
//! sign-in page (`/login?oauthError=...`), the account page for connect flows
//! (`/dashboard/account?oauthError=...`), or the client's redirect URI (`?error=...&error_description=...`),
//! and creates nothing.

use app::api::{
    ErrorBody, IdentitiesResponse, LinkedIdentity, LoginResponse, OAuthExchangeRequest,
    OAuthLinkResponse, SuccessResponse, UserSummary,
};
use axum::{
    extract::State,
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use axum_extra::extract::cookie::{Cookie, SameSite};
use chrono::Duration;
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
    auth::{
        keys,
        oauth::{OAuthError, Provider, ProviderIdentity},
    },
    domain::Email,
    http::error::{ApiError, ApiResult},
    ids::UserId,
    store::{
        identity::{ExchangeCodeRecord, IdentityRecord, OAuthFlowRecord},
        NewUser, StoreError, UserRecord,
    },
    views::iso,
};

/// The browser-binding cookie of a flow (httpOnly, SameSite=Lax so that it comes back on
/// the provider's top-level redirect, path `/api/auth/oauth`).
pub const FLOW_COOKIE: &str = "ac_oauth";
/// How long a started flow may take (RFC 6749 § 10.12 asks for short-lived states).
pub const FLOW_TTL: Duration = Duration::minutes(10);
/// How long a native client's one-time exchange code works.
pub const EXCHANGE_TTL: Duration = Duration::seconds(60);
/// Where the dashboard lands after signing in.
const DASHBOARD: &str = "/dashboard";
/// The dashboard's account page, where connect flows end.
const ACCOUNT: &str = "/dashboard/account";

/// The third-party sign-in routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(providers))
        .routes(routes!(start))
        .routes(routes!(callback))
        .routes(routes!(exchange))
        .routes(routes!(link, unlink))
        .routes(routes!(identities))
}

/// The third-party sign-in providers configured on this server.
#[utoipa::path(get, path = "/api/auth/providers", tag = "auth",
    responses((status = 200, body = app::api::AuthProvidersResponse), RateLimited))]
async fn providers(State(state): State<AppState>) -> Json<app::api::AuthProvidersResponse> {
    Json(app::api::AuthProvidersResponse {
        providers: state
            .oauth
            .configured()
            .into_iter()
            .map(|p| app::api::AuthProvider {
                code: p.code().into(),
                name: p.name().into(),
            })
            .collect(),
    })
}

/// A configured provider from the path; 404 otherwise.
fn configured(state: &AppState, code: &str) -> ApiResult<Provider> {
    Provider::parse(code)
        .filter(|p| state.oauth.is_configured(*p))
        .ok_or_else(|| ApiError::NotFound(format!("Sign-in provider '{code}' is not configured")))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StartQuery {
    /// A native client's loopback redirect URI (`http://127.0.0.1:PORT/...`,
    /// `http://[::1]:PORT/...` or `http://localhost:PORT/...`) that receives a one-time
    /// `code` for `POST /api/auth/oauth/exchange` instead of the dashboard cookies.
    redirect_uri: Option<String>,
}

/// Accepts only loopback `http` redirect URIs (RFC 8252 § 7.3, § 8.3), without fragment.
fn loopback_redirect(raw: &str) -> ApiResult<String> {
    let bad = || {
        ApiError::bad_request(
            "redirectUri must be an http loopback address such as http://127.0.0.1:8400/callback",
        )
    };
    let url = url::Url::parse(raw).map_err(|_| bad())?;
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    if url.scheme() != "http" || !loopback || url.fragment().is_some() || !url.username().is_empty()
    {
        return Err(bad());
    }
    Ok(url.to_string())
}

/// The flow cookie's value: the browser's existing one (so that flows in two tabs both
/// work) or a new one.
fn browser_binding(headers: &HeaderMap) -> (String, bool) {
    match cookies::get(headers, FLOW_COOKIE).filter(|v| v.len() == 43) {
        Some(existing) => (existing, false),
        None => (keys::random_token(), true),
    }
}

fn flow_cookie(value: &str, max_age_secs: i64, secure: bool) -> HeaderValue {
    let c = Cookie::build((FLOW_COOKIE, value.to_string()))
        .path("/api/auth/oauth")
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(secure)
        .max_age(time::Duration::seconds(max_age_secs))
        .build();
    HeaderValue::from_str(&c.to_string()).expect("cookie values are URL-safe")
}

/// Stores a new flow and returns the provider URL, setting the binding cookie on
/// `response_headers` when the browser has none.
async fn begin_flow(
    state: &AppState,
    provider: Provider,
    headers: &HeaderMap,
    response_headers: &mut HeaderMap,
    link_user_id: Option<UserId>,
    client_redirect: Option<String>,
) -> Result<String, OAuthError> {
    let request = state.oauth.authorization_request(provider).await?;
    let (binding, new) = browser_binding(headers);
    let now = state.clock.now();
    let flow = OAuthFlowRecord {
        state_hash: keys::sha256_hex(&request.state),
        provider,
        browser_hash: keys::sha256_hex(&binding),
        pkce_verifier: request.pkce_verifier,
        nonce: request.nonce,
        link_user_id,
        client_redirect,
        expires_at: now + FLOW_TTL,
        created_at: now,
    };
    if let Err(e) = state.store.create_oauth_flow(&flow).await {
        tracing::error!(error = %e, "cannot store a sign-in flow");
        return Err(OAuthError::Unreachable("AgentChat"));
    }
    if new {
        response_headers.append(
            header::SET_COOKIE,
            flow_cookie(
                &binding,
                FLOW_TTL.num_seconds(),
                state.server.secure_cookies(),
            ),
        );
    }
    Ok(request.url)
}

/// Start signing in with a provider: redirects (302) to its authorization page with
/// `state`, PKCE (S256) and, for Google and Microsoft, an OpenID Connect nonce. When the
/// provider cannot be reached, redirects (303) to `/login?oauthError=...`.
#[utoipa::path(get, path = "/api/auth/oauth/{provider}", tag = "auth", params(
        ("provider" = String, Path, description = "`google`, `github` or `microsoft`"), StartQuery),
    responses((status = 302, description = "To the provider"), (status = 303, description = "Provider unreachable: to the sign-in page with a message"),
        (status = 400, description = "redirectUri is not a loopback http URI", body = ErrorBody),
        (status = 404, description = "Provider not configured", body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(provider = %code))]
async fn start(
    State(state): State<AppState>,
    ApiPath(code): ApiPath<String>,
    ApiQuery(q): ApiQuery<StartQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let provider = configured(&state, &code)?;
    let client_redirect = q
        .redirect_uri
        .as_deref()
        .map(loopback_redirect)
        .transpose()?;
    let mut out = HeaderMap::new();
    let target = match begin_flow(
        &state,
        provider,
        &headers,
        &mut out,
        None,
        client_redirect.clone(),
    )
    .await
    {
        Ok(url) => url,
        Err(e) => {
            let landing = Landing {
                client_redirect: client_redirect.as_deref(),
                link: false,
            };
            return Ok(landing.failure(&e.to_string()));
        }
    };
    let mut response = (StatusCode::FOUND, [(header::LOCATION, target)]).into_response();
    response.headers_mut().extend(out);
    Ok(response)
}

/// Where a flow's outcome is shown.
struct Landing<'a> {
    client_redirect: Option<&'a str>,
    link: bool,
}

impl Landing<'_> {
    /// 303 to the page that shows `message`.
    fn failure(&self, message: &str) -> Response {
        let location = match self.client_redirect {
            Some(uri) => with_query(
                uri,
                &[("error", "access_denied"), ("error_description", message)],
            ),
            None if self.link => with_query(ACCOUNT, &[("oauthError", message)]),
            None => with_query("/login", &[("oauthError", message)]),
        };
        see_other(&location)
    }
}

fn with_query(base: &str, pairs: &[(&str, &str)]) -> String {
    let query: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}{query}")
}

fn see_other(location: &str) -> Response {
    (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, location.to_string())],
    )
        .into_response()
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct CallbackQuery {
    /// The authorization code.
    code: Option<String>,
    /// The state sent in the authorization request.
    state: Option<String>,
    /// The provider's error code (e.g. `access_denied`: consent refused).
    error: Option<String>,
    /// The provider's error text (not shown: it is the provider's words).
    #[allow(dead_code)]
    error_description: Option<String>,
}

/// The provider's redirect back: signs in (303 to the dashboard with the session
/// cookies), connects the provider to the signed-in account (303 to `/dashboard/account?linked=`),
/// or hands a native client a one-time code. Every failure is a 303 with a message
/// (`/login?oauthError=`, `/dashboard/account?oauthError=`, or the client's `?error=`).
#[utoipa::path(get, path = "/api/auth/oauth/{provider}/callback", tag = "auth", params(
        ("provider" = String, Path, description = "`google`, `github` or `microsoft`"), CallbackQuery),
    responses((status = 303, description = "To the dashboard, the account page, the client's redirect URI, or the sign-in page with a message"), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(provider = %code, user.id))]
async fn callback(
    State(state): State<AppState>,
    ApiPath(code): ApiPath<String>,
    ApiQuery(q): ApiQuery<CallbackQuery>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let anonymous = Landing {
        client_redirect: None,
        link: false,
    };
    let Some(provider) = Provider::parse(&code).filter(|p| state.oauth.is_configured(*p)) else {
        return Ok(anonymous.failure("This sign-in provider is not configured"));
    };
    let Some(flow_state) = q.state.as_deref().filter(|s| !s.is_empty()) else {
        return Ok(anonymous.failure("The sign-in answer had no state; start again"));
    };
    // Taken before anything else, so that a state works once whatever happens next.
    let Some(flow) = state
        .store
        .take_oauth_flow(&keys::sha256_hex(flow_state))
        .await?
    else {
        return Ok(
            anonymous.failure("This sign-in link has expired or was already used; start again")
        );
    };
    let landing = Landing {
        client_redirect: flow.client_redirect.as_deref(),
        link: flow.link_user_id.is_some(),
    };
    let now = state.clock.now();
    let same_browser = cookies::get(&headers, FLOW_COOKIE)
        .is_some_and(|b| keys::constant_time_eq(&keys::sha256_hex(&b), &flow.browser_hash));
    if flow.provider != provider || flow.expires_at <= now || !same_browser {
        return Ok(landing
            .failure("This sign-in was started in another browser or has expired; start again"));
    }
    if let Some(error) = q.error.as_deref() {
        let message = if error == "access_denied" {
            format!("Sign-in with {} was cancelled", provider.name())
        } else {
            format!(
                "{} reported an error ({}); start again",
                provider.name(),
                crate::auth::oauth::safe_text(error)
            )
        };
        return Ok(landing.failure(&message));
    }
    let Some(auth_code) = q.code.as_deref().filter(|c| !c.is_empty()) else {
        return Ok(landing.failure("The sign-in answer had no code; start again"));
    };
    let identity = match state
        .oauth
        .identity(
            provider,
            auth_code,
            &flow.pkce_verifier,
            flow.nonce.as_deref(),
        )
        .await
    {
        Ok(identity) => identity,
        Err(e) => {
            tracing::info!(error = %e, "third-party sign-in failed");
            return Ok(landing.failure(&e.to_string()));
        }
    };
    if let Some(user_id) = &flow.link_user_id {
        return Ok(match connect(&state, provider, &identity, user_id).await? {
            Ok(()) => see_other(&with_query(ACCOUNT, &[("linked", provider.code())])),
            Err(message) => landing.failure(&message),
        });
    }
    let user = match account_for(&state, provider, &identity).await? {
        Ok(user) => user,
        Err(message) => return Ok(landing.failure(&message)),
    };
    tracing::Span::current().record("user.id", user.id.as_str());
    if let Some(uri) = &flow.client_redirect {
        let code = keys::random_token();
        state
            .store
            .create_exchange_code(&ExchangeCodeRecord {
                code_hash: keys::sha256_hex(&code),
                user_id: user.id.clone(),
                expires_at: now + EXCHANGE_TTL,
                created_at: now,
            })
            .await?;
        return Ok(see_other(&with_query(uri, &[("code", code.as_str())])));
    }
    let issued = state
        .auth
        .start_session(&user.id, user_agent(&headers), Some(ip))
        .await?;
    let mut response = see_other(DASHBOARD);
    let secure = state.server.secure_cookies();
    cookies::set_session(response.headers_mut(), &issued, secure);
    response
        .headers_mut()
        .append(header::SET_COOKIE, flow_cookie("", 0, secure));
    Ok(response)
}

fn user_agent(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The account `identity` signs into: its connected account, or a new verified account.
/// `Err(message)` when the sign-in must be refused.
async fn account_for(
    state: &AppState,
    provider: Provider,
    identity: &ProviderIdentity,
) -> ApiResult<Result<UserRecord, String>> {
    if let Some(linked) = state.store.identity(provider, &identity.subject).await? {
        return Ok(state
            .store
            .user_by_id(&linked.user_id)
            .await?
            .ok_or_else(|| "This account no longer exists".to_string()));
    }
    if !identity.email_verified {
        return Ok(Err(format!(
            "Your {} email address is not verified. Verify it with {} first, or sign up with email and password",
            provider.name(),
            provider.name()
        )));
    }
    let Ok(email) = Email::parse(&identity.email) else {
        return Ok(Err(format!(
            "{} gave an email address AgentChat cannot use",
            provider.name()
        )));
    };
    if state.store.user_by_email(&email).await?.is_some() {
        return Ok(Err(existing_account_message(provider)));
    }
    let now = state.clock.now();
    let user_id = UserId::new();
    let name: String = identity.name.trim().chars().take(200).collect();
    let created = state
        .store
        .create_user_with_identity(
            NewUser {
                id: user_id.clone(),
                email: email.clone(),
                name: if name.is_empty() {
                    email.as_str().into()
                } else {
                    name
                },
                password_hash: None,
                company: None,
                country: None,
                phone: None,
                email_verified: true,
                now,
            },
            &IdentityRecord {
                provider,
                subject: identity.subject.clone(),
                user_id,
                email: email.as_str().into(),
                created_at: now,
            },
        )
        .await;
    match created {
        Ok(user) => Ok(Ok(user)),
        // A concurrent sign-in or signup took the email or the identity.
        Err(StoreError::Conflict(_)) => Ok(Err(existing_account_message(provider))),
        Err(e) => Err(e.into()),
    }
}

fn existing_account_message(provider: Provider) -> String {
    format!(
        "An account with this email address already exists. Sign in with your password, then connect {} from your account page",
        provider.name()
    )
}

/// Connects `identity` to the signed-in `user_id`. `Err(message)` when it cannot be.
async fn connect(
    state: &AppState,
    provider: Provider,
    identity: &ProviderIdentity,
    user_id: &UserId,
) -> ApiResult<Result<(), String>> {
    if let Some(linked) = state.store.identity(provider, &identity.subject).await? {
        return Ok(if &linked.user_id == user_id {
            Ok(())
        } else {
            Err(format!(
                "This {} account is already connected to another AgentChat account",
                provider.name()
            ))
        });
    }
    if !identity.email_verified {
        return Ok(Err(format!(
            "Your {} email address is not verified. Verify it with {} first",
            provider.name(),
            provider.name()
        )));
    }
    let linked = state
        .store
        .link_identity(&IdentityRecord {
            provider,
            subject: identity.subject.clone(),
            user_id: user_id.clone(),
            email: identity.email.clone(),
            created_at: state.clock.now(),
        })
        .await;
    match linked {
        Ok(()) => Ok(Ok(())),
        Err(StoreError::Conflict(_)) => Ok(Err(format!(
            "Another {} account is already connected; disconnect it first",
            provider.name()
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Trade the one-time code a native client received on its loopback redirect URI for a
/// token pair. The code works once, for 60 seconds.
#[utoipa::path(post, path = "/api/auth/oauth/exchange", tag = "auth", request_body = OAuthExchangeRequest,
    responses((status = 200, body = LoginResponse), (status = 400, description = "Unknown, used or expired code", body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id))]
async fn exchange(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    ApiJson(body): ApiJson<OAuthExchangeRequest>,
) -> ApiResult<Json<LoginResponse>> {
    let now = state.clock.now();
    let user_id = state
        .store
        .take_exchange_code(&keys::sha256_hex(body.code.trim()), now)
        .await?
        .ok_or_else(|| {
            ApiError::bad_request(
                "This sign-in code is invalid, already used or expired; sign in again",
            )
        })?;
    let user = state
        .store
        .user_by_id(&user_id)
        .await?
        .ok_or_else(|| ApiError::bad_request("This account no longer exists"))?;
    tracing::Span::current().record("user.id", user.id.as_str());
    let issued = state
        .auth
        .start_session(&user.id, user_agent(&headers), Some(ip))
        .await?;
    Ok(Json(LoginResponse {
        success: true,
        user: UserSummary {
            id: user.id.into_string(),
            email: user.email,
            name: user.name,
        },
        tokens: issued.tokens,
    }))
}

/// Start connecting a provider to the signed-in account: answers the URL to send the
/// browser to (and sets the flow's browser-binding cookie). Sessions only.
#[utoipa::path(post, path = "/api/auth/oauth/{provider}/link", tag = "auth", security(("bearer" = [])),
    params(("provider" = String, Path, description = "`google`, `github` or `microsoft`")),
    responses((status = 200, body = OAuthLinkResponse), (status = 401, body = ErrorBody),
        (status = 403, description = "API keys cannot manage the account", body = ErrorBody),
        (status = 404, description = "Provider not configured", body = ErrorBody),
        (status = 502, description = "Provider unreachable", body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, provider = %code))]
async fn link(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(code): ApiPath<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    principal.require_session()?;
    let provider = configured(&state, &code)?;
    let mut out = HeaderMap::new();
    let url = begin_flow(
        &state,
        provider,
        &headers,
        &mut out,
        Some(principal.user_id.clone()),
        None,
    )
    .await
    .map_err(|e| ApiError::Status {
        status: StatusCode::BAD_GATEWAY,
        message: e.to_string(),
    })?;
    let mut response = Json(OAuthLinkResponse { url }).into_response();
    response.headers_mut().extend(out);
    Ok(response)
}

/// Disconnect a provider from the signed-in account, as long as another way to sign in
/// (a password or another provider) remains. Sessions only.
#[utoipa::path(delete, path = "/api/auth/oauth/{provider}/link", tag = "auth", security(("bearer" = [])),
    params(("provider" = String, Path, description = "`google`, `github` or `microsoft`")),
    responses((status = 200, body = SuccessResponse), (status = 401, body = ErrorBody),
        (status = 403, description = "API keys cannot manage the account", body = ErrorBody),
        (status = 404, description = "Provider not connected", body = ErrorBody),
        (status = 409, description = "The account's only way to sign in", body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, provider = %code))]
async fn unlink(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(code): ApiPath<String>,
) -> ApiResult<Json<SuccessResponse>> {
    principal.require_session()?;
    let provider = Provider::parse(&code)
        .ok_or_else(|| ApiError::NotFound(format!("Unknown sign-in provider '{code}'")))?;
    match state
        .store
        .unlink_identity(&principal.user_id, provider)
        .await
    {
        Ok(()) => Ok(Json(SuccessResponse { success: true })),
        Err(StoreError::NotFound) => Err(ApiError::NotFound(format!(
            "{} is not connected to this account",
            provider.name()
        ))),
        Err(StoreError::Conflict(_)) => Err(ApiError::Conflict(format!(
            "{} is this account's only way to sign in: set a password (forgot password) or connect another provider first",
            provider.name()
        ))),
        Err(e) => Err(e.into()),
    }
}

/// How the signed-in account can sign in: connected providers and whether it has a
/// password. Sessions only.
#[utoipa::path(get, path = "/api/auth/identities", tag = "auth", security(("bearer" = [])),
    responses((status = 200, body = IdentitiesResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id))]
async fn identities(
    State(state): State<AppState>,
    Auth(principal): Auth,
) -> ApiResult<Json<IdentitiesResponse>> {
    principal.require_session()?;
    let user = state
        .store
        .user_by_id(&principal.user_id)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    let identities = state
        .store
        .identities(&principal.user_id)
        .await?
        .into_iter()
        .map(|i| LinkedIdentity {
            name: i.provider.name().into(),
            provider: i.provider.code().into(),
            email: i.email,
            created_at: iso(i.created_at),
        })
        .collect();
    Ok(Json(IdentitiesResponse {
        identities,
        has_password: user.password_hash.is_some(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_http_redirects_are_accepted() {
        for ok in [
            "http://127.0.0.1:8400/cb",
            "http://[::1]:9000/",
            "http://localhost:1234/done?x=1",
        ] {
            assert!(loopback_redirect(ok).is_ok(), "{ok}");
        }
        for bad in [
            "https://127.0.0.1/cb",
            "http://example.com/cb",
            "http://10.0.0.1/cb",
            "http://127.0.0.1/cb#frag",
            "http://user@127.0.0.1/cb",
            "javascript:alert(1)",
            "/dashboard",
        ] {
            assert!(loopback_redirect(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn failure_messages_are_query_encoded() {
        assert_eq!(
            with_query("/login", &[("oauthError", "a b&c")]),
            "/login?oauthError=a+b%26c"
        );
        assert_eq!(
            with_query("http://127.0.0.1:1/cb?x=1", &[("code", "z")]),
            "http://127.0.0.1:1/cb?x=1&code=z"
        );
    }
}
