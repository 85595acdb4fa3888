//! What both provider flavours share: reading requests, building replies, counting tokens.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::response::Response;
use serde_json::Value;

use crate::markers::{self, Markers};
use crate::server::Shared;
use crate::stream::{drop_connection, ConnectionKiller};

/// The text of a message `content` (or an Anthropic `system` field): a string, or an array of
/// blocks whose `text` (or nested `content`, as in tool results) is collected.
pub(crate) fn text_of(value: &Value) -> String {
    let mut out = String::new();
    collect_text(value, &mut out);
    out
}

fn collect_text(value: &Value, out: &mut String) {
    match value {
        Value::String(text) => push_part(out, text),
        Value::Array(items) => items.iter().for_each(|item| collect_text(item, out)),
        Value::Object(block) => {
            if let Some(Value::String(text)) = block.get("text") {
                push_part(out, text);
            } else if let Some(content) = block.get("content") {
                collect_text(content, out);
            }
        }
        _ => {}
    }
}

fn push_part(out: &mut String, text: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(text);
}

/// The number of whitespace-separated words of `text`.
pub(crate) fn word_count(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// Splits `text` into chunks that each start with the whitespace before a word, so that their
/// concatenation is exactly `text`: `"Echo: hi you"` gives `"Echo:"`, `" hi"`, `" you"`.
pub(crate) fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    for ch in text.chars() {
        let space = ch.is_whitespace();
        if space && in_word {
            tokens.push(std::mem::take(&mut current));
        }
        in_word = !space;
        current.push(ch);
    }
    if !current.is_empty() {
        match tokens.last_mut() {
            // Trailing whitespace belongs to the last word.
            Some(last) if !current.chars().any(|ch| !ch.is_whitespace()) => last.push_str(&current),
            _ => tokens.push(current),
        }
    }
    tokens
}

/// The answer to one chat request, before it is put in a provider's format.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The model named by the request.
    pub model: String,
    /// The reply chunks (after `max_tokens` truncation).
    pub tokens: Vec<String>,
    /// Whether `max_tokens` truncated the reply.
    pub truncated: bool,
    /// Prompt tokens: words across all input messages.
    pub prompt_tokens: u64,
    /// The markers of the last user message.
    pub markers: Markers,
}

impl Plan {
    /// Builds the plan of a request.
    ///
    /// `inputs` are every input text (system prompt and messages), `last_user` the text of the
    /// last user message, `max_tokens` the request's output limit if any.
    pub(crate) fn new(
        shared: &Shared,
        model: String,
        inputs: &[String],
        last_user: &str,
        max_tokens: Option<u64>,
    ) -> Self {
        let (markers, cleaned) = markers::parse(last_user);
        let reply = match (markers.tokens, &shared.config.reply) {
            (Some(n), _) => (1..=n)
                .map(|i| format!("w{i}"))
                .collect::<Vec<_>>()
                .join(" "),
            (None, Some(reply)) => reply.clone(),
            (None, None) => format!("Echo: {cleaned}").trim_end().to_owned(),
        };
        let mut tokens = tokenize(&reply);
        let mut truncated = false;
        if let Some(limit) = max_tokens.and_then(|limit| usize::try_from(limit).ok()) {
            if tokens.len() > limit {
                tokens.truncate(limit);
                truncated = true;
            }
        }
        let prompt_tokens = inputs.iter().map(|text| word_count(text)).sum();
        Self {
            model,
            tokens,
            truncated,
            prompt_tokens,
            markers,
        }
    }

    /// The reply text: the concatenation of the chunks.
    pub(crate) fn text(&self) -> String {
        self.tokens.concat()
    }

    /// Completion tokens: the number of chunks.
    pub(crate) fn completion_tokens(&self) -> u64 {
        self.tokens.len() as u64
    }
}

/// What happens before a chat request is answered: the `delay` marker is waited, then a
/// `status` marker may fail the request and a `cut` marker may drop a non-streamed one.
///
/// Returns the answer to give instead of the normal one, if any.
pub(crate) async fn preflight(
    shared: &Shared,
    plan: &Plan,
    stream: bool,
    killer: Option<ConnectionKiller>,
    status_error: fn(u16) -> Response,
) -> Option<Response> {
    if let Some(delay) = plan.markers.delay {
        tokio::time::sleep(delay).await;
    }
    if let Some(status) = &plan.markers.status {
        if shared.status_fails(status) {
            return Some(status_error(status.code));
        }
    }
    if plan.markers.cut.is_some() && !stream {
        return Some(drop_connection(killer).await);
    }
    None
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

/// Reads an optional non-negative integer field of a request.
pub(crate) fn optional_u64(body: &Value, field: &str) -> Option<u64> {
    body.get(field).and_then(Value::as_u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tokenize_keeps_all_text() {
        for text in [
            "Echo: hello world",
            "  lead",
            "trail  ",
            "a\n\nb c",
            "",
            "   ",
            "one",
        ] {
            assert_eq!(tokenize(text).concat(), text, "{text:?}");
        }
        assert_eq!(
            tokenize("Echo: hello  world"),
            ["Echo:", " hello", "  world"]
        );
        assert_eq!(tokenize("trail  "), ["trail  "]);
        assert!(tokenize("").is_empty());
    }

    #[test]
    fn text_of_reads_strings_and_blocks() {
        assert_eq!(text_of(&json!("hi")), "hi");
        assert_eq!(
            text_of(
                &json!([{"type": "text", "text": "a b"}, {"type": "image_url"}, {"type": "text", "text": "c"}])
            ),
            "a b\nc"
        );
        assert_eq!(
            text_of(
                &json!([{"type": "tool_result", "tool_use_id": "x", "content": [{"type": "text", "text": "r"}]}])
            ),
            "r"
        );
        assert_eq!(text_of(&json!(null)), "");
        assert_eq!(text_of(&json!(42)), "");
    }
}
