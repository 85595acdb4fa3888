//! Building and running the application: state, router, listener, graceful shutdown.
//! Tests build it on port 0 with a temporary data folder.

use std::{convert::Infallible, future::Future, net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    extract::{ConnectInfo, DefaultBodyLimit, Request},
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    routing::any,
    serve::{Listener, ListenerExt, TapIo},
    Extension, Router,
};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::graceful::{GracefulShutdown, Watcher},
};
use leptos::prelude::LeptosOptions;
use leptos_axum::{generate_route_list, LeptosRoutes};
use tokio::net::TcpListener;
use tower::{Service, ServiceBuilder, ServiceExt as _};
use tower_http::{
    catch_panic::CatchPanicLayer,
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    set_header::SetResponseHeaderLayer,
};
use utoipa_axum::router::OpenApiRouter;

use crate::{
    accounts::Accounts,
    auth::oauth::OAuth,
    auth::{password::PasswordHasher, tokens::JwtKeys, AuthService, Clock},
    cluster::Bus,
    config::{Config, ProvidersConfig, Role},
    connection::{Activity, ConnectionLimits, Deadline, Protocol, Tracked, Watched},
    http::error::ApiError,
    http::{self, ops::OpenApiDocument, security},
    mail::Mailer,
    ratelimit::{GovernorLimiter, RateLimiter, RedisLimiter, SharedRedis},
    readiness::{Ping, Readiness, StorePing},
    redis_ping::RedisHandle,
    services::{AppState, Services},
    store,
    telemetry::{RequestSpanLayer, REQUEST_ID},
};

/// How long a graceful shutdown waits for chat turns still being written.
pub const SHUTDOWN_FLUSH: std::time::Duration = std::time::Duration::from_secs(10);

/// A built, bound, not yet running service.
pub struct Application {
    /// Shared state (tests reach the store and clock through it).
    pub state: AppState,
    listener: TcpListener,
    role: Role,
    /// The `METRICS_ADDR` listener, which serves only `GET /metrics`.
    metrics_listener: Option<TcpListener>,
    /// Where finished replies' frames are kept from a graceful shutdown to the next start,
    /// when no Redis keeps them ([`REPLIES_FILE`] in `DATA_DIR`).
    replies_file: Option<std::path::PathBuf>,
}

/// The file in `DATA_DIR` that keeps finished replies' frames across a graceful restart
/// when no Redis keeps them (docs/api.md § Resumable streams).
pub const REPLIES_FILE: &str = "replies.json";

impl Application {
    /// Connects and migrates the store, builds the services, starts the workers the role runs and
    /// binds the listeners. Errors: the store, `REDIS_URL`, a component's configuration, a bind.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        let store = crate::store::open(&config.storage).await?;
        store.migrate().await?;
        let redis = shared_limits(&config.storage.database_url, &config.limits)?;
        // Cache invalidations and worker wake-ups across instances (PostgreSQL), or none.
        let bus = Bus::for_database(&config.storage.database_url).await?;
        tracing::info!(bus = bus.mode(), "cluster bus ready");
        let database: Arc<dyn Ping> = Arc::new(StorePing(store.clone()));
        let mut dependencies: Vec<Arc<dyn Ping>> = vec![database.clone()];
        if let Some(url) = &config.limits.redis_url {
            dependencies.push(Arc::new(RedisHandle::open(url)?));
        }
        let role = config.role;
        #[cfg(unix)]
        crate::connection::fit_open_files(config.server.max_connections);
        let listener = TcpListener::bind(config.server.site_addr).await?;
        let addr = listener.local_addr()?;
        // Metrics are recorded only when someone may read them (README § Metrics).
        if config.metrics.enabled() {
            crate::metrics::install();
        }
        let metrics_listener = match config.metrics.addr {
            Some(at) => Some(
                TcpListener::bind(at)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot listen on METRICS_ADDR {at}: {e}"))?,
            ),
            None => None,
        };
        let mut config = config;
        if config.server.public_url.ends_with(":0") {
            config.server.public_url = format!("http://{addr}");
        }
        let jwt = JwtKeys::new(&config.secrets.jwt_secret, &config.server.public_url);
        let hasher =
            PasswordHasher::new(std::thread::available_parallelism().map_or(2, |n| n.get()) * 2)?;
        let governor = Arc::new(GovernorLimiter::new(
            &[http::ANONYMOUS_PER_MINUTE],
            &[config.limits.channel_requests_per_minute],
        ));
        let limiter: Arc<dyn RateLimiter> = match &redis {
            Some(redis) => {
                let shared = RedisLimiter::new(redis.clone(), governor.clone());
                shared.warm_up().await;
                Arc::new(shared)
            }
            None => governor.clone(),
        };
        let clock = Clock::default();
        let prune = role.serves_api().then(|| governor.clone());
        let events = role.runs_workers().then(|| store.clone());
        let now = clock.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(60));
            loop {
                every.tick().await;
                if let Some(limiter) = &prune {
                    limiter.prune();
                }
                let Some(events) = &events else { continue };
                let before = now.now()
                    - chrono::Duration::from_std(crate::channels::EVENT_MEMORY).unwrap_or_default();
                if let Err(e) = events.prune_channel_events(before).await {
                    tracing::warn!(error = %e, "pruning inbound channel events failed");
                }
            }
        });
        let leptos = LeptosOptions::builder()
            .output_name(config.server.leptos_output_name.clone())
            .site_root(config.server.leptos_site_root.clone())
            .site_pkg_dir(crate::site::pkg_dir(&config.server.leptos_site_pkg_dir))
            .site_addr(addr)
            .reload_port(u32::from(
                config
                    .server
                    .live_reload_port
                    .unwrap_or(crate::config::DEFAULT_RELOAD_PORT),
            ))
            .build();
        let models = build_models(&config.providers)?;
        tokio::task::spawn_blocking(crate::llm::tokens::warm_up);
        let (current_key, previous_keys) = config.secrets.encryption_keys()?;
        let secrets = crate::crypto::SecretBox::new(&current_key, &previous_keys);
        let webhooks = crate::webhooks::Webhooks::new(
            &config.webhooks,
            &config.outbound,
            secrets.clone(),
            store.clone(),
            clock.clone(),
        )?
        .with_bus(&bus);
        // Uploads beside an embedded database, in a server database (read by every
        // instance's workers) otherwise.
        let uploads = store::uploads::for_backend(
            &config.storage.database_url,
            store.clone(),
            &config.knowledge.uploads,
        )?;
        let knowledge = crate::knowledge::Knowledge::new(
            &config.knowledge,
            &config.outbound,
            &config.providers,
            store.clone(),
            store.clone(),
            uploads,
            webhooks.events.clone(),
            clock.clone(),
        )?
        .with_bus(&bus);
        if role.runs_workers() {
            crate::knowledge::worker::spawn(knowledge.clone(), config.jobs.workers);
            crate::knowledge::refresh::spawn(knowledge.clone());
            if config.jobs.workers > 0 {
                crate::webhooks::worker::spawn(webhooks.clone());
            }
        }
        let agents = crate::agents::AgentService::new(
            store.clone(),
            models.clone(),
            webhooks.events.clone(),
            clock.clone(),
            (knowledge.documents.clone(), knowledge.uploads.clone()),
            config.limits.agent_limits,
        )
        .with_bus(&bus);
        let tools = crate::tools::Tools::new(
            store.clone(),
            secrets.clone(),
            agents.clone(),
            knowledge.clone(),
            crate::outbound::SafeClient::for_purpose(
                (*knowledge.policy).clone(),
                crate::tools::service::ACTION_LIMITS,
                crate::outbound::Purpose::Tools,
            )?,
            clock.clone(),
            config.chat.tool_timeout,
            crate::tools::mcp::McpClients::new(&knowledge.policy)?,
        );
        let mailer = Mailer::new(&config.mail)?;
        let quotas = crate::chat::quota::Quotas::new(
            config.limits.token_quotas,
            store.clone(),
            store.clone(),
            mailer.clone(),
            webhooks.events.clone(),
            clock.clone(),
        );
        let chat = Arc::new(crate::chat::ChatService::new(
            store.clone(),
            store.clone(),
            models.clone(),
            knowledge.clone(),
            webhooks.events.clone(),
            clock.clone(),
            &config.chat,
            config.providers.timeout,
            tools.clone(),
            quotas,
            // A connection of its own: replies' frames come in bursts.
            crate::chat::replies::Replies::new(match (&redis, &config.limits.redis_url) {
                (Some(_), Some(url)) => {
                    Some(SharedRedis::connect(url, &config.limits.redis_key_prefix)?)
                }
                _ => None,
            }),
        ));
        let replies_file =
            (!chat.replies().is_shared()).then(|| config.storage.data_dir.join(REPLIES_FILE));
        if let Some(path) = &replies_file {
            let restored = chat.replies().restore(path);
            if restored > 0 {
                tracing::info!(
                    replies = restored,
                    "finished replies kept at the last shutdown are resumable again"
                );
            }
        }
        let channels = crate::channels::Channels::new(
            &config.channels,
            &config.server.public_url,
            store.clone(),
            store.clone(),
            chat.clone(),
            agents.clone(),
            secrets.clone(),
            clock.clone(),
        )?;
        let integrations = crate::integrations::Integrations::new(
            store.clone(),
            secrets.clone(),
            channels.clone(),
            agents.clone(),
            webhooks.events.clone(),
            clock.clone(),
            &config.server.public_url,
        );
        let documents = crate::knowledge::service::Documents::new(
            knowledge.clone(),
            agents.clone(),
            clock.clone(),
        );
        let mut auth = AuthService::new(store.clone(), store.clone(), jwt, hasher, clock.clone())
            .with_bus(&bus);
        if let Some(redis) = &redis {
            auth.share_limits(redis);
        }
        let oauth = OAuth::new(config.oauth, &config.server.public_url)?;
        let accounts = Accounts::new(
            store.clone(),
            store.clone(),
            auth.clone(),
            oauth.clone(),
            mailer.clone(),
            &config.server.public_url,
        );
        let state = AppState::new(Services {
            accounts,
            models,
            knowledge,
            documents,
            webhooks,
            auth,
            clock,
            oauth,
            secrets,
            chat,
            channels,
            integrations,
            agents,
            tools,
            mailer,
            server: config.server,
            limits: config.limits,
            store,
            limiter,
            readiness: Readiness::new(dependencies),
            database,
            redis,
            leptos,
            metrics: config.metrics,
        });
        Ok(Self {
            state,
            listener,
            role,
            metrics_listener,
            replies_file,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The bound address of the `METRICS_ADDR` listener, when there is one.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// Serves until `shutdown`, then finishes in-flight requests and writes their turns (at most
    /// [`SHUTDOWN_FLUSH`]): [`service`], or [`health_service`] for [`Role::Worker`], plus metrics.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        self.run_until_stopped_on(0, shutdown).await
    }

    /// [`Application::run_until_stopped`] with connections spread over this runtime and `threads`
    /// single-threaded ones on the same socket, within one connection limit.
    /// Errors: the socket cannot be shared (`dup`), or a thread cannot be started.
    pub async fn run_until_stopped_on(
        self,
        threads: usize,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        use futures::FutureExt as _;
        let limits = self.state.server.connection_limits();
        let shutdown = shutdown.boxed().shared();
        if let Some(metrics) = self.metrics_listener {
            let addr = metrics.local_addr()?;
            tracing::info!(%addr, "metrics served on http://{addr}/metrics");
            tokio::spawn(serve_http(
                nodelay(metrics),
                http::metrics::listener_service(self.state.clone()),
                limits,
                shutdown.clone(),
            ));
        }
        let chat = self.state.chat.clone();
        let replies = chat.replies().clone();
        let replies_file = self.replies_file.clone();
        let (grace, handover) = (
            chat.config().shutdown_grace,
            chat.config().shutdown_handover,
        );
        // The drain (docs/api.md § Drains): not ready at once, streams cut after the grace
        // period, resumable replies stopped after the handover.
        tokio::spawn({
            let (replies, shutdown) = (replies.clone(), shutdown.clone());
            async move {
                shutdown.await;
                replies.drain();
                tokio::time::sleep(grace).await;
                replies.end_grace();
                tokio::time::sleep(handover).await;
                replies.end_handover();
            }
        });
        let extra = if self.role.serves_api() {
            serve_on_threads(
                threads,
                self.listener,
                service(self.state),
                limits,
                shutdown,
            )
            .await?
        } else {
            let health = health_service(self.state);
            serve_on_threads(threads, self.listener, health, limits, shutdown).await?
        };
        // Resumable replies generate until they end or the handover is over, their frames
        // written to Redis; then the turns of the last requests (a stream cut by the
        // shutdown is stored as cancelled or interrupted) are written before the process
        // exits.
        replies.end_grace();
        replies.drained().await;
        if tokio::time::timeout(SHUTDOWN_FLUSH, chat.flush())
            .await
            .is_err()
        {
            tracing::warn!("chat turns were still being written when the shutdown ended");
        }
        if let Some(path) = &replies_file {
            match replies.save(path) {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    replies = n,
                    "finished replies kept for resuming after the restart"
                ),
                Err(e) => tracing::warn!(
                    path = %path.display(),
                    error = %e,
                    "finished replies could not be kept: they cannot be resumed after the restart"
                ),
            }
        }
        extra.end().await;
        Ok(())
    }
}

/// How `agentchat serve` runs its asynchronous work (README § Configuration, "Threads").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtimes {
    /// One multi-threaded Tokio runtime with a worker per core, moving tasks between workers.
    Shared,
    /// A single-threaded runtime per core; a conversation stays on its accepting thread
    /// (docs/architecture.md).
    PerCore {
        /// Threads beside the main one (cores − 1).
        extra: usize,
    },
}

impl Runtimes {
    /// [`Runtimes::PerCore`] on more than one core; [`Runtimes::Shared`] on one.
    pub fn for_cores(cores: usize) -> Self {
        if cores > 1 {
            Self::PerCore { extra: cores - 1 }
        } else {
            Self::Shared
        }
    }

    /// The main thread's runtime. Errors: its I/O or timer driver cannot be set up.
    pub fn main_runtime(self) -> std::io::Result<tokio::runtime::Runtime> {
        match self {
            Self::Shared => tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build(),
            Self::PerCore { .. } => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build(),
        }
    }

    /// The threads that serve connections beside the main thread.
    pub fn extra_threads(self) -> usize {
        match self {
            Self::Shared => 0,
            Self::PerCore { extra } => extra,
        }
    }
}

/// What the listeners serve: a cloneable tower service ([`service`], [`health_service`]).
pub trait HttpService:
    Service<Request, Response = Response, Error = Infallible, Future: Send>
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S> HttpService for S where
    S: Service<Request, Response = Response, Error = Infallible, Future: Send>
        + Clone
        + Send
        + Sync
        + 'static
{
}

/// The extra threads of [`serve_on_threads`], once their listeners have stopped.
struct ExtraRuntimes {
    finish: tokio::sync::watch::Sender<bool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl ExtraRuntimes {
    /// Ends the threads' runtimes (dropping their tasks) and joins the threads.
    async fn end(self) {
        let _ = self.finish.send(true);
        let threads = self.threads;
        let _ = tokio::task::spawn_blocking(move || {
            for thread in threads {
                let _ = thread.join();
            }
        })
        .await;
    }
}

/// Serves `service` on `listener` until `shutdown` from this runtime and `threads` more, within
/// one connection limit. Errors: as [`Application::run_until_stopped_on`].
async fn serve_on_threads(
    threads: usize,
    listener: TcpListener,
    service: impl HttpService,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Clone + Send + 'static,
) -> std::io::Result<ExtraRuntimes> {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let (finish, finished) = tokio::sync::watch::channel(false);
    let mut handles = Vec::with_capacity(threads);
    let mut stopped = Vec::with_capacity(threads);
    let listener = if threads == 0 {
        listener
    } else {
        let shared = listener.into_std()?;
        for n in 1..=threads {
            // A second descriptor of the same socket (non-blocking, as the first).
            let listener = shared.try_clone()?;
            let (service, shutdown, slots) = (service.clone(), shutdown.clone(), slots.clone());
            let (done, listening) = tokio::sync::oneshot::channel::<()>();
            let finished = finished.clone();
            let handle = std::thread::Builder::new()
                .name(format!("agentchat-http-{n}"))
                .spawn(move || {
                    let serving = serve_connections_on(listener, service, limits, slots, shutdown);
                    run_connection_thread(serving, done, finished);
                })?;
            handles.push(handle);
            stopped.push(listening);
        }
        TcpListener::from_std(shared)?
    };
    serve_connections(nodelay(listener), service, limits, slots, shutdown).await;
    for listening in stopped {
        let _ = listening.await;
    }
    Ok(ExtraRuntimes {
        finish,
        threads: handles,
    })
}

/// [`serve_connections`] on a descriptor of the shared socket, once its runtime has taken it.
async fn serve_connections_on(
    listener: std::net::TcpListener,
    service: impl HttpService,
    limits: ConnectionLimits,
    slots: Arc<tokio::sync::Semaphore>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    match TcpListener::from_std(listener) {
        Ok(listener) => {
            serve_connections(nodelay(listener), service, limits, slots, shutdown).await
        }
        Err(e) => tracing::error!(error = %e, "a connection thread cannot listen"),
    }
}

/// An extra thread: runs `serving` on its own runtime, reports via `done`, lives until `finished`.
fn run_connection_thread(
    serving: impl Future<Output = ()>,
    done: tokio::sync::oneshot::Sender<()>,
    mut finished: tokio::sync::watch::Receiver<bool>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(error = %e, "a connection thread cannot start its runtime");
            return;
        }
    };
    runtime.block_on(async move {
        serving.await;
        drop(done);
        let _ = finished.wait_for(|end| *end).await;
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
}

/// Where rate limits, the sign-in throttle and mail cooldown are kept (Redis, or `None` in
/// process), logged once. Errors: `REDIS_URL` is not a Redis URL.
fn shared_limits(
    database_url: &str,
    limits: &crate::config::LimitsConfig,
) -> anyhow::Result<Option<SharedRedis>> {
    let backend = store::Backend::of(database_url);
    let Some(url) = &limits.redis_url else {
        if backend == Some(store::Backend::Postgres) {
            tracing::warn!(
                "REDIS_URL is unset: rate limits, the failed-sign-in throttle and the mail \
                 cooldown are kept per instance, so each instance of a PostgreSQL installation \
                 grants the full budgets; set REDIS_URL to share them"
            );
        } else {
            tracing::info!(
                "rate limits, the failed-sign-in throttle and the mail cooldown are kept in process"
            );
        }
        return Ok(None);
    };
    let redis = SharedRedis::connect(url, &limits.redis_key_prefix)?;
    tracing::info!(
        key_prefix = %limits.redis_key_prefix,
        "rate limits, the failed-sign-in throttle and the mail cooldown are kept in Redis \
         (REDIS_URL), shared by every instance that uses it"
    );
    if backend == Some(store::Backend::Sqlite) {
        tracing::warn!(
            "REDIS_URL is set with an SQLite database: several instances on one SQLite file \
             are not supported; run one instance, or use PostgreSQL to run several"
        );
    }
    Ok(Some(redis))
}

/// The configured providers (OpenAI-compatible, then Anthropic) and the offline model.
pub fn build_models(config: &ProvidersConfig) -> anyhow::Result<crate::llm::Models> {
    use crate::llm::remote::{Flavor, RemoteProvider};
    let mut providers: Vec<Arc<dyn crate::llm::Provider>> = Vec::new();
    if let Some(key) = &config.openai_api_key {
        providers.push(Arc::new(RemoteProvider::new(
            Flavor::OpenAi,
            &config.openai_base_url,
            key.clone(),
            config.timeout,
        )?));
    }
    if let Some(key) = &config.anthropic_api_key {
        providers.push(Arc::new(RemoteProvider::new(
            Flavor::Anthropic,
            &config.anthropic_base_url,
            key.clone(),
            config.timeout,
        )?));
    }
    Ok(crate::llm::Models::new(
        providers,
        config.default_model.clone(),
    ))
}

/// What answers every request, outermost first: HTTP metrics, [`http::security`] headers,
/// `X-Request-Id`, [`RequestSpanLayer`], panics as JSON 500, the JSON 431
/// ([`http::security::HeadLimitLayer`]), the request's arrival and answer marked as
/// [`crate::foreground`] work, [`http::ApiService`], [`router`]; one tower stack.
pub fn service(state: AppState) -> impl HttpService {
    let router = router(state.clone());
    let arrived = state.knowledge.foreground.clone();
    let answered = arrived.clone();
    let hsts = security::hsts(&state.server.public_url);
    let metrics = crate::metrics::HttpMetricsLayer::new(state.metrics.enabled(), || {
        http::metrics::service_routes(&state.leptos)
    });
    ServiceBuilder::new()
        .map_response(IntoResponse::into_response)
        .layer(metrics)
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            security::NOSNIFF,
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::REFERRER_POLICY,
            security::REFERRER_POLICY,
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_FRAME_OPTIONS,
            security::FRAME_OPTIONS,
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            security::DEFAULT_CSP,
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::STRICT_TRANSPORT_SECURITY,
            hsts,
        ))
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .layer(RequestSpanLayer)
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(security::HeadLimitLayer)
        .map_request(move |request: Request| {
            arrived.touch();
            request
        })
        .map_response(move |response: Response| {
            answered.touch();
            response
        })
        .layer(http::ApiLayer::new(state))
        .service(router)
}

/// What a [`Role::Worker`] answers: health, readiness and metrics as [`service`], else 404.
pub fn health_service(state: AppState) -> impl HttpService {
    let (api, doc) = OpenApiRouter::new()
        .merge(http::ops::health_router())
        .merge(http::metrics::router())
        .split_for_parts();
    let metrics = crate::metrics::HttpMetricsLayer::new(state.metrics.enabled(), || {
        crate::metrics::RouteTemplates::new(doc.paths.paths.keys().map(String::as_str))
    });
    let router: Router = api.fallback(http::api_not_found).with_state(state);
    ServiceBuilder::new()
        .map_response(IntoResponse::into_response)
        .layer(metrics)
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            security::NOSNIFF,
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            security::DEFAULT_CSP,
        ))
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .layer(RequestSpanLayer)
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(security::HeadLimitLayer)
        .service(router)
}

/// The routes: `/api` (JSON) and the dashboard, without [`service`]'s middleware.
pub fn router(state: AppState) -> Router {
    let (api, mut openapi) = http::api_router().split_for_parts();
    let missing = http::openapi::apply_input_rules(&mut openapi, state.chat.config());
    if !missing.is_empty() {
        tracing::warn!(
            ?missing,
            "request fields without their length rule in the OpenAPI document"
        );
    }
    let api: Router<AppState> = api
        .route("/api", any(http::api_not_found))
        .route("/api/{*rest}", any(http::api_not_found))
        .layer(Extension(OpenApiDocument(Arc::new(openapi))))
        .layer(DefaultBodyLimit::max(http::MAX_JSON_BODY));
    let routes = generate_route_list(app::App);
    let leptos = state.leptos.clone();
    let pages = security::page_headers(security::DashboardPolicy::new(
        state.server.live_reload_port,
    ));
    // The dashboard's WASM, JS and CSS, compressed (brotli or gzip, as the browser accepts),
    // from the site folder or from inside the binary (crate::site).
    let files = crate::site::routes(&leptos);
    Router::new()
        .merge(api)
        .merge(files)
        .route("/widget.js", axum::routing::get(http::widget::script))
        .leptos_routes_with_context(&state, routes, pages.clone(), move || {
            app::shell(leptos.clone())
        })
        .fallback(leptos_axum::file_and_error_handler_with_context::<
            AppState,
            _,
        >(pages, app::shell))
        .with_state(state)
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked");
    let mut response = ApiError::Internal(anyhow::anyhow!("handler panicked")).into_response();
    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    response
}

/// Completes on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}

/// Size limit of hyper's read buffer in bytes: twice [`http::security::MAX_HEAD_BYTES`], so a
/// head somewhat over the limit still gets the contract's JSON 431.
pub const PARSER_BUFFER_BYTES: usize = 2 * http::security::MAX_HEAD_BYTES;
/// Header fields hyper accepts in one head: twice [`http::security::MAX_HEADER_FIELDS`], as above.
pub const PARSER_HEADER_FIELDS: usize = 2 * http::security::MAX_HEADER_FIELDS;
/// Streams open at once on one HTTP/2 connection (`SETTINGS_MAX_CONCURRENT_STREAMS`): the
/// least RFC 9113 § 5.1.2 recommends; a client needing more opens another connection.
pub const HTTP2_MAX_STREAMS: u32 = 100;

/// Serves `service` over HTTP/1.1, or HTTP/2 to clients that open with its preface (h2c with
/// prior knowledge, RFC 9113 § 3.3; at most [`HTTP2_MAX_STREAMS`] streams per connection), on
/// `listener` (requests carry `ConnectInfo<SocketAddr>`) until `shutdown`, then waits for
/// in-flight requests. `limits` ([`crate::connection`]): beyond `max_connections` the listener
/// is not read; heads within `header_read_timeout`, [`PARSER_BUFFER_BYTES`] and
/// [`PARSER_HEADER_FIELDS`]; idle connections close after `idle_timeout`.
pub async fn serve_http<L, S>(
    listener: L,
    service: S,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) where
    L: Listener<Addr = SocketAddr>,
    S: HttpService,
{
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    serve_connections(listener, service, limits, slots, shutdown).await;
}

/// [`serve_http`] within `slots`, which other listeners may share.
async fn serve_connections<L, S>(
    mut listener: L,
    service: S,
    limits: ConnectionLimits,
    slots: Arc<tokio::sync::Semaphore>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) where
    L: Listener<Addr = SocketAddr>,
    S: HttpService,
{
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .max_buf_size(PARSER_BUFFER_BYTES)
        .max_headers(PARSER_HEADER_FIELDS)
        // The connection's own timer bounds heads and idle waits (see `connection`).
        .header_read_timeout(None);
    let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    http2
        .max_concurrent_streams(HTTP2_MAX_STREAMS)
        .max_header_list_size(u32::try_from(PARSER_BUFFER_BYTES).unwrap_or(u32::MAX));
    let protocols = Arc::new(Protocols { http1, http2 });
    let stack = Arc::new(service);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // A free slot first, then a connection: while every slot is taken, new connections
        // stay in the listen queue, where they hold no descriptor of this process.
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot,
            () = &mut shutdown => break,
        };
        let Ok(slot) = slot else { break };
        let (io, remote) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let activity = Activity::new();
        let service = ConnectionService {
            stack: stack.clone(),
            remote,
            activity: activity.clone(),
        };
        let connection = serve_connection(
            Watched::new(io, activity.clone()),
            service,
            protocols.clone(),
            graceful.watcher(),
        );
        let connection = Deadline::new(connection, activity, &limits);
        tokio::spawn(async move {
            match connection.await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => tracing::debug!(error = %err, "connection ended with an error"),
                Err(timed_out) => tracing::debug!(%remote, "connection closed: {timed_out}"),
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// The connection builders of the two protocols a listener serves.
struct Protocols {
    http1: hyper::server::conn::http1::Builder,
    http2: hyper::server::conn::http2::Builder<TokioExecutor>,
}

/// Serves one connection in the protocol its first bytes name ([`Watched::sniff`]), watched
/// for the graceful shutdown. An HTTP/2 connection's state is boxed: it is rare beside
/// HTTP/1.1 ones, whose tasks would otherwise all make room for it.
async fn serve_connection<I, S>(
    mut io: Watched<I>,
    service: ConnectionService<S>,
    protocols: Arc<Protocols>,
    watcher: Watcher,
) -> Result<(), tower::BoxError>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    S: HttpService,
{
    match io.sniff().await? {
        Protocol::Http1 => {
            let connection = protocols.http1.serve_connection(TokioIo::new(io), service);
            drop(protocols);
            watcher.watch(connection).await?;
        }
        Protocol::Http2 => {
            service.activity.multiplexed();
            let connection = protocols.http2.serve_connection(TokioIo::new(io), service);
            drop(protocols);
            Box::pin(watcher.watch(connection)).await?;
        }
    }
    Ok(())
}

/// A connection's service: the listener's stack, shared and cloned per request, each answer
/// boxed (hyper keeps both the service and room for one answer while the connection is open).
/// Requests get `ConnectInfo` of `remote`; an answer's body keeps the connection busy
/// ([`Activity::begin`]) until hyper drops it.
struct ConnectionService<S> {
    stack: Arc<S>,
    remote: SocketAddr,
    activity: Arc<Activity>,
}

impl<S: HttpService> hyper::service::Service<hyper::Request<Incoming>> for ConnectionService<S> {
    type Response = hyper::Response<Tracked<axum::body::Body>>;
    type Error = Infallible;
    type Future = std::pin::Pin<
        Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send + 'static>,
    >;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        let mut request = request.map(axum::body::Body::new);
        request.extensions_mut().insert(ConnectInfo(self.remote));
        let in_flight = self.activity.begin();
        let answer = S::clone(&self.stack).oneshot(request);
        Box::pin(async move {
            let Ok(response) = answer.await;
            Ok(response.map(|body| Tracked::new(body, in_flight)))
        })
    }
}

/// `listener` with `TCP_NODELAY`, so streamed chunks are not held back by Nagle's algorithm.
pub fn nodelay(
    listener: tokio::net::TcpListener,
) -> TapIo<tokio::net::TcpListener, fn(&mut tokio::net::TcpStream)> {
    listener.tap_io(set_nodelay)
}

fn set_nodelay(tcp: &mut tokio::net::TcpStream) {
    if let Err(err) = tcp.set_nodelay(true) {
        tracing::warn!(error = %err, "cannot set TCP_NODELAY on a connection");
    }
}

#[cfg(test)]
mod nodelay_tests {
    use super::*;

    #[tokio::test]
    async fn accepted_connections_have_tcp_nodelay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut listener = nodelay(listener);
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (stream, _) = listener.accept().await;
        assert!(stream.nodelay().unwrap());
    }

    /// Sends `GET {path}` on a new connection; returns the connection.
    async fn send_get(addr: SocketAddr, path: &str) -> tokio::net::TcpStream {
        use tokio::io::AsyncWriteExt as _;
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        stream
    }

    /// A server whose `GET /slow` answers `hello {peer ip}` once `release` is sent; it stops
    /// once `stop` is sent. Answers the address, `release`, `stop` and the server's task.
    async fn slow_server() -> (
        SocketAddr,
        tokio::sync::oneshot::Sender<()>,
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    ) {
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let released = Arc::new(tokio::sync::Mutex::new(Some(released)));
        let router = Router::new().route(
            "/slow",
            axum::routing::get(
                move |ConnectInfo(peer): ConnectInfo<SocketAddr>| async move {
                    if let Some(released) = released.lock().await.take() {
                        let _ = released.await;
                    }
                    format!("hello {}", peer.ip())
                },
            ),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_http(
            nodelay(listener),
            router,
            ConnectionLimits::default(),
            async move {
                let _ = stopped.await;
            },
        ));
        (addr, release, stop, server)
    }

    #[tokio::test]
    async fn shutdown_stops_accepting_and_lets_in_flight_requests_finish() {
        use tokio::io::AsyncReadExt as _;
        let (addr, release, stop, server) = slow_server().await;

        let mut in_flight = send_get(addr, "/slow").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.send(()).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "no new connection is accepted after shutdown"
        );
        assert!(!server.is_finished(), "the in-flight request is awaited");

        release.send(()).unwrap();
        let mut answer = String::new();
        tokio::time::timeout(
            Duration::from_secs(5),
            in_flight.read_to_string(&mut answer),
        )
        .await
        .expect("the connection closes after its answer")
        .unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(
            answer.ends_with("hello 127.0.0.1"),
            "ConnectInfo is set: {answer}"
        );
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("the server ends once its connections are done")
            .unwrap();
    }

    #[tokio::test]
    async fn shutdown_lets_an_http2_connections_requests_finish() {
        use http_body_util::{BodyExt as _, Empty};
        let (addr, release, stop, server) = slow_server().await;

        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut send, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
                .await
                .unwrap();
        let driver = tokio::spawn(connection);
        let request = hyper::Request::get(format!("http://{addr}/slow"))
            .body(Empty::<axum::body::Bytes>::new())
            .unwrap();
        let answer = tokio::spawn(send.send_request(request));
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.send(()).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!server.is_finished(), "the open stream is awaited");

        release.send(()).unwrap();
        let answer = answer.await.unwrap().unwrap();
        assert_eq!(answer.version(), hyper::Version::HTTP_2);
        let body = answer.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"hello 127.0.0.1");
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("the server ends once the connection is done")
            .unwrap();
        let _ = driver.await;
    }
}

#[cfg(test)]
mod runtime_tests {
    use super::*;

    #[test]
    fn a_runtime_per_core_on_several_cores_whatever_the_database() {
        assert_eq!(Runtimes::for_cores(4), Runtimes::PerCore { extra: 3 });
        assert_eq!(Runtimes::for_cores(4).extra_threads(), 3);
        assert_eq!(Runtimes::for_cores(2), Runtimes::PerCore { extra: 1 });
        assert_eq!(Runtimes::for_cores(1), Runtimes::Shared);
        assert_eq!(Runtimes::Shared.extra_threads(), 0);
    }

    /// The thread that answered, as the body.
    async fn thread_name() -> String {
        std::thread::current().name().unwrap_or("").to_string()
    }

    /// `GET {path}` on a new connection: the answer's body.
    async fn get(addr: SocketAddr, path: &str) -> String {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        answer.split("\r\n\r\n").nth(1).unwrap_or("").to_string()
    }

    /// With a second thread, connections are served by both, and both stop at shutdown.
    #[tokio::test]
    async fn connections_are_served_by_every_runtime_and_stop_together() {
        let router = Router::new()
            .route(
                "/busy",
                axum::routing::get(|| async {
                    // Holds this runtime's only thread.
                    std::thread::sleep(Duration::from_millis(800));
                    thread_name().await
                }),
            )
            .route("/who", axum::routing::get(thread_name));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let limits = ConnectionLimits::default();
        // The main runtime of the server: a thread of its own, so that this test's client
        // goes on while one of the server's runtimes is busy.
        let server = std::thread::Builder::new()
            .name("agentchat-main".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async move {
                    use futures::FutureExt as _;
                    let shutdown = async move {
                        let _ = stopped.await;
                    }
                    .boxed()
                    .shared();
                    let listener = TcpListener::from_std(listener).unwrap();
                    let extra = serve_on_threads(1, listener, router, limits, shutdown)
                        .await
                        .unwrap();
                    extra.end().await;
                });
            })
            .unwrap();

        let busy = tokio::spawn(get(addr, "/busy"));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let who = tokio::time::timeout(Duration::from_millis(600), get(addr, "/who"))
            .await
            .expect("another runtime answers while one is busy");
        let busy = busy.await.unwrap();
        let mut names = [busy, who];
        names.sort();
        assert_eq!(names, ["agentchat-http-1", "agentchat-main"]);

        stop.send(()).unwrap();
        tokio::task::spawn_blocking(move || server.join().unwrap())
            .await
            .unwrap();
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "no runtime accepts after the shutdown"
        );
    }
}
