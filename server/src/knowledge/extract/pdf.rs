//! PDF text extraction with `pdf_oxide`, one section per page. A file without `%%EOF` is
//! refused (cut-off upload); compressed streams are checked before parsing
//! ([`check_pdf_streams`]); the title is `/Title`, else the first page's first line.

use std::io::Read;

use super::detect::{find, has_pdf_eof_marker, pdf_header_offset};
use super::sink::{first_line_title, one_line, SectionSink};
use super::{size_phrase, thousands, DocumentKind, ExtractError};

/// Reads a PDF page by page with `pdf_oxide`.
pub(super) fn extract_pdf(
    bytes: &[u8],
    out: &mut SectionSink<'_>,
) -> Result<Option<String>, ExtractError> {
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

/// Refuses a decompression bomb before the reader allocates for it: every non-image Flate
/// stream is inflated into a counting sink, and one over `max_pdf_stream_bytes` makes the
/// document [`ExtractError::TooLarge`]. Images are skipped: text extraction never decodes
/// them, and scans inflate large.
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

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::time::{Duration, Instant};

    use super::super::tests::{fixture, run};
    use super::super::{detect, extract, ExtractLimits};
    use super::*;

    /// A small valid PDF, one page per entry of `pages` (empty: no text), optional `/Title`.
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
}
