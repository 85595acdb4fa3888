//! Markdown of chat messages rendered to HTML that is safe to insert into the page.
//!
//! A model's reply is untrusted text: raw HTML in it is shown as text, never interpreted
//! (OWASP XSS Prevention Cheat Sheet, rule "HTML-encode untrusted data"); links keep only
//! the `http`, `https` and `mailto` schemes, and images become links, so a reply cannot
//! run script or make the browser load anything by being displayed.

use pulldown_cmark::{html, CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

/// Whether a link target may stay a link: `http(s)`, `mailto`, or a fragment.
fn allowed_url(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    lower.starts_with("http://")
        || lower.starts_with("https://")
        || lower.starts_with("mailto:")
        || lower.starts_with('#')
}

/// Renders `source` (CommonMark with tables, strikethrough and task lists) to HTML. Every
/// character of the input that is not Markdown syntax is HTML-escaped, including raw HTML
/// blocks and inline tags; code blocks are escaped by the renderer.
pub fn render(source: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    // Links with a refused scheme are dropped together with their end tag; their text stays.
    let mut dropped_links = Vec::new();
    let events = Parser::new_ext(source, options).filter_map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Some(Event::Text(raw)),
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        }) => {
            let keep = allowed_url(&dest_url);
            dropped_links.push(!keep);
            keep.then_some(Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }))
        }
        Event::End(TagEnd::Link) => {
            let dropped = dropped_links.pop().unwrap_or(false);
            (!dropped).then_some(Event::End(TagEnd::Link))
        }
        Event::Start(Tag::Image {
            dest_url, title, ..
        }) => {
            let keep = allowed_url(&dest_url);
            dropped_links.push(!keep);
            keep.then_some(Event::Start(Tag::Link {
                link_type: LinkType::Inline,
                dest_url,
                title,
                id: CowStr::Borrowed(""),
            }))
        }
        Event::End(TagEnd::Image) => {
            let dropped = dropped_links.pop().unwrap_or(false);
            (!dropped).then_some(Event::End(TagEnd::Link))
        }
        other => Some(other),
    });
    let mut out = String::with_capacity(source.len() * 3 / 2);
    html::push_html(&mut out, events);
    out
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn raw_html_is_shown_as_text() {
        let html = render("Hi <script>alert(1)</script>\n\n<img src=x onerror=alert(1)>");
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
    }

    #[test]
    fn code_blocks_are_escaped() {
        let html = render("```html\n<b>bold</b>\n```");
        assert!(
            html.contains("<pre><code class=\"language-html\">&lt;b&gt;bold&lt;/b&gt;"),
            "{html}"
        );
    }

    #[test]
    fn markdown_is_rendered() {
        let html = render("# Title\n\n**strong** and `code`\n\n- one\n- two");
        assert!(html.contains("<h1>Title</h1>"), "{html}");
        assert!(html.contains("<strong>strong</strong>"), "{html}");
        assert!(html.contains("<code>code</code>"), "{html}");
        assert!(html.contains("<li>one</li>"), "{html}");
    }

    #[test]
    fn script_links_lose_their_target_but_keep_their_text() {
        let html = render("[click](javascript:alert(1)) and [docs](https://example.com/)");
        assert!(!html.contains("javascript:"), "{html}");
        assert!(html.contains("click"), "{html}");
        assert!(
            html.contains("<a href=\"https://example.com/\">docs</a>"),
            "{html}"
        );
    }

    #[test]
    fn images_become_links_and_load_nothing() {
        let html = render("![chart](https://example.com/c.png)");
        assert!(!html.contains("<img"), "{html}");
        assert!(
            html.contains("<a href=\"https://example.com/c.png\">chart</a>"),
            "{html}"
        );
    }
}
