//! Behind a load balancer (`TRUSTED_PROXIES`): the client IP of the per-IP budget, the
//! sign-in throttle and the sessions is the right-most `X-Forwarded-For` hop that is not a
//! trusted proxy, and the header of a peer that is not trusted changes nothing.

use std::net::IpAddr;

use agentchat::forwarded::TrustedProxies;
use serde_json::{json, Value};

use crate::helpers::*;

/// A client whose connections come from `local` (any 127/8 address is this machine).
fn client_from(local: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(IpAddr::from(local))
        .build()
        .unwrap()
}

/// `GET /api/auth/providers` (unauthenticated: the client IP's budget of 100 a minute),
/// with `X-Forwarded-For: forwarded` when given; returns the status.
async fn providers(app: &TestApp, client: &reqwest::Client, forwarded: Option<&str>) -> u16 {
    let mut req = client.get(app.url("/api/auth/providers"));
    if let Some(hops) = forwarded {
        req = req.header("x-forwarded-for", hops);
    }
    req.send().await.unwrap().status().as_u16()
}

/// The load balancer is 127.0.0.1 (the tests' default source address).
async fn behind_a_proxy() -> TestApp {
    spawn_app_with(|c| {
        c.server.trusted_proxies = TrustedProxies::parse("127.0.0.1/32, 10.0.0.0/8").unwrap();
    })
    .await
}

#[tokio::test]
async fn a_trusted_proxys_header_names_the_client_of_the_per_ip_budget() {
    let app = behind_a_proxy().await;
    let proxy = client_from([127, 0, 0, 1]);
    // The client prepended a forged hop; the proxies appended the real client and
    // themselves.
    for _ in 0..100 {
        assert_eq!(
            providers(&app, &proxy, Some("6.6.6.6, 203.0.113.9, 10.1.1.1")).await,
            200
        );
    }
    assert_eq!(
        providers(&app, &proxy, Some("203.0.113.9")).await,
        429,
        "203.0.113.9 spent its budget"
    );
    assert_eq!(
        providers(&app, &proxy, Some("7.7.7.7, 203.0.113.9")).await,
        429,
        "a forged hop left of the client changes nothing"
    );
    assert_eq!(
        providers(&app, &proxy, Some("203.0.113.10")).await,
        200,
        "another client behind the proxy has its own budget"
    );
    assert_eq!(
        providers(&app, &proxy, None).await,
        200,
        "the proxy's own requests count as the proxy's"
    );
}

#[tokio::test]
async fn an_untrusted_peers_header_does_not_change_its_budget() {
    let app = behind_a_proxy().await;
    let direct = client_from([127, 0, 0, 7]);
    for n in 0..100 {
        let spoofed = format!("198.51.100.{n}");
        assert_eq!(providers(&app, &direct, Some(&spoofed)).await, 200);
    }
    assert_eq!(
        providers(&app, &direct, Some("198.51.100.200")).await,
        429,
        "the peer's own budget is spent whatever X-Forwarded-For says"
    );
    assert_eq!(providers(&app, &direct, None).await, 429);
    // The spoofed addresses were not charged: a trusted proxy's client with one of them
    // still has its whole budget.
    let proxy = client_from([127, 0, 0, 1]);
    assert_eq!(providers(&app, &proxy, Some("198.51.100.5")).await, 200);
}

#[tokio::test]
async fn without_trusted_proxies_the_header_is_ignored() {
    let app = spawn_app().await;
    let client = client_from([127, 0, 0, 1]);
    for n in 0..100 {
        let hops = format!("198.51.100.{n}");
        assert_eq!(providers(&app, &client, Some(&hops)).await, 200);
    }
    assert_eq!(providers(&app, &client, Some("198.51.100.200")).await, 429);
}

#[tokio::test]
async fn sessions_and_the_sign_in_throttle_use_the_forwarded_client() {
    let app = behind_a_proxy().await;
    let user = app.user().await;
    let proxy = client_from([127, 0, 0, 1]);
    let login = |password: &str, hops: &str| {
        proxy
            .post(app.url("/api/auth/login"))
            .header("x-forwarded-for", hops)
            .json(&json!({"email": user.email, "password": password}))
            .send()
    };
    let res = login(&user.password, "203.0.113.9").await.unwrap();
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    let access = body["tokens"]["accessToken"].as_str().unwrap();
    let sessions: Value = app
        .get("/api/auth/sessions", Some(access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(sessions["sessions"][0]["current"], true);
    assert_eq!(sessions["sessions"][0]["ip"], "203.0.113.9");

    // Failed sign-ins are throttled per email and client IP (5 per 15 minutes).
    for _ in 0..5 {
        let res = login("wrong password", "198.51.100.1").await.unwrap();
        assert_eq!(res.status(), 401);
    }
    let res = login("wrong password", "198.51.100.1").await.unwrap();
    assert_eq!(
        res.status(),
        429,
        "198.51.100.1 is throttled for this email"
    );
    let res = login("wrong password", "198.51.100.2").await.unwrap();
    assert_eq!(res.status(), 401, "another client behind the proxy is not");
}
