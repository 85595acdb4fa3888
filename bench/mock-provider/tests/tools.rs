//! Scripted tool calls (`[[call:NAME:ARGS]]`, `[[call-always:NAME:ARGS]]`) and the reply to
//! tool results, in both flavours, streamed and not; the strict checks of the tool history;
//! and `genai` reading the mock's calls.

use futures::StreamExt;
use genai::adapter::AdapterKind;
use genai::chat::{ChatMessage, ChatOptions, ChatRequest, ChatStreamEvent, StopReason, Tool};
use genai::resolver::{AuthData, Endpoint};
use genai::{Client, ModelIden, ServiceTarget};
use mock_provider::{MockConfig, MockProvider};
use serde_json::{json, Value};

const TWO_CALLS: &str =
    r#"weather and time? [[call:get_weather:{"city":"Paris","unit":"C"}]] [[call:now:{}]]"#;
const ANTHROPIC: &[(&str, &str)] = &[("anthropic-version", "2023-06-01")];

async fn start() -> MockProvider {
    MockProvider::start(MockConfig::default())
        .await
        .expect("mock started")
}

async fn post(
    mock: &MockProvider,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> reqwest::Response {
    let mut request = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{}{path}", mock.base_url()))
        .json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("request sent")
}

async fn json_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON body"))
}

fn openai_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}},
    ])
}

fn anthropic_tools() -> Value {
    json!([
        {"name": "get_weather", "description": "Weather",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
        {"name": "now", "input_schema": {"type": "object"}},
    ])
}

fn openai_request(messages: Value, stream: bool) -> Value {
    json!({
        "model": "gpt-4o-mini",
        "messages": messages,
        "tools": openai_tools(),
        "stream": stream,
        "stream_options": {"include_usage": true},
    })
}

fn anthropic_request(messages: Value, stream: bool) -> Value {
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": messages,
        "tools": anthropic_tools(),
        "stream": stream,
    })
}

/// The JSON of each `data: ` frame of an SSE body, `[DONE]` aside.
fn data_frames(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|frame| frame.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).expect("frame JSON"))
        .collect()
}

/// The number of a call id with `prefix` (`call_`, `toolu_`).
fn call_number(id: &Value, prefix: &str) -> u64 {
    id.as_str()
        .and_then(|id| id.strip_prefix(prefix))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{id} is not {prefix}N"))
}

#[tokio::test]
async fn openai_answers_the_call_markers_with_tool_calls() {
    let mock = start().await;
    let messages = json!([{"role": "user", "content": TWO_CALLS}]);
    let (status, body) = json_of(
        post(
            &mock,
            "chat/completions",
            &[],
            &openai_request(messages, false),
        )
        .await,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    let calls = choice["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[0]["function"],
        json!({"name": "get_weather", "arguments": r#"{"city":"Paris","unit":"C"}"#})
    );
    assert_eq!(
        calls[1]["function"],
        json!({"name": "now", "arguments": "{}"})
    );
    assert_eq!(calls[0]["type"], "function");
    let first = call_number(&calls[0]["id"], "call_");
    assert!(call_number(&calls[1]["id"], "call_") > first);
    // Arguments in 4 and 2 pieces, plus one per call.
    assert_eq!(body["usage"]["completion_tokens"], 4 + 1 + 2 + 1);
}

#[tokio::test]
async fn openai_streams_tool_calls_in_fragments() {
    let mock = start().await;
    let messages = json!([{"role": "user", "content": TWO_CALLS}]);
    let response = post(
        &mock,
        "chat/completions",
        &[],
        &openai_request(messages, true),
    )
    .await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.unwrap();
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let chunks = data_frames(&body);
    assert_eq!(
        chunks[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": null})
    );
    // Reassembled per index: id, type and name from the first fragment.
    let mut calls: Vec<(String, String, String, usize)> = Vec::new();
    let mut finish = None;
    for chunk in &chunks[1..] {
        let Some(choice) = chunk["choices"].get(0) else {
            assert_eq!(chunk["usage"]["completion_tokens"], 8, "{chunk}");
            continue;
        };
        if let Some(reason) = choice["finish_reason"].as_str() {
            finish = Some(reason.to_owned());
            continue;
        }
        let fragments = choice["delta"]["tool_calls"]
            .as_array()
            .expect("a fragment");
        assert_eq!(fragments.len(), 1);
        let fragment = &fragments[0];
        let index = fragment["index"].as_u64().unwrap() as usize;
        if index == calls.len() {
            assert_eq!(fragment["type"], "function");
            assert_eq!(fragment["function"]["arguments"], "");
            calls.push((
                fragment["id"].as_str().unwrap().to_owned(),
                fragment["function"]["name"].as_str().unwrap().to_owned(),
                String::new(),
                0,
            ));
        } else {
            assert!(fragment.get("id").is_none() && fragment["function"].get("name").is_none());
            let call = &mut calls[index];
            call.2
                .push_str(fragment["function"]["arguments"].as_str().unwrap());
            call.3 += 1;
        }
    }
    assert_eq!(finish.as_deref(), Some("tool_calls"));
    assert_eq!(calls.len(), 2);
    assert!(calls[0].0.starts_with("call_") && calls[0].0 != calls[1].0);
    assert_eq!(
        (calls[0].1.as_str(), calls[0].2.as_str()),
        ("get_weather", r#"{"city":"Paris","unit":"C"}"#)
    );
    assert_eq!((calls[1].1.as_str(), calls[1].2.as_str()), ("now", "{}"));
    assert!(calls.iter().all(|c| c.3 >= 2), "arguments in pieces");
}

#[tokio::test]
async fn anthropic_answers_the_call_markers_with_tool_use_blocks() {
    let mock = start().await;
    let messages = json!([{"role": "user", "content": TWO_CALLS}]);
    let (status, body) = json_of(
        post(
            &mock,
            "messages",
            ANTHROPIC,
            &anthropic_request(messages, false),
        )
        .await,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["stop_reason"], "tool_use");
    let content = body["content"].as_array().unwrap();
    assert_eq!(content.len(), 2);
    assert_eq!(content[0]["type"], "tool_use");
    assert_eq!(content[0]["name"], "get_weather");
    assert_eq!(content[0]["input"], json!({"city": "Paris", "unit": "C"}));
    assert_eq!(content[1]["input"], json!({}));
    let first = call_number(&content[0]["id"], "toolu_");
    assert!(call_number(&content[1]["id"], "toolu_") > first);
    assert_eq!(body["usage"]["output_tokens"], 8);
}

#[tokio::test]
async fn anthropic_streams_tool_use_blocks_with_input_json_deltas() {
    let mock = start().await;
    let messages = json!([{"role": "user", "content": TWO_CALLS}]);
    let response = post(
        &mock,
        "messages",
        ANTHROPIC,
        &anthropic_request(messages, true),
    )
    .await;
    assert_eq!(response.status(), 200);
    let events = data_frames(&response.text().await.unwrap());
    let mut blocks: Vec<(Value, String, usize)> = Vec::new();
    let mut stopped = 0;
    for event in &events {
        match event["type"].as_str().unwrap() {
            "content_block_start" => {
                assert_eq!(event["index"], blocks.len());
                assert_eq!(event["content_block"]["type"], "tool_use");
                blocks.push((event["content_block"].clone(), String::new(), 0));
            }
            "content_block_delta" => {
                let block = &mut blocks[event["index"].as_u64().unwrap() as usize];
                assert_eq!(event["delta"]["type"], "input_json_delta");
                block
                    .1
                    .push_str(event["delta"]["partial_json"].as_str().unwrap());
                block.2 += 1;
            }
            "content_block_stop" => stopped += 1,
            "message_delta" => {
                assert_eq!(event["delta"]["stop_reason"], "tool_use");
                assert_eq!(event["usage"]["output_tokens"], 8);
            }
            _ => {}
        }
    }
    assert_eq!(events.last().unwrap()["type"], "message_stop");
    assert_eq!((blocks.len(), stopped), (2, 2));
    assert_eq!(blocks[0].0["name"], "get_weather");
    assert!(blocks[0].0["id"].as_str().unwrap().starts_with("toolu_"));
    assert_eq!(blocks[0].1, r#"{"city":"Paris","unit":"C"}"#);
    assert_eq!(
        (blocks[1].0["name"].as_str(), blocks[1].1.as_str()),
        (Some("now"), "{}")
    );
    assert!(blocks.iter().all(|b| b.2 >= 2), "input in pieces");
}

/// The history of one round of two calls and their results, in the OpenAI format.
fn openai_round(marker: &str) -> Value {
    json!([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": marker},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
            {"id": "call_b", "type": "function", "function": {"name": "now", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "call_a", "content": "{\"temp\":18}"},
        {"role": "tool", "tool_call_id": "call_b", "content": "Error: no clock"},
    ])
}

/// The same round in the Anthropic format, one result's content as text blocks.
fn anthropic_round(marker: &str) -> Value {
    json!([
        {"role": "user", "content": marker},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_b", "name": "now", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "{\"temp\":18}"},
            {"type": "tool_result", "tool_use_id": "toolu_b", "is_error": true,
             "content": [{"type": "text", "text": "Error: no clock"}]},
        ]},
    ])
}

const RESULTS: &str = r#"Tool results: {"temp":18} | Error: no clock"#;

#[tokio::test]
async fn openai_replies_to_tool_results_with_their_contents() {
    let mock = start().await;
    let request = openai_request(openai_round(TWO_CALLS), false);
    let (status, body) = json_of(post(&mock, "chat/completions", &[], &request).await).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], RESULTS);
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(body["usage"]["completion_tokens"], 7);

    let request = openai_request(openai_round(TWO_CALLS), true);
    let body = post(&mock, "chat/completions", &[], &request)
        .await
        .text()
        .await
        .unwrap();
    let text: String = data_frames(&body)
        .iter()
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(text, RESULTS);
    let chunks = data_frames(&body);
    let tokens = chunks
        .iter()
        .filter(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        })
        .count();
    assert_eq!(tokens, 7, "word by word");
}

#[tokio::test]
async fn anthropic_replies_to_tool_results_with_their_contents() {
    let mock = start().await;
    let request = anthropic_request(anthropic_round(TWO_CALLS), false);
    let (status, body) = json_of(post(&mock, "messages", ANTHROPIC, &request).await).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["content"], json!([{"type": "text", "text": RESULTS}]));
    assert_eq!(body["stop_reason"], "end_turn");

    let request = anthropic_request(anthropic_round(TWO_CALLS), true);
    let body = post(&mock, "messages", ANTHROPIC, &request)
        .await
        .text()
        .await
        .unwrap();
    let deltas: Vec<String> = data_frames(&body)
        .iter()
        .filter_map(|e| e["delta"]["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(deltas.len(), 7, "word by word");
    assert_eq!(deltas.concat(), RESULTS);
}

#[tokio::test]
async fn call_always_calls_again_after_results_and_no_tools_means_text() {
    let mock = start().await;
    let marker = r#"loop [[call-always:get_weather:{"city":"Oslo"}]]"#;
    let (_, body) = json_of(
        post(
            &mock,
            "chat/completions",
            &[],
            &openai_request(openai_round(marker), false),
        )
        .await,
    )
    .await;
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        r#"{"city":"Oslo"}"#
    );
    let (_, body) = json_of(
        post(
            &mock,
            "messages",
            ANTHROPIC,
            &anthropic_request(anthropic_round(marker), false),
        )
        .await,
    )
    .await;
    assert_eq!(body["stop_reason"], "tool_use");
    assert_eq!(body["content"][0]["input"], json!({"city": "Oslo"}));

    // `tool_choice` none: the results are answered.
    let mut request = openai_request(openai_round(marker), false);
    request["tool_choice"] = json!("none");
    let (_, body) = json_of(post(&mock, "chat/completions", &[], &request).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], RESULTS);
    let mut request = anthropic_request(anthropic_round(marker), false);
    request["tool_choice"] = json!({"type": "none"});
    let (_, body) = json_of(post(&mock, "messages", ANTHROPIC, &request).await).await;
    assert_eq!(body["content"][0]["text"], RESULTS);

    // Without tools, the markers are text like any other and are not echoed.
    let request = json!({"model": "m", "messages": [{"role": "user", "content": TWO_CALLS}]});
    let (_, body) = json_of(post(&mock, "chat/completions", &[], &request).await).await;
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Echo: weather and time?"
    );
    let request = json!({"model": "m", "max_tokens": 50,
                         "messages": [{"role": "user", "content": TWO_CALLS}]});
    let (_, body) = json_of(post(&mock, "messages", ANTHROPIC, &request).await).await;
    assert_eq!(body["content"][0]["text"], "Echo: weather and time?");
}

#[tokio::test]
async fn a_history_the_real_apis_would_refuse_is_a_400() {
    let mock = start().await;
    let mut messages = openai_round(TWO_CALLS);
    messages[4]["tool_call_id"] = json!("call_zzz");
    let (status, body) = json_of(
        post(
            &mock,
            "chat/completions",
            &[],
            &openai_request(messages, false),
        )
        .await,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(body["error"]["param"], "messages.[4].role");
    let (status, body) = json_of(
        post(
            &mock,
            "chat/completions",
            &[],
            &json!({"model": "m", "tool_choice": "auto",
                    "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await,
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "tool_choice");

    let mut messages = anthropic_round(TWO_CALLS);
    messages[2]["content"][1]["tool_use_id"] = json!("toolu_zzz");
    let (status, body) = json_of(
        post(
            &mock,
            "messages",
            ANTHROPIC,
            &anthropic_request(messages, false),
        )
        .await,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["type"], "invalid_request_error");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("toolu_b"), "{message}");
}

fn target(mock: &MockProvider, kind: AdapterKind, model: &str) -> ServiceTarget {
    ServiceTarget {
        endpoint: Endpoint::from_owned(mock.base_url()),
        auth: AuthData::from_single("sk-any"),
        model: ModelIden::new(kind, model),
    }
}

/// `genai`, the server's client library, reads the mock's streamed calls in both flavours
/// and sends their results back in a form the mock accepts.
#[tokio::test]
async fn genai_reads_the_streamed_calls_and_sends_the_results_back() {
    let mock = start().await;
    let client = Client::new().unwrap();
    let tool = Tool::new("get_weather").with_schema(json!({"type": "object"}));
    for (kind, model) in [
        (AdapterKind::OpenAI, "gpt-4o-mini"),
        (AdapterKind::Anthropic, "claude-sonnet-4-5"),
    ] {
        let request = ChatRequest::new(vec![ChatMessage::user(
            r#"go [[call:get_weather:{"city":"Paris"}]]"#,
        )])
        .with_tools(vec![tool.clone()]);
        let options = ChatOptions::default()
            .with_capture_tool_calls(true)
            .with_capture_usage(true);
        let response = client
            .exec_chat_stream(target(&mock, kind, model), request.clone(), Some(&options))
            .await
            .expect("chat stream");
        let mut stream = response.stream;
        let mut end = None;
        while let Some(event) = stream.next().await {
            if let ChatStreamEvent::End(stream_end) = event.expect("stream event") {
                end = Some(stream_end);
            }
        }
        let end = end.expect("an end event");
        assert!(
            matches!(end.captured_stop_reason, Some(StopReason::ToolCall(_))),
            "{kind:?}: {:?}",
            end.captured_stop_reason
        );
        let calls = end.captured_tool_calls().expect("captured calls");
        assert_eq!(calls.len(), 1, "{kind:?}");
        assert_eq!(calls[0].fn_name, "get_weather");
        let arguments = match &calls[0].fn_arguments {
            Value::String(text) => serde_json::from_str(text).unwrap(),
            value => value.clone(),
        };
        assert_eq!(arguments, json!({"city": "Paris"}), "{kind:?}");

        let response = genai::chat::ToolResponse::new(calls[0].call_id.clone(), "18 C");
        let next = request.append_tool_use_from_stream_end(&end, response);
        let answer = client
            .exec_chat(target(&mock, kind, model), next, None)
            .await
            .expect("an answer to the results");
        assert_eq!(answer.first_text(), Some("Tool results: 18 C"), "{kind:?}");
    }
}

/// The names of the calls of a non-streamed reply, in both flavours.
fn called(body: &Value) -> Vec<(String, Value)> {
    if let Some(calls) = body["choices"][0]["message"]["tool_calls"].as_array() {
        return calls
            .iter()
            .map(|c| {
                let arguments = c["function"]["arguments"].as_str().unwrap();
                (
                    c["function"]["name"].as_str().unwrap().to_owned(),
                    serde_json::from_str(arguments).unwrap(),
                )
            })
            .collect();
    }
    body["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| (b["name"].as_str().unwrap().to_owned(), b["input"].clone()))
        .collect()
}

#[tokio::test]
async fn forced_tool_choices_are_obeyed() {
    let mock = start().await;
    let name = |n: &str| (n.to_owned(), json!({}));
    let paris = (
        "get_weather".to_owned(),
        json!({"city": "Paris", "unit": "C"}),
    );
    // (OpenAI choice, Anthropic choice, user text, expected calls)
    let cases = [
        (
            json!("required"),
            json!({"type": "any"}),
            "hi",
            vec![name("get_weather")],
        ),
        (
            json!({"type": "function", "function": {"name": "now"}}),
            json!({"type": "tool", "name": "now"}),
            "hi",
            vec![name("now")],
        ),
        // A named choice keeps the marker calls of that tool alone.
        (
            json!({"type": "function", "function": {"name": "get_weather"}}),
            json!({"type": "tool", "name": "get_weather"}),
            TWO_CALLS,
            vec![paris.clone()],
        ),
        (
            json!("required"),
            json!({"type": "any"}),
            TWO_CALLS,
            vec![paris, name("now")],
        ),
    ];
    for (openai_choice, anthropic_choice, text, expected) in cases {
        let messages = json!([{"role": "user", "content": text}]);
        let mut request = openai_request(messages.clone(), false);
        request["tool_choice"] = openai_choice.clone();
        let (status, body) = json_of(post(&mock, "chat/completions", &[], &request).await).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["choices"][0]["finish_reason"], "tool_calls", "{body}");
        assert_eq!(called(&body), expected, "{openai_choice}");

        let mut request = anthropic_request(messages, false);
        request["tool_choice"] = anthropic_choice.clone();
        let (status, body) = json_of(post(&mock, "messages", ANTHROPIC, &request).await).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["stop_reason"], "tool_use", "{body}");
        assert_eq!(called(&body), expected, "{anthropic_choice}");
    }
    // Without a forced choice, a message without markers is answered with text.
    let request = openai_request(json!([{"role": "user", "content": "hi"}]), false);
    let (_, body) = json_of(post(&mock, "chat/completions", &[], &request).await).await;
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
}
