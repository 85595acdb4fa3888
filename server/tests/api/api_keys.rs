//! API keys: creation, one-time display, listing, expiry, revocation, rotation, and what
//! keys may not do.

use chrono::Duration;
use serde_json::{json, Value};

use crate::helpers::*;

#[tokio::test]
async fn a_created_key_is_shown_once_and_listed_by_prefix() {
    let app = spawn_app().await;
    let user = app.user().await;
    let res = app
        .post("/api/api-keys", Some(&user.access), json!({"name": "CI", "scopes": ["chat:write", "agents:read"], "expiresAt": "2099-01-01T00:00:00Z"}))
        .await;
    assert_eq!(res.status(), 201);
    let body: Value = res.json().await.unwrap();
    let key = body["key"].as_str().unwrap();
    assert!(key.starts_with("key_") && key.len() == 47, "{key}");
    let raw = {
        use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
        URL_SAFE_NO_PAD.decode(&key[4..]).unwrap()
    };
    assert_eq!(raw.len(), 32);
    let info = &body["apiKey"];
    assert_eq!(info["prefix"], &key[..12]);
    assert_eq!(info["name"], "CI");
    assert_eq!(info["scopes"], json!(["agents:read", "chat:write"]));
    assert_eq!(info["expiresAt"], "2099-01-01T00:00:00Z");
    assert!(info["lastUsedAt"].is_null());

    let list: Value = app
        .get("/api/api-keys", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    let listed = &list["apiKeys"].as_array().unwrap()[0];
    assert_eq!(listed["prefix"], &key[..12]);
    let text = list.to_string();
    assert!(
        !text.contains(key) && !text.contains(&key[12..]),
        "no secret in the list: {text}"
    );
    assert!(listed.get("keyHash").is_none() && listed.get("key").is_none());
    assert!(
        !contains(&app.database_bytes(), key),
        "only the hash is stored"
    );

    let me = app.get("/api/auth/me", Some(key)).await;
    assert_eq!(me.status(), 200, "the key authenticates");
    let list: Value = app
        .get("/api/api-keys", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert!(
        list["apiKeys"][0]["lastUsedAt"].as_str().is_some(),
        "last use is recorded"
    );
}

#[tokio::test]
async fn bad_key_requests_are_400() {
    let app = spawn_app().await;
    let user = app.user().await;
    for body in [
        json!({"name": "x", "scopes": []}),
        json!({"name": "x", "scopes": ["agents:admin"]}),
        json!({"name": "", "scopes": ["agents:read"]}),
        json!({"name": "x", "scopes": ["agents:read"], "expiresAt": "2001-01-01T00:00:00Z"}),
        json!({"name": "x", "scopes": ["agents:read"], "expiresAt": "tomorrow"}),
        json!({"name": "x"}),
        json!({"name": "x", "scopes": "agents:read"}),
    ] {
        let res = app
            .post("/api/api-keys", Some(&user.access), body.clone())
            .await;
        assert_error(res, 400, "Bad Request", None).await;
    }
    let list: Value = app
        .get("/api/api-keys", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert!(
        list["apiKeys"].as_array().unwrap().is_empty(),
        "nothing was created"
    );
}

#[tokio::test]
async fn an_expired_key_stops_working() {
    let app = spawn_app().await;
    let user = app.user().await;
    let expiry = (app.state.auth.clock.now() + Duration::hours(1)).to_rfc3339();
    let res = app
        .post(
            "/api/api-keys",
            Some(&user.access),
            json!({"name": "short", "scopes": ["agents:read"], "expiresAt": expiry}),
        )
        .await;
    let key = res.json::<Value>().await.unwrap()["key"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(app.get("/api/auth/me", Some(&key)).await.status(), 200);
    app.state.auth.clock.advance(Duration::minutes(61));
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    assert_unauthorized(app.get("/api/auth/me", Some(&key)).await).await;
}

#[tokio::test]
async fn a_revoked_key_is_refused_at_once() {
    let app = spawn_app().await;
    let user = app.user().await;
    let (id, key) = app.api_key(&user, &["agents:read"]).await;
    assert_eq!(app.get("/api/auth/me", Some(&key)).await.status(), 200);
    let res = app
        .delete(&format!("/api/api-keys/{id}"), Some(&user.access))
        .await;
    assert_eq!(res.status(), 200);
    assert_unauthorized(app.get("/api/auth/me", Some(&key)).await).await;
    let list: Value = app
        .get("/api/api-keys", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert!(list["apiKeys"].as_array().unwrap().is_empty());
    let again = app
        .delete(&format!("/api/api-keys/{id}"), Some(&user.access))
        .await;
    assert_error(again, 404, "Not Found", None).await;
}

#[tokio::test]
async fn rotation_issues_a_new_key_with_the_same_settings_and_revokes_the_old() {
    let app = spawn_app().await;
    let user = app.user().await;
    let res = app
        .post(
            "/api/api-keys",
            Some(&user.access),
            json!({"name": "deploy", "scopes": ["chat:write"], "expiresAt": "2099-06-01"}),
        )
        .await;
    let old: Value = res.json().await.unwrap();
    let old_key = old["key"].as_str().unwrap();
    let id = old["apiKey"]["id"].as_str().unwrap();
    let res = app
        .post(
            &format!("/api/api-keys/{id}/rotate"),
            Some(&user.access),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), 201);
    let new: Value = res.json().await.unwrap();
    let new_key = new["key"].as_str().unwrap();
    assert_ne!(new_key, old_key);
    assert_ne!(new["apiKey"]["id"], old["apiKey"]["id"]);
    for field in ["name", "scopes", "expiresAt"] {
        assert_eq!(new["apiKey"][field], old["apiKey"][field], "{field}");
    }
    assert_unauthorized(app.get("/api/auth/me", Some(old_key)).await).await;
    assert_eq!(app.get("/api/auth/me", Some(new_key)).await.status(), 200);
}

#[tokio::test]
async fn keys_cannot_manage_keys_sessions_or_the_account() {
    let app = spawn_app().await;
    let user = app.user().await;
    let every_scope: Vec<&str> = app::api::SCOPES.to_vec();
    let (id, key) = app.api_key(&user, &every_scope).await;
    let forbidden = [
        app.get("/api/api-keys", Some(&key)).await,
        app.post(
            "/api/api-keys",
            Some(&key),
            json!({"name": "x", "scopes": ["agents:read"]}),
        )
        .await,
        app.delete(&format!("/api/api-keys/{id}"), Some(&key)).await,
        app.post(&format!("/api/api-keys/{id}/rotate"), Some(&key), json!({}))
            .await,
        app.get("/api/auth/sessions", Some(&key)).await,
        app.post("/api/auth/logout", Some(&key), json!({})).await,
    ];
    for res in forbidden {
        assert_error(res, 403, "Forbidden", Some("Insufficient permissions")).await;
    }
    assert_eq!(
        app.get("/api/auth/me", Some(&key)).await.status(),
        200,
        "the key still works"
    );
}

#[tokio::test]
async fn another_users_key_is_not_found() {
    let app = spawn_app().await;
    let (alice, bob) = (app.user().await, app.user().await);
    let (id, key) = app.api_key(&alice, &["agents:read"]).await;
    for res in [
        app.delete(&format!("/api/api-keys/{id}"), Some(&bob.access))
            .await,
        app.post(
            &format!("/api/api-keys/{id}/rotate"),
            Some(&bob.access),
            json!({}),
        )
        .await,
    ] {
        assert_error(res, 404, "Not Found", None).await;
    }
    assert_eq!(app.get("/api/auth/me", Some(&key)).await.status(), 200);
    let bobs: Value = app
        .get("/api/api-keys", Some(&bob.access))
        .await
        .json()
        .await
        .unwrap();
    assert!(bobs["apiKeys"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn an_unknown_key_is_401() {
    let app = spawn_app().await;
    let fake = format!("key_{}", "A".repeat(43));
    assert_unauthorized(app.get("/api/auth/me", Some(&fake)).await).await;
}

#[tokio::test]
async fn concurrent_creations_stop_at_the_cap_of_100_live_keys() {
    // A budget that does not refuse any of the requests below.
    let app = spawn_app_with(|c| c.limits.rate_limits = [10_000; 4]).await;
    let user = app.user().await;
    let answers = futures::future::join_all((0..130).map(|i| {
        app.post(
            "/api/api-keys",
            Some(&user.access),
            json!({"name": format!("key {i}"), "scopes": ["agents:read"]}),
        )
    }))
    .await;
    let mut created = 0;
    for res in answers {
        if res.status() == 201 {
            created += 1;
        } else {
            assert_error(
                res,
                400,
                "Bad Request",
                Some("An account may hold at most 100 API keys; revoke one first"),
            )
            .await;
        }
    }
    assert_eq!(created, 100);
    let list: Value = app
        .get("/api/api-keys", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["apiKeys"].as_array().unwrap().len(), 100);
}

#[tokio::test]
async fn a_key_can_be_rotated_at_the_cap_and_rotated_once_at_a_time() {
    let app = spawn_app_with(|c| c.limits.rate_limits = [10_000; 4]).await;
    let user = app.user().await;
    let mut ids = Vec::new();
    for i in 0..100 {
        let res = app
            .post(
                "/api/api-keys",
                Some(&user.access),
                json!({"name": format!("key {i}"), "scopes": ["agents:read"]}),
            )
            .await;
        assert_eq!(res.status(), 201);
        ids.push(
            res.json::<Value>().await.unwrap()["apiKey"]["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let over = app
        .post(
            "/api/api-keys",
            Some(&user.access),
            json!({"name": "one more", "scopes": ["agents:read"]}),
        )
        .await;
    assert_error(over, 400, "Bad Request", None).await;
    // Rotating keeps the count: allowed at the cap. Rotations of one key at once: one
    // wins, the others find it revoked.
    let path = format!("/api/api-keys/{}/rotate", ids[0]);
    let answers =
        futures::future::join_all((0..8).map(|_| app.post(&path, Some(&user.access), json!({}))))
            .await;
    let mut rotated = 0;
    for res in answers {
        if res.status() == 201 {
            rotated += 1;
        } else {
            assert_error(res, 404, "Not Found", None).await;
        }
    }
    assert_eq!(rotated, 1);
    let list: Value = app
        .get("/api/api-keys", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["apiKeys"].as_array().unwrap().len(), 100);
}
