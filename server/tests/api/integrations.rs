//! `/api/integrations`: the catalogue, validation against each provider's fields,
//! credentials encrypted at rest and never returned, updates, scopes and tenant isolation.

use serde_json::{json, Value};

use crate::helpers::*;

const BOT_TOKEN: &str = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq";
const SLACK_TOKEN: &str = "xoxb-2222-3333-integrationsecret";
const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const GOOD_SIGNING_SECRET: &str = "8f742231b10e8888abcd99aaaeee85a5";

async fn agent(app: &TestApp, user: &TestUser) -> String {
    let res = app
        .post("/api/agents", Some(&user.access), json!({"name": "Bot"}))
        .await;
    assert_eq!(res.status(), 201);
    res.json::<Value>().await.unwrap()["agent"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn create(app: &TestApp, token: &str, body: Value) -> reqwest::Response {
    app.post("/api/integrations", Some(token), body).await
}

async fn telegram(app: &TestApp, user: &TestUser, agent_id: Option<&str>) -> String {
    let mut body = json!({"providerCode": "telegram", "name": "Support bot", "credentials": {"botToken": BOT_TOKEN}});
    if let Some(a) = agent_id {
        body["agentId"] = json!(a);
    }
    let res = create(app, &user.access, body).await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let body: Value = res.json().await.unwrap();
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    body["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn the_catalogue_lists_every_provider_with_its_fields() {
    let app = spawn_app().await;
    let user = app.user().await;
    let body: Value = app
        .get("/api/integrations/providers", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    let providers = body["providers"].as_array().unwrap();
    let codes: Vec<&str> = providers
        .iter()
        .map(|p| p["code"].as_str().unwrap())
        .collect();
    for code in [
        "telegram", "slack", "discord", "whatsapp", "zapier", "website", "http", "mcp",
    ] {
        assert!(codes.contains(&code), "{code} missing from {codes:?}");
    }
    let slack = providers.iter().find(|p| p["code"] == "slack").unwrap();
    assert_eq!(
        slack["credentialFields"][1],
        json!({"name": "signingSecret", "label": "Signing secret", "secret": true, "required": true})
    );
    assert!(slack["live"].is_boolean());
    assert!(slack["configFields"].is_array());
}

#[tokio::test]
async fn creation_is_validated_against_the_provider() {
    let app = spawn_app().await;
    let user = app.user().await;
    let cases = [
        (
            json!({"providerCode": "myspace", "name": "x", "credentials": {}}),
            "providerCode must be one of",
        ),
        (
            json!({"providerCode": "telegram", "name": " ", "credentials": {"botToken": BOT_TOKEN}}),
            "name is required",
        ),
        (
            json!({"providerCode": "telegram", "name": "x", "credentials": {}}),
            "credentials.botToken is required",
        ),
        (
            json!({"providerCode": "telegram", "name": "x", "credentials": {"botToken": "nope"}}),
            "credentials.botToken must look like",
        ),
        (
            json!({"providerCode": "telegram", "name": "x", "credentials": "token"}),
            "credentials must be an object",
        ),
        (
            json!({"providerCode": "slack", "name": "x", "credentials": {"botToken": SLACK_TOKEN, "signingSecret": SIGNING_SECRET}}),
            "credentials.signingSecret must be",
        ),
        (
            json!({"providerCode": "website", "name": "x", "credentials": {}, "config": {"allowedOrigins": ["https://example.com/page"]}}),
            "config.allowedOrigins",
        ),
        (
            json!({"providerCode": "telegram", "name": "x", "credentials": {"botToken": BOT_TOKEN}, "colour": "red"}),
            "colour",
        ),
    ];
    for (body, message) in cases {
        let res = create(&app, &user.access, body.clone()).await;
        let error = assert_error(res, 400, "Bad Request", None).await;
        assert!(
            error["message"].as_str().unwrap().contains(message),
            "{body}: {error}"
        );
    }
    let res = create(
        &app,
        &user.access,
        json!({"providerCode": "telegram", "name": "x", "agentId": "no-such-agent", "credentials": {"botToken": BOT_TOKEN}}),
    )
    .await;
    assert_error(res, 404, "Not Found", Some("Agent not found")).await;
    // Nothing was stored by any of these.
    let list: Value = app
        .get("/api/integrations", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["integrations"], json!([]));
}

#[tokio::test]
async fn credentials_are_encrypted_at_rest_and_never_returned() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent_id = agent(&app, &user).await;
    let id = telegram(&app, &user, Some(&agent_id)).await;
    let res = create(
        &app,
        &user.access,
        json!({"providerCode": "slack", "name": "Workspace", "credentials": {"botToken": SLACK_TOKEN, "signingSecret": GOOD_SIGNING_SECRET}}),
    )
    .await;
    assert_eq!(res.status(), 201);

    let list: Value = app
        .get("/api/integrations", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    let text = list.to_string();
    for secret in [BOT_TOKEN, SLACK_TOKEN, GOOD_SIGNING_SECRET] {
        assert!(!text.contains(secret), "a secret was returned");
        assert!(
            !contains(&app.database_bytes(), secret),
            "a secret is in the database file in clear"
        );
    }
    let first = &list["integrations"][0];
    assert_eq!(first["id"], id.as_str());
    assert_eq!(first["providerCode"], "telegram");
    assert_eq!(first["agentId"], agent_id.as_str());
    // The tests reach no Telegram: the bot's webhook could not be registered.
    assert_eq!(first["status"], "error");
    assert!(first["statusDetail"]
        .as_str()
        .unwrap()
        .starts_with("Telegram did not accept the webhook: Telegram could not be reached"));
    assert_eq!(first["credentials"], json!({"botToken": "••••sawq"}));
    let one: Value = app
        .get(&format!("/api/integrations/{id}"), Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(&one["integration"], first);
}

#[tokio::test]
async fn moved_or_tampered_ciphertexts_do_not_open() {
    let app = spawn_app().await;
    let user = app.user().await;
    let a = telegram(&app, &user, None).await;
    let b = telegram(&app, &user, None).await;
    // Copy a's sealed credentials into b: they are bound to a, so b's update cannot open them.
    app.sql(
        "UPDATE integrations SET credentials_sealed = (SELECT credentials_sealed FROM integrations WHERE id = $1) WHERE id = $2",
        vec![(&a).into(), (&b).into()],
    )
    .await;
    let res = app
        .call(
            reqwest::Method::PUT,
            &format!("/api/integrations/{b}"),
            Some(&user.access),
            Some(json!({"credentials": {"botToken": BOT_TOKEN}})),
        )
        .await;
    assert_eq!(res.status(), 500);
    // Flip one bit of a's ciphertext.
    let mut sealed: Vec<u8> = app
        .sql_scalar(
            "SELECT credentials_sealed FROM integrations WHERE id = $1",
            vec![(&a).into()],
        )
        .await;
    let last = sealed.len() - 1;
    sealed[last] ^= 1;
    app.sql(
        "UPDATE integrations SET credentials_sealed = $1 WHERE id = $2",
        vec![sealed.into(), (&a).into()],
    )
    .await;
    let res = app
        .call(
            reqwest::Method::PUT,
            &format!("/api/integrations/{a}"),
            Some(&user.access),
            Some(json!({"config": {}})),
        )
        .await;
    assert_eq!(res.status(), 500);
}

#[tokio::test]
async fn updates_keep_what_is_not_given() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent_id = agent(&app, &user).await;
    let res = create(
        &app,
        &user.access,
        json!({"providerCode": "slack", "name": "Workspace", "agentId": agent_id, "credentials": {"botToken": SLACK_TOKEN, "signingSecret": GOOD_SIGNING_SECRET}}),
    )
    .await;
    let id = res.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let put = |body: Value| {
        let app = &app;
        let user = &user;
        let id = id.clone();
        async move {
            app.call(
                reqwest::Method::PUT,
                &format!("/api/integrations/{id}"),
                Some(&user.access),
                Some(body),
            )
            .await
        }
    };
    let res = put(json!({"name": "Renamed"})).await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["integration"]["name"], "Renamed");
    assert_eq!(body["integration"]["agentId"], agent_id.as_str());
    assert_eq!(body["integration"]["credentials"]["botToken"], "••••cret");

    let res = put(json!({"credentials": {"botToken": "xoxb-9999-8888-replacedtoken"}})).await;
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["integration"]["credentials"]["botToken"], "••••oken");
    assert_eq!(
        body["integration"]["credentials"]["signingSecret"],
        "••••85a5"
    );

    let res = put(json!({"agentId": null})).await;
    assert_eq!(
        res.json::<Value>().await.unwrap()["integration"]["agentId"],
        Value::Null
    );
    let res = put(json!({"credentials": {"signingSecret": "short"}})).await;
    assert_error(res, 400, "Bad Request", None).await;
    let res = put(json!({"providerCode": "telegram"})).await;
    assert_error(res, 400, "Bad Request", None).await;

    // Deleting a linked agent unlinks its integrations.
    put(json!({"agentId": agent_id})).await;
    app.delete(&format!("/api/agents/{agent_id}"), Some(&user.access))
        .await;
    let one: Value = app
        .get(&format!("/api/integrations/{id}"), Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(one["integration"]["agentId"], Value::Null);

    let res = app
        .delete(&format!("/api/integrations/{id}"), Some(&user.access))
        .await;
    assert_eq!(res.status(), 200);
    let res = app
        .get(&format!("/api/integrations/{id}"), Some(&user.access))
        .await;
    assert_error(res, 404, "Not Found", Some("Integration not found")).await;
}

#[tokio::test]
async fn scopes_and_tenants() {
    let app = spawn_app().await;
    let owner = app.user().await;
    let other = app.user().await;
    let id = telegram(&app, &owner, None).await;

    for (method, path) in [
        (reqwest::Method::GET, format!("/api/integrations/{id}")),
        (reqwest::Method::PUT, format!("/api/integrations/{id}")),
        (reqwest::Method::DELETE, format!("/api/integrations/{id}")),
    ] {
        let body = (method == reqwest::Method::PUT).then(|| json!({"name": "mine"}));
        let res = app.call(method, &path, Some(&other.access), body).await;
        assert_error(res, 404, "Not Found", None).await;
    }
    // Another user's agent cannot be linked.
    let theirs = agent(&app, &other).await;
    let res = create(
        &app,
        &owner.access,
        json!({"providerCode": "telegram", "name": "x", "agentId": theirs, "credentials": {"botToken": BOT_TOKEN}}),
    )
    .await;
    assert_error(res, 404, "Not Found", None).await;

    let (_, read) = app.api_key(&owner, &["integrations:read"]).await;
    assert_eq!(
        app.get("/api/integrations", Some(&read)).await.status(),
        200
    );
    assert_eq!(
        app.get("/api/integrations/providers", Some(&read))
            .await
            .status(),
        200
    );
    let res = create(
        &app,
        &read,
        json!({"providerCode": "telegram", "name": "x", "credentials": {"botToken": BOT_TOKEN}}),
    )
    .await;
    assert_error(res, 403, "Forbidden", None).await;
    let (_, write) = app.api_key(&owner, &["integrations:write"]).await;
    let res = app.get("/api/integrations", Some(&write)).await;
    assert_error(res, 403, "Forbidden", None).await;
    let res = create(
        &app,
        &write,
        json!({"providerCode": "telegram", "name": "by key", "credentials": {"botToken": BOT_TOKEN}}),
    )
    .await;
    assert_eq!(res.status(), 201);
    assert_unauthorized(app.get("/api/integrations", None).await).await;
}
