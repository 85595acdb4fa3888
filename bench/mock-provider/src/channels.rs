//! Mock chat platforms for the live channels of integrations: [`MockTelegram`] (the Bot API
//! methods the service calls, and Telegram's side of webhook delivery) and [`MockSlack`]
//! (`chat.postMessage`, and Slack's side of the Events API: signed requests).
//!
//! Both check what the real APIs check (Telegram: a known bot token, a `secret_token` of
//! 1–256 characters `A-Z a-z 0-9 _ -`, a message text of 1–4,096 characters; Slack: the bot
//! token, a channel and a text) and answer in the real shapes (`{ok, result}` /
//! `{ok: false, error_code, description}`; `{ok, ts}` / `{ok: false, error}`).

use std::{
    net::{Ipv4Addr, SocketAddr},
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use axum::{
    extract::{Path, State},
    http::HeaderMap,
    routing::post,
    Json, Router,
};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use tokio::{net::TcpListener, task::JoinHandle};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn bind() -> anyhow::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

/// Polls `read` every 20 ms until it returns `Some`, for at most `timeout`.
async fn wait_until<T>(timeout: Duration, mut read: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = read() {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A message a bot sent with `sendMessage`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentMessage {
    pub chat_id: i64,
    pub text: String,
    /// `reply_parameters.message_id`, when the message answers another.
    pub reply_to: Option<i64>,
}

/// The webhook a bot registered with `setWebhook`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredWebhook {
    pub url: String,
    pub secret_token: Option<String>,
    pub allowed_updates: Option<Vec<String>>,
}

#[derive(Default)]
struct TelegramState {
    webhook: Option<RegisteredWebhook>,
    sent: Vec<SentMessage>,
    methods: Vec<String>,
}

struct TelegramShared {
    tokens: Vec<String>,
    state: Mutex<TelegramState>,
}

/// A mock Telegram Bot API at `http://127.0.0.1:PORT` (`/bot{token}/{method}`).
pub struct MockTelegram {
    pub addr: SocketAddr,
    shared: Arc<TelegramShared>,
    http: reqwest::Client,
    task: JoinHandle<()>,
}

impl Drop for MockTelegram {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn telegram_error(code: u16, description: &str) -> Json<Value> {
    Json(json!({"ok": false, "error_code": code, "description": description}))
}

async fn telegram_method(
    State(shared): State<Arc<TelegramShared>>,
    Path((bot, method)): Path<(String, String)>,
    body: Option<Json<Value>>,
) -> (axum::http::StatusCode, Json<Value>) {
    use axum::http::StatusCode;
    let token = bot.strip_prefix("bot").unwrap_or_default();
    if !shared.tokens.iter().any(|t| t == token) {
        return (
            StatusCode::UNAUTHORIZED,
            telegram_error(401, "Unauthorized"),
        );
    }
    let body = body.map(|Json(b)| b).unwrap_or(Value::Null);
    let mut state = lock(&shared.state);
    state.methods.push(method.clone());
    let bad = |d: &str| (StatusCode::BAD_REQUEST, telegram_error(400, d));
    match method.as_str() {
        "getMe" => (
            StatusCode::OK,
            Json(
                json!({"ok": true, "result": {"id": 123456789, "is_bot": true, "username": "mock_bot"}}),
            ),
        ),
        "setWebhook" => {
            let Some(url) = body["url"].as_str() else {
                return bad("Bad Request: bad webhook: an HTTPS URL must be provided for webhook");
            };
            let secret = body["secret_token"].as_str().map(str::to_owned);
            if let Some(s) = &secret {
                let allowed = s
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if s.is_empty() || s.len() > 256 || !allowed {
                    return bad("Bad Request: secret token contains unallowed characters");
                }
            }
            state.webhook = Some(RegisteredWebhook {
                url: url.to_owned(),
                secret_token: secret,
                allowed_updates: body["allowed_updates"].as_array().map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                }),
            });
            (
                StatusCode::OK,
                Json(json!({"ok": true, "result": true, "description": "Webhook was set"})),
            )
        }
        "deleteWebhook" => {
            state.webhook = None;
            (
                StatusCode::OK,
                Json(json!({"ok": true, "result": true, "description": "Webhook was deleted"})),
            )
        }
        "sendChatAction" => (StatusCode::OK, Json(json!({"ok": true, "result": true}))),
        "sendMessage" => {
            let Some(chat_id) = body["chat_id"].as_i64() else {
                return bad("Bad Request: chat not found");
            };
            let text = body["text"].as_str().unwrap_or_default();
            if text.trim().is_empty() {
                return bad("Bad Request: message text is empty");
            }
            if text.chars().count() > 4096 {
                return bad("Bad Request: message is too long");
            }
            state.sent.push(SentMessage {
                chat_id,
                text: text.to_owned(),
                reply_to: body["reply_parameters"]["message_id"].as_i64(),
            });
            let id = state.sent.len();
            (
                StatusCode::OK,
                Json(
                    json!({"ok": true, "result": {"message_id": id, "chat": {"id": chat_id}, "text": text}}),
                ),
            )
        }
        _ => (
            StatusCode::NOT_FOUND,
            telegram_error(404, "Not Found: method not found"),
        ),
    }
}

impl MockTelegram {
    /// Starts the mock; `tokens` are the bot tokens it knows (others get 401).
    ///
    /// # Errors
    ///
    /// When no loopback port can be bound.
    pub async fn start(tokens: &[&str]) -> anyhow::Result<Self> {
        let (listener, addr) = bind().await?;
        let shared = Arc::new(TelegramShared {
            tokens: tokens.iter().map(|t| (*t).to_owned()).collect(),
            state: Mutex::new(TelegramState::default()),
        });
        let router = Router::new()
            .route("/{bot}/{method}", post(telegram_method))
            .with_state(Arc::clone(&shared));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Self {
            addr,
            shared,
            http: reqwest::Client::new(),
            task,
        })
    }

    /// The Bot API base to configure (`TELEGRAM_API_URL`): `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The webhook registered last (`None` before `setWebhook` or after `deleteWebhook`).
    pub fn webhook(&self) -> Option<RegisteredWebhook> {
        lock(&self.shared.state).webhook.clone()
    }

    /// Every `sendMessage` so far.
    pub fn sent(&self) -> Vec<SentMessage> {
        lock(&self.shared.state).sent.clone()
    }

    /// The methods called so far, in order (`setWebhook`, `sendChatAction`, ...).
    pub fn methods(&self) -> Vec<String> {
        lock(&self.shared.state).methods.clone()
    }

    /// Waits until at least `n` messages were sent; all of them, or `None` after `timeout`.
    pub async fn wait_for_sent(&self, n: usize, timeout: Duration) -> Option<Vec<SentMessage>> {
        wait_until(timeout, || {
            let sent = self.sent();
            (sent.len() >= n).then_some(sent)
        })
        .await
    }

    /// Delivers `update` to the registered webhook as Telegram does (JSON POST with the
    /// `X-Telegram-Bot-Api-Secret-Token` header); `secret` overrides the registered token
    /// (`Some(None)` sends no header). Answers the webhook's status.
    ///
    /// # Errors
    ///
    /// When no webhook is registered or the request fails.
    pub async fn deliver_with(
        &self,
        update: &Value,
        secret: Option<Option<&str>>,
    ) -> anyhow::Result<u16> {
        let hook = self
            .webhook()
            .ok_or_else(|| anyhow::anyhow!("no webhook is registered"))?;
        let mut request = self.http.post(&hook.url).json(update);
        let secret = match secret {
            Some(s) => s.map(str::to_owned),
            None => hook.secret_token.clone(),
        };
        if let Some(s) = secret {
            request = request.header("x-telegram-bot-api-secret-token", s);
        }
        Ok(request.send().await?.status().as_u16())
    }

    /// [`Self::deliver_with`] the registered secret token.
    ///
    /// # Errors
    ///
    /// See [`Self::deliver_with`].
    pub async fn deliver(&self, update: &Value) -> anyhow::Result<u16> {
        self.deliver_with(update, None).await
    }

    /// A text message update from a person in a private chat.
    pub fn text_update(update_id: i64, chat_id: i64, message_id: i64, text: &str) -> Value {
        json!({
            "update_id": update_id,
            "message": {
                "message_id": message_id,
                "date": 1_800_000_000,
                "chat": {"id": chat_id, "type": "private", "first_name": "Ada"},
                "from": {"id": chat_id, "is_bot": false, "first_name": "Ada"},
                "text": text,
            }
        })
    }
}

/// A message posted with `chat.postMessage`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostedMessage {
    pub channel: String,
    pub thread_ts: Option<String>,
    pub text: String,
}

struct SlackShared {
    bot_token: String,
    posted: Mutex<Vec<PostedMessage>>,
}

/// A mock Slack: the Web API at `http://127.0.0.1:PORT/api` and a signer of Events API
/// requests.
pub struct MockSlack {
    pub addr: SocketAddr,
    signing_secret: String,
    shared: Arc<SlackShared>,
    http: reqwest::Client,
    task: JoinHandle<()>,
}

impl Drop for MockSlack {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn post_message(
    State(shared): State<Arc<SlackShared>>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Json<Value> {
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if bearer != Some(shared.bot_token.as_str()) {
        return Json(json!({"ok": false, "error": "invalid_auth"}));
    }
    let body = body.map(|Json(b)| b).unwrap_or(Value::Null);
    let Some(channel) = body["channel"].as_str() else {
        return Json(json!({"ok": false, "error": "channel_not_found"}));
    };
    let text = body["text"].as_str().unwrap_or_default();
    if text.trim().is_empty() {
        return Json(json!({"ok": false, "error": "no_text"}));
    }
    let mut posted = lock(&shared.posted);
    posted.push(PostedMessage {
        channel: channel.to_owned(),
        thread_ts: body["thread_ts"].as_str().map(str::to_owned),
        text: text.to_owned(),
    });
    let ts = format!("1800000000.{:06}", posted.len());
    Json(json!({"ok": true, "channel": channel, "ts": ts, "message": {"text": text, "ts": ts}}))
}

impl MockSlack {
    /// Starts the mock for an app with `bot_token` and `signing_secret`.
    ///
    /// # Errors
    ///
    /// When no loopback port can be bound.
    pub async fn start(bot_token: &str, signing_secret: &str) -> anyhow::Result<Self> {
        let (listener, addr) = bind().await?;
        let shared = Arc::new(SlackShared {
            bot_token: bot_token.to_owned(),
            posted: Mutex::new(Vec::new()),
        });
        let router = Router::new()
            .route("/api/chat.postMessage", post(post_message))
            .with_state(Arc::clone(&shared));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Self {
            addr,
            signing_secret: signing_secret.to_owned(),
            shared,
            http: reqwest::Client::new(),
            task,
        })
    }

    /// The Web API base to configure (`SLACK_API_URL`): `http://127.0.0.1:PORT/api`.
    pub fn api_url(&self) -> String {
        format!("http://{}/api", self.addr)
    }

    /// Every `chat.postMessage` so far.
    pub fn posted(&self) -> Vec<PostedMessage> {
        lock(&self.shared.posted).clone()
    }

    /// Waits until at least `n` messages were posted; all of them, or `None` after `timeout`.
    pub async fn wait_for_posted(&self, n: usize, timeout: Duration) -> Option<Vec<PostedMessage>> {
        wait_until(timeout, || {
            let posted = self.posted();
            (posted.len() >= n).then_some(posted)
        })
        .await
    }

    /// Slack's signature of `body` at `timestamp` under `secret`: `v0=` + hex HMAC-SHA256 of
    /// `v0:{timestamp}:{body}`.
    pub fn signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key");
        mac.update(format!("v0:{timestamp}:").as_bytes());
        mac.update(body);
        let bytes = mac.finalize().into_bytes();
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!("v0={hex}")
    }

    /// Sends `body` to `url` as Slack does, signed at `timestamp` (Unix seconds) with
    /// `secret`; extra headers (e.g. `X-Slack-Retry-Num`) are added as given.
    ///
    /// # Errors
    ///
    /// When the request fails.
    pub async fn send_signed(
        &self,
        url: &str,
        body: &[u8],
        timestamp: i64,
        secret: &str,
        extra: &[(&str, &str)],
    ) -> anyhow::Result<reqwest::Response> {
        let mut request = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("x-slack-request-timestamp", timestamp.to_string())
            .header(
                "x-slack-signature",
                Self::signature(secret, timestamp, body),
            )
            .body(body.to_vec());
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        Ok(request.send().await?)
    }

    /// Sends `event` to `url` signed now with the app's signing secret.
    ///
    /// # Errors
    ///
    /// When the request fails.
    pub async fn send_event(&self, url: &str, event: &Value) -> anyhow::Result<reqwest::Response> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs() as i64;
        let body = serde_json::to_vec(event)?;
        self.send_signed(url, &body, now, &self.signing_secret, &[])
            .await
    }

    /// An `event_callback` carrying an `app_mention` in `channel` at `ts`.
    pub fn mention(event_id: &str, channel: &str, ts: &str, text: &str) -> Value {
        json!({
            "token": "deprecated-verification-token",
            "team_id": "T0001",
            "api_app_id": "A0001",
            "type": "event_callback",
            "event_id": event_id,
            "event_time": 1_800_000_000,
            "event": {
                "type": "app_mention",
                "user": "U0PERSON",
                "text": text,
                "ts": ts,
                "channel": channel,
                "event_ts": ts,
            }
        })
    }
}
