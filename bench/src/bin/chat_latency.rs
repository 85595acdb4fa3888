//! # `chat_latency`: the latency the service adds to a model provider's
//!
//! Starts a mock model provider in this process (it answers every request after a fixed
//! `--delay-ms`, 20 ms by default, and speaks the OpenAI Chat Completions API) and the
//! release `agentchat` binary as a child process pointed at it (see [`bench::service`]), then
//! sends the same chat message two ways under the same load:
//!
//! - `direct`: `POST /v1/chat/completions` straight to the mock, authenticated with the
//!   mock's API key — what a client calling the provider itself would see;
//! - `service`: `POST /api/agents/{id}/chat` to the service with an access token: the `/api`
//!   middleware (JWT check, session lookup, rate limit with budgets of 10^9 per minute so it
//!   is consulted but never refuses), the thread and both messages persisted to SQLite (new
//!   thread per chat), the upstream call to the mock and the reply.
//!
//! The **added latency** is the service's percentile minus the direct path's percentile at
//! the same load (a difference of percentiles: requests of the two runs cannot be paired).
//!
//! ## Scenarios
//!
//! | scenario      | reply                  | load                                                     |
//! |---------------|------------------------|----------------------------------------------------------|
//! | `json-c1`     | JSON                   | 1 client, requests back to back (closed loop)            |
//! | `json-cn`     | JSON                   | `--concurrency` clients (200), back to back              |
//! | `json-rate`   | JSON                   | `--rate` requests/s (500) at fixed times (open loop)     |
//! | `stream-c1`   | server-sent events     | 1 client, back to back                                   |
//! | `stream-rate` | server-sent events     | `--rate` requests/s at fixed times                       |
//!
//! JSON latency runs from sending the request to having read the whole reply. For streams,
//! the time to the first chunk runs to the first event carrying non-empty reply text (the
//! mock's first frame, the assistant role with empty content, does not count), and the full
//! time to `data: [DONE]`. Every reply is checked: status 200 and the exact expected text
//! (`Echo: <message>`); anything else counts as an error.
//!
//! In the open-loop scenarios a dedicated thread schedules request `i` at
//! `start + i / rate` and latency is measured **from that scheduled time**, so a stall that
//! delays later requests is charged to them (no coordinated omission). Requests take a free
//! keep-alive connection from a pool, or open a new one when all are busy.
//!
//! Each scenario runs `--warmup` seconds unmeasured, then `--seconds` measured, first on the
//! direct path, then on the service; a request that takes longer than 10 s counts as an
//! error. Everything runs on 127.0.0.1. The mock and the load generator share this process;
//! the service runs in its own, and its CPU time per request (from `/proc/<pid>/stat`) is
//! reported with its results, then broken down by thread group (`tokio-rt-worker`,
//! `sqlx-sqlite-wor`…) into user time, system time and context switches per request (from
//! `/proc/<pid>/task/*`).
//!
//! ## Backends and instances
//!
//! By default the service runs on SQLite with its rate limits in process. With
//! `--database-url postgres://...` and `--redis-url redis://...` ([`bench::backend`]) it runs
//! on a scratch PostgreSQL database with rate limits in Redis, as several instances do; with
//! `--instances N` as well, N processes share them and the load spreads over them in turn
//! (closed loop: client `i` talks to instance `i % N`; open loop: request `i` goes to
//! instance `i % N`), and the service CPU reported is that of all N processes.
//!
//! `--metrics` sets `METRICS_TOKEN` in the service's environment, which turns its
//! Prometheus metrics on (README § Metrics): the chat path's cost with them recorded.
//!
//! `--embed-crawl` runs the service with the built-in embedding model
//! (`EMBEDDING_MODEL=local`, `EMBEDDING_MODEL_PATH` from `--embedding-model`, default the
//! model scripts/setup.sh installs) and, before each scenario's service run, crawls *The Rust
//! Programming Language* (served on loopback, `/book/toc.html`, `crawlDepth` 5, `maxPages`
//! 1000) into another agent through the HTTP API and waits for the crawl job: the measured
//! run then happens while the background catch-up embeds the book's chunks (its CPU shows
//! as the `embed-*` thread group). Compare with a run without the option: chat latency with
//! and without a crawl being embedded.
//!
//! ## Diagnostics (`--diagnose`)
//!
//! Two more measurements build the service in this process with the production
//! `Application::build` (same configuration as above):
//!
//! - **TCP_NODELAY**: one client's JSON and streamed chats against the service served as it
//!   serves itself (`Application::run_until_stopped`, which has set `TCP_NODELAY` on
//!   accepted sockets since this check found Nagle's algorithm delaying replies), and
//!   against the same service (`agentchat::startup::service` with
//!   `agentchat::startup::serve_http`) on a listener the benchmark sets `TCP_NODELAY` on
//!   itself: the two rows should now agree;
//! - **persistence**: the store calls one chat makes — agent lookup, new thread, history, user
//!   message, assistant message — timed back to back on the service's SQLite store, with the
//!   CPU time and context switches of the SQLite worker threads.
//!
//! ```text
//! cargo build --release -p bench -p server --bin agentchat
//! target/release/chat_latency --delay-ms 20 --seconds 10 --rate 500 --concurrency 200 --diagnose
//! ```

use std::{
    collections::{BTreeMap, VecDeque},
    fmt::Write as _,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{bail, ensure, Context};
use bench::{
    backend::{Backend, BackendArgs},
    load::{
        self, connect, cpu_time, histogram, lock, ms, ms_delta, record, summary, thread_totals,
        Conn, RequestTemplate, Schedule, SseEvent, SseParser, ThreadTotals,
    },
    service::{self, Account, ServiceOptions, ServiceProcess},
};
use clap::{Parser, ValueEnum};
use hdrhistogram::Histogram;
use http_body_util::BodyExt;
use mock_provider::{MockConfig, MockProvider};
use serde_json::{json, Value};
use tokio::task::JoinSet;

/// The model of the benchmark agent (offered by the mock).
const MODEL: &str = "gpt-4o-mini";
/// The key the mock requires.
const MOCK_KEY: &str = "bench-mock-key";
/// A request slower than this counts as an error (its connection is dropped).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Keep-alive connections opened before an open-loop run.
const OPEN_LOOP_PREWARM: usize = 64;
/// How many error descriptions are kept per run.
const ERRORS_SHOWN: usize = 3;

/// Measures the latency the service adds over calling the mock provider directly (JSON and
/// streamed replies, 1 and many clients, and a fixed request rate). See the documentation at
/// the top of this binary's source for the method.
#[derive(Parser, Debug)]
#[command(name = "chat_latency", version, about, long_about = None)]
struct Args {
    /// Milliseconds the mock waits before answering each request.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    delay_ms: u64,
    /// Seconds each run is measured.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=300))]
    seconds: u64,
    /// Seconds of unmeasured load before each run.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=60))]
    warmup: u64,
    /// Clients of the `json-cn` scenario.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(2..=2000))]
    concurrency: u64,
    /// Requests per second of the open-loop scenarios.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=20_000))]
    rate: u64,
    /// Words in the chat message after `Bench` (the reply is `Echo: ` and the message, one
    /// chunk per word).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u64).range(1..=2000))]
    words: u64,
    /// Scenarios to run, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "json-c1,json-cn,json-rate,stream-c1,stream-rate"
    )]
    scenarios: Vec<ScenarioName>,
    /// The `agentchat` binary (default: `target/release/agentchat` of this workspace).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// Afterwards, two diagnostics with the service built in this process. (1) It is served
    /// twice, as it serves itself (a plain listener) and with `TCP_NODELAY` set on every
    /// accepted connection (same router), and one client's JSON and streamed chats are timed
    /// on each: what Nagle's algorithm on the service's sockets costs. (2) The store calls a
    /// chat makes (agent lookup, new thread, history, two messages) are timed back to back on
    /// its SQLite store: what persistence costs one chat.
    #[arg(long)]
    diagnose: bool,
    /// Service instances, all on the one `--database-url` (and `--redis-url`): requests are
    /// spread over them in turn, as a load balancer would (more than one needs PostgreSQL).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=8))]
    instances: u64,
    /// Turn the service's Prometheus metrics on (`METRICS_TOKEN` set, README § Metrics):
    /// every request, chat and stream is then recorded; without it nothing is.
    #[arg(long)]
    metrics: bool,
    /// Run the service with the built-in embedding model and crawl the Rust book into
    /// another agent before each service run, so that its chunks are embedded during it.
    #[arg(long)]
    embed_crawl: bool,
    /// The sentence-transformers folder of `--embed-crawl` (default: the test model
    /// scripts/setup.sh installs).
    #[arg(long)]
    embedding_model: Option<PathBuf>,
    /// The store and shared state of the service (default: SQLite, limits in process); see
    /// [`bench::backend`].
    #[command(flatten)]
    backend: BackendArgs,
}

/// The bearer token of `/metrics` when `--metrics` is given (never scraped here: recording
/// is what costs the chat path).
const METRICS_TOKEN: &str = "bench-metrics-token-0123456789";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ScenarioName {
    JsonC1,
    JsonCn,
    JsonRate,
    StreamC1,
    StreamRate,
}

/// Whether the reply is one JSON document or a stream of server-sent events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Json,
    Stream,
}

/// How requests are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Load {
    /// This many clients, each sending its next request when the previous reply is read.
    Closed(usize),
    /// This many requests per second at fixed times, whatever the replies.
    Open(u64),
}

impl Load {
    fn label(self) -> String {
        match self {
            Self::Closed(1) => "1 client".to_owned(),
            Self::Closed(n) => format!("{n} clients"),
            Self::Open(rate) => format!("{rate} req/s (open loop)"),
        }
    }
}

/// Where requests go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    Direct,
    Service,
}

impl Path {
    fn label(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Service => "service",
        }
    }
}

/// A request and how to check its reply.
#[derive(Debug, Clone)]
struct Target {
    template: RequestTemplate,
    kind: Kind,
    path: Path,
    /// The reply text expected.
    expected: Arc<str>,
    /// The expected text as a JSON string literal, searched for in JSON replies.
    expected_json: Arc<[u8]>,
}

/// The timings of one successful request.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// JSON: the whole reply; streams: the first chunk of text.
    first: Duration,
    /// The whole reply.
    full: Duration,
}

/// Sends one request on `conn` and reads and checks the whole reply. Times run from `start`.
async fn exchange(conn: &mut Conn, target: &Target, start: Instant) -> anyhow::Result<Sample> {
    conn.ready().await?;
    let response = conn.send_request(target.template.request()).await?;
    let status = response.status();
    let mut body = response.into_body();
    if status != hyper::StatusCode::OK {
        let bytes = body.collect().await?.to_bytes();
        bail!("status {status}: {}", String::from_utf8_lossy(&bytes));
    }
    match target.kind {
        Kind::Json => {
            let bytes = body.collect().await?.to_bytes();
            let full = start.elapsed();
            ensure!(
                contains(&bytes, &target.expected_json),
                "unexpected reply: {}",
                String::from_utf8_lossy(&bytes)
            );
            Ok(Sample { first: full, full })
        }
        Kind::Stream => {
            let mut parser = SseParser::default();
            let mut text = String::new();
            let mut first = None;
            let mut done = false;
            while let Some(frame) = body.frame().await {
                let frame = frame?;
                let Some(bytes) = frame.data_ref() else {
                    continue;
                };
                for event in parser.push(bytes) {
                    let SseEvent::Data(data) = event else {
                        continue;
                    };
                    ensure!(!done, "an event after [DONE]: {data}");
                    if data == "[DONE]" {
                        done = true;
                        continue;
                    }
                    let chunk = chunk_text(target.path, &data)?;
                    if !chunk.is_empty() && first.is_none() {
                        first = Some(start.elapsed());
                    }
                    text.push_str(&chunk);
                }
            }
            let full = start.elapsed();
            ensure!(done, "the stream ended without data: [DONE]");
            ensure!(
                text == *target.expected,
                "unexpected streamed text: {text:?}"
            );
            Ok(Sample {
                first: first.context("the stream carried no text")?,
                full,
            })
        }
    }
}

/// The text of one streamed event: the mock's `choices[0].delta.content`, the service's
/// `chunk`; an error event fails.
fn chunk_text(path: Path, data: &str) -> anyhow::Result<String> {
    let event: Value =
        serde_json::from_str(data).with_context(|| format!("an event is not JSON: {data}"))?;
    let text = match path {
        Path::Direct => event.pointer("/choices/0/delta/content"),
        Path::Service => {
            ensure!(event.get("error").is_none(), "an error event: {data}");
            event.get("chunk")
        }
    };
    Ok(text.and_then(Value::as_str).unwrap_or_default().to_owned())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len().max(1))
        .any(|window| window == needle)
}

/// What one run measured.
struct RunResult {
    first: Histogram<u64>,
    full: Histogram<u64>,
    ok: u64,
    errors: u64,
    error_samples: Vec<String>,
    elapsed: Duration,
    /// Connections opened during the run (open loop: beyond the pre-opened ones).
    connections_opened: u64,
    /// Open loop: the latest a request was handed to a task after its scheduled time.
    max_dispatch_lag: Duration,
    /// CPU time of the service process during the run.
    service_cpu: Option<Duration>,
    /// CPU time of this process (load generator and mock) during the run.
    bench_cpu: Duration,
    /// The service's threads by name: CPU time and context switches during the run.
    service_threads: BTreeMap<String, ThreadTotals>,
}

impl RunResult {
    fn new() -> Self {
        Self {
            first: histogram(),
            full: histogram(),
            ok: 0,
            errors: 0,
            error_samples: Vec::new(),
            elapsed: Duration::ZERO,
            connections_opened: 0,
            max_dispatch_lag: Duration::ZERO,
            service_cpu: None,
            bench_cpu: Duration::ZERO,
            service_threads: BTreeMap::new(),
        }
    }

    fn add(&mut self, outcome: anyhow::Result<Sample>) {
        match outcome {
            Ok(sample) => {
                self.ok += 1;
                record(&mut self.first, sample.first);
                record(&mut self.full, sample.full);
            }
            Err(error) => self.error(format!("{error:#}")),
        }
    }

    fn error(&mut self, text: String) {
        self.errors += 1;
        if self.error_samples.len() < ERRORS_SHOWN {
            self.error_samples.push(text);
        }
    }

    fn merge(&mut self, other: Self) {
        self.first.add(&other.first).expect("same histogram bounds");
        self.full.add(&other.full).expect("same histogram bounds");
        self.ok += other.ok;
        self.errors += other.errors;
        self.connections_opened += other.connections_opened;
        for text in other.error_samples {
            if self.error_samples.len() < ERRORS_SHOWN {
                self.error_samples.push(text);
            }
        }
    }

    fn rate(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// One request with the timeout applied.
async fn timed_exchange(
    conn: &mut Conn,
    target: &Target,
    start: Instant,
) -> anyhow::Result<Sample> {
    match tokio::time::timeout(REQUEST_TIMEOUT, exchange(conn, target, start)).await {
        Ok(outcome) => outcome,
        Err(_) => bail!("no complete reply within {REQUEST_TIMEOUT:?}"),
    }
}

/// `clients` clients send requests back to back for `duration`; client `i` talks to
/// `targets[i % targets.len()]` (one target per service instance).
async fn closed_loop(
    targets: &[Target],
    clients: usize,
    duration: Duration,
) -> anyhow::Result<RunResult> {
    let mut conns = Vec::with_capacity(clients);
    for i in 0..clients {
        let target = &targets[i % targets.len()];
        conns.push((target.clone(), connect(target.template.addr).await?));
    }
    let started = Instant::now();
    let deadline = started + duration;
    let mut workers = JoinSet::new();
    for (target, mut conn) in conns {
        workers.spawn(async move {
            let mut result = RunResult::new();
            while Instant::now() < deadline {
                let start = Instant::now();
                let outcome = timed_exchange(&mut conn, &target, start).await;
                let failed = outcome.is_err();
                result.add(outcome);
                if failed {
                    // The connection may be unusable: start over on a new one.
                    match connect(target.template.addr).await {
                        Ok(new) => {
                            conn = new;
                            result.connections_opened += 1;
                        }
                        Err(error) => {
                            result.error(format!("reconnecting: {error:#}"));
                            break;
                        }
                    }
                }
            }
            result
        });
    }
    let mut total = RunResult::new();
    while let Some(worker) = workers.join_next().await {
        total.merge(worker?);
    }
    total.elapsed = started.elapsed();
    Ok(total)
}

/// Requests at `rate` per second for `duration`, each timed from its scheduled send time;
/// request `i` goes to `targets[i % targets.len()]` (one target per service instance), on a
/// keep-alive connection of that target's pool.
async fn open_loop(targets: &[Target], rate: u64, duration: Duration) -> anyhow::Result<RunResult> {
    let mut pools: Vec<Arc<Mutex<VecDeque<Conn>>>> = Vec::with_capacity(targets.len());
    for target in targets {
        let pool = Arc::new(Mutex::new(VecDeque::new()));
        for _ in 0..OPEN_LOOP_PREWARM.div_ceil(targets.len()) {
            let conn = connect(target.template.addr).await?;
            lock(&pool).push_back(conn);
        }
        pools.push(pool);
    }
    let results = Arc::new(Mutex::new(RunResult::new()));

    let mut schedule = Schedule::start(rate, duration);
    let started = schedule.started;

    let mut tasks = JoinSet::new();
    let mut max_lag = Duration::ZERO;
    let mut next = 0usize;
    while let Some(scheduled) = schedule.times.recv().await {
        max_lag = max_lag.max(scheduled.elapsed());
        let instance = next % targets.len();
        next = next.wrapping_add(1);
        let pool = Arc::clone(&pools[instance]);
        let results = Arc::clone(&results);
        let target = targets[instance].clone();
        tasks.spawn(async move {
            let pooled = lock(&pool).pop_front();
            let (mut conn, opened) = match pooled {
                Some(conn) => (conn, false),
                None => match connect(target.template.addr).await {
                    Ok(conn) => (conn, true),
                    Err(error) => {
                        lock(&results).error(format!("connecting: {error:#}"));
                        return;
                    }
                },
            };
            let outcome = timed_exchange(&mut conn, &target, scheduled).await;
            let ok = outcome.is_ok();
            {
                let mut results = lock(&results);
                results.add(outcome);
                results.connections_opened += u64::from(opened);
            }
            if ok {
                lock(&pool).push_back(conn);
            }
        });
        // Reap finished tasks as we go so the set stays small.
        while tasks.try_join_next().is_some() {}
    }
    schedule.finish()?;
    while tasks.join_next().await.is_some() {}
    let elapsed = started.elapsed();
    let mut result = std::mem::replace(&mut *lock(&results), RunResult::new());
    result.elapsed = elapsed;
    result.max_dispatch_lag = max_lag;
    Ok(result)
}

async fn run_load(targets: &[Target], load: Load, duration: Duration) -> anyhow::Result<RunResult> {
    match load {
        Load::Closed(clients) => closed_loop(targets, clients, duration).await,
        Load::Open(rate) => open_loop(targets, rate, duration).await,
    }
}

/// The CPU time of all `pids` together.
fn total_cpu(pids: &[u32]) -> anyhow::Result<Duration> {
    pids.iter().map(|&pid| cpu_time(pid)).sum()
}

/// The threads of all `pids` by name, summed over the processes.
fn total_threads(pids: &[u32]) -> anyhow::Result<BTreeMap<String, ThreadTotals>> {
    let mut totals: BTreeMap<String, ThreadTotals> = BTreeMap::new();
    for &pid in pids {
        for (name, t) in thread_totals(pid)? {
            let sum = totals.entry(name).or_default();
            sum.threads += t.threads;
            sum.user += t.user;
            sum.system += t.system;
            sum.voluntary_switches += t.voluntary_switches;
            sum.involuntary_switches += t.involuntary_switches;
        }
    }
    Ok(totals)
}

/// A warm-up, then a measured run with the CPU times of the benchmark and of the service's
/// processes (`service_pids`, one per instance).
async fn measure(
    targets: &[Target],
    load: Load,
    args: &Args,
    service_pids: &[u32],
) -> anyhow::Result<RunResult> {
    let path = targets.first().context("at least one target")?.path;
    if args.warmup > 0 {
        run_load(targets, load, Duration::from_secs(args.warmup)).await?;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let self_pid = std::process::id();
    let service_before = total_cpu(service_pids)?;
    let threads_before = total_threads(service_pids)?;
    let bench_before = cpu_time(self_pid)?;
    let mut result = run_load(targets, load, Duration::from_secs(args.seconds)).await?;
    let service_cpu = total_cpu(service_pids)?.saturating_sub(service_before);
    let threads_after = total_threads(service_pids)?;
    result.bench_cpu = cpu_time(self_pid)?.saturating_sub(bench_before);
    if path == Path::Service {
        result.service_cpu = Some(service_cpu);
        result.service_threads = threads_after
            .iter()
            .map(|(name, after)| {
                let before = threads_before.get(name).copied().unwrap_or_default();
                (name.clone(), after.since(&before))
            })
            .collect();
    }
    Ok(result)
}

/// The four request templates.
struct Templates {
    message: String,
    expected: String,
}

impl Templates {
    /// The request to the mock.
    fn direct(&self, kind: Kind, mock: &MockProvider) -> anyhow::Result<Target> {
        let stream = kind == Kind::Stream;
        let mut body = json!({
            "model": MODEL,
            "messages": [{"role": "user", "content": self.message}],
            "stream": stream,
        });
        if stream {
            // As the service's client library asks for it upstream.
            body["stream_options"] = json!({"include_usage": true});
        }
        let template =
            RequestTemplate::post_json(mock.addr, "/v1/chat/completions", MOCK_KEY, &body)?;
        self.target(template, kind, Path::Direct)
    }

    /// The request to the service at `addr`.
    fn service(
        &self,
        kind: Kind,
        addr: std::net::SocketAddr,
        account: &Account,
    ) -> anyhow::Result<Target> {
        let template = RequestTemplate::post_json(
            addr,
            &format!("/api/agents/{}/chat", account.agent_id),
            &account.token,
            &json!({"message": self.message, "stream": kind == Kind::Stream}),
        )?;
        self.target(template, kind, Path::Service)
    }

    fn target(&self, template: RequestTemplate, kind: Kind, path: Path) -> anyhow::Result<Target> {
        Ok(Target {
            template,
            kind,
            path,
            expected: Arc::from(self.expected.as_str()),
            expected_json: Arc::from(serde_json::to_vec(&self.expected)?),
        })
    }
}

/// One table row per path plus the difference.
struct ScenarioResult {
    name: ScenarioName,
    kind: Kind,
    load: Load,
    direct: RunResult,
    service: RunResult,
}

fn per_request(cpu: Duration, requests: u64) -> String {
    if requests == 0 {
        return "–".to_owned();
    }
    format!("{:.0} µs", cpu.as_secs_f64() * 1e6 / requests as f64)
}

fn row(out: &mut String, load: &str, path: &str, run: &RunResult, histogram: &Histogram<u64>) {
    let [p50, p90, p99, p999, max] = summary(histogram);
    let _ = writeln!(
        out,
        "| {load} | {path} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} |",
        run.ok,
        run.rate(),
        run.errors,
        ms(p50),
        ms(p90),
        ms(p99),
        ms(p999),
        ms(max),
        run.service_cpu
            .map_or_else(|| "–".to_owned(), |cpu| per_request(cpu, run.ok)),
        per_request(run.bench_cpu, run.ok),
    );
}

fn added_row(out: &mut String, direct: &Histogram<u64>, service: &Histogram<u64>) -> [i64; 5] {
    let d = summary(direct);
    let s = summary(service);
    let mut delta = [0i64; 5];
    for (slot, (s, d)) in delta.iter_mut().zip(s.iter().zip(d.iter())) {
        *slot = *s as i64 - *d as i64;
    }
    let _ = writeln!(
        out,
        "| | **added** | | | | **{}** | {} | **{}** | {} | {} | | |",
        ms_delta(delta[0]),
        ms_delta(delta[1]),
        ms_delta(delta[2]),
        ms_delta(delta[3]),
        ms_delta(delta[4]),
    );
    delta
}

const HEADER: &str = "| load | path | requests | req/s | errors | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | service CPU/req | bench CPU/req |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";

fn report(args: &Args, results: &[ScenarioResult], templates: &Templates, backend: &str) -> String {
    let mut out = String::new();
    let instances = match args.instances {
        1 => "one instance".to_owned(),
        n => format!("{n} instances, requests spread over them in turn"),
    };
    let _ = writeln!(out, "Service on {backend}, {instances}.\n");
    let _ = writeln!(
        out,
        "Mock delay {} ms; message `Bench word1 … word{}` ({} bytes), reply `Echo: ` and the message in {} chunks; {} s measured per run after {} s of warm-up.\n",
        args.delay_ms,
        args.words,
        templates.message.len(),
        args.words + 2,
        args.seconds,
        args.warmup
    );
    let mut verdicts = Vec::new();
    for kind in [Kind::Json, Kind::Stream] {
        let rows: Vec<&ScenarioResult> = results.iter().filter(|r| r.kind == kind).collect();
        if rows.is_empty() {
            continue;
        }
        match kind {
            Kind::Json => {
                let _ = writeln!(out, "JSON replies — latency from sending the request (open loop: from its scheduled time) to the whole reply read:\n");
            }
            Kind::Stream => {
                let _ = writeln!(out, "Streamed replies — time to the first chunk of text:\n");
            }
        }
        let _ = writeln!(out, "{HEADER}");
        for &result in &rows {
            let label = result.load.label();
            row(
                &mut out,
                &label,
                "direct",
                &result.direct,
                &result.direct.first,
            );
            row(
                &mut out,
                "",
                "service",
                &result.service,
                &result.service.first,
            );
            let delta = added_row(&mut out, &result.direct.first, &result.service.first);
            if result.name == ScenarioName::JsonRate {
                verdicts.push((result, delta));
            }
        }
        if kind == Kind::Stream {
            let _ = writeln!(out, "\nStreamed replies — time to `data: [DONE]`:\n");
            let _ = writeln!(out, "{HEADER}");
            for &result in &rows {
                let label = result.load.label();
                row(
                    &mut out,
                    &label,
                    "direct",
                    &result.direct,
                    &result.direct.full,
                );
                row(
                    &mut out,
                    "",
                    "service",
                    &result.service,
                    &result.service.full,
                );
                added_row(&mut out, &result.direct.full, &result.service.full);
            }
        }
        let _ = writeln!(out);
    }
    for result in results {
        for (path, run) in [
            (Path::Direct, &result.direct),
            (Path::Service, &result.service),
        ] {
            if run.connections_opened > 0 || !run.max_dispatch_lag.is_zero() {
                let _ = writeln!(
                    out,
                    "- {} {}: {} connections opened during the run, latest dispatch {:.2} ms after its scheduled time.",
                    result.load.label(),
                    path.label(),
                    run.connections_opened,
                    run.max_dispatch_lag.as_secs_f64() * 1e3
                );
            }
            for error in &run.error_samples {
                let _ = writeln!(
                    out,
                    "- {} {} error: {error}",
                    result.load.label(),
                    path.label()
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "\nWhere the service's CPU time goes, per request (threads grouped by name; `exited` is the CPU of threads that ended during the run):\n"
    );
    let _ = writeln!(
        out,
        "| load | reply | threads | user µs/req | system µs/req | voluntary switches/req | involuntary switches/req |\n|---|---|---|---:|---:|---:|---:|"
    );
    for result in results {
        let run = &result.service;
        let requests = run.ok.max(1) as f64;
        let per = |duration: Duration| duration.as_secs_f64() * 1e6 / requests;
        let mut listed = Duration::ZERO;
        let kind = match result.kind {
            Kind::Json => "JSON",
            Kind::Stream => "stream",
        };
        for (name, totals) in &run.service_threads {
            listed += totals.user + totals.system;
            if totals.user + totals.system < Duration::from_millis(20) {
                continue;
            }
            let _ = writeln!(
                out,
                "| {} | {kind} | {name} ×{} | {:.0} | {:.0} | {:.1} | {:.1} |",
                result.load.label(),
                totals.threads,
                per(totals.user),
                per(totals.system),
                totals.voluntary_switches as f64 / requests,
                totals.involuntary_switches as f64 / requests,
            );
        }
        if let Some(total) = run.service_cpu {
            let exited = total.saturating_sub(listed);
            if exited >= Duration::from_millis(20) {
                let _ = writeln!(
                    out,
                    "| {} | {kind} | exited | {:.0} (user + system) | | | |",
                    result.load.label(),
                    per(exited)
                );
            }
        }
    }
    for (result, delta) in verdicts {
        let achieved = result.service.rate();
        let rate_ok = achieved >= 0.98 * args.rate as f64 && result.service.errors == 0;
        let p50_ok = delta[0] <= 1_000;
        let p99_ok = delta[2] <= 5_000;
        let _ = writeln!(
            out,
            "\nTarget at {} chats/s (service achieved {:.0}/s, {} errors): added p50 {} ms ≤ 1 ms: **{}**; added p99 {} ms ≤ 5 ms: **{}**.",
            args.rate,
            achieved,
            result.service.errors,
            ms_delta(delta[0]),
            if p50_ok && rate_ok { "met" } else { "missed" },
            ms_delta(delta[2]),
            if p99_ok && rate_ok { "met" } else { "missed" },
        );
    }
    out
}

/// The service built in this process (`--nodelay-check`).
struct InProcess {
    addr: std::net::SocketAddr,
    account: Account,
    user_id: agentchat::ids::UserId,
    store: std::sync::Arc<dyn agentchat::store::Store>,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Builds the service in this process with the production [`Application::build`]; serves it
/// with [`Application::run_until_stopped`] (`nodelay` false: exactly as the binary does) or
/// serves the same service ([`agentchat::startup::service`]) on a listener on which the
/// benchmark itself sets `TCP_NODELAY` for every accepted connection.
async fn in_process_service(mock: &MockProvider, nodelay: bool) -> anyhow::Result<InProcess> {
    use agentchat::{config::Config, startup::Application};
    use axum::serve::ListenerExt as _;

    let dir = tempfile::Builder::new()
        .prefix("agentchat-bench-")
        .tempdir()?;
    let mut config = Config::with_data_dir(dir.path().join("data"), "127.0.0.1:0".parse()?)?;
    config.providers.openai_api_key = Some(secrecy::SecretString::from(MOCK_KEY));
    config.providers.openai_base_url = mock.base_url();
    config.limits.rate_limits = [1_000_000_000; 4];
    config.limits.agent_limits = [1_000_000_000; 4];
    let app = Application::build(config).await?;
    let state = app.state.clone();
    let (addr, task) = if nodelay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let service = agentchat::startup::service(state.clone());
        let limits = state.server.connection_limits();
        drop(app);
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            agentchat::startup::serve_http(listener, service, limits, std::future::pending()).await;
        });
        (addr, task)
    } else {
        let addr = app.addr();
        let task = tokio::spawn(async move {
            let _ = app.run_until_stopped(std::future::pending()).await;
        });
        (addr, task)
    };
    let base_url = format!("http://{addr}");
    let (email, user_id) = service::signup(&base_url).await?;
    state
        .store
        .mark_email_verified(&user_id, chrono::Utc::now())
        .await?;
    let account = service::finish_account(&base_url, &email, MODEL).await?;
    Ok(InProcess {
        addr,
        account,
        user_id,
        store: state.store.clone(),
        task,
        _dir: dir,
    })
}

/// `--nodelay-check`: one client, JSON and streamed, direct and through both in-process
/// services.
async fn nodelay_check(
    args: &Args,
    mock: &MockProvider,
    templates: &Templates,
) -> anyhow::Result<String> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nTCP_NODELAY check — the service built in this process, 1 client, {} s per run:\n",
        args.seconds
    );
    let _ = writeln!(
        out,
        "| served by | reply | requests | p50 ms | p90 ms | p99 ms | max ms |\n|---|---|---:|---:|---:|---:|---:|"
    );
    let pid = std::process::id();
    for kind in [Kind::Json, Kind::Stream] {
        let label = match kind {
            Kind::Json => "JSON (whole reply)",
            Kind::Stream => "stream (first chunk)",
        };
        let direct = templates.direct(kind, mock)?;
        let run = measure(std::slice::from_ref(&direct), Load::Closed(1), args, &[pid]).await?;
        nodelay_row(&mut out, "mock directly", label, &run);
        for (nodelay, name) in [
            (false, "service as shipped (`run_until_stopped`)"),
            (true, "same router, `TCP_NODELAY` on accepted sockets"),
        ] {
            let service = in_process_service(mock, nodelay).await?;
            let target = templates.service(kind, service.addr, &service.account)?;
            let run = measure(std::slice::from_ref(&target), Load::Closed(1), args, &[pid]).await?;
            nodelay_row(&mut out, name, label, &run);
            eprintln!("nodelay check: {name}, {label}: done");
        }
    }
    Ok(out)
}

/// `--diagnose`, part 2: the store calls of one chat, back to back, for `--seconds`.
async fn store_check(args: &Args, mock: &MockProvider, message: &str) -> anyhow::Result<String> {
    use agentchat::{
        domain::Role,
        ids::ThreadId,
        store::{chat::ReplyStatus, MessageRecord, ThreadRecord},
    };

    let service = in_process_service(mock, false).await?;
    let store = &service.store;
    let user = &service.user_id;
    let agent = &service.account.agent_id;
    const STEPS: [&str; 4] = [
        "agent lookup",
        "create thread with the user message",
        "recent messages (a continued thread's history)",
        "append assistant message",
    ];
    let mut steps: Vec<Histogram<u64>> = STEPS.iter().map(|_| histogram()).collect();
    let mut whole = histogram();
    let pid = std::process::id();
    let cpu_before = cpu_time(pid)?;
    let threads_before = thread_totals(pid)?;
    let started = Instant::now();
    let mut count: u64 = 0;
    let message_record =
        |id: String, thread_id: &ThreadId, role: Role, content: &str| MessageRecord {
            id: id.into(),
            thread_id: thread_id.clone(),
            role,
            content: content.to_owned(),
            model: (role == Role::Assistant).then(|| MODEL.to_owned()),
            prompt_tokens: None,
            completion_tokens: None,
            sources: None,
            latency_ms: None,
            status: ReplyStatus::Complete,
            error: None,
            created_at: chrono::Utc::now(),
            tool_calls: None,
            api_key_id: None,
        };
    while started.elapsed() < Duration::from_secs(args.seconds) {
        count += 1;
        let thread_id = ThreadId::from(format!("bench-thread-{count:012}"));
        let mut times = [Instant::now(); 5];
        store
            .agent(user, agent)
            .await?
            .context("the agent exists")?;
        times[1] = Instant::now();
        let now = chrono::Utc::now();
        let created = store
            .create_thread(
                &ThreadRecord {
                    id: thread_id.clone(),
                    agent_id: agent.clone(),
                    user_id: user.clone(),
                    title: message.to_owned(),
                    message_count: 0,
                    channel: agentchat::domain::Channel::Api,
                    feedback_up: 0,
                    feedback_down: 0,
                    created_at: now,
                    updated_at: now,
                },
                &message_record(
                    format!("bench-user-{count:012}"),
                    &thread_id,
                    Role::User,
                    message,
                ),
            )
            .await?;
        anyhow::ensure!(created, "the thread was not created");
        times[2] = Instant::now();
        store
            .recent_messages(&thread_id, agentchat::chat::HISTORY_LIMIT)
            .await?;
        times[3] = Instant::now();
        store
            .append_message(&message_record(
                format!("bench-reply-{count:012}"),
                &thread_id,
                Role::Assistant,
                message,
            ))
            .await?;
        times[4] = Instant::now();
        for (index, histogram) in steps.iter_mut().enumerate() {
            record(histogram, times[index + 1] - times[index]);
        }
        record(&mut whole, times[4] - times[0]);
    }
    let cpu = cpu_time(pid)?.saturating_sub(cpu_before);
    let threads_after = thread_totals(pid)?;
    let sqlite = |totals: &BTreeMap<String, ThreadTotals>| {
        totals
            .iter()
            .filter(|(name, _)| name.starts_with("sqlx-sqlite"))
            .fold(ThreadTotals::default(), |sum, (_, t)| ThreadTotals {
                threads: sum.threads + t.threads,
                user: sum.user + t.user,
                system: sum.system + t.system,
                voluntary_switches: sum.voluntary_switches + t.voluntary_switches,
                involuntary_switches: sum.involuntary_switches + t.involuntary_switches,
            })
    };
    let sqlite_threads = sqlite(&threads_after).since(&sqlite(&threads_before));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nStore calls of one chat on the service's SQLite store (built in this process), back to back for {} s: {count} chats, {:.0} µs of CPU per chat in this process, of which the SQLite threads {:.0} µs user + {:.0} µs system with {:.1} context switches:\n",
        args.seconds,
        cpu.as_secs_f64() * 1e6 / count.max(1) as f64,
        sqlite_threads.user.as_secs_f64() * 1e6 / count.max(1) as f64,
        sqlite_threads.system.as_secs_f64() * 1e6 / count.max(1) as f64,
        (sqlite_threads.voluntary_switches + sqlite_threads.involuntary_switches) as f64
            / count.max(1) as f64,
    );
    let _ = writeln!(
        out,
        "| store call | p50 ms | p90 ms | p99 ms | mean ms |\n|---|---:|---:|---:|---:|"
    );
    for (name, histogram) in STEPS.into_iter().zip(&steps).chain([("all four", &whole)]) {
        let [p50, p90, p99, _, _] = summary(histogram);
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {:.2} |",
            ms(p50),
            ms(p90),
            ms(p99),
            histogram.mean() / 1000.0
        );
    }
    Ok(out)
}

fn nodelay_row(out: &mut String, name: &str, label: &str, run: &RunResult) {
    let [p50, p90, p99, _, max] = summary(&run.first);
    let _ = writeln!(
        out,
        "| {name} | {label} | {} | {} | {} | {} | {} |",
        run.ok,
        ms(p50),
        ms(p90),
        ms(p99),
        ms(max)
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let needed = 4 * (args.concurrency.max(args.rate) + OPEN_LOOP_PREWARM as u64) + 1024;
    let limit = load::raise_open_files(needed)?;
    if limit < needed {
        eprintln!("warning: the open-file limit is {limit}; {needed} may be needed");
    }
    eprintln!("machine: {}", load::machine());
    ensure!(
        args.instances == 1 || args.backend.database_url.is_some(),
        "--instances {} needs --database-url: instances share one PostgreSQL database",
        args.instances
    );
    ensure!(
        !(args.diagnose
            && (args.backend.database_url.is_some() || args.backend.redis_url.is_some())),
        "--diagnose measures the SQLite store: run it without --database-url and --redis-url"
    );
    let backend = Backend::prepare(&args.backend).await?;

    let mock = MockProvider::start(MockConfig {
        api_key: Some(MOCK_KEY.to_owned()),
        delay: Duration::from_millis(args.delay_ms),
        record_requests: false,
        ..MockConfig::default()
    })
    .await?;
    // The book server and the built-in model of `--embed-crawl`.
    let book_site = if args.embed_crawl {
        let book = bench::kb::book_dir(None)?;
        Some(bench::kb::serve_dir(&book, "/book").await?)
    } else {
        None
    };
    let mut embed_env = Vec::new();
    if let Some(site) = &book_site {
        let model = args
            .embedding_model
            .clone()
            .unwrap_or_else(test_support::embedding_model_path);
        ensure!(
            model.join("model.safetensors").is_file(),
            "no embedding model at {}: run scripts/setup.sh or pass --embedding-model",
            model.display()
        );
        embed_env.push(("EMBEDDING_MODEL".to_owned(), "local".to_owned()));
        embed_env.push((
            "EMBEDDING_MODEL_PATH".to_owned(),
            model.display().to_string(),
        ));
        embed_env.push(("ALLOWED_PRIVATE_HOSTS".to_owned(), site.addr.to_string()));
    }
    let mut services = Vec::new();
    for _ in 0..args.instances {
        services.push(
            ServiceProcess::start(ServiceOptions {
                bin: args
                    .server_bin
                    .clone()
                    .unwrap_or_else(service::default_server_bin),
                openai_base_url: mock.base_url(),
                openai_api_key: MOCK_KEY.to_owned(),
                extra_env: {
                    let mut env = backend.env();
                    if args.metrics {
                        env.push(("METRICS_TOKEN".to_owned(), METRICS_TOKEN.to_owned()));
                    }
                    env.extend(embed_env.iter().cloned());
                    env
                },
            })
            .await?,
        );
    }
    let service_pids = services
        .iter()
        .map(ServiceProcess::pid)
        .collect::<anyhow::Result<Vec<u32>>>()?;
    // One account for all instances: they share the database and the token key.
    let mut account = service::create_account(&services[0], MODEL).await?;
    for (service, pid) in services.iter().zip(&service_pids) {
        eprintln!("service pid {pid} on {}", service.base_url());
    }
    eprintln!("backend {}, mock on {}", backend.label(), mock.base_url());

    let words: Vec<String> = (1..=args.words).map(|i| format!("word{i}")).collect();
    let message = format!("Bench {}", words.join(" "));
    let templates = Templates {
        expected: format!("Echo: {message}"),
        message,
    };
    let mut results = Vec::new();
    for &name in &args.scenarios {
        let (kind, load) = match name {
            ScenarioName::JsonC1 => (Kind::Json, Load::Closed(1)),
            ScenarioName::JsonCn => (Kind::Json, Load::Closed(args.concurrency as usize)),
            ScenarioName::JsonRate => (Kind::Json, Load::Open(args.rate)),
            ScenarioName::StreamC1 => (Kind::Stream, Load::Closed(1)),
            ScenarioName::StreamRate => (Kind::Stream, Load::Open(args.rate)),
        };
        // A fresh access token per scenario: they live 15 minutes.
        account.token = service::login(&services[0].base_url(), &account.email).await?;
        let direct = vec![templates.direct(kind, &mock)?];
        let through = services
            .iter()
            .map(|service| templates.service(kind, service.addr(), &account))
            .collect::<anyhow::Result<Vec<Target>>>()?;
        // One checked request each before loading.
        for target in direct.iter().chain(&through) {
            let mut conn = connect(target.template.addr).await?;
            timed_exchange(&mut conn, target, Instant::now())
                .await
                .with_context(|| {
                    format!(
                        "a first {:?} request on the {} path",
                        name,
                        target.path.label()
                    )
                })?;
        }
        let mut runs = Vec::new();
        for targets in [&direct, &through] {
            if let (Some(site), Path::Service) = (&book_site, targets[0].path) {
                let base = services[0].base_url();
                let agent =
                    bench::kb::api_create_agent(&base, &account.token, "embedded book").await?;
                let crawl = bench::kb::api_crawl(
                    &base,
                    &account.token,
                    &agent,
                    &format!("http://{}/book/toc.html", site.addr),
                    5,
                    1000,
                    Duration::from_secs(600),
                )
                .await?;
                eprintln!(
                    "{name:?}: the book crawled ({} pages, {} chunks in {:.1} s); its chunks are being embedded",
                    crawl.pages,
                    crawl.chunks,
                    crawl.elapsed.as_secs_f64()
                );
            }
            let run = measure(targets, load, &args, &service_pids).await?;
            for service in &mut services {
                service.ensure_running()?;
            }
            let [p50, _, p99, _, max] = summary(&run.first);
            eprintln!(
                "{name:?} {:<7}: {} ok, {} errors, {:.0}/s, p50 {} ms, p99 {} ms, max {} ms",
                targets[0].path.label(),
                run.ok,
                run.errors,
                run.rate(),
                ms(p50),
                ms(p99),
                ms(max)
            );
            runs.push(run);
        }
        let service_run = runs.pop().context("two runs")?;
        let direct_run = runs.pop().context("two runs")?;
        results.push(ScenarioResult {
            name,
            kind,
            load,
            direct: direct_run,
            service: service_run,
        });
    }
    let diagnosis = if args.diagnose {
        let mut text = nodelay_check(&args, &mock, &templates).await?;
        text.push_str(&store_check(&args, &mock, &templates.message).await?);
        text
    } else {
        String::new()
    };
    println!("machine: {}\n", load::machine());
    let mut label = if args.metrics {
        format!("{}, metrics on", backend.label())
    } else {
        backend.label().to_string()
    };
    if args.embed_crawl {
        label.push_str(", the built-in embedding model embedding a crawled book meanwhile");
    }
    print!("{}", report(&args, &results, &templates, &label));
    print!("{diagnosis}");
    drop(services);
    drop(mock);
    Ok(())
}
