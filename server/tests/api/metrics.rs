//! `GET /metrics` (README § Metrics): served only with `METRICS_TOKEN` on the service's
//! port or on the `METRICS_ADDR` listener, in the Prometheus text exposition format, with
//! every documented family after its activity. The recorder is process-wide and other
//! tests run beside these, so counts are compared before and after an action (at least
//! the action's own), on labels unique to the test where they exist (the model).

use std::{
    collections::{BTreeMap, HashMap},
    net::SocketAddr,
    time::Duration,
};

use axum::{http::StatusCode, routing::post, Router};
use mock_provider::{MockConfig, MockProvider};
use reqwest::header;
use secrecy::SecretString;
use serde_json::{json, Value};

use crate::{chat::streamed_text, helpers::*};

const TOKEN: &str = "metrics-token-0123456789abcdef";

// ---------------------------------------------------------------------------------------
// A strict reader of the text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format): any
// line it does not understand fails the test.

/// One sample line: its name (with a histogram's `_bucket`, `_sum` or `_count`), labels and
/// value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A metric family: `# TYPE`, `# HELP` and its samples.
#[derive(Debug, Default)]
struct Family {
    kind: String,
    help: Option<String>,
    samples: Vec<Sample>,
}

/// A parsed scrape, by family name.
#[derive(Debug)]
struct Exposition(HashMap<String, Family>);

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn parse_value(s: &str) -> f64 {
    match s {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        _ => s
            .parse()
            .unwrap_or_else(|_| panic!("`{s}` is not a sample value")),
    }
}

/// `{a="x",b="y\"z"}` (after the name) → labels and the rest of the line.
fn parse_labels(line: &str) -> (BTreeMap<String, String>, &str) {
    let mut labels = BTreeMap::new();
    let Some(mut rest) = line.strip_prefix('{') else {
        return (labels, line);
    };
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return (labels, after);
        }
        let (name, after) = rest
            .split_once("=\"")
            .unwrap_or_else(|| panic!("label without =\" in {line}"));
        assert!(is_name(name), "label name `{name}` in {line}");
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            let (i, c) = chars
                .next()
                .unwrap_or_else(|| panic!("unterminated label in {line}"));
            match c {
                '\\' => match chars.next().map(|(_, c)| c) {
                    Some('\\') => value.push('\\'),
                    Some('"') => value.push('"'),
                    Some('n') => value.push('\n'),
                    other => panic!("bad escape {other:?} in {line}"),
                },
                '"' => break i + 1,
                c => value.push(c),
            }
        };
        assert!(
            labels.insert(name.to_string(), value).is_none(),
            "label {name} twice in {line}"
        );
        rest = &after[end..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

impl Exposition {
    fn parse(text: &str) -> Self {
        let mut families: HashMap<String, Family> = HashMap::new();
        for line in text.lines() {
            if line.trim().is_empty() {
                continue;
            }
            if let Some(comment) = line.strip_prefix('#') {
                let words: Vec<&str> = comment.trim_start().splitn(3, ' ').collect();
                match words.as_slice() {
                    ["TYPE", name, kind] => {
                        assert!(is_name(name), "{line}");
                        assert!(
                            ["counter", "gauge", "histogram", "summary", "untyped"].contains(kind),
                            "{line}"
                        );
                        let family = families.entry(name.to_string()).or_default();
                        assert!(
                            family.kind.is_empty() && family.samples.is_empty(),
                            "TYPE after samples or twice: {line}"
                        );
                        family.kind = kind.to_string();
                    }
                    ["HELP", name, help] => {
                        assert!(is_name(name), "{line}");
                        families.entry(name.to_string()).or_default().help = Some(help.to_string());
                    }
                    _ => {}
                }
                continue;
            }
            let name_end = line
                .find(['{', ' '])
                .unwrap_or_else(|| panic!("no value: {line}"));
            let name = &line[..name_end];
            assert!(is_name(name), "sample name in {line}");
            let (labels, rest) = parse_labels(&line[name_end..]);
            let fields: Vec<&str> = rest.split_whitespace().collect();
            assert!(
                rest.starts_with(' ') && (1..=2).contains(&fields.len()),
                "value (and timestamp) in {line}"
            );
            let value = parse_value(fields[0]);
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .filter_map(|suffix| name.strip_suffix(suffix))
                .find(|base| {
                    families
                        .get(*base)
                        .is_some_and(|f| f.kind == "histogram" || f.kind == "summary")
                })
                .unwrap_or(name)
                .to_string();
            let family = families
                .get_mut(&family)
                .unwrap_or_else(|| panic!("sample before its # TYPE: {line}"));
            family.samples.push(Sample {
                name: name.to_string(),
                labels,
                value,
            });
        }
        let exposition = Self(families);
        exposition.check_histograms();
        exposition
    }

    /// Every histogram series has increasing `le` buckets ending with `+Inf`, whose count
    /// is the series' `_count`, and a `_sum`.
    fn check_histograms(&self) {
        for (name, family) in &self.0 {
            if family.kind != "histogram" {
                continue;
            }
            let mut series: BTreeMap<BTreeMap<String, String>, Vec<(f64, f64)>> = BTreeMap::new();
            for s in family
                .samples
                .iter()
                .filter(|s| s.name.ends_with("_bucket"))
            {
                let mut labels = s.labels.clone();
                let le = parse_value(&labels.remove("le").expect("a bucket has le"));
                series.entry(labels).or_default().push((le, s.value));
            }
            for (labels, buckets) in series {
                assert!(
                    buckets
                        .windows(2)
                        .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
                    "{name}{labels:?}: buckets increase"
                );
                let (last_le, total) = *buckets.last().unwrap();
                assert_eq!(last_le, f64::INFINITY, "{name}{labels:?} ends with +Inf");
                let count = family
                    .samples
                    .iter()
                    .find(|s| s.name == format!("{name}_count") && s.labels == labels)
                    .unwrap_or_else(|| panic!("{name}{labels:?} has a _count"));
                assert_eq!(
                    count.value, total,
                    "{name}{labels:?}: _count is the +Inf bucket"
                );
                assert!(
                    family
                        .samples
                        .iter()
                        .any(|s| s.name == format!("{name}_sum") && s.labels == labels),
                    "{name}{labels:?} has a _sum"
                );
            }
        }
    }

    /// The family `name`, which must exist with type `kind` and help text, and whose
    /// samples must all carry exactly the label names `labels` (plus `le` on buckets).
    fn family(&self, name: &str, kind: &str, labels: &[&str]) -> &Family {
        let family = self
            .0
            .get(name)
            .unwrap_or_else(|| panic!("no family {name}"));
        assert_eq!(family.kind, kind, "{name}");
        assert!(family.help.is_some(), "{name} has # HELP");
        assert!(!family.samples.is_empty(), "{name} has samples");
        for s in &family.samples {
            let mut names: Vec<&str> = s
                .labels
                .keys()
                .map(String::as_str)
                .filter(|l| !(*l == "le" && s.name.ends_with("_bucket")))
                .collect();
            names.sort_unstable();
            let mut expected = labels.to_vec();
            expected.sort_unstable();
            assert_eq!(names, expected, "labels of {s:?}");
        }
        family
    }

    /// The value of the sample `name` (a family's own, or a histogram's `_count`) whose
    /// labels include `labels`; 0 when there is none yet.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let family = name
            .strip_suffix("_count")
            .filter(|base| self.0.contains_key(*base))
            .unwrap_or(name);
        self.0
            .get(family)
            .into_iter()
            .flat_map(|f| &f.samples)
            .filter(|s| s.name == name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(v))
            })
            .map(|s| s.value)
            .sum()
    }
}

#[test]
fn the_reader_is_strict() {
    let good = "# HELP a_total Things.\n# TYPE a_total counter\na_total{route=\"/x/{id}\",q=\"a\\\"b\\\\c\"} 3\n\
                # TYPE h histogram\nh_bucket{le=\"0.5\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 0.7\nh_count 2\n";
    let parsed = Exposition::parse(good);
    assert_eq!(
        parsed.value("a_total", &[("route", "/x/{id}"), ("q", "a\"b\\c")]),
        3.0
    );
    assert_eq!(parsed.value("h_count", &[]), 2.0);
    for bad in [
        "a_total 1\n",                                                    // no TYPE
        "# TYPE a counter\na{x=\"1\" 1\n",                                // unterminated
        "# TYPE a counter\na{x=1} 1\n",                                   // unquoted
        "# TYPE a counter\na one\n",                                      // not a number
        "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_count 1\nh_sum 1\n", // no +Inf
    ] {
        assert!(
            std::panic::catch_unwind(|| Exposition::parse(bad)).is_err(),
            "accepted: {bad}"
        );
    }
}

// ---------------------------------------------------------------------------------------

/// `GET path` on `addr` with an optional bearer token.
async fn get_at(addr: SocketAddr, path: &str, bearer: Option<&str>) -> reqwest::Response {
    let mut request = client().get(format!("http://{addr}{path}"));
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap()
}

/// A scrape of `app`'s metrics with the token, checked and parsed.
async fn scrape(app: &TestApp) -> Exposition {
    let res = app.get("/metrics", Some(TOKEN)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()[header::CONTENT_TYPE],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    Exposition::parse(&res.text().await.unwrap())
}

#[tokio::test]
async fn metrics_are_not_served_without_configuration() {
    let app = spawn_app().await;
    assert_eq!(app.metrics_addr, None);
    for bearer in [None, Some(TOKEN)] {
        let res = app.get("/metrics", bearer).await;
        assert_error(res, 404, "Not Found", None).await;
    }
}

#[tokio::test]
async fn the_token_is_required_on_the_service_port() {
    let app = spawn_app_with(|c| c.metrics.token = Some(SecretString::from(TOKEN))).await;
    for bearer in [None, Some("metrics-token-0123456789abcdeX"), Some("")] {
        let res = app.get("/metrics", bearer).await;
        assert_eq!(
            res.headers()[header::WWW_AUTHENTICATE],
            "Bearer realm=\"metrics\""
        );
        assert_unauthorized(res).await;
    }
    let res = app
        .client
        .get(app.url("/metrics"))
        .header(header::AUTHORIZATION, format!("Basic {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_unauthorized(res).await;
    // Not metered: no budget headers, and many scrapes are all answered.
    for _ in 0..3 {
        let res = app.get("/metrics", Some(TOKEN)).await;
        assert_eq!(res.status(), 200);
        assert!(res.headers().get("x-ratelimit-limit").is_none());
    }
    scrape(&app).await;
}

#[tokio::test]
async fn the_separate_listener_serves_only_metrics() {
    let app = spawn_app_with(|c| c.metrics.addr = Some("127.0.0.1:0".parse().unwrap())).await;
    let addr = app.metrics_addr.expect("a metrics listener");
    assert_ne!(addr, app.addr);
    // Never on the public port without a token.
    assert_error(app.get("/metrics", None).await, 404, "Not Found", None).await;
    let res = get_at(addr, "/metrics", None).await;
    assert_eq!(res.status(), 200);
    let body = res.text().await.unwrap();
    let parsed = Exposition::parse(&body);
    parsed.family("agentchat_knowledge_queue_depth", "gauge", &["kind"]);
    for path in ["/api/health", "/", "/metrics/x", "/api/agents"] {
        assert_error(get_at(addr, path, None).await, 404, "Not Found", None).await;
    }

    // With a token as well, the listener requires it too.
    let app = spawn_app_with(|c| {
        c.metrics.addr = Some("127.0.0.1:0".parse().unwrap());
        c.metrics.token = Some(SecretString::from(TOKEN));
    })
    .await;
    let addr = app.metrics_addr.unwrap();
    assert_unauthorized(get_at(addr, "/metrics", None).await).await;
    assert_unauthorized(get_at(addr, "/metrics", Some("not-the-token-0123456789")).await).await;
    assert_eq!(get_at(addr, "/metrics", Some(TOKEN)).await.status(), 200);
    assert_eq!(app.get("/metrics", Some(TOKEN)).await.status(), 200);
}

/// A receiver of webhook deliveries that answers 204.
async fn receiver() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/hook", post(|| async { StatusCode::NO_CONTENT }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Polls `app`'s metrics until `done` holds of a scrape (up to 20 s).
async fn until(app: &TestApp, what: &str, done: impl Fn(&Exposition) -> bool) -> Exposition {
    for _ in 0..200 {
        let now = scrape(app).await;
        if done(&now) {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("metrics never showed {what}");
}

#[tokio::test]
async fn every_family_appears_with_its_type_and_labels_after_its_activity() {
    // A model name of this test alone, so that its counts are its own.
    let model = format!("metrics-model-{}", uuid::Uuid::new_v4().simple());
    let mock = MockProvider::start(MockConfig {
        models_openai: vec![model.clone()],
        models_anthropic: vec![],
        token_interval: Duration::from_millis(60),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let hooks = receiver().await;
    let base = mock.base_url();
    let app = spawn_app_with(|c| {
        c.metrics.token = Some(SecretString::from(TOKEN));
        c.providers.openai_api_key = Some(SecretString::from("sk-any"));
        c.providers.openai_base_url = base;
        c.outbound.allowed_private_hosts = vec![hooks.to_string()];
        c.webhooks.retry_base = Duration::from_millis(50);
    })
    .await;
    let user = app.user().await;
    let before = scrape(&app).await;

    // A webhook, then an agent: `agent.created` is delivered.
    let res = app
        .post(
            "/api/integrations/webhooks",
            Some(&user.access),
            json!({"url": format!("http://{hooks}/hook"), "events": ["agent.created"]}),
        )
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let res = app
        .post(
            "/api/agents",
            Some(&user.access),
            json!({"name": "Bot", "systemPrompt": "Be brief", "model": model}),
        )
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let agent = res.json::<Value>().await.unwrap()["agent"]["id"]
        .as_str()
        .unwrap()
        .to_string();

    // An ingested document, then chats that search it.
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(b"# Opening hours\n\nThe shop opens at nine.\n".to_vec())
            .file_name("hours.md")
            .mime_str("text/markdown")
            .unwrap(),
    );
    let res = app
        .client
        .post(app.url(&format!("/api/agents/{agent}/knowledge/file")))
        .bearer_auth(&user.access)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.text().await.unwrap());
    let ingested = |e: &Exposition| {
        e.value(
            "agentchat_knowledge_jobs_total",
            &[("kind", "ingest"), ("outcome", "succeeded")],
        ) > before.value(
            "agentchat_knowledge_jobs_total",
            &[("kind", "ingest"), ("outcome", "succeeded")],
        )
    };
    until(&app, "the ingest job", ingested).await;

    let res = app
        .chat(
            &user.access,
            &agent,
            json!({"message": "When does the shop open?"}),
        )
        .await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    // A stream, scraped while it is open.
    let stream = app
        .chat(
            &user.access,
            &agent,
            json!({"message": "Tell me about the opening hours at length", "stream": true}),
        )
        .await;
    assert_eq!(stream.status(), 200);
    let during = scrape(&app).await;
    assert!(during.value("agentchat_sse_streams_open", &[]) >= 1.0);
    let text = streamed_text(&stream.text().await.unwrap());
    assert!(text.starts_with("Echo: "), "{text}");
    // A provider failure (the mock answers 400 for this marker).
    let res = app
        .chat(&user.access, &agent, json!({"message": "[[status:400]]"}))
        .await;
    assert_eq!(res.status(), 502);
    // An unknown path.
    let _ = app.get("/wp-login.php", None).await;

    let after = until(&app, "the webhook delivery", |e| {
        e.value(
            "agentchat_webhook_deliveries_total",
            &[("outcome", "delivered")],
        ) > before.value(
            "agentchat_webhook_deliveries_total",
            &[("outcome", "delivered")],
        )
    })
    .await;

    // HTTP, by route template, never the raw path.
    after.family(
        "agentchat_http_requests_total",
        "counter",
        &["method", "route", "status"],
    );
    let chat_route = [
        ("method", "POST"),
        ("route", "/api/agents/{agentId}/chat"),
        ("status", "200"),
    ];
    assert!(
        after.value("agentchat_http_requests_total", &chat_route)
            >= before.value("agentchat_http_requests_total", &chat_route) + 2.0
    );
    assert!(
        after.value(
            "agentchat_http_requests_total",
            &[("route", "unmatched"), ("status", "404")]
        ) >= 1.0
    );
    let durations = after.family(
        "agentchat_http_request_duration_seconds",
        "histogram",
        &["method", "route"],
    );
    assert!(durations
        .samples
        .iter()
        .all(|s| !s.labels["route"].contains(&agent) && !s.labels["route"].contains("wp-login")));
    assert!(
        after.value(
            "agentchat_http_request_duration_seconds_count",
            &[("method", "POST"), ("route", "/api/agents/{agentId}/chat")]
        ) >= 2.0
    );

    // Chats of this test's model: two complete, one failed, with tokens and timings.
    after.family("agentchat_chats_total", "counter", &["model", "outcome"]);
    let m = model.as_str();
    assert_eq!(
        after.value(
            "agentchat_chats_total",
            &[("model", m), ("outcome", "complete")]
        ),
        2.0
    );
    assert_eq!(
        after.value(
            "agentchat_chats_total",
            &[("model", m), ("outcome", "failed")]
        ),
        1.0
    );
    after.family("agentchat_chat_tokens_total", "counter", &["model", "type"]);
    for kind in ["prompt", "completion"] {
        assert!(
            after.value(
                "agentchat_chat_tokens_total",
                &[("model", m), ("type", kind)]
            ) > 0.0,
            "{kind} tokens"
        );
    }
    after.family(
        "agentchat_provider_time_to_first_token_seconds",
        "histogram",
        &["model"],
    );
    assert_eq!(
        after.value(
            "agentchat_provider_time_to_first_token_seconds_count",
            &[("model", m)]
        ),
        2.0
    );
    after.family(
        "agentchat_provider_errors_total",
        "counter",
        &["model", "kind"],
    );
    assert_eq!(
        after.value(
            "agentchat_provider_errors_total",
            &[("model", m), ("kind", "http_4xx")]
        ),
        1.0
    );
    after.family("agentchat_sse_streams_open", "gauge", &[]);

    // Knowledge: the job, the queue, the searches.
    after.family(
        "agentchat_knowledge_jobs_total",
        "counter",
        &["kind", "outcome"],
    );
    after.family("agentchat_knowledge_queue_depth", "gauge", &["kind"]);
    after.family("agentchat_bm25_search_duration_seconds", "histogram", &[]);
    assert!(
        after.value("agentchat_bm25_search_duration_seconds_count", &[])
            >= before.value("agentchat_bm25_search_duration_seconds_count", &[]) + 2.0
    );
    after.family(
        "agentchat_webhook_deliveries_total",
        "counter",
        &["outcome"],
    );
}

#[tokio::test]
async fn rate_limit_refusals_are_counted_by_budget() {
    let app = spawn_app_with(|c| {
        c.metrics.token = Some(SecretString::from(TOKEN));
        c.limits.rate_limits = [2, 500, 2000, 10000];
    })
    .await;
    let user = app.user().await;
    let before = scrape(&app).await;
    let mut refused = 0;
    for _ in 0..4 {
        if app.get("/api/auth/me", Some(&user.access)).await.status() == 429 {
            refused += 1;
        }
    }
    assert!(refused >= 2, "{refused}");
    let after = scrape(&app).await;
    after.family("agentchat_rate_limit_refusals_total", "counter", &["kind"]);
    let account = [("kind", "account")];
    assert!(
        after.value("agentchat_rate_limit_refusals_total", &account)
            >= before.value("agentchat_rate_limit_refusals_total", &account) + f64::from(refused)
    );
    let limited = [("route", "/api/auth/me"), ("status", "429")];
    assert!(
        after.value("agentchat_http_requests_total", &limited)
            >= before.value("agentchat_http_requests_total", &limited) + f64::from(refused),
        "a refused request is labelled by its route too"
    );
}

#[tokio::test]
async fn a_worker_instance_serves_metrics_too() {
    let app = spawn_app_with(|c| {
        c.metrics.token = Some(SecretString::from(TOKEN));
        c.role = agentchat::config::Role::Worker;
    })
    .await;
    scrape(&app).await;
    assert_unauthorized(app.get("/metrics", None).await).await;
}

/// The token is never written to the logs, whatever is logged (debug level, requests
/// with the right and with a wrong token).
#[test]
fn the_token_never_appears_in_the_logs() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agentchat"))
        .arg("serve")
        .current_dir(dir.path())
        .env("DATA_DIR", dir.path())
        .env("LEPTOS_SITE_ADDR", "127.0.0.1:0")
        .env("METRICS_ADDR", "127.0.0.1:0")
        .env("METRICS_TOKEN", TOKEN)
        .env("RUST_LOG", "debug")
        .env("LOG_FORMAT", "json")
        .env_remove("DATABASE_URL")
        .env_remove("REDIS_URL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (lines, logged) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = Vec::new();
    let (mut site, mut metrics) = (None, None);
    while site.is_none() || metrics.is_none() {
        let line = logged
            .recv_timeout(Duration::from_secs(120))
            .expect("the server starts");
        let entry: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        let addr = || {
            entry["fields"]["addr"]
                .as_str()
                .map(|a| a.parse::<SocketAddr>().unwrap())
        };
        let message = entry["fields"]["message"].as_str().unwrap_or_default();
        if message.starts_with("AgentChat listening") {
            site = addr();
        } else if message.starts_with("metrics served") {
            metrics = addr();
        }
        log.push(line);
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let (site, metrics) = (site.unwrap(), metrics.unwrap());
        for (addr, bearer, status) in [
            (site, Some(TOKEN), 200),
            (site, Some("wrong-token-0123456789abcdef"), 401),
            (site, None, 401),
            (metrics, Some(TOKEN), 200),
            (metrics, Some("wrong-token-0123456789abcdef"), 401),
        ] {
            assert_eq!(get_at(addr, "/metrics", bearer).await.status(), status);
        }
    });
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    while let Ok(line) = logged.recv_timeout(Duration::from_millis(500)) {
        log.push(line);
    }
    let log = log.join("\n") + &String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("/metrics"), "requests were logged: {log}");
    assert!(!log.contains(TOKEN), "the token is in the logs");
    assert!(
        !log.contains("wrong-token"),
        "a presented token is in the logs"
    );
}
