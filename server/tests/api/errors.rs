//! The error model: every failure under /api is `{error, message}`, including the
//! framework's own rejections.

use reqwest::header;
use serde_json::json;

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
