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
    let doc: Value = app
        .get("/api/openapi.json", None)
        .await
        .json()
        .await
        .unwrap();
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
        ("post", "/api/api-keys"),
        ("get", "/api/api-keys"),
        ("delete", "/api/api-keys/{id}"),
        ("post", "/api/api-keys/{id}/rotate"),
        ("get", "/api/health"),
        ("get", "/api/openapi.json"),
        ("get", "/api/docs"),
        ("get", "/api/agents"),
        ("post", "/api/agents"),
        ("get", "/api/agents/{agentId}"),
        ("put", "/api/agents/{agentId}"),
        ("delete", "/api/agents/{agentId}"),
        ("get", "/api/models"),
        ("post", "/api/agents/{agentId}/chat"),
        ("get", "/api/agents/{agentId}/conversations"),
        (
            "get",
            "/api/agents/{agentId}/conversations/{threadId}/messages",
        ),
        ("delete", "/api/agents/{agentId}/conversations/{threadId}"),
        ("post", "/api/agents/{agentId}/knowledge/file"),
        ("post", "/api/agents/{agentId}/knowledge/url"),
        ("get", "/api/agents/{agentId}/knowledge"),
        ("get", "/api/agents/{agentId}/knowledge/{documentId}"),
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
    let app = spawn_app_with(|c| c.leptos_site_root = root).await;
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
