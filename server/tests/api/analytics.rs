//! Analytics (docs/api.md § Analytics): every count of the series per day and per week,
//! the top and unanswered questions, the agent filter, tenants and bad input.

use serde_json::{json, Value};

use crate::{chat::agent, embeddings::indexed, helpers::*};

/// Starts a thread of `agent` with `message`; (thread, reply id).
async fn turn(app: &TestApp, token: &str, agent: &str, message: &str) -> (String, String) {
    let res = app.chat(token, agent, json!({ "message": message })).await;
    assert_eq!(res.status(), 200);
    let thread = res.json::<Value>().await.unwrap()["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    let reply = app
        .messages(token, agent, &thread)
        .await
        .into_iter()
        .find(|m| m["role"] == "assistant")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    (thread, reply)
}

/// Moves the thread, its messages and their ratings to 2026-11-`day` 10:00 UTC.
async fn on_day(app: &TestApp, thread: &str, day: u32) {
    let at = chrono::NaiveDate::from_ymd_opt(2026, 11, day)
        .unwrap()
        .and_hms_opt(10, 0, 0)
        .unwrap()
        .and_utc()
        .timestamp_millis();
    for table in [
        "threads SET created_at = {at}, updated_at = {at} WHERE id",
        "messages SET created_at = {at} WHERE thread_id",
        "message_feedback SET created_at = {at} WHERE thread_id",
    ] {
        app.sql(
            &format!("UPDATE {} = $1", table.replace("{at}", &at.to_string())),
            vec![thread.into()],
        )
        .await;
    }
}

async fn analytics(app: &TestApp, token: &str, query: &str) -> Value {
    let res = app
        .get(&format!("/api/analytics{query}"), Some(token))
        .await;
    assert_eq!(res.status(), 200, "{query}");
    res.json().await.unwrap()
}

#[tokio::test]
async fn every_count_per_day_and_week_with_the_questions() {
    let app = spawn_app().await;
    let user = app.user().await;
    let (support, sales) = (agent(&app, &user).await, agent(&app, &user).await);
    // Support has a knowledge base: its replies without sources went unanswered.
    indexed(
        &app,
        &user.access,
        &support,
        "hours.txt",
        "Opening hours: 9 to 5 on weekdays.",
    )
    .await;

    let (a, a_reply) = turn(&app, &user.access, &support, "Where is my parcel?").await;
    let (b, _) = turn(&app, &user.access, &support, "where is my  PARCEL").await;
    let (c, c_reply) = turn(&app, &user.access, &sales, "Do you ship to Norway?").await;
    let rate = |thread: String, reply: String, agent: String, rating: &'static str| {
        let (app, user) = (&app, &user);
        async move {
            let res = app
                .call(
                    reqwest::Method::PUT,
                    &format!(
                        "/api/agents/{agent}/conversations/{thread}/messages/{reply}/feedback"
                    ),
                    Some(&user.access),
                    Some(json!({ "rating": rating })),
                )
                .await;
            assert_eq!(res.status(), 200);
        }
    };
    rate(a.clone(), a_reply.clone(), support.clone(), "up").await;
    rate(c.clone(), c_reply.clone(), sales.clone(), "down").await;
    // A widget conversation, a failed reply and a reply with two tool calls, one failed.
    app.sql(
        "UPDATE threads SET channel = 'widget' WHERE id = $1",
        vec![(&c).into()],
    )
    .await;
    app.sql(
        "UPDATE messages SET status = 'failed', sources = NULL WHERE id = $1",
        vec![(&c_reply).into()],
    )
    .await;
    let calls = json!([
        {"id": "1", "name": "lookup", "type": "http", "arguments": {}, "status": "succeeded", "output": "", "durationMs": 3},
        {"id": "2", "name": "lookup", "type": "http", "arguments": {}, "status": "failed", "output": "", "error": "timeout", "durationMs": 9}
    ]);
    app.sql(
        &format!("UPDATE messages SET tool_calls = '{calls}' WHERE id = $1"),
        vec![(&a_reply).into()],
    )
    .await;
    // Monday 23 and Tuesday 24 (one week), Monday 30 (the next).
    on_day(&app, &a, 23).await;
    on_day(&app, &b, 24).await;
    on_day(&app, &c, 30).await;

    let days = analytics(&app, &user.access, "?from=2026-11-23&to=2026-11-30").await;
    let series = days["series"].as_array().unwrap();
    assert_eq!(series.len(), 8);
    assert_eq!(series[0]["start"], "2026-11-23");
    assert_eq!(series[7]["start"], "2026-11-30");
    let monday = &series[0];
    assert_eq!(monday["conversations"], 1);
    assert_eq!(monday["userMessages"], 1);
    assert_eq!(monday["replies"], 1);
    assert!(monday["tokens"]["prompt"].as_u64().unwrap() > 0);
    assert!(monday["tokens"]["completion"].as_u64().unwrap() > 0);
    assert_eq!(monday["feedback"], json!({"up": 1, "down": 0}));
    assert_eq!(monday["toolCalls"], json!({"total": 2, "failed": 1}));
    assert_eq!(monday["visitors"], 0);
    let quiet = &series[3];
    assert_eq!(quiet["conversations"], 0);
    assert_eq!(quiet["tokens"], json!({"prompt": 0, "completion": 0}));
    let last = &series[7];
    assert_eq!(last["visitors"], 1);
    assert_eq!(last["failed"], 1);
    assert_eq!(last["feedback"], json!({"up": 0, "down": 1}));
    // Support's replies found no source in its knowledge ("Echo" replies cite nothing).
    let unanswered: u64 = series
        .iter()
        .map(|p| p["unanswered"].as_u64().unwrap())
        .sum();
    assert_eq!(unanswered, 2, "{series:?}");
    assert_eq!(
        days["topQuestions"],
        json!([{"text": "where is my parcel", "count": 2}, {"text": "do you ship to norway", "count": 1}])
    );
    assert_eq!(
        days["unanswered"],
        json!([{"text": "where is my parcel", "count": 2}])
    );

    let weeks = analytics(
        &app,
        &user.access,
        "?from=2026-11-23&to=2026-11-30&interval=week",
    )
    .await;
    let series = weeks["series"].as_array().unwrap();
    let starts: Vec<&str> = series
        .iter()
        .map(|p| p["start"].as_str().unwrap())
        .collect();
    assert_eq!(starts, ["2026-11-23", "2026-11-30"]);
    assert_eq!(series[0]["conversations"], 2);
    assert_eq!(series[0]["userMessages"], 2);
    assert_eq!(series[1]["conversations"], 1);

    let one = analytics(
        &app,
        &user.access,
        &format!("?from=2026-11-23&to=2026-11-30&agentId={sales}"),
    )
    .await;
    let total: u64 = one["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["conversations"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 1);
    assert_eq!(
        one["topQuestions"],
        json!([{"text": "do you ship to norway", "count": 1}])
    );

    // Another account counts nothing of it.
    let stranger = app.user().await;
    let theirs = analytics(&app, &stranger.access, "?from=2026-11-23&to=2026-11-30").await;
    assert!(theirs["series"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["conversations"] == 0 && p["replies"] == 0));
    assert_eq!(theirs["topQuestions"], json!([]));
}

#[tokio::test]
async fn the_default_period_and_bad_input() {
    let app = spawn_app().await;
    let user = app.user().await;
    let body = analytics(&app, &user.access, "").await;
    let series = body["series"].as_array().unwrap();
    assert_eq!(series.len(), 30);
    assert_eq!(
        series[29]["start"],
        chrono::Utc::now().format("%Y-%m-%d").to_string()
    );
    for (query, message) in [
        ("?interval=month", "interval must be day or week"),
        ("?from=2026-11-31", "from must be a date"),
        (
            "?from=2026-11-20&to=2026-11-19",
            "from must not be after to",
        ),
        ("?from=2025-01-01&to=2026-11-01", "at most 366 days"),
        ("?agent=x", "unknown field"),
    ] {
        let res = app
            .get(&format!("/api/analytics{query}"), Some(&user.access))
            .await;
        let body = assert_error(res, 400, "Bad Request", None).await;
        assert!(
            body["message"].as_str().unwrap().contains(message),
            "{query}: {body}"
        );
    }
    let (_, writer) = app.api_key(&user, &["chat:write"]).await;
    assert_error(
        app.get("/api/analytics", Some(&writer)).await,
        403,
        "Forbidden",
        None,
    )
    .await;
}
