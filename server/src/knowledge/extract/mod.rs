//! Content detection ([`detect`]) and text extraction ([`extract`]) of uploaded documents,
//! one module per format. Every upload is hostile: work is bounded by [`ExtractLimits`], a
//! reader's panic becomes [`ExtractError::Panicked`], and the service runs this only in
//! extraction child processes (docs/knowledge.md § Extraction). Each error's `Display` is
//! one sentence for the user.
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

/// Longest first line (characters) taken as the title of a text file or a PDF without `/Title`.
pub const MAX_LINE_TITLE_CHARS: usize = 120;

/// What an uploaded document is, decided by [`detect`](fn@detect); its name is `pdf`, `docx`,
/// `markdown` or `text` ([`FromStr`]).
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

    /// How a sentence names this kind: "PDF", "Word document", "Markdown file", "text file".
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

/// Bounds on [`extract`]'s work per document; the child ([`super::sandbox`]) bounds the rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtractLimits {
    /// Most PDF pages; a longer one is refused ([`ExtractError::TooLarge`]). Default 2,000.
    pub max_pdf_pages: usize,
    /// Wall-clock budget of one extraction ([`ExtractError::Timeout`]). Default 120 s.
    pub deadline: Duration,
    /// Most bytes one DOCX part may inflate to (declared and actual). Default 64 MiB.
    pub max_docx_entry_bytes: u64,
    /// Most bytes the DOCX parts that are read may inflate to together. Default 256 MiB.
    pub max_docx_total_bytes: u64,
    /// Highest inflated/compressed ratio of a DOCX part past [`RATIO_CHECK_FLOOR`]. Default 100.
    pub max_compression_ratio: u64,
    /// Most characters of text one document may yield. Default 20,000,000.
    pub max_text_chars: usize,
    /// Most bytes one non-image PDF Flate stream may inflate to. Default 64 MiB.
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

/// Why a document could not be read: `Display` for the uploader, [`ExtractError::code`] stable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ExtractError {
    #[error("The file is empty.")]
    Empty,
    /// Not a kind a knowledge base holds; the field is what it looks like ("an image (PNG)").
    #[error(
        "The file is {0}, which cannot be added to a knowledge base; upload a PDF, Word (.docx), Markdown or plain-text file."
    )]
    Unsupported(String),
    /// Of a supported kind but damaged or truncated; the field is [`DocumentKind::noun`].
    #[error("The {0} is damaged or incomplete and could not be read.")]
    Malformed(String),
    /// Over one of the [`ExtractLimits`]; the field says which, as a clause.
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
    #[error("The document is password-protected; remove the password and upload it again.")]
    Encrypted,
    /// A document reader panicked on this input; the panic was contained.
    #[error("The file could not be read (the reader failed on it).")]
    Panicked,
    /// The child process overflowed its stack on the file's nesting.
    #[error("The file is nested too deeply to be read; it may be damaged or made to crash document readers.")]
    TooDeep,
    /// The child process crashed otherwise (an abort or fatal signal).
    #[error("The file could not be read: the document reader stopped working on it.")]
    Crashed,
    /// No child process could be started (the server's trouble); a retry may succeed.
    #[error("The document reader could not be started; try again with refresh.")]
    Unavailable,
}

impl ExtractError {
    /// Stable name for storage and metrics (`empty`, `unsupported`, `malformed`, `too_large`, …).
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
    pub kind: DocumentKind,
    /// The one-line title: a PDF's `/Title`, a DOCX's `dc:title` or first heading, Markdown's H1,
    /// else the first line (up to [`MAX_LINE_TITLE_CHARS`]).
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
    /// Enclosing headings, outermost first; empty before the first heading, for PDF and text.
    pub heading_path: Vec<String>,
    /// The trimmed text (`\n` ends, no double blank lines); never empty. Table rows are one line.
    pub text: String,
    /// The 1-based page number for PDF sections; `None` for other kinds.
    pub page: Option<u32>,
}

// ---------------------------------------------------------------------------------------
// Extraction
// ---------------------------------------------------------------------------------------

/// Extracts a document of `kind` into sections (PDF per page, DOCX and Markdown at headings, text
/// past [`TEXT_SECTION_BYTES`]). CPU-bound; never panics (needs `panic = "unwind"`).
/// Errors: any [`ExtractError`] but the child process's; text not UTF-8 is `Unsupported`.
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

    pub(super) fn fixture(name: &str) -> Vec<u8> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/knowledge")
            .join(name);
        std::fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
    }

    pub(super) fn run(bytes: &[u8], kind: DocumentKind) -> Result<Extracted, ExtractError> {
        extract(bytes, kind, &ExtractLimits::default())
    }

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
