//! The `agentchat` command: `serve` (default), `migrate`, `eval-retrieval`, `copy-data`,
//! `admin`, and the internal `extract`.

use agentchat::{
    config::{env_value, unset_blank_env, Config, Role, Settings},
    domain::Email,
    knowledge::{
        embed::Embedder,
        eval,
        search::{
            retrieve::{self, Mode, Retriever},
            vectors::VectorCache,
            ChunkSearch,
        },
    },
    startup::{Application, Runtimes},
    store,
};
use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// The allocator: jemalloc, which keeps its bookkeeping apart from the blocks, so the unwritten
/// pages of open streams' mostly empty buffers stay out of memory (BENCHMARKS.md).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// AgentChat: a self-hostable service that hosts configurable AI agents.
///
/// Configuration comes from the environment and a `.env` file (see README.md
/// § Configuration, and `agentchat serve --help` for every variable).
#[derive(Parser)]
#[command(
    name = "agentchat",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("AGENTCHAT_BUILD_COMMIT"), ")"),
    about
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API and the dashboard on LEPTOS_SITE_ADDR, and run the background workers
    /// (the default command).
    ///
    /// Every setting below is read from its environment variable, or from a `.env` file in
    /// the working directory, unless given as an option; a variable set to an empty value
    /// counts as unset.
    #[command(after_help = SERVE_AFTER_HELP)]
    Serve {
        /// What this instance runs: `web` (the API and the dashboard, no background
        /// workers), `worker` (the workers; the listener answers only /api/health and
        /// /api/health/ready) or `all` (both).
        #[arg(long, value_enum, env = "AGENTCHAT_ROLE", default_value_t = Role::All)]
        role: Role,
        #[command(flatten)]
        settings: Box<Settings>,
    },
    /// Apply database migrations and exit.
    Migrate,
    /// Measure retrieval on a question set: prints hit@1, hit@5 and MRR per ranking, for all
    /// questions and per kind.
    ///
    /// QUESTIONS is a JSON Lines file of `{"q": "...", "expect": ["page.html" or "document
    /// name"], "kind": "keyword" | "paraphrase"}`. The embeddings and the fusion use
    /// EMBEDDING_MODEL as `serve` would; without it only BM25 is measured.
    EvalRetrieval {
        /// The agent whose knowledge base answers.
        #[arg(long)]
        agent: String,
        /// The question set (JSON Lines).
        questions: std::path::PathBuf,
        /// Also print each question with the rank of its first relevant chunk.
        #[arg(long)]
        verbose: bool,
    },
    /// Copy a whole SQLite installation into an empty PostgreSQL database (accounts,
    /// sessions, API keys, agents, conversations, documents with chunks, embeddings and
    /// uploads, jobs, integrations, webhooks and deliveries), then compare row counts.
    ///
    /// Uploads are read from UPLOADS (default DATA_DIR/uploads).
    CopyData {
        /// The source, `sqlite://path/to/agentchat.db`.
        #[arg(long)]
        from: String,
        /// The target, `postgres://user@host/database` (migrated and empty).
        #[arg(long)]
        to: String,
        /// The folder of the source's uploads.
        #[arg(long)]
        uploads: Option<std::path::PathBuf>,
    },
    /// Account administration.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
    /// Serve document extraction tasks over standard input and output (started by the
    /// server itself for every upload and crawled page; see `knowledge::sandbox`).
    #[command(hide = true)]
    Extract {
        /// Address-space limit of this process in bytes (0: none).
        #[arg(long, default_value_t = 0)]
        memory_limit: u64,
    },
}

/// The variables read outside the configuration: by the logger, and by the model providers'
/// TLS clients (README.md § Configuration).
const SERVE_AFTER_HELP: &str = "Logging: RUST_LOG (default info) sets the log level, \
LOG_FORMAT=json writes JSON lines instead of text, and NO_COLOR (when set) keeps the text \
uncoloured, as does anything but a terminal.\n\n\
Model providers over https: their certificates are checked against the system's \
certificate authorities, or those of SSL_CERT_FILE (a PEM file) and SSL_CERT_DIR \
(folders, separated by ':') when set.";

#[derive(Subcommand)]
enum AdminCommand {
    /// Set the plan of an account: free, starter, business or pro.
    SetPlan {
        /// The account's email.
        email: String,
        /// free, starter, business or pro.
        plan: String,
    },
    /// Mark an account's email as verified.
    VerifyEmail {
        /// The account's email.
        email: String,
    },
}

/// The command line (`args`, else the process's), the configuration variables of its
/// command read from the environment where not given as options; a blank variable counts
/// as unset. Exits with clap's message on an invalid or missing argument.
fn parse_cli(args: Option<[&str; 2]>) -> Cli {
    let command = unset_blank_env(Cli::command(), env_value);
    let matches = match args {
        Some(args) => command.get_matches_from(args),
        None => command.get_matches(),
    };
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

fn main() -> anyhow::Result<std::process::ExitCode> {
    let cli = parse_cli(None);
    // An extraction child starts no runtime, reads no configuration and logs nothing: it
    // only serves tasks (its few threads and mappings stay inside its memory limit).
    if let Some(Command::Extract { memory_limit }) = cli.command {
        return Ok(agentchat::knowledge::sandbox::child_main(memory_limit));
    }
    // The variables of a `.env` file count as the environment for the options read from
    // it too (`serve`'s settings): parsed again once it is loaded.
    let _ = dotenvy::dotenv();
    let cli = parse_cli(None);
    agentchat::telemetry::init();
    // `agentchat` alone is `agentchat serve`, with `AGENTCHAT_ROLE` read as there.
    let command = match cli.command {
        Some(command) => command,
        None => parse_cli(Some(["agentchat", "serve"]))
            .command
            .context("serve is a command")?,
    };
    // Only `serve` needs the settings every instance on a shared database must agree on.
    let serve = matches!(command, Command::Serve { .. });
    let config = match &command {
        Command::Serve { settings, .. } => Config::from_settings(settings, true)?,
        _ => Config::from_env_for_tools()?,
    };
    // `serve` runs a single-threaded runtime per core; the other commands one
    // multi-threaded runtime.
    let runtimes = if serve {
        Runtimes::for_cores(std::thread::available_parallelism().map_or(1, |n| n.get()))
    } else {
        Runtimes::Shared
    };
    runtimes
        .main_runtime()?
        .block_on(run(command, config, runtimes))?;
    Ok(std::process::ExitCode::SUCCESS)
}

async fn run(command: Command, config: Config, runtimes: Runtimes) -> anyhow::Result<()> {
    match command {
        Command::Serve { role, .. } => {
            let mut config = config;
            config.role = role;
            let app = Application::build(config).await?;
            tracing::info!(role = %app.role(), "AgentChat runs as {}", app.role());
            tracing::info!(addr = %app.addr(), "AgentChat listening on http://{}", app.addr());
            tracing::info!(?runtimes, "Tokio runtimes serving connections");
            app.run_until_stopped_on(
                runtimes.extra_threads(),
                agentchat::startup::shutdown_signal(),
            )
            .await?;
        }
        Command::Migrate => {
            let store = agentchat::store::open(&config.storage).await?;
            store.migrate().await?;
            println!("migrations applied to {}", config.storage.database_url);
        }
        Command::EvalRetrieval {
            agent,
            questions,
            verbose,
        } => {
            let text = std::fs::read_to_string(&questions)
                .with_context(|| format!("cannot read {}", questions.display()))?;
            let questions = agentchat::knowledge::eval::parse_questions(&text)?;
            let store = agentchat::store::open(&config.storage).await?;
            store.migrate().await?;
            let agent = agentchat::ids::AgentId::from(agent);
            let embedder = Embedder::from_config(&config.providers, Default::default())?;
            let search = ChunkSearch::new(store);
            let vectors = VectorCache::default();
            let retriever = Retriever {
                search: &search,
                embedder: embedder.as_ref(),
                vectors: &vectors,
                weights: [retrieve::BM25_WEIGHT, retrieve::VECTOR_WEIGHT],
            };
            let mut modes = vec![("bm25", Mode::Bm25)];
            if embedder.is_some() {
                modes.extend([("embeddings", Mode::Vectors), ("fusion", Mode::Fusion)]);
            }
            for (name, mode) in modes {
                let report = eval::evaluate(&retriever, &agent, &questions, mode).await?;
                if verbose {
                    for o in &report.outcomes {
                        let rank = o.rank.map_or("-".to_string(), |r| r.to_string());
                        println!("{name:<10} {rank:>2}  {}", o.question);
                    }
                }
                for (kind, r) in [
                    ("all", report.clone()),
                    ("keyword", report.of_kind(eval::Kind::Keyword)),
                    ("paraphrase", report.of_kind(eval::Kind::Paraphrase)),
                ] {
                    println!(
                        "{name:<10} {kind:<10} questions {:>3}  hit@1 {:.3}  hit@5 {:.3}  MRR {:.3}",
                        r.questions, r.hit_at_1, r.hit_at_5, r.mrr
                    );
                }
            }
        }
        Command::CopyData { from, to, uploads } => {
            let uploads = uploads.unwrap_or_else(|| config.knowledge.uploads.clone());
            let report = store::copy::copy_data(&from, &to, &uploads, |line| {
                eprintln!("{line}");
            })
            .await?;
            println!("{:<24} {:>10} {:>10}", "table", "source", "target");
            for t in &report.tables {
                println!("{:<24} {:>10} {:>10}", t.table, t.source, t.target);
            }
            println!(
                "copied: every table's row count matches; {} uploads moved into the database",
                report.uploads
            );
            println!(
                "next: start AgentChat with DATABASE_URL set to the target and JWT_SECRET and \
                 ENCRYPTION_KEY set to the values of DATA_DIR/jwt_secret and \
                 DATA_DIR/encryption_key (sealed credentials open only with that key; \
                 signed-in sessions go on only with that secret)"
            );
        }
        Command::Admin { command } => {
            let store = agentchat::store::open(&config.storage).await?;
            store.migrate().await?;
            let now = chrono::Utc::now();
            match command {
                AdminCommand::SetPlan { email, plan } => {
                    let email = Email::parse(&email).map_err(anyhow::Error::msg)?;
                    let plan = plan.parse().map_err(anyhow::Error::msg)?;
                    store
                        .set_plan(&email, plan, now)
                        .await
                        .with_context(|| format!("no account with email {email}"))?;
                    println!("{email} is now on the {plan} plan");
                }
                AdminCommand::VerifyEmail { email } => {
                    let email = Email::parse(&email).map_err(anyhow::Error::msg)?;
                    let user = store
                        .user_by_email(&email)
                        .await?
                        .with_context(|| format!("no account with email {email}"))?;
                    store.mark_email_verified(&user.id, now).await?;
                    println!("{email} is verified");
                }
            }
        }
        Command::Extract { .. } => anyhow::bail!("extract runs without the runtime (see main)"),
    }
    Ok(())
}
