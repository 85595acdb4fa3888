//! An agent's conversations as a file (docs/api.md § Export): every message of a period with
//! its thread, role, content, model, tokens, sources, feedback and time, as JSON Lines or
//! CSV, read from the store a page at a time so that memory stays constant for any size.

use bytes::Bytes;
use futures::Stream;
use serde::Serialize;

use super::{ChatError, ChatService};
use crate::{
    ids::{AgentId, UserId},
    store::{ExportCursor, ExportedMessage, StoreError},
    views::iso,
};

/// Messages read from the store at a time.
pub const EXPORT_PAGE: u32 = 500;

/// The file formats of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// JSON Lines (https://jsonlines.org): one JSON object per message and line.
    Jsonl,
    /// CSV (RFC 4180) with a header row.
    Csv,
}

impl ExportFormat {
    /// The format `name` names: `jsonl` or `csv`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "jsonl" => Some(Self::Jsonl),
            "csv" => Some(Self::Csv),
            _ => None,
        }
    }

    /// The file name extension, which is also the format's name.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Jsonl => "jsonl",
            Self::Csv => "csv",
        }
    }

    /// The `Content-Type` of the file.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Jsonl => "application/jsonl; charset=utf-8",
            Self::Csv => "text/csv; charset=utf-8; header=present",
        }
    }
}

/// The CSV columns, in order; a JSON Lines object has the same fields.
pub const CSV_HEADER: [&str; 13] = [
    "threadId",
    "messageId",
    "channel",
    "role",
    "content",
    "model",
    "promptTokens",
    "completionTokens",
    "sources",
    "feedbackRating",
    "feedbackComment",
    "status",
    "createdAt",
];

/// A reply's rating in a JSON Lines record.
#[derive(Serialize)]
struct ExportFeedback<'a> {
    rating: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    comment: Option<&'a str>,
}

/// One message in a JSON Lines export.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExportRecord<'a> {
    thread_id: &'a str,
    message_id: &'a str,
    channel: &'static str,
    role: &'static str,
    content: &'a str,
    model: Option<&'a str>,
    prompt_tokens: Option<i64>,
    completion_tokens: Option<i64>,
    /// The reply's sources as the message list shows them; `null` for none.
    sources: Option<serde_json::Value>,
    feedback: Option<ExportFeedback<'a>>,
    status: &'static str,
    created_at: String,
}

/// A CSV cell a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, tab or carriage
/// return first, OWASP's "CSV Injection") gets a `'` in front; other text is kept as is.
fn csv_text(text: &str) -> std::borrow::Cow<'_, str> {
    match text.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => format!("'{text}").into(),
        _ => text.into(),
    }
}

/// Appends `rows` to `out` in `format`.
fn encode(
    format: ExportFormat,
    rows: &[ExportedMessage],
    out: &mut Vec<u8>,
) -> Result<(), ChatError> {
    let other = |e: &dyn std::fmt::Display| {
        ChatError::Store(StoreError::Other(anyhow::anyhow!("export: {e}")))
    };
    match format {
        ExportFormat::Jsonl => {
            for row in rows {
                let m = &row.message;
                let record = ExportRecord {
                    thread_id: m.thread_id.as_str(),
                    message_id: m.id.as_str(),
                    channel: row.channel.as_str(),
                    role: m.role.as_str(),
                    content: &m.content,
                    model: m.model.as_deref(),
                    prompt_tokens: m.prompt_tokens,
                    completion_tokens: m.completion_tokens,
                    sources: m
                        .sources
                        .as_deref()
                        .and_then(|s| serde_json::from_str(s).ok()),
                    feedback: row
                        .feedback
                        .as_ref()
                        .map(|(rating, comment)| ExportFeedback {
                            rating: rating.as_str(),
                            comment: comment.as_deref(),
                        }),
                    status: m.status.as_str(),
                    created_at: iso(m.created_at),
                };
                serde_json::to_writer(&mut *out, &record).map_err(|e| other(&e))?;
                out.push(b'\n');
            }
        }
        ExportFormat::Csv => {
            let mut writer = csv::Writer::from_writer(&mut *out);
            for row in rows {
                let m = &row.message;
                let number = |n: Option<i64>| n.map(|n| n.to_string()).unwrap_or_default();
                let (rating, comment) = match &row.feedback {
                    Some((rating, comment)) => (rating.as_str(), comment.as_deref().unwrap_or("")),
                    None => ("", ""),
                };
                writer
                    .write_record([
                        m.thread_id.as_str(),
                        m.id.as_str(),
                        row.channel.as_str(),
                        m.role.as_str(),
                        &csv_text(&m.content),
                        m.model.as_deref().unwrap_or(""),
                        &number(m.prompt_tokens),
                        &number(m.completion_tokens),
                        m.sources.as_deref().unwrap_or(""),
                        rating,
                        &csv_text(comment),
                        m.status.as_str(),
                        &iso(m.created_at),
                    ])
                    .map_err(|e| other(&e))?;
            }
            writer.flush().map_err(|e| other(&e))?;
        }
    }
    Ok(())
}

/// Where an export stands between pages.
struct Position {
    after: Option<ExportCursor>,
    started: bool,
    done: bool,
}

impl ChatService {
    /// The file of the messages of the user's agent created in `[from, until)` (either end
    /// open), as a stream of pieces of at most [`EXPORT_PAGE`] messages each: the CSV header
    /// first (also for no messages), then the pages in the order of
    /// [`crate::store::ChatStore::export_messages`]. The agent's ownership is the caller's
    /// to check. Errors: the store's, mid-stream.
    pub fn export(
        &self,
        user_id: UserId,
        agent_id: AgentId,
        range: crate::store::chat::TimeRange,
        format: ExportFormat,
    ) -> impl Stream<Item = Result<Bytes, ChatError>> + Send + 'static {
        let store = self.store.clone();
        let start = Position {
            after: None,
            started: false,
            done: false,
        };
        futures::stream::try_unfold(start, move |mut at| {
            let (store, user_id, agent_id) = (store.clone(), user_id.clone(), agent_id.clone());
            async move {
                if at.done {
                    return Ok(None);
                }
                let rows = store
                    .export_messages(&user_id, &agent_id, range, at.after.as_ref(), EXPORT_PAGE)
                    .await?;
                let mut out = Vec::new();
                if !at.started && format == ExportFormat::Csv {
                    let mut writer = csv::Writer::from_writer(&mut out);
                    writer
                        .write_record(CSV_HEADER)
                        .and_then(|()| writer.flush().map_err(Into::into))
                        .map_err(|e| {
                            ChatError::Store(StoreError::Other(anyhow::anyhow!("export: {e}")))
                        })?;
                }
                at.started = true;
                encode(format, &rows, &mut out)?;
                at.done = rows.len() < EXPORT_PAGE as usize;
                at.after = rows.last().map(|r| ExportCursor {
                    thread_id: r.message.thread_id.clone(),
                    at: r.message.created_at.timestamp_millis(),
                    id: r.message.id.clone(),
                });
                Ok(Some((Bytes::from(out), at)))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formula_cells_are_quoted_and_other_text_kept() {
        for formula in ["=1+1", "+1", "-2", "@SUM(A1)", "\tx", "\rx"] {
            assert_eq!(csv_text(formula), format!("'{formula}"));
        }
        for text in ["Hello", "", "1-2", " =x", "café"] {
            assert_eq!(csv_text(text), text);
        }
    }

    #[test]
    fn formats_are_named_by_their_extension() {
        for format in [ExportFormat::Jsonl, ExportFormat::Csv] {
            assert_eq!(ExportFormat::parse(format.extension()), Some(format));
        }
        assert_eq!(ExportFormat::parse("xlsx"), None);
        assert_eq!(ExportFormat::parse("CSV"), None);
    }
}
