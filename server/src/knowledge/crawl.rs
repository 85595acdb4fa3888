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
//!   `respect_robots`: fetched once per origin through the same [`SafeClient`]; 4xx means no
//!   restrictions; 5xx or an unreachable file means everything is disallowed (RFC 9309
//!   § 2.3.1.4). `Crawl-delay` is honoured up to [`MAX_CRAWL_DELAY`]. `<meta name="robots">`
//!   `noindex` (page not kept) and `nofollow` (links not followed) are honoured too.
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

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{Arc, Mutex as StdMutex, PoisonError},
    time::Duration,
};

use dom_smoothie::{Config as ReadabilityConfig, Readability, TextMode};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use texting_robots::Robot;
use tokio::{
    sync::{mpsc, Mutex, OnceCell, Semaphore},
    task::{Id, JoinSet},
    time::Instant,
};
use url::Url;

use super::sandbox::Sandbox;
use crate::outbound::{Fetched, HopError, NetError, SafeClient};

/// Largest accepted `crawl_depth`.
pub const MAX_CRAWL_DEPTH: u8 = 5;
/// Largest accepted `max_pages`.
pub const MAX_PAGES_LIMIT: u32 = 1000;
/// `max_pages` when the request does not give one.
pub const DEFAULT_MAX_PAGES: u32 = 50;
/// `crawl_depth` when the request does not give one.
pub const DEFAULT_CRAWL_DEPTH: u8 = 2;
/// The product token matched against robots.txt `User-agent` lines.
pub const ROBOTS_USER_AGENT: &str = "AgentChat";
/// Requests in flight per origin (scheme, host, port).
pub const PER_ORIGIN_CONCURRENCY: usize = 4;
/// Requests in flight in all.
pub const MAX_IN_FLIGHT: usize = 16;
/// The longest robots.txt `Crawl-delay` honoured; longer delays are shortened to this.
pub const MAX_CRAWL_DELAY: Duration = Duration::from_secs(2);

/// Page requests a crawl may make beyond `max_pages` for pages that fail, are skipped or
/// are not kept (see [`request_budget`]): a fixed part and a share of `max_pages`.
pub const REQUEST_ALLOWANCE: u32 = 5;

/// Page requests one crawl may make: `max_pages` plus [`REQUEST_ALLOWANCE`] plus a tenth of
/// `max_pages` (3 → 8, 50 → 60, 1000 → 1105). Failed fetches, error statuses, skipped
/// content types and duplicates all spend it, so a site full of broken links is not
/// hammered; robots.txt and sitemaps are not counted (one robots.txt per origin, at most
/// 20 sitemaps).
pub const fn request_budget(max_pages: u32) -> u32 {
    max_pages
        .saturating_add(REQUEST_ALLOWANCE)
        .saturating_add(max_pages / 10)
}

/// Most include or exclude patterns accepted, each.
const MAX_PATTERNS: usize = 50;
/// Longest pattern accepted, in bytes.
const MAX_PATTERN_LEN: usize = 500;
/// URLs waiting to be fetched; links found beyond this are not queued.
const MAX_FRONTIER: usize = 20_000;
/// Sitemaps read (listed ones plus one level of index children).
const MAX_SITEMAPS: usize = 20;
/// Page URLs taken from sitemaps.
const MAX_SITEMAP_URLS: usize = 10_000;
/// Bytes of robots.txt parsed (RFC 9309 § 2.5 asks for at least 500 KiB).
const MAX_ROBOTS_BYTES: usize = 512 * 1024;

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
    /// URLs that could not be fetched, with the reason (a [`NetError`] sentence).
    pub errors: Vec<(Url, String)>,
}

/// Crawls from `start` according to `config`, sending events on `events`; pages are read
/// in the extraction child processes of `sandbox`.
///
/// Returns when the frontier is exhausted, `max_pages` pages were kept, the request budget
/// ([`request_budget`]) is spent, or `events` was closed by its receiver (the crawl is then
/// abandoned and the summary covers what was done).
///
/// # Errors
/// Only when the crawl cannot begin: an invalid `config` ([`NetError::InvalidConfig`]), a
/// start URL refused by the SSRF rule, a start page that cannot be fetched (any
/// [`NetError`], including [`NetError::Http`] for a non-2xx status), or a start page that
/// robots.txt disallows ([`NetError::RobotsDisallowed`]).
pub async fn crawl(
    client: &SafeClient,
    sandbox: &Arc<Sandbox>,
    start: Url,
    config: &CrawlConfig,
    events: mpsc::Sender<CrawlEvent>,
) -> Result<CrawlSummary, NetError> {
    let filter = PathFilter::new(config).map_err(NetError::InvalidConfig)?;
    let start = normalize(&start).ok_or(NetError::Scheme)?;
    let mut crawler = Crawler {
        client: client.clone(),
        sandbox: sandbox.clone(),
        requested: 0,
        config: config.clone(),
        scope: Arc::new(Scope {
            same_domain: config.same_domain,
            sites: vec![site_key(&start)],
            filter: Arc::new(filter),
        }),
        hosts: HashMap::new(),
        seen: SeenUrls::default(),
        emitted: HashSet::new(),
        texts: HashMap::new(),
        levels: vec![VecDeque::new(); usize::from(MAX_CRAWL_DEPTH) + 1],
        queued: 0,
        in_flight: JoinSet::new(),
        in_flight_urls: HashMap::new(),
        in_flight_at: [0; MAX_CRAWL_DEPTH as usize + 1],
        done: 0,
        summary: CrawlSummary::default(),
        events,
        closed: false,
    };
    crawler.run(start).await?;
    Ok(crawler.summary)
}

/// Include/exclude globs on the URL path.
struct PathFilter {
    include: Option<GlobSet>,
    exclude: Option<GlobSet>,
}

impl PathFilter {
    fn new(config: &CrawlConfig) -> Result<Self, String> {
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

    fn allows(&self, path: &str) -> bool {
        if self.exclude.as_ref().is_some_and(|g| g.is_match(path)) {
            return false;
        }
        self.include.as_ref().is_none_or(|g| g.is_match(path))
    }
}

/// What a crawl may reach: the site (for `same_domain`) and the path patterns.
#[derive(Clone)]
struct Scope {
    same_domain: bool,
    /// Site keys ([`site_key`]) of the start URL and of the start page's final URL.
    sites: Vec<String>,
    filter: Arc<PathFilter>,
}

impl Scope {
    /// Whether a discovered URL is in scope.
    fn allows(&self, url: &Url) -> bool {
        self.on_site(url) && self.filter.allows(url.path())
    }

    fn on_site(&self, url: &Url) -> bool {
        !self.same_domain || self.sites.contains(&site_key(url))
    }

    fn check_redirect(&self, target: &Url) -> Result<(), HopRefusal> {
        if !self.on_site(target) {
            return Err(HopRefusal::OffSite(target.clone()));
        }
        if !self.filter.allows(target.path()) {
            return Err(HopRefusal::OutsidePatterns(target.clone()));
        }
        Ok(())
    }
}

/// URLs queued, fetched, claimed as a redirect target, or known as a final or canonical URL:
/// never requested again. Shared by the crawl loop and the fetch tasks.
#[derive(Clone, Default)]
struct SeenUrls(Arc<StdMutex<HashSet<Url>>>);

impl SeenUrls {
    /// Adds `url`; false when it was already there.
    fn insert(&self, url: Url) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(url)
    }

    fn len(&self) -> usize {
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

/// The URL without fragment, if it is `http`/`https` with a host. The `url` crate has already
/// lower-cased the scheme and host and removed a default port.
fn normalize(url: &Url) -> Option<Url> {
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return None;
    }
    let mut url = url.clone();
    url.set_fragment(None);
    Some(url)
}

/// The site a URL belongs to for `same_domain`: its host without one leading `www.`.
fn site_key(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    host.strip_prefix("www.").unwrap_or(host).to_owned()
}

/// The key of a URL's origin (robots.txt and concurrency are per origin).
fn origin_key(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// The robots.txt verdict for one origin.
#[derive(Debug)]
struct RobotsRules {
    robot: Option<Robot>,
    /// Set when robots.txt was unreachable (5xx or a failed fetch): everything is disallowed.
    unreachable: Option<NetError>,
    sitemaps: Vec<String>,
    delay: Duration,
}

impl RobotsRules {
    fn allow_all() -> Self {
        Self {
            robot: None,
            unreachable: None,
            sitemaps: Vec::new(),
            delay: Duration::ZERO,
        }
    }

    /// Builds the verdict from a fetch of `/robots.txt` (RFC 9309 § 2.3.1).
    fn from_fetch(result: Result<Fetched, NetError>) -> Self {
        match result {
            Ok(f) if (200..300).contains(&f.status) => {
                let body = &f.body[..f.body.len().min(MAX_ROBOTS_BYTES)];
                Self::parse(body)
            }
            Ok(f) if (400..500).contains(&f.status) => Self::allow_all(),
            Ok(f) => Self {
                unreachable: Some(NetError::Http(f.status)),
                ..Self::allow_all()
            },
            Err(e) => Self {
                unreachable: Some(e),
                ..Self::allow_all()
            },
        }
    }

    fn parse(body: &[u8]) -> Self {
        match Robot::new(ROBOTS_USER_AGENT, body) {
            Ok(robot) => {
                let delay = robot
                    .delay
                    .filter(|d| d.is_finite() && *d > 0.0)
                    .map_or(Duration::ZERO, |d| {
                        Duration::from_secs_f32(d.min(MAX_CRAWL_DELAY.as_secs_f32()))
                    });
                Self {
                    sitemaps: robot.sitemaps.clone(),
                    delay,
                    robot: Some(robot),
                    unreachable: None,
                }
            }
            // The parser is forgiving; a file it cannot read at all restricts nothing.
            Err(_) => Self::allow_all(),
        }
    }

    /// `Ok` when `url` may be fetched; otherwise the reason.
    fn check(&self, url: &Url) -> Result<(), RobotsDenial> {
        if let Some(e) = &self.unreachable {
            return Err(RobotsDenial::Unreachable(e.clone()));
        }
        match &self.robot {
            Some(robot) if !robot.allowed(url.as_str()) => Err(RobotsDenial::Disallowed),
            _ => Ok(()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum RobotsDenial {
    Disallowed,
    Unreachable(NetError),
}

impl RobotsDenial {
    fn reason(&self) -> String {
        match self {
            Self::Disallowed => "robots.txt disallows this page".to_owned(),
            Self::Unreachable(e) => {
                format!("robots.txt could not be read ({e}), so the site is treated as disallowing all pages")
            }
        }
    }

    fn into_start_error(self) -> NetError {
        match self {
            Self::Disallowed => NetError::RobotsDisallowed,
            Self::Unreachable(e) => e,
        }
    }
}

/// Per-origin state shared by the fetch tasks.
struct OriginState {
    robots: OnceCell<Arc<RobotsRules>>,
    permits: Semaphore,
    next_slot: Mutex<Instant>,
}

impl OriginState {
    fn new() -> Self {
        Self {
            robots: OnceCell::new(),
            permits: Semaphore::new(PER_ORIGIN_CONCURRENCY),
            next_slot: Mutex::new(Instant::now()),
        }
    }

    /// The origin's robots.txt verdict, fetched once.
    async fn robots(&self, client: &SafeClient, url: &Url) -> Arc<RobotsRules> {
        self.robots
            .get_or_init(|| async {
                let rules = match url.join("/robots.txt") {
                    Ok(robots_url) => {
                        RobotsRules::from_fetch(client.get_any_status(&robots_url).await)
                    }
                    Err(_) => RobotsRules::allow_all(),
                };
                Arc::new(rules)
            })
            .await
            .clone()
    }

    /// Waits for this origin's next request slot under a crawl delay.
    async fn pace(&self, delay: Duration) {
        if delay.is_zero() {
            return;
        }
        let slot = {
            let mut next = self.next_slot.lock().await;
            let slot = (*next).max(Instant::now());
            *next = slot + delay;
            slot
        };
        tokio::time::sleep_until(slot).await;
    }
}

/// What a fetch task found.
enum Outcome {
    Page { final_url: Url, doc: Box<PageDoc> },
    Denied(RobotsDenial),
    Skipped(String),
    Failed(NetError),
}

struct Done {
    url: Url,
    depth: u8,
    outcome: Outcome,
}

/// What was extracted from a fetched page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PageDoc {
    title: String,
    text: String,
    canonical: Option<Url>,
    links: Vec<Url>,
    noindex: bool,
    nofollow: bool,
}

/// Why the crawler refused to follow a redirect.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HopRefusal {
    /// robots.txt of the same origin disallows the target.
    Robots,
    /// The target is already fetched or queued.
    Seen(Url),
    /// The target is off the site (`same_domain`).
    OffSite(Url),
    /// The target's path is outside the include/exclude patterns.
    OutsidePatterns(Url),
}

impl HopRefusal {
    fn into_outcome(self) -> Outcome {
        match self {
            Self::Robots => Outcome::Denied(RobotsDenial::Disallowed),
            Self::Seen(u) => Outcome::Skipped(format!(
                "the page redirects to {u}, which is crawled already"
            )),
            Self::OffSite(u) => {
                Outcome::Skipped(format!("the page redirects off the site, to {u}"))
            }
            Self::OutsidePatterns(u) => Outcome::Skipped(format!(
                "the page redirects to {u}, outside the URL patterns"
            )),
        }
    }
}

/// One URL to fetch, with what its task shares with the crawl.
struct FetchTask {
    client: SafeClient,
    sandbox: Arc<Sandbox>,
    origin: Arc<OriginState>,
    url: Url,
    respect_robots: bool,
    /// The scope redirect targets must stay in; `None` for the start page.
    scope: Option<Arc<Scope>>,
    seen: SeenUrls,
}

/// Fetches and extracts one URL (runs as a task). Redirect targets are refused before they
/// are requested when robots.txt of the same origin disallows them (another origin's
/// robots.txt is not consulted for a redirect target), when they leave the scope, or when
/// they are already fetched or queued.
async fn fetch_page(task: FetchTask) -> Outcome {
    let FetchTask {
        client,
        sandbox,
        origin,
        url,
        respect_robots,
        scope,
        seen,
    } = task;
    let mut rules = None;
    if respect_robots {
        let r = origin.robots(&client, &url).await;
        if let Err(denial) = r.check(&url) {
            return Outcome::Denied(denial);
        }
        origin.pace(r.delay).await;
        rules = Some(r);
    }
    let request_origin = origin_key(&url);
    let hop_check = move |hop: &Url| -> Result<(), HopRefusal> {
        if let Some(rules) = &rules {
            if origin_key(hop) == request_origin && rules.check(hop).is_err() {
                return Err(HopRefusal::Robots);
            }
        }
        if let Some(scope) = &scope {
            scope.check_redirect(hop)?;
        }
        if !seen.insert(hop.clone()) {
            return Err(HopRefusal::Seen(hop.clone()));
        }
        Ok(())
    };
    let fetched = {
        // The semaphore is never closed; without a permit the request simply goes ahead.
        let _permit = origin.permits.acquire().await.ok();
        client.get_with_hop_check(&url, &hop_check).await
    };
    let fetched = match fetched {
        Ok(f) => f,
        Err(HopError::Refused(refusal)) => return refusal.into_outcome(),
        Err(HopError::Net(e)) => return Outcome::Failed(e),
    };
    let kind = ContentKind::of(fetched.content_type.as_deref(), &fetched.body);
    let final_url = fetched.url;
    match kind {
        ContentKind::Html | ContentKind::Text { .. } => {
            // Parsing runs in an extraction child process: a hostile page can crash or
            // stall only that process.
            match sandbox
                .page(&fetched.body, &final_url, fetched.content_type, kind)
                .await
            {
                Ok(doc) => Outcome::Page {
                    final_url,
                    doc: Box::new(doc),
                },
                Err(err) => Outcome::Skipped(format!("the page could not be read: {err}")),
            }
        }
        ContentKind::Other(ct) => Outcome::Skipped(format!("content type {ct} is not supported")),
    }
}

/// Reads a fetched page's body as `kind` (HTML through readability, or text) into its title,
/// text, canonical URL, links and robots directives. CPU-bound and fed by a stranger's
/// server: it runs in an extraction child process ([`super::sandbox`]).
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
    fn of(content_type: Option<&str>, body: &[u8]) -> Self {
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
fn decode(body: &[u8], content_type: Option<&str>, html: bool) -> String {
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

/// Elements whose URL attribute leads to another page a reader can reach from this one:
/// hyperlinks and image-map areas (`href`), and inline and classic frames (`src`), whose
/// documents a browser shows as part of the page (mdBook, Javadoc and many generated
/// manuals put their table of contents in a frame).
const LINK_ATTRIBUTES: [(&str, &str); 4] = [
    ("a[href]", "href"),
    ("area[href]", "href"),
    ("iframe[src]", "src"),
    ("frame[src]", "src"),
];

/// Appends the absolute, normalised targets of `document`'s links and frames (see
/// [`LINK_ATTRIBUTES`]) to `links`, in document order per kind, skipping those in `seen`.
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

/// Makes the text start with the page heading as a `# ` line. Readability removes the
/// heading that repeats the title; the page heading is the first `<h1>`/`<h2>` whose words
/// begin the title (`What Is Ownership?` for `What is Ownership? - The Rust Programming
/// Language`), else the title itself. Text that already starts with a heading is kept as is.
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

/// The `<body>` as Markdown-style text, without scripts, navigation, headers, footers,
/// sidebars and forms.
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

/// A `text/plain` or `text/markdown` page: the text as it is; the title is the first
/// Markdown heading, else the last path segment.
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

fn sha256_hex(text: &str) -> String {
    format!("{:x}", Sha256::digest(text.as_bytes()))
}

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

struct Crawler {
    client: SafeClient,
    sandbox: Arc<Sandbox>,
    /// Page requests started (kept, skipped or failed), bounded by [`request_budget`].
    requested: u32,
    config: CrawlConfig,
    scope: Arc<Scope>,
    hosts: HashMap<String, Arc<OriginState>>,
    seen: SeenUrls,
    /// Canonical and final URLs of pages kept or judged duplicates of kept ones.
    emitted: HashSet<Url>,
    /// Content hash of every page kept, with its canonical URL.
    texts: HashMap<String, Url>,
    /// The frontier, one queue per depth.
    levels: Vec<VecDeque<Url>>,
    queued: usize,
    in_flight: JoinSet<Done>,
    in_flight_urls: HashMap<Id, (Url, u8)>,
    in_flight_at: [u32; MAX_CRAWL_DEPTH as usize + 1],
    done: u32,
    summary: CrawlSummary,
    events: mpsc::Sender<CrawlEvent>,
    /// The receiver is gone: stop.
    closed: bool,
}

impl Crawler {
    async fn run(&mut self, start: Url) -> Result<(), NetError> {
        self.seen.insert(start.clone());
        let origin = self.origin(&start);
        self.requested += 1;
        let outcome = fetch_page(FetchTask {
            client: self.client.clone(),
            sandbox: self.sandbox.clone(),
            origin,
            url: start.clone(),
            respect_robots: self.config.respect_robots,
            scope: None,
            seen: self.seen.clone(),
        })
        .await;
        let outcome = match outcome {
            Outcome::Failed(e) => return Err(e),
            Outcome::Denied(denial) => return Err(denial.into_start_error()),
            other => other,
        };
        if let Outcome::Page { final_url, .. } = &outcome {
            let key = site_key(final_url);
            if !self.scope.sites.contains(&key) {
                Arc::make_mut(&mut self.scope).sites.push(key);
            }
        }
        self.handle(Done {
            url: start.clone(),
            depth: 0,
            outcome,
        })
        .await;
        if self.config.use_sitemap && self.config.crawl_depth >= 1 && !self.finished() {
            self.seed_from_sitemaps(&start).await;
        }
        self.drive().await;
        Ok(())
    }

    fn finished(&self) -> bool {
        self.closed || self.summary.pages >= self.config.max_pages
    }

    fn origin(&mut self, url: &Url) -> Arc<OriginState> {
        self.hosts
            .entry(origin_key(url))
            .or_insert_with(|| Arc::new(OriginState::new()))
            .clone()
    }

    /// Queues `url` at `depth` unless it is out of scope, already known, or the frontier is full.
    fn enqueue(&mut self, url: Url, depth: u8) {
        if depth > self.config.crawl_depth
            || self.queued >= MAX_FRONTIER
            || !self.scope.allows(&url)
            || !self.seen.insert(url.clone())
        {
            return;
        }
        self.levels[usize::from(depth)].push_back(url);
        self.queued += 1;
    }

    /// Runs the frontier until it is exhausted or the crawl is finished.
    async fn drive(&mut self) {
        loop {
            self.spawn_ready();
            if self.in_flight.is_empty() || self.finished() {
                break;
            }
            let Some(joined) = self.in_flight.join_next_with_id().await else {
                break;
            };
            let done = match joined {
                Ok((id, done)) => {
                    self.forget(id);
                    done
                }
                Err(e) => {
                    let Some((url, depth)) = self.forget(e.id()) else {
                        continue;
                    };
                    Done {
                        url,
                        depth,
                        outcome: Outcome::Skipped("the page could not be processed".to_owned()),
                    }
                }
            };
            self.handle(done).await;
        }
        // Dropping the set aborts whatever is still running.
        self.in_flight.abort_all();
    }

    fn forget(&mut self, id: Id) -> Option<(Url, u8)> {
        let entry = self.in_flight_urls.remove(&id)?;
        let slot = &mut self.in_flight_at[usize::from(entry.1)];
        *slot = slot.saturating_sub(1);
        Some(entry)
    }

    /// Starts fetches while there is room: the lowest depth first, and a depth only once no
    /// shallower page is in flight.
    fn spawn_ready(&mut self) {
        while !self.finished()
            && self.requested < request_budget(self.config.max_pages)
            && self.in_flight.len() < MAX_IN_FLIGHT
            && self.summary.pages as usize + self.in_flight.len() < self.config.max_pages as usize
        {
            let Some(depth) = self.levels.iter().position(|q| !q.is_empty()) else {
                return;
            };
            if self.in_flight_at[..depth].iter().any(|n| *n > 0) {
                return;
            }
            let Some(url) = self.levels[depth].pop_front() else {
                return;
            };
            self.queued = self.queued.saturating_sub(1);
            let depth = depth as u8;
            let origin = self.origin(&url);
            self.requested += 1;
            let task = fetch_page(FetchTask {
                client: self.client.clone(),
                sandbox: self.sandbox.clone(),
                origin,
                url: url.clone(),
                respect_robots: self.config.respect_robots,
                scope: Some(self.scope.clone()),
                seen: self.seen.clone(),
            });
            let task_url = url.clone();
            let handle = self.in_flight.spawn(async move {
                Done {
                    url: task_url,
                    depth,
                    outcome: task.await,
                }
            });
            self.in_flight_urls.insert(handle.id(), (url, depth));
            self.in_flight_at[usize::from(depth)] += 1;
        }
    }

    async fn send(&mut self, event: CrawlEvent) {
        if !self.closed && self.events.send(event).await.is_err() {
            self.closed = true;
        }
    }

    async fn skip(&mut self, url: Url, reason: String) {
        self.summary.skipped += 1;
        self.send(CrawlEvent::Skipped { url, reason }).await;
    }

    /// Records one finished URL: keeps, skips or fails it, follows its links, reports progress.
    async fn handle(&mut self, done: Done) {
        let Done {
            url,
            depth,
            outcome,
        } = done;
        match outcome {
            Outcome::Page { final_url, doc } => self.accept(url, depth, final_url, *doc).await,
            Outcome::Denied(denial) => {
                // robots.txt refused the URL before it was requested: no request spent.
                self.requested = self.requested.saturating_sub(1);
                self.skip(url, denial.reason()).await
            }
            Outcome::Skipped(reason) => self.skip(url, reason).await,
            Outcome::Failed(e) => self.summary.errors.push((url, e.to_string())),
        }
        self.done += 1;
        let found = u32::try_from(self.seen.len()).unwrap_or(u32::MAX);
        let progress = CrawlEvent::Progress {
            done: self.done,
            found,
        };
        self.send(progress).await;
    }

    async fn accept(&mut self, url: Url, depth: u8, final_url: Url, doc: PageDoc) {
        let canonical = doc
            .canonical
            .as_ref()
            .filter(|c| c.host_str() == final_url.host_str())
            .cloned()
            .unwrap_or_else(|| final_url.clone());
        if self.emitted.contains(&canonical) {
            return self
                .skip(url, format!("duplicate of {canonical} (canonical URL)"))
                .await;
        }
        // Redirect targets were claimed in `seen` before they were requested, so the final
        // URL is fetched once; a later page naming it as canonical is a duplicate.
        self.emitted.insert(canonical.clone());
        self.emitted.insert(final_url.clone());
        self.seen.insert(canonical.clone());
        self.seen.insert(final_url);

        if !doc.nofollow || !self.config.respect_robots {
            let next = depth.saturating_add(1);
            for link in doc.links {
                self.enqueue(link, next);
            }
        }
        if doc.noindex && self.config.respect_robots {
            return self
                .skip(
                    url,
                    "the page asks not to be indexed (meta robots noindex)".to_owned(),
                )
                .await;
        }
        if doc.text.is_empty() {
            return self
                .skip(url, "the page has no readable text".to_owned())
                .await;
        }
        let content_hash = sha256_hex(&doc.text);
        if let Some(first) = self.texts.get(&content_hash) {
            let reason = format!("the page has the same text as {first}");
            return self.skip(url, reason).await;
        }
        self.texts.insert(content_hash.clone(), canonical.clone());
        self.summary.pages += 1;
        let page = CrawledPage {
            url: canonical,
            title: doc.title,
            content_hash,
            text: doc.text,
            depth,
        };
        self.send(CrawlEvent::Page(page)).await;
    }

    /// Reads the start origin's sitemaps and queues their page URLs at depth 1.
    async fn seed_from_sitemaps(&mut self, start: &Url) {
        let origin = self.origin(start);
        let robots = origin.robots(&self.client, start).await;
        let mut sources: Vec<Url> = robots
            .sitemaps
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
            match self.read_sitemap(&source).await {
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
            if let Some(Sitemap::Pages(urls)) = self.read_sitemap(&child).await {
                page_urls.extend(urls);
            }
        }
        for raw in page_urls.into_iter().take(MAX_SITEMAP_URLS) {
            if let Some(url) = Url::parse(raw.trim()).ok().and_then(|u| normalize(&u)) {
                self.enqueue(url, 1);
            }
        }
    }

    /// Fetches and parses one sitemap; a missing one (404/410) is not an error.
    async fn read_sitemap(&mut self, url: &Url) -> Option<Sitemap> {
        match self.client.get(url).await {
            Ok(f) => {
                let parsed = parse_sitemap(&f.body);
                if parsed.is_none() {
                    self.summary
                        .errors
                        .push((url.clone(), "the sitemap is not valid XML".to_owned()));
                }
                parsed
            }
            Err(NetError::Http(404 | 410)) => None,
            Err(e) => {
                self.summary.errors.push((url.clone(), e.to_string()));
                None
            }
        }
    }
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
    fn robots_rules() {
        let rules = RobotsRules::parse(
            b"User-agent: *\nDisallow: /\n\nUser-agent: AgentChat\nDisallow: /private/\nCrawl-delay: 30\nSitemap: https://e.x/sm.xml\n",
        );
        assert_eq!(rules.check(&url("https://e.x/public")), Ok(()));
        assert_eq!(
            rules.check(&url("https://e.x/private/a")),
            Err(RobotsDenial::Disallowed)
        );
        assert_eq!(rules.delay, MAX_CRAWL_DELAY, "delay is capped");
        assert_eq!(rules.sitemaps, vec!["https://e.x/sm.xml".to_owned()]);

        let fetched = |status: u16, body: &'static [u8]| {
            Ok(Fetched {
                url: url("https://e.x/robots.txt"),
                status,
                content_type: Some("text/plain".into()),
                body: bytes::Bytes::from_static(body),
            })
        };
        let missing = RobotsRules::from_fetch(fetched(404, b"not found"));
        assert_eq!(missing.check(&url("https://e.x/anything")), Ok(()));
        let forbidden = RobotsRules::from_fetch(fetched(403, b""));
        assert_eq!(forbidden.check(&url("https://e.x/anything")), Ok(()));
        let broken = RobotsRules::from_fetch(fetched(503, b""));
        assert_eq!(
            broken.check(&url("https://e.x/anything")),
            Err(RobotsDenial::Unreachable(NetError::Http(503)))
        );
        let failed = RobotsRules::from_fetch(Err(NetError::Timeout));
        assert!(failed.check(&url("https://e.x/")).is_err());
    }

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

    #[test]
    fn hashing_and_tidying() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(tidy_text("  a  \n\n\n\n b \n"), "a\n\n b");
    }
}
