//! Sign-in with GitHub, Google and Microsoft against local mock identity providers (a
//! GitHub-shaped OAuth 2.0 server, and OpenID Connect servers with discovery, JWKS and
//! RS256-signed ID tokens): the flow, PKCE, state and nonce, replays, unverified emails,
//! existing accounts, connecting and disconnecting, session limits and native clients.

use agentchat::config::{GithubConfig, OAuthClientConfig, OidcConfig};
use mock_provider::{IdTokenTamper, IdpKind, MockIdentity, MockIdp};
use reqwest::{header, Client, Response};
use secrecy::SecretString;
use serde_json::{json, Value};

use crate::helpers::{spawn_app_with, unique_email, TestApp};

const CLIENT_ID: &str = "agentchat-test-client";
const CLIENT_SECRET: &str = "agentchat-test-secret";

fn client_config() -> OAuthClientConfig {
    OAuthClientConfig {
        client_id: CLIENT_ID.into(),
        client_secret: SecretString::from(CLIENT_SECRET),
    }
}

/// The application with one provider configured against a fresh mock of it.
async fn app_with(kind: IdpKind) -> (TestApp, MockIdp) {
    let idp = MockIdp::start(kind, CLIENT_ID, CLIENT_SECRET)
        .await
        .expect("mock identity provider starts");
    let app = spawn_app_with(|c| match kind {
        IdpKind::Github => {
            c.oauth.github = Some(GithubConfig {
                client: client_config(),
                auth_url: idp.authorize_url(),
                token_url: idp.token_url(),
                api_url: idp.api_url(),
            })
        }
        IdpKind::Google => {
            c.oauth.google = Some(OidcConfig {
                client: client_config(),
                issuer_url: idp.issuer(),
            })
        }
        IdpKind::Microsoft => {
            c.oauth.microsoft = Some(OidcConfig {
                client: client_config(),
                issuer_url: idp.issuer(),
            })
        }
    })
    .await;
    (app, idp)
}

fn code(kind: IdpKind) -> &'static str {
    match kind {
        IdpKind::Github => "github",
        IdpKind::Google => "google",
        IdpKind::Microsoft => "microsoft",
    }
}

/// A browser: keeps cookies, follows no redirect by itself.
fn browser() -> Client {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .cookie_store(true)
        .build()
        .unwrap()
}

fn location(res: &Response) -> String {
    res.headers()
        .get(header::LOCATION)
        .unwrap_or_else(|| panic!("no Location in a {} answer", res.status()))
        .to_str()
        .unwrap()
        .to_string()
}

/// The absolute form of a Location that may be a path on the app.
fn absolute(app: &TestApp, location: &str) -> String {
    if location.starts_with('/') {
        app.url(location)
    } else {
        location.to_string()
    }
}

fn identity(email: &str, verified: bool, subject: &str) -> MockIdentity {
    MockIdentity {
        subject: subject.into(),
        email: email.into(),
        email_verified: verified,
        name: "Ada Lovelace".into(),
        login: "ada".into(),
    }
}

fn query_value(url: &str, name: &str) -> Option<String> {
    let url = url::Url::parse(&format!("http://x{url}"))
        .or_else(|_| url::Url::parse(url))
        .unwrap();
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.to_string())
}

/// Goes from `start` (a URL on the app that redirects to the provider) to the provider
/// and back; returns the provider's redirect target (the callback URL).
async fn to_callback(app: &TestApp, browser: &Client, start: &str) -> String {
    let res = browser.get(absolute(app, start)).send().await.unwrap();
    assert_eq!(res.status(), 302, "start redirects to the provider");
    let res = browser.get(location(&res)).send().await.unwrap();
    assert_eq!(res.status(), 302, "the provider redirects back");
    location(&res)
}

/// The whole sign-in in `browser`; returns the callback's answer (a 303).
async fn sign_in(app: &TestApp, browser: &Client, kind: IdpKind) -> Response {
    let callback = to_callback(app, browser, &format!("/api/auth/oauth/{}", code(kind))).await;
    let res = browser.get(callback).send().await.unwrap();
    assert_eq!(res.status(), 303);
    res
}

/// The error message of a failed flow's redirect to `page`.
fn failure(res: &Response, page: &str) -> String {
    let to = location(res);
    assert!(
        to.starts_with(page),
        "expected a redirect to {page}, got {to}"
    );
    query_value(&to, "oauthError").unwrap_or_else(|| panic!("no oauthError in {to}"))
}

async fn me(app: &TestApp, browser: &Client) -> Value {
    let res = browser.get(app.url("/api/auth/me")).send().await.unwrap();
    assert_eq!(res.status(), 200, "signed in by cookie");
    res.json().await.unwrap()
}

async fn user_count(app: &TestApp) -> i64 {
    app.sql_scalar("SELECT COUNT(*) FROM users", vec![]).await
}

#[tokio::test]
async fn providers_lists_only_configured_ones() {
    let (app, _idp) = app_with(IdpKind::Github).await;
    let body: Value = app
        .get("/api/auth/providers", None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        body,
        json!({"providers": [{"code": "github", "name": "GitHub"}]})
    );
    let res = app.get("/api/auth/oauth/google", None).await;
    crate::helpers::assert_error(res, 404, "Not Found", None).await;
    let res = app.get("/api/auth/oauth/facebook", None).await;
    crate::helpers::assert_error(res, 404, "Not Found", None).await;
}

#[tokio::test]
async fn each_provider_signs_in_a_new_verified_account() {
    for kind in [IdpKind::Github, IdpKind::Google, IdpKind::Microsoft] {
        let (app, idp) = app_with(kind).await;
        let email = unique_email();
        idp.set_identity(identity(&email, true, "101"));
        let browser = browser();
        let res = sign_in(&app, &browser, kind).await;
        assert_eq!(location(&res), "/dashboard", "{kind:?}");
        let cookies: Vec<String> = res
            .headers()
            .get_all(header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect();
        assert!(cookies
            .iter()
            .any(|c| c.starts_with("ac_access=") && c.contains("HttpOnly")));
        let body = me(&app, &browser).await;
        assert_eq!(body["user"]["email"], email.as_str(), "{kind:?}");
        assert_eq!(body["user"]["emailVerified"], true);
        assert_eq!(body["user"]["name"], "Ada Lovelace");
        let methods: Value = browser
            .get(app.url("/api/auth/identities"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(methods["hasPassword"], false);
        assert_eq!(methods["identities"][0]["provider"], code(kind));
        assert_eq!(methods["identities"][0]["email"], email.as_str());
        assert_eq!(idp.codes_redeemed(), 1);

        // The authorization request: code flow, PKCE S256, scopes, and a nonce for OIDC.
        let request = idp.last_authorize_request().expect("authorize was called");
        assert_eq!(request.code_challenge_method.as_deref(), Some("S256"));
        assert_eq!(request.code_challenge.as_deref().map(str::len), Some(43));
        assert_eq!(request.client_id.as_deref(), Some(CLIENT_ID));
        assert_eq!(
            request.redirect_uri,
            Some(app.url(&format!("/api/auth/oauth/{}/callback", code(kind))))
        );
        match kind {
            IdpKind::Github => assert!(request.nonce.is_none()),
            _ => {
                assert!(request.nonce.as_deref().is_some_and(|n| n.len() >= 16));
                assert!(request.scope.as_deref().unwrap_or("").contains("openid"));
            }
        }

        // Signing in again finds the same account through the identity.
        let again = browser_after_sign_in(&app, kind).await;
        assert_eq!(me(&app, &again).await["user"]["id"], body["user"]["id"]);
        assert_eq!(user_count(&app).await, 1);
    }
}

async fn browser_after_sign_in(app: &TestApp, kind: IdpKind) -> Client {
    let b = browser();
    let res = sign_in(app, &b, kind).await;
    assert_eq!(location(&res), "/dashboard");
    b
}

#[tokio::test]
async fn a_changed_pkce_verifier_fails_the_exchange() {
    let (app, _idp) = app_with(IdpKind::Github).await;
    let b = browser();
    let callback = to_callback(&app, &b, "/api/auth/oauth/github").await;
    app.sql(
        "UPDATE oauth_flows SET pkce_verifier = 'not-the-verifier-of-this-challenge-xxxxxxxxxxx'",
        vec![],
    )
    .await;
    let res = b.get(callback).send().await.unwrap();
    let message = failure(&res, "/login");
    assert!(message.contains("invalid_grant"), "{message}");
    assert_eq!(user_count(&app).await, 0);
}

#[tokio::test]
async fn state_is_single_use_bound_to_the_browser_and_not_forgeable() {
    let (app, idp) = app_with(IdpKind::Github).await;
    idp.set_identity(identity(&unique_email(), true, "77"));

    // Another browser cannot finish a flow this browser started.
    let a = browser();
    let callback = to_callback(&app, &a, "/api/auth/oauth/github").await;
    let res = browser().get(&callback).send().await.unwrap();
    assert!(failure(&res, "/login").contains("another browser"));
    // ... and the state is spent by that attempt.
    let res = a.get(&callback).send().await.unwrap();
    assert!(failure(&res, "/login").contains("already used"));
    assert_eq!(user_count(&app).await, 0);

    // A forged state.
    let res = a
        .get(app.url("/api/auth/oauth/github/callback?code=abc&state=forged"))
        .send()
        .await
        .unwrap();
    assert!(failure(&res, "/login").contains("already used"));
    let res = a
        .get(app.url("/api/auth/oauth/github/callback?code=abc"))
        .send()
        .await
        .unwrap();
    assert!(failure(&res, "/login").contains("no state"));

    // A successful callback replayed.
    let callback = to_callback(&app, &a, "/api/auth/oauth/github").await;
    let res = a.get(&callback).send().await.unwrap();
    assert_eq!(location(&res), "/dashboard");
    let res = a.get(&callback).send().await.unwrap();
    assert!(failure(&res, "/login").contains("already used"));
    assert_eq!(user_count(&app).await, 1);
}

#[tokio::test]
async fn a_replayed_code_is_refused() {
    let (app, idp) = app_with(IdpKind::Github).await;
    idp.set_identity(identity(&unique_email(), true, "78"));
    let b = browser();
    let first = to_callback(&app, &b, "/api/auth/oauth/github").await;
    let used_code = query_value(&first, "code").unwrap();
    assert_eq!(location(&b.get(&first).send().await.unwrap()), "/dashboard");

    // A fresh, valid state carrying the already redeemed code.
    let second = to_callback(&app, &b, "/api/auth/oauth/github").await;
    let state = query_value(&second, "state").unwrap();
    let replay = app.url(&format!(
        "/api/auth/oauth/github/callback?code={used_code}&state={state}"
    ));
    let res = b.get(replay).send().await.unwrap();
    assert!(failure(&res, "/login").contains("invalid_grant"));
    assert_eq!(idp.codes_redeemed(), 1);
}

#[tokio::test]
async fn id_token_defects_are_refused() {
    let (app, idp) = app_with(IdpKind::Google).await;
    for (tamper, reason) in [
        (IdTokenTamper::WrongNonce, "nonce"),
        (IdTokenTamper::WrongAudience, "another application"),
        (IdTokenTamper::WrongIssuer, "another issuer"),
        (IdTokenTamper::Expired, "expired"),
        (IdTokenTamper::BadSignature, "signature"),
        (IdTokenTamper::NoneAlgorithm, "RS256"),
    ] {
        idp.set_id_token_tamper(Some(tamper));
        idp.set_identity(identity(&unique_email(), true, "g-1"));
        let res = sign_in(&app, &browser(), IdpKind::Google).await;
        let message = failure(&res, "/login");
        assert!(message.contains(reason), "{reason}: {message}");
    }
    assert_eq!(user_count(&app).await, 0);
    idp.set_id_token_tamper(None);
    let res = sign_in(&app, &browser(), IdpKind::Google).await;
    assert_eq!(location(&res), "/dashboard");
}

#[tokio::test]
async fn an_unverified_provider_email_is_refused() {
    for kind in [IdpKind::Github, IdpKind::Google, IdpKind::Microsoft] {
        let (app, idp) = app_with(kind).await;
        idp.set_identity(identity(&unique_email(), false, "202"));
        let res = sign_in(&app, &browser(), kind).await;
        assert!(failure(&res, "/login").contains("not verified"), "{kind:?}");
        assert_eq!(user_count(&app).await, 0);
    }
}

#[tokio::test]
async fn denied_consent_and_provider_errors_create_nothing() {
    let (app, idp) = app_with(IdpKind::Github).await;
    idp.set_deny(true);
    let res = sign_in(&app, &browser(), IdpKind::Github).await;
    assert!(failure(&res, "/login").contains("cancelled"));
    idp.set_deny(false);
    idp.set_token_failure(Some(500));
    let res = sign_in(&app, &browser(), IdpKind::Github).await;
    let message = failure(&res, "/login");
    assert!(message.contains("GitHub"), "{message}");
    assert_eq!(user_count(&app).await, 0);
}

#[tokio::test]
async fn an_unreachable_provider_fails_its_sign_in_not_the_server() {
    // Nothing listens on the issuer: the server still starts (nothing is fetched at start).
    let app = spawn_app_with(|c| {
        c.oauth.google = Some(OidcConfig {
            client: client_config(),
            issuer_url: "http://127.0.0.1:9".into(),
        })
    })
    .await;
    let res = browser()
        .get(app.url("/api/auth/oauth/google"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert!(failure(&res, "/login").contains("could not be reached"));
    assert_eq!(app.get("/api/health", None).await.status(), 200);
}

#[tokio::test]
async fn an_existing_email_is_not_linked_silently_but_can_be_connected() {
    let (app, idp) = app_with(IdpKind::Github).await;
    let user = app.user().await;
    idp.set_identity(identity(&user.email, true, "4242"));

    let res = sign_in(&app, &browser(), IdpKind::Github).await;
    let message = failure(&res, "/login");
    assert!(
        message.contains("already exists") && message.contains("account page"),
        "{message}"
    );
    assert_eq!(user_count(&app).await, 1);

    // Signed in with the password, the user connects GitHub from the account page.
    let b = browser();
    let res = b
        .post(app.url("/api/auth/oauth/github/link"))
        .bearer_auth(&user.access)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let url = res.json::<Value>().await.unwrap()["url"]
        .as_str()
        .unwrap()
        .to_string();
    let res = b.get(url).send().await.unwrap();
    assert_eq!(res.status(), 302);
    let res = b.get(location(&res)).send().await.unwrap();
    assert_eq!(location(&res), "/dashboard/account?linked=github");

    // Now GitHub signs into that account.
    let gh = browser_after_sign_in(&app, IdpKind::Github).await;
    assert_eq!(me(&app, &gh).await["user"]["id"], user.id.as_str());

    let methods: Value = app
        .get("/api/auth/identities", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(methods["hasPassword"], true);
    assert_eq!(methods["identities"].as_array().unwrap().len(), 1);

    // Disconnecting leaves the password; GitHub then no longer signs in.
    let res = app
        .delete("/api/auth/oauth/github/link", Some(&user.access))
        .await;
    assert_eq!(res.status(), 200);
    let res = app
        .delete("/api/auth/oauth/github/link", Some(&user.access))
        .await;
    crate::helpers::assert_error(res, 404, "Not Found", None).await;
    let res = sign_in(&app, &browser(), IdpKind::Github).await;
    assert!(failure(&res, "/login").contains("already exists"));
}

/// The value a `Set-Cookie` of `res` gives cookie `name`.
fn set_cookie(res: &Response, name: &str) -> String {
    res.headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| c.strip_prefix(&format!("{name}=")))
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("no {name} cookie set"))
        .to_string()
}

#[tokio::test]
async fn the_last_sign_in_method_cannot_be_disconnected() {
    let (app, idp) = app_with(IdpKind::Github).await;
    idp.set_identity(identity(&unique_email(), true, "500"));
    let res = sign_in(&app, &browser(), IdpKind::Github).await;
    let access = set_cookie(&res, "ac_access");
    let res = app
        .delete("/api/auth/oauth/github/link", Some(&access))
        .await;
    crate::helpers::assert_error(res, 409, "Conflict", None).await;
}

#[tokio::test]
async fn connecting_needs_a_session_and_a_free_identity() {
    let (app, idp) = app_with(IdpKind::Github).await;
    let owner = app.user().await;
    let (_, key) = app.api_key(&owner, &["agents:read"]).await;
    let res = app
        .post("/api/auth/oauth/github/link", Some(&key), json!({}))
        .await;
    crate::helpers::assert_error(res, 403, "Forbidden", None).await;
    let res = app
        .post("/api/auth/oauth/github/link", None, json!({}))
        .await;
    assert_eq!(res.status(), 401);

    // The GitHub identity signs up its own account first ...
    idp.set_identity(identity(&unique_email(), true, "999"));
    browser_after_sign_in(&app, IdpKind::Github).await;
    // ... so the owner cannot connect it.
    let b = browser();
    let url = b
        .post(app.url("/api/auth/oauth/github/link"))
        .bearer_auth(&owner.access)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["url"]
        .as_str()
        .unwrap()
        .to_string();
    let res = b.get(url).send().await.unwrap();
    let res = b.get(location(&res)).send().await.unwrap();
    let message = failure(&res, "/dashboard/account");
    assert!(message.contains("another AgentChat account"), "{message}");
}

#[tokio::test]
async fn provider_sign_ins_keep_the_session_limit() {
    let (app, idp) = app_with(IdpKind::Github).await;
    idp.set_identity(identity(&unique_email(), true, "600"));
    let first = browser_after_sign_in(&app, IdpKind::Github).await;
    assert_eq!(
        first
            .get(app.url("/api/auth/me"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let mut last = None;
    for _ in 0..5 {
        last = Some(browser_after_sign_in(&app, IdpKind::Github).await);
    }
    // The sixth sign-in ended the oldest session at once.
    let status = first
        .get(app.url("/api/auth/me"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 401);
    let sessions: Value = last
        .unwrap()
        .get(app.url("/api/auth/sessions"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(sessions["sessions"].as_array().unwrap().len(), 5);
}

#[tokio::test]
async fn a_native_client_trades_a_one_time_code_for_tokens() {
    let (app, idp) = app_with(IdpKind::Github).await;
    let email = unique_email();
    idp.set_identity(identity(&email, true, "700"));
    let res = app
        .get(
            "/api/auth/oauth/github?redirectUri=https://evil.example/cb",
            None,
        )
        .await;
    crate::helpers::assert_error(res, 400, "Bad Request", None).await;

    let b = browser();
    let callback = to_callback(
        &app,
        &b,
        "/api/auth/oauth/github?redirectUri=http://127.0.0.1:8400/done",
    )
    .await;
    let res = b.get(callback).send().await.unwrap();
    assert_eq!(res.status(), 303);
    let to = location(&res);
    assert!(to.starts_with("http://127.0.0.1:8400/done?code="), "{to}");
    assert!(
        res.headers().get(header::SET_COOKIE).is_none()
            || !res
                .headers()
                .get_all(header::SET_COOKIE)
                .iter()
                .any(|c| c.to_str().unwrap().starts_with("ac_access=")),
        "a native client's flow sets no dashboard cookie"
    );
    let code = query_value(&to, "code").unwrap();
    let res = app
        .post("/api/auth/oauth/exchange", None, json!({"code": code}))
        .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["user"]["email"], email.as_str());
    let access = body["tokens"]["accessToken"].as_str().unwrap();
    assert_eq!(app.get("/api/auth/me", Some(access)).await.status(), 200);
    let res = app
        .post("/api/auth/oauth/exchange", None, json!({"code": code}))
        .await;
    crate::helpers::assert_error(res, 400, "Bad Request", None).await;
}
