//! # `webhook_throughput`: webhook deliveries per second through the real worker
//!
//! ## What is measured
//!
//! The service is built in this process as `agentchat serve` builds it
//! (`startup::Application::build`, a real SQLite database in a temporary folder), with one
//! account and one webhook subscribed to `agent.created` whose URL is a receiver on
//! loopback (allowed through `ALLOWED_PRIVATE_HOSTS`). `--events` events are emitted
//! through the service's own emitter (`Events::emit`, one delivery row each) while no
//! delivery worker runs (`JOB_WORKERS=0`); then the service's delivery worker
//! (`webhooks::worker::spawn`) is started and the clock runs until the receiver has
//! answered 200 to every message. Every request the receiver gets is checked: its
//! `webhook-signature` must match the Standard Webhooks v1 signature of its `webhook-id`,
//! `webhook-timestamp` and body under the webhook's secret, and every message id must
//! arrive (at least once).
//!
//! Each delivery costs: its share of a claim (one `UPDATE … RETURNING` per batch of up to
//! 32), decrypting the secret (AES-256-GCM), signing (HMAC-SHA256), the POST through the
//! SSRF-guarded client (connections reused), and recording the attempt (one transaction).
//! The receiver runs in the same process and shares its cores.
//!
//! ## Reading the output
//!
//! `emit`: events queued per second by one task (the cost an action pays to emit when a
//! webhook subscribed). `delivered`: deliveries per second from the worker's start to the
//! last 200 — the figure of BENCHMARKS.md.
//!
//! ```text
//! export CARGO_TARGET_DIR=$HOME/.cache/agentchat/target
//! cargo build --release -p bench --bin webhook_throughput && $CARGO_TARGET_DIR/release/webhook_throughput --events 10000
//! ```

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use agentchat::{
    config::Config,
    ids::WebhookId,
    startup::Application,
    store::webhooks::WebhookRecord,
    webhooks::{new_secret, sign, EventType},
};
use anyhow::ensure;
use axum::{body::Bytes, extract::State, http::HeaderMap, routing::post, Router};
use bench::{kb::create_verified_user, load};
use clap::Parser;
use serde_json::json;

/// Deliveries per second through the real delivery worker to a loopback receiver.
#[derive(Parser, Debug)]
#[command(name = "webhook_throughput", version, about, long_about = None)]
struct Args {
    /// Events emitted (one delivery each).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    events: u64,
}

#[derive(Default)]
struct Seen {
    ids: HashSet<String>,
    requests: u64,
    bad_signatures: u64,
}

#[derive(Clone)]
struct Receiver {
    key: Arc<Vec<u8>>,
    seen: Arc<Mutex<Seen>>,
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> &'static str {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let id = header("webhook-id");
    let timestamp: i64 = header("webhook-timestamp").parse().unwrap_or_default();
    let valid = sign(&r.key, &id, timestamp, &body) == header("webhook-signature");
    let mut seen = r.seen.lock().unwrap();
    seen.requests += 1;
    if valid {
        seen.ids.insert(id);
    } else {
        seen.bad_signatures += 1;
    }
    "ok"
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let events = args.events;
    println!("webhook_throughput: {events} events to one webhook through the delivery worker");
    println!("machine: {}", load::machine());
    let (_, key) = new_secret();
    let receiver = Receiver {
        key: Arc::new(key.clone()),
        seen: Arc::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let receiver_addr = listener.local_addr()?;
    let router = Router::new()
        .route("/hook", post(receive))
        .with_state(receiver.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });

    let dir = tempfile::Builder::new()
        .prefix("agentchat-webhooks-")
        .tempdir()?;
    let mut config = Config::with_data_dir(dir.path().to_path_buf(), "127.0.0.1:0".parse()?)?;
    config.outbound.allowed_private_hosts = vec![format!("127.0.0.1:{}", receiver_addr.port())];
    // The queue is filled first; the delivery worker is started below, on the clock.
    config.jobs.workers = 0;
    let app = Application::build(config).await?;
    let state = app.state.clone();
    tokio::spawn(app.run_until_stopped(std::future::pending()));

    let user_id = create_verified_user(&*state.store).await?;
    let now = chrono::Utc::now();
    let webhook_id = WebhookId::new();
    let sealed = state.webhooks.secrets.seal(&user_id, &webhook_id, &key)?;
    let created = state
        .store
        .create_webhook(
            &WebhookRecord {
                id: webhook_id,
                user_id: user_id.clone(),
                url: format!("http://127.0.0.1:{}/hook", receiver_addr.port()),
                events: vec![EventType::AgentCreated],
                description: "bench".into(),
                secret_sealed: sealed,
                active: true,
                disabled_reason: None,
                created_at: now,
            },
            20,
        )
        .await?;
    ensure!(created, "the webhook was not created");

    let started = Instant::now();
    for n in 0..events {
        state
            .webhooks
            .events
            .emit(
                &user_id,
                EventType::AgentCreated,
                json!({"agent": {"id": format!("agent-{n}"), "name": "Bench agent"}}),
            )
            .await;
    }
    let emitted = started.elapsed();
    let started = Instant::now();
    agentchat::webhooks::worker::spawn(state.webhooks.clone());
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let delivered = receiver.seen.lock().unwrap().ids.len() as u64;
        if delivered >= events {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "only {delivered} of {events} deliveries arrived within 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let elapsed = started.elapsed();
    let seen = receiver.seen.lock().unwrap();
    ensure!(
        seen.bad_signatures == 0,
        "{} requests had a bad signature",
        seen.bad_signatures
    );
    let rate = events as f64 / elapsed.as_secs_f64();
    println!(
        "emit: {events} events queued in {:.2} s = {:.0} events/s",
        emitted.as_secs_f64(),
        events as f64 / emitted.as_secs_f64()
    );
    println!(
        "delivered: {events} signed deliveries (all verified, {} requests) in {:.2} s = {rate:.0} deliveries/s",
        seen.requests,
        elapsed.as_secs_f64()
    );
    println!(
        "reproduce: cargo build --release -p bench --bin webhook_throughput && \
         $CARGO_TARGET_DIR/release/webhook_throughput --events {events}"
    );
    Ok(())
}
