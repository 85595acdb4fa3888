//! Live channels of integrations against mocks of the providers: a Telegram bot (webhook
//! registration, secret token, replies with sendMessage, one thread per chat), a Slack app
//! (signed Events API requests, URL verification, replies in the thread), and the website
//! widget's API (allowed origins, CORS, streaming, per-integration rate limit). The
//! browser side of the widget is tested in end2end/tests/widget.spec.ts.

use std::time::Duration;

use mock_provider::{MockConfig, MockProvider, MockSlack, MockTelegram};
use secrecy::SecretString;
use serde_json::{json, Value};

use crate::{chat::streamed_text, helpers::*};

const BOT_TOKEN: &str = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq";
const OTHER_BOT_TOKEN: &str = "987654321:BBHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq";
const SLACK_TOKEN: &str = "xoxb-2222-3333-channelsecret";
const SIGNING_SECRET: &str = "8f742231b10e8888abcd99aaaeee85a5";
const WAIT: Duration = Duration::from_secs(10);

/// An application whose model provider, Telegram and Slack are mocks, with a user and an
/// agent on the mock model (replies are `Echo: <message>`).
struct World {
    app: TestApp,
    telegram: MockTelegram,
    slack: MockSlack,
    _model: MockProvider,
    user: TestUser,
    agent: String,
}

async fn world() -> World {
    let model = MockProvider::start(MockConfig::default()).await.unwrap();
    let telegram = MockTelegram::start(&[BOT_TOKEN]).await.unwrap();
    let slack = MockSlack::start(SLACK_TOKEN, SIGNING_SECRET).await.unwrap();
    let (base, tg, sl) = (model.base_url(), telegram.base_url(), slack.api_url());
    let app = spawn_app_with(|c| {
        c.providers.openai_api_key = Some(SecretString::from("sk-mock"));
        c.providers.openai_base_url = base;
        c.channels.telegram_api_url = tg;
        c.channels.slack_api_url = sl;
    })
    .await;
    let user = app.user().await;
    let res = app
        .post(
            "/api/agents",
            Some(&user.access),
            json!({"name": "Helper", "model": "gpt-4o-mini"}),
        )
        .await;
    assert_eq!(res.status(), 201);
    let agent = res.json::<Value>().await.unwrap()["agent"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    World {
        app,
        telegram,
        slack,
        _model: model,
        user,
        agent,
    }
}

impl World {
    async fn create(&self, body: Value) -> (String, Value) {
        let res = self
            .app
            .post("/api/integrations", Some(&self.user.access), body)
            .await;
        assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
        let created: Value = res.json().await.unwrap();
        let id = created["id"].as_str().unwrap().to_string();
        (id, created)
    }

    async fn integration(&self, id: &str) -> Value {
        let res = self
            .app
            .get(&format!("/api/integrations/{id}"), Some(&self.user.access))
            .await;
        assert_eq!(res.status(), 200);
        res.json::<Value>().await.unwrap()["integration"].clone()
    }

    async fn telegram_bot(&self, token: &str, agent: Option<&str>) -> (String, Value) {
        let mut body = json!({"providerCode": "telegram", "name": "Support bot", "credentials": {"botToken": token}});
        if let Some(a) = agent {
            body["agentId"] = json!(a);
        }
        self.create(body).await
    }

    async fn conversations(&self) -> Vec<Value> {
        let res = self
            .app
            .get(
                &format!("/api/agents/{}/conversations", self.agent),
                Some(&self.user.access),
            )
            .await;
        assert_eq!(res.status(), 200);
        res.json::<Value>().await.unwrap()["conversations"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// The channel of each conversation in the owner's inbox, newest first.
    async fn inbox_channels(&self) -> Vec<String> {
        let res = self
            .app
            .get("/api/conversations", Some(&self.user.access))
            .await;
        assert_eq!(res.status(), 200);
        res.json::<Value>().await.unwrap()["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["channel"].as_str().unwrap().to_string())
            .collect()
    }
}

#[tokio::test]
async fn a_telegram_bot_registers_its_webhook_and_answers_each_chat_in_its_own_thread() {
    let w = world().await;
    let (id, created) = w.telegram_bot(BOT_TOKEN, Some(&w.agent)).await;
    assert_eq!(created["message"], "Telegram integration created");
    let integration = w.integration(&id).await;
    assert_eq!(integration["status"], "active");
    let url = w.app.url(&format!("/api/channels/telegram/{id}"));
    assert_eq!(integration["connection"]["webhookUrl"], url);

    let hook = w.telegram.webhook().expect("setWebhook was called");
    assert_eq!(hook.url, url);
    assert_eq!(hook.allowed_updates, Some(vec!["message".to_string()]));
    let secret = hook.secret_token.clone().expect("a secret token");
    assert_eq!(secret.len(), 43);
    assert!(
        !contains(&w.app.database_bytes(), &secret),
        "only a hash of the secret token is stored"
    );

    let first = MockTelegram::text_update(1, 4242, 7, "What is ownership?");
    assert_eq!(w.telegram.deliver(&first).await.unwrap(), 200);
    let sent = w.telegram.wait_for_sent(1, WAIT).await.expect("a reply");
    assert_eq!(sent[0].chat_id, 4242);
    assert_eq!(sent[0].text, "Echo: What is ownership?");
    assert_eq!(sent[0].reply_to, Some(7), "the reply answers the message");
    assert!(w.telegram.methods().contains(&"sendChatAction".to_string()));

    let second = MockTelegram::text_update(2, 4242, 8, "And borrowing?");
    assert_eq!(w.telegram.deliver(&second).await.unwrap(), 200);
    w.telegram
        .wait_for_sent(2, WAIT)
        .await
        .expect("a second reply");
    let other_chat = MockTelegram::text_update(3, 5151, 1, "Hello from another chat");
    assert_eq!(w.telegram.deliver(&other_chat).await.unwrap(), 200);
    w.telegram
        .wait_for_sent(3, WAIT)
        .await
        .expect("a third reply");

    // One thread per chat, owned by the integration's owner, on the linked agent.
    let conversations = w.conversations().await;
    assert_eq!(conversations.len(), 2, "{conversations:?}");
    let ownership = conversations
        .iter()
        .find(|c| c["title"] == "What is ownership?")
        .expect("the first chat's thread");
    let messages = w
        .app
        .messages(
            &w.user.access,
            &w.agent,
            ownership["threadId"].as_str().unwrap(),
        )
        .await;
    let texts: Vec<&str> = messages
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "What is ownership?",
            "Echo: What is ownership?",
            "And borrowing?",
            "Echo: And borrowing?"
        ]
    );

    // Telegram repeats an update it thinks was not received: it is answered once.
    assert_eq!(w.telegram.deliver(&second).await.unwrap(), 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(w.telegram.sent().len(), 3);

    // /new starts a new conversation for that chat.
    let restart = MockTelegram::text_update(4, 4242, 9, "/new");
    assert_eq!(w.telegram.deliver(&restart).await.unwrap(), 200);
    let sent = w.telegram.wait_for_sent(4, WAIT).await.unwrap();
    assert!(sent[3].text.contains("/new"), "{}", sent[3].text);
    let fresh = MockTelegram::text_update(5, 4242, 10, "Fresh start");
    assert_eq!(w.telegram.deliver(&fresh).await.unwrap(), 200);
    w.telegram.wait_for_sent(5, WAIT).await.unwrap();
    assert_eq!(w.conversations().await.len(), 3);
    assert_eq!(w.inbox_channels().await, ["telegram"; 3]);
}

#[tokio::test]
async fn telegram_updates_without_the_secret_token_are_refused() {
    let w = world().await;
    let (id, _) = w.telegram_bot(BOT_TOKEN, Some(&w.agent)).await;
    let update = MockTelegram::text_update(1, 4242, 7, "hi");
    assert_eq!(
        w.telegram
            .deliver_with(&update, Some(Some("guessed-secret")))
            .await
            .unwrap(),
        401
    );
    assert_eq!(
        w.telegram.deliver_with(&update, Some(None)).await.unwrap(),
        401
    );
    // The secret of one bot does not open another bot's endpoint.
    let (other, _) = w.telegram_bot(BOT_TOKEN, Some(&w.agent)).await;
    let secret = w.telegram.webhook().unwrap().secret_token.unwrap();
    let res = w
        .app
        .client
        .post(w.app.url(&format!("/api/channels/telegram/{id}")))
        .header("x-telegram-bot-api-secret-token", secret.as_str())
        .json(&update)
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        401,
        "{other} re-registered the webhook with a new secret"
    );
    // An integration of another provider or an unknown id is 404.
    let res = w
        .app
        .client
        .post(w.app.url("/api/channels/telegram/no-such-integration"))
        .header("x-telegram-bot-api-secret-token", secret.as_str())
        .json(&update)
        .send()
        .await
        .unwrap();
    assert_error(res, 404, "Not Found", None).await;
    // A body that is not an update is 400, after the secret is checked.
    let res = w
        .app
        .client
        .post(w.app.url(&format!("/api/channels/telegram/{other}")))
        .header("x-telegram-bot-api-secret-token", secret.as_str())
        .header("content-type", "application/json")
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(w.telegram.sent().is_empty());
}

#[tokio::test]
async fn channel_bodies_must_be_json_objects_sent_as_json() {
    let w = world().await;
    w.telegram_bot(BOT_TOKEN, Some(&w.agent)).await;
    let hook = w.telegram.webhook().unwrap();
    // An array shaped like an update's fields in order is not an update.
    for update in [
        json!([1]),
        json!(null),
        json!("update"),
        json!(7),
        json!(true),
    ] {
        assert_eq!(w.telegram.deliver(&update).await.unwrap(), 400, "{update}");
    }
    let res = w
        .app
        .client
        .post(&hook.url)
        .header(
            "x-telegram-bot-api-secret-token",
            hook.secret_token.unwrap(),
        )
        .header("content-type", "text/plain")
        .body(MockTelegram::text_update(1, 4242, 7, "hi").to_string())
        .send()
        .await
        .unwrap();
    error_containing(res, 415, "Unsupported Media Type", "application/json").await;

    let (_, url) = slack_app(&w).await;
    for event in [json!([]), json!(["url_verification", "x"]), json!(null)] {
        let res = w.slack.send_event(&url, &event).await.unwrap();
        error_containing(res, 400, "Bad Request", "must be a JSON object").await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(w.telegram.sent().is_empty());
    assert!(w.slack.posted().is_empty());
}

#[tokio::test]
async fn a_bot_token_telegram_refuses_leaves_the_integration_in_error_until_it_is_fixed() {
    let w = world().await;
    let (id, created) = w.telegram_bot(OTHER_BOT_TOKEN, Some(&w.agent)).await;
    let message = created["message"].as_str().unwrap();
    assert!(message.contains("Unauthorized"), "{message}");
    let integration = w.integration(&id).await;
    assert_eq!(integration["status"], "error");
    assert!(integration["statusDetail"]
        .as_str()
        .unwrap()
        .contains("Telegram did not accept the webhook: Unauthorized"));
    assert!(
        !integration.to_string().contains(OTHER_BOT_TOKEN),
        "the token is not echoed"
    );
    let res = w
        .app
        .call(
            reqwest::Method::PUT,
            &format!("/api/integrations/{id}"),
            Some(&w.user.access),
            Some(json!({"credentials": {"botToken": BOT_TOKEN}})),
        )
        .await;
    assert_eq!(res.status(), 200);
    let updated = res.json::<Value>().await.unwrap()["integration"].clone();
    assert_eq!(updated["status"], "active");
    assert!(updated.get("statusDetail").is_none());
    assert!(w.telegram.webhook().is_some());
}

#[tokio::test]
async fn deleting_a_telegram_bot_removes_its_webhook() {
    let w = world().await;
    let (id, _) = w.telegram_bot(BOT_TOKEN, Some(&w.agent)).await;
    let hook = w.telegram.webhook().unwrap();
    let res = w
        .app
        .delete(&format!("/api/integrations/{id}"), Some(&w.user.access))
        .await;
    assert_eq!(res.status(), 200);
    assert!(w.telegram.webhook().is_none());
    assert!(w.telegram.methods().contains(&"deleteWebhook".to_string()));
    let res = w
        .app
        .client
        .post(&hook.url)
        .header(
            "x-telegram-bot-api-secret-token",
            hook.secret_token.unwrap(),
        )
        .json(&MockTelegram::text_update(1, 1, 1, "anyone there?"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
}

#[tokio::test]
async fn an_unlinked_telegram_bot_says_it_has_no_agent() {
    let w = world().await;
    w.telegram_bot(BOT_TOKEN, None).await;
    let update = MockTelegram::text_update(1, 4242, 7, "hello?");
    assert_eq!(w.telegram.deliver(&update).await.unwrap(), 200);
    let sent = w.telegram.wait_for_sent(1, WAIT).await.unwrap();
    assert!(
        sent[0].text.contains("not connected to an agent"),
        "{}",
        sent[0].text
    );
    assert!(w.conversations().await.is_empty());
}

async fn slack_app(w: &World) -> (String, String) {
    let (id, _) = w
        .create(json!({
            "providerCode": "slack",
            "name": "Workspace helper",
            "agentId": w.agent,
            "credentials": {"botToken": SLACK_TOKEN, "signingSecret": SIGNING_SECRET}
        }))
        .await;
    let integration = w.integration(&id).await;
    assert_eq!(integration["status"], "active");
    let url = w.app.url(&format!("/api/channels/slack/{id}"));
    assert_eq!(integration["connection"]["webhookUrl"], url);
    (id, url)
}

#[tokio::test]
async fn slack_url_verification_and_signatures() {
    let w = world().await;
    let (_, url) = slack_app(&w).await;
    let challenge = json!({"token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"});
    let res = w.slack.send_event(&url, &challenge).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.json::<Value>().await.unwrap(),
        json!({"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"})
    );

    let body = serde_json::to_vec(&challenge).unwrap();
    let now = chrono::Utc::now().timestamp();
    let wrong = w
        .slack
        .send_signed(&url, &body, now, "0000000000000000aaaabbbbccccdddd", &[])
        .await
        .unwrap();
    error_containing(wrong, 401, "Unauthorized", "signature does not match").await;
    let stale = w
        .slack
        .send_signed(&url, &body, now - 6 * 60, SIGNING_SECRET, &[])
        .await
        .unwrap();
    error_containing(stale, 401, "Unauthorized", "five minutes").await;
    let unsigned = w
        .app
        .client
        .post(&url)
        .json(&challenge)
        .send()
        .await
        .unwrap();
    error_containing(unsigned, 401, "Unauthorized", "missing").await;
}

#[tokio::test]
async fn slack_mentions_are_answered_in_their_thread_once() {
    let w = world().await;
    let (_, url) = slack_app(&w).await;
    let mention = MockSlack::mention(
        "Ev001",
        "C0GENERAL",
        "1800000000.000100",
        "<@U0BOT> What is a crate?",
    );
    let res = w.slack.send_event(&url, &mention).await.unwrap();
    assert_eq!(res.status(), 200);
    let posted = w.slack.wait_for_posted(1, WAIT).await.expect("a reply");
    assert_eq!(posted[0].channel, "C0GENERAL");
    assert_eq!(posted[0].thread_ts.as_deref(), Some("1800000000.000100"));
    assert_eq!(posted[0].text, "Echo: What is a crate?");

    // Slack retries an event it thinks was not acknowledged: answered once.
    let retry = serde_json::to_vec(&mention).unwrap();
    let res = w
        .slack
        .send_signed(
            &url,
            &retry,
            chrono::Utc::now().timestamp(),
            SIGNING_SECRET,
            &[
                ("x-slack-retry-num", "1"),
                ("x-slack-retry-reason", "http_timeout"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    // A follow-up in the thread continues the same conversation.
    let mut follow_up = MockSlack::mention(
        "Ev002",
        "C0GENERAL",
        "1800000000.000200",
        "<@U0BOT> And a module?",
    );
    follow_up["event"]["thread_ts"] = json!("1800000000.000100");
    w.slack.send_event(&url, &follow_up).await.unwrap();
    let posted = w.slack.wait_for_posted(2, WAIT).await.unwrap();
    assert_eq!(posted[1].thread_ts.as_deref(), Some("1800000000.000100"));

    // The app's own messages and plain channel chatter are not answered.
    let mut own = MockSlack::mention("Ev003", "C0GENERAL", "1800000000.000300", "Echo: something");
    own["event"]["type"] = json!("message");
    own["event"]["channel_type"] = json!("im");
    own["event"]["bot_id"] = json!("B0BOT");
    w.slack.send_event(&url, &own).await.unwrap();
    let mut chatter = MockSlack::mention("Ev004", "C0GENERAL", "1800000000.000400", "lunch?");
    chatter["event"]["type"] = json!("message");
    chatter["event"]["channel_type"] = json!("channel");
    w.slack.send_event(&url, &chatter).await.unwrap();
    // A direct message is answered.
    let mut dm = MockSlack::mention("Ev005", "D0DIRECT", "1800000000.000500", "Hi there");
    dm["event"]["type"] = json!("message");
    dm["event"]["channel_type"] = json!("im");
    w.slack.send_event(&url, &dm).await.unwrap();
    let posted = w.slack.wait_for_posted(3, WAIT).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(w.slack.posted().len(), 3, "{:?}", w.slack.posted());
    assert_eq!(posted[2].channel, "D0DIRECT");
    assert_eq!(posted[2].text, "Echo: Hi there");

    let conversations = w.conversations().await;
    assert_eq!(
        conversations.len(),
        2,
        "one per Slack thread: {conversations:?}"
    );
}

/// Asserts an `{error, message}` answer whose message contains `needle`.
async fn error_containing(res: reqwest::Response, status: u16, error: &str, needle: &str) {
    let body = assert_error(res, status, error, None).await;
    let message = body["message"].as_str().unwrap();
    assert!(message.contains(needle), "{message:?} lacks {needle:?}");
}

const SHOP: &str = "http://shop.example";

async fn website(w: &World, config: Value) -> (String, String) {
    let (id, _) = w
        .create(json!({
            "providerCode": "website",
            "name": "Shop assistant",
            "agentId": w.agent,
            "credentials": {},
            "config": config,
        }))
        .await;
    let integration = w.integration(&id).await;
    let public_id = integration["connection"]["publicId"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(public_id.starts_with("pub_"));
    let embed = integration["connection"]["embedCode"].as_str().unwrap();
    assert_eq!(
        embed,
        format!(
            "<script src=\"{}\" data-agentchat-id=\"{public_id}\" async></script>",
            w.app.url("/widget.js")
        )
    );
    (id, public_id)
}

async fn widget_post(
    w: &World,
    public_id: &str,
    origin: Option<&str>,
    body: Value,
) -> reqwest::Response {
    let mut request = w
        .app
        .client
        .post(w.app.url(&format!("/api/widget/{public_id}/chat")))
        .json(&body);
    if let Some(o) = origin {
        request = request.header("origin", o);
    }
    request.send().await.unwrap()
}

/// A visitor's message from the shop's page, answered: the streamed reply's text.
async fn visitor_says(w: &World, public_id: &str, visitor: &str, message: &str) -> String {
    let body = json!({"visitorId": visitor, "message": message});
    let res = widget_post(w, public_id, Some(SHOP), body).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["access-control-allow-origin"], SHOP);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    streamed_text(&res.text().await.unwrap())
}

/// `GET path` from the shop's page.
async fn widget_get(w: &World, path: &str) -> reqwest::Response {
    w.app
        .client
        .get(w.app.url(path))
        .header("origin", SHOP)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_widget_script_is_served_with_a_short_cache() {
    let app = spawn_app().await;
    let res = app.client.get(app.url("/widget.js")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    assert_eq!(res.headers()["cache-control"], "public, max-age=300");
    assert!(res.text().await.unwrap().contains("data-agentchat-id"));
}

#[tokio::test]
async fn the_widget_serves_allowed_origins_only_and_streams_replies() {
    let w = world().await;
    let (_, public_id) = website(
        &w,
        json!({"allowedOrigins": [SHOP], "welcomeMessage": "Hi! How can I help?"}),
    )
    .await;
    let visitor = "0f8fad5bd9cb469fa16570867728950e";

    // Preflight: allowed for the shop, refused for another site.
    let preflight = |origin: &str| {
        w.app
            .client
            .request(
                reqwest::Method::OPTIONS,
                w.app.url(&format!("/api/widget/{public_id}/chat")),
            )
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
    };
    let ok = preflight(SHOP).await.unwrap();
    assert_eq!(ok.status(), 204);
    assert_eq!(ok.headers()["access-control-allow-origin"], SHOP);
    assert!(ok.headers()["access-control-allow-methods"]
        .to_str()
        .unwrap()
        .contains("POST"));
    assert_eq!(
        preflight("https://evil.example").await.unwrap().status(),
        403
    );

    let info = widget_get(&w, &format!("/api/widget/{public_id}")).await;
    assert_eq!(info.status(), 200);
    assert_eq!(info.headers()["access-control-allow-origin"], SHOP);
    assert_eq!(
        info.json::<Value>().await.unwrap(),
        json!({"name": "Shop assistant", "welcomeMessage": "Hi! How can I help?", "available": true})
    );

    assert_eq!(
        visitor_says(&w, &public_id, visitor, "Do you ship abroad?").await,
        "Echo: Do you ship abroad?"
    );

    // The same visitor continues the same conversation; the owner sees it.
    assert_eq!(
        visitor_says(&w, &public_id, visitor, "To Norway?").await,
        "Echo: To Norway?"
    );
    let history = widget_get(
        &w,
        &format!("/api/widget/{public_id}/messages?visitorId={visitor}"),
    )
    .await;
    assert_eq!(history.status(), 200);
    let history: Value = history.json().await.unwrap();
    let roles: Vec<&str> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(w.conversations().await.len(), 1);
    assert_eq!(w.inbox_channels().await, ["widget"]);
    // Another visitor sees nothing of it.
    let other = widget_get(
        &w,
        &format!("/api/widget/{public_id}/messages?visitorId=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
    )
    .await;
    assert_eq!(
        other.json::<Value>().await.unwrap(),
        json!({"messages": []})
    );

    // Another site, or no page at all, is refused (with a message the widget can show).
    let res = widget_post(
        &w,
        &public_id,
        Some("https://evil.example"),
        json!({"visitorId": visitor, "message": "hi"}),
    )
    .await;
    assert_eq!(
        res.headers()["access-control-allow-origin"],
        "https://evil.example"
    );
    error_containing(res, 403, "Forbidden", "not enabled on https://evil.example").await;
    let res = widget_post(
        &w,
        &public_id,
        None,
        json!({"visitorId": visitor, "message": "hi"}),
    )
    .await;
    error_containing(res, 403, "Forbidden", "Origin header is missing").await;
    let res = widget_post(
        &w,
        "pub_unknown",
        Some(SHOP),
        json!({"visitorId": visitor, "message": "hi"}),
    )
    .await;
    assert_error(res, 404, "Not Found", None).await;

    // Bad input is a clear 400.
    for (body, needle) in [
        (json!({"visitorId": "short", "message": "hi"}), "visitorId"),
        (
            json!({"visitorId": visitor, "message": "  "}),
            "message must not be empty",
        ),
        (json!({"message": "hi"}), "visitorId"),
    ] {
        let res = widget_post(&w, &public_id, Some(SHOP), body).await;
        error_containing(res, 400, "Bad Request", needle).await;
    }
    assert_eq!(w.conversations().await.len(), 1, "nothing was stored");
}

/// A rating from the shop's page: `PUT` with `body`, or `DELETE` for `visitor`.
async fn widget_rate(
    w: &World,
    public_id: &str,
    message: &str,
    body: Option<Value>,
    visitor: &str,
) -> reqwest::Response {
    let path = format!("/api/widget/{public_id}/messages/{message}/feedback");
    let request = match body {
        Some(body) => w.app.client.put(w.app.url(&path)).json(&body),
        None => w
            .app
            .client
            .delete(w.app.url(&format!("{path}?visitorId={visitor}"))),
    };
    request.header("origin", SHOP).send().await.unwrap()
}

#[tokio::test]
async fn a_visitor_rates_only_replies_of_its_own_conversation() {
    let w = world().await;
    let (_, public_id) = website(&w, json!({"allowedOrigins": [SHOP]})).await;
    let (alice, bob) = (
        "0f8fad5bd9cb469fa16570867728950e",
        "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
    );
    visitor_says(&w, &public_id, alice, "Do you ship abroad?").await;
    visitor_says(&w, &public_id, bob, "Where is my parcel?").await;
    let history = |visitor: &'static str| {
        let (w, public_id) = (&w, &public_id);
        async move {
            let res = widget_get(
                w,
                &format!("/api/widget/{public_id}/messages?visitorId={visitor}"),
            )
            .await;
            res.json::<Value>().await.unwrap()["messages"]
                .as_array()
                .unwrap()
                .clone()
        }
    };
    let alices = history(alice).await;
    let (asked, reply) = (
        alices[0]["id"].as_str().unwrap().to_string(),
        alices[1]["id"].as_str().unwrap().to_string(),
    );
    let bobs_reply = history(bob).await[1]["id"].as_str().unwrap().to_string();

    // The preflight allows the rating's methods.
    let preflight = w
        .app
        .client
        .request(
            reqwest::Method::OPTIONS,
            w.app.url(&format!(
                "/api/widget/{public_id}/messages/{reply}/feedback"
            )),
        )
        .header("origin", SHOP)
        .header("access-control-request-method", "PUT")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 204);
    let methods = preflight.headers()["access-control-allow-methods"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        methods.contains("PUT") && methods.contains("DELETE"),
        "{methods}"
    );

    let rating = json!({"visitorId": alice, "rating": "down", "comment": "Too slow"});
    let res = widget_rate(&w, &public_id, &reply, Some(rating.clone()), alice).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["access-control-allow-origin"], SHOP);
    let stored: Value = res.json().await.unwrap();
    assert_eq!(stored["rating"], "down");
    assert_eq!(stored["comment"], "Too slow");
    // The visitor's history and the owner's message list show it.
    assert_eq!(history(alice).await[1]["feedback"], stored);
    assert!(history(alice).await[0].get("feedback").is_none());
    let thread = w
        .conversations()
        .await
        .into_iter()
        .find(|c| c["title"] == "Do you ship abroad?")
        .unwrap();
    let owner_view = w
        .app
        .messages(
            &w.user.access,
            &w.agent,
            thread["threadId"].as_str().unwrap(),
        )
        .await;
    assert_eq!(owner_view[1]["feedback"], stored);

    // Another visitor's reply, the visitor's own message, bad input, another site.
    let res = widget_rate(
        &w,
        &public_id,
        &bobs_reply,
        Some(json!({"visitorId": alice, "rating": "up"})),
        alice,
    )
    .await;
    assert_error(res, 404, "Not Found", None).await;
    let res = widget_rate(&w, &public_id, &bobs_reply, None, alice).await;
    assert_error(res, 404, "Not Found", None).await;
    let res = widget_rate(
        &w,
        &public_id,
        &asked,
        Some(json!({"visitorId": alice, "rating": "up"})),
        alice,
    )
    .await;
    assert_error(res, 400, "Bad Request", None).await;
    for body in [
        json!({"visitorId": alice, "rating": "meh"}),
        json!({"visitorId": "short", "rating": "up"}),
        json!({"visitorId": alice, "rating": "up", "stars": 5}),
    ] {
        let res = widget_rate(&w, &public_id, &reply, Some(body), alice).await;
        assert_error(res, 400, "Bad Request", None).await;
    }
    let res = w
        .app
        .client
        .put(w.app.url(&format!(
            "/api/widget/{public_id}/messages/{reply}/feedback"
        )))
        .header("origin", "https://evil.example")
        .json(&json!({"visitorId": alice, "rating": "up"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert_eq!(history(alice).await[1]["feedback"], stored, "unchanged");

    // Cleared by the visitor.
    let res = widget_rate(&w, &public_id, &reply, None, alice).await;
    assert_eq!(res.status(), 200);
    assert!(history(alice).await[1].get("feedback").is_none());
}

#[tokio::test]
async fn the_widget_has_its_own_rate_limit_and_needs_a_linked_agent() {
    let w = world().await;
    let (id, public_id) = website(
        &w,
        json!({"allowedOrigins": [SHOP], "requestsPerMinute": 2}),
    )
    .await;
    for visitor in ["visitor-aaaaaaaaaaaa", "visitor-bbbbbbbbbbbb"] {
        assert_eq!(
            visitor_says(&w, &public_id, visitor, "hi").await,
            "Echo: hi"
        );
    }
    let res = widget_post(
        &w,
        &public_id,
        Some(SHOP),
        json!({"visitorId": "visitor-cccccccccccc", "message": "hi"}),
    )
    .await;
    assert_eq!(
        res.status(),
        429,
        "the budget is the widget's, across visitors"
    );
    assert!(res.headers().contains_key("retry-after"));
    assert_eq!(res.headers()["access-control-allow-origin"], SHOP);

    // Unlinked: the widget says so instead of answering.
    let res = w
        .app
        .call(
            reqwest::Method::PUT,
            &format!("/api/integrations/{id}"),
            Some(&w.user.access),
            Some(json!({"agentId": null, "config": {"allowedOrigins": [SHOP]}})),
        )
        .await;
    assert_eq!(res.status(), 200);
    let res = widget_post(
        &w,
        &public_id,
        Some(SHOP),
        json!({"visitorId": "visitor-dddddddddddd", "message": "hi"}),
    )
    .await;
    error_containing(res, 409, "Conflict", "not connected to an agent").await;
    let info: Value = widget_get(&w, &format!("/api/widget/{public_id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(info["available"], false);
}
