//! Wire-level checks of the mock: exact JSON bodies, SSE framing, usage, markers and auth.

use std::time::{Duration, Instant};

use futures::StreamExt;
use mock_provider::{MockConfig, MockProvider};
use serde_json::{json, Value};

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("http client")
}

/// Posts `body` to `path` (relative to the base URL) with extra headers.
async fn post(
    mock: &MockProvider,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> reqwest::Response {
    let mut request = http().post(format!("{}{path}", mock.base_url())).json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("request sent")
}

const ANTHROPIC: &[(&str, &str)] = &[("anthropic-version", "2023-06-01")];

async fn json_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body = response.json().await.expect("JSON body");
    (status, body)
}

fn openai_request(text: &str, stream: bool) -> Value {
    json!({
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "Be very brief."},
            {"role": "user", "content": "earlier question"},
            {"role": "assistant", "content": "earlier answer"},
            {"role": "user", "content": text},
        ],
        "stream": stream,
    })
}

fn anthropic_request(text: &str, stream: bool) -> Value {
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": "Be very brief.",
        "messages": [{"role": "user", "content": text}],
        "stream": stream,
    })
}

/// Splits an SSE body into its frames, checking each one ends with a blank line.
fn frames(body: &str) -> Vec<&str> {
    assert!(
        body.ends_with("\n\n"),
        "body must end with a blank line: {body:?}"
    );
    body[..body.len() - 2].split("\n\n").collect()
}

/// The JSON of an OpenAI `data: ` frame.
fn openai_data(frame: &str) -> Value {
    let data = frame
        .strip_prefix("data: ")
        .unwrap_or_else(|| panic!("not a data frame: {frame:?}"));
    assert!(!data.contains('\n'), "one line per frame: {frame:?}");
    serde_json::from_str(data).expect("frame JSON")
}

/// The event name and JSON of an Anthropic frame.
fn anthropic_event(frame: &str) -> (&str, Value) {
    let mut lines = frame.split('\n');
    let event = lines
        .next()
        .and_then(|line| line.strip_prefix("event: "))
        .unwrap_or_else(|| panic!("no event line: {frame:?}"));
    let data = lines
        .next()
        .and_then(|line| line.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("no data line: {frame:?}"));
    assert!(lines.next().is_none(), "two lines per frame: {frame:?}");
    (event, serde_json::from_str(data).expect("frame JSON"))
}

async fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn openai_non_streaming_answer() {
    let mock = MockProvider::start(MockConfig::default()).await.unwrap();
    let response = post(
        &mock,
        "chat/completions",
        &[],
        &openai_request("hello world", false),
    )
    .await;
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let (status, body) = json_of(response).await;
    assert_eq!(status, 200);
    assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(body["object"], "chat.completion");
    assert!(body["created"].as_u64().unwrap() > 1_700_000_000);
    assert_eq!(body["model"], "gpt-4o-mini");
    let choice = &body["choices"][0];
    assert_eq!(choice["index"], 0);
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], "Echo: hello world");
    assert_eq!(choice["finish_reason"], "stop");
    // 3 + 2 + 2 + 2 input words; "Echo:", " hello", " world".
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12})
    );
    assert_eq!(mock.open_streams(), 0);
}

#[tokio::test]
async fn openai_streaming_answer_with_usage() {
    let mock = MockProvider::start(MockConfig::default()).await.unwrap();
    let mut request = openai_request("hello world", true);
    request["stream_options"] = json!({"include_usage": true});
    let response = post(&mock, "chat/completions", &[], &request).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let body = response.text().await.unwrap();
    let frames = frames(&body);
    assert_eq!(frames.len(), 1 + 3 + 1 + 1 + 1, "{body}");
    assert_eq!(*frames.last().unwrap(), "data: [DONE]");

    let chunks: Vec<Value> = frames[..frames.len() - 1]
        .iter()
        .map(|f| openai_data(f))
        .collect();
    let id = chunks[0]["id"].as_str().unwrap();
    assert!(id.starts_with("chatcmpl-"));
    for chunk in &chunks {
        assert_eq!(chunk["id"], id);
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["model"], "gpt-4o-mini");
        assert!(chunk["created"].is_u64());
    }
    assert_eq!(
        chunks[0]["choices"],
        json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}])
    );
    assert_eq!(chunks[0]["usage"], Value::Null);
    let texts: Vec<&str> = chunks[1..4]
        .iter()
        .map(|chunk| {
            assert_eq!(chunk["choices"][0]["finish_reason"], Value::Null);
            chunk["choices"][0]["delta"]["content"].as_str().unwrap()
        })
        .collect();
    assert_eq!(texts, ["Echo:", " hello", " world"]);
    assert_eq!(
        chunks[4]["choices"],
        json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop"}])
    );
    assert_eq!(chunks[5]["choices"], json!([]));
    assert_eq!(
        chunks[5]["usage"],
        json!({"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12})
    );

    eventually("the stream to close", || mock.open_streams() == 0).await;
    assert_eq!(mock.completed_streams(), 1);
    assert_eq!(mock.cancelled_streams(), 0);
}

#[tokio::test]
async fn openai_streaming_answer_without_usage() {
    let mock = MockProvider::start(MockConfig::default()).await.unwrap();
    let response = post(&mock, "chat/completions", &[], &openai_request("hi", true)).await;
    let body = response.text().await.unwrap();
    let frames = frames(&body);
    assert_eq!(frames.len(), 1 + 2 + 1 + 1, "{body}");
    for frame in &frames[..frames.len() - 1] {
        assert!(openai_data(frame).get("usage").is_none(), "{frame}");
    }
    assert_eq!(frames[4], "data: [DONE]");
}

#[tokio::test]
async fn openai_content_parts_and_max_tokens() {
    let mock = MockProvider::start(MockConfig::default()).await.unwrap();
    let request = json!({
        "model": "gpt-4o",
        "max_completion_tokens": 2,
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "text", "text": "one two three"}]},
        ],
    });
    let (status, body) = json_of(post(&mock, "chat/completions", &[], &request).await).await;
    assert_eq!(status, 200);
    assert_eq!(body["choices"][0]["message"]["content"], "Echo: one");
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    assert_eq!(body["usage"]["prompt_tokens"], 5);
    assert_eq!(body["usage"]["completion_tokens"], 2);
}

#[tokio::test]
async fn anthropic_non_streaming_answer() {
    let mock = MockProvider::start(MockConfig::default()).await.unwrap();
    let response = post(
        &mock,
        "messages",
        ANTHROPIC,
        &anthropic_request("hello world", false),
    )
    .await;
    let (status, body) = json_of(response).await;
    assert_eq!(status, 200);
    assert!(body["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(body["type"], "message");
    assert_eq!(body["role"], "assistant");
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(
        body["content"],
        json!([{"type": "text", "text": "Echo: hello world"}])
    );
    assert_eq!(body["stop_reason"], "end_turn");
    assert_eq!(body["stop_sequence"], Value::Null);
    assert_eq!(
        body["usage"],
        json!({"input_tokens": 5, "output_tokens": 3})
    );

    // The system prompt as text blocks, the message content as blocks.
    let request = json!({
        "model": "claude-haiku-4-5",
        "max_tokens": 2,
        "system": [{"type": "text", "text": "Be very brief."}, {"type": "text", "text": "Really."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "first"}]},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "second question"}]},
        ],
    });
    let (status, body) = json_of(post(&mock, "messages", ANTHROPIC, &request).await).await;
    assert_eq!(status, 200);
    assert_eq!(body["content"][0]["text"], "Echo: second");
    assert_eq!(body["stop_reason"], "max_tokens");
    assert_eq!(
        body["usage"],
        json!({"input_tokens": 8, "output_tokens": 2})
    );
}

#[tokio::test]
async fn anthropic_streaming_answer() {
    let mock = MockProvider::start(MockConfig::default()).await.unwrap();
    let response = post(
        &mock,
        "messages",
        ANTHROPIC,
        &anthropic_request("hello world", true),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let body = response.text().await.unwrap();
    let events: Vec<(&str, Value)> = frames(&body).into_iter().map(anthropic_event).collect();
    let names: Vec<&str> = events.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    for (name, data) in &events {
        assert_eq!(data["type"], *name, "the data type repeats the event name");
    }
    let message = &events[0].1["message"];
    assert!(message["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(message["type"], "message");
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["model"], "claude-sonnet-4-5");
    assert_eq!(message["content"], json!([]));
    assert_eq!(message["stop_reason"], Value::Null);
    assert_eq!(
        message["usage"],
        json!({"input_tokens": 5, "output_tokens": 1})
    );
    assert_eq!(
        events[1].1,
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    );
    let texts: Vec<&str> = events[3..6]
        .iter()
        .map(|(_, data)| {
            assert_eq!(data["index"], 0);
            assert_eq!(data["delta"]["type"], "text_delta");
            data["delta"]["text"].as_str().unwrap()
        })
        .collect();
    assert_eq!(texts, ["Echo:", " hello", " world"]);
    assert_eq!(
        events[6].1,
        json!({"type": "content_block_stop", "index": 0})
    );
    assert_eq!(
        events[7].1,
        json!({
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            "usage": {"output_tokens": 3},
        })
    );
    eventually("the stream to close", || mock.open_streams() == 0).await;
    assert_eq!(mock.completed_streams(), 1);
}

#[tokio::test]
async fn models_in_both_shapes() {
    let mock = MockProvider::start(MockConfig::default()).await.unwrap();
    let url = format!("{}models", mock.base_url());
    let (status, body) = json_of(http().get(&url).send().await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"object": "list", "data": [
            {"id": "gpt-4o-mini", "object": "model", "created": 1_700_000_000, "owned_by": "mock"},
            {"id": "gpt-4o", "object": "model", "created": 1_700_000_000, "owned_by": "mock"},
        ]})
    );

    let response = http()
        .get(&url)
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap();
    let (status, body) = json_of(response).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({
            "data": [
                {"type": "model", "id": "claude-sonnet-4-5", "display_name": "Claude Sonnet 4.5", "created_at": "2025-01-01T00:00:00Z"},
                {"type": "model", "id": "claude-haiku-4-5", "display_name": "Claude Haiku 4.5", "created_at": "2025-01-01T00:00:00Z"},
            ],
            "has_more": false,
            "first_id": "claude-sonnet-4-5",
            "last_id": "claude-haiku-4-5",
        })
    );
}

#[tokio::test]
async fn api_key_is_checked_in_each_flavour() {
    let mock = MockProvider::start(MockConfig {
        api_key: Some("sk-test".to_owned()),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let request = openai_request("hi", false);
    for headers in [&[][..], &[("authorization", "Bearer wrong")][..]] {
        let (status, body) =
            json_of(post(&mock, "chat/completions", headers, &request).await).await;
        assert_eq!(status, 401);
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["code"], "invalid_api_key");
        assert!(body["error"]["message"].is_string());
    }
    let ok = post(
        &mock,
        "chat/completions",
        &[("authorization", "Bearer sk-test")],
        &request,
    )
    .await;
    assert_eq!(ok.status(), 200);

    let request = anthropic_request("hi", false);
    for key in [None, Some("wrong")] {
        let mut headers = ANTHROPIC.to_vec();
        headers.extend(key.map(|key| ("x-api-key", key)));
        let (status, body) = json_of(post(&mock, "messages", &headers, &request).await).await;
        assert_eq!(status, 401);
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], "authentication_error");
        assert!(body["error"]["message"].is_string());
    }
    let headers = [
        ("anthropic-version", "2023-06-01"),
        ("x-api-key", "sk-test"),
    ];
    assert_eq!(
        post(&mock, "messages", &headers, &request).await.status(),
        200
    );

    // Listing models is guarded too, in the flavour of the request.
    let url = format!("{}models", mock.base_url());
    let (status, body) = json_of(http().get(&url).send().await.unwrap()).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (401, &json!("invalid_api_key"))
    );
    let response = http()
        .get(&url)
        .header("x-api-key", "nope")
        .send()
        .await
        .unwrap();
    let (status, body) = json_of(response).await;
    assert_eq!(
        (status, &body["error"]["type"]),
        (401, &json!("authentication_error"))
    );
    let response = http()
        .get(&url)
        .bearer_auth("sk-test")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn bad_requests_get_the_provider_error_shape() {
    let mock = MockProvider::start(MockConfig::default()).await.unwrap();
    let raw = |path: &str, body: &'static str, anthropic: bool| {
        let mut request = http()
            .post(format!("{}{path}", mock.base_url()))
            .header("content-type", "application/json")
            .body(body);
        if anthropic {
            request = request.header("anthropic-version", "2023-06-01");
        }
        request.send()
    };
    for body in [
        "{not json",
        "[1, 2]",
        "{}",
        r#"{"model": "gpt-4o", "messages": []}"#,
    ] {
        let (status, json) = json_of(raw("chat/completions", body, false).await.unwrap()).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(json["error"]["type"], "invalid_request_error", "{body}");
        assert!(json["error"]["message"].is_string());
    }
    for body in [
        "{not json",
        "[1, 2]",
        r#"{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}"#,
        r#"{"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}"#,
    ] {
        let (status, json) = json_of(raw("messages", body, true).await.unwrap()).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(json["type"], "error", "{body}");
        assert_eq!(json["error"]["type"], "invalid_request_error", "{body}");
    }
    // The Messages API requires its version header.
    let (status, json) =
        json_of(post(&mock, "messages", &[], &anthropic_request("hi", false)).await).await;
    assert_eq!(
        (status, &json["error"]["type"]),
        (400, &json!("invalid_request_error"))
    );

    let response = http()
        .get(format!("{}nowhere", mock.base_url()))
        .send()
        .await
        .unwrap();
    let (status, json) = json_of(response).await;
    assert_eq!(
        (status, &json["error"]["type"]),
        (404, &json!("invalid_request_error"))
    );
}

#[tokio::test]
async fn requests_are_recorded_in_order() {
    let mock = MockProvider::start(MockConfig::default()).await.unwrap();
    post(
        &mock,
        "chat/completions",
        &[("authorization", "Bearer k1")],
        &openai_request("a", false),
    )
    .await;
    post(&mock, "messages", ANTHROPIC, &anthropic_request("b", true))
        .await
        .text()
        .await
        .unwrap();
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("Authorization"), Some("Bearer k1"));
    assert_eq!(requests[0].body, openai_request("a", false));
    assert_eq!(requests[1].path, "/v1/messages");
    assert_eq!(requests[1].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(requests[1].body["stream"], true);
    mock.clear_requests();
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn recording_can_be_turned_off() {
    let mock = MockProvider::start(MockConfig {
        record_requests: false,
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let (status, body) = json_of(
        post(
            &mock,
            "chat/completions",
            &[],
            &openai_request("big", false),
        )
        .await,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["choices"][0]["message"]["content"], "Echo: big");
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn large_requests_are_accepted() {
    let mock = MockProvider::start(MockConfig::default()).await.unwrap();
    let long = "word ".repeat(1_000_000);
    let (status, body) = json_of(
        post(
            &mock,
            "chat/completions",
            &[],
            &openai_request(&long, false),
        )
        .await,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["usage"]["prompt_tokens"], 1_000_007);
}

#[tokio::test]
async fn status_markers_fail_requests() {
    let mock = MockProvider::start(MockConfig::default()).await.unwrap();
    let (status, body) = json_of(
        post(
            &mock,
            "chat/completions",
            &[],
            &openai_request("hi [[status:429]]", true),
        )
        .await,
    )
    .await;
    assert_eq!(status, 429);
    assert_eq!(body["error"]["message"], "mock failure 429");
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");

    let (status, body) = json_of(
        post(
            &mock,
            "messages",
            ANTHROPIC,
            &anthropic_request("[[status:529]] hi", false),
        )
        .await,
    )
    .await;
    assert_eq!(status, 529);
    assert_eq!(
        body,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "mock failure 529"}})
    );

    // The first two requests with this marker fail, the next ones succeed.
    let request = openai_request("retry me [[status:503x2]]", false);
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(
            post(&mock, "chat/completions", &[], &request)
                .await
                .status()
                .as_u16(),
        );
    }
    assert_eq!(statuses, [503, 503, 200, 200]);
    let (_, body) = json_of(post(&mock, "chat/completions", &[], &request).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], "Echo: retry me");
    // The count is per marker text, whatever the rest of the message.
    let same = openai_request("[[status:503x2]] other", false);
    assert_eq!(
        post(&mock, "chat/completions", &[], &same).await.status(),
        200
    );
    let other = openai_request("[[status:500x1]] other", false);
    assert_eq!(
        post(&mock, "chat/completions", &[], &other).await.status(),
        500
    );
    assert_eq!(
        post(&mock, "chat/completions", &[], &other).await.status(),
        200
    );
}

#[tokio::test]
async fn tokens_marker_and_fixed_reply() {
    let mock = MockProvider::start(MockConfig {
        reply: Some("Fixed  reply here".to_owned()),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let (_, body) = json_of(
        post(
            &mock,
            "chat/completions",
            &[],
            &openai_request("anything", false),
        )
        .await,
    )
    .await;
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Fixed  reply here"
    );
    assert_eq!(body["usage"]["completion_tokens"], 3);

    let (_, body) = json_of(
        post(
            &mock,
            "messages",
            ANTHROPIC,
            &anthropic_request("go [[tokens:5]]", false),
        )
        .await,
    )
    .await;
    assert_eq!(body["content"][0]["text"], "w1 w2 w3 w4 w5");
    assert_eq!(body["usage"]["output_tokens"], 5);

    let body = post(
        &mock,
        "chat/completions",
        &[],
        &openai_request("[[tokens:4]]", true),
    )
    .await
    .text()
    .await
    .unwrap();
    let texts: Vec<String> = frames(&body)[1..5]
        .iter()
        .map(|frame| {
            openai_data(frame)["choices"][0]["delta"]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(texts, ["w1", " w2", " w3", " w4"]);
}

#[tokio::test]
async fn delays_and_pauses() {
    let mock = MockProvider::start(MockConfig {
        delay: Duration::from_millis(100),
        token_interval: Duration::from_millis(30),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let started = Instant::now();
    post(
        &mock,
        "chat/completions",
        &[],
        &openai_request("x [[delay:150]]", false),
    )
    .await;
    assert!(started.elapsed() >= Duration::from_millis(250));

    // The pause comes after the first token chunk.
    let started = Instant::now();
    let response = post(
        &mock,
        "messages",
        ANTHROPIC,
        &anthropic_request("a b [[pause:600]]", true),
    )
    .await;
    let head_at = started.elapsed();
    assert!(head_at >= Duration::from_millis(100));
    let mut body = response.bytes_stream();
    let mut received = String::new();
    let mut first_delta_at = None;
    while let Some(chunk) = body.next().await {
        received.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        if first_delta_at.is_none() && received.contains("content_block_delta") {
            first_delta_at = Some(started.elapsed());
        }
    }
    let total = started.elapsed();
    let first_delta_at = first_delta_at.unwrap();
    assert!(
        first_delta_at < head_at + Duration::from_millis(400),
        "{first_delta_at:?}"
    );
    // The pause and two token intervals after the first chunk.
    assert!(
        total >= first_delta_at + Duration::from_millis(600),
        "{total:?}"
    );
    assert!(received.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
}

/// Reads a streamed body until it ends or fails; returns the text and whether it failed.
async fn read_until_end(response: reqwest::Response) -> (String, bool) {
    let mut body = response.bytes_stream();
    let mut received = String::new();
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(bytes) => received.push_str(std::str::from_utf8(&bytes).unwrap()),
            Err(_) => return (received, true),
        }
    }
    (received, false)
}

#[tokio::test]
async fn cut_marker_drops_the_connection() {
    let mock = MockProvider::start(MockConfig::default()).await.unwrap();

    let response = post(
        &mock,
        "chat/completions",
        &[],
        &openai_request("[[tokens:10]] [[cut:3]]", true),
    )
    .await;
    assert_eq!(response.status(), 200);
    let (received, failed) = read_until_end(response).await;
    assert!(failed, "the body must end with an error: {received}");
    let frames = frames(&received);
    assert_eq!(frames.len(), 1 + 3, "{received}");
    assert!(!received.contains("[DONE]"));

    let response = post(
        &mock,
        "messages",
        ANTHROPIC,
        &anthropic_request("one two [[cut:2]]", true),
    )
    .await;
    let (received, failed) = read_until_end(response).await;
    assert!(failed, "the body must end with an error: {received}");
    assert_eq!(received.matches("event: content_block_delta").count(), 2);
    assert!(!received.contains("message_stop"));

    // Without streaming, the connection is dropped before any answer.
    let error = http()
        .post(format!("{}chat/completions", mock.base_url()))
        .json(&openai_request("hi [[cut:0]]", false))
        .send()
        .await
        .expect_err("no answer");
    assert!(!error.is_status());

    eventually("the streams to close", || mock.open_streams() == 0).await;
    assert_eq!(
        mock.cancelled_streams(),
        0,
        "a cut is not a client disconnect"
    );
    assert_eq!(mock.completed_streams(), 0);

    // The server still answers afterwards.
    let (status, _) =
        json_of(post(&mock, "chat/completions", &[], &openai_request("hi", false)).await).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn client_disconnect_cancels_the_stream() {
    let mock = MockProvider::start(MockConfig::default()).await.unwrap();
    for (path, request, headers) in [
        (
            "chat/completions",
            openai_request("a b c [[pause:10000]]", true),
            &[][..],
        ),
        (
            "messages",
            anthropic_request("a b c [[pause:10000]]", true),
            ANTHROPIC,
        ),
    ] {
        let cancelled = mock.cancelled_streams();
        let response = post(&mock, path, headers, &request).await;
        let mut body = response.bytes_stream();
        let first = body.next().await.unwrap().unwrap();
        assert!(!first.is_empty());
        eventually("the stream to open", || mock.open_streams() == 1).await;
        drop(body);
        eventually("the stream to be cancelled", || {
            mock.cancelled_streams() == cancelled + 1 && mock.open_streams() == 0
        })
        .await;
    }
    assert_eq!(mock.completed_streams(), 0);
}
