//! Shared pieces of the knowledge-base benchmarks (`kb_ingest`, `kb_crawl`, `kb_bm25`,
//! `kb_pdf_memory`, `kb_quality`).
//!
//! - The corpus is *The Rust Programming Language* as the Rust toolchain installs it
//!   (`$(rustc --print sysroot)/share/doc/rust/html/book/`, see [`book_dir`]): its chapter
//!   pages are read as Markdown ([`read_book`]), their words make a [`Vocabulary`] with the
//!   book's real term frequencies, and the whole folder can be served on loopback
//!   ([`serve_dir`]) for crawls.
//! - [`Rng`] is a small deterministic generator, so that every run builds the same data.
//! - [`bench_store`] and [`create_user_and_agent`] set up a SQLite store through the
//!   service's own `Store` traits; [`Service`] is the whole service built in this process
//!   with `Application::build`, driven over its HTTP API ([`Service::crawl`]).

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use agentchat::{
    config::Config,
    domain::{Email, Role},
    ids::{AgentId, DocumentId, JobId, MessageId, ThreadId, UserId},
    knowledge::search::bm25,
    startup::Application,
    store::{
        agents::AgentStatus,
        chat::ReplyStatus,
        documents::{DocumentRecord, DocumentSource, DocumentStatus},
        jobs::{JobKind, JobRecord, JobStatus},
        sqlite::SqliteStore,
        AgentRecord, MessageRecord, NewUser, Store,
    },
};
use anyhow::{bail, ensure, Context};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::service;

/// The book's folder below the toolchain's sysroot.
const BOOK_BELOW_SYSROOT: &str = "share/doc/rust/html/book";

/// `dir` when given, else the Rust book of the active toolchain
/// (`$(rustc --print sysroot)/share/doc/rust/html/book`). Fails when the folder has no
/// `index.html` (the `rust-docs` component is not installed).
pub fn book_dir(dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = match dir {
        Some(dir) => dir.to_path_buf(),
        None => {
            let output = std::process::Command::new("rustc")
                .args(["--print", "sysroot"])
                .output()
                .context("running `rustc --print sysroot` to find the Rust book")?;
            ensure!(
                output.status.success(),
                "`rustc --print sysroot` failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            PathBuf::from(String::from_utf8(output.stdout)?.trim()).join(BOOK_BELOW_SYSROOT)
        }
    };
    ensure!(
        dir.join("index.html").is_file(),
        "{} holds no index.html; install the book with `rustup component add rust-docs` \
         or pass --book-dir",
        dir.display()
    );
    Ok(dir)
}

/// One chapter page of the book, as Markdown.
#[derive(Debug, Clone)]
pub struct BookPage {
    /// The file name (`ch04-01-what-is-ownership.html`).
    pub file: String,
    /// The page title.
    pub title: String,
    /// The main content as Markdown (headings as `#` lines, code fenced), the way the
    /// crawler extracts it (readability, Markdown text mode).
    pub markdown: String,
}

/// The book's chapter pages in file-name order: every `*.html` of the top folder except
/// pages that ask not to be indexed (the print-all page, the table-of-contents frame and
/// the redirect stubs of the first edition).
pub fn read_book(dir: &Path) -> anyhow::Result<Vec<BookPage>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "html"))
        .collect();
    files.sort();
    let mut pages = Vec::new();
    for path in files {
        let html = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        if is_noindex(&html) {
            continue;
        }
        let file = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let url = format!("http://book.invalid/book/{file}");
        let config = dom_smoothie::Config {
            text_mode: dom_smoothie::TextMode::Markdown,
            ..dom_smoothie::Config::default()
        };
        let Ok(article) = dom_smoothie::Readability::new(html, Some(&url), Some(config))
            .and_then(|mut r| r.parse())
        else {
            continue;
        };
        let markdown = article.text_content.trim().to_owned();
        if markdown.is_empty() {
            continue;
        }
        pages.push(BookPage {
            file,
            title: article.title.trim().to_owned(),
            markdown,
        });
    }
    ensure!(
        !pages.is_empty(),
        "no readable chapter pages in {}",
        dir.display()
    );
    Ok(pages)
}

/// Whether an HTML page carries `<meta name="robots" content="noindex...">`.
fn is_noindex(html: &str) -> bool {
    let head = &html[..html.len().min(4096)].to_ascii_lowercase();
    head.contains("name=\"robots\" content=\"noindex")
}

/// A SplitMix64 generator: fast, deterministic, good enough to sample test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// A number in `low..=high`.
    pub fn between(&mut self, low: usize, high: usize) -> usize {
        low + self.below(high - low + 1)
    }
}

/// The words of a text, with their frequencies: sampling picks a word with the probability
/// it has in the text (so frequent words are frequent in generated text, as in the book).
#[derive(Debug, Clone)]
pub struct Vocabulary {
    /// Distinct words, lower case.
    words: Vec<String>,
    /// One entry per occurrence in the text: an index into `words`.
    occurrences: Vec<u32>,
    /// The occurrences of content words (those that `bm25::query_terms` keeps: not a
    /// stopword, at least two characters).
    content: Vec<u32>,
}

impl Vocabulary {
    /// The words of `texts`, split as retrieval splits a message (runs of alphanumeric
    /// characters and `_`), lower-cased.
    pub fn from_texts<'a>(texts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut index = std::collections::HashMap::<String, u32>::new();
        let mut words = Vec::new();
        let mut occurrences = Vec::new();
        for text in texts {
            for word in text
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .filter(|w| !w.is_empty())
            {
                let word = word.to_lowercase();
                let id = *index.entry(word.clone()).or_insert_with(|| {
                    words.push(word);
                    (words.len() - 1) as u32
                });
                occurrences.push(id);
            }
        }
        let is_content: Vec<bool> = words
            .iter()
            .map(|w| !bm25::query_terms(w).is_empty())
            .collect();
        let content = occurrences
            .iter()
            .copied()
            .filter(|&id| is_content[id as usize])
            .collect();
        Self {
            words,
            occurrences,
            content,
        }
    }

    /// Distinct words.
    pub fn distinct(&self) -> usize {
        self.words.len()
    }

    /// Word occurrences in the source text.
    pub fn len(&self) -> usize {
        self.occurrences.len()
    }

    /// Whether the source text had no words.
    pub fn is_empty(&self) -> bool {
        self.occurrences.is_empty()
    }

    /// A word, with its frequency in the source text.
    pub fn sample(&self, rng: &mut Rng) -> &str {
        &self.words[self.occurrences[rng.below(self.occurrences.len())] as usize]
    }

    /// `len` consecutive words of the source text from a random place (wrapping around at
    /// the end), joined with spaces: real prose, with its words clustered by topic.
    pub fn window(&self, rng: &mut Rng, len: usize) -> Vec<&str> {
        let start = rng.below(self.occurrences.len());
        (0..len)
            .map(|i| {
                let id = self.occurrences[(start + i) % self.occurrences.len()];
                self.words[id as usize].as_str()
            })
            .collect()
    }

    /// A content word (not a stopword of retrieval), with its frequency in the source text.
    pub fn sample_content(&self, rng: &mut Rng) -> &str {
        &self.words[self.content[rng.below(self.content.len())] as usize]
    }
}

/// A static file server on `127.0.0.1` (stopped when dropped).
pub struct StaticSite {
    /// Where it listens.
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for StaticSite {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves the files of `dir` under `prefix` (e.g. `/book`, so `dir/index.html` is
/// `/book/index.html` and `/book/` too) on `127.0.0.1:0` with `tower_http`'s `ServeDir`.
///
/// Accepted connections get `TCP_NODELAY`, as production web servers set it (nginx's
/// `tcp_nodelay on` is the default): `ServeDir` writes the headers and the body separately,
/// and without it Nagle's algorithm holds the body back until the client's delayed ACK of
/// the headers, adding tens of milliseconds to every page.
pub async fn serve_dir(dir: &Path, prefix: &str) -> anyhow::Result<StaticSite> {
    use axum::serve::ListenerExt as _;

    let router = axum::Router::new().nest_service(prefix, tower_http::services::ServeDir::new(dir));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok(StaticSite { addr, task })
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Opens (creating and migrating) a SQLite store at `path`, exactly as the service does.
pub async fn bench_store(path: &Path) -> anyhow::Result<SqliteStore> {
    let store = SqliteStore::connect(&format!("sqlite://{}", path.display())).await?;
    store.migrate().await?;
    Ok(store)
}

/// Creates a verified user (`bench-{id}@example.com`, no password); returns its id.
pub async fn create_verified_user(store: &dyn Store) -> anyhow::Result<UserId> {
    let user_id = UserId::new();
    let email =
        Email::parse(&format!("bench-{user_id}@example.com")).map_err(anyhow::Error::msg)?;
    store
        .create_user(NewUser {
            id: user_id.clone(),
            email,
            name: "Bench".into(),
            password_hash: None,
            company: None,
            country: None,
            phone: None,
            email_verified: true,
            now: Utc::now(),
        })
        .await?;
    Ok(user_id)
}

/// Creates a verified user and one agent named `agent_name`; returns `(user_id, agent_id)`.
pub async fn create_user_and_agent(
    store: &dyn Store,
    agent_name: &str,
) -> anyhow::Result<(UserId, AgentId)> {
    let user_id = create_verified_user(store).await?;
    let agent_id = create_agent(store, &user_id, agent_name).await?;
    Ok((user_id, agent_id))
}

/// Creates one more agent of `user_id`; returns its id.
pub async fn create_agent(
    store: &dyn Store,
    user_id: &UserId,
    name: &str,
) -> anyhow::Result<AgentId> {
    let now = Utc::now();
    let agent = AgentRecord {
        id: AgentId::new(),
        user_id: user_id.clone(),
        name: name.to_owned(),
        description: String::new(),
        system_prompt: String::new(),
        model: String::new(),
        status: AgentStatus::Active,
        created_at: now,
        updated_at: now,
        has_knowledge: false,
        has_tools: false,
    };
    ensure!(
        store.create_agent(&agent, u32::MAX).await?,
        "the agent was not created"
    );
    Ok(agent.id)
}

/// A complete chat message of `thread` at `at`, as the turn writer stores it: a reply
/// (`Role::Assistant`) carries a model, 120 prompt and 60 completion tokens and 900 ms of
/// latency; a user's message none of them.
pub fn message(thread: &ThreadId, role: Role, content: String, at: DateTime<Utc>) -> MessageRecord {
    let reply = role == Role::Assistant;
    MessageRecord {
        id: MessageId::new(),
        thread_id: thread.clone(),
        role,
        content,
        model: reply.then(|| "gpt-4o-mini".to_string()),
        prompt_tokens: reply.then_some(120),
        completion_tokens: reply.then_some(60),
        sources: None,
        latency_ms: reply.then_some(900),
        status: ReplyStatus::Complete,
        error: None,
        created_at: at,
        tool_calls: None,
        api_key_id: None,
    }
}

/// A pending uploaded document of `agent_id` named `name` (kind `file`) and its queued
/// `ingest` job, as the upload endpoint stores them.
pub fn file_document(
    user_id: &UserId,
    agent_id: &AgentId,
    name: &str,
    format: &str,
    bytes: u64,
) -> (DocumentRecord, JobRecord) {
    let now = Utc::now();
    let id = DocumentId::new();
    let doc = DocumentRecord::pending_file(
        id.clone(),
        agent_id,
        user_id,
        name.to_owned(),
        format,
        bytes,
        now,
    );
    let job = JobRecord::queued(JobKind::Ingest, &id, user_id, now);
    (doc, job)
}

/// A pending crawled-site document of `agent_id` (kind `url`) for `url` with the crawl
/// options `config` (JSON), and its queued `crawl` job, as the add-URL endpoint stores them.
pub fn url_document(
    user_id: &UserId,
    agent_id: &AgentId,
    url: &str,
    config: &str,
) -> (DocumentRecord, JobRecord) {
    let (mut doc, mut job) = file_document(user_id, agent_id, url, "", 0);
    doc.kind = DocumentSource::Url;
    doc.url = Some(url.to_owned());
    doc.format = None;
    doc.crawl_config = Some(config.to_owned());
    job.kind = JobKind::Crawl;
    (doc, job)
}

/// The service built in this process with the production `Application::build` on a
/// temporary `DATA_DIR` (real SQLite database, real job workers), serving on
/// `127.0.0.1:0`, with one verified account signed in.
pub struct Service {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The store the service uses (the same database file).
    pub store: Arc<dyn Store>,
    /// The service's knowledge base (its search indexes, embedder and vectors).
    pub knowledge: agentchat::knowledge::Knowledge,
    /// An access token of the account.
    pub token: String,
    /// The `DATA_DIR` of the service.
    pub data_dir: PathBuf,
    /// The `DATABASE_URL` of the service.
    pub database_url: String,
    task: JoinHandle<()>,
    dir: Option<tempfile::TempDir>,
}

impl Drop for Service {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The outcome of a crawl run through the HTTP API.
#[derive(Debug, Clone)]
pub struct ApiCrawl {
    /// The crawled document.
    pub document_id: DocumentId,
    /// Its crawl job.
    pub job_id: JobId,
    /// From `POST .../knowledge/url` to the job reported `succeeded`.
    pub elapsed: Duration,
    /// Pages indexed (the document's `pages`).
    pub pages: u64,
    /// Chunks stored (the document's `chunks`).
    pub chunks: u64,
    /// Bytes of page text (the document's `bytes`).
    pub bytes: u64,
}

/// The local embedding model's folder: `given`, else [`test_support::embedding_model_path`],
/// when it holds a `config.json`; `None` otherwise.
pub fn embedding_model_path(given: Option<&Path>) -> Option<PathBuf> {
    let path = given.map_or_else(test_support::embedding_model_path, Path::to_path_buf);
    path.join("config.json").is_file().then_some(path)
}

/// Sets `EMBEDDING_MODEL=local` on the model folder `path`.
pub fn use_local_embeddings(config: &mut Config, path: &Path) {
    config.providers.embedding_model = Some("local".to_string());
    config.providers.embedding_model_path = Some(path.to_path_buf());
}

impl Service {
    /// Waits until every chunk of `document_id` has a vector of `model`; returns how long it
    /// waited. Errors: not within `timeout`, or the store's.
    pub async fn wait_for_embeddings(
        &self,
        model: &str,
        document_id: &DocumentId,
        timeout: Duration,
    ) -> anyhow::Result<Duration> {
        let started = Instant::now();
        loop {
            let missing = self
                .store
                .chunks_without_embedding(model, Some(document_id), 1)
                .await?;
            if missing.is_empty() {
                return Ok(started.elapsed());
            }
            ensure!(
                started.elapsed() < timeout,
                "chunks still lack a vector of {model} after {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Builds and starts the service; `allowed_private_hosts` are the `host:port` entries
    /// the crawler may reach on private addresses (the loopback book server). Every plan's
    /// request budget and agent limit is set out of reach.
    pub async fn start(allowed_private_hosts: Vec<String>) -> anyhow::Result<Self> {
        Self::start_with(allowed_private_hosts, |_| {}).await
    }

    /// [`Service::start`] with `configure` applied to the configuration last (an embedding
    /// model, say).
    pub async fn start_with(
        allowed_private_hosts: Vec<String>,
        configure: impl FnOnce(&mut Config),
    ) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("agentchat-kb-").tempdir()?;
        let data_dir = dir.path().join("data");
        let mut config = Config::with_data_dir(data_dir.clone(), "127.0.0.1:0".parse()?)?;
        config.limits.rate_limits = [1_000_000_000; 4];
        config.limits.agent_limits = [1_000_000_000; 4];
        config.outbound.allowed_private_hosts = allowed_private_hosts;
        config.knowledge.extraction.program = service::extraction_program()?;
        configure(&mut config);
        let database_url = config.storage.database_url.clone();
        let app = Application::build(config).await?;
        let addr = app.addr();
        let state = app.state.clone();
        let task = tokio::spawn(async move {
            let _ = app.run_until_stopped(std::future::pending()).await;
        });
        let base = format!("http://{addr}");
        let (email, user_id) = service::signup(&base).await?;
        state
            .store
            .mark_email_verified(&user_id, Utc::now())
            .await?;
        let token = service::login(&base, &email).await?;
        Ok(Self {
            addr,
            store: state.store.clone(),
            knowledge: state.knowledge.clone(),
            token,
            data_dir,
            database_url,
            task,
            dir: Some(dir),
        })
    }

    /// Keeps the data folder after the run (for reproducing with the `agentchat` command).
    pub fn keep_data(&mut self) {
        if let Some(dir) = self.dir.take() {
            let _ = dir.keep();
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Creates an agent through the API; returns its id.
    pub async fn create_agent(&self, name: &str) -> anyhow::Result<AgentId> {
        api_create_agent(&self.base_url(), &self.token, name).await
    }

    /// Adds `url` to the agent's knowledge base and waits for the crawl ([`api_crawl`]).
    pub async fn crawl(
        &self,
        agent_id: &AgentId,
        url: &str,
        crawl_depth: u8,
        max_pages: u32,
        timeout: Duration,
    ) -> anyhow::Result<ApiCrawl> {
        api_crawl(
            &self.base_url(),
            &self.token,
            agent_id,
            url,
            crawl_depth,
            max_pages,
            timeout,
        )
        .await
    }
}

/// Creates an agent through the API of the service at `base` (`http://host:port`) with the
/// access token `token`; returns its id.
pub async fn api_create_agent(base: &str, token: &str, name: &str) -> anyhow::Result<AgentId> {
    let response = service::http_client()?
        .post(format!("{base}/api/agents"))
        .bearer_auth(token)
        .json(&json!({"name": name, "systemPrompt": "Answer from the documents."}))
        .send()
        .await?;
    let status = response.status();
    let body: Value = response.json().await?;
    ensure!(
        status.as_u16() == 201,
        "creating an agent answered {status}: {body}"
    );
    body.pointer("/agent/id")
        .and_then(Value::as_str)
        .map(AgentId::from)
        .context("the created agent has an id")
}

/// Adds `url` to the agent's knowledge base on the service at `base` (`POST
/// /api/agents/{id}/knowledge/url` with `crawlDepth` and `maxPages`), then polls `GET
/// /api/jobs/{jobId}` every 10 ms until the job has succeeded (an error when it fails or
/// `timeout` passes).
pub async fn api_crawl(
    base: &str,
    token: &str,
    agent_id: &AgentId,
    url: &str,
    crawl_depth: u8,
    max_pages: u32,
    timeout: Duration,
) -> anyhow::Result<ApiCrawl> {
    let client = service::http_client()?;
    let started = Instant::now();
    let response = client
        .post(format!("{base}/api/agents/{agent_id}/knowledge/url"))
        .bearer_auth(token)
        .json(&json!({"url": url, "config": {"crawlDepth": crawl_depth, "maxPages": max_pages}}))
        .send()
        .await?;
    let code = response.status();
    let body: Value = response.json().await?;
    ensure!(
        code.as_u16() == 202,
        "adding the URL answered {code}: {body}"
    );
    let job_id = JobId::from(body["jobId"].as_str().context("no jobId")?);
    let document_id = DocumentId::from(body["documentId"].as_str().context("no documentId")?);
    let job = loop {
        let job: Value = client
            .get(format!("{base}/api/jobs/{job_id}"))
            .bearer_auth(token)
            .send()
            .await?
            .json()
            .await?;
        let job = job["job"].clone();
        match serde_json::from_value::<JobStatus>(job["status"].clone()).ok() {
            Some(JobStatus::Succeeded) => break job,
            Some(JobStatus::Failed) => bail!("the crawl job failed: {job}"),
            Some(JobStatus::Queued | JobStatus::Running) | None if started.elapsed() > timeout => {
                bail!("the crawl job did not finish within {timeout:?}: {job}")
            }
            Some(JobStatus::Queued | JobStatus::Running) | None => {
                tokio::time::sleep(Duration::from_millis(10)).await
            }
        }
    };
    let elapsed = started.elapsed();
    let doc: Value = client
        .get(format!(
            "{base}/api/agents/{agent_id}/knowledge/{document_id}"
        ))
        .bearer_auth(token)
        .send()
        .await?
        .json()
        .await?;
    let doc = &doc["document"];
    ensure!(
        doc["status"] == DocumentStatus::Indexed.as_str(),
        "the job {job} succeeded but the document is {doc}"
    );
    let number = |v: &Value| v.as_u64().unwrap_or(0);
    Ok(ApiCrawl {
        document_id,
        job_id,
        elapsed,
        pages: number(&doc["pages"]),
        chunks: number(&doc["chunks"]),
        bytes: number(&doc["bytes"]),
    })
}

impl Service {
    /// Refreshes the crawled document (`POST .../knowledge/{documentId}/refresh`), polls its
    /// job every 10 ms until it has succeeded, and answers the time with the document's
    /// `refreshCounts` (an error when the job fails or `timeout` passes).
    pub async fn refresh(
        &self,
        agent_id: &AgentId,
        document_id: &DocumentId,
        timeout: Duration,
    ) -> anyhow::Result<(Duration, Value)> {
        let client = service::http_client()?;
        let base = self.base_url();
        let started = Instant::now();
        let response = client
            .post(format!(
                "{base}/api/agents/{agent_id}/knowledge/{document_id}/refresh"
            ))
            .bearer_auth(&self.token)
            .json(&json!({}))
            .send()
            .await?;
        let code = response.status();
        let body: Value = response.json().await?;
        ensure!(code.as_u16() == 202, "refreshing answered {code}: {body}");
        let job_id = body["jobId"].as_str().context("no jobId")?.to_owned();
        loop {
            let job: Value = client
                .get(format!("{base}/api/jobs/{job_id}"))
                .bearer_auth(&self.token)
                .send()
                .await?
                .json()
                .await?;
            match job["job"]["status"].as_str() {
                Some("succeeded") => break,
                Some("failed") => bail!("the refresh job failed: {job}"),
                _ if started.elapsed() > timeout => {
                    bail!("the refresh did not finish within {timeout:?}: {job}")
                }
                _ => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
        let elapsed = started.elapsed();
        let doc: Value = client
            .get(format!(
                "{base}/api/agents/{agent_id}/knowledge/{document_id}"
            ))
            .bearer_auth(&self.token)
            .send()
            .await?
            .json()
            .await?;
        Ok((elapsed, doc["document"]["refreshCounts"].clone()))
    }
}

/// Bytes as MiB with one decimal.
pub fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

/// `PASS` or `FAIL`.
pub fn verdict(pass: bool) -> &'static str {
    if pass {
        "PASS"
    } else {
        "FAIL"
    }
}
