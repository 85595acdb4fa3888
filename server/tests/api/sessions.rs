//! Tokens and sessions: lifetimes, rotation, reuse detection, the 5-session limit,
//! inactivity, logout, and the dashboard's cookies with CSRF.

use chrono::Duration;
use reqwest::header;
use serde_json::{json, Value};

use crate::helpers::*;

#[tokio::test]
async fn access_tokens_authenticate_and_refresh_tokens_do_not() {
    let app = spawn_app().await;
    let user = app.user().await;
    assert_eq!(
        app.get("/api/auth/me", Some(&user.access)).await.status(),
        200
    );
    assert_unauthorized(app.get("/api/auth/me", Some(&user.refresh)).await).await;
    assert_unauthorized(app.get("/api/auth/me", None).await).await;
    assert_unauthorized(app.get("/api/auth/me", Some("not.a.jwt")).await).await;
    let basic = app
        .client
        .get(app.url("/api/auth/me"))
        .header(header::AUTHORIZATION, "Basic dXNlcjpwYXNz")
        .send()
        .await
        .unwrap();
    assert_unauthorized(basic).await;
    let mut tampered = user.access.clone();
    tampered.push('x');
    assert_unauthorized(app.get("/api/auth/me", Some(&tampered)).await).await;
    // An access token is no refresh token either.
    let res = app
        .post(
            "/api/auth/refresh",
            None,
            json!({"refreshToken": user.access}),
        )
        .await;
    assert_unauthorized(res).await;
}

#[tokio::test]
async fn access_tokens_expire_after_15_minutes_and_refresh_renews_them() {
    let app = spawn_app().await;
    let user = app.user().await;
    app.state.auth.clock.advance(Duration::minutes(14));
    assert_eq!(
        app.get("/api/auth/me", Some(&user.access)).await.status(),
        200
    );
    app.state.auth.clock.advance(Duration::minutes(2));
    assert_unauthorized(app.get("/api/auth/me", Some(&user.access)).await).await;
    let res = app
        .post(
            "/api/auth/refresh",
            None,
            json!({"refreshToken": user.refresh}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["success"], true);
    let access = body["tokens"]["accessToken"].as_str().unwrap();
    assert_ne!(
        body["tokens"]["refreshToken"],
        user.refresh.as_str(),
        "the refresh token rotates"
    );
    assert_eq!(app.get("/api/auth/me", Some(access)).await.status(), 200);
}

#[tokio::test]
async fn replaying_a_rotated_refresh_token_revokes_the_session() {
    let app = spawn_app().await;
    let user = app.user().await;
    let res = app
        .post(
            "/api/auth/refresh",
            None,
            json!({"refreshToken": user.refresh}),
        )
        .await;
    let body: Value = res.json().await.unwrap();
    let new_access = body["tokens"]["accessToken"].as_str().unwrap().to_string();
    let new_refresh = body["tokens"]["refreshToken"].as_str().unwrap().to_string();
    assert_eq!(
        app.get("/api/auth/me", Some(&new_access)).await.status(),
        200
    );

    let replay = app
        .post(
            "/api/auth/refresh",
            None,
            json!({"refreshToken": user.refresh}),
        )
        .await;
    assert_unauthorized(replay).await;
    assert_unauthorized(app.get("/api/auth/me", Some(&new_access)).await).await;
    let res = app
        .post(
            "/api/auth/refresh",
            None,
            json!({"refreshToken": new_refresh}),
        )
        .await;
    assert_unauthorized(res).await;
}

fn claims(jwt: &str) -> Value {
    use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
    serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(jwt.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn tokens_carry_the_documented_claims_and_lifetimes() {
    let app = spawn_app().await;
    let user = app.user().await;
    let access = claims(&user.access);
    let refresh = claims(&user.refresh);
    for (c, typ, life) in [
        (&access, "access", 15 * 60),
        (&refresh, "refresh", 7 * 24 * 3600),
    ] {
        assert_eq!(c["typ"], typ);
        assert_eq!(c["sub"], user.id.as_str());
        assert_eq!(
            c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(),
            life
        );
        for claim in ["sid", "jti", "nbf", "iss", "aud"] {
            assert!(!c[claim].is_null(), "{claim} in {c}");
        }
    }
    assert_eq!(access["sid"], refresh["sid"]);
    let header: Value = {
        use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
        serde_json::from_slice(
            &URL_SAFE_NO_PAD
                .decode(user.access.split('.').next().unwrap())
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(header["alg"], "HS256");
}

#[tokio::test]
async fn a_session_idle_for_24_hours_ends() {
    let app = spawn_app().await;
    let user = app.user().await;
    app.state.auth.clock.advance(Duration::hours(23));
    let res = app
        .post(
            "/api/auth/refresh",
            None,
            json!({"refreshToken": user.refresh}),
        )
        .await;
    assert_eq!(res.status(), 200, "23 h idle is still fine");
    let refresh = res.json::<Value>().await.unwrap()["tokens"]["refreshToken"]
        .as_str()
        .unwrap()
        .to_string();
    app.state
        .auth
        .clock
        .advance(Duration::hours(24) + Duration::minutes(2));
    let res = app
        .post("/api/auth/refresh", None, json!({"refreshToken": refresh}))
        .await;
    assert_unauthorized(res).await;
}

#[tokio::test]
async fn the_sixth_sign_in_ends_the_oldest_session() {
    let app = spawn_app().await;
    let user = app.user().await;
    let mut tokens = vec![user.access.clone()];
    for _ in 0..4 {
        tokens.push(app.tokens(&user.email, &user.password).await.0);
    }
    for t in &tokens {
        assert_eq!(app.get("/api/auth/me", Some(t)).await.status(), 200);
    }
    let sixth = app.tokens(&user.email, &user.password).await.0;
    assert_unauthorized(app.get("/api/auth/me", Some(&tokens[0])).await).await;
    let res = app
        .post(
            "/api/auth/refresh",
            None,
            json!({"refreshToken": user.refresh}),
        )
        .await;
    assert_unauthorized(res).await;
    for t in tokens[1..].iter().chain([&sixth]) {
        assert_eq!(app.get("/api/auth/me", Some(t)).await.status(), 200);
    }
    let sessions: Value = app
        .get("/api/auth/sessions", Some(&sixth))
        .await
        .json()
        .await
        .unwrap();
    let sessions = sessions["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 5);
    assert_eq!(sessions.iter().filter(|s| s["current"] == true).count(), 1);
    assert_eq!(sessions[0]["current"], true, "newest first");
    assert_eq!(sessions[0]["ip"], "127.0.0.1");
    assert!(sessions[0]["createdAt"].as_str().unwrap().ends_with('Z'));
}

#[tokio::test]
async fn logout_and_ending_one_session() {
    let app = spawn_app().await;
    let user = app.user().await;
    let (other, _) = app.tokens(&user.email, &user.password).await;
    let sessions: Value = app
        .get("/api/auth/sessions", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    let other_id = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["current"] == false)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();

    let stranger = app.user().await;
    let res = app
        .delete(
            &format!("/api/auth/sessions/{other_id}"),
            Some(&stranger.access),
        )
        .await;
    assert_error(res, 404, "Not Found", None).await;
    assert_eq!(
        app.get("/api/auth/me", Some(&other)).await.status(),
        200,
        "a stranger cannot end it"
    );

    let res = app
        .delete(
            &format!("/api/auth/sessions/{other_id}"),
            Some(&user.access),
        )
        .await;
    assert_eq!(res.status(), 200);
    assert_unauthorized(app.get("/api/auth/me", Some(&other)).await).await;
    let res = app
        .delete(
            &format!("/api/auth/sessions/{other_id}"),
            Some(&user.access),
        )
        .await;
    assert_error(res, 404, "Not Found", None).await;

    let res = app
        .post("/api/auth/logout", Some(&user.access), json!({}))
        .await;
    assert_eq!(res.status(), 200);
    assert_unauthorized(app.get("/api/auth/me", Some(&user.access)).await).await;
}

pub(crate) fn cookie_header(res: &reqwest::Response) -> (String, String) {
    let mut jar = Vec::new();
    let mut csrf = String::new();
    for value in res.headers().get_all(header::SET_COOKIE) {
        let pair = value
            .to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_string();
        if let Some(v) = pair.strip_prefix("ac_csrf=") {
            csrf = v.to_string();
        }
        jar.push(pair);
    }
    (jar.join("; "), csrf)
}

#[tokio::test]
async fn dashboard_cookies_authenticate_and_unsafe_requests_need_the_csrf_token() {
    let app = spawn_app().await;
    let user = app.user().await;
    let res = app.login(&user.email, &user.password).await;
    let set: Vec<String> = res
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    assert!(set.iter().any(|c| c.starts_with("ac_access=")
        && c.contains("HttpOnly")
        && c.contains("SameSite=Lax")));
    assert!(set.iter().any(|c| c.starts_with("ac_refresh=")
        && c.contains("HttpOnly")
        && c.contains("Path=/api/auth")));
    assert!(set
        .iter()
        .any(|c| c.starts_with("ac_csrf=") && !c.contains("HttpOnly")));
    assert!(
        !set.iter().any(|c| c.contains("Secure")),
        "plain http PUBLIC_URL: no Secure flag"
    );
    let (cookies, csrf) = cookie_header(&res);

    let me = app
        .client
        .get(app.url("/api/auth/me"))
        .header(header::COOKIE, &cookies)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 200);

    let refreshed = app
        .client
        .post(app.url("/api/auth/refresh"))
        .header(header::COOKIE, &cookies)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_error(refreshed, 403, "Forbidden", None).await;
    let refreshed = app
        .client
        .post(app.url("/api/auth/refresh"))
        .header(header::COOKIE, &cookies)
        .header("x-csrf-token", &csrf)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(refreshed.status(), 200);
    let (cookies, csrf) = cookie_header(&refreshed);

    let no_csrf = app
        .client
        .post(app.url("/api/auth/logout"))
        .header(header::COOKIE, &cookies)
        .send()
        .await
        .unwrap();
    assert_error(no_csrf, 403, "Forbidden", None).await;
    let wrong = app
        .client
        .post(app.url("/api/auth/logout"))
        .header(header::COOKIE, &cookies)
        .header("x-csrf-token", "forged")
        .send()
        .await
        .unwrap();
    assert_error(wrong, 403, "Forbidden", None).await;
    let ok = app
        .client
        .post(app.url("/api/auth/logout"))
        .header(header::COOKIE, &cookies)
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert!(ok
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .any(|c| c.to_str().unwrap().starts_with("ac_access=;")));
    let me = app
        .client
        .get(app.url("/api/auth/me"))
        .header(header::COOKIE, &cookies)
        .send()
        .await
        .unwrap();
    assert_unauthorized(me).await;
}

#[tokio::test]
async fn cookies_are_secure_when_the_public_url_is_https() {
    let app = spawn_app_with(|c| c.server.public_url = "https://chat.example.com".into()).await;
    let email = unique_email();
    app.signup(&email, "password123").await;
    let token = token_of(&link_containing(
        &app.smtp.wait_for(&email, 1).await,
        "verify-email",
    ));
    assert!(app
        .smtp
        .wait_for(&email, 1)
        .await
        .contains("https://chat.example.com/api/auth/verify-email"));
    app.post("/api/auth/verify-email", None, json!({"token": token}))
        .await;
    let res = app.login(&email, "password123").await;
    assert!(res
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .all(|c| c.to_str().unwrap().contains("Secure")));
}

/// The dashboard cookies of a fresh sign-in of `user`: (Cookie header, CSRF token).
async fn dashboard_session(app: &TestApp, user: &TestUser) -> (String, String) {
    let res = app.login(&user.email, &user.password).await;
    assert_eq!(res.status(), 200);
    cookie_header(&res)
}

/// The `Cookie` header `cookies` with its `ac_csrf` value replaced by `csrf`.
fn with_csrf_cookie(cookies: &str, csrf: &str) -> String {
    cookies
        .split("; ")
        .map(|pair| {
            if pair.starts_with("ac_csrf=") {
                format!("ac_csrf={csrf}")
            } else {
                pair.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[tokio::test]
async fn a_planted_csrf_cookie_does_not_pass_with_a_victims_session() {
    let app = spawn_app().await;
    let victim = app.user().await;
    let attacker = app.user().await;
    let (cookies, csrf) = dashboard_session(&app, &victim).await;
    // The attacker's own token is genuine, but for the attacker's session.
    let (_, attackers_csrf) = dashboard_session(&app, &attacker).await;
    let create_key = |cookies: String, csrf: String| {
        app.client
            .post(app.url("/api/api-keys"))
            .header(header::COOKIE, cookies)
            .header("x-csrf-token", csrf)
            .json(&json!({"name": "planted", "scopes": ["agents:read"]}))
            .send()
    };
    // Several safe requests first, so that every worker thread has the victim's access
    // token in its credential cache: a cached credential must not skip the check.
    for _ in 0..8 {
        let me = app
            .client
            .get(app.url("/api/auth/me"))
            .header(header::COOKIE, &cookies)
            .send()
            .await
            .unwrap();
        assert_eq!(me.status(), 200);
    }
    for planted in ["planted-by-the-attacker".to_string(), attackers_csrf] {
        for _ in 0..4 {
            let res = create_key(with_csrf_cookie(&cookies, &planted), planted.clone())
                .await
                .unwrap();
            assert_error(res, 403, "Forbidden", None).await;
        }
        let refresh = app
            .client
            .post(app.url("/api/auth/refresh"))
            .header(header::COOKIE, with_csrf_cookie(&cookies, &planted))
            .header("x-csrf-token", &planted)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_error(refresh, 403, "Forbidden", None).await;
    }
    let keys: Value = app
        .get("/api/api-keys", Some(&victim.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(keys["apiKeys"], json!([]), "no key was created");

    // The victim's own token still works, and the refused refreshes rotated nothing.
    let res = create_key(cookies.clone(), csrf.clone()).await.unwrap();
    assert_eq!(res.status(), 201);
    let refreshed = app
        .client
        .post(app.url("/api/auth/refresh"))
        .header(header::COOKIE, &cookies)
        .header("x-csrf-token", &csrf)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(refreshed.status(), 200);
    let (_, renewed) = cookie_header(&refreshed);
    assert_eq!(renewed, csrf, "a refresh keeps the session and its token");
}
