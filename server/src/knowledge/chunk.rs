//! Chunking: each [`Section`](super::extract::Section) is cut on its own (a chunk never spans
//! two headings or pages) by `text-splitter` at the highest semantic level that fits, sized
//! in real tokens ([`crate::llm::tokens::count`]).

use text_splitter::{ChunkSizer, MarkdownSplitter, TextSplitter};

use super::extract::{DocumentKind, Extracted};
use crate::llm::tokens;

/// How large chunks are and how much neighbouring chunks share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkConfig {
    /// Most tokens in one chunk. Default 400. Values below 1 are taken as 1.
    pub max_tokens: usize,
    /// Tokens a chunk may repeat from the previous one in its section. Default 60; ≤ half max.
    pub overlap_tokens: usize,
}

impl Default for ChunkConfig {
    fn default() -> Self {
        ChunkConfig {
            max_tokens: 400,
            overlap_tokens: 60,
        }
    }
}

impl ChunkConfig {
    /// The (max, overlap) actually used: max at least 1, overlap at most max / 2.
    fn effective(&self) -> (usize, usize) {
        let max = self.max_tokens.max(1);
        (max, self.overlap_tokens.min(max / 2))
    }
}

/// A piece of a document small enough to embed and to quote to a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub text: String,
    pub heading_path: Vec<String>,
    pub page: Option<u32>,
    /// 0-based position in the document; chunks are returned in this order.
    pub position: u32,
    /// Tokens in `text`; at most [`ChunkConfig::max_tokens`] unless one grapheme is longer.
    pub tokens: u32,
}

/// Sizes chunks with the service's tokenizer.
#[derive(Debug, Clone, Copy)]
struct TokenSizer;

impl ChunkSizer for TokenSizer {
    fn size(&self, chunk: &str) -> usize {
        tokens::count(chunk) as usize
    }
}

fn splitter_config(config: &ChunkConfig) -> text_splitter::ChunkConfig<TokenSizer> {
    let (max, overlap) = config.effective();
    let base = text_splitter::ChunkConfig::new(max).with_sizer(TokenSizer);
    // `effective` keeps the overlap below the capacity, the only way this can fail.
    match base.with_overlap(overlap) {
        Ok(with_overlap) => with_overlap,
        Err(_) => text_splitter::ChunkConfig::new(max).with_sizer(TokenSizer),
    }
}

/// Cuts `doc` into chunks of ≤ `config.max_tokens`, section by section, overlapping by up to
/// `config.overlap_tokens`; none empty. CPU-bound (run it on the blocking pool).
pub fn chunk(doc: &Extracted, config: &ChunkConfig) -> Vec<Chunk> {
    let markdown = MarkdownSplitter::new(splitter_config(config));
    let text = TextSplitter::new(splitter_config(config));
    let mut chunks = Vec::new();
    for section in &doc.sections {
        let pieces: Vec<&str> = match doc.kind {
            DocumentKind::Markdown => markdown.chunks(&section.text).collect(),
            DocumentKind::Pdf | DocumentKind::Docx | DocumentKind::Text => {
                text.chunks(&section.text).collect()
            }
        };
        for piece in pieces {
            let piece = piece.trim();
            if piece.is_empty() {
                continue;
            }
            chunks.push(Chunk {
                text: piece.to_owned(),
                heading_path: section.heading_path.clone(),
                page: section.page,
                position: chunks.len() as u32,
                tokens: tokens::count(piece),
            });
        }
    }
    chunks
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Instant;

    use super::*;
    use crate::knowledge::extract::{detect, extract, ExtractLimits, Section};

    fn fixture(name: &str) -> Vec<u8> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/knowledge")
            .join(name);
        std::fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
    }

    fn extracted(name: &str) -> Extracted {
        let bytes = fixture(name);
        let kind = detect(&bytes).unwrap();
        extract(&bytes, kind, &ExtractLimits::default()).unwrap()
    }

    const FIXTURES: [&str; 4] = [
        "shared-mime-info-spec.pdf",
        "MPL-2.0.docx",
        "tokio-README.md",
        "Apache-2.0.txt",
    ];

    /// The invariants every chunking must keep.
    fn assert_well_formed(doc: &Extracted, chunks: &[Chunk], max_tokens: usize) {
        assert!(!chunks.is_empty());
        for (i, chunk) in chunks.iter().enumerate() {
            assert_eq!(
                chunk.position as usize, i,
                "positions are 0-based and in order"
            );
            assert!(!chunk.text.trim().is_empty(), "no empty chunks");
            assert_eq!(chunk.text, chunk.text.trim());
            assert_eq!(chunk.tokens, tokens::count(&chunk.text));
            assert!(
                chunk.tokens as usize <= max_tokens,
                "chunk {i} has {} tokens: {:?}",
                chunk.tokens,
                chunk.text
            );
            // A chunk lies within one section and carries its heading path and page.
            assert!(
                doc.sections
                    .iter()
                    .any(|s| s.heading_path == chunk.heading_path
                        && s.page == chunk.page
                        && s.text.contains(&chunk.text)),
                "chunk {i} is not inside a section with its heading path and page"
            );
        }
    }

    #[test]
    fn chunks_of_the_real_documents_are_bounded_ordered_and_never_empty() {
        for name in FIXTURES {
            let doc = extracted(name);
            let chunks = chunk(&doc, &ChunkConfig::default());
            assert_well_formed(&doc, &chunks, 400);
            if doc.kind == DocumentKind::Pdf {
                let pages: Vec<u32> = chunks.iter().map(|c| c.page.unwrap()).collect();
                assert!(pages.windows(2).all(|w| w[0] <= w[1]), "pages in order");
                assert_eq!(pages.first(), Some(&1));
                assert_eq!(pages.last(), Some(&17));
            }
        }
    }

    #[test]
    fn small_chunk_sizes_keep_the_bound() {
        let doc = extracted("tokio-README.md");
        for max_tokens in [16, 50] {
            let config = ChunkConfig {
                max_tokens,
                overlap_tokens: 4,
            };
            assert_well_formed(&doc, &chunk(&doc, &config), max_tokens);
        }
    }

    #[test]
    fn markdown_chunks_keep_their_heading_path() {
        let doc = extracted("tokio-README.md");
        let chunks = chunk(&doc, &ChunkConfig::default());
        let overview = chunks
            .iter()
            .find(|c| c.text.contains("event-driven, non-blocking I/O platform"))
            .unwrap();
        assert_eq!(overview.heading_path, ["Tokio", "Overview"]);
        let lts = chunks
            .iter()
            .find(|c| c.text.contains("LTS release until February 2022"))
            .unwrap();
        assert_eq!(
            lts.heading_path,
            ["Tokio", "Bug patching policy", "Previous LTS releases"]
        );
    }

    #[test]
    fn markdown_sections_are_split_markdown_aware() {
        // A paragraph and a code block that do not fit together: the Markdown splitter
        // keeps the code block whole and apart (a plain-text splitter cuts it at its blank
        // line and joins its head to the paragraph).
        let prose = "The service reads its settings at start-up and checks them. ".repeat(25);
        let code = "```rust\nfn main() {\n    let settings = load();\n\n    run(settings);\n}\n```";
        let code = code.replace("run(settings);", &"run(settings);\n    ".repeat(40));
        let doc = Extracted {
            kind: DocumentKind::Markdown,
            title: None,
            sections: vec![Section {
                heading_path: vec!["Setup".into()],
                text: format!("{prose}\n\n{code}"),
                page: None,
            }],
        };
        let mixes_prose_and_code =
            |c: &Chunk| c.text.contains("checks them") && c.text.contains("```");
        let chunks = chunk(&doc, &ChunkConfig::default());
        assert_well_formed(&doc, &chunks, 400);
        assert!(!chunks.iter().any(mixes_prose_and_code), "{chunks:#?}");
        assert!(chunks
            .iter()
            .any(|c| c.text.starts_with("```rust") && c.text.ends_with("```")));
        // Read as plain text, the same section is cut inside the code block.
        let as_text = Extracted {
            kind: DocumentKind::Text,
            ..doc.clone()
        };
        assert!(chunk(&as_text, &ChunkConfig::default())
            .iter()
            .any(mixes_prose_and_code));
    }

    /// The longest end of `previous` that `next` starts with.
    fn shared_text<'a>(previous: &str, next: &'a str) -> &'a str {
        let mut end = next.len().min(previous.len());
        loop {
            if next.is_char_boundary(end) && previous.ends_with(&next[..end]) {
                return next[..end].trim();
            }
            end -= 1;
        }
    }

    fn one_section(text: String) -> Extracted {
        Extracted {
            kind: DocumentKind::Text,
            title: None,
            sections: vec![Section {
                heading_path: vec![],
                text,
                page: None,
            }],
        }
    }

    #[test]
    fn consecutive_chunks_overlap_by_at_most_the_configured_tokens() {
        // One paragraph of short sentences: every cut falls between two sentences, and the
        // sentences before a cut fit in the overlap.
        let text = (1..=400)
            .map(|i| format!("Sentence {i} states one short fact."))
            .collect::<Vec<_>>()
            .join(" ");
        let doc = one_section(text);
        let with = chunk(
            &doc,
            &ChunkConfig {
                max_tokens: 120,
                overlap_tokens: 40,
            },
        );
        assert_well_formed(&doc, &with, 120);
        assert!(with.len() >= 20);
        let shared: Vec<u32> = with
            .windows(2)
            .map(|pair| tokens::count(shared_text(&pair[0].text, &pair[1].text)))
            .collect();
        assert!(shared.iter().all(|&n| (20..=40).contains(&n)), "{shared:?}");

        let without = chunk(
            &doc,
            &ChunkConfig {
                max_tokens: 120,
                overlap_tokens: 0,
            },
        );
        assert_well_formed(&doc, &without, 120);
        assert!(without.len() < with.len());
        assert!(without
            .windows(2)
            .all(|pair| shared_text(&pair[0].text, &pair[1].text).is_empty()));
    }

    #[test]
    fn overlap_never_exceeds_its_budget_on_long_sentences() {
        // Legal prose: many sentences are longer than the overlap, and are then not
        // repeated at all (the splitter overlaps whole units of the level it cut at).
        let apache = String::from_utf8(fixture("Apache-2.0.txt")).unwrap();
        let doc = one_section(apache.split_whitespace().collect::<Vec<_>>().join(" "));
        let chunks = chunk(
            &doc,
            &ChunkConfig {
                max_tokens: 120,
                overlap_tokens: 40,
            },
        );
        assert_well_formed(&doc, &chunks, 120);
        let shared: Vec<u32> = chunks
            .windows(2)
            .map(|pair| tokens::count(shared_text(&pair[0].text, &pair[1].text)))
            .collect();
        assert!(shared.iter().all(|&n| n <= 40), "{shared:?}");
        assert!(
            shared.iter().filter(|&&n| n >= 10).count() * 3 >= shared.len(),
            "{shared:?}"
        );
    }

    #[test]
    fn overlap_follows_the_semantic_level_of_the_cut() {
        // Cuts between paragraphs repeat whole paragraphs only when they fit in the
        // overlap; the Apache licence's definitions are longer than 40 tokens, so chunks
        // cut between them do not overlap, while chunks cut inside one do.
        let doc = extracted("Apache-2.0.txt");
        let chunks = chunk(
            &doc,
            &ChunkConfig {
                max_tokens: 120,
                overlap_tokens: 40,
            },
        );
        assert_well_formed(&doc, &chunks, 120);
        let contribution = chunks
            .iter()
            .position(|c| c.text.starts_with("\"Contribution\" shall mean"))
            .unwrap();
        let shared = shared_text(&chunks[contribution].text, &chunks[contribution + 1].text);
        assert!(
            shared.contains("means any form of electronic"),
            "{shared:?}"
        );
        assert!(tokens::count(shared) <= 40);
    }

    #[test]
    fn chunks_never_span_two_sections() {
        let doc = Extracted {
            kind: DocumentKind::Text,
            title: None,
            sections: vec![
                Section {
                    heading_path: vec!["A".into()],
                    text: "alpha ".repeat(300),
                    page: Some(1),
                },
                Section {
                    heading_path: vec!["B".into()],
                    text: "beta ".repeat(300),
                    page: Some(2),
                },
            ],
        };
        let chunks = chunk(
            &doc,
            &ChunkConfig {
                max_tokens: 100,
                overlap_tokens: 20,
            },
        );
        assert_well_formed(&doc, &chunks, 100);
        assert!(chunks
            .iter()
            .all(|c| c.text.contains("alpha") != c.text.contains("beta")));
        let first_b = chunks.iter().position(|c| c.page == Some(2)).unwrap();
        assert!(chunks[..first_b].iter().all(|c| c.page == Some(1)));
        assert!(chunks[first_b..].iter().all(|c| c.page == Some(2)));
    }

    #[test]
    fn degenerate_configurations_are_clamped() {
        let doc = extracted("Apache-2.0.txt");
        assert_eq!(
            ChunkConfig {
                max_tokens: 0,
                overlap_tokens: 0
            }
            .effective(),
            (1, 0)
        );
        assert_eq!(
            ChunkConfig {
                max_tokens: 100,
                overlap_tokens: 500
            }
            .effective(),
            (100, 50)
        );
        let chunks = chunk(
            &doc,
            &ChunkConfig {
                max_tokens: 100,
                overlap_tokens: 500,
            },
        );
        assert_well_formed(&doc, &chunks, 100);
        // One token per chunk still terminates and keeps every chunk within one token,
        // except that a single grapheme may need more.
        let tiny = Extracted {
            kind: DocumentKind::Text,
            title: None,
            sections: vec![Section {
                heading_path: vec![],
                text: "Grant of license 🙂.".into(),
                page: None,
            }],
        };
        let chunks = chunk(
            &tiny,
            &ChunkConfig {
                max_tokens: 0,
                overlap_tokens: 0,
            },
        );
        assert!(chunks
            .iter()
            .all(|c| c.tokens <= 1 || c.text.chars().count() == 1));
        assert_eq!(
            chunks
                .iter()
                .map(|c| c.text.as_str())
                .collect::<String>()
                .replace(' ', ""),
            "Grantoflicense🙂."
        );
    }

    /// Prints pages per second of extraction plus chunking of `bytes` (3 KB of text a page).
    fn measure(label: &str, bytes: &[u8], pdf_pages: Option<usize>) {
        let kind = detect(bytes).unwrap();
        let runs = 5;
        let (mut extract_secs, mut chunk_secs, mut chunks, mut chars) = (0.0, 0.0, 0, 0);
        for _ in 0..runs {
            let started = Instant::now();
            let doc = extract(bytes, kind, &ExtractLimits::default()).unwrap();
            extract_secs += started.elapsed().as_secs_f64() / runs as f64;
            chars = doc.char_count();
            let started = Instant::now();
            chunks = chunk(&doc, &ChunkConfig::default()).len();
            chunk_secs += started.elapsed().as_secs_f64() / runs as f64;
        }
        let pages = pdf_pages.map_or(chars as f64 / 3_000.0, |p| p as f64);
        println!(
            "{label}: {} bytes in, {chars} characters ({pages:.0} pages), {chunks} chunks; \
             extract {:.1} ms, chunk {:.1} ms; {:.0} pages/s end to end",
            bytes.len(),
            extract_secs * 1e3,
            chunk_secs * 1e3,
            pages / (extract_secs + chunk_secs)
        );
    }

    /// Extraction and chunking throughput (target: 200 pages of 3 KB per second per core). Run:
    /// `cargo test -p server --lib --release knowledge::chunk::tests::throughput -- --ignored --nocapture`
    #[test]
    #[ignore = "a measurement; run in release mode"]
    fn throughput() {
        tokens::warm_up();
        let readme = String::from_utf8(fixture("tokio-README.md")).unwrap();
        let mut markdown = String::new();
        let mut part = 0;
        while markdown.len() < 300_000 {
            part += 1;
            markdown.push_str(&format!("# Part {part}\n\n"));
            markdown.push_str(&readme.replace("# Tokio", &format!("## Tokio {part}")));
            markdown.push('\n');
        }
        measure("Markdown (tokio README x32)", markdown.as_bytes(), None);
        let apache = String::from_utf8(fixture("Apache-2.0.txt")).unwrap();
        let text = apache.repeat(300_000 / apache.len() + 1);
        measure("Text (Apache-2.0 x27)", text.as_bytes(), None);
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        measure("Text without line breaks", flat.as_bytes(), None);
        measure(
            "PDF (17 pages)",
            &fixture("shared-mime-info-spec.pdf"),
            Some(17),
        );
        measure("DOCX (MPL-2.0)", &fixture("MPL-2.0.docx"), None);
    }
}
