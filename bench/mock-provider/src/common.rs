//! What both provider flavours share: reading requests, building replies, counting tokens.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::response::Response;
use serde_json::Value;

use crate::markers::{self, Markers, ScriptedCall};
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

/// What a chat request says of tools, read (and checked) by its flavour.
#[derive(Debug, Default)]
pub(crate) struct ToolContext {
    /// Whether the model may call tools: the request offers some and does not forbid calls
    /// (`tool_choice` none).
    pub may_call: bool,
    /// The contents of the tool results the request ends with (its last round), in order;
    /// `None` when it does not end with tool results.
    pub results: Option<Vec<String>>,
    /// A tool choice that obliges the model to call a tool (OpenAI `"required"` or a named
    /// function; Anthropic `any` or `tool`); `None` when it may answer with text.
    pub forced: Option<Forced>,
}

/// A tool choice that obliges the model to call a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Forced {
    /// The tool called when no marker asks for a call it allows: the named one, or the
    /// first offered.
    pub name: String,
    /// Whether only `name` may be called (a named choice), not any of the tools.
    pub only: bool,
}

/// The answer to one chat request, before it is put in a provider's format.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The model named by the request.
    pub model: String,
    /// The reply chunks (after `max_tokens` truncation); empty when the reply is tool calls.
    pub tokens: Vec<String>,
    /// The tool calls the reply makes instead of text, in order.
    pub calls: Vec<ScriptedCall>,
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
    /// last user message (tool results aside), `max_tokens` the request's output limit if
    /// any, `tools` what the request says of tools.
    pub(crate) fn new(
        shared: &Shared,
        model: String,
        inputs: &[String],
        last_user: &str,
        max_tokens: Option<u64>,
        tools: &ToolContext,
    ) -> Self {
        let (markers, cleaned) = markers::parse(last_user);
        let mut calls: Vec<ScriptedCall> = if tools.may_call {
            // After tool results, only the `call-always` markers call again.
            markers
                .calls
                .iter()
                .filter(|call| call.always || tools.results.is_none())
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        // A forced choice is obeyed as the real APIs do, after tool results too: the calls
        // of other tools are dropped for a named one, and without a call left the forced
        // tool is called with empty arguments.
        if let Some(forced) = tools.forced.as_ref().filter(|_| tools.may_call) {
            if forced.only {
                calls.retain(|call| call.name == forced.name);
            }
            if calls.is_empty() {
                calls.push(ScriptedCall {
                    name: forced.name.clone(),
                    arguments: "{}".to_owned(),
                    always: false,
                });
            }
        }
        let reply = match (&tools.results, markers.tokens, &shared.config.reply) {
            (Some(results), _, _) => format!("Tool results: {}", results.join(" | ")),
            (None, Some(n), _) => (1..=n)
                .map(|i| format!("w{i}"))
                .collect::<Vec<_>>()
                .join(" "),
            (None, None, Some(reply)) => reply.clone(),
            (None, None, None) => format!("Echo: {cleaned}").trim_end().to_owned(),
        };
        let mut tokens = if calls.is_empty() {
            tokenize(&reply)
        } else {
            Vec::new()
        };
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
            calls,
            truncated,
            prompt_tokens,
            markers,
        }
    }

    /// The reply text: the concatenation of the chunks.
    pub(crate) fn text(&self) -> String {
        self.tokens.concat()
    }

    /// Completion tokens: the number of chunks, or for tool calls one per call and one per
    /// fragment of its arguments ([`argument_fragments`]).
    pub(crate) fn completion_tokens(&self) -> u64 {
        if self.calls.is_empty() {
            self.tokens.len() as u64
        } else {
            self.calls
                .iter()
                .map(|call| 1 + argument_fragments(&call.arguments).len() as u64)
                .sum()
        }
    }
}

/// The next number of a tool call id (`call_N`, `toolu_N`), unique within the process.
pub(crate) fn next_call_number() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The fragments a call's arguments are streamed in: pieces of at most 8 characters, and
/// at least two when the text has two characters or more, so that clients must put them
/// back together. Their concatenation is `arguments`.
pub(crate) fn argument_fragments(arguments: &str) -> Vec<&str> {
    let size = arguments.chars().count().div_ceil(2).clamp(1, 8);
    let mut fragments = Vec::new();
    let mut start = 0;
    for (count, (at, _)) in arguments.char_indices().enumerate() {
        if count > 0 && count % size == 0 {
            fragments.push(&arguments[start..at]);
            start = at;
        }
    }
    if start < arguments.len() {
        fragments.push(&arguments[start..]);
    }
    fragments
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
    fn arguments_are_split_into_at_least_two_fragments() {
        assert_eq!(argument_fragments("{}"), ["{", "}"]);
        assert_eq!(argument_fragments(r#"{"a":1}"#), [r#"{"a""#, ":1}"]);
        let long = r#"{"city":"Paris","unit":"C"}"#;
        let fragments = argument_fragments(long);
        assert!(fragments.len() >= 3 && fragments.iter().all(|f| f.chars().count() <= 8));
        assert_eq!(fragments.concat(), long);
        assert_eq!(argument_fragments(r#"{"é":"ü"}"#).concat(), r#"{"é":"ü"}"#);
        assert!(argument_fragments("").is_empty());
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
