//! Reading the chat stream (`POST /api/agents/{agentId}/chat` with `stream: true`, and its
//! resumption, `GET /api/agents/{agentId}/conversations/{threadId}/stream`) as it arrives
//! through `fetch`: server-sent event framing (WHATWG HTML § 9.2 "Server-sent events",
//! parsing an event stream), the contract's frames (docs/api.md § Events, § Agents, models
//! and chat) and the frame ids that let a cut stream be resumed (docs/api.md § Resumable
//! streams).
//!
//! Pure code without browser types, so it is tested on the host.

use crate::api::{ErrorBody, PendingApproval, Source, TokensUsed};
use serde::Deserialize;

/// One event of a stream: its `id` field and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The value of the event's own `id:` line, if it had one (an event without one does
    /// not repeat the previous event's id here; [`ReplyCursor`] keeps that).
    pub id: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// Splits a byte stream into its events. Bytes may arrive cut anywhere, even inside a
/// UTF-8 character; an event is complete at its blank line.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
}

impl SseParser {
    /// Adds `bytes` and returns every event completed by them, in order. Comments
    /// (`: ping`) and events without data yield nothing; several `data:` lines of one
    /// event are joined with `\n`; an `id` containing NUL is ignored, as the standard
    /// says. Lines end with LF or CRLF.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        // CRLF and LF both end lines; dropping CR turns the first into the second.
        self.buffer
            .extend(bytes.iter().copied().filter(|b| *b != b'\r'));
        let mut out = Vec::new();
        while let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = self.buffer.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&event[..end]);
            let mut data: Option<String> = None;
            let mut id: Option<String> = None;
            for line in text.split('\n') {
                if line.starts_with(':') {
                    continue;
                }
                // A line without a colon is a field name with an empty value.
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "data" => match &mut data {
                        Some(joined) => {
                            joined.push('\n');
                            joined.push_str(value);
                        }
                        None => data = Some(value.to_owned()),
                    },
                    "id" if !value.contains('\0') => id = Some(value.to_owned()),
                    _ => {}
                }
            }
            out.extend(data.map(|data| SseEvent { id, data }));
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

/// The status a reply is stored with when its stream ends with the error frame `body`
/// because it was stopped rather than because it failed: `cancelled` after `POST
/// .../cancel` (`Conflict`, "The reply was cancelled"), `interrupted` when the server
/// generating it shut down (`Service Unavailable`, "The reply was interrupted: ...").
/// `None` for every other error (the reply `failed`).
pub fn stopped_status(body: &ErrorBody) -> Option<&'static str> {
    match body.error.as_str() {
        "Conflict" if body.message == "The reply was cancelled" => Some("cancelled"),
        "Service Unavailable" if body.message.starts_with("The reply was interrupted") => {
            Some("interrupted")
        }
        _ => None,
    }
}

/// How many times a cut stream is resumed in a row without receiving a frame before the
/// dashboard gives up on it.
pub const RESUME_ATTEMPTS: u32 = 5;

/// The wait in milliseconds before resume attempt `attempt` (0 for the first) of a cut
/// stream: 0.5 s, 1 s, 2 s, then 4 s; `None` once [`RESUME_ATTEMPTS`] attempts have been
/// made. An attempt that receives a frame starts the count again.
pub fn resume_delay_ms(attempt: u32) -> Option<i32> {
    (attempt < RESUME_ATTEMPTS).then(|| 500 << attempt.min(3))
}

/// What one event of a reply's stream means to its reader ([`ReplyCursor::step`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A frame to show.
    Frame(StreamFrame),
    /// `[DONE]`: the reply has ended; nothing follows.
    Done,
    /// An error frame without an id: the server ends the stream without `[DONE]` (it is
    /// shutting down, or no longer holds the frames) and the reply is to be resumed from
    /// the last id received. The body says why, for when it cannot be.
    Resume(ErrorBody),
    /// Nothing to show: a frame already received, or data that is none of the contract's
    /// frames.
    Skip,
}

/// How far a reply's stream has been read: the reply (`X-Reply-Id`) and the id of the last
/// frame received, so that resuming it (`GET .../conversations/{threadId}/stream` with
/// `Last-Event-ID`) neither loses nor repeats a frame, whichever connections its frames
/// came through.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplyCursor {
    reply_id: Option<String>,
    last_id: u64,
}

impl ReplyCursor {
    /// The id of the last frame received, 0 before the first: the `Last-Event-ID` of a
    /// resume.
    pub fn last_event_id(&self) -> u64 {
        self.last_id
    }

    /// The reply's message id, once an answer named it.
    pub fn reply_id(&self) -> Option<&str> {
        self.reply_id.as_deref()
    }

    /// Takes the `X-Reply-Id` of an answer: `true` when it streams this cursor's reply (or
    /// either id is unknown; an id not known yet is learnt), `false` when it streams
    /// another reply (the thread has moved on), whose frames must not be joined to these.
    pub fn follows(&mut self, reply_id: Option<&str>) -> bool {
        match (&self.reply_id, reply_id) {
            (Some(known), Some(named)) => known == named,
            (None, Some(named)) => {
                self.reply_id = Some(named.to_owned());
                true
            }
            (_, None) => true,
        }
    }

    /// Reads one event: a frame with an id not above the last one is skipped (it was
    /// received already), a higher id becomes the last one. Events without an id (servers
    /// before resumable streams) are taken as they come, except an error frame, which
    /// asks for a resume.
    pub fn step(&mut self, event: &SseEvent) -> Step {
        let id = event
            .id
            .as_deref()
            .and_then(|id| id.trim().parse::<u64>().ok());
        let frame = match id {
            Some(id) if id <= self.last_id => return Step::Skip,
            Some(id) => {
                self.last_id = id;
                parse_frame(&event.data)
            }
            None => match parse_frame(&event.data) {
                Some(StreamFrame::Error(body)) => return Step::Resume(body),
                other => other,
            },
        };
        match frame {
            Some(StreamFrame::Done) => Step::Done,
            Some(frame) => Step::Frame(frame),
            None => Step::Skip,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            id: id.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    #[test]
    fn events_split_anywhere_are_joined_before_parsing() {
        let stream =
            "id: 1\ndata: {\"chunk\":\"Grüße\"}\n\n: ping\n\nid: 2\ndata: [DONE]\n\n".as_bytes();
        let mut parser = SseParser::default();
        let mut events = Vec::new();
        // One byte at a time cuts the two-byte `ü` and `ß` in half.
        for byte in stream {
            events.extend(parser.push(std::slice::from_ref(byte)));
        }
        assert_eq!(
            events,
            vec![
                event(Some("1"), "{\"chunk\":\"Grüße\"}"),
                event(Some("2"), "[DONE]")
            ]
        );
    }

    #[test]
    fn crlf_lines_and_multi_line_data_are_understood() {
        let mut parser = SseParser::default();
        let events = parser.push(b"id: 7\r\ndata: a\r\ndata: b\r\n\r\ndata: c");
        assert_eq!(events, vec![event(Some("7"), "a\nb")]);
        assert_eq!(parser.push(b"\r\n\r\n"), vec![event(None, "c")]);
    }

    #[test]
    fn ids_are_the_events_own() {
        let mut parser = SseParser::default();
        let events = parser.push(
            b"id: 3\ndata: x\n\ndata: y\n\nid:4\ndata:z\n\nid\ndata\n\nid: a\0b\ndata: w\n\n",
        );
        assert_eq!(
            events,
            vec![
                event(Some("3"), "x"),
                // No id line: no id, not the previous event's.
                event(None, "y"),
                // Without the space after the colon.
                event(Some("4"), "z"),
                // Field names without a colon: empty values.
                event(Some(""), ""),
                // An id with NUL is ignored.
                event(None, "w"),
            ]
        );
        // An id without data dispatches nothing; comments are skipped.
        assert_eq!(parser.push(b"id: 9\n\n: ping\n\n"), vec![]);
    }

    #[test]
    fn a_cursor_joins_the_frames_of_a_stream_and_its_resumption_exactly() {
        let mut cursor = ReplyCursor::default();
        assert_eq!(cursor.last_event_id(), 0);
        assert!(cursor.follows(Some("r1")));
        let mut text = String::new();
        let mut read = |cursor: &mut ReplyCursor, events: &[SseEvent]| {
            let mut done = false;
            for event in events {
                match cursor.step(event) {
                    Step::Frame(StreamFrame::Chunk(chunk)) => text.push_str(&chunk),
                    Step::Done => done = true,
                    _ => {}
                }
            }
            done
        };
        let first = [
            event(Some("1"), r#"{"chunk":"w1 "}"#),
            event(Some("2"), r#"{"chunk":"w2 "}"#),
            event(Some("3"), r#"{"chunk":"w3 "}"#),
        ];
        assert!(!read(&mut cursor, &first));
        assert_eq!(cursor.last_event_id(), 3);
        // The resumption of the same reply repeats nothing it had; frames it sends again
        // are skipped anyway.
        assert!(cursor.follows(Some("r1")));
        let rest = [
            event(Some("3"), r#"{"chunk":"w3 "}"#),
            event(Some("4"), r#"{"chunk":"w4"}"#),
            event(Some("5"), "[DONE]"),
        ];
        assert!(read(&mut cursor, &rest));
        assert_eq!(text, "w1 w2 w3 w4");
        assert_eq!(cursor.last_event_id(), 5);
        // Another reply of the thread is not this one.
        assert!(!cursor.follows(Some("r2")));
        assert!(cursor.follows(None));
        assert_eq!(cursor.reply_id(), Some("r1"));
    }

    #[test]
    fn an_error_frame_without_id_asks_for_a_resume() {
        let mut cursor = ReplyCursor::default();
        assert!(cursor.follows(None));
        assert_eq!(cursor.reply_id(), None);
        assert!(matches!(
            cursor.step(&event(Some("1"), r#"{"chunk":"a"}"#)),
            Step::Frame(StreamFrame::Chunk(_))
        ));
        let shutdown = event(
            None,
            r#"{"error":"Service Unavailable","message":"This server is shutting down: resume the reply"}"#,
        );
        assert_eq!(
            cursor.step(&shutdown),
            Step::Resume(ErrorBody {
                error: "Service Unavailable".into(),
                message: "This server is shutting down: resume the reply".into(),
            })
        );
        assert_eq!(cursor.last_event_id(), 1);
        // With an id, an error frame is the reply's own end.
        let failed = event(
            Some("2"),
            r#"{"error":"Bad Gateway","message":"upstream failed"}"#,
        );
        assert!(matches!(
            cursor.step(&failed),
            Step::Frame(StreamFrame::Error(_))
        ));
        // Frames without ids (older servers) are taken as they come; unknown data is not.
        assert_eq!(
            cursor.step(&event(None, r#"{"chunk":"b"}"#)),
            Step::Frame(StreamFrame::Chunk("b".into()))
        );
        assert_eq!(cursor.step(&event(Some("3"), r#"{"other":1}"#)), Step::Skip);
        assert_eq!(cursor.step(&event(None, "[DONE]")), Step::Done);
        assert_eq!(cursor.last_event_id(), 3);
    }

    #[test]
    fn resumes_back_off_then_give_up() {
        let delays: Vec<Option<i32>> = (0..7).map(resume_delay_ms).collect();
        assert_eq!(
            delays,
            vec![
                Some(500),
                Some(1000),
                Some(2000),
                Some(4000),
                Some(4000),
                None,
                None
            ]
        );
    }

    #[test]
    fn stopped_replies_are_told_from_failed_ones() {
        let body = |error: &str, message: &str| ErrorBody {
            error: error.into(),
            message: message.into(),
        };
        assert_eq!(
            stopped_status(&body("Conflict", "The reply was cancelled")),
            Some("cancelled")
        );
        assert_eq!(
            stopped_status(&body(
                "Service Unavailable",
                "The reply was interrupted: the server generating it shut down. It is stored as interrupted with the text generated so far."
            )),
            Some("interrupted")
        );
        assert_eq!(
            stopped_status(&body(
                "Conflict",
                "A reply is in progress in this conversation"
            )),
            None
        );
        assert_eq!(
            stopped_status(&body("Bad Gateway", "upstream failed")),
            None
        );
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
            r#"{"chunk":"","usage":{"prompt":3,"completion":4,"total":7},"model":"m","ragChunksUsed":1,"threadId":"t","replyId":"r","sources":[{"documentId":"d","title":"Guide","chunkId":"c","score":1.5,"snippet":"s"}]}"#,
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
