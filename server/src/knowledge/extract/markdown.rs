//! Markdown text extraction with `pulldown-cmark` (CommonMark plus tables, task lists,
//! strikethrough, footnotes): one section per heading, rendered back to Markdown-like text
//! with links and images reduced to their text; the title is the first H1.

use pulldown_cmark::{CodeBlockKind, Event as MdEvent, HeadingLevel, Options, Parser, Tag, TagEnd};

use super::detect::decode_text;
use super::sink::{one_line, SectionSink};
use super::ExtractError;

/// Reads Markdown, one section per heading.
pub(super) fn extract_markdown(
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

#[cfg(test)]
mod tests {
    use super::super::tests::{fixture, run};
    use super::super::DocumentKind;

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
}
