//! [`SafeClient`], the SSRF-safe client of crawls, webhook deliveries and HTTP tools; the rule
//! is stated on [`crate::outbound`].

use std::{
    collections::HashSet,
    convert::Infallible,
    error::Error as StdError,
    net::{IpAddr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use bytes::{Bytes, BytesMut};
use reqwest::{
    dns::{Addrs, Name, Resolve, Resolving},
    header, Method, StatusCode,
};
use url::Url;

use super::{
    client_builder,
    policy::{check_static, host_key, resolve_checked},
    HopError, NetError, NetPolicy, Purpose, ResolveRefusal,
};

/// The longest a TCP (and TLS) connection may take to open, whatever the page time cap.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// [`SafeClient`]'s DNS resolver: refuses a name if any address is forbidden
/// ([`is_forbidden_ip`](super::is_forbidden_ip)), against rebinding; exceptions resolve unjudged.
#[derive(Debug, Clone, Default)]
pub struct GuardedResolver {
    listed_names: Arc<HashSet<String>>,
}

impl GuardedResolver {
    pub fn new(policy: &NetPolicy) -> Self {
        Self {
            listed_names: Arc::new(policy.listed_names()),
        }
    }

    /// The addresses a connection to `host` may use. Errors: [`ResolveRefusal`].
    pub async fn resolve_host(&self, host: &str) -> Result<Vec<IpAddr>, ResolveRefusal> {
        let permit = self
            .listed_names
            .contains(host_key(&host.to_ascii_lowercase()));
        resolve_checked(host, permit).await
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = self.clone();
        Box::pin(async move {
            let ips = this.resolve_host(name.as_str()).await?;
            let addrs: Addrs = Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// Per-page limits of [`SafeClient::get`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    /// Largest body read, in bytes; a longer body fails with [`NetError::TooLarge`]. 5 MiB.
    pub max_body_bytes: usize,
    /// Time for a whole page — every redirect hop, DNS, connection and body. 20 s.
    pub timeout: Duration,
    /// Redirects followed before [`NetError::TooManyRedirects`]. 5.
    pub max_redirects: u8,
}

impl Default for FetchLimits {
    fn default() -> Self {
        Self {
            max_body_bytes: 5 * 1024 * 1024,
            timeout: Duration::from_secs(20),
            max_redirects: 5,
        }
    }
}

/// A fetched response.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub url: Url,
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Bytes,
    /// The `ETag` header, verbatim.
    pub etag: Option<String>,
    /// The `Last-Modified` header, verbatim.
    pub last_modified: Option<String>,
}

/// What a page answered last time, sent back so that an unchanged page answers 304 Not
/// Modified (RFC 9110 § 13.1): `If-None-Match` from the `ETag`, `If-Modified-Since` from
/// the `Last-Modified`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

impl Validators {
    /// Neither validator is known (a plain request).
    pub fn is_empty(&self) -> bool {
        self.etag.is_none() && self.last_modified.is_none()
    }
}

/// The SSRF-safe HTTP client ([`client_builder`], [`GuardedResolver`], no proxy). Cheap to clone.
#[derive(Debug, Clone)]
pub struct SafeClient {
    client: reqwest::Client,
    policy: Arc<NetPolicy>,
    limits: FetchLimits,
}

impl SafeClient {
    /// The crawler's client ([`Purpose::Crawl`]). Errors: [`NetError::Setup`] (TLS back end).
    pub fn new(policy: NetPolicy, limits: FetchLimits) -> Result<Self, NetError> {
        Self::for_purpose(policy, limits, Purpose::Crawl)
    }

    /// [`SafeClient::new`] for another [`Purpose`] (its `User-Agent`). Errors: [`NetError::Setup`].
    pub fn for_purpose(
        policy: NetPolicy,
        limits: FetchLimits,
        purpose: Purpose,
    ) -> Result<Self, NetError> {
        let client = client_builder(purpose)
            .dns_resolver(Arc::new(GuardedResolver::new(&policy)))
            .no_proxy()
            .connect_timeout(limits.timeout.min(MAX_CONNECT_TIMEOUT))
            .read_timeout(limits.timeout)
            .referer(false)
            .build()
            .map_err(|e| NetError::Setup(e.to_string()))?;
        Ok(Self {
            client,
            policy: Arc::new(policy),
            limits,
        })
    }

    pub fn policy(&self) -> &NetPolicy {
        &self.policy
    }

    pub fn limits(&self) -> FetchLimits {
        self.limits
    }

    /// POSTs `body` to `url` once (no redirects) and returns the status, judged by the SSRF rule,
    /// within the page limits (the answer is read and discarded). Errors: the [`NetError`]s of
    /// URL, SSRF rule, DNS, time, connection and read.
    pub async fn post_once(
        &self,
        url: &Url,
        headers: header::HeaderMap,
        body: Bytes,
    ) -> Result<u16, NetError> {
        check_static(url, &self.policy)?;
        let exchange = async {
            let mut response = self
                .client
                .post(url.clone())
                .headers(headers)
                .body(body)
                .send()
                .await
                .map_err(map_reqwest_error)?;
            let status = response.status().as_u16();
            let mut read = 0usize;
            while read < self.limits.max_body_bytes {
                match response.chunk().await {
                    Ok(Some(chunk)) => read += chunk.len(),
                    Ok(None) => break,
                    Err(e) if e.is_timeout() => return Err(NetError::Timeout),
                    Err(e) => return Err(NetError::Read(innermost_message(&e))),
                }
            }
            Ok(status)
        };
        tokio::time::timeout(self.limits.timeout, exchange)
            .await
            .map_err(|_| NetError::Timeout)?
    }

    /// Fetches `url` following redirects; requires 2xx. Errors: [`NetError::Http`], or
    /// [`SafeClient::get_any_status`]'s.
    pub async fn get(&self, url: &Url) -> Result<Fetched, NetError> {
        self.get_with_hop_check(url, &|_| Ok::<(), Infallible>(()))
            .await
            .map_err(HopError::into_net_error)
    }

    /// Fetches `url` whatever the final status, each redirect hop judged, within the limits.
    /// Errors: any [`NetError`] but `Http`, `RobotsDisallowed` and `InvalidConfig`.
    pub async fn get_any_status(&self, url: &Url) -> Result<Fetched, NetError> {
        self.fetch_within_limit(url, &|_| Ok::<(), Infallible>(()))
            .await
            .map_err(HopError::into_net_error)
    }

    /// [`SafeClient::get`], asking `hop_check` before following each (already judged) redirect.
    /// Errors: [`HopError`].
    pub async fn get_with_hop_check<E>(
        &self,
        url: &Url,
        hop_check: &(dyn Fn(&Url) -> Result<(), E> + Sync),
    ) -> Result<Fetched, HopError<E>> {
        self.get_conditional(url, &Validators::default(), hop_check)
            .await
    }

    /// [`SafeClient::get_with_hop_check`] sending `validators` as `If-None-Match` and
    /// `If-Modified-Since` (on every hop: they are the final page's); a 304 answer is returned
    /// like a 2xx one, with an empty body. Errors: [`HopError`].
    pub async fn get_conditional<E>(
        &self,
        url: &Url,
        validators: &Validators,
        hop_check: &(dyn Fn(&Url) -> Result<(), E> + Sync),
    ) -> Result<Fetched, HopError<E>> {
        let fetched =
            tokio::time::timeout(self.limits.timeout, self.fetch(url, validators, hop_check))
                .await
                .map_err(|_| HopError::Net(NetError::Timeout))??;
        if (200..300).contains(&fetched.status) || (fetched.status == 304 && !validators.is_empty())
        {
            Ok(fetched)
        } else {
            Err(HopError::Net(NetError::Http(fetched.status)))
        }
    }

    async fn fetch_within_limit<E>(
        &self,
        url: &Url,
        hop_check: &(dyn Fn(&Url) -> Result<(), E> + Sync),
    ) -> Result<Fetched, HopError<E>> {
        tokio::time::timeout(
            self.limits.timeout,
            self.fetch(url, &Validators::default(), hop_check),
        )
        .await
        .map_err(|_| HopError::Net(NetError::Timeout))?
    }

    /// The crawler's GET: [`SafeClient::exchange`] with the `Accept` header of pages and the
    /// conditional headers of `validators` (values that are not valid header text left out).
    async fn fetch<E>(
        &self,
        url: &Url,
        validators: &Validators,
        hop_check: &(dyn Fn(&Url) -> Result<(), E> + Sync),
    ) -> Result<Fetched, HopError<E>> {
        let mut headers = header::HeaderMap::new();
        let conditional = [
            (header::IF_NONE_MATCH, &validators.etag),
            (header::IF_MODIFIED_SINCE, &validators.last_modified),
        ];
        for (name, value) in conditional {
            if let Some(value) = value
                .as_deref()
                .and_then(|v| header::HeaderValue::from_str(v).ok())
            {
                headers.insert(name, value);
            }
        }
        headers.insert(
            header::ACCEPT,
            header::HeaderValue::from_static(
                "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.9,*/*;q=0.5",
            ),
        );
        self.exchange(Method::GET, url, headers, None, hop_check)
            .await
    }

    /// Sends `method` to `url`; returns the final response whatever its status. Redirects are
    /// judged and followed (RFC 9110 § 15.4); a cross-origin hop drops `Authorization`,
    /// `Cookie`, `Proxy-Authorization` and sensitive headers. Errors: any [`NetError`] but
    /// `Http`, `RobotsDisallowed`, `InvalidConfig` and `Setup`.
    pub async fn send(
        &self,
        method: Method,
        url: &Url,
        headers: header::HeaderMap,
        body: Option<Bytes>,
    ) -> Result<Fetched, NetError> {
        let exchange = self.exchange(method, url, headers, body, &|_| Ok::<(), Infallible>(()));
        tokio::time::timeout(self.limits.timeout, exchange)
            .await
            .map_err(|_| NetError::Timeout)?
            .map_err(HopError::into_net_error)
    }

    /// The redirect loop of [`SafeClient::send`] and [`SafeClient::fetch`], without the time limit.
    async fn exchange<E>(
        &self,
        mut method: Method,
        url: &Url,
        mut headers: header::HeaderMap,
        mut body: Option<Bytes>,
        hop_check: &(dyn Fn(&Url) -> Result<(), E> + Sync),
    ) -> Result<Fetched, HopError<E>> {
        let mut current = url.clone();
        current.set_fragment(None);
        let mut redirects = 0u8;
        loop {
            check_static(&current, &self.policy)?;
            if redirects > 0 {
                hop_check(&current).map_err(HopError::Refused)?;
            }
            let mut request = self
                .client
                .request(method.clone(), current.clone())
                .headers(headers.clone());
            if let Some(body) = &body {
                // `Bytes` clones share the buffer: a 307 or 308 resends it without a copy.
                request = request.body(body.clone());
            }
            let response = request.send().await.map_err(map_reqwest_error)?;
            let status = response.status();
            if is_followed_redirect(status) {
                let next = response
                    .headers()
                    .get(header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|loc| current.join(loc.trim()).ok());
                if let Some(mut next) = next {
                    redirects += 1;
                    if redirects > self.limits.max_redirects {
                        return Err(NetError::TooManyRedirects.into());
                    }
                    next.set_fragment(None);
                    if let Some(changed) = redirected_method(status, &method) {
                        method = changed;
                        body = None;
                        drop_content_headers(&mut headers);
                    }
                    if next.origin() != current.origin() {
                        drop_credentials(&mut headers);
                    }
                    current = next;
                    continue;
                }
            }
            let text_header = |name: header::HeaderName| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            };
            let content_type = text_header(header::CONTENT_TYPE);
            let etag = text_header(header::ETAG);
            let last_modified = text_header(header::LAST_MODIFIED);
            let body = read_capped(response, self.limits.max_body_bytes).await?;
            return Ok(Fetched {
                url: current,
                status: status.as_u16(),
                content_type,
                body,
                etag,
                last_modified,
            });
        }
    }
}

/// The method a redirect turns `method` into, if it changes (RFC 9110 § 15.4).
fn redirected_method(status: StatusCode, method: &Method) -> Option<Method> {
    match status.as_u16() {
        303 if *method != Method::GET && *method != Method::HEAD => Some(Method::GET),
        301 | 302 if *method == Method::POST => Some(Method::GET),
        _ => None,
    }
}

/// Removes the body's headers once a redirect dropped it (Fetch standard § 4.4).
fn drop_content_headers(headers: &mut header::HeaderMap) {
    for name in [
        header::CONTENT_TYPE,
        header::CONTENT_LENGTH,
        header::CONTENT_ENCODING,
        header::CONTENT_LANGUAGE,
        header::CONTENT_LOCATION,
    ] {
        headers.remove(name);
    }
}

/// Removes credentials before a cross-origin redirect (Fetch standard § 4.4).
fn drop_credentials(headers: &mut header::HeaderMap) {
    let sensitive: Vec<header::HeaderName> = headers
        .iter()
        .filter(|(_, value)| value.is_sensitive())
        .map(|(name, _)| name.clone())
        .collect();
    for name in sensitive.into_iter().chain([
        header::AUTHORIZATION,
        header::COOKIE,
        header::PROXY_AUTHORIZATION,
    ]) {
        headers.remove(name);
    }
}

fn is_followed_redirect(status: StatusCode) -> bool {
    matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308)
}

/// Reads the body, failing with [`NetError::TooLarge`] as soon as it passes `max` bytes.
async fn read_capped(mut response: reqwest::Response, max: usize) -> Result<Bytes, NetError> {
    if response
        .content_length()
        .is_some_and(|len| len > max as u64)
    {
        return Err(NetError::TooLarge(max));
    }
    let mut body = BytesMut::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| {
        if e.is_timeout() {
            NetError::Timeout
        } else {
            NetError::Read(innermost_message(&e))
        }
    })? {
        if body.len() + chunk.len() > max {
            return Err(NetError::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// Maps a `reqwest` send error, recovering a [`ResolveRefusal`] from the error chain.
fn map_reqwest_error(e: reqwest::Error) -> NetError {
    let mut source: Option<&(dyn StdError + 'static)> = e.source();
    while let Some(err) = source {
        if let Some(refusal) = err.downcast_ref::<ResolveRefusal>() {
            return refusal.clone().into();
        }
        source = err.source();
    }
    if e.is_timeout() {
        NetError::Timeout
    } else if e.is_builder() {
        NetError::InvalidUrl(innermost_message(&e))
    } else {
        NetError::Connect(innermost_message(&e))
    }
}

fn innermost_message(e: &(dyn StdError + 'static)) -> String {
    let mut last: &(dyn StdError + 'static) = e;
    while let Some(next) = last.source() {
        last = next;
    }
    last.to_string()
}

#[cfg(test)]
mod tests {
    use axum::{
        extract::Request,
        http::StatusCode as AxumStatus,
        response::{IntoResponse, Redirect},
        routing::{any, get},
        Json, Router,
    };
    use serde_json::{json, Value};

    use super::*;

    async fn echo(request: Request) -> Json<Value> {
        let (parts, body) = request.into_parts();
        let body = axum::body::to_bytes(body, 1 << 20)
            .await
            .unwrap_or_default();
        let headers: serde_json::Map<String, Value> = parts
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
            "headers": headers,
            "body": String::from_utf8_lossy(&body),
        }))
    }

    async fn serve(other: Option<SocketAddr>) -> SocketAddr {
        let elsewhere = other.map_or_else(String::new, |o| format!("http://{o}/echo/there"));
        let app = Router::new()
            .route(
                "/301",
                any(|| async {
                    (AxumStatus::MOVED_PERMANENTLY, [("location", "/echo/a")]).into_response()
                }),
            )
            .route(
                "/302",
                any(|| async { (AxumStatus::FOUND, [("location", "/echo/a")]).into_response() }),
            )
            .route("/303", any(|| async { Redirect::to("/echo/a") }))
            .route("/307", any(|| async { Redirect::temporary("/echo/a") }))
            .route(
                "/308",
                any(|| async {
                    (AxumStatus::PERMANENT_REDIRECT, [("location", "/echo/a")]).into_response()
                }),
            )
            .route(
                "/elsewhere",
                any(move || {
                    let to = elsewhere.clone();
                    async move { Redirect::temporary(&to) }
                }),
            )
            .route(
                "/to-metadata",
                any(|| async { Redirect::temporary("http://169.254.169.254/latest/meta-data/") }),
            )
            .route(
                "/teapot",
                get(|| async { (AxumStatus::IM_A_TEAPOT, "short and stout") }),
            )
            .route("/big", get(|| async { "b".repeat(4096) }))
            .route(
                "/unchanged",
                get(|| async {
                    (
                        AxumStatus::NOT_MODIFIED,
                        [
                            ("etag", "\"v2\""),
                            ("last-modified", "Mon, 23 Nov 2026 10:00:00 GMT"),
                        ],
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

    fn client_for(allowed: &[SocketAddr], limits: FetchLimits) -> SafeClient {
        let entries: Vec<String> = allowed.iter().map(ToString::to_string).collect();
        SafeClient::new(NetPolicy::from_list(&entries).expect("policy"), limits).expect("client")
    }

    fn url(addr: SocketAddr, path: &str) -> Url {
        Url::parse(&format!("http://{addr}{path}")).expect("url")
    }

    async fn send_json(
        client: &SafeClient,
        method: Method,
        url: &Url,
        headers: header::HeaderMap,
        body: Option<&'static str>,
    ) -> Value {
        let fetched = client
            .send(
                method,
                url,
                headers,
                body.map(|b| Bytes::from_static(b.as_bytes())),
            )
            .await
            .expect("sent");
        assert_eq!(fetched.status, 200);
        serde_json::from_slice(&fetched.body).expect("echo JSON")
    }

    #[tokio::test]
    async fn send_changes_the_method_on_redirects_as_rfc_9110_says() {
        let addr = serve(None).await;
        let client = client_for(&[addr], FetchLimits::default());
        let mut headers = header::HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            "application/json".parse().expect("value"),
        );
        // (redirect, method sent, method that arrives, whether the body arrives)
        let cases = [
            ("/301", Method::POST, "GET", false),
            ("/302", Method::POST, "GET", false),
            ("/303", Method::POST, "GET", false),
            ("/303", Method::PUT, "GET", false),
            ("/303", Method::DELETE, "GET", false),
            ("/307", Method::POST, "POST", true),
            ("/308", Method::PATCH, "PATCH", true),
            ("/301", Method::PUT, "PUT", true),
            ("/302", Method::DELETE, "DELETE", true),
        ];
        for (path, method, arrives, with_body) in cases {
            let got = send_json(
                &client,
                method.clone(),
                &url(addr, path),
                headers.clone(),
                Some(r#"{"a":1}"#),
            )
            .await;
            let what = format!("{method} {path}");
            assert_eq!(got["method"], arrives, "{what}");
            assert_eq!(got["path"], "/echo/a", "{what}");
            if with_body {
                assert_eq!(got["body"], r#"{"a":1}"#, "{what}");
                assert_eq!(got["headers"]["content-type"], "application/json", "{what}");
            } else {
                assert_eq!(got["body"], "", "{what}");
                assert!(got["headers"].get("content-type").is_none(), "{what}");
            }
        }
    }

    #[tokio::test]
    async fn a_conditional_get_sends_the_validators_and_takes_304_only_when_it_asked() {
        let addr = serve(None).await;
        let client = client_for(&[addr], FetchLimits::default());
        let validators = Validators {
            etag: Some("\"v1\"".into()),
            last_modified: Some("Sun, 01 Nov 2026 10:00:00 GMT".into()),
        };
        let refuse = |_: &Url| Ok::<(), Infallible>(());
        // Through a redirect: the validators go to the final URL too.
        let fetched = client
            .get_conditional(&url(addr, "/302"), &validators, &refuse)
            .await
            .expect("echo");
        let got: Value = serde_json::from_slice(&fetched.body).expect("JSON");
        assert_eq!(got["headers"]["if-none-match"], "\"v1\"", "{got}");
        assert_eq!(
            got["headers"]["if-modified-since"],
            "Sun, 01 Nov 2026 10:00:00 GMT"
        );
        let plain = client.get(&url(addr, "/echo")).await.expect("get");
        let got: Value = serde_json::from_slice(&plain.body).expect("JSON");
        assert!(got["headers"].get("if-none-match").is_none(), "{got}");

        let unchanged = client
            .get_conditional(&url(addr, "/unchanged"), &validators, &refuse)
            .await
            .expect("304 answers a conditional request");
        assert_eq!(unchanged.status, 304);
        assert!(unchanged.body.is_empty());
        assert_eq!(unchanged.etag.as_deref(), Some("\"v2\""));
        assert_eq!(
            unchanged.last_modified.as_deref(),
            Some("Mon, 23 Nov 2026 10:00:00 GMT")
        );
        // A 304 to a request that asked for none is an error, as any other non-2xx.
        assert!(matches!(
            client.get(&url(addr, "/unchanged")).await,
            Err(NetError::Http(304))
        ));
    }

    #[tokio::test]
    async fn send_adds_no_accept_header_and_returns_any_status() {
        let addr = serve(None).await;
        let client = client_for(&[addr], FetchLimits::default());
        let got = send_json(
            &client,
            Method::GET,
            &url(addr, "/echo"),
            header::HeaderMap::new(),
            None,
        )
        .await;
        // Not the crawler's: `reqwest` adds its default `*/*` to a request without one.
        assert_eq!(got["headers"]["accept"], "*/*", "{got}");
        assert_eq!(
            got["headers"]["user-agent"],
            crate::outbound::CRAWLER_USER_AGENT
        );
        // The crawler's GET keeps its Accept header.
        let fetched = client.get(&url(addr, "/echo")).await.expect("get");
        let got: Value = serde_json::from_slice(&fetched.body).expect("JSON");
        assert!(got["headers"]["accept"]
            .as_str()
            .is_some_and(|a| a.starts_with("text/html")));

        let teapot = client
            .send(
                Method::GET,
                &url(addr, "/teapot"),
                header::HeaderMap::new(),
                None,
            )
            .await
            .expect("any status");
        assert_eq!(teapot.status, 418);
        assert_eq!(&teapot.body[..], b"short and stout");
    }

    #[tokio::test]
    async fn send_keeps_credentials_on_the_same_origin_only() {
        let there = serve(None).await;
        let here = serve(Some(there)).await;
        let client = client_for(&[here, there], FetchLimits::default());
        let mut headers = header::HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            "Bearer token".parse().expect("value"),
        );
        let mut key: header::HeaderValue = "secret-key".parse().expect("value");
        key.set_sensitive(true);
        headers.insert("x-api-key", key);
        headers.insert("x-plain", "kept".parse().expect("value"));

        let same = send_json(
            &client,
            Method::GET,
            &url(here, "/307"),
            headers.clone(),
            None,
        )
        .await;
        assert_eq!(same["headers"]["authorization"], "Bearer token");
        assert_eq!(same["headers"]["x-api-key"], "secret-key");

        let other = send_json(
            &client,
            Method::GET,
            &url(here, "/elsewhere"),
            headers,
            None,
        )
        .await;
        assert_eq!(other["path"], "/echo/there");
        assert!(other["headers"].get("authorization").is_none(), "{other}");
        assert!(other["headers"].get("x-api-key").is_none(), "{other}");
        assert_eq!(other["headers"]["x-plain"], "kept");
    }

    #[tokio::test]
    async fn send_judges_every_hop_and_caps_the_body() {
        let addr = serve(None).await;
        let client = client_for(&[addr], FetchLimits::default());
        let err = client
            .send(
                Method::POST,
                &url(addr, "/to-metadata"),
                header::HeaderMap::new(),
                None,
            )
            .await
            .expect_err("metadata address");
        assert_eq!(
            err,
            NetError::Forbidden("169.254.169.254 is a private or reserved network address".into())
        );
        let strict = SafeClient::new(NetPolicy::strict(), FetchLimits::default()).expect("client");
        let err = strict
            .send(
                Method::GET,
                &url(addr, "/echo"),
                header::HeaderMap::new(),
                None,
            )
            .await
            .expect_err("loopback");
        assert!(matches!(err, NetError::Forbidden(_)), "{err}");

        let small = client_for(
            &[addr],
            FetchLimits {
                max_body_bytes: 1000,
                ..FetchLimits::default()
            },
        );
        let err = small
            .send(
                Method::GET,
                &url(addr, "/big"),
                header::HeaderMap::new(),
                None,
            )
            .await
            .expect_err("too large");
        assert_eq!(err, NetError::TooLarge(1000));

        let one_hop = client_for(
            &[addr],
            FetchLimits {
                max_redirects: 0,
                ..FetchLimits::default()
            },
        );
        let err = one_hop
            .send(
                Method::GET,
                &url(addr, "/307"),
                header::HeaderMap::new(),
                None,
            )
            .await
            .expect_err("no redirects allowed");
        assert_eq!(err, NetError::TooManyRedirects);
    }

    #[tokio::test]
    async fn guarded_resolver_refuses_names_with_private_addresses() {
        let strict = GuardedResolver::new(&NetPolicy::strict());
        assert_eq!(
            strict.resolve_host("localhost").await,
            Err(ResolveRefusal::Forbidden("localhost".into()))
        );
        // Through the `reqwest` trait, as the client calls it.
        let name: Name = "localhost".parse().expect("name");
        let err = strict.resolve(name).await.err().expect("refused");
        assert!(err.downcast_ref::<ResolveRefusal>().is_some());

        let listed =
            GuardedResolver::new(&NetPolicy::from_list(&["localhost:1".to_owned()]).expect("list"));
        let addrs = listed
            .resolve_host("localhost")
            .await
            .expect("listed name resolves");
        assert!(addrs.iter().all(|a| a.is_loopback()));
        assert!(matches!(
            listed.resolve_host("no-such-host.invalid").await,
            Err(ResolveRefusal::Unresolved(_))
        ));
    }
}
