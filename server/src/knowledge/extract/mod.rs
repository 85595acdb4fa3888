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

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::io::{Cursor, Read};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::str::FromStr;
use std::time::{Duration, Instant};

use pulldown_cmark::{CodeBlockKind, Event as MdEvent, HeadingLevel, Options, Parser, Tag, TagEnd};
use quick_xml::events::{BytesStart, Event as XmlEvent};
use quick_xml::Reader as XmlReader;
use serde::{Deserialize, Serialize};
use zip::ZipArchive;

/// How far into a file [`detect`] looks for the `%PDF-` header. PDF readers accept some
/// leading bytes (mail gateways and download tools prepend them); Acrobat looks within the
/// first 1024 bytes (PDF 1.7 reference, implementation note 13).
pub const PDF_HEADER_WINDOW: usize = 1024;

/// How far from the end of a PDF its `%%EOF` marker must start. The marker ends every
/// complete PDF (ISO 32000-1 §7.5.5: the last line of the file contains only `%%EOF`);
/// readers tolerate a little trailing junk, and Acrobat looks within the last 1024 bytes
/// (PDF 1.7 reference, implementation note 18).
pub const PDF_EOF_WINDOW: usize = 1024;

/// Inflated size (bytes) from which [`ExtractLimits::max_compression_ratio`] applies to a
/// DOCX part: a smaller part cannot exhaust memory whatever its ratio, and small, highly
/// repetitive XML parts legitimately compress very well.
pub const RATIO_CHECK_FLOOR: u64 = 1 << 20;

/// Longest first line (in characters) that is taken as the title of a plain-text document
/// or of a PDF without a `/Title`.
pub const MAX_LINE_TITLE_CHARS: usize = 120;

/// Plain text longer than this (bytes) is cut into sections at paragraph breaks so that no
/// single section is unboundedly large; chunking works within a section.
pub const TEXT_SECTION_BYTES: usize = 256 * 1024;

/// Share of control characters (other than tab, line feed, carriage return and form feed)
/// above which bytes that decode as text are treated as binary: more than 1 in 200.
const MAX_CONTROL_CHARS_PER_200: usize = 1;

/// How many bytes of a document [`looks_like_markdown`] reads.
const MARKDOWN_SNIFF_BYTES: usize = 64 * 1024;

/// What an uploaded document is, as decided from its content by [`detect`].
///
/// Serialises (serde) and displays as `pdf`, `docx`, `markdown` or `text`; [`FromStr`]
/// parses the same names.
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
            deadline: Duration::from_secs(120),
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
// Detection
// ---------------------------------------------------------------------------------------

/// Decides what `bytes` are from their content alone.
///
/// - PDF: the `%PDF-` header at offset 0, or within the first [`PDF_HEADER_WINDOW`] bytes
///   when the file also ends with a `%%EOF` marker (so that a text file that merely
///   mentions `%PDF-` is not taken for a PDF).
/// - DOCX: a ZIP archive (`PK\x03\x04`) whose central directory lists both
///   `[Content_Types].xml` (the package's content types, ECMA-376 part 2) and
///   `word/document.xml` (the main document part that Word writes, ECMA-376 part 1).
///   Other ZIP-based formats (spreadsheets, presentations, e-books, Java archives) are
///   [`ExtractError::Unsupported`]; a ZIP whose central directory cannot be read is
///   [`ExtractError::Malformed`] when its first entry is a Word part, otherwise unsupported.
/// - Text: valid UTF-8 (an optional UTF-8 byte-order mark is dropped) or UTF-16 with a
///   byte-order mark, with no NUL and at most one other control character in 200.
///   Markdown or plain text is then decided by [`looks_like_markdown`].
///
/// # Errors
///
/// [`ExtractError::Empty`] for no bytes; [`ExtractError::Unsupported`] naming what the file
/// looks like where known ("an image (PNG)", "an executable program", "text in an encoding
/// other than UTF-8", "a binary file of unknown type"); [`ExtractError::Malformed`] for a
/// Word document whose ZIP structure is broken.
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
fn pdf_header_offset(bytes: &[u8]) -> Option<usize> {
    let window = &bytes[..bytes.len().min(PDF_HEADER_WINDOW + 5)];
    find(window, b"%PDF-")
}

/// Whether a `%%EOF` marker starts within the last [`PDF_EOF_WINDOW`] bytes.
fn has_pdf_eof_marker(bytes: &[u8]) -> bool {
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

/// First offset of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
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

/// What a binary file looks like, from its magic number, for the formats people most often
/// upload by mistake. Formats whose signature is plain ASCII (`MZ`, `BM`, `BZh`) are only
/// recognised after the bytes failed to decode as text.
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

/// The weak signatures, tried once the bytes are known not to be text.
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

/// Decodes `bytes` as text: UTF-8 (an optional byte-order mark is dropped), or UTF-16 LE/BE
/// with a byte-order mark, transcoded. Text may hold no NUL and at most one other control
/// character (besides tab, line feed, carriage return and form feed) in 200.
///
/// On failure, says what the bytes look like instead.
fn decode_text(bytes: &[u8]) -> Result<Cow<'_, str>, &'static str> {
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

/// What bytes that are not UTF-8 look like: legacy 8-bit text (no NULs, at least 80 %
/// printable ASCII) or some binary format.
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

/// Whether `text` reads as Markdown rather than plain text, by a score over its first
/// 64 KiB.
///
/// Strong signs (2 points each): ATX headings (`# Title`), setext underlines, fenced code
/// blocks, inline or reference links and images, table delimiter rows. Weak signs (1 point
/// each): list items, block quotes, inline code, `**strong**` or `__strong__` emphasis.
/// Lines inside fenced code count once as the fence. The text is Markdown when the score
/// reaches 4 with at least one strong sign, so that numbered clauses or an occasional
/// asterisk in plain text do not make it Markdown.
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
        DocumentKind::Pdf => extract_pdf(bytes, &mut out),
        DocumentKind::Docx => extract_docx(bytes, &mut out),
        DocumentKind::Markdown => extract_markdown(bytes, &mut out),
        DocumentKind::Text => extract_text(bytes, &mut out),
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

/// When extraction must stop.
#[derive(Debug, Clone, Copy)]
struct Deadline(Option<Instant>);

impl Deadline {
    fn after(budget: Duration) -> Self {
        Deadline(Instant::now().checked_add(budget))
    }

    fn check(&self) -> Result<(), ExtractError> {
        match self.0 {
            Some(end) if Instant::now() >= end => Err(ExtractError::Timeout),
            _ => Ok(()),
        }
    }
}

/// Collects sections, dropping empty ones and enforcing the character and time limits.
struct SectionSink<'a> {
    limits: &'a ExtractLimits,
    deadline: Deadline,
    sections: Vec<Section>,
    chars: usize,
}

impl<'a> SectionSink<'a> {
    fn new(limits: &'a ExtractLimits) -> Self {
        SectionSink {
            limits,
            deadline: Deadline::after(limits.deadline),
            sections: Vec::new(),
            chars: 0,
        }
    }

    /// Adds a section after tidying its text; empty text is dropped.
    fn push(
        &mut self,
        heading_path: &[String],
        text: &str,
        page: Option<u32>,
    ) -> Result<(), ExtractError> {
        let text = tidy(text);
        if text.is_empty() {
            return Ok(());
        }
        self.chars += text.chars().count();
        self.check_chars(0)?;
        self.sections.push(Section {
            heading_path: heading_path.to_vec(),
            text,
            page,
        });
        Ok(())
    }

    /// Fails when the characters kept so far plus `pending` exceed the limit.
    fn check_chars(&self, pending: usize) -> Result<(), ExtractError> {
        let max = self.limits.max_text_chars;
        if self.chars.saturating_add(pending) > max {
            Err(ExtractError::TooLarge(format!(
                "it holds more than {} characters of text",
                thousands(max as u64)
            )))
        } else {
            Ok(())
        }
    }
}

/// Normalises extracted text: `\r\n` and `\r` become `\n`; control characters other than
/// tab and line feed are dropped; trailing spaces of lines are removed; runs of blank lines
/// become one; the whole is trimmed.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0usize;
    for line in text.split('\n') {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank_run += 1;
            if blank_run == 1 && !out.is_empty() {
                out.push('\n');
            }
            continue;
        }
        blank_run = 0;
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.extend(line.chars().filter(|&c| c == '\t' || !c.is_control()));
        out.push('\n');
    }
    let trimmed = out.trim();
    if trimmed.len() == out.len() {
        out
    } else {
        trimmed.to_owned()
    }
}

/// `text` on one line: whitespace runs (line breaks included) become single spaces.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first non-empty line of `text`, if it has at most [`MAX_LINE_TITLE_CHARS`]
/// characters.
fn first_line_title(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    (line.chars().count() <= MAX_LINE_TITLE_CHARS).then(|| one_line(line))
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

// ---------------------------------------------------------------------------------------
// PDF
// ---------------------------------------------------------------------------------------

/// Reads a PDF page by page with `pdf_oxide`, which also bounds the inflation of every
/// compressed stream (ratio and size limits against PDF decompression bombs).
fn extract_pdf(bytes: &[u8], out: &mut SectionSink<'_>) -> Result<Option<String>, ExtractError> {
    use pdf_oxide::document::PdfDocument;

    const KIND: DocumentKind = DocumentKind::Pdf;
    let start =
        pdf_header_offset(bytes).ok_or_else(|| ExtractError::malformed(KIND, "no %PDF- header"))?;
    if !has_pdf_eof_marker(bytes) {
        return Err(ExtractError::malformed(
            KIND,
            "no %%EOF marker at the end: the file is cut off",
        ));
    }
    check_pdf_streams(bytes, out)?;
    out.deadline.check()?;
    let doc = PdfDocument::from_bytes(bytes[start..].to_vec()).map_err(pdf_error)?;
    if doc.is_encrypted() && !doc.authenticate(b"").map_err(pdf_error)? {
        return Err(ExtractError::Encrypted);
    }
    let pages = doc.page_count().map_err(pdf_error)?;
    if pages > out.limits.max_pdf_pages {
        return Err(ExtractError::TooLarge(format!(
            "it has {} pages and the limit is {}",
            thousands(pages as u64),
            thousands(out.limits.max_pdf_pages as u64)
        )));
    }
    let mut failed = 0usize;
    for index in 0..pages {
        out.deadline.check()?;
        match doc.extract_text(index) {
            Ok(text) => out.push(&[], &text, Some(index as u32 + 1))?,
            Err(pdf_oxide::Error::EncryptedPdf) => return Err(ExtractError::Encrypted),
            Err(err) => {
                failed += 1;
                tracing::debug!(page = index + 1, error = %err, "PDF page could not be read; skipped");
            }
        }
    }
    if pages == 0 || failed == pages {
        return Err(ExtractError::malformed(
            KIND,
            format!("{failed} of {pages} pages unreadable"),
        ));
    }
    let title = pdf_info_title(&doc)
        .or_else(|| out.sections.first().and_then(|s| first_line_title(&s.text)));
    Ok(title)
}

/// Refuses a PDF decompression bomb before the PDF reader allocates for it: every
/// Flate-compressed stream except images is inflated into a counting sink, and a stream
/// that yields more than [`ExtractLimits::max_pdf_stream_bytes`] makes the document
/// [`ExtractError::TooLarge`]. (The reader has its own bounds, but applies them only after
/// holding up to 256 MiB.) Streams are found by their `stream` keyword; data that is not a
/// zlib stream fails to inflate at once and is skipped. Images are left out because text
/// extraction never decodes them and scans legitimately inflate to hundreds of MiB.
fn check_pdf_streams(bytes: &[u8], out: &SectionSink<'_>) -> Result<(), ExtractError> {
    /// How far before a `stream` keyword its dictionary is looked for.
    const DICTIONARY_WINDOW: usize = 4096;
    let cap = out.limits.max_pdf_stream_bytes;
    let mut from = 0;
    let mut streams = 0u32;
    while let Some(found) = find(&bytes[from..], b"stream") {
        let keyword = from + found;
        from = keyword + b"stream".len();
        if bytes[..keyword].ends_with(b"end") {
            continue;
        }
        // The keyword is followed by CRLF or LF (ISO 32000-1 §7.3.8.1).
        let data = match bytes.get(from..from + 2) {
            Some(b"\r\n") => from + 2,
            Some([b'\n', _]) | Some([b'\r', _]) => from + 1,
            _ => continue,
        };
        let dictionary = &bytes[keyword.saturating_sub(DICTIONARY_WINDOW)..keyword];
        let dictionary = match find_last(dictionary, b"obj") {
            Some(at) => &dictionary[at..],
            None => dictionary,
        };
        if find(dictionary, b"/Image").is_some() {
            continue;
        }
        streams += 1;
        if streams.is_multiple_of(64) {
            out.deadline.check()?;
        }
        let mut decoder = flate2::read::ZlibDecoder::new(&bytes[data..]);
        let inflated = std::io::copy(&mut (&mut decoder).take(cap + 1), &mut std::io::sink());
        if matches!(inflated, Ok(n) if n > cap) {
            tracing::debug!(offset = keyword, cap, "PDF stream refused while inflating");
            return Err(ExtractError::TooLarge(format!(
                "a part of it unpacks to more than {}",
                size_phrase(cap)
            )));
        }
        from = from.max(data + decoder.total_in() as usize);
    }
    Ok(())
}

/// Last offset of `needle` in `haystack`.
fn find_last(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|w| w == needle)
}

fn pdf_error(err: pdf_oxide::Error) -> ExtractError {
    match err {
        pdf_oxide::Error::EncryptedPdf => ExtractError::Encrypted,
        other => ExtractError::malformed(DocumentKind::Pdf, other),
    }
}

/// The `/Title` of the document information dictionary (ISO 32000-1 §14.3.3), if set.
fn pdf_info_title(doc: &pdf_oxide::document::PdfDocument) -> Option<String> {
    let info = doc.trailer().as_dict()?.get("Info")?.clone();
    let info = match info.as_reference() {
        Some(reference) => doc.load_object(reference).ok()?,
        None => info,
    };
    let title = info.as_dict()?.get("Title")?.clone();
    let title = match title.as_reference() {
        Some(reference) => doc.load_object(reference).ok()?,
        None => title,
    };
    let text = pdf_oxide::optional_content::decode_pdf_text_string(title.as_string()?);
    let text = one_line(&text);
    (!text.is_empty()).then_some(text)
}

// ---------------------------------------------------------------------------------------
// DOCX
// ---------------------------------------------------------------------------------------

/// Reads a Word document: the body from `word/document.xml`, heading levels from
/// `word/styles.xml` and the title from `docProps/core.xml`.
fn extract_docx(bytes: &[u8], out: &mut SectionSink<'_>) -> Result<Option<String>, ExtractError> {
    out.deadline.check()?;
    let mut package = DocxPackage::open(bytes)?;
    let document = package
        .read("word/document.xml", out)?
        .ok_or_else(|| ExtractError::malformed(DocumentKind::Docx, "no word/document.xml"))?;
    // Styles and properties are optional: when missing or unreadable, built-in style names
    // still mark headings and the title comes from the body.
    let styles = match package.read("word/styles.xml", out)? {
        Some(xml) => docx_heading_styles(&xml).unwrap_or_else(|err| {
            tracing::debug!(error = %err, "word/styles.xml unreadable; using built-in style names");
            HashMap::new()
        }),
        None => HashMap::new(),
    };
    let core_title = match package.read("docProps/core.xml", out)? {
        Some(xml) => docx_core_title(&xml).unwrap_or_else(|err| {
            tracing::debug!(error = %err, "docProps/core.xml unreadable; no title from it");
            None
        }),
        None => None,
    };
    let titles = docx_body(&document, &styles, out)?;
    Ok(core_title
        .or(titles.title_paragraph)
        .or(titles.first_heading))
}

/// A DOCX package (ZIP archive) whose parts are inflated under the zip-bomb defences of
/// [`ExtractLimits`]: declared sizes and ratios are checked before inflating, and the
/// bytes actually inflated are counted through [`Read::take`] while inflating, because
/// declared sizes can lie.
struct DocxPackage<'b> {
    archive: ZipArchive<Cursor<&'b [u8]>>,
    archive_len: u64,
    /// Bytes inflated so far over all parts read in full.
    inflated: u64,
    /// Most bytes inflated for any one part, including a refused one.
    largest_part: u64,
}

impl<'b> DocxPackage<'b> {
    fn open(bytes: &'b [u8]) -> Result<Self, ExtractError> {
        let archive = ZipArchive::new(Cursor::new(bytes)).map_err(zip_error)?;
        Ok(DocxPackage {
            archive,
            archive_len: bytes.len() as u64,
            inflated: 0,
            largest_part: 0,
        })
    }

    /// The part `name` as UTF-8 text (a byte-order mark dropped), or `None` when absent.
    fn read(&mut self, name: &str, out: &SectionSink<'_>) -> Result<Option<String>, ExtractError> {
        out.deadline.check()?;
        let Some(index) = self.archive.index_for_name(name) else {
            return Ok(None);
        };
        let mut part = self.archive.by_index(index).map_err(zip_error)?;
        let bounds = PartBounds {
            limits: out.limits,
            // A part's stored bytes lie inside the archive, so a declared compressed size
            // larger than the archive cannot dilute the ratio.
            stored: part.compressed_size().min(self.archive_len).max(1),
            inflated_before: self.inflated,
        };
        let declared = part.size();
        if let Some(err) = bounds.exceeded(declared) {
            tracing::debug!(
                part = name,
                declared,
                stored = bounds.stored,
                "DOCX part refused before inflating"
            );
            return Err(err);
        }
        let data = inflate_bounded(
            &mut part,
            declared,
            &bounds,
            &out.deadline,
            &mut self.largest_part,
        )
        .inspect_err(|_| {
            tracing::debug!(
                part = name,
                largest_part = self.largest_part,
                "DOCX part refused while inflating"
            )
        })?;
        self.inflated += data.len() as u64;
        let data = match data.strip_prefix(b"\xef\xbb\xbf") {
            Some(rest) => rest.to_vec(),
            None => data,
        };
        String::from_utf8(data)
            .map(Some)
            .map_err(|err| ExtractError::malformed(DocumentKind::Docx, err))
    }
}

/// The zip-bomb bounds on one DOCX part.
struct PartBounds<'a> {
    limits: &'a ExtractLimits,
    /// Compressed bytes of the part (at least 1).
    stored: u64,
    /// Bytes inflated for earlier parts.
    inflated_before: u64,
}

impl PartBounds<'_> {
    /// The limit `inflated` bytes of this part exceed, if any: the entry size, the total
    /// over all parts, or (from [`RATIO_CHECK_FLOOR`] on) the compression ratio.
    fn exceeded(&self, inflated: u64) -> Option<ExtractError> {
        let limits = self.limits;
        let ratio = limits.max_compression_ratio;
        if inflated > limits.max_docx_entry_bytes {
            Some(ExtractError::TooLarge(format!(
                "a part of it unpacks to more than {}",
                size_phrase(limits.max_docx_entry_bytes)
            )))
        } else if self.inflated_before.saturating_add(inflated) > limits.max_docx_total_bytes {
            Some(ExtractError::TooLarge(format!(
                "its parts unpack to more than {} in total",
                size_phrase(limits.max_docx_total_bytes)
            )))
        } else if inflated >= RATIO_CHECK_FLOOR && inflated / self.stored > ratio {
            Some(ExtractError::TooLarge(format!(
                "a part of it unpacks to more than {ratio} times its stored size"
            )))
        } else {
            None
        }
    }
}

/// Reads an inflating `reader` into memory, counting the bytes it actually yields and
/// stopping at the first read that crosses a bound of `bounds` (so at most one 64 KiB
/// buffer past it), whatever size was declared. `declared` only sizes the first
/// allocation (capped at 1 MiB). `largest` records the most bytes held, for diagnostics.
fn inflate_bounded(
    reader: impl Read,
    declared: u64,
    bounds: &PartBounds<'_>,
    deadline: &Deadline,
    largest: &mut u64,
) -> Result<Vec<u8>, ExtractError> {
    const BUFFER: usize = 64 * 1024;
    let limits = bounds.limits;
    let cap = limits.max_docx_entry_bytes.min(
        limits
            .max_docx_total_bytes
            .saturating_sub(bounds.inflated_before),
    );
    let mut data = Vec::with_capacity(declared.min(cap).min(1 << 20) as usize);
    let mut limited = reader.take(cap.saturating_add(1));
    let mut buf = vec![0u8; BUFFER];
    let mut next_clock_check = 4u64 << 20;
    loop {
        let n = limited
            .read(&mut buf)
            .map_err(|err| ExtractError::malformed(DocumentKind::Docx, err))?;
        if n == 0 {
            return Ok(data);
        }
        data.extend_from_slice(&buf[..n]);
        let inflated = data.len() as u64;
        *largest = (*largest).max(inflated);
        if let Some(err) = bounds.exceeded(inflated) {
            return Err(err);
        }
        if inflated >= next_clock_check {
            deadline.check()?;
            next_clock_check += 4 << 20;
        }
    }
}

fn zip_error(err: zip::result::ZipError) -> ExtractError {
    match err {
        zip::result::ZipError::UnsupportedArchive(msg)
            if msg == zip::result::ZipError::PASSWORD_REQUIRED =>
        {
            ExtractError::Encrypted
        }
        zip::result::ZipError::InvalidPassword => ExtractError::Encrypted,
        other => ExtractError::malformed(DocumentKind::Docx, other),
    }
}

/// The `w:val` (or any `val`) attribute of a WordprocessingML element.
fn xml_val(element: &BytesStart<'_>) -> Option<String> {
    xml_attr(element, "val")
}

/// The attribute with local name `name`, unescaped. Namespace prefixes are ignored: OOXML
/// producers are free to choose them.
fn xml_attr(element: &BytesStart<'_>, name: &str) -> Option<String> {
    element
        .attributes()
        .flatten()
        .find(|a| a.key.local_name().as_ref() == name)
        .and_then(|a| {
            a.normalized_value(quick_xml::XmlVersion::default())
                .ok()
                .map(Cow::into_owned)
        })
}

/// The text of an entity or character reference (`&amp;`, `&#x41;`).
fn xml_reference(reference: &quick_xml::events::BytesRef<'_>) -> Option<String> {
    if let Ok(Some(c)) = reference.resolve_char_ref() {
        return Some(c.to_string());
    }
    quick_xml::escape::resolve_predefined_entity(reference).map(str::to_owned)
}

/// Heading level of a style name: 0 for "Title", 1–9 for "heading 1" … "heading 9" (the
/// built-in style names of ECMA-376 part 1 §17.7, which stay English in localised Word
/// while style ids are translated), case and spaces ignored so that style ids such as
/// `Heading2` match too.
fn heading_level_of_name(name: &str) -> Option<u8> {
    let name = name.trim().to_ascii_lowercase();
    if name == "title" {
        return Some(0);
    }
    match name.strip_prefix("heading")?.trim().parse::<u8>() {
        Ok(level @ 1..=9) => Some(level),
        _ => None,
    }
}

#[derive(Debug, Default)]
struct StyleDefinition {
    id: String,
    name: String,
    outline_level: Option<u8>,
    based_on: Option<String>,
    paragraph: bool,
}

/// Maps paragraph style ids to heading levels (0 = Title, 1–9 = Heading 1–9), from the
/// style's name, else its outline level (`w:outlineLvl` 0–8), else the style it is based on.
fn docx_heading_styles(xml: &str) -> Result<HashMap<String, u8>, quick_xml::Error> {
    let mut reader = XmlReader::from_str(xml);
    let mut definitions: HashMap<String, StyleDefinition> = HashMap::new();
    let mut current: Option<StyleDefinition> = None;
    loop {
        let event = reader.read_event()?;
        let (element, empty) = match &event {
            XmlEvent::Start(e) => (e, false),
            XmlEvent::Empty(e) => (e, true),
            XmlEvent::End(e) if e.local_name().as_ref() == "style" => {
                if let Some(def) = current.take() {
                    definitions.insert(def.id.clone(), def);
                }
                continue;
            }
            XmlEvent::Eof => break,
            _ => continue,
        };
        match element.local_name().as_ref() {
            "style" => {
                let def = StyleDefinition {
                    id: xml_attr(element, "styleId").unwrap_or_default(),
                    paragraph: xml_attr(element, "type").is_none_or(|t| t == "paragraph"),
                    ..StyleDefinition::default()
                };
                if empty {
                    definitions.insert(def.id.clone(), def);
                } else {
                    current = Some(def);
                }
            }
            "name" => {
                if let Some(def) = current.as_mut() {
                    def.name = xml_val(element).unwrap_or_default();
                }
            }
            "basedOn" => {
                if let Some(def) = current.as_mut() {
                    def.based_on = xml_val(element);
                }
            }
            "outlineLvl" => {
                if let Some(def) = current.as_mut() {
                    def.outline_level = xml_val(element).and_then(|v| v.parse().ok());
                }
            }
            _ => {}
        }
    }
    fn level(definitions: &HashMap<String, StyleDefinition>, id: &str, depth: u8) -> Option<u8> {
        let def = definitions.get(id)?;
        if let Some(level) = heading_level_of_name(&def.name) {
            return Some(level);
        }
        match def.outline_level {
            Some(outline) if outline < 9 => return Some(outline + 1),
            Some(_) => return None,
            None => {}
        }
        // Word limits basedOn chains; the bound also stops cycles.
        if depth >= 16 {
            return None;
        }
        level(definitions, def.based_on.as_deref()?, depth + 1)
    }
    Ok(definitions
        .values()
        .filter(|def| def.paragraph)
        .filter_map(|def| Some((def.id.clone(), level(&definitions, &def.id, 0)?)))
        .collect())
}

/// The `dc:title` of the core properties part (ECMA-376 part 2, core properties), if not
/// blank.
fn docx_core_title(xml: &str) -> Result<Option<String>, quick_xml::Error> {
    let mut reader = XmlReader::from_str(xml);
    let mut inside = false;
    let mut title = String::new();
    loop {
        match reader.read_event()? {
            XmlEvent::Start(e) if e.local_name().as_ref() == "title" => inside = true,
            XmlEvent::End(e) if e.local_name().as_ref() == "title" => break,
            XmlEvent::Text(t) if inside => title.push_str(&t.xml10_content()),
            XmlEvent::GeneralRef(r) if inside => {
                title.push_str(&xml_reference(&r).unwrap_or_default())
            }
            XmlEvent::Eof => break,
            _ => {}
        }
    }
    let title = one_line(&title);
    Ok((!title.is_empty()).then_some(title))
}

/// Titles seen in a DOCX body.
#[derive(Debug, Default)]
struct DocxTitles {
    /// The first Title-styled paragraph.
    title_paragraph: Option<String>,
    /// The first Heading 1–9 paragraph.
    first_heading: Option<String>,
}

/// Walks `word/document.xml` (ECMA-376 part 1 §17): paragraphs (`w:p`) with their runs'
/// text (`w:t`; `w:tab` and `w:br` as whitespace; deleted text and field codes skipped),
/// heading paragraphs by style or outline level, and tables (`w:tbl`) row by row. Text in
/// text boxes is kept with the paragraph that anchors them; the fallback copy of
/// alternate content (`mc:Fallback`) is skipped so it is not read twice.
fn docx_body(
    xml: &str,
    styles: &HashMap<String, u8>,
    out: &mut SectionSink<'_>,
) -> Result<DocxTitles, ExtractError> {
    let mut reader = XmlReader::from_str(xml);
    let mut body = DocxBody::new(styles);
    let mut events = 0u32;
    loop {
        events = events.wrapping_add(1);
        if events.is_multiple_of(4096) {
            out.deadline.check()?;
        }
        let event = reader
            .read_event()
            .map_err(|err| ExtractError::malformed(DocumentKind::Docx, err))?;
        match event {
            XmlEvent::Start(e) => body.open(&e, false),
            XmlEvent::Empty(e) => body.open(&e, true),
            XmlEvent::End(e) => body.close(e.local_name().as_ref(), out)?,
            XmlEvent::Text(t) if body.capturing() => body.paragraph.push_str(&t.xml10_content()),
            XmlEvent::CData(t) if body.capturing() => body.paragraph.push_str(&t.xml10_content()),
            XmlEvent::GeneralRef(r) if body.capturing() => body
                .paragraph
                .push_str(&xml_reference(&r).unwrap_or_default()),
            XmlEvent::Eof => break,
            _ => {}
        }
    }
    body.flush(out)?;
    Ok(body.titles)
}

struct DocxBody<'s> {
    styles: &'s HashMap<String, u8>,
    /// Open headings, outermost first: (level, text).
    headings: Vec<(u8, String)>,
    /// Text of the current section.
    text: String,
    /// Characters in `text`, counted against the limit before the section is pushed.
    text_chars: usize,
    paragraph: String,
    paragraph_depth: u32,
    paragraph_level: Option<u8>,
    properties_depth: u32,
    in_run_text: bool,
    skip_depth: u32,
    table_depth: u32,
    row: Vec<String>,
    cell: String,
    titles: DocxTitles,
}

impl<'s> DocxBody<'s> {
    fn new(styles: &'s HashMap<String, u8>) -> Self {
        DocxBody {
            styles,
            headings: Vec::new(),
            text: String::new(),
            text_chars: 0,
            paragraph: String::new(),
            paragraph_depth: 0,
            paragraph_level: None,
            properties_depth: 0,
            in_run_text: false,
            skip_depth: 0,
            table_depth: 0,
            row: Vec::new(),
            cell: String::new(),
            titles: DocxTitles::default(),
        }
    }

    fn capturing(&self) -> bool {
        self.in_run_text && self.skip_depth == 0 && self.paragraph_depth > 0
    }

    fn in_run(&self) -> bool {
        self.paragraph_depth > 0 && self.properties_depth == 0 && self.skip_depth == 0
    }

    fn open(&mut self, e: &BytesStart<'_>, empty: bool) {
        match e.local_name().as_ref() {
            "p" if !empty => {
                self.paragraph_depth += 1;
                if self.paragraph_depth == 1 {
                    self.paragraph.clear();
                    self.paragraph_level = None;
                } else {
                    self.separate_nested();
                }
            }
            "pPr" if !empty => self.properties_depth += 1,
            "pStyle" if self.paragraph_depth == 1 => {
                if let Some(id) = xml_val(e) {
                    self.paragraph_level = self
                        .styles
                        .get(&id)
                        .copied()
                        .or_else(|| heading_level_of_name(&id));
                }
            }
            "outlineLvl" if self.paragraph_depth == 1 && self.properties_depth > 0 => {
                if let Some(outline) = xml_val(e).and_then(|v| v.parse::<u8>().ok()) {
                    self.paragraph_level = (outline < 9).then_some(outline + 1);
                }
            }
            "t" if !empty => self.in_run_text = true,
            "tab" | "ptab" if self.in_run() => self.paragraph.push('\t'),
            "br" | "cr" if self.in_run() => self.paragraph.push('\n'),
            "noBreakHyphen" if self.in_run() => self.paragraph.push('-'),
            "Fallback" if !empty => self.skip_depth += 1,
            "tbl" if !empty => self.table_depth += 1,
            "tr" if !empty && self.table_depth == 1 => self.row.clear(),
            "tc" if !empty && self.table_depth == 1 => self.cell.clear(),
            _ => {}
        }
    }

    fn close(&mut self, name: &str, out: &mut SectionSink<'_>) -> Result<(), ExtractError> {
        match name {
            "p" if self.paragraph_depth > 0 => {
                self.paragraph_depth -= 1;
                if self.paragraph_depth == 0 {
                    self.end_paragraph(out)?;
                } else {
                    self.separate_nested();
                }
            }
            "pPr" => self.properties_depth = self.properties_depth.saturating_sub(1),
            "t" => self.in_run_text = false,
            "Fallback" => self.skip_depth = self.skip_depth.saturating_sub(1),
            "tc" if self.table_depth == 1 => {
                let cell = one_line(&self.cell);
                self.row.push(cell);
            }
            "tr" if self.table_depth == 1 => {
                if self.row.iter().any(|c| !c.is_empty()) {
                    let line = self.row.join(" | ");
                    self.append(&line, "\n", out)?;
                }
                self.row.clear();
            }
            "tbl" if self.table_depth > 0 => {
                self.table_depth -= 1;
                if self.table_depth == 0 {
                    self.text.push('\n');
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Keeps a nested paragraph's text (a text box) apart from its anchor's by one space.
    fn separate_nested(&mut self) {
        if !self.paragraph.is_empty() && !self.paragraph.ends_with(char::is_whitespace) {
            self.paragraph.push(' ');
        }
    }

    fn end_paragraph(&mut self, out: &mut SectionSink<'_>) -> Result<(), ExtractError> {
        let paragraph = std::mem::take(&mut self.paragraph);
        let paragraph = paragraph.trim();
        if paragraph.is_empty() {
            return Ok(());
        }
        if self.table_depth > 0 {
            if !self.cell.is_empty() {
                self.cell.push(' ');
            }
            self.cell.push_str(paragraph);
            return Ok(());
        }
        match self.paragraph_level {
            Some(level) => {
                self.flush(out)?;
                let heading = one_line(paragraph);
                while self.headings.last().is_some_and(|(open, _)| *open >= level) {
                    self.headings.pop();
                }
                if level == 0 && self.titles.title_paragraph.is_none() {
                    self.titles.title_paragraph = Some(heading.clone());
                }
                if level > 0 && self.titles.first_heading.is_none() {
                    self.titles.first_heading = Some(heading.clone());
                }
                self.headings.push((level, heading));
                Ok(())
            }
            None => self.append(paragraph, "\n\n", out),
        }
    }

    /// Appends to the current section, enforcing the character limit as text accumulates.
    fn append(&mut self, text: &str, end: &str, out: &SectionSink<'_>) -> Result<(), ExtractError> {
        self.text_chars += text.chars().count();
        out.check_chars(self.text_chars)?;
        self.text.push_str(text);
        self.text.push_str(end);
        Ok(())
    }

    /// Ends the current section under the open headings.
    fn flush(&mut self, out: &mut SectionSink<'_>) -> Result<(), ExtractError> {
        let path: Vec<String> = self.headings.iter().map(|(_, h)| h.clone()).collect();
        out.push(&path, &self.text, None)?;
        self.text.clear();
        self.text_chars = 0;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Markdown
// ---------------------------------------------------------------------------------------

/// Reads Markdown with `pulldown-cmark` (CommonMark plus tables, task lists, strikethrough
/// and footnotes), one section per heading.
fn extract_markdown(
    bytes: &[u8],
    out: &mut SectionSink<'_>,
) -> Result<Option<String>, ExtractError> {
    let text = decode_text(bytes).map_err(|what| ExtractError::Unsupported(what.to_owned()))?;
    out.deadline.check()?;
    // The rendering is never longer than the source, so the source bounds the work.
    out.check_chars(text.chars().count())?;
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_HEADING_ATTRIBUTES
        | Options::ENABLE_YAML_STYLE_METADATA_BLOCKS;
    let mut doc = MarkdownSections::default();
    for (i, event) in Parser::new_ext(&text, options).enumerate() {
        if i % 4096 == 4095 {
            out.deadline.check()?;
        }
        doc.event(event, out)?;
    }
    doc.flush(out)?;
    Ok(doc.title)
}

/// Renders Markdown events back into Markdown-like plain text, split at headings.
#[derive(Default)]
struct MarkdownSections {
    /// Open headings, outermost first: (level 1–6, text).
    headings: Vec<(u8, String)>,
    /// Text of the current section.
    body: String,
    /// Text of the heading being read.
    heading: Option<String>,
    /// Text of the table cell being read.
    cell: Option<String>,
    /// Text of the code block being read.
    code: Option<(String, String)>,
    row: Vec<String>,
    /// Open lists: the next item number of ordered ones.
    lists: Vec<Option<u64>>,
    in_metadata: bool,
    title: Option<String>,
}

impl MarkdownSections {
    /// Where inline text goes now: a heading, a table cell, a code block or the body.
    fn sink(&mut self) -> &mut String {
        if let Some(heading) = self.heading.as_mut() {
            heading
        } else if let Some(cell) = self.cell.as_mut() {
            cell
        } else if let Some((_, code)) = self.code.as_mut() {
            code
        } else {
            &mut self.body
        }
    }

    /// Whether inline text is going into a one-line container (heading or table cell).
    fn inline_only(&self) -> bool {
        self.heading.is_some() || self.cell.is_some()
    }

    /// Ends the current block: a blank line, or a line break inside a list.
    fn block_break(&mut self) {
        if self.body.is_empty() {
            return;
        }
        let wanted = if self.lists.is_empty() { "\n\n" } else { "\n" };
        while !self.body.ends_with(wanted) {
            self.body.push('\n');
        }
    }

    fn line_break(&mut self) {
        if !self.body.is_empty() && !self.body.ends_with('\n') {
            self.body.push('\n');
        }
    }

    fn event(&mut self, event: MdEvent<'_>, out: &mut SectionSink<'_>) -> Result<(), ExtractError> {
        match event {
            MdEvent::Start(tag) => self.start(tag),
            MdEvent::End(tag) => self.end(tag, out)?,
            MdEvent::Text(text) if !self.in_metadata => self.sink().push_str(&text),
            MdEvent::Code(code) => {
                if self.heading.is_some() {
                    self.sink().push_str(&code);
                } else {
                    let sink = self.sink();
                    sink.push('`');
                    sink.push_str(&code);
                    sink.push('`');
                }
            }
            MdEvent::InlineMath(math) => {
                let sink = self.sink();
                sink.push('$');
                sink.push_str(&math);
                sink.push('$');
            }
            MdEvent::DisplayMath(math) => {
                let sink = self.sink();
                sink.push_str("$$");
                sink.push_str(&math);
                sink.push_str("$$");
            }
            MdEvent::SoftBreak | MdEvent::HardBreak => {
                let separator = if self.inline_only() { ' ' } else { '\n' };
                self.sink().push(separator);
            }
            MdEvent::Rule => self.block_break(),
            MdEvent::FootnoteReference(label) => {
                let sink = self.sink();
                sink.push_str("[^");
                sink.push_str(&label);
                sink.push(']');
            }
            MdEvent::TaskListMarker(done) => {
                self.sink().push_str(if done { "[x] " } else { "[ ] " });
            }
            // Raw HTML is markup, not text; metadata is not part of the text.
            _ => {}
        }
        Ok(())
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Heading { .. } => self.heading = Some(String::new()),
            Tag::Paragraph | Tag::BlockQuote(_) | Tag::HtmlBlock if self.lists.is_empty() => {
                self.block_break();
            }
            Tag::CodeBlock(kind) => {
                self.block_break();
                let language = match kind {
                    CodeBlockKind::Fenced(info) => info
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((language, String::new()));
            }
            Tag::List(first) => {
                if self.lists.is_empty() {
                    self.block_break();
                } else {
                    self.line_break();
                }
                self.lists.push(first);
            }
            Tag::Item => {
                self.line_break();
                let indent = "  ".repeat(self.lists.len().saturating_sub(1));
                let marker = match self.lists.last_mut() {
                    Some(Some(number)) => {
                        let marker = format!("{number}. ");
                        *number += 1;
                        marker
                    }
                    _ => "- ".to_owned(),
                };
                self.body.push_str(&indent);
                self.body.push_str(&marker);
            }
            Tag::Table(_) => self.block_break(),
            Tag::TableHead | Tag::TableRow => self.row.clear(),
            Tag::TableCell => self.cell = Some(String::new()),
            Tag::FootnoteDefinition(label) => {
                self.block_break();
                self.body.push_str("[^");
                self.body.push_str(&label);
                self.body.push_str("]: ");
            }
            Tag::MetadataBlock(_) => self.in_metadata = true,
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd, out: &mut SectionSink<'_>) -> Result<(), ExtractError> {
        match tag {
            TagEnd::Heading(level) => {
                let heading = one_line(&self.heading.take().unwrap_or_default());
                if heading.is_empty() {
                    return Ok(());
                }
                self.flush(out)?;
                let level = heading_level_number(level);
                while self.headings.last().is_some_and(|(open, _)| *open >= level) {
                    self.headings.pop();
                }
                if level == 1 && self.title.is_none() {
                    self.title = Some(heading.clone());
                }
                self.headings.push((level, heading));
            }
            TagEnd::Paragraph | TagEnd::BlockQuote(_) | TagEnd::HtmlBlock => self.block_break(),
            TagEnd::CodeBlock => {
                if let Some((language, code)) = self.code.take() {
                    // A fence longer than any backtick run inside the code.
                    let longest = code.split(|c| c != '`').map(str::len).max().unwrap_or(0);
                    let fence = "`".repeat(longest.max(2) + 1);
                    self.body.push_str(&fence);
                    self.body.push_str(&language);
                    self.body.push('\n');
                    self.body.push_str(&code);
                    self.line_break();
                    self.body.push_str(&fence);
                    self.block_break();
                }
            }
            TagEnd::List(_) => {
                self.lists.pop();
                if self.lists.is_empty() {
                    self.block_break();
                } else {
                    self.line_break();
                }
            }
            TagEnd::Item => self.line_break(),
            TagEnd::TableCell => {
                let cell = one_line(&self.cell.take().unwrap_or_default());
                self.row.push(cell);
            }
            TagEnd::TableHead | TagEnd::TableRow => {
                let row = std::mem::take(&mut self.row).join(" | ");
                self.body.push_str(&row);
                self.body.push('\n');
            }
            TagEnd::Table | TagEnd::FootnoteDefinition => self.block_break(),
            TagEnd::MetadataBlock(_) => self.in_metadata = false,
            _ => {}
        }
        Ok(())
    }

    /// Ends the current section under the open headings.
    fn flush(&mut self, out: &mut SectionSink<'_>) -> Result<(), ExtractError> {
        let path: Vec<String> = self.headings.iter().map(|(_, h)| h.clone()).collect();
        out.push(&path, &self.body, None)?;
        self.body.clear();
        Ok(())
    }
}

fn heading_level_number(level: HeadingLevel) -> u8 {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

// ---------------------------------------------------------------------------------------
// Plain text
// ---------------------------------------------------------------------------------------

/// Reads plain text: the title is the first non-empty line when short; the text is one
/// section unless longer than [`TEXT_SECTION_BYTES`], when it is cut at paragraph breaks.
fn extract_text(bytes: &[u8], out: &mut SectionSink<'_>) -> Result<Option<String>, ExtractError> {
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
    use std::io::Write;
    use std::path::Path;

    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/knowledge")
            .join(name);
        std::fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
    }

    fn run(bytes: &[u8], kind: DocumentKind) -> Result<Extracted, ExtractError> {
        extract(bytes, kind, &ExtractLimits::default())
    }

    fn unsupported(bytes: &[u8]) -> String {
        match detect(bytes) {
            Err(ExtractError::Unsupported(what)) => what,
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }

    /// A ZIP archive of `parts`, deflated.
    fn zip_of(parts: &[(&str, &[u8])]) -> Vec<u8> {
        let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, data) in parts {
            writer.start_file(*name, options).unwrap();
            writer.write_all(data).unwrap();
        }
        writer.finish().unwrap().into_inner()
    }

    const CONTENT_TYPES: &[u8] = br#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#;

    /// A Word document whose body is `body` (WordprocessingML inside `w:body`), with
    /// `extra` parts.
    fn docx_of(body: &str, extra: &[(&str, &[u8])]) -> Vec<u8> {
        let document = format!(
            r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"><w:body>{body}</w:body></w:document>"#
        );
        let mut parts: Vec<(&str, &[u8])> = vec![
            ("[Content_Types].xml", CONTENT_TYPES),
            ("word/document.xml", document.as_bytes()),
        ];
        parts.extend_from_slice(extra);
        zip_of(&parts)
    }

    fn paragraph(style: Option<&str>, text: &str) -> String {
        let properties = style
            .map(|s| format!(r#"<w:pPr><w:pStyle w:val="{s}"/></w:pPr>"#))
            .unwrap_or_default();
        format!("<w:p>{properties}<w:r><w:t>{text}</w:t></w:r></w:p>")
    }

    /// A small valid PDF with one page per entry of `pages` (Helvetica text; an empty entry
    /// gives a page without text) and an optional `/Title`.
    fn minimal_pdf(title: Option<&str>, pages: &[&str]) -> Vec<u8> {
        minimal_pdf_with_trailer(title, pages, "")
    }

    /// [`minimal_pdf`] with `extra` entries in the trailer dictionary.
    fn minimal_pdf_with_trailer(title: Option<&str>, pages: &[&str], extra: &str) -> Vec<u8> {
        let page_ids: Vec<usize> = (0..pages.len()).map(|i| 5 + 2 * i).collect();
        let kids = page_ids
            .iter()
            .map(|id| format!("{id} 0 R"))
            .collect::<Vec<_>>()
            .join(" ");
        let mut objects = vec![
            "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
            format!("<< /Type /Pages /Kids [{kids}] /Count {} >>", pages.len()),
            "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned(),
            match title {
                Some(title) => format!("<< /Title ({title}) /Producer (tests) >>"),
                None => "<< /Producer (tests) >>".to_owned(),
            },
        ];
        for (page, text) in page_ids.iter().zip(pages) {
            let content = if text.is_empty() {
                String::new()
            } else {
                format!("BT /F1 12 Tf 72 720 Td ({text}) Tj ET")
            };
            objects.push(format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
                page + 1
            ));
            objects.push(format!(
                "<< /Length {} >>\nstream\n{content}\nendstream",
                content.len()
            ));
        }
        let mut pdf = b"%PDF-1.4\n".to_vec();
        let mut offsets = Vec::new();
        for (i, object) in objects.iter().enumerate() {
            offsets.push(pdf.len());
            pdf.extend_from_slice(format!("{} 0 obj\n{object}\nendobj\n", i + 1).as_bytes());
        }
        let xref = pdf.len();
        pdf.extend_from_slice(
            format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
        );
        for offset in offsets {
            pdf.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
        }
        pdf.extend_from_slice(
            format!(
                "trailer\n<< /Size {} /Root 1 0 R /Info 4 0 R {extra} >>\nstartxref\n{xref}\n%%EOF\n",
                objects.len() + 1
            )
            .as_bytes(),
        );
        pdf
    }

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

    // --- Detection ----------------------------------------------------------------------

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

    // --- PDF ----------------------------------------------------------------------------

    #[test]
    fn pdf_yields_numbered_pages_with_their_text() {
        let doc = run(&fixture("shared-mime-info-spec.pdf"), DocumentKind::Pdf).unwrap();
        assert_eq!(doc.kind, DocumentKind::Pdf);
        // The information dictionary's /Title is empty, so the first line is the title.
        assert_eq!(doc.title.as_deref(), Some("Shared MIME-info Database"));
        let pages: Vec<u32> = doc.sections.iter().map(|s| s.page.unwrap()).collect();
        assert_eq!(pages, (1..=17).collect::<Vec<u32>>());
        assert!(doc.sections.iter().all(|s| s.heading_path.is_empty()));
        assert!(doc.sections[0].text.contains(
            "This is version 0.21 of the Shared MIME-info Database specification, last updated 2 October 2018."
        ));
        let page_of = |phrase: &str| {
            doc.sections
                .iter()
                .find(|s| s.text.contains(phrase))
                .and_then(|s| s.page)
        };
        assert_eq!(page_of("2.2. The source XML files"), Some(4));
        assert_eq!(
            page_of("The MIME database is NOT intended to store user preferences."),
            Some(17)
        );
    }

    #[test]
    fn pdf_title_comes_from_the_information_dictionary() {
        let pdf = minimal_pdf(
            Some("Quarterly Report"),
            &["First page words", "Second page words"],
        );
        assert_eq!(detect(&pdf), Ok(DocumentKind::Pdf));
        let doc = run(&pdf, DocumentKind::Pdf).unwrap();
        assert_eq!(doc.title.as_deref(), Some("Quarterly Report"));
        assert_eq!(doc.sections.len(), 2);
        assert_eq!(doc.sections[1].page, Some(2));
        assert!(doc.sections[1].text.contains("Second page words"));
    }

    #[test]
    fn password_protected_pdf_is_reported_as_such() {
        // A standard security handler (AES-256, revision 6) whose keys match no password,
        // not even the empty one that opens owner-password-only files.
        let hex = |byte: &str| byte.repeat(48);
        let encrypt = format!(
            "/Encrypt << /Filter /Standard /V 5 /R 6 /Length 256 /P -4 /O <{}> /U <{}> /OE <{}> /UE <{}> /Perms <{}> /CF << /StdCF << /CFM /AESV3 /AuthEvent /DocOpen /Length 32 >> >> /StmF /StdCF /StrF /StdCF >> /ID [<00112233445566778899aabbccddeeff> <00112233445566778899aabbccddeeff>]",
            hex("a1"),
            hex("b2"),
            "c3".repeat(32),
            "d4".repeat(32),
            "e5".repeat(16)
        );
        let pdf = minimal_pdf_with_trailer(Some("Secret"), &["Hidden words"], &encrypt);
        assert_eq!(detect(&pdf), Ok(DocumentKind::Pdf));
        assert_eq!(run(&pdf, DocumentKind::Pdf), Err(ExtractError::Encrypted));
    }

    /// A one-page PDF whose content stream is `stream_dictionary` with `data`.
    fn pdf_with_stream(stream_dictionary: &str, data: &[u8]) -> Vec<u8> {
        let mut pdf = minimal_pdf(None, &["placeholder"]);
        let content = b"BT /F1 12 Tf 72 720 Td (placeholder) Tj ET";
        let header = format!("<< /Length {} >>", content.len());
        let header_at = find(&pdf, header.as_bytes()).unwrap();
        let tail = pdf.split_off(find(&pdf, content).unwrap() + content.len());
        pdf.truncate(header_at);
        pdf.extend_from_slice(format!("{stream_dictionary}\nstream\n").as_bytes());
        pdf.extend_from_slice(data);
        // The cross-reference offsets are now wrong; readers rebuild them.
        pdf.extend_from_slice(&tail);
        pdf
    }

    fn zlib(data: &[u8], repeat: usize) -> Vec<u8> {
        use flate2::{write::ZlibEncoder, Compression};
        let mut encoder = ZlibEncoder::new(Vec::new(), Compression::default());
        for _ in 0..repeat {
            encoder.write_all(data).unwrap();
        }
        encoder.finish().unwrap()
    }

    #[test]
    fn pdf_decompression_bomb_is_refused_before_parsing() {
        // One page whose content stream inflates to 300 MiB of spaces.
        let stream = zlib(&[b' '; 1 << 20], 300);
        let dictionary = format!("<< /Length {} /Filter /FlateDecode >>", stream.len());
        let bomb = pdf_with_stream(&dictionary, &stream);
        assert!(bomb.len() < 1 << 20);
        let started = Instant::now();
        assert_eq!(
            run(&bomb, DocumentKind::Pdf),
            Err(ExtractError::TooLarge(
                "a part of it unpacks to more than 64 MiB".into()
            ))
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        // An image stream is not inflated (text extraction never decodes images).
        let image = format!(
            "<< /Type /XObject /Subtype /Image /Width 1 /Height 1 /Length {} /Filter /FlateDecode >>",
            stream.len()
        );
        assert!(check_pdf_streams(
            &pdf_with_stream(&image, &stream),
            &SectionSink::new(&ExtractLimits::default())
        )
        .is_ok());
    }

    #[test]
    fn pdf_with_a_compressed_content_stream_is_read() {
        let content = b"BT /F1 12 Tf 72 720 Td (Compressed words) Tj ET";
        let stream = zlib(content, 1);
        let dictionary = format!("<< /Length {} /Filter /FlateDecode >>", stream.len());
        let doc = run(&pdf_with_stream(&dictionary, &stream), DocumentKind::Pdf).unwrap();
        assert!(doc.sections[0].text.contains("Compressed words"), "{doc:?}");
        let limits = ExtractLimits {
            max_pdf_stream_bytes: 16,
            ..ExtractLimits::default()
        };
        assert_eq!(
            extract(
                &pdf_with_stream(&dictionary, &stream),
                DocumentKind::Pdf,
                &limits
            ),
            Err(ExtractError::TooLarge(
                "a part of it unpacks to more than 16 bytes".into()
            ))
        );
    }

    #[test]
    fn pdf_without_text_has_no_text() {
        let pdf = minimal_pdf(None, &["", ""]);
        assert_eq!(run(&pdf, DocumentKind::Pdf), Err(ExtractError::NoText));
    }

    #[test]
    fn truncated_pdf_fails_cleanly() {
        let pdf = fixture("shared-mime-info-spec.pdf");
        for percent in [40, 95] {
            let cut = &pdf[..pdf.len() * percent / 100];
            assert_eq!(detect(cut), Ok(DocumentKind::Pdf));
            assert_eq!(
                run(cut, DocumentKind::Pdf),
                Err(ExtractError::Malformed("PDF".into())),
                "cut at {percent}%"
            );
        }
        // Trailing bytes after the end marker are tolerated, as readers do.
        let mut padded = pdf.clone();
        padded.extend_from_slice(&[b'\n'; 300]);
        assert_eq!(run(&padded, DocumentKind::Pdf).unwrap().sections.len(), 17);
    }

    #[test]
    fn garbage_behind_a_pdf_header_is_refused_without_panicking() {
        for bytes in [
            &b"%PDF-1.7\nthis is not a PDF body at all\n%%EOF\n"[..],
            &b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 9 0 R >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF"[..],
        ] {
            let result = run(bytes, DocumentKind::Pdf);
            assert!(
                matches!(result, Err(ExtractError::Malformed(_) | ExtractError::NoText)),
                "{result:?}"
            );
        }
        // Bytes that are no PDF at all, read as one.
        assert!(matches!(
            run(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", DocumentKind::Pdf),
            Err(ExtractError::Malformed(_))
        ));
    }

    #[test]
    fn pdf_page_limit_refuses_longer_documents() {
        let limits = ExtractLimits {
            max_pdf_pages: 10,
            ..ExtractLimits::default()
        };
        let result = extract(
            &fixture("shared-mime-info-spec.pdf"),
            DocumentKind::Pdf,
            &limits,
        );
        assert_eq!(
            result,
            Err(ExtractError::TooLarge(
                "it has 17 pages and the limit is 10".into()
            ))
        );
    }

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

    // --- DOCX ---------------------------------------------------------------------------

    #[test]
    fn docx_yields_title_headings_and_text() {
        let doc = run(&fixture("MPL-2.0.docx"), DocumentKind::Docx).unwrap();
        // dc:title is empty in this file, so the Title-styled paragraph is the title.
        assert_eq!(
            doc.title.as_deref(),
            Some("Mozilla Public License Version 2.0")
        );
        let definitions = doc
            .sections
            .iter()
            .find(|s| {
                s.text
                    .contains("\"Contributor\" means each individual or legal entity")
            })
            .expect("the definitions section");
        assert_eq!(definitions.heading_path.len(), 2);
        assert_eq!(
            definitions.heading_path[0],
            "Mozilla Public License Version 2.0"
        );
        assert!(definitions.heading_path[1].starts_with("1. Definitions"));
        assert_eq!(definitions.page, None);
        let grants = doc
            .sections
            .iter()
            .find(|s| s.heading_path.last().map(String::as_str) == Some("2.1. Grants"))
            .expect("the 2.1 section");
        assert!(grants.heading_path[1].starts_with("2. License Grants and Conditions"));
        assert!(grants.text.contains("non-exclusive license"));
        // A Heading 1 closes the previous Heading 2.
        let versions = doc
            .sections
            .iter()
            .find(|s| s.heading_path.last().map(String::as_str) == Some("10.1. New Versions"))
            .expect("the 10.1 section");
        assert!(versions.heading_path[1].starts_with("10. Versions of the License"));
        assert_eq!(versions.heading_path.len(), 3);
    }

    #[test]
    fn docx_reads_styles_tables_and_skips_deleted_text() {
        let styles = br#"<?xml version="1.0" encoding="UTF-8"?><w:styles xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:style w:type="paragraph" w:styleId="berschrift1"><w:name w:val="heading 1"/></w:style><w:style w:type="paragraph" w:styleId="Kapitel"><w:name w:val="Kapitel"/><w:basedOn w:val="berschrift1"/></w:style><w:style w:type="paragraph" w:styleId="Gliederung"><w:name w:val="Gliederung"/><w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style><w:style w:type="paragraph" w:styleId="Standard"><w:name w:val="Normal"/></w:style></w:styles>"#;
        let core = br#"<?xml version="1.0" encoding="UTF-8"?><cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Handbuch &amp; Richtlinien</dc:title></cp:coreProperties>"#;
        let body = [
            paragraph(Some("berschrift1"), "Einleitung"),
            r#"<w:p><w:pPr><w:pStyle w:val="Standard"/><w:tabs><w:tab w:val="left" w:pos="720"/></w:tabs></w:pPr><w:r><w:t>Name</w:t></w:r><w:r><w:tab/><w:t>Wert</w:t><w:br/><w:t xml:space="preserve">zweite Zeile</w:t></w:r><w:del><w:r><w:delText>gelöscht</w:delText></w:r></w:del><w:r><w:instrText> HYPERLINK "x" </w:instrText></w:r></w:p>"#.to_owned(),
            paragraph(Some("Gliederung"), "Details"),
            "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Spalte A</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Spalte B</w:t></w:r></w:p></w:tc></w:tr><w:tr><w:tc><w:p><w:r><w:t>1</w:t></w:r></w:p><w:p><w:r><w:t>mehr</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>2</w:t></w:r></w:p></w:tc></w:tr></w:tbl>".to_owned(),
            r#"<w:p><w:r><w:t>Vor dem Feld </w:t></w:r><w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><wps:txbx><w:txbxContent><w:p><w:r><w:t>Textfeld</w:t></w:r></w:p></w:txbxContent></wps:txbx></w:drawing></mc:Choice><mc:Fallback><w:pict><w:p><w:r><w:t>Ersatz</w:t></w:r></w:p></w:pict></mc:Fallback></mc:AlternateContent></w:r></w:p>"#.to_owned(),
            paragraph(Some("Kapitel"), "Anhang"),
            paragraph(None, "Schluss &lt;ende&gt;"),
        ]
        .concat();
        let docx = docx_of(
            &body,
            &[("word/styles.xml", styles), ("docProps/core.xml", core)],
        );
        assert_eq!(detect(&docx), Ok(DocumentKind::Docx));
        let doc = run(&docx, DocumentKind::Docx).unwrap();
        assert_eq!(doc.title.as_deref(), Some("Handbuch & Richtlinien"));
        let paths: Vec<Vec<&str>> = doc
            .sections
            .iter()
            .map(|s| s.heading_path.iter().map(String::as_str).collect())
            .collect();
        assert_eq!(
            paths,
            vec![
                vec!["Einleitung"],
                vec!["Einleitung", "Details"],
                vec!["Anhang"]
            ]
        );
        let intro = &doc.sections[0].text;
        assert_eq!(intro, "Name\tWert\nzweite Zeile");
        let details = &doc.sections[1].text;
        assert!(
            details.contains("Spalte A | Spalte B\n1 mehr | 2"),
            "{details}"
        );
        assert!(details.contains("Vor dem Feld Textfeld"), "{details}");
        assert!(!details.contains("Ersatz"));
        assert_eq!(doc.sections[2].text, "Schluss <ende>");
    }

    #[test]
    fn docx_title_falls_back_to_the_first_heading() {
        let body = [
            paragraph(None, "Preface text."),
            paragraph(Some("Heading2"), "Scope"),
        ]
        .concat();
        let doc = run(&docx_of(&body, &[]), DocumentKind::Docx).unwrap();
        assert_eq!(doc.title.as_deref(), Some("Scope"));
        assert_eq!(doc.sections[0].heading_path, Vec::<String>::new());
    }

    #[test]
    fn docx_paragraph_outline_level_makes_a_heading() {
        let body = [
            r#"<w:p><w:pPr><w:outlineLvl w:val="0"/></w:pPr><w:r><w:t>Chapter</w:t></w:r></w:p>"#.to_owned(),
            paragraph(None, "Chapter text."),
            // Outline level 9 is body text, even in a heading style.
            r#"<w:p><w:pPr><w:pStyle w:val="Heading1"/><w:outlineLvl w:val="9"/></w:pPr><w:r><w:t>Not a heading</w:t></w:r></w:p>"#.to_owned(),
        ]
        .concat();
        let doc = run(&docx_of(&body, &[]), DocumentKind::Docx).unwrap();
        assert_eq!(doc.sections.len(), 1);
        assert_eq!(doc.sections[0].heading_path, ["Chapter"]);
        assert_eq!(doc.sections[0].text, "Chapter text.\n\nNot a heading");
    }

    #[test]
    fn docx_without_text_has_no_text() {
        let docx = docx_of("<w:p/><w:p><w:r><w:t>  </w:t></w:r></w:p>", &[]);
        assert_eq!(run(&docx, DocumentKind::Docx), Err(ExtractError::NoText));
    }

    /// Overwrites the declared uncompressed size of `name` in its local header and its
    /// central directory record (APPNOTE 4.3.7 and 4.3.12).
    fn lie_about_size(zip: &mut [u8], name: &str, size: u32) {
        let mut patched = 0;
        for at in 0..zip.len().saturating_sub(46) {
            let (size_at, name_len_at, name_at) = match &zip[at..at + 4] {
                b"PK\x03\x04" => (at + 22, at + 26, at + 30),
                b"PK\x01\x02" => (at + 24, at + 28, at + 46),
                _ => continue,
            };
            let len = u16::from_le_bytes([zip[name_len_at], zip[name_len_at + 1]]) as usize;
            if zip.get(name_at..name_at + len) == Some(name.as_bytes()) {
                zip[size_at..size_at + 4].copy_from_slice(&size.to_le_bytes());
                patched += 1;
            }
        }
        assert_eq!(patched, 2, "local header and central directory record");
    }

    /// A Word document whose `word/document.xml` is `size` bytes of zeros, written streaming
    /// so that the test never holds the inflated bytes.
    fn zero_bomb(size: u64) -> Vec<u8> {
        let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        writer.start_file("[Content_Types].xml", options).unwrap();
        writer.write_all(CONTENT_TYPES).unwrap();
        writer.start_file("word/document.xml", options).unwrap();
        let block = vec![0u8; 1 << 20];
        let mut left = size;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            writer.write_all(&block[..n]).unwrap();
            left -= n as u64;
        }
        writer.finish().unwrap().into_inner()
    }

    #[test]
    fn docx_zip_bomb_is_refused_before_inflating() {
        let bomb = zero_bomb(300 << 20);
        assert!(
            bomb.len() < 2 << 20,
            "the bomb itself is small: {} bytes",
            bomb.len()
        );
        assert_eq!(detect(&bomb), Ok(DocumentKind::Docx));
        let started = Instant::now();
        let limits = ExtractLimits::default();
        let mut sink = SectionSink::new(&limits);
        let mut package = DocxPackage::open(&bomb).unwrap();
        let result = package.read("word/document.xml", &sink);
        assert_eq!(
            result,
            Err(ExtractError::TooLarge(
                "a part of it unpacks to more than 64 MiB".into()
            ))
        );
        assert_eq!(package.largest_part, 0, "nothing was inflated");
        assert_eq!(
            extract_docx(&bomb, &mut sink),
            Err(ExtractError::TooLarge(
                "a part of it unpacks to more than 64 MiB".into()
            ))
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn docx_zip_bomb_with_lying_sizes_is_refused() {
        // The archive claims 1,000 bytes for 32 MiB of zeros. The ZIP reader stops at the
        // declared size and the archive contradicts itself, so it is damaged.
        let mut bomb = zero_bomb(32 << 20);
        lie_about_size(&mut bomb, "word/document.xml", 1_000);
        let limits = ExtractLimits::default();
        let sink = SectionSink::new(&limits);
        let mut package = DocxPackage::open(&bomb).unwrap();
        let result = package.read("word/document.xml", &sink);
        assert_eq!(result, Err(ExtractError::Malformed("Word document".into())));
        assert!(package.largest_part <= 64 << 10, "{}", package.largest_part);
    }

    #[test]
    fn inflation_counts_actual_bytes_not_declared_ones() {
        // An endless source that claims to be a 1,000-byte part stored in 1,000 bytes.
        let limits = ExtractLimits::default();
        let deadline = Deadline::after(limits.deadline);
        let bounds = PartBounds {
            limits: &limits,
            stored: 1_000,
            inflated_before: 0,
        };
        let mut largest = 0;
        let result = inflate_bounded(std::io::repeat(0), 1_000, &bounds, &deadline, &mut largest);
        assert_eq!(
            result,
            Err(ExtractError::TooLarge(
                "a part of it unpacks to more than 100 times its stored size".into()
            ))
        );
        assert!(largest <= RATIO_CHECK_FLOOR + (64 << 10), "{largest}");

        // Without the ratio bound, the entry bound stops it.
        let limits = ExtractLimits {
            max_compression_ratio: u64::MAX,
            max_docx_entry_bytes: 4 << 20,
            ..ExtractLimits::default()
        };
        let bounds = PartBounds {
            limits: &limits,
            stored: 1_000,
            inflated_before: 0,
        };
        let mut largest = 0;
        let result = inflate_bounded(std::io::repeat(0), 1_000, &bounds, &deadline, &mut largest);
        assert_eq!(
            result,
            Err(ExtractError::TooLarge(
                "a part of it unpacks to more than 4 MiB".into()
            ))
        );
        assert!(largest <= (4 << 20) + (64 << 10), "{largest}");

        // And the total bound counts what earlier parts inflated.
        let limits = ExtractLimits {
            max_compression_ratio: u64::MAX,
            ..ExtractLimits::default()
        };
        let bounds = PartBounds {
            limits: &limits,
            stored: 1_000,
            inflated_before: 255 << 20,
        };
        let mut largest = 0;
        let result = inflate_bounded(std::io::repeat(0), 1_000, &bounds, &deadline, &mut largest);
        assert_eq!(
            result,
            Err(ExtractError::TooLarge(
                "its parts unpack to more than 256 MiB in total".into()
            ))
        );
        assert!(largest <= (1 << 20) + (64 << 10), "{largest}");

        // An honest part within bounds is read whole.
        let bounds = PartBounds {
            limits: &limits,
            stored: 10,
            inflated_before: 0,
        };
        let data = inflate_bounded(&b"<w:document/>"[..], 13, &bounds, &deadline, &mut largest);
        assert_eq!(data.unwrap(), b"<w:document/>");
    }

    #[test]
    fn docx_compression_ratio_and_total_limits_apply() {
        // 2 MiB of zeros compress about 1000 to 1: refused by the declared ratio.
        let dense = zero_bomb(2 << 20);
        assert_eq!(
            run(&dense, DocumentKind::Docx),
            Err(ExtractError::TooLarge(
                "a part of it unpacks to more than 100 times its stored size".into()
            ))
        );
        // Two ordinary parts that together exceed the total.
        let filler = paragraph(None, &"lorem ipsum dolor sit amet ".repeat(40)).repeat(600);
        let styles = format!("<w:styles><!-- {} --></w:styles>", "x y z ".repeat(120_000));
        let docx = docx_of(&filler, &[("word/styles.xml", styles.as_bytes())]);
        let limits = ExtractLimits {
            max_docx_total_bytes: 1 << 20,
            ..ExtractLimits::default()
        };
        assert_eq!(
            extract(&docx, DocumentKind::Docx, &limits),
            Err(ExtractError::TooLarge(
                "its parts unpack to more than 1 MiB in total".into()
            ))
        );
        assert!(extract(&docx, DocumentKind::Docx, &ExtractLimits::default()).is_ok());
    }

    // --- Markdown -----------------------------------------------------------------------

    #[test]
    fn markdown_sections_follow_the_heading_hierarchy() {
        let doc = run(&fixture("tokio-README.md"), DocumentKind::Markdown).unwrap();
        assert_eq!(doc.title.as_deref(), Some("Tokio"));
        let section = |path: &[&str]| {
            doc.sections
                .iter()
                .find(|s| s.heading_path == path)
                .unwrap_or_else(|| panic!("no section {path:?}"))
        };
        let intro = section(&["Tokio"]);
        assert!(intro
            .text
            .contains("A runtime for writing reliable, asynchronous, and slim applications"));
        // Links and images keep only their text.
        assert!(intro.text.contains("Website |"), "{}", intro.text);
        assert!(!intro.text.contains("](https://tokio.rs)"));
        let overview = section(&["Tokio", "Overview"]);
        assert!(overview
            .text
            .contains("event-driven, non-blocking I/O platform"));
        assert!(overview
            .text
            .contains("- A multithreaded, work-stealing based task scheduler."));
        // Code blocks stay fenced; `#[tokio::main]` inside one is not a heading.
        let example = section(&["Tokio", "Example"]);
        assert!(
            example.text.contains("```toml\n[dependencies]"),
            "{}",
            example.text
        );
        assert!(example.text.contains("#[tokio::main]"));
        // An H3 nests under the H2 before it, and the next H2 closes it.
        let lts = section(&["Tokio", "Bug patching policy", "Previous LTS releases"]);
        assert!(lts
            .text
            .contains("`1.8.x` - LTS release until February 2022."));
        assert!(section(&["Tokio", "License"]).text.contains("MIT license"));
        // HTML comments are markup, not text.
        let msrv = section(&["Tokio", "Supported Rust Versions"]);
        assert!(!msrv.text.contains("When updating this"));
        assert!(doc.sections.iter().all(|s| s.page.is_none()));
    }

    #[test]
    fn markdown_renders_lists_tables_and_takes_the_first_h1_as_title() {
        let md = "## Before the title\n\nLead.\n\n# Guide\n\n### Deep\n\n1. one\n2. two\n   - nested\n- [x] done\n\n## Table\n\n| Key | Value |\n|-----|-------|\n| `a` | **1** |\n\nText with a [link](https://example.com) and ![alt text](i.png).\n";
        let doc = run(md.as_bytes(), DocumentKind::Markdown).unwrap();
        assert_eq!(doc.title.as_deref(), Some("Guide"));
        let paths: Vec<Vec<&str>> = doc
            .sections
            .iter()
            .map(|s| s.heading_path.iter().map(String::as_str).collect())
            .collect();
        assert_eq!(
            paths,
            vec![
                vec!["Before the title"],
                vec!["Guide", "Deep"],
                vec!["Guide", "Table"]
            ]
        );
        assert_eq!(
            doc.sections[1].text,
            "1. one\n2. two\n  - nested\n\n- [x] done"
        );
        assert_eq!(
            doc.sections[2].text,
            "Key | Value\n`a` | 1\n\nText with a link and alt text."
        );
    }

    // --- Text ---------------------------------------------------------------------------

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

    #[test]
    fn tidy_normalises_whitespace() {
        assert_eq!(tidy("  \n\nA  \r\nB\x07\n\n\n\nC\t\n  "), "A\nB\n\nC");
        assert_eq!(tidy(" \n \n"), "");
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
