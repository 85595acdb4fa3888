//! What goes upstream for a chat turn: attachment text, the length rule, passages within a
//! token budget, and earlier turns trimmed oldest-first.

use app::api::Source;
use base64::{engine::general_purpose::STANDARD, Engine};

use super::ChatError;
use crate::{
    llm::{tokens, Passage, Role, Turn},
    store::documents::ChunkHit,
};

/// A file sent with a message, as the caller gives it; read by [`attachments_text`].
#[derive(Debug, Clone)]
pub struct Attachment {
    pub filename: String,
    /// e.g. `text/plain` or `text/markdown`.
    pub content_type: String,
    /// The file's bytes, base64 (standard alphabet).
    pub data: String,
}

/// Largest total size of one message's attachments (10 MiB; docs/api.md § Send message).
pub const MAX_ATTACHMENTS_BYTES: usize = 10 * 1024 * 1024;
/// Longest snippet of a source in the chat reply, in characters.
pub const SNIPPET_CHARS: usize = 240;
/// Tokens a passage costs in the prompt besides its text (marker, title, source).
pub const PASSAGE_OVERHEAD: u32 = 16;
/// Tokens an earlier turn costs in the prompt besides its text (role, separators).
pub const TURN_OVERHEAD: u32 = 4;

/// The attachments' text as the prompt carries it (each after `--- Attachment: name ---`)
/// and their own character count; text and Markdown only (UTF-8).
///
/// Errors: [`ChatError::AttachmentNotBase64`], [`ChatError::AttachmentsTooLarge`] (over
/// [`MAX_ATTACHMENTS_BYTES`] decoded), [`ChatError::AttachmentType`],
/// [`ChatError::AttachmentNotUtf8`].
pub fn attachments_text(attachments: &[Attachment]) -> Result<(String, usize), ChatError> {
    let mut total = 0usize;
    let mut chars = 0usize;
    let mut out = String::new();
    for a in attachments {
        let bytes = STANDARD
            .decode(a.data.trim())
            .map_err(|_| ChatError::AttachmentNotBase64 {
                filename: a.filename.clone(),
            })?;
        total += bytes.len();
        if total > MAX_ATTACHMENTS_BYTES {
            return Err(ChatError::AttachmentsTooLarge);
        }
        let kind = a
            .content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let textual = kind.starts_with("text/")
            || kind == "application/json"
            || kind == "application/x-markdown";
        if !textual {
            return Err(ChatError::AttachmentType {
                filename: a.filename.clone(),
                content_type: a.content_type.clone(),
            });
        }
        let text = String::from_utf8(bytes).map_err(|_| ChatError::AttachmentNotUtf8 {
            filename: a.filename.clone(),
        })?;
        chars += text.chars().count();
        out.push_str(&format!("\n\n--- Attachment: {} ---\n{}", a.filename, text));
    }
    Ok((out, chars))
}

/// The message and its attachments' text together have at most `max` characters
/// (`MAX_MESSAGE_CHARS`). Errors: [`ChatError::TooLong`] with the limit and the length.
pub fn check_length(message: &str, attachment_chars: usize, max: usize) -> Result<(), ChatError> {
    let total = message.chars().count() + attachment_chars;
    if total > max {
        return Err(ChatError::TooLong {
            max,
            total,
            with_attachments: attachment_chars > 0,
        });
    }
    Ok(())
}

/// Prompt passages (`[1]`, `[2]`, ...) from `hits`, best first, within `budget` tokens; the
/// reply's sources (score to 3 decimals, [`SNIPPET_CHARS`] snippet); and the tokens used.
pub fn passages(hits: Vec<ChunkHit>, budget: u32) -> (Vec<Passage>, Vec<Source>, u32) {
    let mut passages = Vec::new();
    let mut sources = Vec::new();
    let mut used = 0u32;
    for hit in hits {
        let cost = tokens::count(&hit.text) + PASSAGE_OVERHEAD;
        if used + cost > budget {
            break;
        }
        used += cost;
        let title = if hit.heading_path.is_empty() {
            hit.title.clone()
        } else {
            format!("{} — {}", hit.title, hit.heading_path)
        };
        passages.push(Passage {
            marker: format!("[{}]", passages.len() + 1),
            title,
            url: hit.url.clone(),
            text: hit.text.clone(),
        });
        let mut snippet: String = hit.text.chars().take(SNIPPET_CHARS).collect();
        if snippet.len() < hit.text.len() {
            snippet.push('…');
        }
        sources.push(Source {
            document_id: hit.document_id.into_string(),
            title: hit.title,
            url: hit.url,
            chunk_id: hit.chunk_id.to_string(),
            score: (hit.score * 1000.0).round() / 1000.0,
            snippet,
        });
    }
    (passages, sources, used)
}

/// Earlier turns that fit in `budget` tokens, oldest dropped first, and the kept turns'
/// text tokens.
pub fn trim_history(history: Vec<Turn>, budget: u32) -> (Vec<Turn>, u32) {
    let mut used = 0u32;
    // The kept turns, newest first, and the tokens of each one's text.
    let mut kept: Vec<Turn> = Vec::new();
    let mut texts: Vec<u32> = Vec::new();
    for turn in history.into_iter().rev() {
        let text = tokens::count(&turn.content)
            + turn
                .tool_calls
                .iter()
                .map(|e| tokens::count(&e.call.arguments) + tokens::count(&e.result))
                .sum::<u32>();
        let cost = text + TURN_OVERHEAD;
        if used + cost > budget {
            break;
        }
        used += cost;
        kept.push(turn);
        texts.push(text);
    }
    // A conversation sent upstream starts with the user: the oldest kept turns that are
    // assistant replies go.
    let starts = kept
        .iter()
        .rposition(|t| t.role == Role::User)
        .map_or(0, |i| i + 1);
    kept.truncate(starts);
    kept.reverse();
    (kept, texts[..starts].iter().sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(role: Role, content: &str) -> Turn {
        Turn::text(role, content)
    }

    #[test]
    fn history_is_trimmed_oldest_first_and_starts_with_the_user() {
        let history = vec![
            turn(Role::User, &"old ".repeat(500)),
            turn(Role::Assistant, "reply one"),
            turn(Role::User, "second question"),
            turn(Role::Assistant, "second reply"),
        ];
        let (kept, text) = trim_history(history.clone(), 40);
        assert_eq!(
            kept.iter().map(|t| t.content.as_str()).collect::<Vec<_>>(),
            ["second question", "second reply"]
        );
        assert_eq!(
            text,
            tokens::count("second question") + tokens::count("second reply")
        );
        let (all, text) = trim_history(history.clone(), 100_000);
        assert_eq!(all.len(), 4);
        assert_eq!(
            text,
            history
                .iter()
                .map(|t| tokens::count(&t.content))
                .sum::<u32>()
        );
        // Trimmed to start with the user: the dropped reply's tokens are not counted.
        let (kept, text) = trim_history(history[1..].to_vec(), 100_000);
        assert_eq!(kept.len(), 2);
        assert_eq!(
            text,
            history[2..]
                .iter()
                .map(|t| tokens::count(&t.content))
                .sum::<u32>()
        );
        let (kept, text) = trim_history(history, 0);
        assert!(kept.is_empty());
        assert_eq!(text, 0);
    }

    #[test]
    fn attachments_must_be_text() {
        let text = Attachment {
            filename: "a.md".into(),
            content_type: "text/markdown".into(),
            data: STANDARD.encode("# Hi"),
        };
        let (text, chars) = attachments_text(&[text]).unwrap();
        assert!(text.contains("# Hi"));
        assert_eq!(chars, 4);
        let pdf = Attachment {
            filename: "a.pdf".into(),
            content_type: "application/pdf".into(),
            data: STANDARD.encode("%PDF"),
        };
        assert!(matches!(
            attachments_text(&[pdf]),
            Err(ChatError::AttachmentType { .. })
        ));
        let bad = Attachment {
            filename: "a.txt".into(),
            content_type: "text/plain".into(),
            data: "***".into(),
        };
        assert!(matches!(
            attachments_text(&[bad]),
            Err(ChatError::AttachmentNotBase64 { .. })
        ));
    }
}
