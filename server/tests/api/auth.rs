//! Signup, email verification, login and password reset.

use chrono::Duration;
use reqwest::header;
use serde_json::{json, Value};

use crate::helpers::*;

#[tokio::test]
async fn signup_answers_201_with_the_user_and_emails_a_verification_link() {
    let app = spawn_app().await;
    let email = unique_email();
    let res = app
        .post(
            "/api/auth/signup",
            None,
            json!({"name": " Ada Lovelace ", "email": email.to_uppercase(), "password": "password123",
                   "company": "Analytical", "country": "gb", "phone": "+44 20 7946 0958"}),
        )
        .await;
    assert_eq!(res.status(), 201);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["success"], true);
    assert_eq!(
        body["user"]["email"], email,
        "emails are normalised to lower case"
    );
    assert_eq!(body["user"]["name"], "Ada Lovelace");
    assert!(body["user"]["id"].as_str().unwrap().len() >= 32);
    assert!(body["message"].as_str().unwrap().contains("verify"));
    let mail = app.smtp.wait_for(&email, 1).await;
    let link = link_containing(&mail, "/api/auth/verify-email?token=");
    assert!(link.starts_with(&format!("http://{}", app.addr)), "{link}");
}

#[tokio::test]
async fn signup_validates_every_field() {
    let app = spawn_app().await;
    let ok = json!({"name": "Ada", "email": unique_email(), "password": "password123"});
    let cases = [
        ("name", json!("  ")),
        ("email", json!("not-an-email")),
        ("email", json!("ada@localhost")),
        ("password", json!("short7!")),
        ("password", json!("x".repeat(129))),
        ("country", json!("XX")),
        ("country", json!("DEU")),
        ("phone", json!("call me")),
        ("phone", json!("123")),
    ];
    for (field, value) in cases {
        let mut body = ok.clone();
        body[field] = value.clone();
        let res = app.post("/api/auth/signup", None, body).await;
        let err = assert_error(res, 400, "Bad Request", None).await;
        assert!(
            err["message"].as_str().unwrap().contains(field),
            "{field}={value}: {err}"
        );
    }
    for missing in ["name", "email", "password"] {
        let mut body = ok.clone();
        body.as_object_mut().unwrap().remove(missing);
        let res = app.post("/api/auth/signup", None, body).await;
        let err = assert_error(res, 400, "Bad Request", None).await;
        assert!(err["message"].as_str().unwrap().contains(missing), "{err}");
    }
    let mut long_ok = ok.clone();
    long_ok["password"] = json!("é".repeat(128));
    assert_eq!(
        app.post("/api/auth/signup", None, long_ok).await.status(),
        201,
        "128 characters is allowed"
    );
    app.smtp.wait_for(ok["email"].as_str().unwrap(), 1).await;
    assert_eq!(app.smtp.all().len(), 1, "rejected signups send no mail");
}

#[tokio::test]
async fn a_taken_email_is_409_and_nothing_changes() {
    let app = spawn_app().await;
    let email = unique_email();
    assert_eq!(app.signup(&email, "password123").await.status(), 201);
    let res = app.signup(&email.to_uppercase(), "another-password").await;
    assert_error(res, 409, "Conflict", None).await;
}

#[tokio::test]
async fn login_needs_a_verified_email_and_the_link_is_single_use() {
    let app = spawn_app().await;
    let email = unique_email();
    assert_eq!(app.signup(&email, "password123").await.status(), 201);
    let res = app.login(&email, "password123").await;
    let err = assert_error(res, 403, "Forbidden", None).await;
    assert!(err["message"].as_str().unwrap().contains("not verified"));

    let mail = app.smtp.wait_for(&email, 1).await;
    let link = link_containing(&mail, "verify-email");
    let token = token_of(&link);
    assert!(
        !contains(&app.database_bytes(), &token),
        "only the token's hash is stored"
    );
    let res = app.client.get(&link).send().await.unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(res.headers()[header::LOCATION], "/login?verified=1");
    let again = app.client.get(&link).send().await.unwrap();
    assert_eq!(
        again.headers()[header::LOCATION],
        "/login?verifyError=1",
        "single use"
    );
    let res = app
        .post("/api/auth/verify-email", None, json!({"token": token}))
        .await;
    assert_error(res, 400, "Bad Request", None).await;

    let res = app.login(&email, "password123").await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["success"], true);
    assert_eq!(body["user"]["email"], email);
    assert!(
        body["tokens"]["accessToken"]
            .as_str()
            .unwrap()
            .split('.')
            .count()
            == 3
    );
    assert!(
        body["tokens"]["refreshToken"]
            .as_str()
            .unwrap()
            .split('.')
            .count()
            == 3
    );
}

#[tokio::test]
async fn verification_by_post_and_link_expiry_after_24_hours() {
    let app = spawn_app().await;
    let (a, b) = (unique_email(), unique_email());
    app.signup(&a, "password123").await;
    app.signup(&b, "password123").await;
    let token_a = token_of(&link_containing(
        &app.smtp.wait_for(&a, 1).await,
        "verify-email",
    ));
    let token_b = token_of(&link_containing(
        &app.smtp.wait_for(&b, 1).await,
        "verify-email",
    ));
    let res = app
        .post("/api/auth/verify-email", None, json!({"token": token_a}))
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(app.login(&a, "password123").await.status(), 200);

    app.state
        .auth
        .clock
        .advance(Duration::hours(24) + Duration::minutes(1));
    let res = app
        .post("/api/auth/verify-email", None, json!({"token": token_b}))
        .await;
    assert_error(res, 400, "Bad Request", None).await;
    assert_eq!(app.login(&b, "password123").await.status(), 403);
}

#[tokio::test]
async fn resend_verification_is_neutral_and_sends_a_new_working_link() {
    let app = spawn_app().await;
    let email = unique_email();
    app.signup(&email, "password123").await;
    app.smtp.wait_for(&email, 1).await;
    let unknown = app
        .post(
            "/api/auth/resend-verification",
            None,
            json!({"email": unique_email()}),
        )
        .await;
    assert_eq!(unknown.status(), 200);
    let unknown: Value = unknown.json().await.unwrap();
    let known = app
        .post(
            "/api/auth/resend-verification",
            None,
            json!({"email": email}),
        )
        .await;
    assert_eq!(known.status(), 200);
    let known: Value = known.json().await.unwrap();
    assert_eq!(
        unknown, known,
        "same answer whether or not the account exists"
    );
    let mail = app.smtp.wait_for(&email, 2).await;
    let res = app
        .client
        .get(link_containing(&mail, "verify-email"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()[header::LOCATION], "/login?verified=1");
    // A second resend within a minute sends nothing (mail-bombing guard).
    app.post(
        "/api/auth/resend-verification",
        None,
        json!({"email": email}),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(app.smtp.count_to(&email), 2);
}

#[tokio::test]
async fn wrong_password_and_unknown_email_get_the_same_401() {
    let app = spawn_app().await;
    let user = app.user().await;
    let wrong = app.login(&user.email, "wrong password").await;
    let wrong = assert_error(wrong, 401, "Unauthorized", None).await;
    let unknown = app.login(&unique_email(), "wrong password").await;
    let unknown = assert_error(unknown, 401, "Unauthorized", None).await;
    assert_eq!(wrong, unknown);
    let long = app.login(&user.email, &"x".repeat(5000)).await;
    assert_error(long, 401, "Unauthorized", None).await;
}

fn client_from(ip: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(std::net::IpAddr::from(ip))
        .build()
        .unwrap()
}

#[tokio::test]
async fn failed_logins_are_throttled_per_ip_without_locking_out_the_owner() {
    let app = spawn_app().await;
    let user = app.user().await;
    let attacker = client_from([127, 0, 0, 2]);
    let owner = client_from([127, 0, 0, 3]);
    let login = |c: &reqwest::Client, password: &str| {
        c.post(app.url("/api/auth/login"))
            .json(&json!({"email": user.email, "password": password}))
            .send()
    };
    for _ in 0..5 {
        assert_eq!(login(&attacker, "guess").await.unwrap().status(), 401);
    }
    let blocked = login(&attacker, &user.password).await.unwrap();
    assert!(
        blocked.headers()[header::RETRY_AFTER]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );
    assert_error(
        blocked,
        429,
        "Rate limit exceeded",
        Some("Too many requests. Please try again later."),
    )
    .await;
    assert_eq!(
        login(&owner, &user.password).await.unwrap().status(),
        200,
        "the owner signs in from elsewhere"
    );
}

#[tokio::test]
async fn password_reset_by_email_ends_every_session() {
    let app = spawn_app().await;
    let user = app.user().await;
    let (second, _) = app.tokens(&user.email, &user.password).await;

    let unknown = app
        .post(
            "/api/auth/forgot-password",
            None,
            json!({"email": unique_email()}),
        )
        .await;
    let unknown: Value = unknown.json().await.unwrap();
    let known = app
        .post(
            "/api/auth/forgot-password",
            None,
            json!({"email": user.email}),
        )
        .await;
    assert_eq!(known.status(), 200);
    assert_eq!(
        unknown,
        known.json::<Value>().await.unwrap(),
        "neutral answer"
    );

    let mail = app.smtp.wait_for(&user.email, 2).await;
    let link = link_containing(&mail, "/reset-password?token=");
    let token = token_of(&link);
    let short = app
        .post(
            "/api/auth/reset-password",
            None,
            json!({"token": token, "password": "short"}),
        )
        .await;
    assert_error(short, 400, "Bad Request", None).await;
    let res = app
        .post(
            "/api/auth/reset-password",
            None,
            json!({"token": token, "password": "a brand new password"}),
        )
        .await;
    assert_eq!(res.status(), 200);
    assert_unauthorized(app.get("/api/auth/me", Some(&user.access)).await).await;
    assert_unauthorized(app.get("/api/auth/me", Some(&second)).await).await;
    let refresh = app
        .post(
            "/api/auth/refresh",
            None,
            json!({"refreshToken": user.refresh}),
        )
        .await;
    assert_unauthorized(refresh).await;
    assert_eq!(
        app.login(&user.email, &user.password).await.status(),
        401,
        "old password is gone"
    );
    assert_eq!(
        app.login(&user.email, "a brand new password")
            .await
            .status(),
        200
    );
    let reuse = app
        .post(
            "/api/auth/reset-password",
            None,
            json!({"token": token, "password": "yet another one"}),
        )
        .await;
    assert_error(reuse, 400, "Bad Request", None).await;
}

#[tokio::test]
async fn a_reset_link_expires_after_an_hour() {
    let app = spawn_app().await;
    let user = app.user().await;
    app.post(
        "/api/auth/forgot-password",
        None,
        json!({"email": user.email}),
    )
    .await;
    let token = token_of(&link_containing(
        &app.smtp.wait_for(&user.email, 2).await,
        "reset-password",
    ));
    app.state.auth.clock.advance(Duration::minutes(61));
    let res = app
        .post(
            "/api/auth/reset-password",
            None,
            json!({"token": token, "password": "a brand new password"}),
        )
        .await;
    assert_error(res, 400, "Bad Request", None).await;
}

/// `POST /api/auth/reset-password` with `token` and `password`.
async fn reset(app: &TestApp, token: &str, password: &str) -> reqwest::Response {
    app.post(
        "/api/auth/reset-password",
        None,
        json!({"token": token, "password": password}),
    )
    .await
}

#[tokio::test]
async fn using_a_reset_link_voids_the_older_ones() {
    let app = spawn_app().await;
    let user = app.user().await;
    let mut tokens = Vec::new();
    for n in [2, 3] {
        let res = app
            .post(
                "/api/auth/forgot-password",
                None,
                json!({"email": user.email}),
            )
            .await;
        assert_eq!(res.status(), 200);
        tokens.push(token_of(&link_containing(
            &app.smtp.wait_for(&user.email, n).await,
            "reset-password",
        )));
        // As if the mail-bombing guard's minute had passed.
        app.state.auth.mail_cooldown.invalidate_all().await;
    }
    let (older, newer) = (&tokens[0], &tokens[1]);
    assert_eq!(reset(&app, newer, "the newer password").await.status(), 200);
    let invalid = reset(&app, "no-such-token", "the older password").await;
    let invalid = assert_error(invalid, 400, "Bad Request", None).await;
    let res = reset(&app, older, "the older password").await;
    let res = assert_error(res, 400, "Bad Request", None).await;
    assert_eq!(res, invalid, "the same answer as an unknown link");
    assert_eq!(
        app.login(&user.email, "the older password").await.status(),
        401
    );
    assert_eq!(
        app.login(&user.email, "the newer password").await.status(),
        200
    );
}

#[tokio::test]
async fn using_a_verification_link_voids_the_older_ones() {
    let app = spawn_app().await;
    let email = unique_email();
    assert_eq!(app.signup(&email, "password123").await.status(), 201);
    let older = link_containing(&app.smtp.wait_for(&email, 1).await, "verify-email");
    let res = app
        .post(
            "/api/auth/resend-verification",
            None,
            json!({"email": email}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let newer = link_containing(&app.smtp.wait_for(&email, 2).await, "verify-email");
    let res = app.client.get(&newer).send().await.unwrap();
    assert_eq!(res.headers()[header::LOCATION], "/login?verified=1");
    let res = app.client.get(&older).send().await.unwrap();
    assert_eq!(
        res.headers()[header::LOCATION],
        "/login?verifyError=1",
        "the older link was voided by the newer one's use"
    );
}

#[tokio::test]
async fn me_returns_the_full_profile() {
    let app = spawn_app().await;
    let email = unique_email();
    let res = app
        .post("/api/auth/signup", None, json!({"name": "Grace", "email": email, "password": "password123", "company": "Navy", "country": "us", "phone": "+1 555 010 9999"}))
        .await;
    assert_eq!(res.status(), 201);
    let mail = app.smtp.wait_for(&email, 1).await;
    app.client
        .get(link_containing(&mail, "verify-email"))
        .send()
        .await
        .unwrap();
    let (access, _) = app.tokens(&email, "password123").await;
    let me: Value = app
        .get("/api/auth/me", Some(&access))
        .await
        .json()
        .await
        .unwrap();
    let user = &me["user"];
    assert_eq!(user["email"], email);
    assert_eq!(user["name"], "Grace");
    assert_eq!(user["company"], "Navy");
    assert_eq!(user["country"], "US");
    assert_eq!(user["phone"], "+1 555 010 9999");
    assert_eq!(user["plan"], "free");
    assert_eq!(user["emailVerified"], true);
    // The Free plan's limits (docs/api.md § Limits), so the dashboard can show them.
    assert_eq!(me["limits"]["requestsPerMinute"], 100);
    assert_eq!(me["limits"]["agents"], 3);
    let created = user["createdAt"].as_str().unwrap();
    assert!(
        chrono::DateTime::parse_from_rfc3339(created).is_ok() && created.ends_with('Z'),
        "{created}"
    );
}

#[tokio::test]
async fn passwords_are_stored_as_argon2id_hashes_only() {
    let app = spawn_app().await;
    let user = app.user().await;
    let db = app.database_bytes();
    assert!(!contains(&db, &user.password));
    assert!(contains(&db, "$argon2id$v=19$m=19456,t=2,p=1$"));
}
