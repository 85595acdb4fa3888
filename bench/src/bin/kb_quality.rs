//! # `kb_quality`: retrieval quality on the dev question set
//!
//! **Target:** **hit@5 ≥ 0.9** on `bench/data/questions-dev.jsonl`.
//!
//! ## What is measured
//!
//! *The Rust Programming Language* as the toolchain installs it (`--book-dir`, default
//! `$(rustc --print sysroot)/share/doc/rust/html/book`) is served under `/book/` on
//! `127.0.0.1:0` by a static file server in this process. The service is built in the same
//! process with the production `Application::build` (temporary `DATA_DIR`, real SQLite
//! database, `allowed_private_hosts` = the book server only); an account is created through
//! the HTTP API and, for each start page of `--start`, an agent whose knowledge base gets
//! the book through the API (`POST /api/agents/{id}/knowledge/url` with
//! `{"crawlDepth": 5, "maxPages": 1000}`), waiting for the crawl job to succeed. The start
//! pages are `/book/` (what a user would enter) and `/book/toc.html` (the book's table of
//! contents, which links every chapter: mdBook builds its sidebar with JavaScript and keeps
//! the links in that page, which the chapters show only in a `<noscript>` frame).
//!
//! Then `knowledge::eval::evaluate` (what `agentchat eval-retrieval` runs) asks every
//! question of the set through the service's retrieval (`retrieve::search`, top 5) and
//! reports hit@1, hit@5 and MRR; a hit is a chunk whose page file name is one of the
//! question's `expect` entries. The output also lists, per question, the rank of the first
//! relevant chunk, the BM25 terms of the question, the top five chunks (page, heading, score)
//! and whether the expected page was crawled at all, so that a miss can be told apart as a
//! crawl-coverage miss or a ranking miss.
//!
//! The equivalent command is printed with the run's `DATA_DIR` and `DATABASE_URL`; pass
//! `--keep-data` to keep that folder so the command can be run after the benchmark.
//!
//! ```text
//! export CARGO_TARGET_DIR=$HOME/.cache/agentchat/target
//! cargo build --release -p bench --bin kb_quality && $CARGO_TARGET_DIR/release/kb_quality --keep-data
//! ```

use std::{collections::HashSet, path::PathBuf, time::Duration};

use agentchat::{
    ids::AgentId,
    knowledge::{
        eval,
        search::{bm25, retrieve, ChunkSearch},
    },
};
use anyhow::Context;
use bench::{kb, load};
use clap::Parser;

/// hit@5 the issue asks for.
const TARGET_HIT_AT_5: f64 = 0.9;
/// Longest the crawl may take.
const CRAWL_TIMEOUT: Duration = Duration::from_secs(300);

/// Retrieval quality (hit@1, hit@5, MRR) on the dev set over the crawled Rust book. See the
/// binary's documentation for details.
#[derive(Parser, Debug)]
#[command(name = "kb_quality", version, about, long_about = None)]
struct Args {
    /// The Rust book's HTML folder (default: `$(rustc --print sysroot)/share/doc/rust/html/book`).
    #[arg(long)]
    book_dir: Option<PathBuf>,
    /// The question set (JSON Lines: `{"q": ..., "expect": [page file names]}`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/data/questions-dev.jsonl"))]
    questions: PathBuf,
    /// `crawlDepth` (0–5).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u8).range(0..=5))]
    depth: u8,
    /// `maxPages` (1–1000).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1000))]
    max_pages: u32,
    /// Paths of the start pages on the book server, comma-separated (one agent each).
    #[arg(long, value_delimiter = ',', default_values_t = vec!["/book/".to_string(), "/book/toc.html".to_string()])]
    start: Vec<String>,
    /// Keep the service's data folder (database included) after the run.
    #[arg(long)]
    keep_data: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let book = kb::book_dir(args.book_dir.as_deref())?;
    let text = std::fs::read_to_string(&args.questions)
        .with_context(|| format!("reading {}", args.questions.display()))?;
    let questions = eval::parse_questions(&text)?;
    let site = kb::serve_dir(&book, "/book").await?;
    println!(
        "kb_quality: retrieval quality on {}",
        args.questions.display()
    );
    println!("machine: {}", load::machine());
    let mut service = kb::Service::start(vec![site.addr.to_string()]).await?;
    let mut results = Vec::new();
    for path in &args.start {
        let start = format!("http://{}{path}", site.addr);
        let (agent, pages, report) = evaluate_start(&service, &args, &start, &questions).await?;
        results.push((path.clone(), agent, pages, report));
    }

    println!();
    println!("| start | pages crawled | questions | hit@1 | hit@5 | MRR | target hit@5 | result |");
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    for (path, _, pages, report) in &results {
        println!(
            "| `{path}` | {pages} | {} | {:.2} | {:.2} | {:.3} | ≥ {TARGET_HIT_AT_5} | {} |",
            report.questions,
            report.hit_at_1,
            report.hit_at_5,
            report.mrr,
            kb::verdict(report.hit_at_5 >= TARGET_HIT_AT_5)
        );
    }
    println!();
    if args.keep_data {
        service.keep_data();
        println!("data kept in {}", service.data_dir.display());
    } else {
        println!("(the data folder is deleted at exit; run with --keep-data to keep it)");
    }
    println!("reproduce the evaluations with the service's command:");
    for (path, agent, _, _) in &results {
        println!(
            "  # start {path}\n  DATA_DIR={} DATABASE_URL={} agentchat eval-retrieval --agent {agent} bench/data/questions-dev.jsonl --verbose",
            service.data_dir.display(),
            service.database_url
        );
    }
    println!("load at the end: {}", kb::load_average());
    for (path, _, _, report) in &results {
        println!(
            "{}: crawl from {path}: hit@5 {:.2} (target ≥ {TARGET_HIT_AT_5}); hit@1 {:.2}, MRR {:.3}",
            kb::verdict(report.hit_at_5 >= TARGET_HIT_AT_5),
            report.hit_at_5,
            report.hit_at_1,
            report.mrr
        );
    }
    Ok(())
}

/// Crawls the book from `start` into a new agent and evaluates the question set on it,
/// printing per-question details; returns the agent, the pages crawled and the report.
async fn evaluate_start(
    service: &kb::Service,
    args: &Args,
    start: &str,
    questions: &[eval::Question],
) -> anyhow::Result<(AgentId, u64, eval::Report)> {
    let agent = service.create_agent("Rust book").await?;
    let crawl = service
        .crawl(&agent, start, args.depth, args.max_pages, CRAWL_TIMEOUT)
        .await?;
    println!();
    println!(
        "## start {start} (crawlDepth {}, maxPages {}): {} pages, {} chunks in {:.2} s; load {}",
        args.depth,
        args.max_pages,
        crawl.pages,
        crawl.chunks,
        crawl.elapsed.as_secs_f64(),
        kb::load_average()
    );
    let store = service.store.clone();
    let crawled: HashSet<String> = store
        .document_pages(&crawl.document_id)
        .await?
        .into_iter()
        .filter_map(|p| page_file(&p.url))
        .collect();

    let search = ChunkSearch::new(store.clone());
    let report = eval::evaluate(&search, &agent, questions).await?;
    println!();
    println!("| # | rank | question | expected page crawled |");
    println!("|---:|---:|---|---|");
    for (n, (q, outcome)) in questions.iter().zip(&report.outcomes).enumerate() {
        let rank = outcome.rank.map_or("–".to_owned(), |r| r.to_string());
        let was_crawled = q.expect.iter().any(|e| crawled.contains(e));
        println!(
            "| {} | {rank} | {} | {} |",
            n + 1,
            q.q,
            if was_crawled { "yes" } else { "**no**" }
        );
    }
    println!();
    println!("Top {} chunks per question (`*` = relevant):", eval::DEPTH);
    for (n, q) in questions.iter().enumerate() {
        let hits = retrieve::search(&search, &agent, &q.q, eval::DEPTH).await?;
        println!();
        println!(
            "{}. {}  (expect {}; BM25 terms: {})",
            n + 1,
            q.q,
            q.expect.join(", "),
            bm25::query_terms(&q.q).join(" ")
        );
        if hits.is_empty() {
            println!("   (no chunks)");
        }
        for hit in hits {
            let mark = if eval::is_relevant(&hit, &q.expect) {
                "*"
            } else {
                " "
            };
            println!(
                "   {mark} {:>6.2}  {}  [{}]  {}",
                hit.score,
                hit.url.as_deref().and_then(page_file).unwrap_or_default(),
                hit.heading_path,
                hit.title
            );
        }
    }
    println!();
    println!(
        "start {start}: hit@1 {:.2}, hit@5 {:.2}, MRR {:.3} over {} questions",
        report.hit_at_1, report.hit_at_5, report.mrr, report.questions
    );
    Ok((agent, crawl.pages, report))
}

/// The last path segment of a page URL (`ch04-01-what-is-ownership.html`).
fn page_file(url: &str) -> Option<String> {
    url::Url::parse(url)
        .ok()?
        .path_segments()?
        .next_back()
        .map(str::to_owned)
}
