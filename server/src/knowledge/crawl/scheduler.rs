//! The crawl itself: frontier by depth, fetch tasks, per-origin concurrency and crawl delay,
//! request budget, de-duplication and events (policy: docs/knowledge.md § Crawling).

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::Arc,
    time::Duration,
};

use tokio::{
    sync::{mpsc, Mutex, OnceCell, Semaphore},
    task::{Id, JoinSet},
    time::Instant,
};
use url::Url;

use super::{
    html::{ContentKind, PageDoc},
    robots::{RobotsDenial, RobotsRules},
    scope::{normalize, origin_key, site_key, PathFilter, Scope, SeenUrls},
    sitemap, CrawlConfig, CrawlEvent, CrawlSummary, CrawledPage, KnownPage, KnownPages,
    MAX_CRAWL_DEPTH,
};
use crate::{
    crypto::sha256_hex,
    knowledge::sandbox::Sandbox,
    outbound::{HopError, NetError, SafeClient, Validators},
};

/// Requests in flight per origin (scheme, host, port).
pub const PER_ORIGIN_CONCURRENCY: usize = 4;
/// Requests in flight in all.
pub const MAX_IN_FLIGHT: usize = 16;

/// Requests a crawl may make beyond `max_pages` (plus a tenth of it; [`request_budget`]).
pub const REQUEST_ALLOWANCE: u32 = 5;

/// Page requests one crawl may make: `max_pages` + [`REQUEST_ALLOWANCE`] + `max_pages / 10`.
/// Failures, skips and duplicates spend it; robots.txt and sitemaps do not.
pub const fn request_budget(max_pages: u32) -> u32 {
    max_pages
        .saturating_add(REQUEST_ALLOWANCE)
        .saturating_add(max_pages / 10)
}

/// URLs waiting to be fetched; links found beyond this are not queued.
const MAX_FRONTIER: usize = 20_000;

/// Crawls from `start` per `config`, sending events on `events`, reading pages in `sandbox`.
/// Ends when the frontier is exhausted, `max_pages` are kept, the budget is spent, or
/// `events` is closed. Errors (only when the crawl cannot begin): [`NetError::InvalidConfig`],
/// a start URL or page refused or unfetchable (any [`NetError`], `Http` for non-2xx), or
/// [`NetError::RobotsDisallowed`].
pub async fn crawl(
    client: &SafeClient,
    sandbox: &Arc<Sandbox>,
    start: Url,
    config: &CrawlConfig,
    events: mpsc::Sender<CrawlEvent>,
) -> Result<CrawlSummary, NetError> {
    crawl_again(client, sandbox, start, config, KnownPages::new(), events).await
}

/// [`crawl`] again over the pages the previous crawl kept (docs/knowledge.md § Refresh): a
/// known page is asked for with `If-None-Match` / `If-Modified-Since`; one answering 304
/// Not Modified (or failing with an error other than 404 or 410) is kept as it was
/// ([`CrawledPage::not_modified`]) and its stored links are followed, so the pages below it
/// are still reached. A known page answering 404 or 410 is not kept.
pub async fn crawl_again(
    client: &SafeClient,
    sandbox: &Arc<Sandbox>,
    start: Url,
    config: &CrawlConfig,
    known: KnownPages,
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
        known: Arc::new(known),
    };
    crawler.run(start).await?;
    Ok(crawler.summary)
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

/// Whether `error` says the page is gone for good (404 Not Found, 410 Gone).
fn is_gone(error: &NetError) -> bool {
    matches!(error, NetError::Http(404 | 410))
}

/// What a fetch task found.
enum Outcome {
    Page {
        final_url: Url,
        doc: Box<PageDoc>,
        validators: Validators,
    },
    /// 304 Not Modified to the validators sent; the answer's own validators, if any.
    NotModified {
        final_url: Url,
        validators: Validators,
    },
    Denied(RobotsDenial),
    Skipped(String),
    Failed(NetError),
}

struct Done {
    url: Url,
    depth: u8,
    outcome: Outcome,
}

/// Why the crawler refused to follow a redirect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HopRefusal {
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
    /// The previous crawl's validators of this URL (empty: a plain request).
    validators: Validators,
}

/// Fetches and extracts one URL. Redirect targets are refused before being requested when
/// the same origin's robots.txt disallows them, they leave the scope, or they are known.
async fn fetch_page(task: FetchTask) -> Outcome {
    let FetchTask {
        client,
        sandbox,
        origin,
        url,
        respect_robots,
        scope,
        seen,
        validators,
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
        client.get_conditional(&url, &validators, &hop_check).await
    };
    let fetched = match fetched {
        Ok(f) => f,
        Err(HopError::Refused(refusal)) => return refusal.into_outcome(),
        Err(HopError::Net(e)) => return Outcome::Failed(e),
    };
    let answered = Validators {
        etag: fetched.etag.clone(),
        last_modified: fetched.last_modified.clone(),
    };
    if fetched.status == 304 {
        // A 304 may repeat or update the validators (RFC 9110 § 15.4.5); those it omits stay.
        return Outcome::NotModified {
            final_url: fetched.url,
            validators: Validators {
                etag: answered.etag.or(validators.etag),
                last_modified: answered.last_modified.or(validators.last_modified),
            },
        };
    }
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
                    validators: answered,
                },
                Err(err) => Outcome::Skipped(format!("the page could not be read: {err}")),
            }
        }
        ContentKind::Other(ct) => Outcome::Skipped(format!("content type {ct} is not supported")),
    }
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
    /// The previous crawl's pages, by requested URL.
    known: Arc<KnownPages>,
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
            validators: self.validators_of(&start),
        })
        .await;
        let outcome = match outcome {
            Outcome::Failed(e) => return Err(e),
            Outcome::Denied(denial) => return Err(denial.into_start_error()),
            other => other,
        };
        if let Outcome::Page { final_url, .. } | Outcome::NotModified { final_url, .. } = &outcome {
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

    /// The validators the previous crawl stored for `url` (empty when it kept no such page).
    fn validators_of(&self, url: &Url) -> Validators {
        self.known
            .get(url)
            .map(|k| k.validators.clone())
            .unwrap_or_default()
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

    /// Starts fetches while there is room, lowest depth first, deeper only when none is in flight.
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
                validators: self.validators_of(&url),
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
            Outcome::Page {
                final_url,
                doc,
                validators,
            } => self.accept(url, depth, final_url, *doc, validators).await,
            Outcome::NotModified {
                final_url,
                validators,
            } => {
                self.keep_known(url, depth, final_url, Some(validators))
                    .await
            }
            // A page kept before that is not gone for good keeps its last version.
            Outcome::Failed(e) if !is_gone(&e) && self.known.contains_key(&url) => {
                self.summary.errors.push((url.clone(), e.to_string()));
                self.keep_known(url.clone(), depth, url, None).await
            }
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

    /// Keeps the previous crawl's page requested at `url` as it was (304, or an error other
    /// than 404/410), with `validators` when the answer gave new ones, and follows its links.
    async fn keep_known(
        &mut self,
        url: Url,
        depth: u8,
        final_url: Url,
        validators: Option<Validators>,
    ) {
        let Some(known) = self.known.get(&url).cloned() else {
            return self
                .skip(
                    url,
                    "the page answered 304 to a request it was not asked".to_owned(),
                )
                .await;
        };
        let KnownPage {
            url: canonical,
            title,
            content_hash,
            validators: stored,
            links,
        } = known;
        if self.emitted.contains(&canonical) {
            return self
                .skip(url, format!("duplicate of {canonical} (canonical URL)"))
                .await;
        }
        self.emitted.insert(canonical.clone());
        self.emitted.insert(final_url.clone());
        self.seen.insert(canonical.clone());
        self.seen.insert(final_url);
        let next = depth.saturating_add(1);
        for link in &links {
            self.enqueue(link.clone(), next);
        }
        if let Some(first) = self.texts.get(&content_hash) {
            let reason = format!("the page has the same text as {first}");
            return self.skip(url, reason).await;
        }
        self.texts.insert(content_hash.clone(), canonical.clone());
        self.summary.pages += 1;
        let page = CrawledPage {
            url: canonical,
            title,
            text: String::new(),
            content_hash,
            depth,
            requested: url,
            validators: validators.unwrap_or(stored),
            links,
            not_modified: true,
        };
        self.send(CrawlEvent::Page(Box::new(page))).await;
    }

    async fn accept(
        &mut self,
        url: Url,
        depth: u8,
        final_url: Url,
        doc: PageDoc,
        validators: Validators,
    ) {
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

        let mut links = Vec::new();
        if !doc.nofollow || !self.config.respect_robots {
            let next = depth.saturating_add(1);
            let mut listed = HashSet::new();
            for link in doc.links {
                if self.scope.allows(&link) && listed.insert(link.clone()) {
                    links.push(link.clone());
                }
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
            requested: url,
            validators,
            links,
            not_modified: false,
        };
        self.send(CrawlEvent::Page(Box::new(page))).await;
    }

    /// Reads the start origin's sitemaps and queues their page URLs at depth 1.
    async fn seed_from_sitemaps(&mut self, start: &Url) {
        let origin = self.origin(start);
        let robots = origin.robots(&self.client, start).await;
        let urls = sitemap::page_urls(
            &self.client,
            start,
            &robots.sitemaps,
            &mut self.summary.errors,
        )
        .await;
        for url in urls {
            self.enqueue(url, 1);
        }
    }
}
