//! How chat turns are stored (`agentchat::chat::writer`): each turn (a new thread, the
//! user's message and the reply) is written whole when it ends, in group commits with the
//! other turns ending then; a client reading the conversation right after the reply (the
//! JSON answer, or `data: [DONE]`) sees it; the usage counters stay the sum of the stored
//! replies under a burst of conversations.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{json, Value};

use crate::{
    chat::{agent, sse_data},
    helpers::*,
};

/// Reads a streamed reply up to `data: [DONE]` and stops there, without waiting for the
/// end of the response; returns the thread id and the reply's text.
async fn stream_until_done(
    app: &TestApp,
    token: &str,
    agent: &str,
    message: &str,
) -> (String, String) {
    let res = app
        .chat(token, agent, json!({"message": message, "stream": true}))
        .await;
    assert_eq!(res.status(), 200);
    let thread = res.headers()["x-thread-id"].to_str().unwrap().to_string();
    let mut body = res.bytes_stream();
    let mut buffer = String::new();
    let mut text = String::new();
    while let Some(bytes) = body.next().await {
        buffer.push_str(std::str::from_utf8(&bytes.unwrap()).unwrap());
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) else {
                continue;
            };
            if data == "[DONE]" {
                return (thread, text);
            }
            let frame: Value = serde_json::from_str(data).unwrap();
            text.push_str(frame["chunk"].as_str().unwrap());
        }
    }
    panic!("the stream ended without [DONE]");
}

#[tokio::test]
async fn a_conversation_is_readable_as_soon_as_its_reply_has_arrived() {
    let app = spawn_app().await;
    let user = app.user().await;
    let id = agent(&app, &user).await;
    for i in 0..10 {
        // Streamed: read right after `[DONE]`, before the response has ended.
        let (thread, text) =
            stream_until_done(&app, &user.access, &id, &format!("hello {i}")).await;
        let messages = app.messages(&user.access, &id, &thread).await;
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert_eq!(messages[0]["role"], "user");
        assert_eq!(messages[0]["content"], format!("hello {i}").as_str());
        assert_eq!(messages[1]["role"], "assistant");
        assert_eq!(messages[1]["content"], text.as_str());
        assert_eq!(messages[1]["status"], "complete");
        // JSON: read right after the answer.
        let reply: Value = app
            .chat(
                &user.access,
                &id,
                json!({"message": format!("again {i}"), "threadId": thread}),
            )
            .await
            .json()
            .await
            .unwrap();
        let messages = app.messages(&user.access, &id, &thread).await;
        assert_eq!(messages.len(), 4);
        assert_eq!(messages[3]["content"], reply["message"]);
    }
}

#[tokio::test]
async fn a_thread_appears_with_its_first_reply_and_not_before() {
    let app = spawn_app().await;
    let user = app.user().await;
    let id = agent(&app, &user).await;
    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "hello", "stream": true}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let thread = res.headers()["x-thread-id"].to_str().unwrap().to_string();
    let body = res.text().await.unwrap();
    let last = body.trim_end().rsplit("\n\n").next().unwrap();
    assert!(last.lines().any(|l| l == "data: [DONE]"), "{body}");
    let convs: Value = app
        .get(
            &format!("/api/agents/{id}/conversations"),
            Some(&user.access),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(convs["conversations"][0]["threadId"], thread.as_str());
    assert_eq!(convs["conversations"][0]["messageCount"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn usage_counters_equal_the_stored_replies_after_a_burst_of_2000_conversations() {
    let app = Arc::new(spawn_app_with(|c| c.limits.rate_limits = [1_000_000; 4]).await);
    let user = app.user().await;
    let id = agent(&app, &user).await;
    const CONVERSATIONS: usize = 2_000;
    const AT_ONCE: usize = 200;
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..AT_ONCE {
        let (app, token, id, next) = (app.clone(), user.access.clone(), id.clone(), next.clone());
        tasks.spawn(async move {
            let mut tokens = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i >= CONVERSATIONS {
                    return tokens;
                }
                // Half JSON, half streamed with the usage frame.
                let stream = i % 2 == 1;
                let body = json!({
                    "message": format!("conversation {i}"),
                    "stream": stream,
                    "streamOptions": {"includeUsage": true},
                });
                let res = app.chat(&token, &id, body).await;
                assert_eq!(res.status(), 200, "conversation {i}");
                let usage = if stream {
                    let text = res.text().await.unwrap();
                    let frames = sse_data(&text);
                    assert_eq!(frames.last().map(String::as_str), Some("[DONE]"));
                    let summary: Value = serde_json::from_str(&frames[frames.len() - 2]).unwrap();
                    summary["usage"].clone()
                } else {
                    res.json::<Value>().await.unwrap()["tokensUsed"].clone()
                };
                tokens.push((
                    usage["prompt"].as_i64().unwrap(),
                    usage["completion"].as_i64().unwrap(),
                ));
            }
        });
    }
    let mut answered = Vec::new();
    while let Some(tokens) = tasks.join_next().await {
        answered.extend(tokens.unwrap());
    }
    assert_eq!(answered.len(), CONVERSATIONS);
    let prompt: i64 = answered.iter().map(|t| t.0).sum();
    let completion: i64 = answered.iter().map(|t| t.1).sum();

    // The stored replies: one per conversation, with the tokens each client was told.
    let stored = |column: &str| {
        format!(
            "SELECT CAST(COALESCE(SUM({column}), 0) AS BIGINT) FROM messages m \
             JOIN threads t ON t.id = m.thread_id \
             WHERE t.user_id = $1 AND m.role = 'assistant'"
        )
    };
    let uid = || vec![Bind::Text(user.id.clone())];
    let replies: i64 = app
        .sql_scalar(
            "SELECT COUNT(*) FROM messages m JOIN threads t ON t.id = m.thread_id \
             WHERE t.user_id = $1 AND m.role = 'assistant'",
            uid(),
        )
        .await;
    assert_eq!(replies, CONVERSATIONS as i64);
    assert_eq!(
        app.sql_scalar::<i64>(&stored("m.prompt_tokens"), uid())
            .await,
        prompt
    );
    assert_eq!(
        app.sql_scalar::<i64>(&stored("m.completion_tokens"), uid())
            .await,
        completion
    );
    // The counters: every day of usage summed, and every thread's message count.
    let usage = |column: &str| {
        format!(
            "SELECT CAST(COALESCE(SUM({column}), 0) AS BIGINT) FROM usage_daily WHERE user_id = $1"
        )
    };
    assert_eq!(
        app.sql_scalar::<i64>(&usage("chats"), uid()).await,
        CONVERSATIONS as i64
    );
    assert_eq!(
        app.sql_scalar::<i64>(&usage("prompt_tokens"), uid()).await,
        prompt
    );
    assert_eq!(
        app.sql_scalar::<i64>(&usage("completion_tokens"), uid())
            .await,
        completion
    );
    let miscounted: i64 = app
        .sql_scalar(
            "SELECT COUNT(*) FROM threads t WHERE t.user_id = $1 AND t.message_count <> \
             (SELECT COUNT(*) FROM messages m WHERE m.thread_id = t.id)",
            uid(),
        )
        .await;
    assert_eq!(miscounted, 0, "every thread counts its messages");
    let threads: i64 = app
        .sql_scalar("SELECT COUNT(*) FROM threads WHERE user_id = $1", uid())
        .await;
    assert_eq!(threads, CONVERSATIONS as i64);
    // And the API says the same.
    let body: Value = app
        .get("/api/usage?days=2", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    let days = body["days"].as_array().unwrap();
    let chats: i64 = days.iter().map(|d| d["chats"].as_i64().unwrap()).sum();
    assert_eq!(chats, CONVERSATIONS as i64);
}
