//! Configuration from the environment (`.env` read first when present), with the names and
//! defaults of README.md § Configuration. Every variable is declared once, in [`Settings`]
//! (also what `agentchat serve --help` lists); [`Config::from_settings`] builds [`Config`],
//! one part per component, and only start-up reads the root.

mod channels;
mod chat;
mod jobs;
mod knowledge;
mod limits;
mod mail;
mod metrics;
mod oauth;
mod outbound;
mod providers;
mod role;
mod secrets;
mod server;
mod settings;
mod storage;
mod webhooks;

use std::{net::SocketAddr, path::PathBuf};

use anyhow::Context;

pub use self::{
    channels::{ChannelsConfig, SLACK_API_URL, TELEGRAM_API_URL},
    chat::ChatConfig,
    jobs::JobsConfig,
    knowledge::{ExtractionConfig, KnowledgeConfig, DEFAULT_EXTRACT_TIMEOUT},
    limits::{
        parse_per_minute, parse_plan_numbers, parse_plan_quotas, LimitsConfig,
        CHANNEL_REQUESTS_PER_MINUTE, REDIS_KEY_PREFIX,
    },
    mail::MailConfig,
    metrics::{MetricsConfig, MIN_METRICS_TOKEN_CHARS},
    oauth::{
        GithubConfig, OAuthClientConfig, OAuthConfig, OidcConfig, GITHUB_API_URL, GITHUB_AUTH_URL,
        GITHUB_TOKEN_URL, GOOGLE_ISSUER_URL, MICROSOFT_ISSUER_URL,
    },
    outbound::OutboundConfig,
    providers::ProvidersConfig,
    role::Role,
    secrets::{decode_key, require_shared_settings, SecretsConfig, SHARED_SETTINGS},
    server::{ServerConfig, DEFAULT_RELOAD_PORT},
    settings::{env_value, unset_blank_env, Settings},
    storage::{
        Backend, StorageConfig, TurnCommit, DEFAULT_DATABASE_CONNECTIONS, MAX_DATABASE_CONNECTIONS,
    },
    webhooks::WebhooksConfig,
};

/// Everything the service needs to start; start-up hands each component its part.
#[derive(Clone)]
pub struct Config {
    /// The listener, `PUBLIC_URL`, connection limits and the dashboard's files.
    pub server: ServerConfig,
    /// `DATABASE_URL` and `DATA_DIR`.
    pub storage: StorageConfig,
    /// `JWT_SECRET`, `ENCRYPTION_KEY`, `ENCRYPTION_KEYS_PREVIOUS`.
    pub secrets: SecretsConfig,
    /// `GITHUB_*`, `GOOGLE_*`, `MICROSOFT_*`; a provider is offered only with client id and secret.
    pub oauth: OAuthConfig,
    /// `SMTP_URL`, `MAIL_FROM`.
    pub mail: MailConfig,
    /// `AGENT_LIMITS`, `RATE_LIMITS`, `CHANNEL_REQUESTS_PER_MINUTE`, `REDIS_*`.
    pub limits: LimitsConfig,
    /// `OPENAI_*`, `ANTHROPIC_*`, `DEFAULT_MODEL`, `PROVIDER_TIMEOUT_SECS`, `EMBEDDING_MODEL`.
    pub providers: ProvidersConfig,
    /// `MAX_MESSAGE_CHARS`, `SSE_HEARTBEAT_SECS`.
    pub chat: ChatConfig,
    /// `MAX_UPLOAD_BYTES`, `EXTRACT_*`.
    pub knowledge: KnowledgeConfig,
    /// `ALLOWED_PRIVATE_HOSTS`.
    pub outbound: OutboundConfig,
    /// `WEBHOOK_RETRY_BASE_MS`.
    pub webhooks: WebhooksConfig,
    /// `JOB_WORKERS`.
    pub jobs: JobsConfig,
    /// `TELEGRAM_API_URL`, `SLACK_API_URL`.
    pub channels: ChannelsConfig,
    /// `METRICS_TOKEN`, `METRICS_ADDR`: who may read `GET /metrics`, and where.
    pub metrics: MetricsConfig,
    /// `agentchat serve --role` (`AGENTCHAT_ROLE`), read by the CLI; default [`Role::All`].
    pub role: Role,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Secrets are left out on purpose.
        f.debug_struct("Config")
            .field("site_addr", &self.server.site_addr)
            .field("database_url", &self.storage.database_url_redacted())
            .field("data_dir", &self.storage.data_dir)
            .field("role", &self.role)
            .field("public_url", &self.server.public_url)
            .field("smtp", &self.mail.smtp_url.is_some())
            .field("mail_from", &self.mail.from)
            .field("metrics", &self.metrics)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Reads the environment (after `.env`) for `agentchat serve`: SQLite generates missing
    /// secrets into `DATA_DIR`; PostgreSQL requires the [`SHARED_SETTINGS`]. Errors: an
    /// unparsable value, an unwritable `DATA_DIR`, each missing required variable (named).
    pub fn from_env() -> anyhow::Result<Self> {
        Self::load(true)
    }

    /// [`Config::from_env`] for the database-only commands: the [`SHARED_SETTINGS`] are not
    /// required and unset secrets are made up in memory. Errors: as `from_env`, but for those.
    pub fn from_env_for_tools() -> anyhow::Result<Self> {
        Self::load(false)
    }

    fn load(require_shared: bool) -> anyhow::Result<Self> {
        let _ = dotenvy::dotenv();
        Self::from_settings(&Settings::from_env()?, require_shared)
    }

    /// The configuration of `settings`; `require_shared` as in [`Config::from_env`], else as in
    /// [`Config::from_env_for_tools`]. Errors: what [`Settings`] does not check itself.
    pub fn from_settings(settings: &Settings, require_shared: bool) -> anyhow::Result<Self> {
        let site_addr = settings.leptos_site_addr;
        let data_dir = settings.data_dir.clone();
        let shared =
            settings.database_url.as_deref().and_then(Backend::of) == Some(Backend::Postgres);
        let mut config = if !shared {
            Self::with_data_dir(data_dir, site_addr)?
        } else if require_shared {
            let secrets =
                SecretsConfig::from_shared_settings(|name| settings.shared_setting(name))?;
            Self::with_secrets(data_dir, site_addr, secrets)?
        } else {
            // Whatever is set replaces these below (`secrets.apply`).
            Self::with_secrets(data_dir, site_addr, SecretsConfig::ephemeral())?
        };
        config.storage.apply(settings);
        config.server.apply(settings)?;
        config.secrets.apply(settings)?;
        config.mail.apply(settings);
        config.limits.apply(settings);
        config.providers.apply(settings);
        config.chat.apply(settings);
        config.knowledge.apply(settings);
        config.outbound.apply(settings);
        config.jobs.apply(settings);
        config.webhooks.apply(settings);
        config.channels.apply(settings);
        config.metrics.apply(settings)?;
        config.oauth = OAuthConfig::from_settings(settings);
        Ok(config)
    }

    /// Defaults for `data_dir` and `site_addr`, no environment read; secrets kept in `data_dir`.
    pub fn with_data_dir(data_dir: PathBuf, site_addr: SocketAddr) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("cannot create DATA_DIR {}", data_dir.display()))?;
        let secrets = SecretsConfig::load_or_generate(&data_dir)?;
        Self::with_secrets(data_dir, site_addr, secrets)
    }

    /// Defaults with the given `secrets`, no environment read. Errors: `data_dir` not creatable.
    pub fn with_secrets(
        data_dir: PathBuf,
        site_addr: SocketAddr,
        secrets: SecretsConfig,
    ) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("cannot create DATA_DIR {}", data_dir.display()))?;
        Ok(Self {
            server: ServerConfig::new(site_addr),
            secrets,
            oauth: OAuthConfig::default(),
            mail: MailConfig::new(&data_dir),
            limits: LimitsConfig::default(),
            providers: ProvidersConfig::default(),
            chat: ChatConfig::default(),
            knowledge: KnowledgeConfig::new(&data_dir),
            outbound: OutboundConfig::default(),
            webhooks: WebhooksConfig::default(),
            jobs: JobsConfig::default(),
            channels: ChannelsConfig::default(),
            metrics: MetricsConfig::default(),
            role: Role::default(),
            storage: StorageConfig::new(data_dir),
        })
    }
}

/// Parses `raw`, the value of variable `name`, as a number within `range`; `what` names the
/// unit in the error. Errors: not a whole number, or outside `range`.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Plan;

    #[test]
    fn secrets_are_generated_once_with_0600() {
        let dir = tempfile::tempdir().unwrap();
        let addr = "127.0.0.1:0".parse().unwrap();
        let a = Config::with_data_dir(dir.path().to_path_buf(), addr).unwrap();
        let b = Config::with_data_dir(dir.path().to_path_buf(), addr).unwrap();
        use secrecy::ExposeSecret;
        assert_eq!(
            a.secrets.jwt_secret.expose_secret(),
            b.secrets.jwt_secret.expose_secret()
        );
        assert_eq!(
            decode_key(a.secrets.encryption_key.expose_secret())
                .unwrap()
                .len(),
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
        assert!(!format!("{a:?}").contains(a.secrets.jwt_secret.expose_secret()));
    }

    /// A lookup over fixed variables, as `Config::from_env` looks up the environment.
    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

    #[test]
    fn a_shared_database_requires_its_secrets_and_public_url() {
        let err = SecretsConfig::from_shared_settings(lookup(&[]))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.ends_with("missing: JWT_SECRET, ENCRYPTION_KEY, PUBLIC_URL"),
            "{err}"
        );
        for (vars, missing) in [
            (
                &[
                    ("ENCRYPTION_KEY", KEY),
                    ("PUBLIC_URL", "https://chat.example.com"),
                ][..],
                "JWT_SECRET",
            ),
            (
                &[
                    ("JWT_SECRET", "s"),
                    ("PUBLIC_URL", "https://chat.example.com"),
                ],
                "ENCRYPTION_KEY",
            ),
            (
                &[("JWT_SECRET", "s"), ("ENCRYPTION_KEY", KEY)],
                "PUBLIC_URL",
            ),
            (
                &[
                    ("JWT_SECRET", "  "),
                    ("ENCRYPTION_KEY", KEY),
                    ("PUBLIC_URL", "x"),
                ],
                "JWT_SECRET",
            ),
        ] {
            let err = require_shared_settings(lookup(vars))
                .unwrap_err()
                .to_string();
            assert!(err.ends_with(&format!("missing: {missing}")), "{err}");
            assert!(
                err.starts_with("DATABASE_URL is a PostgreSQL database"),
                "{err}"
            );
            assert!(SecretsConfig::from_shared_settings(lookup(vars)).is_err());
        }
        let bad_key = [
            ("JWT_SECRET", "s"),
            ("ENCRYPTION_KEY", "c2hvcnQ="),
            ("PUBLIC_URL", "https://chat.example.com"),
        ];
        let err = SecretsConfig::from_shared_settings(lookup(&bad_key))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("ENCRYPTION_KEY must be base64"), "{err}");
        assert!(!err.contains("c2hvcnQ="), "{err}");
    }

    #[test]
    fn a_shared_database_gets_the_given_secrets_and_writes_none() {
        use secrecy::ExposeSecret;
        let vars = [
            ("JWT_SECRET", "shared-signing-secret"),
            ("ENCRYPTION_KEY", KEY),
            ("PUBLIC_URL", "https://chat.example.com"),
        ];
        let secrets = SecretsConfig::from_shared_settings(lookup(&vars)).unwrap();
        assert_eq!(secrets.jwt_secret.expose_secret(), "shared-signing-secret");
        assert_eq!(secrets.encryption_key.expose_secret(), KEY);
        let dir = tempfile::tempdir().unwrap();
        let config = Config::with_secrets(
            dir.path().to_path_buf(),
            "127.0.0.1:0".parse().unwrap(),
            secrets,
        )
        .unwrap();
        assert_eq!(
            config.secrets.jwt_secret.expose_secret(),
            "shared-signing-secret"
        );
        assert!(!dir.path().join("jwt_secret").exists());
        assert!(!dir.path().join("encryption_key").exists());
        assert_eq!(
            SHARED_SETTINGS,
            ["JWT_SECRET", "ENCRYPTION_KEY", "PUBLIC_URL"]
        );
    }

    #[test]
    fn tools_make_up_secrets_in_memory_only() {
        use secrecy::ExposeSecret;
        let (a, b) = (SecretsConfig::ephemeral(), SecretsConfig::ephemeral());
        assert_ne!(a.jwt_secret.expose_secret(), b.jwt_secret.expose_secret());
        assert_eq!(
            decode_key(a.encryption_key.expose_secret()).unwrap().len(),
            32
        );
        assert!(a.encryption_keys().is_ok());
    }

    #[test]
    fn database_connections_and_role_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let mut config =
            Config::with_data_dir(dir.path().to_path_buf(), "127.0.0.1:0".parse().unwrap())
                .unwrap();
        assert_eq!(config.storage.max_connections, DEFAULT_DATABASE_CONNECTIONS);
        assert_eq!(config.storage.max_connections, 16);
        assert_eq!(config.storage.backend(), Some(Backend::Sqlite));
        assert_eq!(config.role, Role::All);
        assert_eq!(
            bounded(
                "DATABASE_MAX_CONNECTIONS",
                "0",
                1..=MAX_DATABASE_CONNECTIONS,
                "a whole number"
            )
            .unwrap_err()
            .to_string(),
            "DATABASE_MAX_CONNECTIONS must be a whole number from 1 to 10000"
        );
        config.storage.database_url = "postgres://agentchat:db-password@db:5432/agentchat".into();
        assert_eq!(config.storage.backend(), Some(Backend::Postgres));
        assert_eq!(
            config.storage.database_url_redacted(),
            "postgres://agentchat:***@db:5432/agentchat"
        );
        let printed = format!("{config:?}");
        assert!(!printed.contains("db-password"), "{printed}");
        assert!(printed.contains("agentchat:***@db"), "{printed}");
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
        assert_eq!(config.server.header_read_timeout.as_secs(), 10);
        assert_eq!(config.server.idle_timeout.as_secs(), 60);
        assert_eq!(config.server.max_connections, 4096);
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
    fn plan_quotas_parse_and_plans_left_out_are_unlimited() {
        assert_eq!(parse_plan_quotas("X", "").unwrap(), [None; 4]);
        assert_eq!(
            parse_plan_quotas("X", "starter=2000000, pro=9000000000").unwrap(),
            [None, Some(2_000_000), None, Some(9_000_000_000)]
        );
        for bad in ["gold=1", "free=x", "free=0", "free", "free=-1"] {
            assert!(parse_plan_quotas("X", bad).is_err(), "{bad}");
        }
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
            config.limits.channel_requests_per_minute,
            CHANNEL_REQUESTS_PER_MINUTE
        );
    }

    #[test]
    fn debug_of_the_whole_config_prints_no_secret() {
        use secrecy::{ExposeSecret, SecretString};
        let dir = tempfile::tempdir().unwrap();
        let mut config =
            Config::with_data_dir(dir.path().to_path_buf(), "127.0.0.1:0".parse().unwrap())
                .unwrap();
        config.secrets.encryption_keys_previous =
            vec![SecretString::from("previous-encryption-key-value")];
        config.mail.smtp_url = Some(SecretString::from(
            "smtps://mailer:smtp-password-value@smtp.example.com",
        ));
        config.providers.openai_api_key = Some(SecretString::from("openai-key-value"));
        config.providers.anthropic_api_key = Some(SecretString::from("anthropic-key-value"));
        config.metrics.token = Some(SecretString::from("metrics-token-value-0123"));
        let client = |secret: &str| OAuthClientConfig {
            client_id: "client-id".into(),
            client_secret: SecretString::from(secret.to_string()),
        };
        config.oauth.github = Some(GithubConfig {
            client: client("github-secret-value"),
            auth_url: GITHUB_AUTH_URL.into(),
            token_url: GITHUB_TOKEN_URL.into(),
            api_url: GITHUB_API_URL.into(),
        });
        config.oauth.google = Some(OidcConfig {
            client: client("google-secret-value"),
            issuer_url: GOOGLE_ISSUER_URL.into(),
        });
        config.oauth.microsoft = Some(OidcConfig {
            client: client("microsoft-secret-value"),
            issuer_url: MICROSOFT_ISSUER_URL.into(),
        });
        let secrets = [
            config.secrets.jwt_secret.expose_secret().to_string(),
            config.secrets.encryption_key.expose_secret().to_string(),
            "previous-encryption-key-value".into(),
            "smtp-password-value".into(),
            "openai-key-value".into(),
            "anthropic-key-value".into(),
            "metrics-token-value-0123".into(),
            "github-secret-value".into(),
            "google-secret-value".into(),
            "microsoft-secret-value".into(),
        ];
        for printed in [format!("{config:?}"), format!("{config:#?}")] {
            assert!(printed.contains("127.0.0.1:0"), "{printed}");
            for secret in &secrets {
                assert!(!printed.contains(secret.as_str()), "{secret} in {printed}");
            }
        }
    }
}
