//! Sitemaps (sitemaps.org protocol) as a source of page URLs: a `<urlset>` lists pages, a
//! `<sitemapindex>` lists sitemaps, which are read one level deep. DTDs are refused, so no
//! entity is ever expanded.

use url::Url;

use super::scope::normalize;
use crate::outbound::{NetError, SafeClient};

/// Sitemaps read (listed ones plus one level of index children).
const MAX_SITEMAPS: usize = 20;
/// Page URLs taken from sitemaps.
const MAX_SITEMAP_URLS: usize = 10_000;

/// What a sitemap document lists.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Sitemap {
    /// `<urlset>`: page URLs.
    Pages(Vec<String>),
    /// `<sitemapindex>`: sitemap URLs.
    Index(Vec<String>),
}

/// Parses a sitemap (sitemaps.org protocol); DTDs are refused, so no entity expansion.
fn parse_sitemap(body: &[u8]) -> Option<Sitemap> {
    let text = std::str::from_utf8(body)
        .ok()?
        .trim_start_matches('\u{feff}');
    let doc = roxmltree::Document::parse(text).ok()?;
    let root = doc.root_element();
    let (item, make): (&str, fn(Vec<String>) -> Sitemap) = match root.tag_name().name() {
        "urlset" => ("url", Sitemap::Pages),
        "sitemapindex" => ("sitemap", Sitemap::Index),
        _ => return None,
    };
    let locs = root
        .children()
        .filter(|n| n.is_element() && n.tag_name().name() == item)
        .filter_map(|n| {
            n.children()
                .find(|c| c.is_element() && c.tag_name().name() == "loc")
                .and_then(|loc| loc.text())
                .map(|t| t.trim().to_owned())
        })
        .filter(|t| !t.is_empty())
        .take(MAX_SITEMAP_URLS)
        .collect();
    Some(make(locs))
}

/// The page URLs of the sitemaps of `start`'s origin: those `listed` in robots.txt and
/// `/sitemap.xml`, at most [`MAX_SITEMAPS`] read, indexes followed one level, at most
/// [`MAX_SITEMAP_URLS`] entries, non-http(s) dropped. Unreadable sitemaps are recorded in
/// `errors`; a missing one (404/410) is not an error.
pub(super) async fn page_urls(
    client: &SafeClient,
    start: &Url,
    listed: &[String],
    errors: &mut Vec<(Url, String)>,
) -> Vec<Url> {
    let mut sources: Vec<Url> = listed
        .iter()
        .filter_map(|s| Url::parse(s.trim()).ok())
        .filter_map(|u| normalize(&u))
        .collect();
    if let Ok(default) = start.join("/sitemap.xml") {
        if !sources.contains(&default) {
            sources.push(default);
        }
    }
    sources.truncate(MAX_SITEMAPS);
    let mut read = 0usize;
    let mut page_urls = Vec::new();
    let mut children = Vec::new();
    for source in sources {
        read += 1;
        match read_sitemap(client, &source, errors).await {
            Some(Sitemap::Pages(urls)) => page_urls.extend(urls),
            Some(Sitemap::Index(maps)) => children.extend(maps),
            None => {}
        }
    }
    for child in children {
        if read >= MAX_SITEMAPS || page_urls.len() >= MAX_SITEMAP_URLS {
            break;
        }
        let Some(child) = Url::parse(child.trim()).ok().and_then(|u| normalize(&u)) else {
            continue;
        };
        read += 1;
        // One level of index only: a nested index is ignored.
        if let Some(Sitemap::Pages(urls)) = read_sitemap(client, &child, errors).await {
            page_urls.extend(urls);
        }
    }
    page_urls
        .into_iter()
        .take(MAX_SITEMAP_URLS)
        .filter_map(|raw| Url::parse(raw.trim()).ok().and_then(|u| normalize(&u)))
        .collect()
}

/// Fetches and parses one sitemap (404/410 is no error; other failures go to `errors`).
async fn read_sitemap(
    client: &SafeClient,
    url: &Url,
    errors: &mut Vec<(Url, String)>,
) -> Option<Sitemap> {
    match client.get(url).await {
        Ok(f) => {
            let parsed = parse_sitemap(&f.body);
            if parsed.is_none() {
                errors.push((url.clone(), "the sitemap is not valid XML".to_owned()));
            }
            parsed
        }
        Err(NetError::Http(404 | 410)) => None,
        Err(e) => {
            errors.push((url.clone(), e.to_string()));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sitemaps() {
        let urlset = br#"<?xml version="1.0" encoding="UTF-8"?>
            <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
              <url><loc> https://e.x/a </loc><lastmod>2024-01-01</lastmod></url>
              <url><loc>https://e.x/b?x=1&amp;y=2</loc></url>
              <url><lastmod>2024-01-01</lastmod></url>
            </urlset>"#;
        assert_eq!(
            parse_sitemap(urlset),
            Some(Sitemap::Pages(vec![
                "https://e.x/a".into(),
                "https://e.x/b?x=1&y=2".into()
            ]))
        );
        let index = br#"<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
            <sitemap><loc>https://e.x/s1.xml</loc></sitemap></sitemapindex>"#;
        assert_eq!(
            parse_sitemap(index),
            Some(Sitemap::Index(vec!["https://e.x/s1.xml".into()]))
        );
        let bomb = br#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">]>
            <urlset><url><loc>&lol;</loc></url></urlset>"#;
        assert_eq!(parse_sitemap(bomb), None, "DTDs are refused");
        assert_eq!(parse_sitemap(b"<html></html>"), None);
        assert_eq!(parse_sitemap(b"not xml"), None);
    }
}
