//! Two `agentchat` processes on one PostgreSQL database and one Redis, one client talking
//! to both (README.md § Running several instances): revocations cross instances within
//! 3 s, a replayed refresh token ends the session on the other instance, one rate-limit
//! budget and one agent limit per account across both, an upload through one is retrieved
//! through the other (and not after its deletion), every job and every webhook delivery
//! runs once, and PostgreSQL mode refuses to start without `JWT_SECRET`. Resumable replies
//! resume and cancel across instances, a conversation has one reply in progress across
//! both, and an instance stopped with `SIGTERM` in the middle of 100 streams hands them
//! over: every client resumes on the other, every reply complete and frame-exact.
//!
//! The servers: `AGENTCHAT_TEST_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`; a scratch database is created there and
//! dropped afterwards) and `AGENTCHAT_TEST_REDIS_URL` (default `redis://127.0.0.1:6379`,
//! with a key prefix of this run's own). `scripts/services.sh` starts both.

use std::{
    collections::HashMap,
    net::SocketAddr,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

mod process;

use axum::{extract::State, http::HeaderMap, routing::post, Router};
use reqwest::{multipart, Client, StatusCode};
use serde_json::{json, Value};
use test_support::{
    scratch::ScratchDatabase,
    sse::{Event, Events},
};

const JWT_SECRET: &str = "two-instance-test-signing-secret-0123456789abcdef";
/// Base64 of 32 bytes.
const ENCRYPTION_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const PUBLIC_URL: &str = "http://agentchat.test";

fn database_server() -> String {
    std::env::var("AGENTCHAT_TEST_DATABASE_URL")
        .ok()
        .filter(|u| u.starts_with("postgres"))
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

fn redis_url() -> String {
    std::env::var("AGENTCHAT_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/knowledge/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

/// One running `agentchat serve`, killed when dropped.
struct Instance {
    child: Child,
    addr: SocketAddr,
    _data: tempfile::TempDir,
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Instance {
    fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

/// The environment both instances share.
fn shared_env(database_url: &str, prefix: &str, receiver: SocketAddr) -> Vec<(String, String)> {
    [
        ("DATABASE_URL", database_url.to_string()),
        ("REDIS_URL", redis_url()),
        ("REDIS_KEY_PREFIX", prefix.to_string()),
        ("JWT_SECRET", JWT_SECRET.to_string()),
        ("ENCRYPTION_KEY", ENCRYPTION_KEY.to_string()),
        ("PUBLIC_URL", PUBLIC_URL.to_string()),
        ("LEPTOS_SITE_ADDR", "127.0.0.1:0".to_string()),
        ("RATE_LIMITS", "free=30,starter=100000".to_string()),
        ("AGENT_LIMITS", "free=3,starter=100".to_string()),
        ("JOB_WORKERS", "2".to_string()),
        ("WEBHOOK_RETRY_BASE_MS", "200".to_string()),
        ("ALLOWED_PRIVATE_HOSTS", receiver.to_string()),
        ("RUST_LOG", "info".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Starts `agentchat serve` and waits for its "AgentChat listening" line.
fn start(env: &[(String, String)]) -> Instance {
    let data = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentchat"));
    command.arg("serve");
    // Nothing of the test's own environment reaches the instances but what `env` says.
    for name in ["SMTP_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"] {
        command.env_remove(name);
    }
    let mut child = command
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("DATA_DIR", data.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("agentchat starts");
    let addr = process::announced_addr(&mut child);
    Instance {
        child,
        addr,
        _data: data,
    }
}

/// Runs `agentchat ARGS` against the shared database (in a data folder of its own).
fn cli(env: &[(String, String)], args: &[&str]) {
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_agentchat"))
        .args(args)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("DATA_DIR", data.path())
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "agentchat {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A verified account on `plan`; returns (email, password).
async fn account(client: &Client, a: &Instance, env: &[(String, String)], plan: &str) -> String {
    let email = format!("u-{}@example.com", uuid::Uuid::new_v4().simple());
    let res = client
        .post(a.url("/api/auth/signup"))
        .json(&json!({"name": "Two", "email": email, "password": "correct horse battery"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    cli(env, &["admin", "verify-email", &email]);
    cli(env, &["admin", "set-plan", &email, plan]);
    email
}

/// Signs in on `instance`; returns (access, refresh).
async fn login(client: &Client, instance: &Instance, email: &str) -> (String, String) {
    let res = client
        .post(instance.url("/api/auth/login"))
        .json(&json!({"email": email, "password": "correct horse battery"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    (
        body["tokens"]["accessToken"].as_str().unwrap().into(),
        body["tokens"]["refreshToken"].as_str().unwrap().into(),
    )
}

async fn get_status(client: &Client, url: String, token: &str) -> StatusCode {
    client
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
}

/// Polls `GET url` with `token` until it answers 401; panics after `within`.
async fn refused_within(client: &Client, url: String, token: &str, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if get_status(client, url.clone(), token).await == StatusCode::UNAUTHORIZED {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{url} still accepted after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The webhook receiver: every request's `webhook-id` and body.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(String, Value)>>>);

async fn receive(State(r): State<Received>, headers: HeaderMap, body: String) -> StatusCode {
    let id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = serde_json::from_str(&body).unwrap_or(Value::Null);
    r.0.lock().unwrap().push((id, body));
    StatusCode::NO_CONTENT
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_share_one_database_and_one_redis() {
    let database = ScratchDatabase::create(&database_server())
        .await
        .expect("a scratch database on the PostgreSQL server");
    let prefix = format!("t_{}:", uuid::Uuid::new_v4().simple());
    let received = Received::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let receiver = listener.local_addr().unwrap();
    let app = Router::new()
        .route("/hook", post(receive))
        .with_state(received.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let env = shared_env(database.url(), &prefix, receiver);
    let a = start(&env);
    let b = start(&env);
    let client = Client::new();

    // 1. A logout on A is refused by B within 3 s.
    let email = account(&client, &a, &env, "starter").await;
    let (access, refresh) = login(&client, &a, &email).await;
    assert_eq!(
        get_status(&client, b.url("/api/auth/me"), &access).await,
        200
    );
    let res = client
        .post(a.url("/api/auth/logout"))
        .bearer_auth(&access)
        .json(&json!({"refreshToken": refresh}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let took = refused_within(
        &client,
        b.url("/api/auth/me"),
        &access,
        Duration::from_secs(3),
    )
    .await;
    eprintln!("logout on A refused by B after {took:?}");

    // An API key revoked on A is refused by B within 3 s.
    let (access, _) = login(&client, &a, &email).await;
    let res = client
        .post(a.url("/api/api-keys"))
        .bearer_auth(&access)
        .json(&json!({"name": "k", "scopes": ["agents:read"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let body: Value = res.json().await.unwrap();
    let key = body["key"].as_str().unwrap().to_string();
    let key_id = body["apiKey"]["id"].as_str().unwrap().to_string();
    assert_eq!(get_status(&client, b.url("/api/agents"), &key).await, 200);
    let res = client
        .delete(a.url(&format!("/api/api-keys/{key_id}")))
        .bearer_auth(&access)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let took = refused_within(&client, b.url("/api/agents"), &key, Duration::from_secs(3)).await;
    eprintln!("key revoked on A refused by B after {took:?}");

    // A refresh token rotated on A and replayed on B ends the session.
    let (_, refresh) = login(&client, &a, &email).await;
    let res = client
        .post(a.url("/api/auth/refresh"))
        .json(&json!({"refreshToken": refresh}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let rotated: Value = res.json().await.unwrap();
    let new_access = rotated["tokens"]["accessToken"]
        .as_str()
        .unwrap()
        .to_string();
    let new_refresh = rotated["tokens"]["refreshToken"]
        .as_str()
        .unwrap()
        .to_string();
    let res = client
        .post(b.url("/api/auth/refresh"))
        .json(&json!({"refreshToken": refresh}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401, "a replayed refresh token is refused");
    refused_within(
        &client,
        a.url("/api/auth/me"),
        &new_access,
        Duration::from_secs(3),
    )
    .await;
    let res = client
        .post(a.url("/api/auth/refresh"))
        .json(&json!({"refreshToken": new_refresh}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401, "the replay ended the whole session");

    // 2. 60 concurrent requests split across both against 30/minute: exactly 30 pass.
    let limited = account(&client, &a, &env, "free").await;
    let (token, _) = login(&client, &b, &limited).await;
    let calls = (0..60).map(|i| {
        let url = if i % 2 == 0 {
            a.url("/api/auth/me")
        } else {
            b.url("/api/auth/me")
        };
        let client = client.clone();
        let token = token.clone();
        async move {
            let res = client.get(url).bearer_auth(token).send().await.unwrap();
            let remaining = res
                .headers()
                .get("x-ratelimit-remaining")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u32>().ok());
            (res.status(), remaining)
        }
    });
    let outcomes = futures::future::join_all(calls).await;
    let passed: Vec<u32> = outcomes
        .iter()
        .filter(|(s, _)| *s == StatusCode::OK)
        .map(|(_, r)| r.expect("X-RateLimit-Remaining"))
        .collect();
    let refused = outcomes
        .iter()
        .filter(|(s, _)| *s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    // (The sign-in above counted against the client IP's anonymous budget, not the
    // account's.)
    assert_eq!(passed.len(), 30, "{outcomes:?}");
    assert_eq!(refused, 30);
    let mut remaining = passed.clone();
    remaining.sort_unstable();
    assert_eq!(
        remaining,
        (0..30).collect::<Vec<_>>(),
        "each remaining value once"
    );

    // 3. 10 concurrent agent creates at a limit of 3 leave exactly 3.
    let creator = account(&client, &a, &env, "free").await;
    let (token, _) = login(&client, &a, &creator).await;
    let creates = (0..10).map(|i| {
        let url = if i % 2 == 0 {
            a.url("/api/agents")
        } else {
            b.url("/api/agents")
        };
        let client = client.clone();
        let token = token.clone();
        async move {
            client
                .post(url)
                .bearer_auth(token)
                .json(&json!({"name": format!("Agent {i}")}))
                .send()
                .await
                .unwrap()
                .status()
        }
    });
    let statuses = futures::future::join_all(creates).await;
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == StatusCode::CREATED)
            .count(),
        3,
        "{statuses:?}"
    );
    let list: Value = client
        .get(b.url("/api/agents"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["agents"].as_array().unwrap().len(), 3);

    // 4. A PDF uploaded through A is retrieved in a chat on B; after its deletion on A it
    // is not.
    let owner = account(&client, &a, &env, "starter").await;
    let (token, _) = login(&client, &a, &owner).await;
    let agent = create_agent(&client, &a, &token).await;
    let pdf = upload(
        &client,
        &a,
        &token,
        &agent,
        "mime.pdf",
        fixture("shared-mime-info-spec.pdf"),
    )
    .await;
    assert_eq!(settled(&client, &b, &token, &agent, &pdf).await, "indexed");
    let question = json!({"message": "How are glob patterns and magic rules used to find a file's MIME type?"});
    let reply = chat(&client, &b, &token, &agent, &question).await;
    assert!(
        sources(&reply).contains(&pdf),
        "the PDF is retrieved on B: {reply}"
    );
    let res = client
        .delete(a.url(&format!("/api/agents/{agent}/knowledge/{pdf}")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let reply = chat(&client, &b, &token, &agent, &question).await;
    assert!(
        !sources(&reply).contains(&pdf),
        "the deleted PDF is no longer retrieved on B: {reply}"
    );

    // 5. A dozen uploads, split across both: each job runs once, and each
    // document.indexed webhook arrives once.
    let res = client
        .post(a.url("/api/integrations/webhooks"))
        .bearer_auth(&token)
        .json(&json!({"url": format!("http://{receiver}/hook"), "events": ["document.indexed"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let mut documents = Vec::new();
    for i in 0..12 {
        let via = if i % 2 == 0 { &a } else { &b };
        let text = format!("Note {i}: the lighthouse keeper counted {i} ships today.\n");
        documents.push(
            upload(
                &client,
                via,
                &token,
                &agent,
                &format!("note-{i}.txt"),
                text.into_bytes(),
            )
            .await,
        );
    }
    for doc in &documents {
        assert_eq!(settled(&client, &b, &token, &agent, doc).await, "indexed");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while received.0.lock().unwrap().len() < documents.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Time for any duplicate to arrive.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got = received.0.lock().unwrap().clone();
    let mut per_document: HashMap<String, usize> = HashMap::new();
    for (_, body) in &got {
        let id = body["data"]["document"]["documentId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        *per_document.entry(id).or_default() += 1;
    }
    for doc in &documents {
        assert_eq!(per_document.get(doc), Some(&1), "deliveries: {got:?}");
    }
    let ids: std::collections::HashSet<_> = got.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(ids.len(), got.len(), "every delivery arrived once");
    let pool = sqlx::PgPool::connect(database.url()).await.unwrap();
    let attempts: Vec<i64> =
        sqlx::query_scalar("SELECT j.attempts FROM jobs j WHERE j.document_id = ANY($1)")
            .bind(&documents)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(attempts, vec![1; documents.len()], "each job ran once");
    let delivery_attempts: Vec<i64> = sqlx::query_scalar("SELECT attempts FROM webhook_deliveries")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert!(
        delivery_attempts.iter().all(|a| *a == 1),
        "{delivery_attempts:?}"
    );
    pool.close().await;
    drop(a);
    drop(b);
}

#[test]
fn postgres_mode_without_jwt_secret_does_not_start() {
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_agentchat"))
        .arg("serve")
        .env("DATA_DIR", data.path())
        .env("DATABASE_URL", database_server())
        .env("ENCRYPTION_KEY", ENCRYPTION_KEY)
        .env("PUBLIC_URL", PUBLIC_URL)
        .env("LEPTOS_SITE_ADDR", "127.0.0.1:0")
        .env_remove("JWT_SECRET")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("JWT_SECRET"), "{stderr}");
}

async fn create_agent(client: &Client, on: &Instance, token: &str) -> String {
    let res = client
        .post(on.url("/api/agents"))
        .bearer_auth(token)
        .json(&json!({"name": "Shared", "systemPrompt": "Answer from the documents."}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let body: Value = res.json().await.unwrap();
    body["agent"]["id"].as_str().unwrap().to_string()
}

async fn upload(
    client: &Client,
    on: &Instance,
    token: &str,
    agent: &str,
    name: &str,
    bytes: Vec<u8>,
) -> String {
    let form = multipart::Form::new().part(
        "file",
        multipart::Part::bytes(bytes).file_name(name.to_string()),
    );
    let res = client
        .post(on.url(&format!("/api/agents/{agent}/knowledge/file")))
        .bearer_auth(token)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let body: Value = res.json().await.unwrap();
    body["documentId"].as_str().unwrap().to_string()
}

/// Polls the document on `on` until indexed or failed (60 s at most); its status.
async fn settled(client: &Client, on: &Instance, token: &str, agent: &str, doc: &str) -> String {
    for _ in 0..600 {
        let body: Value = client
            .get(on.url(&format!("/api/agents/{agent}/knowledge/{doc}")))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let status = body["document"]["status"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if status == "indexed" || status == "failed" {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("document {doc} did not settle");
}

async fn chat(client: &Client, on: &Instance, token: &str, agent: &str, body: &Value) -> Value {
    let res = client
        .post(on.url(&format!("/api/agents/{agent}/chat")))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

fn sources(reply: &Value) -> Vec<String> {
    reply["sources"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter_map(|s| s["documentId"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The reply text of chunk frames.
fn chunks(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| v["chunk"].as_str().map(str::to_string))
        .collect()
}

async fn stream_chat(
    client: &Client,
    on: &Instance,
    token: &str,
    agent: &str,
    body: Value,
) -> reqwest::Response {
    let res = client
        .post(on.url(&format!("/api/agents/{agent}/chat")))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    res
}

async fn resume_on(
    client: &Client,
    on: &Instance,
    token: &str,
    agent: &str,
    thread: &str,
    last: u64,
) -> reqwest::Response {
    client
        .get(on.url(&format!(
            "/api/agents/{agent}/conversations/{thread}/stream"
        )))
        .bearer_auth(token)
        .header("Last-Event-ID", last.to_string())
        .send()
        .await
        .unwrap()
}

/// The thread's last reply as stored: (status, content).
async fn stored_reply(
    client: &Client,
    on: &Instance,
    token: &str,
    agent: &str,
    thread: &str,
) -> (String, String) {
    let body: Value = client
        .get(on.url(&format!(
            "/api/agents/{agent}/conversations/{thread}/messages"
        )))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let last = body["messages"]
        .as_array()
        .unwrap()
        .last()
        .cloned()
        .unwrap_or(Value::Null);
    if last["role"] != "assistant" {
        return (String::new(), String::new());
    }
    (
        last["status"].as_str().unwrap().to_string(),
        last["content"].as_str().unwrap().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn resumable_streams_cross_instances_and_survive_a_drain() {
    use mock_provider::{MockConfig, MockProvider};
    let database = ScratchDatabase::create(&database_server())
        .await
        .expect("a scratch database on the PostgreSQL server");
    let prefix = format!("t_{}:", uuid::Uuid::new_v4().simple());
    let mock = MockProvider::start(MockConfig {
        token_interval: Duration::from_millis(20),
        record_requests: false,
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let mut env = shared_env(database.url(), &prefix, "127.0.0.1:9".parse().unwrap());
    env.extend([
        ("OPENAI_API_KEY".to_string(), "sk-mock".to_string()),
        ("OPENAI_BASE_URL".to_string(), mock.base_url()),
        ("SHUTDOWN_GRACE_SECONDS".to_string(), "1".to_string()),
    ]);
    let mut a = start(&env);
    let b = start(&env);
    let client = Client::new();
    let email = account(&client, &a, &env, "starter").await;
    let (token, _) = login(&client, &a, &email).await;
    let res = client
        .post(a.url("/api/agents"))
        .bearer_auth(&token)
        .json(&json!({"name": "Streams", "model": "gpt-4o-mini"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let agent = res.json::<Value>().await.unwrap()["agent"]["id"]
        .as_str()
        .unwrap()
        .to_string();

    // 1. A reply generated on A, its client gone after 5 frames, resumed on B: the rest,
    // frame-exact, while it is still generating.
    let res = stream_chat(
        &client,
        &a,
        &token,
        &agent,
        json!({"message": "count [[tokens:80]]", "stream": true, "resumable": true}),
    )
    .await;
    let thread = res.headers()["x-thread-id"].to_str().unwrap().to_string();
    let first = Events::of(res).take(5).await;
    let res = resume_on(&client, &b, &token, &agent, &thread, 5).await;
    assert_eq!(res.status(), 200);
    let rest = Events::of(res).rest().await;
    let all: Vec<Event> = first.into_iter().chain(rest).collect();
    let ids: Vec<u64> = all.iter().map(|(id, _)| id.unwrap()).collect();
    assert_eq!(ids, (1..=all.len() as u64).collect::<Vec<_>>());
    assert_eq!(all.last().unwrap().1, "[DONE]");
    let (status, content) = stored_reply(&client, &b, &token, &agent, &thread).await;
    assert_eq!(
        (status.as_str(), content.as_str()),
        ("complete", chunks(&all).as_str())
    );
    assert!(content.ends_with("w80"));

    // 2. While A generates a reply, B refuses a message to its conversation, and cancels it.
    let res = stream_chat(&client, &a, &token, &agent,
        json!({"message": "long [[tokens:500]]", "threadId": thread, "stream": true, "resumable": true})).await;
    let running = tokio::spawn(Events::of(res).rest());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let res = client
        .post(b.url(&format!("/api/agents/{agent}/chat")))
        .bearer_auth(&token)
        .json(&json!({"message": "meanwhile", "threadId": thread}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 409);
    let res = client
        .post(b.url(&format!(
            "/api/agents/{agent}/conversations/{thread}/cancel"
        )))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let ended = running.await.unwrap();
    assert_eq!(ended.last().unwrap().1, "[DONE]");
    assert!(
        ended[ended.len() - 2].1.contains("The reply was cancelled"),
        "{ended:?}"
    );
    let (status, content) = stored_reply(&client, &b, &token, &agent, &thread).await;
    assert_eq!(status, "cancelled");
    assert!(!content.contains("w500"));
    // Six messages at once, three through each instance: one runs, the others are refused.
    let racing = (0..6).map(|i| {
        let on = if i % 2 == 0 { &a } else { &b };
        client
            .post(on.url(&format!("/api/agents/{agent}/chat")))
            .bearer_auth(&token)
            .json(&json!({"message": format!("racer {i} [[tokens:30]]"), "threadId": thread}))
            .send()
    });
    let statuses: Vec<StatusCode> = futures::future::join_all(racing)
        .await
        .into_iter()
        .map(|r| r.unwrap().status())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == StatusCode::OK).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == StatusCode::CONFLICT)
            .count(),
        5,
        "{statuses:?}"
    );
    // The conversation is free on both at once.
    let res = client
        .post(b.url(&format!("/api/agents/{agent}/chat")))
        .bearer_auth(&token)
        .json(&json!({"message": "after", "threadId": thread}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    // 3. 100 streams, alternately on A and B; A gets SIGTERM in their middle. Its streams
    // are cut after the grace period (1 s); each client resumes on the other instance, and
    // every reply ends complete, frame-exact.
    let instances = Arc::new([a.addr, b.addr]);
    let mut clients = Vec::new();
    let (started_tx, mut started_rx) = tokio::sync::mpsc::channel::<()>(100);
    for i in 0..100usize {
        let (client, token, agent, instances, started) = (
            client.clone(),
            token.clone(),
            agent.clone(),
            instances.clone(),
            started_tx.clone(),
        );
        clients.push(tokio::spawn(async move {
            let mut on = i % 2;
            let url = |on: usize, path: &str| format!("http://{}{}", instances[on], path);
            let res = client
                .post(url(on, &format!("/api/agents/{agent}/chat")))
                .bearer_auth(&token)
                .json(&json!({"message": format!("stream {i} [[tokens:120]]"), "stream": true, "resumable": true}))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200);
            let thread = res.headers()["x-thread-id"].to_str().unwrap().to_string();
            let mut got: Vec<Event> = Vec::new();
            let mut res = Some(res);
            let mut resumes = 0;
            let mut announced = false;
            loop {
                let mut events = Events::of(res.take().unwrap());
                while let Some((id, data)) = events.next().await {
                    // Frames without an id tell the client to resume; they are not the reply's.
                    if id.is_some() {
                        got.push((id, data));
                    }
                    if !announced {
                        announced = true;
                        let _ = started.send(()).await;
                    }
                }
                if got.last().is_some_and(|(_, d)| d == "[DONE]") {
                    break;
                }
                resumes += 1;
                assert!(resumes <= 5, "stream {i} did not end: {got:?}");
                on = 1 - on;
                let last = got.last().map_or(0, |(id, _)| id.unwrap());
                let next = client
                    .get(url(on, &format!("/api/agents/{agent}/conversations/{thread}/stream")))
                    .bearer_auth(&token)
                    .header("Last-Event-ID", last.to_string())
                    .send()
                    .await;
                match next {
                    Ok(r) if r.status() == 200 => res = Some(r),
                    Ok(r) => panic!("resume of stream {i} on {on}: {}", r.status()),
                    // The stopped instance: the other one next time.
                    Err(_) => {
                        on = 1 - on;
                        let r = client
                            .get(url(on, &format!("/api/agents/{agent}/conversations/{thread}/stream")))
                            .bearer_auth(&token)
                            .header("Last-Event-ID", last.to_string())
                            .send()
                            .await
                            .unwrap();
                        assert_eq!(r.status(), 200, "resume of stream {i}");
                        res = Some(r);
                    }
                }
            }
            (thread, got, resumes)
        }));
    }
    drop(started_tx);
    for _ in 0..100 {
        started_rx.recv().await.unwrap();
    }
    let stopped_at = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &a.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut resumed = 0;
    for client_task in clients {
        let (thread, got, resumes) = client_task.await.unwrap();
        resumed += usize::from(resumes > 0);
        let ids: Vec<u64> = got.iter().map(|(id, _)| id.unwrap()).collect();
        assert_eq!(
            ids,
            (1..=got.len() as u64).collect::<Vec<_>>(),
            "frame-exact: {thread}"
        );
        let (status, content) = stored_reply(&client, &b, &token, &agent, &thread).await;
        assert_eq!(status, "complete", "{thread}");
        assert_eq!(content, chunks(&got), "{thread}");
        assert!(content.ends_with("w120"));
    }
    assert!(resumed >= 40, "A's clients resumed on B: {resumed}");
    // A exits once its replies are stored: within grace + handover + the last writes.
    let exit = loop {
        if let Some(exit) = a.child.try_wait().unwrap() {
            break exit;
        }
        assert!(
            stopped_at.elapsed() < Duration::from_secs(30),
            "A did not exit"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(exit.success(), "{exit:?}");
    eprintln!(
        "A stopped {:?} after SIGTERM; {resumed} of 100 clients resumed",
        stopped_at.elapsed()
    );
}
