//! The `web_fetch` tool: one public page read as text. Fetched with [`SafeClient::get`] (the
//! SSRF rule of [`crate::outbound`] on every hop, size and time limits); HTML is reduced to
//! its main text by the crawler's reader in an extraction child process ([`Sandbox`]); text
//! and Markdown are kept; the answer is cut by [`output::cap`].

use std::future::Future;

use bytes::Bytes;
use url::Url;

use super::output;
use crate::{
    knowledge::{
        crawl::{decode, ContentKind, PageDoc},
        extract::ExtractError,
        sandbox::Sandbox,
    },
    outbound::SafeClient,
};

/// Fetches `url` and returns its text for the model: for HTML (or an untyped body starting
/// with `<`) the title, a blank line and the main text; for `text/plain` and Markdown the
/// text (by `charset`, else UTF-8); cut by [`output::cap`].
/// Errors: a sentence for the model (not an absolute http(s) URL; the
/// [`NetError`](crate::outbound::NetError) sentence; an unsupported content type; no
/// readable text).
pub async fn fetch_text(
    client: &SafeClient,
    sandbox: &Sandbox,
    url: &str,
) -> Result<String, String> {
    fetch_text_with(client, url, |body, page_url, content_type| async move {
        sandbox
            .page(&body, &page_url, content_type, ContentKind::Html)
            .await
    })
    .await
}

/// [`fetch_text`] with the HTML reader passed in: `read_html(body, final URL, content type)`
/// (the tests read pages in process; the server always uses the [`Sandbox`]).
async fn fetch_text_with<R, F>(
    client: &SafeClient,
    url: &str,
    read_html: R,
) -> Result<String, String>
where
    R: FnOnce(Bytes, Url, Option<String>) -> F,
    F: Future<Output = Result<PageDoc, ExtractError>>,
{
    let url = Url::parse(url.trim()).map_err(|e| format!("url is not a valid URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("url must be an http or https URL".to_owned());
    }
    let fetched = client.get(&url).await.map_err(|e| e.to_string())?;
    let text = match ContentKind::of(fetched.content_type.as_deref(), &fetched.body) {
        ContentKind::Html => {
            read_page(read_html, fetched.body, fetched.url, fetched.content_type).await?
        }
        ContentKind::Text { .. } => decode(&fetched.body, fetched.content_type.as_deref(), false),
        ContentKind::Other(other) if other == "(none)" => {
            return Err(
                "the page has no content type and does not look like HTML, so it cannot be \
                 read as text"
                    .to_owned(),
            )
        }
        ContentKind::Other(other) => {
            return Err(format!(
                "the page is {other}, which cannot be read as text (HTML, plain text and \
                 Markdown pages can)"
            ))
        }
    };
    if text.trim().is_empty() {
        return Err("the page has no readable text".to_owned());
    }
    Ok(output::cap(text))
}

/// The title and main text of an HTML page, as `title`, a blank line and the text (whose
/// first line, when it only repeats the title as a heading, is left out).
async fn read_page<R, F>(
    read_html: R,
    body: Bytes,
    url: Url,
    content_type: Option<String>,
) -> Result<String, String>
where
    R: FnOnce(Bytes, Url, Option<String>) -> F,
    F: Future<Output = Result<PageDoc, ExtractError>>,
{
    let doc = read_html(body, url, content_type)
        .await
        .map_err(|e| format!("the page could not be read: {e}"))?;
    let (title, text) = (doc.title(), doc.text());
    if text.trim().is_empty() {
        return Ok(String::new());
    }
    let heading = format!("# {title}");
    let text = match text.strip_prefix(heading.as_str()) {
        Some(rest) if rest.is_empty() || rest.starts_with('\n') => rest.trim_start_matches('\n'),
        _ => text,
    };
    Ok(if title.is_empty() {
        text.to_owned()
    } else {
        format!("{title}\n\n{text}")
    })
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use axum::{response::Redirect, routing::get, Router};

    use super::*;
    use crate::{
        knowledge::crawl::read_page as read_in_process,
        outbound::{FetchLimits, NetError, NetPolicy},
    };

    const ARTICLE: &str = r#"<!doctype html>
<html><head><title>Tide tables</title></head>
<body>
<nav><a href="/">Home</a> | <a href="/about">About</a> | Menu chrome</nav>
<article>
<h1>Tide tables</h1>
<p>High tide at the harbour is at six in the morning and again shortly after six in the
evening. The difference between high and low water is about four metres in spring.</p>
<p>Low tide leaves the sand bar dry for nearly two hours, long enough to walk to the
island and back if you leave as soon as the water has gone down.</p>
<p>Always check the tables on the day: wind and pressure move the times by half an hour.</p>
</article>
<footer>Copyright footer chrome</footer>
</body></html>"#;

    async fn serve() -> SocketAddr {
        let app = Router::new()
            .route(
                "/page",
                get(|| async { ([("content-type", "text/html; charset=utf-8")], ARTICLE) }),
            )
            .route(
                "/notes.md",
                get(|| async {
                    (
                        [("content-type", "text/markdown")],
                        "# Notes\n\n- one\n- two\n",
                    )
                }),
            )
            .route(
                "/latin1",
                get(|| async {
                    (
                        [("content-type", "text/plain; charset=iso-8859-1")],
                        &b"caf\xe9"[..],
                    )
                }),
            )
            .route(
                "/image.png",
                get(|| async { ([("content-type", "image/png")], &b"\x89PNG\r\n\x1a\n"[..]) }),
            )
            .route("/long", get(|| async { "z".repeat(50_000) }))
            .route(
                "/gone",
                get(|| async { (axum::http::StatusCode::GONE, "gone") }),
            )
            .route(
                "/to-private",
                get(|| async { Redirect::temporary("http://192.168.1.1/admin") }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        addr
    }

    fn client_for(addr: SocketAddr) -> SafeClient {
        let policy = NetPolicy::from_list(&[addr.to_string()]).expect("policy");
        SafeClient::new(policy, FetchLimits::default()).expect("client")
    }

    /// [`fetch_text`] with the crawler's reader run in this process (a unit test has no
    /// `agentchat` binary to start as the extraction child).
    async fn fetch(client: &SafeClient, url: &str) -> Result<String, String> {
        fetch_text_with(client, url, |body, page_url, content_type| async move {
            Ok(read_in_process(
                &body,
                content_type.as_deref(),
                ContentKind::Html,
                &page_url,
            ))
        })
        .await
    }

    #[tokio::test]
    async fn html_pages_give_their_title_and_main_text() {
        let addr = serve().await;
        let client = client_for(addr);
        let text = fetch(&client, &format!("http://{addr}/page"))
            .await
            .expect("page");
        assert!(text.starts_with("Tide tables\n\n"), "{text}");
        assert!(text.contains("High tide at the harbour"), "{text}");
        assert!(text.contains("half an hour"), "{text}");
        assert!(!text.contains("<p>"), "{text}");
        assert!(!text.contains("footer chrome"), "{text}");
        assert!(!text.contains("# Tide tables"), "{text}");
    }

    #[tokio::test]
    async fn text_pages_are_kept_as_they_are() {
        let addr = serve().await;
        let client = client_for(addr);
        assert_eq!(
            fetch(&client, &format!("http://{addr}/notes.md")).await,
            Ok("# Notes\n\n- one\n- two\n".to_owned())
        );
        assert_eq!(
            fetch(&client, &format!("http://{addr}/latin1")).await,
            Ok("café".to_owned())
        );
        let long = fetch(&client, &format!("http://{addr}/long"))
            .await
            .expect("text");
        assert_eq!(long, output::cap("z".repeat(50_000)));
        assert!(long.ends_with(" more bytes]"));
    }

    #[tokio::test]
    async fn other_content_types_are_refused() {
        let addr = serve().await;
        let client = client_for(addr);
        assert_eq!(
            fetch(&client, &format!("http://{addr}/image.png")).await,
            Err(
                "the page is image/png, which cannot be read as text (HTML, plain text and \
                 Markdown pages can)"
                    .to_owned()
            )
        );
    }

    #[tokio::test]
    async fn urls_and_the_outbound_policy_are_checked() {
        let addr = serve().await;
        let client = client_for(addr);
        assert_eq!(
            fetch(&client, "file:///etc/passwd").await,
            Err("url must be an http or https URL".to_owned())
        );
        assert!(fetch(&client, "not a url")
            .await
            .is_err_and(|e| e.starts_with("url is not a valid URL")));
        assert_eq!(
            fetch(&client, &format!("http://{addr}/gone")).await,
            Err(NetError::Http(410).to_string())
        );
        assert_eq!(
            fetch(&client, &format!("http://{addr}/to-private")).await,
            Err(
                "the URL is not allowed: 192.168.1.1 is a private or reserved network address"
                    .to_owned()
            )
        );
        let strict = SafeClient::new(NetPolicy::strict(), FetchLimits::default()).expect("client");
        assert_eq!(
            fetch(&strict, &format!("http://{addr}/page")).await,
            Err(
                "the URL is not allowed: 127.0.0.1 is a private or reserved network address"
                    .to_owned()
            )
        );
    }
}
