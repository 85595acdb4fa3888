//! The account's conversation inbox (docs/api.md § Conversation inbox): every agent and
//! channel in one list, each filter, paging, tenants, scopes and the rules on input.

use reqwest::{header, Method};
use serde_json::{json, Value};

use crate::{chat::agent, helpers::*, sessions::cookie_header};

/// `GET /api/conversations{query}` as `token`: the answer's body, after checking it is 200.
async fn inbox(app: &TestApp, token: &str, query: &str) -> Value {
    let res = app
        .get(&format!("/api/conversations{query}"), Some(token))
        .await;
    assert_eq!(res.status(), 200, "{query}");
    res.json().await.unwrap()
}

/// The thread ids `GET /api/conversations{query}` lists, in order.
async fn listed(app: &TestApp, token: &str, query: &str) -> Vec<String> {
    inbox(app, token, query).await["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["threadId"].as_str().unwrap().to_string())
        .collect()
}

/// Starts a thread of `agent` with `message` as `token`; its id.
async fn start(app: &TestApp, token: &str, agent: &str, message: &str) -> String {
    let res = app.chat(token, agent, json!({ "message": message })).await;
    assert_eq!(res.status(), 200);
    res.json::<Value>().await.unwrap()["threadId"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Sets the thread's last activity to `millis` (epoch), for a known order.
async fn active_at(app: &TestApp, thread: &str, millis: i64) {
    app.sql(
        &format!("UPDATE threads SET updated_at = {millis} WHERE id = $1"),
        vec![thread.into()],
    )
    .await;
}

/// 2026-11-{day} 12:00 UTC in epoch milliseconds.
fn november(day: u32) -> i64 {
    chrono::NaiveDate::from_ymd_opt(2026, 11, day)
        .unwrap()
        .and_hms_opt(12, 0, 0)
        .unwrap()
        .and_utc()
        .timestamp_millis()
}

#[tokio::test]
async fn every_agent_and_channel_in_one_list_newest_first() {
    let app = spawn_app().await;
    let user = app.user().await;
    let (support, sales) = (agent(&app, &user).await, agent(&app, &user).await);
    app.call(
        Method::PUT,
        &format!("/api/agents/{sales}"),
        Some(&user.access),
        Some(json!({"name": "Sales"})),
    )
    .await;

    let by_api = start(&app, &user.access, &support, "Where is my parcel?").await;
    // The dashboard: the session cookie and its CSRF token, no bearer value.
    let (cookies, csrf) = cookie_header(&app.login(&user.email, &user.password).await);
    let res = app
        .client
        .post(app.url(&format!("/api/agents/{sales}/chat")))
        .header(header::COOKIE, &cookies)
        .header("x-csrf-token", &csrf)
        .json(&json!({"message": "Do you ship to Norway?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let by_dashboard = res.json::<Value>().await.unwrap()["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, key) = app.api_key(&user, &["chat:read", "chat:write"]).await;
    let res = app
        .post(
            "/api/openai/v1/chat/completions",
            Some(&key),
            json!({"model": support, "messages": [{"role": "user", "content": "Hello there"}]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let by_openai = res.json::<Value>().await.unwrap()["agentchat"]["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    // A continued thread keeps its channel; an API key is the `api` channel too.
    let res = app
        .chat(
            &key,
            &sales,
            json!({"message": "And to Sweden?", "threadId": by_dashboard}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let by_key = start(&app, &key, &sales, "Opening hours?").await;
    for (i, thread) in [
        by_api.as_str(),
        by_dashboard.as_str(),
        by_openai.as_str(),
        by_key.as_str(),
    ]
    .into_iter()
    .enumerate()
    {
        active_at(&app, thread, november(10 + i as u32)).await;
    }

    let body = inbox(&app, &user.access, "").await;
    assert_eq!(body["nextCursor"], Value::Null);
    let conversations = body["conversations"].as_array().unwrap();
    let ids: Vec<&str> = conversations
        .iter()
        .map(|c| c["threadId"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            by_key.as_str(),
            by_openai.as_str(),
            by_dashboard.as_str(),
            by_api.as_str()
        ]
    );
    let channels: Vec<&str> = conversations
        .iter()
        .map(|c| c["channel"].as_str().unwrap())
        .collect();
    assert_eq!(channels, ["api", "openai", "dashboard", "api"]);
    let dashboard = &conversations[2];
    assert_eq!(dashboard["agentId"], sales.as_str());
    assert_eq!(dashboard["agentName"], "Sales");
    assert_eq!(dashboard["title"], "Do you ship to Norway?");
    assert_eq!(dashboard["messageCount"], 4);
    assert_eq!(dashboard["feedback"], json!({"up": 0, "down": 0}));
    assert_eq!(dashboard["updatedAt"], "2026-11-11T12:00:00Z");
    chrono::DateTime::parse_from_rfc3339(dashboard["createdAt"].as_str().unwrap()).unwrap();
    assert_eq!(conversations[3]["agentName"], "Bot");

    assert_eq!(
        listed(&app, &user.access, &format!("?agentId={sales}")).await,
        [by_key.as_str(), by_dashboard.as_str()]
    );
    assert_eq!(
        listed(&app, &user.access, "?channel=dashboard").await,
        [by_dashboard.as_str()]
    );
    assert_eq!(
        listed(
            &app,
            &user.access,
            &format!("?channel=api&agentId={support}")
        )
        .await,
        [by_api.as_str()]
    );
    assert!(listed(&app, &user.access, "?channel=slack")
        .await
        .is_empty());
    // The last activity's day, both ends included.
    assert_eq!(
        listed(&app, &user.access, "?from=2026-11-11&to=2026-11-12").await,
        [by_openai.as_str(), by_dashboard.as_str()]
    );
    assert_eq!(
        listed(&app, &user.access, "?from=2026-11-13").await,
        [by_key.as_str()]
    );
    assert_eq!(
        listed(&app, &user.access, "?to=2026-11-10").await,
        [by_api.as_str()]
    );

    // Pages of one, through the cursor, with a filter kept.
    let mut seen = Vec::new();
    let mut query = "?limit=1&agentId=".to_string() + &support;
    loop {
        let page = inbox(&app, &key, &query).await;
        let items = page["conversations"].as_array().unwrap();
        assert!(items.len() <= 1);
        seen.extend(
            items
                .iter()
                .map(|c| c["threadId"].as_str().unwrap().to_string()),
        );
        match page["nextCursor"].as_str() {
            Some(cursor) => query = format!("?limit=1&agentId={support}&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(seen, [by_openai.as_str(), by_api.as_str()]);

    // Another account sees none of them, even naming the agent.
    let other = app.user().await;
    assert!(listed(&app, &other.access, "").await.is_empty());
    assert!(listed(&app, &other.access, &format!("?agentId={sales}"))
        .await
        .is_empty());
}

#[tokio::test]
async fn the_feedback_filter_follows_ratings() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent(&app, &user).await;
    let liked = start(&app, &user.access, &agent, "first").await;
    let disliked = start(&app, &user.access, &agent, "second").await;
    let unrated = start(&app, &user.access, &agent, "third").await;
    for (i, thread) in [liked.as_str(), disliked.as_str(), unrated.as_str()]
        .into_iter()
        .enumerate()
    {
        active_at(&app, thread, november(20 - i as u32)).await;
    }
    let reply = |thread: String| {
        let (app, user, agent) = (&app, &user, &agent);
        async move {
            let messages = app.messages(&user.access, agent, &thread).await;
            let id = messages.iter().find(|m| m["role"] == "assistant").unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string();
            format!("/api/agents/{agent}/conversations/{thread}/messages/{id}/feedback")
        }
    };
    let (liked_reply, disliked_reply) = (reply(liked.clone()).await, reply(disliked.clone()).await);
    let rate = |path: String, rating: &'static str| {
        let (app, user) = (&app, &user);
        async move {
            let res = app
                .call(
                    Method::PUT,
                    &path,
                    Some(&user.access),
                    Some(json!({ "rating": rating })),
                )
                .await;
            assert_eq!(res.status(), 200);
        }
    };
    rate(liked_reply.clone(), "up").await;
    rate(disliked_reply.clone(), "down").await;

    assert_eq!(
        listed(&app, &user.access, "?feedback=up").await,
        [liked.as_str()]
    );
    assert_eq!(
        listed(&app, &user.access, "?feedback=down").await,
        [disliked.as_str()]
    );
    assert_eq!(
        listed(&app, &user.access, "?feedback=any").await,
        [liked.as_str(), disliked.as_str()]
    );
    let all = inbox(&app, &user.access, "").await;
    let counts: Vec<&Value> = all["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["feedback"])
        .collect();
    assert_eq!(
        counts,
        [
            &json!({"up": 1, "down": 0}),
            &json!({"up": 0, "down": 1}),
            &json!({"up": 0, "down": 0})
        ]
    );

    // A changed rating moves the thread; a cleared one takes it out.
    rate(liked_reply.clone(), "down").await;
    assert!(listed(&app, &user.access, "?feedback=up").await.is_empty());
    assert_eq!(
        listed(&app, &user.access, "?feedback=down").await,
        [liked.as_str(), disliked.as_str()]
    );
    let res = app.delete(&disliked_reply, Some(&user.access)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        listed(&app, &user.access, "?feedback=any").await,
        [liked.as_str()]
    );
    let first = &inbox(&app, &user.access, "?feedback=down").await["conversations"][0];
    assert_eq!(first["feedback"], json!({"up": 0, "down": 1}));
}

#[tokio::test]
async fn q_finds_the_words_of_any_message() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent(&app, &user).await;
    let refund = start(&app, &user.access, &agent, "Where is my REFUND, please?").await;
    let res = app
        .chat(
            &user.access,
            &agent,
            json!({"message": "Il a payé le café", "threadId": refund}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let other = start(&app, &user.access, &agent, "Opening hours on Sunday").await;

    for q in [
        "refund",
        "Refund",
        "refun",
        "my%20refund",
        "where-is",
        "café",
        "PAYÉ",
    ] {
        assert_eq!(
            listed(&app, &user.access, &format!("?q={q}")).await,
            [refund.as_str()],
            "q={q}"
        );
    }
    // Every word in one message; none of the words is no filter.
    assert!(listed(&app, &user.access, "?q=refund%20sunday")
        .await
        .is_empty());
    assert!(listed(&app, &user.access, "?q=funds").await.is_empty());
    assert_eq!(listed(&app, &user.access, "?q=sun").await, [other.as_str()]);
    assert_eq!(listed(&app, &user.access, "?q=%20%3F%21").await.len(), 2);
    // Combined with the other filters.
    assert!(listed(&app, &user.access, "?q=refund&feedback=any")
        .await
        .is_empty());
    // A deleted conversation's words are gone with it, and a later one is not found by them.
    let res = app
        .delete(
            &format!("/api/agents/{agent}/conversations/{refund}"),
            Some(&user.access),
        )
        .await;
    assert_eq!(res.status(), 200);
    let later = start(&app, &user.access, &agent, "Something else entirely").await;
    assert!(listed(&app, &user.access, "?q=refund").await.is_empty());
    assert_eq!(
        listed(&app, &user.access, "?q=entirely").await,
        [later.as_str()]
    );
    // Another account's words are not searched.
    let stranger = app.user().await;
    assert!(listed(&app, &stranger.access, "?q=sunday").await.is_empty());
}

#[tokio::test]
async fn bad_filters_are_refused_and_the_scope_is_chat_read() {
    let app = spawn_app().await;
    let user = app.user().await;
    for (query, needle) in [
        (
            "?channel=email",
            "channel must be one of: api, dashboard, widget",
        ),
        ("?feedback=maybe", "feedback must be one of: up, down, any"),
        ("?from=2026-13-01", "from must be a date"),
        ("?to=yesterday", "to must be a date"),
        (
            "?from=2026-11-20&to=2026-11-19",
            "from must not be after to",
        ),
        ("?limit=0", "limit must be between 1 and 200"),
        ("?limit=201", "limit must be between 1 and 200"),
        ("?cursor=nope", "cursor is not valid"),
        ("?agent=x", "unknown field"),
    ] {
        let res = app
            .get(&format!("/api/conversations{query}"), Some(&user.access))
            .await;
        let body = assert_error(res, 400, "Bad Request", None).await;
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(needle), "{query}: {message}");
    }
    let long = "a".repeat(201);
    let res = app
        .get(&format!("/api/conversations?q={long}"), Some(&user.access))
        .await;
    assert_error(
        res,
        400,
        "Bad Request",
        Some("q must be at most 200 characters"),
    )
    .await;

    assert_unauthorized(app.get("/api/conversations", None).await).await;
    let (_, writer) = app.api_key(&user, &["chat:write"]).await;
    let res = app.get("/api/conversations", Some(&writer)).await;
    assert_error(res, 403, "Forbidden", None).await;
    let (_, reader) = app.api_key(&user, &["chat:read"]).await;
    assert_eq!(inbox(&app, &reader, "").await["conversations"], json!([]));
}
