//! Plain-text extraction: UTF-8 (or UTF-16 with a byte-order mark) text as one section,
//! cut at paragraph breaks when longer than [`TEXT_SECTION_BYTES`]. The title is the first
//! non-empty line when it is short.

use std::borrow::Cow;

use super::detect::decode_text;
use super::sink::{first_line_title, SectionSink};
use super::ExtractError;

/// Plain text longer than this (bytes) is cut into sections at paragraph breaks so that no
/// single section is unboundedly large; chunking works within a section.
pub const TEXT_SECTION_BYTES: usize = 256 * 1024;

/// Reads plain text: the title is the first non-empty line when short; the text is one
/// section unless longer than [`TEXT_SECTION_BYTES`], when it is cut at paragraph breaks.
pub(super) fn extract_text(
    bytes: &[u8],
    out: &mut SectionSink<'_>,
) -> Result<Option<String>, ExtractError> {
    let text = decode_text(bytes).map_err(|what| ExtractError::Unsupported(what.to_owned()))?;
    out.deadline.check()?;
    out.check_chars(text.chars().count())?;
    let text = if text.contains('\r') {
        Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        text
    };
    for piece in split_paragraph_groups(&text, TEXT_SECTION_BYTES) {
        out.push(&[], piece, None)?;
    }
    Ok(first_line_title(&text))
}

/// Cuts `text` into pieces of at most `max_bytes`, at the last paragraph break (blank
/// line) within the limit, else the last line break, else the last character boundary.
fn split_paragraph_groups(text: &str, max_bytes: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while rest.len() > max_bytes {
        let mut end = max_bytes;
        while end > 0 && !rest.is_char_boundary(end) {
            end -= 1;
        }
        let window = &rest[..end];
        let cut = window
            .rfind("\n\n")
            .map(|i| i + 2)
            .or_else(|| window.rfind('\n').map(|i| i + 1))
            .filter(|&i| i > 0)
            .unwrap_or(if end > 0 { end } else { rest.len() });
        pieces.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    pieces.push(rest);
    pieces
}

#[cfg(test)]
mod tests {
    use super::super::tests::{fixture, run};
    use super::super::{detect, DocumentKind};
    use super::*;

    #[test]
    fn text_title_is_its_first_short_line() {
        let doc = run(&fixture("Apache-2.0.txt"), DocumentKind::Text).unwrap();
        assert_eq!(doc.title.as_deref(), Some("Apache License"));
        assert_eq!(doc.sections.len(), 1);
        assert!(doc.sections[0].heading_path.is_empty());
        assert_eq!(doc.sections[0].page, None);
        assert!(doc.sections[0]
            .text
            .contains("TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION"));

        let long_first_line = format!("{}\n\nbody", "word ".repeat(30));
        let doc = run(long_first_line.as_bytes(), DocumentKind::Text).unwrap();
        assert_eq!(doc.title, None);
        let crlf = run(
            b"Title line\r\n\r\nBody one\r\nBody two\r\n",
            DocumentKind::Text,
        )
        .unwrap();
        assert_eq!(crlf.title.as_deref(), Some("Title line"));
        assert_eq!(crlf.sections[0].text, "Title line\n\nBody one\nBody two");
    }

    #[test]
    fn blank_text_has_no_text() {
        assert_eq!(detect(b" \n\t\n"), Ok(DocumentKind::Text));
        assert_eq!(
            run(b" \n\t\n", DocumentKind::Text),
            Err(ExtractError::NoText)
        );
        assert_eq!(run(b"", DocumentKind::Text), Err(ExtractError::Empty));
    }

    #[test]
    fn long_text_is_cut_into_sections_at_paragraph_breaks() {
        let paragraph = ["Sentence number one of a long paragraph."; 40].join(" ");
        let text = (0..400)
            .map(|i| format!("{i}: {paragraph}"))
            .collect::<Vec<_>>()
            .join("\n\n");
        assert!(text.len() > 2 * TEXT_SECTION_BYTES);
        let doc = run(text.as_bytes(), DocumentKind::Text).unwrap();
        assert!(doc.sections.len() >= 3);
        for section in &doc.sections {
            assert!(section.text.len() <= TEXT_SECTION_BYTES);
            assert!(
                section.text.ends_with(paragraph.trim_end()),
                "cut inside a paragraph"
            );
        }
        let joined: Vec<&str> = doc.sections.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(joined.join("\n\n"), text);
    }

    #[test]
    fn paragraph_groups_fall_back_to_lines_and_characters() {
        assert_eq!(
            split_paragraph_groups("aa\nbb\ncc", 6),
            vec!["aa\nbb\n", "cc"]
        );
        assert_eq!(split_paragraph_groups("ééé", 3), vec!["é", "é", "é"]);
        assert_eq!(split_paragraph_groups("short", 100), vec!["short"]);
    }
}
