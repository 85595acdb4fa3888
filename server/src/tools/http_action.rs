//! Custom HTTP actions (`http` tools): a request configured by the agent's owner
//! ([`HttpActionConfig`]), filled in with the model's arguments (placeholders
//! percent-encoded, the rest as query or JSON body) and sent through [`SafeClient::send`], so
//! the SSRF rule of [`crate::outbound`] holds on every hop. Secret header values never appear
//! in an error or in what the model reads, and are not sent on across origins.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use url::Url;

use super::{output, schema};
use crate::outbound::{NetError, SafeClient};

/// Longest action URL, in characters (placeholders included).
pub const MAX_URL_CHARS: usize = 2048;
/// Longest per-action timeout, in milliseconds (`timeoutMs`).
pub const MAX_TIMEOUT_MS: u64 = 120_000;
/// Most headers in `headers`, and again in `secretHeaders`.
pub const MAX_HEADERS: usize = 32;
/// Longest header value, in bytes.
pub const MAX_HEADER_VALUE_BYTES: usize = 8 * 1024;
/// Characters of an error answer's body quoted in the error.
pub const ERROR_BODY_CHARS: usize = 500;
/// The `Accept` header sent when the action sets none.
pub const DEFAULT_ACCEPT: &str = "application/json, text/plain;q=0.9, */*;q=0.5";

/// Header names the client writes itself: hop-by-hop (RFC 9110 § 7.6.1), `Host`, body framing.
const CLIENT_HEADERS: [&str; 9] = [
    "connection",
    "content-length",
    "host",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

const FIELDS: [&str; 5] = ["method", "url", "parameters", "headers", "timeoutMs"];

/// Secret values (or parts) shorter than this are not blotted out (they match ordinary text).
const MIN_REDACTED_CHARS: usize = 4;
/// A whitespace-separated part this long (the token of `Bearer <token>`) is blotted out too.
const MIN_REDACTED_PART_CHARS: usize = 8;

/// The HTTP method of an action; upper case on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    /// `GET`: arguments not in the URL go in the query.
    Get,
    /// `POST`: arguments not in the URL go in a JSON body (so do `PUT` and `PATCH`).
    Post,
    Put,
    Patch,
    /// `DELETE`: arguments not in the URL go in the query.
    Delete,
}

impl HttpMethod {
    /// The method's name as sent: `GET`, `POST`, `PUT`, `PATCH` or `DELETE`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
            Self::Delete => "DELETE",
        }
    }

    /// Whether the arguments not in the URL go in a JSON body (POST, PUT, PATCH), not the query.
    pub const fn has_body(self) -> bool {
        matches!(self, Self::Post | Self::Put | Self::Patch)
    }

    fn parse(name: &str) -> Option<Self> {
        [Self::Get, Self::Post, Self::Put, Self::Patch, Self::Delete]
            .into_iter()
            .find(|m| m.as_str() == name)
    }

    fn to_method(self) -> Method {
        match self {
            Self::Get => Method::GET,
            Self::Post => Method::POST,
            Self::Put => Method::PUT,
            Self::Patch => Method::PATCH,
            Self::Delete => Method::DELETE,
        }
    }
}

/// The `config` of an `http` tool, as stored and shown (the caller seals `secretHeaders`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpActionConfig {
    pub method: HttpMethod,
    /// An absolute `http(s)` URL ≤ [`MAX_URL_CHARS`]; path and query may hold `{name}`s.
    pub url: String,
    /// The JSON Schema of the arguments (see [`schema::check_parameters`]).
    pub parameters: Value,
    /// Headers sent with every call (not secret: the API shows them).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The call's limit in ms, 1 to [`MAX_TIMEOUT_MS`], never above the client's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl HttpActionConfig {
    /// Reads and validates an action's `config` (without `secretHeaders`). Errors: a sentence
    /// naming the field (`config.url must be an http or https URL`), or
    /// [`schema::check_parameters`]'s.
    pub fn parse(config: &Value) -> Result<Self, String> {
        let Some(object) = config.as_object() else {
            return Err("config must be a JSON object".to_owned());
        };
        if let Some(unknown) = object.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(format!(
                "config.{unknown} is not a field of an http action (its fields are {})",
                FIELDS.join(", ")
            ));
        }
        let method = match object.get("method") {
            None => return Err("config.method is required".to_owned()),
            Some(value) => value
                .as_str()
                .and_then(HttpMethod::parse)
                .ok_or("config.method must be one of GET, POST, PUT, PATCH, DELETE")?,
        };
        let url = match object.get("url") {
            None => return Err("config.url is required".to_owned()),
            Some(Value::String(url)) => url.clone(),
            Some(_) => return Err("config.url must be an http or https URL".to_owned()),
        };
        let Some(parameters) = object.get("parameters").cloned() else {
            return Err("config.parameters is required".to_owned());
        };
        schema::check_parameters(&parameters)?;
        let headers = match object.get("headers") {
            None | Some(Value::Null) => BTreeMap::new(),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(name, value)| match value {
                    Value::String(v) => Ok((name.clone(), v.clone())),
                    _ => Err(format!("config.headers.{name} must be a string")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err("config.headers must be an object of header names and values".into())
            }
        };
        check_headers(&headers, "config.headers")?;
        let timeout_ms = match object.get("timeoutMs") {
            None | Some(Value::Null) => None,
            Some(value) => Some(
                value
                    .as_u64()
                    .filter(|ms| (1..=MAX_TIMEOUT_MS).contains(ms))
                    .ok_or_else(|| {
                        format!("config.timeoutMs must be between 1 and {MAX_TIMEOUT_MS}")
                    })?,
            ),
        };
        let config = Self {
            method,
            url,
            parameters,
            headers,
            timeout_ms,
        };
        let template = UrlTemplate::parse(&config.url)?;
        let properties = config
            .parameters
            .get("properties")
            .and_then(Value::as_object);
        if let Some(name) = template
            .names()
            .find(|name| !properties.is_some_and(|p| p.contains_key(*name)))
        {
            return Err(format!(
                "config.url placeholder {{{name}}} is not a property of config.parameters"
            ));
        }
        Ok(config)
    }

    /// Calls the action with the model's checked `arguments`; returns what the model reads.
    /// Placeholders are percent-encoded; other arguments go in the query for GET/DELETE (arrays
    /// repeated, objects as JSON, nulls left out) or the JSON body. Secret headers win; time limit:
    /// the least of `timeout`, `timeoutMs` and the client's. A 2xx body is cut by [`output::cap`];
    /// secrets are blotted out. Errors: `HTTP <status> <reason>: <first 500 characters>`, the
    /// [`NetError`] sentence, or a missing or non-scalar placeholder argument.
    pub async fn run(
        &self,
        client: &SafeClient,
        secret_headers: &BTreeMap<String, String>,
        arguments: &Map<String, Value>,
        timeout: Duration,
    ) -> Result<String, String> {
        let secrets = Secrets::new(secret_headers);
        // Secrets are blotted out before anything is cut, so that a cut cannot leave part
        // of one behind.
        self.call(client, secret_headers, &secrets, arguments, timeout)
            .await
            .map(output::cap)
            .map_err(|text| secrets.redact(text))
    }

    async fn call(
        &self,
        client: &SafeClient,
        secret_headers: &BTreeMap<String, String>,
        secrets: &Secrets,
        arguments: &Map<String, Value>,
        timeout: Duration,
    ) -> Result<String, String> {
        let template = UrlTemplate::parse(&self.url)?;
        let (mut url, used) = template.fill(arguments)?;
        let rest = arguments.iter().filter(|(k, _)| !used.contains(k.as_str()));

        let mut headers = HeaderMap::new();
        for (name, value) in &self.headers {
            let (name, value) = header_pair(name, value, "config.headers")?;
            headers.insert(name, value);
        }
        for (name, value) in secret_headers {
            let (name, mut value) = header_pair(name, value, "config.secretHeaders")?;
            // Sensitive values are hidden from `Debug` output and are not sent on to
            // another origin by a redirect (`SafeClient::send`).
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        if !headers.contains_key(header::ACCEPT) {
            headers.insert(header::ACCEPT, HeaderValue::from_static(DEFAULT_ACCEPT));
        }

        let body = if self.method.has_body() {
            let object: Map<String, Value> = rest.map(|(k, v)| (k.clone(), v.clone())).collect();
            if !headers.contains_key(header::CONTENT_TYPE) {
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
            }
            let json = serde_json::to_vec(&Value::Object(object))
                .map_err(|e| format!("the arguments could not be encoded as JSON: {e}"))?;
            Some(Bytes::from(json))
        } else {
            let mut pairs = Vec::new();
            for (key, value) in rest {
                match value {
                    Value::Null => {}
                    Value::Array(items) => pairs.extend(
                        items
                            .iter()
                            .filter(|v| !v.is_null())
                            .map(|v| (key.as_str(), query_text(v))),
                    ),
                    other => pairs.push((key.as_str(), query_text(other))),
                }
            }
            if !pairs.is_empty() {
                url.query_pairs_mut().extend_pairs(pairs);
            }
            None
        };

        let limit = self
            .timeout_ms
            .map_or(timeout, |ms| timeout.min(Duration::from_millis(ms)))
            .min(client.limits().timeout);
        let sent = client.send(self.method.to_method(), &url, headers, body);
        let fetched = tokio::time::timeout(limit, sent)
            .await
            .map_err(|_| NetError::Timeout.to_string())?
            .map_err(|e| e.to_string())?;

        let status = StatusCode::from_u16(fetched.status).ok();
        let status_text = match status.and_then(|s| s.canonical_reason()) {
            Some(reason) => format!("HTTP {} {reason}", fetched.status),
            None => format!("HTTP {}", fetched.status),
        };
        let text = secrets.redact(String::from_utf8_lossy(&fetched.body).into_owned());
        if status.is_some_and(|s| s.is_success()) {
            if text.trim().is_empty() {
                return Ok(format!("{status_text} (no body)"));
            }
            Ok(text)
        } else {
            let quoted: String = text.trim().chars().take(ERROR_BODY_CHARS).collect();
            if quoted.is_empty() {
                Err(status_text)
            } else {
                Err(format!("{status_text}: {quoted}"))
            }
        }
    }
}

/// Checks `secretHeaders` as headers: valid names and values, none the client sets, no name
/// twice in any case, [`MAX_HEADERS`], [`MAX_HEADER_VALUE_BYTES`]. Errors: a sentence naming
/// `config.secretHeaders.NAME`, never quoting a value.
pub fn validate_secret_headers(map: &BTreeMap<String, String>) -> Result<(), String> {
    check_headers(map, "config.secretHeaders")
}

fn check_headers(map: &BTreeMap<String, String>, field: &str) -> Result<(), String> {
    if map.len() > MAX_HEADERS {
        return Err(format!("{field} has more than {MAX_HEADERS} headers"));
    }
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for (name, value) in map {
        let (parsed, _) = header_pair(name, value, field)?;
        if let Some(first) = seen.insert(parsed.as_str().to_owned(), name) {
            return Err(format!(
                "{field}.{name} repeats {field}.{first} (header names are case-insensitive)"
            ));
        }
    }
    Ok(())
}

fn header_pair(name: &str, value: &str, field: &str) -> Result<(HeaderName, HeaderValue), String> {
    let parsed = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("{field}.{name} is not a valid header name"))?;
    if CLIENT_HEADERS.contains(&parsed.as_str()) {
        return Err(format!(
            "{field}.{name} cannot be set: the HTTP client sets it"
        ));
    }
    let value = (value.len() <= MAX_HEADER_VALUE_BYTES)
        .then(|| HeaderValue::from_str(value).ok())
        .flatten()
        .ok_or_else(|| {
            format!(
                "{field}.{name} is not a valid header value (printable characters, spaces \
                 and tabs, at most {MAX_HEADER_VALUE_BYTES} bytes)"
            )
        })?;
    Ok((parsed, value))
}

fn query_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An action URL split around its `{name}` placeholders, in path and query only (not the host).
#[derive(Debug)]
struct UrlTemplate<'a> {
    origin: &'a str,
    path: &'a str,
    query: Option<&'a str>,
}

#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Text(&'a str),
    Name(&'a str),
}

impl<'a> UrlTemplate<'a> {
    /// Splits and checks `config.url`: length, `http(s)`, placeholders, no user info, valid filled.
    fn parse(url: &'a str) -> Result<Self, String> {
        if url.chars().count() > MAX_URL_CHARS {
            return Err(format!(
                "config.url is longer than {MAX_URL_CHARS} characters"
            ));
        }
        let rest = strip_prefix_ignore_case(url, "https://")
            .or_else(|| strip_prefix_ignore_case(url, "http://"))
            .ok_or("config.url must be an http or https URL")?;
        let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let origin_len = url.len() - rest.len() + authority_len;
        let (origin, tail) = url.split_at(origin_len);
        // The fragment is never sent; a placeholder there would be filled for nothing.
        let (tail, fragment) = tail.split_once('#').unwrap_or((tail, ""));
        let (path, query) = match tail.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (tail, None),
        };
        let misplaced = |part: &str| -> Result<(), String> {
            match pieces(part)?.into_iter().find_map(|p| match p {
                Piece::Name(name) => Some(name),
                Piece::Text(_) => None,
            }) {
                Some(name) => Err(format!(
                    "config.url placeholder {{{name}}} must be in the URL's path or query"
                )),
                None => Ok(()),
            }
        };
        misplaced(origin)?;
        misplaced(fragment)?;
        let template = Self {
            origin,
            path,
            query,
        };
        // Every name filled with a plain value must give a valid URL with a host and no
        // user info.
        let sample = template.render(&mut |_| Ok("x".into()))?;
        let parsed =
            Url::parse(&sample).map_err(|e| format!("config.url is not a valid URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("config.url must be an http or https URL".to_owned());
        }
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err("config.url must name a host".to_owned());
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err("config.url must not contain a user name or password".to_owned());
        }
        Ok(template)
    }

    fn names(&self) -> impl Iterator<Item = &'a str> {
        let path = pieces(self.path).unwrap_or_default();
        let query = pieces(self.query.unwrap_or_default()).unwrap_or_default();
        path.into_iter().chain(query).filter_map(|p| match p {
            Piece::Name(name) => Some(name),
            Piece::Text(_) => None,
        })
    }

    /// The URL with placeholders replaced by `value(name)`, percent-encoded. Errors: `value`'s, and
    /// a filled `.` or `..` path segment (RFC 3986 § 5.2.4).
    fn render(
        &self,
        value: &mut dyn FnMut(&str) -> Result<String, String>,
    ) -> Result<String, String> {
        let mut out = String::with_capacity(self.origin.len() + self.path.len() + 16);
        out.push_str(self.origin);
        for (i, segment) in self.path.split('/').enumerate() {
            if i > 0 {
                out.push('/');
            }
            let mut filled = String::new();
            let mut has_placeholder = false;
            for piece in pieces(segment)? {
                match piece {
                    Piece::Text(text) => filled.push_str(text),
                    Piece::Name(name) => {
                        has_placeholder = true;
                        encode_component(&value(name)?, &mut filled);
                    }
                }
            }
            if has_placeholder && is_dot_segment(&filled) {
                return Err(format!(
                    "the arguments make the URL path segment {filled:?}, which would change \
                     the URL's path"
                ));
            }
            out.push_str(&filled);
        }
        if let Some(query) = self.query {
            out.push('?');
            for piece in pieces(query)? {
                match piece {
                    Piece::Text(text) => out.push_str(text),
                    Piece::Name(name) => encode_component(&value(name)?, &mut out),
                }
            }
        }
        Ok(out)
    }

    fn fill(&self, arguments: &Map<String, Value>) -> Result<(Url, BTreeSet<&'a str>), String> {
        let mut used = BTreeSet::new();
        let text = self.render(&mut |name| {
            let text = match arguments.get(name) {
                None | Some(Value::Null) => {
                    return Err(format!(
                        "the argument {name} is missing; it fills {{{name}}} in the URL"
                    ))
                }
                Some(Value::String(s)) => s.clone(),
                Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
                Some(_) => {
                    return Err(format!(
                        "the argument {name} must be a string, number or boolean: it fills \
                         {{{name}}} in the URL"
                    ))
                }
            };
            Ok(text)
        })?;
        used.extend(self.names());
        let url = Url::parse(&text).map_err(|e| format!("the URL is not valid: {e}"))?;
        Ok((url, used))
    }
}

/// Splits a template part into text and `{name}` placeholders (1–64 of `[A-Za-z0-9_.-]`).
fn pieces(part: &str) -> Result<Vec<Piece<'_>>, String> {
    let malformed = || {
        "config.url has a { or } that is not part of a placeholder such as {city} \
         (names: letters, digits, _, - and .)"
            .to_owned()
    };
    let mut out = Vec::new();
    let mut rest = part;
    while let Some(open) = rest.find(['{', '}']) {
        if rest.as_bytes()[open] == b'}' {
            return Err(malformed());
        }
        let after = &rest[open + 1..];
        let close = after.find('}').ok_or_else(malformed)?;
        let name = &after[..close];
        let valid = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if !valid {
            return Err(malformed());
        }
        if open > 0 {
            out.push(Piece::Text(&rest[..open]));
        }
        out.push(Piece::Name(name));
        rest = &after[close + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

/// Appends `value` percent-encoded but for RFC 3986 § 2.3 unreserved characters.
fn encode_component(value: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
    }
}

/// Whether a path segment is `.` or `..`, with `.` or `%2E` dots (WHATWG URL dot segments).
fn is_dot_segment(segment: &str) -> bool {
    let lower = segment.to_ascii_lowercase().replace("%2e", ".");
    lower == "." || lower == ".."
}

fn strip_prefix_ignore_case<'s>(s: &'s str, prefix: &str) -> Option<&'s str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

struct Secrets(Vec<String>);

impl Secrets {
    /// Values and their long parts to blot out, longest first (whole values before parts).
    fn new(secret_headers: &BTreeMap<String, String>) -> Self {
        let mut values: Vec<String> = Vec::new();
        for value in secret_headers.values() {
            let value = value.trim();
            if value.chars().count() >= MIN_REDACTED_CHARS {
                values.push(value.to_owned());
            }
            values.extend(
                value
                    .split_whitespace()
                    .filter(|part| part.chars().count() >= MIN_REDACTED_PART_CHARS)
                    .map(str::to_owned),
            );
        }
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Self(values)
    }

    fn redact(&self, mut text: String) -> String {
        for value in &self.0 {
            if text.contains(value.as_str()) {
                text = text.replace(value.as_str(), "[secret]");
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use axum::{
        body::Bytes as AxumBytes,
        extract::Request,
        http::{HeaderMap as AxumHeaders, StatusCode as AxumStatus},
        response::Redirect,
        routing::{any, get},
        Json, Router,
    };
    use serde_json::json;

    use super::*;
    use crate::outbound::{FetchLimits, NetPolicy};

    async fn echo(request: Request) -> Json<Value> {
        let (parts, body) = request.into_parts();
        let body = axum::body::to_bytes(body, 1 << 20)
            .await
            .unwrap_or_default();
        let headers: Map<String, Value> = parts
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    Value::String(v.to_str().unwrap_or_default().to_owned()),
                )
            })
            .collect();
        Json(json!({
            "method": parts.method.as_str(),
            "path": parts.uri.path(),
            "query": parts.uri.query(),
            "headers": headers,
            "body": String::from_utf8_lossy(&body),
        }))
    }

    async fn serve() -> SocketAddr {
        let app = Router::new()
            .route(
                "/missing",
                get(|| async { (AxumStatus::NOT_FOUND, "no such city") }),
            )
            .route(
                "/unauthorized",
                get(|headers: AxumHeaders| async move {
                    let key = headers
                        .get("x-api-key")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    (AxumStatus::UNAUTHORIZED, format!("bad key {key}"))
                }),
            )
            .route(
                "/late-key",
                get(|headers: AxumHeaders| async move {
                    let key = headers
                        .get("x-api-key")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    // The key straddles the point where the output is cut.
                    let pad = "y".repeat(output::MAX_OUTPUT_BYTES - 40);
                    format!("{pad}{key}{}", "z".repeat(100))
                }),
            )
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    "late"
                }),
            )
            .route("/big", get(|| async { "y".repeat(40_000) }))
            .route("/empty", get(|| async { AxumStatus::NO_CONTENT }))
            .route(
                "/to-private",
                get(|| async { Redirect::temporary("http://10.0.0.1/") }),
            )
            .route(
                "/to-metadata",
                get(|| async { Redirect::temporary("http://169.254.169.254/latest/meta-data/") }),
            )
            .route("/see-other", any(|| async { Redirect::to("/echo/after") }))
            .route(
                "/bytes",
                get(|| async {
                    (
                        [("content-type", "text/plain")],
                        AxumBytes::from_static(b"ok \xff"),
                    )
                }),
            )
            .fallback(echo);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        addr
    }

    fn client_for(addr: SocketAddr) -> SafeClient {
        let policy = NetPolicy::from_list(&[addr.to_string()]).expect("policy");
        SafeClient::new(policy, FetchLimits::default()).expect("client")
    }

    fn action(method: &str, url: &str, parameters: Value) -> HttpActionConfig {
        HttpActionConfig::parse(&json!({
            "method": method,
            "url": url,
            "parameters": parameters,
        }))
        .expect("valid config")
    }

    fn params(names: &[&str]) -> Value {
        let properties: Map<String, Value> =
            names.iter().map(|n| ((*n).to_owned(), json!({}))).collect();
        json!({"type": "object", "properties": properties})
    }

    fn args(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    const SECOND: Duration = Duration::from_secs(10);

    async fn run_echo(action: &HttpActionConfig, client: &SafeClient, arguments: Value) -> Value {
        let text = action
            .run(client, &BTreeMap::new(), &args(arguments), SECOND)
            .await
            .expect("2xx");
        serde_json::from_str(&text).expect("echo JSON")
    }

    #[tokio::test]
    async fn placeholders_are_filled_and_encoded() {
        let addr = serve().await;
        let client = client_for(addr);
        let action = action(
            "GET",
            &format!("http://{addr}/echo/{{city}}/days/{{n}}?q={{city}}&fixed=1"),
            params(&["city", "n"]),
        );
        let got = run_echo(&action, &client, json!({"city": "a/b?c", "n": 3})).await;
        assert_eq!(got["path"], "/echo/a%2Fb%3Fc/days/3");
        assert_eq!(got["query"], "q=a%2Fb%3Fc&fixed=1");

        let got = run_echo(
            &action,
            &client,
            json!({"city": "São Paulo&x=1#f", "n": true}),
        )
        .await;
        assert_eq!(got["path"], "/echo/S%C3%A3o%20Paulo%26x%3D1%23f/days/true");
        assert_eq!(got["query"], "q=S%C3%A3o%20Paulo%26x%3D1%23f&fixed=1");

        let missing = action
            .run(
                &client,
                &BTreeMap::new(),
                &args(json!({"city": "x"})),
                SECOND,
            )
            .await;
        assert_eq!(
            missing,
            Err("the argument n is missing; it fills {n} in the URL".to_owned())
        );
        let object = action
            .run(
                &client,
                &BTreeMap::new(),
                &args(json!({"city": {"a": 1}, "n": 1})),
                SECOND,
            )
            .await
            .expect_err("object in the path");
        assert!(
            object.starts_with("the argument city must be a string"),
            "{object}"
        );
        for dots in ["..", "."] {
            let err = action
                .run(
                    &client,
                    &BTreeMap::new(),
                    &args(json!({"city": dots, "n": 1})),
                    SECOND,
                )
                .await
                .expect_err("dot segment");
            assert!(
                err.starts_with("the arguments make the URL path segment"),
                "{err}"
            );
        }
    }

    #[tokio::test]
    async fn get_sends_the_other_arguments_in_the_query() {
        let addr = serve().await;
        let client = client_for(addr);
        let action = action(
            "GET",
            &format!("http://{addr}/echo/{{id}}"),
            params(&["id", "tag", "limit", "filter", "none"]),
        );
        let got = run_echo(
            &action,
            &client,
            json!({
                "id": 7,
                "tag": ["a b", "c&d"],
                "limit": 5,
                "filter": {"x": 1},
                "none": null
            }),
        )
        .await;
        assert_eq!(got["method"], "GET");
        assert_eq!(got["path"], "/echo/7");
        // Pairs follow the arguments' order, which the JSON map may or may not keep.
        let mut pairs: Vec<&str> = got["query"]
            .as_str()
            .unwrap_or_default()
            .split('&')
            .collect();
        pairs.sort_unstable();
        assert_eq!(
            pairs,
            [
                "filter=%7B%22x%22%3A1%7D",
                "limit=5",
                "tag=a+b",
                "tag=c%26d"
            ]
        );
        assert_eq!(got["body"], "");
        assert_eq!(got["headers"]["accept"], DEFAULT_ACCEPT);
        assert!(got["headers"].get("content-type").is_none());
    }

    #[tokio::test]
    async fn post_sends_the_other_arguments_as_json() {
        let addr = serve().await;
        let client = client_for(addr);
        let action = action(
            "POST",
            &format!("http://{addr}/echo/{{id}}"),
            params(&["id", "tag", "nested"]),
        );
        let got = run_echo(
            &action,
            &client,
            json!({"id": "x", "tag": ["a"], "nested": {"k": null}}),
        )
        .await;
        assert_eq!(got["method"], "POST");
        assert_eq!(got["path"], "/echo/x");
        assert_eq!(got["query"], Value::Null);
        assert_eq!(got["headers"]["content-type"], "application/json");
        let body: Value =
            serde_json::from_str(got["body"].as_str().unwrap_or_default()).expect("JSON body");
        assert_eq!(body, json!({"tag": ["a"], "nested": {"k": null}}));
    }

    #[tokio::test]
    async fn secret_headers_are_sent_and_never_shown() {
        let addr = serve().await;
        let client = client_for(addr);
        let mut config = action("GET", &format!("http://{addr}/echo"), params(&[]));
        config
            .headers
            .insert("X-Api-Key".into(), "public-placeholder".into());
        config.headers.insert("X-Plain".into(), "plain".into());
        let secrets = BTreeMap::from([("x-api-key".to_owned(), "s3cr3t-value-123".to_owned())]);

        // The secret wins over the header of the same name, and arrives.
        let text = config
            .run(&client, &secrets, &Map::new(), SECOND)
            .await
            .expect("2xx");
        assert!(!text.contains("s3cr3t-value-123"), "{text}");
        assert!(text.contains(r#""x-api-key":"[secret]""#), "{text}");
        assert!(text.contains(r#""x-plain":"plain""#), "{text}");
        assert!(!text.contains("public-placeholder"), "{text}");

        // An error answer that quotes the key does not show it.
        let config = action("GET", &format!("http://{addr}/unauthorized"), params(&[]));
        let err = config
            .run(&client, &secrets, &Map::new(), SECOND)
            .await
            .expect_err("401");
        assert_eq!(err, "HTTP 401 Unauthorized: bad key [secret]");

        // Nor does a cut answer leave part of the key behind.
        let config = action("GET", &format!("http://{addr}/late-key"), params(&[]));
        let text = config
            .run(&client, &secrets, &Map::new(), SECOND)
            .await
            .expect("2xx");
        assert!(text.contains(" more bytes]"), "the answer was cut");
        assert!(!text.contains("s3cr3t"), "{}", &text[text.len() - 80..]);
    }

    #[tokio::test]
    async fn non_2xx_answers_are_errors() {
        let addr = serve().await;
        let client = client_for(addr);
        let action = action("GET", &format!("http://{addr}/missing"), params(&[]));
        assert_eq!(
            action
                .run(&client, &BTreeMap::new(), &Map::new(), SECOND)
                .await,
            Err("HTTP 404 Not Found: no such city".to_owned())
        );
    }

    #[tokio::test]
    async fn answers_are_capped_and_read_as_text() {
        let addr = serve().await;
        let client = client_for(addr);
        let big = action("GET", &format!("http://{addr}/big"), params(&[]));
        let text = big
            .run(&client, &BTreeMap::new(), &Map::new(), SECOND)
            .await
            .expect("2xx");
        assert_eq!(text, output::cap("y".repeat(40_000)));
        assert_eq!(text.len(), output::MAX_OUTPUT_BYTES);
        let bytes = action("GET", &format!("http://{addr}/bytes"), params(&[]));
        assert_eq!(
            bytes
                .run(&client, &BTreeMap::new(), &Map::new(), SECOND)
                .await,
            Ok("ok \u{fffd}".to_owned())
        );
        let empty = action("GET", &format!("http://{addr}/empty"), params(&[]));
        assert_eq!(
            empty
                .run(&client, &BTreeMap::new(), &Map::new(), SECOND)
                .await,
            Ok("HTTP 204 No Content (no body)".to_owned())
        );
    }

    #[tokio::test]
    async fn calls_time_out() {
        let addr = serve().await;
        let client = client_for(addr);
        let slow = action("GET", &format!("http://{addr}/slow"), params(&[]));
        let started = std::time::Instant::now();
        let err = slow
            .run(
                &client,
                &BTreeMap::new(),
                &Map::new(),
                Duration::from_millis(300),
            )
            .await
            .expect_err("timeout");
        assert_eq!(err, NetError::Timeout.to_string());
        assert!(started.elapsed() < Duration::from_secs(3));

        // The action's own timeoutMs narrows a longer call timeout.
        let mut slow = slow;
        slow.timeout_ms = Some(300);
        let started = std::time::Instant::now();
        let err = slow
            .run(&client, &BTreeMap::new(), &Map::new(), SECOND)
            .await
            .expect_err("timeout");
        assert_eq!(err, NetError::Timeout.to_string());
        assert!(started.elapsed() < Duration::from_secs(3));

        // So does the client's own limit.
        let policy = NetPolicy::from_list(&[addr.to_string()]).expect("policy");
        let limits = FetchLimits {
            timeout: Duration::from_millis(300),
            ..FetchLimits::default()
        };
        let quick = SafeClient::new(policy, limits).expect("client");
        slow.timeout_ms = None;
        let started = std::time::Instant::now();
        let err = slow
            .run(&quick, &BTreeMap::new(), &Map::new(), SECOND)
            .await
            .expect_err("timeout");
        assert_eq!(err, NetError::Timeout.to_string());
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[tokio::test]
    async fn the_outbound_policy_applies() {
        let addr = serve().await;
        let client = client_for(addr);
        for path in ["to-private", "to-metadata"] {
            let hop = action("GET", &format!("http://{addr}/{path}"), params(&[]));
            let err = hop
                .run(&client, &BTreeMap::new(), &Map::new(), SECOND)
                .await
                .expect_err("redirect to a private address");
            assert!(err.starts_with("the URL is not allowed: "), "{path}: {err}");
        }
        let strict = SafeClient::new(NetPolicy::strict(), FetchLimits::default()).expect("client");
        let local = action("GET", &format!("http://{addr}/echo"), params(&[]));
        let err = local
            .run(&strict, &BTreeMap::new(), &Map::new(), SECOND)
            .await
            .expect_err("loopback refused");
        assert_eq!(
            err,
            "the URL is not allowed: 127.0.0.1 is a private or reserved network address"
        );
    }

    #[tokio::test]
    async fn see_other_turns_post_into_get() {
        let addr = serve().await;
        let client = client_for(addr);
        let action = action("POST", &format!("http://{addr}/see-other"), params(&["a"]));
        let got = run_echo(&action, &client, json!({"a": 1})).await;
        assert_eq!(got["method"], "GET");
        assert_eq!(got["path"], "/echo/after");
        assert_eq!(got["body"], "");
        assert!(got["headers"].get("content-type").is_none());
    }

    fn parse_err(config: Value) -> String {
        HttpActionConfig::parse(&config).expect_err("invalid config")
    }

    #[test]
    fn config_is_read_and_written_in_camel_case() {
        let config = HttpActionConfig::parse(&json!({
            "method": "PATCH",
            "url": "https://api.example/v1/items/{id}?lang={lang}",
            "parameters": params(&["id", "lang"]),
            "headers": {"X-Client": "agentchat"},
            "timeoutMs": 5000
        }))
        .expect("valid");
        assert_eq!(config.method, HttpMethod::Patch);
        assert_eq!(config.timeout_ms, Some(5000));
        let written = serde_json::to_value(&config).expect("serializes");
        assert_eq!(written["method"], "PATCH");
        assert_eq!(written["timeoutMs"], 5000);
        let read: HttpActionConfig = serde_json::from_value(written).expect("deserializes");
        assert_eq!(read, config);
        let without_timeout = action("GET", "https://api.example/", params(&[]));
        let written = serde_json::to_value(&without_timeout).expect("serializes");
        assert!(written.get("timeoutMs").is_none());
    }

    #[test]
    fn config_errors_name_the_field() {
        let base = |patch: Value| {
            let mut config = json!({
                "method": "GET",
                "url": "https://api.example/weather/{city}",
                "parameters": params(&["city"]),
            });
            if let (Some(config), Value::Object(patch)) = (config.as_object_mut(), patch) {
                for (k, v) in patch {
                    if v.is_null() {
                        config.remove(&k);
                    } else {
                        config.insert(k, v);
                    }
                }
            }
            config
        };
        assert!(HttpActionConfig::parse(&base(json!({}))).is_ok());
        for method in ["get", "HEAD", "OPTIONS"] {
            assert_eq!(
                parse_err(base(json!({"method": method}))),
                "config.method must be one of GET, POST, PUT, PATCH, DELETE"
            );
        }
        for url in [
            "ftp://x.example/",
            "file:///etc/passwd",
            "/relative",
            "http:x.example",
        ] {
            assert_eq!(
                parse_err(base(json!({"url": url}))),
                "config.url must be an http or https URL",
                "{url}"
            );
        }
        assert_eq!(
            parse_err(base(json!({"url": "https://api.example/w/{town}"}))),
            "config.url placeholder {town} is not a property of config.parameters"
        );
        assert_eq!(
            parse_err(base(json!({"url": "https://{city}.example/"}))),
            "config.url placeholder {city} must be in the URL's path or query"
        );
        assert_eq!(
            parse_err(base(json!({"url": "https://user:pw@api.example/{city}"}))),
            "config.url must not contain a user name or password"
        );
        assert!(parse_err(base(json!({"url": "https://api.example/{city"})))
            .starts_with("config.url has a { or }"));
        assert_eq!(
            parse_err(base(
                json!({"url": format!("https://api.example/{}", "a".repeat(2048))})
            )),
            "config.url is longer than 2048 characters"
        );
        assert_eq!(
            parse_err(base(json!({"headers": {"X Foo": "1"}}))),
            "config.headers.X Foo is not a valid header name"
        );
        assert!(parse_err(base(json!({"headers": {"X-Foo": "a\r\nb"}})))
            .starts_with("config.headers.X-Foo is not a valid header value"));
        for name in ["Host", "content-length", "Transfer-Encoding", "Connection"] {
            assert_eq!(
                parse_err(base(json!({"headers": {name: "x"}}))),
                format!("config.headers.{name} cannot be set: the HTTP client sets it")
            );
        }
        assert_eq!(
            parse_err(base(json!({"headers": {"X-A": "1", "x-a": "2"}}))),
            "config.headers.x-a repeats config.headers.X-A (header names are case-insensitive)"
        );
        for timeout in [json!(0), json!(120_001), json!("5"), json!(-1), json!(1.5)] {
            assert_eq!(
                parse_err(base(json!({"timeoutMs": timeout}))),
                "config.timeoutMs must be between 1 and 120000"
            );
        }
        assert!(parse_err(base(json!({"parameters": {"type": "string"}})))
            .starts_with("config.parameters must have"));
        assert_eq!(
            parse_err(base(json!({"secretHeaders": {"a": "b"}}))),
            "config.secretHeaders is not a field of an http action (its fields are method, \
             url, parameters, headers, timeoutMs)"
        );
        assert_eq!(
            parse_err(base(json!({"url": null}))),
            "config.url is required"
        );
    }

    #[test]
    fn secret_headers_follow_the_header_rules_without_quoting_values() {
        assert_eq!(
            validate_secret_headers(&BTreeMap::from([(
                "Authorization".to_owned(),
                "Bearer abc".to_owned()
            )])),
            Ok(())
        );
        let err = validate_secret_headers(&BTreeMap::from([(
            "X-Key".to_owned(),
            "top\nsecret".to_owned(),
        )]))
        .expect_err("newline");
        assert!(err.starts_with("config.secretHeaders.X-Key is not a valid header value"));
        assert!(!err.contains("secret\n") && !err.contains("top"), "{err}");
        assert_eq!(
            validate_secret_headers(&BTreeMap::from([("host".to_owned(), "x".to_owned())])),
            Err("config.secretHeaders.host cannot be set: the HTTP client sets it".to_owned())
        );
    }
}
