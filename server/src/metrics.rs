//! Prometheus metrics (docs/operations.md § Metrics): the series, the process-wide recorder
//! and the text exposition [`render`] (endpoint in [`crate::http::metrics`]). Nothing is
//! recorded until [`install`] (only with `METRICS_TOKEN` or `METRICS_ADDR`); until then each
//! function is one atomic load. Hot paths take no lock and build no label string: fixed
//! series live in `Registry`, route and model series in per-thread maps (`Http`,
//! `ModelSeries`). Names follow <https://prometheus.io/docs/practices/naming/>.

use std::{
    cell::RefCell,
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock},
    time::{Duration, Instant},
};

use metrics::{Counter, Gauge, Histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::{
    llm::{ProviderError, ProviderErrorKind},
    store::{chat::ReplyStatus, jobs::JobKind, webhooks::AfterAttempt},
};

/// `agentchat_http_requests_total{method, route, status}`: answered requests.
pub const HTTP_REQUESTS: &str = "agentchat_http_requests_total";
/// `agentchat_http_request_duration_seconds{method, route}`: arrival to the answer's head.
pub const HTTP_DURATION: &str = "agentchat_http_request_duration_seconds";
/// `agentchat_chats_total{model, outcome}`: chat replies by how they ended.
pub const CHATS: &str = "agentchat_chats_total";
/// `agentchat_chat_tokens_total{model, type}`: tokens of complete replies.
pub const CHAT_TOKENS: &str = "agentchat_chat_tokens_total";
/// `agentchat_provider_time_to_first_token_seconds{model}`.
pub const PROVIDER_TTFT: &str = "agentchat_provider_time_to_first_token_seconds";
/// `agentchat_provider_errors_total{model, kind}`.
pub const PROVIDER_ERRORS: &str = "agentchat_provider_errors_total";
/// `agentchat_sse_streams_open`: streamed replies in progress.
pub const SSE_STREAMS_OPEN: &str = "agentchat_sse_streams_open";
/// `agentchat_rate_limit_refusals_total{kind}`.
pub const RATE_LIMIT_REFUSALS: &str = "agentchat_rate_limit_refusals_total";
/// `agentchat_knowledge_jobs_total{kind, outcome}`: finished knowledge jobs.
pub const KNOWLEDGE_JOBS: &str = "agentchat_knowledge_jobs_total";
/// `agentchat_knowledge_queue_depth{kind}`: queued knowledge jobs, read at each scrape.
pub const KNOWLEDGE_QUEUE_DEPTH: &str = "agentchat_knowledge_queue_depth";
/// `agentchat_webhook_deliveries_total{outcome}`: delivery attempts by their result.
pub const WEBHOOK_DELIVERIES: &str = "agentchat_webhook_deliveries_total";
/// `agentchat_bm25_search_duration_seconds`: one BM25 search of an agent's knowledge.
pub const BM25_DURATION: &str = "agentchat_bm25_search_duration_seconds";

/// Buckets of [`HTTP_DURATION`], in seconds: 1 ms to 60 s (`PROVIDER_TIMEOUT_SECS`' default).
pub const HTTP_BUCKETS: [f64; 15] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
/// Buckets of [`PROVIDER_TTFT`], in seconds, up to the default provider timeout.
pub const TTFT_BUCKETS: [f64; 12] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 45.0, 60.0,
];
/// Buckets of [`BM25_DURATION`], in seconds: 0.5 ms to 10 s (a first index build takes seconds).
pub const BM25_BUCKETS: [f64; 13] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// How often histogram samples are folded into buckets when nobody scrapes.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Why a request was refused with 429: the budget it ran out of (README § Limits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    Account,
    Ip,
    Widget,
    /// An inbound channel endpoint's budget per integration and client IP.
    Channel,
    SignIn,
}

impl Refusal {
    const ALL: [Self; 5] = [
        Self::Account,
        Self::Ip,
        Self::Widget,
        Self::Channel,
        Self::SignIn,
    ];

    /// The `kind` label: `account`, `ip`, `widget`, `channel` or `signin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Account => "account",
            Self::Ip => "ip",
            Self::Widget => "widget",
            Self::Channel => "channel",
            Self::SignIn => "signin",
        }
    }
}

impl From<crate::ratelimit::RateKey<'_>> for Refusal {
    fn from(key: crate::ratelimit::RateKey<'_>) -> Self {
        use crate::ratelimit::RateKey;
        match key {
            RateKey::Account(_) => Self::Account,
            RateKey::Ip(_) => Self::Ip,
            RateKey::Widget(_) => Self::Widget,
            RateKey::Channel { .. } => Self::Channel,
        }
    }
}

/// How a knowledge job ended, the `outcome` label of [`KNOWLEDGE_JOBS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobEnd {
    Succeeded,
    /// Its document failed (unreadable, too large, interrupted too often).
    Failed,
    Deleted,
}

impl JobEnd {
    const ALL: [Self; 3] = [Self::Succeeded, Self::Failed, Self::Deleted];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Deleted => "deleted",
        }
    }
}

/// The `outcome` of [`WEBHOOK_DELIVERIES`]: `delivered`, `retrying`, `failed` or `disabled` (410).
pub fn delivery_outcome(after: &AfterAttempt) -> &'static str {
    match after {
        AfterAttempt::Succeeded => "delivered",
        AfterAttempt::RetryAt(_) => "retrying",
        AfterAttempt::Failed => "failed",
        AfterAttempt::DisableWebhook => "disabled",
    }
}

const DELIVERY_OUTCOMES: [&str; 4] = ["delivered", "retrying", "failed", "disabled"];

fn reply_outcome(status: ReplyStatus) -> usize {
    match status {
        ReplyStatus::Complete => 0,
        ReplyStatus::Failed => 1,
        ReplyStatus::Cancelled => 2,
        ReplyStatus::Interrupted => 3,
    }
}

const REPLY_OUTCOMES: [&str; 4] = ["complete", "failed", "cancelled", "interrupted"];

/// The `kind` of [`PROVIDER_ERRORS`]: `timeout`, `connection`, `rate_limited`, `http_4xx`,
/// `http_5xx` or `other`.
pub fn provider_error_kind(kind: &ProviderErrorKind) -> &'static str {
    PROVIDER_ERROR_KINDS[provider_error_index(kind)]
}

fn provider_error_index(kind: &ProviderErrorKind) -> usize {
    match kind {
        ProviderErrorKind::Timeout => 0,
        ProviderErrorKind::Connection => 1,
        ProviderErrorKind::Status(429) => 2,
        ProviderErrorKind::Status(s) if (400..500).contains(s) => 3,
        ProviderErrorKind::Status(s) if *s >= 500 => 4,
        ProviderErrorKind::Status(_) | ProviderErrorKind::Other => 5,
    }
}

const PROVIDER_ERROR_KINDS: [&str; 6] = [
    "timeout",
    "connection",
    "rate_limited",
    "http_4xx",
    "http_5xx",
    "other",
];

/// The installed recorder's handle and the series with fixed labels, registered once.
struct Registry {
    prometheus: PrometheusHandle,
    sse_open: Gauge,
    /// By [`Refusal::ALL`].
    refusals: [Counter; 5],
    /// By [`JobKind::ALL`], then [`JobEnd::ALL`].
    jobs: [[Counter; 3]; 2],
    /// By [`JobKind::ALL`].
    queue_depth: [Gauge; 2],
    /// By [`DELIVERY_OUTCOMES`].
    deliveries: [Counter; 4],
    bm25: Histogram,
}

static REGISTRY: OnceLock<Option<Registry>> = OnceLock::new();

fn registry() -> Option<&'static Registry> {
    REGISTRY.get().and_then(Option::as_ref)
}

/// Whether metrics are recorded in this process ([`install`] ran and succeeded).
pub fn enabled() -> bool {
    registry().is_some()
}

/// Installs the recorder once and starts the bucket upkeep; `false` if another came first (logged).
pub fn install() -> bool {
    REGISTRY.get_or_init(build).is_some()
}

fn build() -> Option<Registry> {
    let buckets = |builder: PrometheusBuilder, name: &str, values: &[f64]| {
        builder
            .set_buckets_for_metric(Matcher::Full(name.to_string()), values)
            .expect("bucket lists are not empty")
    };
    let builder = PrometheusBuilder::new();
    let builder = buckets(builder, HTTP_DURATION, &HTTP_BUCKETS);
    let builder = buckets(builder, PROVIDER_TTFT, &TTFT_BUCKETS);
    let builder = buckets(builder, BM25_DURATION, &BM25_BUCKETS);
    let prometheus = match builder.install_recorder() {
        Ok(handle) => handle,
        Err(err) => {
            tracing::error!(error = %err, "cannot install the metrics recorder; metrics are off");
            return None;
        }
    };
    describe();
    let upkeep = prometheus.clone();
    let spawned = std::thread::Builder::new()
        .name("metrics-upkeep".into())
        .spawn(move || loop {
            std::thread::sleep(UPKEEP_EVERY);
            upkeep.run_upkeep();
        });
    if let Err(err) = spawned {
        tracing::warn!(error = %err, "cannot start the metrics upkeep thread; histograms are folded at each scrape only");
    }
    Some(Registry {
        prometheus,
        sse_open: metrics::gauge!(SSE_STREAMS_OPEN),
        refusals: Refusal::ALL
            .map(|kind| metrics::counter!(RATE_LIMIT_REFUSALS, "kind" => kind.as_str())),
        jobs: JobKind::ALL.map(|kind| {
            JobEnd::ALL.map(|end| {
                metrics::counter!(KNOWLEDGE_JOBS, "kind" => kind.as_str(), "outcome" => end.as_str())
            })
        }),
        queue_depth: JobKind::ALL
            .map(|kind| metrics::gauge!(KNOWLEDGE_QUEUE_DEPTH, "kind" => kind.as_str())),
        deliveries: DELIVERY_OUTCOMES
            .map(|outcome| metrics::counter!(WEBHOOK_DELIVERIES, "outcome" => outcome)),
        bm25: metrics::histogram!(BM25_DURATION),
    })
}

/// The `# HELP` text of every series.
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        HTTP_REQUESTS,
        "HTTP requests answered, by method, route template and status"
    );
    describe_histogram!(
        HTTP_DURATION,
        "Seconds from a request's arrival to its answer's head, by method and route template"
    );
    describe_counter!(
        CHATS,
        "Chat replies by model and outcome (complete, failed, cancelled)"
    );
    describe_counter!(
        CHAT_TOKENS,
        "Tokens of complete chat replies by model and type (prompt, completion)"
    );
    describe_histogram!(
        PROVIDER_TTFT,
        "Seconds from opening a provider request (retries included) to its first token, by model"
    );
    describe_counter!(
        PROVIDER_ERRORS,
        "Failed provider calls and broken provider streams, by model and kind"
    );
    describe_gauge!(SSE_STREAMS_OPEN, "Streamed chat replies in progress");
    describe_counter!(
        RATE_LIMIT_REFUSALS,
        "Requests refused with 429, by the budget they exceeded"
    );
    describe_counter!(
        KNOWLEDGE_JOBS,
        "Knowledge jobs finished, by kind (ingest, crawl) and outcome"
    );
    describe_gauge!(
        KNOWLEDGE_QUEUE_DEPTH,
        "Knowledge jobs waiting for a worker, by kind (read from the database at each scrape)"
    );
    describe_counter!(
        WEBHOOK_DELIVERIES,
        "Webhook delivery attempts by outcome (delivered, retrying, failed, disabled)"
    );
    describe_histogram!(
        BM25_DURATION,
        "Seconds of one BM25 search of an agent's knowledge (index check and chunk fetch included)"
    );
}

/// The text exposition format (0.0.4) of every series, or `None` when metrics are off.
pub fn render() -> Option<String> {
    registry().map(|r| r.prometheus.render())
}

/// Sets [`KNOWLEDGE_QUEUE_DEPTH`] to `queued` (a kind left out has none).
pub fn set_queue_depth(queued: &[(JobKind, u64)]) {
    let Some(r) = registry() else { return };
    for (i, kind) in JobKind::ALL.iter().enumerate() {
        let n = queued
            .iter()
            .find(|(k, _)| k == kind)
            .map_or(0, |(_, n)| *n);
        r.queue_depth[i].set(n as f64);
    }
}

/// Counts a request refused with 429 ([`RATE_LIMIT_REFUSALS`]).
pub fn refused(kind: Refusal) {
    if let Some(r) = registry() {
        r.refusals[kind as usize].increment(1);
    }
}

/// Counts a knowledge job's end ([`KNOWLEDGE_JOBS`]).
pub fn job_finished(kind: JobKind, end: JobEnd) {
    if let Some(r) = registry() {
        let k = JobKind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
        r.jobs[k][end as usize].increment(1);
    }
}

/// Counts a webhook delivery attempt by what follows it ([`WEBHOOK_DELIVERIES`]).
pub fn delivery_attempted(after: &AfterAttempt) {
    if let Some(r) = registry() {
        let outcome = delivery_outcome(after);
        let i = DELIVERY_OUTCOMES
            .iter()
            .position(|o| *o == outcome)
            .unwrap_or(0);
        r.deliveries[i].increment(1);
    }
}

/// Records the duration of one BM25 search ([`BM25_DURATION`]).
pub fn bm25_searched(took: Duration) {
    if let Some(r) = registry() {
        r.bm25.record(took.as_secs_f64());
    }
}

/// An open streamed reply, counted in [`SSE_STREAMS_OPEN`] until dropped.
#[derive(Debug)]
pub struct StreamOpen(bool);

impl StreamOpen {
    pub fn new() -> Self {
        match registry() {
            Some(r) => {
                r.sse_open.increment(1.0);
                Self(true)
            }
            None => Self(false),
        }
    }
}

impl Default for StreamOpen {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for StreamOpen {
    fn drop(&mut self) {
        if self.0 {
            if let Some(r) = registry() {
                r.sse_open.decrement(1.0);
            }
        }
    }
}

/// One model's series; `model` is a resolved model id, bounded by the providers' lists.
struct ModelSeries {
    /// By [`REPLY_OUTCOMES`].
    chats: [Counter; 4],
    prompt_tokens: Counter,
    completion_tokens: Counter,
    ttft: Histogram,
    /// By [`PROVIDER_ERROR_KINDS`].
    errors: [Counter; 6],
}

impl ModelSeries {
    fn register(model: &str) -> Self {
        let label = || model.to_string();
        Self {
            chats: REPLY_OUTCOMES
                .map(|outcome| metrics::counter!(CHATS, "model" => label(), "outcome" => outcome)),
            prompt_tokens: metrics::counter!(CHAT_TOKENS, "model" => label(), "type" => "prompt"),
            completion_tokens: metrics::counter!(CHAT_TOKENS, "model" => label(), "type" => "completion"),
            ttft: metrics::histogram!(PROVIDER_TTFT, "model" => label()),
            errors: PROVIDER_ERROR_KINDS
                .map(|kind| metrics::counter!(PROVIDER_ERRORS, "model" => label(), "kind" => kind)),
        }
    }
}

thread_local! {
    /// This thread's handles of the models it has met.
    static MODELS: RefCell<HashMap<Box<str>, ModelSeries, foldhash::fast::RandomState>> =
        RefCell::default();
}

/// Runs `f` on `model`'s series, registered on this thread's first use of that model.
fn with_model(model: &str, f: impl FnOnce(&ModelSeries)) {
    if !enabled() {
        return;
    }
    MODELS.with_borrow_mut(|models| {
        if let Some(series) = models.get(model) {
            return f(series);
        }
        let series = ModelSeries::register(model);
        f(&series);
        models.insert(model.into(), series);
    });
}

/// Counts a reply that ended as `status` on `model`, with a complete one's tokens.
pub fn chat_finished(model: &str, status: ReplyStatus, tokens: Option<(u32, u32)>) {
    with_model(model, |m| {
        m.chats[reply_outcome(status)].increment(1);
        if let Some((prompt, completion)) = tokens {
            m.prompt_tokens.increment(u64::from(prompt));
            m.completion_tokens.increment(u64::from(completion));
        }
    });
}

/// Records how long `model`'s provider took to send its first token.
pub fn first_token(model: &str, took: Duration) {
    with_model(model, |m| m.ttft.record(took.as_secs_f64()));
}

/// Counts a provider failure of `model` (a failed attempt, retried or not, or a broken stream).
pub fn provider_failed(model: &str, error: &ProviderError) {
    with_model(model, |m| {
        m.errors[provider_error_index(&error.kind)].increment(1)
    });
}

/// The `method` label: standard methods by name, else `other` (clients must not choose series).
fn method_index(method: &http::Method) -> u8 {
    match *method {
        http::Method::GET => 0,
        http::Method::HEAD => 1,
        http::Method::POST => 2,
        http::Method::PUT => 3,
        http::Method::PATCH => 4,
        http::Method::DELETE => 5,
        http::Method::OPTIONS => 6,
        _ => 7,
    }
}

const METHODS: [&str; 8] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other",
];

/// The `route` label of requests that match no route template.
pub const UNMATCHED: &str = "unmatched";

/// The route templates of the `route` label: the matched template, never the raw path; interned.
pub struct RouteTemplates {
    router: matchit::Router<&'static str>,
}

impl RouteTemplates {
    /// The table of axum `templates`; one conflicting with an earlier one is left out (logged).
    pub fn new<'a>(templates: impl IntoIterator<Item = &'a str>) -> Self {
        let mut router = matchit::Router::new();
        for template in templates {
            let interned = intern(template);
            if let Err(err) = router.insert(interned, interned) {
                tracing::debug!(template, error = %err, "route template left out of the metrics labels");
            }
        }
        Self { router }
    }

    /// The template `path` matches, or [`UNMATCHED`].
    pub fn label(&self, path: &str) -> &'static str {
        self.router.at(path).map_or(UNMATCHED, |m| *m.value)
    }
}

fn intern(template: &str) -> &'static str {
    static INTERNED: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut all = INTERNED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = all.iter().find(|t| **t == template) {
        return found;
    }
    let leaked: &'static str = Box::leak(template.into());
    all.push(leaked);
    leaked
}

#[derive(Default)]
struct RouteSeries {
    /// By [`METHODS`].
    durations: [Option<Histogram>; 8],
    /// (method, status, counter).
    requests: Vec<(u8, u16, Counter)>,
}

thread_local! {
    static ROUTES: RefCell<HashMap<usize, RouteSeries, foldhash::fast::RandomState>> =
        RefCell::default();
}

/// Records an answered request: [`HTTP_REQUESTS`] and [`HTTP_DURATION`].
pub fn http_answered(route: &'static str, method: u8, status: u16, took: Duration) {
    ROUTES.with_borrow_mut(|routes| {
        let series = routes.entry(route.as_ptr() as usize).or_default();
        let m = usize::from(method);
        series.durations[m]
            .get_or_insert_with(|| {
                metrics::histogram!(HTTP_DURATION, "method" => METHODS[m], "route" => route)
            })
            .record(took.as_secs_f64());
        match series
            .requests
            .iter()
            .find(|(mm, s, _)| *mm == method && *s == status)
        {
            Some((_, _, counter)) => counter.increment(1),
            None => {
                let counter = metrics::counter!(HTTP_REQUESTS, "method" => METHODS[m], "route" => route, "status" => status.to_string());
                counter.increment(1);
                series.requests.push((method, status, counter));
            }
        }
    });
}

/// A tower layer that records every request of the service it wraps ([`HttpMetrics`]).
#[derive(Clone)]
pub struct HttpMetricsLayer {
    routes: Option<Arc<RouteTemplates>>,
}

impl HttpMetricsLayer {
    /// Records requests labelled by `routes` when `on` and installed; else a pass-through.
    pub fn new(on: bool, routes: impl FnOnce() -> RouteTemplates) -> Self {
        Self {
            routes: (on && enabled()).then(|| Arc::new(routes())),
        }
    }
}

impl<S> tower::Layer<S> for HttpMetricsLayer {
    type Service = HttpMetrics<S>;

    fn layer(&self, inner: S) -> HttpMetrics<S> {
        HttpMetrics {
            inner,
            routes: self.routes.clone(),
        }
    }
}

/// Counts and times every request of `S` until its answer's head; lock-free once routes are known.
#[derive(Clone)]
pub struct HttpMetrics<S> {
    inner: S,
    routes: Option<Arc<RouteTemplates>>,
}

impl<S, B> tower::Service<axum::extract::Request> for HttpMetrics<S>
where
    S: tower::Service<axum::extract::Request, Response = http::Response<B>>,
{
    type Response = http::Response<B>;
    type Error = S::Error;
    type Future = HttpMetricsFuture<S::Future>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: axum::extract::Request) -> Self::Future {
        let measured = self.routes.as_ref().map(|routes| Measured {
            started: Instant::now(),
            method: method_index(request.method()),
            route: routes.label(request.uri().path()),
        });
        HttpMetricsFuture {
            inner: self.inner.call(request),
            measured,
        }
    }
}

/// What [`HttpMetrics`] records of a request once it is answered.
struct Measured {
    started: Instant,
    method: u8,
    route: &'static str,
}

pin_project_lite::pin_project! {
    /// The answer of [`HttpMetrics`].
    pub struct HttpMetricsFuture<F> {
        #[pin]
        inner: F,
        measured: Option<Measured>,
    }
}

impl<F, B, E> std::future::Future for HttpMetricsFuture<F>
where
    F: std::future::Future<Output = Result<http::Response<B>, E>>,
{
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = self.project();
        let answer = std::task::ready!(this.inner.poll(cx));
        if let (Some(m), Ok(response)) = (this.measured.take(), &answer) {
            http_answered(
                m.route,
                m.method,
                response.status().as_u16(),
                m.started.elapsed(),
            );
        }
        std::task::Poll::Ready(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_labelled_by_their_template_and_unknown_paths_alike() {
        let routes = RouteTemplates::new([
            "/api/agents",
            "/api/agents/{agentId}",
            "/api/agents/{agentId}/chat",
            "/pkg/{*file}",
        ]);
        assert_eq!(routes.label("/api/agents"), "/api/agents");
        assert_eq!(routes.label("/api/agents/0192-x"), "/api/agents/{agentId}");
        assert_eq!(
            routes.label("/api/agents/x/chat"),
            "/api/agents/{agentId}/chat"
        );
        assert_eq!(routes.label("/pkg/agentchat.wasm"), "/pkg/{*file}");
        for raw in ["/api/agents/x/y/z", "/wp-admin", "/", "/api/agents/x/chat/"] {
            assert_eq!(routes.label(raw), UNMATCHED, "{raw}");
        }
        // One string per template in the whole process.
        let again = RouteTemplates::new(["/api/agents/{agentId}"]);
        assert!(std::ptr::eq(
            again.label("/api/agents/1"),
            routes.label("/api/agents/2")
        ));
    }

    #[test]
    fn labels_are_bounded_whatever_the_client_sends() {
        assert_eq!(
            METHODS[usize::from(method_index(&http::Method::GET))],
            "GET"
        );
        let odd = http::Method::from_bytes(b"BREW").unwrap();
        assert_eq!(METHODS[usize::from(method_index(&odd))], "other");
        assert_eq!(
            METHODS[usize::from(method_index(&http::Method::TRACE))],
            "other"
        );
        let kinds: Vec<&str> = [
            ProviderErrorKind::Timeout,
            ProviderErrorKind::Connection,
            ProviderErrorKind::Status(429),
            ProviderErrorKind::Status(404),
            ProviderErrorKind::Status(503),
            ProviderErrorKind::Status(302),
            ProviderErrorKind::Other,
        ]
        .iter()
        .map(provider_error_kind)
        .collect();
        assert_eq!(
            kinds,
            [
                "timeout",
                "connection",
                "rate_limited",
                "http_4xx",
                "http_5xx",
                "other",
                "other"
            ]
        );
        for (after, outcome) in [
            (AfterAttempt::Succeeded, "delivered"),
            (AfterAttempt::RetryAt(chrono::Utc::now()), "retrying"),
            (AfterAttempt::Failed, "failed"),
            (AfterAttempt::DisableWebhook, "disabled"),
        ] {
            assert_eq!(delivery_outcome(&after), outcome);
        }
        for (i, kind) in Refusal::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i);
        }
        for (i, end) in JobEnd::ALL.iter().enumerate() {
            assert_eq!(*end as usize, i);
        }
    }
}
