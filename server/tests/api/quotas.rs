//! Monthly token quotas and API keys bound to agents with budgets (docs/api.md § Token
//! quotas, § API keys): refusals and their headers, the reset, the race of concurrent chats
//! against the last tokens, the alerts (once, also from two instances), and what a bound key
//! may see.

use std::sync::Arc;

use chrono::{Datelike, Duration, Utc};
use serde_json::{json, Value};

use crate::{chat::agent, helpers::*};

/// A configuration tweak giving the Free plan a quota of `tokens` a month.
fn free_quota(tokens: u64) -> impl FnOnce(&mut agentchat::config::Config) {
    move |c| c.limits.token_quotas = [Some(tokens), None, None, None]
}

/// The next month's start (UTC) in Unix epoch seconds, as of `now`.
fn next_month(now: chrono::DateTime<Utc>) -> i64 {
    let first = now.date_naive().with_day(1).unwrap();
    first
        .checked_add_months(chrono::Months::new(1))
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc()
        .timestamp()
}

/// The bodies of the usage alerts `smtp` received for `to`, waiting up to 10 s for `n`.
async fn alerts(smtp: &SmtpSink, to: &str, n: usize) -> Vec<String> {
    let read = || -> Vec<String> {
        smtp.all()
            .iter()
            .filter_map(|raw| {
                let msg = mail_parser::MessageParser::default().parse(raw.as_bytes())?;
                let to_them = msg
                    .to()
                    .and_then(|a| a.first())
                    .and_then(|a| a.address())
                    .is_some_and(|a| a.eq_ignore_ascii_case(to));
                let alert = msg
                    .subject()
                    .is_some_and(|s| s.contains("of your monthly tokens used"));
                (to_them && alert)
                    .then(|| msg.body_text(0).map(|b| b.to_string()).unwrap_or_default())
            })
            .collect()
    };
    for _ in 0..200 {
        if read().len() >= n {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    read()
}

fn header(res: &reqwest::Response, name: &str) -> Option<String> {
    res.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
}

/// Sets the user's stored tokens of today (UTC) to `tokens`, as if replies had used them.
async fn used_today(app: &TestApp, user: &TestUser, tokens: i64) {
    let today = app.state.clock.now().format("%Y-%m-%d").to_string();
    let user_id = app
        .get("/api/auth/me", Some(&user.access))
        .await
        .json::<Value>()
        .await
        .unwrap()["user"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.sql(
        "DELETE FROM usage_daily WHERE user_id = $1",
        vec![(&user_id).into()],
    )
    .await;
    app.sql(
        &format!(
            "INSERT INTO usage_daily (user_id, day, chats, prompt_tokens, completion_tokens) \
             VALUES ($1, $2, 0, {tokens}, 0)"
        ),
        vec![(&user_id).into(), (&today).into()],
    )
    .await;
}

#[tokio::test]
async fn a_spent_plan_quota_refuses_chats_until_the_month_turns() {
    let app = spawn_app_with(free_quota(1_000)).await;
    let user = app.user().await;
    let agent = agent(&app, &user).await;
    let me: Value = app
        .get("/api/auth/me", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(me["limits"]["monthlyTokens"], 1_000);

    let res = app
        .chat(&user.access, &agent, json!({"message": "hello"}))
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(header(&res, "x-quota-limit").as_deref(), Some("1000"));
    assert_eq!(header(&res, "x-quota-remaining").as_deref(), Some("1000"));
    let reset = next_month(app.state.clock.now());
    assert_eq!(header(&res, "x-quota-reset"), Some(reset.to_string()));
    let spent: u64 = res.json::<Value>().await.unwrap()["tokensUsed"]["total"]
        .as_u64()
        .unwrap();
    let usage: Value = app
        .get("/api/usage", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(usage["quota"]["limit"], 1_000);
    assert_eq!(usage["quota"]["used"], spent);
    assert_eq!(usage["quota"]["remaining"], 1_000 - spent);

    // The last tokens go: the next chat, streamed or not, is refused with the reset.
    used_today(&app, &user, 1_000).await;
    for body in [
        json!({"message": "again"}),
        json!({"message": "again", "stream": true}),
    ] {
        let res = app.chat(&user.access, &agent, body).await;
        assert_eq!(res.status(), 429);
        assert_eq!(header(&res, "x-quota-limit").as_deref(), Some("1000"));
        assert_eq!(header(&res, "x-quota-remaining").as_deref(), Some("0"));
        assert_eq!(header(&res, "x-quota-reset"), Some(reset.to_string()));
        let wait: i64 = header(&res, "retry-after").unwrap().parse().unwrap();
        assert!(
            wait >= 1 && wait <= reset - Utc::now().timestamp() + 5,
            "{wait}"
        );
        let month_start = chrono::DateTime::from_timestamp(reset, 0).unwrap();
        assert_error(
            res,
            429,
            "Quota exceeded",
            Some(&format!(
                "The account's monthly token quota of 1000 tokens is used up; it resets at {}",
                month_start.format("%Y-%m-%dT%H:%M:%SZ")
            )),
        )
        .await;
    }
    // The OpenAI-compatible API answers as OpenAI does.
    let (_, key) = app.api_key(&user, &["chat:write", "agents:read"]).await;
    let res = app
        .post(
            "/api/openai/v1/chat/completions",
            Some(&key),
            json!({"model": agent, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(res.status(), 429);
    assert_eq!(header(&res, "x-quota-remaining").as_deref(), Some("0"));
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["type"], "insufficient_quota");
    assert_eq!(body["error"]["code"], "insufficient_quota");
    // Other requests go on.
    assert_eq!(
        app.get("/api/agents", Some(&user.access)).await.status(),
        200
    );

    // A month later the count starts again.
    let now = app.state.clock.now();
    let days = (chrono::DateTime::from_timestamp(reset, 0).unwrap() - now).num_days() + 1;
    app.state.clock.advance(Duration::days(days));
    // The session has expired meanwhile: sign in again.
    let (access, _) = app.tokens(&user.email, &user.password).await;
    let res = app
        .chat(&access, &agent, json!({"message": "new month"}))
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(header(&res, "x-quota-remaining").as_deref(), Some("1000"));
}

#[tokio::test]
async fn without_quotas_nothing_is_counted_or_shown() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent(&app, &user).await;
    let res = app
        .chat(&user.access, &agent, json!({"message": "hello"}))
        .await;
    assert_eq!(res.status(), 200);
    assert!(header(&res, "x-quota-limit").is_none());
    let usage: Value = app
        .get("/api/usage", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(usage["quota"], Value::Null);
    assert!(usage.get("keyBudget").is_none());
    let me: Value = app
        .get("/api/auth/me", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(me["limits"]["monthlyTokens"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_chats_against_the_last_tokens_overshoot_by_those_in_flight_alone() {
    let app = spawn_app_with(free_quota(1_000_000)).await;
    let user = app.user().await;
    let agent = agent(&app, &user).await;
    let res = app
        .chat(&user.access, &agent, json!({"message": "measure"}))
        .await;
    let per_reply: i64 = res.json::<Value>().await.unwrap()["tokensUsed"]["total"]
        .as_i64()
        .unwrap();
    // Room for three more replies' tokens, and not a fourth's.
    used_today(&app, &user, 1_000_000 - 3 * per_reply + 1).await;

    let app = Arc::new(app);
    let mut racers = Vec::new();
    for _ in 0..12 {
        let (app, token, agent) = (app.clone(), user.access.clone(), agent.clone());
        racers.push(tokio::spawn(async move {
            let res = app
                .chat(&token, &agent, json!({"message": "measure"}))
                .await;
            let status = res.status().as_u16();
            if status == 429 {
                let body: Value = res.json().await.unwrap();
                assert_eq!(body["error"], "Quota exceeded");
            }
            status
        }));
    }
    let mut admitted = 0i64;
    for racer in racers {
        match racer.await.unwrap() {
            200 => admitted += 1,
            429 => {}
            other => panic!("a chat answered {other}"),
        }
    }
    assert!(
        admitted >= 3,
        "the room left admits three turns at least: {admitted}"
    );
    let usage: Value = app
        .get("/api/usage", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    let used = usage["quota"]["used"].as_i64().unwrap();
    // Each admitted turn saw the stored count below the quota: the overshoot is at most
    // the tokens of those that ran past the last token.
    assert!(
        used - 1_000_000 <= (admitted - 2) * per_reply,
        "used {used} with {admitted} admitted of {per_reply} tokens each"
    );
    let res = app
        .chat(&user.access, &agent, json!({"message": "after"}))
        .await;
    assert_eq!(res.status(), 429, "the quota is spent");
}

/// Registers a webhook of `user` for `usage.threshold` (deliveries are recorded when the
/// event is emitted, whether or not the receiver answers).
async fn threshold_hook(app: &TestApp, user: &TestUser, port: u16) {
    let res = app
        .post(
            "/api/integrations/webhooks",
            Some(&user.access),
            json!({"url": format!("http://127.0.0.1:{port}/usage"), "events": ["usage.threshold"]}),
        )
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
}

async fn threshold_events(app: &TestApp) -> Vec<Value> {
    let pool_rows: Vec<String> = if app.database.is_some() {
        let pool = sqlx::PgPool::connect(&app.database_url).await.unwrap();
        sqlx::query_scalar("SELECT payload FROM webhook_deliveries WHERE event = 'usage.threshold'")
            .fetch_all(&pool)
            .await
            .unwrap()
    } else {
        let pool = sqlx::SqlitePool::connect(&app.database_url).await.unwrap();
        sqlx::query_scalar("SELECT payload FROM webhook_deliveries WHERE event = 'usage.threshold'")
            .fetch_all(&pool)
            .await
            .unwrap()
    };
    let mut events: Vec<Value> = pool_rows
        .iter()
        .map(|p| serde_json::from_str::<Value>(p).unwrap()["data"].clone())
        .collect();
    events.sort_by_key(|e| e["threshold"].as_u64());
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_send_each_alert_once() {
    // Deliveries are recorded when the event is emitted; nothing needs to answer them.
    let receiver = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = receiver.local_addr().unwrap().port();
    let allow = format!("127.0.0.1:{port}");
    let allowed = allow.clone();
    let a = spawn_app_with(move |c| {
        free_quota(1_000)(c);
        c.outbound.allowed_private_hosts = vec![allowed];
    })
    .await;
    // A second instance on the same database (the SQLite file, or the scratch database).
    let shared = a.database_url.clone();
    let b = spawn_app_on(tempfile::tempdir().unwrap(), a.database.clone(), move |c| {
        free_quota(1_000)(c);
        c.outbound.allowed_private_hosts = vec![allow];
        c.storage.database_url = shared;
    })
    .await;
    let user = a.user().await;
    let agent = agent(&a, &user).await;
    threshold_hook(&a, &user, port).await;
    // A key works on both instances (access tokens are signed with each one's own secret
    // here, where the operator would give both the same).
    let (_, key) = a.api_key(&user, &["chat:write"]).await;
    // 790 of 1,000 used: the next replies pass 80 % on both instances at once.
    used_today(&a, &user, 790).await;
    let (ra, rb) = tokio::join!(
        a.chat(&key, &agent, json!({"message": "from a"})),
        b.chat(&key, &agent, json!({"message": "from b"})),
    );
    assert_eq!((ra.status().as_u16(), rb.status().as_u16()), (200, 200));
    let sent = alerts(&a.smtp, &user.email, 1).await;
    let sent: Vec<String> = sent
        .into_iter()
        .chain(alerts(&b.smtp, &user.email, 0).await)
        .collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].contains("80 % used"), "{}", sent[0]);
    assert!(sent[0].contains("of 1000 tokens"), "{}", sent[0]);
    // Then past 100 %, again from both.
    used_today(&a, &user, 1_000).await;
    let (ra, rb) = tokio::join!(
        a.chat(&key, &agent, json!({"message": "from a"})),
        b.chat(&key, &agent, json!({"message": "from b"})),
    );
    assert_eq!((ra.status().as_u16(), rb.status().as_u16()), (429, 429));
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let mails =
        alerts(&a.smtp, &user.email, 0).await.len() + alerts(&b.smtp, &user.email, 0).await.len();
    assert_eq!(
        mails, 2,
        "one email per threshold, whichever instance sent it"
    );
    let events = threshold_events(&a).await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["threshold"], 80);
    assert_eq!(events[1]["threshold"], 100);
    assert_eq!(events[1]["quota"], "plan");
    assert_eq!(events[1]["limit"], 1_000);
    assert_eq!(events[1]["apiKeyId"], Value::Null);
    assert!(events[1]["used"].as_u64().unwrap() >= 1_000);
}

/// Creates an API key of `user` with `body` (name and scopes added): (id, key).
async fn key_with(app: &TestApp, user: &TestUser, extra: Value) -> (String, String) {
    let mut body = json!({"name": "bound", "scopes": ["agents:read", "agents:write", "chat:read", "chat:write", "knowledge:read"]});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let res = app.post("/api/api-keys", Some(&user.access), body).await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let body: Value = res.json().await.unwrap();
    (
        body["apiKey"]["id"].as_str().unwrap().to_string(),
        body["key"].as_str().unwrap().to_string(),
    )
}

#[tokio::test]
async fn a_key_bound_to_an_agent_sees_and_uses_that_agent_alone() {
    let app = spawn_app().await;
    let user = app.user().await;
    let (mine, other) = (agent(&app, &user).await, agent(&app, &user).await);
    let (id, key) = key_with(&app, &user, json!({"agentIds": [mine]})).await;

    let agents: Value = app
        .get("/api/agents", Some(&key))
        .await
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = agents["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [mine.as_str()]);
    for path in [
        format!("/api/agents/{other}"),
        format!("/api/agents/{other}/conversations"),
        format!("/api/agents/{other}/knowledge"),
        format!("/api/agents/{other}/conversations/export"),
    ] {
        assert_error(
            app.get(&path, Some(&key)).await,
            404,
            "Not Found",
            Some("Agent not found"),
        )
        .await;
    }
    let res = app.chat(&key, &other, json!({"message": "hi"})).await;
    assert_error(res, 404, "Not Found", Some("Agent not found")).await;
    let res = app
        .post("/api/agents", Some(&key), json!({"name": "Sneaky"}))
        .await;
    assert_error(res, 403, "Forbidden", None).await;
    assert_eq!(
        app.get(&format!("/api/agents/{mine}"), Some(&key))
            .await
            .status(),
        200
    );
    assert_eq!(
        app.chat(&key, &mine, json!({"message": "hi"}))
            .await
            .status(),
        200
    );
    assert_eq!(
        app.chat(&user.access, &other, json!({"message": "hi"}))
            .await
            .status(),
        200
    );

    // The inbox lists the bound agent's conversations alone.
    let inbox: Value = app
        .get("/api/conversations", Some(&key))
        .await
        .json()
        .await
        .unwrap();
    let agents: Vec<&str> = inbox["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["agentId"].as_str().unwrap())
        .collect();
    assert_eq!(agents, [mine.as_str()]);
    let inbox: Value = app
        .get(&format!("/api/conversations?agentId={other}"), Some(&key))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(inbox["conversations"], json!([]));

    // The OpenAI-compatible API too.
    let models: Value = app
        .get("/api/openai/v1/models", Some(&key))
        .await
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [mine.as_str()]);
    let res = app
        .post(
            "/api/openai/v1/chat/completions",
            Some(&key),
            json!({"model": other, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(res.status(), 404);
    assert_eq!(
        res.json::<Value>().await.unwrap()["error"]["code"],
        "model_not_found"
    );

    // The listing shows the binding; a rotation keeps it.
    let keys: Value = app
        .get("/api/api-keys", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    let listed = keys["apiKeys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(listed["agentIds"], json!([mine]));
    assert_eq!(listed["monthlyTokenBudget"], Value::Null);
    assert!(listed["tokensThisMonth"].as_u64().unwrap() > 0);
    let res = app
        .post(
            &format!("/api/api-keys/{id}/rotate"),
            Some(&user.access),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), 201);
    let rotated: Value = res.json().await.unwrap();
    assert_eq!(rotated["apiKey"]["agentIds"], json!([mine]));
    let new_key = rotated["key"].as_str().unwrap();
    assert_eq!(
        app.get(&format!("/api/agents/{other}"), Some(new_key))
            .await
            .status(),
        404
    );
}

/// Creates an MCP server integration of `user` (never contacted here), linked to `agent`
/// when given, with `token`; answers the creation's response.
async fn mcp_integration(app: &TestApp, token: &str, agent: Option<&str>) -> reqwest::Response {
    let mut body = json!({"providerCode": "mcp", "name": "Docs server",
        "credentials": {"url": "http://127.0.0.1:9/mcp"}});
    if let Some(agent) = agent {
        body["agentId"] = json!(agent);
    }
    app.post("/api/integrations", Some(token), body).await
}

/// The id in a 201 creation answer.
async fn created_id(res: reqwest::Response) -> String {
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    res.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn a_bound_key_reaches_only_its_agents_jobs_and_integrations_and_no_webhooks() {
    let app = spawn_app().await;
    let user = app.user().await;
    let (mine, other) = (agent(&app, &user).await, agent(&app, &user).await);
    let (_, key) = key_with(
        &app,
        &user,
        json!({"agentIds": [mine], "scopes": ["agents:read", "agents:write", "knowledge:read",
            "integrations:read", "integrations:write"]}),
    )
    .await;

    // Jobs: those of its agents' documents alone.
    let job_of = |agent: String| {
        let (app, token) = (&app, user.access.clone());
        async move {
            let doc = app
                .uploaded(&token, &agent, "a.txt", b"Ferris is a crab.".to_vec())
                .await;
            app.settled(&token, &agent, &doc).await;
            app.refreshed(&token, &agent, &doc).await
        }
    };
    let (my_job, other_job) = (job_of(mine.clone()).await, job_of(other.clone()).await);
    let res = app.get(&format!("/api/jobs/{my_job}"), Some(&key)).await;
    assert_eq!(res.status(), 200);
    let res = app.get(&format!("/api/jobs/{other_job}"), Some(&key)).await;
    assert_error(res, 404, "Not Found", Some("Job not found")).await;
    let res = app
        .get(&format!("/api/jobs/{other_job}"), Some(&user.access))
        .await;
    assert_eq!(res.status(), 200);

    // Integrations: those linked to its agents alone.
    let linked = created_id(mcp_integration(&app, &user.access, Some(&mine)).await).await;
    let elsewhere = created_id(mcp_integration(&app, &user.access, Some(&other)).await).await;
    let unlinked = created_id(mcp_integration(&app, &user.access, None).await).await;
    let list: Value = app
        .get("/api/integrations", Some(&key))
        .await
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = list["integrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [linked.as_str()]);
    let all: Value = app
        .get("/api/integrations", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(all["integrations"].as_array().unwrap().len(), 3);
    for id in [&elsewhere, &unlinked] {
        for res in [
            app.get(&format!("/api/integrations/{id}"), Some(&key))
                .await,
            app.get(&format!("/api/integrations/{id}/tools"), Some(&key))
                .await,
            app.call(
                reqwest::Method::PUT,
                &format!("/api/integrations/{id}"),
                Some(&key),
                Some(json!({"name": "Mine now"})),
            )
            .await,
            app.delete(&format!("/api/integrations/{id}"), Some(&key))
                .await,
        ] {
            assert_error(res, 404, "Not Found", Some("Integration not found")).await;
        }
        // Nor may its agents' tools use them.
        let res = app
            .post(
                &format!("/api/agents/{mine}/tools"),
                Some(&key),
                json!({"type": "mcp", "config": {"integrationId": id}}),
            )
            .await;
        assert_error(res, 404, "Not Found", Some("Integration not found")).await;
    }
    assert_eq!(
        app.get(&format!("/api/integrations/{linked}"), Some(&key))
            .await
            .status(),
        200
    );
    // It links to its own agents alone, and never unlinks.
    let res = app
        .call(
            reqwest::Method::PUT,
            &format!("/api/integrations/{linked}"),
            Some(&key),
            Some(json!({"agentId": other})),
        )
        .await;
    assert_error(res, 404, "Not Found", Some("Agent not found")).await;
    let res = app
        .call(
            reqwest::Method::PUT,
            &format!("/api/integrations/{linked}"),
            Some(&key),
            Some(json!({"agentId": null})),
        )
        .await;
    let body = assert_error(res, 400, "Bad Request", None).await;
    assert!(body["message"].as_str().unwrap().starts_with("agentId: "));
    let res = mcp_integration(&app, &key, Some(&other)).await;
    assert_error(res, 404, "Not Found", Some("Agent not found")).await;
    let res = mcp_integration(&app, &key, None).await;
    assert_error(res, 400, "Bad Request", None).await;
    let own = created_id(mcp_integration(&app, &key, Some(&mine)).await).await;
    let res = app
        .post(
            &format!("/api/agents/{mine}/tools"),
            Some(&key),
            json!({"type": "mcp", "config": {"integrationId": own}}),
        )
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let res = app
        .delete(&format!("/api/integrations/{own}"), Some(&key))
        .await;
    assert_eq!(res.status(), 200);
    // Sessions and unbound keys reach them all, as before.
    let res = app
        .get(&format!("/api/integrations/{unlinked}"), Some(&user.access))
        .await;
    assert_eq!(res.status(), 200);

    // Webhooks carry every agent's events: a bound key holds no webhook scope and reaches
    // no webhook path.
    let mut body =
        json!({"name": "hooks", "scopes": ["webhooks:read", "chat:read"], "agentIds": [mine]});
    let res = app
        .post("/api/api-keys", Some(&user.access), body.clone())
        .await;
    let refused = assert_error(res, 400, "Bad Request", None).await;
    assert!(
        refused["message"].as_str().unwrap().contains("webhooks"),
        "{refused}"
    );
    body["scopes"] = json!(["chat:read"]);
    let res = app.post("/api/api-keys", Some(&user.access), body).await;
    assert_eq!(res.status(), 201);
    for path in [
        "/api/integrations/webhooks",
        "/api/integrations/webhooks/events",
    ] {
        let res = app.get(path, Some(&key)).await;
        assert_error(res, 403, "Forbidden", None).await;
    }
}

#[tokio::test]
async fn a_key_budget_refuses_that_key_alone() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent(&app, &user).await;
    let (id, key) = key_with(&app, &user, json!({"monthlyTokenBudget": 1})).await;
    let res = app.chat(&key, &agent, json!({"message": "hi"})).await;
    assert_eq!(res.status(), 200);
    assert_eq!(header(&res, "x-quota-limit").as_deref(), Some("1"));
    let spent = res.json::<Value>().await.unwrap()["tokensUsed"]["total"]
        .as_u64()
        .unwrap();
    let usage: Value = app
        .get("/api/usage", Some(&key))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(usage["keyBudget"]["limit"], 1);
    assert_eq!(usage["keyBudget"]["used"], spent);
    assert_eq!(usage["keyBudget"]["remaining"], 0);

    let res = app.chat(&key, &agent, json!({"message": "again"})).await;
    assert_eq!(header(&res, "x-quota-remaining").as_deref(), Some("0"));
    assert_error(res, 429, "Quota exceeded", None).await;
    let res = app.chat(&key, &agent, json!({"message": "again"})).await;
    let body: Value = res.json().await.unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("This API key's monthly token budget of 1 tokens is used up"),
        "{body}"
    );
    // The account, and its other keys, go on.
    assert_eq!(
        app.chat(&user.access, &agent, json!({"message": "me"}))
            .await
            .status(),
        200
    );
    let (_, other_key) = app.api_key(&user, &["chat:write"]).await;
    assert_eq!(
        app.chat(&other_key, &agent, json!({"message": "me"}))
            .await
            .status(),
        200
    );
    let keys: Value = app
        .get("/api/api-keys", Some(&user.access))
        .await
        .json()
        .await
        .unwrap();
    let listed = keys["apiKeys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(listed["monthlyTokenBudget"], 1);
    assert_eq!(listed["tokensThisMonth"], spent);
    // Its alerts go once, named by the key.
    let sent = alerts(&app.smtp, &user.email, 2).await;
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(
        sent.iter().all(|m| m.contains(&format!("API key {id}"))),
        "{sent:?}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(alerts(&app.smtp, &user.email, 0).await.len(), 2);
}

#[tokio::test]
async fn bad_key_bindings_and_budgets_are_refused() {
    let app = spawn_app().await;
    let user = app.user().await;
    let stranger = app.user().await;
    let theirs = agent(&app, &stranger).await;
    for (extra, message) in [
        (
            json!({"agentIds": []}),
            "agentIds must name at least one agent",
        ),
        (json!({"agentIds": [theirs]}), "agentIds: agent"),
        (
            json!({"agentIds": ["nope"]}),
            "agentIds: agent nope not found",
        ),
        (
            json!({"monthlyTokenBudget": 0}),
            "monthlyTokenBudget must be from 1 to",
        ),
        (
            json!({"monthlyTokenBudget": 18446744073709551615u64}),
            "monthlyTokenBudget must be from 1 to",
        ),
        (json!({"monthlyTokenBudget": -5}), "monthlyTokenBudget"),
        (json!({"budget": 5}), "unknown field `budget`"),
    ] {
        let mut body = json!({"name": "k", "scopes": ["chat:read"]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let res = app.post("/api/api-keys", Some(&user.access), body).await;
        let body = assert_error(res, 400, "Bad Request", None).await;
        let text = body["message"].as_str().unwrap();
        assert!(text.contains(message), "{extra}: {text}");
    }
}
