//! The LLM client library of the server, pointed at the mock, reads its answers in both API
//! flavours, streamed or not, with usage.

use futures::StreamExt;
use genai::adapter::AdapterKind;
use genai::chat::{ChatMessage, ChatOptions, ChatRequest, ChatStreamEvent, StopReason, Usage};
use genai::resolver::{AuthData, Endpoint};
use genai::{Client, ModelIden, ServiceTarget};
use mock_provider::{MockConfig, MockProvider};

const KEY: &str = "sk-mock-key";

async fn start() -> MockProvider {
    MockProvider::start(MockConfig {
        api_key: Some(KEY.to_owned()),
        ..MockConfig::default()
    })
    .await
    .expect("mock started")
}

/// The service target that sends a model's requests to the mock.
fn target(mock: &MockProvider, kind: AdapterKind, model: &str) -> ServiceTarget {
    ServiceTarget {
        endpoint: Endpoint::from_owned(mock.base_url()),
        auth: AuthData::from_single(KEY),
        model: ModelIden::new(kind, model),
    }
}

fn chat_request(text: &str) -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user(text)]).with_system("Answer briefly")
}

fn options() -> ChatOptions {
    ChatOptions::default()
        .with_capture_usage(true)
        .with_capture_content(true)
}

/// The usage expected for `chat_request("hello world")`: 2 + 2 input words, 3 chunks.
fn expected_usage(usage: &Usage) {
    assert_eq!(usage.prompt_tokens, Some(4), "{usage:?}");
    assert_eq!(usage.completion_tokens, Some(3), "{usage:?}");
    assert_eq!(usage.total_tokens, Some(7), "{usage:?}");
}

async fn exec_chat(kind: AdapterKind, model: &str, path: &str) {
    let mock = start().await;
    let client = Client::new().expect("client");
    let response = client
        .exec_chat(
            target(&mock, kind, model),
            chat_request("hello world"),
            Some(&options()),
        )
        .await
        .expect("chat answer");
    assert_eq!(response.first_text(), Some("Echo: hello world"));
    expected_usage(&response.usage);
    assert!(
        matches!(response.stop_reason, Some(StopReason::Completed(_))),
        "{:?}",
        response.stop_reason
    );

    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, path);
    assert_eq!(requests[0].body["stream"], false);
}

async fn exec_chat_stream(kind: AdapterKind, model: &str) {
    let mock = start().await;
    let client = Client::new().expect("client");
    let response = client
        .exec_chat_stream(
            target(&mock, kind, model),
            chat_request("hello world"),
            Some(&options()),
        )
        .await
        .expect("chat stream");
    let mut stream = response.stream;
    let mut chunks = Vec::new();
    let mut end = None;
    while let Some(event) = stream.next().await {
        match event.expect("stream event") {
            ChatStreamEvent::Chunk(chunk) => chunks.push(chunk.content),
            ChatStreamEvent::End(stream_end) => end = Some(stream_end),
            _ => {}
        }
    }
    assert_eq!(chunks, ["Echo:", " hello", " world"]);
    let end = end.expect("an end event");
    assert_eq!(end.captured_first_text(), Some("Echo: hello world"));
    expected_usage(end.captured_usage.as_ref().expect("captured usage"));
    assert!(matches!(
        end.captured_stop_reason,
        Some(StopReason::Completed(_))
    ));

    assert_eq!(mock.requests()[0].body["stream"], true);
    assert_eq!(mock.completed_streams(), 1);
}

#[tokio::test]
async fn openai_exec_chat() {
    exec_chat(AdapterKind::OpenAI, "gpt-4o-mini", "/v1/chat/completions").await;
}

#[tokio::test]
async fn anthropic_exec_chat() {
    exec_chat(AdapterKind::Anthropic, "claude-sonnet-4-5", "/v1/messages").await;
}

#[tokio::test]
async fn openai_exec_chat_stream() {
    exec_chat_stream(AdapterKind::OpenAI, "gpt-4o-mini").await;
}

#[tokio::test]
async fn anthropic_exec_chat_stream() {
    exec_chat_stream(AdapterKind::Anthropic, "claude-sonnet-4-5").await;
}

#[tokio::test]
async fn provider_config_on_the_client() {
    // The other way to configure the client: the endpoint and key of each adapter kind.
    let mock = start().await;
    let client = Client::builder()
        .append_provider_config(
            AdapterKind::OpenAI,
            (
                Endpoint::from_owned(mock.base_url()),
                AuthData::from_single(KEY),
            ),
        )
        .append_provider_config(
            AdapterKind::Anthropic,
            (
                Endpoint::from_owned(mock.base_url()),
                AuthData::from_single(KEY),
            ),
        )
        .build()
        .expect("client");
    for model in ["gpt-4o-mini", "claude-haiku-4-5"] {
        let response = client
            .exec_chat(model, chat_request("hi there"), None)
            .await
            .expect("chat answer");
        assert_eq!(response.first_text(), Some("Echo: hi there"), "{model}");
    }
    let paths: Vec<String> = mock.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/v1/chat/completions", "/v1/messages"]);
}

#[tokio::test]
async fn errors_carry_the_status() {
    let mock = start().await;
    let client = Client::new().expect("client");
    for kind in [AdapterKind::OpenAI, AdapterKind::Anthropic] {
        let model = if kind == AdapterKind::OpenAI {
            "gpt-4o"
        } else {
            "claude-sonnet-4-5"
        };
        let error = client
            .exec_chat(
                target(&mock, kind, model),
                chat_request("[[status:429]]"),
                None,
            )
            .await
            .expect_err("a failure");
        assert_eq!(
            error.status().map(|status| status.as_u16()),
            Some(429),
            "{error}"
        );
        assert!(error.to_string().contains("mock failure 429"), "{error}");

        // Streaming: the failure is the first item after `Start`, wrapping the HTTP error.
        let response = client
            .exec_chat_stream(
                target(&mock, kind, model),
                chat_request("[[status:503]]"),
                None,
            )
            .await
            .expect("the stream is set up before the request is sent");
        let mut stream = response.stream;
        let mut status = None;
        while let Some(event) = stream.next().await {
            if let Err(error) = event {
                if let genai::Error::WebStream { error, .. } = &error {
                    status = error
                        .downcast_ref::<genai::Error>()
                        .and_then(genai::Error::status)
                        .map(|status| status.as_u16());
                }
                break;
            }
        }
        assert_eq!(status, Some(503));
    }
}

#[tokio::test]
async fn a_cut_stream_ends_without_end_event() {
    let mock = start().await;
    let client = Client::new().expect("client");
    for (kind, model) in [
        (AdapterKind::OpenAI, "gpt-4o-mini"),
        (AdapterKind::Anthropic, "claude-sonnet-4-5"),
    ] {
        let response = client
            .exec_chat_stream(
                target(&mock, kind, model),
                chat_request("[[tokens:10]] [[cut:3]]"),
                Some(&options()),
            )
            .await
            .expect("chat stream");
        let mut stream = response.stream;
        let mut chunks = 0;
        let mut failed = false;
        let mut ended = false;
        while let Some(event) = stream.next().await {
            match event {
                Ok(ChatStreamEvent::Chunk(_)) => chunks += 1,
                Ok(ChatStreamEvent::End(_)) => ended = true,
                Ok(_) => {}
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        assert_eq!(chunks, 3, "{kind:?}");
        assert!(!ended, "{kind:?}");
        assert!(failed, "{kind:?}: a cut must surface as an error");
    }
}
