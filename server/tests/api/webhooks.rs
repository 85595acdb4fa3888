//! Webhooks over HTTP: the catalogue, validation, scopes and tenant isolation, secrets
//! shown once and stored encrypted, every event type delivered and signed (verified here
//! with an independent implementation of Standard Webhooks v1), retries with backoff, 410
//! disabling, restart durability, the SSRF rule at creation and at send, and redelivery.

use std::{
    collections::VecDeque,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use agentchat::{store::webhooks::DeliveryStatus, webhooks::EventType};
use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::Html,
    routing::{get, post},
    Router,
};
use base64::{engine::general_purpose::STANDARD, Engine};
use hmac::{Hmac, Mac};
use reqwest::multipart::{Form, Part};
use serde_json::{json, Value};
use sha2::Sha256;

use crate::helpers::*;

/// Every event type that has an emitter today.
const EMITTED: [&str; 11] = [
    "agent.created",
    "agent.updated",
    "agent.deleted",
    "conversation.created",
    "message.created",
    "document.indexed",
    "document.failed",
    "crawl.completed",
    "document.refreshed",
    "feedback.created",
    "usage.threshold",
];

// ---- An independent Standard Webhooks v1 verifier -------------------------------------

/// Verifies a delivery as a receiver would (Standard Webhooks v1 § Verifying webhooks):
/// the key is the base64 after `whsec_`; the signed content is `{id}.{timestamp}.{body}`;
/// `webhook-signature` holds space-separated `v1,<base64>` entries; the timestamp must be
/// within five minutes of `now`.
fn verify(secret: &str, headers: &HeaderMap, body: &[u8], now: i64) -> Result<(), String> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .ok_or(format!("missing {name}"))
    };
    let id = header("webhook-id")?;
    let timestamp = header("webhook-timestamp")?;
    let signatures = header("webhook-signature")?;
    let ts: i64 = timestamp.parse().map_err(|_| "bad timestamp")?;
    if (now - ts).abs() > 300 {
        return Err("timestamp outside tolerance".into());
    }
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").ok_or("no whsec_ prefix")?)
        .map_err(|_| "secret is not base64")?;
    let mut signed = format!("{id}.{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    for entry in signatures.split(' ') {
        let Some(("v1", sig)) = entry.split_once(',') else {
            continue;
        };
        let Ok(sig) = STANDARD.decode(sig) else {
            continue;
        };
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
        mac.update(&signed);
        if mac.verify_slice(&sig).is_ok() {
            return Ok(());
        }
    }
    Err("no matching signature".into())
}

#[test]
fn the_verifier_accepts_the_published_test_vector_and_nothing_else() {
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let body = br#"{"test": 2432232314}"#;
    let mut headers = HeaderMap::new();
    headers.insert(
        "webhook-id",
        "msg_p5jXN8AQM9LWM0D4loKWxJek".parse().unwrap(),
    );
    headers.insert("webhook-timestamp", "1614265330".parse().unwrap());
    headers.insert(
        "webhook-signature",
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
            .parse()
            .unwrap(),
    );
    assert_eq!(verify(secret, &headers, body, 1614265330), Ok(()));
    assert!(verify(secret, &headers, br#"{"test": 2432232315}"#, 1614265330).is_err());
    assert!(verify(secret, &headers, body, 1614265330 + 301).is_err());
    assert!(verify(
        "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        &headers,
        body,
        1614265330
    )
    .is_err());
}

// ---- A receiver that records requests and answers as told -----------------------------

#[derive(Debug, Clone)]
struct Received {
    headers: HeaderMap,
    body: Bytes,
}

impl Received {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    fn id(&self) -> String {
        self.headers["webhook-id"].to_str().unwrap().to_string()
    }
}

#[derive(Clone, Default)]
struct Receiver {
    log: Arc<Mutex<Vec<Received>>>,
    /// Statuses to answer, in order; 200 once empty.
    script: Arc<Mutex<VecDeque<u16>>>,
    /// Answer this status always (after the script).
    always: Arc<Mutex<Option<u16>>>,
    /// Wait this long before answering.
    delay: Arc<Mutex<Duration>>,
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    r.log.lock().unwrap().push(Received { headers, body });
    let delay = *r.delay.lock().unwrap();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let scripted = r.script.lock().unwrap().pop_front();
    let status = scripted.or(*r.always.lock().unwrap()).unwrap_or(200);
    StatusCode::from_u16(status).unwrap()
}

impl Receiver {
    /// Starts on 127.0.0.1; returns it and its address.
    async fn start() -> (Self, SocketAddr) {
        Self::start_on("127.0.0.1:0").await
    }

    async fn start_on(bind: &str) -> (Self, SocketAddr) {
        let r = Self::default();
        let router = Router::new()
            .route("/hook", post(receive))
            .with_state(r.clone());
        let listener = tokio::net::TcpListener::bind(bind).await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        (r, addr)
    }

    fn all(&self) -> Vec<Received> {
        self.log.lock().unwrap().clone()
    }

    fn of_type(&self, event: &str) -> Vec<Received> {
        self.all()
            .into_iter()
            .filter(|r| r.json()["type"] == event)
            .collect()
    }

    /// Waits (up to 30 s) until `n` requests arrived.
    async fn wait_for(&self, n: usize) -> Vec<Received> {
        for _ in 0..600 {
            let all = self.all();
            if all.len() >= n {
                return all;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("expected {n} requests, got {}", self.all().len());
    }

    /// Waits (up to 30 s) for an event of type `event`.
    async fn wait_for_type(&self, event: &str) -> Received {
        for _ in 0..600 {
            if let Some(r) = self.of_type(event).into_iter().next() {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "no {event} arrived; got {:?}",
            self.all()
                .iter()
                .map(|r| r.json()["type"].clone())
                .collect::<Vec<_>>()
        );
    }
}

// ---- Helpers ---------------------------------------------------------------------------

/// Test apps here poll the delivery list, so their request budget is lifted.
fn allow(addr: SocketAddr) -> String {
    format!("127.0.0.1:{}", addr.port())
}

fn hook_url(addr: SocketAddr) -> String {
    format!("http://127.0.0.1:{}/hook", addr.port())
}

/// A receiver and an app that may reach it, retrying after `retry_base`, with a user.
async fn subscriber(retry_base: Duration) -> (Receiver, TestApp, TestUser, SocketAddr) {
    let (receiver, addr) = Receiver::start().await;
    let app = spawn_app_with(|c| {
        c.limits.rate_limits = [1_000_000; 4];
        c.outbound.allowed_private_hosts = vec![allow(addr)];
        c.webhooks.retry_base = retry_base;
    })
    .await;
    let user = app.user().await;
    (receiver, app, user, addr)
}

/// Creates a webhook; returns (id, secret).
async fn webhook(app: &TestApp, token: &str, url: &str, events: &[&str]) -> (String, String) {
    let res = app
        .post(
            "/api/integrations/webhooks",
            Some(token),
            json!({"url": url, "events": events, "description": "test receiver"}),
        )
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let body: Value = res.json().await.unwrap();
    (
        body["webhook"]["id"].as_str().unwrap().to_string(),
        body["secret"].as_str().unwrap().to_string(),
    )
}

async fn agent(app: &TestApp, token: &str) -> String {
    let res = app
        .post("/api/agents", Some(token), json!({"name": "Hooked"}))
        .await;
    assert_eq!(res.status(), 201);
    res.json::<Value>().await.unwrap()["agent"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn deliveries(app: &TestApp, token: &str, webhook: &str) -> Vec<Value> {
    let res = app
        .get(
            &format!("/api/integrations/webhooks/{webhook}/deliveries"),
            Some(token),
        )
        .await;
    assert_eq!(res.status(), 200);
    res.json::<Value>().await.unwrap()["deliveries"]
        .as_array()
        .unwrap()
        .clone()
}

/// Polls the deliveries until `done` holds (at most 30 s); returns them.
async fn deliveries_until(
    app: &TestApp,
    token: &str,
    webhook: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    for _ in 0..600 {
        let d = deliveries(app, token, webhook).await;
        if done(&d) {
            return d;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "deliveries did not settle: {:?}",
        deliveries(app, token, webhook).await
    );
}

/// The deliveries of `webhook` once the newest has failed for good.
async fn first_failed(app: &TestApp, token: &str, webhook: &str) -> Vec<Value> {
    deliveries_until(app, token, webhook, |d| {
        d.first()
            .is_some_and(|d| d["status"] == DeliveryStatus::Failed.as_str())
    })
    .await
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

// ---- Tests -----------------------------------------------------------------------------

#[tokio::test]
async fn the_catalogue_lists_every_event_type() {
    let app = spawn_app().await;
    let user = app.user().await;
    let res = app
        .get("/api/integrations/webhooks/events", Some(&user.access))
        .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    let types: Vec<&str> = body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert!(!e["description"].as_str().unwrap().is_empty());
            e["type"].as_str().unwrap()
        })
        .collect();
    let mut expected = EMITTED.to_vec();
    expected.push("integration.created");
    for t in &expected {
        assert!(types.contains(t), "{t} missing from {types:?}");
    }
    assert_eq!(types.len(), expected.len());
    assert_unauthorized(app.get("/api/integrations/webhooks/events", None).await).await;
}

#[tokio::test]
async fn creation_is_validated() {
    let (_, addr) = Receiver::start().await;
    let app = spawn_app_with(|c| {
        c.limits.rate_limits = [1_000_000; 4];
        c.outbound.allowed_private_hosts = vec![allow(addr)];
    })
    .await;
    let user = app.user().await;
    let create = |body: Value| app.post("/api/integrations/webhooks", Some(&user.access), body);
    let events = json!(["agent.created"]);

    for (url, needle) in [
        ("ftp://example.com/hook", "only http and https"),
        ("not a url", "not a valid URL"),
        ("http://10.0.0.7/hook", "private or reserved"),
        (
            "http://169.254.169.254/latest/meta-data",
            "private or reserved",
        ),
        ("http://[::1]:8080/hook", "private or reserved"),
        // A name resolving to loopback: refused by the resolver's verdict.
        (
            &format!("http://localhost:{}/hook", addr.port()),
            "private or reserved",
        ),
        // The allowed host on another port.
        (
            "http://127.0.0.1:1/hook",
            "only be reached on its allowed ports",
        ),
    ] {
        let res = create(json!({"url": url, "events": events})).await;
        let body = assert_error(res, 400, "Bad Request", None).await;
        assert!(
            body["message"].as_str().unwrap().contains(needle),
            "{url}: {body}"
        );
    }
    let res =
        create(json!({"url": hook_url(addr), "events": ["agent.created", "agent.exploded", "*"]}))
            .await;
    assert_error(
        res,
        400,
        "Bad Request",
        Some("Unknown event types: agent.exploded, *; see GET /api/integrations/webhooks/events"),
    )
    .await;
    let res = create(json!({"url": hook_url(addr), "events": []})).await;
    assert_error(res, 400, "Bad Request", None).await;
    let res =
        create(json!({"url": hook_url(addr), "events": events, "description": "x".repeat(501)}))
            .await;
    assert_error(
        res,
        400,
        "Bad Request",
        Some("description must be at most 500 characters"),
    )
    .await;
    let res = create(json!({"url": hook_url(addr), "events": events, "secret": "mine"})).await;
    let body = assert_error(res, 400, "Bad Request", None).await;
    assert!(
        body["message"].as_str().unwrap().contains("unknown field"),
        "{body}"
    );
    let res = create(json!({"events": events})).await;
    assert_error(res, 400, "Bad Request", None).await;

    // The allowed loopback receiver is accepted; the description may be 500 characters.
    let res =
        create(json!({"url": hook_url(addr), "events": events, "description": "é".repeat(500)}))
            .await;
    assert_eq!(res.status(), 201);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["webhook"]["active"], true);
    assert_eq!(body["webhook"]["events"], events);
    let secret = body["secret"].as_str().unwrap();
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    assert!((24..=32).contains(&key.len()));

    // At most 20 webhooks per account.
    for _ in 1..20 {
        webhook(&app, &user.access, &hook_url(addr), &["agent.created"]).await;
    }
    let res = create(json!({"url": hook_url(addr), "events": events})).await;
    assert_error(
        res,
        403,
        "Forbidden",
        Some("An account may hold at most 20 webhooks; delete one first"),
    )
    .await;
}

/// The service remembers for a moment that nobody listens to an event (so that chats
/// without webhooks cost no query for them); creating or deleting a webhook forgets that at
/// once.
#[tokio::test]
async fn a_new_webhook_receives_events_that_just_had_no_listener() {
    let (receiver, app, user, addr) = subscriber(Duration::from_secs(1)).await;
    // agent.created with no webhook: remembered as having no listener.
    agent(&app, &user.access).await;
    let (_, secret) = webhook(&app, &user.access, &hook_url(addr), &["agent.created"]).await;
    let id = agent(&app, &user.access).await;
    let got = receiver.wait_for_type("agent.created").await;
    verify(&secret, &got.headers, &got.body, now()).unwrap();
    assert_eq!(got.json()["data"]["agent"]["id"], id.as_str());
}

#[tokio::test]
async fn creating_an_integration_is_delivered_without_its_credentials() {
    let (receiver, addr) = Receiver::start().await;
    let app = spawn_app_with(|c| c.outbound.allowed_private_hosts = vec![allow(addr)]).await;
    let user = app.user().await;
    let (_, secret) = webhook(
        &app,
        &user.access,
        &hook_url(addr),
        &["integration.created"],
    )
    .await;
    let token = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq";
    let res = app
        .post(
            "/api/integrations",
            Some(&user.access),
            json!({"providerCode": "telegram", "name": "Bot", "credentials": {"botToken": token}}),
        )
        .await;
    assert_eq!(res.status(), 201);
    let id = res.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let got = receiver.wait_for_type("integration.created").await;
    verify(&secret, &got.headers, &got.body, now()).unwrap();
    let body = got.json();
    assert_eq!(body["data"]["integration"]["id"], id.as_str());
    assert_eq!(body["data"]["integration"]["providerCode"], "telegram");
    assert_eq!(
        body["data"]["integration"]["credentials"]["botToken"],
        "••••sawq"
    );
    assert!(!String::from_utf8_lossy(&got.body).contains(token));
}

#[tokio::test]
async fn scopes_and_tenant_isolation() {
    let (receiver, addr) = Receiver::start().await;
    let app = spawn_app_with(|c| {
        c.limits.rate_limits = [1_000_000; 4];
        c.outbound.allowed_private_hosts = vec![allow(addr)];
        c.webhooks.retry_base = Duration::from_millis(20);
    })
    .await;
    let owner = app.user().await;
    let other = app.user().await;
    let (id, _) = webhook(&app, &owner.access, &hook_url(addr), &["agent.created"]).await;
    agent(&app, &owner.access).await;
    receiver.wait_for(1).await;
    let delivery = deliveries(&app, &owner.access, &id).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    // Scopes: read cannot write, write cannot read, others get nothing.
    let (_, read) = app.api_key(&owner, &["webhooks:read"]).await;
    let (_, write) = app.api_key(&owner, &["webhooks:write"]).await;
    let (_, agents) = app.api_key(&owner, &["agents:read", "agents:write"]).await;
    let body = json!({"url": hook_url(addr), "events": ["agent.created"]});
    let res = app
        .post("/api/integrations/webhooks", Some(&read), body.clone())
        .await;
    assert_error(res, 403, "Forbidden", Some("Insufficient permissions")).await;
    let res = app
        .post("/api/integrations/webhooks", Some(&agents), body.clone())
        .await;
    assert_error(res, 403, "Forbidden", Some("Insufficient permissions")).await;
    for path in [
        "/api/integrations/webhooks".to_string(),
        "/api/integrations/webhooks/events".to_string(),
        format!("/api/integrations/webhooks/{id}/deliveries"),
    ] {
        assert_eq!(app.get(&path, Some(&read)).await.status(), 200, "{path}");
        let res = app.get(&path, Some(&write)).await;
        assert_error(res, 403, "Forbidden", Some("Insufficient permissions")).await;
    }
    let redeliver = format!("/api/integrations/webhooks/{id}/deliveries/{delivery}/redeliver");
    let res = app.post(&redeliver, Some(&read), json!({})).await;
    assert_error(res, 403, "Forbidden", Some("Insufficient permissions")).await;
    let res = app
        .delete(&format!("/api/integrations/webhooks/{id}"), Some(&read))
        .await;
    assert_error(res, 403, "Forbidden", Some("Insufficient permissions")).await;
    let res = app
        .post("/api/integrations/webhooks", Some(&write), body.clone())
        .await;
    assert_eq!(res.status(), 201);

    // Another account: 404 on every verb, and its own list is empty.
    let listed: Value = app
        .get("/api/integrations/webhooks", Some(&other.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["webhooks"], json!([]));
    let res = app
        .get(
            &format!("/api/integrations/webhooks/{id}/deliveries"),
            Some(&other.access),
        )
        .await;
    assert_error(res, 404, "Not Found", Some("Webhook not found")).await;
    let res = app.post(&redeliver, Some(&other.access), json!({})).await;
    assert_error(res, 404, "Not Found", Some("Webhook not found")).await;
    let res = app
        .delete(
            &format!("/api/integrations/webhooks/{id}"),
            Some(&other.access),
        )
        .await;
    assert_error(res, 404, "Not Found", Some("Webhook not found")).await;
    // Another account's events never reach this webhook.
    agent(&app, &other.access).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.all().len(), 1);

    // The owner deletes it: gone from the list, 404 afterwards.
    let res = app
        .delete(&format!("/api/integrations/webhooks/{id}"), Some(&write))
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap(), json!({"success": true}));
    let res = app
        .delete(
            &format!("/api/integrations/webhooks/{id}"),
            Some(&owner.access),
        )
        .await;
    assert_error(res, 404, "Not Found", Some("Webhook not found")).await;
    assert_unauthorized(app.get("/api/integrations/webhooks", None).await).await;
}

#[tokio::test]
async fn the_secret_is_shown_once_and_stored_encrypted() {
    let (_, addr) = Receiver::start().await;
    let app = spawn_app_with(|c| {
        c.limits.rate_limits = [1_000_000; 4];
        c.outbound.allowed_private_hosts = vec![allow(addr)];
    })
    .await;
    let user = app.user().await;
    let (id, secret) = webhook(&app, &user.access, &hook_url(addr), &["agent.created"]).await;
    assert!(secret.starts_with("whsec_"));
    let listed = app
        .get("/api/integrations/webhooks", Some(&user.access))
        .await
        .text()
        .await
        .unwrap();
    let list: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(list["webhooks"][0]["id"], id.as_str());
    assert_eq!(list["webhooks"][0]["url"], hook_url(addr).as_str());
    assert_eq!(list["webhooks"][0]["description"], "test receiver");
    assert!(list["webhooks"][0]["createdAt"].is_string());
    assert!(!listed.contains(&secret[6..]), "never listed");
    assert!(list["webhooks"][0].get("secret").is_none());
    let db = app.database_bytes();
    let key = STANDARD.decode(&secret[6..]).unwrap();
    assert!(!contains(&db, &secret[6..]), "not stored as text");
    assert!(
        !db.windows(key.len()).any(|w| w == key.as_slice()),
        "nor as raw key bytes"
    );
}

#[tokio::test]
async fn every_event_type_is_delivered_with_a_valid_signature() {
    let (receiver, addr) = Receiver::start().await;
    let site = tiny_site().await;
    let app = spawn_app_with(|c| {
        c.limits.rate_limits = [1_000_000; 4];
        c.limits.token_quotas = [Some(1_000_000), None, None, None];
        c.outbound.allowed_private_hosts = vec![allow(addr), allow(site)];
    })
    .await;
    let user = app.user().await;
    let (id, secret) = webhook(&app, &user.access, &hook_url(addr), &EMITTED).await;
    // A webhook on the same account subscribed to nothing that happens here.
    let (quiet, _) = webhook(
        &app,
        &user.access,
        &hook_url(addr),
        &["integration.created"],
    )
    .await;

    let agent_id = agent(&app, &user.access).await;
    let res = app
        .call(
            reqwest::Method::PUT,
            &format!("/api/agents/{agent_id}"),
            Some(&user.access),
            Some(json!({"description": "now with webhooks"})),
        )
        .await;
    assert_eq!(res.status(), 200);
    let res = app
        .chat(&user.access, &agent_id, json!({"message": "hello"}))
        .await;
    assert_eq!(res.status(), 200);
    let reply: Value = res.json().await.unwrap();
    let thread = reply["threadId"].as_str().unwrap().to_string();
    // A continued thread creates no conversation event.
    let res = app
        .chat(
            &user.access,
            &agent_id,
            json!({"message": "again", "threadId": thread}),
        )
        .await;
    assert_eq!(res.status(), 200);
    // A rating sends feedback.created; the same rating again sends nothing.
    let reply_id = app
        .messages(&user.access, &agent_id, &thread)
        .await
        .into_iter()
        .find(|m| m["role"] == "assistant")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let rated =
        format!("/api/agents/{agent_id}/conversations/{thread}/messages/{reply_id}/feedback");
    for _ in 0..2 {
        let res = app
            .call(
                reqwest::Method::PUT,
                &rated,
                Some(&user.access),
                Some(json!({"rating": "down", "comment": "Too vague"})),
            )
            .await;
        assert_eq!(res.status(), 200);
    }
    // The month's quota spent: the refused chat sends usage.threshold at 80 % and 100 %.
    let me: Value = app
        .get("/api/auth/me", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    let user_id = me["user"]["id"].as_str().unwrap().to_string();
    app.sql(
        "UPDATE usage_daily SET prompt_tokens = 1000000 WHERE user_id = $1",
        vec![(&user_id).into()],
    )
    .await;
    let res = app
        .chat(&user.access, &agent_id, json!({"message": "over"}))
        .await;
    assert_eq!(res.status(), 429);
    let good = upload(
        &app,
        &user.access,
        &agent_id,
        "notes.txt",
        b"Webhooks deliver events to receivers.\n\nEach delivery is signed.".to_vec(),
    )
    .await;
    let bad = upload(
        &app,
        &user.access,
        &agent_id,
        "cut.pdf",
        b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog".to_vec(),
    )
    .await;
    let res = app
        .post(
            &format!("/api/agents/{agent_id}/knowledge/url"),
            Some(&user.access),
            json!({"url": format!("http://127.0.0.1:{}/", site.port()), "config": {"crawlDepth": 1, "maxPages": 5}}),
        )
        .await;
    assert_eq!(res.status(), 202, "{}", res.text().await.unwrap());
    let crawl: Value = res.json().await.unwrap();
    let crawl_doc = crawl["documentId"].as_str().unwrap().to_string();

    let created = receiver.wait_for_type("agent.created").await.json();
    assert_eq!(created["data"]["agent"]["id"], agent_id.as_str());
    assert_eq!(created["data"]["agent"]["name"], "Hooked");
    let updated = receiver.wait_for_type("agent.updated").await.json();
    assert_eq!(updated["data"]["agent"]["description"], "now with webhooks");
    let conversation = receiver.wait_for_type("conversation.created").await.json();
    assert_eq!(conversation["data"]["conversationId"], thread.as_str());
    assert_eq!(conversation["data"]["agentId"], agent_id.as_str());
    receiver.wait_for_type("message.created").await;
    let indexed = receiver.wait_for_type("document.indexed").await.json();
    assert_eq!(indexed["data"]["agentId"], agent_id.as_str());
    let failed = receiver.wait_for_type("document.failed").await.json();
    assert_eq!(failed["data"]["document"]["documentId"], bad.as_str());
    assert_eq!(failed["data"]["document"]["status"], "failed");
    assert!(failed["data"]["document"]["error"].is_string());
    let crawled = receiver.wait_for_type("crawl.completed").await.json();
    assert_eq!(
        crawled["data"]["document"]["documentId"],
        crawl_doc.as_str()
    );
    assert_eq!(crawled["data"]["document"]["status"], "indexed");
    // Both the upload and the crawl are indexed documents.
    for _ in 0..100 {
        if receiver.of_type("document.indexed").len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let indexed: Vec<Value> = receiver
        .of_type("document.indexed")
        .iter()
        .map(|r| r.json()["data"]["document"]["documentId"].clone())
        .collect();
    assert!(
        indexed.contains(&json!(good)) && indexed.contains(&json!(crawl_doc)),
        "{indexed:?}"
    );

    let res = app
        .delete(&format!("/api/agents/{agent_id}"), Some(&user.access))
        .await;
    assert_eq!(res.status(), 200);
    let deleted = receiver.wait_for_type("agent.deleted").await.json();
    assert_eq!(deleted["data"], json!({"agentId": agent_id}));

    let feedback = receiver.wait_for_type("feedback.created").await.json();
    assert_eq!(
        feedback["data"],
        json!({
            "agentId": agent_id,
            "conversationId": thread,
            "messageId": reply_id,
            "rating": "down",
            "comment": "Too vague",
            "createdAt": feedback["data"]["createdAt"],
        })
    );
    assert_eq!(receiver.of_type("feedback.created").len(), 1);
    for _ in 0..100 {
        if receiver.of_type("usage.threshold").len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut thresholds: Vec<Value> = receiver
        .of_type("usage.threshold")
        .iter()
        .map(|r| r.json()["data"].clone())
        .collect();
    thresholds.sort_by_key(|d| d["threshold"].as_u64());
    assert_eq!(thresholds.len(), 2, "{thresholds:?}");
    assert_eq!(thresholds[0]["threshold"], 80);
    assert_eq!(thresholds[1]["threshold"], 100);
    assert_eq!(thresholds[1]["quota"], "plan");
    assert_eq!(thresholds[1]["limit"], 1_000_000);
    assert!(thresholds[1]["used"].as_u64().unwrap() >= 1_000_000);
    assert_eq!(
        thresholds[1]["month"],
        chrono::Utc::now().format("%Y-%m").to_string()
    );

    // Exactly one of each per action: two replies, one new conversation.
    assert_eq!(receiver.of_type("message.created").len(), 2);
    assert_eq!(receiver.of_type("conversation.created").len(), 1);
    let message = receiver.of_type("message.created")[0].json();
    assert_eq!(message["data"]["conversationId"], thread.as_str());
    assert_eq!(message["data"]["role"], "assistant");
    assert_eq!(message["data"]["model"], "agentchat-offline");
    assert!(message["data"]["content"]
        .as_str()
        .unwrap()
        .contains("No language model is configured"));

    // Every request: signed per Standard Webhooks v1, JSON with type, timestamp and data,
    // and a distinct message id.
    let all = receiver.all();
    assert_eq!(
        all.len(),
        13,
        "nothing for the quiet webhook: {:?}",
        all.iter()
            .map(|r| (r.id(), r.json()["type"].clone()))
            .collect::<Vec<_>>()
    );
    let mut ids: Vec<String> = Vec::new();
    for r in &all {
        verify(&secret, &r.headers, &r.body, now()).unwrap();
        assert_eq!(r.headers["content-type"], "application/json");
        let body = r.json();
        assert!(EMITTED.contains(&body["type"].as_str().unwrap()));
        chrono::DateTime::parse_from_rfc3339(body["timestamp"].as_str().unwrap()).unwrap();
        assert!(body["data"].is_object());
        ids.push(r.id());
        // A wrong secret or a changed body does not verify.
        assert!(verify(
            "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
            &r.headers,
            &r.body,
            now()
        )
        .is_err());
        let mut tampered = r.body.to_vec();
        tampered.push(b' ');
        assert!(verify(&secret, &r.headers, &tampered, now()).is_err());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 13);
    let listed = deliveries_until(&app, &user.access, &id, |d| {
        d.iter()
            .all(|d| d["status"] == DeliveryStatus::Succeeded.as_str())
    })
    .await;
    assert_eq!(listed.len(), 13);
    for d in &listed {
        assert_eq!(d["attempts"], 1);
        assert_eq!(d["responseStatus"], 200);
        assert!(d["nextAttemptAt"].is_null());
        assert!(ids.contains(&d["id"].as_str().unwrap().to_string()));
    }
    assert_eq!(deliveries(&app, &user.access, &quiet).await.len(), 0);
}

async fn upload(app: &TestApp, token: &str, agent: &str, name: &str, bytes: Vec<u8>) -> String {
    let form = Form::new().part("file", Part::bytes(bytes).file_name(name.to_string()));
    let res = app
        .client
        .post(app.url(&format!("/api/agents/{agent}/knowledge/file")))
        .bearer_auth(token)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    res.json::<Value>().await.unwrap()["documentId"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A two-page site on loopback.
async fn tiny_site() -> SocketAddr {
    let page = |title: &str, body: &str| {
        Html(format!("<!doctype html><html><head><title>{title}</title></head><body><main><article><h1>{title}</h1><p>{body}</p><p>{body}</p></article></main></body></html>"))
    };
    let index = page(
        "Index",
        "Read about <a href=\"/signing\">signing webhook deliveries</a> before you start.",
    );
    let signing = page(
        "Signing",
        "Every delivery carries webhook-id, webhook-timestamp and webhook-signature headers.",
    );
    let router = Router::new()
        .route("/", get(move || async move { index }))
        .route("/signing", get(move || async move { signing }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

#[tokio::test]
async fn failed_attempts_are_retried_with_backoff_and_recorded() {
    let (receiver, app, user, addr) = subscriber(Duration::from_millis(50)).await;
    let (id, secret) = webhook(&app, &user.access, &hook_url(addr), &["agent.created"]).await;
    // 500, 503, a redirect and 429 are retried; then 200.
    receiver.script.lock().unwrap().extend([500, 503, 302, 429]);
    agent(&app, &user.access).await;
    let got = receiver.wait_for(5).await;
    let message_id = got[0].id();
    for r in &got {
        assert_eq!(r.id(), message_id, "the same message id on every attempt");
        assert_eq!(r.body, got[0].body, "the same body on every attempt");
        verify(&secret, &r.headers, &r.body, now()).unwrap();
    }
    let listed = deliveries_until(&app, &user.access, &id, |d| {
        d[0]["status"] == DeliveryStatus::Succeeded.as_str()
    })
    .await;
    assert_eq!(listed[0]["attempts"], 5);
    assert_eq!(listed[0]["responseStatus"], 200);
    let attempts = app
        .state
        .store
        .delivery_attempts(&message_id.as_str().into())
        .await
        .unwrap();
    let statuses: Vec<Option<u16>> = attempts.iter().map(|a| a.response_status).collect();
    assert_eq!(
        statuses,
        vec![Some(500), Some(503), Some(302), Some(429), Some(200)]
    );
    assert!(attempts[..4].iter().all(|a| a
        .error
        .as_deref()
        .is_some_and(|e| e.contains("HTTP status"))));
    assert!(attempts[4].error.is_none());
    assert!(attempts
        .windows(2)
        .all(|w| w[0].started_at <= w[1].started_at));

    // A 4xx other than 408, 410 and 429 is final: one attempt, failed.
    *receiver.always.lock().unwrap() = Some(400);
    agent(&app, &user.access).await;
    let listed = deliveries_until(&app, &user.access, &id, |d| {
        d.len() == 2 && d[0]["status"] == DeliveryStatus::Failed.as_str()
    })
    .await;
    assert_eq!(listed[0]["attempts"], 1);
    assert_eq!(listed[0]["responseStatus"], 400);
    assert!(listed[0]["nextAttemptAt"].is_null());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.all().len(), 6, "not retried");

    // A receiver that does not answer in time: a timeout, retried (waits stay pending
    // between attempts with a due time).
    *receiver.always.lock().unwrap() = None;
    *receiver.delay.lock().unwrap() = Duration::from_secs(12);
    agent(&app, &user.access).await;
    let listed = deliveries_until(&app, &user.access, &id, |d| {
        d.len() == 3 && d[0]["attempts"].as_u64() >= Some(2)
    })
    .await;
    let slow = listed[0]["id"].as_str().unwrap().to_string();
    let attempts = app
        .state
        .store
        .delivery_attempts(&slow.as_str().into())
        .await
        .unwrap();
    assert_eq!(attempts[0].response_status, None);
    assert!(
        attempts[0].error.as_deref().unwrap().contains("too long"),
        "{attempts:?}"
    );
    assert!(
        (10_000..11_500).contains(&attempts[0].duration_ms),
        "{attempts:?}"
    );
}

#[tokio::test]
async fn retries_stop_when_the_window_ends() {
    let (receiver, app, user, addr) = subscriber(Duration::from_millis(1)).await;
    let (id, _) = webhook(&app, &user.access, &hook_url(addr), &["agent.created"]).await;
    *receiver.always.lock().unwrap() = Some(503);
    agent(&app, &user.access).await;
    let listed = first_failed(&app, &user.access, &id).await;
    let attempts = listed[0]["attempts"].as_u64().unwrap();
    assert!(attempts > 5, "{attempts}");
    assert_eq!(listed[0]["responseStatus"], 503);
    assert_eq!(receiver.all().len() as u64, attempts);
}

#[tokio::test]
async fn a_retry_falls_due_when_the_service_clock_reaches_it() {
    // Waits of up to 10 min between attempts: far longer than the test, and within an
    // access token's lifetime.
    let (receiver, app, user, addr) = subscriber(Duration::from_secs(600)).await;
    let (id, secret) = webhook(&app, &user.access, &hook_url(addr), &["agent.created"]).await;
    receiver.script.lock().unwrap().push_back(503);
    agent(&app, &user.access).await;
    let listed = deliveries_until(&app, &user.access, &id, |d| {
        d.first().is_some_and(|d| {
            d["status"] == DeliveryStatus::Pending.as_str() && d["responseStatus"] == 503
        })
    })
    .await;
    assert_eq!(listed[0]["attempts"], 1);
    let due: chrono::DateTime<chrono::Utc> = listed[0]["nextAttemptAt"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    // Not sent again before it is due on the service clock (counted first: an attempt
    // seen here was claimed before the clock was read).
    let clock = &app.state.auth.clock;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = receiver.all().len();
    if clock.now() < due {
        assert_eq!(sent, 1, "the retry waits for its due time");
    }
    // The clock handlers read reaches the due time: the retry is sent without waiting.
    let to_due = (due - clock.now()).max(chrono::Duration::zero());
    clock.advance(to_due + chrono::Duration::seconds(1));
    let got = tokio::time::timeout(Duration::from_secs(5), receiver.wait_for(2))
        .await
        .expect("the retry is sent once the clock passed its due time");
    assert_eq!(got[1].id(), got[0].id(), "the same message id");
    verify(&secret, &got[1].headers, &got[1].body, now()).unwrap();
    let listed = deliveries_until(&app, &user.access, &id, |d| {
        d[0]["status"] == DeliveryStatus::Succeeded.as_str()
    })
    .await;
    assert_eq!(listed[0]["attempts"], 2);
    let attempts = app
        .state
        .store
        .delivery_attempts(&got[0].id().into())
        .await
        .unwrap();
    assert_eq!(attempts.len(), 2);
    assert!(
        attempts[1].started_at >= due,
        "the attempt is recorded at the service clock's time: {attempts:?}"
    );
}

#[tokio::test]
async fn gone_disables_the_webhook() {
    let (receiver, addr) = Receiver::start().await;
    let app = spawn_app_with(|c| {
        c.limits.rate_limits = [1_000_000; 4];
        c.outbound.allowed_private_hosts = vec![allow(addr)];
        c.webhooks.retry_base = Duration::from_millis(20);
    })
    .await;
    let user = app.user().await;
    let (id, _) = webhook(
        &app,
        &user.access,
        &hook_url(addr),
        &["agent.created", "agent.deleted"],
    )
    .await;
    *receiver.always.lock().unwrap() = Some(410);
    let agent_id = agent(&app, &user.access).await;
    let listed = first_failed(&app, &user.access, &id).await;
    assert_eq!(listed[0]["responseStatus"], 410);
    assert_eq!(listed[0]["attempts"], 1);
    let list: Value = app
        .get("/api/integrations/webhooks", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["webhooks"][0]["active"], false);
    // No further deliveries: nothing is queued or sent, and redelivery is refused.
    app.delete(&format!("/api/agents/{agent_id}"), Some(&user.access))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.all().len(), 1);
    assert_eq!(deliveries(&app, &user.access, &id).await.len(), 1);
    let delivery = listed[0]["id"].as_str().unwrap();
    let res = app
        .post(
            &format!("/api/integrations/webhooks/{id}/deliveries/{delivery}/redeliver"),
            Some(&user.access),
            json!({}),
        )
        .await;
    assert_error(res, 409, "Conflict", None).await;
}

#[tokio::test]
async fn a_delivery_interrupted_by_a_crash_arrives_after_a_restart() {
    let (receiver, addr) = Receiver::start().await;
    // The first instance runs no workers: the delivery stays queued.
    let first = spawn_app_with(|c| {
        c.limits.rate_limits = [1_000_000; 4];
        c.outbound.allowed_private_hosts = vec![allow(addr)];
        c.jobs.workers = 0;
    })
    .await;
    let user = first.user().await;
    let (id, secret) = webhook(
        &first,
        &user.access,
        &hook_url(addr),
        &["agent.created", "agent.updated"],
    )
    .await;
    let agent_id = agent(&first, &user.access).await;
    let res = first
        .call(
            reqwest::Method::PUT,
            &format!("/api/agents/{agent_id}"),
            Some(&user.access),
            Some(json!({"name": "Renamed"})),
        )
        .await;
    assert_eq!(res.status(), 200);
    // A worker took the first delivery and died mid-send: its lease has run out.
    let at = chrono::Utc::now();
    let claimed = first
        .state
        .store
        .claim_deliveries(at, at - chrono::Duration::seconds(1), 1)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].delivery.event, EventType::AgentCreated);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(receiver.all().is_empty());

    let second = spawn_app_in(first.dir, |c| {
        c.limits.rate_limits = [1_000_000; 4];
        c.outbound.allowed_private_hosts = vec![allow(addr)];
    })
    .await;
    let got = receiver.wait_for(2).await;
    let mut types: Vec<String> = got
        .iter()
        .map(|r| {
            verify(&secret, &r.headers, &r.body, now()).unwrap();
            r.json()["type"].as_str().unwrap().to_string()
        })
        .collect();
    types.sort();
    assert_eq!(types, ["agent.created", "agent.updated"]);
    let (token, _) = second.tokens(&user.email, &user.password).await;
    let listed = deliveries_until(&second, &token, &id, |d| {
        d.iter()
            .all(|d| d["status"] == DeliveryStatus::Succeeded.as_str())
    })
    .await;
    let created = listed
        .iter()
        .find(|d| d["event"] == "agent.created")
        .unwrap();
    assert_eq!(created["attempts"], 2, "the interrupted attempt counts");
}

#[tokio::test]
async fn the_private_address_rule_applies_again_at_send() {
    // Created while the receiver's name and address were allowed; then the service
    // restarts without the exceptions (as after DNS now pointing at a private address).
    let (receiver, addr) = Receiver::start().await;
    let by_name = format!("http://localhost:{}/hook", addr.port());
    let first = spawn_app_with(|c| {
        c.limits.rate_limits = [1_000_000; 4];
        c.outbound.allowed_private_hosts = vec![allow(addr), format!("localhost:{}", addr.port())];
        c.jobs.workers = 0;
    })
    .await;
    let user = first.user().await;
    let (named, _) = webhook(&first, &user.access, &by_name, &["agent.created"]).await;
    let (literal, _) = webhook(&first, &user.access, &hook_url(addr), &["agent.created"]).await;
    agent(&first, &user.access).await;

    let second = spawn_app_in(first.dir, |c| {
        c.limits.rate_limits = [1_000_000; 4];
        c.webhooks.retry_base = Duration::from_millis(20);
    })
    .await;
    let (token, _) = second.tokens(&user.email, &user.password).await;
    for (id, needle) in [
        // The name is judged by the resolver the connection uses.
        (
            &named,
            "localhost resolves to a private or reserved network address",
        ),
        // The IP literal is judged before the request.
        (
            &literal,
            "127.0.0.1 is a private or reserved network address",
        ),
    ] {
        let listed = first_failed(&second, &token, id).await;
        assert!(
            listed[0]["lastError"].as_str().unwrap().contains(needle),
            "{listed:?}"
        );
        assert!(listed[0]["responseStatus"].is_null());
    }
    assert!(
        receiver.all().is_empty(),
        "nothing reached the private address"
    );
}

#[tokio::test]
async fn a_delivery_can_be_sent_again() {
    let (receiver, app, user, addr) = subscriber(Duration::from_millis(20)).await;
    let (id, secret) = webhook(&app, &user.access, &hook_url(addr), &["agent.created"]).await;
    // A final failure first (404), then the receiver is fixed and the owner redelivers.
    *receiver.always.lock().unwrap() = Some(404);
    agent(&app, &user.access).await;
    let listed = first_failed(&app, &user.access, &id).await;
    let delivery = listed[0]["id"].as_str().unwrap().to_string();
    *receiver.always.lock().unwrap() = None;
    let res = app
        .post(
            &format!("/api/integrations/webhooks/{id}/deliveries/{delivery}/redeliver"),
            Some(&user.access),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), 202);
    let got = receiver.wait_for(2).await;
    assert_eq!(got[1].id(), delivery, "the same message id");
    assert_eq!(got[1].body, got[0].body, "the same body");
    verify(&secret, &got[1].headers, &got[1].body, now()).unwrap();
    let listed = deliveries_until(&app, &user.access, &id, |d| {
        d[0]["status"] == DeliveryStatus::Succeeded.as_str()
    })
    .await;
    assert_eq!(listed[0]["attempts"], 2);
    assert_eq!(listed[0]["responseStatus"], 200);
    assert!(listed[0].get("lastError").is_none());

    let res = app
        .post(
            &format!("/api/integrations/webhooks/{id}/deliveries/msg_unknown/redeliver"),
            Some(&user.access),
            json!({}),
        )
        .await;
    assert_error(res, 404, "Not Found", Some("Delivery not found")).await;
}
