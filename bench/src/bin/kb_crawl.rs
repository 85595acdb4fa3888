//! # `kb_crawl`: how fast a site is crawled, and crawled and indexed
//!
//! **Target:** crawl of a loopback site at **≥ 200 pages/s**.
//!
//! ## What is measured
//!
//! *The Rust Programming Language* as the toolchain installs it (`--book-dir`, default
//! `$(rustc --print sysroot)/share/doc/rust/html/book`) is served under `/book/` by an axum
//! static file server (`tower_http::services::ServeDir`, `TCP_NODELAY` on like production web
//! servers) on `127.0.0.1:0` inside this process. For each start page of `--start` (default
//! `/book/`, what a user would enter, and `/book/toc.html`, the book's table of contents,
//! from which every chapter is one link away) and for `--rounds` rounds each, three paths
//! are timed, all with `crawlDepth` `--depth` (default 5) and `maxPages` `--max-pages`
//! (default 1000), robots.txt respected as by default:
//!
//! 1. **crawl alone**: `knowledge::crawl::crawl` through the service's SSRF-safe client
//!    (`SafeClient` with `NetPolicy::from_list` allowing only the book server); the events
//!    are drained and counted. Fetching, HTML parsing, main-content extraction, link
//!    discovery and the crawl policy, without chunking or the database.
//! 2. **crawl + index, direct**: the same crawl with each page indexed as the crawl job does
//!    it (`worker.rs`, `crawl_site`): the page text chunked with `knowledge::worker::new_chunks`
//!    (default `ChunkConfig`) in `spawn_blocking`, then `DocumentStore::replace_pages`, one
//!    page per transaction, one after another while the crawl goes on (the job also writes
//!    the pages that are ready together in one transaction); `retain_pages` and `finish_document` at the
//!    end; on a fresh SQLite store. The time is split into chunking, the store, and waiting
//!    for the crawler's next page.
//! 3. **crawl + index, service**: the service's full path. The service is built in this
//!    process with the production `Application::build` (temporary `DATA_DIR`, real SQLite
//!    database, the default 2 job workers) with
//!    `allowed_private_hosts = ["127.0.0.1:<book port>"]`; each round a new agent gets the
//!    book through the HTTP API (`POST /api/agents/{id}/knowledge/url` with
//!    `{"crawlDepth": 5, "maxPages": 1000}`) and `GET /api/jobs/{jobId}` is polled every
//!    10 ms until the job has succeeded. The time runs from the `POST` to the first
//!    `succeeded`; the pages are the document's `pages`.
//! 4. **refresh, service**: the document of path 3 refreshed at once through the HTTP API
//!    (`POST .../knowledge/{documentId}/refresh`), the site unchanged: every page is asked
//!    for with `If-Modified-Since` (the static file server sends `Last-Modified` and answers
//!    304), so no page is read, chunked or written again (docs/knowledge.md § Refresh). The
//!    time runs from the `POST` to the job's `succeeded`; the document's `refreshCounts`
//!    are printed.
//!
//! pages/s = pages kept / wall time; `CPU` is the CPU time of this whole process (book
//! server and client included) during the run. URLs handled but not kept (pages that ask not
//! to be indexed, such as the print-everything page whose links are still followed; the
//! index page seen twice as `/book/` and `/book/index.html`; links to the standard library
//! documentation outside the served folder, answered 404) cost time and are not counted as
//! pages. The book server, the crawler, the service and the client share this process and
//! the machine's cores.
//!
//! ```text
//! export CARGO_TARGET_DIR=$HOME/.cache/agentchat/target
//! cargo build --release -p bench --bin kb_crawl && $CARGO_TARGET_DIR/release/kb_crawl --rounds 2
//! ```

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use agentchat::{
    ids::{AgentId, UserId},
    knowledge::{
        crawl::{self, CrawlConfig, CrawlEvent},
        extract::ExtractLimits,
        sandbox::{ExtractionConfig, Sandbox},
        worker,
    },
    outbound::{FetchLimits, NetPolicy, SafeClient},
    store::{
        documents::{DocumentStore, NewChunk, PageRecord},
        sqlite::SqliteStore,
    },
};
use anyhow::{ensure, Context};
use bench::{kb, load};
use chrono::Utc;
use clap::Parser;
use tokio::sync::mpsc;

/// Pages per second the issue asks for.
const TARGET_PAGES_PER_SECOND: f64 = 200.0;
/// Longest a crawl may take before the run fails.
const CRAWL_TIMEOUT: Duration = Duration::from_secs(300);

/// Crawl (and crawl + index) throughput on a loopback copy of the Rust book. See the
/// binary's documentation for details.
#[derive(Parser, Debug)]
#[command(name = "kb_crawl", version, about, long_about = None)]
struct Args {
    /// The Rust book's HTML folder (default: `$(rustc --print sysroot)/share/doc/rust/html/book`).
    #[arg(long)]
    book_dir: Option<PathBuf>,
    /// Rounds of each measurement; the best is reported.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=20))]
    rounds: u64,
    /// `crawlDepth` (0–5).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u8).range(0..=5))]
    depth: u8,
    /// `maxPages` (1–1000).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1000))]
    max_pages: u32,
    /// Paths of the start pages on the book server, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec!["/book/".to_string(), "/book/toc.html".to_string()])]
    start: Vec<String>,
    /// Only the crawl alone (no indexing, no service).
    #[arg(long)]
    crawl_only: bool,
}

/// One timed run of a path.
#[derive(Debug, Clone, Default)]
struct Run {
    elapsed: Duration,
    cpu: Duration,
    pages: u64,
    chunks: u64,
    text_bytes: u64,
    handled: u32,
    skipped: BTreeMap<String, u32>,
    errors: Vec<(String, String)>,
    chunking: Duration,
    storing: Duration,
}

impl Run {
    fn pages_per_second(&self) -> f64 {
        self.pages as f64 / self.elapsed.as_secs_f64()
    }
}

/// The best run of each path for one start page.
struct StartResult {
    start: String,
    alone: Run,
    direct: Option<Run>,
    /// The refresh of the service's document, with its `refreshCounts`.
    refresh: Option<(Run, String)>,
    service: Option<Run>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let book = kb::book_dir(args.book_dir.as_deref())?;
    let files = count_html(&book)?;
    let site = kb::serve_dir(&book, "/book").await?;
    println!("kb_crawl: crawl and crawl + index of the Rust book served on loopback");
    println!("machine: {}", load::machine());
    println!(
        "site: {} ({files} HTML files in all folders) at http://{}/book/; crawlDepth {}, maxPages {}",
        book.display(),
        site.addr,
        args.depth,
        args.max_pages
    );
    let config = CrawlConfig {
        crawl_depth: args.depth,
        max_pages: args.max_pages,
        ..CrawlConfig::default()
    };
    let policy = NetPolicy::from_list(&[site.addr.to_string()])?;
    let client = SafeClient::new(policy, FetchLimits::default())?;
    let temp = tempfile::Builder::new().prefix("kb-crawl-").tempdir()?;
    let store = kb::bench_store(&temp.path().join("b.db")).await?;
    let (user, _) = kb::create_user_and_agent(&store, "crawl direct").await?;
    let service = if args.crawl_only {
        None
    } else {
        Some(kb::Service::start(vec![site.addr.to_string()]).await?)
    };

    let mut results = Vec::new();
    for path in &args.start {
        let start = url::Url::parse(&format!("http://{}{path}", site.addr))?;
        println!();
        println!("start {start}");
        let mut alone = Vec::new();
        let mut direct = Vec::new();
        let mut via_service = Vec::new();
        let mut refreshes: Vec<(Run, String)> = Vec::new();
        for round in 1..=args.rounds {
            let run = crawl_alone(&client, &start, &config).await?;
            report_round("crawl alone", round, &run);
            alone.push(run);
            if args.crawl_only {
                continue;
            }
            let agent = kb::create_agent(&store, &user, &format!("direct {round}")).await?;
            let run = crawl_and_index(&client, &start, &config, &store, &user, &agent).await?;
            report_round("crawl + index, direct", round, &run);
            direct.push(run);
            if let Some(service) = &service {
                let (run, agent, document) = crawl_via_service(service, &start, &args).await?;
                report_round("crawl + index, service", round, &run);
                let pid = std::process::id();
                let cpu_before = load::cpu_time(pid)?;
                let (elapsed, counts) = service.refresh(&agent, &document, CRAWL_TIMEOUT).await?;
                let refreshed = Run {
                    elapsed,
                    cpu: load::cpu_time(pid)?.saturating_sub(cpu_before),
                    pages: run.pages,
                    ..Run::default()
                };
                report_round("refresh, service", round, &refreshed);
                println!("    refreshCounts {counts}");
                refreshes.push((refreshed, counts.to_string()));
                via_service.push(run);
            }
        }
        results.push(StartResult {
            start: path.clone(),
            alone: best(&alone).context("no rounds")?,
            direct: best(&direct),
            service: best(&via_service),
            refresh: refreshes
                .into_iter()
                .max_by(|a, b| a.0.pages_per_second().total_cmp(&b.0.pages_per_second())),
        });
    }

    for result in &results {
        println!();
        println!(
            "start {}: URLs handled but not kept in the best crawl-alone run:",
            result.start
        );
        for (reason, count) in &result.alone.skipped {
            println!("  {count:>4}  {reason}");
        }
        if let Some((url, reason)) = result.alone.errors.first() {
            println!(
                "  {:>4}  could not be fetched (links out of the served folder), e.g. {url}: {reason}",
                result.alone.errors.len()
            );
        }
    }
    println!();
    println!("Best of {} rounds:", args.rounds);
    println!();
    println!("| start | path | pages | chunks | URLs handled | time (s) | CPU (s) | pages/s | target | result |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for result in &results {
        for (name, run) in [
            ("crawl alone", Some(&result.alone)),
            ("crawl + index, direct", result.direct.as_ref()),
            (
                "crawl + index, service (HTTP API, job)",
                result.service.as_ref(),
            ),
            (
                "refresh of it, unchanged (HTTP API, job)",
                result.refresh.as_ref().map(|(run, _)| run),
            ),
        ] {
            let Some(run) = run else { continue };
            let handled = if run.handled > 0 {
                run.handled.to_string()
            } else {
                "–".to_owned()
            };
            println!(
                "| `{}` | {name} | {} | {} | {handled} | {:.2} | {:.2} | {:.0} | ≥ {TARGET_PAGES_PER_SECOND:.0} | {} |",
                result.start,
                run.pages,
                run.chunks,
                run.elapsed.as_secs_f64(),
                run.cpu.as_secs_f64(),
                run.pages_per_second(),
                kb::verdict(run.pages_per_second() >= TARGET_PAGES_PER_SECOND)
            );
        }
    }
    for result in &results {
        if let Some((_, counts)) = &result.refresh {
            println!(
                "start {}: refreshCounts of the best refresh: {counts}",
                result.start
            );
        }
    }
    println!();
    println!("Where the direct crawl + index spends its time (best round):");
    println!();
    println!("| start | chunking (s) | store (s) | waiting for the crawler (s) | ms per page chunking | ms per page store |");
    println!("|---|---:|---:|---:|---:|---:|");
    for result in &results {
        if let Some(run) = &result.direct {
            let waiting = run.elapsed.saturating_sub(run.chunking + run.storing);
            let per_page = |d: Duration| d.as_secs_f64() * 1000.0 / run.pages.max(1) as f64;
            println!(
                "| `{}` | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                result.start,
                run.chunking.as_secs_f64(),
                run.storing.as_secs_f64(),
                waiting.as_secs_f64(),
                per_page(run.chunking),
                per_page(run.storing)
            );
        }
    }
    println!();
    println!("load at the end: {}", kb::load_average());
    for result in &results {
        for (name, run) in [
            ("crawl alone", Some(&result.alone)),
            ("crawl + index (service)", result.service.as_ref()),
        ] {
            if let Some(run) = run {
                println!(
                    "{}: {name} from {} {:.0} pages/s ({} pages; target ≥ {TARGET_PAGES_PER_SECOND:.0})",
                    kb::verdict(run.pages_per_second() >= TARGET_PAGES_PER_SECOND),
                    result.start,
                    run.pages_per_second(),
                    run.pages
                );
            }
        }
    }
    Ok(())
}

fn best(runs: &[Run]) -> Option<Run> {
    runs.iter()
        .max_by(|a, b| a.pages_per_second().total_cmp(&b.pages_per_second()))
        .cloned()
}

fn report_round(name: &str, round: u64, run: &Run) {
    println!(
        "  {name}, round {round}: {} pages, {} chunks in {:.2} s = {:.0} pages/s ({:.2} s CPU); load {}",
        run.pages,
        run.chunks,
        run.elapsed.as_secs_f64(),
        run.pages_per_second(),
        run.cpu.as_secs_f64(),
        kb::load_average()
    );
}

/// Starts a crawl; returns its event receiver and task.
fn start_crawl(
    client: &SafeClient,
    start: &url::Url,
    config: &CrawlConfig,
) -> (
    mpsc::Receiver<CrawlEvent>,
    tokio::task::JoinHandle<anyhow::Result<crawl::CrawlSummary>>,
) {
    let (tx, rx) = mpsc::channel(64);
    let client = client.clone();
    let start = start.clone();
    let config = config.clone();
    let task = tokio::spawn(async move {
        let sandbox = Arc::new(Sandbox::new(ExtractionConfig {
            program: bench::service::extraction_program()?,
            ..ExtractionConfig::default()
        }));
        Ok(crawl::crawl(&client, &sandbox, start, &config, tx).await?)
    });
    (rx, task)
}

/// Crawls from `start`, draining the events; the time ends when the crawl returns.
async fn crawl_alone(
    client: &SafeClient,
    start: &url::Url,
    config: &CrawlConfig,
) -> anyhow::Result<Run> {
    let pid = std::process::id();
    let cpu_before = load::cpu_time(pid)?;
    let started = Instant::now();
    let (mut rx, crawler) = start_crawl(client, start, config);
    let mut run = Run::default();
    while let Some(event) = rx.recv().await {
        match event {
            CrawlEvent::Page(page) => {
                run.pages += 1;
                run.text_bytes += page.text.len() as u64;
            }
            CrawlEvent::Progress { done, .. } => run.handled = done,
            CrawlEvent::Skipped { reason, .. } => {
                *run.skipped.entry(reason).or_default() += 1;
            }
        }
    }
    let summary = tokio::time::timeout(CRAWL_TIMEOUT, crawler)
        .await
        .context("the crawl did not finish in time")???;
    run.elapsed = started.elapsed();
    run.cpu = load::cpu_time(pid)?.saturating_sub(cpu_before);
    run.errors = summary
        .errors
        .iter()
        .map(|(url, reason)| (url.to_string(), reason.clone()))
        .collect();
    Ok(run)
}

/// Crawls from `start` and indexes every page as the crawl job does, timing each step.
async fn crawl_and_index(
    client: &SafeClient,
    start: &url::Url,
    config: &CrawlConfig,
    store: &SqliteStore,
    user: &UserId,
    agent: &AgentId,
) -> anyhow::Result<Run> {
    let (doc, job) = kb::url_document(user, agent, start.as_str(), &serde_json::to_string(config)?);
    store.create_document(&doc, &job).await?;
    let pid = std::process::id();
    let cpu_before = load::cpu_time(pid)?;
    let started = Instant::now();
    let (mut rx, crawler) = start_crawl(client, start, config);
    let mut run = Run::default();
    let mut seen = Vec::new();
    while let Some(event) = rx.recv().await {
        match event {
            CrawlEvent::Page(page) => {
                let url = page.url.to_string();
                run.pages += 1;
                run.text_bytes += page.text.len() as u64;
                seen.push(url.clone());
                let title = if page.title.trim().is_empty() {
                    url.clone()
                } else {
                    page.title.clone()
                };
                let t = Instant::now();
                let chunks = {
                    let (title, url, text) = (title.clone(), url.clone(), page.text);
                    tokio::task::spawn_blocking(move || page_chunks(text, &title, &url)).await?
                };
                run.chunking += t.elapsed();
                run.chunks += chunks.len() as u64;
                let record = PageRecord {
                    url,
                    title,
                    content_hash: page.content_hash,
                    ..PageRecord::default()
                };
                let t = Instant::now();
                ensure!(
                    store
                        .replace_pages(&doc.id, &[(record, chunks)], Utc::now())
                        .await?,
                    "document vanished"
                );
                run.storing += t.elapsed();
            }
            CrawlEvent::Progress { done, .. } => run.handled = done,
            CrawlEvent::Skipped { reason, .. } => {
                *run.skipped.entry(reason).or_default() += 1;
            }
        }
    }
    tokio::time::timeout(CRAWL_TIMEOUT, crawler)
        .await
        .context("the crawl did not finish in time")???;
    let t = Instant::now();
    store.retain_pages(&doc.id, &seen).await?;
    store
        .finish_document(&doc.id, Some(seen.len() as u32), run.text_bytes, Utc::now())
        .await?;
    run.storing += t.elapsed();
    run.elapsed = started.elapsed();
    run.cpu = load::cpu_time(pid)?.saturating_sub(cpu_before);
    Ok(run)
}

/// A page's chunks, built as the crawl job builds them: the page text cut into sections at
/// its headings, titled by the page.
fn page_chunks(text: String, title: &str, url: &str) -> Vec<NewChunk> {
    let extracted = worker::page_sections(text, title, &ExtractLimits::default());
    worker::new_chunks(&extracted, title, Some(url))
}

/// Adds the book to a new agent through the service's HTTP API and waits for the job;
/// answers the run with the agent and the document.
async fn crawl_via_service(
    service: &kb::Service,
    start: &url::Url,
    args: &Args,
) -> anyhow::Result<(Run, AgentId, agentchat::ids::DocumentId)> {
    let agent = service.create_agent("crawl").await?;
    let pid = std::process::id();
    let cpu_before = load::cpu_time(pid)?;
    let crawl = service
        .crawl(
            &agent,
            start.as_str(),
            args.depth,
            args.max_pages,
            CRAWL_TIMEOUT,
        )
        .await?;
    let run = Run {
        elapsed: crawl.elapsed,
        cpu: load::cpu_time(pid)?.saturating_sub(cpu_before),
        pages: crawl.pages,
        chunks: crawl.chunks,
        text_bytes: crawl.bytes,
        ..Run::default()
    };
    Ok((run, agent, crawl.document_id))
}

/// HTML files below `dir`, all folders included.
fn count_html(dir: &std::path::Path) -> anyhow::Result<usize> {
    let mut count = 0;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            count += count_html(&path)?;
        } else if path.extension().is_some_and(|e| e == "html") {
            count += 1;
        }
    }
    Ok(count)
}
