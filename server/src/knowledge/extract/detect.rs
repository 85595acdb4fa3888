//! Content detection: what an upload is, from its bytes alone (never its name or declared
//! type). Files often uploaded by mistake are named by their signature so the refusal says
//! what the file is.

use std::borrow::Cow;
use std::io::Cursor;

use zip::ZipArchive;

use super::{guarded, DocumentKind, ExtractError};

/// How far into a file [`detect`] looks for `%PDF-`; Acrobat looks within the first 1024 bytes
/// (PDF 1.7 reference, implementation note 13).
pub const PDF_HEADER_WINDOW: usize = 1024;

/// How far from the end `%%EOF` must start (ISO 32000-1 §7.5.5; Acrobat looks within the
/// last 1024 bytes, PDF 1.7 reference, implementation note 18).
pub const PDF_EOF_WINDOW: usize = 1024;

/// Text may hold at most this many control characters (besides tab, LF, CR, FF) per 200.
const MAX_CONTROL_CHARS_PER_200: usize = 1;

const MARKDOWN_SNIFF_BYTES: usize = 64 * 1024;

/// Decides what `bytes` are from their content alone:
/// - PDF: `%PDF-` at offset 0, or within [`PDF_HEADER_WINDOW`] when the file ends with `%%EOF`.
/// - DOCX: a ZIP whose central directory lists `[Content_Types].xml` and `word/document.xml`
///   (ECMA-376); other ZIP formats are unsupported.
/// - Text: UTF-8 (BOM dropped) or UTF-16 with a BOM, no NUL, few control characters;
///   Markdown or plain by [`looks_like_markdown`].
///
/// # Errors
/// [`ExtractError::Empty`]; [`ExtractError::Unsupported`] naming what the file looks like;
/// [`ExtractError::Malformed`] for a Word document whose ZIP structure is broken.
pub fn detect(bytes: &[u8]) -> Result<DocumentKind, ExtractError> {
    if bytes.is_empty() {
        return Err(ExtractError::Empty);
    }
    if is_pdf(bytes) {
        return Ok(DocumentKind::Pdf);
    }
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        return guarded(|| detect_zip(bytes));
    }
    if let Some(what) = binary_signature(bytes) {
        return Err(ExtractError::Unsupported(what.to_owned()));
    }
    match decode_text(bytes) {
        Ok(text) if looks_like_markdown(&text) => Ok(DocumentKind::Markdown),
        Ok(_) => Ok(DocumentKind::Text),
        Err(what) => Err(ExtractError::Unsupported(what.to_owned())),
    }
}

/// Offset of the `%PDF-` header within the first [`PDF_HEADER_WINDOW`] bytes.
pub(super) fn pdf_header_offset(bytes: &[u8]) -> Option<usize> {
    let window = &bytes[..bytes.len().min(PDF_HEADER_WINDOW + 5)];
    find(window, b"%PDF-")
}

/// Whether a `%%EOF` marker starts within the last [`PDF_EOF_WINDOW`] bytes.
pub(super) fn has_pdf_eof_marker(bytes: &[u8]) -> bool {
    let tail = &bytes[bytes.len().saturating_sub(PDF_EOF_WINDOW)..];
    find(tail, b"%%EOF").is_some()
}

fn is_pdf(bytes: &[u8]) -> bool {
    match pdf_header_offset(bytes) {
        Some(0) => true,
        Some(_) => has_pdf_eof_marker(bytes),
        None => false,
    }
}

pub(super) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn detect_zip(bytes: &[u8]) -> Result<DocumentKind, ExtractError> {
    let archive = match ZipArchive::new(Cursor::new(bytes)) {
        Ok(archive) => archive,
        Err(err) => {
            // The central directory is at the end; a cut-off Word document still starts
            // with its own parts, so its first local header names one.
            let first_name = first_local_entry_name(bytes).unwrap_or_default();
            return if first_name == b"[Content_Types].xml" || first_name.starts_with(b"word/") {
                Err(ExtractError::malformed(DocumentKind::Docx, err))
            } else {
                Err(ExtractError::Unsupported("a ZIP archive".to_owned()))
            };
        }
    };
    let has = |name: &str| archive.index_for_name(name).is_some();
    if has("word/document.xml") && has("[Content_Types].xml") {
        return Ok(DocumentKind::Docx);
    }
    let what = if has("xl/workbook.xml") {
        "a spreadsheet (.xlsx)"
    } else if has("ppt/presentation.xml") {
        "a presentation (.pptx)"
    } else if has("META-INF/container.xml") && has("mimetype") {
        "an e-book (EPUB)"
    } else if has("content.xml") && has("mimetype") {
        "an OpenDocument file (.odt, .ods or .odp)"
    } else if has("META-INF/MANIFEST.MF") || has("AndroidManifest.xml") {
        "a program archive (.jar or .apk)"
    } else {
        "a ZIP archive"
    };
    Err(ExtractError::Unsupported(what.to_owned()))
}

/// The file name in the ZIP local file header at offset 0 (APPNOTE 4.3.7).
fn first_local_entry_name(bytes: &[u8]) -> Option<&[u8]> {
    let len = u16::from_le_bytes([*bytes.get(26)?, *bytes.get(27)?]) as usize;
    bytes.get(30..30 + len)
}

/// What a binary file looks like from its magic number; ASCII signatures (`MZ`, `BM`,
/// `BZh`) count only once the bytes failed to decode as text.
fn binary_signature(bytes: &[u8]) -> Option<&'static str> {
    const EXECUTABLE: &str = "an executable program";
    let strong: &[(&[u8], &str)] = &[
        (b"\x7fELF", EXECUTABLE),
        (b"\xfe\xed\xfa\xce", EXECUTABLE),
        (b"\xfe\xed\xfa\xcf", EXECUTABLE),
        (b"\xce\xfa\xed\xfe", EXECUTABLE),
        (b"\xcf\xfa\xed\xfe", EXECUTABLE),
        (b"\xca\xfe\xba\xbe", EXECUTABLE),
        (b"\0asm", EXECUTABLE),
        (b"\x89PNG\r\n\x1a\n", "an image (PNG)"),
        (b"\xff\xd8\xff", "an image (JPEG)"),
        (b"GIF87a", "an image (GIF)"),
        (b"GIF89a", "an image (GIF)"),
        (b"II*\0", "an image (TIFF)"),
        (b"MM\0*", "an image (TIFF)"),
        (b"\0\0\x01\0", "an image (icon)"),
        (b"\x1f\x8b", "a compressed file (gzip)"),
        (b"\xfd7zXZ\0", "a compressed file (xz)"),
        (b"\x28\xb5\x2f\xfd", "a compressed file (zstd)"),
        (b"7z\xbc\xaf\x27\x1c", "a compressed archive (7z)"),
        (b"Rar!\x1a\x07", "a compressed archive (RAR)"),
        (
            b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
            "an older Microsoft Office file (.doc, .xls or .ppt)",
        ),
        (b"SQLite format 3\0", "a database file"),
        (b"{\\rtf", "a Rich Text Format (RTF) document"),
        (b"%!PS", "a PostScript file"),
        (b"OggS", "an audio or video file"),
        (b"fLaC", "an audio file"),
        (b"ID3", "an audio file"),
        (b"\x1a\x45\xdf\xa3", "a video file"),
    ];
    if let Some((_, what)) = strong.iter().find(|(magic, _)| bytes.starts_with(magic)) {
        return Some(what);
    }
    if bytes.len() >= 12 && &bytes[..4] == b"RIFF" {
        return Some(match &bytes[8..12] {
            b"WEBP" => "an image (WebP)",
            b"WAVE" => "an audio file",
            b"AVI " => "a video file",
            _ => "a media file",
        });
    }
    if bytes.len() >= 12 && &bytes[4..8] == b"ftyp" {
        return Some(match &bytes[8..12] {
            b"heic" | b"heix" | b"mif1" | b"avif" => "an image (HEIC or AVIF)",
            _ => "an audio or video file",
        });
    }
    if bytes.len() > 262 && &bytes[257..262] == b"ustar" {
        return Some("an archive (tar)");
    }
    None
}

fn weak_binary_signature(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"MZ") {
        Some("an executable program")
    } else if bytes.starts_with(b"BM") {
        Some("an image (BMP)")
    } else if bytes.starts_with(b"BZh") {
        Some("a compressed file (bzip2)")
    } else {
        None
    }
}

/// Decodes `bytes` as text (UTF-8, BOM dropped, or UTF-16 with a BOM), with no NUL and at
/// most one other control character in 200; on failure, what the bytes look like instead.
pub(super) fn decode_text(bytes: &[u8]) -> Result<Cow<'_, str>, &'static str> {
    const UNKNOWN: &str = "a binary file of unknown type";
    let text: Cow<'_, str> = if let Some(rest) = bytes.strip_prefix(b"\xef\xbb\xbf") {
        Cow::Borrowed(std::str::from_utf8(rest).map_err(|_| not_utf8(bytes))?)
    } else if let Some(rest) = bytes.strip_prefix(b"\xff\xfe") {
        Cow::Owned(decode_utf16(rest, u16::from_le_bytes).ok_or(UNKNOWN)?)
    } else if let Some(rest) = bytes.strip_prefix(b"\xfe\xff") {
        Cow::Owned(decode_utf16(rest, u16::from_be_bytes).ok_or(UNKNOWN)?)
    } else {
        Cow::Borrowed(std::str::from_utf8(bytes).map_err(|_| not_utf8(bytes))?)
    };
    let mut chars = 0usize;
    let mut controls = 0usize;
    for c in text.chars() {
        chars += 1;
        if c == '\0' {
            return Err(weak_binary_signature(bytes).unwrap_or(UNKNOWN));
        }
        if c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\x0c') {
            controls += 1;
        }
    }
    if controls * 200 > chars * MAX_CONTROL_CHARS_PER_200 {
        return Err(weak_binary_signature(bytes).unwrap_or(UNKNOWN));
    }
    Ok(text)
}

/// What non-UTF-8 bytes look like: legacy 8-bit text (no NUL, ≥ 80 % printable ASCII) or binary.
fn not_utf8(bytes: &[u8]) -> &'static str {
    if let Some(what) = weak_binary_signature(bytes) {
        return what;
    }
    let sample = &bytes[..bytes.len().min(64 * 1024)];
    let texty = sample
        .iter()
        .filter(|&&b| b == b'\t' || b == b'\n' || b == b'\r' || (0x20..0x7f).contains(&b))
        .count();
    if !sample.contains(&0) && texty * 10 >= sample.len() * 8 {
        "text in an encoding other than UTF-8"
    } else {
        "a binary file of unknown type"
    }
}

fn decode_utf16(bytes: &[u8], unit: fn([u8; 2]) -> u16) -> Option<String> {
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    let units = bytes.chunks_exact(2).map(|pair| unit([pair[0], pair[1]]));
    char::decode_utf16(units)
        .collect::<Result<String, _>>()
        .ok()
}

/// Whether `text` reads as Markdown, scoring its first 64 KiB: strong signs (headings, setext,
/// fences, links, table delimiters) 2 points, weak ones (lists, quotes, inline code, strong
/// emphasis) 1; Markdown at 4 points with at least one strong sign.
pub fn looks_like_markdown(text: &str) -> bool {
    let mut end = text.len().min(MARKDOWN_SNIFF_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let sample = &text[..end];
    let mut strong = 0usize;
    let mut weak = 0usize;
    let mut in_fence = false;
    let mut previous_was_text = false;
    for line in sample.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            if !in_fence {
                strong += 1;
            }
            in_fence = !in_fence;
            previous_was_text = false;
            continue;
        }
        if in_fence {
            continue;
        }
        let hashes = trimmed.bytes().take_while(|&b| b == b'#').count();
        let atx_heading = (1..=6).contains(&hashes)
            && line.len() - trimmed.len() < 4
            && trimmed[hashes..].starts_with(' ')
            && !trimmed[hashes..].trim().is_empty();
        let setext_underline = previous_was_text
            && trimmed.len() >= 3
            && (trimmed.trim_end().bytes().all(|b| b == b'=')
                || trimmed.trim_end().bytes().all(|b| b == b'-'));
        if atx_heading || setext_underline || is_table_delimiter(trimmed) {
            strong += 1;
        } else if is_list_item(trimmed) || trimmed.starts_with("> ") {
            weak += 1;
        }
        strong += count_links(trimmed);
        weak += usize::from(trimmed.contains("**") || trimmed.contains("__"));
        weak += usize::from(trimmed.matches('`').count() >= 2);
        previous_was_text = !trimmed.is_empty() && !is_list_item(trimmed);
    }
    strong >= 1 && strong * 2 + weak >= 4
}

fn is_list_item(line: &str) -> bool {
    let bytes = line.as_bytes();
    if bytes.len() >= 2 && matches!(bytes[0], b'-' | b'*' | b'+') && bytes[1] == b' ' {
        return true;
    }
    let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    (1..=9).contains(&digits)
        && bytes.len() > digits + 1
        && matches!(bytes[digits], b'.' | b')')
        && bytes[digits + 1] == b' '
}

fn is_table_delimiter(line: &str) -> bool {
    let line = line.trim_end();
    line.contains('|')
        && line.contains("--")
        && line.bytes().all(|b| matches!(b, b'|' | b'-' | b':' | b' '))
}

/// Inline links and images `[text](target)` and reference definitions `[label]: target`.
fn count_links(line: &str) -> usize {
    let inline = line.matches("](").count();
    let definition = usize::from(line.starts_with('[') && line.contains("]: "));
    inline + definition
}

#[cfg(test)]
mod tests {
    use super::super::tests::{fixture, run, zip_of, CONTENT_TYPES};
    use super::*;

    fn unsupported(bytes: &[u8]) -> String {
        match detect(bytes) {
            Err(ExtractError::Unsupported(what)) => what,
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }

    #[test]
    fn detects_the_real_documents_by_content() {
        assert_eq!(
            detect(&fixture("shared-mime-info-spec.pdf")),
            Ok(DocumentKind::Pdf)
        );
        assert_eq!(detect(&fixture("MPL-2.0.docx")), Ok(DocumentKind::Docx));
        assert_eq!(
            detect(&fixture("tokio-README.md")),
            Ok(DocumentKind::Markdown)
        );
        assert_eq!(detect(&fixture("Apache-2.0.txt")), Ok(DocumentKind::Text));
    }

    #[test]
    fn detects_hostile_and_foreign_files() {
        assert_eq!(detect(b""), Err(ExtractError::Empty));
        // An ELF executable, whatever it is called.
        let mut elf = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x02\0\x3e\0".to_vec();
        elf.resize(512, 0);
        assert_eq!(unsupported(&elf), "an executable program");
        assert_eq!(
            unsupported(b"MZ\x90\0\x03\0\0\0\x04\0\0\0\xff\xff\0\0"),
            "an executable program"
        );
        assert_eq!(
            unsupported(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"),
            "an image (PNG)"
        );
        assert_eq!(unsupported(b"GIF89a\x01\0\x01\0\x80\0\0"), "an image (GIF)");
        assert_eq!(
            unsupported(b"\xff\xd8\xff\xe0\0\x10JFIF\0"),
            "an image (JPEG)"
        );
        assert_eq!(
            unsupported(b"\x1f\x8b\x08\0\0\0\0\0\0\x03"),
            "a compressed file (gzip)"
        );
        assert!(unsupported(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1\0\0").contains(".doc"));
        // Pseudo-random bytes.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        assert_eq!(unsupported(&noise), "a binary file of unknown type");
        // Text with NULs, text full of control characters, text in Latin-1.
        assert_eq!(
            unsupported(b"hello\0world"),
            "a binary file of unknown type"
        );
        assert_eq!(
            unsupported(b"a\x01b\x02c\x03d\x04e"),
            "a binary file of unknown type"
        );
        assert!(
            unsupported(b"Caf\xe9 cr\xe8me br\xfbl\xe9e, s'il vous pla\xeet.")
                .contains("encoding other than UTF-8")
        );
    }

    #[test]
    fn zips_other_than_word_documents_are_unsupported() {
        let xlsx = zip_of(&[
            ("[Content_Types].xml", CONTENT_TYPES),
            ("xl/workbook.xml", b"<workbook/>"),
        ]);
        assert_eq!(unsupported(&xlsx), "a spreadsheet (.xlsx)");
        let epub = zip_of(&[
            ("mimetype", b"application/epub+zip"),
            ("META-INF/container.xml", b"<container/>"),
        ]);
        assert_eq!(unsupported(&epub), "an e-book (EPUB)");
        let jar = zip_of(&[("META-INF/MANIFEST.MF", b"Manifest-Version: 1.0\n")]);
        assert_eq!(unsupported(&jar), "a program archive (.jar or .apk)");
        let pptx = zip_of(&[
            ("[Content_Types].xml", CONTENT_TYPES),
            ("ppt/presentation.xml", b"<presentation/>"),
        ]);
        assert_eq!(unsupported(&pptx), "a presentation (.pptx)");
        let odt = zip_of(&[
            ("mimetype", b"application/vnd.oasis.opendocument.text"),
            ("content.xml", b"<office:document-content/>"),
        ]);
        assert_eq!(
            unsupported(&odt),
            "an OpenDocument file (.odt, .ods or .odp)"
        );
        let plain = zip_of(&[("notes.txt", b"hello")]);
        assert_eq!(unsupported(&plain), "a ZIP archive");
        // A cut-off archive that does not start with a Word part.
        assert_eq!(unsupported(&plain[..plain.len() / 2]), "a ZIP archive");
        // Read as a Word document anyway, a ZIP without the main part is damaged.
        assert_eq!(
            run(&xlsx, DocumentKind::Docx),
            Err(ExtractError::Malformed("Word document".into()))
        );
        // word/document.xml alone is not enough: the package needs its content types.
        let half = zip_of(&[("word/document.xml", b"<w:document/>")]);
        assert_eq!(unsupported(&half), "a ZIP archive");
    }

    #[test]
    fn a_cut_off_word_document_is_malformed() {
        let docx = fixture("MPL-2.0.docx");
        let cut = &docx[..docx.len() * 6 / 10];
        assert_eq!(
            detect(cut),
            Err(ExtractError::Malformed("Word document".into()))
        );
        assert!(matches!(
            run(cut, DocumentKind::Docx),
            Err(ExtractError::Malformed(_))
        ));
    }

    #[test]
    fn pdf_header_may_follow_a_little_junk_but_text_mentioning_it_stays_text() {
        let pdf = fixture("shared-mime-info-spec.pdf");
        let mut prefixed = b"X-Junk: mail gateway\r\n\r\n".to_vec();
        prefixed.extend_from_slice(&pdf);
        assert_eq!(detect(&prefixed), Ok(DocumentKind::Pdf));
        let doc = run(&prefixed, DocumentKind::Pdf).unwrap();
        assert_eq!(doc.sections.len(), 17);

        let note = b"# File signatures\n\nA PDF starts with `%PDF-1.7` and a ZIP with `PK`.\n\n- [spec](https://example.com/pdf)\n";
        assert_eq!(detect(note), Ok(DocumentKind::Markdown));
        let mut far = vec![b' '; PDF_HEADER_WINDOW + 10];
        far.extend_from_slice(&pdf);
        assert_ne!(detect(&far), Ok(DocumentKind::Pdf));
    }

    #[test]
    fn text_may_carry_a_byte_order_mark_or_be_utf16() {
        assert_eq!(
            detect(b"\xef\xbb\xbfPlain words here."),
            Ok(DocumentKind::Text)
        );
        let sample = "Grüße aus Köln\n\nZweiter Absatz.";
        let mut le = vec![0xff, 0xfe];
        le.extend(sample.encode_utf16().flat_map(u16::to_le_bytes));
        let mut be = vec![0xfe, 0xff];
        be.extend(sample.encode_utf16().flat_map(u16::to_be_bytes));
        for bytes in [le, be] {
            assert_eq!(detect(&bytes), Ok(DocumentKind::Text));
            let doc = run(&bytes, DocumentKind::Text).unwrap();
            assert_eq!(doc.title.as_deref(), Some("Grüße aus Köln"));
            assert!(doc.sections[0].text.contains("Zweiter Absatz."));
        }
    }

    #[test]
    fn markdown_is_told_from_plain_text_by_its_syntax() {
        assert!(looks_like_markdown(
            &String::from_utf8(fixture("tokio-README.md")).unwrap()
        ));
        assert!(!looks_like_markdown(
            &String::from_utf8(fixture("Apache-2.0.txt")).unwrap()
        ));
        assert!(looks_like_markdown(
            "# Setup\n\nRun `make` first.\n\n## Usage\n\nSee below.\n"
        ));
        assert!(looks_like_markdown("Intro\n=====\n\n```sh\nmake\n```\n"));
        assert!(looks_like_markdown(
            "| a | b |\n|---|---|\n| 1 | 2 |\n\n[docs](https://x.org) and **bold**\n"
        ));
        // Numbered clauses, bullets and the odd asterisk are common in plain text.
        assert!(!looks_like_markdown(
            "Terms\n\n1. Definitions.\n2. Grant of licence.\n3. Limits.\n- one\n- two\n* note\n"
        ));
        // A heading-like line inside a fenced block does not count as a heading.
        assert!(!looks_like_markdown(
            "Notes\n\n```\n# not a heading\n# nor this\n```\n"
        ));
    }
}
