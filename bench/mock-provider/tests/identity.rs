//! The mock identity providers: the GitHub OAuth flow and API, OpenID Connect (Google- and
//! Microsoft-shaped) with verifiable ID tokens, and every deliberate failure mode.

use std::collections::HashMap;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use mock_provider::identity::MICROSOFT_CONSUMER_TENANT;
use mock_provider::{IdTokenTamper, IdpKind, MockIdentity, MockIdp};
use reqwest::StatusCode;
use serde_json::Value;
use sha2::{Digest, Sha256};
use url::Url;

const CLIENT_ID: &str = "client-123";
const CLIENT_SECRET: &str = "s3cret";
const REDIRECT: &str = "http://app.test/auth/callback?keep=1";
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk-long-enough";
const STATE: &str = "state-xyz";
const NONCE: &str = "nonce-abc";

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("http client")
}

fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// The standard authorization parameters for `idp`'s kind.
fn authorize_params(idp: &MockIdp) -> Vec<(&'static str, String)> {
    let mut params = vec![
        ("client_id", CLIENT_ID.to_owned()),
        ("redirect_uri", REDIRECT.to_owned()),
        ("state", STATE.to_owned()),
        ("code_challenge", challenge(VERIFIER)),
        ("code_challenge_method", "S256".to_owned()),
    ];
    if idp.kind().is_oidc() {
        params.push(("response_type", "code".to_owned()));
        params.push(("scope", "openid email profile".to_owned()));
        params.push(("nonce", NONCE.to_owned()));
    } else {
        params.push(("scope", "read:user user:email".to_owned()));
    }
    params
}

fn with(
    mut params: Vec<(&'static str, String)>,
    name: &'static str,
    value: Option<&str>,
) -> Vec<(&'static str, String)> {
    params.retain(|(n, _)| *n != name);
    if let Some(value) = value {
        params.push((name, value.to_owned()));
    }
    params
}

async fn get_authorize(idp: &MockIdp, params: &[(&'static str, String)]) -> reqwest::Response {
    http()
        .get(idp.authorize_url())
        .query(params)
        .send()
        .await
        .expect("authorize request")
}

/// The query of a redirect answer's `Location`.
fn redirect_query(response: &reqwest::Response) -> HashMap<String, String> {
    assert_eq!(response.status(), StatusCode::FOUND);
    let location = response
        .headers()
        .get("location")
        .expect("Location")
        .to_str()
        .expect("ascii");
    let url = Url::parse(location).expect("absolute Location");
    assert_eq!(url.path(), "/auth/callback");
    url.query_pairs().into_owned().collect()
}

/// Runs the authorization step and returns the code.
async fn get_code(idp: &MockIdp) -> String {
    let response = get_authorize(idp, &authorize_params(idp)).await;
    let query = redirect_query(&response);
    assert_eq!(query["state"], STATE);
    assert_eq!(query["keep"], "1", "the redirect URI keeps its query");
    query["code"].clone()
}

/// A token request with client_secret_basic and `Accept: application/json`.
async fn exchange(idp: &MockIdp, code: &str, verifier: &str) -> reqwest::Response {
    http()
        .post(idp.token_url())
        .basic_auth(CLIENT_ID, Some(CLIENT_SECRET))
        .header("accept", "application/json")
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", verifier),
        ])
        .send()
        .await
        .expect("token request")
}

async fn json_error(response: reqwest::Response) -> (StatusCode, String) {
    let status = response.status();
    let body: Value = response.json().await.expect("JSON error");
    (status, body["error"].as_str().expect("error").to_owned())
}

async fn github_get(idp: &MockIdp, path: &str, token: Option<&str>) -> reqwest::Response {
    let mut request = http()
        .get(format!("{}{path}", idp.api_url()))
        .header("user-agent", "identity-test");
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.expect("API request")
}

#[tokio::test]
async fn github_full_flow() {
    let idp = MockIdp::start(IdpKind::Github, CLIENT_ID, CLIENT_SECRET)
        .await
        .unwrap();
    assert_eq!(
        idp.authorize_url(),
        format!("{}/login/oauth/authorize", idp.base_url())
    );
    assert_eq!(
        idp.token_url(),
        format!("{}/login/oauth/access_token", idp.base_url())
    );
    let code = get_code(&idp).await;
    let sent = idp.last_authorize_request().expect("recorded");
    assert_eq!(sent.client_id.as_deref(), Some(CLIENT_ID));
    assert_eq!(sent.redirect_uri.as_deref(), Some(REDIRECT));
    assert_eq!(sent.code_challenge_method.as_deref(), Some("S256"));
    assert_eq!(sent.scope.as_deref(), Some("read:user user:email"));
    assert_eq!(sent.nonce, None);

    let response = exchange(&idp, &code, VERIFIER).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["cache-control"], "no-store");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["token_type"], "bearer");
    assert_eq!(body["scope"], "read:user,user:email");
    assert!(body.get("id_token").is_none());
    let token = body["access_token"].as_str().unwrap().to_owned();
    assert_eq!((idp.token_requests(), idp.codes_redeemed()), (1, 1));

    let user: Value = github_get(&idp, "/user", Some(&token))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(user["id"], 4242);
    assert_eq!(user["login"], "octo-tester");
    assert_eq!(user["name"], "Octo Tester");
    assert_eq!(user["email"], Value::Null);

    let emails: Value = github_get(&idp, "/user/emails", Some(&token))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(emails[0]["email"], "octo@example.test");
    assert_eq!(emails[0]["primary"], true);
    assert_eq!(emails[0]["verified"], true);
    assert_eq!(emails[1]["primary"], false);

    // The API's own rules: a token and a User-Agent.
    let response = github_get(&idp, "/user", None).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let response = github_get(&idp, "/user", Some("gho_unknown")).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let response = http()
        .get(format!("{}/user", idp.api_url()))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    // GitHub's other Authorization scheme.
    let response = http()
        .get(format!("{}/user", idp.api_url()))
        .header("user-agent", "identity-test")
        .header("authorization", format!("token {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn github_form_answer_client_secret_post_and_identity() {
    let idp = MockIdp::start(IdpKind::Github, CLIENT_ID, CLIENT_SECRET)
        .await
        .unwrap();
    idp.set_identity(MockIdentity {
        subject: "77".to_owned(),
        email: "someone@example.test".to_owned(),
        email_verified: false,
        name: "Some One".to_owned(),
        login: "someone".to_owned(),
    });
    idp.set_github_public_email(true);
    let code = get_code(&idp).await;
    // client_secret_post and no Accept header: a form-encoded answer.
    let response = http()
        .post(idp.token_url())
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT),
            ("code_verifier", VERIFIER),
            ("client_id", CLIENT_ID),
            ("client_secret", CLIENT_SECRET),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"],
        "application/x-www-form-urlencoded"
    );
    let body = response.text().await.unwrap();
    let fields: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    assert_eq!(fields["token_type"], "bearer");
    let token = &fields["access_token"];
    let user: Value = github_get(&idp, "/user", Some(token))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(user["id"], 77);
    assert_eq!(user["login"], "someone");
    assert_eq!(user["email"], "someone@example.test");
    let emails: Value = github_get(&idp, "/user/emails", Some(token))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(emails[0]["verified"], false);
}

#[tokio::test]
async fn github_emails_need_the_email_scope() {
    let idp = MockIdp::start(IdpKind::Github, CLIENT_ID, CLIENT_SECRET)
        .await
        .unwrap();
    let params = with(authorize_params(&idp), "scope", Some("read:user"));
    let code = redirect_query(&get_authorize(&idp, &params).await)["code"].clone();
    let body: Value = exchange(&idp, &code, VERIFIER).await.json().await.unwrap();
    let token = body["access_token"].as_str().unwrap();
    let response = github_get(&idp, "/user/emails", Some(token)).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn pkce_mismatch_is_rejected_without_consuming_the_code() {
    let idp = MockIdp::start(IdpKind::Github, CLIENT_ID, CLIENT_SECRET)
        .await
        .unwrap();
    let code = get_code(&idp).await;
    let wrong = "another-verifier-that-is-long-enough-0123456789";
    assert_eq!(
        json_error(exchange(&idp, &code, wrong).await).await,
        (StatusCode::BAD_REQUEST, "invalid_grant".to_owned())
    );
    // Missing verifier.
    let response = http()
        .post(idp.token_url())
        .basic_auth(CLIENT_ID, Some(CLIENT_SECRET))
        .header("accept", "application/json")
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(
        json_error(response).await,
        (StatusCode::BAD_REQUEST, "invalid_grant".to_owned())
    );
    assert_eq!(idp.codes_redeemed(), 0);
    assert_eq!(
        exchange(&idp, &code, VERIFIER).await.status(),
        StatusCode::OK
    );
    assert_eq!((idp.token_requests(), idp.codes_redeemed()), (3, 1));
}

#[tokio::test]
async fn redirect_uri_must_match_at_the_token_endpoint() {
    let idp = MockIdp::start(IdpKind::Github, CLIENT_ID, CLIENT_SECRET)
        .await
        .unwrap();
    let code = get_code(&idp).await;
    let response = http()
        .post(idp.token_url())
        .basic_auth(CLIENT_ID, Some(CLIENT_SECRET))
        .header("accept", "application/json")
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", "http://app.test/auth/callback"),
            ("code_verifier", VERIFIER),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(
        json_error(response).await,
        (StatusCode::BAD_REQUEST, "invalid_grant".to_owned())
    );
}

#[tokio::test]
async fn code_reuse_is_rejected_and_revokes_the_token() {
    let idp = MockIdp::start(IdpKind::Github, CLIENT_ID, CLIENT_SECRET)
        .await
        .unwrap();
    let code = get_code(&idp).await;
    let body: Value = exchange(&idp, &code, VERIFIER).await.json().await.unwrap();
    let token = body["access_token"].as_str().unwrap().to_owned();
    assert_eq!(
        github_get(&idp, "/user", Some(&token)).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        json_error(exchange(&idp, &code, VERIFIER).await).await,
        (StatusCode::BAD_REQUEST, "invalid_grant".to_owned())
    );
    assert_eq!(
        github_get(&idp, "/user", Some(&token)).await.status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!((idp.token_requests(), idp.codes_redeemed()), (2, 1));
}

#[tokio::test]
async fn expired_and_unknown_codes_are_rejected() {
    let idp = MockIdp::start(IdpKind::Github, CLIENT_ID, CLIENT_SECRET)
        .await
        .unwrap();
    idp.set_code_lifetime(Duration::ZERO);
    let code = get_code(&idp).await;
    assert_eq!(
        json_error(exchange(&idp, &code, VERIFIER).await).await,
        (StatusCode::BAD_REQUEST, "invalid_grant".to_owned())
    );
    assert_eq!(
        json_error(exchange(&idp, "no-such-code", VERIFIER).await).await,
        (StatusCode::BAD_REQUEST, "invalid_grant".to_owned())
    );
}

#[tokio::test]
async fn wrong_client_credentials_are_rejected() {
    let idp = MockIdp::start(IdpKind::Github, CLIENT_ID, CLIENT_SECRET)
        .await
        .unwrap();
    let code = get_code(&idp).await;
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", REDIRECT),
        ("code_verifier", VERIFIER),
    ];
    let basic = http()
        .post(idp.token_url())
        .basic_auth(CLIENT_ID, Some("wrong"))
        .header("accept", "application/json")
        .form(&form)
        .send()
        .await
        .unwrap();
    assert!(basic.headers().contains_key("www-authenticate"));
    assert_eq!(
        json_error(basic).await,
        (StatusCode::UNAUTHORIZED, "invalid_client".to_owned())
    );
    let mut post_form = form.to_vec();
    post_form.push(("client_id", CLIENT_ID));
    post_form.push(("client_secret", "wrong"));
    let post = http()
        .post(idp.token_url())
        .header("accept", "application/json")
        .form(&post_form)
        .send()
        .await
        .unwrap();
    assert_eq!(
        json_error(post).await,
        (StatusCode::UNAUTHORIZED, "invalid_client".to_owned())
    );
    let anonymous = http()
        .post(idp.token_url())
        .header("accept", "application/json")
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(
        json_error(anonymous).await,
        (StatusCode::UNAUTHORIZED, "invalid_client".to_owned())
    );
    // Two authentication methods at once (RFC 6749 §2.3).
    let mut both = form.to_vec();
    both.push(("client_secret", CLIENT_SECRET));
    let both = http()
        .post(idp.token_url())
        .basic_auth(CLIENT_ID, Some(CLIENT_SECRET))
        .header("accept", "application/json")
        .form(&both)
        .send()
        .await
        .unwrap();
    assert_eq!(
        json_error(both).await,
        (StatusCode::BAD_REQUEST, "invalid_request".to_owned())
    );
    assert_eq!((idp.token_requests(), idp.codes_redeemed()), (4, 0));
    // The code is still good for the real client.
    assert_eq!(
        exchange(&idp, &code, VERIFIER).await.status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn invalid_authorization_requests_get_an_error_page() {
    let idp = MockIdp::start(IdpKind::Github, CLIENT_ID, CLIENT_SECRET)
        .await
        .unwrap();
    let good = authorize_params(&idp);
    let bad_requests = [
        with(good.clone(), "code_challenge_method", Some("plain")),
        with(good.clone(), "code_challenge_method", None),
        with(good.clone(), "code_challenge", None),
        with(good.clone(), "state", None),
        with(good.clone(), "client_id", Some("someone-else")),
        with(good.clone(), "client_id", None),
        with(good.clone(), "redirect_uri", None),
        with(good.clone(), "redirect_uri", Some("/relative")),
        with(good.clone(), "redirect_uri", Some("javascript:alert(1)")),
        with(
            good.clone(),
            "redirect_uri",
            Some("http://app.test/cb#frag"),
        ),
    ];
    for params in &bad_requests {
        let response = get_authorize(&idp, params).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{params:?}");
        assert!(response.headers().get("location").is_none());
        assert!(response
            .text()
            .await
            .unwrap()
            .contains("Authorization error"));
    }
    // Even when denying, a bad client is never redirected to.
    idp.set_deny(true);
    let response = get_authorize(&idp, &bad_requests[4]).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn deny_redirects_with_access_denied() {
    let idp = MockIdp::start(IdpKind::Github, CLIENT_ID, CLIENT_SECRET)
        .await
        .unwrap();
    idp.set_deny(true);
    let response = get_authorize(&idp, &authorize_params(&idp)).await;
    let query = redirect_query(&response);
    assert_eq!(query["error"], "access_denied");
    assert_eq!(query["state"], STATE);
    assert_eq!(query["keep"], "1");
    assert!(query.contains_key("error_description"));
    assert!(!query.contains_key("code"));
}

#[tokio::test]
async fn consent_page_posts_the_decision() {
    let idp = MockIdp::start(IdpKind::Github, CLIENT_ID, CLIENT_SECRET)
        .await
        .unwrap();
    idp.set_auto_approve(false);
    let params = authorize_params(&idp);
    let response = get_authorize(&idp, &params).await;
    assert_eq!(response.status(), StatusCode::OK);
    let page = response.text().await.unwrap();
    assert!(page.contains(">Authorize</button>"), "{page}");
    assert!(page.contains(">Cancel</button>"));
    assert!(page.contains(CLIENT_ID));
    assert!(page.contains("octo-tester"));
    assert!(page.contains(&format!("name=\"state\" value=\"{STATE}\"")));
    assert!(page.contains("action=\"/login/oauth/authorize\""));

    // What a browser submits when "Authorize" is clicked.
    let mut allow = params.clone();
    allow.push(("decision", "allow".to_owned()));
    let response = http()
        .post(idp.authorize_url())
        .form(&allow)
        .send()
        .await
        .unwrap();
    let query = redirect_query(&response);
    assert_eq!(query["state"], STATE);
    let code = query["code"].clone();
    assert_eq!(
        exchange(&idp, &code, VERIFIER).await.status(),
        StatusCode::OK
    );

    // "Cancel".
    let mut deny = params.clone();
    deny.push(("decision", "deny".to_owned()));
    let response = http()
        .post(idp.authorize_url())
        .form(&deny)
        .send()
        .await
        .unwrap();
    assert_eq!(redirect_query(&response)["error"], "access_denied");

    // A tampered form is still validated.
    let mut plain = with(params, "code_challenge_method", Some("plain"));
    plain.push(("decision", "allow".to_owned()));
    let response = http()
        .post(idp.authorize_url())
        .form(&plain)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn token_failure_is_forced() {
    let idp = MockIdp::start(IdpKind::Github, CLIENT_ID, CLIENT_SECRET)
        .await
        .unwrap();
    let code = get_code(&idp).await;
    idp.set_token_failure(Some(503));
    let response = exchange(&idp, &code, VERIFIER).await;
    assert_eq!(response.headers()["cache-control"], "no-store");
    assert_eq!(
        json_error(response).await,
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable".to_owned()
        )
    );
    idp.set_token_failure(None);
    assert_eq!(
        exchange(&idp, &code, VERIFIER).await.status(),
        StatusCode::OK
    );
    assert_eq!((idp.token_requests(), idp.codes_redeemed()), (2, 1));
}

// ---------------------------------------------------------------------------------------------
// OpenID Connect

/// The published key of `idp`: `(kid, decoding key)`.
async fn jwks_key(idp: &MockIdp) -> (String, DecodingKey) {
    let jwks: Value = http()
        .get(idp.jwks_url())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let key = &jwks["keys"][0];
    assert_eq!(key["kty"], "RSA");
    assert_eq!(key["alg"], "RS256");
    assert_eq!(key["use"], "sig");
    let decoding =
        DecodingKey::from_rsa_components(key["n"].as_str().unwrap(), key["e"].as_str().unwrap())
            .unwrap();
    (key["kid"].as_str().unwrap().to_owned(), decoding)
}

/// The ID token of a complete sign-in.
async fn sign_in(idp: &MockIdp) -> String {
    let code = get_code(idp).await;
    let response = exchange(idp, &code, VERIFIER).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["cache-control"], "no-store");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], 3600);
    body["id_token"].as_str().expect("id_token").to_owned()
}

fn validation(issuer: &str) -> Validation {
    let mut validation = Validation::new(Algorithm::RS256);
    validation.set_issuer(&[issuer]);
    validation.set_audience(&[CLIENT_ID]);
    validation.leeway = 0;
    validation
}

fn verify(token: &str, key: &DecodingKey, issuer: &str) -> jsonwebtoken::errors::Result<Value> {
    jsonwebtoken::decode::<Value>(token, key, &validation(issuer)).map(|data| data.claims)
}

#[tokio::test]
async fn google_discovery_jwks_and_id_token() {
    let idp = MockIdp::start(IdpKind::Google, CLIENT_ID, CLIENT_SECRET)
        .await
        .unwrap();
    let issuer = idp.issuer();
    assert_eq!(issuer, idp.base_url());
    let discovery: Value = http()
        .get(format!("{issuer}/.well-known/openid-configuration"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(discovery["issuer"], issuer);
    assert_eq!(discovery["authorization_endpoint"], idp.authorize_url());
    assert_eq!(
        discovery["authorization_endpoint"],
        format!("{issuer}/authorize")
    );
    assert_eq!(discovery["token_endpoint"], format!("{issuer}/token"));
    assert_eq!(discovery["jwks_uri"], idp.jwks_url());
    assert_eq!(discovery["response_types_supported"][0], "code");
    assert_eq!(
        discovery["id_token_signing_alg_values_supported"][0],
        "RS256"
    );
    assert_eq!(discovery["code_challenge_methods_supported"][0], "S256");
    assert!(discovery["subject_types_supported"].is_array());

    let (kid, key) = jwks_key(&idp).await;
    let token = sign_in(&idp).await;
    let header = jsonwebtoken::decode_header(&token).unwrap();
    assert_eq!(header.alg, Algorithm::RS256);
    assert_eq!(header.kid.as_deref(), Some(kid.as_str()));
    let claims = verify(&token, &key, &issuer).expect("valid ID token");
    assert_eq!(claims["iss"], issuer);
    assert_eq!(claims["aud"], CLIENT_ID);
    assert_eq!(claims["sub"], "4242");
    assert_eq!(claims["nonce"], NONCE);
    assert_eq!(claims["email"], "octo@example.test");
    assert_eq!(claims["email_verified"], true);
    assert_eq!(claims["name"], "Octo Tester");
    assert_eq!(
        claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(),
        3600
    );
    let sent = idp.last_authorize_request().unwrap();
    assert_eq!(sent.nonce.as_deref(), Some(NONCE));
    assert_eq!(sent.response_type.as_deref(), Some("code"));
    assert_eq!((idp.token_requests(), idp.codes_redeemed()), (1, 1));

    // An unverified address.
    idp.set_identity(MockIdentity {
        email_verified: false,
        ..MockIdentity::default()
    });
    let claims = verify(&sign_in(&idp).await, &key, &issuer).unwrap();
    assert_eq!(claims["email_verified"], false);
}

#[tokio::test]
async fn oidc_authorization_needs_openid_code_and_nonce() {
    let idp = MockIdp::start(IdpKind::Google, CLIENT_ID, CLIENT_SECRET)
        .await
        .unwrap();
    let good = authorize_params(&idp);
    for params in [
        with(good.clone(), "nonce", None),
        with(good.clone(), "scope", Some("email profile")),
        with(good.clone(), "scope", None),
        with(good.clone(), "response_type", Some("token")),
        with(good.clone(), "response_type", None),
        with(good.clone(), "code_challenge_method", Some("plain")),
    ] {
        let response = get_authorize(&idp, &params).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{params:?}");
    }
    assert_eq!(get_authorize(&idp, &good).await.status(), StatusCode::FOUND);
}

#[tokio::test]
async fn microsoft_templated_issuer_and_tenant() {
    let idp = MockIdp::start(IdpKind::Microsoft, CLIENT_ID, CLIENT_SECRET)
        .await
        .unwrap();
    let base = idp.base_url();
    assert_eq!(idp.issuer(), format!("{base}/common/v2.0"));
    let discovery: Value = http()
        .get(format!("{}/.well-known/openid-configuration", idp.issuer()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(discovery["issuer"], format!("{base}/{{tenantid}}/v2.0"));
    assert_eq!(
        discovery["authorization_endpoint"],
        format!("{base}/common/v2.0/authorize")
    );
    assert_eq!(
        discovery["token_endpoint"],
        format!("{base}/common/v2.0/token")
    );

    let (_, key) = jwks_key(&idp).await;
    let token_issuer = format!("{base}/{MICROSOFT_CONSUMER_TENANT}/v2.0");
    assert_eq!(idp.id_token_issuer(), token_issuer);
    let claims = verify(&sign_in(&idp).await, &key, &token_issuer).expect("valid ID token");
    assert_eq!(claims["tid"], MICROSOFT_CONSUMER_TENANT);
    assert_eq!(
        discovery["issuer"]
            .as_str()
            .unwrap()
            .replace("{tenantid}", claims["tid"].as_str().unwrap()),
        claims["iss"].as_str().unwrap()
    );
    assert_eq!(claims["email"], "octo@example.test");
    assert!(claims.get("email_verified").is_none());

    idp.set_identity(MockIdentity {
        email_verified: false,
        ..MockIdentity::default()
    });
    let claims = verify(&sign_in(&idp).await, &key, &token_issuer).unwrap();
    assert_eq!(claims["email_verified"], false);
}

#[tokio::test]
async fn tamper_modes_produce_their_defect() {
    for kind in [IdpKind::Google, IdpKind::Microsoft] {
        let idp = MockIdp::start(kind, CLIENT_ID, CLIENT_SECRET)
            .await
            .unwrap();
        let issuer = idp.id_token_issuer();
        let (kid, key) = jwks_key(&idp).await;
        let failure = |tamper: IdTokenTamper, token: &str| -> ErrorKind {
            match verify(token, &key, &issuer) {
                Ok(claims) => panic!("{kind:?} {tamper:?} must not verify: {claims}"),
                Err(error) => error.into_kind(),
            }
        };

        idp.set_id_token_tamper(Some(IdTokenTamper::WrongNonce));
        let claims = verify(&sign_in(&idp).await, &key, &issuer).unwrap();
        assert!(claims["nonce"].is_string());
        assert_ne!(claims["nonce"], NONCE);

        idp.set_id_token_tamper(Some(IdTokenTamper::WrongAudience));
        let token = sign_in(&idp).await;
        assert_eq!(
            failure(IdTokenTamper::WrongAudience, &token),
            ErrorKind::InvalidAudience
        );

        idp.set_id_token_tamper(Some(IdTokenTamper::WrongIssuer));
        let token = sign_in(&idp).await;
        assert_eq!(
            failure(IdTokenTamper::WrongIssuer, &token),
            ErrorKind::InvalidIssuer
        );

        idp.set_id_token_tamper(Some(IdTokenTamper::Expired));
        let token = sign_in(&idp).await;
        assert_eq!(
            failure(IdTokenTamper::Expired, &token),
            ErrorKind::ExpiredSignature
        );

        idp.set_id_token_tamper(Some(IdTokenTamper::BadSignature));
        let token = sign_in(&idp).await;
        assert_eq!(
            jsonwebtoken::decode_header(&token).unwrap().kid.as_deref(),
            Some(kid.as_str())
        );
        assert_eq!(
            failure(IdTokenTamper::BadSignature, &token),
            ErrorKind::InvalidSignature
        );

        idp.set_id_token_tamper(Some(IdTokenTamper::NoneAlgorithm));
        let token = sign_in(&idp).await;
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[2], "", "no signature");
        let header: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header["alg"], "none");
        assert!(verify(&token, &key, &issuer).is_err());

        idp.set_id_token_tamper(None);
        verify(&sign_in(&idp).await, &key, &issuer).expect("correct again");
    }
}

#[tokio::test]
async fn oidc_userinfo_needs_the_access_token() {
    let idp = MockIdp::start(IdpKind::Google, CLIENT_ID, CLIENT_SECRET)
        .await
        .unwrap();
    let code = get_code(&idp).await;
    let body: Value = exchange(&idp, &code, VERIFIER).await.json().await.unwrap();
    let token = body["access_token"].as_str().unwrap();
    let userinfo = format!("{}/userinfo", idp.issuer());
    let info: Value = http()
        .get(&userinfo)
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["sub"], "4242");
    let response = http().get(&userinfo).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}
