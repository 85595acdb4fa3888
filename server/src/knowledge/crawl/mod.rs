//! The web crawler: turns a web site into clean page texts for a knowledge base, breadth-first
//! by depth, within scope and patterns, obeying robots.txt (RFC 9309) and optionally seeded
//! from sitemaps. The full policy (scope, de-duplication, robots, request budget,
//! concurrency) is docs/knowledge.md § Crawling; [`crawl`] is in `scheduler.rs`.

mod html;
mod robots;
mod scheduler;
mod scope;
mod sitemap;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use url::Url;

use crate::outbound::Validators;

pub(crate) use html::{decode, read_page, ContentKind, PageDoc};
pub use robots::{MAX_CRAWL_DELAY, ROBOTS_USER_AGENT};
pub use scheduler::{
    crawl, crawl_again, request_budget, MAX_IN_FLIGHT, PER_ORIGIN_CONCURRENCY, REQUEST_ALLOWANCE,
};
use scope::PathFilter;
pub use scope::{MAX_PATTERNS, MAX_PATTERN_LEN};

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
    /// Checks limits and compiles the patterns; the error is a sentence for a 400 (depth,
    /// `maxPages`, more than 50 patterns of a kind, an empty, over 500-byte or invalid glob).
    pub fn validate(&self) -> Result<(), String> {
        PathFilter::new(self).map(|_| ())
    }
}

/// A page kept by the crawl.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrawledPage {
    /// The canonical URL (docs/knowledge.md § Crawling), without fragment.
    pub url: Url,
    /// The page title: from the extraction, else `<title>`, else the last path segment.
    pub title: String,
    /// The main content as Markdown-style text (headings as `#` lines).
    pub text: String,
    /// SHA-256 of `text` (UTF-8), lower-case hex.
    pub content_hash: String,
    /// Link hops from the start page (sitemap URLs count as depth 1).
    pub depth: u8,
    /// The URL requested for it (before redirects), the key of [`KnownPages`].
    pub requested: Url,
    /// Its `ETag` and `Last-Modified`, for the next crawl's conditional request.
    pub validators: Validators,
    /// The in-scope links it gave the crawl (none when it asked not to be followed).
    pub links: Vec<Url>,
    /// The page is as the previous crawl kept it ([`KnownPage`]): it answered 304 Not
    /// Modified, or failed with an error other than 404 or 410. `text` is then empty, and
    /// `title`, `content_hash` and `links` are the previous crawl's.
    pub not_modified: bool,
}

/// A page the previous crawl kept, as a re-crawl sees it (docs/knowledge.md § Refresh):
/// asked for with its validators; on 304 its stored links are followed and it is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownPage {
    /// The canonical URL it was kept under.
    pub url: Url,
    pub title: String,
    pub content_hash: String,
    pub validators: Validators,
    pub links: Vec<Url>,
}

/// The previous crawl's pages by the URL each was requested at.
pub type KnownPages = HashMap<Url, KnownPage>;

/// What the crawl reports while it runs, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CrawlEvent {
    /// A page was kept.
    Page(Box<CrawledPage>),
    /// After every URL handled: URLs handled so far, and URLs found.
    Progress {
        /// Kept, skipped or failed.
        done: u32,
        /// Distinct in-scope URLs discovered so far.
        found: u32,
    },
    /// A URL was fetched or considered but not kept; `reason` is a sentence.
    Skipped { url: Url, reason: String },
}

/// The outcome of a crawl.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrawlSummary {
    pub pages: u32,
    /// [`CrawlEvent::Skipped`] events sent.
    pub skipped: u32,
    /// With the reason (a [`NetError`](crate::outbound::NetError) sentence).
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
