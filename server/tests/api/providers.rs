//! Chat through real provider protocols, against the local mock provider: the prompts the
//! provider receives, usage, streaming, retries, failures before and during a stream,
//! client disconnects, heartbeats and timeouts.

use std::time::{Duration, Instant};

use futures::StreamExt;
use mock_provider::{MockConfig, MockProvider};
use secrecy::SecretString;
use serde_json::{json, Value};

use crate::{
    chat::{end_frame, sse_data, streamed_text},
    helpers::*,
};

const KEY: &str = "sk-mock-secret-key";

/// The application with the mock provider as its OpenAI and Anthropic endpoints, after
/// `tweak` adjusts its configuration.
pub async fn with_mock(
    tweak: impl FnOnce(&mut agentchat::config::Config),
) -> (TestApp, MockProvider) {
    with_mock_config(MockConfig::default(), tweak).await
}

/// [`with_mock`] with a mock of `config` (its key is the one the application is given).
pub async fn with_mock_config(
    config: MockConfig,
    tweak: impl FnOnce(&mut agentchat::config::Config),
) -> (TestApp, MockProvider) {
    let mock = MockProvider::start(MockConfig {
        api_key: Some(KEY.into()),
        ..config
    })
    .await
    .unwrap();
    let base = mock.base_url();
    let app = spawn_app_with(|c| {
        c.providers.openai_api_key = Some(SecretString::from(KEY));
        c.providers.openai_base_url = base.clone();
        c.providers.anthropic_api_key = Some(SecretString::from(KEY));
        c.providers.anthropic_base_url = base;
        tweak(c);
    })
    .await;
    (app, mock)
}

/// A new agent of `user` on `model`; returns its id.
pub async fn agent_with(app: &TestApp, user: &TestUser, model: &str) -> String {
    let res = app
        .post(
            "/api/agents",
            Some(&user.access),
            json!({"name": "Bot", "systemPrompt": "Be brief", "model": model}),
        )
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    res.json::<Value>().await.unwrap()["agent"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn chats(mock: &MockProvider) -> Vec<mock_provider::RecordedRequest> {
    mock.requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect()
}

#[tokio::test]
async fn models_come_from_the_providers_and_the_first_one_is_the_default() {
    let (app, _mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let body: Value = app
        .get("/api/models", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = body["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    for id in [
        "gpt-4o-mini",
        "gpt-4o",
        "claude-sonnet-4-5",
        "claude-haiku-4-5",
        "agentchat-offline",
    ] {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
    let claude = body["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "claude-sonnet-4-5")
        .unwrap();
    assert_eq!(claude["provider"], "anthropic");
    assert_eq!(claude["contextWindow"], 200_000);
    assert_ne!(
        body["defaultModel"], "agentchat-offline",
        "the offline model is the default only without providers"
    );
}

#[tokio::test]
async fn openai_json_reply_with_system_prompt_history_model_and_usage() {
    let (app, mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let reply: Value = app
        .chat(&user.access, &id, json!({"message": "hello there"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(reply["message"], "Echo: hello there");
    assert_eq!(reply["model"], "gpt-4o-mini");
    assert_eq!(
        reply["tokensUsed"],
        json!({"prompt": 4, "completion": 3, "total": 7}),
        "the provider's usage"
    );
    let thread = reply["threadId"].as_str().unwrap();
    app.chat(
        &user.access,
        &id,
        json!({"message": "and more", "threadId": thread}),
    )
    .await;
    let sent = chats(&mock);
    let last = &sent.last().unwrap();
    assert_eq!(last.path, "/v1/chat/completions");
    assert_eq!(
        last.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(last.body["model"], "gpt-4o-mini");
    let messages: Vec<(String, String)> = last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        messages,
        [
            ("system", "Be brief"),
            ("user", "hello there"),
            ("assistant", "Echo: hello there"),
            ("user", "and more")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
}

/// `tokensUsed` as the API gives it.
fn tokens_used(prompt: u32, completion: u32) -> Value {
    json!({"prompt": prompt, "completion": completion, "total": prompt + completion})
}

/// A provider that reports no usage (as some OpenAI-compatible servers do): the reply's
/// usage is counted with the tokenizer — the prompt as sent (system prompt, history, the
/// message) and the reply — in JSON and in a stream's usage frame, and stored so.
#[tokio::test]
async fn usage_a_provider_does_not_report_is_counted() {
    use agentchat::llm::tokens::count;
    let (app, _mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let first: Value = app
        .chat(&user.access, &id, json!({"message": "hello there"}))
        .await
        .json()
        .await
        .unwrap();
    let thread = first["threadId"].as_str().unwrap();
    let history = count("Be brief") + count("hello there") + count("Echo: hello there");

    let message = "and more [[usage:none]]";
    let reply: Value = app
        .chat(
            &user.access,
            &id,
            json!({"message": message, "threadId": thread}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(reply["message"], "Echo: and more");
    let (prompt, completion) = (history + count(message), count("Echo: and more"));
    assert_eq!(reply["tokensUsed"], tokens_used(prompt, completion));

    let message = "still more [[usage:none]]";
    let body = app
        .chat(
            &user.access,
            &id,
            json!({"message": message, "threadId": thread, "stream": true,
                   "streamOptions": {"includeUsage": true}}),
        )
        .await
        .text()
        .await
        .unwrap();
    let frames = sse_data(&body);
    let usage: Value = serde_json::from_str(&frames[frames.len() - 2]).unwrap();
    let prompt =
        history + count("and more [[usage:none]]") + count("Echo: and more") + count(message);
    let completion = count("Echo: still more");
    assert_eq!(usage["usage"], tokens_used(prompt, completion));
    let messages: Value = app
        .get(
            &format!("/api/agents/{id}/conversations/{thread}/messages"),
            Some(&user.access),
        )
        .await
        .json()
        .await
        .unwrap();
    let last = messages["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"], "Echo: still more");
    assert_eq!(last["tokensUsed"], tokens_used(prompt, completion));
}

/// Counted usage (the provider reports none) includes the knowledge passages the prompt
/// carries.
#[tokio::test]
async fn counted_usage_includes_the_retrieved_passages() {
    use agentchat::llm::tokens::count;
    let (app, _mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let text = "The launch code word is heliotrope. It opens the north gate.";
    let doc = app
        .uploaded(&user.access, &id, "codes.txt", text.as_bytes().to_vec())
        .await;
    assert_eq!(
        app.settled(&user.access, &id, &doc).await["status"],
        "indexed"
    );
    let message = "what is the launch code word? [[usage:none]]";
    let reply: Value = app
        .chat(&user.access, &id, json!({"message": message}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(reply["ragChunksUsed"], 1, "{reply}");
    let passage = reply["sources"][0]["snippet"].as_str().unwrap();
    assert!(passage.contains("heliotrope"), "{passage}");
    let prompt = count("Be brief") + count(passage) + count(message);
    assert_eq!(reply["tokensUsed"]["prompt"], prompt, "{reply}");
}

#[tokio::test]
async fn anthropic_json_and_stream_replies() {
    let (app, mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "claude-sonnet-4-5").await;
    let reply: Value = app
        .chat(&user.access, &id, json!({"message": "hi claude"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(reply["message"], "Echo: hi claude");
    assert_eq!(reply["tokensUsed"]["completion"], 3);
    let sent = chats(&mock);
    assert_eq!(sent[0].path, "/v1/messages");
    assert_eq!(sent[0].header("x-api-key"), Some(KEY));
    assert!(sent[0].body["system"].to_string().contains("Be brief"));
    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "stream please", "stream": true}),
        )
        .await;
    assert_eq!(
        streamed_text(&res.text().await.unwrap()),
        "Echo: stream please"
    );
}

#[tokio::test]
async fn openai_stream_is_delivered_incrementally_with_usage_frame() {
    let (app, _mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o").await;
    let started = Instant::now();
    let res = app.chat(&user.access, &id, json!({"message": "one two [[pause:1500]]", "stream": true, "streamOptions": {"includeUsage": true}}))
        .await;
    let mut body = res.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    let first_at = started.elapsed();
    assert!(
        String::from_utf8_lossy(&first).starts_with("data: {\"chunk\":"),
        "{first:?}"
    );
    let mut rest = Vec::new();
    while let Some(part) = body.next().await {
        rest.extend_from_slice(&part.unwrap());
    }
    assert!(started.elapsed() >= Duration::from_millis(1500));
    assert!(
        first_at < Duration::from_millis(1200),
        "the first chunk came before the pause ended: {first_at:?}"
    );
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&first),
        String::from_utf8_lossy(&rest)
    );
    let frames = sse_data(&all);
    let usage: Value = serde_json::from_str(&frames[frames.len() - 2]).unwrap();
    assert_eq!(usage["usage"]["completion"], 3);
    assert_eq!(usage["model"], "gpt-4o");
}

#[tokio::test]
async fn failures_before_the_first_token_are_retried() {
    let (app, mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let reply = app
        .chat(
            &user.access,
            &id,
            json!({"message": "flaky [[status:503x2]]"}),
        )
        .await;
    assert_eq!(reply.status(), 200);
    assert_eq!(chats(&mock).len(), 3, "two failures, then success");
}

#[tokio::test]
async fn provider_errors_become_502_naming_the_complaint_without_secrets() {
    let (app, mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let res = app
        .chat(&user.access, &id, json!({"message": "x [[status:400]]"}))
        .await;
    let body = assert_error(res, 502, "Bad Gateway", None).await;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("mock failure 400"),
        "{body}"
    );
    assert_eq!(chats(&mock).len(), 1, "a 400 is not retried");
    let res = app
        .chat(&user.access, &id, json!({"message": "x [[status:429]]"}))
        .await;
    let body = assert_error(res, 502, "Bad Gateway", None).await;
    assert!(!body.to_string().contains(KEY));
    assert_eq!(chats(&mock).len(), 4, "429 retried up to three attempts");

    let wrong_key =
        with_mock(|c| c.providers.openai_api_key = Some(SecretString::from("sk-wrong"))).await;
    let user = wrong_key.0.user().await;
    let res = wrong_key
        .0
        .post(
            "/api/agents",
            Some(&user.access),
            json!({"name": "x", "model": "agentchat-offline"}),
        )
        .await;
    let id = res.json::<Value>().await.unwrap()["agent"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let res = wrong_key.0.get("/api/models", Some(&user.access)).await;
    let ids = res.json::<Value>().await.unwrap().to_string();
    assert!(
        !ids.contains("gpt-4o-mini") && ids.contains("claude"),
        "a provider that refuses the key lists nothing"
    );
    drop(id);
}

#[tokio::test]
async fn a_stream_error_sends_the_error_frame_and_done_and_keeps_the_partial_reply() {
    let (app, _mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "a b c d e f [[cut:3]]", "stream": true}),
        )
        .await;
    let thread = res.headers()["x-thread-id"].to_str().unwrap().to_string();
    let frames = sse_data(&res.text().await.unwrap());
    let error = end_frame(&frames);
    assert_eq!(error["error"], "Bad Gateway");
    assert!(error["message"].as_str().is_some());
    let chunks = &frames[..frames.len() - 2];
    assert_eq!(chunks.len(), 3);
    let msgs = app.messages(&user.access, &id, &thread).await;
    let last = msgs.last().unwrap().clone();
    assert_eq!(last["status"], "failed");
    assert_eq!(last["content"], "Echo: a b");

    let json_mode = app
        .chat(&user.access, &id, json!({"message": "a b c d [[cut:2]]"}))
        .await;
    assert_error(json_mode, 502, "Bad Gateway", None).await;
}

#[tokio::test]
async fn a_client_that_disconnects_cancels_the_upstream_request() {
    let (app, mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "long one [[pause:5000]]", "stream": true}),
        )
        .await;
    let thread = res.headers()["x-thread-id"].to_str().unwrap().to_string();
    let mut body = res.bytes_stream();
    body.next().await.unwrap().unwrap();
    drop(body);
    let mut cancelled = false;
    for _ in 0..60 {
        if mock.cancelled_streams() == 1 {
            cancelled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        cancelled,
        "the provider saw its stream cancelled well before the pause ended"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let msgs = app.messages(&user.access, &id, &thread).await;
    let last = msgs.last().unwrap().clone();
    assert_eq!(last["role"], "assistant");
    assert_eq!(last["status"], "cancelled");
    assert!(
        !last["content"].as_str().unwrap().is_empty(),
        "the part relayed before the client left is kept: {last}"
    );
}

#[tokio::test]
async fn silent_streams_get_heartbeat_comments() {
    let (app, _mock) = with_mock(|c| c.chat.sse_heartbeat = Duration::from_millis(200)).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "wait [[pause:900]]", "stream": true}),
        )
        .await;
    let body = res.text().await.unwrap();
    assert!(body.contains(": ping\n"), "{body}");
    assert_eq!(sse_data(&body).last().unwrap(), "[DONE]");
}

#[tokio::test]
async fn a_provider_that_does_not_answer_in_time_is_504() {
    let (app, _mock) = with_mock(|c| c.providers.timeout = Duration::from_millis(500)).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let res = app
        .chat(&user.access, &id, json!({"message": "slow [[delay:3000]]"}))
        .await;
    assert_error(res, 504, "Gateway Timeout", None).await;
}

/// `PROVIDER_TIMEOUT_SECS` bounds the whole wait for a reply's first token, retries and
/// their backoff included: a silent provider is answered 504 (JSON) or with the error frame
/// (stream) once the timeout has passed, not after one timeout per attempt (three attempts
/// and their backoff took more than three times the timeout).
#[tokio::test]
async fn the_provider_timeout_bounds_the_whole_wait_retries_included() {
    let timeout = Duration::from_secs(2);
    let (app, mock) = with_mock(|c| c.providers.timeout = timeout).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;

    let started = Instant::now();
    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "hush [[delay:20000]]"}),
        )
        .await;
    let body = assert_error(res, 504, "Gateway Timeout", None).await;
    let waited = started.elapsed();
    assert!(waited >= timeout, "{waited:?}");
    assert!(waited < 2 * timeout, "the 504 came after {waited:?}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("OpenAI-compatible provider") && message.contains("2 s"),
        "{message}"
    );

    let started = Instant::now();
    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "hush again [[delay:20000]]", "stream": true}),
        )
        .await;
    let frames = sse_data(&res.text().await.unwrap());
    let waited = started.elapsed();
    let error = end_frame(&frames);
    assert_eq!(error["error"], "Gateway Timeout", "{error}");
    assert!(waited >= timeout, "{waited:?}");
    assert!(
        waited < 2 * timeout,
        "the error frame came after {waited:?}"
    );
    drop(mock);
}

/// `PROVIDER_TIMEOUT_SECS` also bounds every silence inside a reply: a provider that stops
/// sending after its first tokens ends the reply with a timeout once the timeout has passed
/// (the error frame, then `[DONE]`; 504 in JSON), and what came before is stored as a failed
/// reply. Silences shorter than the timeout are waited for.
#[tokio::test]
async fn a_provider_silent_in_the_middle_of_a_reply_times_out() {
    let timeout = Duration::from_millis(600);
    let (app, mock) = with_mock(|c| c.providers.timeout = timeout).await;
    let user = app.user().await;
    let id = agent_with(&app, &user, "gpt-4o-mini").await;

    let started = Instant::now();
    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "one two [[pause:20000]]", "stream": true}),
        )
        .await;
    let thread = res.headers()["x-thread-id"].to_str().unwrap().to_string();
    let frames = sse_data(&res.text().await.unwrap());
    let waited = started.elapsed();
    let error = end_frame(&frames);
    assert_eq!(error["error"], "Gateway Timeout", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("timed out"),
        "{error}"
    );
    assert!(
        frames.len() > 2,
        "chunks came before the silence: {frames:?}"
    );
    assert!(waited >= timeout, "{waited:?}");
    assert!(
        waited < Duration::from_secs(5),
        "the error came after {waited:?}"
    );
    let msgs = app.messages(&user.access, &id, &thread).await;
    let last = msgs.last().unwrap();
    assert_eq!(last["status"], "failed");
    assert!(
        last["content"].as_str().unwrap().starts_with("Echo:"),
        "{last}"
    );

    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "one two [[pause:20000]]"}),
        )
        .await;
    assert_error(res, 504, "Gateway Timeout", None).await;

    // Silences are counted from the last token: a late answer, then a pause, each shorter
    // than the timeout but longer together, are waited for.
    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "a b [[delay:400]][[pause:400]]", "stream": true}),
        )
        .await;
    let frames = sse_data(&res.text().await.unwrap());
    assert!(
        frames.iter().all(|f| !f.contains("\"error\"")),
        "{frames:?}"
    );
    assert_eq!(frames.last().unwrap(), "[DONE]");
    drop(mock);
}

/// A provider that cannot be reached is named in the 502, the stream's error frame and the
/// stored reply, never by its URL, host or port (the details go to the log).
#[tokio::test]
async fn provider_errors_name_the_provider_never_its_address() {
    let (app, mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    // The model list is read (and cached) while the provider is up; then it goes away and
    // its port is closed.
    let id = agent_with(&app, &user, "gpt-4o-mini").await;
    let port = mock.addr.port().to_string();
    drop(mock);
    let leaks = |text: &str| {
        ["127.0.0.1", "localhost", port.as_str(), "http", "/v1"]
            .into_iter()
            .filter(|leak| text.contains(leak))
            .collect::<Vec<_>>()
    };

    let res = app
        .chat(&user.access, &id, json!({"message": "anyone there?"}))
        .await;
    let body = assert_error(res, 502, "Bad Gateway", None).await;
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("OpenAI-compatible provider"), "{message}");
    assert!(leaks(message).is_empty(), "{message}");

    let res = app
        .chat(
            &user.access,
            &id,
            json!({"message": "anyone at all?", "stream": true}),
        )
        .await;
    let frames = sse_data(&res.text().await.unwrap());
    let error: Value = serde_json::from_str(&frames[frames.len() - 2]).unwrap();
    assert_eq!(error["error"], "Bad Gateway", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("OpenAI-compatible provider"), "{message}");
    assert!(leaks(message).is_empty(), "{message}");

    // The failed replies are stored with their error: without the address either.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !contains(&app.database_bytes(), &format!("127.0.0.1:{port}")),
        "the provider's address is stored"
    );
}

/// Tool calling through each provider's own client code, against the mock, which parses
/// the tool history as strictly as the real APIs: the calls a model makes come out whole as
/// [`agentchat::llm::Event::ToolCall`]s, and a history holding them with their results is
/// accepted and answered.
mod tool_calls {
    use std::time::Duration;

    use agentchat::llm::{
        remote::{Flavor, RemoteProvider},
        Event, FinishReason, Prompt, Provider, Role, ToolCall, ToolChoice, ToolExchange, ToolSpec,
        Turn,
    };
    use futures::StreamExt;
    use mock_provider::{MockConfig, MockProvider};
    use secrecy::SecretString;
    use serde_json::{json, Value};

    use super::KEY;

    const QUESTION: &str =
        r#"weather and time? [[call:get_weather:{"city":"Paris"}]] [[call:now:{}]]"#;

    async fn provider(flavor: Flavor) -> (RemoteProvider, MockProvider, &'static str) {
        let mock = MockProvider::start(MockConfig {
            api_key: Some(KEY.into()),
            ..MockConfig::default()
        })
        .await
        .unwrap();
        let provider = RemoteProvider::new(
            flavor,
            &mock.base_url(),
            SecretString::from(KEY),
            Duration::from_secs(10),
        )
        .unwrap();
        let model = match flavor {
            Flavor::OpenAi => "gpt-4o-mini",
            Flavor::Anthropic => "claude-sonnet-4-5",
        };
        (provider, mock, model)
    }

    fn tools() -> Vec<ToolSpec> {
        vec![
            ToolSpec {
                name: "get_weather".into(),
                description: "The weather in a city".into(),
                parameters: json!({"type": "object", "properties": {"city": {"type": "string"}},
                                   "required": ["city"]}),
            },
            ToolSpec {
                name: "now".into(),
                description: String::new(),
                parameters: json!({"type": "object", "properties": {}}),
            },
        ]
    }

    async fn events(provider: &RemoteProvider, model: &str, prompt: &Prompt) -> Vec<Event> {
        provider
            .stream(model, prompt)
            .await
            .expect("the stream starts")
            .map(|event| event.expect("an event"))
            .collect()
            .await
    }

    /// The last request the mock received.
    fn last_body(mock: &MockProvider) -> Value {
        mock.requests()
            .into_iter()
            .rfind(|r| r.method == "POST")
            .unwrap()
            .body
    }

    async fn calls_then_results(flavor: Flavor, id_prefix: &str) {
        let (provider, mock, model) = provider(flavor).await;
        let mut prompt = Prompt {
            system: "Be brief".into(),
            turns: vec![Turn::text(Role::User, QUESTION)],
            tools: tools(),
            ..Prompt::default()
        };
        let seen = events(&provider, model, &prompt).await;
        assert_eq!(seen.len(), 3, "{flavor:?}: {seen:?}");
        let calls: Vec<ToolCall> = seen[..2]
            .iter()
            .map(|event| match event {
                Event::ToolCall(call) => call.clone(),
                other => panic!("{flavor:?}: {other:?}"),
            })
            .collect();
        assert_eq!(calls[0].name, "get_weather");
        let arguments: Value = serde_json::from_str(&calls[0].arguments).unwrap();
        assert_eq!(arguments, json!({"city": "Paris"}));
        assert_eq!(
            (calls[1].name.as_str(), calls[1].arguments.as_str()),
            ("now", "{}")
        );
        assert!(
            calls.iter().all(|c| c.id.starts_with(id_prefix)) && calls[0].id != calls[1].id,
            "{calls:?}"
        );
        // The mock counts one token per call and per fragment of its arguments: (1 + 2) * 2.
        let Event::End(usage, finish) = &seen[2] else {
            panic!("{seen:?}")
        };
        assert_eq!(*finish, FinishReason::ToolCalls, "{flavor:?}");
        assert_eq!(usage.map(|u| u.completion), Some(6), "{flavor:?}");
        let offered = last_body(&mock);
        assert_eq!(
            offered["tools"].as_array().map(Vec::len),
            Some(2),
            "{offered}"
        );

        // The model's calls with their results, one of them an error.
        prompt.turns.push(Turn {
            role: Role::Assistant,
            content: String::new(),
            tool_calls: vec![
                ToolExchange {
                    call: calls[0].clone(),
                    result: r#"{"temp":18}"#.into(),
                    is_error: false,
                },
                ToolExchange {
                    call: calls[1].clone(),
                    result: "Error: no clock".into(),
                    is_error: true,
                },
            ],
        });
        let seen = events(&provider, model, &prompt).await;
        let text: String = seen
            .iter()
            .filter_map(|event| match event {
                Event::Delta(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            text, r#"Tool results: {"temp":18} | Error: no clock"#,
            "{flavor:?}"
        );
        assert!(
            matches!(seen.last(), Some(Event::End(Some(_), FinishReason::Stop))),
            "{flavor:?}: {seen:?}"
        );
        let sent = last_body(&mock);
        let messages = sent["messages"].as_array().unwrap();
        match flavor {
            Flavor::OpenAi => {
                let roles: Vec<&str> = messages
                    .iter()
                    .map(|m| m["role"].as_str().unwrap())
                    .collect();
                assert_eq!(roles, ["system", "user", "assistant", "tool", "tool"]);
                assert_eq!(messages[2]["content"], Value::Null);
                assert_eq!(messages[2]["tool_calls"][0]["id"], calls[0].id.as_str());
                assert_eq!(messages[4]["tool_call_id"], calls[1].id.as_str());
                assert_eq!(sent["tool_choice"], "auto");
            }
            Flavor::Anthropic => {
                assert_eq!(messages.len(), 3, "{sent}");
                assert_eq!(messages[1]["content"][0]["type"], "tool_use");
                assert_eq!(messages[1]["content"][0]["input"], json!({"city": "Paris"}));
                let results = &messages[2]["content"];
                assert_eq!(results[0]["tool_use_id"], calls[0].id.as_str());
                assert!(results[0].get("is_error").is_none(), "{results}");
                assert_eq!(results[1]["is_error"], true, "{results}");
                assert_eq!(sent["tool_choice"], json!({"type": "auto"}));
            }
        }
    }

    #[tokio::test]
    async fn openai_calls_come_out_whole_and_their_results_are_accepted() {
        calls_then_results(Flavor::OpenAi, "call_").await;
    }

    #[tokio::test]
    async fn anthropic_calls_come_out_whole_and_their_results_are_accepted() {
        calls_then_results(Flavor::Anthropic, "toolu_").await;
    }

    /// `genai` would send a tool named `web_search` as Anthropic's own web search; it goes
    /// as the agent's tool. A named tool choice reaches both APIs in their terms.
    #[tokio::test]
    async fn named_tool_choices_and_a_tool_named_web_search() {
        let mut tools = tools();
        tools.push(ToolSpec {
            name: "web_search".into(),
            description: "Searches our wiki".into(),
            parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        });
        let prompt = Prompt {
            turns: vec![Turn::text(
                Role::User,
                r#"find [[call:web_search:{"q":"pricing"}]]"#,
            )],
            tools,
            tool_choice: ToolChoice::Named("web_search".into()),
            ..Prompt::default()
        };
        for flavor in [Flavor::OpenAi, Flavor::Anthropic] {
            let (provider, mock, model) = provider(flavor).await;
            let seen = events(&provider, model, &prompt).await;
            assert!(
                matches!(&seen[0], Event::ToolCall(call) if call.name == "web_search" && call.arguments == r#"{"q":"pricing"}"#),
                "{flavor:?}: {seen:?}"
            );
            let sent = last_body(&mock);
            match flavor {
                Flavor::OpenAi => assert_eq!(
                    sent["tool_choice"],
                    json!({"type": "function", "function": {"name": "web_search"}})
                ),
                Flavor::Anthropic => {
                    assert_eq!(
                        sent["tool_choice"],
                        json!({"type": "tool", "name": "web_search"})
                    );
                    assert_eq!(
                        sent["tools"][2],
                        json!({"name": "web_search", "description": "Searches our wiki",
                               "input_schema": prompt.tools[2].parameters}),
                        "{sent}"
                    );
                }
            }
        }
    }

    /// `required` reaches OpenAI as itself and Anthropic as `any`; the model must call a
    /// tool, and the mock calls the first one offered when the message asks for none.
    #[tokio::test]
    async fn a_required_tool_choice_reaches_both_apis_in_their_terms() {
        let prompt = Prompt {
            turns: vec![Turn::text(Role::User, "hello")],
            tools: tools(),
            tool_choice: ToolChoice::Required,
            ..Prompt::default()
        };
        for flavor in [Flavor::OpenAi, Flavor::Anthropic] {
            let (provider, mock, model) = provider(flavor).await;
            let seen = events(&provider, model, &prompt).await;
            assert!(
                matches!(&seen[0], Event::ToolCall(call) if call.name == "get_weather" && call.arguments == "{}"),
                "{flavor:?}: {seen:?}"
            );
            assert!(
                matches!(seen.last(), Some(Event::End(_, FinishReason::ToolCalls))),
                "{flavor:?}: {seen:?}"
            );
            let sent = last_body(&mock);
            let expected = match flavor {
                Flavor::OpenAi => json!("required"),
                Flavor::Anthropic => json!({"type": "any"}),
            };
            assert_eq!(sent["tool_choice"], expected, "{flavor:?}");
        }
    }
}
