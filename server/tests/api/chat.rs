//! Chat with the built-in offline model: both modes, threads, persistence, validation.

use serde_json::{json, Value};

use crate::helpers::*;

/// A new agent of `user` (the offline model); its id.
pub(crate) async fn agent(app: &TestApp, user: &TestUser) -> String {
    let res = app
        .post(
            "/api/agents",
            Some(&user.access),
            json!({"name": "Bot", "systemPrompt": "Be brief"}),
        )
        .await;
    res.json::<Value>().await.unwrap()["agent"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The `data:` payloads of an SSE body, in order, each checked against the OpenAPI
/// document's schema of the stream's events.
pub fn sse_data(body: &str) -> Vec<String> {
    let frames: Vec<String> = body
        .split("\n\n")
        .filter_map(|event| {
            event
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .map(str::to_string)
        })
        .collect();
    for frame in &frames {
        crate::openapi::assert_event_is_documented(frame);
    }
    frames
}

/// The frame before `data: [DONE]` (the usage summary or the error frame), parsed, after
/// checking that the stream ends with `data: [DONE]`.
pub fn end_frame(frames: &[String]) -> Value {
    assert_eq!(
        frames.last().map(String::as_str),
        Some("[DONE]"),
        "{frames:?}"
    );
    assert!(frames.len() >= 2, "no frame before [DONE]: {frames:?}");
    serde_json::from_str(&frames[frames.len() - 2]).unwrap()
}

/// The text of a streamed reply: its `chunk` frames joined, after checking that the stream
/// ends with `data: [DONE]`.
pub fn streamed_text(body: &str) -> String {
    let frames = sse_data(body);
    assert_eq!(frames.last().map(String::as_str), Some("[DONE]"), "{body}");
    frames[..frames.len() - 1]
        .iter()
        .map(|f| {
            serde_json::from_str::<Value>(f).unwrap()["chunk"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn the_offline_model_answers_in_json_with_usage_and_a_thread() {
    let app = spawn_app().await;
    let user = app.user().await;
    let id = agent(&app, &user).await;
    let res = app
        .chat(&user.access, &id, json!({"message": "hello"}))
        .await;
    assert_eq!(res.status(), 200);
    let reply: Value = res.json().await.unwrap();
    assert!(reply["message"]
        .as_str()
        .unwrap()
        .contains("No language model is configured"));
    assert!(reply["message"]
        .as_str()
        .unwrap()
        .contains("OPENAI_API_KEY"));
    assert_eq!(reply["model"], "agentchat-offline");
    let used = &reply["tokensUsed"];
    assert!(used["completion"].as_u64().unwrap() > 20);
    assert_eq!(
        used["prompt"].as_u64().unwrap(),
        3,
        "`Be brief` + `hello` in o200k_base"
    );
    assert_eq!(
        used["total"].as_u64().unwrap(),
        used["prompt"].as_u64().unwrap() + used["completion"].as_u64().unwrap()
    );
    assert_eq!(reply["ragChunksUsed"], 0);
    assert_eq!(reply["sources"], json!([]));
    let thread = reply["threadId"].as_str().unwrap();

    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "again", "threadId": thread}),
        )
        .await;
    assert_eq!(res.json::<Value>().await.unwrap()["threadId"], thread);
    let msgs = app.messages(&user.access, &id, thread).await;

    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(msgs[0]["content"], "hello");
    assert_eq!(msgs[1]["model"], "agentchat-offline");
    assert_eq!(msgs[1]["status"], "complete");
    assert!(msgs[1]["tokensUsed"]["total"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn requests_and_provider_replies_are_marked_as_foreground_work() {
    let app = spawn_app().await;
    let user = app.user().await;
    let id = agent(&app, &user).await;
    // What the built-in model's chunk batches wait for (docs/knowledge.md § Embeddings).
    let foreground = app.state.knowledge.foreground.clone();
    let before = foreground.events();
    assert_eq!(app.get("/api/health", None).await.status(), 200);
    assert_eq!(
        foreground.events() - before,
        2,
        "the arrival and the answer"
    );
    for stream in [true, false] {
        let before = foreground.events();
        let res = app
            .chat(
                &user.access,
                &id,
                json!({"message": "hello", "stream": stream}),
            )
            .await;
        assert_eq!(res.status(), 200);
        res.text().await.unwrap();
        assert_eq!(
            foreground.events() - before,
            4,
            "stream {stream}: the arrival, the provider's first event and its end, the answer"
        );
    }
}

#[tokio::test]
async fn the_offline_model_streams_exact_sse_frames() {
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
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    assert_eq!(res.headers()["cache-control"], "no-cache");
    assert_eq!(res.headers()["x-accel-buffering"], "no");
    let thread = res.headers()["x-thread-id"].to_str().unwrap().to_string();
    let body = res.text().await.unwrap();
    let frames = sse_data(&body);
    assert_eq!(frames.last().unwrap(), "[DONE]");
    let mut text = String::new();
    for f in &frames[..frames.len() - 1] {
        let v: Value = serde_json::from_str(f).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 1, "only `chunk`: {f}");
        text.push_str(v["chunk"].as_str().unwrap());
    }
    assert!(frames.len() > 20, "word by word");
    assert!(text.starts_with("No language model is configured"));
    for line in body.lines().filter(|l| !l.is_empty()) {
        assert!(
            line.starts_with("data: ") || line.starts_with("id: ") || line.starts_with(':'),
            "unexpected line {line:?}"
        );
    }
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

#[tokio::test]
async fn the_usage_frame_comes_before_done_when_asked() {
    let app = spawn_app().await;
    let user = app.user().await;
    let id = agent(&app, &user).await;
    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "hi", "stream": true, "streamOptions": {"includeUsage": true}}),
        )
        .await;
    let thread = res.headers()["x-thread-id"].to_str().unwrap().to_string();
    let frames = sse_data(&res.text().await.unwrap());
    let usage: Value = serde_json::from_str(&frames[frames.len() - 2]).unwrap();
    assert_eq!(usage["chunk"], "");
    assert_eq!(usage["model"], "agentchat-offline");
    assert_eq!(usage["threadId"], thread.as_str());
    assert_eq!(usage["ragChunksUsed"], 0);
    assert!(usage["usage"]["total"].as_u64().unwrap() > 0);
    assert_eq!(usage["sources"], json!([]));
}

#[tokio::test]
async fn chat_input_is_validated() {
    let app = spawn_app_with(|c| c.chat.max_message_chars = 50).await;
    let user = app.user().await;
    let id = agent(&app, &user).await;
    let path = format!("/api/agents/{id}/chat");
    for body in [
        json!({}),
        json!({"message": ""}),
        json!({"message": "   "}),
        json!({"message": 42}),
        json!({"message": "x".repeat(51)}),
        json!({"message": "hi", "stream": "yes"}),
        json!({"message": "hi", "threadId": 7}),
        json!({"message": "hi", "bogus": 1}),
        json!({"message": "hi", "attachments": [{"filename": "a.txt", "contentType": "text/plain", "data": "%%%"}]}),
    ] {
        assert_error(
            app.post(&path, Some(&user.access), body.clone()).await,
            400,
            "Bad Request",
            None,
        )
        .await;
    }
    let pdf = json!({"message": "hi", "attachments": [{"filename": "a.bin", "contentType": "application/octet-stream", "data": "AAAA"}]});
    assert_error(
        app.post(&path, Some(&user.access), pdf).await,
        415,
        "Unsupported Media Type",
        None,
    )
    .await;
    let unknown_thread = app
        .post(
            &path,
            Some(&user.access),
            json!({"message": "hi", "threadId": "nope"}),
        )
        .await;
    assert_error(unknown_thread, 404, "Not Found", None).await;
    assert_error(
        app.post(
            "/api/agents/nope/chat",
            Some(&user.access),
            json!({"message": "hi"}),
        )
        .await,
        404,
        "Not Found",
        None,
    )
    .await;
    assert_unauthorized(app.post(&path, None, json!({"message": "hi"})).await).await;
    let convs: Value = app
        .get(
            &format!("/api/agents/{id}/conversations"),
            Some(&user.access),
        )
        .await
        .json()
        .await
        .unwrap();
    assert!(
        convs["conversations"].as_array().unwrap().is_empty(),
        "rejected requests leave nothing behind"
    );
}

#[tokio::test]
async fn threads_are_isolated_between_users_and_agents() {
    let app = spawn_app().await;
    let (alice, bob) = (app.user().await, app.user().await);
    let a1 = agent(&app, &alice).await;
    let a2 = agent(&app, &alice).await;
    let b1 = agent(&app, &bob).await;
    let reply: Value = app
        .chat(&alice.access, &a1, json!({"message": "secret"}))
        .await
        .json()
        .await
        .unwrap();
    let thread = reply["threadId"].as_str().unwrap();
    let other_agent = app
        .chat(
            &alice.access,
            &a2,
            json!({"message": "x", "threadId": thread}),
        )
        .await;
    assert_error(other_agent, 404, "Not Found", None).await;
    let other_user = app
        .chat(
            &bob.access,
            &b1,
            json!({"message": "x", "threadId": thread}),
        )
        .await;
    assert_error(other_user, 404, "Not Found", None).await;
    let peek = app
        .get(
            &format!("/api/agents/{a1}/conversations/{thread}/messages"),
            Some(&bob.access),
        )
        .await;
    assert_error(peek, 404, "Not Found", None).await;
}

#[tokio::test]
async fn conversations_paginate_and_can_be_deleted() {
    let app = spawn_app().await;
    let user = app.user().await;
    let id = agent(&app, &user).await;
    for n in 0..3 {
        app.chat(&user.access, &id, json!({"message": format!("topic {n}")}))
            .await;
    }
    let page: Value = app
        .get(
            &format!("/api/agents/{id}/conversations?limit=2"),
            Some(&user.access),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(page["conversations"].as_array().unwrap().len(), 2);
    let cursor = page["nextCursor"].as_str().unwrap();
    let rest: Value = app
        .get(
            &format!("/api/agents/{id}/conversations?limit=2&cursor={cursor}"),
            Some(&user.access),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(rest["conversations"].as_array().unwrap().len(), 1);
    assert!(rest["nextCursor"].is_null());
    let mut titles: Vec<String> = page["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .chain(rest["conversations"].as_array().unwrap())
        .map(|c| c["title"].as_str().unwrap().to_string())
        .collect();
    titles.sort();
    assert_eq!(titles, ["topic 0", "topic 1", "topic 2"]);
    for bad in ["?limit=0", "?limit=201", "?cursor=***"] {
        let res = app
            .get(
                &format!("/api/agents/{id}/conversations{bad}"),
                Some(&user.access),
            )
            .await;
        assert_error(res, 400, "Bad Request", None).await;
    }
    let thread = rest["conversations"][0]["threadId"].as_str().unwrap();
    assert_eq!(
        app.delete(
            &format!("/api/agents/{id}/conversations/{thread}"),
            Some(&user.access)
        )
        .await
        .status(),
        200
    );
    let res = app
        .get(
            &format!("/api/agents/{id}/conversations/{thread}/messages"),
            Some(&user.access),
        )
        .await;
    assert_error(res, 404, "Not Found", None).await;
}

#[tokio::test]
async fn deleting_an_agent_removes_its_threads() {
    let app = spawn_app().await;
    let user = app.user().await;
    let id = agent(&app, &user).await;
    let reply: Value = app
        .chat(&user.access, &id, json!({"message": "remember this"}))
        .await
        .json()
        .await
        .unwrap();
    let thread = reply["threadId"].as_str().unwrap().to_string();
    app.delete(&format!("/api/agents/{id}"), Some(&user.access))
        .await;
    let threads = app
        .state
        .store
        .thread(
            &user.id.as_str().into(),
            &id.as_str().into(),
            &thread.as_str().into(),
        )
        .await
        .unwrap();
    assert!(threads.is_none());
    assert!(app
        .state
        .store
        .list_messages(&thread.as_str().into(), 10, None)
        .await
        .unwrap()
        .is_empty());
}

/// `MAX_MESSAGE_CHARS` covers what the request sends to the model: the message and the
/// text of its attachments together. Past it the request is 400 and nothing is stored.
#[tokio::test]
async fn attachments_count_towards_the_message_length_limit() {
    use base64::{engine::general_purpose::STANDARD, Engine};
    let app = spawn_app_with(|c| c.chat.max_message_chars = 50).await;
    let user = app.user().await;
    let id = agent(&app, &user).await;
    let attachment = |text: &str| json!([{"filename": "notes.txt", "contentType": "text/plain", "data": STANDARD.encode(text)}]);
    for (message, attached) in [
        ("hi".to_string(), "x".repeat(49)),
        ("m".repeat(30), "é".repeat(21)),
        ("m".repeat(50), "x".to_string()),
    ] {
        let res = app
            .chat(
                &user.access,
                &id,
                json!({"message": message, "attachments": attachment(&attached)}),
            )
            .await;
        let body = assert_error(res, 400, "Bad Request", None).await;
        assert!(
            body["message"].as_str().unwrap().contains("50 characters"),
            "{body}"
        );
    }
    let convs: Value = app
        .get(
            &format!("/api/agents/{id}/conversations"),
            Some(&user.access),
        )
        .await
        .json()
        .await
        .unwrap();
    assert!(
        convs["conversations"].as_array().unwrap().is_empty(),
        "rejected requests leave nothing behind"
    );
    // Exactly at the limit (characters, not bytes): answered.
    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "m".repeat(30), "attachments": attachment(&"é".repeat(20))}),
        )
        .await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
}
