//! Test harness: the real application on 127.0.0.1:0 with a temporary data folder and a
//! local SMTP sink that keeps every message it receives.
//!
//! The database is a SQLite file in the data folder, unless `AGENTCHAT_TEST_DATABASE_URL`
//! names a PostgreSQL server: then every application gets a scratch database of its own
//! there (dropped after the test), and an application started again on the same data
//! folder ([`spawn_app_in`]) gets the same database.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};
use test_support::scratch::ScratchDatabase;

use agentchat::{
    config::Config,
    services::AppState,
    startup::{Application, Runtimes},
};
use reqwest::{header, Client, Method, Response};
use secrecy::SecretString;
use serde_json::{json, Value};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    net::TcpListener,
};

/// A minimal SMTP server (RFC 5321 commands a client sends for one plain message).
#[derive(Clone, Default)]
pub struct SmtpSink {
    messages: Arc<Mutex<Vec<String>>>,
}

impl SmtpSink {
    /// Starts the sink; returns it and its port.
    pub async fn start() -> (Self, u16) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let sink = Self::default();
        let messages = sink.messages.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let messages = messages.clone();
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut lines = BufReader::new(read).lines();
                    let _ = write.write_all(b"220 sink ESMTP\r\n").await;
                    let mut data: Option<String> = None;
                    while let Ok(Some(line)) = lines.next_line().await {
                        if let Some(body) = data.as_mut() {
                            if line == "." {
                                messages.lock().unwrap().push(data.take().unwrap());
                                let _ = write.write_all(b"250 queued\r\n").await;
                            } else {
                                body.push_str(line.strip_prefix('.').unwrap_or(&line));
                                body.push_str("\r\n");
                            }
                            continue;
                        }
                        let cmd = line.to_ascii_uppercase();
                        let reply: &[u8] = if cmd.starts_with("EHLO") {
                            b"250-sink\r\n250 8BITMIME\r\n"
                        } else if cmd.starts_with("DATA") {
                            data = Some(String::new());
                            b"354 go ahead\r\n"
                        } else if cmd.starts_with("QUIT") {
                            let _ = write.write_all(b"221 bye\r\n").await;
                            break;
                        } else {
                            b"250 ok\r\n"
                        };
                        let _ = write.write_all(reply).await;
                    }
                });
            }
        });
        (sink, port)
    }

    /// Every message received so far, raw.
    pub fn all(&self) -> Vec<String> {
        self.messages.lock().unwrap().clone()
    }

    /// Waits (up to 10 s) for the `n`-th (1-based) message addressed to `to`; returns
    /// its decoded text body.
    pub async fn wait_for(&self, to: &str, n: usize) -> String {
        for _ in 0..200 {
            let found: Vec<String> = self
                .all()
                .into_iter()
                .filter_map(|raw| {
                    let msg = mail_parser::MessageParser::default().parse(raw.as_bytes())?;
                    let addressed = msg
                        .to()
                        .and_then(|a| a.first())
                        .and_then(|a| a.address())
                        .is_some_and(|a| a.eq_ignore_ascii_case(to));
                    addressed.then(|| msg.body_text(0).map(|b| b.to_string()).unwrap_or_default())
                })
                .collect();
            if found.len() >= n {
                return found[n - 1].clone();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no mail #{n} to {to} arrived");
    }

    /// How many messages went to `to`.
    pub fn count_to(&self, to: &str) -> usize {
        self.all()
            .iter()
            .filter(|raw| {
                raw.to_lowercase()
                    .contains(&format!("to: {}", to.to_lowercase()))
            })
            .count()
    }
}

/// The first link in `text` that contains `needle`.
pub fn link_containing(text: &str, needle: &str) -> String {
    text.split_whitespace()
        .find(|w| w.starts_with("http") && w.contains(needle))
        .unwrap_or_else(|| panic!("no link with {needle} in:\n{text}"))
        .to_string()
}

/// The `token` query parameter of a link.
pub fn token_of(link: &str) -> String {
    url::Url::parse(link)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.to_string())
        .expect("token parameter")
}

/// A running application.
pub struct TestApp {
    pub addr: SocketAddr,
    /// The `METRICS_ADDR` listener's address, when configured.
    pub metrics_addr: Option<SocketAddr>,
    pub state: AppState,
    pub client: Client,
    pub smtp: SmtpSink,
    pub dir: tempfile::TempDir,
    /// The application's `DATABASE_URL`.
    pub database_url: String,
    /// The scratch database on a server, shared with any application started again on
    /// `dir` (dropped with the last of them).
    pub database: Option<Arc<ScratchDatabase>>,
    /// Dropped with the application (or sent by [`TestApp::shut_down`]): its listeners
    /// stop, and the thread serving connections beside the test's runtime ends.
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl TestApp {
    /// Begins the application's graceful shutdown, as `SIGTERM` does (docs/api.md § Drains).
    pub fn shut_down(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A value bound to a parameter of [`TestApp::sql`] and friends.
pub enum Bind {
    Text(String),
    Bytes(Vec<u8>),
}

impl From<&str> for Bind {
    fn from(s: &str) -> Self {
        Self::Text(s.to_string())
    }
}

impl From<&String> for Bind {
    fn from(s: &String) -> Self {
        Self::Text(s.clone())
    }
}

impl From<Vec<u8>> for Bind {
    fn from(b: Vec<u8>) -> Self {
        Self::Bytes(b)
    }
}

/// The scratch databases of live applications, by data folder, so that an application
/// started again on a folder finds its predecessor's database.
static DATABASES: Mutex<Vec<(std::path::PathBuf, std::sync::Weak<ScratchDatabase>)>> =
    Mutex::new(Vec::new());

/// The database server the suite runs on: `None` for SQLite (the default).
pub fn test_database_server() -> Option<String> {
    std::env::var("AGENTCHAT_TEST_DATABASE_URL")
        .ok()
        .filter(|url| url.starts_with("postgres:") || url.starts_with("postgresql:"))
}

/// The database of an application on `dir`: the scratch database another application on
/// `dir` still holds, or a new one; `None` on SQLite.
async fn database_for(dir: &std::path::Path) -> Option<Arc<ScratchDatabase>> {
    let server = test_database_server()?;
    if let Some(db) = DATABASES
        .lock()
        .unwrap()
        .iter()
        .find(|(d, _)| d == dir)
        .and_then(|(_, db)| db.upgrade())
    {
        return Some(db);
    }
    let db = Arc::new(
        ScratchDatabase::create(&server)
            .await
            .unwrap_or_else(|e| panic!("creating a scratch database on {server}: {e}")),
    );
    let mut all = DATABASES.lock().unwrap();
    all.retain(|(_, db)| db.strong_count() > 0);
    all.push((dir.to_path_buf(), Arc::downgrade(&db)));
    Some(db)
}

/// A signed-up, verified, signed-in user.
pub struct TestUser {
    pub id: String,
    pub email: String,
    pub password: String,
    pub access: String,
    pub refresh: String,
}

/// Starts the application with default configuration.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// Starts the application after `tweak` adjusts its configuration.
pub async fn spawn_app_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
    spawn_app_in(tempfile::tempdir().unwrap(), tweak).await
}

/// Starts the application on the data folder `dir` (e.g. one a stopped instance used).
pub async fn spawn_app_in(dir: tempfile::TempDir, tweak: impl FnOnce(&mut Config)) -> TestApp {
    let database = database_for(dir.path()).await;
    spawn_app_on(dir, database, tweak).await
}

/// Starts the application on the data folder `dir` and the scratch database `database`
/// (`None`: the SQLite file in `dir`, whatever `AGENTCHAT_TEST_DATABASE_URL` says).
pub async fn spawn_app_on(
    dir: tempfile::TempDir,
    database: Option<Arc<ScratchDatabase>>,
    tweak: impl FnOnce(&mut Config),
) -> TestApp {
    let (smtp, port) = SmtpSink::start().await;
    let mut config =
        Config::with_data_dir(dir.path().to_path_buf(), "127.0.0.1:0".parse().unwrap()).unwrap();
    config.mail.smtp_url = Some(SecretString::from(format!("smtp://127.0.0.1:{port}")));
    // Live channels call nothing outside the machine: a closed loopback port unless a test
    // points them at its mock.
    config.channels.telegram_api_url = "http://127.0.0.1:9".into();
    config.channels.slack_api_url = "http://127.0.0.1:9/api".into();
    // Uploads and pages are read by children of the built binary (the test harness is not
    // one).
    config.knowledge.extraction.program = env!("CARGO_BIN_EXE_agentchat").into();
    if let Some(db) = &database {
        config.storage.database_url = db.url().to_string();
        // On a server, the suite also runs with Redis: a key prefix of this application's
        // own (shared with an application started again on `dir`).
        if let Ok(redis) = std::env::var("AGENTCHAT_TEST_REDIS_URL") {
            config.limits.redis_url = Some(redis);
            config.limits.redis_key_prefix = format!("{}:", db.name());
        }
    }
    tweak(&mut config);
    let database_url = config.storage.database_url.clone();
    // Connections are served as `agentchat serve` serves them on a two-core machine: on
    // this runtime and on a thread with a runtime of its own.
    let threads = Runtimes::for_cores(2).extra_threads();
    let app = Application::build(config)
        .await
        .expect("application builds");
    let addr = app.addr();
    let metrics_addr = app.metrics_addr();
    let state = app.state.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(app.run_until_stopped_on(threads, async move {
        let _ = stopped.await;
    }));
    TestApp {
        addr,
        metrics_addr,
        state,
        client: client(),
        smtp,
        dir,
        database_url,
        database,
        stop: Some(stop),
    }
}

/// A client that does not follow redirects and keeps no cookies.
pub fn client() -> Client {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A unique email address.
pub fn unique_email() -> String {
    format!("user-{}@example.com", uuid::Uuid::new_v4().simple())
}

impl TestApp {
    /// Runs one statement on the application's database, whichever the backend (`$1`,
    /// `$2`, ... name the parameters on both).
    pub async fn sql(&self, statement: &str, binds: Vec<Bind>) {
        if self.database.is_some() {
            let pool = sqlx::PgPool::connect(&self.database_url).await.unwrap();
            let mut q = sqlx::query(statement);
            for b in binds {
                q = match b {
                    Bind::Text(t) => q.bind(t),
                    Bind::Bytes(b) => q.bind(b),
                };
            }
            q.execute(&pool).await.unwrap();
        } else {
            let pool = sqlx::SqlitePool::connect(&self.database_url).await.unwrap();
            let mut q = sqlx::query(statement);
            for b in binds {
                q = match b {
                    Bind::Text(t) => q.bind(t),
                    Bind::Bytes(b) => q.bind(b),
                };
            }
            q.execute(&pool).await.unwrap();
        }
    }

    /// The single value of type `T` a query answers, whichever the backend.
    pub async fn sql_scalar<T>(&self, query: &str, binds: Vec<Bind>) -> T
    where
        T: Send
            + Unpin
            + for<'r> sqlx::Decode<'r, sqlx::Postgres>
            + sqlx::Type<sqlx::Postgres>
            + for<'r> sqlx::Decode<'r, sqlx::Sqlite>
            + sqlx::Type<sqlx::Sqlite>,
    {
        if self.database.is_some() {
            let pool = sqlx::PgPool::connect(&self.database_url).await.unwrap();
            let mut q = sqlx::query_scalar::<_, T>(query);
            for b in binds {
                q = match b {
                    Bind::Text(t) => q.bind(t),
                    Bind::Bytes(b) => q.bind(b),
                };
            }
            q.fetch_one(&pool).await.unwrap()
        } else {
            let pool = sqlx::SqlitePool::connect(&self.database_url).await.unwrap();
            let mut q = sqlx::query_scalar::<_, T>(query);
            for b in binds {
                q = match b {
                    Bind::Text(t) => q.bind(t),
                    Bind::Bytes(b) => q.bind(b),
                };
            }
            q.fetch_one(&pool).await.unwrap()
        }
    }

    /// Whether the bytes of the upload of `document` are still kept (a file in the data
    /// folder on SQLite, a row of `document_uploads` on a server).
    pub async fn upload_exists(&self, document: &str) -> bool {
        if self.database.is_some() {
            self.sql_scalar::<i64>(
                "SELECT COUNT(*) FROM document_uploads WHERE document_id = $1",
                vec![document.into()],
            )
            .await
                > 0
        } else {
            self.dir.path().join("uploads").join(document).exists()
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Sends `method path` with an optional bearer token and JSON body.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        bearer: Option<&str>,
        body: Option<Value>,
    ) -> Response {
        let mut req = self.client.request(method, self.url(path));
        if let Some(token) = bearer {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        req.send().await.unwrap()
    }

    pub async fn get(&self, path: &str, bearer: Option<&str>) -> Response {
        self.call(Method::GET, path, bearer, None).await
    }

    /// The OpenAPI document (`GET /api/openapi.json`).
    pub async fn openapi(&self) -> Value {
        self.get("/api/openapi.json", None)
            .await
            .json()
            .await
            .unwrap()
    }

    pub async fn post(&self, path: &str, bearer: Option<&str>, body: Value) -> Response {
        self.call(Method::POST, path, bearer, Some(body)).await
    }

    pub async fn delete(&self, path: &str, bearer: Option<&str>) -> Response {
        self.call(Method::DELETE, path, bearer, None).await
    }

    /// `POST /api/agents/{agent}/chat` with `body`.
    pub async fn chat(&self, token: &str, agent: &str, body: Value) -> Response {
        self.post(&format!("/api/agents/{agent}/chat"), Some(token), body)
            .await
    }

    /// The messages of a thread, oldest first.
    pub async fn messages(&self, token: &str, agent: &str, thread: &str) -> Vec<Value> {
        let res = self
            .get(
                &format!("/api/agents/{agent}/conversations/{thread}/messages"),
                Some(token),
            )
            .await;
        assert_eq!(res.status(), 200);
        let body: Value = res.json().await.unwrap();
        body["messages"].as_array().unwrap().clone()
    }

    pub async fn signup(&self, email: &str, password: &str) -> Response {
        self.post(
            "/api/auth/signup",
            None,
            json!({"name": "Test User", "email": email, "password": password}),
        )
        .await
    }

    pub async fn login(&self, email: &str, password: &str) -> Response {
        self.post(
            "/api/auth/login",
            None,
            json!({"email": email, "password": password}),
        )
        .await
    }

    /// Signs up and follows the emailed verification link; returns the user id.
    pub async fn verified_account(&self, email: &str, password: &str) -> String {
        let res = self.signup(email, password).await;
        assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
        let id = res.json::<Value>().await.unwrap()["user"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let mail = self.smtp.wait_for(email, 1).await;
        let res = self
            .client
            .get(link_containing(&mail, "verify-email"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 303);
        assert_eq!(res.headers()[header::LOCATION], "/login?verified=1");
        id
    }

    /// A verified user with a fresh session.
    pub async fn user(&self) -> TestUser {
        let email = unique_email();
        let password = "correct horse battery".to_string();
        let id = self.verified_account(&email, &password).await;
        let tokens = self.tokens(&email, &password).await;
        TestUser {
            id,
            email,
            password,
            access: tokens.0,
            refresh: tokens.1,
        }
    }

    /// Signs in; returns (access, refresh).
    pub async fn tokens(&self, email: &str, password: &str) -> (String, String) {
        let res = self.login(email, password).await;
        assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
        let body: Value = res.json().await.unwrap();
        (
            body["tokens"]["accessToken"].as_str().unwrap().to_string(),
            body["tokens"]["refreshToken"].as_str().unwrap().to_string(),
        )
    }

    /// Creates an API key with `scopes` for `user`; returns (id, key).
    pub async fn api_key(&self, user: &TestUser, scopes: &[&str]) -> (String, String) {
        let res = self
            .post(
                "/api/api-keys",
                Some(&user.access),
                json!({"name": "test key", "scopes": scopes}),
            )
            .await;
        assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
        let body: Value = res.json().await.unwrap();
        (
            body["apiKey"]["id"].as_str().unwrap().to_string(),
            body["key"].as_str().unwrap().to_string(),
        )
    }

    /// Everything in the database files, for "no plaintext secret" checks.
    /// On a server: the database's data as `pg_dump --data-only` writes it (BYTEA columns
    /// appear in hex there).
    pub fn database_bytes(&self) -> Vec<u8> {
        if self.database.is_some() {
            let out = std::process::Command::new("pg_dump")
                .arg("--data-only")
                .arg(&self.database_url)
                .output()
                .expect("pg_dump runs");
            assert!(
                out.status.success(),
                "pg_dump: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            return out.stdout;
        }
        let mut bytes = Vec::new();
        for entry in std::fs::read_dir(self.dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("agentchat.db")
            {
                bytes.extend(std::fs::read(path).unwrap());
            }
        }
        bytes
    }
}

/// Asserts status and the exact `{error, message}` body.
pub async fn assert_error(res: Response, status: u16, error: &str, message: Option<&str>) -> Value {
    assert_eq!(res.status().as_u16(), status);
    assert!(
        res.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/json"),
        "error bodies are JSON"
    );
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"], error, "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    if let Some(message) = message {
        assert_eq!(body["message"], message, "{body}");
    }
    assert_eq!(
        body.as_object().unwrap().len(),
        2,
        "exactly error and message: {body}"
    );
    body
}

/// The contract's 401.
pub async fn assert_unauthorized(res: Response) {
    assert_error(res, 401, "Unauthorized", Some("Invalid or expired token")).await;
}

/// Whether `haystack` contains `needle`.
pub fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}
