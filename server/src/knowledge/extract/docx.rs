//! Word (`.docx`, ECMA-376) text extraction: body from `word/document.xml`, heading levels
//! from `word/styles.xml`, title from `docProps/core.xml`. Parts are bounded by
//! [`ExtractLimits`] by declared size before inflating and by actual bytes while inflating
//! (zip bombs).

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{Cursor, Read};

use quick_xml::events::{BytesStart, Event as XmlEvent};
use quick_xml::Reader as XmlReader;
use zip::ZipArchive;

use super::sink::{one_line, Deadline, SectionSink};
use super::{size_phrase, DocumentKind, ExtractError, ExtractLimits};

/// Inflated size (bytes) from which [`ExtractLimits::max_compression_ratio`] applies (smaller
/// parts cannot exhaust memory, and small XML parts compress very well).
pub const RATIO_CHECK_FLOOR: u64 = 1 << 20;

pub(super) fn extract_docx(
    bytes: &[u8],
    out: &mut SectionSink<'_>,
) -> Result<Option<String>, ExtractError> {
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

/// A DOCX package whose parts are inflated under [`ExtractLimits`]: declared sizes checked
/// first, actual bytes counted through [`Read::take`] (declared sizes can lie).
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

/// Reads an inflating `reader`, stopping at the first read past a bound of `bounds` (at most
/// one 64 KiB buffer over), whatever was declared; `declared` only sizes the first allocation.
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

/// The attribute with local name `name`, unescaped (namespace prefixes are the producer's).
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

/// Heading level of a style name: 0 for "Title", 1–9 for "heading 1"…"heading 9" (ECMA-376
/// part 1 §17.7 built-in names, English in localised Word), case and spaces ignored.
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

/// Paragraph style ids → heading levels, by name, else `w:outlineLvl`, else the base style.
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

/// The non-blank `dc:title` of the core properties part (ECMA-376 part 2).
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

/// Walks `word/document.xml` (ECMA-376 part 1 §17): paragraphs and runs (deleted text and
/// field codes skipped), headings, tables row by row; text boxes stay with their anchor
/// paragraph, `mc:Fallback` copies are skipped.
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

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::time::{Duration, Instant};

    use super::super::tests::{fixture, run, zip_of, CONTENT_TYPES};
    use super::super::{detect, extract};
    use super::*;

    /// A Word document with WordprocessingML `body` and `extra` parts.
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

    /// Overwrites `name`'s declared size in its local and central headers (APPNOTE 4.3.7, 4.3.12).
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

    /// A Word document whose body is `size` zero bytes, written streaming.
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
}
