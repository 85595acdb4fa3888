//! Every configuration variable, declared once: its name, its default, and how its value
//! is checked. `agentchat serve --help` lists them from here, and [`super::Config`] is
//! built from the values (README.md § Configuration is the table of the same variables).
//!
//! A variable set to an empty value, or to spaces only, counts as unset (its default
//! applies): see [`unset_blank_env`]. A value that does not parse stops the start with a
//! message naming the variable and its rule. Secrets are never printed: neither their
//! value in `--help` nor in an error.

use std::{net::SocketAddr, path::PathBuf};

use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};

use super::{
    bounded, parse_per_minute, parse_plan_numbers, parse_plan_quotas, TurnCommit,
    DEFAULT_DATABASE_CONNECTIONS,
};
use crate::{
    connection::{
        DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
        MAX_HEADER_READ_TIMEOUT, MAX_IDLE_TIMEOUT, MAX_MAX_CONNECTIONS,
    },
    domain::Plan,
    forwarded::TrustedProxies,
};

/// The raw settings, one field per variable (the field's option is its name in lower
/// case with `-`, e.g. `--max-tool-rounds` for `MAX_TOOL_ROUNDS`). Numbers and addresses
/// are already checked; secrets and the rules between variables are checked when
/// [`super::Config::from_settings`] builds the configuration.
#[derive(Args, Clone)]
pub struct Settings {
    // Storage.
    /// Files the service keeps: mail outbox, uploads, generated secrets.
    #[arg(
        long,
        env = "DATA_DIR",
        default_value = "data",
        help_heading = "Storage"
    )]
    pub data_dir: PathBuf,
    /// `sqlite://...` (embedded; created when missing), or `postgres://...` for several
    /// instances (then JWT_SECRET, ENCRYPTION_KEY and PUBLIC_URL are required)
    /// [default: sqlite://{DATA_DIR}/agentchat.db]
    #[arg(
        long,
        env = "DATABASE_URL",
        hide_env_values = true,
        help_heading = "Storage"
    )]
    pub database_url: Option<String>,
    /// Connections of each instance's pool to PostgreSQL (1–10000); ignored by SQLite.
    #[arg(long, env = "DATABASE_MAX_CONNECTIONS", default_value_t = DEFAULT_DATABASE_CONNECTIONS,
          value_parser = database_max_connections, help_heading = "Storage")]
    pub database_max_connections: u32,
    /// PostgreSQL: whether a chat turn's commit waits for the server's flush to disk
    /// (`on` or `off`).
    #[arg(long, env = "CHAT_SYNCHRONOUS_COMMIT", default_value = "off",
          value_parser = turn_commit, help_heading = "Storage")]
    pub chat_synchronous_commit: TurnCommit,

    // Server.
    /// Listen address (`host:port`; port 0 picks a free port).
    #[arg(long, env = "LEPTOS_SITE_ADDR", default_value = "127.0.0.1:3000",
          value_parser = site_addr, help_heading = "Server")]
    pub leptos_site_addr: SocketAddr,
    /// Base of links in emails and OAuth redirects; `https://` makes cookies `Secure`.
    /// Required with PostgreSQL [default: http://{LEPTOS_SITE_ADDR}]
    #[arg(long, env = "PUBLIC_URL", help_heading = "Server")]
    pub public_url: Option<String>,
    /// Longest time a client may take to send a request's head, in seconds (1–30).
    #[arg(long, env = "HEADER_READ_TIMEOUT_SECS", default_value_t = DEFAULT_HEADER_READ_TIMEOUT.as_secs(),
          value_parser = header_read_timeout_secs, help_heading = "Server")]
    pub header_read_timeout_secs: u64,
    /// A kept-alive connection idle this long is closed, in seconds (1–3600).
    #[arg(long, env = "IDLE_TIMEOUT_SECS", default_value_t = DEFAULT_IDLE_TIMEOUT.as_secs(),
          value_parser = idle_timeout_secs, help_heading = "Server")]
    pub idle_timeout_secs: u64,
    /// Client connections served at once (1–1048576).
    #[arg(long, env = "MAX_CONNECTIONS", default_value_t = DEFAULT_MAX_CONNECTIONS,
          value_parser = max_connections, help_heading = "Server")]
    pub max_connections: usize,
    /// Comma-separated CIDR ranges or addresses of the load balancers whose
    /// `X-Forwarded-For` is believed [default: none]
    #[arg(long, env = "TRUSTED_PROXIES", value_parser = trusted_proxies,
          help_heading = "Server")]
    pub trusted_proxies: Option<TrustedProxies>,
    /// Name of the built dashboard assets.
    #[arg(
        long,
        env = "LEPTOS_OUTPUT_NAME",
        default_value = "agentchat",
        help_heading = "Server"
    )]
    pub leptos_output_name: String,
    /// Folder of the built dashboard assets.
    #[arg(
        long,
        env = "LEPTOS_SITE_ROOT",
        default_value = "target/site",
        help_heading = "Server"
    )]
    pub leptos_site_root: String,
    /// Folder of the dashboard's wasm and JavaScript inside LEPTOS_SITE_ROOT.
    #[arg(
        long,
        env = "LEPTOS_SITE_PKG_DIR",
        default_value = "pkg",
        help_heading = "Server"
    )]
    pub leptos_site_pkg_dir: String,
    /// Set by `cargo leptos watch`: the pages then allow its live-reload websocket.
    #[arg(long, env = "LEPTOS_WATCH", help_heading = "Server")]
    pub leptos_watch: Option<String>,
    /// The live-reload websocket's port, read only under LEPTOS_WATCH [default: 3001]
    #[arg(long, env = "LEPTOS_RELOAD_PORT", help_heading = "Server")]
    pub leptos_reload_port: Option<String>,

    // Secrets.
    /// Token signing key. Required with PostgreSQL [default: generated once into
    /// DATA_DIR/jwt_secret]
    #[arg(
        long,
        env = "JWT_SECRET",
        hide_env_values = true,
        help_heading = "Secrets"
    )]
    pub jwt_secret: Option<String>,
    /// Base64 of 32 bytes, the key of stored credentials. Required with PostgreSQL
    /// [default: generated once into DATA_DIR/encryption_key]
    #[arg(
        long,
        env = "ENCRYPTION_KEY",
        hide_env_values = true,
        help_heading = "Secrets"
    )]
    pub encryption_key: Option<String>,
    /// Comma-separated base64 keys that ENCRYPTION_KEY replaced; what they sealed stays
    /// readable.
    #[arg(
        long,
        env = "ENCRYPTION_KEYS_PREVIOUS",
        hide_env_values = true,
        help_heading = "Secrets"
    )]
    pub encryption_keys_previous: Option<String>,

    // Mail.
    /// Lettre SMTP URL, e.g. `smtps://user:pass@smtp.example.com` [default: none: mail
    /// goes to DATA_DIR/mail and its link is logged]
    #[arg(long, env = "SMTP_URL", hide_env_values = true, help_heading = "Mail")]
    pub smtp_url: Option<String>,
    /// Sender of emails.
    #[arg(
        long,
        env = "MAIL_FROM",
        default_value = "AgentChat <no-reply@localhost>",
        help_heading = "Mail"
    )]
    pub mail_from: String,

    // Limits.
    /// Agents per plan (any subset).
    #[arg(long, env = "AGENT_LIMITS", default_value = AGENT_LIMITS,
          value_parser = agent_limits, help_heading = "Limits")]
    pub agent_limits: [u32; 4],
    /// Requests per minute per plan (any subset).
    #[arg(long, env = "RATE_LIMITS", default_value = RATE_LIMITS,
          value_parser = rate_limits, help_heading = "Limits")]
    pub rate_limits: [u32; 4],
    /// Tokens (prompt + completion) per calendar month (UTC) per plan, as
    /// `free=200000,starter=2000000`; a plan left out is unlimited [default: none: unlimited]
    #[arg(long, env = "TOKEN_QUOTAS", default_value = "",
          value_parser = token_quotas, help_heading = "Limits")]
    pub token_quotas: [Option<u64>; 4],
    /// Requests per minute one client IP may send to one integration's inbound channel
    /// endpoint (at least 1).
    #[arg(long, env = "CHANNEL_REQUESTS_PER_MINUTE", default_value_t = super::CHANNEL_REQUESTS_PER_MINUTE,
          value_parser = channel_requests_per_minute, help_heading = "Limits")]
    pub channel_requests_per_minute: u32,
    /// `redis://[user:password@]host[:port][/db]`: limits shared by every instance that
    /// uses it [default: none: limits kept in process]
    #[arg(
        long,
        env = "REDIS_URL",
        hide_env_values = true,
        help_heading = "Limits"
    )]
    pub redis_url: Option<String>,
    /// Start of every Redis key this service writes.
    #[arg(
        long,
        env = "REDIS_KEY_PREFIX",
        default_value = super::REDIS_KEY_PREFIX,
        help_heading = "Limits"
    )]
    pub redis_key_prefix: String,

    // Providers.
    /// Key of the OpenAI-compatible endpoint (enables it).
    #[arg(
        long,
        env = "OPENAI_API_KEY",
        hide_env_values = true,
        help_heading = "Providers"
    )]
    pub openai_api_key: Option<String>,
    /// Any OpenAI-compatible endpoint (Ollama: http://localhost:11434/v1/).
    #[arg(
        long,
        env = "OPENAI_BASE_URL",
        default_value = "https://api.openai.com/v1/",
        help_heading = "Providers"
    )]
    pub openai_base_url: String,
    /// Key of the Anthropic Messages API (enables it).
    #[arg(
        long,
        env = "ANTHROPIC_API_KEY",
        hide_env_values = true,
        help_heading = "Providers"
    )]
    pub anthropic_api_key: Option<String>,
    /// The Anthropic Messages API.
    #[arg(
        long,
        env = "ANTHROPIC_BASE_URL",
        default_value = "https://api.anthropic.com/v1/",
        help_heading = "Providers"
    )]
    pub anthropic_base_url: String,
    /// Model of agents that name none [default: the first configured provider's first
    /// model, else agentchat-offline]
    #[arg(long, env = "DEFAULT_MODEL", help_heading = "Providers")]
    pub default_model: Option<String>,
    /// Longest wait for a provider's first byte, retries included, or inside a reply, in
    /// seconds (then 504).
    #[arg(long, env = "PROVIDER_TIMEOUT_SECS", default_value = "60",
          value_parser = provider_timeout_secs, help_heading = "Providers")]
    pub provider_timeout_secs: u64,
    /// Embedding model at the OpenAI-compatible endpoint, or `local` for the built-in CPU
    /// model at EMBEDDING_MODEL_PATH [default: none: BM25 only]
    #[arg(long, env = "EMBEDDING_MODEL", help_heading = "Providers")]
    pub embedding_model: Option<String>,
    /// Folder of the sentence-transformers BERT model that EMBEDDING_MODEL=local runs
    /// (config.json, tokenizer.json, model.safetensors).
    #[arg(long, env = "EMBEDDING_MODEL_PATH", help_heading = "Providers")]
    pub embedding_model_path: Option<std::path::PathBuf>,
    /// Threads of the built-in embedding model for chunks, at the lowest priority (1–256)
    /// [default: one per core]
    #[arg(long, env = "EMBEDDING_THREADS", value_parser = embedding_threads,
          help_heading = "Providers")]
    pub embedding_threads: Option<usize>,

    // Chat.
    /// Longest chat message in characters (larger: 400).
    #[arg(long, env = "MAX_MESSAGE_CHARS", default_value = "32000",
          value_parser = max_message_chars, help_heading = "Chat")]
    pub max_message_chars: usize,
    /// Interval of `: ping` comments in a silent stream, in seconds.
    #[arg(long, env = "SSE_HEARTBEAT_SECS", default_value = "15",
          value_parser = sse_heartbeat_secs, help_heading = "Chat")]
    pub sse_heartbeat_secs: u64,
    /// Model calls of one chat turn that may call tools (1–50).
    #[arg(long, env = "MAX_TOOL_ROUNDS", default_value = "8",
          value_parser = max_tool_rounds, help_heading = "Chat")]
    pub max_tool_rounds: u32,
    /// Longest tool call in seconds (1–600) unless the tool sets `timeoutMs`.
    #[arg(long, env = "TOOL_TIMEOUT_SECONDS", default_value = "30",
          value_parser = tool_timeout_seconds, help_heading = "Chat")]
    pub tool_timeout_seconds: u64,
    /// Seconds a shutting-down instance lets its streams finish (0–3600).
    #[arg(long, env = "SHUTDOWN_GRACE_SECONDS", default_value = "30",
          value_parser = shutdown_grace_seconds, help_heading = "Chat")]
    pub shutdown_grace_seconds: u64,

    // Knowledge.
    /// Largest knowledge upload in bytes (larger: 413).
    #[arg(long, env = "MAX_UPLOAD_BYTES", default_value = "20971520",
          value_parser = max_upload_bytes, help_heading = "Knowledge")]
    pub max_upload_bytes: usize,
    /// Longest time one upload or crawled page may take to be read, in seconds (at
    /// least 1).
    #[arg(long, env = "EXTRACT_TIMEOUT_SECS", default_value_t = super::DEFAULT_EXTRACT_TIMEOUT.as_secs(),
          value_parser = extract_timeout_secs, help_heading = "Knowledge")]
    pub extract_timeout_secs: u64,
    /// Address-space limit of each extraction process in MiB (0: none, else at least
    /// 128).
    #[arg(long, env = "EXTRACT_MEMORY_MB", default_value = "1024",
          value_parser = extract_memory_mb, help_heading = "Knowledge")]
    pub extract_memory_mb: u64,
    /// Extraction processes working at once (at least 1) [default: the number of CPU
    /// cores]
    #[arg(long, env = "EXTRACT_PROCESSES", value_parser = extract_processes,
          help_heading = "Knowledge")]
    pub extract_processes: Option<usize>,
    /// Comma-separated `host:port` entries the crawler and webhook deliveries may reach
    /// although they are private addresses [default: none]
    #[arg(long, env = "ALLOWED_PRIVATE_HOSTS", help_heading = "Knowledge")]
    pub allowed_private_hosts: Option<String>,

    // Background work.
    /// Background workers for ingestion and crawls, plus one webhook delivery worker
    /// (0: none).
    #[arg(long, env = "JOB_WORKERS", default_value = "2",
          value_parser = job_workers, help_heading = "Background work")]
    pub job_workers: usize,
    /// First webhook retry waits up to this long, in milliseconds (at least 1).
    #[arg(long, env = "WEBHOOK_RETRY_BASE_MS", default_value = "30000",
          value_parser = webhook_retry_base_ms, help_heading = "Background work")]
    pub webhook_retry_base_ms: u64,

    // Channels.
    /// Telegram Bot API base.
    #[arg(long, env = "TELEGRAM_API_URL", default_value = super::TELEGRAM_API_URL,
          help_heading = "Channels")]
    pub telegram_api_url: String,
    /// Slack Web API base.
    #[arg(long, env = "SLACK_API_URL", default_value = super::SLACK_API_URL,
          help_heading = "Channels")]
    pub slack_api_url: String,

    // Sign-in.
    /// GitHub sign-in: the OAuth app's client id (with GITHUB_CLIENT_SECRET).
    #[arg(long, env = "GITHUB_CLIENT_ID", help_heading = "Sign-in")]
    pub github_client_id: Option<String>,
    /// GitHub sign-in: the OAuth app's client secret.
    #[arg(
        long,
        env = "GITHUB_CLIENT_SECRET",
        hide_env_values = true,
        help_heading = "Sign-in"
    )]
    pub github_client_secret: Option<String>,
    /// GitHub's authorization endpoint.
    #[arg(long, env = "GITHUB_AUTH_URL", default_value = super::GITHUB_AUTH_URL,
          help_heading = "Sign-in")]
    pub github_auth_url: String,
    /// GitHub's token endpoint.
    #[arg(long, env = "GITHUB_TOKEN_URL", default_value = super::GITHUB_TOKEN_URL,
          help_heading = "Sign-in")]
    pub github_token_url: String,
    /// GitHub's REST API.
    #[arg(long, env = "GITHUB_API_URL", default_value = super::GITHUB_API_URL,
          help_heading = "Sign-in")]
    pub github_api_url: String,
    /// Google sign-in: the client id (with GOOGLE_CLIENT_SECRET).
    #[arg(long, env = "GOOGLE_CLIENT_ID", help_heading = "Sign-in")]
    pub google_client_id: Option<String>,
    /// Google sign-in: the client secret.
    #[arg(
        long,
        env = "GOOGLE_CLIENT_SECRET",
        hide_env_values = true,
        help_heading = "Sign-in"
    )]
    pub google_client_secret: Option<String>,
    /// Google's OpenID Connect issuer.
    #[arg(long, env = "GOOGLE_ISSUER_URL", default_value = super::GOOGLE_ISSUER_URL,
          help_heading = "Sign-in")]
    pub google_issuer_url: String,
    /// Microsoft sign-in: the client id (with MICROSOFT_CLIENT_SECRET).
    #[arg(long, env = "MICROSOFT_CLIENT_ID", help_heading = "Sign-in")]
    pub microsoft_client_id: Option<String>,
    /// Microsoft sign-in: the client secret.
    #[arg(
        long,
        env = "MICROSOFT_CLIENT_SECRET",
        hide_env_values = true,
        help_heading = "Sign-in"
    )]
    pub microsoft_client_secret: Option<String>,
    /// Microsoft's OpenID Connect issuer (`.../{tenant-id}/v2.0` for one organisation).
    #[arg(long, env = "MICROSOFT_ISSUER_URL", default_value = super::MICROSOFT_ISSUER_URL,
          help_heading = "Sign-in")]
    pub microsoft_issuer_url: String,

    // Metrics.
    /// Bearer token (16 or more letters, digits or `-._~+/`) that `GET /metrics` requires
    /// [default: none]
    #[arg(
        long,
        env = "METRICS_TOKEN",
        hide_env_values = true,
        help_heading = "Metrics"
    )]
    pub metrics_token: Option<String>,
    /// `host:port` of a second listener serving only `GET /metrics` [default: none]
    #[arg(long, env = "METRICS_ADDR", value_parser = metrics_addr, help_heading = "Metrics")]
    pub metrics_addr: Option<SocketAddr>,
}

/// `AGENT_LIMITS`'s default, the plans' own ([`Plan::default_agent_limit`]).
const AGENT_LIMITS: &str = "free=3,starter=10,business=50,pro=500";
/// `RATE_LIMITS`'s default, the plans' own ([`Plan::requests_per_minute`]).
const RATE_LIMITS: &str = "free=100,starter=500,business=2000,pro=10000";

impl Settings {
    /// The settings from the process environment (load `.env` first to include it).
    ///
    /// Errors: a value that does not parse; the message names the variable and its rule.
    pub fn from_env() -> anyhow::Result<Self> {
        let command = unset_blank_env(Self::augment_args(Command::new("agentchat")), env_value);
        let matches = command
            .try_get_matches_from(["agentchat"])
            .map_err(clap_error)?;
        Self::from_matches(&matches)
    }

    /// The settings from `lookup` instead of the environment, with the same rules (a
    /// blank value counts as unset): what tests and tools that hold their own variables
    /// use.
    ///
    /// Errors: as [`Settings::from_env`].
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let mut args = vec!["agentchat".to_string()];
        let command = Self::augment_args(Command::new("agentchat")).mut_args(|arg| {
            if let (Some(name), Some(long)) = (arg.get_env(), arg.get_long()) {
                if let Some(value) = name.to_str().and_then(&lookup) {
                    if !value.trim().is_empty() {
                        args.push(format!("--{long}={value}"));
                    }
                }
            }
            arg.env(None)
        });
        let matches = command.try_get_matches_from(args).map_err(clap_error)?;
        Self::from_matches(&matches)
    }

    fn from_matches(matches: &ArgMatches) -> anyhow::Result<Self> {
        Self::from_arg_matches(matches).map_err(clap_error)
    }

    /// The value of one of [`super::SHARED_SETTINGS`] (`None` for any other name), for
    /// [`super::require_shared_settings`].
    pub fn shared_setting(&self, name: &str) -> Option<String> {
        match name {
            "JWT_SECRET" => self.jwt_secret.clone(),
            "ENCRYPTION_KEY" => self.encryption_key.clone(),
            "PUBLIC_URL" => self.public_url.clone(),
            _ => None,
        }
    }
}

/// The variable `name` of the process environment; a value that is not UTF-8 reads as
/// empty, so that it counts as unset.
pub fn env_value(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.into_string().unwrap_or_default())
}

/// `command` with the environment variable of every argument (of its subcommands too)
/// whose value, read by `lookup` (the process's: [`env_value`]), is set but empty or only
/// spaces taken away, so that the argument's default applies: in this configuration a
/// blank variable counts as unset, where clap itself would hand the empty value to the
/// argument. Parse the command line with the command this returns.
pub fn unset_blank_env(command: Command, lookup: fn(&str) -> Option<String>) -> Command {
    command
        .mut_subcommands(|sub| unset_blank_env(sub, lookup))
        .mut_args(|arg| {
            let blank = arg
                .get_env()
                .and_then(|name| name.to_str())
                .is_some_and(|name| lookup(name).is_some_and(|v| v.trim().is_empty()));
            if blank {
                keep_env_in_help(arg)
            } else {
                arg
            }
        })
}

/// `arg` reading no variable, its variable still named in its help.
fn keep_env_in_help(arg: Arg) -> Arg {
    let name = arg
        .get_env()
        .and_then(|name| name.to_str())
        .map(str::to_string);
    let arg = arg.env(None);
    match name {
        Some(name) if !arg.is_hide_set() => {
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            arg.help(format!("{help} [env: {name}]"))
        }
        _ => arg,
    }
}

/// A clap error as one line, without clap's `error:` prefix and usage hint.
fn clap_error(e: clap::Error) -> anyhow::Error {
    let text = e.to_string();
    let line = text.lines().next().unwrap_or_default();
    anyhow::anyhow!("{}", line.trim_start_matches("error: "))
}

fn whole<T>(name: &str, raw: &str, what: &str) -> Result<T, String>
where
    T: std::str::FromStr,
{
    raw.parse().map_err(|_| format!("{name} must be {what}"))
}

fn database_max_connections(raw: &str) -> anyhow::Result<u32> {
    bounded(
        "DATABASE_MAX_CONNECTIONS",
        raw,
        1..=super::MAX_DATABASE_CONNECTIONS,
        "a whole number",
    )
}

fn turn_commit(raw: &str) -> anyhow::Result<TurnCommit> {
    TurnCommit::parse(raw)
}

fn site_addr(raw: &str) -> Result<SocketAddr, String> {
    raw.parse()
        .map_err(|_| "LEPTOS_SITE_ADDR must be host:port, e.g. 127.0.0.1:3000".to_string())
}

fn header_read_timeout_secs(raw: &str) -> anyhow::Result<u64> {
    let max = MAX_HEADER_READ_TIMEOUT.as_secs();
    bounded("HEADER_READ_TIMEOUT_SECS", raw, 1..=max, "whole seconds")
}

fn idle_timeout_secs(raw: &str) -> anyhow::Result<u64> {
    let max = MAX_IDLE_TIMEOUT.as_secs();
    bounded("IDLE_TIMEOUT_SECS", raw, 1..=max, "whole seconds")
}

fn max_connections(raw: &str) -> anyhow::Result<usize> {
    bounded(
        "MAX_CONNECTIONS",
        raw,
        1..=MAX_MAX_CONNECTIONS,
        "a whole number",
    )
}

fn trusted_proxies(raw: &str) -> anyhow::Result<TrustedProxies> {
    Ok(TrustedProxies::parse(raw)?)
}

fn agent_limits(raw: &str) -> anyhow::Result<[u32; 4]> {
    parse_plan_numbers(
        "AGENT_LIMITS",
        raw,
        Plan::ALL.map(Plan::default_agent_limit),
    )
}

fn rate_limits(raw: &str) -> anyhow::Result<[u32; 4]> {
    parse_plan_numbers("RATE_LIMITS", raw, Plan::ALL.map(Plan::requests_per_minute))
}

fn token_quotas(raw: &str) -> anyhow::Result<[Option<u64>; 4]> {
    parse_plan_quotas("TOKEN_QUOTAS", raw)
}

fn channel_requests_per_minute(raw: &str) -> anyhow::Result<u32> {
    parse_per_minute("CHANNEL_REQUESTS_PER_MINUTE", raw)
}

fn provider_timeout_secs(raw: &str) -> Result<u64, String> {
    whole("PROVIDER_TIMEOUT_SECS", raw, "whole seconds")
}

fn max_message_chars(raw: &str) -> Result<usize, String> {
    whole("MAX_MESSAGE_CHARS", raw, "a whole number")
}

fn sse_heartbeat_secs(raw: &str) -> Result<u64, String> {
    whole("SSE_HEARTBEAT_SECS", raw, "whole seconds")
}

fn embedding_threads(raw: &str) -> Result<usize, String> {
    raw.parse()
        .ok()
        .filter(|n| (1..=256).contains(n))
        .ok_or_else(|| "EMBEDDING_THREADS must be a whole number from 1 to 256".to_string())
}

fn max_tool_rounds(raw: &str) -> Result<u32, String> {
    raw.parse()
        .ok()
        .filter(|n| (1..=50).contains(n))
        .ok_or_else(|| "MAX_TOOL_ROUNDS must be a whole number from 1 to 50".to_string())
}

fn tool_timeout_seconds(raw: &str) -> Result<u64, String> {
    raw.parse()
        .ok()
        .filter(|n| (1..=600).contains(n))
        .ok_or_else(|| "TOOL_TIMEOUT_SECONDS must be whole seconds from 1 to 600".to_string())
}

fn shutdown_grace_seconds(raw: &str) -> Result<u64, String> {
    raw.parse()
        .ok()
        .filter(|n| *n <= 3_600)
        .ok_or_else(|| "SHUTDOWN_GRACE_SECONDS must be whole seconds from 0 to 3600".to_string())
}

fn max_upload_bytes(raw: &str) -> Result<usize, String> {
    whole("MAX_UPLOAD_BYTES", raw, "a whole number of bytes")
}

fn extract_timeout_secs(raw: &str) -> Result<u64, String> {
    let secs: u64 = whole("EXTRACT_TIMEOUT_SECS", raw, "whole seconds")?;
    if secs == 0 {
        return Err("EXTRACT_TIMEOUT_SECS must be at least 1".into());
    }
    Ok(secs)
}

fn extract_memory_mb(raw: &str) -> Result<u64, String> {
    let mib: u64 = whole("EXTRACT_MEMORY_MB", raw, "a whole number of MiB")?;
    if mib != 0 && mib < 128 {
        return Err("EXTRACT_MEMORY_MB must be 0 (no limit) or at least 128".into());
    }
    Ok(mib)
}

fn extract_processes(raw: &str) -> Result<usize, String> {
    let n: usize = whole("EXTRACT_PROCESSES", raw, "a whole number")?;
    if n == 0 {
        return Err("EXTRACT_PROCESSES must be at least 1".into());
    }
    Ok(n)
}

fn job_workers(raw: &str) -> Result<usize, String> {
    whole("JOB_WORKERS", raw, "a whole number")
}

fn webhook_retry_base_ms(raw: &str) -> Result<u64, String> {
    let ms: u64 = whole("WEBHOOK_RETRY_BASE_MS", raw, "whole milliseconds")?;
    if ms == 0 {
        return Err("WEBHOOK_RETRY_BASE_MS must be at least 1".into());
    }
    Ok(ms)
}

fn metrics_addr(raw: &str) -> Result<SocketAddr, String> {
    raw.trim()
        .parse()
        .map_err(|_| "METRICS_ADDR must be host:port, e.g. 127.0.0.1:9100".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn vars<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_declared_defaults_are_the_parts_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().to_str().unwrap();
        let settings = Settings::from_vars(vars(&[("DATA_DIR", data_dir)])).unwrap();
        let read = Config::from_settings(&settings, true).unwrap();
        let addr = "127.0.0.1:3000".parse().unwrap();
        let plain = Config::with_data_dir(dir.path().to_path_buf(), addr).unwrap();
        assert_eq!(read.server.site_addr, plain.server.site_addr);
        assert_eq!(read.server.public_url, plain.server.public_url);
        assert_eq!(
            read.server.connection_limits(),
            plain.server.connection_limits()
        );
        assert!(read.server.trusted_proxies.is_empty());
        assert_eq!(
            read.server.leptos_output_name,
            plain.server.leptos_output_name
        );
        assert_eq!(read.server.leptos_site_root, plain.server.leptos_site_root);
        assert_eq!(
            read.server.leptos_site_pkg_dir,
            plain.server.leptos_site_pkg_dir
        );
        assert_eq!(read.server.live_reload_port, None);
        assert_eq!(read.storage.database_url, plain.storage.database_url);
        assert_eq!(read.storage.max_connections, plain.storage.max_connections);
        assert_eq!(read.storage.turn_commit, plain.storage.turn_commit);
        assert_eq!(read.mail.from, plain.mail.from);
        assert!(read.mail.smtp_url.is_none());
        assert_eq!(read.limits.agent_limits, plain.limits.agent_limits);
        assert_eq!(read.limits.rate_limits, plain.limits.rate_limits);
        assert_eq!(
            read.limits.channel_requests_per_minute,
            plain.limits.channel_requests_per_minute
        );
        assert_eq!(read.limits.redis_key_prefix, plain.limits.redis_key_prefix);
        assert!(read.limits.redis_url.is_none());
        assert_eq!(
            read.providers.openai_base_url,
            plain.providers.openai_base_url
        );
        assert_eq!(
            read.providers.anthropic_base_url,
            plain.providers.anthropic_base_url
        );
        assert_eq!(read.providers.timeout, plain.providers.timeout);
        assert_eq!(read.chat, plain.chat);
        assert_eq!(
            read.knowledge.max_upload_bytes,
            plain.knowledge.max_upload_bytes
        );
        assert_eq!(read.knowledge.extraction, plain.knowledge.extraction);
        assert_eq!(read.outbound, plain.outbound);
        assert_eq!(read.webhooks, plain.webhooks);
        assert_eq!(read.jobs, plain.jobs);
        assert_eq!(read.channels, plain.channels);
        assert!(!read.metrics.enabled());
        assert!(read.oauth.github.is_none() && read.oauth.google.is_none());
        assert!(read.oauth.microsoft.is_none());
    }

    #[test]
    fn values_are_read_and_blank_ones_count_as_unset() {
        let settings = Settings::from_vars(vars(&[
            ("MAX_TOOL_ROUNDS", "3"),
            ("JOB_WORKERS", " "),
            ("DATABASE_URL", ""),
            ("LEPTOS_SITE_ADDR", "  "),
            ("RATE_LIMITS", "pro=9"),
            ("TOKEN_QUOTAS", "free=200000, business=5000000"),
            ("TRUSTED_PROXIES", "10.0.0.0/8"),
            ("GITHUB_CLIENT_ID", "id"),
            ("GITHUB_CLIENT_SECRET", "secret"),
            ("GITHUB_API_URL", "https://github.example.com/api/"),
        ]))
        .unwrap();
        assert_eq!(settings.max_tool_rounds, 3);
        assert_eq!(settings.job_workers, 2);
        assert_eq!(settings.database_url, None);
        assert_eq!(settings.leptos_site_addr, "127.0.0.1:3000".parse().unwrap());
        assert_eq!(settings.rate_limits, [100, 500, 2000, 9]);
        assert_eq!(
            settings.token_quotas,
            [Some(200_000), None, Some(5_000_000), None]
        );
        assert!(settings
            .trusted_proxies
            .as_ref()
            .unwrap()
            .contains("10.1.2.3".parse().unwrap()));
        let github = crate::config::OAuthConfig::from_settings(&settings)
            .github
            .unwrap();
        assert_eq!(github.api_url, "https://github.example.com/api");

        // The process environment: a set but blank variable no longer feeds its argument.
        fn lookup(name: &str) -> Option<String> {
            match name {
                "JOB_WORKERS" => Some(" ".into()),
                "DATABASE_URL" => Some(String::new()),
                "MAX_TOOL_ROUNDS" => Some("3".into()),
                _ => None,
            }
        }
        let command = unset_blank_env(Settings::augment_args(Command::new("agentchat")), lookup);
        let env_of = |id: &str| {
            command
                .get_arguments()
                .find(|a| a.get_id() == id)
                .unwrap()
                .get_env()
                .map(|e| e.to_str().unwrap().to_string())
        };
        assert_eq!(env_of("job_workers"), None);
        assert_eq!(env_of("database_url"), None);
        assert_eq!(
            env_of("max_tool_rounds").as_deref(),
            Some("MAX_TOOL_ROUNDS")
        );
        assert_eq!(env_of("data_dir").as_deref(), Some("DATA_DIR"));
    }

    #[test]
    fn an_invalid_value_is_refused_naming_its_variable_and_rule() {
        for (name, raw, rule) in [
            (
                "MAX_TOOL_ROUNDS",
                "0",
                "MAX_TOOL_ROUNDS must be a whole number from 1 to 50",
            ),
            (
                "TOOL_TIMEOUT_SECONDS",
                "601",
                "TOOL_TIMEOUT_SECONDS must be whole seconds from 1 to 600",
            ),
            (
                "HEADER_READ_TIMEOUT_SECS",
                "31",
                "HEADER_READ_TIMEOUT_SECS must be whole seconds from 1 to 30",
            ),
            (
                "IDLE_TIMEOUT_SECS",
                "0",
                "IDLE_TIMEOUT_SECS must be whole seconds from 1 to 3600",
            ),
            (
                "MAX_CONNECTIONS",
                "1048577",
                "MAX_CONNECTIONS must be a whole number from 1 to 1048576",
            ),
            (
                "DATABASE_MAX_CONNECTIONS",
                "0",
                "DATABASE_MAX_CONNECTIONS must be a whole number from 1 to 10000",
            ),
            (
                "CHAT_SYNCHRONOUS_COMMIT",
                "maybe",
                "CHAT_SYNCHRONOUS_COMMIT must be on or off",
            ),
            (
                "LEPTOS_SITE_ADDR",
                "localhost",
                "LEPTOS_SITE_ADDR must be host:port",
            ),
            ("JOB_WORKERS", "two", "JOB_WORKERS must be a whole number"),
            (
                "EXTRACT_MEMORY_MB",
                "64",
                "EXTRACT_MEMORY_MB must be 0 (no limit) or at least 128",
            ),
            (
                "EXTRACT_PROCESSES",
                "0",
                "EXTRACT_PROCESSES must be at least 1",
            ),
            (
                "EXTRACT_TIMEOUT_SECS",
                "0",
                "EXTRACT_TIMEOUT_SECS must be at least 1",
            ),
            (
                "WEBHOOK_RETRY_BASE_MS",
                "0",
                "WEBHOOK_RETRY_BASE_MS must be at least 1",
            ),
            (
                "PROVIDER_TIMEOUT_SECS",
                "1.5",
                "PROVIDER_TIMEOUT_SECS must be whole seconds",
            ),
            (
                "CHANNEL_REQUESTS_PER_MINUTE",
                "0",
                "CHANNEL_REQUESTS_PER_MINUTE must be",
            ),
            ("AGENT_LIMITS", "gold=1", "gold"),
            (
                "TRUSTED_PROXIES",
                "10.0.0.0/33",
                "TRUSTED_PROXIES: `10.0.0.0/33`",
            ),
        ] {
            let err = Settings::from_vars(vars(&[(name, raw)]))
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains(rule), "{name}: {err}");
            let option = format!("--{}", name.to_ascii_lowercase().replace('_', "-"));
            assert!(err.contains(&format!("{option} <{name}>")), "{name}: {err}");
        }
    }

    #[test]
    fn a_bad_secret_is_refused_without_being_quoted() {
        let dir = tempfile::tempdir().unwrap();
        for (name, raw) in [
            ("ENCRYPTION_KEY", "c2hvcnQ="),
            ("ENCRYPTION_KEYS_PREVIOUS", "c2hvcnQ="),
            ("METRICS_TOKEN", "short-secret"),
        ] {
            let settings = Settings::from_vars(vars(&[
                ("DATA_DIR", dir.path().to_str().unwrap()),
                (name, raw),
            ]))
            .unwrap();
            let err = Config::from_settings(&settings, true)
                .err()
                .unwrap()
                .to_string();
            assert!(err.starts_with(name), "{err}");
            assert!(!err.contains(raw), "{err}");
        }
    }
}
