//! A process killed while it writes chat turns leaves every conversation whole or absent
//! (`agentchat::chat::writer`): `agentchat serve` runs hundreds of conversations at once
//! (JSON and streamed, with the built-in offline model), is killed with SIGKILL once some
//! have been answered, and is started again on the same database, three times. After each
//! kill the database holds, for every thread, exactly its user's message and its reply,
//! counted in the thread; no message without its thread; every conversation a client was
//! answered in full; and usage counters equal to the sum of the stored replies.
//!
//! Runs on SQLite, and on PostgreSQL at `AGENTCHAT_TEST_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`; a scratch database is created there and
//! dropped afterwards; `scripts/services.sh` starts the server).

use std::{
    collections::HashSet,
    net::SocketAddr,
    path::Path,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

mod process;

use reqwest::Client;
use serde_json::{json, Value};
use test_support::scratch::ScratchDatabase;

const PASSWORD: &str = "correct horse battery";
/// Conversations in flight at once.
const AT_ONCE: usize = 300;
/// Conversations answered in full before the kill.
const ANSWERED_BEFORE_KILL: usize = 150;
const ROUNDS: usize = 3;

/// One running `agentchat serve`, killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `agentchat serve` on `data` with `env` and waits for its "AgentChat listening"
/// line.
fn start(data: &Path, env: &[(String, String)]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentchat"))
        .arg("serve")
        .current_dir(data)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("DATA_DIR", data)
        .env("LEPTOS_SITE_ADDR", "127.0.0.1:0")
        .env("RATE_LIMITS", "free=1000000000")
        .env("RUST_LOG", "warn,agentchat=info")
        .env_remove("SMTP_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("agentchat starts");
    let addr = process::announced_addr(&mut child);
    Server { child, addr }
}

/// Runs `agentchat ARGS` on the same data folder and database.
fn cli(data: &Path, env: &[(String, String)], args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_agentchat"))
        .args(args)
        .current_dir(data)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("DATA_DIR", data)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "agentchat {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Signs in; returns an access token.
async fn login(client: &Client, server: &Server, email: &str) -> String {
    let res = client
        .post(format!("http://{}/api/auth/login", server.addr))
        .json(&json!({"email": email, "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    body["tokens"]["accessToken"].as_str().unwrap().to_string()
}

/// One conversation, JSON or streamed to `[DONE]`; its thread id when it was answered in
/// full.
async fn converse(client: &Client, url: &str, token: &str, i: usize) -> Option<String> {
    let stream = i % 2 == 1;
    let res = client
        .post(url)
        .bearer_auth(token)
        .json(&json!({"message": format!("conversation {i}"), "stream": stream}))
        .send()
        .await
        .ok()?;
    if res.status() != 200 {
        return None;
    }
    if stream {
        let thread = res.headers().get("x-thread-id")?.to_str().ok()?.to_string();
        let body = res.text().await.ok()?;
        body.ends_with("data: [DONE]\n\n").then_some(thread)
    } else {
        let body: Value = res.json().await.ok()?;
        body["threadId"].as_str().map(str::to_string)
    }
}

/// Runs conversations, `AT_ONCE` at a time, until `ANSWERED_BEFORE_KILL` more have been
/// answered, then kills the server; returns the threads answered in full.
async fn load_then_kill(mut server: Server, token: &str, agent: &str) -> Vec<String> {
    let client = Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let url = format!("http://{}/api/agents/{agent}/chat", server.addr);
    let answered = Arc::new(Mutex::new(Vec::new()));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..AT_ONCE {
        let (client, url, token) = (client.clone(), url.clone(), token.to_string());
        let (answered, next) = (answered.clone(), next.clone());
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                match converse(&client, &url, &token, i).await {
                    Some(thread) => answered.lock().unwrap().push(thread),
                    // The server is gone.
                    None => return,
                }
            }
        });
    }
    let started = Instant::now();
    while answered.lock().unwrap().len() < ANSWERED_BEFORE_KILL {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "only {} conversations answered in two minutes",
            answered.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // SIGKILL: no shutdown, whatever is being written stays half done.
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    while tasks.join_next().await.is_some() {}
    let answered = answered.lock().unwrap().clone();
    answered
}

/// What the database holds, as rows of integers and texts.
enum Database {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Database {
    async fn connect(url: &str) -> Self {
        if url.starts_with("postgres") {
            Self::Postgres(sqlx::PgPool::connect(url).await.unwrap())
        } else {
            Self::Sqlite(sqlx::SqlitePool::connect(url).await.unwrap())
        }
    }

    /// `(thread id, message_count, messages, user messages, replies)` of every thread.
    async fn threads(&self) -> Vec<(String, i64, i64, i64, i64)> {
        const SQL: &str = "SELECT t.id, CAST(t.message_count AS BIGINT), \
             (SELECT COUNT(*) FROM messages m WHERE m.thread_id = t.id), \
             (SELECT COUNT(*) FROM messages m WHERE m.thread_id = t.id AND m.role = 'user'), \
             (SELECT COUNT(*) FROM messages m WHERE m.thread_id = t.id AND m.role = 'assistant') \
             FROM threads t";
        match self {
            Self::Sqlite(pool) => sqlx::query_as(SQL).fetch_all(pool).await.unwrap(),
            Self::Postgres(pool) => sqlx::query_as(SQL).fetch_all(pool).await.unwrap(),
        }
    }

    /// One row of integers.
    async fn numbers(&self, sql: &str) -> (i64, i64, i64) {
        match self {
            Self::Sqlite(pool) => sqlx::query_as(sql).fetch_one(pool).await.unwrap(),
            Self::Postgres(pool) => sqlx::query_as(sql).fetch_one(pool).await.unwrap(),
        }
    }
}

/// Checks what a kill left behind; returns the number of stored conversations.
async fn check(database_url: &str, answered: &[String]) -> usize {
    let db = Database::connect(database_url).await;
    let threads = db.threads().await;
    let mut stored = HashSet::new();
    for (id, count, messages, users, replies) in &threads {
        assert_eq!(
            (*count, *messages, *users, *replies),
            (2, 2, 1, 1),
            "thread {id}: its count, its messages, its user's messages, its replies"
        );
        stored.insert(id.clone());
    }
    for thread in answered {
        assert!(
            stored.contains(thread),
            "a conversation answered in full is stored: {thread}"
        );
    }
    let orphans = db
        .numbers(
            "SELECT COUNT(*), COUNT(*), COUNT(*) FROM messages \
             WHERE thread_id NOT IN (SELECT id FROM threads)",
        )
        .await;
    assert_eq!(orphans.0, 0, "no message without its thread");
    let replies = db
        .numbers(
            "SELECT COUNT(*), CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT), \
             CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) \
             FROM messages WHERE role = 'assistant'",
        )
        .await;
    let usage = db
        .numbers(
            "SELECT CAST(COALESCE(SUM(chats), 0) AS BIGINT), \
             CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT), \
             CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) FROM usage_daily",
        )
        .await;
    assert_eq!(
        usage, replies,
        "usage counts every stored reply, and only them"
    );
    stored.len()
}

/// Three rounds of load and kill on the database of `env` (`database_url` to read it).
async fn killed_three_times(env: Vec<(String, String)>, database_url: String) {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &env);
    let client = Client::new();
    let email = format!("crash-{}@example.com", uuid::Uuid::new_v4().simple());
    let res = client
        .post(format!("http://{}/api/auth/signup", server.addr))
        .json(&json!({"name": "Crash", "email": email, "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    cli(data.path(), &env, &["admin", "verify-email", &email]);
    let token = login(&client, &server, &email).await;
    let res = client
        .post(format!("http://{}/api/agents", server.addr))
        .bearer_auth(&token)
        .json(&json!({"name": "Crash"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let agent = res.json::<Value>().await.unwrap()["agent"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut server = Some(server);
    let mut answered = Vec::new();
    let mut stored = 0;
    for round in 0..ROUNDS {
        let running = match server.take() {
            Some(s) => s,
            None => start(data.path(), &env),
        };
        let token = login(&client, &running, &email).await;
        answered.extend(load_then_kill(running, &token, &agent).await);
        let now = check(&database_url, &answered).await;
        assert!(now >= stored, "round {round}: nothing stored is lost");
        stored = now;
    }
    assert!(stored >= ROUNDS * ANSWERED_BEFORE_KILL);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_a_killed_process_leaves_every_conversation_whole_or_absent() {
    let data = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/crash.db", data.path().display());
    let env = vec![("DATABASE_URL".to_string(), url.clone())];
    killed_three_times(env, url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_killed_process_leaves_every_conversation_whole_or_absent() {
    let server = std::env::var("AGENTCHAT_TEST_DATABASE_URL")
        .ok()
        .filter(|u| u.starts_with("postgres"))
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let database = ScratchDatabase::create(&server)
        .await
        .unwrap_or_else(|e| panic!("this test needs PostgreSQL at {server}: {e}"));
    let env = vec![
        ("DATABASE_URL".to_string(), database.url().to_string()),
        (
            "JWT_SECRET".to_string(),
            "crash-test-signing-secret-0123456789abcdef".to_string(),
        ),
        (
            "ENCRYPTION_KEY".to_string(),
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=".to_string(),
        ),
        (
            "PUBLIC_URL".to_string(),
            "http://agentchat.test".to_string(),
        ),
    ];
    killed_three_times(env, database.url().to_string()).await;
}
