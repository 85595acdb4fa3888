//! # `chat_resume`: what resumable streams cost, how fast a dropped stream resumes, and that
//! every frame arrives exactly once
//!
//! Starts a mock model provider in this process and the release `agentchat` binary as a child
//! process pointed at it (see [`bench::service`]), on SQLite by default or on PostgreSQL and
//! Redis with `--database-url` and `--redis-url` ([`bench::backend`]; with Redis every frame of
//! a resumable reply is also appended to the reply's Redis Stream). Two measurements follow,
//! each with a service process and a mock of its own (the mock's token interval is one per
//! mock): docs/api.md § Resumable streams describes the feature.
//!
//! ## CPU per streamed conversation, resumable off and on
//!
//! `--chats` (2,000) streamed chats (`POST /api/agents/{id}/chat` with `"stream": true`, a new
//! conversation each) are sent by `--concurrency` (50) clients, each on its own keep-alive
//! connection and sending its next chat as soon as the last stream ended. Every reply is
//! `--tokens` (50) words `w1 w2 … wN` (the mock's `[[tokens:N]]` marker), one chunk each,
//! `--cpu-token-interval-ms` (5) apart. The run is made with `"resumable": false` (the body
//! relays the provider's stream itself), then with `"resumable": true` (the reply is generated
//! by a task of its own whose frames are kept, and mirrored to Redis with `--redis-url`; the
//! body follows them); the pair is repeated `--rounds` (3) times to show the noise, after
//! `--warmup` (200) chats of each kind.
//!
//! **CPU per conversation** is the service process's user + system time over the run
//! (`/proc/<pid>/stat`, from the first request to 250 ms after the last stream ended, so
//! that the work after each `[DONE]` is counted) divided by the chats. The difference
//! on − off is what making a stream resumable costs.
//!
//! ## Resume latency and exactly-once delivery
//!
//! `--resumes` (1,000) resumable streamed chats are opened together (at most
//! `--open-concurrency`, 64, being opened at a time; each stays in progress for its whole
//! reply), each on a connection of its own. Every reply is `--resume-tokens` (100) words
//! `--token-interval-ms` (20) apart, so the replies last a few seconds and all are in
//! progress together. Each client draws a number `k` (1 to `--resume-tokens` − 1, from
//! `--seed`). With `--drop-after all-open` (the default), it reads on until every stream of
//! the batch has had its first frame, then reads `k`'s share of the frames it has left
//! before the last word (at least one), so that every resume happens with all the batch's
//! streams in progress; with `--drop-after first-frame` it reads `k` frames from its first,
//! so that the clients with a small `k` resume while the batch is still being opened (new
//! chats arriving as fast as the service creates them). Then it stops reading for `--offline-ms`
//! (default 2 × the token interval + 10 ms: a connection gone dead, whose frames in flight
//! are lost), closes the connection (the socket is closed with unread data, as a dropped
//! network would) and at once reconnects with `GET
//! /api/agents/{id}/conversations/{threadId}/stream` and `Last-Event-ID` = the id of the
//! last frame it read.
//!
//! - **Resume latency**: from the start of the reconnection (TCP connect included) to the
//!   first replayed event (`data:`) of the resumed stream. The offline pause makes sure the
//!   frame after `k` has been generated before the client resumes, so the latency is the
//!   service's (authentication, finding the reply, replaying its kept frames), not the wait
//!   for the provider's next token; with `--offline-ms 0` it includes that wait (up to one
//!   token interval) when the client is quicker than the provider. Some replies have ended
//!   by the time their client resumes (a large `k`): those are replayed from the frames kept
//!   after the end.
//! - **Exactly once**: the frames read before the drop and after the resume, joined, must
//!   have the ids 1, 2, … n with no gap and no repeat, their chunks must be exactly
//!   `w1 w2 … wN`, and the last must be `[DONE]` (n = N + 1). Error events, frames without
//!   an id, statuses other than 200 and broken connections count the stream as failed.
//!
//! `--resume-warmup` (100) such streams run first, unmeasured. Reported with them, to read
//! the latency against: the time from sending a new chat to its first frame; a **probe**
//! that, every 10 ms during the batch, opens a new connection and alternately sends an
//! authenticated `GET /api/agents/{id}` (timed to its whole answer) and resumes a reply
//! that has ended (from its middle, timed to the first replayed frame) — what any request,
//! and a resume that waits for nothing, get from the service under the same load; the most
//! streams in progress at once (as the clients and as the mock saw them); the CPU of the
//! service and of this process (the mock and the clients) per stream; and the share of the
//! machine's CPU time that was busy (`/proc/stat`: near 100 % every process waits for a
//! core, and latencies are the machine's). The progress output (standard error) also shows
//! the batch by half second: upstream streams open, and the resumes' and the probe's
//! latencies by when they started.
//!
//! Every stream of both measurements must deliver every frame in order with its id and end
//! with `[DONE]`, and the mock must report every upstream stream completed, none cancelled;
//! otherwise the benchmark fails after printing its report. The open-file limit of this
//! process (inherited by the service) is raised to what the run needs; every plan's request
//! budget is 10^9 per minute ([`bench::service`]), so nothing is rate-limited.
//!
//! ```text
//! cargo build --release -p bench --bin chat_resume -p server --bin agentchat
//! target/release/chat_resume --chats 2000 --concurrency 50 --tokens 50 --rounds 3 --resumes 1000
//! target/release/chat_resume --database-url postgres://postgres@127.0.0.1:5432/postgres \
//!     --redis-url redis://127.0.0.1:6379
//! ```

use std::{
    collections::VecDeque,
    net::SocketAddr,
    path::PathBuf,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use anyhow::{bail, ensure, Context};
use bench::{
    backend::{Backend, BackendArgs},
    kb::Rng,
    load::{
        self, connect, cpu_time, histogram, ms, record, summary, Conn, RequestTemplate, SseEvent,
        SseParser,
    },
    service::{self, Account, ServiceOptions, ServiceProcess},
};
use clap::{Parser, ValueEnum};
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::{
    body::{Bytes, Incoming},
    header, Method, Request, Response,
};
use hyper_util::rt::TokioIo;
use mock_provider::{MockConfig, MockProvider};
use serde_json::{json, Value};
use tokio::{net::TcpStream, sync::Semaphore, task::JoinSet};

/// The load generator's allocator: jemalloc, as the service's, which spends less of the
/// shared cores than the C library's on the frames of 1,000 streams (bench/HISTORY.md).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The model of the benchmark agent (offered by the mock).
const MODEL: &str = "gpt-4o-mini";
/// The key the mock requires.
const MOCK_KEY: &str = "bench-mock-key";
/// How many failure descriptions are printed per run.
const FAILURES_SHOWN: usize = 5;
/// Waited after the last stream of a CPU run before its CPU reading.
const CPU_SETTLE: Duration = Duration::from_millis(250);
/// A stream (both connections of a resumed one) slower than this fails.
const STREAM_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the probe waits between two requests ([`probe`]).
const PROBE_INTERVAL: Duration = Duration::from_millis(10);
/// The resume latency target of the issue at p50.
const TARGET_P50: Duration = Duration::from_millis(5);
/// The resume latency target of the issue at p99.
const TARGET_P99: Duration = Duration::from_millis(20);

/// Measures the service's CPU per streamed conversation with resumable streams off and on,
/// the latency of resuming a dropped stream, and that resumed streams deliver every frame
/// exactly once. See the documentation at the top of this binary's source for the method.
#[derive(Parser, Debug)]
#[command(name = "chat_resume", version, about, long_about = None)]
struct Args {
    /// The measurements to make, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "cpu,resume")]
    phases: Vec<Phase>,
    /// CPU: streamed chats per run (each mode, each round).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=200_000))]
    chats: u64,
    /// CPU: clients, each on its own keep-alive connection, sending chats back to back.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=5_000))]
    concurrency: u64,
    /// CPU: words per reply, one chunk each.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    tokens: u64,
    /// CPU: milliseconds between two chunks of a reply.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=1_000))]
    cpu_token_interval_ms: u64,
    /// CPU: rounds, each a run with resumable off, then one with it on.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=20))]
    rounds: u64,
    /// CPU: chats of each mode before round 1, unmeasured.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(0..=100_000))]
    warmup: u64,
    /// Resume: resumable streams in progress together, each dropped once and resumed.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=20_000))]
    resumes: u64,
    /// Resume: words per reply, one chunk each (frames: this + 1 with `[DONE]`).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(2..=10_000))]
    resume_tokens: u64,
    /// Resume: milliseconds between two chunks of a reply.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    token_interval_ms: u64,
    /// Resume: milliseconds a client stops reading before it drops its connection and
    /// resumes (default: twice the token interval + 10, so the next frame exists when it
    /// resumes).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    offline_ms: Option<u64>,
    /// Resume: streams being opened (not yet at their first frame) at most at a time.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=20_000))]
    open_concurrency: u64,
    /// Resume: streams dropped and resumed before the measured ones, unmeasured.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(0..=20_000))]
    resume_warmup: u64,
    /// Resume: the seed of the frames each client reads before it drops.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Resume: from when a client counts the frames it reads before it drops.
    #[arg(long, value_enum, default_value = "all-open")]
    drop_after: DropAfter,
    /// The `agentchat` binary (default: `target/release/agentchat` of this workspace).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// The store and shared state of the service (default: SQLite, limits in process); see
    /// [`bench::backend`].
    #[command(flatten)]
    backend: BackendArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Phase {
    /// CPU per streamed conversation, resumable off and on.
    Cpu,
    /// Resume latency and exactly-once delivery.
    Resume,
}

/// From when a client counts the frames it reads before it drops its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DropAfter {
    /// From the moment every stream of the batch has its first frame: each client drops at
    /// its drawn share of the frames it has left, so that every resume happens with all the
    /// batch's streams in progress.
    AllOpen,
    /// From its own first frame: the clients that draw few frames resume while the batch is
    /// still being opened (new chats created as fast as `--open-concurrency` allows).
    FirstFrame,
}

impl Args {
    fn offline(&self) -> Duration {
        Duration::from_millis(self.offline_ms.unwrap_or(2 * self.token_interval_ms + 10))
    }
}

// ---------------------------------------------------------------------------------------------
// Connections, requests and events.

/// A client connection whose socket is closed when it is dropped (its driver task, which owns
/// the socket, is aborted), whatever is left unread: a client that goes away.
struct Link {
    send: Conn,
    driver: tokio::task::JoinHandle<()>,
}

impl Link {
    async fn open(addr: SocketAddr) -> anyhow::Result<Self> {
        let tcp = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        tcp.set_nodelay(true)?;
        let (send, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Self { send, driver })
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// `GET {path}` with the bearer token, and `Last-Event-ID: last` when given.
fn get_request(
    addr: SocketAddr,
    path: &str,
    token: &str,
    last: Option<u64>,
) -> anyhow::Result<Request<Full<Bytes>>> {
    let mut request = Request::builder()
        .method(Method::GET)
        .uri(path)
        .header(header::HOST, addr.to_string())
        .header(header::AUTHORIZATION, format!("Bearer {token}"));
    if let Some(last) = last {
        request = request
            .header(header::ACCEPT, "text/event-stream")
            .header("last-event-id", last.to_string());
    }
    Ok(request.body(Full::new(Bytes::new()))?)
}

/// A header of `response` as text.
fn header_text(response: &Response<Incoming>, name: &str) -> anyhow::Result<String> {
    Ok(response
        .headers()
        .get(name)
        .with_context(|| format!("the answer has no {name} header"))?
        .to_str()?
        .to_owned())
}

/// Fails with the body of a non-200 answer.
async fn ensure_ok(response: Response<Incoming>) -> anyhow::Result<Response<Incoming>> {
    let status = response.status();
    if status != hyper::StatusCode::OK {
        let bytes = response.into_body().collect().await?.to_bytes();
        bail!("status {status}: {}", String::from_utf8_lossy(&bytes));
    }
    Ok(response)
}

/// One data event of a reply's stream: its id and data.
#[derive(Debug, Clone)]
struct Received {
    id: u64,
    data: String,
}

/// The data events of a streamed answer, with their ids, as they come; heartbeats skipped.
struct Events {
    body: Incoming,
    parser: SseParser,
    queue: VecDeque<(Option<String>, SseEvent)>,
}

impl Events {
    fn new(body: Incoming) -> Self {
        Self {
            body,
            parser: SseParser::default(),
            queue: VecDeque::new(),
        }
    }

    /// The next data event; `None` at the end of the stream. An event without a numeric id
    /// fails.
    async fn next(&mut self) -> anyhow::Result<Option<Received>> {
        loop {
            while let Some((id, event)) = self.queue.pop_front() {
                let SseEvent::Data(data) = event else {
                    continue;
                };
                let id = id
                    .with_context(|| format!("an event without an id: {data}"))?
                    .parse::<u64>()
                    .with_context(|| format!("an event whose id is not a number: {data}"))?;
                return Ok(Some(Received { id, data }));
            }
            match self.body.frame().await {
                None => {
                    ensure!(
                        self.parser.pending() == 0,
                        "{} bytes after the last event",
                        self.parser.pending()
                    );
                    return Ok(None);
                }
                Some(frame) => {
                    let frame = frame.context("reading the stream")?;
                    if let Some(bytes) = frame.data_ref() {
                        self.queue.extend(self.parser.push_with_ids(bytes));
                    }
                }
            }
        }
    }
}

/// The chunk the `index`th frame (from 1) of a `[[tokens:N]]` reply carries.
fn expected_chunk(index: u64) -> String {
    if index == 1 {
        "w1".to_owned()
    } else {
        format!(" w{index}")
    }
}

/// Checks that `frames` are a whole reply of `tokens` words, each frame exactly once: ids
/// 1..=tokens + 1 in order, chunks `w1`, ` w2`, …, then `[DONE]`.
fn check_reply(frames: &[Received], tokens: u64) -> anyhow::Result<()> {
    let mut text = String::new();
    for (index, frame) in (1u64..).zip(frames) {
        ensure!(
            frame.id == index,
            "frame {index} of the reply has id {} (ids received: {})",
            frame.id,
            id_ranges(frames)
        );
        if index > tokens {
            ensure!(
                frame.data == "[DONE]",
                "frame {index}: expected [DONE], got {}",
                frame.data
            );
            continue;
        }
        let event: Value = serde_json::from_str(&frame.data)
            .with_context(|| format!("frame {index} is not JSON: {}", frame.data))?;
        ensure!(
            event.get("error").is_none(),
            "frame {index} is an error: {}",
            frame.data
        );
        let chunk = event
            .get("chunk")
            .and_then(Value::as_str)
            .with_context(|| format!("frame {index} has no chunk: {}", frame.data))?;
        let expected = expected_chunk(index);
        ensure!(
            chunk == expected,
            "frame {index}: expected {expected:?}, got {chunk:?}"
        );
        text.push_str(chunk);
    }
    ensure!(
        frames.len() as u64 == tokens + 1,
        "{} frames received of {} (ids: {})",
        frames.len(),
        tokens + 1,
        id_ranges(frames)
    );
    let expected: Vec<String> = (1..=tokens).map(|i| format!("w{i}")).collect();
    ensure!(
        text == expected.join(" "),
        "the chunks joined are not the reply"
    );
    Ok(())
}

/// The ids of `frames` as ranges, e.g. `1-12, 12-101`.
fn id_ranges(frames: &[Received]) -> String {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for frame in frames {
        match ranges.last_mut() {
            Some((_, end)) if frame.id == *end + 1 => *end = frame.id,
            _ => ranges.push((frame.id, frame.id)),
        }
    }
    ranges
        .iter()
        .map(|(start, end)| {
            if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Failures counted, the first few described.
#[derive(Debug, Default)]
struct Failures {
    count: u64,
    shown: Vec<String>,
}

impl Failures {
    fn add(&mut self, failure: String) {
        self.count += 1;
        if self.shown.len() < FAILURES_SHOWN {
            self.shown.push(failure);
        }
    }

    fn merge(&mut self, other: Self) {
        self.count += other.count;
        for failure in other.shown {
            if self.shown.len() < FAILURES_SHOWN {
                self.shown.push(failure);
            }
        }
    }
}

/// Starts a mock with `token_interval` and a service on `backend` pointed at it, and creates
/// the benchmark account.
async fn start(
    args: &Args,
    backend: &Backend,
    token_interval: Duration,
) -> anyhow::Result<(MockProvider, ServiceProcess, Account)> {
    let mock = MockProvider::start(MockConfig {
        api_key: Some(MOCK_KEY.to_owned()),
        token_interval,
        record_requests: false,
        ..MockConfig::default()
    })
    .await?;
    let service = ServiceProcess::start(ServiceOptions {
        bin: args
            .server_bin
            .clone()
            .unwrap_or_else(service::default_server_bin),
        openai_base_url: mock.base_url(),
        openai_api_key: MOCK_KEY.to_owned(),
        extra_env: backend.env(),
    })
    .await?;
    let account = service::create_account(&service, MODEL).await?;
    eprintln!(
        "service pid {} on {} ({}), mock on {}",
        service.pid()?,
        service.base_url(),
        backend.label(),
        mock.base_url()
    );
    Ok((mock, service, account))
}

/// The share of the machine's CPU time not idle since `before`, in %.
fn machine_busy(before: (u64, u64)) -> anyhow::Result<f64> {
    let (total, idle) = load::machine_jiffies()?;
    let (total, idle) = (total - before.0, idle - before.1);
    Ok(100.0 * (total - idle) as f64 / total.max(1) as f64)
}

/// The mock's (completed, cancelled) streams so far.
fn upstream(mock: &MockProvider) -> (usize, usize) {
    (mock.completed_streams(), mock.cancelled_streams())
}

/// Waits (at most 10 s) until the mock has no stream open.
async fn upstream_idle(mock: &MockProvider) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while mock.open_streams() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// CPU per streamed conversation.

/// One run of the CPU measurement.
#[derive(Debug)]
struct CpuRun {
    resumable: bool,
    chats: u64,
    ok: u64,
    failures: Failures,
    cpu: Duration,
    wall: Duration,
    /// The share of the machine's CPU time not idle over the run, in %.
    machine_busy: f64,
    /// Upstream streams completed / cancelled during the run (mock).
    completed: usize,
    cancelled: usize,
}

impl CpuRun {
    fn micros_per_chat(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.chats.max(1) as f64
    }

    fn clean(&self) -> bool {
        self.failures.count == 0
            && self.ok == self.chats
            && self.completed as u64 == self.chats
            && self.cancelled == 0
    }
}

/// One streamed chat on `conn`, read to its end and checked.
async fn cpu_chat(conn: &mut Conn, template: &RequestTemplate, tokens: u64) -> anyhow::Result<()> {
    conn.ready().await?;
    let response = ensure_ok(conn.send_request(template.request()).await?).await?;
    let mut events = Events::new(response.into_body());
    let mut frames = Vec::with_capacity(tokens as usize + 1);
    while let Some(frame) = events.next().await? {
        frames.push(frame);
    }
    check_reply(&frames, tokens)
}

/// `chats` streamed chats by `concurrency` clients on keep-alive connections.
async fn cpu_load(
    template: &RequestTemplate,
    chats: u64,
    concurrency: u64,
    tokens: u64,
) -> anyhow::Result<(u64, Failures)> {
    let next = Arc::new(AtomicU64::new(0));
    let mut set = JoinSet::new();
    for _ in 0..concurrency.min(chats) {
        let (template, next) = (template.clone(), Arc::clone(&next));
        set.spawn(async move {
            let mut ok = 0u64;
            let mut failures = Failures::default();
            let mut conn: Option<Conn> = None;
            while next.fetch_add(1, Ordering::SeqCst) < chats {
                let result = async {
                    if conn.is_none() {
                        conn = Some(connect(template.addr).await?);
                    }
                    let conn = conn.as_mut().context("a connection")?;
                    tokio::time::timeout(STREAM_TIMEOUT, cpu_chat(conn, &template, tokens))
                        .await
                        .context("the stream took too long")?
                }
                .await;
                match result {
                    Ok(()) => ok += 1,
                    Err(error) => {
                        failures.add(format!("{error:#}"));
                        conn = None;
                    }
                }
            }
            (ok, failures)
        });
    }
    let mut ok = 0;
    let mut failures = Failures::default();
    while let Some(result) = set.join_next().await {
        let (worker_ok, worker_failures) = result?;
        ok += worker_ok;
        failures.merge(worker_failures);
    }
    Ok((ok, failures))
}

/// The CPU template of one mode: a new conversation per chat.
fn cpu_template(
    service: &ServiceProcess,
    account: &Account,
    tokens: u64,
    resumable: bool,
) -> anyhow::Result<RequestTemplate> {
    RequestTemplate::post_json(
        service.addr(),
        &format!("/api/agents/{}/chat", account.agent_id),
        &account.token,
        &json!({
            "message": format!("Bench [[tokens:{tokens}]]"),
            "stream": true,
            "resumable": resumable,
        }),
    )
}

async fn cpu_run(
    args: &Args,
    service: &mut ServiceProcess,
    mock: &MockProvider,
    template: &RequestTemplate,
    resumable: bool,
) -> anyhow::Result<CpuRun> {
    let pid = service.pid()?;
    let (completed_before, cancelled_before) = upstream(mock);
    let cpu_before = cpu_time(pid)?;
    let machine_before = load::machine_jiffies()?;
    let started = Instant::now();
    let (ok, failures) = cpu_load(template, args.chats, args.concurrency, args.tokens).await?;
    let wall = started.elapsed();
    let machine_busy = machine_busy(machine_before)?;
    upstream_idle(mock).await;
    tokio::time::sleep(CPU_SETTLE).await;
    let cpu = cpu_time(pid)?.saturating_sub(cpu_before);
    service.ensure_running()?;
    let (completed, cancelled) = upstream(mock);
    Ok(CpuRun {
        resumable,
        chats: args.chats,
        ok,
        failures,
        cpu,
        wall,
        machine_busy,
        completed: completed - completed_before,
        cancelled: cancelled - cancelled_before,
    })
}

/// The CPU measurement: warm-up, then `--rounds` pairs of runs (off, on).
async fn cpu_phase(args: &Args, backend: &Backend) -> anyhow::Result<Vec<CpuRun>> {
    let (mock, mut service, account) = start(
        args,
        backend,
        Duration::from_millis(args.cpu_token_interval_ms),
    )
    .await?;
    let off = cpu_template(&service, &account, args.tokens, false)?;
    let on = cpu_template(&service, &account, args.tokens, true)?;
    if args.warmup > 0 {
        let started = Instant::now();
        for template in [&off, &on] {
            let (_, failures) =
                cpu_load(template, args.warmup, args.concurrency, args.tokens).await?;
            ensure!(
                failures.count == 0,
                "{} of {} warm-up chats failed: {:?}",
                failures.count,
                args.warmup,
                failures.shown
            );
        }
        eprintln!(
            "cpu: warm-up, {} chats of each mode in {:.1} s",
            args.warmup,
            started.elapsed().as_secs_f64()
        );
    }
    let mut runs = Vec::new();
    for round in 1..=args.rounds {
        for (resumable, template) in [(false, &off), (true, &on)] {
            let run = cpu_run(args, &mut service, &mock, template, resumable).await?;
            eprintln!(
                "cpu round {round}, resumable {}: {} of {} ok in {:.1} s ({:.0} chats/s, machine {:.0} % busy), {:.0} µs of service CPU per chat; upstream {} completed, {} cancelled",
                if resumable { "on " } else { "off" },
                run.ok,
                run.chats,
                run.wall.as_secs_f64(),
                run.chats as f64 / run.wall.as_secs_f64(),
                run.machine_busy,
                run.micros_per_chat(),
                run.completed,
                run.cancelled
            );
            for failure in &run.failures.shown {
                eprintln!("  failure: {failure}");
            }
            runs.push(run);
        }
    }
    drop(service);
    drop(mock);
    Ok(runs)
}

// ---------------------------------------------------------------------------------------------
// Resume latency and exactly-once delivery.

/// How one dropped and resumed stream went.
#[derive(Debug, Default)]
struct ResumeOutcome {
    /// From the start of the reconnection to the first replayed event.
    latency: Option<Duration>,
    /// When the reconnection started.
    resumed_at: Option<Instant>,
    /// From sending the chat to its first frame.
    first_frame: Option<Duration>,
    /// When its first frame came.
    opened_at: Option<Instant>,
    /// Frames read before the drop, and after the resume.
    before: u64,
    after: u64,
    failure: Option<String>,
    /// Every frame received, before and after the resume, for the check after the batch.
    frames: Vec<Received>,
}

impl ResumeOutcome {
    /// `Ok` when the stream went through and its frames are a whole reply of `tokens`
    /// words, each exactly once, in order, ending with `[DONE]` ([`check_reply`]).
    fn check(self, tokens: u64) -> Result<(), String> {
        if let Some(failure) = self.failure {
            return Err(failure);
        }
        check_reply(&self.frames, tokens)
            .map_err(|error| format!("{error:#} ({} frames read before the drop)", self.before))
    }
}

/// What every resumed stream shares.
struct ResumeTarget {
    addr: SocketAddr,
    chat: RequestTemplate,
    /// `/api/agents/{agentId}/conversations/`.
    conversations: String,
    /// `/api/agents/{agentId}`: the probe's plain request.
    agent: String,
    /// The probe's resume: `.../conversations/{threadId}/stream` of a finished reply, and the
    /// `Last-Event-ID` it sends.
    finished: Option<(String, u64)>,
    token: String,
    tokens: u64,
    offline: Duration,
    /// Streams in progress now, and at most.
    in_progress: AtomicUsize,
    peak: AtomicUsize,
    drop_after: DropAfter,
    /// Streams of the running batch, and how many of them have had their first frame.
    batch: AtomicUsize,
    opened: AtomicUsize,
}

impl ResumeTarget {
    fn all_open(&self) -> bool {
        self.opened.load(Ordering::SeqCst) >= self.batch.load(Ordering::SeqCst)
    }
}

/// The frames a client reads before it drops when `read` (1 to `tokens` − 1) is its draw
/// and it had read `so_far` when the batch was all open: `read`'s share of what is left
/// before the last word, at least one more frame (none if the reply is at its last word).
fn drop_point(read: u64, so_far: u64, tokens: u64) -> u64 {
    let left = (tokens - 1).saturating_sub(so_far);
    if left == 0 {
        return so_far;
    }
    so_far + (read * left).div_ceil(tokens - 1).max(1)
}

/// Opens a resumable stream, reads `read` frames, goes silent for the offline pause, drops
/// the connection and resumes. `opening` is released at the first frame. The frames are
/// kept in the outcome, to be checked after the batch ([`ResumeOutcome::check`]).
async fn resume_one(
    target: &ResumeTarget,
    read: u64,
    opening: Option<tokio::sync::OwnedSemaphorePermit>,
) -> ResumeOutcome {
    let mut outcome = ResumeOutcome::default();
    let now = target.in_progress.fetch_add(1, Ordering::SeqCst) + 1;
    target.peak.fetch_max(now, Ordering::SeqCst);
    let result = tokio::time::timeout(
        STREAM_TIMEOUT,
        resume_stream(target, read, opening, &mut outcome),
    )
    .await
    .unwrap_or_else(|_| Err(anyhow::anyhow!("the stream took too long")));
    target.in_progress.fetch_sub(1, Ordering::SeqCst);
    if let Err(error) = result {
        outcome.failure = Some(format!("{error:#}"));
    }
    outcome
}

async fn resume_stream(
    target: &ResumeTarget,
    read: u64,
    mut opening: Option<tokio::sync::OwnedSemaphorePermit>,
    outcome: &mut ResumeOutcome,
) -> anyhow::Result<()> {
    // The first connection: `read` frames, then silence, then gone.
    let sent = Instant::now();
    let mut link = Link::open(target.addr).await?;
    link.send.ready().await?;
    let response = ensure_ok(link.send.send_request(target.chat.request()).await?).await?;
    let thread_id = header_text(&response, "x-thread-id")?;
    let reply_id = header_text(&response, "x-reply-id")?;
    let mut events = Events::new(response.into_body());
    let mut frames = Vec::with_capacity(target.tokens as usize + 1);
    // With `DropAfter::AllOpen`, the drop point is set once the batch is all open.
    let mut until = match target.drop_after {
        DropAfter::FirstFrame => Some(read),
        DropAfter::AllOpen => None,
    };
    loop {
        if until.is_none() && !frames.is_empty() && target.all_open() {
            until = Some(drop_point(read, frames.len() as u64, target.tokens));
        }
        if until.is_some_and(|until| frames.len() as u64 >= until) {
            break;
        }
        let frame = events.next().await?.with_context(|| {
            format!(
                "the stream ended before the client dropped it{}",
                if until.is_none() {
                    " (the batch was not all open by then: try more --resume-tokens)"
                } else {
                    ""
                }
            )
        })?;
        if frames.is_empty() {
            outcome.first_frame = Some(sent.elapsed());
            outcome.opened_at = Some(Instant::now());
            target.opened.fetch_add(1, Ordering::SeqCst);
        }
        frames.push(frame);
        opening.take();
    }
    outcome.before = frames.len() as u64;
    let last = frames.last().map_or(0, |frame| frame.id);
    tokio::time::sleep(target.offline).await;
    drop(events);
    drop(link);

    // The resume.
    let started = Instant::now();
    outcome.resumed_at = Some(started);
    let mut link = Link::open(target.addr).await?;
    link.send.ready().await?;
    let request = get_request(
        target.addr,
        &format!("{}{thread_id}/stream", target.conversations),
        &target.token,
        Some(last),
    )?;
    let response = ensure_ok(link.send.send_request(request).await?)
        .await
        .with_context(|| format!("resuming after frame {last}"))?;
    let resumed_reply = header_text(&response, "x-reply-id")?;
    ensure!(
        resumed_reply == reply_id,
        "the resumed stream is of reply {resumed_reply}, not {reply_id}"
    );
    let mut events = Events::new(response.into_body());
    while let Some(frame) = events.next().await? {
        if outcome.latency.is_none() {
            outcome.latency = Some(started.elapsed());
        }
        outcome.after += 1;
        frames.push(frame);
    }
    drop(link);
    outcome.frames = frames;
    Ok(())
}

/// The two requests of the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProbeKind {
    /// `GET /api/agents/{agentId}`: authentication and a read of the store.
    Plain,
    /// A resume of a finished reply from its middle: time to its first replayed frame.
    Finished,
}

/// One probe request: when it started, which, how long to its answer (plain) or first
/// replayed frame (finished).
type ProbeSample = (Instant, ProbeKind, Duration);

/// Until `stop`, one request after another (`interval` apart), each on a new connection,
/// alternately [`ProbeKind::Plain`] and [`ProbeKind::Finished`]: what any authenticated
/// request, and a resume that waits for no new frame, get under the same load.
async fn probe(
    target: Arc<ResumeTarget>,
    interval: Duration,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> (Vec<ProbeSample>, Failures) {
    let mut samples = Vec::new();
    let mut failures = Failures::default();
    let mut finished = false;
    while !stop.load(Ordering::SeqCst) {
        finished = !finished && target.finished.is_some();
        let kind = if finished {
            ProbeKind::Finished
        } else {
            ProbeKind::Plain
        };
        let started = Instant::now();
        let result = async {
            let mut link = Link::open(target.addr).await?;
            link.send.ready().await?;
            let request = match (&target.finished, kind) {
                (Some((path, last)), ProbeKind::Finished) => {
                    get_request(target.addr, path, &target.token, Some(*last))?
                }
                _ => get_request(target.addr, &target.agent, &target.token, None)?,
            };
            let response = ensure_ok(link.send.send_request(request).await?).await?;
            if kind == ProbeKind::Plain {
                response.into_body().collect().await?;
                return anyhow::Ok(started.elapsed());
            }
            let mut events = Events::new(response.into_body());
            let first = events.next().await?.context("no frame replayed")?;
            let elapsed = started.elapsed();
            ensure!(
                target.finished.as_ref().map(|(_, last)| last + 1) == Some(first.id),
                "the probe's resume began with frame {}",
                first.id
            );
            while events.next().await?.is_some() {}
            Ok(elapsed)
        }
        .await;
        match result {
            Ok(elapsed) => samples.push((started, kind, elapsed)),
            Err(error) => failures.add(format!("probe {kind:?}: {error:#}")),
        }
        tokio::time::sleep(interval).await;
    }
    (samples, failures)
}

/// A resumable chat read to its end; returns its thread id.
async fn finished_reply(target: &ResumeTarget) -> anyhow::Result<String> {
    let mut link = Link::open(target.addr).await?;
    link.send.ready().await?;
    let response = ensure_ok(link.send.send_request(target.chat.request()).await?).await?;
    let thread_id = header_text(&response, "x-thread-id")?;
    let mut events = Events::new(response.into_body());
    let mut frames = Vec::new();
    while let Some(frame) = events.next().await? {
        frames.push(frame);
    }
    check_reply(&frames, target.tokens)?;
    Ok(thread_id)
}

/// What a batch of resumed streams gave.
struct ResumeRun {
    streams: u64,
    latency: Histogram<u64>,
    first_frame: Histogram<u64>,
    /// The probe's requests during the batch, by kind.
    probe_plain: Histogram<u64>,
    probe_finished: Histogram<u64>,
    probe_failures: Failures,
    /// By half second from the start of the batch: upstream streams open at most, and the
    /// resume latencies and the probe's, as (start, latency) pairs.
    timeline: Timeline,
    /// CPU of this process (the mock and the clients) over the batch.
    own_cpu: Duration,
    /// The share of the machine's CPU time not idle over the batch, in %.
    machine_busy: f64,
    exactly_once: u64,
    failures: Failures,
    /// Streams in progress at most at once: as the clients saw them, as the mock saw them.
    peak_clients: usize,
    peak_upstream: usize,
    completed: usize,
    cancelled: usize,
    cpu: Duration,
    wall: Duration,
    frames_before: u64,
    frames_after: u64,
    /// When every stream of the batch had its first frame, from the batch's start.
    all_open: Option<Duration>,
    /// Resumes that started before that.
    resumed_while_opening: usize,
}

/// The course of a batch: (offset from its start, value) pairs.
#[derive(Debug, Default)]
struct Timeline {
    open: Vec<(Duration, usize)>,
    resumes: Vec<(Duration, Duration)>,
    plain: Vec<(Duration, Duration)>,
    finished: Vec<(Duration, Duration)>,
}

impl Timeline {
    /// A table by `step`: upstream streams open at most, resumes started with their latency
    /// p50 / max, and the probe's p50 / max of each kind.
    fn table(&self, step: Duration) -> String {
        let bucket = |at: Duration| (at.as_micros() / step.as_micros().max(1)) as usize;
        let buckets = self
            .open
            .iter()
            .map(|(at, _)| bucket(*at) + 1)
            .max()
            .unwrap_or(0);
        let stats = |line: &[(Duration, Duration)], index: usize| {
            let mut h = histogram();
            for (at, latency) in line {
                if bucket(*at) == index {
                    record(&mut h, *latency);
                }
            }
            if h.is_empty() {
                return "–".to_owned();
            }
            let [p50, _, _, _, max] = summary(&h);
            format!("{} / {} ({})", ms(p50), ms(max), h.len())
        };
        let mut out = String::from(
            "| from | upstream open | resumes: p50 / max ms (n) | plain GET: p50 / max ms (n) | finished resume: p50 / max ms (n) |\n|---:|---:|---:|---:|---:|\n",
        );
        for index in 0..buckets {
            let open = self
                .open
                .iter()
                .filter(|(at, _)| bucket(*at) == index)
                .map(|(_, open)| *open)
                .max()
                .unwrap_or(0);
            out.push_str(&format!(
                "| {:.1} s | {open} | {} | {} | {} |\n",
                (step * index as u32).as_secs_f64(),
                stats(&self.resumes, index),
                stats(&self.plain, index),
                stats(&self.finished, index)
            ));
        }
        out
    }
}

impl ResumeRun {
    fn clean(&self) -> bool {
        self.exactly_once == self.streams
            && self.failures.count == 0
            && self.completed as u64 == self.streams
            && self.cancelled == 0
    }
}

/// Runs one stream per entry of `reads` (the frames each reads before it drops).
async fn resume_batch(
    target: &Arc<ResumeTarget>,
    reads: &[u64],
    open_concurrency: u64,
    service: &mut ServiceProcess,
    mock: &Arc<MockProvider>,
) -> anyhow::Result<ResumeRun> {
    let pid = service.pid()?;
    let (completed_before, cancelled_before) = upstream(mock);
    target.peak.store(0, Ordering::SeqCst);
    target.batch.store(reads.len(), Ordering::SeqCst);
    target.opened.store(0, Ordering::SeqCst);
    let open_samples = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sampler = {
        let (mock, samples) = (Arc::clone(mock), Arc::clone(&open_samples));
        let started = Instant::now();
        tokio::spawn(async move {
            loop {
                load::lock(&samples).push((started.elapsed(), mock.open_streams()));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let cpu_before = cpu_time(pid)?;
    let own_before = cpu_time(std::process::id())?;
    let machine_before = load::machine_jiffies()?;
    let started = Instant::now();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let prober = tokio::spawn(probe(Arc::clone(target), PROBE_INTERVAL, Arc::clone(&stop)));
    let semaphore = Arc::new(Semaphore::new(open_concurrency as usize));
    let mut set = JoinSet::new();
    for &read in reads {
        let (target, semaphore) = (Arc::clone(target), Arc::clone(&semaphore));
        set.spawn(async move {
            let permit = semaphore.acquire_owned().await.ok();
            resume_one(&target, read, permit).await
        });
    }
    let mut run = ResumeRun {
        streams: reads.len() as u64,
        latency: histogram(),
        first_frame: histogram(),
        probe_plain: histogram(),
        probe_finished: histogram(),
        probe_failures: Failures::default(),
        timeline: Timeline::default(),
        own_cpu: Duration::ZERO,
        machine_busy: 0.0,
        exactly_once: 0,
        failures: Failures::default(),
        peak_clients: 0,
        peak_upstream: 0,
        completed: 0,
        cancelled: 0,
        cpu: Duration::ZERO,
        wall: Duration::ZERO,
        frames_before: 0,
        frames_after: 0,
        all_open: None,
        resumed_while_opening: 0,
    };
    let mut all_open = Some(Duration::ZERO);
    let mut outcomes = Vec::with_capacity(reads.len());
    while let Some(outcome) = set.join_next().await {
        let outcome = outcome?;
        if let Some(latency) = outcome.latency {
            record(&mut run.latency, latency);
        }
        if let (Some(at), Some(latency)) = (outcome.resumed_at, outcome.latency) {
            run.timeline
                .resumes
                .push((at.saturating_duration_since(started), latency));
        }
        if let Some(first) = outcome.first_frame {
            record(&mut run.first_frame, first);
        }
        // The batch is all open at its last first frame, if every stream had one.
        all_open = all_open
            .zip(outcome.opened_at)
            .map(|(open, at)| open.max(at.saturating_duration_since(started)));
        run.frames_before += outcome.before;
        run.frames_after += outcome.after;
        outcomes.push(outcome);
    }
    run.wall = started.elapsed();
    run.all_open = all_open;
    run.resumed_while_opening = run
        .timeline
        .resumes
        .iter()
        .filter(|(at, _)| run.all_open.is_none_or(|open| *at < open))
        .count();
    stop.store(true, Ordering::SeqCst);
    let (samples, probe_failures) = prober.await?;
    for (at, kind, latency) in samples {
        let (histogram, line) = match kind {
            ProbeKind::Plain => (&mut run.probe_plain, &mut run.timeline.plain),
            ProbeKind::Finished => (&mut run.probe_finished, &mut run.timeline.finished),
        };
        record(histogram, latency);
        line.push((at.saturating_duration_since(started), latency));
    }
    run.probe_failures = probe_failures;
    run.own_cpu = cpu_time(std::process::id())?.saturating_sub(own_before);
    run.machine_busy = machine_busy(machine_before)?;
    // Checked now rather than as each stream ends: the batch's streams all end within its
    // last half second, where the checks' parsing would compete with the service for the
    // cores while its last resumes are measured.
    for outcome in outcomes {
        match outcome.check(target.tokens) {
            Ok(()) => run.exactly_once += 1,
            Err(failure) => run.failures.add(failure),
        }
    }
    upstream_idle(mock).await;
    tokio::time::sleep(CPU_SETTLE).await;
    run.cpu = cpu_time(pid)?.saturating_sub(cpu_before);
    sampler.abort();
    service.ensure_running()?;
    let (completed, cancelled) = upstream(mock);
    run.completed = completed - completed_before;
    run.cancelled = cancelled - cancelled_before;
    run.peak_clients = target.peak.load(Ordering::SeqCst);
    run.timeline.open = std::mem::take(&mut *load::lock(&open_samples));
    run.peak_upstream = run
        .timeline
        .open
        .iter()
        .map(|(_, open)| *open)
        .max()
        .unwrap_or(0);
    Ok(run)
}

/// The frames each of `count` clients reads before it drops: 1 to `tokens` − 1.
fn reads(rng: &mut Rng, count: u64, tokens: u64) -> Vec<u64> {
    (0..count)
        .map(|_| rng.between(1, (tokens - 1) as usize) as u64)
        .collect()
}

/// The resume measurement: warm-up, then `--resumes` streams.
async fn resume_phase(args: &Args, backend: &Backend) -> anyhow::Result<ResumeRun> {
    let (mock, mut service, account) =
        start(args, backend, Duration::from_millis(args.token_interval_ms)).await?;
    let mock = Arc::new(mock);
    let mut target = ResumeTarget {
        addr: service.addr(),
        chat: RequestTemplate::post_json(
            service.addr(),
            &format!("/api/agents/{}/chat", account.agent_id),
            &account.token,
            &json!({
                "message": format!("Bench [[tokens:{}]]", args.resume_tokens),
                "stream": true,
                "resumable": true,
            }),
        )?,
        conversations: format!("/api/agents/{}/conversations/", account.agent_id),
        agent: format!("/api/agents/{}", account.agent_id),
        finished: None,
        token: account.token.clone(),
        tokens: args.resume_tokens,
        offline: args.offline(),
        in_progress: AtomicUsize::new(0),
        peak: AtomicUsize::new(0),
        drop_after: args.drop_after,
        batch: AtomicUsize::new(0),
        opened: AtomicUsize::new(0),
    };
    // The reply the probe resumes: finished, so that its frames are all there.
    let thread_id = finished_reply(&target).await?;
    target.finished = Some((
        format!("{}{thread_id}/stream", target.conversations),
        args.resume_tokens / 2,
    ));
    let target = Arc::new(target);
    let mut rng = Rng::new(args.seed);
    if args.resume_warmup > 0 {
        // Its own draws, so that the measured streams' do not depend on the warm-up's size.
        let mut warm_rng = Rng::new(args.seed ^ 0x5EED_5EED_5EED_5EED);
        let warm_reads = reads(&mut warm_rng, args.resume_warmup, args.resume_tokens);
        let warm = resume_batch(
            &target,
            &warm_reads,
            args.open_concurrency,
            &mut service,
            &mock,
        )
        .await?;
        ensure!(
            warm.clean(),
            "{} of {} warm-up streams failed: {:?}",
            warm.streams - warm.exactly_once,
            warm.streams,
            warm.failures.shown
        );
        eprintln!(
            "resume: warm-up, {} streams in {:.1} s",
            warm.streams,
            warm.wall.as_secs_f64()
        );
    }
    let measured_reads = reads(&mut rng, args.resumes, args.resume_tokens);
    let run = resume_batch(
        &target,
        &measured_reads,
        args.open_concurrency,
        &mut service,
        &mock,
    )
    .await?;
    let [p50, _, p99, _, max] = summary(&run.latency);
    eprintln!(
        "resume: {} streams in {:.1} s, {} exactly once; resume latency p50 {} / p99 {} / max {} ms; at most {} in progress at once (upstream {})",
        run.streams,
        run.wall.as_secs_f64(),
        run.exactly_once,
        ms(p50),
        ms(p99),
        ms(max),
        run.peak_clients,
        run.peak_upstream
    );
    for failure in &run.failures.shown {
        eprintln!("  failure: {failure}");
    }
    eprintln!(
        "resume: the batch by half second (latencies by the time their request started):\n{}",
        run.timeline.table(Duration::from_millis(500))
    );
    drop(service);
    Ok(run)
}

// ---------------------------------------------------------------------------------------------
// The report.

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn list(values: &[f64], signed: bool) -> String {
    values
        .iter()
        .map(|v| {
            if signed {
                format!("{v:+.0}")
            } else {
                format!("{v:.0}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Prints the CPU table; returns whether every run was clean.
fn report_cpu(args: &Args, runs: &[CpuRun]) -> bool {
    println!(
        "CPU per streamed conversation: {} chats per run by {} clients on keep-alive connections, a new conversation each, replies of {} chunks {} ms apart; {} warm-up chats of each mode first. Service CPU (user + system) per chat:\n",
        args.chats, args.concurrency, args.tokens, args.cpu_token_interval_ms, args.warmup
    );
    println!("| round | resumable off | resumable on | on − off | chats/s off / on | machine busy off / on | complete streams off / on |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let (mut offs, mut ons, mut diffs) = (Vec::new(), Vec::new(), Vec::new());
    for (index, pair) in runs.chunks(2).enumerate() {
        let [off, on] = pair else {
            continue;
        };
        debug_assert!(!off.resumable && on.resumable);
        let (a, b) = (off.micros_per_chat(), on.micros_per_chat());
        println!(
            "| {} | {a:.0} µs | {b:.0} µs | {:+.0} µs | {:.0} / {:.0} | {:.0} / {:.0} % | {} / {} of {} |",
            index + 1,
            b - a,
            off.chats as f64 / off.wall.as_secs_f64(),
            on.chats as f64 / on.wall.as_secs_f64(),
            off.machine_busy,
            on.machine_busy,
            off.ok,
            on.ok,
            args.chats
        );
        offs.push(a);
        ons.push(b);
        diffs.push(b - a);
    }
    let (off_list, on_list, diff_list) =
        (list(&offs, false), list(&ons, false), list(&diffs, true));
    println!(
        "| median | {:.0} µs | {:.0} µs | {:+.0} µs | | | |",
        median(&mut offs),
        median(&mut ons),
        median(&mut diffs)
    );
    let clean = runs.iter().all(CpuRun::clean);
    println!(
        "\nCPU per conversation, resumable off: **{off_list} µs**; on: **{on_list} µs**; on − off: **{diff_list} µs** (rounds in order). Every stream complete (all chunks in order with ids 1…{}, `[DONE]`), every upstream stream completed, none cancelled: **{}**.",
        args.tokens + 1,
        if clean { "yes" } else { "no" }
    );
    for (index, run) in runs.iter().enumerate() {
        if !run.clean() {
            println!(
                "\n- round {} resumable {}: {} of {} ok, upstream {} completed / {} cancelled",
                index / 2 + 1,
                if run.resumable { "on" } else { "off" },
                run.ok,
                run.chats,
                run.completed,
                run.cancelled
            );
        }
        for failure in &run.failures.shown {
            println!("  - {failure}");
        }
    }
    clean
}

/// Prints the resume figures; returns whether they were clean (targets aside).
fn report_resume(args: &Args, run: &ResumeRun) -> bool {
    let [p50, p90, p99, _, max] = summary(&run.latency);
    let when = match args.drop_after {
        DropAfter::AllOpen => format!(
            "once every stream had its first frame ({}), each client read a drawn share (seed {}) of the frames it had left before the last word",
            run.all_open
                .map_or("never".to_owned(), |at| format!("{:.2} s into the batch", at.as_secs_f64())),
            args.seed
        ),
        DropAfter::FirstFrame => format!(
            "each client read 1–{} frames from its first (seed {}; {} of the resumes started while the batch was still being opened)",
            args.resume_tokens - 1,
            args.seed,
            run.resumed_while_opening
        ),
    };
    println!(
        "\nResume: {} resumable streams, replies of {} chunks {} ms apart, at most {} opened at a time; {when}, stopped reading for {} ms, dropped its connection and resumed with `Last-Event-ID`; {} such streams first, unmeasured.\n",
        run.streams,
        args.resume_tokens,
        args.token_interval_ms,
        args.open_concurrency,
        args.offline().as_millis(),
        args.resume_warmup
    );
    println!("| measure | value |");
    println!("|---|---:|");
    println!(
        "| **resume latency** p50 / p90 / p99 / max (reconnect to first replayed frame) | **{} / {} / {} / {} ms** |",
        ms(p50),
        ms(p90),
        ms(p99),
        ms(max)
    );
    let [f50, _, f99, _, fmax] = summary(&run.first_frame);
    println!(
        "| for comparison, a new chat's first frame (from sending it), p50 / p99 / max | {} / {} / {} ms |",
        ms(f50),
        ms(f99),
        ms(fmax)
    );
    for (label, histogram) in [
        (
            "for comparison, a probe during the batch: `GET /api/agents/{id}` on a new connection",
            &run.probe_plain,
        ),
        (
            "for comparison, a probe during the batch: resuming a finished reply from its middle on a new connection",
            &run.probe_finished,
        ),
    ] {
        let [q50, _, q99, _, qmax] = summary(histogram);
        println!(
            "| {label} ({} requests), p50 / p99 / max | {} / {} / {} ms |",
            histogram.len(),
            ms(q50),
            ms(q99),
            ms(qmax)
        );
    }
    println!(
        "| **delivered exactly once** (ids 1…{} with no gap or repeat, chunks `w1 … w{}`, `[DONE]`) | **{} of {}** |",
        args.resume_tokens + 1,
        args.resume_tokens,
        run.exactly_once,
        run.streams
    );
    println!(
        "| streams in progress at most at once, clients / upstream (mock) | {} / {} |",
        run.peak_clients, run.peak_upstream
    );
    println!(
        "| frames read before the drops / after the resumes | {} / {} |",
        run.frames_before, run.frames_after
    );
    println!(
        "| upstream streams completed / cancelled (mock) | {} / {} |",
        run.completed, run.cancelled
    );
    println!(
        "| service CPU per stream (the whole batch, resumes included) | {:.0} µs |",
        run.cpu.as_secs_f64() * 1e6 / run.streams.max(1) as f64
    );
    println!(
        "| CPU of the mock and the clients (this process) per stream | {:.0} µs |",
        run.own_cpu.as_secs_f64() * 1e6 / run.streams.max(1) as f64
    );
    println!(
        "| wall time of the batch; the machine busy over it | {:.1} s; {:.0} % |",
        run.wall.as_secs_f64(),
        run.machine_busy
    );
    for failure in run.failures.shown.iter().chain(&run.probe_failures.shown) {
        println!("\n- failure: {failure}");
    }
    let clean = run.clean() && run.probe_failures.count == 0;
    let met = |value: u64, target: Duration| {
        if Duration::from_micros(value) <= target {
            "met"
        } else {
            "missed"
        }
    };
    println!(
        "\nTargets: resume latency p50 ≤ {} ms: **{}** ({} ms); p99 ≤ {} ms: **{}** ({} ms); {} of {} delivered exactly once: **{}**.",
        TARGET_P50.as_millis(),
        met(p50, TARGET_P50),
        ms(p50),
        TARGET_P99.as_millis(),
        met(p99, TARGET_P99),
        ms(p99),
        run.exactly_once,
        run.streams,
        if clean { "met" } else { "missed" }
    );
    clean
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let needed = 4 * args.resumes.max(args.concurrency) + 1024;
    let limit = load::raise_open_files(needed)?;
    ensure!(
        limit >= needed,
        "the open-file limit is {limit}, {needed} are needed: raise it (ulimit -n) or use fewer streams"
    );
    eprintln!("machine: {}", load::machine());
    let backend = Backend::prepare(&args.backend).await?;

    let cpu = if args.phases.contains(&Phase::Cpu) {
        Some(cpu_phase(&args, &backend).await?)
    } else {
        None
    };
    let resume = if args.phases.contains(&Phase::Resume) {
        Some(resume_phase(&args, &backend).await?)
    } else {
        None
    };

    println!("machine: {}\n", load::machine());
    println!("chat_resume on {}.\n", backend.label());
    let mut clean = true;
    if let Some(runs) = &cpu {
        clean &= report_cpu(&args, runs);
    }
    if let Some(run) = &resume {
        clean &= report_resume(&args, run);
    }
    drop(backend);
    if !clean {
        bail!("some streams were incomplete, not delivered exactly once, or their upstream streams were not completed (see above)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::drop_point;

    #[test]
    fn a_client_drops_after_at_least_one_more_frame_and_before_the_last_word() {
        let tokens = 100;
        for so_far in 1..tokens - 1 {
            let points: Vec<u64> = (1..tokens)
                .map(|read| drop_point(read, so_far, tokens))
                .collect();
            assert!(
                points.windows(2).all(|w| w[0] <= w[1]),
                "not monotonic at {so_far}"
            );
            assert_eq!(
                points[0],
                so_far + 1,
                "the smallest draw reads one more frame"
            );
            assert_eq!(
                *points.last().unwrap(),
                tokens - 1,
                "the largest stops before the last word"
            );
        }
    }

    #[test]
    fn a_client_at_its_last_word_when_the_batch_is_open_drops_at_once() {
        assert_eq!(drop_point(1, 99, 100), 99);
        assert_eq!(drop_point(99, 100, 100), 100);
    }
}
