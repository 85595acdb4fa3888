//! [`SafeClient`], the SSRF-safe client of crawls and webhook deliveries: host names resolved
//! and judged by [`GuardedResolver`] (so the address checked is the address connected to),
//! redirects followed by the client itself with every hop judged, and the size and time
//! limits of [`FetchLimits`]. The module documentation of [`crate::outbound`] states the rule.

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
    header, StatusCode,
};
use url::Url;

use super::{
    client_builder,
    policy::{check_static, host_key, resolve_checked},
    HopError, NetError, NetPolicy, Purpose, ResolveRefusal,
};

/// The longest a TCP (and TLS) connection may take to open, whatever the page time cap.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The DNS resolver of [`SafeClient`]'s `reqwest::Client` (`reqwest::dns::Resolve`).
///
/// It resolves with the system resolver (`tokio::net::lookup_host`) and refuses the whole
/// name — rather than dropping some addresses — when any address is forbidden by
/// [`is_forbidden_ip`](super::is_forbidden_ip), because a name that mixes public and private
/// addresses is the shape of a rebinding attack. Host names listed in the policy's exceptions
/// resolve unjudged; their ports are enforced before the request (see the module
/// documentation of [`crate::outbound`]).
#[derive(Debug, Clone, Default)]
pub struct GuardedResolver {
    listed_names: Arc<HashSet<String>>,
}

impl GuardedResolver {
    /// A resolver for `policy`: strict for every name except the listed host names.
    pub fn new(policy: &NetPolicy) -> Self {
        Self {
            listed_names: Arc::new(policy.listed_names()),
        }
    }

    /// Resolves `host` as the client would, returning the addresses a connection may use.
    ///
    /// # Errors
    /// [`ResolveRefusal::Forbidden`] when any address is forbidden (and the name is not an
    /// exception), [`ResolveRefusal::Unresolved`] when the name does not resolve.
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
    /// The final URL, after redirects, without fragment.
    pub url: Url,
    /// The final HTTP status.
    pub status: u16,
    /// The `Content-Type` header, if any and if valid UTF-8.
    pub content_type: Option<String>,
    /// The body, at most [`FetchLimits::max_body_bytes`] long.
    pub body: Bytes,
}

/// The SSRF-safe HTTP client of crawls and webhook deliveries: one `reqwest::Client` started
/// by [`client_builder`] (the `User-Agent` of its [`Purpose`], no automatic redirects) with
/// the [`GuardedResolver`], no proxy, no `Referer`, and connect and read timeouts. Cloning is
/// cheap and shares the connection pool.
#[derive(Debug, Clone)]
pub struct SafeClient {
    client: reqwest::Client,
    policy: Arc<NetPolicy>,
    limits: FetchLimits,
}

impl SafeClient {
    /// Builds the crawler's client ([`Purpose::Crawl`]) for `policy` and `limits`.
    ///
    /// # Errors
    /// [`NetError::Setup`] when the TLS back end cannot be initialised.
    pub fn new(policy: NetPolicy, limits: FetchLimits) -> Result<Self, NetError> {
        Self::for_purpose(policy, limits, Purpose::Crawl)
    }

    /// Like [`SafeClient::new`] for another [`Purpose`], which names the client in its
    /// `User-Agent` (webhook deliveries name themselves differently from the crawler).
    ///
    /// # Errors
    /// [`NetError::Setup`] when the TLS back end cannot be initialised.
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

    /// The policy this client enforces.
    pub fn policy(&self) -> &NetPolicy {
        &self.policy
    }

    /// The per-page limits this client applies.
    pub fn limits(&self) -> FetchLimits {
        self.limits
    }

    /// POSTs `body` with `headers` to `url` once and returns the answer's status, whatever
    /// it is: redirects are not followed (a 3xx is returned like any other status). The
    /// address is judged by the SSRF rule like every fetch (IP literals and port exceptions
    /// before the request, host names by the [`GuardedResolver`] the connection uses, so a
    /// name rebound to a private address is refused at send time). The whole exchange must
    /// finish within [`FetchLimits::timeout`]; at most [`FetchLimits::max_body_bytes`] of the
    /// answer are read and discarded (a longer answer is cut off, not an error).
    ///
    /// # Errors
    /// [`NetError::Scheme`], [`NetError::UserInfo`], [`NetError::InvalidUrl`],
    /// [`NetError::Forbidden`], [`NetError::Dns`], [`NetError::Timeout`],
    /// [`NetError::Connect`] or [`NetError::Read`].
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

    /// Fetches `url` (its fragment ignored), following redirects, and requires a 2xx final
    /// status.
    ///
    /// # Errors
    /// [`NetError::Http`] for a final status other than 2xx, or any error of
    /// [`SafeClient::get_any_status`].
    pub async fn get(&self, url: &Url) -> Result<Fetched, NetError> {
        self.get_with_hop_check(url, &|_| Ok::<(), Infallible>(()))
            .await
            .map_err(HopError::into_net_error)
    }

    /// Fetches `url` (its fragment ignored) and returns the final response whatever its
    /// status (robots.txt needs to tell 404 from 5xx). Redirects (301, 302, 303, 307, 308)
    /// are followed up to [`FetchLimits::max_redirects`] times, every hop judged by the SSRF
    /// rule; the body is read up to [`FetchLimits::max_body_bytes`]; the whole exchange must
    /// finish within [`FetchLimits::timeout`].
    ///
    /// # Errors
    /// Any [`NetError`] except [`NetError::Http`], [`NetError::RobotsDisallowed`] and
    /// [`NetError::InvalidConfig`].
    pub async fn get_any_status(&self, url: &Url) -> Result<Fetched, NetError> {
        self.fetch_within_limit(url, &|_| Ok::<(), Infallible>(()))
            .await
            .map_err(HopError::into_net_error)
    }

    /// Like [`SafeClient::get`], and `hop_check` is asked before each redirect is followed,
    /// with the target URL (fragment removed, already judged by the SSRF rule), so that a
    /// caller can refuse a hop for its own reasons — the crawler applies robots.txt and never
    /// requests a URL twice. The first request is not passed to `hop_check`.
    ///
    /// # Errors
    /// [`HopError::Refused`] with the error of `hop_check`, or [`HopError::Net`] with any
    /// error of [`SafeClient::get`].
    pub async fn get_with_hop_check<E>(
        &self,
        url: &Url,
        hop_check: &(dyn Fn(&Url) -> Result<(), E> + Sync),
    ) -> Result<Fetched, HopError<E>> {
        let fetched = self.fetch_within_limit(url, hop_check).await?;
        if (200..300).contains(&fetched.status) {
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
        tokio::time::timeout(self.limits.timeout, self.fetch(url, hop_check))
            .await
            .map_err(|_| HopError::Net(NetError::Timeout))?
    }

    async fn fetch<E>(
        &self,
        url: &Url,
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
            let response = self
                .client
                .get(current.clone())
                .header(
                    header::ACCEPT,
                    "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.9,*/*;q=0.5",
                )
                .send()
                .await
                .map_err(map_reqwest_error)?;
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
                    current = next;
                    continue;
                }
            }
            let content_type = response
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let body = read_capped(response, self.limits.max_body_bytes).await?;
            return Ok(Fetched {
                url: current,
                status: status.as_u16(),
                content_type,
                body,
            });
        }
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

/// The message of the innermost error in the chain (e.g. "Connection refused (os error 111)").
fn innermost_message(e: &(dyn StdError + 'static)) -> String {
    let mut last: &(dyn StdError + 'static) = e;
    while let Some(next) = last.source() {
        last = next;
    }
    last.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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
