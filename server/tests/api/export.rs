//! Conversation exports (docs/api.md § Export): both formats, the period, the file name,
//! CSV formula cells, tenants, scopes and bad input.

use reqwest::Method;
use serde_json::{json, Value};

use crate::{chat::agent, helpers::*};

/// `GET .../conversations/export{query}` as `token`, checked to be a 200 download; its body.
async fn download(app: &TestApp, token: &str, agent: &str, query: &str, kind: &str) -> String {
    let res = app
        .get(
            &format!("/api/agents/{agent}/conversations/export{query}"),
            Some(token),
        )
        .await;
    assert_eq!(res.status(), 200, "{query}");
    let headers = res.headers().clone();
    assert!(
        headers["content-type"].to_str().unwrap().starts_with(kind),
        "{:?}",
        headers["content-type"]
    );
    let disposition = headers["content-disposition"].to_str().unwrap();
    assert!(
        disposition.starts_with(&format!("attachment; filename=\"conversations-{agent}-")),
        "{disposition}"
    );
    assert_eq!(headers["cache-control"], "no-store");
    res.text().await.unwrap()
}

fn jsonl(body: &str) -> Vec<Value> {
    body.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Starts a thread with `message` and rates its reply `rating` with `comment`; the thread id.
async fn rated_turn(
    app: &TestApp,
    user: &TestUser,
    agent: &str,
    message: &str,
    rating: Option<(&str, &str)>,
) -> String {
    let res = app
        .chat(&user.access, agent, json!({ "message": message }))
        .await;
    assert_eq!(res.status(), 200);
    let thread = res.json::<Value>().await.unwrap()["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    if let Some((rating, comment)) = rating {
        let messages = app.messages(&user.access, agent, &thread).await;
        let reply = messages.iter().find(|m| m["role"] == "assistant").unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        let res = app
            .call(
                Method::PUT,
                &format!("/api/agents/{agent}/conversations/{thread}/messages/{reply}/feedback"),
                Some(&user.access),
                Some(json!({"rating": rating, "comment": comment})),
            )
            .await;
        assert_eq!(res.status(), 200);
    }
    thread
}

#[tokio::test]
async fn every_message_with_its_thread_feedback_and_time_in_both_formats() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent(&app, &user).await;
    let first = rated_turn(
        &app,
        &user,
        &agent,
        "Where is my parcel?",
        Some(("down", "=cmd|' /C calc'!A0")),
    )
    .await;
    let second = rated_turn(&app, &user, &agent, "=SUM(A1:A9)", None).await;
    let other_agent = crate::chat::agent(&app, &user).await;
    rated_turn(&app, &user, &other_agent, "Not this agent's", None).await;

    let records = jsonl(&download(&app, &user.access, &agent, "", "application/jsonl").await);
    assert_eq!(records.len(), 4, "{records:?}");
    // Conversations in the order they started, each one's messages oldest first.
    let threads: Vec<&str> = records
        .iter()
        .map(|r| r["threadId"].as_str().unwrap())
        .collect();
    assert_eq!(
        threads,
        [
            first.as_str(),
            first.as_str(),
            second.as_str(),
            second.as_str()
        ]
    );
    let roles: Vec<&str> = records
        .iter()
        .map(|r| r["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    let question = &records[0];
    assert_eq!(question["content"], "Where is my parcel?");
    assert_eq!(question["channel"], "api");
    assert_eq!(question["feedback"], Value::Null);
    assert_eq!(question["model"], Value::Null);
    let reply = &records[1];
    assert_eq!(reply["status"], "complete");
    assert!(reply["model"].is_string());
    assert!(reply["promptTokens"].as_i64().unwrap() > 0);
    assert!(reply["completionTokens"].as_i64().unwrap() > 0);
    assert_eq!(
        reply["feedback"],
        json!({"rating": "down", "comment": "=cmd|' /C calc'!A0"})
    );
    chrono::DateTime::parse_from_rfc3339(reply["createdAt"].as_str().unwrap()).unwrap();
    let ids = app.messages(&user.access, &agent, &first).await;
    assert_eq!(reply["messageId"], ids[1]["id"]);

    let csv = download(&app, &user.access, &agent, "?format=csv", "text/csv").await;
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_string)
        .collect();
    assert_eq!(
        header,
        [
            "threadId",
            "messageId",
            "channel",
            "role",
            "content",
            "model",
            "promptTokens",
            "completionTokens",
            "sources",
            "feedbackRating",
            "feedbackComment",
            "status",
            "createdAt"
        ]
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 4);
    assert_eq!(&rows[1][0], first.as_str());
    assert_eq!(&rows[1][9], "down");
    // Cells a spreadsheet would run as formulas start with a quote.
    assert_eq!(&rows[1][10], "'=cmd|' /C calc'!A0");
    assert_eq!(&rows[2][4], "'=SUM(A1:A9)");
    assert_eq!(&rows[0][4], "Where is my parcel?");
    assert_eq!(&rows[3][9], "");

    // The period: the day each message was stored, both ends included.
    app.sql(
        "UPDATE messages SET created_at = 1763640000000 WHERE thread_id = $1",
        vec![(&first).into()],
    )
    .await; // 2025-11-20T12:00:00Z
    let body = download(
        &app,
        &user.access,
        &agent,
        "?from=2025-11-20&to=2025-11-20",
        "application/jsonl",
    )
    .await;
    let period: Vec<Value> = jsonl(&body);
    assert_eq!(period.len(), 2);
    assert!(period.iter().all(|r| r["threadId"] == first.as_str()));
    let body = download(
        &app,
        &user.access,
        &agent,
        "?from=2025-11-21",
        "application/jsonl",
    )
    .await;
    assert!(jsonl(&body)
        .iter()
        .all(|r| r["threadId"] == second.as_str()));
    let res = app
        .get(
            &format!(
                "/api/agents/{agent}/conversations/export?format=csv&from=2025-11-20&to=2025-11-21"
            ),
            Some(&user.access),
        )
        .await;
    assert_eq!(
        res.headers()["content-disposition"],
        format!("attachment; filename=\"conversations-{agent}-2025-11-20-2025-11-21.csv\"")
            .as_str()
    );
    // No messages: an empty file, or the header alone.
    let body = download(
        &app,
        &user.access,
        &agent,
        "?to=2020-01-01",
        "application/jsonl",
    )
    .await;
    assert_eq!(body, "");
    let body = download(
        &app,
        &user.access,
        &agent,
        "?format=csv&to=2020-01-01",
        "text/csv",
    )
    .await;
    assert_eq!(body.lines().count(), 1);
}

#[tokio::test]
async fn an_export_crosses_its_pages_in_order() {
    let app = spawn_app_with(|c| c.limits.rate_limits = [1_000_000; 4]).await;
    let user = app.user().await;
    let agent = agent(&app, &user).await;
    // More messages than one page of the store (500): 260 threads of 2.
    let mut threads = Vec::new();
    for i in 0..260 {
        threads.push(rated_turn(&app, &user, &agent, &format!("Question {i}"), None).await);
    }
    let records = jsonl(&download(&app, &user.access, &agent, "", "application/jsonl").await);
    assert_eq!(records.len(), 520);
    let mut expected: Vec<&String> = threads.iter().flat_map(|t| [t, t]).collect();
    expected.sort();
    let got: Vec<&str> = records
        .iter()
        .map(|r| r["threadId"].as_str().unwrap())
        .collect();
    assert_eq!(got, expected);
    let mut ids: Vec<&str> = records
        .iter()
        .map(|r| r["messageId"].as_str().unwrap())
        .collect();
    ids.dedup();
    assert_eq!(ids.len(), 520, "no message twice");
}

#[tokio::test]
async fn bad_exports_are_refused() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent(&app, &user).await;
    let path = format!("/api/agents/{agent}/conversations/export");
    for (query, message) in [
        ("?format=xlsx", "format must be jsonl or csv"),
        ("?from=2026-02-30", "from must be a date, YYYY-MM-DD (UTC)"),
        (
            "?from=2026-11-02&to=2026-11-01",
            "from must not be after to",
        ),
    ] {
        let res = app.get(&format!("{path}{query}"), Some(&user.access)).await;
        assert_error(res, 400, "Bad Request", Some(message)).await;
    }
    let res = app
        .get(&format!("{path}?since=2026-01-01"), Some(&user.access))
        .await;
    assert_error(res, 400, "Bad Request", None).await;
    let other = app.user().await;
    let res = app.get(&path, Some(&other.access)).await;
    assert_error(res, 404, "Not Found", None).await;
    let (_, writer) = app.api_key(&user, &["chat:write"]).await;
    assert_error(app.get(&path, Some(&writer)).await, 403, "Forbidden", None).await;
    let (_, reader) = app.api_key(&user, &["chat:read"]).await;
    assert_eq!(app.get(&path, Some(&reader)).await.status(), 200);
}
