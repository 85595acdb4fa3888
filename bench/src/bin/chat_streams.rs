//! # `chat_streams`: open-stream capacity, memory per open stream, no lost frames
//!
//! Starts a mock model provider in this process and the release `agentchat` binary as a child
//! process pointed at it (see [`bench::service`]), then opens `--streams` (2,000) streaming
//! chats at once (`POST /api/agents/{id}/chat` with `"stream": true`), each on its own
//! keep-alive connection, at most `--open-concurrency` of them being opened at a time.
//!
//! Every chat asks the mock for a reply of exactly `--tokens` words `w1 w2 … wN` (the
//! `[[tokens:N]]` marker) and to pause `--hold-ms` after the first word (the `[[pause:MS]]`
//! marker), so each stream stays open and idle once its first chunk has arrived; the
//! remaining words then come every `--token-interval-ms`.
//!
//! With `--http2-streams-per-connection N` the streams share HTTP/2 connections instead (h2c
//! with prior knowledge, as a proxy such as Envoy speaks to the service), `N` on each, opened
//! at the start of each round so that their memory is counted.
//!
//! ## Memory
//!
//! The service's resident memory (`VmRSS` of `/proc/<pid>/status`, with `RssAnon`, the part
//! backed by no file) is read:
//!
//! 1. after `--warmup-streams` complete streamed chats (tokenizer, connection pools and the
//!    database are warm) — the baseline;
//! 2. once every stream has received its first chunk and a settling pause has passed, while
//!    the mock reports all of them still open — **memory per open stream** = (open − baseline)
//!    / streams; this is idle streams' memory: each holds a client connection, its response
//!    body (which reads the provider's stream itself), and an upstream connection to the
//!    provider;
//! 3. after all streams have ended.
//!
//! This is one round; `--rounds` (2) repeat it, each starting from the previous one's end.
//! The figure is round 1's, from a baseline that never held that many streams; later rounds
//! show how much of the memory freed by ended streams the allocator hands out again (it does
//! not return it to the system) rather than growing.
//!
//! `--provider-tls http2` (or `http1`) serves the mock over TLS, offering HTTP/2 and
//! HTTP/1.1 (or HTTP/1.1 alone) as hosted providers do, with a certificate of the mock's
//! test authority, which the service is told to trust (`SSL_CERT_FILE`); the connections the
//! mock accepted are printed at the end.
//!
//! Each reading is the median of several samples. The service's open file descriptors
//! (`/proc/<pid>/fd`) are counted at the same moments.
//!
//! ## Frames
//!
//! Every stream must deliver the chunks `w1`, ` w2`, … ` wN` in this order and nothing else,
//! then `data: [DONE]`, then end; heartbeat comments (`: ping`) are allowed. Any missing,
//! extra or reordered frame, error event, early end, non-200 answer or connection failure
//! counts the stream as failed. The mock must also report every upstream stream as written to
//! its end, none cancelled.
//!
//! The open-file limit of this process (inherited by the service) is raised to what the run
//! needs, up to the hard limit: each stream costs two descriptors in each process.
//!
//! ```text
//! cargo build --release -p bench -p server --bin agentchat
//! target/release/chat_streams --streams 2000 --hold-ms 30000
//! ```

use std::{
    path::PathBuf,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use anyhow::{bail, ensure, Context};
use bench::{
    load::{self, connect, histogram, ms, record, summary, RequestTemplate, SseEvent, SseParser},
    service::{self, ServiceOptions, ServiceProcess},
};
use clap::Parser;
use hdrhistogram::Histogram;
use http_body_util::BodyExt;
use mock_provider::{MockConfig, MockProvider, MockTls, TEST_CA_PEM};
use serde_json::{json, Value};
use tokio::{sync::Semaphore, task::JoinSet};

/// The model of the benchmark agent (offered by the mock).
const MODEL: &str = "gpt-4o-mini";
/// The key the mock requires.
const MOCK_KEY: &str = "bench-mock-key";
/// Samples per memory reading (the median is kept).
const RSS_SAMPLES: usize = 5;
/// How many failure descriptions are printed.
const FAILURES_SHOWN: usize = 5;

/// Opens many streaming chats at once and measures the service's memory per open stream,
/// then checks that every stream delivered all its frames in order. See the documentation at
/// the top of this binary's source for the method.
#[derive(Parser, Debug)]
#[command(name = "chat_streams", version, about, long_about = None)]
struct Args {
    /// Streams open at the same time.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=20_000))]
    streams: u64,
    /// Milliseconds each reply pauses after its first chunk (how long streams stay open).
    #[arg(long, default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1_000..=600_000))]
    hold_ms: u64,
    /// Words per reply: one chunk each.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(2..=10_000))]
    tokens: u64,
    /// Milliseconds between two chunks after the pause.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    token_interval_ms: u64,
    /// Streams being opened (not yet at their first chunk) at most at a time.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=20_000))]
    open_concurrency: u64,
    /// Complete streamed chats before the baseline memory reading.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(0..=20_000))]
    warmup_streams: u64,
    /// Rounds: each opens all the streams and waits for their end. Round 1 gives the memory
    /// figure; later ones show whether the memory of ended streams is reused.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=10))]
    rounds: u64,
    /// Milliseconds waited after the last stream opened before reading memory.
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    settle_ms: u64,
    /// The `agentchat` binary (default: `target/release/agentchat` of this workspace).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// Serve the mock provider over TLS, offering HTTP/2 and HTTP/1.1 (`http2`) or HTTP/1.1
    /// alone (`http1`); plain HTTP/1.1 when absent.
    #[arg(long, value_enum)]
    provider_tls: Option<ProviderTls>,
    /// Send the streams over HTTP/2 connections (h2c with prior knowledge), this many on each;
    /// 0: one HTTP/1.1 connection per stream.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=100))]
    http2_streams_per_connection: u64,
}

/// How a stream's request reaches the service.
#[derive(Clone)]
enum Sender {
    /// A new HTTP/1.1 connection of its own.
    Http1,
    /// A stream on a shared HTTP/2 connection.
    Http2(load::Http2Conn),
}

/// How the mock provider is served over TLS (`--provider-tls`).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ProviderTls {
    Http2,
    Http1,
}

/// How one stream went.
#[derive(Debug, Default)]
struct StreamOutcome {
    /// Time from sending the request to the first chunk.
    first_chunk: Option<Duration>,
    /// Chunks received in the expected order.
    chunks: u64,
    /// Heartbeat comments received.
    heartbeats: u64,
    /// Why the stream failed, if it did.
    failure: Option<String>,
}

/// Counts streams that reached their first chunk (or failed before it).
#[derive(Debug, Default)]
struct Progress {
    opened: AtomicUsize,
    failed_before_open: AtomicUsize,
}

/// One streamed chat, checked frame by frame. `opening` is released at the first chunk.
async fn one_stream(
    template: &RequestTemplate,
    sender: Sender,
    tokens: u64,
    opening: Option<tokio::sync::OwnedSemaphorePermit>,
    progress: &Progress,
) -> StreamOutcome {
    let mut outcome = StreamOutcome::default();
    let mut opening = opening;
    if let Err(error) = read_stream(
        template,
        sender,
        tokens,
        &mut opening,
        progress,
        &mut outcome,
    )
    .await
    {
        outcome.failure = Some(format!("{error:#}"));
    }
    if opening.is_some() {
        progress.failed_before_open.fetch_add(1, Ordering::SeqCst);
    }
    outcome
}

async fn read_stream(
    template: &RequestTemplate,
    sender: Sender,
    tokens: u64,
    opening: &mut Option<tokio::sync::OwnedSemaphorePermit>,
    progress: &Progress,
    outcome: &mut StreamOutcome,
) -> anyhow::Result<()> {
    let started = Instant::now();
    // The HTTP/1.1 connection is kept until the stream has been read.
    let (response, _http1) = match sender {
        Sender::Http1 => {
            let mut conn = connect(template.addr).await?;
            conn.ready().await?;
            (conn.send_request(template.request()).await?, Some(conn))
        }
        Sender::Http2(mut conn) => {
            conn.ready().await?;
            (conn.send_request(template.request_absolute()).await?, None)
        }
    };
    let status = response.status();
    let mut body = response.into_body();
    if status != hyper::StatusCode::OK {
        let bytes = body.collect().await?.to_bytes();
        bail!("status {status}: {}", String::from_utf8_lossy(&bytes));
    }
    let mut parser = SseParser::default();
    let mut done = false;
    while let Some(frame) = body.frame().await {
        let frame = frame.context("reading the stream")?;
        let Some(bytes) = frame.data_ref() else {
            continue;
        };
        for event in parser.push(bytes) {
            let data = match event {
                SseEvent::Comment => {
                    outcome.heartbeats += 1;
                    continue;
                }
                SseEvent::Data(data) => data,
            };
            ensure!(!done, "an event after [DONE]: {data}");
            if data == "[DONE]" {
                done = true;
                continue;
            }
            let event: Value = serde_json::from_str(&data)
                .with_context(|| format!("an event is not JSON: {data}"))?;
            ensure!(event.get("error").is_none(), "an error event: {data}");
            let chunk = event
                .get("chunk")
                .and_then(Value::as_str)
                .with_context(|| format!("an event without chunk: {data}"))?;
            let index = outcome.chunks + 1;
            let expected = if index == 1 {
                "w1".to_owned()
            } else {
                format!(" w{index}")
            };
            ensure!(
                chunk == expected,
                "frame {index}: expected {expected:?}, got {chunk:?}"
            );
            outcome.chunks = index;
            if index == 1 {
                outcome.first_chunk = Some(started.elapsed());
                if opening.take().is_some() {
                    progress.opened.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    }
    ensure!(
        parser.pending() == 0,
        "{} bytes after the last event",
        parser.pending()
    );
    ensure!(done, "the stream ended without data: [DONE]");
    ensure!(
        outcome.chunks == tokens,
        "{} of {tokens} chunks received",
        outcome.chunks
    );
    Ok(())
}

/// The median of several `(VmRSS, RssAnon)` readings 200 ms apart, in KiB.
async fn rss(pid: u32) -> anyhow::Result<(u64, u64)> {
    let mut samples = Vec::with_capacity(RSS_SAMPLES);
    for index in 0..RSS_SAMPLES {
        if index > 0 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        samples.push(load::rss_kib(pid)?);
    }
    let mut total: Vec<u64> = samples.iter().map(|s| s.0).collect();
    let mut anon: Vec<u64> = samples.iter().map(|s| s.1).collect();
    total.sort_unstable();
    anon.sort_unstable();
    Ok((total[RSS_SAMPLES / 2], anon[RSS_SAMPLES / 2]))
}

/// Open file descriptors of process `pid`.
fn open_fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |dir| dir.count() as u64)
}

/// Threads of process `pid`.
fn threads(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |dir| dir.count() as u64)
}

/// A memory reading of the service.
#[derive(Debug, Clone, Copy)]
struct Reading {
    rss_kib: u64,
    anon_kib: u64,
    fds: u64,
    threads: u64,
}

async fn reading(pid: u32) -> anyhow::Result<Reading> {
    let (rss_kib, anon_kib) = rss(pid).await?;
    Ok(Reading {
        rss_kib,
        anon_kib,
        fds: open_fds(pid),
        threads: threads(pid),
    })
}

/// Runs `count` streams, `concurrency` being opened at a time, over HTTP/1.1 or over HTTP/2
/// connections opened first, `http2_per_connection` streams on each (when not 0); returns
/// their outcomes once all have ended.
async fn spawn_streams(
    template: &RequestTemplate,
    tokens: u64,
    count: u64,
    concurrency: u64,
    http2_per_connection: u64,
    progress: &Arc<Progress>,
) -> anyhow::Result<JoinSet<StreamOutcome>> {
    let mut http2 = Vec::new();
    if http2_per_connection > 0 {
        for _ in 0..count.div_ceil(http2_per_connection) {
            http2.push(load::connect_http2(template.addr).await?);
        }
    }
    let semaphore = Arc::new(Semaphore::new(concurrency as usize));
    let mut set = JoinSet::new();
    for index in 0..count {
        let semaphore = Arc::clone(&semaphore);
        let template = template.clone();
        let progress = Arc::clone(progress);
        let sender = match index.checked_div(http2_per_connection) {
            Some(connection) => Sender::Http2(http2[connection as usize].clone()),
            None => Sender::Http1,
        };
        set.spawn(async move {
            let permit = semaphore.acquire_owned().await.ok();
            one_stream(&template, sender, tokens, permit, &progress).await
        });
    }
    Ok(set)
}

/// What a batch of streams gave.
struct Batch {
    ok: u64,
    failures: Vec<String>,
    failed: u64,
    first_chunk: Histogram<u64>,
    heartbeats: u64,
}

async fn collect(mut set: JoinSet<StreamOutcome>) -> anyhow::Result<Batch> {
    let mut batch = Batch {
        ok: 0,
        failures: Vec::new(),
        failed: 0,
        first_chunk: histogram(),
        heartbeats: 0,
    };
    while let Some(outcome) = set.join_next().await {
        let outcome = outcome?;
        if let Some(first) = outcome.first_chunk {
            record(&mut batch.first_chunk, first);
        }
        batch.heartbeats += outcome.heartbeats;
        match outcome.failure {
            None => batch.ok += 1,
            Some(failure) => {
                batch.failed += 1;
                if batch.failures.len() < FAILURES_SHOWN {
                    batch.failures.push(failure);
                }
            }
        }
    }
    Ok(batch)
}

fn kib(value: u64) -> String {
    format!("{:.1} MiB", value as f64 / 1024.0)
}

/// What one round measured.
struct Round {
    before: Reading,
    open: Reading,
    after: Reading,
    opened: usize,
    open_time: Duration,
    /// Upstream streams the mock reported open just before and just after the open reading.
    upstream_open: (usize, usize),
    measured_at: Duration,
    all_done: Duration,
    streams: Batch,
    completed: usize,
    cancelled: usize,
}

impl Round {
    /// (open − before) / opened streams, in KiB.
    fn per_stream(&self, pick: impl Fn(&Reading) -> u64) -> f64 {
        (pick(&self.open) as f64 - pick(&self.before) as f64) / self.opened.max(1) as f64
    }

    /// Every stream was open at the memory reading, and every one delivered all its frames.
    fn all_open(&self, total: usize) -> bool {
        self.opened == total && self.upstream_open.0 == total && self.upstream_open.1 == total
    }

    fn no_lost_frames(&self, total: usize) -> bool {
        self.streams.failed == 0
            && self.streams.ok == total as u64
            && self.completed == total
            && self.cancelled == 0
    }
}

/// Opens all streams, reads memory while they are open and idle, waits for their end.
async fn round(
    args: &Args,
    service: &mut ServiceProcess,
    mock: &MockProvider,
    template: &RequestTemplate,
    before: Reading,
) -> anyhow::Result<Round> {
    let pid = service.pid()?;
    let completed_before = mock.completed_streams();
    let cancelled_before = mock.cancelled_streams();
    let progress = Arc::new(Progress::default());
    let started = Instant::now();
    let set = spawn_streams(
        template,
        args.tokens,
        args.streams,
        args.open_concurrency,
        args.http2_streams_per_connection,
        &progress,
    )
    .await?;
    let total = args.streams as usize;
    let open_deadline = started + Duration::from_millis(args.hold_ms);
    loop {
        let opened = progress.opened.load(Ordering::SeqCst);
        let failed = progress.failed_before_open.load(Ordering::SeqCst);
        if opened + failed >= total {
            break;
        }
        if Instant::now() > open_deadline {
            bail!("only {opened} of {total} streams opened within --hold-ms ({failed} failed)");
        }
        service.ensure_running()?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let open_time = started.elapsed();
    let opened = progress.opened.load(Ordering::SeqCst);
    eprintln!(
        "{opened} streams opened in {:.2} s ({} failed); the mock reports {} open",
        open_time.as_secs_f64(),
        total - opened,
        mock.open_streams()
    );
    tokio::time::sleep(Duration::from_millis(args.settle_ms)).await;
    let upstream_before = mock.open_streams();
    let open = reading(pid).await?;
    let upstream_after = mock.open_streams();
    let measured_at = started.elapsed();
    eprintln!(
        "with streams open: RSS {} (anonymous {}), {} fds; upstream streams open {upstream_before} → {upstream_after}",
        kib(open.rss_kib),
        kib(open.anon_kib),
        open.fds,
    );
    let streams = collect(set).await?;
    let all_done = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = reading(pid).await?;
    service.ensure_running()?;
    eprintln!(
        "all ended: {} ok, {} failed; RSS {}",
        streams.ok,
        streams.failed,
        kib(after.rss_kib)
    );
    Ok(Round {
        before,
        open,
        after,
        opened,
        open_time,
        upstream_open: (upstream_before, upstream_after),
        measured_at,
        all_done,
        streams,
        completed: mock.completed_streams() - completed_before,
        cancelled: mock.cancelled_streams() - cancelled_before,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let needed = 2 * args.streams.max(args.warmup_streams) + 1024;
    let limit = load::raise_open_files(needed)?;
    ensure!(
        limit >= needed,
        "the open-file limit is {limit}, {needed} are needed: raise it (ulimit -n) or open fewer streams"
    );
    eprintln!("machine: {}", load::machine());

    let mock = MockProvider::start(MockConfig {
        api_key: Some(MOCK_KEY.to_owned()),
        token_interval: Duration::from_millis(args.token_interval_ms),
        record_requests: false,
        tls: args.provider_tls.map(|tls| MockTls {
            http2: matches!(tls, ProviderTls::Http2),
        }),
        ..MockConfig::default()
    })
    .await?;
    let mut extra_env = Vec::new();
    let authority = tempfile::NamedTempFile::new()?;
    if args.provider_tls.is_some() {
        std::fs::write(authority.path(), TEST_CA_PEM)?;
        extra_env.push((
            "SSL_CERT_FILE".to_owned(),
            authority.path().display().to_string(),
        ));
    }
    if args.hold_ms >= 50_000 {
        // The service gives up on a provider silent for PROVIDER_TIMEOUT_SECS (60 s).
        extra_env.push((
            "PROVIDER_TIMEOUT_SECS".to_owned(),
            (args.hold_ms / 1000 + 60).to_string(),
        ));
    }
    let mut service = ServiceProcess::start(ServiceOptions {
        bin: args
            .server_bin
            .clone()
            .unwrap_or_else(service::default_server_bin),
        openai_base_url: mock.base_url(),
        openai_api_key: MOCK_KEY.to_owned(),
        extra_env,
    })
    .await?;
    let pid = service.pid()?;
    let account = service::create_account(&service, MODEL).await?;
    let path = format!("/api/agents/{}/chat", account.agent_id);
    let template = |message: String| {
        RequestTemplate::post_json(
            service.addr(),
            &path,
            &account.token,
            &json!({"message": message, "stream": true}),
        )
    };
    eprintln!("service pid {pid} on {}", service.base_url());

    // Warm-up: complete streams, no pause.
    let started = Instant::now();
    let warm = template(format!("Warm up [[tokens:{}]]", args.tokens))?;
    let warmup = collect(
        spawn_streams(
            &warm,
            args.tokens,
            args.warmup_streams,
            args.open_concurrency,
            args.http2_streams_per_connection,
            &Arc::new(Progress::default()),
        )
        .await?,
    )
    .await?;
    ensure!(
        warmup.failed == 0,
        "{} warm-up streams failed: {:?}",
        warmup.failed,
        warmup.failures
    );
    eprintln!(
        "warm-up: {} streams in {:.1} s",
        warmup.ok,
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut before = reading(pid).await?;
    eprintln!(
        "baseline: RSS {} (anonymous {}), {} fds, {} threads",
        kib(before.rss_kib),
        kib(before.anon_kib),
        before.fds,
        before.threads
    );

    let hold = template(format!(
        "Hold [[tokens:{}]] [[pause:{}]]",
        args.tokens, args.hold_ms
    ))?;
    let mut rounds = Vec::new();
    for index in 1..=args.rounds {
        eprintln!("round {index}:");
        let result = round(&args, &mut service, &mock, &hold, before).await?;
        before = result.after;
        rounds.push(result);
    }

    // The report.
    let total = args.streams as usize;
    println!("machine: {}\n", load::machine());
    println!(
        "{} streams per round, each {} chunks with a {} ms pause after the first and {} ms between the others; {} opened at a time; {} warm-up streams before round 1.\n",
        args.streams, args.tokens, args.hold_ms, args.token_interval_ms, args.open_concurrency, args.warmup_streams
    );
    println!("| round | moment | service RSS | anonymous RSS | open fds | threads |");
    println!("|---|---|---:|---:|---:|---:|");
    for (index, result) in rounds.iter().enumerate() {
        for (label, value) in [
            ("before", result.before),
            ("all streams open and idle", result.open),
            ("after all streams ended", result.after),
        ] {
            println!(
                "| {} | {label} | {} | {} | {} | {} |",
                index + 1,
                kib(value.rss_kib),
                kib(value.anon_kib),
                value.fds,
                value.threads
            );
        }
    }
    println!();
    print!("| measure |");
    for index in 1..=rounds.len() {
        print!(" round {index} |");
    }
    println!();
    println!("|---|{}", "---:|".repeat(rounds.len()));
    let line = |label: &str, value: &dyn Fn(&Round) -> String| {
        let cells: Vec<String> = rounds.iter().map(value).collect();
        println!("| {label} | {} |", cells.join(" | "));
    };
    line(
        "streams open at the same time (upstream, as the mock saw them)",
        &|r| format!("{} of {total} ({})", r.opened, r.upstream_open.1),
    );
    line("time to open them all", &|r| {
        format!("{:.2} s", r.open_time.as_secs_f64())
    });
    line("first chunk p50 / p99 / max", &|r| {
        let [p50, _, p99, _, max] = summary(&r.streams.first_chunk);
        format!("{} / {} / {} ms", ms(p50), ms(p99), ms(max))
    });
    line("**memory per open stream** (ΔRSS / streams)", &|r| {
        format!("**{:.1} KiB**", r.per_stream(|v| v.rss_kib))
    });
    line("anonymous memory per open stream", &|r| {
        format!("{:.1} KiB", r.per_stream(|v| v.anon_kib))
    });
    line("streams with every frame in order and `[DONE]`", &|r| {
        format!("{} of {total}", r.streams.ok)
    });
    line("failed streams", &|r| r.streams.failed.to_string());
    line("upstream streams completed / cancelled (mock)", &|r| {
        format!("{} / {}", r.completed, r.cancelled)
    });
    line("heartbeat comments received", &|r| {
        r.streams.heartbeats.to_string()
    });
    line(
        "memory read at / last stream ended at (from the first request)",
        &|r| {
            format!(
                "{:.1} s / {:.1} s",
                r.measured_at.as_secs_f64(),
                r.all_done.as_secs_f64()
            )
        },
    );
    for (index, result) in rounds.iter().enumerate() {
        for failure in &result.streams.failures {
            println!("\n- round {} failure: {failure}", index + 1);
        }
    }
    let first = &rounds[0];
    let all_ok = rounds
        .iter()
        .all(|r| r.all_open(total) && r.no_lost_frames(total));
    let per_stream = first.per_stream(|v| v.rss_kib);
    println!(
        "\nTargets: {} concurrent streams with no lost frames: **{}**; ≤ 16 KiB of server memory per open stream (round 1, from a baseline that never held them): **{}** ({per_stream:.1} KiB).",
        args.streams,
        if all_ok { "met" } else { "missed" },
        if per_stream <= 16.0 && first.all_open(total) {
            "met"
        } else {
            "missed"
        },
    );
    let (connections, http2) = mock.connections();
    println!(
        "Connections the mock provider accepted: {connections}, {http2} of them HTTP/2 (provider TLS: {:?}).",
        args.provider_tls
    );
    match args.http2_streams_per_connection {
        0 => println!("Each stream had an HTTP/1.1 connection of its own to the service."),
        per => println!(
            "Streams shared HTTP/2 connections to the service, {per} on each ({} connections).",
            args.streams.div_ceil(per)
        ),
    }
    drop(service);
    drop(mock);
    Ok(())
}
