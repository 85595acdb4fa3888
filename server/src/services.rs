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

/// The shared state: one pointer to [`Services`], so a clone per request is one increment.
#[derive(Clone)]
pub struct AppState(Arc<Services>);

impl AppState {
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
    /// `PUBLIC_URL`, the connection limits and the dashboard's live reload.
    pub server: ServerConfig,
    /// The plans' budgets (requests per minute, agents) and the inbound channel endpoints'.
    pub limits: LimitsConfig,
    pub store: Arc<dyn Store>,
    pub clock: Clock,
    pub auth: AuthService,
    pub accounts: Accounts,
    /// Third-party sign-in.
    pub oauth: OAuth,
    /// Encryption of stored credentials.
    pub secrets: SecretBox,
    pub limiter: Arc<dyn RateLimiter>,
    /// The Redis of budgets, throttle and cooldown (`REDIS_URL`); `None` in process.
    pub redis: Option<SharedRedis>,
    pub mailer: Mailer,
    pub models: Models,
    pub knowledge: Knowledge,
    pub documents: Documents,
    pub webhooks: Webhooks,
    pub chat: Arc<ChatService>,
    pub channels: Channels,
    pub integrations: crate::integrations::Integrations,
    pub agents: AgentService,
    pub tools: crate::tools::Tools,
    pub readiness: crate::readiness::Readiness,
    /// The database alone, for `GET /api/health` (`SELECT 1`, no timeout); also in `readiness`.
    pub database: Arc<dyn crate::readiness::Ping>,
    pub leptos: LeptosOptions,
    pub metrics: MetricsConfig,
}
