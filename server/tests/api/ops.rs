//! Health, the OpenAPI document, the reference page and the dashboard shell.

use serde_json::Value;

use crate::helpers::*;

#[tokio::test]
async fn health_reports_status_and_version() {
    let app = spawn_app().await;
    let body: Value = app.get("/api/health", None).await.json().await.unwrap();
    assert_eq!(body["status"], "ok");
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
}

#[tokio::test]
async fn the_openapi_document_covers_every_endpoint() {
    let app = spawn_app().await;
    let doc: Value = app.openapi().await;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let paths = doc["paths"].as_object().unwrap();
    let expected = [
        ("post", "/api/auth/signup"),
        ("get", "/api/auth/verify-email"),
        ("post", "/api/auth/verify-email"),
        ("post", "/api/auth/resend-verification"),
        ("post", "/api/auth/login"),
        ("post", "/api/auth/refresh"),
        ("post", "/api/auth/logout"),
        ("get", "/api/auth/me"),
        ("get", "/api/auth/sessions"),
        ("delete", "/api/auth/sessions/{id}"),
        ("post", "/api/auth/forgot-password"),
        ("post", "/api/auth/reset-password"),
        ("get", "/api/auth/providers"),
        ("get", "/api/auth/oauth/{provider}"),
        ("get", "/api/auth/oauth/{provider}/callback"),
        ("post", "/api/auth/oauth/exchange"),
        ("post", "/api/auth/oauth/{provider}/link"),
        ("delete", "/api/auth/oauth/{provider}/link"),
        ("get", "/api/auth/identities"),
        ("get", "/api/usage"),
        ("get", "/api/integrations/providers"),
        ("get", "/api/integrations"),
        ("post", "/api/integrations"),
        ("get", "/api/integrations/{id}"),
        ("put", "/api/integrations/{id}"),
        ("delete", "/api/integrations/{id}"),
        ("get", "/api/integrations/{id}/tools"),
        ("post", "/api/api-keys"),
        ("get", "/api/api-keys"),
        ("delete", "/api/api-keys/{id}"),
        ("post", "/api/api-keys/{id}/rotate"),
        ("get", "/api/health"),
        ("get", "/api/health/ready"),
        ("get", "/api/openapi.json"),
        ("get", "/api/docs"),
        ("get", "/metrics"),
        ("get", "/api/agents"),
        ("post", "/api/agents"),
        ("get", "/api/agents/{agentId}"),
        ("put", "/api/agents/{agentId}"),
        ("delete", "/api/agents/{agentId}"),
        ("get", "/api/models"),
        ("post", "/api/agents/{agentId}/chat"),
        ("get", "/api/agents/{agentId}/conversations"),
        ("get", "/api/conversations"),
        ("get", "/api/agents/{agentId}/conversations/export"),
        ("get", "/api/analytics"),
        (
            "get",
            "/api/agents/{agentId}/conversations/{threadId}/messages",
        ),
        ("delete", "/api/agents/{agentId}/conversations/{threadId}"),
        (
            "put",
            "/api/agents/{agentId}/conversations/{threadId}/messages/{messageId}/feedback",
        ),
        (
            "delete",
            "/api/agents/{agentId}/conversations/{threadId}/messages/{messageId}/feedback",
        ),
        (
            "post",
            "/api/agents/{agentId}/conversations/{threadId}/approvals",
        ),
        (
            "get",
            "/api/agents/{agentId}/conversations/{threadId}/stream",
        ),
        (
            "post",
            "/api/agents/{agentId}/conversations/{threadId}/cancel",
        ),
        ("get", "/api/agents/{agentId}/tools"),
        ("post", "/api/agents/{agentId}/tools"),
        ("get", "/api/agents/{agentId}/tools/{toolId}"),
        ("put", "/api/agents/{agentId}/tools/{toolId}"),
        ("delete", "/api/agents/{agentId}/tools/{toolId}"),
        ("post", "/api/agents/{agentId}/tools/{toolId}/test"),
        ("post", "/api/agents/{agentId}/knowledge/file"),
        ("post", "/api/agents/{agentId}/knowledge/url"),
        ("get", "/api/agents/{agentId}/knowledge"),
        ("get", "/api/agents/{agentId}/knowledge/{documentId}"),
        ("patch", "/api/agents/{agentId}/knowledge/{documentId}"),
        ("delete", "/api/agents/{agentId}/knowledge/{documentId}"),
        (
            "post",
            "/api/agents/{agentId}/knowledge/{documentId}/refresh",
        ),
        ("get", "/api/jobs/{jobId}"),
        ("get", "/api/integrations/webhooks"),
        ("post", "/api/integrations/webhooks"),
        ("delete", "/api/integrations/webhooks/{id}"),
        ("get", "/api/integrations/webhooks/events"),
        ("get", "/api/integrations/webhooks/{id}/deliveries"),
        (
            "post",
            "/api/integrations/webhooks/{id}/deliveries/{deliveryId}/redeliver",
        ),
        ("post", "/api/channels/telegram/{integrationId}"),
        ("post", "/api/channels/slack/{integrationId}"),
        ("get", "/api/widget/{publicId}"),
        ("post", "/api/widget/{publicId}/chat"),
        ("get", "/api/widget/{publicId}/messages"),
        (
            "put",
            "/api/widget/{publicId}/messages/{messageId}/feedback",
        ),
        (
            "delete",
            "/api/widget/{publicId}/messages/{messageId}/feedback",
        ),
        ("get", "/api/openai/v1/models"),
        ("get", "/api/openai/v1/models/{model}"),
        ("post", "/api/openai/v1/chat/completions"),
        ("post", "/api/mcp"),
        ("get", "/api/mcp"),
        ("delete", "/api/mcp"),
    ];
    for (method, path) in expected {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} missing"
        );
    }
    let operations: usize = paths.values().map(|p| p.as_object().unwrap().len()).sum();
    assert_eq!(
        operations,
        expected.len(),
        "no undocumented extras and nothing missing"
    );
    assert!(doc["components"]["schemas"]["SignupRequest"].is_object());
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
}

/// `value`, or what it points to when it is a `$ref` into `doc`.
fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(target) => doc
            .pointer(target.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("{target} points nowhere")),
        None => value,
    }
}

/// Whether a schema admits strings (`"type": "string"` or a type list with it).
fn is_string(schema: &Value) -> bool {
    schema["type"] == "string"
        || schema["type"]
            .as_array()
            .is_some_and(|types| types.contains(&Value::from("string")))
}

/// What the document must say about every operation: 400 where it takes input (a body, a
/// path or a query parameter), 413 and 415 where it takes a JSON body, 429 with its headers
/// wherever requests are metered (all but the health checks); query parameters `in: query`; required
/// strings of request bodies at least one character long; the chat reply as JSON and as an
/// event stream; and the length limits that the handlers check.
#[tokio::test]
async fn every_operation_documents_its_errors_parameters_and_input_rules() {
    let app = spawn_app_with(|c| c.chat.max_message_chars = 777).await;
    let doc: Value = app.openapi().await;
    let mut failures = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let name = format!("{} {path}", method.to_uppercase());
            let responses = op["responses"].as_object().unwrap();
            let params: Vec<Value> = op
                .get("parameters")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let template: Vec<&str> = path
                .split('/')
                .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
                .collect();
            for p in &params {
                let param = p["name"].as_str().unwrap();
                let place = if template.contains(&param) {
                    "path"
                } else if param == "Last-Event-ID" {
                    // The header browsers' EventSource sends when it reconnects.
                    "header"
                } else {
                    "query"
                };
                if p["in"] != place {
                    failures.push(format!("{name}: {param} is in {}, not {place}", p["in"]));
                }
            }
            for param in &template {
                if !params
                    .iter()
                    .any(|p| p["name"] == *param && p["in"] == "path")
                {
                    failures.push(format!("{name}: path parameter {param} undocumented"));
                }
            }
            let body = op.get("requestBody");
            if (body.is_some() || !params.is_empty()) && !responses.contains_key("400") {
                failures.push(format!("{name}: takes input but documents no 400"));
            }
            let json_schema = body.and_then(|b| b.pointer("/content/application~1json/schema"));
            if json_schema.is_some() {
                for status in ["413", "415"] {
                    if !responses.contains_key(status) {
                        failures.push(format!("{name}: takes JSON but documents no {status}"));
                    }
                }
            }
            let unmetered = matches!(
                name.as_str(),
                "GET /api/health" | "GET /api/health/ready" | "GET /metrics"
            );
            match (unmetered, responses.get("429")) {
                (true, None) => {}
                (true, Some(_)) => failures.push(format!("{name}: is not metered")),
                (false, None) => failures.push(format!("{name}: is metered but has no 429")),
                (false, Some(limited)) => {
                    let limited = resolve(&doc, limited);
                    for header in [
                        "Retry-After",
                        "X-RateLimit-Limit",
                        "X-RateLimit-Remaining",
                        "X-RateLimit-Reset",
                    ] {
                        if limited["headers"].get(header).is_none() {
                            failures.push(format!("{name}: its 429 lacks {header}"));
                        }
                    }
                }
            }
            if let Some(schema) = json_schema {
                let schema = resolve(&doc, schema);
                let required = schema["required"].as_array().cloned().unwrap_or_default();
                for (field, property) in schema["properties"].as_object().into_iter().flatten() {
                    let property = resolve(&doc, property);
                    let needed = required.contains(&Value::from(field.as_str()));
                    if needed
                        && is_string(property)
                        && property["minLength"].as_u64().is_none_or(|n| n < 1)
                    {
                        failures.push(format!("{name}: required string {field} lacks minLength"));
                    }
                }
            }
        }
    }
    let chat = &doc["paths"]["/api/agents/{agentId}/chat"]["post"]["responses"]["200"]["content"];
    for media in ["application/json", "text/event-stream"] {
        if chat.get(media).is_none() {
            failures.push(format!(
                "POST /api/agents/{{agentId}}/chat: 200 lacks {media}"
            ));
        }
    }

    use agentchat::{
        http::{agents, api_keys, auth, webhooks},
        public_url::URL_MAX,
    };
    let limits = [
        ("SignupRequest", "name", 1, Some(auth::USER_NAME_MAX)),
        ("CreateApiKeyRequest", "name", 1, Some(api_keys::NAME_MAX)),
        ("CreateAgentRequest", "name", 1, Some(agents::NAME_MAX)),
        ("UpdateAgentRequest", "name", 1, Some(agents::NAME_MAX)),
        (
            "CreateAgentRequest",
            "description",
            0,
            Some(agents::DESCRIPTION_MAX),
        ),
        (
            "UpdateAgentRequest",
            "description",
            0,
            Some(agents::DESCRIPTION_MAX),
        ),
        (
            "CreateAgentRequest",
            "systemPrompt",
            0,
            Some(agents::SYSTEM_PROMPT_MAX),
        ),
        (
            "UpdateAgentRequest",
            "systemPrompt",
            0,
            Some(agents::SYSTEM_PROMPT_MAX),
        ),
        // One variant per provider, each with the common fields' rules.
        (
            "CreateIntegrationRequest_telegram",
            "name",
            1,
            Some(agentchat::integrations::MAX_NAME_CHARS),
        ),
        (
            "UpdateIntegrationRequest",
            "name",
            1,
            Some(agentchat::integrations::MAX_NAME_CHARS),
        ),
        (
            "CreateWebhookRequest",
            "description",
            0,
            Some(webhooks::DESCRIPTION_MAX),
        ),
        ("CreateWebhookRequest", "url", 1, Some(URL_MAX)),
        ("AddUrlRequest", "url", 1, Some(URL_MAX)),
        ("ChatRequest", "message", 1, Some(777)),
        ("WidgetChatRequest", "message", 1, Some(777)),
        ("LoginRequest", "password", 1, None),
    ];
    for (schema, field, min, max) in limits {
        let property = &doc["components"]["schemas"][schema]["properties"][field];
        let found = (
            property["minLength"].as_u64().unwrap_or(0) as usize,
            property["maxLength"].as_u64().map(|n| n as usize),
        );
        if found != (min, max) {
            failures.push(format!(
                "{schema}.{field}: lengths {found:?}, not {:?}",
                (min, max)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn the_reference_page_lists_the_endpoints() {
    let app = spawn_app().await;
    let res = app.get("/api/docs", None).await;
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let html = res.text().await.unwrap();
    assert!(html.contains("/api/auth/signup") && html.contains("SignupRequest"));
    assert!(
        !html.contains("<script"),
        "self-contained, no external scripts"
    );
}

#[tokio::test]
async fn the_dashboard_shell_is_server_rendered() {
    let app = spawn_app().await;
    for path in ["/", "/login", "/signup"] {
        let res = app.get(path, None).await;
        assert_eq!(res.status(), 200, "{path}");
        let html = res.text().await.unwrap();
        assert!(
            html.contains("<!DOCTYPE html>") && html.contains("/pkg/agentchat"),
            "{path}"
        );
    }
}

#[tokio::test]
async fn the_dashboard_bundle_is_served_compressed_when_the_browser_accepts_it() {
    let site = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(site.path().join("pkg")).unwrap();
    let wasm: Vec<u8> = (0..64 * 1024).map(|i| (i % 7) as u8).collect();
    std::fs::write(site.path().join("pkg/agentchat.wasm"), &wasm).unwrap();
    let root = site.path().display().to_string();
    let app = spawn_app_with(|c| c.server.leptos_site_root = root).await;
    let url = app.url("/pkg/agentchat.wasm");
    for (accept, encoding) in [("br", "br"), ("gzip", "gzip")] {
        let res = app
            .client
            .get(&url)
            .header(reqwest::header::ACCEPT_ENCODING, accept)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["content-encoding"], encoding);
        assert_eq!(res.headers()["content-type"], "application/wasm");
        assert!(res.bytes().await.unwrap().len() < wasm.len() / 4);
    }
    // Without Accept-Encoding the file comes as it is.
    let res = app.client.get(&url).send().await.unwrap();
    assert!(res.headers().get("content-encoding").is_none());
    assert_eq!(res.bytes().await.unwrap(), wasm);
    assert_eq!(app.get("/pkg/missing.wasm", None).await.status(), 404);
}
