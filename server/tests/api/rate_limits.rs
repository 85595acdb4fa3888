//! Plan rate limits and their headers.

use serde_json::json;

use crate::helpers::*;

fn header_number(res: &reqwest::Response, name: &str) -> i64 {
    res.headers()[name].to_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn every_api_answer_carries_the_rate_limit_headers() {
    let app = spawn_app().await;
    let user = app.user().await;
    let now = chrono::Utc::now().timestamp();
    for res in [
        app.get("/api/auth/me", Some(&user.access)).await,
        app.get("/api/auth/me", None).await,
        app.get("/api/no-such-endpoint", None).await,
        app.post("/api/auth/login", None, json!({})).await,
    ] {
        assert_eq!(header_number(&res, "x-ratelimit-limit"), 100);
        assert!((0..100).contains(&header_number(&res, "x-ratelimit-remaining")));
        let reset = header_number(&res, "x-ratelimit-reset");
        assert!(
            reset >= now && reset <= now + 62,
            "Reset is Unix epoch seconds: {reset}"
        );
    }
}

#[tokio::test]
async fn the_plan_budget_counts_per_account_including_its_api_keys() {
    let app = spawn_app_with(|c| c.limits.rate_limits = [4, 500, 2000, 10000]).await;
    let user = app.user().await;
    let (_, key) = app.api_key(&user, &["agents:read"]).await; // request 1 of the account
    let first = app.get("/api/auth/me", Some(&user.access)).await; // 2
    assert_eq!(header_number(&first, "x-ratelimit-limit"), 4);
    assert_eq!(header_number(&first, "x-ratelimit-remaining"), 2);
    assert_eq!(app.get("/api/auth/me", Some(&key)).await.status(), 200); // 3
    assert_eq!(app.get("/api/auth/me", Some(&key)).await.status(), 200); // 4
    let limited = app.get("/api/auth/me", Some(&user.access)).await;
    assert_eq!(header_number(&limited, "x-ratelimit-remaining"), 0);
    let retry: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_error(
        limited,
        429,
        "Rate limit exceeded",
        Some("Too many requests. Please try again later."),
    )
    .await;
    let by_key = app.get("/api/auth/me", Some(&key)).await;
    assert_error(
        by_key,
        429,
        "Rate limit exceeded",
        Some("Too many requests. Please try again later."),
    )
    .await;

    let other = app.user().await;
    assert_eq!(
        app.get("/api/auth/me", Some(&other.access)).await.status(),
        200,
        "budgets are per account"
    );
}

#[tokio::test]
async fn a_higher_plan_gets_a_higher_budget() {
    let app = spawn_app().await;
    let user = app.user().await;
    let email = agentchat::domain::Email::parse(&user.email).unwrap();
    app.state
        .store
        .set_plan(
            &email,
            agentchat::domain::Plan::Business,
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let res = app.get("/api/auth/me", Some(&user.access)).await;
    assert_eq!(header_number(&res, "x-ratelimit-limit"), 2000);
    let me: serde_json::Value = res.json().await.unwrap();
    assert_eq!(me["user"]["plan"], "business");
    assert_eq!(me["limits"]["requestsPerMinute"], 2000);
    assert_eq!(me["limits"]["agents"], 50);
}

#[tokio::test]
async fn unauthenticated_endpoints_are_limited_per_client_ip() {
    let app = spawn_app().await;
    for _ in 0..100 {
        assert_eq!(app.get("/api/auth/providers", None).await.status(), 200);
    }
    let limited = app.get("/api/auth/providers", None).await;
    assert_error(
        limited,
        429,
        "Rate limit exceeded",
        Some("Too many requests. Please try again later."),
    )
    .await;
    let elsewhere = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 5]))
        .build()
        .unwrap();
    let res = elsewhere
        .get(app.url("/api/auth/providers"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "another IP has its own budget");
    let health = app.get("/api/health", None).await;
    assert_eq!(health.status(), 200, "health is not rate limited");
    assert!(health.headers().get("x-ratelimit-limit").is_none());
}

/// `POST path` with a JSON body and no credentials, from `client`.
async fn unsigned(client: &reqwest::Client, url: String) -> reqwest::Response {
    client
        .post(url)
        .json(&json!({"update_id": 1, "type": "url_verification", "challenge": "c"}))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn channel_endpoints_are_limited_per_integration_and_client_ip_before_any_secret_check() {
    let app = spawn_app_with(|c| c.limits.channel_requests_per_minute = 3).await;
    let user = app.user().await;
    let mut paths = Vec::new();
    for (provider, credentials) in [
        (
            "telegram",
            json!({"botToken": "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq"}),
        ),
        (
            "telegram",
            json!({"botToken": "987654321:BBHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq"}),
        ),
        (
            "slack",
            json!({"botToken": "xoxb-2222-3333-channelsecret", "signingSecret": "8f742231b10e8888abcd99aaaeee85a5"}),
        ),
    ] {
        let res = app
            .post(
                "/api/integrations",
                Some(&user.access),
                json!({"providerCode": provider, "name": "Bot", "credentials": credentials}),
            )
            .await;
        assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
        let id = res.json::<serde_json::Value>().await.unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        paths.push(format!("/api/channels/{provider}/{id}"));
    }
    let (bot, other_bot, slack) = (&paths[0], &paths[1], &paths[2]);

    // Unsigned requests are refused by the secret check (401), and counted first.
    for remaining in [2, 1, 0] {
        let res = unsigned(&app.client, app.url(bot)).await;
        assert_eq!(header_number(&res, "x-ratelimit-limit"), 3);
        assert_eq!(header_number(&res, "x-ratelimit-remaining"), remaining);
        assert_error(res, 401, "Unauthorized", None).await;
    }
    let now = chrono::Utc::now().timestamp();
    let limited = unsigned(&app.client, app.url(bot)).await;
    assert_eq!(header_number(&limited, "x-ratelimit-limit"), 3);
    assert_eq!(header_number(&limited, "x-ratelimit-remaining"), 0);
    let reset = header_number(&limited, "x-ratelimit-reset");
    assert!(reset > now && reset <= now + 62, "{reset}");
    let retry = header_number(&limited, "retry-after");
    assert!(
        (1..=20).contains(&retry),
        "one request refills every 20 s: {retry}"
    );
    assert_error(
        limited,
        429,
        "Rate limit exceeded",
        Some("Too many requests. Please try again later."),
    )
    .await;

    // Another integration, and the same integration from another client IP, have their own
    // budgets.
    let res = unsigned(&app.client, app.url(other_bot)).await;
    assert_eq!(header_number(&res, "x-ratelimit-remaining"), 2);
    assert_error(res, 401, "Unauthorized", None).await;
    let elsewhere = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 5]))
        .build()
        .unwrap();
    assert_eq!(unsigned(&elsewhere, app.url(bot)).await.status(), 401);

    // Slack's endpoint is counted the same way.
    for _ in 0..3 {
        assert_eq!(unsigned(&app.client, app.url(slack)).await.status(), 401);
    }
    let limited = unsigned(&app.client, app.url(slack)).await;
    assert!(limited.headers().contains_key("retry-after"));
    assert_eq!(limited.status(), 429);

    // The caller's own budgets are untouched, and health stays unmetered.
    let me = app.get("/api/auth/me", Some(&user.access)).await;
    assert_eq!(me.status(), 200);
    let health = app.get("/api/health", None).await;
    assert_eq!(health.status(), 200);
    assert!(health.headers().get("x-ratelimit-limit").is_none());
}
