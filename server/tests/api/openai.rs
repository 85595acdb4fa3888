//! The OpenAI-compatible API (docs/api.md § OpenAI-compatible API), driven by a real client
//! of OpenAI's API, the `async-openai` crate, pointed at `/api/openai/v1` with an AgentChat
//! key: agents as models, completions and streams through the mock provider, the history
//! and sampling parameters that reach the provider, the conversation each call is recorded
//! as, errors in OpenAI's shape with the statuses the SDKs expect, tenancy, scopes and the
//! rate limit.

use std::time::Duration;

use async_openai::{
    config::OpenAIConfig,
    error::OpenAIError,
    types::chat::{
        ChatCompletionRequestAssistantMessageArgs, ChatCompletionRequestMessage,
        ChatCompletionRequestSystemMessageArgs, ChatCompletionRequestUserMessageArgs,
        ChatCompletionStreamOptions, CreateChatCompletionRequest, CreateChatCompletionRequestArgs,
        FinishReason, Role, StopConfiguration,
    },
    Client,
};
use futures::StreamExt;
use mock_provider::RecordedRequest;
use serde_json::{json, Value};

use crate::{
    chat::{end_frame, sse_data},
    helpers::*,
    providers::{agent_with, with_mock},
};

/// An `async-openai` client of `app`'s OpenAI-compatible API with `key` (an API key or an
/// access token). It does not retry: a 429 or 5xx is the test's to see.
fn openai(app: &TestApp, key: &str) -> Client<OpenAIConfig> {
    let config = OpenAIConfig::new()
        .with_api_base(app.url("/api/openai/v1"))
        .with_api_key(key);
    Client::with_config(config).with_backoff(backoff::ExponentialBackoff {
        max_elapsed_time: Some(Duration::ZERO),
        ..Default::default()
    })
}

fn system(text: &str) -> ChatCompletionRequestMessage {
    ChatCompletionRequestSystemMessageArgs::default()
        .content(text)
        .build()
        .unwrap()
        .into()
}

fn user_says(text: &str) -> ChatCompletionRequestMessage {
    ChatCompletionRequestUserMessageArgs::default()
        .content(text)
        .build()
        .unwrap()
        .into()
}

fn assistant_says(text: &str) -> ChatCompletionRequestMessage {
    ChatCompletionRequestAssistantMessageArgs::default()
        .content(text)
        .build()
        .unwrap()
        .into()
}

/// A one-message request to `model`.
fn ask(model: &str, text: &str) -> CreateChatCompletionRequest {
    CreateChatCompletionRequestArgs::default()
        .model(model)
        .messages(vec![user_says(text)])
        .build()
        .unwrap()
}

/// The chat requests the mock provider received.
fn upstream(mock: &mock_provider::MockProvider) -> Vec<RecordedRequest> {
    mock.requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect()
}

/// The `(role, content)` pairs of a recorded OpenAI or Anthropic request's messages.
fn roles_and_texts(messages: &Value) -> Vec<(String, String)> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let content = match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(""),
                _ => String::new(),
            };
            (m["role"].as_str().unwrap().to_string(), content)
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// `POST /api/openai/v1/chat/completions` with a raw body, for what a typed client cannot send.
async fn raw_completion(app: &TestApp, key: Option<&str>, body: Value) -> reqwest::Response {
    app.post("/api/openai/v1/chat/completions", key, body).await
}

/// Asserts OpenAI's error shape with `status`, `type`, `code` and `param` (`None`: null);
/// returns the `error` object.
async fn assert_openai_error(
    res: reqwest::Response,
    status: u16,
    kind: &str,
    code: Option<&str>,
    param: Option<&str>,
) -> Value {
    assert_eq!(res.status().as_u16(), status);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"),
        "error bodies are JSON"
    );
    let body: Value = res.json().await.unwrap();
    let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["error"], "{body}");
    let error = body["error"].clone();
    let mut fields: Vec<&String> = error.as_object().unwrap().keys().collect();
    fields.sort();
    assert_eq!(fields, ["code", "message", "param", "type"], "{body}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert_eq!(error["type"], kind, "{body}");
    assert_eq!(
        error["code"],
        code.map_or(Value::Null, Value::from),
        "{body}"
    );
    assert_eq!(
        error["param"],
        param.map_or(Value::Null, Value::from),
        "{body}"
    );
    error
}

/// The `ApiError` an `async-openai` call failed with.
fn api_error<T: std::fmt::Debug>(result: Result<T, OpenAIError>) -> async_openai::error::ApiError {
    match result {
        Err(OpenAIError::ApiError(e)) => e,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn models_are_the_callers_agents() {
    let app = spawn_app().await;
    let user = app.user().await;
    let other = app.user().await;
    let first = agent_with(&app, &user, "").await;
    let second = agent_with(&app, &user, "agentchat-offline").await;
    let foreign = agent_with(&app, &other, "").await;
    let (_, key) = app.api_key(&user, &["agents:read"]).await;

    for credential in [&key, &user.access] {
        let client = openai(&app, credential);
        let list = client.models().list().await.unwrap();
        assert_eq!(list.object, "list");
        let ids: Vec<&str> = list.data.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(
            ids,
            [first.as_str(), second.as_str()],
            "oldest first, only mine"
        );
        for model in &list.data {
            assert_eq!(
                (model.object.as_str(), model.owned_by.as_str()),
                ("model", "agentchat")
            );
            assert!(model.created > 1_700_000_000);
        }
        let one = client.models().retrieve(&second).await.unwrap();
        assert_eq!(one.id, second);
    }

    // The extension names the agent.
    let res = app
        .get(&format!("/api/openai/v1/models/{second}"), Some(&key))
        .await;
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["agentchat"]["name"], "Bot");
    assert_eq!(body["agentchat"]["model"], "agentchat-offline");

    // Another account's agent is as unknown as an agent that does not exist.
    let client = openai(&app, &key);
    for id in [foreign.as_str(), "no-such-agent"] {
        let err = api_error(client.models().retrieve(id).await);
        assert_eq!(err.code.as_deref(), Some("model_not_found"), "{err:?}");
        let res = app
            .get(&format!("/api/openai/v1/models/{id}"), Some(&key))
            .await;
        let error = assert_openai_error(
            res,
            404,
            "invalid_request_error",
            Some("model_not_found"),
            None,
        )
        .await;
        assert_eq!(
            error["message"],
            format!("The model `{id}` does not exist or you do not have access to it.")
        );
    }
}

#[tokio::test]
async fn a_completion_runs_the_agent_with_the_conversation_and_is_recorded() {
    let (app, mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let agent = agent_with(&app, &user, "gpt-4o-mini").await;
    let (_, key) = app.api_key(&user, &["chat:write"]).await;
    let client = openai(&app, &key);
    let request = CreateChatCompletionRequestArgs::default()
        .model(&agent)
        .messages(vec![
            system("Answer in French."),
            user_says("hello there"),
            assistant_says("Echo: hello there"),
            user_says("and more"),
        ])
        .temperature(0.25)
        .top_p(0.5)
        .max_tokens(40u32)
        .stop(StopConfiguration::StringArray(vec!["STOP".into()]))
        .user("end-user-7")
        .build()
        .unwrap();
    let reply = client.chat().create(request).await.unwrap();
    assert_eq!(reply.object, "chat.completion");
    assert_eq!(reply.model, agent, "the model asked for: the agent");
    assert!(reply.id.starts_with("chatcmpl-"));
    assert_eq!(reply.choices.len(), 1);
    let choice = &reply.choices[0];
    assert_eq!(choice.index, 0);
    assert_eq!(choice.message.role, Role::Assistant);
    assert_eq!(choice.message.content.as_deref(), Some("Echo: and more"));
    assert_eq!(choice.finish_reason, Some(FinishReason::Stop));
    let usage = reply.usage.clone().unwrap();
    // The mock counts the words of every message sent (system prompt included) and the
    // chunks of the reply: its usage is passed on.
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens
        ),
        (12, 3, 15)
    );

    // The provider got the agent's system prompt with the caller's after it, the history,
    // the new turn, and the sampling parameters under OpenAI's names.
    let sent = upstream(&mock);
    assert_eq!(sent.len(), 1);
    let body = &sent[0].body;
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(
        roles_and_texts(&body["messages"]),
        pairs(&[
            ("system", "Be brief\n\nAnswer in French."),
            ("user", "hello there"),
            ("assistant", "Echo: hello there"),
            ("user", "and more"),
        ])
    );
    assert_eq!(body["temperature"], 0.25);
    assert_eq!(body["top_p"], 0.5);
    assert_eq!(body["max_tokens"], 40);
    assert_eq!(body["stop"], json!(["STOP"]));
    assert_eq!(body["user"], "end-user-7");

    // The call is a conversation of the agent: the new turn and the reply, with its usage.
    let conversations: Value = app
        .get(
            &format!("/api/agents/{agent}/conversations"),
            Some(&user.access),
        )
        .await
        .json()
        .await
        .unwrap();
    let listed = conversations["conversations"].as_array().unwrap();
    assert_eq!(listed.len(), 1);
    let thread = listed[0]["threadId"].as_str().unwrap();
    assert_eq!(reply.id, format!("chatcmpl-{thread}"));
    let messages = app.messages(&user.access, &agent, thread).await;
    assert_eq!(messages.len(), 2);
    assert_eq!(
        (&messages[0]["role"], &messages[0]["content"]),
        (&json!("user"), &json!("and more"))
    );
    assert_eq!(messages[1]["content"], "Echo: and more");
    assert_eq!(
        messages[1]["tokensUsed"],
        json!({"prompt": 12, "completion": 3, "total": 15})
    );
    let usage: Value = app
        .get("/api/usage?days=1", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(usage["chatsThisMonth"], 1);

    // The extension field, which SDKs ignore, has the conversation, the model and sources.
    let res = raw_completion(
        &app,
        Some(&key),
        json!({"model": agent, "messages": [{"role": "user", "content": "once more"}]}),
    )
    .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["agentchat"]["model"], "gpt-4o-mini");
    assert_eq!(body["agentchat"]["ragChunksUsed"], 0);
    assert_eq!(body["agentchat"]["sources"], json!([]));
    assert_eq!(
        format!(
            "chatcmpl-{}",
            body["agentchat"]["threadId"].as_str().unwrap()
        ),
        body["id"].as_str().unwrap()
    );
    assert!(body["choices"][0]["logprobs"].is_null());
}

#[tokio::test]
async fn sampling_parameters_reach_anthropic_in_its_own_names() {
    let (app, mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let agent = agent_with(&app, &user, "claude-haiku-4-5").await;
    let res = raw_completion(
        &app,
        Some(&user.access),
        json!({
            "model": agent,
            "messages": [{"role": "developer", "content": "Use short words."},
                         {"role": "user", "content": "hi"}],
            "max_completion_tokens": 30, "stop": "END", "temperature": 0.1, "user": "visitor-3"
        }),
    )
    .await;
    assert_eq!(res.status(), 200);
    let sent = upstream(&mock);
    let body = &sent.last().unwrap().body;
    assert_eq!(sent.last().unwrap().path, "/v1/messages");
    assert_eq!(body["max_tokens"], 30);
    assert_eq!(body["stop_sequences"], json!(["END"]));
    assert_eq!(body["temperature"], 0.1);
    assert_eq!(body["metadata"]["user_id"], "visitor-3");
    assert!(
        body["system"]
            .to_string()
            .contains("Be brief\\n\\nUse short words."),
        "{body}"
    );
}

#[tokio::test]
async fn a_reply_cut_by_the_token_limit_finishes_with_length() {
    let (app, _mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let agent = agent_with(&app, &user, "gpt-4o-mini").await;
    let client = openai(&app, &user.access);
    let mut request = ask(&agent, "one two three four five six");
    request.max_completion_tokens = Some(2);
    let reply = client.chat().create(request).await.unwrap();
    assert_eq!(reply.choices[0].finish_reason, Some(FinishReason::Length));
    assert_eq!(
        reply.choices[0].message.content.as_deref(),
        Some("Echo: one")
    );

    // The offline model keeps to the limit too.
    let offline = agent_with(&app, &user, "agentchat-offline").await;
    let mut request = ask(&offline, "hello");
    request.max_completion_tokens = Some(3);
    let reply = client.chat().create(request).await.unwrap();
    assert_eq!(reply.choices[0].finish_reason, Some(FinishReason::Length));
    assert!(reply.usage.unwrap().completion_tokens <= 3);
}

#[tokio::test]
async fn a_stream_is_read_to_its_end_with_usage() {
    let (app, _mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let agent = agent_with(&app, &user, "gpt-4o-mini").await;
    let (_, key) = app.api_key(&user, &["chat:write"]).await;
    let client = openai(&app, &key);
    let mut request = ask(&agent, "stream this please");
    request.stream = Some(true);
    request.stream_options = Some(ChatCompletionStreamOptions {
        include_usage: Some(true),
        include_obfuscation: None,
    });
    let mut stream = client.chat().create_stream(request).await.unwrap();
    let mut chunks = Vec::new();
    while let Some(chunk) = stream.next().await {
        chunks.push(chunk.unwrap());
    }
    assert!(chunks.len() >= 4, "{chunks:?}");
    let first = &chunks[0];
    assert_eq!(first.choices[0].delta.role, Some(Role::Assistant));
    assert!(chunks
        .iter()
        .all(|c| c.id == first.id && c.created == first.created));
    assert!(chunks
        .iter()
        .all(|c| c.object == "chat.completion.chunk" && c.model == agent));
    let text: String = chunks
        .iter()
        .flat_map(|c| c.choices.iter())
        .filter_map(|c| c.delta.content.clone())
        .collect();
    assert_eq!(text, "Echo: stream this please");
    let finishing: Vec<_> = chunks
        .iter()
        .filter(|c| c.choices.first().is_some_and(|c| c.finish_reason.is_some()))
        .collect();
    assert_eq!(finishing.len(), 1);
    assert_eq!(
        finishing[0].choices[0].finish_reason,
        Some(FinishReason::Stop)
    );
    let last = chunks.last().unwrap();
    assert!(last.choices.is_empty(), "the usage chunk has no choice");
    let usage = last.usage.clone().unwrap();
    assert_eq!(usage.completion_tokens, 4);
    assert_eq!(
        usage.total_tokens,
        usage.prompt_tokens + usage.completion_tokens
    );
    assert!(chunks[..chunks.len() - 1].iter().all(|c| c.usage.is_none()));

    // Recorded like a JSON completion.
    let thread = first.id.strip_prefix("chatcmpl-").unwrap();
    let messages = app.messages(&user.access, &agent, thread).await;
    assert_eq!(messages[1]["content"], "Echo: stream this please");
    assert_eq!(messages[1]["status"], "complete");
    assert_eq!(messages[1]["tokensUsed"]["completion"], 4);

    // On the wire: no usage field without `include_usage`, the extension with the finish
    // reason, `[DONE]` last.
    let res = raw_completion(
        &app,
        Some(&key),
        json!({"model": agent, "messages": [{"role": "user", "content": "again"}], "stream": true}),
    )
    .await;
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    assert!(res.headers().contains_key("x-thread-id"));
    let frames = sse_data(&res.text().await.unwrap());
    assert_eq!(frames.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = frames[..frames.len() - 1]
        .iter()
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    assert_eq!(
        chunks[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": ""})
    );
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert_eq!(last["choices"][0]["delta"], json!({}));
    assert_eq!(last["agentchat"]["model"], "gpt-4o-mini");
    assert_eq!(last["agentchat"]["ragChunksUsed"], 0);
}

#[tokio::test]
async fn knowledge_is_retrieved_for_the_last_user_turn() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent_with(&app, &user, "agentchat-offline").await;
    let doc = app
        .uploaded(
            &user.access,
            &agent,
            "volcanoes.md",
            b"# Volcanoes\n\nMagma chambers feed basaltic eruptions on Iceland.".to_vec(),
        )
        .await;
    let settled = app.settled(&user.access, &agent, &doc).await;
    assert_eq!(settled["status"], "indexed", "{settled}");
    let ask_about = |history: &str, last: &str| {
        json!({"model": agent, "messages": [
            {"role": "user", "content": history},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": last}]})
    };
    let res = raw_completion(
        &app,
        Some(&user.access),
        ask_about("hello", "Tell me about magma chambers"),
    )
    .await;
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["agentchat"]["ragChunksUsed"], 1, "{body}");
    assert_eq!(body["agentchat"]["sources"][0]["documentId"], doc.as_str());
    assert!(body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .contains("Magma chambers"));

    // Only the last user turn is the query: knowledge an earlier turn would match is not
    // retrieved.
    let res = raw_completion(
        &app,
        Some(&user.access),
        ask_about("magma chambers", "and the weather?"),
    )
    .await;
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["agentchat"]["ragChunksUsed"], 0, "{body}");
}

#[tokio::test]
async fn errors_have_openais_shape_and_status() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent_with(&app, &user, "agentchat-offline").await;
    let chat = "/api/openai/v1/chat/completions";
    let ok = json!({"model": agent, "messages": [{"role": "user", "content": "hi"}]});

    // 401: no credential, a wrong one; the SDK reads the code.
    assert_openai_error(
        raw_completion(&app, None, ok.clone()).await,
        401,
        "invalid_request_error",
        Some("invalid_api_key"),
        None,
    )
    .await;
    assert_openai_error(
        raw_completion(&app, Some("key_not-a-real-key"), ok.clone()).await,
        401,
        "invalid_request_error",
        Some("invalid_api_key"),
        None,
    )
    .await;
    assert_openai_error(
        app.get("/api/openai/v1/models", Some("nonsense")).await,
        401,
        "invalid_request_error",
        Some("invalid_api_key"),
        None,
    )
    .await;
    let err = api_error(
        openai(&app, "key_wrong")
            .chat()
            .create(ask(&agent, "hi"))
            .await,
    );
    assert_eq!(err.code.as_deref(), Some("invalid_api_key"));

    // 404: an unknown agent, named as the `model` parameter.
    let err = api_error(
        openai(&app, &user.access)
            .chat()
            .create(ask("nobody", "hi"))
            .await,
    );
    assert_eq!(
        (
            err.code.as_deref(),
            err.param.as_deref(),
            err.r#type.as_deref()
        ),
        (
            Some("model_not_found"),
            Some("model"),
            Some("invalid_request_error")
        )
    );

    // 400 with the parameter at fault.
    let invalid = [
        (
            json!({"model": agent, "messages": [{"role": "user", "content": "hi"}], "temperature": 3}),
            "temperature",
            None,
        ),
        (
            json!({"model": agent, "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}),
            "temperature",
            None,
        ),
        (
            json!({"model": agent, "messages": [{"role": "user", "content": "hi"}], "n": 3}),
            "n",
            Some("unsupported_parameter"),
        ),
        (
            json!({"model": agent, "messages": [{"role": "user", "content": "hi"}],
            "functions": [{"name": "f"}]}),
            "functions",
            Some("unsupported_parameter"),
        ),
        (
            json!({"model": agent, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]}),
            "messages[0].content[1]",
            Some("unsupported_parameter"),
        ),
        (json!({"model": agent, "messages": []}), "messages", None),
        (
            json!({"messages": [{"role": "user", "content": "hi"}]}),
            "model",
            None,
        ),
        (
            json!({"model": agent, "messages": [{"role": "assistant", "content": "hi"}]}),
            "messages",
            None,
        ),
    ];
    for (body, param, code) in invalid {
        let res = raw_completion(&app, Some(&user.access), body.clone()).await;
        assert_openai_error(res, 400, "invalid_request_error", code, Some(param)).await;
    }
    let err = api_error(
        openai(&app, &user.access)
            .chat()
            .create({
                let mut r = ask(&agent, "hi");
                r.n = Some(2);
                r
            })
            .await,
    );
    assert_eq!(err.param.as_deref(), Some("n"));

    // The framework's refusals: malformed JSON, another content type, a body over 1 MiB,
    // an unknown path, a wrong method.
    let malformed = app
        .client
        .post(app.url(chat))
        .bearer_auth(&user.access)
        .header("content-type", "application/json")
        .body("{\"model\": ")
        .send()
        .await
        .unwrap();
    assert_openai_error(malformed, 400, "invalid_request_error", None, None).await;
    let form = app
        .client
        .post(app.url(chat))
        .bearer_auth(&user.access)
        .header("content-type", "text/plain")
        .body(ok.to_string())
        .send()
        .await
        .unwrap();
    assert_openai_error(form, 415, "invalid_request_error", None, None).await;
    let huge =
        json!({"model": agent, "messages": [{"role": "user", "content": "x".repeat(1_100_000)}]});
    assert_openai_error(
        raw_completion(&app, Some(&user.access), huge).await,
        413,
        "invalid_request_error",
        None,
        None,
    )
    .await;
    let too_long =
        json!({"model": agent, "messages": [{"role": "user", "content": "x".repeat(40_000)}]});
    assert_openai_error(
        raw_completion(&app, Some(&user.access), too_long).await,
        400,
        "invalid_request_error",
        None,
        Some("messages"),
    )
    .await;
    assert_openai_error(
        app.get("/api/openai/v1/embeddings", Some(&user.access))
            .await,
        404,
        "invalid_request_error",
        None,
        None,
    )
    .await;
    assert_openai_error(
        app.get(chat, Some(&user.access)).await,
        405,
        "invalid_request_error",
        None,
        None,
    )
    .await;

    // The rest of the API keeps the contract's body.
    assert_unauthorized(app.get("/api/agents", None).await).await;
}

#[tokio::test]
async fn provider_failures_are_5xx_before_the_stream_and_an_error_event_after() {
    let (app, mock) = with_mock(|c| c.providers.timeout = Duration::from_millis(500)).await;
    let user = app.user().await;
    let agent = agent_with(&app, &user, "gpt-4o-mini").await;
    let request = |text: &str, stream: bool| json!({"model": agent, "messages": [{"role": "user", "content": text}], "stream": stream});

    let res = raw_completion(
        &app,
        Some(&user.access),
        request("fail [[status:400]]", false),
    )
    .await;
    let error = assert_openai_error(res, 502, "server_error", Some("upstream_error"), None).await;
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("mock failure 400"),
        "{error}"
    );
    let res = raw_completion(
        &app,
        Some(&user.access),
        request("slow [[delay:3000]]", false),
    )
    .await;
    assert_openai_error(res, 504, "server_error", Some("upstream_timeout"), None).await;

    // A stream whose provider fails before the first token is answered with the status too.
    let res = raw_completion(
        &app,
        Some(&user.access),
        request("fail [[status:400]]", true),
    )
    .await;
    assert_openai_error(res, 502, "server_error", Some("upstream_error"), None).await;
    let err = api_error({
        let client = openai(&app, &user.access);
        let mut req = ask(&agent, "fail again [[status:400]]");
        req.stream = Some(true);
        let mut stream = client.chat().create_stream(req).await.unwrap();
        stream.next().await.unwrap()
    });
    assert!(err.message.contains("upstream_error"), "{err:?}");

    // After it: an error event, then [DONE]; the reply is stored as failed.
    let res = raw_completion(
        &app,
        Some(&user.access),
        request("a b c d e f [[cut:3]]", true),
    )
    .await;
    assert_eq!(res.status(), 200);
    let thread = res.headers()["x-thread-id"].to_str().unwrap().to_string();
    let frames = sse_data(&res.text().await.unwrap());
    let error = end_frame(&frames);
    assert_eq!(error["error"]["type"], "server_error", "{error}");
    assert_eq!(error["error"]["code"], "upstream_error", "{error}");
    let messages = app.messages(&user.access, &agent, &thread).await;
    assert_eq!(messages.last().unwrap()["status"], "failed");
    drop(mock);
}

#[tokio::test]
async fn streams_send_heartbeats_and_stop_when_the_client_leaves() {
    let (app, mock) = with_mock(|c| c.chat.sse_heartbeat = Duration::from_millis(200)).await;
    let user = app.user().await;
    let agent = agent_with(&app, &user, "gpt-4o-mini").await;
    let request = |text: &str| json!({"model": agent, "messages": [{"role": "user", "content": text}], "stream": true});
    let body = raw_completion(&app, Some(&user.access), request("wait [[pause:900]]"))
        .await
        .text()
        .await
        .unwrap();
    assert!(body.contains(": ping\n"), "{body}");
    assert_eq!(sse_data(&body).last().unwrap(), "[DONE]");

    let res = raw_completion(&app, Some(&user.access), request("long one [[pause:5000]]")).await;
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
        "the provider's stream was cancelled before the pause ended"
    );
    let mut status = Value::Null;
    for _ in 0..40 {
        let messages = app.messages(&user.access, &agent, &thread).await;
        status = messages.last().unwrap()["status"].clone();
        if status == "cancelled" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, "cancelled");
}

#[tokio::test]
async fn scopes_are_checked_per_endpoint() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent_with(&app, &user, "agentchat-offline").await;
    let (_, reader) = app.api_key(&user, &["agents:read", "chat:read"]).await;
    let (_, writer) = app.api_key(&user, &["chat:write"]).await;

    let res = raw_completion(
        &app,
        Some(&reader),
        json!({"model": agent, "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    let error = assert_openai_error(
        res,
        403,
        "invalid_request_error",
        Some("insufficient_permissions"),
        None,
    )
    .await;
    assert!(
        error["message"].as_str().unwrap().contains("chat:write"),
        "{error}"
    );
    assert!(openai(&app, &reader).models().list().await.is_ok());

    let res = app.get("/api/openai/v1/models", Some(&writer)).await;
    let error = assert_openai_error(
        res,
        403,
        "invalid_request_error",
        Some("insufficient_permissions"),
        None,
    )
    .await;
    assert!(
        error["message"].as_str().unwrap().contains("agents:read"),
        "{error}"
    );
    let res = app
        .get(&format!("/api/openai/v1/models/{agent}"), Some(&writer))
        .await;
    assert_eq!(res.status(), 403);
    assert!(openai(&app, &writer)
        .chat()
        .create(ask(&agent, "hi"))
        .await
        .is_ok());
}

#[tokio::test]
async fn calls_count_against_the_accounts_rate_limit() {
    let app = spawn_app_with(|c| c.limits.rate_limits = [5, 500, 2000, 10000]).await;
    let user = app.user().await;
    let agent = agent_with(&app, &user, "agentchat-offline").await; // request 1
    let (_, key) = app.api_key(&user, &["agents:read", "chat:write"]).await; // 2
    let client = openai(&app, &key);
    client.models().list().await.unwrap(); // 3
    client.chat().create(ask(&agent, "hi")).await.unwrap(); // 4
    let res = raw_completion(
        &app,
        Some(&user.access),
        json!({"model": agent, "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await; // 5
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-ratelimit-limit"], "5");
    assert_eq!(res.headers()["x-ratelimit-remaining"], "0");

    let limited = app.get("/api/openai/v1/models", Some(&key)).await;
    let retry: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(limited.headers()["x-ratelimit-remaining"], "0");
    let error =
        assert_openai_error(limited, 429, "requests", Some("rate_limit_exceeded"), None).await;
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("5 requests per minute"),
        "{error}"
    );
    let err = api_error(client.chat().create(ask(&agent, "hi")).await);
    assert_eq!(err.code.as_deref(), Some("rate_limit_exceeded"));
    // The native API shares the budget and keeps its own body.
    assert_error(
        app.get("/api/agents", Some(&user.access)).await,
        429,
        "Rate limit exceeded",
        None,
    )
    .await;
}

/// Client-defined tools (docs/api.md § Chat completions, "Tools the client runs"), driven
/// by `async-openai`'s own types for tools, tool calls and tool messages.
mod client_tools {
    use std::sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    };

    use async_openai::types::chat::{
        ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
        ChatCompletionNamedToolChoice, ChatCompletionRequestAssistantMessageArgs,
        ChatCompletionRequestMessage, ChatCompletionRequestMessageContentPartText,
        ChatCompletionRequestToolMessage, ChatCompletionRequestToolMessageContent,
        ChatCompletionRequestToolMessageContentPart, ChatCompletionResponseMessage,
        ChatCompletionTool, ChatCompletionToolChoiceOption, ChatCompletionTools,
        CreateChatCompletionRequest, CreateChatCompletionRequestArgs, FinishReason, FunctionName,
        FunctionObject, FunctionType, ToolChoiceOptions,
    };
    use axum::{extract::Path, routing::get, Json, Router};
    use futures::StreamExt;
    use serde_json::{json, Value};

    use super::{
        assert_openai_error, openai, raw_completion, roles_and_texts, upstream, user_says,
    };
    use crate::{
        helpers::*,
        providers::{agent_with, with_mock},
    };

    const QUESTION: &str =
        r#"weather and time? [[call:get_weather:{"city":"Paris"}]] [[call:now:{}]]"#;

    fn function(
        name: &str,
        description: Option<&str>,
        parameters: Option<Value>,
    ) -> ChatCompletionTools {
        ChatCompletionTools::Function(ChatCompletionTool {
            function: FunctionObject {
                name: name.into(),
                description: description.map(str::to_string),
                parameters,
                strict: None,
            },
        })
    }

    fn tools() -> Vec<ChatCompletionTools> {
        vec![
            function(
                "get_weather",
                Some("The weather in a city"),
                Some(
                    json!({"type": "object", "properties": {"city": {"type": "string"}},
                            "required": ["city"]}),
                ),
            ),
            function("now", None, None),
        ]
    }

    fn asking(
        model: &str,
        messages: Vec<ChatCompletionRequestMessage>,
    ) -> CreateChatCompletionRequest {
        CreateChatCompletionRequestArgs::default()
            .model(model)
            .messages(messages)
            .tools(tools())
            .build()
            .unwrap()
    }

    /// The function calls of a reply's message.
    fn calls_of(message: &ChatCompletionResponseMessage) -> Vec<ChatCompletionMessageToolCall> {
        message
            .tool_calls
            .iter()
            .flatten()
            .map(|call| match call {
                ChatCompletionMessageToolCalls::Function(call) => call.clone(),
                other => panic!("not a function call: {other:?}"),
            })
            .collect()
    }

    /// The assistant's message of `calls`, as the client sends it back.
    fn assistant_called(calls: &[ChatCompletionMessageToolCall]) -> ChatCompletionRequestMessage {
        ChatCompletionRequestAssistantMessageArgs::default()
            .tool_calls(
                calls
                    .iter()
                    .cloned()
                    .map(ChatCompletionMessageToolCalls::Function)
                    .collect::<Vec<_>>(),
            )
            .build()
            .unwrap()
            .into()
    }

    fn tool_result(id: &str, text: &str) -> ChatCompletionRequestMessage {
        ChatCompletionRequestToolMessage {
            content: ChatCompletionRequestToolMessageContent::Text(text.into()),
            tool_call_id: id.into(),
        }
        .into()
    }

    /// A tool message of text parts.
    fn tool_result_parts(id: &str, text: &str) -> ChatCompletionRequestMessage {
        ChatCompletionRequestToolMessage {
            content: ChatCompletionRequestToolMessageContent::Array(vec![
                ChatCompletionRequestToolMessageContentPart::Text(
                    ChatCompletionRequestMessageContentPartText { text: text.into() },
                ),
            ]),
            tool_call_id: id.into(),
        }
        .into()
    }

    /// The conversations of `agent`, newest first, each as its messages.
    async fn conversations(app: &TestApp, user: &TestUser, agent: &str) -> Vec<Vec<Value>> {
        let listed: Value = app
            .get(
                &format!("/api/agents/{agent}/conversations"),
                Some(&user.access),
            )
            .await
            .json()
            .await
            .unwrap();
        let mut out = Vec::new();
        for c in listed["conversations"].as_array().unwrap() {
            let thread = c["threadId"].as_str().unwrap();
            out.push(app.messages(&user.access, agent, thread).await);
        }
        out
    }

    #[tokio::test]
    async fn a_tool_call_goes_to_the_client_and_its_result_comes_back() {
        for model in ["gpt-4o-mini", "claude-sonnet-4-5"] {
            let (app, mock) = with_mock(|_| {}).await;
            let user = app.user().await;
            let agent = agent_with(&app, &user, model).await;
            let (_, key) = app.api_key(&user, &["chat:write"]).await;
            let client = openai(&app, &key);

            let reply = client
                .chat()
                .create(asking(&agent, vec![user_says(QUESTION)]))
                .await
                .unwrap();
            let choice = &reply.choices[0];
            assert_eq!(
                choice.finish_reason,
                Some(FinishReason::ToolCalls),
                "{model}"
            );
            assert_eq!(choice.message.content, None, "{model}: calls alone");
            let calls = calls_of(&choice.message);
            let names: Vec<&str> = calls.iter().map(|c| c.function.name.as_str()).collect();
            assert_eq!(names, ["get_weather", "now"], "{model}");
            let arguments: Value = serde_json::from_str(&calls[0].function.arguments).unwrap();
            assert_eq!(arguments, json!({"city": "Paris"}));
            assert_eq!(calls[1].function.arguments, "{}");
            assert!(calls[0].id != calls[1].id && !calls[0].id.is_empty());
            // The mock counts one token per call and per piece of its arguments.
            let usage = reply.usage.clone().unwrap();
            assert_eq!(usage.completion_tokens, 6, "{model}");
            assert_eq!(usage.total_tokens, usage.prompt_tokens + 6);

            // The model was offered the client's tools, as the provider names them.
            let sent = upstream(&mock);
            assert_eq!(sent.len(), 1, "one model call: nothing ran inside");
            let body = &sent[0].body;
            match model {
                "gpt-4o-mini" => {
                    assert_eq!(body["tool_choice"], "auto");
                    assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
                    assert_eq!(
                        body["tools"][1]["function"]["parameters"],
                        json!({"type": "object", "properties": {}})
                    );
                }
                _ => {
                    assert_eq!(body["tool_choice"], json!({"type": "auto"}));
                    assert_eq!(body["tools"][0]["name"], "get_weather");
                    assert_eq!(body["tools"][0]["description"], "The weather in a city");
                }
            }

            // The client runs the calls and sends the results back.
            let continued = client
                .chat()
                .create(asking(
                    &agent,
                    vec![
                        user_says(QUESTION),
                        assistant_called(&calls),
                        tool_result(&calls[0].id, "18 C"),
                        tool_result_parts(&calls[1].id, "noon"),
                    ],
                ))
                .await
                .unwrap();
            let choice = &continued.choices[0];
            assert_eq!(choice.finish_reason, Some(FinishReason::Stop), "{model}");
            assert_eq!(
                choice.message.content.as_deref(),
                Some("Tool results: 18 C | noon"),
                "{model}"
            );
            assert!(choice.message.tool_calls.is_none());

            // The provider got the calls with their results, in its own terms.
            let sent = upstream(&mock);
            let body = &sent.last().unwrap().body;
            match model {
                "gpt-4o-mini" => {
                    let roles: Vec<String> = roles_and_texts(&body["messages"])
                        .into_iter()
                        .map(|(role, _)| role)
                        .collect();
                    assert_eq!(roles, ["system", "user", "assistant", "tool", "tool"]);
                    let messages = &body["messages"];
                    assert_eq!(messages[2]["content"], Value::Null);
                    assert_eq!(messages[2]["tool_calls"][0]["id"], calls[0].id.as_str());
                    assert_eq!(messages[3]["tool_call_id"], calls[0].id.as_str());
                    assert_eq!(messages[4]["content"], "noon");
                }
                _ => {
                    let messages = body["messages"].as_array().unwrap();
                    assert_eq!(messages.len(), 3, "{body}");
                    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
                    assert_eq!(messages[1]["content"][0]["id"], calls[0].id.as_str());
                    assert_eq!(messages[2]["content"][0]["type"], "tool_result");
                    assert_eq!(
                        messages[2]["content"][1]["tool_use_id"],
                        calls[1].id.as_str()
                    );
                }
            }

            // Each call is a conversation of the question and the reply, with the client's
            // calls: requested, then answered.
            let stored = conversations(&app, &user, &agent).await;
            assert_eq!(stored.len(), 2);
            let (answered, asked) = (&stored[0], &stored[1]);
            assert_eq!(asked[0]["content"], QUESTION);
            assert_eq!(asked[1]["content"], "");
            let requested = asked[1]["toolCalls"].as_array().unwrap();
            assert_eq!(requested.len(), 2);
            assert_eq!(
                (
                    &requested[0]["type"],
                    &requested[0]["status"],
                    &requested[0]["name"]
                ),
                (&json!("client"), &json!("requested"), &json!("get_weather"))
            );
            assert_eq!(requested[0]["arguments"], json!({"city": "Paris"}));
            assert_eq!(answered[0]["content"], QUESTION);
            assert_eq!(answered[1]["content"], "Tool results: 18 C | noon");
            let results = answered[1]["toolCalls"].as_array().unwrap();
            assert_eq!(
                (&results[1]["status"], &results[1]["output"]),
                (&json!("succeeded"), &json!("noon"))
            );
        }
    }

    #[tokio::test]
    async fn streamed_tool_calls_are_reassembled_by_the_sdk() {
        let (app, _mock) = with_mock(|_| {}).await;
        let user = app.user().await;
        let agent = agent_with(&app, &user, "gpt-4o-mini").await;
        let client = openai(&app, &user.access);
        let mut request = asking(&agent, vec![user_says(QUESTION)]);
        request.stream = Some(true);
        request.stream_options = Some(async_openai::types::chat::ChatCompletionStreamOptions {
            include_usage: Some(true),
            include_obfuscation: None,
        });
        let mut stream = client.chat().create_stream(request).await.unwrap();
        let mut chunks = Vec::new();
        while let Some(chunk) = stream.next().await {
            chunks.push(chunk.unwrap());
        }
        // (id, name, arguments) per call index, as an SDK user puts them together.
        let mut calls: Vec<(String, String, String)> = Vec::new();
        for piece in chunks
            .iter()
            .flat_map(|c| c.choices.iter())
            .flat_map(|c| c.delta.tool_calls.iter().flatten())
        {
            let index = piece.index as usize;
            if index == calls.len() {
                assert_eq!(piece.r#type, Some(FunctionType::Function));
                calls.push((
                    piece.id.clone().expect("the first piece has the id"),
                    String::new(),
                    String::new(),
                ));
            }
            let call = &mut calls[index];
            if let Some(function) = &piece.function {
                if let Some(name) = &function.name {
                    call.1.push_str(name);
                }
                if let Some(arguments) = &function.arguments {
                    call.2.push_str(arguments);
                }
            }
        }
        assert_eq!(calls.len(), 2, "{chunks:?}");
        assert_eq!(
            (calls[0].1.as_str(), calls[0].2.as_str()),
            ("get_weather", r#"{"city":"Paris"}"#)
        );
        assert_eq!((calls[1].1.as_str(), calls[1].2.as_str()), ("now", "{}"));
        assert!(calls[0].0.starts_with("call_"));
        let finishing: Vec<_> = chunks
            .iter()
            .filter_map(|c| c.choices.first().and_then(|c| c.finish_reason))
            .collect();
        assert_eq!(finishing, [FinishReason::ToolCalls]);
        let usage = chunks.last().unwrap().usage.clone().unwrap();
        assert_eq!(usage.completion_tokens, 6);

        // On the wire: OpenAI's exact pieces.
        let res = raw_completion(
            &app,
            Some(&user.access),
            json!({"model": agent, "stream": true, "messages": [{"role": "user", "content": QUESTION}],
                   "tools": serde_json::to_value(tools()).unwrap()}),
        )
        .await;
        let frames = crate::chat::sse_data(&res.text().await.unwrap());
        let chunks: Vec<Value> = frames[..frames.len() - 1]
            .iter()
            .map(|f| serde_json::from_str(f).unwrap())
            .collect();
        let pieces: Vec<&Value> = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"].get("tool_calls"))
            .collect();
        assert_eq!(pieces.len(), 4);
        let first = &pieces[0][0];
        assert_eq!(first["index"], 0);
        assert_eq!(first["type"], "function");
        assert_eq!(
            first["function"],
            json!({"name": "get_weather", "arguments": ""})
        );
        assert_eq!(
            pieces[1][0],
            json!({"index": 0, "function": {"arguments": r#"{"city":"Paris"}"#}})
        );
        assert_eq!(pieces[2][0]["index"], 1);
        let last = chunks.last().unwrap();
        assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(last["choices"][0]["delta"], json!({}));
        assert!(last["agentchat"]["threadId"].is_string());
    }

    #[tokio::test]
    async fn tool_choice_reaches_both_providers() {
        let (app, mock) = with_mock(|_| {}).await;
        let user = app.user().await;
        let client = openai(&app, &user.access);
        let named = ChatCompletionToolChoiceOption::Function(ChatCompletionNamedToolChoice {
            function: FunctionName { name: "now".into() },
        });
        let required = ChatCompletionToolChoiceOption::Mode(ToolChoiceOptions::Required);
        let none = ChatCompletionToolChoiceOption::Mode(ToolChoiceOptions::None);
        for model in ["gpt-4o-mini", "claude-sonnet-4-5"] {
            let agent = agent_with(&app, &user, model).await;
            let openai_wire = model.starts_with("gpt");
            // (choice, message, the calls made, the provider's tool_choice)
            let cases = [
                (
                    required.clone(),
                    "hello",
                    vec!["get_weather"],
                    if openai_wire {
                        json!("required")
                    } else {
                        json!({"type": "any"})
                    },
                ),
                (
                    named.clone(),
                    QUESTION,
                    vec!["now"],
                    if openai_wire {
                        json!({"type": "function", "function": {"name": "now"}})
                    } else {
                        json!({"type": "tool", "name": "now"})
                    },
                ),
                (
                    none.clone(),
                    QUESTION,
                    vec![],
                    if openai_wire {
                        json!("none")
                    } else {
                        json!({"type": "none"})
                    },
                ),
            ];
            for (choice, text, expected, wire) in cases {
                let mut request = asking(&agent, vec![user_says(text)]);
                request.tool_choice = Some(choice.clone());
                request.parallel_tool_calls = Some(false);
                let reply = client.chat().create(request).await.unwrap();
                let calls = calls_of(&reply.choices[0].message);
                let names: Vec<&str> = calls.iter().map(|c| c.function.name.as_str()).collect();
                assert_eq!(names, expected, "{model}: {choice:?}");
                let finish = if expected.is_empty() {
                    FinishReason::Stop
                } else {
                    FinishReason::ToolCalls
                };
                assert_eq!(reply.choices[0].finish_reason, Some(finish));
                let sent = upstream(&mock);
                assert_eq!(sent.last().unwrap().body["tool_choice"], wire, "{model}");
            }
        }
    }

    #[tokio::test]
    async fn bad_tools_and_tool_messages_are_400s_naming_the_field() {
        let app = spawn_app().await;
        let user = app.user().await;
        let agent = agent_with(&app, &user, "agentchat-offline").await;
        let tool = |name: &str| json!({"type": "function", "function": {"name": name}});
        let call = json!({"id": "call_1", "type": "function",
                          "function": {"name": "get_weather", "arguments": "{}"}});
        let user_turn = json!({"role": "user", "content": "hi"});
        let cases = [
            (
                json!({"tools": [tool("get weather!")]}),
                "tools[0].function.name",
            ),
            (
                json!({"tools": [tool("a"), tool("a")]}),
                "tools[1].function.name",
            ),
            (
                json!({"tools": [{"type": "function", "function": {"name": "a", "parameters": [1]}}]}),
                "tools[0].function.parameters",
            ),
            (
                json!({"tools": [tool("a")], "tool_choice": "always"}),
                "tool_choice",
            ),
            (
                json!({"tools": [tool("a")], "tool_choice": {"type": "function", "function": {"name": "b"}}}),
                "tool_choice",
            ),
            (json!({"tool_choice": "required"}), "tool_choice"),
            (
                json!({"tools": [tool("get_weather")], "messages": [user_turn,
                    {"role": "tool", "tool_call_id": "call_9", "content": "18 C"}]}),
                "messages[1].tool_call_id",
            ),
            (
                json!({"tools": [tool("get_weather")], "messages": [user_turn,
                    {"role": "assistant", "content": null, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "call_2", "content": "18 C"}]}),
                "messages[2].tool_call_id",
            ),
            (
                json!({"tools": [tool("get_weather")], "messages": [user_turn,
                    {"role": "assistant", "content": null, "tool_calls": [call]},
                    {"role": "user", "content": "well?"}]}),
                "messages[1].tool_calls[0]",
            ),
            (
                json!({"messages": [user_turn,
                    {"role": "assistant", "content": null, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}]}),
                "tools",
            ),
        ];
        for (fields, param) in cases {
            let mut body = json!({"model": agent, "messages": [user_turn]});
            for (k, v) in fields.as_object().unwrap() {
                body[k] = v.clone();
            }
            let error = assert_openai_error(
                raw_completion(&app, Some(&user.access), body.clone()).await,
                400,
                "invalid_request_error",
                None,
                Some(param),
            )
            .await;
            assert!(!error["message"].as_str().unwrap().is_empty(), "{body}");
        }
        // The deprecated `functions` are refused as unsupported.
        assert_openai_error(
            raw_completion(
                &app,
                Some(&user.access),
                json!({"model": agent, "messages": [user_turn], "functions": [{"name": "f"}]}),
            )
            .await,
            400,
            "invalid_request_error",
            Some("unsupported_parameter"),
            Some("functions"),
        )
        .await;
        // The SDK raises them as API errors with the parameter.
        let mut request = asking(&agent, vec![user_says("hi")]);
        request.tools = Some(vec![function("bad name", None, None)]);
        let err = super::api_error(openai(&app, &user.access).chat().create(request).await);
        assert_eq!(err.param.as_deref(), Some("tools[0].function.name"));
    }

    /// A local HTTP API with `GET /weather/{city}`, counting its requests; its address.
    async fn weather_server() -> (String, Arc<AtomicUsize>) {
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        let router = Router::new().route(
            "/weather/{city}",
            get(move |Path(city): Path<String>| {
                let counted = counted.clone();
                async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    Json(json!({"city": city, "temp": 21}))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        (addr, hits)
    }

    #[tokio::test]
    async fn client_tools_replace_the_agents_own_and_without_them_the_agents_run() {
        let (addr, hits) = weather_server().await;
        let allowed = addr.clone();
        let (app, mock) = with_mock(|c| c.outbound.allowed_private_hosts = vec![allowed]).await;
        let user = app.user().await;
        let agent = agent_with(&app, &user, "gpt-4o-mini").await;
        let res = app
            .post(
                &format!("/api/agents/{agent}/tools"),
                Some(&user.access),
                json!({"type": "http", "name": "get_weather", "description": "The agent's weather",
                       "config": {"method": "GET", "url": format!("http://{addr}/weather/{{city}}"),
                                  "parameters": {"type": "object",
                                                 "properties": {"city": {"type": "string"}},
                                                 "required": ["city"]}}}),
            )
            .await;
        assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
        let client = openai(&app, &user.access);
        let question = r#"weather? [[call:get_weather:{"city":"Paris"}]]"#;

        // With client tools: the model sees the client's `get_weather`, and its call goes
        // to the client; the agent's action is not run.
        let reply = client
            .chat()
            .create(asking(&agent, vec![user_says(question)]))
            .await
            .unwrap();
        assert_eq!(
            reply.choices[0].finish_reason,
            Some(FinishReason::ToolCalls)
        );
        assert_eq!(
            calls_of(&reply.choices[0].message)[0].function.name,
            "get_weather"
        );
        assert_eq!(
            hits.load(Ordering::SeqCst),
            0,
            "the agent's tool did not run"
        );
        let sent = upstream(&mock);
        assert_eq!(sent.len(), 1);
        let offered: Vec<&str> = sent[0].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["description"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(
            offered,
            ["The weather in a city", ""],
            "the client's tools only"
        );

        // Without: the agent's tool runs inside, and the client sees only the answer.
        let reply = client
            .chat()
            .create(super::ask(&agent, question))
            .await
            .unwrap();
        assert_eq!(reply.choices[0].finish_reason, Some(FinishReason::Stop));
        assert_eq!(
            reply.choices[0].message.content.as_deref(),
            Some(r#"Tool results: {"city":"Paris","temp":21}"#)
        );
        assert!(reply.choices[0].message.tool_calls.is_none());
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        let sent = upstream(&mock);
        assert_eq!(
            sent.len(),
            3,
            "two more model calls: the call, then its result"
        );
        assert_eq!(
            sent[1].body["tools"][0]["function"]["description"],
            "The agent's weather"
        );
    }

    #[tokio::test]
    async fn the_openapi_document_describes_client_tools() {
        let app = spawn_app().await;
        let doc: Value = app.openapi().await;
        let schemas = &doc["components"]["schemas"];
        for name in [
            "ChatCompletionTool",
            "FunctionDefinition",
            "ChatCompletionMessageToolCall",
            "FunctionCall",
            "ChatCompletionToolCallDelta",
            "FunctionCallDelta",
        ] {
            assert!(schemas[name].is_object(), "{name} is missing");
        }
        let request = &schemas["ChatCompletionRequest"]["properties"];
        for field in ["tools", "tool_choice", "parallel_tool_calls"] {
            assert!(request[field].is_object(), "{field}");
        }
        assert!(schemas["ChatCompletionMessage"]["properties"]["tool_call_id"].is_object());
        assert!(schemas["ChatCompletionAssistantMessage"]["properties"]["tool_calls"].is_object());
        assert!(schemas["ChatCompletionDelta"]["properties"]["tool_calls"].is_object());
        // Every reference resolves.
        let text = doc.to_string();
        for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = reference.split('"').next().unwrap();
            assert!(schemas[name].is_object(), "dangling $ref {name}");
        }
    }
}
