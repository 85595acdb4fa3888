//! The backend a benchmark runs the service on: the embedded SQLite store (the default),
//! or PostgreSQL and Redis as several instances share them (README.md, "Running several
//! instances").
//!
//! `--database-url postgres://user@host:port/db` names a PostgreSQL *server*: the benchmark
//! creates a scratch database there (`t_` and 32 hex digits, dropped when the benchmark
//! ends) and the service runs on it. `--redis-url redis://host:port` moves rate limits, the
//! sign-in throttle and the mail cooldown to Redis, under a key prefix of this run alone
//! (`REDIS_KEY_PREFIX`), so runs never share a budget. Both are given for the figures of
//! "PostgreSQL + Redis" in BENCHMARKS.md.
//!
//! The shared settings a PostgreSQL instance requires (`JWT_SECRET`, `ENCRYPTION_KEY`,
//! `PUBLIC_URL`) are made once per run and given to every instance, as an operator gives
//! them to every machine.

use agentchat::config::{Config, SecretsConfig};
use anyhow::Context;
use secrecy::ExposeSecret;
use test_support::scratch::ScratchDatabase;

/// `PUBLIC_URL` of the instances on PostgreSQL: the address a load balancer in front of
/// them would have.
pub const PUBLIC_URL: &str = "http://127.0.0.1:8080";

/// The command-line flags that choose the backend, for `#[command(flatten)]`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct BackendArgs {
    /// A PostgreSQL server (`postgres://user@host:port/database`, a user that may create
    /// databases): the service runs on a new scratch database there, dropped at the end,
    /// instead of SQLite.
    #[arg(long)]
    pub database_url: Option<String>,
    /// Redis (`redis://host:port`): rate limits, the sign-in throttle and the mail cooldown
    /// are kept there, under a key prefix of this run alone.
    #[arg(long)]
    pub redis_url: Option<String>,
}

/// The prepared backend: the scratch database (if any), Redis and the shared secrets.
pub struct Backend {
    database: Option<ScratchDatabase>,
    redis_url: Option<String>,
    redis_key_prefix: String,
    secrets: SecretsConfig,
}

impl std::fmt::Debug for Backend {
    // The secrets stay out of debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field(
                "database",
                &self.database.as_ref().map(ScratchDatabase::name),
            )
            .field("redis_url", &self.redis_url)
            .field("redis_key_prefix", &self.redis_key_prefix)
            .finish_non_exhaustive()
    }
}

impl Backend {
    /// Creates the scratch database (when `--database-url` is given) and the run's Redis key
    /// prefix.
    ///
    /// # Errors
    /// The PostgreSQL server cannot be reached, or its user may not create databases.
    pub async fn prepare(args: &BackendArgs) -> anyhow::Result<Self> {
        let database = match &args.database_url {
            Some(url) => {
                anyhow::ensure!(
                    url.starts_with("postgres://") || url.starts_with("postgresql://"),
                    "--database-url must be a postgres:// URL (SQLite is the default)"
                );
                Some(ScratchDatabase::create(url).await.with_context(|| {
                    "creating a scratch database on the --database-url server".to_owned()
                })?)
            }
            None => None,
        };
        let redis_key_prefix = format!("bench-{}:", uuid::Uuid::now_v7().simple());
        Ok(Self {
            database,
            redis_url: args.redis_url.clone(),
            redis_key_prefix,
            secrets: SecretsConfig::ephemeral(),
        })
    }

    /// What the figures were measured on: `SQLite`, `PostgreSQL`, `SQLite + Redis` or
    /// `PostgreSQL + Redis`.
    pub fn label(&self) -> &'static str {
        match (self.database.is_some(), self.redis_url.is_some()) {
            (false, false) => "SQLite",
            (true, false) => "PostgreSQL",
            (false, true) => "SQLite + Redis",
            (true, true) => "PostgreSQL + Redis",
        }
    }

    /// The scratch database's URL, when the service runs on PostgreSQL.
    pub fn database_url(&self) -> Option<&str> {
        self.database.as_ref().map(ScratchDatabase::url)
    }

    /// The environment of a service process on this backend: `DATABASE_URL`, `REDIS_URL`,
    /// `REDIS_KEY_PREFIX`, and on PostgreSQL the shared `JWT_SECRET` and `ENCRYPTION_KEY`.
    /// Empty for SQLite without Redis (the service's defaults).
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = Vec::new();
        if let Some(url) = self.database_url() {
            env.push(("DATABASE_URL".to_owned(), url.to_owned()));
            // One public address for all instances, as behind a load balancer: tokens
            // issued by one are accepted by the others. Nothing listens there; the
            // benchmarks talk to each instance directly.
            env.push(("PUBLIC_URL".to_owned(), PUBLIC_URL.to_owned()));
            env.push((
                "JWT_SECRET".to_owned(),
                self.secrets.jwt_secret.expose_secret().to_owned(),
            ));
            env.push((
                "ENCRYPTION_KEY".to_owned(),
                self.secrets.encryption_key.expose_secret().to_owned(),
            ));
        }
        if let Some(url) = &self.redis_url {
            env.push(("REDIS_URL".to_owned(), url.clone()));
            env.push(("REDIS_KEY_PREFIX".to_owned(), self.redis_key_prefix.clone()));
        }
        env
    }

    /// Points a service built in this process at this backend.
    pub fn configure(&self, config: &mut Config) {
        if let Some(url) = self.database_url() {
            config.storage.database_url = url.to_owned();
        }
        if let Some(url) = &self.redis_url {
            config.limits.redis_url = Some(url.clone());
            config.limits.redis_key_prefix = self.redis_key_prefix.clone();
        }
    }
}
