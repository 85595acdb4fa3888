//! The Telegram channel: updates arrive at `POST /api/channels/telegram/{integrationId}`,
//! replies go out with `sendMessage`. Bot API rules (core.telegram.org/bots/api): requests
//! are `POST {TELEGRAM_API_URL}/bot{token}/{method}`, answered `{ok, result}` or `{ok: false,
//! error_code, description}`; `secret_token` is 1–256 of `A-Z a-z 0-9 _ -`, echoed in
//! `X-Telegram-Bot-Api-Secret-Token`; texts are at most 4,096 characters; updates repeat until
//! answered 2xx. The token is in every URL, so errors never quote the URL.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use rand::RngCore;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Longest text of one Telegram message, in characters.
pub const MESSAGE_MAX_CHARS: usize = 4_096;

/// The Bot API of one bot.
pub struct BotApi<'a> {
    http: &'a reqwest::Client,
    base: &'a str,
    token: &'a str,
}

#[derive(Deserialize)]
struct Answer {
    ok: bool,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    result: Value,
}

impl<'a> BotApi<'a> {
    /// The bot with `token` at the Bot API `base` (no trailing slash).
    pub fn new(http: &'a reqwest::Client, base: &'a str, token: &'a str) -> Self {
        Self { http, base, token }
    }

    /// Calls `method` with `body`; the `result` on success. Errors: Telegram's `description`, or
    /// why it could not be reached (never the URL).
    pub async fn call(&self, method: &str, body: &Value) -> Result<Value, String> {
        let url = format!("{}/bot{}/{method}", self.base, self.token);
        let res = self
            .http
            .post(url)
            .json(body)
            .send()
            .await
            .map_err(|e| format!("Telegram could not be reached ({})", e.without_url()))?;
        let status = res.status();
        let answer: Answer = res.json().await.map_err(|e| {
            format!(
                "Telegram answered HTTP {status} with an unexpected body ({})",
                e.without_url()
            )
        })?;
        if answer.ok {
            Ok(answer.result)
        } else {
            Err(answer
                .description
                .unwrap_or_else(|| format!("HTTP {status}")))
        }
    }

    /// Registers `url` as the bot's webhook with `secret_token`, for messages only. Errors: as
    /// [`BotApi::call`].
    pub async fn set_webhook(&self, url: &str, secret_token: &str) -> Result<(), String> {
        self.call(
            "setWebhook",
            &json!({"url": url, "secret_token": secret_token, "allowed_updates": ["message"]}),
        )
        .await
        .map(drop)
    }

    /// Removes the bot's webhook. Errors: as [`BotApi::call`].
    pub async fn delete_webhook(&self) -> Result<(), String> {
        self.call("deleteWebhook", &json!({})).await.map(drop)
    }

    /// Sends `text` to `chat_id` as plain text in parts of [`MESSAGE_MAX_CHARS`], the first
    /// answering `reply_to`. Errors: as [`BotApi::call`]; parts after a failure are not sent.
    pub async fn send_message(
        &self,
        chat_id: i64,
        text: &str,
        reply_to: Option<i64>,
    ) -> Result<(), String> {
        for (i, part) in split(text).into_iter().enumerate() {
            let mut body = json!({"chat_id": chat_id, "text": part});
            if let (0, Some(message_id)) = (i, reply_to) {
                body["reply_parameters"] =
                    json!({"message_id": message_id, "allow_sending_without_reply": true});
            }
            self.call("sendMessage", &body).await?;
        }
        Ok(())
    }

    /// Shows "typing…" in `chat_id` (for 5 seconds or until the next message).
    pub async fn send_typing(&self, chat_id: i64) {
        let body = json!({"chat_id": chat_id, "action": "typing"});
        if let Err(e) = self.call("sendChatAction", &body).await {
            tracing::debug!(error = %e, "sendChatAction failed");
        }
    }
}

/// `text` in parts of at most [`MESSAGE_MAX_CHARS`], split at paragraph, sentence or word
/// boundaries; an empty text is one part saying so (Telegram refuses empty messages).
pub fn split(text: &str) -> Vec<String> {
    let parts: Vec<String> = text_splitter::TextSplitter::new(MESSAGE_MAX_CHARS)
        .chunks(text)
        .map(str::to_string)
        .collect();
    if parts.is_empty() {
        vec!["(no answer)".to_string()]
    } else {
        parts
    }
}

/// A new secret token: 32 random bytes, base64url (43 allowed characters).
pub fn new_secret_token() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// What is stored of a secret token: its SHA-256.
pub fn secret_hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// Whether the secret-token header matches the stored hash (constant time).
pub fn secret_matches(header: Option<&str>, stored: Option<&[u8]>) -> bool {
    match (header, stored) {
        (Some(token), Some(stored)) => bool::from(secret_hash(token).ct_eq(stored)),
        _ => false,
    }
}

/// The parts of an update this service acts on.
#[derive(Debug, Deserialize)]
pub struct Update {
    pub update_id: i64,
    #[serde(default)]
    pub message: Option<Message>,
}

/// A message of an update.
#[derive(Debug, Deserialize)]
pub struct Message {
    pub message_id: i64,
    pub chat: Chat,
    #[serde(default)]
    pub from: Option<User>,
    #[serde(default)]
    pub text: Option<String>,
}

/// A chat (private, group, supergroup or channel).
#[derive(Debug, Deserialize)]
pub struct Chat {
    pub id: i64,
}

/// A message's sender.
#[derive(Debug, Deserialize)]
pub struct User {
    #[serde(default)]
    pub is_bot: bool,
}

/// A bot command at the start of a message (`/new`, `/start@MyBot args`), lowercased, without
/// the bot's name.
pub fn command(text: &str) -> Option<String> {
    let word = text
        .trim_start()
        .strip_prefix('/')?
        .split_whitespace()
        .next()?;
    let name = word.split('@').next().unwrap_or(word);
    Some(name.to_ascii_lowercase())
}

/// The key of a chat's conversation in `channel_threads`.
pub fn conversation_key(chat_id: i64) -> String {
    format!("chat:{chat_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_tokens_use_telegrams_alphabet_and_match_only_themselves() {
        let token = new_secret_token();
        assert_eq!(token.len(), 43);
        assert!(token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
        let stored = secret_hash(&token);
        assert!(secret_matches(Some(&token), Some(&stored)));
        assert!(!secret_matches(Some("other"), Some(&stored)));
        assert!(!secret_matches(None, Some(&stored)));
        assert!(!secret_matches(Some(&token), None));
    }

    #[test]
    fn long_replies_are_split_under_the_message_limit() {
        let text = "word ".repeat(2_000);
        let parts = split(&text);
        assert_eq!(parts.len(), 3);
        assert!(parts.iter().all(|p| p.chars().count() <= MESSAGE_MAX_CHARS));
        assert_eq!(parts.join(" ").split_whitespace().count(), 2_000);
        assert_eq!(split(""), ["(no answer)"]);
    }

    #[test]
    fn commands_are_recognised() {
        assert_eq!(command("/start").as_deref(), Some("start"));
        assert_eq!(command("/New@SupportBot please").as_deref(), Some("new"));
        assert_eq!(command("hello /new"), None);
        assert_eq!(command("/"), None);
    }
}
