//! # `auth_overhead`: what authentication and rate limiting cost per request
//!
//! Measures the per-request cost of the `/api` middleware
//! ([`agentchat::http::ApiLayer`] plus the [`Auth`] extractor) by serving the *same*
//! tiny handler (it answers `{"ok":true}`) three ways and loading each with the same client:
//!
//! | scenario     | router                                               | credential            |
//! |--------------|------------------------------------------------------|-----------------------|
//! | `baseline`   | `GET /api/bench`, no middleware, no extractor        | none                  |
//! | `jwt`        | `GET /api/bench` behind `ApiLayer`, `Auth` arg       | access token (JWT)    |
//! | `api-key`    | the same authenticated router                        | API key (`key_...`)   |
//!
//! On the authenticated router every request verifies the bearer value (HS256 signature and
//! claims of the JWT, or SHA-256 lookup of the API key), checks the session or key (through
//! the service's short-lived cache, with the real SQLite store behind it), counts the
//! request against the account's budget in the real rate limiter, and adds the
//! `X-RateLimit-*` headers. The budgets are set to 10^9 requests per minute so the limiter is
//! consulted on every request but never refuses.
//!
//! The service is built exactly as in production ([`Application::build`] on a temporary data
//! folder with a real SQLite database); the account, its verified email, the session and the
//! API key are created through the real HTTP API. Everything listens on `127.0.0.1` only.
//!
//! `--scenarios` picks the scenarios (default `baseline,jwt,api-key`); the diagnostic
//! `noop-middleware` adds the baseline handler behind a middleware that does nothing but
//! take `State<AppState>`, which separates axum's middleware plumbing and the state clones
//! from the authentication work.
//!
//! ## The load
//!
//! `--connections` HTTP/1.1 keep-alive connections (one request in flight on each) send
//! requests back to back for `--seconds`. Each connection writes a request prepared once and
//! reads the answer with `httparse` into a reused buffer, as `wrk` does, so the client costs
//! the same in every scenario: a general HTTP client (hyper's, used until 2026-11-21) builds
//! a header map per answer and allocates every non-standard header name, which charged the
//! authenticated scenarios for parsing their three `X-RateLimit-*` headers and for sharing
//! one `Authorization` value between connections. A scenario also stops a scenario also stops
//! after `--max-requests` requests, and a request that takes longer than 5 s ends its
//! connection as an error. Every response must be `200` with the expected body; anything
//! else is counted (and the first few printed) as an error. Client, servers and service share
//! one process and the machine's cores, exactly alike in the three scenarios.
//!
//! Each scenario first runs `--warmup` seconds unmeasured; then `--rounds` rounds each run
//! every scenario once, in a rotating order, so that drifts in machine load hit all of them.
//!
//! ## Reading the output
//!
//! - One table per round, then a summary (Markdown, ready for `BENCHMARKS.md`) with the
//!   **median** requests/s over the rounds, latency percentiles over all measured requests
//!   of the scenario, and errors.
//! - `vs baseline` is the scenario's median throughput divided by the baseline's, and
//!   `vs baseline, per round` the median over the rounds of the same quotient within each
//!   round (less sensitive to load that changes between rounds); the goal is **at least
//!   90 %** by both. `CPU/request` is the CPU time (user + system, all threads) the whole
//!   process spent per request: client, server and kernel network stack included, so the
//!   added part is what authentication and rate limiting cost; `Cores busy` shows whether
//!   the load kept the machine's cores saturated (close to the number of cores).
//! - Then, unless `--in-process-seconds 0`, the same routers (and two with a no-op
//!   middleware, with and without the state) are called directly (no sockets, no HTTP
//!   parsing) and the middleware's parts are timed alone: `AuthService::authenticate`
//!   for each credential, `JwtKeys::verify`, the API key's SHA-256, `RateLimiter::check` and
//!   the `AppState` clone that the middleware makes for every request. Each is timed on
//!   one thread, then on two threads at once: on two cores, state that every request writes
//!   (reference counts, cache bookkeeping, the account's rate-limit cell) costs more when
//!   both cores touch it, and the second column shows how much.
//!
//! ## Backends
//!
//! `--database-url postgres://...` and `--redis-url redis://...` ([`bench::backend`]) put
//! the store on a scratch PostgreSQL database and the rate limiter on Redis (one script
//! call per request, on Redis's clock): the cost of the shared state of several instances.
//! The baseline is the same in both cases; only the authenticated path changes.
//!
//! Run it in release mode on an otherwise idle machine:
//!
//! ```text
//! cargo run --release -p bench --bin auth_overhead -- --seconds 10 --connections 32 --warmup 2 --rounds 3
//! ```

use std::{
    convert::Infallible,
    fmt::Write as _,
    net::SocketAddr,
    time::{Duration, Instant},
};

use agentchat::{
    auth::{
        keys::sha256_hex,
        tokens::{JwtKeys, TokenType},
    },
    config::Config,
    http::{
        extract::Auth, ApiLayer, ApiService, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING,
        X_RATELIMIT_RESET,
    },
    ids::UserId,
    ratelimit::RateKey,
    services::AppState,
    startup::Application,
};
use anyhow::{bail, ensure, Context};
use axum::{
    body::Body,
    extract::{ConnectInfo, State},
    http::{header, HeaderValue, Request, StatusCode},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use bench::backend::{Backend, BackendArgs};
use clap::Parser;
use http_body_util::BodyExt;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::oneshot,
    task::JoinHandle,
};
use tower::{Layer as _, Service, ServiceExt};

/// Requests per minute given to every plan: checked on every request, never exceeded.
const RATE_LIMIT: u32 = 1_000_000_000;
/// The benchmarked route, the same on all routers.
const PATH: &str = "/api/bench";
/// The handler's answer, the same on all routers.
const BODY: &str = r#"{"ok":true}"#;
/// A request slower than this ends its connection and counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Access tokens live 15 minutes; sign in again when the current one is older than this.
const TOKEN_REFRESH_AGE: Duration = Duration::from_secs(10 * 60);
/// How many error descriptions are kept per scenario run.
const ERRORS_SHOWN: usize = 5;

/// Measures the per-request cost of authentication + rate limiting (JWT and API key) against
/// the same handler without them. See the crate documentation of this binary for details.
#[derive(Parser, Debug)]
#[command(name = "auth_overhead", version, about, long_about = None)]
struct Args {
    /// Seconds each scenario is measured in each round.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=300))]
    seconds: u64,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=1024))]
    connections: u64,
    /// Seconds of unmeasured load per scenario before the first round.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=60))]
    warmup: u64,
    /// Rounds; each measures every scenario once, in a rotating order. 0 skips the load over
    /// HTTP (only the in-process part runs; useful under a profiler).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(0..=20))]
    rounds: u64,
    /// Upper bound on requests per scenario run, whatever the time.
    #[arg(long, default_value_t = 50_000_000, value_parser = clap::value_parser!(u64).range(1..=500_000_000))]
    max_requests: u64,
    /// Seconds each in-process measurement (no network) may take; 0 skips that part.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=60))]
    in_process_seconds: u64,
    /// Upper bound on calls per in-process measurement, whatever the time.
    #[arg(long, default_value_t = 5_000_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    in_process_iterations: u64,
    /// Only the in-process measurements whose name contains this text (for profiling one).
    #[arg(long)]
    in_process_only: Option<String>,
    /// The scenarios loaded over HTTP, comma-separated. `noop-middleware` is a diagnostic
    /// extra: the baseline handler behind a middleware that does nothing but take
    /// `State<AppState>` (what axum's middleware plumbing and the state clones cost, without
    /// any authentication). `headers-only`, another: no authentication, but the access token
    /// is sent and the three `X-RateLimit-*` headers come back (what the contract's bytes on
    /// the wire cost client and server). Ratios need `baseline` in the list.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Scenario::MAIN)]
    scenarios: Vec<Scenario>,
    /// The store and shared state behind the authenticated router (default: SQLite, limits
    /// in process); see [`bench::backend`].
    #[command(flatten)]
    backend: BackendArgs,
}

/// One of the measured paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Scenario {
    /// The handler alone.
    Baseline,
    /// Authenticated router, JWT access token.
    Jwt,
    /// Authenticated router, API key.
    ApiKey,
    /// Diagnostic: the handler behind a no-op middleware that takes the state.
    NoopMiddleware,
    /// Diagnostic: no authentication, but the same bytes on the wire as `jwt` (the access
    /// token is sent, the three `X-RateLimit-*` headers come back with fixed values).
    HeadersOnly,
}

impl Scenario {
    /// The scenarios the goal is about.
    const MAIN: [Self; 3] = [Self::Baseline, Self::Jwt, Self::ApiKey];
    const COUNT: usize = 5;

    fn name(self) -> &'static str {
        match self {
            Self::Baseline => "baseline (no auth, no rate limit)",
            Self::Jwt => "auth + rate limit, JWT access token",
            Self::ApiKey => "auth + rate limit, API key",
            Self::NoopMiddleware => "diagnostic: no-op middleware taking AppState",
            Self::HeadersOnly => "diagnostic: JWT and X-RateLimit-* sent, no auth",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The handler body shared by all routers.
fn ok_response() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        BODY,
    )
        .into_response()
}

async fn baseline_handler() -> Response {
    ok_response()
}

async fn authenticated_handler(Auth(principal): Auth) -> Response {
    std::hint::black_box(&principal);
    ok_response()
}

/// `GET /api/bench` with no middleware and no extractor.
fn baseline_router() -> Router {
    Router::new().route(PATH, get(baseline_handler))
}

/// `GET /api/bench` behind the real `/api` middleware, taking the `Auth` extractor; the
/// middleware wraps the router as the service's does ([`agentchat::startup::service`]).
fn authenticated_router(state: &AppState) -> ApiService<Router> {
    ApiLayer::new(state.clone()).layer(Router::new().route(PATH, get(authenticated_handler)))
}

/// What a scenario serves: a router, or a router behind the `/api` middleware.
trait Served:
    Service<Request<Body>, Response = Response, Error = Infallible, Future: Send>
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S> Served for S where
    S: Service<Request<Body>, Response = Response, Error = Infallible, Future: Send>
        + Clone
        + Send
        + Sync
        + 'static
{
}

/// A middleware that does nothing but take the application state, with axum's
/// `from_fn_with_state`.
async fn noop_state_middleware(
    State(state): State<AppState>,
    request: axum::extract::Request,
    next: Next,
) -> Response {
    std::hint::black_box(&state);
    next.run(request).await
}

/// A middleware that only adds the three `X-RateLimit-*` headers, with fixed values.
async fn headers_only_middleware(request: axum::extract::Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(X_RATELIMIT_LIMIT, HeaderValue::from(RATE_LIMIT));
    headers.insert(X_RATELIMIT_REMAINING, HeaderValue::from(RATE_LIMIT - 1));
    headers.insert(X_RATELIMIT_RESET, HeaderValue::from(1_800_000_000_i64));
    response
}

/// The baseline handler behind [`headers_only_middleware`].
fn headers_only_router() -> Router {
    baseline_router().layer(middleware::from_fn(headers_only_middleware))
}

/// A middleware that does nothing at all.
async fn noop_middleware(request: axum::extract::Request, next: Next) -> Response {
    next.run(request).await
}

/// The baseline handler behind [`noop_state_middleware`].
fn noop_state_router(state: &AppState) -> Router {
    baseline_router().layer(middleware::from_fn_with_state(
        state.clone(),
        noop_state_middleware,
    ))
}

/// The baseline handler behind [`noop_middleware`].
fn noop_router() -> Router {
    baseline_router().layer(middleware::from_fn(noop_middleware))
}

/// A router served on its own `127.0.0.1:0` listener until `stop` fires.
struct Server {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

async fn serve(router: impl Served) -> anyhow::Result<Server> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        axum::serve(
            listener,
            axum::ServiceExt::into_make_service_with_connect_info::<SocketAddr>(router),
        )
        .with_graceful_shutdown(async move {
            let _ = stopped.await;
        })
        .await
    });
    Ok(Server { addr, stop, task })
}

impl Server {
    async fn shut_down(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), self.task).await;
    }
}

/// The benchmark account's credentials.
struct Credentials {
    user_id: UserId,
    email: String,
    password: String,
    access_token: String,
    issued: Instant,
    api_key: String,
}

async fn expect_json(
    response: reqwest::Response,
    status: reqwest::StatusCode,
    what: &str,
) -> anyhow::Result<serde_json::Value> {
    let got = response.status();
    let text = response.text().await?;
    ensure!(
        got == status,
        "{what}: expected {status}, got {got}: {text}"
    );
    serde_json::from_str(&text).with_context(|| format!("{what}: the answer is not JSON: {text}"))
}

fn string_at(value: &serde_json::Value, pointer: &str, what: &str) -> anyhow::Result<String> {
    value
        .pointer(pointer)
        .and_then(serde_json::Value::as_str)
        .map(str::to_string)
        .with_context(|| format!("{what}: no {pointer} in {value}"))
}

async fn login(
    client: &reqwest::Client,
    base: &str,
    email: &str,
    password: &str,
) -> anyhow::Result<String> {
    let response = client
        .post(format!("{base}/api/auth/login"))
        .json(&serde_json::json!({ "email": email, "password": password }))
        .send()
        .await?;
    let body = expect_json(response, reqwest::StatusCode::OK, "login").await?;
    string_at(&body, "/tokens/accessToken", "login")
}

/// Signs up, verifies the email in the store, signs in and creates an API key, all through
/// the service's HTTP API (except the email link, which would need the mail outbox).
async fn set_up_account(
    client: &reqwest::Client,
    base: &str,
    state: &AppState,
) -> anyhow::Result<Credentials> {
    let email = "bench@example.com".to_string();
    let password = "bench-password-0123456789".to_string();
    let response = client
        .post(format!("{base}/api/auth/signup"))
        .json(&serde_json::json!({ "name": "Bench", "email": email, "password": password }))
        .send()
        .await?;
    let body = expect_json(response, reqwest::StatusCode::CREATED, "signup").await?;
    let user_id = UserId::from(string_at(&body, "/user/id", "signup")?);
    state
        .store
        .mark_email_verified(&user_id, chrono::Utc::now())
        .await?;
    let access_token = login(client, base, &email, &password).await?;
    let response = client
        .post(format!("{base}/api/api-keys"))
        .bearer_auth(&access_token)
        .json(&serde_json::json!({ "name": "bench", "scopes": ["agents:read"] }))
        .send()
        .await?;
    let body = expect_json(response, reqwest::StatusCode::CREATED, "create API key").await?;
    let api_key = string_at(&body, "/key", "create API key")?;
    Ok(Credentials {
        user_id,
        email,
        password,
        access_token,
        issued: Instant::now(),
        api_key,
    })
}

/// Checks that each router does what its scenario claims before anything is measured.
async fn check_routers(
    client: &reqwest::Client,
    baseline: SocketAddr,
    authenticated: SocketAddr,
    credentials: &Credentials,
) -> anyhow::Result<()> {
    let response = client
        .get(format!("http://{baseline}{PATH}"))
        .send()
        .await?;
    ensure!(
        response.status() == reqwest::StatusCode::OK,
        "baseline: {}",
        response.status()
    );
    let url = format!("http://{authenticated}{PATH}");
    let anonymous = client.get(&url).send().await?;
    ensure!(
        anonymous.status() == reqwest::StatusCode::UNAUTHORIZED,
        "the authenticated router must refuse a request without credentials, got {}",
        anonymous.status()
    );
    for (what, bearer) in [
        ("JWT", &credentials.access_token),
        ("API key", &credentials.api_key),
    ] {
        let response = client.get(&url).bearer_auth(bearer).send().await?;
        let limit = response
            .headers()
            .get("x-ratelimit-limit")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let status = response.status();
        let text = response.text().await?;
        ensure!(
            status == reqwest::StatusCode::OK && text == BODY,
            "{what}: expected 200 {BODY}, got {status} {text}"
        );
        ensure!(
            limit.as_deref() == Some(RATE_LIMIT.to_string().as_str()),
            "{what}: expected X-RateLimit-Limit {RATE_LIMIT}, got {limit:?}"
        );
    }
    Ok(())
}

/// What one connection saw.
#[derive(Default)]
struct ConnectionResult {
    latencies_ns: Vec<u64>,
    errors: u64,
    error_samples: Vec<String>,
}

/// What one scenario run saw, all connections together.
#[derive(Default)]
struct RunResult {
    ok: u64,
    errors: u64,
    error_samples: Vec<String>,
    elapsed: Duration,
    /// CPU time (user + system) the whole process used meanwhile: client, servers, service.
    cpu: Option<Duration>,
    latencies_ns: Vec<u64>,
}

impl RunResult {
    fn rate(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Process CPU microseconds per successful request; NaN when unknown.
    fn cpu_us_per_request(&self) -> f64 {
        match self.cpu {
            Some(cpu) if self.ok > 0 => cpu.as_secs_f64() * 1e6 / self.ok as f64,
            _ => f64::NAN,
        }
    }

    /// How many cores the process kept busy on average; NaN when unknown.
    fn cores_busy(&self) -> f64 {
        self.cpu.map_or(f64::NAN, |cpu| {
            cpu.as_secs_f64() / self.elapsed.as_secs_f64().max(1e-9)
        })
    }
}

/// CPU time used so far by this process (all threads, user + system), from
/// `/proc/self/stat` (Linux; 10 ms resolution). `None` elsewhere.
fn process_cpu() -> Option<Duration> {
    const TICKS_PER_SECOND: f64 = 100.0; // USER_HZ, 100 on Linux
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name start with field 3 (state); utime and
    // stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some(Duration::from_secs_f64((utime + stime) / TICKS_PER_SECOND))
}

/// One load connection: a keep-alive HTTP/1.1 connection that sends a request prepared
/// once and reads each answer with `httparse` into a reused buffer, as `wrk` does. The
/// client's cost per request is then the same in every scenario (no header map is built,
/// no header name allocated, no value shared between connections), so the differences
/// between scenarios are the server's.
struct Connection {
    stream: TcpStream,
    request: Vec<u8>,
    buf: Vec<u8>,
}

/// Largest answer accepted (head and body).
const MAX_ANSWER: usize = 16 * 1024;

async fn connect(
    addr: SocketAddr,
    authorization: Option<&HeaderValue>,
) -> anyhow::Result<Connection> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let mut request = format!("GET {PATH} HTTP/1.1\r\nhost: {addr}\r\n").into_bytes();
    if let Some(value) = authorization {
        request.extend_from_slice(b"authorization: ");
        request.extend_from_slice(value.as_bytes());
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"\r\n");
    Ok(Connection {
        stream,
        request,
        buf: Vec::with_capacity(MAX_ANSWER),
    })
}

/// Sends the prepared request and reads its answer: status and body.
async fn one_request(connection: &mut Connection) -> anyhow::Result<(StatusCode, Vec<u8>)> {
    connection.stream.write_all(&connection.request).await?;
    let buf = &mut connection.buf;
    buf.clear();
    loop {
        let mut chunk = [0u8; 4096];
        let n = connection.stream.read(&mut chunk).await?;
        ensure!(n > 0, "the server closed the connection");
        buf.extend_from_slice(&chunk[..n]);
        ensure!(
            buf.len() <= MAX_ANSWER,
            "the answer is larger than {MAX_ANSWER} bytes"
        );
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut response = httparse::Response::new(&mut headers);
        let httparse::Status::Complete(head) = response.parse(buf)? else {
            continue;
        };
        let length = response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .context("the answer has no Content-Length")?;
        let length: usize = std::str::from_utf8(length.value)?.trim().parse()?;
        if buf.len() < head + length {
            continue;
        }
        ensure!(buf.len() == head + length, "more bytes than one answer");
        let status = StatusCode::from_u16(response.code.context("no status")?)?;
        return Ok((status, buf[head..].to_vec()));
    }
}

async fn connection_loop(
    mut connection: Connection,
    deadline: Instant,
    max_requests: u64,
) -> ConnectionResult {
    let mut result = ConnectionResult {
        latencies_ns: Vec::with_capacity(max_requests.min(1 << 16) as usize),
        ..ConnectionResult::default()
    };
    let mut sent = 0u64;
    while sent < max_requests && Instant::now() < deadline {
        sent += 1;
        let started = Instant::now();
        let outcome = tokio::time::timeout(REQUEST_TIMEOUT, one_request(&mut connection)).await;
        let elapsed_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let error = match outcome {
            Ok(Ok((StatusCode::OK, body))) if body == BODY.as_bytes() => {
                result.latencies_ns.push(elapsed_ns);
                continue;
            }
            Ok(Ok((status, body))) => (
                format!("{status}: {}", String::from_utf8_lossy(&body)),
                false,
            ),
            Ok(Err(err)) => (format!("connection error: {err:#}"), true),
            Err(_) => (format!("no answer within {REQUEST_TIMEOUT:?}"), true),
        };
        result.errors += 1;
        if result.error_samples.len() < ERRORS_SHOWN {
            result.error_samples.push(error.0);
        }
        if error.1 {
            break; // the connection is unusable
        }
    }
    result
}

/// Loads `addr` from `connections` keep-alive connections for `duration` (or until
/// `max_requests` requests were sent).
async fn run_load(
    addr: SocketAddr,
    authorization: Option<&HeaderValue>,
    connections: u64,
    duration: Duration,
    max_requests: u64,
) -> anyhow::Result<RunResult> {
    let mut opened = Vec::with_capacity(connections as usize);
    for _ in 0..connections {
        opened.push(connect(addr, authorization).await?);
    }
    let per_connection = max_requests.div_ceil(connections).max(1);
    let cpu_before = process_cpu();
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for connection in opened {
        tasks.spawn(connection_loop(connection, deadline, per_connection));
    }
    let mut run = RunResult::default();
    while let Some(done) = tasks.join_next().await {
        let mut connection = done.context("a load connection task failed")?;
        run.ok += connection.latencies_ns.len() as u64;
        run.errors += connection.errors;
        run.latencies_ns.append(&mut connection.latencies_ns);
        for sample in connection.error_samples {
            if run.error_samples.len() < ERRORS_SHOWN {
                run.error_samples.push(sample);
            }
        }
    }
    run.elapsed = started.elapsed();
    run.cpu = process_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    Ok(run)
}

/// Runs `body` up to `iterations` times, stopping early after `limit`; the count done.
fn repeat(
    iterations: u64,
    limit: Duration,
    mut body: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let started = Instant::now();
    let mut done = 0u64;
    while done < iterations {
        body()?;
        done += 1;
        if done.is_multiple_of(256) && started.elapsed() >= limit {
            break;
        }
    }
    Ok(done)
}

/// [`repeat`] for an asynchronous body (run with `Handle::block_on` on a plain thread).
async fn repeat_async(
    iterations: u64,
    limit: Duration,
    mut body: impl AsyncFnMut() -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let started = Instant::now();
    let mut done = 0u64;
    while done < iterations {
        body().await?;
        done += 1;
        if done.is_multiple_of(256) && started.elapsed() >= limit {
            break;
        }
    }
    Ok(done)
}

/// Nanoseconds per operation when `threads` threads run `run` (a bounded loop returning its
/// count) at the same time; the mean over the threads.
fn per_op_ns(
    threads: usize,
    run: &(dyn Fn() -> anyhow::Result<u64> + Sync),
) -> anyhow::Result<f64> {
    let results: Vec<anyhow::Result<f64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let started = Instant::now();
                    let done = run()?;
                    ensure!(done > 0, "no operation completed");
                    Ok(started.elapsed().as_nanos() as f64 / done as f64)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a measuring thread panicked")))
            })
            .collect()
    });
    let mut sum = 0.0;
    for result in results {
        sum += result?;
    }
    Ok(sum / threads as f64)
}

/// One router call as the server makes it after parsing a request, without the network.
async fn call_router(
    router: &impl Served,
    authorization: Option<&HeaderValue>,
) -> anyhow::Result<()> {
    let mut request = Request::get(PATH);
    if let Some(value) = authorization {
        request = request.header(header::AUTHORIZATION, value.clone());
    }
    let mut request = request.body(Body::empty())?;
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
    let response = router.clone().oneshot(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    ensure!(
        status == StatusCode::OK && body == BODY.as_bytes(),
        "in-process call answered {status} {}",
        String::from_utf8_lossy(&body)
    );
    Ok(())
}

/// Everything the in-process measurements need.
struct InProcess {
    handle: tokio::runtime::Handle,
    state: AppState,
    /// The service's `JWT_SECRET`, to sign tokens as it does.
    jwt_secret: secrecy::SecretString,
    baseline: Router,
    authenticated: ApiService<Router>,
    noop: Router,
    noop_state: Router,
    jwt: HeaderValue,
    key: HeaderValue,
    access_token: String,
    api_key: String,
    user_id: UserId,
    iterations: u64,
    limit: Duration,
    only: Option<String>,
}

/// Times whole router calls and the middleware's parts, each on one thread and then on two
/// threads at once (on two cores, shared state that is written on every request shows up
/// as a higher figure with two threads). Rows: name, ns with 1 thread, ns with 2 threads.
fn in_process_table(m: &InProcess) -> anyhow::Result<Vec<(&'static str, f64, f64)>> {
    let (n, limit) = (m.iterations, m.limit);
    let jwt_keys = JwtKeys::new(&m.jwt_secret, &m.state.server.public_url);
    fn call_served(
        m: &InProcess,
        router: &impl Served,
        authorization: Option<&HeaderValue>,
    ) -> anyhow::Result<u64> {
        m.handle
            .block_on(repeat_async(m.iterations, m.limit, async || {
                call_router(router, authorization).await
            }))
    }
    type Op<'a> = Box<dyn Fn() -> anyhow::Result<u64> + Sync + 'a>;
    let ops: Vec<(&'static str, Op<'_>)> = vec![
        (
            "router call: baseline",
            Box::new(|| call_served(m, &m.baseline, None)),
        ),
        (
            "router call: no-op middleware (from_fn)",
            Box::new(|| call_served(m, &m.noop, None)),
        ),
        (
            "router call: no-op middleware with AppState (from_fn_with_state)",
            Box::new(|| call_served(m, &m.noop_state, None)),
        ),
        (
            "router call: auth + rate limit, JWT",
            Box::new(|| call_served(m, &m.authenticated, Some(&m.jwt))),
        ),
        (
            "router call: auth + rate limit, API key",
            Box::new(|| call_served(m, &m.authenticated, Some(&m.key))),
        ),
        (
            "part: AuthService::authenticate(JWT), cached",
            Box::new(|| {
                m.handle.block_on(repeat_async(n, limit, async || {
                    let principal = m.state.auth.authenticate(&m.access_token).await?;
                    ensure!(principal.is_some(), "the access token was refused");
                    Ok(())
                }))
            }),
        ),
        (
            "part: AuthService::authenticate(API key), cached",
            Box::new(|| {
                m.handle.block_on(repeat_async(n, limit, async || {
                    let principal = m.state.auth.authenticate(&m.api_key).await?;
                    ensure!(principal.is_some(), "the API key was refused");
                    Ok(())
                }))
            }),
        ),
        (
            "part: JwtKeys::verify (HS256 + claims)",
            Box::new(|| {
                repeat(n, limit, || {
                    let claims =
                        jwt_keys.verify(&m.access_token, TokenType::Access, chrono::Utc::now());
                    ensure!(claims.is_some(), "the access token did not verify");
                    Ok(())
                })
            }),
        ),
        (
            "part: keys::sha256_hex (API key hash)",
            Box::new(|| {
                repeat(n, limit, || {
                    std::hint::black_box(sha256_hex(std::hint::black_box(&m.api_key)));
                    Ok(())
                })
            }),
        ),
        (
            "part: RateLimiter::check (one account)",
            Box::new(|| {
                m.handle.block_on(repeat_async(n, limit, async || {
                    let decision = m
                        .state
                        .limiter
                        .check(RateKey::Account(m.user_id.as_str()), RATE_LIMIT)
                        .await;
                    ensure!(decision.allowed, "the rate limiter refused");
                    Ok(())
                }))
            }),
        ),
        (
            "part: AppState clone + drop",
            Box::new(|| {
                repeat(n, limit, || {
                    drop(std::hint::black_box(m.state.clone()));
                    Ok(())
                })
            }),
        ),
    ];
    let mut rows = Vec::with_capacity(ops.len());
    for (name, op) in &ops {
        if m.only.as_deref().is_some_and(|only| !name.contains(only)) {
            continue;
        }
        let one = per_op_ns(1, op.as_ref())?;
        let two = per_op_ns(2, op.as_ref())?;
        rows.push((*name, one, two));
    }
    Ok(rows)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The `q` quantile (0..=1) of sorted values, in microseconds.
fn percentile_us(sorted_ns: &[u64], q: f64) -> f64 {
    if sorted_ns.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted_ns.len() as f64).ceil() as usize).clamp(1, sorted_ns.len());
    sorted_ns[rank - 1] as f64 / 1000.0
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, model)| model.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Per-scenario figures over all rounds.
#[derive(Default)]
struct Totals {
    rates: Vec<f64>,
    /// Process CPU microseconds per request.
    cpu_us: Vec<f64>,
    /// Cores kept busy.
    busy: Vec<f64>,
    /// Throughput relative to the baseline of the same round.
    ratios: Vec<f64>,
    latencies_ns: Vec<u64>,
    errors: u64,
    error_samples: Vec<String>,
}

/// Prints the summary over all rounds as a Markdown table and whether the goal is met.
fn print_summary(
    args: &Args,
    scenarios: &[Scenario],
    totals: &mut [Totals; Scenario::COUNT],
) -> anyhow::Result<()> {
    let medians: Vec<f64> = totals
        .iter()
        .map(|t| median(&mut t.rates.clone()))
        .collect();
    let base_rate = medians[Scenario::Baseline.index()];
    let mut summary = String::new();
    writeln!(
        summary,
        "| Scenario | Requests/s (median of {}) | vs baseline | vs baseline, per round (median) | CPU/request (added) | Cores busy | p50 | p99 | Errors |",
        args.rounds
    )?;
    writeln!(summary, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    let base_cpu = median(&mut totals[Scenario::Baseline.index()].cpu_us.clone());
    let mut target_met = true;
    for &scenario in scenarios {
        let total = &mut totals[scenario.index()];
        total.latencies_ns.sort_unstable();
        let rate = medians[scenario.index()];
        let ratio = rate / base_rate;
        let round_ratio = median(&mut total.ratios.clone());
        let cpu_us = median(&mut total.cpu_us.clone());
        let busy = median(&mut total.busy.clone());
        let (ratio_text, cpu_text) = if scenario == Scenario::Baseline {
            ("100 %".to_string(), format!("{cpu_us:.1} µs"))
        } else {
            if Scenario::MAIN.contains(&scenario) {
                target_met &= ratio >= 0.9 && round_ratio >= 0.9;
            }
            (
                format!("{:.1} %", 100.0 * ratio),
                format!("{cpu_us:.1} µs (+{:.1})", cpu_us - base_cpu),
            )
        };
        writeln!(
            summary,
            "| {} | {:.0} | {} | {:.1} % | {} | {:.2} | {:.0} µs | {:.0} µs | {} |",
            scenario.name(),
            rate,
            ratio_text,
            100.0 * round_ratio,
            cpu_text,
            busy,
            percentile_us(&total.latencies_ns, 0.50),
            percentile_us(&total.latencies_ns, 0.99),
            total.errors
        )?;
    }
    println!("\nsummary (Markdown)\n\n{summary}");
    let verdict = if !Scenario::MAIN.iter().all(|s| scenarios.contains(s)) {
        "not evaluated (needs baseline, jwt and api-key)"
    } else if target_met {
        "MET"
    } else {
        "NOT MET"
    };
    println!("target (each authenticated scenario ≥ 90 % of baseline throughput): {verdict}");

    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let data = tempfile::tempdir()?;
    let mut config = Config::with_data_dir(
        data.path().to_path_buf(),
        SocketAddr::from(([127, 0, 0, 1], 0)),
    )?;
    config.limits.rate_limits = [RATE_LIMIT; 4];
    let backend = Backend::prepare(&args.backend).await?;
    backend.configure(&mut config);
    let jwt_secret = config.secrets.jwt_secret.clone();
    let app = Application::build(config).await?;
    let state = app.state.clone();
    let base = format!("http://{}", app.addr());
    let (stop_app, app_stopped) = oneshot::channel::<()>();
    let app_task = tokio::spawn(app.run_until_stopped(async move {
        let _ = app_stopped.await;
    }));

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let mut credentials = set_up_account(&client, &base, &state).await?;

    let baseline = baseline_router();
    let authenticated = authenticated_router(&state);
    let baseline_server = serve(baseline.clone()).await?;
    let authenticated_server = serve(authenticated.clone()).await?;
    let mut scenarios: Vec<Scenario> = Vec::new();
    for &scenario in &args.scenarios {
        if !scenarios.contains(&scenario) {
            scenarios.push(scenario);
        }
    }
    let noop_server = if scenarios.contains(&Scenario::NoopMiddleware) {
        Some(serve(noop_state_router(&state)).await?)
    } else {
        None
    };
    let headers_only_server = if scenarios.contains(&Scenario::HeadersOnly) {
        Some(serve(headers_only_router()).await?)
    } else {
        None
    };
    check_routers(
        &client,
        baseline_server.addr,
        authenticated_server.addr,
        &credentials,
    )
    .await?;

    let duration = Duration::from_secs(args.seconds);
    println!(
        "auth_overhead: {} cores ({}), {}, {} connections, {} s per scenario, {} rounds, {} s warm-up",
        cores(),
        cpu_model(),
        backend.label(),
        args.connections,
        args.seconds,
        args.rounds,
        args.warmup
    );
    println!("routers checked: baseline 200; authenticated 401 without credentials, 200 with JWT and API key, X-RateLimit-Limit {RATE_LIMIT}");

    let mut totals: [Totals; Scenario::COUNT] = Default::default();
    let total_rounds = if args.rounds == 0 {
        0
    } else {
        args.rounds + u64::from(args.warmup > 0)
    };
    for round in 0..total_rounds {
        let warming = args.warmup > 0 && round == 0;
        let seconds = if warming {
            Duration::from_secs(args.warmup)
        } else {
            duration
        };
        if warming {
            println!("\nwarm-up ({} s per scenario, not counted)", args.warmup);
        } else {
            let measured = round + 1 - u64::from(args.warmup > 0);
            println!("\nround {measured}/{}", args.rounds);
            println!(
                "  {:<42} {:>11} {:>9} {:>9} {:>7} {:>12} {:>11} {:>6}",
                "scenario",
                "requests/s",
                "p50 µs",
                "p99 µs",
                "errors",
                "vs baseline",
                "CPU µs/req",
                "cores"
            );
        }
        let mut round_rates = [f64::NAN; Scenario::COUNT];
        let mut round_rows = Vec::new();
        for offset in 0..scenarios.len() {
            let scenario = scenarios[(round as usize + offset) % scenarios.len()];
            if scenario == Scenario::Jwt && credentials.issued.elapsed() > TOKEN_REFRESH_AGE {
                credentials.access_token =
                    login(&client, &base, &credentials.email, &credentials.password).await?;
                credentials.issued = Instant::now();
            }
            let (addr, authorization) = match scenario {
                Scenario::Baseline => (baseline_server.addr, None),
                Scenario::NoopMiddleware => (
                    noop_server
                        .as_ref()
                        .context("the diagnostic router is not served")?
                        .addr,
                    None,
                ),
                Scenario::HeadersOnly => (
                    headers_only_server
                        .as_ref()
                        .context("the diagnostic router is not served")?
                        .addr,
                    Some(HeaderValue::from_str(&format!(
                        "Bearer {}",
                        credentials.access_token
                    ))?),
                ),
                Scenario::Jwt => (
                    authenticated_server.addr,
                    Some(HeaderValue::from_str(&format!(
                        "Bearer {}",
                        credentials.access_token
                    ))?),
                ),
                Scenario::ApiKey => (
                    authenticated_server.addr,
                    Some(HeaderValue::from_str(&format!(
                        "Bearer {}",
                        credentials.api_key
                    ))?),
                ),
            };
            let mut run = run_load(
                addr,
                authorization.as_ref(),
                args.connections,
                seconds,
                args.max_requests,
            )
            .await?;
            if warming {
                continue;
            }
            run.latencies_ns.sort_unstable();
            round_rates[scenario.index()] = run.rate();
            round_rows.push((
                scenario,
                run.rate(),
                percentile_us(&run.latencies_ns, 0.50),
                percentile_us(&run.latencies_ns, 0.99),
                run.errors,
                run.cpu_us_per_request(),
                run.cores_busy(),
            ));
            let total = &mut totals[scenario.index()];
            total.rates.push(run.rate());
            total.cpu_us.push(run.cpu_us_per_request());
            total.busy.push(run.cores_busy());
            total.errors += run.errors;
            total.latencies_ns.append(&mut run.latencies_ns);
            for sample in run.error_samples {
                if total.error_samples.len() < ERRORS_SHOWN {
                    total.error_samples.push(sample);
                }
            }
        }
        round_rows.sort_by_key(|row| row.0.index());
        for &(scenario, rate, ..) in &round_rows {
            totals[scenario.index()]
                .ratios
                .push(rate / round_rates[Scenario::Baseline.index()]);
        }
        for (scenario, rate, p50, p99, errors, cpu_us, busy) in round_rows {
            println!(
                "  {:<42} {:>11.0} {:>9.0} {:>9.0} {:>7} {:>11.1}% {:>11.1} {:>6.2}",
                scenario.name(),
                rate,
                p50,
                p99,
                errors,
                100.0 * rate / round_rates[Scenario::Baseline.index()],
                cpu_us,
                busy
            );
        }
    }

    if args.rounds > 0 {
        print_summary(&args, &scenarios, &mut totals)?;
    }

    if args.in_process_seconds > 0 {
        let measure = InProcess {
            handle: tokio::runtime::Handle::current(),
            state: state.clone(),
            jwt_secret: jwt_secret.clone(),
            baseline: baseline.clone(),
            authenticated: authenticated.clone(),
            noop: noop_router(),
            noop_state: noop_state_router(&state),
            jwt: HeaderValue::from_str(&format!("Bearer {}", credentials.access_token))?,
            key: HeaderValue::from_str(&format!("Bearer {}", credentials.api_key))?,
            access_token: credentials.access_token.clone(),
            api_key: credentials.api_key.clone(),
            user_id: credentials.user_id.clone(),
            iterations: args.in_process_iterations,
            limit: Duration::from_secs(args.in_process_seconds),
            only: args.in_process_only.clone(),
        };
        let rows = tokio::task::spawn_blocking(move || in_process_table(&measure)).await??;
        println!(
            "\nin-process, no network: ns per call, up to {} s or {} calls per measurement\n",
            args.in_process_seconds, args.in_process_iterations
        );
        println!(
            "(AppState, which `from_fn_with_state` clones for each request, is {} bytes)\n",
            std::mem::size_of::<AppState>()
        );
        println!("| Measurement | 1 thread | 2 threads at once (each) |");
        println!("|---|---:|---:|");
        for (name, one, two) in rows {
            println!("| {name} | {one:.0} ns | {two:.0} ns |");
        }
    }

    let mut any_errors = false;
    for &scenario in &scenarios {
        let total = &totals[scenario.index()];
        if total.errors > 0 {
            any_errors = true;
            println!("\nerrors in {}: {}", scenario.name(), total.errors);
            for sample in &total.error_samples {
                println!("  {sample}");
            }
        }
    }

    baseline_server.shut_down().await;
    authenticated_server.shut_down().await;
    if let Some(server) = noop_server {
        server.shut_down().await;
    }
    let _ = stop_app.send(());
    match tokio::time::timeout(Duration::from_secs(10), app_task).await {
        Ok(Ok(Err(err))) => bail!("the service failed: {err}"),
        Ok(Err(err)) => bail!("the service task failed: {err}"),
        _ => {}
    }
    drop(data);
    if any_errors {
        bail!("some requests failed (see above); the figures are not valid");
    }
    Ok(())
}
