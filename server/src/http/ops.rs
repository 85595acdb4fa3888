//! Operations: health, readiness, the OpenAPI 3.1 document (`GET /api/openapi.json`) and
//! a self-contained reference page rendered from it (`GET /api/docs`).

use std::{fmt::Write, sync::Arc};

use app::api::{ErrorBody, HealthResponse, ReadyResponse};
use axum::{
    extract::State,
    http::{header, HeaderValue, StatusCode},
    response::{Html, IntoResponse},
    Extension, Json,
};
use serde_json::Value;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{error::ApiError, openapi::RateLimited};
use crate::services::AppState;

/// The generated OpenAPI document, shared with the handlers that serve it.
#[derive(Clone)]
pub struct OpenApiDocument(pub Arc<utoipa::openapi::OpenApi>);

/// The operations routes.
pub fn router() -> OpenApiRouter<AppState> {
    health_router()
        .routes(routes!(openapi_json))
        .routes(routes!(docs))
        .merge(super::metrics::router())
}

/// The health checks alone, liveness and readiness: all that a worker instance serves
/// ([`crate::startup::health_service`]).
pub fn health_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(ready))
}

/// Liveness and version; 503 when the database does not answer. Not rate limited.
#[utoipa::path(get, path = "/api/health", tag = "operations",
    responses((status = 200, body = HealthResponse), (status = 503, body = HealthResponse)))]
async fn health(State(state): State<AppState>) -> (StatusCode, Json<HealthResponse>) {
    let version = env!("CARGO_PKG_VERSION").to_string();
    match state.database.ping().await {
        Ok(()) => (
            StatusCode::OK,
            Json(HealthResponse {
                status: "ok".into(),
                version,
            }),
        ),
        Err(err) => {
            tracing::error!(error = %err, "health check: database unavailable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(HealthResponse {
                    status: "unavailable".into(),
                    version,
                }),
            )
        }
    }
}

/// Readiness, for load balancers: 200 while every dependency of this instance answers
/// (the database, and Redis when `REDIS_URL` is set), each asked at once within
/// [`crate::readiness::READY_TIMEOUT`]; 503 with the error body naming what does not
/// answer otherwise. Neither identified nor rate limited (docs/api.md § Operations).
#[utoipa::path(get, path = "/api/health/ready", tag = "operations",
    responses((status = 200, body = ReadyResponse),
        (status = 503, description = "The instance is shutting down (\"Not ready: shutting down\"), or a dependency does not answer: the message names it, e.g. \"Not ready: the database does not answer\"", body = ErrorBody)))]
async fn ready(State(state): State<AppState>) -> Result<Json<ReadyResponse>, ApiError> {
    // From the shutdown signal on, load balancers send new requests elsewhere.
    if state.chat.replies().is_draining() {
        return Err(ApiError::Status {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "Not ready: shutting down".into(),
        });
    }
    let report = state.readiness.check().await;
    if !report.ready() {
        return Err(not_ready(&report.down()));
    }
    let redis = if report.is_up("redis") {
        "ok"
    } else {
        "not configured"
    };
    Ok(Json(ReadyResponse {
        status: "ready".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        database: "ok".into(),
        redis: redis.into(),
    }))
}

/// The 503 of [`ready`]: "Not ready: the database does not answer", "Not ready: Redis
/// does not answer", "Not ready: the database and Redis do not answer".
fn not_ready(down: &[&str]) -> ApiError {
    let names: Vec<&str> = down
        .iter()
        .map(|name| match *name {
            "database" => "the database",
            "redis" => "Redis",
            other => other,
        })
        .collect();
    let verb = if names.len() > 1 { "do" } else { "does" };
    ApiError::Status {
        status: StatusCode::SERVICE_UNAVAILABLE,
        message: format!("Not ready: {} {verb} not answer", names.join(" and ")),
    }
}

/// This API's OpenAPI 3.1 document.
#[utoipa::path(get, path = "/api/openapi.json", tag = "operations",
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json"), RateLimited))]
async fn openapi_json(
    Extension(doc): Extension<OpenApiDocument>,
) -> Json<utoipa::openapi::OpenApi> {
    Json((*doc.0).clone())
}

/// A browsable HTML reference of this API, generated from the OpenAPI document.
#[utoipa::path(get, path = "/api/docs", tag = "operations",
    responses((status = 200, description = "HTML reference", content_type = "text/html"), RateLimited))]
async fn docs(Extension(doc): Extension<OpenApiDocument>) -> impl IntoResponse {
    (
        [(header::CONTENT_SECURITY_POLICY, docs_policy())],
        Html(render_reference(
            &serde_json::to_value(&*doc.0).unwrap_or_default(),
        )),
    )
}

/// The reference page's one stylesheet, inline so that the page is self-contained.
const DOCS_STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;line-height:1.5}\
    code{background:#8882;padding:0 .25rem;border-radius:.25rem}\
    .op{border:1px solid #8884;border-radius:.5rem;padding:.5rem 1rem;margin:.75rem 0}\
    .m{font-weight:700;text-transform:uppercase;margin-right:.5rem}table{border-collapse:collapse}\
    td,th{border:1px solid #8884;padding:.2rem .5rem;text-align:left}\
    @media (prefers-color-scheme:dark){body{background:#111;color:#eee}}";

/// The reference page's CSP: only its inline stylesheet, by SHA-256 hash (`DOCS_STYLE`);
/// no framing.
pub fn docs_policy() -> HeaderValue {
    static POLICY: std::sync::LazyLock<HeaderValue> = std::sync::LazyLock::new(|| {
        use base64::Engine as _;
        use sha2::Digest as _;
        let hash =
            base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(DOCS_STYLE));
        HeaderValue::try_from(format!(
            "default-src 'none'; style-src 'sha256-{hash}'; base-uri 'none'; \
             form-action 'none'; frame-ancestors 'none'"
        ))
        .unwrap_or(super::security::DEFAULT_CSP)
    });
    POLICY.clone()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn schema_name(v: &Value) -> String {
    if let Some(r) = v.get("$ref").and_then(Value::as_str) {
        return r.rsplit('/').next().unwrap_or(r).to_string();
    }
    if v.get("type").and_then(Value::as_str) == Some("array") {
        return format!("{}[]", schema_name(v.get("items").unwrap_or(&Value::Null)));
    }
    v.get("type")
        .map(|t| t.to_string().replace('"', ""))
        .unwrap_or_else(|| "object".into())
}

fn body_schema(content: Option<&Value>) -> Option<String> {
    let content = content?.as_object()?;
    let (_, media) = content.iter().next()?;
    media.get("schema").map(schema_name)
}

/// Renders the reference page: one section per operation, then every schema.
fn render_reference(doc: &Value) -> String {
    let mut out = String::new();
    let title = doc
        .pointer("/info/title")
        .and_then(Value::as_str)
        .unwrap_or("API");
    let version = doc
        .pointer("/info/version")
        .and_then(Value::as_str)
        .unwrap_or("");
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
         content=\"width=device-width, initial-scale=1\"><title>{t} reference</title>\
         <style>{DOCS_STYLE}</style></head><body><h1>{t} <small>{v}</small></h1><p>{d}</p><p>Machine-readable: <a href=\"/api/openapi.json\">/api/openapi.json</a></p>",
        t = esc(title),
        v = esc(version),
        d = esc(doc.pointer("/info/description").and_then(Value::as_str).unwrap_or("")),
    );
    out.push_str("<h2>Endpoints</h2>");
    for (path, item) in doc
        .get("paths")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        for method in ["get", "post", "put", "patch", "delete"] {
            let Some(op) = item.get(method) else { continue };
            let _ = write!(
                out,
                "<div class=\"op\"><p><span class=\"m\">{method}</span><code>{}</code></p>",
                esc(path)
            );
            if let Some(s) = op
                .get("summary")
                .or_else(|| op.get("description"))
                .and_then(Value::as_str)
            {
                let _ = write!(out, "<p>{}</p>", esc(s));
            }
            if op.get("security").is_some() {
                out.push_str("<p>Requires <code>Authorization: Bearer &lt;accessToken | apiKey&gt;</code>.</p>");
            }
            if let Some(params) = op.get("parameters").and_then(Value::as_array) {
                out.push_str("<table><tr><th>parameter</th><th>in</th><th>type</th></tr>");
                for p in params {
                    let _ = write!(
                        out,
                        "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                        esc(p.get("name").and_then(Value::as_str).unwrap_or("")),
                        esc(p.get("in").and_then(Value::as_str).unwrap_or("")),
                        esc(&p.get("schema").map(schema_name).unwrap_or_default())
                    );
                }
                out.push_str("</table>");
            }
            if let Some(s) = body_schema(op.pointer("/requestBody/content")) {
                let _ = write!(
                    out,
                    "<p>Body: <a href=\"#schema-{0}\"><code>{0}</code></a></p>",
                    esc(&s)
                );
            }
            out.push_str("<p>Responses:</p><ul>");
            for (status, response) in op
                .get("responses")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let schema = body_schema(response.get("content"))
                    .map(|s| format!(" <a href=\"#schema-{0}\"><code>{0}</code></a>", esc(&s)))
                    .unwrap_or_default();
                let _ = write!(
                    out,
                    "<li><code>{}</code> {}{}</li>",
                    esc(status),
                    esc(response
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or("")),
                    schema
                );
            }
            out.push_str("</ul></div>");
        }
    }
    out.push_str("<h2>Schemas</h2>");
    for (name, schema) in doc
        .pointer("/components/schemas")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let _ = write!(out, "<h3 id=\"schema-{0}\">{0}</h3>", esc(name));
        if let Some(d) = schema.get("description").and_then(Value::as_str) {
            let _ = write!(out, "<p>{}</p>", esc(d));
        }
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            out.push_str(
                "<table><tr><th>field</th><th>type</th><th>required</th><th>notes</th></tr>",
            );
            for (field, p) in props {
                let _ = write!(
                    out,
                    "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(field),
                    esc(&schema_name(p)),
                    if required.contains(&field.as_str()) {
                        "yes"
                    } else {
                        "no"
                    },
                    esc(p.get("description").and_then(Value::as_str).unwrap_or(""))
                );
            }
            out.push_str("</table>");
        }
    }
    out.push_str("</body></html>");
    out
}
