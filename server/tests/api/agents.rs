//! Agents: CRUD, validation, plan limits, scopes and tenant isolation.

use serde_json::{json, Value};

use crate::helpers::*;

async fn create(app: &TestApp, token: &str, body: Value) -> reqwest::Response {
    app.post("/api/agents", Some(token), body).await
}

/// `GET /api/agents/{id}`'s body.
async fn get_agent(app: &TestApp, token: &str, id: &str) -> Value {
    app.get(&format!("/api/agents/{id}"), Some(token))
        .await
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn create_get_list_update_delete() {
    let app = spawn_app().await;
    let user = app.user().await;
    let res = create(&app, &user.access, json!({"name": "Support", "description": "Answers", "systemPrompt": "Be kind", "model": "agentchat-offline"})).await;
    assert_eq!(res.status(), 201);
    let agent = res.json::<Value>().await.unwrap()["agent"].clone();
    assert_eq!(agent["status"], "active");
    assert_eq!(agent["systemPrompt"], "Be kind");
    assert_eq!(agent["model"], "agentchat-offline");
    for field in ["createdAt", "updatedAt"] {
        assert!(chrono::DateTime::parse_from_rfc3339(agent[field].as_str().unwrap()).is_ok());
    }
    let id = agent["id"].as_str().unwrap();
    let got = get_agent(&app, &user.access, id).await;
    assert_eq!(got["agent"], agent);
    let list: Value = app
        .get("/api/agents", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["agents"], json!([agent]));

    let res = app
        .call(
            reqwest::Method::PUT,
            &format!("/api/agents/{id}"),
            Some(&user.access),
            Some(json!({"description": "Answers questions"})),
        )
        .await;
    assert_eq!(res.status(), 200);
    let updated = res.json::<Value>().await.unwrap()["agent"].clone();
    assert_eq!(updated["description"], "Answers questions");
    assert_eq!(updated["name"], "Support", "omitted fields are unchanged");
    assert_eq!(updated["systemPrompt"], "Be kind");
    // Read again at once: the agent read before the update is not served from memory.
    let got = get_agent(&app, &user.access, id).await;
    assert_eq!(got["agent"], updated);

    assert_eq!(
        app.delete(&format!("/api/agents/{id}"), Some(&user.access))
            .await
            .status(),
        200
    );
    assert_error(
        app.get(&format!("/api/agents/{id}"), Some(&user.access))
            .await,
        404,
        "Not Found",
        None,
    )
    .await;
}

#[tokio::test]
async fn bad_agent_input_is_400() {
    let app = spawn_app().await;
    let user = app.user().await;
    for body in [
        json!({}),
        json!({"name": ""}),
        json!({"name": "   "}),
        json!({"name": 5}),
        json!({"name": "x", "model": "gpt-nonexistent"}),
        json!({"name": "x", "systemPrompt": "y".repeat(32_001)}),
        json!({"name": "x", "unknownField": true}),
    ] {
        assert_error(
            create(&app, &user.access, body).await,
            400,
            "Bad Request",
            None,
        )
        .await;
    }
    let bad_model = create(
        &app,
        &user.access,
        json!({"name": "x", "model": "gpt-nonexistent"}),
    )
    .await;
    let body = assert_error(bad_model, 400, "Bad Request", None).await;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("agentchat-offline"),
        "lists the valid models: {body}"
    );
    let res = create(&app, &user.access, json!({"name": "ok"})).await;
    let id = res.json::<Value>().await.unwrap()["agent"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let empty = app
        .call(
            reqwest::Method::PUT,
            &format!("/api/agents/{id}"),
            Some(&user.access),
            Some(json!({"name": ""})),
        )
        .await;
    assert_error(empty, 400, "Bad Request", None).await;
}

#[tokio::test]
async fn the_plan_limit_is_403_naming_the_limit() {
    let app = spawn_app().await;
    let user = app.user().await;
    for n in 0..3 {
        assert_eq!(
            create(&app, &user.access, json!({"name": format!("a{n}")}))
                .await
                .status(),
            201
        );
    }
    let res = create(&app, &user.access, json!({"name": "one too many"})).await;
    let body = assert_error(res, 403, "Forbidden", None).await;
    assert!(
        body["message"].as_str().unwrap().contains("3 agents"),
        "{body}"
    );
    let list: Value = app
        .get("/api/agents", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["agents"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn the_limit_is_configurable_per_plan() {
    let app = spawn_app_with(|c| c.limits.agent_limits = [1, 10, 50, 500]).await;
    let user = app.user().await;
    assert_eq!(
        create(&app, &user.access, json!({"name": "a"}))
            .await
            .status(),
        201
    );
    assert_error(
        create(&app, &user.access, json!({"name": "b"})).await,
        403,
        "Forbidden",
        None,
    )
    .await;
}

#[tokio::test]
async fn another_users_agent_is_404_on_every_verb() {
    let app = spawn_app().await;
    let (alice, bob) = (app.user().await, app.user().await);
    let res = create(&app, &alice.access, json!({"name": "private"})).await;
    let id = res.json::<Value>().await.unwrap()["agent"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/api/agents/{id}");
    for res in [
        app.get(&path, Some(&bob.access)).await,
        app.call(
            reqwest::Method::PUT,
            &path,
            Some(&bob.access),
            Some(json!({"name": "mine"})),
        )
        .await,
        app.delete(&path, Some(&bob.access)).await,
        app.post(
            &format!("{path}/chat"),
            Some(&bob.access),
            json!({"message": "hi"}),
        )
        .await,
        app.get(&format!("{path}/conversations"), Some(&bob.access))
            .await,
    ] {
        assert_error(res, 404, "Not Found", None).await;
    }
    let list: Value = app
        .get("/api/agents", Some(&bob.access))
        .await
        .json()
        .await
        .unwrap();
    assert!(list["agents"].as_array().unwrap().is_empty());
    let still: Value = app
        .get(&path, Some(&alice.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(still["agent"]["name"], "private");
}

#[tokio::test]
async fn scopes_are_enforced_on_agents_and_chat() {
    let app = spawn_app().await;
    let user = app.user().await;
    let (_, reader) = app.api_key(&user, &["agents:read"]).await;
    let (_, writer) = app.api_key(&user, &["agents:write"]).await;
    let (_, chatter) = app.api_key(&user, &["chat:write"]).await;
    let forbidden = |res| assert_error(res, 403, "Forbidden", Some("Insufficient permissions"));
    forbidden(create(&app, &reader, json!({"name": "x"})).await).await;
    let res = create(&app, &writer, json!({"name": "x"})).await;
    assert_eq!(res.status(), 201);
    let id = res.json::<Value>().await.unwrap()["agent"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    forbidden(app.get("/api/agents", Some(&writer)).await).await;
    assert_eq!(app.get("/api/agents", Some(&reader)).await.status(), 200);
    assert_eq!(app.get("/api/models", Some(&reader)).await.status(), 200);
    forbidden(app.chat(&reader, &id, json!({"message": "hi"})).await).await;
    assert_eq!(
        app.chat(&chatter, &id, json!({"message": "hi"}))
            .await
            .status(),
        200
    );
    forbidden(
        app.get(&format!("/api/agents/{id}/conversations"), Some(&chatter))
            .await,
    )
    .await;
    forbidden(
        app.delete(&format!("/api/agents/{id}"), Some(&reader))
            .await,
    )
    .await;
    assert_unauthorized(app.get("/api/agents", None).await).await;
}

#[tokio::test]
async fn models_list_the_builtin_model_when_no_provider_is_configured() {
    let app = spawn_app().await;
    let user = app.user().await;
    let body: Value = app
        .get("/api/models", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        body["models"],
        json!([{"id": "agentchat-offline", "provider": "builtin", "contextWindow": 8192}])
    );
    assert_eq!(body["defaultModel"], "agentchat-offline");
}
