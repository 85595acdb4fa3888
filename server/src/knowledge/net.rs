//! The SSRF-safe HTTP client for knowledge-base fetches.
//!
//! The rule (docs/api.md § Knowledge base): server-side request forgery is impossible. Only
//! `http` and `https` URLs are fetched, on any port. Every address a request would reach —
//! after DNS resolution, on every redirect hop, and for IP literals in any notation (decimal,
//! hex, octal, short forms, IPv4-mapped IPv6) — is checked by [`is_forbidden_ip`] against the
//! loopback, private, link-local, CGNAT, multicast, unspecified and IPv6 unique-local ranges
//! (and the other special-purpose ranges listed there).
//!
//! How the rule is enforced:
//!
//! - **Host names** are resolved only by [`GuardedResolver`], which the one `reqwest::Client`
//!   inside [`SafeClient`] uses for every connection. The resolver refuses a name as soon as
//!   any of its addresses is forbidden, so the address that is checked is the address that is
//!   connected to and DNS rebinding between a check and the connection cannot slip through.
//! - **IP literals** never reach a resolver (`reqwest` connects to them directly), so they are
//!   judged before each request by the same rules. The `url` crate (WHATWG URL parsing)
//!   already turns `http://2130706433/`, `http://0x7f.1/`, `http://0177.0.0.1/` and
//!   `http://127.1/` into `127.0.0.1`; IPv6 literals keep their embedded IPv4 address, which
//!   [`is_forbidden_ip`] judges.
//! - **Redirects** are never followed by `reqwest` (`redirect::Policy::none()`); [`SafeClient`]
//!   follows them itself, judging every hop like the first request.
//! - **Proxies** from the environment are ignored (`no_proxy`), so a proxy cannot make the
//!   connection on the client's behalf.
//!
//! Exceptions for development and tests come from `ALLOWED_PRIVATE_HOSTS`, a list of
//! `host:port` entries ([`NetPolicy::from_list`]). `reqwest` asks the resolver for a host name
//! without its port, so an exception is enforced in two places: the resolver lets a listed
//! host name resolve to private addresses, and the check before every request refuses a URL
//! whose host is listed but whose port is not — a listed host is reachable only on its listed
//! ports. An IP-literal entry (`127.0.0.1:8080`, `[::1]:8080`) admits exactly that address and
//! port.

use std::{
    collections::HashSet,
    convert::Infallible,
    error::Error as StdError,
    fmt,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use bytes::{Bytes, BytesMut};
use reqwest::{
    dns::{Addrs, Name, Resolve, Resolving},
    header, redirect, StatusCode,
};
use url::{Host, Url};

/// The `User-Agent` of every knowledge-base request: `AgentChat/<version> (+knowledge crawler)`.
pub const USER_AGENT: &str = concat!(
    "AgentChat/",
    env!("CARGO_PKG_VERSION"),
    " (+knowledge crawler)"
);

/// How long a DNS lookup made by [`check_url`] may take before the URL is refused.
const CHECK_DNS_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest a TCP (and TLS) connection may take to open, whatever the page time cap.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a URL could not be fetched. `Display` gives a sentence a user understands; it never
/// contains an address a host name resolved to, nor anything from the server's configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    /// The URL could not be parsed or has no host.
    #[error("the URL is not valid: {0}")]
    InvalidUrl(String),
    /// The scheme is not `http` or `https`.
    #[error("only http and https URLs can be fetched")]
    Scheme,
    /// The URL carries a user name or password.
    #[error("URLs with a user name or password are not accepted")]
    UserInfo,
    /// The URL would reach a forbidden address; the text says which rule refused it.
    #[error("the URL is not allowed: {0}")]
    Forbidden(String),
    /// The host name could not be resolved (the text names the host).
    #[error("the host name {0} could not be resolved")]
    Dns(String),
    /// The page did not arrive within [`FetchLimits::timeout`].
    #[error("the page took too long to respond")]
    Timeout,
    /// The body is larger than [`FetchLimits::max_body_bytes`] (the limit, in bytes).
    #[error("the page is larger than the limit of {0} bytes")]
    TooLarge(usize),
    /// More than [`FetchLimits::max_redirects`] redirects, or a redirect without a usable
    /// `Location`.
    #[error("the page redirected too many times")]
    TooManyRedirects,
    /// The final response had a status other than 2xx.
    #[error("the server answered with HTTP status {0}")]
    Http(u16),
    /// The connection could not be opened (refused, reset, TLS failure …).
    #[error("could not connect to the server: {0}")]
    Connect(String),
    /// The connection broke while the response was being read.
    #[error("the connection failed while reading the page: {0}")]
    Read(String),
    /// The site's robots.txt does not allow the crawler to fetch the page.
    #[error("the site's robots.txt does not allow crawling this page")]
    RobotsDisallowed,
    /// The crawl settings are invalid (see `CrawlConfig::validate`); the text says why.
    #[error("the crawl settings are not valid: {0}")]
    InvalidConfig(String),
    /// The HTTP client could not be set up (TLS back end unavailable).
    #[error("the HTTP client could not be set up: {0}")]
    Setup(String),
}

/// Why [`SafeClient::get_with_hop_check`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HopError<E> {
    /// The fetch failed.
    Net(NetError),
    /// The hop check refused a redirect target; the request was not made.
    Refused(E),
}

impl<E> From<NetError> for HopError<E> {
    fn from(e: NetError) -> Self {
        Self::Net(e)
    }
}

impl HopError<Infallible> {
    fn into_net_error(self) -> NetError {
        match self {
            Self::Net(e) => e,
            Self::Refused(never) => match never {},
        }
    }
}

/// A bad `ALLOWED_PRIVATE_HOSTS` entry; the text says which entry and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid allowed private host `{entry}`: {reason}")]
pub struct PolicyError {
    /// The entry as given.
    pub entry: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Which private addresses may be reached: `host:port` exceptions to the SSRF rule, for
/// development and tests (`ALLOWED_PRIVATE_HOSTS`). The default policy has no exceptions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetPolicy {
    /// `(host, port)` pairs; the host is normalised the way [`Url::host_str`] spells it:
    /// a lower-cased (punycode) domain, a dotted IPv4 address or a bracketed IPv6 address.
    allowed_private: Vec<(String, u16)>,
}

impl NetPolicy {
    /// A policy with no exceptions: every private or reserved address is refused.
    pub fn strict() -> Self {
        Self::default()
    }

    /// Parses `host:port` entries (`localhost:8080`, `127.0.0.1:3000`, `[::1]:3000`). Host
    /// names are lower-cased; IP hosts accept the same notations as URLs and are normalised.
    /// Blank entries are ignored.
    ///
    /// # Errors
    /// An entry without a port, with a port that is not 1–65535, or with an invalid host.
    pub fn from_list(entries: &[String]) -> Result<Self, PolicyError> {
        let mut allowed_private = Vec::new();
        for raw in entries {
            let entry = raw.trim();
            if entry.is_empty() {
                continue;
            }
            let err = |reason: &str| PolicyError {
                entry: entry.to_owned(),
                reason: reason.to_owned(),
            };
            let (host, port) = entry
                .rsplit_once(':')
                .ok_or_else(|| err("expected host:port"))?;
            let port: u16 = port
                .parse()
                .map_err(|_| err("the port must be a number from 1 to 65535"))?;
            if port == 0 {
                return Err(err("the port must be a number from 1 to 65535"));
            }
            if host.is_empty() {
                return Err(err("the host is missing"));
            }
            let host = Host::parse(&host.to_ascii_lowercase()).map_err(|e| {
                err(&format!(
                    "invalid host ({e}); write IPv6 hosts as [addr]:port"
                ))
            })?;
            let host = host_key(&host.to_string()).to_owned();
            if host.is_empty() {
                return Err(err("the host is missing"));
            }
            let pair = (host, port);
            if !allowed_private.contains(&pair) {
                allowed_private.push(pair);
            }
        }
        Ok(Self { allowed_private })
    }

    /// The `(host, port)` exceptions, hosts normalised as described on the field.
    pub fn allowed_private(&self) -> &[(String, u16)] {
        &self.allowed_private
    }

    /// Whether `host` (as [`Url::host_str`] spells it; a trailing dot is ignored) on `port`
    /// is an exception.
    pub fn is_allowed(&self, host: &str, port: u16) -> bool {
        let host = host_key(host);
        self.allowed_private
            .iter()
            .any(|(h, p)| *p == port && h == host)
    }

    /// Whether `host` (trailing dot ignored) is listed at all, on any port.
    fn lists_host(&self, host: &str) -> bool {
        let host = host_key(host);
        self.allowed_private.iter().any(|(h, _)| h == host)
    }

    /// The listed host names (not IP literals), which the resolver lets resolve to private
    /// addresses.
    fn listed_names(&self) -> HashSet<String> {
        self.allowed_private
            .iter()
            .filter(|(h, _)| matches!(Host::parse(h), Ok(Host::Domain(_))))
            .map(|(h, _)| h.clone())
            .collect()
    }
}

/// A host as exceptions compare it: lower-case, without the trailing dot of an absolute
/// domain name (`localhost.` and `localhost` are one host).
fn host_key(host: &str) -> &str {
    host.strip_suffix('.').unwrap_or(host)
}

/// Whether connecting to `ip` is forbidden by the SSRF rule.
///
/// IPv4: `0.0.0.0/8` (this network, includes unspecified), `10/8`, `172.16/12`, `192.168/16`
/// (RFC 1918), `100.64/10` (CGNAT, RFC 6598), `127/8` (loopback), `169.254/16` (link-local,
/// cloud metadata), `192.0.0/24` (IETF protocol assignments), `192.0.2/24`, `198.51.100/24`,
/// `203.0.113/24` (documentation, RFC 5737), `192.88.99/24` (6to4 relay anycast),
/// `198.18/15` (benchmarking, RFC 2544), `224/4` (multicast), `240/4` (reserved, includes
/// broadcast `255.255.255.255`).
///
/// IPv6: `::` and `::1`; IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`, NAT64
/// `64:ff9b::/96` (RFC 6052) and 6to4 `2002::/16` (RFC 3056) are judged by their embedded
/// IPv4 address; local-use NAT64 `64:ff9b:1::/48`, discard-only `100::/64`, Teredo
/// `2001::/32` (its embedded address is obfuscated), documentation `2001:db8::/32` and
/// `3fff::/20`, unique-local `fc00::/7`, link-local `fe80::/10`, site-local `fec0::/10` and
/// multicast `ff00::/8` are forbidden, as is everything outside global unicast `2000::/3`.
pub fn is_forbidden_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_forbidden_v4(v4),
        IpAddr::V6(v6) => is_forbidden_v6(v6),
    }
}

fn is_forbidden_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    a == 0
        || a == 10
        || a == 127
        || (a == 100 && (b & 0xc0) == 64)
        || (a == 169 && b == 254)
        || (a == 172 && (b & 0xf0) == 16)
        || (a == 192 && b == 168)
        || (a == 192 && b == 0 && (c == 0 || c == 2))
        || (a == 192 && b == 88 && c == 99)
        || (a == 198 && (b & 0xfe) == 18)
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || a >= 224
}

fn embedded_v4(hi: u16, lo: u16) -> Ipv4Addr {
    let [a, b] = hi.to_be_bytes();
    let [c, d] = lo.to_be_bytes();
    Ipv4Addr::new(a, b, c, d)
}

fn is_forbidden_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if ip.is_unspecified() || ip.is_loopback() {
        return true;
    }
    // ::ffff:a.b.c.d (IPv4-mapped) and ::a.b.c.d (IPv4-compatible, deprecated).
    if s[..5] == [0; 5] && (s[5] == 0xffff || s[5] == 0) {
        return is_forbidden_v4(embedded_v4(s[6], s[7]));
    }
    // NAT64 well-known prefix 64:ff9b::/96 and local-use 64:ff9b:1::/48 (RFC 8215).
    if s[0] == 0x64 && s[1] == 0xff9b {
        if s[2..6] == [0; 4] {
            return is_forbidden_v4(embedded_v4(s[6], s[7]));
        }
        return true;
    }
    // 6to4: 2002:AABB:CCDD::/48 carries AA.BB.CC.DD.
    if s[0] == 0x2002 {
        return is_forbidden_v4(embedded_v4(s[1], s[2]));
    }
    // Teredo 2001::/32 and documentation 2001:db8::/32.
    if s[0] == 0x2001 && (s[1] == 0 || s[1] == 0xdb8) {
        return true;
    }
    // Documentation 3fff::/20 (RFC 9637).
    if s[0] == 0x3fff && s[1] < 0x1000 {
        return true;
    }
    // Discard-only 100::/64, unique-local fc00::/7, link-local fe80::/10, site-local
    // fec0::/10 and multicast ff00::/8 all lie outside global unicast 2000::/3.
    (s[0] & 0xe000) != 0x2000
}

/// How a URL that passed [`check_static`] may be fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// An exception from the policy: private addresses may be reached.
    Exception,
    /// A public IP literal.
    PublicIp,
    /// A host name that the guarded resolver must judge.
    Name,
}

/// The checks that need no DNS: scheme, user info, host, port exceptions and IP literals.
fn check_static(url: &Url, policy: &NetPolicy) -> Result<Route, NetError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(NetError::Scheme);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(NetError::UserInfo);
    }
    let host = url
        .host()
        .ok_or_else(|| NetError::InvalidUrl("the URL has no host".into()))?;
    let host_str = url.host_str().unwrap_or_default();
    let port = url
        .port_or_known_default()
        .ok_or_else(|| NetError::InvalidUrl("the URL has no port".into()))?;
    if policy.is_allowed(host_str, port) {
        return Ok(Route::Exception);
    }
    if policy.lists_host(host_str) {
        return Err(NetError::Forbidden(format!(
            "{host_str} may only be reached on its allowed ports"
        )));
    }
    let literal = match host {
        Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        Host::Domain(_) => None,
    };
    match literal {
        Some(ip) if is_forbidden_ip(ip) => Err(NetError::Forbidden(format!(
            "{host_str} is a private or reserved network address"
        ))),
        Some(_) => Ok(Route::PublicIp),
        None => Ok(Route::Name),
    }
}

/// Checks `url` against the SSRF rule without fetching it: scheme `http`/`https`, no user
/// info, a host; an IP literal is judged directly (with its port, for exceptions); a host
/// name is resolved and every address it resolves to is judged. Used when a URL is submitted,
/// so that a forbidden URL is refused with 400 when that can be known then; [`SafeClient`]
/// applies the same rules again at fetch time.
///
/// # Errors
/// [`NetError::Scheme`], [`NetError::UserInfo`], [`NetError::InvalidUrl`],
/// [`NetError::Forbidden`], or [`NetError::Dns`] when the name does not resolve in time.
pub async fn check_url(url: &Url, policy: &NetPolicy) -> Result<(), NetError> {
    match check_static(url, policy)? {
        Route::Exception | Route::PublicIp => Ok(()),
        Route::Name => {
            let host = url.host_str().unwrap_or_default();
            tokio::time::timeout(CHECK_DNS_TIMEOUT, resolve_checked(host, false))
                .await
                .map_err(|_| NetError::Dns(host.to_owned()))?
                .map(|_| ())
                .map_err(NetError::from)
        }
    }
}

/// Why [`GuardedResolver`] refused a name; carried through `reqwest`'s error chain so that
/// [`SafeClient`] can report it as [`NetError::Forbidden`] or [`NetError::Dns`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveRefusal {
    /// The name resolved to at least one forbidden address (the name).
    Forbidden(String),
    /// The name did not resolve (the name).
    Unresolved(String),
}

impl fmt::Display for ResolveRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Forbidden(name) => write!(
                f,
                "{name} resolves to a private or reserved network address"
            ),
            Self::Unresolved(name) => write!(f, "{name} could not be resolved"),
        }
    }
}

impl StdError for ResolveRefusal {}

impl From<ResolveRefusal> for NetError {
    fn from(r: ResolveRefusal) -> Self {
        match r {
            ResolveRefusal::Forbidden(_) => NetError::Forbidden(r.to_string()),
            ResolveRefusal::Unresolved(name) => NetError::Dns(name),
        }
    }
}

/// Resolves `host` with the system resolver and judges every address. With `permit_private`
/// the addresses are returned unjudged (a listed exception host).
async fn resolve_checked(host: &str, permit_private: bool) -> Result<Vec<IpAddr>, ResolveRefusal> {
    let addrs: Vec<IpAddr> = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|_| ResolveRefusal::Unresolved(host.to_owned()))?
        .map(|sa| sa.ip())
        .collect();
    judge_addresses(host, addrs, permit_private)
}

/// The resolver's verdict on the addresses `host` resolved to: none is an error, and one
/// forbidden address refuses the whole name unless private addresses are permitted.
fn judge_addresses(
    host: &str,
    addrs: Vec<IpAddr>,
    permit_private: bool,
) -> Result<Vec<IpAddr>, ResolveRefusal> {
    if addrs.is_empty() {
        return Err(ResolveRefusal::Unresolved(host.to_owned()));
    }
    if !permit_private && addrs.iter().any(|ip| is_forbidden_ip(*ip)) {
        return Err(ResolveRefusal::Forbidden(host.to_owned()));
    }
    Ok(addrs)
}

/// The DNS resolver of [`SafeClient`]'s `reqwest::Client` (`reqwest::dns::Resolve`).
///
/// It resolves with the system resolver (`tokio::net::lookup_host`) and refuses the whole
/// name — rather than dropping some addresses — when any address is forbidden by
/// [`is_forbidden_ip`], because a name that mixes public and private addresses is the shape
/// of a rebinding attack. Host names listed in the policy's exceptions resolve unjudged;
/// their ports are enforced before the request (see the module documentation).
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

/// The HTTP client for knowledge-base fetches: one `reqwest::Client` with the
/// [`GuardedResolver`], no automatic redirects, no proxy, connect and read timeouts and the
/// [`USER_AGENT`]. Cloning is cheap and shares the connection pool.
#[derive(Debug, Clone)]
pub struct SafeClient {
    client: reqwest::Client,
    policy: Arc<NetPolicy>,
    limits: FetchLimits,
}

impl SafeClient {
    /// Builds the client for `policy` and `limits`.
    ///
    /// # Errors
    /// [`NetError::Setup`] when the TLS back end cannot be initialised.
    pub fn new(policy: NetPolicy, limits: FetchLimits) -> Result<Self, NetError> {
        Self::with_user_agent(policy, limits, USER_AGENT)
    }

    /// Like [`SafeClient::new`] with another `User-Agent` (webhook deliveries name
    /// themselves differently from the crawler).
    ///
    /// # Errors
    /// [`NetError::Setup`] when the TLS back end cannot be initialised.
    pub fn with_user_agent(
        policy: NetPolicy,
        limits: FetchLimits,
        user_agent: &str,
    ) -> Result<Self, NetError> {
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(GuardedResolver::new(&policy)))
            .redirect(redirect::Policy::none())
            .no_proxy()
            .user_agent(user_agent)
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

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn forbidden_ipv4_ranges() {
        for s in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "10.255.255.255",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.255.0.9",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
        ] {
            assert!(is_forbidden_ip(ip(s)), "{s} must be forbidden");
        }
    }

    #[test]
    fn public_ipv4_allowed() {
        for s in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "169.253.1.1",
            "192.169.0.1",
            "198.17.255.255",
            "198.20.0.1",
            "223.255.255.254",
        ] {
            assert!(!is_forbidden_ip(ip(s)), "{s} must be allowed");
        }
    }

    #[test]
    fn forbidden_ipv6_ranges() {
        for s in [
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:7f00:1",
            "::ffff:10.1.2.3",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "::10.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::1",
            "100::1",
            "2001::1",
            "2001:db8::1",
            "2002:7f00:1::1",
            "2002:c0a8:101::1",
            "3fff::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "ff0e::1",
        ] {
            assert!(is_forbidden_ip(ip(s)), "{s} must be forbidden");
        }
    }

    #[test]
    fn public_ipv6_allowed() {
        for s in [
            "2606:4700:4700::1111",
            "2001:4860:4860::8888",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "3fff:1000::1",
        ] {
            assert!(!is_forbidden_ip(ip(s)), "{s} must be allowed");
        }
    }

    fn url(s: &str) -> Url {
        Url::parse(s).expect("test URL")
    }

    async fn check(s: &str) -> Result<(), NetError> {
        check_url(&url(s), &NetPolicy::strict()).await
    }

    #[tokio::test]
    async fn check_url_refuses_every_ip_literal_notation() {
        for s in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0x7f.1/",
            "http://0177.0.0.1/",
            "http://017700000001/",
            "http://127.1/",
            "http://127.0.1/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://[0:0:0:0:0:ffff:7f00:1]/",
            "http://0.0.0.0/",
            "http://0/",
            "http://[::]/",
            "http://169.254.169.254/latest/meta-data/",
            "http://0xa9fea9fe/",
            "http://10.0.0.1/",
            "http://100.64.0.1/",
            "http://172.16.0.1/",
            "http://192.168.1.1/",
            "http://[fc00::1]/",
            "http://[fe80::1]/",
            "http://224.0.0.1/",
            "http://[ff02::1]/",
            "http://255.255.255.255/",
            "https://127.0.0.1:8443/",
            "http://127.0.0.1./",
        ] {
            assert!(
                matches!(check(s).await, Err(NetError::Forbidden(_))),
                "{s} must be forbidden, got {:?}",
                check(s).await
            );
        }
    }

    #[tokio::test]
    async fn check_url_refuses_other_schemes_and_user_info() {
        for s in [
            "file:///etc/passwd",
            "ftp://example.com/",
            "gopher://example.com/",
            "data:text/plain,hi",
            "javascript:alert(1)",
            "ws://example.com/",
        ] {
            assert_eq!(check(s).await, Err(NetError::Scheme), "{s}");
        }
        for s in [
            "http://user@93.184.216.34/",
            "http://user:pw@93.184.216.34/",
            "http://:pw@93.184.216.34/",
            "http://93.184.216.34@127.0.0.1/",
        ] {
            assert_eq!(check(s).await, Err(NetError::UserInfo), "{s}");
        }
    }

    #[tokio::test]
    async fn check_url_allows_public_ip_literals() {
        for s in [
            "http://93.184.216.34/",
            "https://1.1.1.1:8443/x",
            "http://[2606:4700:4700::1111]/",
        ] {
            assert_eq!(check(s).await, Ok(()), "{s}");
        }
    }

    #[tokio::test]
    async fn check_url_resolves_names_and_refuses_private_results() {
        assert!(matches!(
            check("http://localhost/").await,
            Err(NetError::Forbidden(_))
        ));
        // Whether or not the system resolver knows the absolute form, it is never allowed.
        assert!(check("http://LOCALHOST.:8080/").await.is_err());
        assert!(matches!(
            check("http://no-such-host.invalid/").await,
            Err(NetError::Dns(_))
        ));
    }

    #[tokio::test]
    async fn exceptions_are_host_and_port_pairs() {
        let policy = NetPolicy::from_list(&[
            "localhost:8080".to_owned(),
            "127.0.0.1:3000".to_owned(),
            "[::1]:3001".to_owned(),
        ])
        .expect("valid list");
        let ok = |s: &'static str| {
            let policy = policy.clone();
            async move { check_url(&url(s), &policy).await }
        };
        assert_eq!(ok("http://localhost:8080/").await, Ok(()));
        assert_eq!(ok("http://127.0.0.1:3000/").await, Ok(()));
        assert_eq!(ok("http://2130706433:3000/").await, Ok(()));
        assert_eq!(ok("http://[::1]:3001/").await, Ok(()));
        assert_eq!(ok("http://localhost.:8080/").await, Ok(()));
        for s in [
            "http://localhost:8081/",
            "http://localhost.:8081/",
            "http://localhost/",
            "https://localhost/",
            "http://127.0.0.1:3001/",
            "http://127.0.0.1:8080/",
            "http://[::1]:3000/",
            "http://[::ffff:127.0.0.1]:3000/",
            "http://127.0.0.2:3000/",
        ] {
            assert!(
                matches!(ok(s).await, Err(NetError::Forbidden(_))),
                "{s} must be forbidden"
            );
        }
    }

    #[test]
    fn policy_list_parsing() {
        let p = NetPolicy::from_list(&[
            " LocalHost:8080 ".to_owned(),
            "127.1:3000".to_owned(),
            "[0:0::1]:3001".to_owned(),
            String::new(),
            "localhost:8080".to_owned(),
            "Intranet.Example.:9000".to_owned(),
        ])
        .expect("valid list");
        assert_eq!(
            p.allowed_private(),
            &[
                ("localhost".to_owned(), 8080),
                ("127.0.0.1".to_owned(), 3000),
                ("[::1]".to_owned(), 3001),
                ("intranet.example".to_owned(), 9000),
            ]
        );
        for bad in [
            ".:80",
            "localhost",
            "localhost:",
            "localhost:0",
            "localhost:70000",
            ":80",
            "::1:80",
            "a b:80",
            "host:port",
        ] {
            assert!(NetPolicy::from_list(&[bad.to_owned()]).is_err(), "{bad}");
        }
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

    #[test]
    fn one_forbidden_address_refuses_the_whole_name() {
        let public = ip("93.184.216.34");
        let private = ip("10.0.0.7");
        assert_eq!(
            judge_addresses("mixed.example", vec![public, private], false),
            Err(ResolveRefusal::Forbidden("mixed.example".into()))
        );
        assert_eq!(
            judge_addresses(
                "mapped.example",
                vec![public, ip("::ffff:127.0.0.1")],
                false
            ),
            Err(ResolveRefusal::Forbidden("mapped.example".into()))
        );
        assert_eq!(
            judge_addresses("public.example", vec![public], false),
            Ok(vec![public])
        );
        assert_eq!(
            judge_addresses("listed.example", vec![public, private], true),
            Ok(vec![public, private])
        );
        assert_eq!(
            judge_addresses("empty.example", vec![], true),
            Err(ResolveRefusal::Unresolved("empty.example".into()))
        );
    }

    #[test]
    fn errors_read_as_sentences_without_addresses() {
        let e: NetError = ResolveRefusal::Forbidden("intranet.example".into()).into();
        assert_eq!(
            e.to_string(),
            "the URL is not allowed: intranet.example resolves to a private or reserved network address"
        );
        assert_eq!(
            NetError::Http(404).to_string(),
            "the server answered with HTTP status 404"
        );
        assert!(USER_AGENT.starts_with("AgentChat/"));
        assert!(USER_AGENT.ends_with("(+knowledge crawler)"));
    }
}
