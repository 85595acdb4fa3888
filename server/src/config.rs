//! Configuration from the environment (a `.env` file is read first when present), with
//! the variable names and defaults of docs/api.md § Configuration.

use std::{
    io::Write,
    net::SocketAddr,
    path::{Path, PathBuf},
};

use anyhow::Context;
use base64::{engine::general_purpose::STANDARD, Engine};
use rand::RngCore;
use secrecy::SecretString;

use crate::{domain::Plan, knowledge::sandbox::ExtractionConfig};

/// Everything the service needs to start.
#[derive(Clone)]
pub struct Config {
    /// `LEPTOS_SITE_ADDR`, default `127.0.0.1:3000`. Port 0 picks a free port (tests).
    pub site_addr: SocketAddr,
    /// `DATABASE_URL`, default `sqlite://{DATA_DIR}/agentchat.db`.
    pub database_url: String,
    /// `DATA_DIR`, default `data`: mail outbox, uploads, generated secrets.
    pub data_dir: PathBuf,
    /// `PUBLIC_URL`, default `http://{LEPTOS_SITE_ADDR}`, without a trailing slash: the
    /// base of links in emails and OAuth redirects. When it is https, cookies are `Secure`.
    pub public_url: String,
    /// `JWT_SECRET`, else generated once into `DATA_DIR/jwt_secret`.
    pub jwt_secret: SecretString,
    /// `ENCRYPTION_KEY` (base64 of 32 bytes), else generated once into
    /// `DATA_DIR/encryption_key`.
    pub encryption_key: SecretString,
    /// `ENCRYPTION_KEYS_PREVIOUS`: comma-separated keys `ENCRYPTION_KEY` replaced; values
    /// sealed with them still open, and are sealed again with the current key when written.
    pub encryption_keys_previous: Vec<SecretString>,
    /// `SMTP_URL`, a lettre SMTP transport URL (`smtp://host:port`, `smtps://user:pass@host`).
    /// Unset: mail is written to `DATA_DIR/mail` and its link logged.
    pub smtp_url: Option<SecretString>,
    /// `MAIL_FROM`, default `AgentChat <no-reply@localhost>`.
    pub mail_from: String,
    /// `REDIS_URL`: shared rate-limit state for several instances.
    pub redis_url: Option<String>,
    /// `AGENT_LIMITS`: agents allowed per plan as `free=3,starter=10,business=50,pro=500`.
    pub agent_limits: [u32; 4],
    /// `RATE_LIMITS`: requests per minute per plan, same form; defaults are the contract's
    /// 100/500/2000/10000.
    pub rate_limits: [u32; 4],
    /// `CHANNEL_REQUESTS_PER_MINUTE`: requests per minute that one client IP may send to
    /// one integration's inbound channel endpoint (`/api/channels/{provider}/{id}`: Telegram
    /// updates, Slack events), counted before the request's secret or signature is checked;
    /// default [`CHANNEL_REQUESTS_PER_MINUTE`], at least 1. Over it: 429 (README § Limits).
    pub channel_requests_per_minute: u32,
    /// `OPENAI_API_KEY`: enables the OpenAI-compatible provider.
    pub openai_api_key: Option<SecretString>,
    /// `OPENAI_BASE_URL`, default `https://api.openai.com/v1/` (Ollama:
    /// `http://localhost:11434/v1/`).
    pub openai_base_url: String,
    /// `ANTHROPIC_API_KEY`: enables the Anthropic provider.
    pub anthropic_api_key: Option<SecretString>,
    /// `ANTHROPIC_BASE_URL`, default `https://api.anthropic.com/v1/`.
    pub anthropic_base_url: String,
    /// `DEFAULT_MODEL`: the model of agents that name none.
    pub default_model: Option<String>,
    /// `MAX_MESSAGE_CHARS`: longest chat message in characters, default 32,000.
    pub max_message_chars: usize,
    /// `PROVIDER_TIMEOUT_SECS`: longest wait for a reply's first token, retries and their
    /// backoff included, and longest silence inside a reply, default 60 s; past it the chat
    /// answers 504 (an error frame in a stream).
    pub provider_timeout: std::time::Duration,
    /// `SSE_HEARTBEAT_SECS`: interval of `: ping` comments in a silent stream, default 15 s.
    pub sse_heartbeat: std::time::Duration,
    /// `MAX_UPLOAD_BYTES`: largest knowledge upload, default 20 MiB; larger is 413.
    pub max_upload_bytes: usize,
    /// `HEADER_READ_TIMEOUT_SECS`: longest time a client may take to send a request's head
    /// (request line and header fields), counted from the connection's acceptance or from
    /// the first byte of a next request on a kept-alive connection; default 10 s, 1 to 30 s
    /// (README.md § Security). Then the connection is closed without an answer, so a client
    /// that sends its head slowly ("slow loris") cannot hold a connection.
    pub header_read_timeout: std::time::Duration,
    /// `IDLE_TIMEOUT_SECS`: longest time a kept-alive connection may wait for its next
    /// request after an answer has been sent; default 60 s, 1 s to 1 hour (RFC 9112 § 9.5).
    /// A connection whose answer is still being sent, such as a chat stream, is not idle
    /// and is never closed for this.
    pub idle_timeout: std::time::Duration,
    /// `MAX_CONNECTIONS`: client connections served at once; default 4,096, 1 to 2^20.
    /// Beyond it the server stops accepting until one closes: new connections wait in the
    /// kernel's listen queue (1,024 long) and are served in order as slots free, and when
    /// that queue is full too the kernel turns further attempts away, which clients retry
    /// later. Waiting rather than refusing is what established HTTP servers do: a waiting
    /// connection holds no descriptor or memory of this process, a burst is absorbed
    /// instead of failed, and refusing would mean accepting (a descriptor) only to close
    /// at once. At start the soft limit on open files is raised, up to the hard limit, to
    /// fit this many connections and 1,024 more descriptors (a warning is logged when the
    /// hard limit is lower).
    pub max_connections: usize,
    /// `ALLOWED_PRIVATE_HOSTS`: `host:port` entries the crawler may reach although they
    /// resolve to private addresses (development, tests); default none.
    pub allowed_private_hosts: Vec<String>,
    /// `EMBEDDING_MODEL`: embeddings through the OpenAI-compatible endpoint; unset means
    /// BM25 retrieval only.
    pub embedding_model: Option<String>,
    /// `JOB_WORKERS`: background job workers (ingestion, crawls), default 2; 0 runs none
    /// (jobs wait for another instance) and no webhook delivery worker either.
    pub job_workers: usize,
    /// `WEBHOOK_RETRY_BASE_MS`: the first webhook retry waits up to this long, default
    /// 30,000 ms; every retry time scales with it (see `webhooks::RetryPolicy`: waits are
    /// capped at 720 × base, 6 h, and retries stop 2,880 × base, 24 h, after the event).
    pub webhook_retry_base: std::time::Duration,
    /// How uploads and crawled pages are read: `EXTRACT_TIMEOUT_SECS`, `EXTRACT_MEMORY_MB`,
    /// `EXTRACT_PROCESSES` (see [`ExtractionConfig`]).
    pub extraction: ExtractionConfig,
    /// `TELEGRAM_API_URL`: the Telegram Bot API base, default `https://api.telegram.org`
    /// (a self-hosted Bot API server, tests). Methods are called at `{base}/bot{token}/{method}`.
    pub telegram_api_url: String,
    /// `SLACK_API_URL`: the Slack Web API base, default `https://slack.com/api`; methods are
    /// called at `{base}/{method}` (e.g. `chat.postMessage`).
    pub slack_api_url: String,
    /// Third-party sign-in: `GITHUB_*`, `GOOGLE_*`, `MICROSOFT_*` (docs/api.md § Configuration).
    /// A provider is offered only when both its client id and secret are set.
    pub oauth: OAuthConfig,
    /// Leptos output: `LEPTOS_OUTPUT_NAME` (default `agentchat`).
    pub leptos_output_name: String,
    /// `LEPTOS_SITE_ROOT`, default `target/site`.
    pub leptos_site_root: String,
    /// `LEPTOS_SITE_PKG_DIR`, default `pkg`.
    pub leptos_site_pkg_dir: String,
    /// The live-reload websocket's port while the site runs under `cargo leptos watch`,
    /// which sets `LEPTOS_WATCH` (and `LEPTOS_RELOAD_PORT`, default 3001, the workspace's
    /// `reload-port`); `None` otherwise. Pages then load the live-reload script, and their
    /// Content Security Policy lets it connect (see `http::security::DashboardPolicy`).
    pub live_reload_port: Option<u16>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Secrets are left out on purpose.
        f.debug_struct("Config")
            .field("site_addr", &self.site_addr)
            .field("database_url", &self.database_url)
            .field("data_dir", &self.data_dir)
            .field("public_url", &self.public_url)
            .field("smtp", &self.smtp_url.is_some())
            .field("mail_from", &self.mail_from)
            .finish_non_exhaustive()
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Config {
    /// Reads the environment (after loading `.env` when present), generating missing
    /// secrets into `DATA_DIR`.
    ///
    /// Errors: an unparsable address, limit list or encryption key; an unwritable
    /// `DATA_DIR`.
    pub fn from_env() -> anyhow::Result<Self> {
        let _ = dotenvy::dotenv();
        let site_addr: SocketAddr = var("LEPTOS_SITE_ADDR")
            .unwrap_or_else(|| "127.0.0.1:3000".into())
            .parse()
            .context("LEPTOS_SITE_ADDR must be host:port, e.g. 127.0.0.1:3000")?;
        let data_dir = PathBuf::from(var("DATA_DIR").unwrap_or_else(|| "data".into()));
        let mut config = Self::with_data_dir(data_dir, site_addr)?;
        if let Some(url) = var("DATABASE_URL") {
            config.database_url = url;
        }
        if let Some(url) = var("PUBLIC_URL") {
            config.public_url = url.trim_end_matches('/').to_string();
        }
        if let Some(secret) = var("JWT_SECRET") {
            config.jwt_secret = SecretString::from(secret);
        }
        if let Some(key) = var("ENCRYPTION_KEY") {
            decode_key(&key).context("ENCRYPTION_KEY must be base64 of exactly 32 bytes")?;
            config.encryption_key = SecretString::from(key);
        }
        if let Some(keys) = var("ENCRYPTION_KEYS_PREVIOUS") {
            config.encryption_keys_previous = keys
                .split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(|k| {
                    decode_key(k)
                        .context("ENCRYPTION_KEYS_PREVIOUS must list base64 keys of 32 bytes")
                        .map(|_| SecretString::from(k.to_string()))
                })
                .collect::<anyhow::Result<_>>()?;
        }
        config.smtp_url = var("SMTP_URL").map(SecretString::from);
        if let Some(from) = var("MAIL_FROM") {
            config.mail_from = from;
        }
        config.redis_url = var("REDIS_URL");
        if let Some(limits) = var("AGENT_LIMITS") {
            config.agent_limits = parse_plan_numbers("AGENT_LIMITS", &limits, config.agent_limits)?;
        }
        if let Some(limits) = var("RATE_LIMITS") {
            config.rate_limits = parse_plan_numbers("RATE_LIMITS", &limits, config.rate_limits)?;
        }
        if let Some(v) = var("CHANNEL_REQUESTS_PER_MINUTE") {
            config.channel_requests_per_minute =
                parse_per_minute("CHANNEL_REQUESTS_PER_MINUTE", &v)?;
        }
        config.openai_api_key = var("OPENAI_API_KEY").map(SecretString::from);
        if let Some(v) = var("OPENAI_BASE_URL") {
            config.openai_base_url = v;
        }
        config.anthropic_api_key = var("ANTHROPIC_API_KEY").map(SecretString::from);
        if let Some(v) = var("ANTHROPIC_BASE_URL") {
            config.anthropic_base_url = v;
        }
        config.default_model = var("DEFAULT_MODEL");
        if let Some(v) = var("MAX_MESSAGE_CHARS") {
            config.max_message_chars = v
                .parse()
                .context("MAX_MESSAGE_CHARS must be a whole number")?;
        }
        if let Some(v) = var("PROVIDER_TIMEOUT_SECS") {
            config.provider_timeout = std::time::Duration::from_secs(
                v.parse()
                    .context("PROVIDER_TIMEOUT_SECS must be whole seconds")?,
            );
        }
        if let Some(v) = var("SSE_HEARTBEAT_SECS") {
            config.sse_heartbeat = std::time::Duration::from_secs(
                v.parse()
                    .context("SSE_HEARTBEAT_SECS must be whole seconds")?,
            );
        }
        if let Some(v) = var("MAX_UPLOAD_BYTES") {
            config.max_upload_bytes = v
                .parse()
                .context("MAX_UPLOAD_BYTES must be a whole number of bytes")?;
        }
        if let Some(v) = var("HEADER_READ_TIMEOUT_SECS") {
            let max = crate::connection::MAX_HEADER_READ_TIMEOUT.as_secs();
            config.header_read_timeout = std::time::Duration::from_secs(bounded(
                "HEADER_READ_TIMEOUT_SECS",
                &v,
                1..=max,
                "whole seconds",
            )?);
        }
        if let Some(v) = var("IDLE_TIMEOUT_SECS") {
            let max = crate::connection::MAX_IDLE_TIMEOUT.as_secs();
            config.idle_timeout = std::time::Duration::from_secs(bounded(
                "IDLE_TIMEOUT_SECS",
                &v,
                1..=max,
                "whole seconds",
            )?);
        }
        if let Some(v) = var("MAX_CONNECTIONS") {
            config.max_connections = bounded(
                "MAX_CONNECTIONS",
                &v,
                1..=crate::connection::MAX_MAX_CONNECTIONS,
                "a whole number",
            )?;
        }
        if let Some(v) = var("ALLOWED_PRIVATE_HOSTS") {
            config.allowed_private_hosts = v
                .split(',')
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(str::to_string)
                .collect();
        }
        config.embedding_model = var("EMBEDDING_MODEL");
        if let Some(v) = var("JOB_WORKERS") {
            config.job_workers = v.parse().context("JOB_WORKERS must be a whole number")?;
        }
        if let Some(v) = var("WEBHOOK_RETRY_BASE_MS") {
            let ms: u64 = v
                .parse()
                .context("WEBHOOK_RETRY_BASE_MS must be whole milliseconds")?;
            anyhow::ensure!(ms > 0, "WEBHOOK_RETRY_BASE_MS must be at least 1");
            config.webhook_retry_base = std::time::Duration::from_millis(ms);
        }
        if let Some(v) = var("EXTRACT_TIMEOUT_SECS") {
            let secs: u64 = v
                .parse()
                .context("EXTRACT_TIMEOUT_SECS must be whole seconds")?;
            anyhow::ensure!(secs > 0, "EXTRACT_TIMEOUT_SECS must be at least 1");
            config.extraction.timeout = std::time::Duration::from_secs(secs);
        }
        if let Some(v) = var("EXTRACT_MEMORY_MB") {
            let mib: u64 = v
                .parse()
                .context("EXTRACT_MEMORY_MB must be a whole number of MiB")?;
            anyhow::ensure!(
                mib == 0 || mib >= 128,
                "EXTRACT_MEMORY_MB must be 0 (no limit) or at least 128"
            );
            config.extraction.memory_limit = mib << 20;
        }
        if let Some(v) = var("EXTRACT_PROCESSES") {
            let n: usize = v
                .parse()
                .context("EXTRACT_PROCESSES must be a whole number")?;
            anyhow::ensure!(n > 0, "EXTRACT_PROCESSES must be at least 1");
            config.extraction.processes = n;
        }
        if let Some(v) = var("TELEGRAM_API_URL") {
            config.telegram_api_url = v.trim_end_matches('/').to_string();
        }
        if let Some(v) = var("SLACK_API_URL") {
            config.slack_api_url = v.trim_end_matches('/').to_string();
        }
        config.oauth = OAuthConfig::from_env();
        if let Some(v) = var("LEPTOS_OUTPUT_NAME") {
            config.leptos_output_name = v;
        }
        if let Some(v) = var("LEPTOS_SITE_ROOT") {
            config.leptos_site_root = v;
        }
        if let Some(v) = var("LEPTOS_SITE_PKG_DIR") {
            config.leptos_site_pkg_dir = v;
        }
        if var("LEPTOS_WATCH").is_some() {
            config.live_reload_port = Some(match var("LEPTOS_RELOAD_PORT") {
                Some(v) => v
                    .trim()
                    .parse()
                    .context("LEPTOS_RELOAD_PORT must be a port number")?,
                None => DEFAULT_RELOAD_PORT,
            });
        }
        Ok(config)
    }

    /// Defaults for `data_dir` and `site_addr` with no environment read: secrets generated
    /// into (or read back from) `data_dir`. Tests and tools start from this.
    pub fn with_data_dir(data_dir: PathBuf, site_addr: SocketAddr) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("cannot create DATA_DIR {}", data_dir.display()))?;
        let jwt_secret = load_or_generate(&data_dir.join("jwt_secret"), 64, "JWT secret")?;
        let encryption_key =
            load_or_generate(&data_dir.join("encryption_key"), 32, "encryption key")?;
        decode_key(&encryption_key).context("DATA_DIR/encryption_key is not base64 of 32 bytes")?;
        Ok(Self {
            site_addr,
            database_url: format!("sqlite://{}/agentchat.db", data_dir.display()),
            public_url: format!("http://{site_addr}"),
            jwt_secret: SecretString::from(jwt_secret),
            encryption_key: SecretString::from(encryption_key),
            encryption_keys_previous: Vec::new(),
            smtp_url: None,
            mail_from: "AgentChat <no-reply@localhost>".into(),
            redis_url: None,
            agent_limits: Plan::ALL.map(Plan::default_agent_limit),
            rate_limits: Plan::ALL.map(Plan::requests_per_minute),
            channel_requests_per_minute: CHANNEL_REQUESTS_PER_MINUTE,
            openai_api_key: None,
            openai_base_url: "https://api.openai.com/v1/".into(),
            anthropic_api_key: None,
            anthropic_base_url: "https://api.anthropic.com/v1/".into(),
            default_model: None,
            max_message_chars: 32_000,
            provider_timeout: std::time::Duration::from_secs(60),
            sse_heartbeat: std::time::Duration::from_secs(15),
            max_upload_bytes: 20 * 1024 * 1024,
            header_read_timeout: crate::connection::DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: crate::connection::DEFAULT_IDLE_TIMEOUT,
            max_connections: crate::connection::DEFAULT_MAX_CONNECTIONS,
            allowed_private_hosts: Vec::new(),
            embedding_model: None,
            job_workers: 2,
            webhook_retry_base: std::time::Duration::from_secs(30),
            extraction: ExtractionConfig::default(),
            telegram_api_url: TELEGRAM_API_URL.into(),
            slack_api_url: SLACK_API_URL.into(),
            oauth: OAuthConfig::default(),
            leptos_output_name: "agentchat".into(),
            leptos_site_root: "target/site".into(),
            leptos_site_pkg_dir: "pkg".into(),
            live_reload_port: None,
            data_dir,
        })
    }

    /// Agents allowed on `plan`.
    pub fn agent_limit(&self, plan: Plan) -> u32 {
        self.agent_limits[plan.index()]
    }

    /// Requests per minute allowed on `plan`.
    pub fn rate_limit(&self, plan: Plan) -> u32 {
        self.rate_limits[plan.index()]
    }

    /// The box that seals stored credentials with `ENCRYPTION_KEY` and opens values sealed
    /// with it or with `ENCRYPTION_KEYS_PREVIOUS`.
    ///
    /// Errors: a key that is not base64 of 32 bytes.
    pub fn secret_box(&self) -> anyhow::Result<crate::crypto::SecretBox> {
        use secrecy::ExposeSecret;
        let current = decode_key(self.encryption_key.expose_secret())?;
        let previous = self
            .encryption_keys_previous
            .iter()
            .map(|k| decode_key(k.expose_secret()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(crate::crypto::SecretBox::new(&current, &previous))
    }

    /// The limits on client connections: `HEADER_READ_TIMEOUT_SECS`, `IDLE_TIMEOUT_SECS`
    /// and `MAX_CONNECTIONS`.
    pub fn connection_limits(&self) -> crate::connection::ConnectionLimits {
        crate::connection::ConnectionLimits {
            header_read_timeout: self.header_read_timeout,
            idle_timeout: self.idle_timeout,
            max_connections: self.max_connections,
        }
    }

    /// Whether cookies must carry `Secure` (PUBLIC_URL is https).
    pub fn secure_cookies(&self) -> bool {
        self.public_url.starts_with("https://")
    }
}

/// Default of `CHANNEL_REQUESTS_PER_MINUTE`: requests per minute from one client IP to one
/// integration's inbound channel endpoint (20 a second).
pub const CHANNEL_REQUESTS_PER_MINUTE: u32 = 1_200;

/// The live-reload port of `cargo leptos watch` unless `LEPTOS_RELOAD_PORT` says another
/// (the workspace's `reload-port` in Cargo.toml).
pub const DEFAULT_RELOAD_PORT: u16 = 3001;

/// The Telegram Bot API (core.telegram.org/bots/api, "Making requests").
pub const TELEGRAM_API_URL: &str = "https://api.telegram.org";
/// The Slack Web API (api.slack.com/web, "Basics").
pub const SLACK_API_URL: &str = "https://slack.com/api";
/// Default authorization endpoint of GitHub OAuth apps (GitHub Docs, "Authorizing OAuth apps").
pub const GITHUB_AUTH_URL: &str = "https://github.com/login/oauth/authorize";
/// Default token endpoint of GitHub OAuth apps.
pub const GITHUB_TOKEN_URL: &str = "https://github.com/login/oauth/access_token";
/// Default GitHub REST API base (`/user`, `/user/emails` are appended).
pub const GITHUB_API_URL: &str = "https://api.github.com";
/// Default Google OpenID Connect issuer (discovery at `/.well-known/openid-configuration`).
pub const GOOGLE_ISSUER_URL: &str = "https://accounts.google.com";
/// Default Microsoft identity platform issuer for work, school and personal accounts.
pub const MICROSOFT_ISSUER_URL: &str = "https://login.microsoftonline.com/common/v2.0";

/// An OAuth client registered with one provider.
#[derive(Clone)]
pub struct OAuthClientConfig {
    /// `*_CLIENT_ID`.
    pub client_id: String,
    /// `*_CLIENT_SECRET`; never logged.
    pub client_secret: SecretString,
}

/// GitHub sign-in (plain OAuth 2.0 plus the REST API for the identity).
#[derive(Clone)]
pub struct GithubConfig {
    /// The registered client.
    pub client: OAuthClientConfig,
    /// `GITHUB_AUTH_URL`, default [`GITHUB_AUTH_URL`].
    pub auth_url: String,
    /// `GITHUB_TOKEN_URL`, default [`GITHUB_TOKEN_URL`].
    pub token_url: String,
    /// `GITHUB_API_URL`, default [`GITHUB_API_URL`], without a trailing slash.
    pub api_url: String,
}

/// An OpenID Connect provider (Google, Microsoft): endpoints come from the issuer's
/// discovery document, read at the first sign-in, never at start-up.
#[derive(Clone)]
pub struct OidcConfig {
    /// The registered client.
    pub client: OAuthClientConfig,
    /// `GOOGLE_ISSUER_URL` / `MICROSOFT_ISSUER_URL`, without a trailing slash.
    pub issuer_url: String,
}

/// The configured third-party sign-in providers; `None` is not configured.
#[derive(Clone, Default)]
pub struct OAuthConfig {
    pub github: Option<GithubConfig>,
    pub google: Option<OidcConfig>,
    pub microsoft: Option<OidcConfig>,
}

impl OAuthConfig {
    fn from_env() -> Self {
        let client = |prefix: &str| {
            Some(OAuthClientConfig {
                client_id: var(&format!("{prefix}_CLIENT_ID"))?,
                client_secret: SecretString::from(var(&format!("{prefix}_CLIENT_SECRET"))?),
            })
        };
        let url = |name: &str, default: &str| {
            var(name)
                .unwrap_or_else(|| default.to_string())
                .trim_end_matches('/')
                .to_string()
        };
        Self {
            github: client("GITHUB").map(|client| GithubConfig {
                client,
                auth_url: url("GITHUB_AUTH_URL", GITHUB_AUTH_URL),
                token_url: url("GITHUB_TOKEN_URL", GITHUB_TOKEN_URL),
                api_url: url("GITHUB_API_URL", GITHUB_API_URL),
            }),
            google: client("GOOGLE").map(|client| OidcConfig {
                client,
                issuer_url: url("GOOGLE_ISSUER_URL", GOOGLE_ISSUER_URL),
            }),
            microsoft: client("MICROSOFT").map(|client| OidcConfig {
                client,
                issuer_url: url("MICROSOFT_ISSUER_URL", MICROSOFT_ISSUER_URL),
            }),
        }
    }
}

/// Decodes a base64 32-byte key.
pub fn decode_key(b64: &str) -> anyhow::Result<[u8; 32]> {
    let bytes = STANDARD.decode(b64.trim())?;
    bytes
        .try_into()
        .map_err(|_| anyhow::anyhow!("the key must decode to exactly 32 bytes"))
}

/// Parses per-plan numbers such as `free=3,starter=10,business=50,pro=500` (any subset;
/// plans not named keep `defaults`). `name` is the variable, for error messages.
pub fn parse_plan_numbers(name: &str, raw: &str, defaults: [u32; 4]) -> anyhow::Result<[u32; 4]> {
    let mut limits = defaults;
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (plan, n) = part
            .split_once('=')
            .with_context(|| format!("{name} entries look like plan=number"))?;
        let plan: Plan = plan.parse().map_err(anyhow::Error::msg)?;
        let n: u32 = n
            .trim()
            .parse()
            .with_context(|| format!("{name} numbers must be whole numbers"))?;
        anyhow::ensure!(n > 0, "{name} numbers must be at least 1");
        limits[plan.index()] = n;
    }
    Ok(limits)
}

/// Parses a budget in requests per minute such as `1200`: a whole number from 1 to
/// `u32::MAX`, surrounding spaces ignored. `name` is the variable, for error messages.
pub fn parse_per_minute(name: &str, raw: &str) -> anyhow::Result<u32> {
    let n: u32 = raw
        .trim()
        .parse()
        .with_context(|| format!("{name} must be a whole number of requests per minute"))?;
    anyhow::ensure!(n > 0, "{name} must be at least 1");
    Ok(n)
}

/// Parses `raw`, the value of the variable `name`, as a number within `range`; `what` says
/// what the number is, for the error message ("HEADER_READ_TIMEOUT_SECS must be whole
/// seconds from 1 to 30").
///
/// Errors: not a whole number, or outside `range`.
pub fn bounded<T>(
    name: &str,
    raw: &str,
    range: std::ops::RangeInclusive<T>,
    what: &str,
) -> anyhow::Result<T>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
{
    let message = || {
        format!(
            "{name} must be {what} from {} to {}",
            range.start(),
            range.end()
        )
    };
    let n: T = raw.trim().parse().map_err(|_| anyhow::anyhow!(message()))?;
    anyhow::ensure!(range.contains(&n), message());
    Ok(n)
}

/// Reads a secret file, or creates it with `len` random bytes in base64 and mode 0600.
fn load_or_generate(path: &Path, len: usize, what: &str) -> anyhow::Result<String> {
    if let Ok(existing) = std::fs::read_to_string(path) {
        let existing = existing.trim().to_string();
        if !existing.is_empty() {
            return Ok(existing);
        }
    }
    let mut bytes = vec![0u8; len];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let secret = STANDARD.encode(&bytes);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(secret.as_bytes())?;
    tracing::info!(path = %path.display(), "generated a new {what}");
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_generated_once_with_0600() {
        let dir = tempfile::tempdir().unwrap();
        let addr = "127.0.0.1:0".parse().unwrap();
        let a = Config::with_data_dir(dir.path().to_path_buf(), addr).unwrap();
        let b = Config::with_data_dir(dir.path().to_path_buf(), addr).unwrap();
        use secrecy::ExposeSecret;
        assert_eq!(a.jwt_secret.expose_secret(), b.jwt_secret.expose_secret());
        assert_eq!(
            decode_key(a.encryption_key.expose_secret()).unwrap().len(),
            32
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("jwt_secret"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(!format!("{a:?}").contains(a.jwt_secret.expose_secret()));
    }

    #[test]
    fn bounded_numbers_parse_within_their_range() {
        assert_eq!(
            bounded("X", " 30 ", 1..=30u64, "whole seconds").unwrap(),
            30
        );
        assert_eq!(bounded("X", "1", 1..=30u64, "whole seconds").unwrap(), 1);
        for raw in ["0", "31", "-1", "1.5", "ten", ""] {
            let err = bounded("HEADER_READ_TIMEOUT_SECS", raw, 1..=30u64, "whole seconds")
                .unwrap_err()
                .to_string();
            assert_eq!(
                err, "HEADER_READ_TIMEOUT_SECS must be whole seconds from 1 to 30",
                "{raw:?}"
            );
        }
    }

    #[test]
    fn connection_limits_default_to_the_documented_values() {
        let dir = tempfile::tempdir().unwrap();
        let config =
            Config::with_data_dir(dir.path().to_path_buf(), "127.0.0.1:0".parse().unwrap())
                .unwrap();
        assert_eq!(config.header_read_timeout.as_secs(), 10);
        assert_eq!(config.idle_timeout.as_secs(), 60);
        assert_eq!(config.max_connections, 4096);
    }

    #[test]
    fn plan_numbers_parse() {
        let defaults = Plan::ALL.map(Plan::default_agent_limit);
        assert_eq!(
            parse_plan_numbers("X", "free=1, pro=9", defaults).unwrap(),
            [1, 10, 50, 9]
        );
        assert!(parse_plan_numbers("X", "gold=1", defaults).is_err());
        assert!(parse_plan_numbers("X", "free=x", defaults).is_err());
        assert!(parse_plan_numbers("X", "free=0", defaults).is_err());
    }

    #[test]
    fn per_minute_budgets_parse() {
        assert_eq!(parse_per_minute("X", "1200").unwrap(), 1200);
        assert_eq!(parse_per_minute("X", " 5 ").unwrap(), 5);
        for bad in ["0", "-1", "1.5", "ten", "", "4294967296"] {
            let err = parse_per_minute("X", bad).unwrap_err().to_string();
            assert!(err.starts_with("X must be"), "{bad}: {err}");
        }
        let addr = "127.0.0.1:0".parse().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let config = Config::with_data_dir(dir.path().to_path_buf(), addr).unwrap();
        assert_eq!(
            config.channel_requests_per_minute,
            CHANNEL_REQUESTS_PER_MINUTE
        );
    }
}
