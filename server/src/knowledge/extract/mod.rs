//! Content detection and text extraction of uploaded knowledge-base documents.
//!
//! [`detect`] decides what a file is from its bytes alone, never from its name or declared
//! media type. [`extract`] turns a PDF, Word (`.docx`), Markdown or plain-text document into
//! [`Section`]s of plain text, each with its heading path and, for PDFs, its page number.
//!
//! Every upload is treated as hostile: the work is bounded by [`ExtractLimits`] (pages,
//! inflated bytes, compression ratio, characters, wall-clock time), compressed parts are
//! inflated through counting readers rather than trusting declared sizes, and a reader that
//! panics is reported as [`ExtractError::Panicked`] instead of unwinding into the caller.
//! Every error's `Display` is one sentence a non-technical user understands; technical
//! causes are logged at `debug` level.
//!
//! [`extract`] is synchronous and CPU-bound. The service never runs it in its own process:
//! uploads and crawled pages are read in extraction child processes ([`super::sandbox`]),
//! which bound what these limits miss (stack depth, memory, time inside one parser step).

//!
//! One module per format reads it: `pdf`, `docx`, `markdown` and `text`. `detect` holds
//! the content sniffing, and `sink` the section collector that every reader writes into,
//! which enforces the character and time limits and tidies the text the same way for all.
//!
//! [`detect`]: fn@detect

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod detect;
mod docx;
mod markdown;
mod pdf;
mod sink;
mod text;

pub use detect::{detect, looks_like_markdown, PDF_EOF_WINDOW, PDF_HEADER_WINDOW};
pub use docx::RATIO_CHECK_FLOOR;
pub use text::TEXT_SECTION_BYTES;

use sink::{one_line, SectionSink};

/// Longest first line (in characters) that is taken as the title of a plain-text document
/// or of a PDF without a `/Title`.
pub const MAX_LINE_TITLE_CHARS: usize = 120;

/// What an uploaded document is, as decided from its content by [`detect`].
///
/// Serialises (serde) and displays as `pdf`, `docx`, `markdown` or `text`; [`FromStr`]
/// parses the same names.
///
/// [`detect`]: fn@detect
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DocumentKind {
    /// A PDF document (ISO 32000).
    Pdf,
    /// A Word document in Office Open XML (ECMA-376), the `.docx` format.
    Docx,
    /// UTF-8 text written in Markdown (CommonMark with tables, task lists and strikethrough).
    Markdown,
    /// Plain UTF-8 text.
    Text,
}

impl DocumentKind {
    /// Every kind, in a stable order.
    pub const ALL: [DocumentKind; 4] = [
        DocumentKind::Pdf,
        DocumentKind::Docx,
        DocumentKind::Markdown,
        DocumentKind::Text,
    ];

    /// The stable lowercase name: `pdf`, `docx`, `markdown` or `text`.
    pub const fn as_str(self) -> &'static str {
        match self {
            DocumentKind::Pdf => "pdf",
            DocumentKind::Docx => "docx",
            DocumentKind::Markdown => "markdown",
            DocumentKind::Text => "text",
        }
    }

    /// How a user names a document of this kind in a sentence: "PDF", "Word document",
    /// "Markdown file" or "text file".
    pub const fn noun(self) -> &'static str {
        match self {
            DocumentKind::Pdf => "PDF",
            DocumentKind::Docx => "Word document",
            DocumentKind::Markdown => "Markdown file",
            DocumentKind::Text => "text file",
        }
    }
}

impl fmt::Display for DocumentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not one of `pdf`, `docx`, `markdown` or `text`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown document kind {0:?} (expected pdf, docx, markdown or text)")]
pub struct UnknownDocumentKind(pub String);

impl FromStr for DocumentKind {
    type Err = UnknownDocumentKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DocumentKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| UnknownDocumentKind(s.to_owned()))
    }
}

/// Bounds on the work and memory [`extract`] spends on one document.
///
/// These are the first line of defence, checked inside the readers; the extraction child
/// process ([`super::sandbox`]) bounds what they miss.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtractLimits {
    /// Most pages a PDF may have. A longer PDF is refused with [`ExtractError::TooLarge`]
    /// rather than partly indexed, so that answers never silently miss its end.
    /// Default 2,000.
    pub max_pdf_pages: usize,
    /// Wall-clock budget of one extraction, checked before each PDF page, while inflating
    /// DOCX parts and every few thousand XML or Markdown events; running out gives
    /// [`ExtractError::Timeout`]. Opening a PDF (reading its cross-reference table) and
    /// reading one PDF page are single steps that are not interrupted. Default 120 s.
    pub deadline: Duration,
    /// Most bytes one DOCX part (ZIP entry) may inflate to, by its declared size and by the
    /// bytes actually inflated. Default 64 MiB.
    pub max_docx_entry_bytes: u64,
    /// Most bytes the DOCX parts that are read (document, styles, properties) may inflate
    /// to together. Parts that are never read, such as images, do not count. Default 256 MiB.
    pub max_docx_total_bytes: u64,
    /// Highest ratio of inflated to compressed size of a DOCX part, by its declared sizes
    /// and again by the bytes actually inflated, once the part passes
    /// [`RATIO_CHECK_FLOOR`]. The XML of real documents compresses 5 to 40 times.
    /// Default 100.
    pub max_compression_ratio: u64,
    /// Most characters of text one document may yield. Default 20,000,000 (several
    /// thousand pages).
    pub max_text_chars: usize,
    /// Most bytes one Flate-compressed PDF stream other than an image may inflate to,
    /// checked by inflating into a counting sink before the PDF is parsed (page content
    /// streams of real documents stay far below it). Default 64 MiB.
    pub max_pdf_stream_bytes: u64,
}

impl Default for ExtractLimits {
    fn default() -> Self {
        ExtractLimits {
            max_pdf_pages: 2_000,
            deadline: crate::config::DEFAULT_EXTRACT_TIMEOUT,
            max_docx_entry_bytes: 64 << 20,
            max_docx_total_bytes: 256 << 20,
            max_compression_ratio: 100,
            max_text_chars: 20_000_000,
            max_pdf_stream_bytes: 64 << 20,
        }
    }
}

/// Why a document could not be recognised or read.
///
/// `Display` is one sentence for the person who uploaded the file; [`ExtractError::code`]
/// is a stable machine-readable name. Serialises (serde) so that the extraction child
/// process ([`super::sandbox`]) can hand it to the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ExtractError {
    /// The file has no bytes.
    #[error("The file is empty.")]
    Empty,
    /// The file is not a kind a knowledge base can hold. The field says what it looks like,
    /// as a noun phrase ("an image (PNG)", "an executable program", "a ZIP archive").
    #[error(
        "The file is {0}, which cannot be added to a knowledge base; upload a PDF, Word (.docx), Markdown or plain-text file."
    )]
    Unsupported(String),
    /// The file is of a supported kind but damaged, truncated or not what it claims to be.
    /// The field names the kind as a user would ([`DocumentKind::noun`]).
    #[error("The {0} is damaged or incomplete and could not be read.")]
    Malformed(String),
    /// The document exceeds one of the [`ExtractLimits`]. The field says which, as a clause
    /// ("it has 2,345 pages and the limit is 2,000").
    #[error("The document is too large to index: {0}.")]
    TooLarge(String),
    /// Extraction ran past [`ExtractLimits::deadline`].
    #[error(
        "Reading the document took too long and was stopped; try splitting it into smaller files."
    )]
    Timeout,
    /// The document holds no extractable text (for example a PDF of scanned images).
    #[error("The document contains no text that can be indexed (it may consist only of scanned images).")]
    NoText,
    /// The document is encrypted and needs a password to open.
    #[error("The document is password-protected; remove the password and upload it again.")]
    Encrypted,
    /// A document reader panicked on this input; the panic was contained.
    #[error("The file could not be read (the reader failed on it).")]
    Panicked,
    /// The reader ran out of stack on the file's nesting (arrays in arrays, dictionaries in
    /// dictionaries, lists in lists): the extraction child process died of a stack
    /// overflow.
    #[error("The file is nested too deeply to be read; it may be damaged or made to crash document readers.")]
    TooDeep,
    /// The extraction child process crashed on this file (an abort or a fatal signal other
    /// than a stack overflow or running out of memory).
    #[error("The file could not be read: the document reader stopped working on it.")]
    Crashed,
    /// No extraction child process could be started (the server's own trouble, not the
    /// file's); trying again later may succeed.
    #[error("The document reader could not be started; try again with refresh.")]
    Unavailable,
}

impl ExtractError {
    /// A stable name for storage and metrics: `empty`, `unsupported`, `malformed`,
    /// `too_large`, `timeout`, `no_text`, `encrypted`, `panicked`, `too_deep`, `crashed` or
    /// `unavailable`.
    pub const fn code(&self) -> &'static str {
        match self {
            ExtractError::Empty => "empty",
            ExtractError::Unsupported(_) => "unsupported",
            ExtractError::Malformed(_) => "malformed",
            ExtractError::TooLarge(_) => "too_large",
            ExtractError::Timeout => "timeout",
            ExtractError::NoText => "no_text",
            ExtractError::Encrypted => "encrypted",
            ExtractError::Panicked => "panicked",
            ExtractError::TooDeep => "too_deep",
            ExtractError::Crashed => "crashed",
            ExtractError::Unavailable => "unavailable",
        }
    }

    /// A [`ExtractError::Malformed`] for `kind`, logging the technical `cause`.
    fn malformed(kind: DocumentKind, cause: impl fmt::Display) -> Self {
        tracing::debug!(kind = %kind, cause = %cause, "document could not be parsed");
        ExtractError::Malformed(kind.noun().to_owned())
    }
}

/// The text of a document, in reading order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extracted {
    /// The kind the document was read as.
    pub kind: DocumentKind,
    /// The document's title, trimmed and on one line: a PDF's `/Title` metadata or else its
    /// first line; a DOCX's `dc:title` property or else its Title-styled paragraph or first
    /// heading; a Markdown document's first H1; a text file's first non-empty line. A title
    /// taken from a first line is used only if it has at most [`MAX_LINE_TITLE_CHARS`]
    /// characters. `None` when there is none.
    pub title: Option<String>,
    /// The sections in document order; never empty, and no section has empty text.
    pub sections: Vec<Section>,
}

impl Extracted {
    /// Total characters of text over all sections.
    pub fn char_count(&self) -> usize {
        self.sections.iter().map(|s| s.text.chars().count()).sum()
    }
}

/// A stretch of a document's text under one heading path (for PDFs, one page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Section {
    /// The headings enclosing the text, outermost first (H1 > H2 > H3; in DOCX, Title >
    /// Heading 1 > Heading 2 …). Empty for text before the first heading, for PDF pages and
    /// for plain text.
    pub heading_path: Vec<String>,
    /// The text, trimmed, with `\n` line ends and at most one blank line in a row; never
    /// empty. Markdown keeps its block structure (list markers, fenced code, table rows with
    /// ` | ` between cells) with links and images reduced to their text; DOCX paragraphs are
    /// separated by blank lines and table rows are written one per line, cells separated by
    /// ` | `.
    pub text: String,
    /// The 1-based page number for PDF sections; `None` for other kinds.
    pub page: Option<u32>,
}

// ---------------------------------------------------------------------------------------
// Extraction
// ---------------------------------------------------------------------------------------

/// Extracts the text of a document already recognised as `kind` (normally by [`detect`]).
///
/// PDF: one section per page with text, `page: Some(n)` (1-based). DOCX: sections split at
/// Title and Heading 1–9 paragraphs. Markdown: sections split at headings. Text: one
/// section, or several cut at paragraph breaks when longer than [`TEXT_SECTION_BYTES`].
/// See [`Extracted`] for titles and [`Section`] for the text's shape.
///
/// Synchronous and CPU-bound (up to [`ExtractLimits::deadline`]); never panics: a panic in
/// a reader is contained and reported as [`ExtractError::Panicked`] (this relies on the
/// default `panic = "unwind"`).
///
/// # Errors
///
/// - [`ExtractError::Empty`]: no bytes.
/// - [`ExtractError::Malformed`]: the bytes are not a readable document of `kind`; a PDF
///   without its closing `%%EOF` marker (a cut-off upload) is refused here rather than
///   partly indexed.
/// - [`ExtractError::Unsupported`]: text that is not UTF-8 or UTF-16 with a byte-order mark.
/// - [`ExtractError::TooLarge`]: a limit of `limits` other than the deadline was exceeded
///   (pages, characters, inflated DOCX parts or PDF streams, compression ratio).
/// - [`ExtractError::Timeout`]: the deadline passed.
/// - [`ExtractError::NoText`]: the document holds no text.
/// - [`ExtractError::Encrypted`]: a password-protected PDF, or a DOCX whose ZIP entries
///   are encrypted. (Word's own password protection wraps the document in an older Office
///   container, which [`detect`] reports as unsupported.)
/// - [`ExtractError::Panicked`]: a reader panicked.
///
/// [`detect`]: fn@detect
pub fn extract(
    bytes: &[u8],
    kind: DocumentKind,
    limits: &ExtractLimits,
) -> Result<Extracted, ExtractError> {
    if bytes.is_empty() {
        return Err(ExtractError::Empty);
    }
    let mut out = SectionSink::new(limits);
    let title = guarded(|| match kind {
        DocumentKind::Pdf => pdf::extract_pdf(bytes, &mut out),
        DocumentKind::Docx => docx::extract_docx(bytes, &mut out),
        DocumentKind::Markdown => markdown::extract_markdown(bytes, &mut out),
        DocumentKind::Text => text::extract_text(bytes, &mut out),
    })?;
    if out.sections.is_empty() {
        return Err(ExtractError::NoText);
    }
    Ok(Extracted {
        kind,
        title: title.map(|t| one_line(&t)).filter(|t| !t.is_empty()),
        sections: out.sections,
    })
}

/// Runs `work`, turning a panic inside it into [`ExtractError::Panicked`].
fn guarded<T>(work: impl FnOnce() -> Result<T, ExtractError>) -> Result<T, ExtractError> {
    match catch_unwind(AssertUnwindSafe(work)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::warn!(panic = %message, "a document reader panicked; the document was refused");
            Err(ExtractError::Panicked)
        }
    }
}

/// `n` with thousands separators: `2,000`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `bytes` in whole MiB when it is a multiple of 1 MiB, else in bytes.
pub(crate) fn size_phrase(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", thousands(bytes >> 20))
    } else {
        format!("{} bytes", thousands(bytes))
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Cursor, Write};
    use std::path::Path;

    use super::*;

    /// The bytes of `tests/fixtures/knowledge/<name>`.
    pub(super) fn fixture(name: &str) -> Vec<u8> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/knowledge")
            .join(name);
        std::fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
    }

    /// [`extract`] with the default limits.
    pub(super) fn run(bytes: &[u8], kind: DocumentKind) -> Result<Extracted, ExtractError> {
        extract(bytes, kind, &ExtractLimits::default())
    }

    /// A ZIP archive of `parts`, deflated.
    pub(super) fn zip_of(parts: &[(&str, &[u8])]) -> Vec<u8> {
        let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, data) in parts {
            writer.start_file(*name, options).unwrap();
            writer.write_all(data).unwrap();
        }
        writer.finish().unwrap().into_inner()
    }

    /// The `[Content_Types].xml` part of a minimal Word package.
    pub(super) const CONTENT_TYPES: &[u8] = br#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#;

    // --- Kinds and errors ---------------------------------------------------------------

    #[test]
    fn document_kind_names_round_trip() {
        for kind in DocumentKind::ALL {
            assert_eq!(kind.to_string(), kind.as_str());
            assert_eq!(kind.as_str().parse::<DocumentKind>(), Ok(kind));
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
            assert_eq!(serde_json::from_str::<DocumentKind>(&json).unwrap(), kind);
        }
        assert!("doc".parse::<DocumentKind>().is_err());
    }

    #[test]
    fn errors_read_as_one_sentence_for_users() {
        assert_eq!(
            ExtractError::Panicked.to_string(),
            "The file could not be read (the reader failed on it)."
        );
        assert_eq!(
            ExtractError::Malformed("PDF".into()).to_string(),
            "The PDF is damaged or incomplete and could not be read."
        );
        let all = [
            ExtractError::Empty,
            ExtractError::Unsupported("an image (PNG)".into()),
            ExtractError::Malformed("Word document".into()),
            ExtractError::TooLarge("it has 3 pages and the limit is 2".into()),
            ExtractError::Timeout,
            ExtractError::NoText,
            ExtractError::Encrypted,
            ExtractError::Panicked,
        ];
        let mut codes = std::collections::HashSet::new();
        for err in all {
            let text = err.to_string();
            assert!(text.starts_with(char::is_uppercase), "{text}");
            assert!(text.ends_with('.'), "{text}");
            assert_eq!(text.matches(". ").count(), 0, "one sentence: {text}");
            assert!(codes.insert(err.code()));
        }
    }

    #[test]
    fn a_panicking_reader_is_contained() {
        let result: Result<(), ExtractError> = guarded(|| panic!("reader bug"));
        assert_eq!(result, Err(ExtractError::Panicked));
        assert_eq!(guarded(|| Ok(7)), Ok(7));
    }

    // --- Every kind ---------------------------------------------------------------------

    #[test]
    fn every_kind_stops_at_the_deadline() {
        let limits = ExtractLimits {
            deadline: Duration::ZERO,
            ..ExtractLimits::default()
        };
        for (name, kind) in [
            ("shared-mime-info-spec.pdf", DocumentKind::Pdf),
            ("MPL-2.0.docx", DocumentKind::Docx),
            ("tokio-README.md", DocumentKind::Markdown),
            ("Apache-2.0.txt", DocumentKind::Text),
        ] {
            assert_eq!(
                extract(&fixture(name), kind, &limits),
                Err(ExtractError::Timeout),
                "{name}"
            );
        }
    }

    #[test]
    fn character_limit_applies_to_every_kind() {
        let limits = ExtractLimits {
            max_text_chars: 1_000,
            ..ExtractLimits::default()
        };
        for (name, kind) in [
            ("shared-mime-info-spec.pdf", DocumentKind::Pdf),
            ("MPL-2.0.docx", DocumentKind::Docx),
            ("tokio-README.md", DocumentKind::Markdown),
            ("Apache-2.0.txt", DocumentKind::Text),
        ] {
            assert_eq!(
                extract(&fixture(name), kind, &limits),
                Err(ExtractError::TooLarge(
                    "it holds more than 1,000 characters of text".into()
                )),
                "{name}"
            );
        }
    }

    #[test]
    fn bytes_of_another_kind_are_malformed_or_unsupported() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        assert!(matches!(
            run(png, DocumentKind::Docx),
            Err(ExtractError::Malformed(_))
        ));
        assert!(matches!(
            run(png, DocumentKind::Text),
            Err(ExtractError::Unsupported(_))
        ));
        assert!(matches!(
            run(png, DocumentKind::Markdown),
            Err(ExtractError::Unsupported(_))
        ));
        assert!(matches!(
            run(b"plain words", DocumentKind::Docx),
            Err(ExtractError::Malformed(_))
        ));
    }
}
