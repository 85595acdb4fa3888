//! `GET /api/usage`: replies and tokens this month and per day, kept when threads and
//! agents are deleted, per account, with the `chat:read` scope for API keys.

use serde_json::{json, Value};

use crate::helpers::*;

async fn usage(app: &TestApp, token: &str, query: &str) -> Value {
    let res = app.get(&format!("/api/usage{query}"), Some(token)).await;
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

#[tokio::test]
async fn chats_and_tokens_are_counted_per_day_and_survive_deletion() {
    let app = spawn_app().await;
    let user = app.user().await;
    let empty = usage(&app, &user.access, "").await;
    assert_eq!(empty["chatsThisMonth"], 0);
    assert_eq!(empty["tokensThisMonth"]["total"], 0);
    assert_eq!(empty["days"].as_array().unwrap().len(), 30);

    let res = app
        .post(
            "/api/agents",
            Some(&user.access),
            json!({"name": "Bot", "systemPrompt": "Be brief"}),
        )
        .await;
    let agent = res.json::<Value>().await.unwrap()["agent"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut total = 0;
    for message in ["hello", "and again"] {
        let reply: Value = app
            .chat(&user.access, &agent, json!({"message": message}))
            .await
            .json()
            .await
            .unwrap();
        total += reply["tokensUsed"]["total"].as_u64().unwrap();
    }
    assert!(total > 0);

    let body = usage(&app, &user.access, "?days=7").await;
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    assert_eq!(body["month"], today[..7]);
    assert_eq!(body["chatsThisMonth"], 2);
    assert_eq!(body["tokensThisMonth"]["total"], total);
    let days = body["days"].as_array().unwrap();
    assert_eq!(days.len(), 7);
    assert_eq!(days[6]["date"], today.as_str());
    assert_eq!(days[6]["chats"], 2);
    assert_eq!(days[5]["chats"], 0);

    // Deleting the agent (and its threads) keeps what was used.
    let res = app
        .delete(&format!("/api/agents/{agent}"), Some(&user.access))
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(usage(&app, &user.access, "").await["chatsThisMonth"], 2);

    // Another account sees only its own use.
    let other = app.user().await;
    assert_eq!(usage(&app, &other.access, "").await["chatsThisMonth"], 0);

    // API keys need chat:read.
    let (_, key) = app.api_key(&user, &["chat:read"]).await;
    assert_eq!(usage(&app, &key, "").await["chatsThisMonth"], 2);
    let (_, key) = app.api_key(&user, &["agents:read"]).await;
    let res = app.get("/api/usage", Some(&key)).await;
    assert_error(res, 403, "Forbidden", None).await;
}

#[tokio::test]
async fn the_window_is_bounded() {
    let app = spawn_app().await;
    let user = app.user().await;
    for bad in ["?days=0", "?days=367", "?days=x", "?month=1"] {
        let res = app
            .get(&format!("/api/usage{bad}"), Some(&user.access))
            .await;
        assert_error(res, 400, "Bad Request", None).await;
    }
    assert_eq!(
        usage(&app, &user.access, "?days=366").await["days"]
            .as_array()
            .unwrap()
            .len(),
        366
    );
    assert_unauthorized(app.get("/api/usage", None).await).await;
}
