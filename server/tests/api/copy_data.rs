//! `agentchat copy-data`: a populated SQLite installation copied into an empty PostgreSQL
//! database answers the same API calls the same way afterwards, and a target that already
//! holds data is refused. Runs on every pass of the suite: the source is always SQLite and
//! the target a scratch database on the PostgreSQL server of
//! `AGENTCHAT_TEST_DATABASE_URL` (the local server when unset).

use std::{process::Command, sync::Arc};

use serde_json::{json, Value};
use test_support::scratch::ScratchDatabase;

use crate::{helpers::*, knowledge::agent};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/knowledge/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

fn copy_data(app: &TestApp, to: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_agentchat"))
        .args(["copy-data", "--from", &app.database_url, "--to", to])
        .env("DATA_DIR", app.dir.path())
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "warn")
        .output()
        .expect("the binary runs")
}

async fn json_of(res: reqwest::Response) -> Value {
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

/// What a client sees of the installation: agents, conversations with their messages, a
/// document, and a webhook, read with an API key and a bearer token.
async fn snapshot(app: &TestApp, token: &str, key: &str, agent: &str, doc: &str) -> Value {
    let agents = json_of(app.get("/api/agents", Some(key)).await).await;
    let conversations = json_of(
        app.get(&format!("/api/agents/{agent}/conversations"), Some(key))
            .await,
    )
    .await;
    let thread = conversations["conversations"][0]["threadId"]
        .as_str()
        .expect("a conversation")
        .to_string();
    let messages = app.messages(token, agent, &thread).await;
    let document = json_of(
        app.get(&format!("/api/agents/{agent}/knowledge/{doc}"), Some(token))
            .await,
    )
    .await;
    let webhooks = json_of(app.get("/api/integrations/webhooks", Some(token)).await).await;
    json!({
        "agents": agents,
        "conversations": conversations,
        "messages": messages,
        "document": document,
        "webhooks": webhooks,
    })
}

#[tokio::test]
async fn a_copied_installation_answers_the_same_on_postgres() {
    let server = test_database_server()
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
    // Webhook deliveries go to a closed local port (allowed for the test).
    let source = spawn_app_on(tempfile::tempdir().unwrap(), None, |c| {
        c.outbound.allowed_private_hosts = vec!["127.0.0.1:9".into()];
    })
    .await;
    let user = source.user().await;
    let (_, key) = source
        .api_key(
            &user,
            &["agents:read", "chat:read", "chat:write", "knowledge:read"],
        )
        .await;
    // A webhook first, so that the agent and the document make deliveries to copy.
    let res = source
        .post(
            "/api/integrations/webhooks",
            Some(&user.access),
            json!({"url": "http://127.0.0.1:9/hook", "events": ["agent.created", "document.indexed"]}),
        )
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let agent = agent(&source, &user.access).await;
    let doc = source
        .uploaded(
            &user.access,
            &agent,
            "license.txt",
            fixture("Apache-2.0.txt"),
        )
        .await;
    assert_eq!(
        source.settled(&user.access, &agent, &doc).await["status"],
        "indexed"
    );
    let question = json!({"message": "What does the license say about patent grants?"});
    let before_reply = json_of(source.chat(&key, &agent, question.clone()).await).await;
    assert!(before_reply["ragChunksUsed"].as_u64().unwrap() > 0);
    let before = snapshot(&source, &user.access, &key, &agent, &doc).await;

    let target = Arc::new(ScratchDatabase::create(&server).await.unwrap());
    let out = copy_data(&source, target.url());
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("every table's row count matches"),
        "{stdout}"
    );
    assert!(stdout.contains("1 uploads moved"), "{stdout}");
    // Progress went to stderr, table by table.
    assert!(String::from_utf8_lossy(&out.stderr).contains("messages: 2/2 rows"));

    // Copying again into the now populated target is refused, and changes nothing.
    let again = copy_data(&source, target.url());
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already holds data"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    // The same data folder (the same generated secrets), now on PostgreSQL.
    let copied = spawn_app_on(source.dir, Some(target), |_| {}).await;
    // The same password signs in; the same API key works; the same answers come back.
    let (access, _) = copied.tokens(&user.email, &user.password).await;
    let after = snapshot(&copied, &access, &key, &agent, &doc).await;
    assert_eq!(after, before);
    // (Tokens issued before the copy name their issuer, PUBLIC_URL, which is each test
    // application's own port here; with one PUBLIC_URL and JWT_SECRET they go on working.)
    let after_reply = json_of(copied.chat(&key, &agent, question).await).await;
    assert_eq!(after_reply["ragChunksUsed"], before_reply["ragChunksUsed"]);
    assert_eq!(after_reply["sources"], before_reply["sources"]);
    // The upload came along: indexing it again reads it from the database.
    let res = copied
        .post(
            &format!("/api/agents/{agent}/knowledge/{doc}/refresh"),
            Some(&access),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), 202);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let d = copied.settled(&access, &agent, &doc).await;
    assert_eq!(d["status"], "indexed", "{d}");
    assert_eq!(d["chunks"], before["document"]["document"]["chunks"]);
}
