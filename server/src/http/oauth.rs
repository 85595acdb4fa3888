//! `/api/auth/oauth/*` and `/api/auth/identities`: sign-in with GitHub, Google and
//! Microsoft (docs/api.md § Auth). A flow stores the hashed `state`, PKCE verifier, nonce
//! and browser-binding cookie hash, and works once, for 10 minutes, in the browser that
//! started it. An existing email is never connected silently, and an unverified provider
//! email is refused; every failure redirects with a message and creates nothing.

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
    accounts::{Callback, CallbackOutcome, Client, FLOW_TTL},
    auth::{
        keys,
        oauth::{OAuthError, OAuthProvider},
    },
    http::error::{ApiError, ApiResult},
    ids::UserId,
    views::iso,
};

/// The browser-binding cookie of a flow (httpOnly, SameSite=Lax so that it comes back on
/// the provider's top-level redirect, path `/api/auth/oauth`).
pub const FLOW_COOKIE: &str = "ac_oauth";
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
fn configured(state: &AppState, code: &str) -> ApiResult<OAuthProvider> {
    OAuthProvider::parse(code)
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

/// Starts a flow and returns the provider URL, setting the binding cookie on
/// `response_headers` when the browser has none.
async fn begin_flow(
    state: &AppState,
    provider: OAuthProvider,
    headers: &HeaderMap,
    response_headers: &mut HeaderMap,
    link_user_id: Option<UserId>,
    client_redirect: Option<String>,
) -> Result<String, OAuthError> {
    let (binding, new) = browser_binding(headers);
    let url = state
        .accounts
        .begin_flow(provider, &binding, link_user_id, client_redirect)
        .await?;
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
    Ok(url)
}

/// Start signing in with a provider: redirects (302) to its authorization page with
/// `state`, PKCE (S256) and, for Google and Microsoft, an OpenID Connect nonce. When the
/// provider cannot be reached, redirects (303) to `/login?oauthError=...`.
#[utoipa::path(get, path = "/api/auth/oauth/{provider}", tag = "auth", params(
        ("provider" = String, Path, description = "`google`, `github` or `microsoft`"), StartQuery),
    responses((status = 302, description = "To the provider"), (status = 303, description = "OAuthProvider unreachable: to the sign-in page with a message"),
        (status = 400, description = "redirectUri is not a loopback http URI", body = ErrorBody),
        (status = 404, description = "OAuthProvider not configured", body = ErrorBody), RateLimited))]
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
    let Some(provider) = OAuthProvider::parse(&code).filter(|p| state.oauth.is_configured(*p))
    else {
        let anonymous = Landing {
            client_redirect: None,
            link: false,
        };
        return Ok(anonymous.failure("This sign-in provider is not configured"));
    };
    let outcome = state
        .accounts
        .finish_flow(Callback {
            provider,
            state: q.state.as_deref(),
            code: q.code.as_deref(),
            error: q.error.as_deref(),
            browser_binding: cookies::get(&headers, FLOW_COOKIE),
            client: Client {
                ip,
                user_agent: user_agent(&headers),
            },
        })
        .await?;
    Ok(match outcome {
        Err(refusal) => Landing {
            client_redirect: refusal.client_redirect.as_deref(),
            link: refusal.connecting,
        }
        .failure(&refusal.message),
        Ok(CallbackOutcome::Connected(provider)) => {
            see_other(&with_query(ACCOUNT, &[("linked", provider.code())]))
        }
        Ok(CallbackOutcome::ExchangeCode { redirect_uri, code }) => {
            see_other(&with_query(&redirect_uri, &[("code", code.as_str())]))
        }
        Ok(CallbackOutcome::SignedIn(issued)) => {
            let mut response = see_other(DASHBOARD);
            let secure = state.server.secure_cookies();
            cookies::set_session(response.headers_mut(), &issued, secure);
            response
                .headers_mut()
                .append(header::SET_COOKIE, flow_cookie("", 0, secure));
            response
        }
    })
}

fn user_agent(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
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
    let client = Client {
        ip,
        user_agent: user_agent(&headers),
    };
    let (user, issued) = state.accounts.exchange(body.code.trim(), client).await?;
    tracing::Span::current().record("user.id", user.id.as_str());
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
        (status = 404, description = "OAuthProvider not configured", body = ErrorBody),
        (status = 502, description = "OAuthProvider unreachable", body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
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
        (status = 404, description = "OAuthProvider not connected", body = ErrorBody),
        (status = 409, description = "The account's only way to sign in", body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, provider = %code))]
async fn unlink(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(code): ApiPath<String>,
) -> ApiResult<Json<SuccessResponse>> {
    principal.require_session()?;
    let provider = OAuthProvider::parse(&code)
        .ok_or_else(|| ApiError::NotFound(format!("Unknown sign-in provider '{code}'")))?;
    state
        .accounts
        .disconnect(&principal.user_id, provider)
        .await?;
    Ok(Json(SuccessResponse { success: true }))
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
    let (identities, has_password) = state.accounts.sign_in_methods(&principal.user_id).await?;
    let identities = identities
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
        has_password,
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
