//! Durable knowledge jobs in the `jobs` table, taken by the job loop ([`crate::jobs::lease`],
//! up to `JOB_WORKERS` at once) under a lease a running job renews; a dead worker's job is
//! taken again once its lease passes, and a job started [`MAX_ATTEMPTS`] times fails its
//! document. With `EMBEDDING_MODEL` set, a job embeds its chunks, and an embedding failure
//! never fails the job ([`super::embed`]).

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};

use chrono::{DateTime, Utc};
use tokio::{
    sync::{mpsc, Notify},
    task::JoinHandle,
};
use tracing::{info, warn};

use url::Url;

use super::{
    chunk::{self, ChunkConfig},
    crawl::{self, CrawlConfig, CrawlEvent, KnownPage, KnownPages},
    embed,
    extract::{self, DocumentKind, ExtractError, Extracted},
    Knowledge,
};
use crate::{
    clock::Clock,
    ids::DocumentId,
    jobs::lease::{self, LeaseQueue, LeaseRules},
    outbound::Validators,
    store::{
        documents::{DocumentStatus, NewChunk, PageRecord, RefreshCounts},
        jobs::{JobKind, JobOutcome, JobRecord},
        StoreError,
    },
    webhooks::{self, EventType},
};

/// How long a job belongs to its worker without a renewal.
pub const LEASE: Duration = Duration::from_secs(60);
/// How often a running job renews its lease.
const HEARTBEAT: Duration = Duration::from_secs(15);
/// Starts of one job before it is given up (the first run plus two retries).
pub const MAX_ATTEMPTS: u32 = 3;
/// How often an idle worker looks for work it was not woken for (leases that ran out).
const POLL: Duration = Duration::from_secs(2);

/// Starts the job loop with `workers` slots (0: none) and, with workers and an embedder, the
/// embedding catch-up.
pub fn spawn(knowledge: Knowledge, workers: usize) -> Vec<JoinHandle<()>> {
    if workers == 0 {
        return Vec::new();
    }
    let mut handles = vec![lease::spawn(Jobs {
        k: knowledge.clone(),
        workers,
    })];
    if knowledge.embedder.is_some() {
        handles.push(tokio::spawn(embed::catch_up(knowledge)));
    }
    handles
}

/// The `jobs` table as a lease queue: each job leased for [`LEASE`], renewed every [`HEARTBEAT`].
struct Jobs {
    k: Knowledge,
    workers: usize,
}

struct Claimed {
    job: JobRecord,
    progress: Arc<Progress>,
}

impl LeaseQueue for Jobs {
    type Item = Claimed;
    type Outcome = Result<Done, Failure>;
    type Error = StoreError;
    const CLAIM_FAILED: &'static str = "cannot take a job";

    fn rules(&self) -> LeaseRules {
        LeaseRules {
            lease: LEASE,
            renew_every: Some(HEARTBEAT),
            concurrency: self.workers,
            poll: POLL,
        }
    }

    fn clock(&self) -> &Clock {
        &self.k.clock
    }

    fn wake(&self) -> &Notify {
        &self.k.wake
    }

    async fn claim(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        max: usize,
    ) -> Result<Vec<Claimed>, StoreError> {
        let mut claimed = Vec::new();
        while claimed.len() < max {
            match self.k.jobs.claim_job(now, lease_until).await {
                Ok(Some(job)) => claimed.push(Claimed {
                    job,
                    progress: Arc::default(),
                }),
                Ok(None) => break,
                // The jobs already taken run; the next pass asks again.
                Err(err) if !claimed.is_empty() => {
                    warn!(error = %err, "{}", Self::CLAIM_FAILED);
                    break;
                }
                Err(err) => return Err(err),
            }
        }
        Ok(claimed)
    }

    async fn renew(&self, claimed: &Claimed, lease_until: DateTime<Utc>) -> bool {
        let (done, total) = claimed.progress.get();
        let job = &claimed.job;
        match self
            .k
            .jobs
            .job_progress(&job.id, job.attempts, done, total, lease_until)
            .await
        {
            Ok(true) => true,
            Ok(false) => {
                lost(job);
                false
            }
            // The lease runs out unless a later renewal gets through.
            Err(err) => {
                warn!(job = %job.id, error = %err, "cannot renew a job's lease");
                true
            }
        }
    }

    async fn work(&self, claimed: &Claimed, slot: usize) -> Result<Done, Failure> {
        let job = &claimed.job;
        info!(worker = slot, job = %job.id, kind = %job.kind, attempt = job.attempts, "job started");
        run(&self.k, job, &claimed.progress).await
    }

    async fn finish(&self, claimed: &Claimed, outcome: Result<Done, Failure>) {
        finish(&self.k, &claimed.job, &claimed.progress, outcome).await;
    }
}

type Failure = String;

/// Logs that the claim on `job` was lost to another worker; its end is left to the holder.
fn lost(job: &JobRecord) {
    warn!(job = %job.id, attempt = job.attempts, "job taken over by another worker or deleted; stopping it here");
}

/// Aborts a job's task when dropped, so a job whose claim was lost stops.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn run(k: &Knowledge, job: &JobRecord, progress: &Arc<Progress>) -> Result<Done, Failure> {
    if job.attempts > MAX_ATTEMPTS {
        return Err("Indexing was interrupted too many times; try again with refresh.".into());
    }
    let _ = k
        .documents
        .set_document_status(
            &job.document_id,
            DocumentStatus::Processing,
            None,
            k.clock.now(),
        )
        .await;
    // The job runs in its own task so that a panic fails the job, not the worker; the task
    // stops when this future is dropped (the claim was lost).
    let task = {
        let k = k.clone();
        let job = job.clone();
        let progress = progress.clone();
        tokio::spawn(async move {
            match job.kind {
                JobKind::Crawl => crawl_site(&k, &job, &progress).await,
                JobKind::Ingest => ingest_file(&k, &job).await,
            }
        })
    };
    let _stop = AbortOnDrop(task.abort_handle());
    match task.await {
        Ok(outcome) => outcome,
        Err(err) => {
            warn!(job = %job.id, error = %err, "job task failed");
            Err("Indexing failed unexpectedly.".to_string())
        }
    }
}

async fn finish(
    k: &Knowledge,
    job: &JobRecord,
    progress: &Progress,
    outcome: Result<Done, Failure>,
) {
    match outcome {
        Ok(Done::Indexed {
            pages,
            bytes,
            refresh,
        }) => {
            let progress = match progress.get() {
                (_, 0) => (1, 1),
                counts => counts,
            };
            // The document becomes `indexed` and its job `succeeded` in one transaction.
            let outcome = JobOutcome::Indexed {
                pages,
                bytes,
                progress,
                refresh,
            };
            match k.jobs.complete_job(job, outcome, k.clock.now()).await {
                Ok(true) => {
                    info!(job = %job.id, "job succeeded");
                    crate::metrics::job_finished(job.kind, crate::metrics::JobEnd::Succeeded);
                    emit_document(k, job, EventType::DocumentIndexed).await;
                    if job.kind == JobKind::Crawl {
                        emit_document(k, job, EventType::CrawlCompleted).await;
                    }
                    if refresh.is_some() {
                        emit_document(k, job, EventType::DocumentRefreshed).await;
                    }
                }
                Ok(false) => {
                    info!(job = %job.id, "job taken over or deleted before it was recorded")
                }
                Err(err) => warn!(job = %job.id, error = %err, "cannot record a finished job"),
            }
        }
        Ok(Done::Deleted) => {
            // The document (and with it the job row) is gone; nothing to record.
            info!(job = %job.id, "document deleted while indexing");
            crate::metrics::job_finished(job.kind, crate::metrics::JobEnd::Deleted);
        }
        // Another worker holds the job now; its end is that worker's to record.
        Ok(Done::Lost) => {}
        Err(reason) => fail(k, job, &reason).await,
    }
}

/// Fails the job and document in one transaction and emits `document.failed`; final (a
/// refresh starts anew).
async fn fail(k: &Knowledge, job: &JobRecord, reason: &str) {
    let outcome = JobOutcome::Failed { reason };
    match k.jobs.complete_job(job, outcome, k.clock.now()).await {
        Ok(true) => {
            warn!(job = %job.id, reason, "job failed");
            crate::metrics::job_finished(job.kind, crate::metrics::JobEnd::Failed);
            emit_document(k, job, EventType::DocumentFailed).await;
        }
        Ok(false) => {
            info!(job = %job.id, "job taken over or deleted before its failure was recorded")
        }
        Err(err) => warn!(job = %job.id, error = %err, "cannot record a failed job"),
    }
}

async fn emit_document(k: &Knowledge, job: &JobRecord, event: EventType) {
    match k.documents.document_by_id(&job.document_id).await {
        Ok(Some(doc)) => {
            k.events
                .emit(&job.user_id, event, webhooks::document_data(&doc))
                .await;
        }
        Ok(None) => {}
        Err(err) => {
            warn!(job = %job.id, error = %err, "cannot load a document for a webhook event")
        }
    }
}

/// A job's embedding of its chunks; after one failure the job stops asking (catch-up will).
#[derive(Default)]
struct Embedding {
    failed: bool,
    embedded: bool,
}

impl Embedding {
    /// Embeds the document's chunks lacking a vector; a failure is logged, never returned.
    async fn document(&mut self, k: &Knowledge, document_id: &DocumentId) {
        let Some(embedder) = k.embedder.as_deref() else {
            return;
        };
        if self.failed {
            return;
        }
        match embed::embed_missing(k.documents.as_ref(), embedder, Some(document_id)).await {
            Ok(_) => self.embedded = true,
            Err(err) => {
                self.failed = true;
                warn!(document = document_id.as_str(), error = %err, "embedding chunks failed; they will be retried, BM25 serves them meanwhile");
            }
        }
    }

    /// After a successful job, wakes the catch-up for chunks left by earlier failures.
    fn finish(&self, k: &Knowledge) {
        if self.embedded && !self.failed {
            k.embed_wake.notify_one();
        }
    }
}

enum Done {
    Indexed {
        pages: Option<u32>,
        bytes: u64,
        /// A re-crawl's counts (`None` for uploads and first crawls).
        refresh: Option<RefreshCounts>,
    },
    Deleted,
    /// The claim was lost to another worker; the job's end is not recorded here.
    Lost,
}

#[derive(Default)]
struct Progress {
    done: AtomicU32,
    total: AtomicU32,
}

impl Progress {
    fn set(&self, done: u32, total: u32) {
        self.done.store(done, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
    }

    fn get(&self) -> (u32, u32) {
        (
            self.done.load(Ordering::Relaxed),
            self.total.load(Ordering::Relaxed),
        )
    }
}

fn store_err(err: impl std::fmt::Display) -> Failure {
    warn!(error = %err, "store error in a job");
    "Indexing failed because the database was unavailable; try again with refresh.".to_string()
}

/// The chunks of an extracted document or page, ready to store: default [`ChunkConfig`], titled
/// `title`, heading path joined with `" > "`, `page_url` for crawled pages.
pub fn new_chunks(extracted: &Extracted, title: &str, page_url: Option<&str>) -> Vec<NewChunk> {
    chunk::chunk(extracted, &ChunkConfig::default())
        .into_iter()
        .map(|c| NewChunk {
            page_url: page_url.map(str::to_string),
            title: title.to_string(),
            heading_path: c.heading_path.join(" > "),
            position: c.position,
            page: c.page,
            tokens: c.tokens,
            text: c.text,
        })
        .collect()
}

const UPLOAD_GONE: &str = "The uploaded file is no longer available; upload it again.";

async fn ingest_file(k: &Knowledge, job: &JobRecord) -> Result<Done, Failure> {
    let store = &k.documents;
    let Some(doc) = store
        .document_by_id(&job.document_id)
        .await
        .map_err(store_err)?
    else {
        return Ok(Done::Deleted);
    };
    let bytes = match k.uploads.upload(&doc.id).await {
        Ok(Some(bytes)) => bytes,
        // The database is down: not the upload's fault.
        Err(err @ StoreError::Unavailable(_)) => return Err(store_err(err)),
        Ok(None) => {
            warn!(document = %doc.id, "upload missing");
            return Err(UPLOAD_GONE.into());
        }
        Err(err) => {
            warn!(document = %doc.id, error = %err, "upload unreadable");
            return Err(UPLOAD_GONE.into());
        }
    };
    let size = bytes.len() as u64;
    // Detection, extraction and chunking run in an extraction child process.
    let document = k
        .sandbox
        .document(&bytes, &doc.name, &k.limits)
        .await
        .map_err(|err| err.to_string())?;
    drop(bytes);
    if document.chunks.is_empty() {
        return Err("No text could be found in the file.".into());
    }
    if !store
        .replace_chunks(&doc.id, &document.chunks)
        .await
        .map_err(store_err)?
    {
        return Ok(Done::Deleted);
    }
    let mut embedding = Embedding::default();
    embedding.document(k, &doc.id).await;
    embedding.finish(k);
    Ok(Done::Indexed {
        pages: document.pages,
        bytes: size,
        refresh: None,
    })
}

async fn crawl_site(k: &Knowledge, job: &JobRecord, progress: &Progress) -> Result<Done, Failure> {
    let store = &k.documents;
    let Some(doc) = store
        .document_by_id(&job.document_id)
        .await
        .map_err(store_err)?
    else {
        return Ok(Done::Deleted);
    };
    let config: CrawlConfig = doc
        .crawl_config
        .as_deref()
        .and_then(|c| serde_json::from_str(c).ok())
        .unwrap_or_default();
    let Some(start) = doc.url.as_deref().and_then(|u| url::Url::parse(u).ok()) else {
        return Err("The document has no valid URL to crawl.".into());
    };
    let stored = store.document_pages(&doc.id).await.map_err(store_err)?;
    // The previous crawl's pages: their hashes by canonical URL (is a page's text new?), and
    // what the crawler needs to ask for them conditionally, by the URL each was requested at.
    let known: HashMap<String, PageRecord> =
        stored.into_iter().map(|p| (p.url.clone(), p)).collect();
    let revisit: KnownPages = known.values().filter_map(known_page).collect();
    let (tx, mut rx) = mpsc::channel(64);
    let client = k.client.clone();
    let sandbox = k.sandbox.clone();
    let crawler = tokio::spawn(async move {
        crawl::crawl_again(&client, &sandbox, start, &config, revisit, tx).await
    });
    let mut seen: Vec<String> = Vec::new();
    // Pages whose text changed or is new: chunked again.
    let mut rechunked: HashSet<String> = HashSet::new();
    // Pages unchanged but answered with other validators or links: their rows are rewritten.
    let mut touched: Vec<PageRecord> = Vec::new();
    let mut bytes = 0u64;
    // Pages are chunked on the blocking pool, several at once (chunking is most of a page's
    // indexing cost), and stored in the order they arrived; pages chunked by the time the
    // store takes the oldest go in the same transaction (see `store_ready_pages`).
    let in_flight = std::thread::available_parallelism().map_or(4, |n| 2 * n.get().clamp(1, 8));
    let mut chunking: VecDeque<ChunkingPage> = VecDeque::new();
    let mut embedding = Embedding::default();
    while let Some(event) = rx.recv().await {
        match event {
            CrawlEvent::Page(page) => {
                let url = page.url.to_string();
                let previous = known.get(&url);
                let record = PageRecord {
                    url: url.clone(),
                    title: if page.title.trim().is_empty() {
                        url.clone()
                    } else {
                        page.title.clone()
                    },
                    content_hash: page.content_hash.clone(),
                    fetch_url: Some(page.requested.to_string()),
                    etag: page.validators.etag.clone(),
                    last_modified: page.validators.last_modified.clone(),
                    links: page.links.iter().map(Url::to_string).collect(),
                    bytes: match (page.not_modified, previous) {
                        (true, Some(p)) => p.bytes,
                        _ => page.text.len() as u64,
                    },
                };
                bytes += record.bytes;
                seen.push(url.clone());
                if page.not_modified
                    || previous.is_some_and(|p| p.content_hash == page.content_hash)
                {
                    // Unchanged: no chunking, no embedding; only its row when it differs.
                    if let Some(previous) = previous {
                        let record = PageRecord {
                            title: previous.title.clone(),
                            ..record
                        };
                        if record != *previous {
                            touched.push(record);
                        }
                    }
                    continue;
                }
                rechunked.insert(url.clone());
                let text = page.text;
                let chunk_title = record.title.clone();
                let chunk_url = url.clone();
                let limits = k.limits.clone();
                let sandbox = k.sandbox.clone();
                // Cut into chunks in an extraction child process, several pages at once.
                let chunks = tokio::spawn(async move {
                    sandbox
                        .page_chunks(&text, &chunk_title, &chunk_url, &limits)
                        .await
                });
                chunking.push_back((record, chunks));
                while chunking.len() >= in_flight {
                    if !store_ready_pages(k, &doc.id, &mut chunking, &mut seen).await? {
                        crawler.abort();
                        return Ok(Done::Deleted);
                    }
                }
                embedding.document(k, &doc.id).await;
            }
            CrawlEvent::Progress { done, found } => {
                progress.set(done, found);
                let lease = lease::lease_end(k.clock.now(), LEASE);
                let held = k
                    .jobs
                    .job_progress(&job.id, job.attempts, done, found, lease)
                    .await;
                // A store error is left to the next report or renewal.
                if let Ok(false) = held {
                    lost(job);
                    crawler.abort();
                    return Ok(Done::Lost);
                }
            }
            CrawlEvent::Skipped { .. } => {}
        }
    }
    while !chunking.is_empty() {
        if !store_ready_pages(k, &doc.id, &mut chunking, &mut seen).await? {
            crawler.abort();
            return Ok(Done::Deleted);
        }
    }
    // The last pages stored above.
    embedding.document(k, &doc.id).await;
    let summary = match crawler.await {
        Ok(Ok(summary)) => summary,
        Ok(Err(err)) => return Err(format!("The site could not be crawled: {err}")),
        Err(_) => return Err("The crawl failed unexpectedly.".into()),
    };
    if seen.is_empty() {
        return Err("No readable pages were found at this URL.".into());
    }
    if !touched.is_empty()
        && !store
            .update_pages(&doc.id, &touched, k.clock.now())
            .await
            .map_err(store_err)?
    {
        return Ok(Done::Deleted);
    }
    store
        .retain_pages(&doc.id, &seen)
        .await
        .map_err(store_err)?;
    embedding.finish(k);
    let pages = seen.len() as u32;
    progress.set(pages, pages.max(summary.pages));
    // A refresh is a crawl after one that kept pages; the first crawl has nothing to compare.
    let refresh = (!known.is_empty()).then(|| refresh_counts(&known, &seen, &rechunked));
    info!(document = %doc.id, pages, skipped = summary.skipped, refresh = ?refresh, "crawl indexed");
    Ok(Done::Indexed {
        pages: Some(pages),
        bytes,
        refresh,
    })
}

/// What the re-crawl of a stored page asks for: the page under its requested URL (its own
/// URL for pages stored before requested URLs were kept), with validators and links.
fn known_page(p: &PageRecord) -> Option<(Url, KnownPage)> {
    let url = Url::parse(&p.url).ok()?;
    let requested = match p.fetch_url.as_deref() {
        Some(f) => Url::parse(f).ok()?,
        None => url.clone(),
    };
    let page = KnownPage {
        url,
        title: p.title.clone(),
        content_hash: p.content_hash.clone(),
        validators: Validators {
            etag: p.etag.clone(),
            last_modified: p.last_modified.clone(),
        },
        links: p.links.iter().filter_map(|l| Url::parse(l).ok()).collect(),
    };
    Some((requested, page))
}

/// A refresh's counts: pages kept now that the previous crawl did not have (`added`), had and
/// chunked again (`changed`) or kept as they were (`unchanged`), and pages it had that are
/// no longer kept (`removed`).
fn refresh_counts(
    known: &HashMap<String, PageRecord>,
    seen: &[String],
    rechunked: &HashSet<String>,
) -> RefreshCounts {
    let mut counts = RefreshCounts::default();
    let kept: HashSet<&str> = seen.iter().map(String::as_str).collect();
    for url in &kept {
        if !known.contains_key(*url) {
            counts.added += 1;
        } else if rechunked.contains(*url) {
            counts.changed += 1;
        } else {
            counts.unchanged += 1;
        }
    }
    counts.removed = known.keys().filter(|u| !kept.contains(u.as_str())).count() as u32;
    counts
}

type ChunkingPage = (PageRecord, JoinHandle<Result<Vec<NewChunk>, ExtractError>>);

const MAX_PAGES_PER_WRITE: usize = 16;

/// Stores the oldest chunked page with those chunked after it (≤ [`MAX_PAGES_PER_WRITE`]) in one
/// transaction. `Ok(false)` when the document was deleted meanwhile (stop the crawl).
async fn store_ready_pages(
    k: &Knowledge,
    document_id: &DocumentId,
    chunking: &mut VecDeque<ChunkingPage>,
    seen: &mut Vec<String>,
) -> Result<bool, Failure> {
    let mut pages = Vec::new();
    while let Some((_, task)) = chunking.front() {
        if !pages.is_empty() && (pages.len() >= MAX_PAGES_PER_WRITE || !task.is_finished()) {
            break;
        }
        let Some((record, task)) = chunking.pop_front() else {
            break;
        };
        match task
            .await
            .map_err(|_| "Indexing a page failed unexpectedly.".to_string())?
        {
            Ok(chunks) => pages.push((record, chunks)),
            Err(err) => {
                // The page is left out (and dropped if an earlier crawl kept it); the rest
                // of the site is indexed.
                warn!(document = document_id.as_str(), page = %record.url, error = %err, "a crawled page could not be chunked; it is left out");
                seen.retain(|url| *url != record.url);
            }
        }
    }
    if pages.is_empty() {
        return Ok(true);
    }
    k.documents
        .replace_pages(document_id, &pages, k.clock.now())
        .await
        .map_err(store_err)
}

/// A crawled page's text cut into sections at its headings (Markdown reader), else one section.
pub fn page_sections(text: String, title: &str, limits: &extract::ExtractLimits) -> Extracted {
    match extract::extract(text.as_bytes(), DocumentKind::Markdown, limits) {
        Ok(mut extracted) => {
            extracted.title = Some(title.to_owned());
            extracted
        }
        Err(_) => Extracted {
            kind: DocumentKind::Markdown,
            title: Some(title.to_owned()),
            sections: vec![extract::Section {
                heading_path: Vec::new(),
                text,
                page: None,
            }],
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crawled_pages_keep_their_heading_paths() {
        let text = "# What Is Ownership?\n\nOwnership is a set of rules.\n\n\
                    ## The Stack and the Heap\n\nThe stack stores values in order.\n"
            .to_owned();
        let page = page_sections(text, "Ownership - The Book", &Default::default());
        assert_eq!(page.title.as_deref(), Some("Ownership - The Book"));
        let paths: Vec<Vec<String>> = page
            .sections
            .iter()
            .map(|s| s.heading_path.clone())
            .collect();
        assert_eq!(
            paths,
            vec![
                vec!["What Is Ownership?".to_owned()],
                vec![
                    "What Is Ownership?".to_owned(),
                    "The Stack and the Heap".to_owned()
                ],
            ]
        );
        assert!(page.sections[1].text.contains("The stack stores values"));
    }

    #[test]
    fn a_page_without_text_stays_one_section() {
        let page = page_sections("   ".to_owned(), "Blank", &Default::default());
        assert_eq!(page.sections.len(), 1);
        assert!(page.sections[0].heading_path.is_empty());
    }
}
