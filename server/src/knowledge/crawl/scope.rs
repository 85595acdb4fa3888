//! What a crawl may reach and what it has seen: URL normalisation, the site of
//! `same_domain` (a leading `www.` ignored), the include/exclude path globs, and the set of
//! URLs that are never requested twice.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex as StdMutex, PoisonError},
};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use url::Url;

use super::{scheduler::HopRefusal, CrawlConfig, MAX_CRAWL_DEPTH, MAX_PAGES_LIMIT};

/// Most include or exclude patterns accepted, each.
pub const MAX_PATTERNS: usize = 50;
/// Longest pattern accepted, in bytes.
pub const MAX_PATTERN_LEN: usize = 500;

/// Include/exclude globs on the URL path.
pub(super) struct PathFilter {
    include: Option<GlobSet>,
    exclude: Option<GlobSet>,
}

impl PathFilter {
    pub(super) fn new(config: &CrawlConfig) -> Result<Self, String> {
        if config.crawl_depth > MAX_CRAWL_DEPTH {
            return Err(format!("crawlDepth must be at most {MAX_CRAWL_DEPTH}"));
        }
        if config.max_pages == 0 || config.max_pages > MAX_PAGES_LIMIT {
            return Err(format!("maxPages must be between 1 and {MAX_PAGES_LIMIT}"));
        }
        Ok(Self {
            include: compile_globs("includePatterns", &config.include_patterns)?,
            exclude: compile_globs("excludePatterns", &config.exclude_patterns)?,
        })
    }

    pub(super) fn allows(&self, path: &str) -> bool {
        if self.exclude.as_ref().is_some_and(|g| g.is_match(path)) {
            return false;
        }
        self.include.as_ref().is_none_or(|g| g.is_match(path))
    }
}

/// What a crawl may reach: the site (for `same_domain`) and the path patterns.
#[derive(Clone)]
pub(super) struct Scope {
    pub(super) same_domain: bool,
    /// Site keys ([`site_key`]) of the start URL and of the start page's final URL.
    pub(super) sites: Vec<String>,
    pub(super) filter: Arc<PathFilter>,
}

impl Scope {
    /// Whether a discovered URL is in scope.
    pub(super) fn allows(&self, url: &Url) -> bool {
        self.on_site(url) && self.filter.allows(url.path())
    }

    fn on_site(&self, url: &Url) -> bool {
        !self.same_domain || self.sites.contains(&site_key(url))
    }

    pub(super) fn check_redirect(&self, target: &Url) -> Result<(), HopRefusal> {
        if !self.on_site(target) {
            return Err(HopRefusal::OffSite(target.clone()));
        }
        if !self.filter.allows(target.path()) {
            return Err(HopRefusal::OutsidePatterns(target.clone()));
        }
        Ok(())
    }
}

/// URLs never requested again (queued, fetched, redirect targets, final or canonical URLs);
/// shared by the crawl loop and the fetch tasks.
#[derive(Clone, Default)]
pub(super) struct SeenUrls(Arc<StdMutex<HashSet<Url>>>);

impl SeenUrls {
    /// Adds `url`; false when it was already there.
    pub(super) fn insert(&self, url: Url) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(url)
    }

    pub(super) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

fn compile_globs(field: &str, patterns: &[String]) -> Result<Option<GlobSet>, String> {
    if patterns.is_empty() {
        return Ok(None);
    }
    if patterns.len() > MAX_PATTERNS {
        return Err(format!("{field} may hold at most {MAX_PATTERNS} patterns"));
    }
    let mut set = GlobSetBuilder::new();
    for raw in patterns {
        let pattern = raw.trim();
        if pattern.is_empty() {
            return Err(format!("{field} must not contain empty patterns"));
        }
        if pattern.len() > MAX_PATTERN_LEN {
            return Err(format!(
                "{field} patterns must be at most {MAX_PATTERN_LEN} bytes"
            ));
        }
        let anchored = if !pattern.contains('/') {
            format!("**/{pattern}")
        } else if pattern.starts_with('/') || pattern.starts_with('*') {
            pattern.to_owned()
        } else {
            format!("/{pattern}")
        };
        let glob = GlobBuilder::new(&anchored)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("{field}: `{pattern}` is not a valid glob ({})", e.kind()))?;
        set.add(glob);
    }
    set.build().map(Some).map_err(|e| format!("{field}: {e}"))
}

/// The URL without fragment, if `http(s)` with a host (the `url` crate already normalised it).
pub(super) fn normalize(url: &Url) -> Option<Url> {
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return None;
    }
    let mut url = url.clone();
    url.set_fragment(None);
    Some(url)
}

/// The site a URL belongs to for `same_domain`: its host without one leading `www.`.
pub(super) fn site_key(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    host.strip_prefix("www.").unwrap_or(host).to_owned()
}

/// The key of a URL's origin (robots.txt and concurrency are per origin).
pub(super) fn origin_key(url: &Url) -> String {
    url.origin().ascii_serialization()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).expect("test URL")
    }

    fn config() -> CrawlConfig {
        CrawlConfig::default()
    }

    #[test]
    fn path_patterns() {
        let f = PathFilter::new(&CrawlConfig {
            include_patterns: vec!["/docs/**".into(), "blog/*".into()],
            exclude_patterns: vec!["/docs/private/**".into(), "*.pdf".into()],
            ..config()
        })
        .expect("valid");
        assert!(f.allows("/docs/intro"));
        assert!(f.allows("/docs/a/b/c.html"));
        assert!(f.allows("/blog/post"));
        assert!(!f.allows("/blog/2024/post"), "`*` stays within a segment");
        assert!(!f.allows("/docs/private/x"), "exclude wins");
        assert!(
            !f.allows("/docs/manual.pdf"),
            "a pattern without `/` matches any segment"
        );
        assert!(!f.allows("/docs/a/b/manual.pdf"));
        assert!(!f.allows("/about"));
        let all = PathFilter::new(&config()).expect("valid");
        assert!(all.allows("/anything/at/all"));
    }

    #[test]
    fn normalization() {
        assert_eq!(
            normalize(&url("HTTP://Example.COM:80/a/B?x=1&a=2#frag")),
            Some(url("http://example.com/a/B?x=1&a=2"))
        );
        assert_eq!(
            normalize(&url("https://example.com:443")),
            Some(url("https://example.com/"))
        );
        assert_eq!(
            normalize(&url("https://example.com:8443/")).map(|u| u.port()),
            Some(Some(8443))
        );
        assert_eq!(normalize(&url("mailto:a@example.com")), None);
        assert_eq!(normalize(&url("ftp://example.com/")), None);
        assert_eq!(site_key(&url("https://www.example.com/")), "example.com");
        assert_eq!(
            site_key(&url("https://docs.example.com/")),
            "docs.example.com"
        );
    }
}
