//! Feedback on replies (docs/api.md § Feedback): rating, changing, clearing, the rules on
//! input, scopes and tenants, and the message list showing it.

use reqwest::Method;
use serde_json::{json, Value};

use crate::{chat::agent, helpers::*};

/// A thread of `user`'s new agent with one turn: (agent, thread, user message id, reply id).
async fn turn(app: &TestApp, user: &TestUser) -> (String, String, String, String) {
    let agent = agent(app, user).await;
    let res = app
        .chat(&user.access, &agent, json!({"message": "hello"}))
        .await;
    assert_eq!(res.status(), 200);
    let thread = res.json::<Value>().await.unwrap()["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    let messages = app.messages(&user.access, &agent, &thread).await;
    let id = |role: &str| {
        messages.iter().find(|m| m["role"] == role).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (asked, reply) = (id("user"), id("assistant"));
    (agent, thread, asked, reply)
}

fn path(agent: &str, thread: &str, message: &str) -> String {
    format!("/api/agents/{agent}/conversations/{thread}/messages/{message}/feedback")
}

async fn rate(app: &TestApp, token: &str, path: &str, body: Value) -> reqwest::Response {
    app.call(Method::PUT, path, Some(token), Some(body)).await
}

/// The feedback the message list shows on message `id`.
async fn shown(app: &TestApp, user: &TestUser, agent: &str, thread: &str, id: &str) -> Value {
    app.messages(&user.access, agent, thread)
        .await
        .into_iter()
        .find(|m| m["id"] == id)
        .unwrap()
        .get("feedback")
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_reply_is_rated_changed_and_cleared() {
    let app = spawn_app().await;
    let user = app.user().await;
    let (agent, thread, asked, reply) = turn(&app, &user).await;
    let at = path(&agent, &thread, &reply);
    assert_eq!(
        shown(&app, &user, &agent, &thread, &reply).await,
        Value::Null
    );

    let res = rate(&app, &user.access, &at, json!({"rating": "up"})).await;
    assert_eq!(res.status(), 200);
    let up: Value = res.json().await.unwrap();
    assert_eq!(up["rating"], "up");
    assert!(up.get("comment").is_none(), "{up}");
    chrono::DateTime::parse_from_rfc3339(up["createdAt"].as_str().unwrap()).unwrap();
    assert_eq!(shown(&app, &user, &agent, &thread, &reply).await, up);
    assert_eq!(
        shown(&app, &user, &agent, &thread, &asked).await,
        Value::Null,
        "only the rated reply shows feedback"
    );

    // Another rating replaces it; the comment is trimmed.
    let res = rate(
        &app,
        &user.access,
        &at,
        json!({"rating": "down", "comment": "  Wrong opening hours.  "}),
    )
    .await;
    assert_eq!(res.status(), 200);
    let down: Value = res.json().await.unwrap();
    assert_eq!(down["rating"], "down");
    assert_eq!(down["comment"], "Wrong opening hours.");
    assert_eq!(shown(&app, &user, &agent, &thread, &reply).await, down);
    // The same again changes nothing and answers what is stored.
    let res = rate(
        &app,
        &user.access,
        &at,
        json!({"rating": "down", "comment": "Wrong opening hours."}),
    )
    .await;
    assert_eq!(res.json::<Value>().await.unwrap(), down);

    let res = app.delete(&at, Some(&user.access)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap(), json!({"success": true}));
    assert_eq!(
        shown(&app, &user, &agent, &thread, &reply).await,
        Value::Null
    );
    // Clearing again is no error.
    let res = app.delete(&at, Some(&user.access)).await;
    assert_eq!(res.status(), 200);

    // Deleting the conversation deletes its feedback with it.
    rate(&app, &user.access, &at, json!({"rating": "up"})).await;
    let res = app
        .delete(
            &format!("/api/agents/{agent}/conversations/{thread}"),
            Some(&user.access),
        )
        .await;
    assert_eq!(res.status(), 200);
    let left: i64 = app
        .sql_scalar("SELECT COUNT(*) FROM message_feedback", vec![])
        .await;
    assert_eq!(left, 0);
}

#[tokio::test]
async fn feedback_input_is_validated() {
    let app = spawn_app().await;
    let user = app.user().await;
    let (agent, thread, asked, reply) = turn(&app, &user).await;
    let at = path(&agent, &thread, &reply);
    let bad = |body: Value| {
        let (app, token, at) = (&app, &user.access, &at);
        async move { rate(app, token, at, body).await }
    };
    assert_error(
        bad(json!({"rating": "meh"})).await,
        400,
        "Bad Request",
        Some("rating must be \"up\" or \"down\", not \"meh\""),
    )
    .await;
    assert_error(bad(json!({})).await, 400, "Bad Request", None).await;
    assert_error(
        bad(json!({"rating": "up", "stars": 5})).await,
        400,
        "Bad Request",
        None,
    )
    .await;
    assert_error(
        bad(json!({"rating": "up", "comment": "x".repeat(2_001)})).await,
        400,
        "Bad Request",
        Some("comment must be at most 2000 characters"),
    )
    .await;
    let res = bad(json!({"rating": "up", "comment": "é".repeat(2_000)})).await;
    assert_eq!(res.status(), 200, "2,000 characters, not bytes");
    // The user's own message is not a reply.
    assert_error(
        rate(
            &app,
            &user.access,
            &path(&agent, &thread, &asked),
            json!({"rating": "up"}),
        )
        .await,
        400,
        "Bad Request",
        Some("only the agent's replies can be rated, not the user's messages"),
    )
    .await;
    // Unknown message, thread and agent.
    for unknown in [
        path(&agent, &thread, "msg_unknown"),
        path(&agent, "thread_unknown", &reply),
        path("agent_unknown", &thread, &reply),
    ] {
        let res = rate(&app, &user.access, &unknown, json!({"rating": "up"})).await;
        assert_error(res, 404, "Not Found", None).await;
        let res = app.delete(&unknown, Some(&user.access)).await;
        assert_error(res, 404, "Not Found", None).await;
    }
    // Nothing was stored by the refused requests but the one accepted.
    let stored: i64 = app
        .sql_scalar("SELECT COUNT(*) FROM message_feedback", vec![])
        .await;
    assert_eq!(stored, 1);
}

#[tokio::test]
async fn feedback_needs_chat_write_and_stays_within_its_tenant() {
    let app = spawn_app().await;
    let (alice, bob) = (app.user().await, app.user().await);
    let (agent, thread, _, reply) = turn(&app, &alice).await;
    let at = path(&agent, &thread, &reply);
    // Another account sees no such message, whatever it does.
    let res = rate(&app, &bob.access, &at, json!({"rating": "down"})).await;
    assert_error(res, 404, "Not Found", None).await;
    let res = app.delete(&at, Some(&bob.access)).await;
    assert_error(res, 404, "Not Found", None).await;
    // The reply of Bob's own thread under Alice's agent path is not found either.
    let (_, bob_thread, _, bob_reply) = turn(&app, &bob).await;
    let res = rate(
        &app,
        &alice.access,
        &path(&agent, &bob_thread, &bob_reply),
        json!({"rating": "up"}),
    )
    .await;
    assert_error(res, 404, "Not Found", None).await;
    // A message of another thread of the same agent is not in this thread.
    let res = app
        .chat(&alice.access, &agent, json!({"message": "a second thread"}))
        .await;
    let second = res.json::<Value>().await.unwrap()["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    let res = rate(
        &app,
        &alice.access,
        &path(&agent, &second, &reply),
        json!({"rating": "up"}),
    )
    .await;
    assert_error(res, 404, "Not Found", None).await;

    let (_, reader) = app.api_key(&alice, &["chat:read"]).await;
    let res = rate(&app, &reader, &at, json!({"rating": "up"})).await;
    assert_eq!(res.status(), 403);
    let res = app.delete(&at, Some(&reader)).await;
    assert_eq!(res.status(), 403);
    let (_, writer) = app.api_key(&alice, &["chat:write"]).await;
    let res = rate(&app, &writer, &at, json!({"rating": "up"})).await;
    assert_eq!(res.status(), 200);
    assert_unauthorized(
        app.call(Method::PUT, &at, None, Some(json!({"rating": "up"})))
            .await,
    )
    .await;
    let shown = shown(&app, &alice, &agent, &thread, &reply).await;
    assert_eq!(shown["rating"], "up");
}

#[tokio::test]
async fn concurrent_ratings_of_one_reply_leave_one() {
    let app = spawn_app().await;
    let user = app.user().await;
    let (agent, thread, _, reply) = turn(&app, &user).await;
    let at = path(&agent, &thread, &reply);
    let ratings = (0..16).map(|i| {
        let (app, token, at) = (&app, &user.access, &at);
        async move {
            let rating = if i % 2 == 0 { "up" } else { "down" };
            let body = json!({"rating": rating, "comment": format!("client {i}")});
            rate(app, token, at, body).await.status()
        }
    });
    for status in futures::future::join_all(ratings).await {
        assert_eq!(status, 200);
    }
    let rows: i64 = app
        .sql_scalar("SELECT COUNT(*) FROM message_feedback", vec![])
        .await;
    assert_eq!(rows, 1, "one rating per reply, whatever the interleaving");
    let shown = shown(&app, &user, &agent, &thread, &reply).await;
    let comment = shown["comment"].as_str().unwrap();
    let client: usize = comment.strip_prefix("client ").unwrap().parse().unwrap();
    assert_eq!(
        shown["rating"],
        if client.is_multiple_of(2) {
            "up"
        } else {
            "down"
        },
        "the rating and comment kept are one client's: {shown}"
    );
}
