//! The error model: every failure under /api is `{error, message}`, including the
//! framework's own rejections.

use reqwest::{header, Method};
use serde_json::{json, Value};

use crate::helpers::*;

#[tokio::test]
async fn framework_rejections_use_the_contract_body() {
    let app = spawn_app().await;
    let post_raw = |body: &'static str, content_type: &'static str| {
        app.client
            .post(app.url("/api/auth/login"))
            .header(header::CONTENT_TYPE, content_type)
            .body(body)
            .send()
    };
    let malformed = post_raw("{\"email\": ", "application/json").await.unwrap();
    assert_error(malformed, 400, "Bad Request", None).await;
    let wrong_type = post_raw("email=a", "application/x-www-form-urlencoded")
        .await
        .unwrap();
    assert_error(wrong_type, 415, "Unsupported Media Type", None).await;
    let wrong_shape = app
        .post("/api/auth/login", None, json!({"email": 5, "password": []}))
        .await;
    assert_error(wrong_shape, 400, "Bad Request", None).await;
    let huge = "x".repeat(1024 * 1024 + 10);
    let too_large = app
        .client
        .post(app.url("/api/auth/signup"))
        .json(&json!({"name": huge, "email": "a@example.com", "password": "password123"}))
        .send()
        .await
        .unwrap();
    assert_error(too_large, 413, "Payload Too Large", None).await;
    assert_error(
        app.get("/api/nothing/here", None).await,
        404,
        "Not Found",
        None,
    )
    .await;
    assert_error(app.get("/api", None).await, 404, "Not Found", None).await;
    assert_error(
        app.delete("/api/auth/login", None).await,
        405,
        "Method Not Allowed",
        None,
    )
    .await;
    assert_error(
        app.get("/api/auth/verify-email", None).await,
        400,
        "Bad Request",
        None,
    )
    .await;
}

#[tokio::test]
async fn responses_carry_a_request_id() {
    let app = spawn_app().await;
    let res = app.get("/api/health", None).await;
    assert!(uuid::Uuid::parse_str(res.headers()["x-request-id"].to_str().unwrap()).is_ok());
}

/// Every JSON request body must be an object: an array (even one shaped like the body's
/// fields in order), `null`, a string, a number or a boolean is refused with 400 before the
/// handler runs, so nothing is created or changed.
#[tokio::test]
async fn json_bodies_that_are_not_objects_are_refused_and_change_nothing() {
    let app = spawn_app().await;
    let user = app.user().await;
    let token = Some(user.access.as_str());
    let res = app
        .post(
            "/api/agents",
            token,
            json!({"name": "Keeper", "description": "stays as it is"}),
        )
        .await;
    assert_eq!(res.status(), 201);
    let agent = res.json::<Value>().await.unwrap()["agent"].clone();
    let agent_id = agent["id"].as_str().unwrap();
    let shop = "http://shop.example";
    let res = app
        .post(
            "/api/integrations",
            token,
            json!({"providerCode": "website", "name": "Shop", "agentId": agent_id,
                "credentials": {}, "config": {"allowedOrigins": [shop]}}),
        )
        .await;
    assert_eq!(res.status(), 201);
    let integration_id = res.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let integration_path = format!("/api/integrations/{integration_id}");
    let integration: Value = app
        .get(&integration_path, token)
        .await
        .json()
        .await
        .unwrap();
    let public_id = integration["integration"]["connection"]["publicId"]
        .as_str()
        .unwrap();

    // (method, path, sent with the user's token)
    let endpoints = [
        (Method::POST, "/api/auth/signup".to_string(), false),
        (Method::POST, "/api/auth/login".into(), false),
        (Method::POST, "/api/auth/verify-email".into(), false),
        (Method::POST, "/api/auth/resend-verification".into(), false),
        (Method::POST, "/api/auth/refresh".into(), false),
        (Method::POST, "/api/auth/forgot-password".into(), false),
        (Method::POST, "/api/auth/reset-password".into(), false),
        (Method::POST, "/api/auth/oauth/exchange".into(), false),
        (Method::POST, "/api/api-keys".into(), true),
        (Method::POST, "/api/agents".into(), true),
        (Method::PUT, format!("/api/agents/{agent_id}"), true),
        (Method::POST, format!("/api/agents/{agent_id}/chat"), true),
        (
            Method::POST,
            format!("/api/agents/{agent_id}/knowledge/url"),
            true,
        ),
        (Method::POST, "/api/integrations".into(), true),
        (Method::PUT, integration_path.clone(), true),
        (Method::POST, "/api/integrations/webhooks".into(), true),
        (Method::POST, format!("/api/widget/{public_id}/chat"), false),
    ];
    let bodies = [
        ("[]", "an array"),
        ("[\"Renamed\"]", "an array"),
        ("null", "null"),
        ("\"x\"", "a string"),
        ("1", "a number"),
        ("true", "a boolean"),
    ];
    for (method, path, authenticated) in &endpoints {
        for (body, kind) in bodies {
            let mut request = app
                .client
                .request(method.clone(), app.url(path))
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ORIGIN, shop)
                .body(body);
            if *authenticated {
                request = request.bearer_auth(&user.access);
            }
            let res = request.send().await.unwrap();
            let error = assert_error(res, 400, "Bad Request", None).await;
            assert_eq!(
                error["message"],
                format!("The request body must be a JSON object, not {kind}"),
                "{method} {path} with {body}"
            );
        }
    }

    let after: Value = app
        .get(&format!("/api/agents/{agent_id}"), token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(after["agent"], agent, "the agent is unchanged");
    let agents: Value = app.get("/api/agents", token).await.json().await.unwrap();
    assert_eq!(agents["agents"].as_array().unwrap().len(), 1);
    let now: Value = app
        .get(&integration_path, token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(now, integration, "the integration is unchanged");
    let integrations: Value = app
        .get("/api/integrations", token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(integrations["integrations"].as_array().unwrap().len(), 1);
    let keys: Value = app.get("/api/api-keys", token).await.json().await.unwrap();
    assert_eq!(keys["apiKeys"], json!([]));
    let webhooks: Value = app
        .get("/api/integrations/webhooks", token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(webhooks["webhooks"], json!([]));
    let conversations: Value = app
        .get(&format!("/api/agents/{agent_id}/conversations"), token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(conversations["conversations"], json!([]));
    let documents: Value = app
        .get(&format!("/api/agents/{agent_id}/knowledge"), token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(documents["documents"], json!([]));
}
