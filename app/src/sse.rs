//! Reading the chat stream (`POST /api/agents/{agentId}/chat` with `stream: true`) as it
//! arrives through `fetch`: server-sent event framing (WHATWG HTML § 9.2 "Server-sent
//! events", parsing an event stream) and the contract's frames (docs/api.md § Events,
//! § Agents, models and chat).
//!
//! Pure code without browser types, so it is tested on the host.

use crate::api::{ErrorBody, Source, TokensUsed};
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

/// One frame of the chat stream.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamFrame {
    /// The next fragment of the reply.
    Chunk(String),
    /// Token usage, model and sources of the finished reply.
    Usage(Box<StreamUsage>),
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
}
