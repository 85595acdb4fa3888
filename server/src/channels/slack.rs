//! The Slack channel: Events API requests arrive at `POST /api/channels/slack/{integrationId}`,
//! replies go out with `chat.postMessage` in the message's thread. Slack's rules: the
//! signature is `v0=` + hex HMAC-SHA256 of `v0:{timestamp}:{raw body}` under the signing
//! secret, timestamps over five minutes off are refused ("Verifying requests from Slack");
//! `url_verification` is answered with its `challenge`, events must be acknowledged within
//! three seconds and are retried up to three times ("Events API").

use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::json;
use sha2::Sha256;

/// Largest distance between a request's timestamp and now, in seconds.
pub const TIMESTAMP_WINDOW_SECS: i64 = 5 * 60;

/// Why a request is not accepted as Slack's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the X-Slack-Request-Timestamp or X-Slack-Signature header is missing")]
    Missing,
    #[error("the request timestamp is more than five minutes from now")]
    Stale,
    #[error("the signature does not match the request")]
    Mismatch,
}

/// Checks a request's signature; `now` in Unix seconds. Errors: [`SignatureError`].
pub fn verify(
    signing_secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), SignatureError> {
    let (Some(timestamp), Some(signature)) = (timestamp, signature) else {
        return Err(SignatureError::Missing);
    };
    let at: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| SignatureError::Stale)?;
    if (now - at).abs() > TIMESTAMP_WINDOW_SECS {
        return Err(SignatureError::Stale);
    }
    let given = signature
        .strip_prefix("v0=")
        .and_then(|h| hex::decode(h).ok())
        .ok_or(SignatureError::Mismatch)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(signing_secret.as_bytes())
        .map_err(|_| SignatureError::Mismatch)?;
    mac.update(b"v0:");
    mac.update(timestamp.trim().as_bytes());
    mac.update(b":");
    mac.update(body);
    mac.verify_slice(&given)
        .map_err(|_| SignatureError::Mismatch)
}

/// The signature Slack would send for `body` at `timestamp` (for tests and tools).
pub fn sign(signing_secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(signing_secret.as_bytes()).expect("HMAC takes any key");
    mac.update(format!("v0:{timestamp}:").as_bytes());
    mac.update(body);
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// An Events API request.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Envelope {
    /// Sent when the request URL is entered in the app's settings.
    UrlVerification { challenge: String },
    /// An event the app subscribed to.
    EventCallback { event_id: String, event: Event },
    /// Anything else (e.g. `app_rate_limited`): acknowledged and ignored.
    #[serde(other)]
    Other,
}

/// The fields of a `message` or `app_mention` event this service uses.
#[derive(Debug, Deserialize)]
pub struct Event {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub channel: Option<String>,
    /// `im` for a direct message.
    #[serde(default)]
    pub channel_type: Option<String>,
    #[serde(default)]
    pub ts: Option<String>,
    #[serde(default)]
    pub thread_ts: Option<String>,
    /// Set on messages posted by bots (this app's own replies included).
    #[serde(default)]
    pub bot_id: Option<String>,
    /// Set on edits, joins and other non-plain messages.
    #[serde(default)]
    pub subtype: Option<String>,
}

/// A message the agent should answer: where, in which thread, and the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub channel: String,
    /// The thread to answer in: the message's thread, or the message itself.
    pub thread_ts: String,
    pub text: String,
}

impl Event {
    /// The question in this event: a mention of the app or a direct message from a person (never a
    /// bot), with text left after removing mentions.
    pub fn question(&self) -> Option<Question> {
        if self.bot_id.is_some() || self.subtype.is_some() {
            return None;
        }
        let wanted = match self.kind.as_str() {
            "app_mention" => true,
            "message" => self.channel_type.as_deref() == Some("im"),
            _ => false,
        };
        if !wanted {
            return None;
        }
        let text = strip_mentions(self.text.as_deref()?);
        if text.is_empty() {
            return None;
        }
        let ts = self.ts.clone()?;
        Some(Question {
            channel: self.channel.clone()?,
            thread_ts: self.thread_ts.clone().unwrap_or(ts),
            text,
        })
    }
}

/// `text` without user mentions (`<@U0123ABC>`), trimmed.
pub fn strip_mentions(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<@") {
        out.push_str(&rest[..start]);
        match rest[start..].find('>') {
            Some(end) => rest = &rest[start + end + 1..],
            None => {
                rest = &rest[start..];
                break;
            }
        }
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The key of a Slack thread's conversation in `channel_threads`.
pub fn conversation_key(question: &Question) -> String {
    format!("thread:{}:{}", question.channel, question.thread_ts)
}

#[derive(Deserialize)]
struct Answer {
    ok: bool,
    #[serde(default)]
    error: Option<String>,
}

/// Posts `text` in `thread_ts` of `channel`. Errors: Slack's `error` code, or why it was
/// unreachable.
pub async fn post_message(
    http: &reqwest::Client,
    base: &str,
    bot_token: &str,
    question: &Question,
    text: &str,
) -> Result<(), String> {
    let res = http
        .post(format!("{base}/chat.postMessage"))
        .bearer_auth(bot_token)
        .json(&json!({"channel": question.channel, "thread_ts": question.thread_ts, "text": text}))
        .send()
        .await
        .map_err(|e| format!("Slack could not be reached ({e})"))?;
    let status = res.status();
    let answer: Answer = res
        .json()
        .await
        .map_err(|e| format!("Slack answered HTTP {status} with an unexpected body ({e})"))?;
    if answer.ok {
        Ok(())
    } else {
        Err(answer.error.unwrap_or_else(|| format!("HTTP {status}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "8f742231b10e8888abcd99aaaeee85a5";

    #[test]
    fn slacks_documented_example_verifies() {
        // "Verifying requests from Slack", step by step example (its secret is not hex).
        let secret = "8f742231b10e8888abcd99yyyzzz85a5";
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let signature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        assert_eq!(
            verify(
                secret,
                Some("1531420618"),
                Some(signature),
                body,
                1_531_420_618
            ),
            Ok(())
        );
        assert_eq!(sign(secret, 1_531_420_618, body), signature);
    }

    #[test]
    fn tampering_missing_headers_and_old_timestamps_are_refused() {
        let body = br#"{"type":"event_callback"}"#;
        let now = 1_800_000_000;
        let good = sign(SECRET, now, body);
        let ts = now.to_string();
        assert_eq!(
            verify(SECRET, Some(&ts), Some(&good), body, now + 299),
            Ok(())
        );
        assert_eq!(
            verify(SECRET, Some(&ts), Some(&good), b"{}", now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify("another-secret", Some(&ts), Some(&good), body, now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(SECRET, Some(&ts), Some(&good), body, now + 301),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            verify(SECRET, None, Some(&good), body, now),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            verify(SECRET, Some(&ts), Some("v0=zz"), body, now),
            Err(SignatureError::Mismatch)
        );
    }

    fn event(kind: &str, channel_type: &str, text: &str) -> Event {
        Event {
            kind: kind.into(),
            text: Some(text.into()),
            channel: Some("C1".into()),
            channel_type: Some(channel_type.into()),
            ts: Some("1.0001".into()),
            thread_ts: None,
            bot_id: None,
            subtype: None,
        }
    }

    #[test]
    fn mentions_and_direct_messages_are_questions_and_bots_are_not() {
        let q = event("app_mention", "channel", "<@U0BOT> what is  ownership?")
            .question()
            .unwrap();
        assert_eq!(q.text, "what is ownership?");
        assert_eq!((q.channel.as_str(), q.thread_ts.as_str()), ("C1", "1.0001"));
        assert!(event("message", "im", "hi").question().is_some());
        assert!(event("message", "channel", "chatter").question().is_none());
        let mut from_bot = event("message", "im", "my own reply");
        from_bot.bot_id = Some("B1".into());
        assert!(from_bot.question().is_none());
        let mut edited = event("message", "im", "edit");
        edited.subtype = Some("message_changed".into());
        assert!(edited.question().is_none());
        assert!(event("app_mention", "channel", "<@U0BOT>")
            .question()
            .is_none());
        let mut in_thread = event("app_mention", "channel", "<@U0BOT> more");
        in_thread.thread_ts = Some("0.5".into());
        assert_eq!(in_thread.question().unwrap().thread_ts, "0.5");
    }
}
