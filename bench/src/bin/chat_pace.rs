//! # `chat_pace`: streamed conversations at the provider's pace, beside the provider itself
//!
//! How many streamed conversations AgentChat relays per second, and at what CPU cost, when
//! many clients each open their next stream as soon as one ends, measured in the same run as
//! the same clients calling the model provider directly.
//!
//! Three processes share the machine, each with its own CPU reading (`/proc/<pid>/stat`):
//!
//! - the **mock provider** (`mock-provider`, the binary beside this one): every streamed reply
//!   is `--chunks` (50) words `w1 w2 … wN`, one chunk each, `--interval-ms` (20) apart,
//!   in the OpenAI Chat Completions wire format;
//! - the **service**, the release `agentchat` binary ([`bench::service`]), pointed at the mock,
//!   on SQLite by default or on PostgreSQL + Redis ([`bench::backend`]);
//! - this process, the **load client**: `C` clients, each on its own keep-alive HTTP/1.1
//!   connection, each sending its next request as soon as the last stream ended (closed
//!   loop). Their first requests are spread over one stream's length, so that the streams
//!   do not start in lockstep.
//!
//! Two paths are measured at each concurrency `C` of `--concurrency` (200, 500, 1000, 2000):
//!
//! - `direct`: `POST /v1/chat/completions` with `"stream": true` straight to the mock, with
//!   the mock's key: what a client calling the provider itself gets;
//! - `service`: `POST /api/agents/{id}/chat` with `"stream": true` to the service with an
//!   access token: authentication, rate limit (budgets of 10^9 per minute, consulted on every
//!   request), a new thread per conversation, the upstream stream relayed chunk by chunk as
//!   `data: {"chunk": …}` frames, the conversation stored, `data: [DONE]`.
//!
//! Each run loads `--warmup` seconds unmeasured, then `--seconds` measured; the two paths
//! alternate (`direct` first in odd rounds, `service` first in even ones) for `--rounds`
//! rounds, and the figures reported are the medians over the rounds.
//!
//! ## What is checked and reported
//!
//! Every stream must deliver exactly the chunks `w1`, ` w2`, … in order, then `[DONE]`, then
//! end; anything else (a missing, extra or reordered chunk, an error frame, a status other
//! than 200, a broken connection) counts it as failed.
//!
//! - **streams/s**: streams that ended inside the measured window, per second;
//! - **time to first chunk** p50 / p99: from sending the request to the first frame carrying
//!   reply text, for the streams started in the window; the service's **added** time is its
//!   percentile minus the direct path's in the same round;
//! - **CPU per stream** of each process: its CPU time (user + system) over the window divided
//!   by the streams that ended in it; the service's is AgentChat's cost per 50-chunk
//!   conversation;
//! - **machine busy**: the share of both cores' time not idle over the window
//!   (`/proc/stat`): near 100 % the machine is saturated and every process waits for a core;
//! - **service memory per open stream**: the service's resident memory (`VmRSS`) in the
//!   middle of the window less its reading before the run, divided by `C`.
//!
//! ```text
//! cargo build --release -p server --bin agentchat -p bench -p mock-provider --bins
//! target/release/chat_pace --concurrency 200,500,1000,2000 --rounds 3
//! target/release/chat_pace --database-url postgres://postgres@127.0.0.1:5432/postgres \
//!     --redis-url redis://127.0.0.1:6379
//! ```

use std::{
    net::{Ipv4Addr, SocketAddr, TcpListener},
    path::PathBuf,
    process::Stdio,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{bail, ensure, Context};
use bench::{
    backend::{Backend, BackendArgs},
    load::{
        self, connect, cpu_time, histogram, ms, ms_delta, record, summary, RequestTemplate,
        SseEvent, SseParser,
    },
    service::{self, ServiceOptions, ServiceProcess},
};
use clap::Parser;
use hdrhistogram::Histogram;
use http_body_util::BodyExt;
use serde_json::json;
use tokio::{process::Child, task::JoinSet};

/// The model of the benchmark agent (offered by the mock).
const MODEL: &str = "gpt-4o-mini";
/// The key the mock requires.
const MOCK_KEY: &str = "bench-mock-key";
/// How many failure descriptions are printed per run.
const FAILURES_SHOWN: usize = 3;
/// A stream that takes longer than this beyond its provider's length counts as failed.
const STREAM_GRACE: Duration = Duration::from_secs(30);

/// Streams many conversations at once through the service and straight to the provider,
/// each client opening its next stream when one ends, and reports rates, time to first chunk
/// and each process's CPU. See the documentation at the top of this binary's source.
#[derive(Parser, Debug)]
#[command(name = "chat_pace", version, about, long_about = None)]
struct Args {
    /// Concurrent streams (clients), comma-separated: one level after the other.
    #[arg(long, value_delimiter = ',', default_values_t = [200u64, 500, 1000, 2000])]
    concurrency: Vec<u64>,
    /// Chunks (words) per reply.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(2..=2000))]
    chunks: u64,
    /// Milliseconds between two chunks of a reply.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    interval_ms: u64,
    /// Seconds each run is measured.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=300))]
    seconds: u64,
    /// Seconds of unmeasured load before each run's window.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=60))]
    warmup: u64,
    /// Rounds per level, alternating which path goes first.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=20))]
    rounds: u64,
    /// Only this path (`direct` or `service`); both by default.
    #[arg(long)]
    only: Option<Path>,
    /// The `agentchat` binary (default: `target/release/agentchat` of this workspace).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// The `mock-provider` binary (default: the one beside this benchmark).
    #[arg(long)]
    mock_bin: Option<PathBuf>,
    #[command(flatten)]
    backend: BackendArgs,
}

/// Where the streams go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Path {
    /// Straight to the mock provider.
    Direct,
    /// Through AgentChat.
    Service,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Direct => "direct",
            Path::Service => "service",
        }
    }
}

/// The mock provider as a child process, killed when dropped.
struct MockProcess {
    child: Child,
    addr: SocketAddr,
}

impl MockProcess {
    async fn start(bin: &std::path::Path, interval_ms: u64) -> anyhow::Result<Self> {
        ensure!(
            bin.is_file(),
            "the mock provider {} does not exist; build it with \
             `cargo build --release -p mock-provider --bins` or pass --mock-bin",
            bin.display()
        );
        let addr = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?;
        let child = tokio::process::Command::new(bin)
            .args(["--addr", &addr.to_string()])
            .args(["--token-interval-ms", &interval_ms.to_string()])
            .args(["--api-key", MOCK_KEY])
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let started = Instant::now();
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            ensure!(
                started.elapsed() < Duration::from_secs(10),
                "the mock provider did not listen on {addr} within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Self { child, addr })
    }

    fn pid(&self) -> anyhow::Result<u32> {
        self.child.id().context("the mock provider has exited")
    }
}

/// What one stream checks: the expected chunk of each frame, precomputed so that reading a
/// stream costs the client as little as possible.
struct Expected {
    /// `w1`, ` w2`, …
    words: Vec<String>,
    /// The service's frames: `{"chunk":"w1"}`, …
    service_frames: Vec<String>,
}

impl Expected {
    fn new(chunks: u64) -> Self {
        let words: Vec<String> = (1..=chunks)
            .map(|i| {
                if i == 1 {
                    "w1".to_owned()
                } else {
                    format!(" w{i}")
                }
            })
            .collect();
        let service_frames = words
            .iter()
            .map(|w| json!({ "chunk": w }).to_string())
            .collect();
        Self {
            words,
            service_frames,
        }
    }
}

/// The measured window of a run, shared with its clients.
struct Window {
    from: Instant,
    to: Instant,
}

/// What the clients of one run recorded.
#[derive(Default)]
struct Tally {
    /// Streams that ended (successfully) inside the window.
    completed: u64,
    /// Streams that failed (anywhere in the run).
    failed: u64,
    /// Chunks received by the streams counted in `completed`.
    chunks: u64,
    failures: Vec<String>,
    first_chunk: Option<Histogram<u64>>,
}

/// One run's figures.
#[derive(Debug, Clone)]
struct RunFigures {
    streams_per_s: f64,
    first_chunk: [u64; 5],
    failed: u64,
    completed: u64,
    /// CPU per completed stream, microseconds: service (0 for `direct`), mock, client.
    cpu_us: [f64; 3],
    machine_busy: f64,
    /// Service memory per open stream, KiB (0 for `direct`).
    memory_kib: f64,
}

/// CPU readings of the three processes and the machine at one moment.
struct CpuSnapshot {
    service: Duration,
    mock: Duration,
    client: Duration,
    machine: (u64, u64),
}

fn snapshot(service_pid: u32, mock_pid: u32) -> anyhow::Result<CpuSnapshot> {
    Ok(CpuSnapshot {
        service: cpu_time(service_pid)?,
        mock: cpu_time(mock_pid)?,
        client: cpu_time(std::process::id())?,
        machine: load::machine_jiffies()?,
    })
}

/// Reads one stream of `path` on `conn` to its end, checking every frame. Returns the time
/// to the first chunk and the chunks received.
async fn one_stream(
    conn: &mut load::Conn,
    template: &RequestTemplate,
    path: Path,
    expected: &Expected,
) -> anyhow::Result<(Duration, u64)> {
    let started = Instant::now();
    conn.ready().await?;
    let response = conn.send_request(template.request()).await?;
    let status = response.status();
    let mut body = response.into_body();
    if status != hyper::StatusCode::OK {
        let bytes = body.collect().await?.to_bytes();
        bail!("status {status}: {}", String::from_utf8_lossy(&bytes));
    }
    let mut parser = SseParser::default();
    let mut chunks = 0usize;
    let mut first = None;
    let mut done = false;
    while let Some(frame) = body.frame().await {
        let frame = frame.context("reading the stream")?;
        let Some(bytes) = frame.data_ref() else {
            continue;
        };
        for event in parser.push(bytes) {
            let SseEvent::Data(data) = event else {
                continue; // a heartbeat
            };
            ensure!(!done, "a frame after [DONE]");
            if data == "[DONE]" {
                done = true;
                continue;
            }
            let chunk: Option<&[u8]> = match path {
                Path::Service => Some(data.as_bytes()),
                // `{"id":…,"choices":[{"index":0,"delta":{"content":" w2"},…}]}`: the text
                // of `content`, when the frame has any (the first one carries the role, the
                // last one the finish reason).
                Path::Direct => content_of(data.as_bytes()),
            };
            let Some(chunk) = chunk else { continue };
            let want = match path {
                Path::Service => expected.service_frames.get(chunks).map(String::as_bytes),
                Path::Direct => expected.words.get(chunks).map(String::as_bytes),
            };
            ensure!(
                want == Some(chunk),
                "chunk {}: expected {:?}, got {:?}",
                chunks + 1,
                want.map(String::from_utf8_lossy),
                String::from_utf8_lossy(chunk)
            );
            chunks += 1;
            if chunks == 1 {
                first = Some(started.elapsed());
            }
        }
    }
    ensure!(
        parser.pending() == 0,
        "{} bytes after the last frame",
        parser.pending()
    );
    ensure!(done, "the stream ended without [DONE]");
    ensure!(
        chunks == expected.words.len(),
        "{chunks} of {} chunks received",
        expected.words.len()
    );
    Ok((first.unwrap_or_default(), chunks as u64))
}

/// The non-empty `"content"` string of an OpenAI chunk, as bytes (the words have no escapes).
fn content_of(data: &[u8]) -> Option<&[u8]> {
    const KEY: &[u8] = b"\"content\":\"";
    let at = data.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let len = data[at..].iter().position(|&b| b == b'"')?;
    (len > 0).then(|| &data[at..at + len])
}

/// One client: streams back to back on one connection until the run ends.
async fn client(
    template: RequestTemplate,
    path: Path,
    expected: Arc<Expected>,
    window: Arc<Window>,
    stop: Instant,
    delay: Duration,
    tally: Arc<Mutex<Tally>>,
) {
    tokio::time::sleep(delay).await;
    let mut first_chunk = histogram();
    let (mut completed, mut failed, mut chunks) = (0u64, 0u64, 0u64);
    let mut failures = Vec::new();
    let mut conn = None;
    while Instant::now() < stop {
        let started = Instant::now();
        let outcome = async {
            if conn.is_none() {
                conn = Some(connect(template.addr).await?);
            }
            let c = conn.as_mut().context("connected")?;
            tokio::time::timeout(STREAM_GRACE, one_stream(c, &template, path, &expected))
                .await
                .context("the stream took too long")?
        }
        .await;
        let ended = Instant::now();
        match outcome {
            Ok((first, n)) => {
                if started >= window.from && started < window.to {
                    record(&mut first_chunk, first);
                }
                if ended >= window.from && ended < window.to {
                    completed += 1;
                    chunks += n;
                }
            }
            Err(e) => {
                failed += 1;
                conn = None;
                if failures.len() < FAILURES_SHOWN {
                    failures.push(format!("{e:#}"));
                }
                // Not a busy loop against a service that refuses.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    let mut tally = tally.lock().unwrap_or_else(|e| e.into_inner());
    tally.completed += completed;
    tally.failed += failed;
    tally.chunks += chunks;
    for f in failures {
        if tally.failures.len() < FAILURES_SHOWN {
            tally.failures.push(f);
        }
    }
    match &mut tally.first_chunk {
        Some(h) => {
            let _ = h.add(&first_chunk);
        }
        None => tally.first_chunk = Some(first_chunk),
    }
}

/// The service, its account and the mock, as one run needs them.
struct Setup<'a> {
    args: &'a Args,
    service: &'a mut ServiceProcess,
    mock: &'a MockProcess,
    email: String,
    agent_path: String,
    expected: Arc<Expected>,
}

/// One run of `clients` clients on `path`.
async fn run(setup: &mut Setup<'_>, path: Path, clients: u64) -> anyhow::Result<RunFigures> {
    let args = setup.args;
    let message = format!("[[tokens:{}]] Tell me a story.", args.chunks);
    let template = match path {
        Path::Direct => RequestTemplate::post_json(
            setup.mock.addr,
            "/v1/chat/completions",
            MOCK_KEY,
            &json!({
                "model": MODEL,
                "stream": true,
                "messages": [{"role": "user", "content": message}],
            }),
        )?,
        Path::Service => {
            // A fresh access token per run (they live 15 minutes).
            let token = service::login(&setup.service.base_url(), &setup.email).await?;
            RequestTemplate::post_json(
                setup.service.addr(),
                &setup.agent_path,
                &token,
                &json!({ "message": message, "stream": true }),
            )?
        }
    };
    let service_pid = setup.service.pid()?;
    let mock_pid = setup.mock.pid()?;
    let rss_before = load::rss_kib(service_pid)?.0;
    // One stream's length: the first requests are spread over it.
    let stream_length =
        Duration::from_millis(args.interval_ms * (args.chunks - 1)).max(Duration::from_millis(100));
    let begin = Instant::now();
    let window = Arc::new(Window {
        from: begin + stream_length + Duration::from_secs(args.warmup),
        to: begin + stream_length + Duration::from_secs(args.warmup + args.seconds),
    });
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut set = JoinSet::new();
    for i in 0..clients {
        let delay = stream_length.mul_f64(i as f64 / clients as f64);
        set.spawn(client(
            template.clone(),
            path,
            Arc::clone(&setup.expected),
            Arc::clone(&window),
            window.to,
            delay,
            Arc::clone(&tally),
        ));
    }
    tokio::time::sleep_until(window.from.into()).await;
    let before = snapshot(service_pid, mock_pid)?;
    tokio::time::sleep(Duration::from_secs(args.seconds) / 2).await;
    let rss_open = load::rss_kib(service_pid)?.0;
    tokio::time::sleep_until(window.to.into()).await;
    let after = snapshot(service_pid, mock_pid)?;
    while let Some(joined) = set.join_next().await {
        joined?;
    }
    setup.service.ensure_running()?;
    let tally = std::mem::take(&mut *tally.lock().unwrap_or_else(|e| e.into_inner()));
    for f in &tally.failures {
        eprintln!("    {} failure: {f}", path.name());
    }
    let per = |a: Duration, b: Duration| {
        (a.saturating_sub(b)).as_secs_f64() * 1e6 / tally.completed.max(1) as f64
    };
    let (total, idle) = (
        after.machine.0.saturating_sub(before.machine.0),
        after.machine.1.saturating_sub(before.machine.1),
    );
    Ok(RunFigures {
        streams_per_s: tally.completed as f64 / args.seconds as f64,
        first_chunk: tally.first_chunk.as_ref().map_or([0; 5], summary),
        failed: tally.failed,
        completed: tally.completed,
        cpu_us: [
            if path == Path::Service {
                per(after.service, before.service)
            } else {
                0.0
            },
            per(after.mock, before.mock),
            per(after.client, before.client),
        ],
        machine_busy: if total == 0 {
            0.0
        } else {
            100.0 * (total - idle) as f64 / total as f64
        },
        memory_kib: if path == Path::Service {
            (rss_open as f64 - rss_before as f64) / clients as f64
        } else {
            0.0
        },
    })
}

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn print_run(path: Path, clients: u64, round: u64, f: &RunFigures) {
    eprintln!(
        "  C={clients} round {round} {:<7}: {:>7.1} streams/s, first chunk p50 {} p99 {} ms, \
         {} failed, CPU/stream service {:.0} µs mock {:.0} µs client {:.0} µs, machine busy {:.0} %{}",
        path.name(),
        f.streams_per_s,
        ms(f.first_chunk[0]),
        ms(f.first_chunk[2]),
        f.failed,
        f.cpu_us[0],
        f.cpu_us[1],
        f.cpu_us[2],
        f.machine_busy,
        if path == Path::Service {
            format!(", memory/open stream {:.1} KiB", f.memory_kib)
        } else {
            String::new()
        }
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let max = args.concurrency.iter().copied().max().unwrap_or(0);
    for c in &args.concurrency {
        ensure!(
            (1..=20_000).contains(c),
            "--concurrency values are 1..=20000"
        );
    }
    // Two descriptors per stream in the service, one in each of the other two.
    let limit = load::raise_open_files(max * 3 + 1024)?;
    ensure!(
        limit >= max * 2 + 256,
        "the open-file limit ({limit}) is too low for {max} streams"
    );
    let backend = Backend::prepare(&args.backend).await?;
    let mock_bin = match &args.mock_bin {
        Some(bin) => bin.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("the benchmark's folder")?
            .join("mock-provider"),
    };
    let mock = MockProcess::start(&mock_bin, args.interval_ms).await?;
    let mut service = ServiceProcess::start(ServiceOptions {
        bin: args
            .server_bin
            .clone()
            .unwrap_or_else(service::default_server_bin),
        openai_base_url: format!("http://{}/v1/", mock.addr),
        openai_api_key: MOCK_KEY.to_owned(),
        extra_env: backend.env(),
    })
    .await?;
    let account = service::create_account(&service, MODEL).await?;
    println!("# chat_pace");
    println!();
    println!(
        "{} · {} · {} chunks {} ms apart · {} s measured after {} s warm-up · {} rounds",
        load::machine(),
        backend.label(),
        args.chunks,
        args.interval_ms,
        args.seconds,
        args.warmup,
        args.rounds
    );
    println!();
    let mut setup = Setup {
        args: &args,
        service: &mut service,
        mock: &mock,
        email: account.email.clone(),
        agent_path: format!("/api/agents/{}/chat", account.agent_id),
        expected: Arc::new(Expected::new(args.chunks)),
    };
    let paths: Vec<Path> = match args.only {
        Some(p) => vec![p],
        None => vec![Path::Direct, Path::Service],
    };
    let mut rows = Vec::new();
    for &clients in &args.concurrency {
        let mut results: Vec<(Path, RunFigures)> = Vec::new();
        for round in 1..=args.rounds {
            let mut order = paths.clone();
            if round % 2 == 0 {
                order.reverse();
            }
            for path in order {
                let figures = run(&mut setup, path, clients).await?;
                print_run(path, clients, round, &figures);
                results.push((path, figures));
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        let of = |path: Path, pick: &dyn Fn(&RunFigures) -> f64| {
            median(
                results
                    .iter()
                    .filter(|(p, _)| *p == path)
                    .map(|(_, f)| pick(f))
                    .collect(),
            )
        };
        let failed: u64 = results.iter().map(|(_, f)| f.failed).sum();
        let completed: u64 = results
            .iter()
            .filter(|(p, _)| *p == Path::Service)
            .map(|(_, f)| f.completed)
            .sum();
        rows.push(format!(
            "| {clients} | {:.0} | {:.0} | {:.1} % | {} / {} | {:.0} | {:.0} / {:.0} | {:.0} / {:.0} | {:.0} % / {:.0} % | {:.1} | {completed} ({failed} failed) |",
            of(Path::Direct, &|f| f.streams_per_s),
            of(Path::Service, &|f| f.streams_per_s),
            100.0 * of(Path::Service, &|f| f.streams_per_s)
                / of(Path::Direct, &|f| f.streams_per_s).max(f64::MIN_POSITIVE),
            ms_delta(
                (of(Path::Service, &|f| f.first_chunk[0] as f64)
                    - of(Path::Direct, &|f| f.first_chunk[0] as f64)) as i64
            ),
            ms_delta(
                (of(Path::Service, &|f| f.first_chunk[2] as f64)
                    - of(Path::Direct, &|f| f.first_chunk[2] as f64)) as i64
            ),
            of(Path::Service, &|f| f.cpu_us[0]),
            of(Path::Direct, &|f| f.cpu_us[1]),
            of(Path::Service, &|f| f.cpu_us[1]),
            of(Path::Direct, &|f| f.cpu_us[2]),
            of(Path::Service, &|f| f.cpu_us[2]),
            of(Path::Direct, &|f| f.machine_busy),
            of(Path::Service, &|f| f.machine_busy),
            of(Path::Service, &|f| f.memory_kib),
        ));
    }
    println!(
        "| concurrent streams | direct streams/s | service streams/s | service / direct | added first chunk p50 / p99 (ms) | service CPU per stream (µs) | mock CPU per stream, direct / service (µs) | client CPU per stream, direct / service (µs) | machine busy, direct / service | service memory per open stream (KiB) | service streams checked |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        println!("{row}");
    }
    println!();
    println!("Medians of {} rounds per level.", args.rounds);
    drop(setup);
    drop(service);
    drop(backend);
    Ok(())
}
