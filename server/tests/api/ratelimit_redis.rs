//! Rate limits, the failed-sign-in throttle and the mail cooldown with `REDIS_URL`
//! (README § Running several instances): two applications on one Redis share them, with
//! the same `X-RateLimit-*` headers and 429 body as in process. The Redis is
//! `AGENTCHAT_TEST_REDIS_URL` (default `redis://127.0.0.1:6379`), each test under a key
//! prefix of its own; a test fails when that Redis does not answer.

use std::{collections::BTreeSet, time::Duration};

use agentchat::config::Config;
use reqwest::header;
use serde_json::json;

use crate::helpers::*;

fn redis_url() -> String {
    std::env::var("AGENTCHAT_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A key prefix no other test uses; panics when the tests' Redis does not answer.
async fn fresh_prefix() -> String {
    let url = redis_url();
    let mut connection = tokio::time::timeout(Duration::from_secs(2), async {
        redis::Client::open(url.as_str())
            .expect("a Redis URL")
            .get_multiplexed_async_connection()
            .await
    })
    .await
    .ok()
    .and_then(Result::ok)
    .unwrap_or_else(|| {
        panic!("Redis at {url} does not answer: start it or set AGENTCHAT_TEST_REDIS_URL")
    });
    let _: () = redis::cmd("PING")
        .query_async(&mut connection)
        .await
        .unwrap();
    format!("t_{}:", uuid::Uuid::new_v4().simple())
}

/// Points `config` at the tests' Redis under `prefix`.
fn on_redis(config: &mut Config, prefix: &str) {
    config.limits.redis_url = Some(redis_url());
    config.limits.redis_key_prefix = prefix.to_string();
}

/// Two applications sharing the tests' Redis under one fresh prefix, after `tweak`.
async fn two_apps(tweak: impl Fn(&mut Config)) -> (TestApp, TestApp) {
    let prefix = fresh_prefix().await;
    let a = spawn_app_with(|c| {
        on_redis(c, &prefix);
        tweak(c);
    })
    .await;
    let b = spawn_app_with(|c| {
        on_redis(c, &prefix);
        tweak(c);
    })
    .await;
    (a, b)
}

/// Deletes the keys of `app`'s prefix.
async fn clean(app: &TestApp) {
    let redis = app.state.redis.as_ref().expect("REDIS_URL is set");
    redis.clear("*").await.unwrap();
}

fn header_number(res: &reqwest::Response, name: &str) -> i64 {
    res.headers()[name].to_str().unwrap().parse().unwrap()
}

fn client_from(ip: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(std::net::IpAddr::from(ip))
        .build()
        .unwrap()
}

#[tokio::test]
async fn two_instances_count_against_one_budget_exactly() {
    let (a, b) = two_apps(|c| c.limits.channel_requests_per_minute = 30).await;
    let now = chrono::Utc::now().timestamp();
    let requests = (0..60).map(|n| {
        let app = if n % 2 == 0 { &a } else { &b };
        app.client
            .post(app.url("/api/channels/telegram/int_shared"))
            .json(&json!({"update_id": n}))
            .send()
    });
    let answers: Vec<_> = futures::future::join_all(requests)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let (refused, allowed): (Vec<_>, Vec<_>) = answers.into_iter().partition(|r| r.status() == 429);
    assert_eq!(
        allowed.len(),
        30,
        "exactly the budget, across both instances"
    );
    let remaining: BTreeSet<i64> = allowed
        .iter()
        .map(|r| header_number(r, "x-ratelimit-remaining"))
        .collect();
    assert_eq!(remaining, (0..30).collect(), "29..0, each once");
    for res in allowed.iter().chain(&refused) {
        assert_eq!(header_number(res, "x-ratelimit-limit"), 30);
        let reset = header_number(res, "x-ratelimit-reset");
        assert!(reset >= now && reset <= now + 62, "{reset}");
    }
    for res in refused {
        assert_eq!(header_number(&res, "x-ratelimit-remaining"), 0);
        let retry = header_number(&res, header::RETRY_AFTER.as_str());
        assert!((1..=2).contains(&retry), "a refill every 2 s: {retry}");
        assert_error(
            res,
            429,
            "Rate limit exceeded",
            Some("Too many requests. Please try again later."),
        )
        .await;
    }
    assert_eq!(a.state.redis.as_ref().unwrap().fallbacks(), 0);
    assert_eq!(b.state.redis.as_ref().unwrap().fallbacks(), 0);
    clean(&a).await;
}

/// A TCP relay from a port of the loopback to the tests' Redis whose connections the test
/// can cut at once, as a Redis restart or a broken network does to a client.
struct CuttableRelay {
    url: String,
    cuts: std::sync::Arc<tokio::sync::watch::Sender<usize>>,
    /// Connections open through the relay, by the number of cuts before they opened.
    open: std::sync::Arc<std::sync::Mutex<Vec<usize>>>,
}

impl CuttableRelay {
    async fn start() -> Self {
        let mut url = reqwest::Url::parse(&redis_url()).expect("a Redis URL");
        let target = format!(
            "{}:{}",
            url.host_str().expect("a Redis host"),
            url.port().unwrap_or(6379)
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        url.set_host(Some("127.0.0.1")).unwrap();
        url.set_port(Some(listener.local_addr().unwrap().port()))
            .unwrap();
        let cuts = std::sync::Arc::new(tokio::sync::watch::channel(0).0);
        let open = std::sync::Arc::new(std::sync::Mutex::new(vec![0]));
        let (relay_cuts, relay_open) = (cuts.clone(), open.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut cut = relay_cuts.subscribe();
                let generation = *cut.borrow_and_update();
                relay_open.lock().unwrap()[generation] += 1;
                let (target, open) = (target.clone(), relay_open.clone());
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                            _ = cut.changed() => {}
                        }
                    }
                    // Both sockets are dropped, so closed, before the count goes down.
                    drop(inbound);
                    open.lock().unwrap()[generation] -= 1;
                });
            }
        });
        Self {
            url: url.to_string(),
            cuts,
            open,
        }
    }

    /// Closes every connection open through the relay, and returns once they are closed;
    /// later ones pass again.
    async fn cut(&self) {
        let mut cuts = 0;
        {
            // The accept loop counts a connection under this lock: the slot of the new
            // count exists by the time it counts there.
            let mut open = self.open.lock().unwrap();
            self.cuts.send_modify(|n| {
                *n += 1;
                cuts = *n;
            });
            open.push(0);
        }
        tokio::time::timeout(Duration::from_secs(5), async {
            while self.open.lock().unwrap()[..cuts].iter().any(|&n| n > 0) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the relay closes its connections");
    }
}

#[tokio::test]
async fn a_cut_redis_connection_is_opened_again_and_the_budget_is_shared_again() {
    // Each instance's one multiplexed connection is opened again by whichever request
    // finds it broken, on whichever of its runtimes serves that request (README
    // § Configuration, "Threads"): four cuts, each followed by an exact shared budget.
    let relay = CuttableRelay::start().await;
    let (a, b) = two_apps(|c| {
        c.limits.redis_url = Some(relay.url.clone());
        c.limits.channel_requests_per_minute = 30;
    })
    .await;
    let apps = [a, b];
    let fallbacks = || -> u64 {
        apps.iter()
            .map(|app| app.state.redis.as_ref().unwrap().fallbacks())
            .sum()
    };
    for round in 0..4 {
        relay.cut().await;
        // Requests from both instances until a round of them is answered by Redis: the
        // first ones after the cut fall back, then the connection is open again.
        let recovered = tokio::time::timeout(Duration::from_secs(10), async {
            for probe in 0.. {
                let before = fallbacks();
                let answers = futures::future::join_all(apps.iter().flat_map(|app| {
                    (0..4).map(move |n| {
                        app.client
                            .post(app.url(&format!(
                                "/api/channels/telegram/int_probe{round}_{probe}_{n}"
                            )))
                            .json(&json!({}))
                            .send()
                    })
                }))
                .await;
                assert!(answers.iter().all(|r| r.as_ref().unwrap().status() != 429));
                if fallbacks() == before {
                    return probe;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            unreachable!()
        })
        .await;
        assert!(
            recovered.is_ok(),
            "round {round}: Redis never answered again"
        );
        let before = fallbacks();
        let requests = (0..60).map(|n| {
            let app = &apps[n % 2];
            app.client
                .post(app.url(&format!("/api/channels/telegram/int_round{round}")))
                .json(&json!({"update_id": n}))
                .send()
        });
        let allowed = futures::future::join_all(requests)
            .await
            .into_iter()
            .filter(|r| r.as_ref().unwrap().status() != 429)
            .count();
        assert_eq!(
            allowed, 30,
            "round {round}: exactly the budget, across both instances"
        );
        assert_eq!(
            fallbacks(),
            before,
            "round {round}: Redis answered every check"
        );
    }
    assert!(fallbacks() >= 4, "each cut was noticed: {}", fallbacks());
    clean(&apps[0]).await;
}

#[tokio::test]
async fn a_plan_budget_in_redis_gives_the_same_answers() {
    let prefix = fresh_prefix().await;
    let app = spawn_app_with(|c| {
        on_redis(c, &prefix);
        c.limits.rate_limits = [4, 500, 2000, 10000];
    })
    .await;
    let user = app.user().await;
    let (_, key) = app.api_key(&user, &["agents:read"]).await; // request 1 of the account
    let first = app.get("/api/auth/me", Some(&user.access)).await; // 2
    assert_eq!(header_number(&first, "x-ratelimit-limit"), 4);
    assert_eq!(header_number(&first, "x-ratelimit-remaining"), 2);
    assert_eq!(app.get("/api/auth/me", Some(&key)).await.status(), 200); // 3
    assert_eq!(app.get("/api/auth/me", Some(&key)).await.status(), 200); // 4
    let limited = app.get("/api/auth/me", Some(&user.access)).await;
    assert_eq!(header_number(&limited, "x-ratelimit-remaining"), 0);
    let retry = header_number(&limited, "retry-after");
    assert!((1..=15).contains(&retry), "a refill every 15 s: {retry}");
    assert_error(
        limited,
        429,
        "Rate limit exceeded",
        Some("Too many requests. Please try again later."),
    )
    .await;
    // Another plan's budget (a plan change) starts full.
    let email = agentchat::domain::Email::parse(&user.email).unwrap();
    app.state
        .store
        .set_plan(&email, agentchat::domain::Plan::Starter, chrono::Utc::now())
        .await
        .unwrap();
    let mut upgraded = None;
    for _ in 0..40 {
        let res = app.get("/api/auth/me", Some(&key)).await;
        if header_number(&res, "x-ratelimit-limit") == 500 {
            upgraded = Some(res);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let upgraded = upgraded.expect("the new plan is read within the cache's 2 s");
    assert_eq!(upgraded.status(), 200);
    assert_eq!(header_number(&upgraded, "x-ratelimit-remaining"), 499);
    let redis = app.state.redis.as_ref().unwrap();
    assert_eq!(redis.fallbacks(), 0, "Redis answered every check");
    clean(&app).await;
}

#[tokio::test]
async fn failed_sign_ins_on_one_instance_count_on_the_other() {
    let (a, b) = two_apps(|_| {}).await;
    let user = a.user().await;
    let attacker = client_from([127, 0, 0, 2]);
    let owner = client_from([127, 0, 0, 3]);
    let login = |app: &TestApp, c: &reqwest::Client, password: &str| {
        c.post(app.url("/api/auth/login"))
            .json(&json!({"email": user.email, "password": password}))
            .send()
    };
    for n in 0..5 {
        let app = if n % 2 == 0 { &a } else { &b };
        assert_eq!(login(app, &attacker, "guess").await.unwrap().status(), 401);
    }
    let blocked = login(&a, &attacker, &user.password).await.unwrap();
    assert!(header_number(&blocked, header::RETRY_AFTER.as_str()) > 0);
    assert_error(
        blocked,
        429,
        "Rate limit exceeded",
        Some("Too many requests. Please try again later."),
    )
    .await;
    assert_eq!(
        login(&b, &attacker, "guess").await.unwrap().status(),
        429,
        "blocked on the other instance too"
    );
    assert_eq!(
        login(&a, &owner, &user.password).await.unwrap().status(),
        200,
        "the owner signs in from elsewhere"
    );
    clean(&a).await;
}

#[tokio::test]
async fn a_reset_mail_is_sent_once_a_minute_across_instances() {
    let (a, b) = two_apps(|_| {}).await;
    let email = unique_email();
    a.verified_account(&email, "correct horse battery").await;
    b.verified_account(&email, "correct horse battery").await;
    let forgot = |app: &TestApp| {
        app.client
            .post(app.url("/api/auth/forgot-password"))
            .json(&json!({"email": email}))
            .send()
    };
    assert_eq!(forgot(&a).await.unwrap().status(), 200);
    a.smtp.wait_for(&email, 2).await; // the verification mail, then the reset mail
    let res = forgot(&b).await.unwrap();
    assert_eq!(res.status(), 200, "the same answer");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        b.smtp.count_to(&email),
        1,
        "only the verification mail: the reset mail went out through the other instance"
    );
    // As if the minute had passed.
    b.state.auth.mail_cooldown.invalidate_all().await;
    assert_eq!(forgot(&b).await.unwrap().status(), 200);
    b.smtp.wait_for(&email, 2).await;
    clean(&a).await;
}

#[tokio::test]
async fn without_redis_each_instance_keeps_its_own_limits_and_serves() {
    // Nothing listens on port 9 (discard) of the loopback.
    let app = spawn_app_with(|c| {
        c.limits.redis_url = Some("redis://127.0.0.1:9".into());
        c.limits.channel_requests_per_minute = 3;
    })
    .await;
    for remaining in (0..3).rev() {
        let res = app
            .post("/api/channels/telegram/int_alone", None, json!({}))
            .await;
        assert_ne!(res.status(), 429);
        assert_eq!(header_number(&res, "x-ratelimit-limit"), 3);
        assert_eq!(header_number(&res, "x-ratelimit-remaining"), remaining);
    }
    let refused = app
        .post("/api/channels/telegram/int_alone", None, json!({}))
        .await;
    assert!(header_number(&refused, header::RETRY_AFTER.as_str()) >= 1);
    assert_error(
        refused,
        429,
        "Rate limit exceeded",
        Some("Too many requests. Please try again later."),
    )
    .await;
    let user = app.user().await;
    assert_eq!(
        app.get("/api/auth/me", Some(&user.access)).await.status(),
        200
    );
    let redis = app.state.redis.as_ref().unwrap();
    assert!(redis.fallbacks() >= 5, "{}", redis.fallbacks());
    assert_eq!(redis.warnings(), 1, "one warning, not one per request");
}

#[tokio::test]
async fn a_malformed_redis_url_stops_the_start_without_repeating_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut config =
        Config::with_data_dir(dir.path().to_path_buf(), "127.0.0.1:0".parse().unwrap()).unwrap();
    config.limits.redis_url = Some("http://user:hunter2@cache-host:6379".into());
    let Err(err) = agentchat::startup::Application::build(config).await else {
        panic!("started with a malformed REDIS_URL")
    };
    let message = format!("{err:#}");
    assert!(message.contains("REDIS_URL"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
}
