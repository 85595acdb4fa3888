//! # `turn_batches`: PostgreSQL's CPU per stored chat turn, by batch size
//!
//! The service's turn writer (`chat::writer`) hands `ChatStore::record_turns` the turns that
//! ended together, up to 256 in one transaction. On PostgreSQL a batch of four turns or more
//! goes in two statements whatever its size (its columns bound as arrays), a smaller one in
//! a statement per turn. This shows what each costs the database server.
//!
//! ## What is measured
//!
//! For each size of `--batch-sizes`, `--turns` turns are stored through the service's
//! `PgStore::record_turns`, in batches of that size, one after another. Each turn starts a new
//! conversation, as the streams of `chat_resume` do: a question of 8 words, then a reply of 60
//! drawn from a small vocabulary. The sizes take turns over `--rounds` rounds, on one
//! scratch database of the `--database-url` server (dropped at the end), after an unmeasured
//! round of 500 turns. For each batch size:
//!
//! - **PostgreSQL's CPU per turn**: the user and system time of every `postgres` process
//!   of this machine (`/proc/PID/stat`), from before the turns to after them. The server
//!   must run on this machine, and nothing else should use it meanwhile;
//! - **wall time per turn**, as the caller waits for it.
//!
//! ```text
//! cargo build --release -p bench --bin turn_batches
//! $CARGO_TARGET_DIR/release/turn_batches --database-url postgres://postgres@127.0.0.1:5432/postgres
//! ```

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use agentchat::{
    domain::{Channel, Role},
    ids::{AgentId, ThreadId, UserId},
    store::{postgres::PgStore, Store, ThreadRecord, TurnRecord},
};
use anyhow::{ensure, Context};
use bench::{
    kb::{self, Rng},
    load,
};
use chrono::Utc;
use clap::Parser;
use test_support::scratch::ScratchDatabase;

/// Turns of the unmeasured first round.
const WARMUP_TURNS: usize = 500;

/// The words replies are drawn from.
const WORDS: [&str; 20] = [
    "the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "tokens",
    "stream", "from", "model", "reply", "to", "user", "in", "small", "chunks",
];

/// PostgreSQL's CPU per stored chat turn, by batch size. See the binary's documentation.
#[derive(Parser, Debug)]
#[command(name = "turn_batches", version, about, long_about = None)]
struct Args {
    /// The PostgreSQL server (on this machine) the scratch database is created on.
    #[arg(long)]
    database_url: String,
    /// The batch sizes measured, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 3, 4, 8, 32, 256])]
    batch_sizes: Vec<usize>,
    /// Turns stored at each size in each round.
    #[arg(long, default_value_t = 2048)]
    turns: usize,
    /// Rounds; the sizes take turns within each.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

/// CPU time of every `postgres` process of this machine so far ([`load::cpu_time`]);
/// processes that end meanwhile drop out.
fn postgres_cpu() -> Duration {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Duration::ZERO;
    };
    entries
        .flatten()
        .filter(|entry| {
            std::fs::read_to_string(entry.path().join("comm"))
                .is_ok_and(|comm| comm.trim_end() == "postgres")
        })
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| load::cpu_time(pid).ok())
        .sum()
}

fn words(rng: &mut Rng, n: usize) -> String {
    (0..n)
        .map(|_| WORDS[rng.below(WORDS.len())])
        .collect::<Vec<_>>()
        .join(" ")
}

/// A new conversation's first turn: a question and its reply a second later.
fn turn(user: &UserId, agent: &AgentId, rng: &mut Rng) -> TurnRecord {
    let at = Utc::now();
    let thread = ThreadRecord {
        id: ThreadId::new(),
        agent_id: agent.clone(),
        user_id: user.clone(),
        title: words(rng, 4),
        message_count: 0,
        channel: Channel::Api,
        feedback_up: 0,
        feedback_down: 0,
        created_at: at,
        updated_at: at,
    };
    let messages = vec![
        kb::message(&thread.id, Role::User, words(rng, 8), at),
        kb::message(
            &thread.id,
            Role::Assistant,
            words(rng, 60),
            at + chrono::Duration::seconds(1),
        ),
    ];
    TurnRecord {
        thread,
        new_thread: true,
        messages,
        channel: None,
    }
}

/// Stores `turns` turns in batches of `size`; answers PostgreSQL's CPU and the wall time,
/// in seconds.
async fn store_turns(
    store: &dyn Store,
    (user, agent): (&UserId, &AgentId),
    size: usize,
    turns: usize,
    rng: &mut Rng,
) -> anyhow::Result<(f64, f64)> {
    let batches: Vec<Vec<TurnRecord>> = (0..turns.div_ceil(size))
        .map(|b| {
            (0..size.min(turns - b * size))
                .map(|_| turn(user, agent, rng))
                .collect()
        })
        .collect();
    let cpu = postgres_cpu();
    let started = Instant::now();
    for batch in &batches {
        let stored = store.record_turns(batch).await?;
        ensure!(
            stored.iter().all(|s| *s),
            "a turn of a batch of {size} was not stored"
        );
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu = postgres_cpu().saturating_sub(cpu).as_secs_f64();
    Ok((cpu, wall))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    ensure!(
        !args.batch_sizes.is_empty() && args.batch_sizes.iter().all(|s| *s > 0),
        "--batch-sizes must list sizes of at least 1"
    );
    ensure!(
        !postgres_cpu().is_zero(),
        "no postgres process runs on this machine: its CPU cannot be read"
    );
    let scratch = ScratchDatabase::create(&args.database_url)
        .await
        .context("creating a scratch database")?;
    let store = PgStore::connect(
        scratch.url(),
        agentchat::store::postgres::DEFAULT_MAX_CONNECTIONS,
    )
    .await?;
    store.migrate().await?;
    let store: Arc<dyn Store> = Arc::new(store);
    let (user, agent) = kb::create_user_and_agent(store.as_ref(), "Turns").await?;
    let mut rng = Rng::new(7);
    store_turns(store.as_ref(), (&user, &agent), 8, WARMUP_TURNS, &mut rng).await?;

    let mut results: Vec<Vec<(f64, f64)>> = vec![Vec::new(); args.batch_sizes.len()];
    for round in 1..=args.rounds {
        for (i, &size) in args.batch_sizes.iter().enumerate() {
            let (cpu, wall) =
                store_turns(store.as_ref(), (&user, &agent), size, args.turns, &mut rng).await?;
            let per_turn = |s: f64| s * 1e6 / args.turns as f64;
            eprintln!(
                "round {round}, batches of {size}: PostgreSQL {:.0} µs and wall {:.0} µs per turn",
                per_turn(cpu),
                per_turn(wall)
            );
            results[i].push((per_turn(cpu), per_turn(wall)));
        }
    }
    // The scratch database is dropped once no connection holds it.
    drop(store);
    drop(scratch);

    println!(
        "turn_batches: {} turns per batch size and round, {} rounds; each turn a new \
         conversation (a question of 8 words, a reply of 60)\n",
        args.turns, args.rounds
    );
    println!("| batch size | PostgreSQL's CPU per turn (rounds in order) | wall time per turn |");
    println!("|---:|---|---|");
    for (size, runs) in args.batch_sizes.iter().zip(&results) {
        let list = |f: fn(&(f64, f64)) -> f64| {
            runs.iter()
                .map(|r| format!("{:.0}", f(r)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!("| {size} | {} µs | {} µs |", list(|r| r.0), list(|r| r.1));
    }
    Ok(())
}
