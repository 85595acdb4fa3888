//! Reading a fetched page ([`ContentKind`], decoding) into title, main text, canonical URL,
//! links and robots directives ([`PageDoc`]); HTML through readability ([`dom_smoothie`]).
//! Runs in an extraction child process ([`crate::knowledge::sandbox`]).

use std::collections::HashSet;

use dom_smoothie::{Config as ReadabilityConfig, Readability, TextMode};
use serde::{Deserialize, Serialize};
use url::Url;

use super::scope::normalize;

/// What was extracted from a fetched page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PageDoc {
    pub(super) title: String,
    pub(super) text: String,
    pub(super) canonical: Option<Url>,
    pub(super) links: Vec<Url>,
    pub(super) noindex: bool,
    pub(super) nofollow: bool,
}

impl PageDoc {
    /// The page's title.
    pub(crate) fn title(&self) -> &str {
        &self.title
    }

    /// The page's main text (Markdown text mode for HTML).
    pub(crate) fn text(&self) -> &str {
        &self.text
    }
}

/// Reads a fetched body as `kind` into a [`PageDoc`]; runs in an extraction child process.
pub(crate) fn read_page(
    body: &[u8],
    content_type: Option<&str>,
    kind: ContentKind,
    page_url: &Url,
) -> PageDoc {
    let text = decode(body, content_type, kind == ContentKind::Html);
    match kind {
        ContentKind::Html => parse_html(&text, page_url),
        ContentKind::Text { markdown } => parse_text(&text, page_url, markdown),
        ContentKind::Other(_) => PageDoc::default(),
    }
}

/// How a response body is treated, from its `Content-Type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum ContentKind {
    Html,
    Text { markdown: bool },
    Other(String),
}

impl ContentKind {
    /// `text/html` and `application/xhtml+xml` are HTML; `text/plain`, `text/markdown` and
    /// `text/x-markdown` are text; without a `Content-Type` a body starting with `<` is
    /// taken for HTML; anything else is unsupported.
    pub(crate) fn of(content_type: Option<&str>, body: &[u8]) -> Self {
        let essence = content_type
            .and_then(|ct| ct.split(';').next())
            .map(|s| s.trim().to_ascii_lowercase())
            .filter(|s| !s.is_empty());
        match essence.as_deref() {
            Some("text/html" | "application/xhtml+xml") => Self::Html,
            Some("text/plain") => Self::Text { markdown: false },
            Some("text/markdown" | "text/x-markdown") => Self::Text { markdown: true },
            Some(other) => Self::Other(other.to_owned()),
            None => {
                let head = body
                    .iter()
                    .find(|b| !(b.is_ascii_whitespace() || matches!(**b, 0xef | 0xbb | 0xbf)));
                if head == Some(&b'<') {
                    Self::Html
                } else {
                    Self::Other("(none)".to_owned())
                }
            }
        }
    }
}

/// Decodes a body: byte-order mark, else the `charset` of `Content-Type`, else (HTML) a
/// `<meta charset>` in the first 1024 bytes, else UTF-8. Invalid sequences become U+FFFD.
pub(crate) fn decode(body: &[u8], content_type: Option<&str>, html: bool) -> String {
    let from_header = content_type.and_then(|ct| {
        ct.split(';').skip(1).find_map(|param| {
            let (name, value) = param.split_once('=')?;
            name.trim()
                .eq_ignore_ascii_case("charset")
                .then(|| value.trim().trim_matches('"').to_owned())
        })
    });
    let encoding = from_header
        .and_then(|label| encoding_rs::Encoding::for_label(label.as_bytes()))
        .or_else(|| html.then(|| meta_charset(body)).flatten())
        .unwrap_or(encoding_rs::UTF_8);
    // `decode` lets a byte-order mark override the label.
    let (text, _, _) = encoding.decode(body);
    text.into_owned()
}

fn meta_charset(body: &[u8]) -> Option<&'static encoding_rs::Encoding> {
    let head = &body[..body.len().min(1024)];
    let lower: Vec<u8> = head.iter().map(u8::to_ascii_lowercase).collect();
    let at = lower.windows(8).position(|w| w == b"charset=")? + 8;
    let label: Vec<u8> = lower[at..]
        .iter()
        .skip_while(|b| matches!(b, b'"' | b'\''))
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':' | b'.'))
        .copied()
        .collect();
    encoding_rs::Encoding::for_label(&label)
}

/// Extracts title, main text, canonical URL, links and `<meta name="robots">` from HTML.
fn parse_html(html: &str, page_url: &Url) -> PageDoc {
    let document = dom_query::Document::from(html);
    let base = document
        .base_uri()
        .and_then(|b| page_url.join(b.trim()).ok())
        .filter(|b| matches!(b.scheme(), "http" | "https"))
        .unwrap_or_else(|| page_url.clone());

    let mut links = Vec::new();
    let mut seen_links = HashSet::new();
    collect_links(&document, &base, &mut links, &mut seen_links);
    // A parser with scripting on (as browsers and html5ever run) keeps the content of
    // `<noscript>` as text; what a reader without scripts sees there (mdBook's table of
    // contents frame, plain-link menus) is parsed on its own.
    for noscript in document.select("noscript").nodes() {
        let fallback = dom_query::Document::fragment(noscript.text().to_string());
        collect_links(&fallback, &base, &mut links, &mut seen_links);
    }

    let canonical = document
        .select("link[rel][href]")
        .nodes()
        .iter()
        .find(|n| {
            n.attr("rel").is_some_and(|rel| {
                rel.split_ascii_whitespace()
                    .any(|r| r.eq_ignore_ascii_case("canonical"))
            })
        })
        .and_then(|n| n.attr("href"))
        .and_then(|href| base.join(href.trim()).ok())
        .and_then(|u| normalize(&u));

    let mut noindex = false;
    let mut nofollow = false;
    for node in document.select("meta[name][content]").nodes() {
        let is_robots = node
            .attr("name")
            .is_some_and(|n| n.trim().eq_ignore_ascii_case("robots"));
        if !is_robots {
            continue;
        }
        let content = node
            .attr("content")
            .unwrap_or_default()
            .to_ascii_lowercase();
        for directive in content.split(',').map(str::trim) {
            match directive {
                "noindex" => noindex = true,
                "nofollow" => nofollow = true,
                "none" => {
                    noindex = true;
                    nofollow = true;
                }
                _ => {}
            }
        }
    }

    let html_title = collapse_ws(&document.select("title").text());
    let headings: Vec<String> = document
        .select("h1, h2")
        .nodes()
        .iter()
        .map(|n| collapse_ws(&n.text()))
        .filter(|h| !h.is_empty())
        .collect();

    // Links to a place on the same page (`<a href="#x">`, heading anchors) carry no
    // information in the text: keep their words only.
    for anchor in document.select("a[href^='#']").nodes() {
        anchor.replace_with_html(anchor.inner_html());
    }

    let config = ReadabilityConfig {
        text_mode: TextMode::Markdown,
        ..ReadabilityConfig::default()
    };
    let extracted = Readability::with_document(document, Some(page_url.as_str()), Some(config))
        .and_then(|mut r| r.parse())
        .map(|article| {
            (
                collapse_ws(&article.title),
                article.text_content.to_string(),
            )
        });
    let (title, text) = match extracted {
        Ok(found) => found,
        // Readability found no article: keep the body's text without page chrome.
        Err(_) => (String::new(), body_text_without_chrome(html)),
    };
    let title = [title, html_title]
        .into_iter()
        .find(|t| !t.is_empty())
        .unwrap_or_else(|| fallback_title(page_url));
    let text = with_page_heading(&tidy_text(&text), &title, &headings);
    PageDoc {
        title,
        text,
        canonical,
        links,
        noindex,
        nofollow,
    }
}

/// Elements whose URL leads to another reachable page: `a`/`area` `href`, and `iframe`/`frame`
/// `src` (generated manuals put their contents in frames).
const LINK_ATTRIBUTES: [(&str, &str); 4] = [
    ("a[href]", "href"),
    ("area[href]", "href"),
    ("iframe[src]", "src"),
    ("frame[src]", "src"),
];

/// Appends the absolute, normalised targets of links and frames to `links`, skipping `seen`.
fn collect_links(
    document: &dom_query::Document,
    base: &Url,
    links: &mut Vec<Url>,
    seen: &mut HashSet<Url>,
) {
    for (selector, attribute) in LINK_ATTRIBUTES {
        for node in document.select(selector).nodes() {
            let Some(target) = node.attr(attribute) else {
                continue;
            };
            let Some(link) = base.join(target.trim()).ok().and_then(|u| normalize(&u)) else {
                continue;
            };
            if seen.insert(link.clone()) {
                links.push(link);
            }
        }
    }
}

/// Makes the text start with the page heading as a `# ` line (the first `<h1>`/`<h2>` whose
/// words begin the title, else the title); text already starting with a heading is kept.
fn with_page_heading(text: &str, title: &str, headings: &[String]) -> String {
    if text.is_empty() || text.starts_with('#') {
        return text.to_owned();
    }
    let key = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect()
    };
    let title_key = key(title);
    let heading = headings
        .iter()
        .find(|h| {
            let k = key(h);
            !k.is_empty() && title_key.starts_with(&k)
        })
        .map_or(title, String::as_str);
    format!("# {heading}\n\n{text}")
}

/// The `<body>` as Markdown-style text without scripts, navigation, headers, footers, forms.
fn body_text_without_chrome(html: &str) -> String {
    let document = dom_query::Document::from(html);
    document
        .body()
        .map(|body| {
            body.md(Some(&[
                "script", "style", "noscript", "template", "nav", "header", "footer", "aside",
                "form", "svg",
            ]))
            .to_string()
        })
        .unwrap_or_default()
}

/// A text page as it is, titled by its first Markdown heading, else the last path segment.
fn parse_text(text: &str, page_url: &Url, markdown: bool) -> PageDoc {
    let text = text.trim_start_matches('\u{feff}');
    let heading = markdown
        .then(|| {
            text.lines()
                .map(str::trim)
                .find_map(|l| l.strip_prefix("# ").map(str::trim))
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
        })
        .flatten();
    PageDoc {
        title: heading.unwrap_or_else(|| fallback_title(page_url)),
        text: tidy_text(text),
        ..PageDoc::default()
    }
}

fn fallback_title(url: &Url) -> String {
    url.path_segments()
        .and_then(|mut s| s.rfind(|seg| !seg.is_empty()).map(str::to_owned))
        .unwrap_or_else(|| url.host_str().unwrap_or_default().to_owned())
}

fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Trims trailing spaces, drops a leading BOM, and keeps at most one blank line in a row.
fn tidy_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0;
    for line in text.trim_start_matches('\u{feff}').lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::sha256_hex;

    fn url(s: &str) -> Url {
        Url::parse(s).expect("test URL")
    }

    const PAGE: &str = r##"<!doctype html><html><head>
        <title>Widgets - Example Site</title>
        <base href="/docs/">
        <link rel="stylesheet" href="/s.css">
        <link rel="Canonical" href="widgets.html">
        <meta name="robots" content="NoIndex, nofollow">
        </head><body>
        <nav><a href="/nav-only">Navigation link</a></nav>
        <article><h1>Widgets</h1>
        <p>Widgets are small parts that fit together. This paragraph is long enough to be the
        main content of the page, so that the readability extraction keeps it whole and does
        not mistake the page for something without an article. It keeps on talking about
        widgets and how they are made, measured, sold and repaired.</p>
        <p>A second paragraph <a href="gears.html#teeth">about gears</a>, and
        <a href="mailto:x@example.com">mail</a>, <a href="javascript:void(0)">js</a>,
        <a href="https://other.example/x">elsewhere</a>, <a href="#top">top</a>.</p>
        </article></body></html>"##;

    #[test]
    fn html_links_canonical_and_meta_robots() {
        let doc = parse_html(PAGE, &url("https://example.com/docs/widgets.html?ref=1"));
        assert_eq!(
            doc.canonical,
            Some(url("https://example.com/docs/widgets.html"))
        );
        assert_eq!(
            doc.links,
            vec![
                url("https://example.com/nav-only"),
                url("https://example.com/docs/gears.html"),
                url("https://other.example/x"),
                url("https://example.com/docs/"),
            ]
        );
        assert!(doc.noindex && doc.nofollow);
        assert!(doc.text.contains("Widgets are small parts"), "{}", doc.text);
        assert!(!doc.text.contains("Navigation link"), "{}", doc.text);
        // Readability keeps the whole `<title>` when the part before the separator is
        // shorter than three words.
        assert_eq!(doc.title, "Widgets - Example Site");
    }

    #[test]
    fn frames_and_noscript_fallbacks_are_links() {
        // mdBook's shape: the table of contents is an iframe that only a reader without
        // scripts gets, inside `<noscript>`.
        let doc = parse_html(
            r#"<html><head><title>Book</title></head><body>
            <nav id="sidebar"><noscript>
                <iframe class="sidebar-iframe-outer" src="toc.html"></iframe>
                <a href="print.html">Print</a>
            </noscript></nav>
            <iframe src="/embedded.html"></iframe>
            <frameset><frame src="frame-a.html"></frameset>
            <main><p>Text of the book's first page, long enough to be its content.</p></main>
            </body></html>"#,
            &url("https://example.com/book/index.html"),
        );
        for expected in [
            "https://example.com/book/toc.html",
            "https://example.com/book/print.html",
            "https://example.com/embedded.html",
        ] {
            assert!(
                doc.links.contains(&url(expected)),
                "{expected} missing from {:?}",
                doc.links
            );
        }
        // html5ever drops a `<frameset>` after body content; a frameset page keeps it.
        let frames = parse_html(
            r#"<html><head><title>Manual</title></head>
            <frameset cols="20%,80%"><frame src="nav.html"><frame src="main.html"></frameset>
            </html>"#,
            &url("https://example.com/manual/"),
        );
        assert_eq!(
            frames.links,
            vec![
                url("https://example.com/manual/nav.html"),
                url("https://example.com/manual/main.html"),
            ]
        );
    }

    #[test]
    fn text_starts_with_the_page_heading() {
        let headings = vec!["Site Name".to_owned(), "What Is Ownership?".to_owned()];
        assert_eq!(
            with_page_heading("Body.", "What is Ownership? - Site Name", &headings),
            "# What Is Ownership?\n\nBody."
        );
        assert_eq!(
            with_page_heading("Body.", "Unrelated title", &headings),
            "# Unrelated title\n\nBody."
        );
        assert_eq!(
            with_page_heading("## Own\n\nBody.", "T", &headings),
            "## Own\n\nBody."
        );
        assert_eq!(with_page_heading("", "T", &headings), "");
    }

    #[test]
    fn same_page_links_keep_only_their_words() {
        let doc = parse_html(
            r##"<html><head><title>Anchors</title></head><body><article>
            <h2 id="x"><a class="header" href="#x">Section heading</a></h2>
            <p>See <a href="#listing-1">Listing 1</a> and <a href="/other">another page</a>.</p>
            </article></body></html>"##,
            &url("https://e.x/anchors"),
        );
        assert!(doc.text.contains("## Section heading"), "{}", doc.text);
        assert!(doc.text.contains("See Listing 1 and"), "{}", doc.text);
        assert!(!doc.text.contains("(#"), "{}", doc.text);
    }

    #[test]
    fn short_html_pages_keep_their_text() {
        let doc = parse_html(
            "<html><head><title>Tiny</title></head><body><p>Just a line.</p></body></html>",
            &url("https://example.com/tiny"),
        );
        assert_eq!(doc.title, "Tiny");
        assert_eq!(doc.text, "# Tiny\n\nJust a line.");
        assert!(!doc.noindex && !doc.nofollow);
    }

    #[test]
    fn fallback_body_text_drops_chrome() {
        let text = body_text_without_chrome(
            "<html><body><header>Site header</header><nav>Menu</nav><h2>Topic</h2>\
             <p>Just a line.</p><aside>Related</aside><footer>Legal</footer>\
             <script>var x;</script></body></html>",
        );
        assert!(text.contains("## Topic"), "{text}");
        assert!(text.contains("Just a line."), "{text}");
        for chrome in ["Site header", "Menu", "Related", "Legal", "var x"] {
            assert!(!text.contains(chrome), "{chrome} in {text}");
        }
    }

    #[test]
    fn text_pages() {
        let md = parse_text(
            "\u{feff}# Release notes\n\n\n\nVersion 2  \n",
            &url("https://e.x/notes.md"),
            true,
        );
        assert_eq!(md.title, "Release notes");
        assert_eq!(md.text, "# Release notes\n\nVersion 2");
        let plain = parse_text("hello", &url("https://e.x/dir/readme.txt"), false);
        assert_eq!(plain.title, "readme.txt");
        assert_eq!(fallback_title(&url("https://e.x/")), "e.x");
    }

    #[test]
    fn content_kinds() {
        assert_eq!(
            ContentKind::of(Some("text/html; charset=utf-8"), b""),
            ContentKind::Html
        );
        assert_eq!(
            ContentKind::of(Some("application/xhtml+xml"), b""),
            ContentKind::Html
        );
        assert_eq!(
            ContentKind::of(Some("Text/Plain"), b""),
            ContentKind::Text { markdown: false }
        );
        assert_eq!(
            ContentKind::of(Some("text/markdown"), b""),
            ContentKind::Text { markdown: true }
        );
        assert_eq!(
            ContentKind::of(Some("application/pdf"), b"%PDF"),
            ContentKind::Other("application/pdf".into())
        );
        assert_eq!(
            ContentKind::of(None, b"  <!doctype html>"),
            ContentKind::Html
        );
        assert!(matches!(
            ContentKind::of(None, b"\x00\x01"),
            ContentKind::Other(_)
        ));
    }

    #[test]
    fn charset_decoding() {
        // "café" in windows-1252 / ISO-8859-1.
        let latin1 = b"caf\xe9";
        assert_eq!(
            decode(latin1, Some("text/plain; charset=ISO-8859-1"), false),
            "café"
        );
        assert_eq!(
            decode(
                b"<meta charset=\"windows-1252\"><p>caf\xe9",
                Some("text/html"),
                true
            ),
            "<meta charset=\"windows-1252\"><p>café"
        );
        assert_eq!(decode("café".as_bytes(), None, false), "café");
        assert_eq!(
            decode(
                b"\xef\xbb\xbfcaf\xc3\xa9",
                Some("text/plain; charset=latin1"),
                false
            ),
            "café"
        );
    }

    #[test]
    fn hashing_and_tidying() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(tidy_text("  a  \n\n\n\n b \n"), "a\n\n b");
    }
}
