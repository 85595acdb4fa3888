//! Reading the chat stream (`POST /api/agents/{agentId}/chat` with `stream: true`) as it
//! arrives through `fetch`: server-sent event framing (WHATWG HTML § 9.2 "Server-sent
//! events", parsing an event stream) and the contract's frames (docs/api.md § Events,
//! § Agents, models and chat).
//!
//! Pure code without browser types, so it is tested on the host.

use crate::api::{ErrorBody, PendingApproval, Source, TokensUsed};
use serde::Deserialize;

/// Splits a byte stream into the `data` payloads of its events. Bytes may arrive cut
/// anywhere, even inside a UTF-8 character; an event is complete at its blank line.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
}

impl SseParser {
    /// Adds `bytes` and returns the data of every event completed by them, in order.
    /// Comments (`: ping`) and events without data yield nothing; several `data:` lines
    /// of one event are joined with `\n`.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        // CRLF and LF both end lines; dropping CR turns the first into the second.
        self.buffer
            .extend(bytes.iter().copied().filter(|b| *b != b'\r'));
        let mut out = Vec::new();
        while let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = self.buffer.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&event[..end]);
            let mut data: Option<String> = None;
            for line in text.split('\n') {
                let Some(value) = line.strip_prefix("data:") else {
                    continue;
                };
                let value = value.strip_prefix(' ').unwrap_or(value);
                match &mut data {
                    Some(joined) => {
                        joined.push('\n');
                        joined.push_str(value);
                    }
                    None => data = Some(value.to_owned()),
                }
            }
            out.extend(data);
        }
        out
    }
}

/// The usage frame sent before `[DONE]` when the request asked for
/// `streamOptions.includeUsage`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamUsage {
    /// Prompt, completion and total tokens of the reply.
    pub usage: TokensUsed,
    /// The model that answered.
    pub model: String,
    /// Knowledge base chunks put into the prompt.
    pub rag_chunks_used: u32,
    /// The thread the reply belongs to.
    pub thread_id: String,
    /// The passages behind the reply's `[n]` markers.
    #[serde(default)]
    pub sources: Vec<Source>,
}

/// A tool call frame, sent when the request asked for `streamOptions.includeToolCalls`
/// (docs/api.md § Chat stream): a call that starts (`status: "running"`, with its
/// arguments) or one that ended (`succeeded`, `failed` or `denied`, with its output, error
/// and duration).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamToolCall {
    /// The model provider's call id: the start and the end of a call share it.
    pub id: String,
    /// The tool's name, as the model called it.
    pub name: String,
    /// The tool's type (`knowledge_search`, `web_fetch`, `http`, `mcp`, `unknown`); may be
    /// empty in a start frame.
    #[serde(rename = "type", default)]
    pub tool_type: String,
    /// The arguments the model gave; in start frames only.
    #[serde(default)]
    pub arguments: Option<serde_json::Value>,
    /// `running`, then `succeeded`, `failed` or `denied`.
    pub status: String,
    /// What the model was given; in end frames only.
    #[serde(default)]
    pub output: String,
    /// Why the call failed.
    #[serde(default)]
    pub error: Option<String>,
    /// How long the call took; in end frames only.
    #[serde(default)]
    pub duration_ms: Option<u64>,
}

/// One frame of the chat stream.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamFrame {
    /// The next fragment of the reply.
    Chunk(String),
    /// Token usage, model and sources of the finished reply.
    Usage(Box<StreamUsage>),
    /// A tool call started or ended.
    ToolCall(Box<StreamToolCall>),
    /// The turn stopped: these calls wait for a person's approval (docs/api.md
    /// § Approvals).
    PendingApprovals(Vec<PendingApproval>),
    /// The reply failed after the stream started.
    Error(ErrorBody),
    /// `[DONE]`: the last frame.
    Done,
}

/// Interprets the data of one event; `None` for data that is none of the contract's
/// frames (ignored, so that additive fields or frames do not break the dashboard).
pub fn parse_frame(data: &str) -> Option<StreamFrame> {
    if data.trim() == "[DONE]" {
        return Some(StreamFrame::Done);
    }
    let value: serde_json::Value = serde_json::from_str(data).ok()?;
    if value.get("error").is_some() {
        return serde_json::from_value(value).ok().map(StreamFrame::Error);
    }
    if let Some(call) = value.get("toolCall") {
        return serde_json::from_value(call.clone())
            .ok()
            .map(|call| StreamFrame::ToolCall(Box::new(call)));
    }
    if let Some(list) = value.get("pendingApprovals") {
        return serde_json::from_value(list.clone())
            .ok()
            .map(StreamFrame::PendingApprovals);
    }
    if value.get("usage").is_some() {
        return serde_json::from_value(value)
            .ok()
            .map(|usage| StreamFrame::Usage(Box::new(usage)));
    }
    value
        .get("chunk")
        .and_then(|chunk| chunk.as_str())
        .map(|chunk| StreamFrame::Chunk(chunk.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_anywhere_are_joined_before_parsing() {
        let stream = "data: {\"chunk\":\"Grüße\"}\n\n: ping\n\ndata: [DONE]\n\n".as_bytes();
        let mut parser = SseParser::default();
        let mut payloads = Vec::new();
        // One byte at a time cuts the two-byte `ü` and `ß` in half.
        for byte in stream {
            payloads.extend(parser.push(std::slice::from_ref(byte)));
        }
        assert_eq!(payloads, vec!["{\"chunk\":\"Grüße\"}", "[DONE]"]);
    }

    #[test]
    fn crlf_lines_and_multi_line_data_are_understood() {
        let mut parser = SseParser::default();
        let payloads = parser.push(b"data: a\r\ndata: b\r\n\r\ndata: c");
        assert_eq!(payloads, vec!["a\nb"]);
        assert_eq!(parser.push(b"\n\n"), vec!["c"]);
    }

    #[test]
    fn frames_of_the_contract_are_recognised() {
        assert_eq!(
            parse_frame(r#"{"chunk":"Hello"}"#),
            Some(StreamFrame::Chunk("Hello".into()))
        );
        assert_eq!(parse_frame("[DONE]"), Some(StreamFrame::Done));
        assert_eq!(
            parse_frame(r#"{"error":"Bad Gateway","message":"upstream failed"}"#),
            Some(StreamFrame::Error(ErrorBody {
                error: "Bad Gateway".into(),
                message: "upstream failed".into()
            }))
        );
        let usage = parse_frame(
            r#"{"chunk":"","usage":{"prompt":3,"completion":4,"total":7},"model":"m","ragChunksUsed":1,"threadId":"t","sources":[{"documentId":"d","title":"Guide","chunkId":"c","score":1.5,"snippet":"s"}]}"#,
        );
        let Some(StreamFrame::Usage(usage)) = usage else {
            panic!("usage frame expected, got {usage:?}");
        };
        assert_eq!(usage.usage.total, 7);
        assert_eq!(usage.thread_id, "t");
        assert_eq!(usage.sources[0].title, "Guide");
        assert_eq!(parse_frame("not json"), None);
    }

    #[test]
    fn tool_call_and_approval_frames_are_recognised() {
        let started = parse_frame(
            r#"{"chunk":"","toolCall":{"id":"call_1","name":"lookup","type":"http","arguments":{"q":"x"},"status":"running"}}"#,
        );
        let Some(StreamFrame::ToolCall(call)) = started else {
            panic!("tool call frame expected, got {started:?}");
        };
        assert_eq!(call.status, "running");
        assert_eq!(call.arguments, Some(serde_json::json!({"q": "x"})));
        assert_eq!(call.duration_ms, None);
        let ended = parse_frame(
            r#"{"chunk":"","toolCall":{"id":"call_1","name":"lookup","type":"http","status":"failed","output":"","error":"HTTP 500","durationMs":12}}"#,
        );
        let Some(StreamFrame::ToolCall(call)) = ended else {
            panic!("tool call frame expected, got {ended:?}");
        };
        assert_eq!(call.error.as_deref(), Some("HTTP 500"));
        assert_eq!(call.duration_ms, Some(12));
        assert_eq!(
            parse_frame(
                r#"{"chunk":"","pendingApprovals":[{"toolCallId":"call_2","name":"refund","arguments":{"order":7}}]}"#
            ),
            Some(StreamFrame::PendingApprovals(vec![PendingApproval {
                tool_call_id: "call_2".into(),
                name: "refund".into(),
                arguments: serde_json::json!({"order": 7}),
            }]))
        );
    }
}
