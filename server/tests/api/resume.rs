//! Replies that survive (docs/api.md § Resumable streams, § Turns in order, § Drains): every
//! frame has an id, a resumable reply outlives its client and is resumed frame-exact from
//! any id, a reply in progress holds its conversation (409, or `queue`), cancel stops it,
//! and a shutting-down instance ends its streams after the grace period, storing what was
//! generated.

use std::time::Duration;

use mock_provider::{MockConfig, MockProvider};
use serde_json::{json, Value};
use test_support::sse::{Event, Events};
use tower::ServiceExt as _;

use crate::{
    chat::agent,
    helpers::*,
    providers::{agent_with, with_mock_config},
};

/// The application with a mock provider that streams a token every `interval`.
async fn slow_app(
    interval: Duration,
    tweak: impl FnOnce(&mut agentchat::config::Config),
) -> (TestApp, MockProvider) {
    with_mock_config(
        MockConfig {
            token_interval: interval,
            ..MockConfig::default()
        },
        tweak,
    )
    .await
}

/// Sends the chat `body` (a streamed one); its thread and its events.
async fn start(app: &TestApp, token: &str, agent: &str, body: Value) -> (String, Events) {
    let res = app.chat(token, agent, body).await;
    assert_eq!(res.status(), 200);
    let thread = res.headers()["x-thread-id"].to_str().unwrap().to_string();
    (thread, Events::of(res))
}

/// The text of chunk frames.
fn text(events: &[Event]) -> String {
    events
        .iter()
        .filter(|(_, data)| data.starts_with('{'))
        .filter_map(|(_, data)| {
            let v: Value = serde_json::from_str(data).unwrap();
            v["chunk"].as_str().map(str::to_string)
        })
        .collect()
}

fn ids(events: &[Event]) -> Vec<u64> {
    events.iter().map(|(id, _)| id.expect("an id")).collect()
}

async fn resume(
    app: &TestApp,
    token: &str,
    agent: &str,
    thread: &str,
    last: u64,
) -> reqwest::Response {
    app.client
        .get(app.url(&format!(
            "/api/agents/{agent}/conversations/{thread}/stream"
        )))
        .bearer_auth(token)
        .header("Last-Event-ID", last.to_string())
        .send()
        .await
        .unwrap()
}

/// Polls the thread until its last message is a reply with `status` (a new thread is
/// stored with its first reply); returns it.
async fn reply_with_status(
    app: &TestApp,
    token: &str,
    agent: &str,
    thread: &str,
    status: &str,
) -> Value {
    for _ in 0..200 {
        let res = app
            .get(
                &format!("/api/agents/{agent}/conversations/{thread}/messages"),
                Some(token),
            )
            .await;
        let messages = match res.status().as_u16() {
            200 => res.json::<Value>().await.unwrap()["messages"].clone(),
            404 => json!([]),
            other => panic!("messages: {other}"),
        };
        if let Some(last) = messages.as_array().unwrap().last() {
            if last["role"] == "assistant" && last["status"] == status {
                return last.clone();
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no {status} reply in {thread}");
}

#[tokio::test]
async fn every_frame_has_an_id_from_one_and_the_stream_names_its_reply() {
    let app = spawn_app().await;
    let user = app.user().await;
    let id = agent(&app, &user).await;
    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "hello", "stream": true, "streamOptions": {"includeUsage": true}}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let reply_id = res.headers()["x-reply-id"].to_str().unwrap().to_string();
    let thread = res.headers()["x-thread-id"].to_str().unwrap().to_string();
    let events = Events::of(res).rest().await;
    assert_eq!(ids(&events), (1..=events.len() as u64).collect::<Vec<_>>());
    assert_eq!(events.last().unwrap().1, "[DONE]");
    for (_, data) in &events {
        crate::openapi::assert_event_is_documented(data);
    }
    let usage: Value = serde_json::from_str(&events[events.len() - 2].1).unwrap();
    assert_eq!(usage["replyId"], reply_id.as_str());
    let messages = app.messages(&user.access, &id, &thread).await;
    assert_eq!(messages[1]["id"], reply_id.as_str());
    // A reply that was not resumable is not kept.
    let res = resume(&app, &user.access, &id, &thread, 0).await;
    assert_error(res, 404, "Not Found", None).await;
}

#[tokio::test]
async fn a_resumable_reply_outlives_its_client_and_resumes_frame_exact_from_any_id() {
    let (app, _mock) = slow_app(Duration::from_millis(15), |_| {}).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "count [[tokens:60]]", "stream": true, "resumable": true,
                   "streamOptions": {"includeUsage": true}}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let thread = res.headers()["x-thread-id"].to_str().unwrap().to_string();
    let reply_id = res.headers()["x-reply-id"].to_str().unwrap().to_string();
    let mut stream = Events::of(res);
    let first = stream.take(5).await;
    assert_eq!(ids(&first), vec![1, 2, 3, 4, 5]);
    drop(stream);

    // The header form, while the reply is still generating.
    let res = resume(&app, &user.access, &id, &thread, 5).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-reply-id"], reply_id.as_str());
    assert_eq!(res.headers()["x-thread-id"], thread.as_str());
    let rest = Events::of(res).rest().await;
    let all_ids: Vec<u64> = ids(&first).into_iter().chain(ids(&rest)).collect();
    assert_eq!(
        all_ids,
        (1..=all_ids.len() as u64).collect::<Vec<_>>(),
        "none lost, none repeated"
    );
    assert_eq!(rest.last().unwrap().1, "[DONE]");
    let joined: Vec<Event> = first.iter().chain(&rest).cloned().collect();
    let stored = reply_with_status(&app, &user.access, &id, &thread, "complete").await;
    assert_eq!(stored["id"], reply_id.as_str());
    assert_eq!(stored["content"].as_str().unwrap(), text(&joined));
    assert!(
        text(&joined).ends_with("w60"),
        "the whole reply: {}",
        text(&joined)
    );

    // Finished: replayed at once, identical, from the start (query form) or any id.
    let res = app
        .client
        .get(app.url(&format!(
            "/api/agents/{id}/conversations/{thread}/stream?lastEventId=0"
        )))
        .bearer_auth(&user.access)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(Events::of(res).rest().await, joined);
    let res = resume(&app, &user.access, &id, &thread, 30).await;
    assert_eq!(Events::of(res).rest().await, joined[30..].to_vec());
    let last = joined.len() as u64;
    let res = resume(&app, &user.access, &id, &thread, last).await;
    assert!(Events::of(res).rest().await.is_empty());
}

#[tokio::test]
async fn without_resumable_a_client_that_leaves_cancels_the_reply() {
    let (app, _mock) = slow_app(Duration::from_millis(20), |_| {}).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let (thread, mut stream) = start(
        &app,
        &user.access,
        &id,
        json!({"message": "count [[tokens:100]]", "stream": true}),
    )
    .await;
    stream.take(3).await;
    drop(stream);
    let stored = reply_with_status(&app, &user.access, &id, &thread, "cancelled").await;
    assert!(!stored["content"].as_str().unwrap().ends_with("w100"));
    assert_error(
        resume(&app, &user.access, &id, &thread, 3).await,
        404,
        "Not Found",
        None,
    )
    .await;
}

#[tokio::test]
async fn a_message_during_a_reply_is_refused_or_with_queue_waits_and_sees_it() {
    let (app, mock) = slow_app(Duration::from_millis(15), |_| {}).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let (thread, mut stream) = start(
        &app,
        &user.access,
        &id,
        json!({"message": "first [[tokens:40]]", "stream": true, "resumable": true}),
    )
    .await;
    stream.take(1).await;
    // Streamed or not, resumable or not: the conversation is busy.
    for body in [
        json!({"message": "second", "threadId": thread}),
        json!({"message": "second", "threadId": thread, "stream": true}),
    ] {
        let res = app.chat(&user.access, &id, body).await;
        let error = assert_error(res, 409, "Conflict", None).await;
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("A reply is in progress"),
            "{error}"
        );
    }
    // Queued: waits for the first reply and has it in its history.
    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "second", "threadId": thread, "queue": true}),
        )
        .await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let first = stream.rest().await;
    assert_eq!(first.last().unwrap().1, "[DONE]");
    let messages = app.messages(&user.access, &id, &thread).await;
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(messages[1]["status"], "complete");
    let last_request = mock.requests().last().unwrap().body.to_string();
    assert!(
        last_request.contains("w40"),
        "the queued turn's prompt holds the first reply: {last_request}"
    );
}

#[tokio::test]
async fn cancel_stops_a_reply_from_another_request_and_frees_the_conversation() {
    let (app, _mock) = slow_app(Duration::from_millis(20), |_| {}).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let (thread, mut stream) = start(
        &app,
        &user.access,
        &id,
        json!({"message": "count [[tokens:200]]", "stream": true, "resumable": true}),
    )
    .await;
    stream.take(3).await;
    let cancel = format!("/api/agents/{id}/conversations/{thread}/cancel");
    let res = app.post(&cancel, Some(&user.access), json!({})).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap(), json!({"success": true}));
    let rest = stream.rest().await;
    let n = rest.len();
    assert_eq!(rest[n - 1].1, "[DONE]");
    let error: Value = serde_json::from_str(&rest[n - 2].1).unwrap();
    assert_eq!(
        error,
        json!({"error": "Conflict", "message": "The reply was cancelled"})
    );
    let stored = reply_with_status(&app, &user.access, &id, &thread, "cancelled").await;
    let partial = stored["content"].as_str().unwrap();
    assert!(
        partial.starts_with("w1 w2") && !partial.contains("w200"),
        "{partial}"
    );
    // Free at once for the next message; nothing left to cancel.
    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "next", "threadId": thread}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let res = app.post(&cancel, Some(&user.access), json!({})).await;
    assert_error(res, 404, "Not Found", None).await;

    // A JSON reply being generated answers 409 once cancelled.
    let waiting = {
        let (client, url, token) = (
            app.client.clone(),
            app.url(&format!("/api/agents/{id}/chat")),
            user.access.clone(),
        );
        let thread = thread.clone();
        tokio::spawn(async move {
            client
                .post(url)
                .bearer_auth(token)
                .json(&json!({"message": "long [[tokens:200]]", "threadId": thread}))
                .send()
                .await
                .unwrap()
        })
    };
    let mut cancelled = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(30)).await;
        if app
            .post(&cancel, Some(&user.access), json!({}))
            .await
            .status()
            == 200
        {
            cancelled = true;
            break;
        }
    }
    assert!(cancelled, "the JSON reply was in progress");
    let error = assert_error(waiting.await.unwrap(), 409, "Conflict", None).await;
    assert_eq!(error["message"], "The reply was cancelled");
}

#[tokio::test]
async fn resume_and_cancel_check_the_caller_the_scope_and_the_input() {
    let (app, _mock) = slow_app(Duration::from_millis(20), |_| {}).await;
    let user = app.user().await;
    let other = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let (thread, stream) = start(
        &app,
        &user.access,
        &id,
        json!({"message": "count [[tokens:100]]", "stream": true, "resumable": true}),
    )
    .await;
    let path = format!("/api/agents/{id}/conversations/{thread}/stream");
    let cancel = format!("/api/agents/{id}/conversations/{thread}/cancel");
    // Someone else's conversation does not exist for them.
    assert_error(
        resume(&app, &other.access, &id, &thread, 0).await,
        404,
        "Not Found",
        None,
    )
    .await;
    assert_error(
        app.post(&cancel, Some(&other.access), json!({})).await,
        404,
        "Not Found",
        None,
    )
    .await;
    let unknown = format!(
        "/api/agents/{id}/conversations/{}/stream",
        uuid::Uuid::now_v7()
    );
    assert_error(
        app.get(&unknown, Some(&user.access)).await,
        404,
        "Not Found",
        None,
    )
    .await;
    // A Last-Event-ID that is not a frame id.
    for bad in ["abc", "-1", "1.5"] {
        let res = app
            .client
            .get(app.url(&path))
            .bearer_auth(&user.access)
            .header("Last-Event-ID", bad)
            .send()
            .await
            .unwrap();
        assert_error(res, 400, "Bad Request", None).await;
    }
    let res = app
        .get(&format!("{path}?lastEventId=x"), Some(&user.access))
        .await;
    assert_error(res, 400, "Bad Request", None).await;
    // chat:read resumes; cancelling takes chat:write.
    let (_, reader) = app.api_key(&user, &["chat:read"]).await;
    let res = resume(&app, &reader, &id, &thread, 0).await;
    assert_eq!(res.status(), 200);
    drop(res);
    assert_error(
        app.post(&cancel, Some(&reader), json!({})).await,
        403,
        "Forbidden",
        None,
    )
    .await;
    let (_, writer) = app.api_key(&user, &["chat:write"]).await;
    assert_error(
        resume(&app, &writer, &id, &thread, 0).await,
        403,
        "Forbidden",
        None,
    )
    .await;
    assert_eq!(
        app.post(&cancel, Some(&writer), json!({})).await.status(),
        200
    );
    drop(stream);
}

#[tokio::test]
async fn a_shutdown_ends_streams_after_the_grace_period_and_stores_what_was_generated() {
    let (mut app, _mock) = slow_app(Duration::from_millis(25), |c| {
        c.chat.shutdown_grace = Duration::from_millis(600);
        c.chat.shutdown_handover = Duration::from_millis(1_500);
    })
    .await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let chat = |message: &str, resumable: bool| json!({"message": message, "stream": true, "resumable": resumable});
    // Ends within the handover (~1 s), does not (~5 s), and is not resumable.
    let mut threads = Vec::new();
    let (thread, mut short) =
        start(&app, &user.access, &id, chat("short [[tokens:40]]", true)).await;
    threads.push(thread);
    let (thread, mut long) =
        start(&app, &user.access, &id, chat("long [[tokens:200]]", true)).await;
    threads.push(thread);
    let (thread, mut plain) =
        start(&app, &user.access, &id, chat("plain [[tokens:200]]", false)).await;
    threads.push(thread);
    for stream in [&mut short, &mut long, &mut plain] {
        stream.take(2).await;
    }
    app.shut_down();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Not ready from the start of the drain.
    let ready = agentchat::startup::service(app.state.clone())
        .oneshot(
            axum::http::Request::get("/api/health/ready")
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    let body = axum::body::to_bytes(ready.into_body(), 4096).await.unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["message"],
        "Not ready: shutting down"
    );
    // After the grace period: resumable streams are told to resume elsewhere (no id, no
    // [DONE]); the other one is interrupted and ends.
    for stream in [short, long] {
        let rest = stream.rest().await;
        let (id, data) = rest.last().unwrap();
        assert_eq!(*id, None, "{rest:?}");
        let error: Value = serde_json::from_str(data).unwrap();
        assert_eq!(error["error"], "Service Unavailable");
        assert!(error["message"].as_str().unwrap().contains("Last-Event-ID"));
        assert!(rest.iter().all(|(_, d)| d != "[DONE]"));
    }
    let rest = plain.rest().await;
    assert_eq!(rest.last().unwrap().1, "[DONE]");
    let error: Value = serde_json::from_str(&rest[rest.len() - 2].1).unwrap();
    assert_eq!(error["error"], "Service Unavailable");
    assert!(error["message"]
        .as_str()
        .unwrap()
        .starts_with("The reply was interrupted"));
    // Stored: the short reply whole, the long one and the plain one interrupted with what
    // was generated.
    let status = |thread: &str| {
        app.sql_scalar::<String>(
            "SELECT status || ':' || content FROM messages WHERE thread_id = $1 AND role = 'assistant'",
            vec![thread.into()],
        )
    };
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let short = status(&threads[0]).await;
    assert!(
        short.starts_with("complete:") && short.ends_with("w40"),
        "{short}"
    );
    for thread in &threads[1..] {
        let stored = status(thread).await;
        assert!(stored.starts_with("interrupted:w1 w2"), "{stored}");
        assert!(!stored.ends_with("w200"), "{stored}");
    }
}

#[tokio::test]
async fn without_redis_finished_replies_stay_resumable_across_a_graceful_restart() {
    let no_redis = |c: &mut agentchat::config::Config| c.limits.redis_url = None;
    let (mut app, _mock) = slow_app(Duration::from_millis(5), no_redis).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let (thread, stream) = start(
        &app,
        &user.access,
        &id,
        json!({"message": "count [[tokens:30]]", "stream": true, "resumable": true}),
    )
    .await;
    let whole = stream.rest().await;
    assert_eq!(whole.last().unwrap().1, "[DONE]");
    app.shut_down();
    let kept = app.dir.path().join(agentchat::startup::REPLIES_FILE);
    for _ in 0..200 {
        if kept.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        kept.exists(),
        "the shutdown keeps the finished reply's frames"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the owner's alone");
    }
    // The same data folder and database, started again.
    let TestApp { dir, database, .. } = app;
    let app = spawn_app_on(dir, database, no_redis).await;
    assert!(!kept.exists(), "read back once");
    let (access, _) = app.tokens(&user.email, &user.password).await;
    let rest = Events::of(resume(&app, &access, &id, &thread, 5).await)
        .rest()
        .await;
    assert_eq!(rest, whole[5..], "frame-exact after the restart");
    // Someone else's conversation is still not theirs to resume.
    let stranger = app.user().await;
    let res = resume(&app, &stranger.access, &id, &thread, 0).await;
    assert_eq!(res.status(), 404);
}

#[tokio::test]
async fn while_redis_does_not_answer_each_instance_keeps_its_own_replies() {
    let (app, _mock) = slow_app(Duration::from_millis(15), |c| {
        c.limits.redis_url = Some("redis://127.0.0.1:9".into());
    })
    .await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let (thread, mut stream) = start(
        &app,
        &user.access,
        &id,
        json!({"message": "count [[tokens:40]]", "stream": true, "resumable": true}),
    )
    .await;
    let first = stream.take(3).await;
    drop(stream);
    // One reply at a time still, and resumed from this instance's memory.
    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "meanwhile", "threadId": thread}),
        )
        .await;
    assert_error(res, 409, "Conflict", None).await;
    let rest = Events::of(resume(&app, &user.access, &id, &thread, 3).await)
        .rest()
        .await;
    let all: Vec<Event> = first.into_iter().chain(rest).collect();
    assert_eq!(ids(&all), (1..=all.len() as u64).collect::<Vec<_>>());
    assert!(text(&all).ends_with("w40"));
}

#[tokio::test]
async fn a_message_sent_as_soon_as_the_last_reply_ended_finds_the_conversation_free() {
    let app = spawn_app().await;
    let user = app.user().await;
    let id = agent(&app, &user).await;
    let mut thread: Option<String> = None;
    for i in 0..20 {
        let mut body = json!({"message": format!("turn {i}"), "stream": i % 2 == 1});
        if let Some(thread) = &thread {
            body["threadId"] = json!(thread);
        }
        let res = app.chat(&user.access, &id, body).await;
        assert_eq!(res.status(), 200, "turn {i}: {}", res.text().await.unwrap());
        let started = res
            .headers()
            .get("x-thread-id")
            .map(|v| v.to_str().unwrap().to_string());
        let text = res.text().await.unwrap();
        thread = thread.or(started).or_else(|| {
            serde_json::from_str::<Value>(&text).ok()?["threadId"]
                .as_str()
                .map(str::to_string)
        });
    }
    let messages = app
        .messages(&user.access, &id, thread.as_deref().unwrap())
        .await;
    assert_eq!(messages.len(), 40);
}

#[tokio::test]
async fn concurrent_messages_to_one_conversation_run_one_at_a_time() {
    let (app, _mock) = slow_app(Duration::from_millis(10), |_| {}).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let first: Value = app
        .chat(&user.access, &id, json!({"message": "hello"}))
        .await
        .json()
        .await
        .unwrap();
    let thread = first["threadId"].as_str().unwrap().to_string();
    // Ten at once: one runs, the others are refused.
    let racing = (0..10).map(|i| {
        app.chat(
            &user.access,
            &id,
            json!({"message": format!("racer {i} [[tokens:30]]"), "threadId": thread}),
        )
    });
    let statuses: Vec<u16> = futures::future::join_all(racing)
        .await
        .iter()
        .map(|r| r.status().as_u16())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        9,
        "{statuses:?}"
    );
    // Five at once with `queue`: all run, each after the reply before it.
    let queued = (0..5).map(|i| {
        app.chat(
            &user.access,
            &id,
            json!({"message": format!("queued {i} [[tokens:10]]"), "threadId": thread, "queue": true}),
        )
    });
    for res in futures::future::join_all(queued).await {
        assert_eq!(res.status(), 200);
    }
    let messages = app.messages(&user.access, &id, &thread).await;
    assert_eq!(messages.len(), 2 + 2 + 10);
    for (i, message) in messages.iter().enumerate() {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        assert_eq!(message["role"], role, "{messages:#?}");
        assert_eq!(message["status"], "complete");
    }
}
