//! The service under test as a child process, and the account the benchmarks chat with.
//!
//! [`ServiceProcess::start`] runs the `agentchat` binary (build it first with
//! `cargo build --release -p server --bin agentchat`) in a fresh temporary `DATA_DIR`
//! with a real SQLite database (or the PostgreSQL database and Redis that
//! [`crate::backend::Backend::env`] names), listening on a free `127.0.0.1` port, with the
//! OpenAI-compatible provider pointed at a mock provider and every plan's request budget set
//! to 10^9 per minute (the rate limiter is consulted on every request but never refuses).
//! Running it as its own process keeps its memory and CPU readings (`/proc/<pid>`) apart from
//! the load generator's and the mock's.
//!
//! [`create_account`] signs up, verifies the email with the `agentchat admin verify-email`
//! command (same `DATA_DIR`), logs in and creates an agent, all through the HTTP API.

use std::{
    net::{Ipv4Addr, SocketAddr, TcpListener},
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use agentchat::ids::{AgentId, UserId};
use anyhow::{bail, ensure, Context};
use serde_json::{json, Value};
use tokio::process::{Child, Command};

/// The request budget given to every plan, and the agent limit: never reached.
pub const UNLIMITED: &str = "free=1000000000,starter=1000000000,business=1000000000,pro=1000000000";
/// The password of the benchmark account.
const PASSWORD: &str = "bench-password-123";
/// How long the service may take to answer its health check after start.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Environment variables that would change the service's behaviour or route its loopback
/// traffic elsewhere; they are removed from the child's environment.
const REMOVED_ENV: &[&str] = &[
    "RUST_LOG",
    "LOG_FORMAT",
    "DATABASE_URL",
    "REDIS_URL",
    "SMTP_URL",
    "ANTHROPIC_API_KEY",
    "DEFAULT_MODEL",
    "PROVIDER_TIMEOUT_SECS",
    "SSE_HEARTBEAT_SECS",
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
];

/// The default location of the release server binary: `target/release/agentchat` in this
/// workspace.
pub fn default_server_bin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("target")
        .join("release")
        .join("agentchat")
}

/// The `agentchat` binary beside the running benchmark (same target folder and profile):
/// the program the service built in process starts as its extraction children
/// (`knowledge::sandbox`). Build it with the benchmark:
/// `cargo build --release -p server --bin agentchat -p bench`.
///
/// # Errors
/// The benchmark's own path is unknown, or no `agentchat` is beside it.
pub fn extraction_program() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let program = exe
        .parent()
        .map(|dir| dir.join("agentchat"))
        .filter(|p| p.is_file())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no agentchat binary beside {}: build it with `cargo build --release -p server --bin agentchat`",
                exe.display()
            )
        })?;
    Ok(program)
}

/// How to start the service.
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    /// The `agentchat` binary.
    pub bin: PathBuf,
    /// `OPENAI_BASE_URL`: the mock provider's base URL.
    pub openai_base_url: String,
    /// `OPENAI_API_KEY`: the key the mock provider expects.
    pub openai_api_key: String,
    /// More environment variables, e.g. `PROVIDER_TIMEOUT_SECS`, or a backend's
    /// ([`crate::backend::Backend::env`]: `DATABASE_URL`, `REDIS_URL`, ...; with
    /// `DATABASE_URL` and no `PUBLIC_URL`, `PUBLIC_URL` is the instance's own address).
    pub extra_env: Vec<(String, String)>,
}

/// A running `agentchat` process. It is killed when this value is dropped.
#[derive(Debug)]
pub struct ServiceProcess {
    child: Child,
    addr: SocketAddr,
    env: Vec<(String, String)>,
    bin: PathBuf,
    log: PathBuf,
    // Dropped last: the database and the log live here.
    _dir: tempfile::TempDir,
}

impl ServiceProcess {
    /// Starts the service and waits until `GET /api/health` answers 200.
    pub async fn start(options: ServiceOptions) -> anyhow::Result<Self> {
        ensure!(
            options.bin.is_file(),
            "the server binary {} does not exist; build it with \
             `cargo build --release -p server --bin agentchat` or pass --server-bin",
            options.bin.display()
        );
        let dir = tempfile::Builder::new()
            .prefix("agentchat-bench-")
            .tempdir()?;
        let data_dir = dir.path().join("data");
        let addr = free_port()?;
        let mut env = vec![
            ("DATA_DIR".to_owned(), data_dir.display().to_string()),
            ("LEPTOS_SITE_ADDR".to_owned(), addr.to_string()),
            ("OPENAI_BASE_URL".to_owned(), options.openai_base_url),
            ("OPENAI_API_KEY".to_owned(), options.openai_api_key),
            ("RATE_LIMITS".to_owned(), UNLIMITED.to_owned()),
            ("AGENT_LIMITS".to_owned(), UNLIMITED.to_owned()),
        ];
        env.extend(options.extra_env);
        // On a shared database the service requires `PUBLIC_URL` (README, "Running several
        // instances"); this instance's own address unless the caller gave one.
        let shared = env.iter().any(|(name, _)| name == "DATABASE_URL");
        if shared && !env.iter().any(|(name, _)| name == "PUBLIC_URL") {
            env.push(("PUBLIC_URL".to_owned(), format!("http://{addr}")));
        }
        let log = dir.path().join("server.log");
        let log_file = std::fs::File::create(&log)?;
        let mut command = command(&options.bin, dir.path(), &env);
        command
            .stdout(Stdio::from(log_file.try_clone()?))
            .stderr(Stdio::from(log_file))
            .kill_on_drop(true);
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", options.bin.display()))?;
        let mut service = Self {
            child,
            addr,
            env,
            bin: options.bin,
            log,
            _dir: dir,
        };
        service.wait_healthy().await?;
        Ok(service)
    }

    async fn wait_healthy(&mut self) -> anyhow::Result<()> {
        let client = http_client()?;
        let url = format!("{}/api/health", self.base_url());
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "the service exited with {status} during start-up; its log:\n{}",
                    self.log_tail()
                );
            }
            if let Ok(response) = client.get(&url).send().await {
                if response.status().is_success() {
                    return Ok(());
                }
            }
            if started.elapsed() > START_TIMEOUT {
                bail!(
                    "the service did not become healthy within {START_TIMEOUT:?}; its log:\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The process id, for `/proc/<pid>` readings.
    pub fn pid(&self) -> anyhow::Result<u32> {
        self.child
            .id()
            .context("the service process has already exited")
    }

    /// Fails (with the end of the service's log) when the process has exited.
    pub fn ensure_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "the service exited with {status}; its log:\n{}",
                self.log_tail()
            );
        }
        Ok(())
    }

    /// Runs the `agentchat` command with `args` in the service's environment (same
    /// `DATA_DIR`, hence the same database) and returns its standard output.
    pub async fn admin(&self, args: &[&str]) -> anyhow::Result<String> {
        let dir = self
            .log
            .parent()
            .context("the log file has a parent folder")?;
        let output = command(&self.bin, dir, &self.env)
            .args(args)
            .output()
            .await?;
        ensure!(
            output.status.success(),
            "`agentchat {}` failed with {}: {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// The last lines of the service's log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

/// The `agentchat` command in `dir` (so that no `.env` file of the caller's folder is read)
/// with `env` set and the variables of [`REMOVED_ENV`] removed.
fn command(bin: &Path, dir: &Path, env: &[(String, String)]) -> Command {
    let mut command = Command::new(bin);
    command.current_dir(dir).stdin(Stdio::null());
    for name in REMOVED_ENV {
        command.env_remove(name);
    }
    command.envs(env.iter().map(|(key, value)| (key, value)));
    command
}

/// A free port on 127.0.0.1 (bound, read and released; the service binds it right after).
fn free_port() -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?)
}

/// A client for set-up calls: no proxy, whatever the environment says.
pub fn http_client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()?)
}

/// The benchmark account: a verified user with one agent.
#[derive(Debug, Clone)]
pub struct Account {
    /// The account's email.
    pub email: String,
    /// The id of the agent chats go to.
    pub agent_id: AgentId,
    /// An access token (valid 15 minutes; see [`login`]).
    pub token: String,
}

/// Signs up, verifies the email through the CLI, logs in and creates an agent on `model`.
pub async fn create_account(service: &ServiceProcess, model: &str) -> anyhow::Result<Account> {
    let (email, _) = signup(&service.base_url()).await?;
    service.admin(&["admin", "verify-email", &email]).await?;
    finish_account(&service.base_url(), &email, model).await
}

/// Signs a new account up; returns its email and user id. The email must be verified before
/// [`finish_account`].
pub async fn signup(base_url: &str) -> anyhow::Result<(String, UserId)> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    let email = format!(
        "bench-{}-{}@example.com",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let response = http_client()?
        .post(format!("{base_url}/api/auth/signup"))
        .json(&json!({"name": "Bench", "email": email, "password": PASSWORD}))
        .send()
        .await?;
    let status = response.status();
    let body: Value = response.json().await?;
    ensure!(status.as_u16() == 201, "signup answered {status}: {body}");
    let user_id = body
        .pointer("/user/id")
        .and_then(Value::as_str)
        .map(UserId::from)
        .context("signup returns user.id")?;
    Ok((email, user_id))
}

/// Logs a verified account in and creates an agent on `model`.
pub async fn finish_account(base_url: &str, email: &str, model: &str) -> anyhow::Result<Account> {
    let token = login(base_url, email).await?;
    let response = http_client()?
        .post(format!("{base_url}/api/agents"))
        .bearer_auth(&token)
        .json(&json!({"name": "bench", "model": model}))
        .send()
        .await?;
    let status = response.status();
    let body: Value = response.json().await?;
    ensure!(
        status.as_u16() == 201,
        "creating the agent answered {status}: {body}"
    );
    let agent_id = body
        .pointer("/agent/id")
        .and_then(Value::as_str)
        .map(AgentId::from)
        .context("the created agent has an id")?;
    Ok(Account {
        email: email.to_owned(),
        agent_id,
        token,
    })
}

/// Logs the benchmark account in and returns a fresh access token.
pub async fn login(base_url: &str, email: &str) -> anyhow::Result<String> {
    let response = http_client()?
        .post(format!("{base_url}/api/auth/login"))
        .json(&json!({"email": email, "password": PASSWORD}))
        .send()
        .await?;
    let status = response.status();
    let body: Value = response.json().await?;
    ensure!(status.is_success(), "login answered {status}: {body}");
    Ok(body
        .pointer("/tokens/accessToken")
        .and_then(Value::as_str)
        .context("login returns tokens.accessToken")?
        .to_owned())
}
