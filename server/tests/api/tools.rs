//! Agent tools (docs/api.md § Tools): their API (validation, write-only secret headers,
//! tenancy, scopes), the test run, and the chat loop that runs the model's calls, in JSON
//! and streamed, with the OpenAI and Anthropic wire formats of the mock provider.

use std::sync::{Arc, Mutex};

use axum::{
    extract::{Path, Query},
    http::{HeaderMap, StatusCode},
    routing::{get, post},
    Json, Router,
};
use serde_json::{json, Value};

use crate::{
    chat::sse_data,
    helpers::*,
    providers::{agent_with, with_mock},
};

/// What the local HTTP action server saw: each request's path, query and the
/// `X-Api-Key` header.
type Seen = Arc<Mutex<Vec<(String, String, Option<String>)>>>;

/// A local HTTP API for the actions: `GET /weather/{city}` answers `{"city", "temp": 21}`,
/// `POST /echo` echoes its JSON body, `GET /fail` answers 500. Returns its address
/// (`127.0.0.1:PORT`) and what it saw.
async fn action_server() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let weather = move |Path(city): Path<String>,
                        Query(q): Query<Vec<(String, String)>>,
                        headers: HeaderMap| {
        let record = record.clone();
        async move {
            let query = q
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("&");
            let key = headers
                .get("x-api-key")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            record
                .lock()
                .unwrap()
                .push((format!("/weather/{city}"), query, key));
            Json(json!({"city": city, "temp": 21}))
        }
    };
    let router = Router::new()
        .route("/weather/{city}", get(weather))
        .route(
            "/echo",
            post(|Json(body): Json<Value>| async move { Json(body) }),
        )
        .route(
            "/fail",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "upstream exploded") }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (addr, seen)
}

/// The config of a `get_weather` action on `addr`, with a secret API key header.
fn weather_config(addr: &str) -> Value {
    json!({
        "method": "GET",
        "url": format!("http://{addr}/weather/{{city}}"),
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "units": {"type": "string"}},
            "required": ["city"]
        },
        "headers": {"X-Client": "agentchat-tests"},
        "secretHeaders": {"X-Api-Key": "s3cret-key-value"}
    })
}

/// The application with the mock provider (`with_mock`) and a fresh action server it may
/// reach, after `tweak`: the app, the mock, the server's address and what it saw.
async fn with_actions(
    tweak: impl FnOnce(&mut agentchat::config::Config),
) -> (TestApp, mock_provider::MockProvider, String, Seen) {
    let (addr, seen) = action_server().await;
    let allowed = addr.clone();
    let (app, mock) = with_mock(|c| {
        c.outbound.allowed_private_hosts = vec![allowed];
        tweak(c);
    })
    .await;
    (app, mock, addr, seen)
}

/// A JSON chat turn's reply.
async fn chat_json(app: &TestApp, token: &str, agent: &str, body: Value) -> Value {
    let res = app.chat(token, agent, body).await;
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

async fn create_tool(app: &TestApp, token: &str, agent: &str, body: Value) -> reqwest::Response {
    app.post(&format!("/api/agents/{agent}/tools"), Some(token), body)
        .await
}

/// Creates a tool and answers it (`tool`).
async fn tool(app: &TestApp, token: &str, agent: &str, body: Value) -> Value {
    let res = create_tool(app, token, agent, body).await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    res.json::<Value>().await.unwrap()["tool"].clone()
}

#[tokio::test]
async fn tools_are_kept_with_their_secret_headers_write_only() {
    let (app, _mock, addr, seen) = with_actions(|_| {}).await;
    let user = app.user().await;
    let agent = agent_with(&app, &user, "gpt-4o-mini").await;

    let builtin = tool(&app, &user.access, &agent, json!({"type": "web_fetch"})).await;
    assert_eq!(
        builtin["name"], "web_fetch",
        "built-ins default to their type"
    );
    assert_eq!(builtin["enabled"], true);
    assert_eq!(builtin["requiresApproval"], false);

    let created = create_tool(
        &app,
        &user.access,
        &agent,
        json!({"type": "http", "name": "get_weather", "description": "Weather by city",
               "config": weather_config(&addr)}),
    )
    .await;
    assert_eq!(created.status(), 201);
    let text = created.text().await.unwrap();
    assert!(
        !text.contains("s3cret"),
        "a secret is never returned: {text}"
    );
    let created: Value = serde_json::from_str(&text).unwrap();
    let id = created["tool"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        created["tool"]["config"]["secretHeaders"],
        json!(["X-Api-Key"])
    );
    assert_eq!(created["tool"]["config"]["method"], "GET");

    let listed = app
        .get(&format!("/api/agents/{agent}/tools"), Some(&user.access))
        .await
        .text()
        .await
        .unwrap();
    assert!(!listed.contains("s3cret"));
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["web_fetch", "get_weather"], "oldest first");

    // An update whose config omits the secret headers keeps them: the test run sends them.
    let mut config = weather_config(&addr);
    config.as_object_mut().unwrap().remove("secretHeaders");
    config["timeoutMs"] = json!(5000);
    let res = app
        .call(
            reqwest::Method::PUT,
            &format!("/api/agents/{agent}/tools/{id}"),
            Some(&user.access),
            Some(json!({"description": "Current weather", "config": config})),
        )
        .await;
    assert_eq!(res.status(), 200);
    let updated: Value = res.json().await.unwrap();
    assert_eq!(updated["tool"]["description"], "Current weather");
    assert_eq!(updated["tool"]["config"]["timeoutMs"], 5000);
    assert_eq!(
        updated["tool"]["config"]["secretHeaders"],
        json!(["X-Api-Key"])
    );

    let run: Value = app
        .post(
            &format!("/api/agents/{agent}/tools/{id}/test"),
            Some(&user.access),
            json!({"arguments": {"city": "Paris/Nord", "units": "metric"}}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(
        serde_json::from_str::<Value>(run["output"].as_str().unwrap()).unwrap(),
        json!({"city": "Paris/Nord", "temp": 21})
    );
    assert!(run["durationMs"].is_u64());
    let (path, query, key) = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        path, "/weather/Paris/Nord",
        "the placeholder is one encoded segment"
    );
    assert_eq!(query, "units=metric", "the other arguments go in the query");
    assert_eq!(key.as_deref(), Some("s3cret-key-value"));

    // A run whose arguments break the schema fails, and says why.
    let bad: Value = app
        .post(
            &format!("/api/agents/{agent}/tools/{id}/test"),
            Some(&user.access),
            json!({"arguments": {"city": 5}}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(bad["status"], "failed");
    assert!(bad["error"].as_str().unwrap().contains("/city"), "{bad}");

    let res = app
        .delete(
            &format!("/api/agents/{agent}/tools/{id}"),
            Some(&user.access),
        )
        .await;
    assert_eq!(res.status(), 200);
    let res = app
        .get(
            &format!("/api/agents/{agent}/tools/{id}"),
            Some(&user.access),
        )
        .await;
    assert_error(res, 404, "Not Found", Some("Tool not found")).await;
}

#[tokio::test]
async fn bad_tools_are_refused_with_the_field_named() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = crate::chat::agent(&app, &user).await;
    let http = |config: Value| json!({"type": "http", "name": "act", "config": config});
    let cases = [
        (json!({"type": "shell"}), "type must be one of"),
        (
            json!({"type": "web_fetch", "name": "has space"}),
            "name must be",
        ),
        (
            json!({"type": "http", "config": weather_config("a.example")}),
            "name is required",
        ),
        (
            http(
                json!({"method": "GET", "url": "ftp://a.example/x", "parameters": {"type": "object"}}),
            ),
            "config.url",
        ),
        (
            http(
                json!({"method": "GET", "url": "https://a.example/", "parameters": {"type": "strng"}}),
            ),
            "config.parameters",
        ),
        (
            http(
                json!({"method": "GET", "url": "https://a.example/", "parameters": {"type": "object"},
                        "secretHeaders": {"Bad Header": "x"}}),
            ),
            "config.secretHeaders",
        ),
        (
            json!({"type": "web_fetch", "config": {"depth": 2}}),
            "config.depth",
        ),
        (
            json!({"type": "knowledge_search", "description": "x".repeat(1025)}),
            "description",
        ),
    ];
    for (body, named) in cases {
        let res = create_tool(&app, &user.access, &agent, body.clone()).await;
        let err = assert_error(res, 400, "Bad Request", None).await;
        let message = err["message"].as_str().unwrap();
        assert!(message.contains(named), "{body}: {message}");
    }
    tool(&app, &user.access, &agent, json!({"type": "web_fetch"})).await;
    let res = create_tool(&app, &user.access, &agent, json!({"type": "web_fetch"})).await;
    assert_error(
        res,
        409,
        "Conflict",
        Some("The agent already has a tool with this name"),
    )
    .await;

    // Another tenant's agent reads as absent; a key without agents:write may only read.
    let other = app.user().await;
    let res = create_tool(&app, &other.access, &agent, json!({"type": "web_fetch"})).await;
    assert_error(res, 404, "Not Found", Some("Agent not found")).await;
    let res = app
        .get(&format!("/api/agents/{agent}/tools"), Some(&other.access))
        .await;
    assert_eq!(res.status(), 404);
    let (_, key) = app.api_key(&user, &["agents:read"]).await;
    let res = app
        .get(&format!("/api/agents/{agent}/tools"), Some(&key))
        .await;
    assert_eq!(res.status(), 200);
    let res = create_tool(&app, &key, &agent, json!({"type": "knowledge_search"})).await;
    assert_eq!(res.status(), 403);
}

#[tokio::test]
async fn an_agent_has_at_most_32_tools() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = crate::chat::agent(&app, &user).await;
    for i in 0..32 {
        tool(
            &app,
            &user.access,
            &agent,
            json!({"type": "web_fetch", "name": format!("fetch_{i}")}),
        )
        .await;
    }
    let res = create_tool(
        &app,
        &user.access,
        &agent,
        json!({"type": "web_fetch", "name": "one_more"}),
    )
    .await;
    assert_error(res, 409, "Conflict", None).await;
}

/// An agent of `model` with the `get_weather` action on `addr`.
async fn weather_agent(app: &TestApp, user: &TestUser, model: &str, addr: &str) -> String {
    let agent = agent_with(app, user, model).await;
    tool(
        app,
        &user.access,
        &agent,
        json!({"type": "http", "name": "get_weather", "description": "Weather by city",
               "config": weather_config(addr)}),
    )
    .await;
    agent
}

const CALL: &str = r#"What is the weather? [[call:get_weather:{"city":"Paris"}]]"#;

#[tokio::test]
async fn a_json_chat_runs_the_models_tool_calls_and_answers_with_their_results() {
    for model in ["gpt-4o-mini", "claude-sonnet-4-5"] {
        let (app, mock, addr, seen) = with_actions(|_| {}).await;
        let user = app.user().await;
        let agent = weather_agent(&app, &user, model, &addr).await;
        let res = app
            .chat(&user.access, &agent, json!({"message": CALL}))
            .await;
        assert_eq!(res.status(), 200);
        let reply: Value = res.json().await.unwrap();
        assert_eq!(
            reply["message"], r#"Tool results: {"city":"Paris","temp":21}"#,
            "{model}: {reply}"
        );
        let calls = reply["toolCalls"].as_array().unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0]["name"], "get_weather");
        assert_eq!(calls[0]["type"], "http");
        assert_eq!(calls[0]["arguments"], json!({"city": "Paris"}));
        assert_eq!(calls[0]["status"], "succeeded");
        assert!(calls[0]["durationMs"].is_u64());
        assert_eq!(seen.lock().unwrap().len(), 1, "the action ran once");
        // Two model calls; the turn's usage is their sum.
        let posts: Vec<_> = mock
            .requests()
            .into_iter()
            .filter(|r| r.method == "POST")
            .collect();
        assert_eq!(posts.len(), 2, "{model}");
        assert!(posts[0].body["tools"].is_array(), "the tools are offered");
        let total = reply["tokensUsed"]["total"].as_u64().unwrap();
        let prompt = reply["tokensUsed"]["prompt"].as_u64().unwrap();
        assert!(prompt > 10 && total > prompt, "{reply}");

        // The stored reply shows its calls, and the next turn gives them to the model.
        let thread = reply["threadId"].as_str().unwrap();
        let messages = app.messages(&user.access, &agent, thread).await;
        assert_eq!(messages[1]["toolCalls"][0]["name"], "get_weather");
        assert!(messages[0].get("toolCalls").is_none());
        app.chat(
            &user.access,
            &agent,
            json!({"message": "thanks", "threadId": thread}),
        )
        .await;
        let last = mock.requests().pop().unwrap();
        let body = last.body.to_string();
        assert!(
            body.contains(r#"\"temp\":21"#) || body.contains(r#""temp":21"#),
            "the earlier call's result is in the history: {body}"
        );
    }
}

#[tokio::test]
async fn a_failing_tool_is_told_to_the_model_and_the_client_still_gets_200() {
    let (app, _mock, addr, _seen) = with_actions(|_| {}).await;
    let user = app.user().await;
    let agent = agent_with(&app, &user, "gpt-4o-mini").await;
    tool(
        &app,
        &user.access,
        &agent,
        json!({"type": "http", "name": "broken", "config": {
            "method": "GET", "url": format!("http://{addr}/fail"),
            "parameters": {"type": "object", "properties": {}}}}),
    )
    .await;
    let res = app
        .chat(
            &user.access,
            &agent,
            json!({"message": "[[call:broken:{}]] [[call:missing:{}]] [[call:get_weather:{\"city\":1}]]"}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let reply: Value = res.json().await.unwrap();
    let calls = reply["toolCalls"].as_array().unwrap();
    assert_eq!(calls.len(), 3, "{reply}");
    for call in calls {
        assert_eq!(call["status"], "failed", "{call}");
    }
    assert!(
        calls[0]["error"].as_str().unwrap().contains("500"),
        "{}",
        calls[0]
    );
    assert_eq!(calls[1]["type"], "unknown");
    let text = reply["message"].as_str().unwrap();
    assert!(text.starts_with("Tool results: Error:"), "{text}");
    assert!(text.contains("upstream exploded"), "{text}");
}

#[tokio::test]
async fn a_stream_shows_tool_calls_only_to_clients_that_ask() {
    let (app, _mock, addr, _seen) = with_actions(|_| {}).await;
    let user = app.user().await;
    let agent = weather_agent(&app, &user, "gpt-4o-mini", &addr).await;

    let plain = app
        .chat(
            &user.access,
            &agent,
            json!({"message": CALL, "stream": true}),
        )
        .await
        .text()
        .await
        .unwrap();
    let frames = sse_data(&plain);
    assert_eq!(frames.last().unwrap(), "[DONE]");
    for frame in &frames[..frames.len() - 1] {
        let v: Value = serde_json::from_str(frame).unwrap();
        assert_eq!(
            v.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["chunk"],
            "only the contract's frames: {frame}"
        );
    }
    assert_eq!(
        crate::chat::streamed_text(&plain),
        r#"Tool results: {"city":"Paris","temp":21}"#
    );

    let body = app
        .chat(
            &user.access,
            &agent,
            json!({"message": CALL, "stream": true,
                   "streamOptions": {"includeToolCalls": true, "includeUsage": true}}),
        )
        .await
        .text()
        .await
        .unwrap();
    let frames: Vec<Value> = sse_data(&body)
        .iter()
        .filter(|f| *f != "[DONE]")
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    let calls: Vec<&Value> = frames.iter().filter_map(|f| f.get("toolCall")).collect();
    assert_eq!(calls.len(), 2, "{body}");
    assert_eq!(calls[0]["status"], "running");
    assert_eq!(calls[0]["arguments"], json!({"city": "Paris"}));
    assert_eq!(calls[1]["status"], "succeeded");
    assert_eq!(calls[1]["id"], calls[0]["id"]);
    assert!(calls[1]["output"].as_str().unwrap().contains("21"));
    assert!(calls[1].get("arguments").is_none());
    let usage = frames.last().unwrap();
    assert!(usage["usage"]["total"].as_u64().unwrap() > 0, "{usage}");
}

#[tokio::test]
async fn tool_rounds_stop_at_max_tool_rounds_with_one_last_call_without_tools() {
    let (app, mock, addr, seen) = with_actions(|c| c.chat.max_tool_rounds = 2).await;
    let user = app.user().await;
    let agent = weather_agent(&app, &user, "gpt-4o-mini", &addr).await;
    let reply: Value = chat_json(
        &app,
        &user.access,
        &agent,
        json!({"message": r#"loop [[call-always:get_weather:{"city":"Oslo"}]]"#}),
    )
    .await;
    assert_eq!(reply["toolCalls"].as_array().unwrap().len(), 2, "{reply}");
    assert_eq!(seen.lock().unwrap().len(), 2);
    let posts: Vec<_> = mock
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(posts.len(), 3, "two rounds, then the last call");
    assert_eq!(posts[2].body["tool_choice"], "none");
}

#[tokio::test]
async fn a_new_or_disabled_tool_changes_the_next_chat_at_once() {
    let (app, mock, addr, _seen) = with_actions(|_| {}).await;
    let user = app.user().await;
    let agent = agent_with(&app, &user, "gpt-4o-mini").await;
    // The agent is read (and cached) without tools first.
    app.chat(&user.access, &agent, json!({"message": "hi"}))
        .await;
    assert!(mock.requests().pop().unwrap().body.get("tools").is_none());
    let created = tool(
        &app,
        &user.access,
        &agent,
        json!({"type": "http", "name": "get_weather", "config": weather_config(&addr)}),
    )
    .await;
    app.chat(&user.access, &agent, json!({"message": "hi"}))
        .await;
    let offered = mock.requests().pop().unwrap().body["tools"].clone();
    assert_eq!(offered[0]["function"]["name"], "get_weather", "{offered}");
    let id = created["id"].as_str().unwrap();
    app.call(
        reqwest::Method::PUT,
        &format!("/api/agents/{agent}/tools/{id}"),
        Some(&user.access),
        Some(json!({"enabled": false})),
    )
    .await;
    app.chat(&user.access, &agent, json!({"message": "hi"}))
        .await;
    assert!(mock.requests().pop().unwrap().body.get("tools").is_none());
}

#[tokio::test]
async fn tool_calls_never_reach_private_addresses() {
    let (app, _mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let agent = agent_with(&app, &user, "gpt-4o-mini").await;
    let (addr, seen) = action_server().await;
    // Not in ALLOWED_PRIVATE_HOSTS: loopback is refused, before any connection.
    let created = tool(
        &app,
        &user.access,
        &agent,
        json!({"type": "http", "name": "get_weather", "config": weather_config(&addr)}),
    )
    .await;
    let id = created["id"].as_str().unwrap();
    let run: Value = app
        .post(
            &format!("/api/agents/{agent}/tools/{id}/test"),
            Some(&user.access),
            json!({"arguments": {"city": "Paris"}}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "failed");
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reached the server"
    );
    let fetch = tool(&app, &user.access, &agent, json!({"type": "web_fetch"})).await;
    let fetch_id = fetch["id"].as_str().unwrap();
    for url in [
        "http://169.254.169.254/latest/meta-data/".to_string(),
        format!("http://{addr}/weather/x"),
        "file:///etc/passwd".to_string(),
    ] {
        let run: Value = app
            .post(
                &format!("/api/agents/{agent}/tools/{fetch_id}/test"),
                Some(&user.access),
                json!({"arguments": {"url": url}}),
            )
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(run["status"], "failed", "{url}: {run}");
    }
    assert!(seen.lock().unwrap().is_empty());
}

/// An agent with `get_weather` (needing approval when `approval`) and a `post_echo` action
/// that does not.
async fn approval_agent(app: &TestApp, user: &TestUser, addr: &str) -> String {
    let agent = agent_with(app, user, "gpt-4o-mini").await;
    tool(
        app,
        &user.access,
        &agent,
        json!({"type": "http", "name": "get_weather", "requiresApproval": true,
               "config": weather_config(addr)}),
    )
    .await;
    tool(
        app,
        &user.access,
        &agent,
        json!({"type": "http", "name": "post_echo", "config": {
            "method": "POST", "url": format!("http://{addr}/echo"),
            "parameters": {"type": "object", "properties": {"say": {"type": "string"}}}}}),
    )
    .await;
    agent
}

#[tokio::test]
async fn a_call_that_needs_approval_stops_the_turn_until_it_is_approved() {
    let (app, mock, addr, seen) = with_actions(|_| {}).await;
    let user = app.user().await;
    let agent = approval_agent(&app, &user, &addr).await;
    let reply: Value = chat_json(&app, &user.access, &agent, json!({"message": r#"go [[call:get_weather:{"city":"Rome"}]] [[call:post_echo:{"say":"hi"}]]"#})).await;
    let pending = reply["pendingApprovals"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{reply}");
    assert_eq!(pending[0]["name"], "get_weather");
    assert_eq!(pending[0]["arguments"], json!({"city": "Rome"}));
    assert!(seen.lock().unwrap().is_empty(), "not run before approval");
    let calls = reply["toolCalls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "the round's other call ran: {reply}");
    assert_eq!(calls[0]["name"], "post_echo");
    assert_eq!(calls[0]["status"], "succeeded");
    let thread = reply["threadId"].as_str().unwrap().to_string();
    let call_id = pending[0]["toolCallId"].as_str().unwrap().to_string();
    let url = format!("/api/agents/{agent}/conversations/{thread}/approvals");
    // The stored reply shows the call that waits, for a page loaded later.
    let stored = app.messages(&user.access, &agent, &thread).await;
    assert_eq!(
        stored[1]["pendingApprovals"],
        json!([{"toolCallId": call_id, "name": "get_weather", "arguments": {"city": "Rome"}}])
    );
    assert!(stored[0].get("pendingApprovals").is_none());

    // Unknown calls, other tenants and other agents read as absent.
    let res = app
        .post(
            &url,
            Some(&user.access),
            json!({"toolCallId": "nope", "approved": true}),
        )
        .await;
    assert_error(res, 404, "Not Found", Some("Tool call not found")).await;
    let other = app.user().await;
    let res = app
        .post(
            &url,
            Some(&other.access),
            json!({"toolCallId": call_id, "approved": true}),
        )
        .await;
    assert_eq!(res.status(), 404);

    let continued: Value = app
        .post(
            &url,
            Some(&user.access),
            json!({"toolCallId": call_id, "approved": true}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        continued["message"], r#"Tool results: {"city":"Rome","temp":21}"#,
        "{continued}"
    );
    assert_eq!(continued["toolCalls"][0]["id"], call_id.as_str());
    assert_eq!(continued["toolCalls"][0]["status"], "succeeded");
    assert!(continued.get("pendingApprovals").is_none());
    assert_eq!(seen.lock().unwrap().len(), 1);
    // The model was called once more, with every earlier call and result.
    let last = mock.requests().pop().unwrap();
    let roles: Vec<&str> = last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "tool"],
        "{}",
        last.body
    );

    let res = app
        .post(
            &url,
            Some(&user.access),
            json!({"toolCallId": call_id, "approved": false}),
        )
        .await;
    assert_error(
        res,
        409,
        "Conflict",
        Some("This tool call was already approved"),
    )
    .await;
    let messages = app.messages(&user.access, &agent, &thread).await;
    assert_eq!(messages.len(), 3, "the stopped reply and its continuation");
    assert_eq!(messages[2]["toolCalls"][0]["name"], "get_weather");
    assert!(messages.iter().all(|m| m.get("pendingApprovals").is_none()));
}

#[tokio::test]
async fn a_denied_call_is_told_to_the_model_and_a_stream_announces_pending_calls() {
    let (app, _mock, addr, seen) = with_actions(|_| {}).await;
    let user = app.user().await;
    let agent = approval_agent(&app, &user, &addr).await;
    let body = app
        .chat(
            &user.access,
            &agent,
            json!({"message": r#"go [[call:get_weather:{"city":"Rome"}]]"#, "stream": true}),
        )
        .await
        .text()
        .await
        .unwrap();
    let frames = sse_data(&body);
    assert_eq!(frames.last().unwrap(), "[DONE]");
    let pending: Value = serde_json::from_str(&frames[frames.len() - 2]).unwrap();
    assert_eq!(pending["chunk"], "");
    let call_id = pending["pendingApprovals"][0]["toolCallId"]
        .as_str()
        .unwrap()
        .to_string();
    let thread = app
        .get(
            &format!("/api/agents/{agent}/conversations"),
            Some(&user.access),
        )
        .await
        .json::<Value>()
        .await
        .unwrap()["conversations"][0]["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    let body = app
        .post(
            &format!("/api/agents/{agent}/conversations/{thread}/approvals"),
            Some(&user.access),
            json!({"toolCallId": call_id, "approved": false, "stream": true}),
        )
        .await
        .text()
        .await
        .unwrap();
    let text = crate::chat::streamed_text(&body);
    assert_eq!(
        text,
        "Tool results: Error: The user declined this tool call"
    );
    assert!(seen.lock().unwrap().is_empty(), "a denied call never runs");
    let messages = app.messages(&user.access, &agent, &thread).await;
    assert_eq!(messages.last().unwrap()["toolCalls"][0]["status"], "denied");
}

#[tokio::test]
async fn live_channels_and_the_openai_api_are_not_offered_tools_that_need_approval() {
    let (app, mock, addr, _seen) = with_actions(|_| {}).await;
    let user = app.user().await;
    let agent = approval_agent(&app, &user, &addr).await;
    let (_, key) = app.api_key(&user, &["chat:write", "agents:read"]).await;
    let res = app
        .post(
            "/api/openai/v1/chat/completions",
            Some(&key),
            json!({"model": agent, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let offered = mock.requests().pop().unwrap().body["tools"].clone();
    let names: Vec<&str> = offered
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["post_echo"]);
}

/// Two instances on one PostgreSQL database (the tests' server), both with the mock
/// provider and the action server `allowed`.
async fn two_instances(allowed: &str) -> (TestApp, TestApp, mock_provider::MockProvider) {
    use test_support::scratch::ScratchDatabase;
    let server = test_database_server()
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
    let database = Arc::new(
        ScratchDatabase::create(&server)
            .await
            .unwrap_or_else(|e| panic!("this test needs PostgreSQL at {server}: {e}")),
    );
    let mock = mock_provider::MockProvider::start(mock_provider::MockConfig::default())
        .await
        .unwrap();
    let base = mock.base_url();
    // The instances of one installation share their keys (tokens signed by one are valid
    // at the other).
    let secrets = agentchat::config::SecretsConfig::ephemeral();
    let tweak = |c: &mut agentchat::config::Config| {
        c.secrets = secrets.clone();
        c.providers.openai_api_key = Some(secrecy::SecretString::from("sk-two"));
        c.providers.openai_base_url = base.clone();
        c.outbound.allowed_private_hosts = vec![allowed.to_string()];
    };
    let a = spawn_app_on(tempfile::tempdir().unwrap(), Some(database.clone()), tweak).await;
    // One PUBLIC_URL, the tokens' issuer, for both (A's address serves the mail links).
    let public_url = a.url("").trim_end_matches('/').to_string();
    let b = spawn_app_on(tempfile::tempdir().unwrap(), Some(database), |c| {
        tweak(c);
        c.server.public_url = public_url;
    })
    .await;
    (a, b, mock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_see_tool_edits_at_once_and_one_decision_wins() {
    let (addr, seen) = action_server().await;
    let (a, b, mock) = two_instances(&addr).await;
    let user = a.user().await;
    let agent = agent_with(&a, &user, "gpt-4o-mini").await;
    // B reads (and caches) the agent without tools; A adds one; B's next chat offers it.
    b.chat(&user.access, &agent, json!({"message": "hi"})).await;
    assert!(mock.requests().pop().unwrap().body.get("tools").is_none());
    tool(
        &a,
        &user.access,
        &agent,
        json!({"type": "http", "name": "get_weather", "requiresApproval": true,
               "config": weather_config(&addr)}),
    )
    .await;
    // B's cached agent is dropped when A's invalidation arrives through the bus
    // (milliseconds), and at the latest when it expires (AGENT_CACHE_TTL, 2 s).
    let edited = std::time::Instant::now();
    let reply = loop {
        let reply: Value = chat_json(
            &b,
            &user.access,
            &agent,
            json!({"message": r#"go [[call:get_weather:{"city":"Bern"}]]"#}),
        )
        .await;
        if reply["pendingApprovals"].is_array() {
            break reply;
        }
        assert!(
            edited.elapsed() < agentchat::agents::AGENT_CACHE_TTL,
            "B still chats without the tool: {reply}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    let call_id = reply["pendingApprovals"][0]["toolCallId"]
        .as_str()
        .unwrap()
        .to_string();
    let thread = reply["threadId"].as_str().unwrap().to_string();
    // Both instances decide the same call at once: one continues, the other gets 409.
    let url = format!("/api/agents/{agent}/conversations/{thread}/approvals");
    let body = json!({"toolCallId": call_id, "approved": true});
    let (ra, rb) = tokio::join!(
        a.post(&url, Some(&user.access), body.clone()),
        b.post(&url, Some(&user.access), body.clone()),
    );
    let mut statuses = [ra.status().as_u16(), rb.status().as_u16()];
    statuses.sort();
    assert_eq!(statuses, [200, 409]);
    assert_eq!(seen.lock().unwrap().len(), 1, "the call ran once");
    let messages = a.messages(&user.access, &agent, &thread).await;
    assert_eq!(messages.len(), 3, "one continuation");
}
