//! Refreshes of crawled sites (docs/knowledge.md § Refresh) against a loopback site whose
//! pages change, disappear (404, 410, unlinked) and appear between crawls: conditional
//! requests, the counts on the document and in `document.refreshed`, chunks and embeddings
//! of unchanged pages left alone, the schedule and its validation, and a due refresh queued
//! once by two instances.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode, Uri},
    response::{Html, IntoResponse, Response},
    routing::post,
    Router,
};
use mock_provider::{MockConfig, MockProvider};
use secrecy::SecretString;
use serde_json::{json, Value};

use crate::{embeddings::agent, helpers::*};

/// One request the site received.
#[derive(Clone, Debug)]
struct Hit {
    path: String,
    if_none_match: Option<String>,
    if_modified_since: Option<String>,
    status: u16,
}

/// A site in two versions. Version 1: `/` links `/a`, `/b`, `/c`, `/d` and `/e`; `/a` links
/// `/a/deep`. Version 2: `/` changed and links `/new` instead of `/e`; `/b` changed; `/c`
/// answers 404 and `/d` 410. `/` and `/a` answer 304 to their current `ETag`, `/b` to its
/// current `Last-Modified`; `/a/deep`, `/e` and `/new` send no validators.
#[derive(Clone, Default)]
struct Site {
    version: Arc<AtomicUsize>,
    hits: Arc<Mutex<Vec<Hit>>>,
}

const LM_1: &str = "Sun, 01 Nov 2026 10:00:00 GMT";
const LM_2: &str = "Mon, 23 Nov 2026 10:00:00 GMT";

fn page(title: &str, body: &str) -> String {
    format!("<!doctype html><html><head><title>{title}</title></head><body><main><article><h1>{title}</h1><p>{body}</p><p>{body}</p></article></main></body></html>")
}

async fn serve(State(site): State<Site>, uri: Uri, headers: HeaderMap) -> Response {
    let v2 = site.version.load(Ordering::SeqCst) >= 2;
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (inm, ims) = (header("if-none-match"), header("if-modified-since"));
    let path = uri.path().to_string();
    let with_etag = |etag: &str, html: String| -> Response {
        if inm.as_deref() == Some(etag) {
            (StatusCode::NOT_MODIFIED, [("etag", etag.to_string())]).into_response()
        } else {
            ([("etag", etag.to_string())], Html(html)).into_response()
        }
    };
    let response = match (path.as_str(), v2) {
        ("/", false) => with_etag(
            "\"idx-1\"",
            page("Guide", "Start here: <a href=\"/a\">ownership</a>, <a href=\"/b\">borrowing</a>, <a href=\"/c\">closures</a>, <a href=\"/d\">drops</a>, <a href=\"/e\">enums</a>."),
        ),
        ("/", true) => with_etag(
            "\"idx-2\"",
            page("Guide", "Start here, second edition: <a href=\"/a\">ownership</a>, <a href=\"/b\">borrowing</a>, <a href=\"/c\">closures</a>, <a href=\"/d\">drops</a>, <a href=\"/new\">newcomers</a>."),
        ),
        ("/a", _) => with_etag(
            "\"a-1\"",
            page("Ownership", "Each value has an owner; see <a href=\"/a/deep\">the deep dive</a> on moves."),
        ),
        ("/a/deep", _) => Html(page("Moves", "A move transfers ownership of a heap buffer between bindings.")).into_response(),
        ("/b", _) => {
            let lm = if v2 { LM_2 } else { LM_1 };
            if ims.as_deref() == Some(lm) {
                (StatusCode::NOT_MODIFIED, [("last-modified", lm)]).into_response()
            } else {
                let text = if v2 {
                    "Lifetimes: a reference never outlives its referent."
                } else {
                    "Borrowing lends a value without giving up ownership."
                };
                ([("last-modified", lm)], Html(page("Borrowing", text))).into_response()
            }
        }
        ("/c", false) => Html(page("Closures", "Closures capture their zucchini environment.")).into_response(),
        ("/d", false) => Html(page("Drops", "Drop runs destructors for the aubergine values.")).into_response(),
        ("/d", true) => StatusCode::GONE.into_response(),
        ("/e", _) => Html(page("Enums", "Enums hold one of several pomegranate variants.")).into_response(),
        ("/new", true) => Html(page("Newcomers", "Welcome newcomers: install the kumquat toolchain first.")).into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    };
    site.hits.lock().unwrap().push(Hit {
        path,
        if_none_match: inm,
        if_modified_since: ims,
        status: response.status().as_u16(),
    });
    response
}

impl Site {
    async fn start() -> (Self, SocketAddr) {
        let site = Self::default();
        site.version.store(1, Ordering::SeqCst);
        let router = Router::new().fallback(serve).with_state(site.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        (site, addr)
    }

    /// The requests for `path` since the log was last taken.
    fn hits_of(&self, path: &str) -> Vec<Hit> {
        self.hits
            .lock()
            .unwrap()
            .iter()
            .filter(|h| h.path == path)
            .cloned()
            .collect()
    }

    fn clear(&self) {
        self.hits.lock().unwrap().clear();
    }
}

/// A webhook receiver collecting event bodies.
#[derive(Clone, Default)]
struct Hooks(Arc<Mutex<Vec<Value>>>);

impl Hooks {
    async fn start() -> (Self, SocketAddr) {
        let hooks = Self::default();
        let router = Router::new()
            .route(
                "/hook",
                post(|State(h): State<Hooks>, body: Bytes| async move {
                    h.0.lock()
                        .unwrap()
                        .push(serde_json::from_slice(&body).unwrap());
                    StatusCode::OK
                }),
            )
            .with_state(hooks.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        (hooks, addr)
    }

    /// Waits (up to 30 s) until `n` events of `kind` arrived; answers them.
    async fn wait_for(&self, kind: &str, n: usize) -> Vec<Value> {
        for _ in 0..600 {
            let got: Vec<Value> = self
                .0
                .lock()
                .unwrap()
                .iter()
                .filter(|e| e["type"] == kind)
                .cloned()
                .collect();
            if got.len() >= n {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("fewer than {n} {kind} events arrived");
    }
}

async fn document(app: &TestApp, token: &str, agent: &str, doc: &str) -> Value {
    let res = app
        .get(&format!("/api/agents/{agent}/knowledge/{doc}"), Some(token))
        .await;
    assert_eq!(res.status(), 200);
    res.json::<Value>().await.unwrap()["document"].clone()
}

/// Polls until the job ended (at most 30 s); answers its status.
async fn job_end(app: &TestApp, token: &str, job: &str) -> String {
    for _ in 0..300 {
        let res = app.get(&format!("/api/jobs/{job}"), Some(token)).await;
        let status = res.json::<Value>().await.unwrap()["job"]["status"]
            .as_str()
            .unwrap()
            .to_string();
        if status == "succeeded" || status == "failed" {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("job {job} did not end");
}

/// Adds `url` (202) with `config`; answers the document and job ids.
async fn add_site(
    app: &TestApp,
    token: &str,
    agent: &str,
    url: &str,
    config: Value,
) -> (String, String) {
    let res = app
        .post(
            &format!("/api/agents/{agent}/knowledge/url"),
            Some(token),
            json!({"url": url, "config": config}),
        )
        .await;
    assert_eq!(res.status(), 202, "{}", res.text().await.unwrap());
    let body: Value = res.json().await.unwrap();
    (
        body["documentId"].as_str().unwrap().to_string(),
        body["jobId"].as_str().unwrap().to_string(),
    )
}

/// Queues a refresh (202); answers the job id.
async fn refresh(app: &TestApp, token: &str, agent: &str, doc: &str) -> String {
    let res = app
        .post(
            &format!("/api/agents/{agent}/knowledge/{doc}/refresh"),
            Some(token),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), 202);
    res.json::<Value>().await.unwrap()["jobId"]
        .as_str()
        .unwrap()
        .to_string()
}

/// How many chunks page `url` has, and their lowest and highest ids (empty: none); a
/// page chunked again gets new ids.
async fn chunk_ids(app: &TestApp, url: &str) -> Vec<i64> {
    let count: i64 = app
        .sql_scalar(
            "SELECT count(*) FROM chunks WHERE page_url = $1",
            vec![url.into()],
        )
        .await;
    if count == 0 {
        return Vec::new();
    }
    let min: i64 = app
        .sql_scalar(
            "SELECT min(id) FROM chunks WHERE page_url = $1",
            vec![url.into()],
        )
        .await;
    let max: i64 = app
        .sql_scalar(
            "SELECT max(id) FROM chunks WHERE page_url = $1",
            vec![url.into()],
        )
        .await;
    vec![count, min, max]
}

/// The page URLs of a reply's sources.
fn source_urls(reply: &Value) -> Vec<String> {
    reply["sources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["url"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_refresh_asks_conditionally_and_reindexes_only_what_changed() {
    const KEY: &str = "sk-refresh-key";
    let (site, addr) = Site::start().await;
    let (hooks, hooks_addr) = Hooks::start().await;
    let mock = MockProvider::start(MockConfig {
        api_key: Some(KEY.into()),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let base = mock.base_url();
    let app = spawn_app_with(|c| {
        c.outbound.allowed_private_hosts = vec![
            format!("127.0.0.1:{}", addr.port()),
            format!("127.0.0.1:{}", hooks_addr.port()),
        ];
        c.providers.openai_api_key = Some(SecretString::from(KEY));
        c.providers.openai_base_url = base;
        c.providers.embedding_model = Some("text-embedding-3-small".into());
    })
    .await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let res = app
        .post(
            "/api/integrations/webhooks",
            Some(&user.access),
            json!({"url": format!("http://127.0.0.1:{}/hook", hooks_addr.port()), "events": ["document.refreshed"]}),
        )
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let start = format!("http://{addr}/");
    let url = |path: &str| format!("http://{addr}{path}");

    // The first crawl: seven pages, all new; no refresh yet.
    let (doc, job) = add_site(
        &app,
        &user.access,
        &agent,
        &start,
        json!({"crawlDepth": 2, "maxPages": 20, "refresh": "daily"}),
    )
    .await;
    assert_eq!(job_end(&app, &user.access, &job).await, "succeeded");
    let d = document(&app, &user.access, &agent, &doc).await;
    assert_eq!(d["pages"], 7, "{d}");
    assert_eq!(d["refresh"], "daily");
    assert!(d["nextRefreshAt"].is_string(), "{d}");
    assert_eq!(d["lastRefreshedAt"], Value::Null);
    assert_eq!(d["refreshCounts"], Value::Null);
    assert!(
        site.hits
            .lock()
            .unwrap()
            .iter()
            .all(|h| h.if_none_match.is_none() && h.if_modified_since.is_none()),
        "a first crawl asks unconditionally"
    );
    let a_chunks = chunk_ids(&app, &url("/a")).await;
    let deep_chunks = chunk_ids(&app, &url("/a/deep")).await;
    assert!(!a_chunks.is_empty() && !deep_chunks.is_empty());
    let reply = app
        .chat(
            &user.access,
            &agent,
            json!({"message": "zucchini environment"}),
        )
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert!(source_urls(&reply).contains(&url("/c")), "{reply}");

    // Version 2: `/` and `/b` changed, `/c` 404, `/d` 410, `/e` unlinked, `/new` linked.
    site.version.store(2, Ordering::SeqCst);
    site.clear();
    let embedded = mock.embedding_requests();
    let job = refresh(&app, &user.access, &agent, &doc).await;
    assert_eq!(job_end(&app, &user.access, &job).await, "succeeded");
    let d = document(&app, &user.access, &agent, &doc).await;
    assert_eq!(d["status"], "indexed", "{d}");
    assert_eq!(
        d["refreshCounts"],
        json!({"added": 1, "changed": 2, "removed": 3, "unchanged": 2}),
        "{d}"
    );
    assert_eq!(d["pages"], 5);
    let last =
        chrono::DateTime::parse_from_rfc3339(d["lastRefreshedAt"].as_str().unwrap()).unwrap();
    let next = chrono::DateTime::parse_from_rfc3339(d["nextRefreshAt"].as_str().unwrap()).unwrap();
    assert!(
        next - last > chrono::Duration::hours(23) && next - last <= chrono::Duration::hours(24),
        "next is the refresh's start plus a day: {d}"
    );
    // What the site received: the validators it gave, sent back.
    let a = site.hits_of("/a");
    assert_eq!(a.len(), 1, "one request for an unchanged page: {a:?}");
    assert_eq!(a[0].if_none_match.as_deref(), Some("\"a-1\""));
    assert_eq!(a[0].status, 304);
    let b = site.hits_of("/b");
    assert_eq!(b[0].if_modified_since.as_deref(), Some(LM_1));
    assert_eq!(b[0].status, 200);
    assert_eq!(
        site.hits_of("/")[0].if_none_match.as_deref(),
        Some("\"idx-1\"")
    );
    assert_eq!(site.hits_of("/c")[0].status, 404);
    assert_eq!(site.hits_of("/d")[0].status, 410);
    assert!(site.hits_of("/e").is_empty(), "no longer linked");
    // The page below the 304 page was still reached, through its stored links.
    assert_eq!(site.hits_of("/a/deep").len(), 1);
    // Unchanged pages kept their chunks; gone pages left the index; the new one joined.
    assert_eq!(chunk_ids(&app, &url("/a")).await, a_chunks);
    assert_eq!(chunk_ids(&app, &url("/a/deep")).await, deep_chunks);
    for gone in ["/c", "/d", "/e"] {
        assert!(chunk_ids(&app, &url(gone)).await.is_empty(), "{gone}");
    }
    assert!(!chunk_ids(&app, &url("/new")).await.is_empty());
    assert!(
        mock.embedding_requests() > embedded,
        "changed pages are embedded"
    );
    let reply = app
        .chat(
            &user.access,
            &agent,
            json!({"message": "kumquat toolchain"}),
        )
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(source_urls(&reply).first(), Some(&url("/new")), "{reply}");
    let reply = app
        .chat(
            &user.access,
            &agent,
            json!({"message": "zucchini environment"}),
        )
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert!(!source_urls(&reply).contains(&url("/c")), "{reply}");
    let event = &hooks.wait_for("document.refreshed", 1).await[0];
    assert_eq!(event["data"]["agentId"], agent);
    assert_eq!(event["data"]["document"]["documentId"], doc);
    assert_eq!(
        event["data"]["document"]["refreshCounts"],
        json!({"added": 1, "changed": 2, "removed": 3, "unchanged": 2})
    );
    assert!(event["data"]["document"]["nextRefreshAt"].is_string());

    // Nothing changed: every page costs one request, nothing is chunked or embedded.
    site.clear();
    let embedded = mock.embedding_requests();
    let chunks_before: i64 = app.sql_scalar("SELECT max(id) FROM chunks", vec![]).await;
    let job = refresh(&app, &user.access, &agent, &doc).await;
    assert_eq!(job_end(&app, &user.access, &job).await, "succeeded");
    let d = document(&app, &user.access, &agent, &doc).await;
    assert_eq!(
        d["refreshCounts"],
        json!({"added": 0, "changed": 0, "removed": 0, "unchanged": 5}),
        "{d}"
    );
    assert_eq!(
        mock.embedding_requests(),
        embedded,
        "nothing embedded again"
    );
    let chunks_after: i64 = app.sql_scalar("SELECT max(id) FROM chunks", vec![]).await;
    assert_eq!(chunks_after, chunks_before, "nothing chunked again");
    for path in ["/", "/a", "/b"] {
        let hits = site.hits_of(path);
        assert_eq!(hits.len(), 1, "{path}: {hits:?}");
        assert_eq!(hits[0].status, 304, "{path}: {hits:?}");
    }
    assert_eq!(
        site.hits_of("/b")[0].if_modified_since.as_deref(),
        Some(LM_2)
    );
    assert_eq!(site.hits_of("/a/deep").len(), 1);
    hooks.wait_for("document.refreshed", 2).await;
    // The document's bytes still count the pages that answered 304.
    assert!(d["bytes"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn the_refresh_schedule_is_validated_set_and_changed() {
    let (_site, addr) = Site::start().await;
    let app = spawn_app_with(|c| {
        c.outbound.allowed_private_hosts = vec![format!("127.0.0.1:{}", addr.port())];
    })
    .await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let start = format!("http://{addr}/");
    let path = format!("/api/agents/{agent}/knowledge/url");
    for bad in [
        json!("hourly"),
        json!(0),
        json!(8761),
        json!(1.5),
        json!(-3),
        json!(true),
        json!({"hours": 2}),
        json!(""),
    ] {
        let res = app
            .post(
                &path,
                Some(&user.access),
                json!({"url": start, "config": {"refresh": bad}}),
            )
            .await;
        let body = assert_error(res, 400, "Bad Request", None).await;
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("`refresh` must be"),
            "{bad}: {body}"
        );
    }
    // Off by default; the four forms, answered canonically.
    let (doc, job) = add_site(&app, &user.access, &agent, &start, json!({"crawlDepth": 0})).await;
    let d = document(&app, &user.access, &agent, &doc).await;
    assert_eq!(d["refresh"], "off");
    assert_eq!(d["nextRefreshAt"], Value::Null);
    assert_eq!(job_end(&app, &user.access, &job).await, "succeeded");
    let patch = |body: Value| {
        let app = &app;
        let doc = doc.clone();
        let agent = agent.clone();
        let token = user.access.clone();
        async move {
            app.call(
                reqwest::Method::PATCH,
                &format!("/api/agents/{agent}/knowledge/{doc}"),
                Some(&token),
                Some(body),
            )
            .await
        }
    };
    for (given, shown, hours) in [
        (json!("daily"), json!("daily"), 24),
        (json!(24), json!("daily"), 24),
        (json!("weekly"), json!("weekly"), 168),
        (json!(6), json!(6), 6),
        (json!(8760), json!(8760), 8760),
    ] {
        let res = patch(json!({"config": {"refresh": given}})).await;
        assert_eq!(res.status(), 200);
        let d = res.json::<Value>().await.unwrap()["document"].clone();
        assert_eq!(d["refresh"], shown, "{given}");
        let indexed =
            chrono::DateTime::parse_from_rfc3339(d["indexedAt"].as_str().unwrap()).unwrap();
        let next =
            chrono::DateTime::parse_from_rfc3339(d["nextRefreshAt"].as_str().unwrap()).unwrap();
        assert_eq!(next - indexed, chrono::Duration::hours(hours), "{d}");
    }
    let res = patch(json!({"config": {"refresh": "off"}})).await;
    let d = res.json::<Value>().await.unwrap()["document"].clone();
    assert_eq!(
        (d["refresh"].clone(), d["nextRefreshAt"].clone()),
        (json!("off"), Value::Null)
    );
    let res = patch(json!({"config": {"refresh": "monthly"}})).await;
    assert_error(res, 400, "Bad Request", Some("`refresh` must be \"off\", \"daily\", \"weekly\" or a whole number of hours from 1 to 8760")).await;
    let res = patch(json!({"config": {"crawlDepth": 3}})).await;
    assert_eq!(res.status(), 400, "only the schedule changes");

    // Not for uploads.
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(b"# Notes\n\nPlain notes.".to_vec()).file_name("notes.md"),
    );
    let res = app
        .client
        .post(app.url(&format!("/api/agents/{agent}/knowledge/file")))
        .bearer_auth(&user.access)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let file = res.json::<Value>().await.unwrap()["documentId"]
        .as_str()
        .unwrap()
        .to_string();
    let res = app
        .call(
            reqwest::Method::PATCH,
            &format!("/api/agents/{agent}/knowledge/{file}"),
            Some(&user.access),
            Some(json!({"config": {"refresh": "daily"}})),
        )
        .await;
    assert_error(
        res,
        400,
        "Bad Request",
        Some("Only a crawled site (kind `url`) has a refresh schedule"),
    )
    .await;
    let d = document(&app, &user.access, &agent, &file).await;
    assert!(d.get("refresh").is_none(), "{d}");
    // Another user's document is not found; a read-only key may not change it.
    let other = app.user().await;
    let res = app
        .call(
            reqwest::Method::PATCH,
            &format!("/api/agents/{agent}/knowledge/{doc}"),
            Some(&other.access),
            Some(json!({"config": {"refresh": "daily"}})),
        )
        .await;
    assert_eq!(res.status(), 404);
    let (_, key) = app.api_key(&user, &["knowledge:read"]).await;
    let res = app
        .call(
            reqwest::Method::PATCH,
            &format!("/api/agents/{agent}/knowledge/{doc}"),
            Some(&key),
            Some(json!({"config": {"refresh": "daily"}})),
        )
        .await;
    assert_eq!(res.status(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_due_refresh_is_queued_once_by_two_instances() {
    let (site, addr) = Site::start().await;
    let allowed = format!("127.0.0.1:{}", addr.port());
    let a = spawn_app_with(|c| c.outbound.allowed_private_hosts = vec![allowed.clone()]).await;
    // B shares A's database (a scratch database on PostgreSQL, A's file on SQLite).
    let b = match &a.database {
        Some(db) => {
            spawn_app_on(tempfile::tempdir().unwrap(), Some(db.clone()), |c| {
                c.outbound.allowed_private_hosts = vec![allowed.clone()];
            })
            .await
        }
        None => {
            let url = a.database_url.clone();
            spawn_app_with(|c| {
                c.storage.database_url = url;
                c.outbound.allowed_private_hosts = vec![allowed.clone()];
            })
            .await
        }
    };
    let user = a.user().await;
    let agent = agent(&a, &user.access).await;
    let (doc, job) = add_site(
        &a,
        &user.access,
        &agent,
        &format!("http://{addr}/"),
        json!({"crawlDepth": 0, "refresh": 1}),
    )
    .await;
    assert_eq!(job_end(&a, &user.access, &job).await, "succeeded");
    let jobs = || {
        let a = &a;
        let doc = doc.clone();
        async move {
            a.sql_scalar::<i64>(
                "SELECT count(*) FROM jobs WHERE document_id = $1",
                vec![(&doc).into()],
            )
            .await
        }
    };
    assert_eq!(jobs().await, 1);
    // Not due yet.
    assert_eq!(a.state.documents.queue_due_refreshes().await.unwrap(), 0);
    assert_eq!(jobs().await, 1);

    // Two hours later, on both instances' clocks, eight schedulers on each look at once
    // (an API key outlives the access token meanwhile).
    let (_, key) = a.api_key(&user, &["knowledge:read"]).await;
    site.clear();
    for app in [&a, &b] {
        app.state.auth.clock.advance(chrono::Duration::hours(2));
    }
    let mut passes = Vec::new();
    for _ in 0..8 {
        for app in [&a, &b] {
            let documents = app.state.documents.clone();
            passes.push(tokio::spawn(async move {
                documents.queue_due_refreshes().await.unwrap()
            }));
        }
    }
    let mut queued = 0;
    for pass in passes {
        queued += pass.await.unwrap();
    }
    // The instances' own schedulers may have taken it first; either way, once.
    assert!(queued <= 1, "{queued}");
    for _ in 0..300 {
        if document(&a, &key, &agent, &doc).await["lastRefreshedAt"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let d = document(&a, &key, &agent, &doc).await;
    assert_eq!(
        d["refreshCounts"],
        json!({"added": 0, "changed": 0, "removed": 0, "unchanged": 1}),
        "{d}"
    );
    assert_eq!(jobs().await, 2, "one refresh queued");
    assert_eq!(site.hits_of("/").len(), 1, "and crawled once");
    // The next one is due an hour after that refresh's start: not now.
    assert_eq!(a.state.documents.queue_due_refreshes().await.unwrap(), 0);
    assert_eq!(b.state.documents.queue_due_refreshes().await.unwrap(), 0);
    let next = chrono::DateTime::parse_from_rfc3339(d["nextRefreshAt"].as_str().unwrap()).unwrap();
    let last =
        chrono::DateTime::parse_from_rfc3339(d["lastRefreshedAt"].as_str().unwrap()).unwrap();
    assert!(
        next > last && next - last <= chrono::Duration::hours(1),
        "{d}"
    );
}

#[tokio::test]
async fn a_failed_refresh_keeps_the_chunks_and_the_schedule() {
    let (site, addr) = Site::start().await;
    let app = spawn_app_with(|c| {
        c.outbound.allowed_private_hosts = vec![format!("127.0.0.1:{}", addr.port())];
    })
    .await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let (doc, job) = add_site(
        &app,
        &user.access,
        &agent,
        &format!("http://{addr}/c"),
        json!({"crawlDepth": 0, "refresh": 12}),
    )
    .await;
    assert_eq!(job_end(&app, &user.access, &job).await, "succeeded");
    let before = document(&app, &user.access, &agent, &doc).await;
    // The start page is gone: the refresh fails.
    site.version.store(2, Ordering::SeqCst);
    let job = refresh(&app, &user.access, &agent, &doc).await;
    assert_eq!(job_end(&app, &user.access, &job).await, "failed");
    let d = document(&app, &user.access, &agent, &doc).await;
    assert_eq!(d["status"], "failed");
    assert_eq!(d["chunks"], before["chunks"], "the chunks stay");
    assert_eq!(d["refresh"], 12);
    let next = chrono::DateTime::parse_from_rfc3339(d["nextRefreshAt"].as_str().unwrap()).unwrap();
    let first =
        chrono::DateTime::parse_from_rfc3339(before["nextRefreshAt"].as_str().unwrap()).unwrap();
    assert!(
        next >= first,
        "the schedule moves on from the failed refresh's start: {d}"
    );
    let reply = app
        .chat(
            &user.access,
            &agent,
            json!({"message": "zucchini environment"}),
        )
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(
        source_urls(&reply).first(),
        Some(&format!("http://{addr}/c")),
        "still searchable: {reply}"
    );
}
