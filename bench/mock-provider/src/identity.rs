//! Mock identity providers: a GitHub-shaped OAuth 2.0 server and OpenID Connect servers shaped
//! like Google and Microsoft, for testing "Sign in with …" without the internet.
//!
//! A [`MockIdp`] is one HTTP server on its own port. What it enforces, and where each rule
//! comes from:
//!
//! - **Authorization endpoint** (GitHub `GET /login/oauth/authorize`, OIDC
//!   `GET {issuer}/authorize`): `client_id` must be the configured one and `redirect_uri` an
//!   absolute `http`/`https` URL without fragment (RFC 6749 §3.1.2); an invalid client or
//!   redirect URI is answered with a 400 HTML page and never redirected to (RFC 6749
//!   §4.1.2.1). `state` is required (by this mock, stricter than RFC 6749 §4.1.1 which only
//!   recommends it), and so is PKCE with `code_challenge_method=S256` (RFC 7636 §4.3; `plain`
//!   and a missing challenge are refused). OIDC kinds also require `response_type=code`, a
//!   `scope` containing `openid` (OpenID Connect Core 1.0 §3.1.2.1) and a `nonce` (optional in
//!   the code flow of the spec, required by this mock). Every other defect is also answered
//!   with a 400 page rather than an error redirect, a simplification. Parameters may not be
//!   repeated (RFC 6749 §3.1).
//! - **Consent**: with [`MockIdp::set_auto_approve`]`(false)` the GET answers an HTML page
//!   with an "Authorize" and a "Cancel" button, each in a form that POSTs the same parameters
//!   back with `decision=allow` or `decision=deny`. A denial (or [`MockIdp::set_deny`])
//!   redirects with `error=access_denied` and the `state` (RFC 6749 §4.1.2.1); an approval
//!   redirects with a single-use `code` valid [`DEFAULT_CODE_LIFETIME`] and the `state`
//!   (RFC 6749 §4.1.2), keeping any query the redirect URI already had (RFC 6749 §3.1.2).
//! - **Token endpoint** (GitHub `POST /login/oauth/access_token`, OIDC `POST {issuer}/token`):
//!   a form-encoded body (RFC 6749 §4.1.3) with `grant_type=authorization_code`, `code`,
//!   `redirect_uri` and `code_verifier`. The client authenticates with HTTP Basic
//!   (`client_secret_basic`, credentials form-encoded then Base64, RFC 6749 §2.3.1) or with
//!   `client_id` + `client_secret` form fields (`client_secret_post`); using both is refused
//!   (RFC 6749 §2.3). Errors are RFC 6749 §5.2 JSON: 401 `invalid_client` for a bad client;
//!   400 `invalid_grant` for an unknown, expired, reused or foreign code, a different
//!   `redirect_uri`, or a `code_verifier` whose `BASE64URL(SHA256(verifier))` is not the
//!   challenge (RFC 7636 §4.6). A second use of a code also revokes the access tokens issued
//!   from it (RFC 6749 §4.1.2, §10.5). A failed exchange does not consume the code. Answers
//!   carry `Cache-Control: no-store` (RFC 6749 §5.1). GitHub answers JSON when the request
//!   accepts `application/json` and a form-encoded body otherwise, as GitHub's "Authorizing
//!   OAuth apps" documentation describes; unlike the real GitHub (which answers 200 with
//!   `bad_verification_code`), errors use RFC 6749 status codes.
//! - **GitHub API** (under [`MockIdp::api_url`]): `GET /api/user` and `GET /api/user/emails`
//!   need a `User-Agent` header (403 otherwise, as GitHub's REST API does) and an access token
//!   as `Authorization: Bearer …` or `token …` (401 `Bad credentials` otherwise).
//!   `/api/user/emails` also needs the `user:email` (or `user`) scope, 404 otherwise, as on
//!   GitHub.
//! - **OpenID Connect** (OpenID Connect Core 1.0 §3.1, Discovery 1.0 §4): discovery at
//!   `{issuer}/.well-known/openid-configuration`, keys at `{issuer}/jwks` (one RS256 key with a
//!   `kid`), user info at `{issuer}/userinfo`, and the token answer carries an RS256 `id_token`
//!   (claims in [`MockIdp::set_id_token_tamper`]).
//!
//! The RSA keys are generated once per process (2048 bits, slow in debug builds) by the first
//! OIDC server started.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use hyper_util::rt::TokioIo;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tower::ServiceExt;
use url::Url;

/// The tenant id of Microsoft personal (consumer) accounts: the `tid` claim of every ID token
/// a [`IdpKind::Microsoft`] mock issues.
pub const MICROSOFT_CONSUMER_TENANT: &str = "9188040d-6c67-4c5b-b112-36a304b66dad";

/// How long an authorization code can be redeemed after it is issued, unless changed with
/// [`MockIdp::set_code_lifetime`] (RFC 6749 §4.1.2 recommends at most 10 minutes).
pub const DEFAULT_CODE_LIFETIME: Duration = Duration::from_secs(600);

/// Seconds between an ID token's `iat` and `exp`, and the `expires_in` of OIDC access tokens.
pub const ID_TOKEN_LIFETIME_SECS: u64 = 3600;

/// The second, non-primary address of the identity's GitHub account in `/api/user/emails`.
pub const GITHUB_SECONDARY_EMAIL: &str = "other@example.test";

/// Which provider a [`MockIdp`] imitates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdpKind {
    /// GitHub OAuth apps: plain OAuth 2.0 (no ID token) plus the REST API's `/user` and
    /// `/user/emails`.
    Github,
    /// Google: OpenID Connect with issuer [`MockIdp::base_url`], ID tokens with
    /// `email_verified`.
    Google,
    /// Microsoft identity platform, multi-tenant `common` endpoint: issuer URL
    /// `{base}/common/v2.0`, discovery `issuer` the template `{base}/{tenantid}/v2.0`, ID tokens
    /// with `tid` = [`MICROSOFT_CONSUMER_TENANT`] and `iss` = `{base}/{tid}/v2.0`.
    Microsoft,
}

impl IdpKind {
    /// Whether this kind speaks OpenID Connect (issues ID tokens).
    pub fn is_oidc(self) -> bool {
        !matches!(self, IdpKind::Github)
    }
}

/// The user who "signs in" at the mock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MockIdentity {
    /// The account id: GitHub's numeric user id as a decimal string (answered as a JSON number
    /// by `/api/user` when it parses as one), the OIDC `sub` claim.
    pub subject: String,
    /// The primary email address (`email` claim; primary entry of GitHub's `/user/emails`).
    pub email: String,
    /// Whether the provider has verified `email`.
    pub email_verified: bool,
    /// The display name (`name` claim, GitHub `name`).
    pub name: String,
    /// The GitHub login (user name); OIDC kinds ignore it.
    pub login: String,
}

impl Default for MockIdentity {
    /// A verified test user: subject `4242`, `octo@example.test`, login `octo-tester`, name
    /// `Octo Tester`.
    fn default() -> Self {
        Self {
            subject: "4242".to_owned(),
            email: "octo@example.test".to_owned(),
            email_verified: true,
            name: "Octo Tester".to_owned(),
            login: "octo-tester".to_owned(),
        }
    }
}

/// A deliberate defect in the ID tokens a mock OIDC server issues, to test that the client's
/// validation (OpenID Connect Core 1.0 §3.1.3.7) rejects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdTokenTamper {
    /// `nonce` is not the one sent to the authorization endpoint.
    WrongNonce,
    /// `aud` is another client id (`other-client-id`).
    WrongAudience,
    /// `iss` is not the issuer: `{base}/wrong-issuer` for Google; for Microsoft an issuer of
    /// another tenant (`{base}/00000000-0000-0000-0000-000000000001/v2.0`) while `tid` stays
    /// [`MICROSOFT_CONSUMER_TENANT`], so the template check (`iss` = template with `tid`)
    /// fails.
    WrongIssuer,
    /// `iat` two hours and `exp` one hour in the past.
    Expired,
    /// Signed by a different RSA key that carries the same `kid` as the published one.
    BadSignature,
    /// An unsecured JWT: header `{"alg":"none","typ":"JWT"}` and an empty signature.
    NoneAlgorithm,
}

/// The parameters a client sent to the authorization endpoint, as received (each `None` when
/// absent), recorded before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizeRequest {
    /// `client_id`.
    pub client_id: Option<String>,
    /// `redirect_uri`.
    pub redirect_uri: Option<String>,
    /// `scope` (space-separated).
    pub scope: Option<String>,
    /// `state`.
    pub state: Option<String>,
    /// `code_challenge` (RFC 7636 §4.2).
    pub code_challenge: Option<String>,
    /// `code_challenge_method` (`S256` is the only accepted value).
    pub code_challenge_method: Option<String>,
    /// `nonce` (OpenID Connect Core 1.0 §3.1.2.1).
    pub nonce: Option<String>,
    /// `response_type`.
    pub response_type: Option<String>,
}

impl AuthorizeRequest {
    fn from_params(params: &HashMap<String, String>) -> Self {
        let get = |name: &str| params.get(name).cloned();
        Self {
            client_id: get("client_id"),
            redirect_uri: get("redirect_uri"),
            scope: get("scope"),
            state: get("state"),
            code_challenge: get("code_challenge"),
            code_challenge_method: get("code_challenge_method"),
            nonce: get("nonce"),
            response_type: get("response_type"),
        }
    }
}

/// A running mock identity provider on its own port. The server stops when this value is
/// dropped (open connections are closed too).
///
/// ```no_run
/// # async fn demo() -> anyhow::Result<()> {
/// use mock_provider::{IdpKind, MockIdp};
///
/// let idp = MockIdp::start(IdpKind::Google, "client-1", "secret-1").await?;
/// let issuer = idp.issuer(); // discovery at {issuer}/.well-known/openid-configuration
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MockIdp {
    /// The address the server listens on.
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl MockIdp {
    /// Starts a mock of `kind` on `127.0.0.1` with a port chosen by the system, accepting the
    /// client `client_id` authenticated by `client_secret`. It approves at once
    /// ([`Self::set_auto_approve`]) and signs in [`MockIdentity::default`].
    ///
    /// # Errors
    ///
    /// When the port cannot be bound or (OIDC kinds) the RSA key cannot be generated.
    pub async fn start(
        kind: IdpKind,
        client_id: &str,
        client_secret: &str,
    ) -> anyhow::Result<Self> {
        Self::start_on(
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            kind,
            client_id,
            client_secret,
        )
        .await
    }

    /// Like [`Self::start`], listening on `addr` (port 0 lets the system choose).
    ///
    /// # Errors
    ///
    /// When `addr` cannot be bound or (OIDC kinds) the RSA key cannot be generated.
    pub async fn start_on(
        addr: SocketAddr,
        kind: IdpKind,
        client_id: &str,
        client_secret: &str,
    ) -> anyhow::Result<Self> {
        if kind.is_oidc() {
            // Both keys at once: the wrong one is needed only for `BadSignature`, but making
            // it later would block a request for seconds.
            let primary = tokio::task::spawn_blocking(|| {
                primary_key();
            });
            let wrong = tokio::task::spawn_blocking(|| {
                wrong_key();
            });
            primary.await?;
            wrong.await?;
        }
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let ip = match addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let base = format!("http://{}", SocketAddr::new(ip, addr.port()));
        let shared = Arc::new(Shared {
            kind,
            client_id: client_id.to_owned(),
            client_secret: client_secret.to_owned(),
            base,
            state: Mutex::new(IdpState {
                identity: MockIdentity::default(),
                auto_approve: true,
                deny: false,
                token_failure: None,
                tamper: None,
                github_public_email: false,
                code_lifetime: DEFAULT_CODE_LIFETIME,
                last_authorize: None,
                codes: HashMap::new(),
                tokens: HashMap::new(),
                token_requests: 0,
                codes_redeemed: 0,
            }),
        });
        let task = tokio::spawn(serve(listener, router(Arc::clone(&shared))));
        Ok(Self { addr, shared, task })
    }

    /// Sets who signs in at later authorizations (codes already issued keep their identity).
    pub fn set_identity(&self, identity: MockIdentity) {
        self.shared.lock().identity = identity;
    }

    /// `true` (the default): `GET` on the authorization endpoint redirects at once. `false`:
    /// it answers the HTML consent page with "Authorize" and "Cancel" buttons.
    pub fn set_auto_approve(&self, yes: bool) {
        self.shared.lock().auto_approve = yes;
    }

    /// `true`: the user denies consent; the authorization endpoint redirects with
    /// `error=access_denied`, `error_description` and `state` (RFC 6749 §4.1.2.1), whatever
    /// button is clicked.
    pub fn set_deny(&self, yes: bool) {
        self.shared.lock().deny = yes;
    }

    /// `Some(status)`: every later token request is answered with `status` (400–599; other
    /// values give 500) and the RFC 6749 §5.2 error JSON, before any other check: error
    /// `invalid_client` for 401, `invalid_grant` for 400, `temporarily_unavailable` for 503,
    /// `server_error` otherwise. `None`: answer normally again.
    pub fn set_token_failure(&self, status: Option<u16>) {
        self.shared.lock().token_failure = status;
    }

    /// Makes later ID tokens defective (OIDC kinds only; GitHub issues none), or correct again
    /// with `None`.
    ///
    /// A correct ID token is an RS256 JWT whose header carries the `kid` of the key at
    /// `{issuer}/jwks`, with the claims `iss`, `aud` (the client id), `sub`, `iat`, `exp`
    /// (`iat` + [`ID_TOKEN_LIFETIME_SECS`], seconds since the Unix epoch), `nonce` (from the
    /// authorization request), `email` and `name`; Google adds `email_verified` (a bool);
    /// Microsoft adds `tid` and, like the real platform, has no `email_verified` claim except
    /// that this mock emits `"email_verified": false` when the identity's address is not
    /// verified, so a client can be tested against an unverified Microsoft address.
    pub fn set_id_token_tamper(&self, tamper: Option<IdTokenTamper>) {
        self.shared.lock().tamper = tamper;
    }

    /// GitHub only: `true` makes `/api/user` show the identity's email as the public email;
    /// `false` (the default) answers `"email": null`, as for a user who keeps it private, so
    /// the client must call `/api/user/emails`.
    pub fn set_github_public_email(&self, yes: bool) {
        self.shared.lock().github_public_email = yes;
    }

    /// Sets how long later-issued codes can be redeemed (default [`DEFAULT_CODE_LIFETIME`]);
    /// `Duration::ZERO` makes every code expired on arrival.
    pub fn set_code_lifetime(&self, lifetime: Duration) {
        self.shared.lock().code_lifetime = lifetime;
    }

    /// The kind of provider this mock imitates.
    pub fn kind(&self) -> IdpKind {
        self.shared.kind
    }

    /// `http://127.0.0.1:PORT` (no trailing slash; the loopback address of the same family
    /// when listening on an unspecified address).
    pub fn base_url(&self) -> String {
        self.shared.base.clone()
    }

    /// The authorization endpoint: `{base}/login/oauth/authorize` for GitHub,
    /// `{issuer}/authorize` for OIDC kinds.
    pub fn authorize_url(&self) -> String {
        self.shared.authorize_url()
    }

    /// The token endpoint: `{base}/login/oauth/access_token` for GitHub, `{issuer}/token` for
    /// OIDC kinds.
    pub fn token_url(&self) -> String {
        self.shared.token_url()
    }

    /// GitHub's REST API base: `{base}/api` (so `{base}/api/user`, `{base}/api/user/emails`).
    pub fn api_url(&self) -> String {
        format!("{}/api", self.shared.base)
    }

    /// The issuer URL a client is configured with, whose
    /// `/.well-known/openid-configuration` is the discovery document: `{base}` for Google,
    /// `{base}/common/v2.0` for Microsoft (whose discovery `issuer` is the template
    /// `{base}/{tenantid}/v2.0`). For GitHub, `{base}`.
    pub fn issuer(&self) -> String {
        self.shared.issuer()
    }

    /// The discovery document URL: `{issuer}/.well-known/openid-configuration`.
    pub fn discovery_url(&self) -> String {
        format!("{}/.well-known/openid-configuration", self.shared.issuer())
    }

    /// The JWKS URL: `{issuer}/jwks`.
    pub fn jwks_url(&self) -> String {
        format!("{}/jwks", self.shared.issuer())
    }

    /// The `iss` claim of correct ID tokens: `{base}` for Google,
    /// `{base}/9188040d-6c67-4c5b-b112-36a304b66dad/v2.0` for Microsoft.
    pub fn id_token_issuer(&self) -> String {
        self.shared.token_issuer()
    }

    /// The parameters of the latest `GET` on the authorization endpoint, valid or not.
    pub fn last_authorize_request(&self) -> Option<AuthorizeRequest> {
        self.shared.lock().last_authorize.clone()
    }

    /// The number of token endpoint requests received, whatever their outcome.
    pub fn token_requests(&self) -> usize {
        self.shared.lock().token_requests
    }

    /// The number of successful code exchanges.
    pub fn codes_redeemed(&self) -> usize {
        self.shared.lock().codes_redeemed
    }
}

impl Drop for MockIdp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// State

#[derive(Debug)]
struct Shared {
    kind: IdpKind,
    client_id: String,
    client_secret: String,
    /// `http://127.0.0.1:PORT`.
    base: String,
    state: Mutex<IdpState>,
}

#[derive(Debug)]
struct IdpState {
    identity: MockIdentity,
    auto_approve: bool,
    deny: bool,
    token_failure: Option<u16>,
    tamper: Option<IdTokenTamper>,
    github_public_email: bool,
    code_lifetime: Duration,
    last_authorize: Option<AuthorizeRequest>,
    codes: HashMap<String, CodeGrant>,
    /// Access token → grant.
    tokens: HashMap<String, TokenGrant>,
    token_requests: usize,
    codes_redeemed: usize,
}

#[derive(Debug)]
struct CodeGrant {
    client_id: String,
    redirect_uri: String,
    code_challenge: String,
    nonce: Option<String>,
    scope: String,
    identity: MockIdentity,
    expires: Instant,
    used: bool,
}

#[derive(Debug, Clone)]
struct TokenGrant {
    identity: MockIdentity,
    scope: String,
    /// The code it was issued from, to revoke it when the code is replayed.
    code: String,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, IdpState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The path of the issuer below the base URL.
    fn issuer_path(&self) -> &'static str {
        match self.kind {
            IdpKind::Github | IdpKind::Google => "",
            IdpKind::Microsoft => "/common/v2.0",
        }
    }

    fn issuer(&self) -> String {
        format!("{}{}", self.base, self.issuer_path())
    }

    fn token_issuer(&self) -> String {
        match self.kind {
            IdpKind::Microsoft => format!("{}/{MICROSOFT_CONSUMER_TENANT}/v2.0", self.base),
            IdpKind::Github | IdpKind::Google => self.base.clone(),
        }
    }

    fn authorize_path(&self) -> String {
        match self.kind {
            IdpKind::Github => "/login/oauth/authorize".to_owned(),
            _ => format!("{}/authorize", self.issuer_path()),
        }
    }

    fn token_path(&self) -> String {
        match self.kind {
            IdpKind::Github => "/login/oauth/access_token".to_owned(),
            _ => format!("{}/token", self.issuer_path()),
        }
    }

    fn authorize_url(&self) -> String {
        format!("{}{}", self.base, self.authorize_path())
    }

    fn token_url(&self) -> String {
        format!("{}{}", self.base, self.token_path())
    }
}

// ---------------------------------------------------------------------------------------------
// Keys

struct SigningKey {
    encoding: jsonwebtoken::EncodingKey,
    /// Base64url of the big-endian modulus.
    n: String,
    /// Base64url of the big-endian public exponent.
    e: String,
}

static PRIMARY_KEY: OnceLock<SigningKey> = OnceLock::new();
static WRONG_KEY: OnceLock<SigningKey> = OnceLock::new();

fn primary_key() -> &'static SigningKey {
    PRIMARY_KEY.get_or_init(generate_key)
}

fn wrong_key() -> &'static SigningKey {
    WRONG_KEY.get_or_init(generate_key)
}

fn generate_key() -> SigningKey {
    use rsa::pkcs1::EncodeRsaPrivateKey as _;
    use rsa::traits::PublicKeyParts as _;

    // Neither can fail short of a broken random number generator; a mock may panic then.
    let private = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048)
        .expect("generating an RSA key for the mock identity provider");
    let der = private
        .to_pkcs1_der()
        .expect("encoding the mock identity provider's RSA key");
    SigningKey {
        encoding: jsonwebtoken::EncodingKey::from_rsa_der(der.as_bytes()),
        n: URL_SAFE_NO_PAD.encode(private.n().to_bytes_be()),
        e: URL_SAFE_NO_PAD.encode(private.e().to_bytes_be()),
    }
}

/// The `kid` of the published key: derived from its modulus, so stable for the process.
fn key_id() -> String {
    let digest = Sha256::digest(primary_key().n.as_bytes());
    format!("mock-{}", URL_SAFE_NO_PAD.encode(&digest[..9]))
}

// ---------------------------------------------------------------------------------------------
// Server

/// Accepts connections until the task is aborted; aborting it drops every connection.
async fn serve(listener: TcpListener, router: Router) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => {
                    connections.spawn(serve_connection(tcp, router.clone()));
                }
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve_connection(tcp: TcpStream, router: Router) {
    let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
        router.clone().oneshot(request.map(Body::new))
    });
    if let Err(error) = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(tcp), service)
        .await
    {
        tracing::debug!(%error, "identity connection ended with an error");
    }
}

fn router(shared: Arc<Shared>) -> Router {
    let authorize = get(authorize_get).post(authorize_post);
    let token = axum::routing::post(token);
    let router = Router::new()
        .route(&shared.authorize_path(), authorize)
        .route(&shared.token_path(), token);
    let router = if shared.kind.is_oidc() {
        let issuer_path = shared.issuer_path();
        router
            .route(
                &format!("{issuer_path}/.well-known/openid-configuration"),
                get(discovery),
            )
            .route(&format!("{issuer_path}/jwks"), get(jwks))
            .route(&format!("{issuer_path}/userinfo"), get(userinfo))
    } else {
        router
            .route("/api/user", get(github_user))
            .route("/api/user/emails", get(github_emails))
    };
    router.with_state(shared)
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// Parses form-encoded parameters, refusing repeated names (RFC 6749 §3.1) and dropping
/// empty values (RFC 6749 §3.1: "sent without a value MUST be treated as if they were
/// omitted").
fn parse_params(input: &[u8]) -> Result<HashMap<String, String>, String> {
    let mut params = HashMap::new();
    for (name, value) in url::form_urlencoded::parse(input) {
        if value.is_empty() {
            continue;
        }
        if params
            .insert(name.clone().into_owned(), value.into_owned())
            .is_some()
        {
            return Err(format!("parameter `{name}` is repeated"));
        }
    }
    Ok(params)
}

fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| {
            mime.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
}

/// Random URL-safe text from 32 random bytes.
fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    URL_SAFE_NO_PAD.encode(bytes)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

fn html_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// Decodes `%XX` escapes and `+` (form encoding, RFC 6749 §2.3.1 for Basic credentials).
fn form_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = text.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// The 400 HTML page of a refused authorization request.
fn error_page(message: &str) -> Response {
    let body = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Authorization error</title>\
         </head><body><h1>Authorization error</h1><p id=\"error\">{}</p></body></html>\n",
        html_escape(message)
    );
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

/// A 302 to `url` with `pairs` appended to its query.
fn redirect_with(mut url: Url, pairs: &[(&str, &str)]) -> Response {
    {
        let mut query = url.query_pairs_mut();
        for (name, value) in pairs {
            query.append_pair(name, value);
        }
    }
    (
        StatusCode::FOUND,
        [
            (header::LOCATION, url.as_str()),
            (header::CACHE_CONTROL, "no-store"),
        ],
    )
        .into_response()
}

// ---------------------------------------------------------------------------------------------
// Authorization endpoint

/// A valid authorization request.
struct Authorization {
    redirect: Url,
    redirect_uri: String,
    state: String,
    code_challenge: String,
    nonce: Option<String>,
    scope: String,
}

fn validate_authorize(
    shared: &Shared,
    params: &HashMap<String, String>,
) -> Result<Authorization, String> {
    match params.get("client_id") {
        None => return Err("The `client_id` parameter is missing.".to_owned()),
        Some(id) if *id != shared.client_id => {
            return Err(format!("The client `{id}` is not registered."))
        }
        Some(_) => {}
    }
    let redirect_uri = params
        .get("redirect_uri")
        .ok_or("The `redirect_uri` parameter is missing.")?;
    let redirect = Url::parse(redirect_uri)
        .map_err(|_| format!("The redirect_uri `{redirect_uri}` is not an absolute URL."))?;
    if !matches!(redirect.scheme(), "http" | "https") || redirect.host_str().is_none() {
        return Err(format!(
            "The redirect_uri `{redirect_uri}` is not an http or https URL."
        ));
    }
    if redirect.fragment().is_some() {
        return Err("The redirect_uri must not have a fragment (RFC 6749 §3.1.2).".to_owned());
    }
    if shared.kind.is_oidc() {
        match params.get("response_type").map(String::as_str) {
            Some("code") => {}
            Some(other) => {
                return Err(format!(
                    "The response_type `{other}` is not supported; use `code`."
                ))
            }
            None => return Err("The `response_type` parameter is missing.".to_owned()),
        }
        let scope = params.get("scope").map_or("", String::as_str);
        if !scope.split(' ').any(|s| s == "openid") {
            return Err("The scope must contain `openid`.".to_owned());
        }
        if !params.contains_key("nonce") {
            return Err("The `nonce` parameter is missing.".to_owned());
        }
    }
    let state = params
        .get("state")
        .ok_or("The `state` parameter is missing.")?;
    let code_challenge = params
        .get("code_challenge")
        .ok_or("PKCE is required: the `code_challenge` parameter is missing.")?;
    match params.get("code_challenge_method").map(String::as_str) {
        Some("S256") => {}
        Some(other) => {
            return Err(format!(
                "The code_challenge_method `{other}` is not supported; use `S256`."
            ))
        }
        None => {
            return Err(
                "The `code_challenge_method` parameter is missing (it would mean `plain`, \
                 which is not supported); use `S256`."
                    .to_owned(),
            )
        }
    }
    // RFC 7636 §4.2: BASE64URL(SHA256(verifier)) is 43 characters.
    if code_challenge.len() != 43
        || !code_challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err("The code_challenge is not a base64url SHA-256 digest.".to_owned());
    }
    Ok(Authorization {
        redirect_uri: redirect_uri.clone(),
        redirect,
        state: state.clone(),
        code_challenge: code_challenge.clone(),
        nonce: params.get("nonce").cloned(),
        scope: params.get("scope").cloned().unwrap_or_default(),
    })
}

async fn authorize_get(State(shared): State<Arc<Shared>>, RawQuery(query): RawQuery) -> Response {
    let params = match parse_params(query.unwrap_or_default().as_bytes()) {
        Ok(params) => params,
        Err(message) => return error_page(&message),
    };
    let (auto_approve, deny, identity) = {
        let mut state = shared.lock();
        state.last_authorize = Some(AuthorizeRequest::from_params(&params));
        (state.auto_approve, state.deny, state.identity.clone())
    };
    let authorization = match validate_authorize(&shared, &params) {
        Ok(authorization) => authorization,
        Err(message) => return error_page(&message),
    };
    if auto_approve {
        finish_authorize(&shared, authorization, deny)
    } else {
        consent_page(&shared, &params, &identity)
    }
}

async fn authorize_post(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !is_form(&headers) {
        return error_page("The consent form must be posted form-encoded.");
    }
    let params = match parse_params(&body) {
        Ok(params) => params,
        Err(message) => return error_page(&message),
    };
    let authorization = match validate_authorize(&shared, &params) {
        Ok(authorization) => authorization,
        Err(message) => return error_page(&message),
    };
    let deny = shared.lock().deny;
    match params.get("decision").map(String::as_str) {
        Some("allow") => finish_authorize(&shared, authorization, deny),
        Some("deny") => finish_authorize(&shared, authorization, true),
        _ => error_page("The `decision` must be `allow` or `deny`."),
    }
}

/// Redirects back to the client: an error when denied, a fresh code otherwise.
fn finish_authorize(shared: &Shared, authorization: Authorization, deny: bool) -> Response {
    if deny {
        return redirect_with(
            authorization.redirect,
            &[
                ("error", "access_denied"),
                (
                    "error_description",
                    "The user has denied your application access.",
                ),
                ("state", &authorization.state),
            ],
        );
    }
    let code = random_token();
    {
        let mut state = shared.lock();
        let grant = CodeGrant {
            client_id: shared.client_id.clone(),
            redirect_uri: authorization.redirect_uri,
            code_challenge: authorization.code_challenge,
            nonce: authorization.nonce,
            scope: authorization.scope,
            identity: state.identity.clone(),
            expires: Instant::now() + state.code_lifetime,
            used: false,
        };
        state.codes.insert(code.clone(), grant);
    }
    redirect_with(
        authorization.redirect,
        &[("code", &code), ("state", &authorization.state)],
    )
}

/// The consent page: two forms posting the request back with `decision=allow|deny`.
fn consent_page(
    shared: &Shared,
    params: &HashMap<String, String>,
    identity: &MockIdentity,
) -> Response {
    let mut names: Vec<&String> = params.keys().filter(|name| *name != "decision").collect();
    names.sort();
    let mut hidden = String::new();
    for name in names {
        let _ = writeln!(
            hidden,
            "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
            html_escape(name),
            html_escape(&params[name])
        );
    }
    let provider = match shared.kind {
        IdpKind::Github => "Mock GitHub",
        IdpKind::Google => "Mock Google",
        IdpKind::Microsoft => "Mock Microsoft",
    };
    let app = html_escape(&shared.client_id);
    let action = html_escape(&shared.authorize_path());
    let user = html_escape(if shared.kind == IdpKind::Github {
        &identity.login
    } else {
        &identity.email
    });
    let scope = html_escape(params.get("scope").map_or("", String::as_str));
    let body = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{provider}: authorize {app}</title></head>\n\
         <body>\n<h1>{provider}</h1>\n\
         <p>The application <strong id=\"app-name\">{app}</strong> wants to access your account \
         <strong id=\"account\">{user}</strong> (scope: <code>{scope}</code>).</p>\n\
         <form method=\"post\" action=\"{action}\">\n{hidden}\
         <button type=\"submit\" name=\"decision\" value=\"allow\">Authorize</button>\n</form>\n\
         <form method=\"post\" action=\"{action}\">\n{hidden}\
         <button type=\"submit\" name=\"decision\" value=\"deny\">Cancel</button>\n</form>\n\
         </body></html>\n"
    );
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

// ---------------------------------------------------------------------------------------------
// Token endpoint

/// Whether the answer is JSON (OIDC always; GitHub when the client accepts JSON).
fn wants_json(shared: &Shared, headers: &HeaderMap) -> bool {
    shared.kind.is_oidc()
        || headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .any(|value| value.contains("application/json"))
}

/// A token endpoint answer: `fields` as JSON or, for GitHub clients that do not accept JSON,
/// form-encoded; never cached (RFC 6749 §5.1).
fn token_answer(json: bool, status: StatusCode, fields: Map<String, Value>) -> Response {
    let mut response = if json {
        (status, Json(Value::Object(fields))).into_response()
    } else {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in &fields {
            match value {
                Value::String(text) => form.append_pair(name, text),
                other => form.append_pair(name, &other.to_string()),
            };
        }
        (
            status,
            [(header::CONTENT_TYPE, "application/x-www-form-urlencoded")],
            form.finish(),
        )
            .into_response()
    };
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    response
}

fn token_error(json: bool, status: StatusCode, error: &str, description: &str) -> Response {
    let mut fields = Map::new();
    fields.insert("error".to_owned(), json!(error));
    fields.insert("error_description".to_owned(), json!(description));
    token_answer(json, status, fields)
}

/// The client's credentials from an `Authorization: Basic` header (RFC 6749 §2.3.1; RFC 7617).
/// `Ok(None)` without such a header, `Err(())` when it is malformed.
fn basic_credentials(headers: &HeaderMap) -> Result<Option<(String, String)>, ()> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value.to_str().map_err(|_| ())?;
    let Some((scheme, encoded)) = value.split_once(' ') else {
        return Err(());
    };
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(());
    }
    let decoded = STANDARD.decode(encoded.trim()).map_err(|_| ())?;
    let decoded = String::from_utf8(decoded).map_err(|_| ())?;
    let (id, secret) = decoded.split_once(':').ok_or(())?;
    Ok(Some((
        form_decode(id).ok_or(())?,
        form_decode(secret).ok_or(())?,
    )))
}

async fn token(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let json = wants_json(&shared, &headers);
    let failure = {
        let mut state = shared.lock();
        state.token_requests += 1;
        state.token_failure
    };
    if let Some(status) = failure {
        let status = StatusCode::from_u16(status)
            .ok()
            .filter(|status| status.is_client_error() || status.is_server_error())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let error = match status.as_u16() {
            400 => "invalid_grant",
            401 => "invalid_client",
            503 => "temporarily_unavailable",
            _ => "server_error",
        };
        return token_error(json, status, error, "mock token failure");
    }
    if !is_form(&headers) {
        return token_error(
            json,
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "The body must be application/x-www-form-urlencoded (RFC 6749 §4.1.3).",
        );
    }
    let params = match parse_params(&body) {
        Ok(params) => params,
        Err(message) => {
            return token_error(json, StatusCode::BAD_REQUEST, "invalid_request", &message)
        }
    };

    // Client authentication (RFC 6749 §2.3).
    let invalid_client = |basic: bool| {
        let mut response = token_error(
            json,
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "Client authentication failed.",
        );
        if basic {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"mock-idp\""),
            );
        }
        response
    };
    let basic = match basic_credentials(&headers) {
        Ok(basic) => basic,
        Err(()) => return invalid_client(true),
    };
    let used_basic = basic.is_some();
    let (client_id, client_secret) = match (basic, params.get("client_secret")) {
        (Some(_), Some(_)) => {
            return token_error(
                json,
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "The client used more than one authentication method (RFC 6749 §2.3).",
            )
        }
        (Some((id, secret)), None) => {
            if params
                .get("client_id")
                .is_some_and(|form_id| *form_id != id)
            {
                return invalid_client(true);
            }
            (id, secret)
        }
        (None, Some(secret)) => match params.get("client_id") {
            Some(id) => (id.clone(), secret.clone()),
            None => return invalid_client(false),
        },
        (None, None) => return invalid_client(false),
    };
    if client_id != shared.client_id || client_secret != shared.client_secret {
        return invalid_client(used_basic);
    }

    match params.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {}
        Some(_) => {
            return token_error(
                json,
                StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
                "Only the authorization_code grant is supported.",
            )
        }
        None => {
            return token_error(
                json,
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "The `grant_type` parameter is missing.",
            )
        }
    }
    let Some(code) = params.get("code") else {
        return token_error(
            json,
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "The `code` parameter is missing.",
        );
    };
    let invalid_grant = |description: &str| {
        token_error(json, StatusCode::BAD_REQUEST, "invalid_grant", description)
    };

    let mut state = shared.lock();
    let Some(grant) = state.codes.get(code) else {
        return invalid_grant("The code is unknown.");
    };
    if grant.used {
        // RFC 6749 §4.1.2: a replayed code revokes what it was exchanged for.
        state.tokens.retain(|_, token| token.code != *code);
        return invalid_grant("The code has already been used; its tokens are revoked.");
    }
    if Instant::now() >= grant.expires {
        return invalid_grant("The code has expired.");
    }
    if grant.client_id != client_id {
        return invalid_grant("The code was issued to another client.");
    }
    if params.get("redirect_uri") != Some(&grant.redirect_uri) {
        return invalid_grant("The redirect_uri does not match the authorization request.");
    }
    let Some(verifier) = params.get("code_verifier") else {
        return invalid_grant("The `code_verifier` parameter is missing (PKCE, RFC 7636 §4.5).");
    };
    // RFC 7636 §4.1: 43–128 unreserved characters.
    if !(43..=128).contains(&verifier.len())
        || !verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
    {
        return invalid_grant("The code_verifier is malformed (RFC 7636 §4.1).");
    }
    if URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes())) != grant.code_challenge {
        return invalid_grant(
            "The code_verifier does not match the code_challenge (RFC 7636 §4.6).",
        );
    }

    let access_token = match shared.kind {
        IdpKind::Github => format!("gho_{}", random_token()),
        IdpKind::Google | IdpKind::Microsoft => random_token(),
    };
    let identity = grant.identity.clone();
    let scope = grant.scope.clone();
    let nonce = grant.nonce.clone();
    let tamper = state.tamper;
    if let Some(grant) = state.codes.get_mut(code) {
        grant.used = true;
    }
    state.codes_redeemed += 1;
    state.tokens.insert(
        access_token.clone(),
        TokenGrant {
            identity: identity.clone(),
            scope: scope.clone(),
            code: code.clone(),
        },
    );
    drop(state);

    let mut fields = Map::new();
    fields.insert("access_token".to_owned(), json!(access_token));
    match shared.kind {
        IdpKind::Github => {
            fields.insert("token_type".to_owned(), json!("bearer"));
            // GitHub lists the granted scopes separated by commas.
            fields.insert(
                "scope".to_owned(),
                json!(scope
                    .split(' ')
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(",")),
            );
        }
        IdpKind::Google | IdpKind::Microsoft => {
            fields.insert("token_type".to_owned(), json!("Bearer"));
            fields.insert("scope".to_owned(), json!(scope));
            fields.insert("expires_in".to_owned(), json!(ID_TOKEN_LIFETIME_SECS));
            match id_token(&shared, &identity, nonce.as_deref(), tamper) {
                Ok(token) => {
                    fields.insert("id_token".to_owned(), json!(token));
                }
                Err(error) => {
                    return token_error(
                        json,
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "server_error",
                        &format!("signing the ID token failed: {error}"),
                    )
                }
            }
        }
    }
    token_answer(json, StatusCode::OK, fields)
}

/// Builds the ID token (OpenID Connect Core 1.0 §2), defective as `tamper` says.
fn id_token(
    shared: &Shared,
    identity: &MockIdentity,
    nonce: Option<&str>,
    tamper: Option<IdTokenTamper>,
) -> anyhow::Result<String> {
    let now = unix_now();
    let (iat, exp) = if tamper == Some(IdTokenTamper::Expired) {
        (now - 7200, now - 3600)
    } else {
        (now, now + ID_TOKEN_LIFETIME_SECS)
    };
    let issuer = match (tamper, shared.kind) {
        (Some(IdTokenTamper::WrongIssuer), IdpKind::Microsoft) => {
            format!("{}/00000000-0000-0000-0000-000000000001/v2.0", shared.base)
        }
        (Some(IdTokenTamper::WrongIssuer), _) => format!("{}/wrong-issuer", shared.base),
        _ => shared.token_issuer(),
    };
    let audience = if tamper == Some(IdTokenTamper::WrongAudience) {
        "other-client-id".to_owned()
    } else {
        shared.client_id.clone()
    };
    let mut claims = Map::new();
    claims.insert("iss".to_owned(), json!(issuer));
    claims.insert("aud".to_owned(), json!(audience));
    claims.insert("sub".to_owned(), json!(identity.subject));
    claims.insert("iat".to_owned(), json!(iat));
    claims.insert("exp".to_owned(), json!(exp));
    if let Some(nonce) = nonce {
        let nonce = if tamper == Some(IdTokenTamper::WrongNonce) {
            format!("wrong-{nonce}")
        } else {
            nonce.to_owned()
        };
        claims.insert("nonce".to_owned(), json!(nonce));
    }
    claims.insert("email".to_owned(), json!(identity.email));
    claims.insert("name".to_owned(), json!(identity.name));
    match shared.kind {
        IdpKind::Google => {
            claims.insert("email_verified".to_owned(), json!(identity.email_verified));
        }
        IdpKind::Microsoft => {
            claims.insert("tid".to_owned(), json!(MICROSOFT_CONSUMER_TENANT));
            claims.insert("ver".to_owned(), json!("2.0"));
            if !identity.email_verified {
                claims.insert("email_verified".to_owned(), json!(false));
            }
        }
        IdpKind::Github => {}
    }
    let claims = Value::Object(claims);
    let key = match tamper {
        Some(IdTokenTamper::NoneAlgorithm) => {
            let header = URL_SAFE_NO_PAD.encode(json!({"alg": "none", "typ": "JWT"}).to_string());
            let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
            return Ok(format!("{header}.{payload}."));
        }
        Some(IdTokenTamper::BadSignature) => wrong_key(),
        _ => primary_key(),
    };
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some(key_id());
    Ok(jsonwebtoken::encode(&header, &claims, &key.encoding)?)
}

// ---------------------------------------------------------------------------------------------
// OIDC discovery, keys, user info

async fn discovery(State(shared): State<Arc<Shared>>) -> Json<Value> {
    let issuer = shared.issuer();
    let advertised_issuer = match shared.kind {
        IdpKind::Microsoft => format!("{}/{{tenantid}}/v2.0", shared.base),
        IdpKind::Github | IdpKind::Google => issuer.clone(),
    };
    Json(json!({
        "issuer": advertised_issuer,
        "authorization_endpoint": shared.authorize_url(),
        "token_endpoint": shared.token_url(),
        "jwks_uri": format!("{issuer}/jwks"),
        "userinfo_endpoint": format!("{issuer}/userinfo"),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code"],
        "subject_types_supported": [if shared.kind == IdpKind::Microsoft { "pairwise" } else { "public" }],
        "id_token_signing_alg_values_supported": ["RS256"],
        "scopes_supported": ["openid", "email", "profile"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "claims_supported": ["iss", "aud", "sub", "iat", "exp", "nonce", "email", "email_verified", "name", "tid"],
        "code_challenge_methods_supported": ["S256"],
    }))
}

async fn jwks() -> Json<Value> {
    let key = primary_key();
    Json(json!({
        "keys": [{
            "kty": "RSA",
            "use": "sig",
            "alg": "RS256",
            "kid": key_id(),
            "n": key.n,
            "e": key.e,
        }]
    }))
}

/// The access token of an `Authorization: Bearer …` (or, for GitHub, `token …`) header.
fn bearer_token(shared: &Shared, headers: &HeaderMap) -> Option<TokenGrant> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let accepted = scheme.eq_ignore_ascii_case("bearer")
        || (shared.kind == IdpKind::Github && scheme.eq_ignore_ascii_case("token"));
    if !accepted {
        return None;
    }
    shared.lock().tokens.get(token.trim()).cloned()
}

async fn userinfo(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let Some(grant) = bearer_token(&shared, &headers) else {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer error=\"invalid_token\"")],
        )
            .into_response();
    };
    let identity = grant.identity;
    Json(json!({
        "sub": identity.subject,
        "email": identity.email,
        "email_verified": identity.email_verified,
        "name": identity.name,
    }))
    .into_response()
}

// ---------------------------------------------------------------------------------------------
// GitHub REST API

/// Checks a GitHub API request: `User-Agent` (403 without) and the access token (401).
fn github_auth(shared: &Shared, headers: &HeaderMap) -> Result<TokenGrant, Box<Response>> {
    if !headers.contains_key(header::USER_AGENT) {
        return Err(Box::new(
            (
            StatusCode::FORBIDDEN,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "Request forbidden by administrative rules. Please make sure your request has a \
             User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required).\n",
        )
            .into_response(),
        ));
    }
    bearer_token(shared, headers).ok_or_else(|| {
        Box::new(
            (
                StatusCode::UNAUTHORIZED,
                Json(json!({
                    "message": "Bad credentials",
                    "documentation_url": "https://docs.github.com/rest",
                    "status": "401",
                })),
            )
                .into_response(),
        )
    })
}

async fn github_user(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let grant = match github_auth(&shared, &headers) {
        Ok(grant) => grant,
        Err(response) => return *response,
    };
    let identity = grant.identity;
    let id = identity
        .subject
        .parse::<u64>()
        .map_or_else(|_| json!(identity.subject), |id| json!(id));
    let email = if shared.lock().github_public_email {
        json!(identity.email)
    } else {
        Value::Null
    };
    Json(json!({
        "id": id,
        "login": identity.login,
        "name": identity.name,
        "email": email,
        "type": "User",
    }))
    .into_response()
}

async fn github_emails(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let grant = match github_auth(&shared, &headers) {
        Ok(grant) => grant,
        Err(response) => return *response,
    };
    if !grant
        .scope
        .split([' ', ','])
        .any(|scope| scope == "user:email" || scope == "user")
    {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({
                "message": "Not Found",
                "documentation_url": "https://docs.github.com/rest/users/emails",
                "status": "404",
            })),
        )
            .into_response();
    }
    let identity = grant.identity;
    Json(json!([
        {
            "email": identity.email,
            "primary": true,
            "verified": identity.email_verified,
            "visibility": "private",
        },
        {
            "email": GITHUB_SECONDARY_EMAIL,
            "primary": false,
            "verified": true,
            "visibility": null,
        },
    ]))
    .into_response()
}
