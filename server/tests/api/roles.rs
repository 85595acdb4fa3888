//! `agentchat serve --role web|worker|all`: a web instance serves the API and runs no
//! background work, a worker instance works the queues on the same database and answers
//! only the health checks; and the readiness check (`GET /api/health/ready`).

use std::time::Duration;

use agentchat::config::Role;
use serde_json::Value;
use test_support::scratch::ScratchDatabase;

use crate::{helpers::*, knowledge::agent};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/knowledge/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

async fn status_of(app: &TestApp, token: &str, agent: &str, doc: &str) -> Value {
    let res = app
        .get(&format!("/api/agents/{agent}/knowledge/{doc}"), Some(token))
        .await;
    assert_eq!(res.status(), 200);
    res.json::<Value>().await.unwrap()["document"]["status"].clone()
}

/// A worker instance beside `web`: the same database (and, on SQLite, the same uploads).
async fn worker_beside(web: &TestApp) -> TestApp {
    let uploads = web.dir.path().join("uploads");
    let url = web.database_url.clone();
    spawn_app_on(
        tempfile::tempdir().unwrap(),
        web.database.clone(),
        move |c| {
            c.role = Role::Worker;
            c.storage.database_url = url;
            c.knowledge.uploads = uploads;
        },
    )
    .await
}

#[tokio::test]
async fn a_web_instance_runs_no_job_and_a_worker_instance_runs_it() {
    let web = spawn_app_with(|c| c.role = Role::Web).await;
    let user = web.user().await;
    let agent = agent(&web, &user.access).await;
    let doc = web
        .uploaded(&user.access, &agent, "a.txt", fixture("Apache-2.0.txt"))
        .await;
    // Longer than a worker's 2 s poll: no worker of this instance takes the job.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(status_of(&web, &user.access, &agent, &doc).await, "pending");
    let claims: i64 = web
        .sql_scalar(
            "SELECT attempts FROM jobs WHERE document_id = $1 AND status = 'queued'",
            vec![doc.as_str().into()],
        )
        .await;
    assert_eq!(claims, 0, "the job was never claimed");

    let worker = worker_beside(&web).await;
    let d = web.settled(&user.access, &agent, &doc).await;
    assert_eq!(d["status"], "indexed", "{d}");
    assert!(d["chunks"].as_u64().unwrap_or(0) > 0, "{d}");

    // The worker answers its health checks, and nothing else.
    assert_eq!(worker.get("/api/health", None).await.status(), 200);
    let ready = worker.get("/api/health/ready", None).await;
    assert_eq!(ready.status(), 200);
    assert_eq!(ready.headers()["x-content-type-options"], "nosniff");
    assert!(ready.headers().get("x-request-id").is_some());
    for path in [
        "/api/auth/providers",
        "/api/agents",
        "/api/openapi.json",
        "/",
        "/login",
    ] {
        let res = worker.get(path, None).await;
        assert_eq!(res.status(), 404, "{path}");
        assert!(res.headers().get("x-ratelimit-limit").is_none(), "{path}");
    }
    let res = worker
        .post("/api/auth/login", None, serde_json::json!({}))
        .await;
    assert_error(res, 404, "Not Found", None).await;
}

#[tokio::test]
async fn the_default_role_serves_and_works() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let doc = app
        .uploaded(&user.access, &agent, "a.txt", fixture("Apache-2.0.txt"))
        .await;
    let d = app.settled(&user.access, &agent, &doc).await;
    assert_eq!(d["status"], "indexed", "{d}");
}

#[tokio::test]
async fn ready_while_every_dependency_answers() {
    let app = spawn_app().await;
    let res = app.get("/api/health/ready", None).await;
    assert_eq!(res.status(), 200);
    assert!(
        res.headers().get("x-ratelimit-limit").is_none(),
        "readiness is not rate limited"
    );
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["status"], "ready");
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(body["database"], "ok");
    let redis = if app.state.limits.redis_url.is_some() {
        "ok"
    } else {
        "not configured"
    };
    assert_eq!(body["redis"], redis);
    // Not counted against the client IP's budget either.
    let app = spawn_app().await;
    for _ in 0..110 {
        assert_eq!(app.get("/api/health/ready", None).await.status(), 200);
    }
    assert_eq!(app.get("/api/auth/providers", None).await.status(), 200);
}

/// The Redis of the test environment (`AGENTCHAT_TEST_REDIS_URL`, default the local
/// server): this test needs it running and fails otherwise.
fn test_redis() -> String {
    std::env::var("AGENTCHAT_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

#[tokio::test]
async fn ready_with_redis_when_it_answers_and_not_ready_when_it_does_not() {
    let url = test_redis();
    let app = spawn_app_with(|c| c.limits.redis_url = Some(url.clone())).await;
    let res = app.get("/api/health/ready", None).await;
    assert_eq!(
        res.status(),
        200,
        "Redis at {url} must be running for this test (scripts/services.sh)"
    );
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["redis"], "ok");

    // Nothing listens on port 1.
    let app = spawn_app_with(|c| c.limits.redis_url = Some("redis://127.0.0.1:1".into())).await;
    let started = std::time::Instant::now();
    let res = app.get("/api/health/ready", None).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(res.headers().get("x-ratelimit-limit").is_none());
    assert_error(
        res,
        503,
        "Service Unavailable",
        Some("Not ready: Redis does not answer"),
    )
    .await;
    let health = app.get("/api/health", None).await;
    assert_eq!(health.status(), 200, "liveness does not depend on Redis");
}

/// The PostgreSQL server of the test environment (`AGENTCHAT_TEST_DATABASE_URL` when it
/// names one, else the local server): this test needs it running and fails otherwise.
fn test_postgres() -> String {
    test_database_server().unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

#[tokio::test]
async fn not_ready_while_the_database_does_not_answer() {
    let server = test_postgres();
    let db = ScratchDatabase::create(&server).await.unwrap_or_else(|e| {
        panic!("PostgreSQL at {server} must be running for this test (scripts/services.sh): {e}")
    });
    let url = db.url().to_string();
    let app = spawn_app_with(|c| c.storage.database_url = url).await;
    assert_eq!(app.get("/api/health/ready", None).await.status(), 200);
    // The database goes away (its connections are ended with it).
    drop(db);
    let started = std::time::Instant::now();
    let res = app.get("/api/health/ready", None).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_error(
        res,
        503,
        "Service Unavailable",
        Some("Not ready: the database does not answer"),
    )
    .await;
}
