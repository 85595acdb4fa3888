//! # `kb_quality`: retrieval quality on the dev question set, per ranking
//!
//! **Targets:** on `bench/data/questions-dev.jsonl`, the fusion's **hit@5 ≥ 0.9**; on its
//! keyword-style questions, no loss against BM25 alone. (The paraphrase goal, hybrid
//! hit@5 ≥ 0.9 and hit@1 ≥ 0.7, is judged on held-out questions given with `--questions`.)
//!
//! ## What is measured
//!
//! *The Rust Programming Language* as the toolchain installs it (`--book-dir`, default
//! `$(rustc --print sysroot)/share/doc/rust/html/book`) is served under `/book/` on
//! `127.0.0.1:0` by a static file server in this process. The service is built in the same
//! process with the production `Application::build` (temporary `DATA_DIR`, real SQLite
//! database, `allowed_private_hosts` = the book server only) and, when a model folder is
//! found (`--embedding-model-path`, default `$AGENTCHAT_TEST_EMBEDDING_MODEL_PATH`, else the
//! folder `scripts/setup.sh` installs), `EMBEDDING_MODEL=local` on it. An account is
//! created through the HTTP API and, for each start page of `--start`, an agent whose
//! knowledge base gets the book through the API (`POST /api/agents/{id}/knowledge/url` with
//! `{"crawlDepth": 5, "maxPages": 1000}`); the run waits for the crawl job to succeed and
//! then for every chunk to have its vector. The start pages are `/book/` (what a user would
//! enter) and `/book/toc.html` (the book's table of contents, which links every chapter).
//!
//! Then `knowledge::eval::evaluate` (what `agentchat eval-retrieval` runs) asks every
//! question through the service's retrieval (`Retriever::retrieve`, top 5, diverse sources)
//! three ways: BM25 alone, the embeddings alone and their fusion, and reports hit@1, hit@5
//! and MRR for all questions and per kind (`keyword`, `paraphrase`); a hit is a chunk whose
//! page file name is one of the question's `expect` entries. The fusion is also run with
//! each pair of weights of `--weights` (BM25:embeddings), which is how the service's weights
//! were chosen. Per question, the output lists the rank of the first relevant chunk under each
//! ranking, and for each question the fusion misses, its top five chunks.
//!
//! ```text
//! export CARGO_TARGET_DIR=$HOME/.cache/agentchat/target
//! cargo build --release -p bench --bin kb_quality && $CARGO_TARGET_DIR/release/kb_quality --keep-data
//! ```

use std::{collections::HashSet, path::PathBuf, time::Duration};

use agentchat::{
    ids::{AgentId, ChunkId},
    knowledge::{
        eval::{self, Kind, Report},
        search::retrieve::{self, Mode, Retriever},
    },
    store::documents::ChunkText,
};
use anyhow::Context;
use bench::{kb, load};
use clap::Parser;

/// hit@5 the issue asks for.
const TARGET_HIT_AT_5: f64 = 0.9;
/// Longest the crawl and its embedding may take.
const CRAWL_TIMEOUT: Duration = Duration::from_secs(600);

/// Retrieval quality (hit@1, hit@5, MRR) of BM25, the embeddings and their fusion on a
/// question set over the crawled Rust book. See the binary's documentation for details.
#[derive(Parser, Debug)]
#[command(name = "kb_quality", version, about, long_about = None)]
struct Args {
    /// The Rust book's HTML folder (default: `$(rustc --print sysroot)/share/doc/rust/html/book`).
    #[arg(long)]
    book_dir: Option<PathBuf>,
    /// The question set (JSON Lines: `{"q": ..., "expect": [page file names], "kind": ...}`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/data/questions-dev.jsonl"))]
    questions: PathBuf,
    /// A sentence-transformers folder for `EMBEDDING_MODEL=local` (default:
    /// `$AGENTCHAT_TEST_EMBEDDING_MODEL_PATH`, else the folder `scripts/setup.sh` installs);
    /// without one, BM25 alone is measured.
    #[arg(long)]
    embedding_model_path: Option<PathBuf>,
    /// Fusion weights to compare, `bm25:embeddings`, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = ["1:1", "1:0.5", "1:2", "1:3", "2:1", "0.5:1"].map(String::from))]
    weights: Vec<String>,
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
    /// Also write each question's raw candidates to this file, for analysis of rankings
    /// outside the service (JSON Lines, one object per question and start: `start`, `q`,
    /// `expect`, `kind`, `query` (the question's embedding, `[]` without a model) and `bm25`,
    /// the first 100 BM25 hits as `[chunkId, score]` before any floor). With `--keep-data`,
    /// the kept database holds the chunks (`chunks`) and their vectors (`chunk_embeddings`).
    #[arg(long)]
    candidates: Option<PathBuf>,
    /// With `--candidates`: also embed each chunk's text in two halves (cut at the middle
    /// word, each with the chunk's title and headings, as the service embeds a chunk) and
    /// write `[chunkId, first, second]` lines to the candidates file's name plus `.halves`.
    #[arg(long, requires = "candidates")]
    halves: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let book = kb::book_dir(args.book_dir.as_deref())?;
    let text = std::fs::read_to_string(&args.questions)
        .with_context(|| format!("reading {}", args.questions.display()))?;
    let questions = eval::parse_questions(&text)?;
    let weights = args
        .weights
        .iter()
        .map(|w| parse_weights(w))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let model_path = kb::embedding_model_path(args.embedding_model_path.as_deref());
    let site = kb::serve_dir(&book, "/book").await?;
    println!(
        "kb_quality: retrieval quality on {} ({} questions: {} keyword, {} paraphrase)",
        args.questions.display(),
        questions.len(),
        questions.iter().filter(|q| q.kind == Kind::Keyword).count(),
        questions
            .iter()
            .filter(|q| q.kind == Kind::Paraphrase)
            .count(),
    );
    println!("machine: {}", load::machine());
    match &model_path {
        Some(path) => println!("embeddings: EMBEDDING_MODEL=local at {}", path.display()),
        None => println!("embeddings: no model folder found; BM25 alone (run scripts/setup.sh)"),
    }
    let mut service = kb::Service::start_with(vec![site.addr.to_string()], |config| {
        if let Some(path) = &model_path {
            kb::use_local_embeddings(config, path);
        }
    })
    .await?;
    let mut results = Vec::new();
    for path in &args.start {
        let start = format!("http://{}{path}", site.addr);
        let run = evaluate_start(&service, &args, &start, &questions, &weights).await?;
        results.push((path.clone(), run));
    }

    println!();
    println!("| start | pages | ranking | questions | hit@1 | hit@5 | MRR |");
    println!("|---|---:|---|---|---:|---:|---:|");
    for (path, run) in &results {
        for (name, report) in &run.reports {
            for (kind, r) in by_kind(report) {
                println!(
                    "| `{path}` | {} | {name} | {kind} ({}) | {:.2} | {:.2} | {:.3} |",
                    run.pages, r.questions, r.hit_at_1, r.hit_at_5, r.mrr
                );
            }
        }
    }
    println!();
    if args.keep_data {
        service.keep_data();
        println!("data kept in {}", service.data_dir.display());
    } else {
        println!("(the data folder is deleted at exit; run with --keep-data to keep it)");
    }
    println!("reproduce the evaluations with the service's command:");
    for (path, run) in &results {
        println!(
            "  # start {path}\n  DATA_DIR={} DATABASE_URL={}{} agentchat eval-retrieval --agent {} {} --verbose",
            service.data_dir.display(),
            service.database_url,
            model_path.as_ref().map_or(String::new(), |p| format!(
                " EMBEDDING_MODEL=local EMBEDDING_MODEL_PATH={}",
                p.display()
            )),
            run.agent,
            args.questions.display()
        );
    }
    println!("load at the end: {}", kb::load_average());
    for (path, run) in &results {
        let fusion = &run.reports.last().expect("BM25 at least").1;
        let bm25 = &run.reports[0].1;
        let keyword = (fusion.of_kind(Kind::Keyword), bm25.of_kind(Kind::Keyword));
        println!(
            "{}: crawl from {path}: hit@5 {:.2} (target ≥ {TARGET_HIT_AT_5}); hit@1 {:.2}, MRR {:.3}",
            kb::verdict(fusion.hit_at_5 >= TARGET_HIT_AT_5),
            fusion.hit_at_5,
            fusion.hit_at_1,
            fusion.mrr
        );
        println!(
            "{}: keyword questions, fusion against BM25 alone: hit@1 {:.2} / {:.2}, hit@5 {:.2} / {:.2}, MRR {:.3} / {:.3}",
            kb::verdict(
                keyword.0.hit_at_1 >= keyword.1.hit_at_1
                    && keyword.0.hit_at_5 >= keyword.1.hit_at_5
            ),
            keyword.0.hit_at_1,
            keyword.1.hit_at_1,
            keyword.0.hit_at_5,
            keyword.1.hit_at_5,
            keyword.0.mrr,
            keyword.1.mrr
        );
    }
    Ok(())
}

/// `"1:0.5"` → `[1.0, 0.5]`.
fn parse_weights(text: &str) -> anyhow::Result<[f64; 2]> {
    let (a, b) = text
        .split_once(':')
        .with_context(|| format!("weights `{text}`: expected bm25:embeddings"))?;
    Ok([a.trim().parse()?, b.trim().parse()?])
}

fn by_kind(report: &Report) -> [(&'static str, Report); 3] {
    [
        ("all", report.clone()),
        ("keyword", report.of_kind(Kind::Keyword)),
        ("paraphrase", report.of_kind(Kind::Paraphrase)),
    ]
}

/// One start page's figures: per ranking (BM25 first, the service's fusion last).
struct StartRun {
    agent: AgentId,
    pages: u64,
    reports: Vec<(String, Report)>,
}

/// Crawls the book from `start` into a new agent, waits for its vectors, and evaluates the
/// question set on it under each ranking, printing per-question details.
async fn evaluate_start(
    service: &kb::Service,
    args: &Args,
    start: &str,
    questions: &[eval::Question],
    weights: &[[f64; 2]],
) -> anyhow::Result<StartRun> {
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
    let knowledge = &service.knowledge;
    if let Some(embedder) = knowledge.embedder.as_deref() {
        let waited = service
            .wait_for_embeddings(embedder.model(), &crawl.document_id, CRAWL_TIMEOUT)
            .await?;
        println!(
            "every chunk embedded ({}) {:.2} s after the crawl began",
            embedder.model(),
            (crawl.elapsed + waited).as_secs_f64()
        );
    }
    let store = service.store.clone();
    let crawled: HashSet<String> = store
        .document_pages(&crawl.document_id)
        .await?
        .into_iter()
        .filter_map(|p| page_file(&p.url))
        .collect();

    if let Some(path) = &args.candidates {
        write_candidates(service, &agent, start, questions, path, args.halves).await?;
    }

    let service_weights = [retrieve::BM25_WEIGHT, retrieve::VECTOR_WEIGHT];
    let retriever = Retriever {
        weights: service_weights,
        ..Retriever::new(knowledge)
    };
    let mut reports = vec![(
        "BM25".to_string(),
        eval::evaluate(&retriever, &agent, questions, Mode::Bm25).await?,
    )];
    if knowledge.embedder.is_some() {
        reports.push((
            "embeddings".to_string(),
            eval::evaluate(&retriever, &agent, questions, Mode::Vectors).await?,
        ));
        println!();
        println!("Fusion weights (BM25:embeddings), `*` = the service's:");
        println!();
        println!("| weights | hit@1 all / keyword / paraphrase | hit@5 all / keyword / paraphrase | MRR all / keyword / paraphrase |");
        println!("|---|---|---|---|");
        for w in weights {
            let r = eval::evaluate(
                &Retriever {
                    weights: *w,
                    ..retriever
                },
                &agent,
                questions,
                Mode::Fusion,
            )
            .await?;
            let [a, k, p] = by_kind(&r).map(|(_, r)| r);
            println!(
                "| {}:{}{} | {:.2} / {:.2} / {:.2} | {:.2} / {:.2} / {:.2} | {:.3} / {:.3} / {:.3} |",
                w[0],
                w[1],
                if *w == service_weights { " *" } else { "" },
                a.hit_at_1,
                k.hit_at_1,
                p.hit_at_1,
                a.hit_at_5,
                k.hit_at_5,
                p.hit_at_5,
                a.mrr,
                k.mrr,
                p.mrr
            );
        }
        reports.push((
            "fusion".to_string(),
            eval::evaluate(&retriever, &agent, questions, Mode::Fusion).await?,
        ));
    }
    println!();
    let names: Vec<&str> = reports.iter().map(|(n, _)| n.as_str()).collect();
    println!(
        "| # | kind | {} | question | expected page crawled |",
        names.join(" | ")
    );
    println!("|---:|---|{}---|---|", "---:|".repeat(names.len()));
    for (n, q) in questions.iter().enumerate() {
        let ranks: Vec<String> = reports
            .iter()
            .map(|(_, r)| r.outcomes[n].rank.map_or("–".to_owned(), |r| r.to_string()))
            .collect();
        let was_crawled = q.expect.iter().any(|e| crawled.contains(e));
        println!(
            "| {} | {:?} | {} | {} | {} |",
            n + 1,
            q.kind,
            ranks.join(" | "),
            q.q,
            if was_crawled { "yes" } else { "**no**" }
        );
    }
    let (_, last) = reports.last().expect("BM25 at least");
    println!();
    println!(
        "Top {} chunks of each question the service's ranking misses at 1 (`*` = relevant):",
        eval::DEPTH
    );
    for (n, q) in questions.iter().enumerate() {
        if last.outcomes[n].rank == Some(1) {
            continue;
        }
        let hits = retriever
            .retrieve(&agent, &q.q, eval::DEPTH, Mode::Fusion)
            .await?;
        println!();
        println!("{}. {}  (expect {})", n + 1, q.q, q.expect.join(", "));
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
                "   {mark} {:>6.3}  {}  [{}]",
                hit.score,
                hit.url.as_deref().and_then(page_file).unwrap_or_default(),
                hit.heading_path,
            );
        }
    }
    println!();
    for (name, r) in &reports {
        println!(
            "start {start}, {name}: hit@1 {:.2}, hit@5 {:.2}, MRR {:.3} over {} questions",
            r.hit_at_1, r.hit_at_5, r.mrr, r.questions
        );
    }
    Ok(StartRun {
        agent,
        pages: crawl.pages,
        reports,
    })
}

/// BM25 hits per question written by `--candidates`.
const CANDIDATES_WRITTEN: u32 = 100;

/// Writes `--candidates` (and with `halves`, the halves' embeddings) for the agent's crawl.
async fn write_candidates(
    service: &kb::Service,
    agent: &AgentId,
    start: &str,
    questions: &[eval::Question],
    path: &std::path::Path,
    halves: bool,
) -> anyhow::Result<()> {
    use std::io::Write;
    let knowledge = &service.knowledge;
    let embedder = knowledge.embedder.as_deref();
    let mut out = std::io::BufWriter::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?,
    );
    for q in questions {
        let bm25 = knowledge
            .search
            .search_chunks(agent, &q.q, CANDIDATES_WRITTEN)
            .await?;
        let query = match embedder {
            Some(e) => e
                .embed_query(&q.q)
                .await
                .map_err(|e| anyhow::anyhow!("embedding a question: {}", e.message))?,
            None => Vec::new(),
        };
        let line = serde_json::json!({
            "start": start,
            "q": q.q,
            "expect": q.expect,
            "kind": format!("{:?}", q.kind).to_lowercase(),
            "query": query,
            "bm25": bm25.iter().map(|h| (h.chunk_id.get(), h.score)).collect::<Vec<_>>(),
        });
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    let Some(embedder) = embedder.filter(|_| halves) else {
        return Ok(());
    };
    let store = service.store.as_ref();
    let set = knowledge
        .vectors
        .get(store, agent, embedder.model())
        .await?;
    let ids: Vec<ChunkId> = set.ids.iter().copied().map(ChunkId::from).collect();
    let mut halves_path = path.as_os_str().to_owned();
    halves_path.push(".halves");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&halves_path)?);
    let started = std::time::Instant::now();
    let hits = store.chunk_hits(agent, &ids).await?;
    let mut texts = Vec::with_capacity(2 * hits.len());
    for hit in &hits {
        let words: Vec<&str> = hit.text.split_whitespace().collect();
        let (first, second) = words.split_at(words.len() / 2);
        for part in [first, second] {
            texts.push(agentchat::knowledge::embed::embed_input(&ChunkText {
                chunk_id: hit.chunk_id,
                title: hit.title.clone(),
                heading_path: hit.heading_path.clone(),
                text: part.join(" "),
            }));
        }
    }
    // Two calls at once, so that both of the pool's threads work.
    let (a, b) = texts.split_at(texts.len() / 4 * 2);
    let (a, b) = tokio::join!(embedder.embed(a), embedder.embed(b));
    let vectors: Vec<Vec<f32>> = a
        .and_then(|a| Ok(a.into_iter().chain(b?).collect()))
        .map_err(|e| anyhow::anyhow!("embedding the halves: {}", e.message))?;
    for (hit, pair) in hits.iter().zip(vectors.chunks(2)) {
        writeln!(
            out,
            "{}",
            serde_json::json!([hit.chunk_id.get(), pair[0], pair[1]])
        )?;
    }
    out.flush()?;
    println!(
        "halves of {} chunks embedded in {:.1} s",
        ids.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The last path segment of a page URL (`ch04-01-what-is-ownership.html`).
fn page_file(url: &str) -> Option<String> {
    url::Url::parse(url)
        .ok()?
        .path_segments()?
        .next_back()
        .map(str::to_owned)
}
