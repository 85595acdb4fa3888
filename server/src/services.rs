//! The composition root: every part of the service, built once at start-up and shared by
//! the HTTP layer, the workers and the tests; nothing here depends on HTTP.

use std::sync::Arc;

use leptos::prelude::LeptosOptions;

use crate::{
    accounts::Accounts,
    agents::AgentService,
    auth::{oauth::OAuth, AuthService},
    channels::Channels,
    chat::ChatService,
    clock::Clock,
    config::{LimitsConfig, MetricsConfig, ServerConfig},
    crypto::SecretBox,
    knowledge::{service::Documents, Knowledge},
    llm::Models,
    mail::Mailer,
    ratelimit::{RateLimiter, SharedRedis},
    store::Store,
    webhooks::Webhooks,
};

/// The shared state: one pointer to [`Services`], so that the clones the HTTP layer makes
/// for every request (router, middleware, extractors) cost one reference-count increment.
#[derive(Clone)]
pub struct AppState(Arc<Services>);

impl AppState {
    /// State over `services`.
    pub fn new(services: Services) -> Self {
        Self(Arc::new(services))
    }
}

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

/// The service's parts, built once at start-up (see [`crate::startup::Application::build`]).
pub struct Services {
    /// The server's configuration: `PUBLIC_URL` (links, cookies' `Secure`, HSTS), the
    /// connection limits and the dashboard's live reload.
    pub server: ServerConfig,
    /// The plans' budgets (requests per minute, agents) and the inbound channel endpoints'.
    pub limits: LimitsConfig,
    /// Persistence.
    pub store: Arc<dyn Store>,
    /// The service clock, shared by every part that reads the time.
    pub clock: Clock,
    /// Authentication rules and sessions.
    pub auth: AuthService,
    /// Sign-up, verification, password sign-in and reset, third-party identities.
    pub accounts: Accounts,
    /// Third-party sign-in (GitHub, Google, Microsoft).
    pub oauth: OAuth,
    /// Encryption of stored credentials (`ENCRYPTION_KEY`).
    pub secrets: SecretBox,
    /// Per-plan request budgets.
    pub limiter: Arc<dyn RateLimiter>,
    /// The Redis holding budgets, throttle and cooldown under `REDIS_URL`; `None` in process.
    pub redis: Option<SharedRedis>,
    /// Outgoing mail.
    pub mailer: Mailer,
    /// Language models.
    pub models: Models,
    /// The knowledge base's shared parts (uploads, crawls, jobs, retrieval).
    pub knowledge: Knowledge,
    /// The knowledge use cases: documents added, read, refreshed and deleted.
    pub documents: Documents,
    /// Webhooks: the event emitter and the delivery rules.
    pub webhooks: Webhooks,
    /// Chat turns: prompts, model calls, replies.
    pub chat: Arc<ChatService>,
    /// Live channels of integrations (Telegram, Slack, the website widget).
    pub channels: Channels,
    /// The owners' integrations: created, read, updated and deleted.
    pub integrations: crate::integrations::Integrations,
    /// Agents: the caller's agent through its cache, creation within the plan's limit,
    /// updates and deletions.
    pub agents: AgentService,
    /// Agents' tools: kept, tested, and run in chat turns.
    pub tools: crate::tools::Tools,
    /// What `GET /api/health/ready` asks: the database, and Redis when configured.
    pub readiness: crate::readiness::Readiness,
    /// The database alone, as `GET /api/health` asks it (`SELECT 1`, unbounded by
    /// [`crate::readiness::READY_TIMEOUT`]); also the first of `readiness`' dependencies.
    pub database: Arc<dyn crate::readiness::Ping>,
    /// Leptos settings for the dashboard.
    pub leptos: LeptosOptions,
    /// Who may read `GET /metrics` (`METRICS_TOKEN`) and where.
    pub metrics: MetricsConfig,
}
