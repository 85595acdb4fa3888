//! # `kb_bm25`: BM25 retrieval latency over 100,000 chunks
//!
//! **Target:** BM25 top-10 over 100,000 chunks with **p50 ≤ 2 ms and p99 ≤ 10 ms**.
//!
//! ## What is measured
//!
//! One agent ("A") gets `--chunks` chunks (default 100,000) in documents of
//! `--chunks-per-doc` chunks (default 50), stored with the service's
//! `DocumentStore::replace_chunks` and `finish_document` on a real SQLite store
//! (`SqliteStore::connect` + `migrate`: WAL, chunk generations kept by triggers). A second
//! agent ("B") of the same user gets `--second-agent-chunks` chunks (default 20,000).
//!
//! Each chunk has 150–250 words of *The Rust Programming Language* (`--book-dir`, default
//! `$(rustc --print sysroot)/share/doc/rust/html/book`), cut into sentences; its title is a
//! chapter title and its heading path a heading of the book, so the title and heading
//! columns carry real words too. `--text` chooses how the words are taken:
//!
//! - `words` (default): each word drawn independently with its frequency in the book. The
//!   term distribution is the book's, but words drawn independently spread every frequent
//!   word over far more chunks than prose does (in prose, words cluster by topic), and the
//!   whole corpus has the book's small vocabulary (about 6,000 words), so the posting lists
//!   of common words cover a large share of the 100,000 chunks: the hard case for BM25.
//! - `windows`: runs of consecutive words of the book from random places (real prose, topic
//!   clustering kept; the book is repeated about 90 times over, so the vocabulary is still
//!   the book's). Closer to the document frequencies of real text.
//!
//! Then, one query at a time, `knowledge::search::retrieve::search(search, agent, query, 10)` (the
//! service's retrieval: the question's content words stemmed, the agent's in-memory BM25
//! index checked against its chunk generation and searched with MaxScore pruning, the 20
//! best read from the database, relative score floor applied) is timed with `Instant`
//! around the call and recorded in an HDR histogram (µs):
//!
//! - `--queries` synthetic queries (default 2,000) of 3–8 content words drawn with the
//!   book's frequencies (words that retrieval keeps: no stopwords);
//! - the questions of the dev set (`bench/data/questions-dev.jsonl`), each `--dev-repeats`
//!   times (default 20), interleaved evenly with the synthetic queries;
//! - 50 unmeasured synthetic queries first warm the page cache and the statement cache.
//!
//! Before them, the first search on each agent builds its index from the database (all its
//! chunks read and analysed): that time is printed as the index build. After them, a
//! document of `--chunks-per-doc` new chunks is added to agent A and the next search timed
//! (the index reads and adds only the new chunks), then the document is deleted and the
//! next search timed again (the index drops its chunks).
//!
//! The measured queries stop early when `--budget-seconds` (default 75) have passed, so that
//! the default run stays short however slow retrieval is; the output then says how many were
//! run. `--budget-seconds 0` runs them all.
//!
//! Scoping: every hit of every query on agent A must be a chunk of A's documents; then
//! `--second-agent-queries` queries (default 500) run on agent B and every hit must be one of
//! B's documents, and a word present only in A's chunks must find nothing on B. The run
//! fails otherwise.
//!
//! A diagnosis follows (skip it with `--no-diagnosis`): for each dev question, its terms,
//! how many of agent A's chunks contain at least one of them (what an exhaustive ranking
//! scores: SQLite FTS5's `bm25()` did, which cost 50–150 ms a query here) and the fastest of
//! 3 `retrieve::search` calls; and the heap size of agent A's index (an index of the same
//! chunks built in this process, [`Bm25Index::heap_bytes`]).
//!
//! Hybrid retrieval (skip it with `--vector-dims 0`): every chunk is given a synthetic unit
//! vector of `--vector-dims` dimensions (384, all-MiniLM-L6-v2's), stored with the service's
//! `put_embeddings`; agent A's vector set is loaded as chats load it (`VectorCache`: 8-bit
//! codes), timed, with its size and the resident memory it adds; then the measured queries are
//! run again through `Retriever::retrieve_with_vector` (fusion, and the embeddings alone),
//! each with a query vector near three random chunks (so that vector hits pass the floors as
//! real ones do). The query's own embedding is not included (`kb_embed` times it).
//!
//! `--database-url postgres://user@host:port/database` stores the chunks in a new scratch
//! database on that PostgreSQL server instead (dropped at the end): every query then reads
//! the agent's chunk generation and the 20 best chunks from PostgreSQL, over a connection
//! of the service's pool.
//!
//! `--db PATH` keeps the filled database at `PATH` and reuses it on the next run (when it
//! already holds the two agents; `--text` and the sizes are then those of the first run);
//! without it the database lives in a temporary folder.
//!
//! ```text
//! export CARGO_TARGET_DIR=$HOME/.cache/agentchat/target
//! cargo build --release -p bench --bin kb_bm25 && $CARGO_TARGET_DIR/release/kb_bm25 --chunks 100000 --queries 2000
//! # every query, whatever it takes; and the prose-like corpus:
//! $CARGO_TARGET_DIR/release/kb_bm25 --budget-seconds 0
//! $CARGO_TARGET_DIR/release/kb_bm25 --text windows --budget-seconds 0
//! ```

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};
use test_support::scratch::ScratchDatabase;

use agentchat::{
    ids::{AgentId, ChunkId, DocumentId, UserId},
    knowledge::{
        eval,
        search::{
            bm25::{self, Bm25Index},
            retrieve::{self, Mode, Retriever},
            vectors::VectorCache,
            ChunkSearch,
        },
    },
    store::{documents::NewChunk, postgres::PgStore, sqlite::SqliteStore, Store},
};
use anyhow::{ensure, Context};
use bench::{
    kb::{self, Rng, Vocabulary},
    load,
};
use chrono::Utc;
use clap::Parser;
use hdrhistogram::Histogram;

/// p50 the issue asks for, in µs.
const TARGET_P50_US: u64 = 2_000;
/// p99 the issue asks for, in µs.
const TARGET_P99_US: u64 = 10_000;
/// Chunks returned per query (top-10).
const TOP: u32 = 10;
/// Unmeasured queries before the measured ones.
const WARMUP_QUERIES: usize = 50;
/// The agents' names, by which a kept database is found again.
const AGENT_A: &str = "bm25 A";
const AGENT_B: &str = "bm25 B";
/// Words present only in agent A's chunks (one per document), searched on agent B.
const A_ONLY_WORD: &str = "scopeprobealpha";

/// BM25 top-10 latency over 100,000 chunks, with agent scoping checked. See the binary's
/// documentation for details.
#[derive(Parser, Debug)]
#[command(name = "kb_bm25", version, about, long_about = None)]
struct Args {
    /// The Rust book's HTML folder (default: `$(rustc --print sysroot)/share/doc/rust/html/book`).
    #[arg(long)]
    book_dir: Option<PathBuf>,
    /// Chunks of agent A (the measured one).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    chunks: u64,
    /// Chunks of agent B (the scoping check).
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    second_agent_chunks: u64,
    /// Chunks per document.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    chunks_per_doc: u64,
    /// Measured synthetic queries on agent A.
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    queries: u64,
    /// Times each dev-set question is asked (measured, on agent A).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    dev_repeats: u64,
    /// Queries on agent B (scoping check, measured separately).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    second_agent_queries: u64,
    /// The dev question set.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/data/questions-dev.jsonl"))]
    questions: PathBuf,
    /// Keep the filled database here and reuse it when it already holds the agents.
    #[arg(long)]
    db: Option<PathBuf>,
    /// Seed of the generated text and queries.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// How chunk text is made from the book: `words` (independent words) or `windows`
    /// (runs of consecutive words).
    #[arg(long, value_enum, default_value_t = TextKind::Words)]
    text: TextKind,
    /// Stop the measured queries on agent A after this many seconds (0: no limit).
    #[arg(long, default_value_t = 75)]
    budget_seconds: u64,
    /// Skip the per-question diagnosis (terms, matching chunks, index size).
    #[arg(long)]
    no_diagnosis: bool,
    /// A PostgreSQL server (`postgres://user@host:port/database`): the chunks are stored in a
    /// new scratch database there (dropped at the end) instead of SQLite. `--db` does not
    /// apply.
    #[arg(long, conflicts_with = "db")]
    database_url: Option<String>,
    /// Dimensions of the synthetic vectors given to every chunk for the hybrid measurement
    /// (all-MiniLM-L6-v2's 384 by default; 0 skips it).
    #[arg(long, default_value_t = 384, value_parser = clap::value_parser!(u64).range(0..=4096))]
    vector_dims: u64,
}

/// The database the chunks are kept in: the service's store, and its pool for the few
/// reads the benchmark makes itself (written for each backend's SQL dialect).
enum Db {
    Sqlite {
        store: SqliteStore,
        path: PathBuf,
    },
    Postgres {
        store: PgStore,
        // Dropped with the benchmark.
        scratch: ScratchDatabase,
    },
}

impl Db {
    /// Opens (creating and migrating) the store, as the service does.
    async fn open(args: &Args, temp: &Path) -> anyhow::Result<Self> {
        match &args.database_url {
            Some(server) => {
                let scratch = ScratchDatabase::create(server).await?;
                let store = PgStore::connect(
                    scratch.url(),
                    agentchat::store::postgres::DEFAULT_MAX_CONNECTIONS,
                )
                .await?;
                store.migrate().await?;
                Ok(Self::Postgres { store, scratch })
            }
            None => {
                let path = args.db.clone().unwrap_or_else(|| temp.join("b.db"));
                Ok(Self::Sqlite {
                    store: kb::bench_store(&path).await?,
                    path,
                })
            }
        }
    }

    fn store(&self) -> Arc<dyn Store> {
        match self {
            Self::Sqlite { store, .. } => Arc::new(store.clone()),
            Self::Postgres { store, .. } => Arc::new(store.clone()),
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Sqlite { path, .. } => format!("SQLite {}", path.display()),
            Self::Postgres { scratch, .. } => format!("PostgreSQL database {}", scratch.name()),
        }
    }

    /// The ids of agents A and B of a kept SQLite database, if it has them (a PostgreSQL
    /// scratch database is always new).
    async fn find_agents(&self) -> anyhow::Result<Option<(AgentId, AgentId)>> {
        let Self::Sqlite { store, .. } = self else {
            return Ok(None);
        };
        let find = |name: &'static str| async move {
            sqlx::query_scalar::<_, AgentId>("SELECT id FROM agents WHERE name = ? LIMIT 1")
                .bind(name)
                .fetch_optional(store.pool())
                .await
        };
        Ok(match (find(AGENT_A).await?, find(AGENT_B).await?) {
            (Some(a), Some(b)) => Some((a, b)),
            _ => None,
        })
    }

    /// The number of chunks of `agent` and the ids of its documents.
    async fn agent_contents(&self, agent: &AgentId) -> anyhow::Result<(u64, HashSet<DocumentId>)> {
        let (chunks, docs): (i64, Vec<DocumentId>) = match self {
            Self::Sqlite { store, .. } => (
                sqlx::query_scalar("SELECT count(*) FROM chunks WHERE agent_id = ?")
                    .bind(agent)
                    .fetch_one(store.pool())
                    .await?,
                sqlx::query_scalar("SELECT id FROM documents WHERE agent_id = ?")
                    .bind(agent)
                    .fetch_all(store.pool())
                    .await?,
            ),
            Self::Postgres { store, .. } => (
                sqlx::query_scalar("SELECT count(*) FROM chunks WHERE agent_id = $1")
                    .bind(agent)
                    .fetch_one(store.pool())
                    .await?,
                sqlx::query_scalar("SELECT id FROM documents WHERE agent_id = $1")
                    .bind(agent)
                    .fetch_all(store.pool())
                    .await?,
            ),
        };
        Ok((chunks.max(0) as u64, docs.into_iter().collect()))
    }

    /// The database's size in bytes: SQLite's files after a checkpoint of the WAL into the
    /// main file; PostgreSQL's `pg_database_size`.
    async fn size(&self) -> anyhow::Result<u64> {
        match self {
            Self::Sqlite { store, path } => {
                sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                    .execute(store.writer())
                    .await?;
                let mut bytes = 0;
                for suffix in ["", "-wal", "-shm"] {
                    let file = PathBuf::from(format!("{}{suffix}", path.display()));
                    bytes += std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
                }
                Ok(bytes)
            }
            Self::Postgres { store, .. } => {
                let bytes: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
                    .fetch_one(store.pool())
                    .await?;
                Ok(bytes.max(0) as u64)
            }
        }
    }

    /// The user `agent` belongs to.
    async fn agent_user(&self, agent: &AgentId) -> anyhow::Result<UserId> {
        Ok(match self {
            Self::Sqlite { store, .. } => {
                sqlx::query_scalar("SELECT user_id FROM agents WHERE id = ?")
                    .bind(agent)
                    .fetch_one(store.pool())
                    .await?
            }
            Self::Postgres { store, .. } => {
                sqlx::query_scalar("SELECT user_id FROM agents WHERE id = $1")
                    .bind(agent)
                    .fetch_one(store.pool())
                    .await?
            }
        })
    }

    /// Every chunk of `agent`: id, title, heading path, text.
    async fn chunk_rows(
        &self,
        agent: &AgentId,
    ) -> anyhow::Result<Vec<(i64, String, String, String)>> {
        Ok(match self {
            Self::Sqlite { store, .. } => sqlx::query_as(
                "SELECT id, title, heading_path, text FROM chunks WHERE agent_id = ? ORDER BY id",
            )
            .bind(agent)
            .fetch_all(store.pool())
            .await?,
            Self::Postgres { store, .. } => sqlx::query_as(
                "SELECT id, title, heading_path, text FROM chunks WHERE agent_id = $1 ORDER BY id",
            )
            .bind(agent)
            .fetch_all(store.pool())
            .await?,
        })
    }
}

/// How chunk text is made from the book's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TextKind {
    /// Each word drawn independently with its frequency in the book.
    Words,
    /// Runs of consecutive words of the book from random places.
    Windows,
}

/// What fills one agent.
struct Fill<'a> {
    text: TextKind,
    vocabulary: &'a Vocabulary,
    titles: &'a [String],
    headings: &'a [String],
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let book = kb::book_dir(args.book_dir.as_deref())?;
    let pages = kb::read_book(&book)?;
    let vocabulary = Vocabulary::from_texts(pages.iter().map(|p| p.markdown.as_str()));
    let titles: Vec<String> = pages.iter().map(|p| p.title.clone()).collect();
    let headings: Vec<String> = pages
        .iter()
        .flat_map(|p| p.markdown.lines())
        .filter_map(|l| l.strip_prefix('#'))
        .map(|h| h.trim_start_matches('#').trim().to_owned())
        .filter(|h| !h.is_empty())
        .collect();
    let fill = Fill {
        text: args.text,
        vocabulary: &vocabulary,
        titles: &titles,
        headings: &headings,
    };
    let questions = eval::parse_questions(
        &std::fs::read_to_string(&args.questions)
            .with_context(|| format!("reading {}", args.questions.display()))?,
    )?;
    println!("kb_bm25: BM25 top-{TOP} retrieval latency (retrieve::search, in-memory BM25 index per agent)");
    println!("machine: {}", load::machine());
    println!(
        "vocabulary: {} words ({} distinct) from {} chapter pages of {}",
        vocabulary.len(),
        vocabulary.distinct(),
        pages.len(),
        book.display()
    );

    let temp = tempfile::Builder::new().prefix("kb-bm25-").tempdir()?;
    let db = Db::open(&args, temp.path()).await?;
    println!("store: {}", db.describe());
    let store = db.store();
    let store = store.as_ref();
    // The service's search: the agents' indexes kept in memory between searches.
    let search = ChunkSearch::new(db.store());
    let (agent_a, agent_b) = match db.find_agents().await? {
        Some(found) => {
            println!("reusing the filled database {}", db.describe());
            found
        }
        None => {
            let (user, agent_a) = kb::create_user_and_agent(store, AGENT_A).await?;
            let agent_b = kb::create_agent(store, &user, AGENT_B).await?;
            let mut rng = Rng::new(args.seed);
            let started = Instant::now();
            fill_agent(
                store,
                &user,
                &agent_a,
                args.chunks,
                args.chunks_per_doc,
                &fill,
                &mut rng,
                Some(A_ONLY_WORD),
            )
            .await?;
            let a_time = started.elapsed();
            let started = Instant::now();
            fill_agent(
                store,
                &user,
                &agent_b,
                args.second_agent_chunks,
                args.chunks_per_doc,
                &fill,
                &mut rng,
                None,
            )
            .await?;
            println!(
                "filled agent A with {} chunks in {:.1} s ({:.0} chunks/s), agent B with {} chunks in {:.1} s",
                args.chunks,
                a_time.as_secs_f64(),
                args.chunks as f64 / a_time.as_secs_f64(),
                args.second_agent_chunks,
                started.elapsed().as_secs_f64()
            );
            (agent_a, agent_b)
        }
    };
    let (chunks_a, docs_a) = db.agent_contents(&agent_a).await?;
    let (chunks_b, docs_b) = db.agent_contents(&agent_b).await?;
    let db_bytes = db.size().await?;
    println!(
        "database: {} chunks of agent A ({} documents), {} of agent B ({} documents), {} MiB",
        chunks_a,
        docs_a.len(),
        chunks_b,
        docs_b.len(),
        kb::mib(db_bytes)
    );

    // Queries.
    let mut rng = Rng::new(args.seed ^ 0x5eed);
    let synthetic: Vec<String> = (0..args.queries)
        .map(|_| synthetic_query(&vocabulary, &mut rng))
        .collect();
    let dev: Vec<String> = (0..args.dev_repeats)
        .flat_map(|_| questions.iter().map(|q| q.q.clone()))
        .collect();
    let warmup: Vec<String> = (0..WARMUP_QUERIES)
        .map(|_| synthetic_query(&vocabulary, &mut rng))
        .collect();
    let on_b: Vec<String> = (0..args.second_agent_queries)
        .map(|_| synthetic_query(&vocabulary, &mut rng))
        .collect();
    // The dev questions spread evenly among the synthetic queries: class 0 synthetic, 1 dev.
    let total = synthetic.len() + dev.len();
    let mut measured: Vec<(usize, &str)> = Vec::with_capacity(total);
    let (mut next_synthetic, mut next_dev) = (synthetic.iter(), dev.iter());
    for k in 0..total {
        let dev_due = (k + 1) * dev.len() / total > k * dev.len() / total;
        let query = if dev_due {
            next_dev.next().map(|q| (1, q))
        } else {
            None
        }
        .or_else(|| next_synthetic.next().map(|q| (0, q)))
        .or_else(|| next_dev.next().map(|q| (1, q)));
        if let Some((class, query)) = query {
            measured.push((class, query.as_str()));
        }
    }
    let warmup: Vec<(usize, &str)> = warmup.iter().map(|q| (0, q.as_str())).collect();
    let on_b: Vec<(usize, &str)> = on_b.iter().map(|q| (0, q.as_str())).collect();
    let budget = (args.budget_seconds > 0)
        .then(|| Instant::now() + Duration::from_secs(args.budget_seconds));
    println!("load before the queries: {}", kb::load_average());
    for (name, agent, chunks) in [("A", &agent_a, chunks_a), ("B", &agent_b, chunks_b)] {
        let started = Instant::now();
        retrieve::search(&search, agent, "ownership", TOP).await?;
        let took = started.elapsed();
        println!(
            "index build (first search) on agent {name}: {chunks} chunks in {:.2} s ({:.0} chunks/s)",
            took.as_secs_f64(),
            chunks as f64 / took.as_secs_f64()
        );
    }
    run_queries(&search, &agent_a, &warmup, 1, &docs_a, None).await?;
    let measured_started = Instant::now();
    let a_runs = run_queries(&search, &agent_a, &measured, 2, &docs_a, budget).await?;
    let a_elapsed = measured_started.elapsed();
    let b_run = run_queries(&search, &agent_b, &on_b, 1, &docs_b, None)
        .await?
        .remove(0);
    let (synthetic_run, dev_run) = (&a_runs[0], &a_runs[1]);
    let ran = synthetic_run.histogram.len() + dev_run.histogram.len();
    if ran < measured.len() as u64 {
        println!(
            "the query budget of {} s ran out: {ran} of {} measured queries were run (--budget-seconds 0 runs them all)",
            args.budget_seconds,
            measured.len()
        );
    }
    println!(
        "{ran} measured queries on agent A in {:.1} s",
        a_elapsed.as_secs_f64()
    );
    let a_only_on_b = retrieve::search(&search, &agent_b, A_ONLY_WORD, TOP).await?;
    let a_only_on_a = retrieve::search(&search, &agent_a, A_ONLY_WORD, TOP).await?;
    ensure!(
        a_only_on_b.is_empty() && !a_only_on_a.is_empty(),
        "scoping: a word only in agent A's chunks gave {} hits on B and {} on A",
        a_only_on_b.len(),
        a_only_on_a.len()
    );
    update_latency(&db, &search, &agent_a, args.chunks_per_doc, &fill, &mut rng).await?;
    let hybrid = if args.vector_dims > 0 {
        Some(
            hybrid_latency(
                &db.store(),
                &search,
                &agent_a,
                args.vector_dims as usize,
                &measured,
                &mut rng,
            )
            .await?,
        )
    } else {
        None
    };
    println!("load after the queries: {}", kb::load_average());
    if !args.no_diagnosis {
        diagnose(&db, &search, &agent_a, &questions).await?;
    }

    let mut all = synthetic_run.histogram.clone();
    all.add(&dev_run.histogram)?;
    println!();
    println!("Latency of retrieve::search(.., {TOP}) in ms, one query at a time:");
    println!();
    println!("| queries | agent chunks | count | mean hits | p50 | p90 | p99 | max |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, chunks, run) in [
        ("synthetic, 3–8 content words", chunks_a, synthetic_run),
        ("dev-set questions", chunks_a, dev_run),
        ("synthetic, agent B", chunks_b, &b_run),
    ] {
        print_row(name, chunks, &run.histogram, run.mean_hits());
    }
    let all_hits = (synthetic_run.hits + dev_run.hits) as f64 / all.len().max(1) as f64;
    print_row("**all on agent A**", chunks_a, &all, all_hits);
    println!();
    println!(
        "scoping: all {} hits on agent A were A's chunks, all {} hits on agent B were B's; \
         the A-only word found {} chunks on A and none on B",
        synthetic_run.hits + dev_run.hits,
        b_run.hits,
        a_only_on_a.len()
    );
    println!(
        "database size: {} MiB; chunk text: {:?}",
        kb::mib(db_bytes),
        args.text
    );
    if let Some(hybrid) = &hybrid {
        hybrid.print(chunks_a);
    }
    let [p50, _, p99, _, _] = load::summary(&all);
    // No measured query (a budget shorter than the warm-up) is no evidence either way.
    let pass = !all.is_empty() && p50 <= TARGET_P50_US && p99 <= TARGET_P99_US;
    println!(
        "{}: BM25 top-{TOP} over {chunks_a} chunks p50 {} ms (target ≤ {}), p99 {} ms (target ≤ {})",
        kb::verdict(pass),
        load::ms(p50),
        load::ms(TARGET_P50_US),
        load::ms(p99),
        load::ms(TARGET_P99_US)
    );
    Ok(())
}

fn print_row(name: &str, chunks: u64, histogram: &Histogram<u64>, mean_hits: f64) {
    let [p50, p90, p99, _, max] = load::summary(histogram);
    println!(
        "| {name} | {chunks} | {} | {mean_hits:.1} | {} | {} | {} | {} |",
        histogram.len(),
        load::ms(p50),
        load::ms(p90),
        load::ms(p99),
        load::ms(max)
    );
}

/// Stores `chunks` generated chunks for `agent` in documents of `per_doc` chunks. When
/// `marker` is given, the first chunk of every document also holds that word.
#[allow(clippy::too_many_arguments)]
async fn fill_agent(
    store: &dyn Store,
    user: &UserId,
    agent: &AgentId,
    chunks: u64,
    per_doc: u64,
    fill: &Fill<'_>,
    rng: &mut Rng,
    marker: Option<&str>,
) -> anyhow::Result<()> {
    let mut left = chunks;
    let mut n = 0u64;
    while left > 0 {
        let count = left.min(per_doc);
        left -= count;
        let (doc, job) =
            kb::file_document(user, agent, &format!("generated-{n:06}.md"), "markdown", 0);
        n += 1;
        store.create_document(&doc, &job).await?;
        let title = fill.titles[rng.below(fill.titles.len())].clone();
        let batch: Vec<NewChunk> = (0..count)
            .map(|position| {
                let mut text = chunk_text(fill, rng);
                if position == 0 {
                    if let Some(marker) = marker {
                        text.push(' ');
                        text.push_str(marker);
                        text.push('.');
                    }
                }
                let words = text.split_whitespace().count() as u32;
                NewChunk {
                    page_url: None,
                    title: title.clone(),
                    heading_path: fill.headings[rng.below(fill.headings.len())].clone(),
                    position: position as u32,
                    page: None,
                    tokens: words * 4 / 3,
                    text,
                }
            })
            .collect();
        ensure!(
            store.replace_chunks(&doc.id, &batch).await?,
            "document vanished"
        );
        store.finish_document(&doc.id, None, 0, Utc::now()).await?;
    }
    Ok(())
}

/// 150–250 words of the book (see [`TextKind`]), in sentences of 6–20 words.
fn chunk_text(fill: &Fill<'_>, rng: &mut Rng) -> String {
    let words = rng.between(150, 250);
    let picked: Vec<&str> = match fill.text {
        TextKind::Words => (0..words).map(|_| fill.vocabulary.sample(rng)).collect(),
        TextKind::Windows => fill.vocabulary.window(rng, words),
    };
    let mut text = String::with_capacity(words * 7);
    let mut sentence_left = rng.between(6, 20);
    for (i, word) in picked.into_iter().enumerate() {
        if i > 0 {
            text.push(' ');
        }
        text.push_str(word);
        sentence_left -= 1;
        if sentence_left == 0 || i + 1 == words {
            text.push('.');
            sentence_left = rng.between(6, 20);
        }
    }
    text
}

/// 3–8 content words with the book's frequencies.
fn synthetic_query(vocabulary: &Vocabulary, rng: &mut Rng) -> String {
    let words = rng.between(3, 8);
    (0..words)
        .map(|_| vocabulary.sample_content(rng))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The latencies and hit counts of a list of queries.
struct QueryRun {
    histogram: Histogram<u64>,
    hits: u64,
}

impl QueryRun {
    fn mean_hits(&self) -> f64 {
        self.hits as f64 / self.histogram.len().max(1) as f64
    }
}

/// Runs `queries` (class, text) one at a time on `agent`, checking every hit is one of
/// `docs`; stops at `deadline`. Returns the figures of each class `0..classes`.
async fn run_queries(
    search: &ChunkSearch,
    agent: &AgentId,
    queries: &[(usize, &str)],
    classes: usize,
    docs: &HashSet<DocumentId>,
    deadline: Option<Instant>,
) -> anyhow::Result<Vec<QueryRun>> {
    let mut runs: Vec<QueryRun> = (0..classes)
        .map(|_| QueryRun {
            histogram: load::histogram(),
            hits: 0,
        })
        .collect();
    for &(class, query) in queries {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let started = Instant::now();
        let found = retrieve::search(search, agent, query, TOP).await?;
        let elapsed: Duration = started.elapsed();
        let run = &mut runs[class];
        load::record(&mut run.histogram, elapsed);
        run.hits += found.len() as u64;
        for hit in &found {
            ensure!(
                docs.contains(&hit.document_id),
                "scoping: query {query:?} on agent {agent} returned chunk {} of document {}, \
                 which is not the agent's",
                hit.chunk_id,
                hit.document_id
            );
        }
    }
    Ok(runs)
}

/// Adds a document of `per_doc` chunks to `agent` and times the next search (the index
/// adds the new chunks), then deletes it and times the next search (the index drops them).
async fn update_latency(
    db: &Db,
    search: &ChunkSearch,
    agent: &AgentId,
    per_doc: u64,
    fill: &Fill<'_>,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let user = db.agent_user(agent).await?;
    let store = db.store();
    let (doc, job) = kb::file_document(&user, agent, "update-probe.md", "markdown", 0);
    store.create_document(&doc, &job).await?;
    let chunks: Vec<NewChunk> = (0..per_doc)
        .map(|position| NewChunk {
            page_url: None,
            title: "update probe".into(),
            heading_path: String::new(),
            position: position as u32,
            page: None,
            tokens: 300,
            text: format!("{} updateprobeword", chunk_text(fill, rng)),
        })
        .collect();
    ensure!(
        store.replace_chunks(&doc.id, &chunks).await?,
        "document vanished"
    );
    let started = Instant::now();
    let found = retrieve::search(search, agent, "updateprobeword", TOP).await?;
    let added = started.elapsed();
    ensure!(
        found.len() == TOP as usize && found.iter().all(|h| h.document_id == doc.id),
        "the added document's chunks were not found ({} hits)",
        found.len()
    );
    ensure!(
        store.delete_document(&user, agent, &doc.id).await?,
        "delete failed"
    );
    let started = Instant::now();
    let found = retrieve::search(search, agent, "updateprobeword", TOP).await?;
    let deleted = started.elapsed();
    ensure!(
        found.is_empty(),
        "a deleted document's chunks were still found"
    );
    println!(
        "first search after adding a document of {per_doc} chunks to agent A: {:.1} ms; after deleting it: {:.1} ms",
        added.as_secs_f64() * 1000.0,
        deleted.as_secs_f64() * 1000.0
    );
    Ok(())
}

/// Per dev question: its terms, the chunks containing one of them and `retrieve::search`
/// time; then the heap size of the agent's index.
async fn diagnose(
    db: &Db,
    search: &ChunkSearch,
    agent: &AgentId,
    questions: &[eval::Question],
) -> anyhow::Result<()> {
    let rows = db.chunk_rows(agent).await?;
    let started = Instant::now();
    let mut index = Bm25Index::default();
    for (id, title, heading_path, text) in &rows {
        index.add(*id, title, heading_path, text);
    }
    let built = started.elapsed();
    println!();
    println!(
        "Index of agent A built here from its {} chunks: {:.2} s of analysis, {} MiB of heap ({:.0} bytes per chunk)",
        index.len(),
        built.as_secs_f64(),
        kb::mib(index.heap_bytes() as u64),
        index.heap_bytes() as f64 / index.len().max(1) as f64
    );
    println!();
    println!("Diagnosis on agent A (fastest of 3 runs each):");
    println!();
    println!("| question | terms | chunks matched | retrieve::search (ms) |");
    println!("|---|---|---:|---:|");
    for q in questions {
        let terms = bm25::query_terms(&q.q);
        let matched = index.matching(&terms);
        let mut fastest = Duration::MAX;
        for _ in 0..3 {
            let started = Instant::now();
            retrieve::search(search, agent, &q.q, TOP).await?;
            fastest = fastest.min(started.elapsed());
        }
        println!(
            "| {} | {} | {matched} | {:.2} |",
            q.q,
            terms.join(" "),
            fastest.as_secs_f64() * 1000.0
        );
    }
    Ok(())
}

/// Model name of the synthetic vectors.
const SYNTHETIC_MODEL: &str = "bench-synthetic";
/// p50 and p99 the issue asks for of hybrid top-10, in µs.
const HYBRID_TARGET_US: [u64; 2] = [5_000, 20_000];

/// The synthetic unit vector of chunk `id` (the same on every run).
fn synthetic_vector(id: i64, dims: usize) -> Vec<f32> {
    let mut rng = Rng::new(id as u64 ^ 0x7ec7_0a5e);
    let v: Vec<f32> = (0..dims)
        .map(|_| (rng.next_u64() % 20_001) as f32 / 10_000.0 - 1.0)
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / norm).collect()
}

/// Figures of the hybrid measurement.
struct HybridRun {
    dims: usize,
    vectors: usize,
    load: Duration,
    set_bytes: u64,
    rss_delta_kib: i64,
    fusion: QueryRun,
    vectors_only: QueryRun,
}

impl HybridRun {
    fn print(&self, chunks: u64) {
        println!();
        println!(
            "Hybrid retrieval (`Retriever::retrieve_with_vector`, BM25 and {} synthetic {}-dimension vectors fused; the query's own embedding not included), in ms:",
            self.vectors, self.dims
        );
        println!();
        println!("| ranking | agent chunks | count | mean hits | p50 | p90 | p99 | max |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|");
        print_row(
            "fusion (top-10)",
            chunks,
            &self.fusion.histogram,
            self.fusion.mean_hits(),
        );
        print_row(
            "embeddings alone (top-10)",
            chunks,
            &self.vectors_only.histogram,
            self.vectors_only.mean_hits(),
        );
        println!();
        println!(
            "vector set: {} vectors loaded in {:.2} s; {:.1} MiB held ({:.0} bytes per vector); resident memory grew by {:.1} MiB",
            self.vectors,
            self.load.as_secs_f64(),
            self.set_bytes as f64 / 1_048_576.0,
            self.set_bytes as f64 / self.vectors.max(1) as f64,
            self.rss_delta_kib as f64 / 1024.0
        );
        let [p50, _, p99, _, _] = load::summary(&self.fusion.histogram);
        println!(
            "{}: hybrid top-{TOP} over {chunks} chunks p50 {} ms (target ≤ {}), p99 {} ms (target ≤ {})",
            kb::verdict(
                !self.fusion.histogram.is_empty()
                    && p50 <= HYBRID_TARGET_US[0]
                    && p99 <= HYBRID_TARGET_US[1]
            ),
            load::ms(p50),
            load::ms(HYBRID_TARGET_US[0]),
            load::ms(p99),
            load::ms(HYBRID_TARGET_US[1])
        );
    }
}

/// Gives every chunk lacking one a synthetic vector, loads agent A's vector set (timed, with
/// the resident memory it adds), then times the fusion and the embeddings alone on the
/// `queries`: each query's vector is near three random chunks of A's (their sum plus noise),
/// so that some vector hits pass the similarity floors as real ones do.
async fn hybrid_latency(
    store: &Arc<dyn Store>,
    search: &ChunkSearch,
    agent: &AgentId,
    dims: usize,
    queries: &[(usize, &str)],
    rng: &mut Rng,
) -> anyhow::Result<HybridRun> {
    let started = Instant::now();
    let mut written = 0usize;
    loop {
        let missing = store
            .chunks_without_embedding(SYNTHETIC_MODEL, None, 2_000)
            .await?;
        if missing.is_empty() {
            break;
        }
        let pairs: Vec<(ChunkId, Vec<f32>)> = missing
            .iter()
            .map(|c| (c.chunk_id, synthetic_vector(c.chunk_id.get(), dims)))
            .collect();
        written += pairs.len();
        store.put_embeddings(SYNTHETIC_MODEL, &pairs).await?;
    }
    if written > 0 {
        println!(
            "stored {written} synthetic vectors in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let cache = VectorCache::default();
    let pid = std::process::id();
    let (rss_before, _) = load::rss_kib(pid)?;
    let started = Instant::now();
    let set = cache.get(store.as_ref(), agent, SYNTHETIC_MODEL).await?;
    let loaded = started.elapsed();
    let (rss_after, _) = load::rss_kib(pid)?;
    ensure!(
        set.dims == dims,
        "the vector set has {} dimensions",
        set.dims
    );
    let retriever = Retriever {
        search,
        embedder: None,
        vectors: &cache,
        weights: [retrieve::BM25_WEIGHT, retrieve::VECTOR_WEIGHT],
    };
    let query_vectors: Vec<Vec<f32>> = queries
        .iter()
        .map(|_| {
            let mut v = vec![0.0f32; dims];
            for _ in 0..3 {
                let id = set.ids[rng.below(set.ids.len())];
                for (x, y) in v.iter_mut().zip(synthetic_vector(id, dims)) {
                    *x += y;
                }
            }
            for x in &mut v {
                *x += (rng.next_u64() % 2001) as f32 / 10_000.0 - 0.1;
            }
            v
        })
        .collect();
    let mut runs = Vec::new();
    for mode in [Mode::Fusion, Mode::Vectors] {
        let mut run = QueryRun {
            histogram: load::histogram(),
            hits: 0,
        };
        for ((_, query), vector) in queries.iter().zip(&query_vectors) {
            let started = Instant::now();
            let found = retriever
                .retrieve_with_vector(agent, query, SYNTHETIC_MODEL, vector, TOP, mode)
                .await?;
            run.histogram.record(started.elapsed().as_micros() as u64)?;
            run.hits += found.len() as u64;
        }
        runs.push(run);
    }
    let vectors_only = runs.pop().expect("two runs");
    let fusion = runs.pop().expect("two runs");
    Ok(HybridRun {
        dims,
        vectors: set.ids.len(),
        load: loaded,
        set_bytes: set.bytes(),
        rss_delta_kib: rss_after as i64 - rss_before as i64,
        fusion,
        vectors_only,
    })
}
