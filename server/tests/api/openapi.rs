//! The OpenAPI document states the rules the server enforces: the key rules of request
//! bodies and parameters are there, derived from the constants and lists the server checks
//! with, and every event a stream test reads (through [`crate::chat::sse_data`]) matches
//! the document's schema of that stream's events.

use std::sync::LazyLock;

use serde_json::{json, Value};

use crate::helpers::*;

/// The document as the router describes it, without the rules the server adds at start
/// (the stream schemas are all in it).
static DOCUMENT: LazyLock<Value> = LazyLock::new(|| {
    let (_, doc) = agentchat::http::api_router().split_for_parts();
    serde_json::to_value(&doc).unwrap()
});

/// A validator of the component schema `name` of `doc`.
fn validator(doc: &Value, name: &str) -> jsonschema::Validator {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": format!("#/components/schemas/{name}"),
        "components": doc["components"],
    });
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The frames of the native chat stream and of the OpenAI-compatible one.
static FRAMES: LazyLock<(jsonschema::Validator, jsonschema::Validator)> = LazyLock::new(|| {
    (
        validator(&DOCUMENT, "ChatStreamFrame"),
        validator(&DOCUMENT, "ChatCompletionStreamFrame"),
    )
});

/// Panics unless `data`, one event's data, is `[DONE]` or a JSON frame of the schema the
/// document gives its stream: a `chat.completion.chunk` or OpenAI error for the
/// OpenAI-compatible API, else a `ChatStreamFrame`.
pub fn assert_event_is_documented(data: &str) {
    if data == app::api::STREAM_DONE {
        return;
    }
    let frame: Value =
        serde_json::from_str(data).unwrap_or_else(|e| panic!("not JSON ({e}): {data}"));
    let openai = frame.get("object").is_some() || frame["error"].is_object();
    let (schema, validator) = if openai {
        ("ChatCompletionStreamFrame", &FRAMES.1)
    } else {
        ("ChatStreamFrame", &FRAMES.0)
    };
    let errors: Vec<String> = validator
        .iter_errors(&frame)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "this event does not match the document's {schema}: {data}\n{errors:#?}"
    );
}

#[test]
fn the_stream_schemas_tell_each_frame_apart() {
    for frame in [
        json!({"chunk": "Hello"}),
        json!({"chunk": "", "usage": {"prompt": 1, "completion": 2, "total": 3}, "model": "m",
               "ragChunksUsed": 0, "threadId": "t", "replyId": "r", "sources": []}),
        json!({"chunk": "", "toolCall": {"id": "c", "name": "n", "type": "http",
               "arguments": {}, "status": "running"}}),
        json!({"chunk": "", "toolCall": {"id": "c", "name": "n", "type": "http",
               "status": "failed", "output": "", "durationMs": 3, "error": "boom"}}),
        json!({"chunk": "", "pendingApprovals": [{"toolCallId": "c", "name": "n", "arguments": {}}]}),
        json!({"error": "Bad Gateway", "message": "upstream failed"}),
    ] {
        assert_event_is_documented(&frame.to_string());
    }
    // A frame of no documented shape is refused, so the check above means something.
    let unknown = json!({"chunk": "", "surprise": true});
    assert!(!FRAMES.0.is_valid(&unknown));
    assert!(!FRAMES.0.is_valid(&json!({"chunk": "x", "usage": {}})));
}

#[tokio::test]
async fn the_document_states_the_rules_the_server_checks() {
    let app = spawn_app().await;
    let doc: Value = app.openapi().await;
    let schemas = &doc["components"]["schemas"];
    let field = |schema: &str, field: &str| schemas[schema]["properties"][field].clone();

    // Names: trimmed, not blank, no control characters (C0 and C1).
    let name = field("CreateAgentRequest", "name");
    assert_eq!(name["pattern"], agentchat::http::openapi::NAME_PATTERN);
    assert_eq!(name["maxLength"], app::api::limits::AGENT_NAME_MAX);
    for schema in [
        "SignupRequest",
        "CreateApiKeyRequest",
        "UpdateAgentRequest",
        "UpdateIntegrationRequest",
    ] {
        assert_eq!(
            field(schema, "name")["pattern"],
            agentchat::http::openapi::NAME_PATTERN,
            "{schema}"
        );
    }
    assert_eq!(field("SignupRequest", "email")["format"], "email");
    assert_eq!(
        field("SignupRequest", "phone")["pattern"],
        agentchat::http::openapi::PHONE_PATTERN
    );
    assert!(field("SignupRequest", "country")["enum"]
        .as_array()
        .unwrap()
        .contains(&json!("DE")));

    // Enumerations come from the server's own lists.
    assert_eq!(
        field("CreateApiKeyRequest", "scopes")["items"]["enum"],
        json!(app::api::SCOPES)
    );
    let events = field("CreateWebhookRequest", "events")["items"]["enum"].clone();
    assert_eq!(events.as_array().unwrap().len(), 12);
    assert!(events.as_array().unwrap().contains(&json!("agent.created")));
    assert_eq!(
        field("FeedbackRequest", "rating")["enum"],
        json!(["up", "down"])
    );
    assert_eq!(field("FeedbackRequest", "comment")["maxLength"], 2000);
    assert!(events
        .as_array()
        .unwrap()
        .contains(&json!("document.refreshed")));

    // A site's refresh schedule: one of the three words, or hours from 1 to a year; the same
    // at creation, in an update and on the document, which also shows the last counts.
    for (schema, property) in [
        ("CrawlOptions", "refresh"),
        ("DocumentSettings", "refresh"),
        ("KnowledgeDocument", "refresh"),
    ] {
        // Optional fields wrap it as `oneOf: [null, schedule]`.
        let refresh = field(schema, property);
        let refresh = match refresh["oneOf"][0]["type"].as_str() {
            Some("null") => refresh["oneOf"][1]["oneOf"].clone(),
            _ => refresh["oneOf"].clone(),
        };
        assert_eq!(
            refresh[0]["enum"],
            json!(["off", "daily", "weekly"]),
            "{schema}"
        );
        assert_eq!(refresh[1]["minimum"], 1, "{schema}");
        assert_eq!(
            refresh[1]["maximum"],
            app::api::limits::REFRESH_HOURS_MAX,
            "{schema}"
        );
    }
    for counted in ["added", "changed", "removed", "unchanged"] {
        assert_eq!(
            schemas["RefreshCounts"]["properties"][counted]["type"], "integer",
            "{counted}"
        );
    }
    for time in ["nextRefreshAt", "lastRefreshedAt"] {
        assert!(field("KnowledgeDocument", time).is_object(), "{time}");
    }
    assert!(doc["paths"]["/api/agents/{agentId}/knowledge/{documentId}"]["patch"].is_object());
    let mut tool_types: Vec<String> = schemas["CreateToolRequest"]["discriminator"]["mapping"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    tool_types.sort();
    assert_eq!(tool_types, ["http", "knowledge_search", "mcp", "web_fetch"]);
    assert_eq!(field("CreateWebhookRequest", "url")["format"], "uri");

    // Integrations: one variant per provider, told apart by `providerCode`.
    let create = &schemas["CreateIntegrationRequest"];
    assert_eq!(create["discriminator"]["propertyName"], "providerCode");
    assert_eq!(create["oneOf"].as_array().unwrap().len(), 8);
    let telegram = &schemas["CreateIntegrationRequest_telegram"];
    assert_eq!(
        telegram["properties"]["providerCode"]["enum"],
        json!(["telegram"])
    );
    assert_eq!(
        telegram["properties"]["credentials"]["required"],
        json!(["botToken"])
    );
    assert_eq!(
        telegram["properties"]["credentials"]["additionalProperties"],
        false
    );
    let website = &schemas["CreateIntegrationRequest_website"];
    assert_eq!(
        website["properties"]["config"]["properties"]["requestsPerMinute"]["maximum"],
        600
    );

    // Required, not nullable, where the provider requires a config field.
    assert_eq!(website["properties"]["config"]["type"], "object");
    assert!(website["required"]
        .as_array()
        .unwrap()
        .contains(&json!("config")));

    // Tools: each type's config; an update's is any of them; a test's arguments any value.
    let http = &schemas["CreateToolRequest_http"];
    assert_eq!(http["properties"]["type"]["enum"], json!(["http"]));
    assert_eq!(http["required"], json!(["type", "config", "name"]));
    assert_eq!(
        http["properties"]["config"]["required"],
        json!(["method", "url", "parameters"])
    );
    let built_in = &schemas["CreateToolRequest_web_fetch"]["properties"]["config"];
    assert_eq!(built_in["type"], json!(["object", "null"]));
    assert_eq!(built_in["additionalProperties"], false);
    assert_eq!(
        schemas["CreateToolRequest_mcp"]["properties"]["config"]["required"],
        json!(["integrationId"])
    );
    assert_eq!(
        field("UpdateToolRequest", "config")["anyOf"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert!(field("TestToolRequest", "arguments").get("type").is_none());

    // The upload's one field, and the OpenAI request's `stop`.
    let upload = &doc["paths"]["/api/agents/{agentId}/knowledge/file"]["post"]["requestBody"];
    assert_eq!(upload["required"], true);
    let form = &upload["content"]["multipart/form-data"]["schema"];
    assert_eq!(form["required"], json!(["file"]));
    assert_eq!(form["properties"]["file"]["format"], "binary");
    let stop = field("ChatCompletionRequest", "stop");
    assert_eq!(stop["oneOf"][1]["minLength"], 1);
    assert_eq!(stop["oneOf"][2]["maxItems"], 4);

    // Unknown fields: refused (and so closed in the schema) only where the type says so.
    for closed in ["ChatRequest", "CreateAgentRequest", "CreateWebhookRequest"] {
        assert_eq!(schemas[closed]["additionalProperties"], false, "{closed}");
    }
    for open in ["SignupRequest", "LoginRequest"] {
        assert!(
            schemas[open].get("additionalProperties").is_none(),
            "{open}"
        );
    }

    // Query parameters.
    let limit = doc["paths"]["/api/agents/{agentId}/conversations"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "limit")
        .unwrap()
        .clone();
    assert_eq!(limit["schema"]["minimum"], 1);
    assert_eq!(limit["schema"]["maximum"], 200);

    // The streams' events.
    let stream = &doc["paths"]["/api/agents/{agentId}/chat"]["post"]["responses"]["200"]["content"]
        ["text/event-stream"]["schema"];
    assert_eq!(stream["$ref"], "#/components/schemas/ChatStreamEvent");
    let data = &schemas["ChatStreamEvent"]["properties"]["data"];
    assert_eq!(data["oneOf"][0]["enum"], json!(["[DONE]"]));
    assert_eq!(
        data["oneOf"][1]["contentSchema"]["$ref"],
        "#/components/schemas/ChatStreamFrame"
    );
    let openai = &doc["paths"]["/api/openai/v1/chat/completions"]["post"]["responses"]["200"]
        ["content"]["text/event-stream"]["schema"];
    assert_eq!(
        openai["$ref"],
        "#/components/schemas/ChatCompletionStreamEvent"
    );
}
