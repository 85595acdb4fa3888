//! The web crawler: turns a web site into clean page texts for a knowledge base.
//!
//! Crawling policy (this module):
//!
//! - **Breadth-first by crawl depth.** The start page has depth 0; a link found on a page of
//!   depth `d` has depth `d + 1` and is followed only while `d + 1 <= crawl_depth`. No page of
//!   depth `d + 1` is requested while a page of a smaller depth is still in flight, so when
//!   `max_pages` cuts a crawl short the pages kept are the nearest ones.
//! - **Scope.** Only `http`/`https` links. With `same_domain`, a URL is in scope when its host
//!   equals the host of the start URL or of the start page's final URL (after redirects),
//!   ignoring one leading `www.` (so `example.com` and `www.example.com` are one site); ports
//!   and schemes are not compared. Include/exclude globs ([`globset`]) match the URL path
//!   (percent-encoded, starting with `/`): exclude wins, an empty include list includes all.
//!   The start page is always fetched and kept, whatever the patterns. A redirect that leaves
//!   the scope is not followed (except from the start page, whose final host joins the site).
//! - **De-duplication.** URLs are normalised (fragment removed; the `url` crate lower-cases
//!   scheme and host and drops default ports; nothing else — query order is kept). A page is
//!   recorded under its canonical URL: the `<link rel="canonical">` target when it is on the
//!   same host as the final URL, otherwise the final URL after redirects. No URL is requested
//!   twice — a redirect to a URL already fetched or queued is not followed — and no canonical
//!   URL is emitted twice. A page whose text is identical to a page already kept (same
//!   content hash, e.g. `/` and `/index.html`) is skipped as well.
//! - **robots.txt** (RFC 9309) for the user agent [`ROBOTS_USER_AGENT`] when
//!   `respect_robots`: fetched once per origin through the same
//!   [`SafeClient`](crate::outbound::SafeClient); 4xx means no restrictions; 5xx or an
//!   unreachable file means everything is disallowed (RFC 9309 § 2.3.1.4). `Crawl-delay` is
//!   honoured up to [`MAX_CRAWL_DELAY`]. `<meta name="robots">` `noindex` (page not kept)
//!   and `nofollow` (links not followed) are honoured too.
//! - **Sitemaps** (sitemaps.org protocol) when `use_sitemap`: `/sitemap.xml` of the start
//!   origin and the `Sitemap:` lines of its robots.txt; a `<urlset>` gives page URLs, a
//!   `<sitemapindex>` gives sitemaps that are read one level deep. The page URLs are seeded
//!   at depth 1 (so not with `crawl_depth` 0) and obey scope, robots.txt and `max_pages`.
//! - **Content.** HTML pages go through readability-style main-content extraction
//!   ([`dom_smoothie`], Markdown text mode, headings kept); links come from the whole page.
//!   `text/plain` and `text/markdown` pages are kept as they are; other content types are
//!   skipped. Pages are read in extraction child processes ([`super::sandbox`]): a page
//!   that crashes or stalls its reader is skipped, and the crawl goes on.
//! - **Request budget.** At most [`request_budget`]`(max_pages)` page requests: failed
//!   fetches and pages not kept count too, so a site full of broken links is not hammered.
//! - **Concurrency.** At most [`PER_ORIGIN_CONCURRENCY`] requests per origin and
//!   [`MAX_IN_FLIGHT`] in all; each page is bounded by the client's
//!   [`FetchLimits`](crate::outbound::FetchLimits).
//!
//! Where each part lives:
//!
//! - `scope.rs`: URL normalisation, the site of `same_domain`, the path patterns, and the
//!   set of URLs never requested twice.
//! - `robots.rs`: the robots.txt verdict of an origin.
//! - `sitemap.rs`: reading sitemaps into page URLs.
//! - `html.rs`: reading a fetched page (HTML or text) into title, text, links, canonical
//!   URL and robots directives.
//! - `scheduler.rs`: [`crawl`] itself: the frontier by depth, the fetch tasks, per-origin
//!   concurrency and crawl delay, the request budget, de-duplication and the events.

mod html;
mod robots;
mod scheduler;
mod scope;
mod sitemap;

use serde::{Deserialize, Serialize};
use url::Url;

pub(crate) use html::{decode, read_page, ContentKind, PageDoc};
pub use robots::{MAX_CRAWL_DELAY, ROBOTS_USER_AGENT};
pub use scheduler::{
    crawl, request_budget, MAX_IN_FLIGHT, PER_ORIGIN_CONCURRENCY, REQUEST_ALLOWANCE,
};
use scope::PathFilter;

/// Largest accepted `crawl_depth`.
pub const MAX_CRAWL_DEPTH: u8 = 5;
/// Largest accepted `max_pages`.
pub const MAX_PAGES_LIMIT: u32 = 1000;
/// `max_pages` when the request does not give one.
pub const DEFAULT_MAX_PAGES: u32 = 50;
/// `crawl_depth` when the request does not give one.
pub const DEFAULT_CRAWL_DEPTH: u8 = 2;

/// What to crawl, as the API receives it (JSON, camelCase; every field optional).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct CrawlConfig {
    /// Link hops from the start page: 0 = the start page only; at most 5. Default 2.
    pub crawl_depth: u8,
    /// Pages kept, 1–1000. Default 50.
    pub max_pages: u32,
    /// Globs on the URL path (`/docs/**`); when non-empty only matching pages are crawled.
    /// `*` stays within a path segment, `**` crosses segments. A pattern with a `/` is
    /// matched against the whole path (anchored at the root when it does not start with `/`
    /// or `*`); a pattern without `/` matches the last segment at any depth (`*.pdf`).
    pub include_patterns: Vec<String>,
    /// Globs on the URL path; a matching page is not crawled (exclude wins over include).
    pub exclude_patterns: Vec<String>,
    /// Stay on the start page's host (a leading `www.` ignored). Default true.
    pub same_domain: bool,
    /// Seed the crawl from the site's sitemaps. Default false.
    pub use_sitemap: bool,
    /// Obey robots.txt and `<meta name="robots">`. Default true.
    pub respect_robots: bool,
}

impl Default for CrawlConfig {
    fn default() -> Self {
        Self {
            crawl_depth: DEFAULT_CRAWL_DEPTH,
            max_pages: DEFAULT_MAX_PAGES,
            include_patterns: Vec::new(),
            exclude_patterns: Vec::new(),
            same_domain: true,
            use_sitemap: false,
            respect_robots: true,
        }
    }
}

impl CrawlConfig {
    /// Checks the limits and compiles the patterns; the error is a sentence for a 400.
    ///
    /// # Errors
    /// `crawlDepth` above 5, `maxPages` 0 or above 1000, more than 50 patterns of a kind, an
    /// empty or over-long (500 bytes) pattern, or a pattern that is not a valid glob.
    pub fn validate(&self) -> Result<(), String> {
        PathFilter::new(self).map(|_| ())
    }
}

/// A page kept by the crawl.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrawledPage {
    /// The canonical URL (see the module documentation), without fragment.
    pub url: Url,
    /// The page title: from the extraction, else `<title>`, else the last path segment.
    pub title: String,
    /// The main content as Markdown-style text (headings as `#` lines).
    pub text: String,
    /// SHA-256 of `text` (UTF-8), lower-case hex.
    pub content_hash: String,
    /// Link hops from the start page (sitemap URLs count as depth 1).
    pub depth: u8,
}

/// What the crawl reports while it runs, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CrawlEvent {
    /// A page was kept.
    Page(CrawledPage),
    /// After every URL handled: URLs handled so far, and URLs found (handled or queued).
    Progress {
        /// URLs handled (kept, skipped or failed).
        done: u32,
        /// Distinct in-scope URLs discovered so far.
        found: u32,
    },
    /// A URL was fetched or considered but not kept; `reason` is a sentence.
    Skipped {
        /// The URL as requested.
        url: Url,
        /// Why it was not kept.
        reason: String,
    },
}

/// The outcome of a crawl.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrawlSummary {
    /// Pages kept ([`CrawlEvent::Page`] events sent).
    pub pages: u32,
    /// [`CrawlEvent::Skipped`] events sent.
    pub skipped: u32,
    /// URLs that could not be fetched, with the reason (a [`NetError`](crate::outbound::NetError) sentence).
    pub errors: Vec<(Url, String)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> CrawlConfig {
        CrawlConfig::default()
    }

    #[test]
    fn config_defaults_and_camel_case() {
        let c: CrawlConfig = serde_json::from_str("{}").expect("empty object");
        assert_eq!(c, CrawlConfig::default());
        assert_eq!(c.max_pages, 50);
        assert!(c.same_domain && c.respect_robots && !c.use_sitemap);
        let c: CrawlConfig = serde_json::from_str(
            r#"{"crawlDepth":3,"maxPages":7,"includePatterns":["/a/**"],"excludePatterns":["/b"],
                "sameDomain":false,"useSitemap":true,"respectRobots":false}"#,
        )
        .expect("full object");
        assert_eq!(
            c,
            CrawlConfig {
                crawl_depth: 3,
                max_pages: 7,
                include_patterns: vec!["/a/**".into()],
                exclude_patterns: vec!["/b".into()],
                same_domain: false,
                use_sitemap: true,
                respect_robots: false,
            }
        );
        let json = serde_json::to_value(&c).expect("serialize");
        assert_eq!(json["maxPages"], 7);
    }

    #[test]
    fn validate_limits_and_globs() {
        assert_eq!(config().validate(), Ok(()));
        let depth6 = CrawlConfig {
            crawl_depth: 6,
            ..config()
        };
        assert!(depth6.validate().unwrap_err().contains("crawlDepth"));
        let depth5 = CrawlConfig {
            crawl_depth: 5,
            ..config()
        };
        assert_eq!(depth5.validate(), Ok(()));
        for n in [0, 1001] {
            let c = CrawlConfig {
                max_pages: n,
                ..config()
            };
            assert!(c.validate().unwrap_err().contains("maxPages"), "{n}");
        }
        for n in [1, 1000] {
            let c = CrawlConfig {
                max_pages: n,
                ..config()
            };
            assert_eq!(c.validate(), Ok(()));
        }
        let bad_glob = CrawlConfig {
            include_patterns: vec!["/docs/[".into()],
            ..config()
        };
        assert!(bad_glob.validate().unwrap_err().contains("includePatterns"));
        let empty = CrawlConfig {
            exclude_patterns: vec!["  ".into()],
            ..config()
        };
        assert!(empty.validate().unwrap_err().contains("excludePatterns"));
        let many = CrawlConfig {
            exclude_patterns: vec!["/x".into(); 51],
            ..config()
        };
        assert!(many.validate().is_err());
    }
}
