//! Which addresses may be reached: the SSRF rule ([`is_forbidden_ip`]), the
//! `ALLOWED_PRIVATE_HOSTS` exceptions ([`NetPolicy`]) and the checks before every request
//! ([`check_url`]).

use std::{
    collections::HashSet,
    error::Error as StdError,
    fmt,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    time::Duration,
};

use url::{Host, Url};

use super::NetError;

/// How long a DNS lookup made by [`check_url`] may take before the URL is refused.
const CHECK_DNS_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// `(host, port)` pairs, the host spelt as [`Url::host_str`] does.
    allowed_private: Vec<(String, u16)>,
}

impl NetPolicy {
    /// A policy with no exceptions: every private or reserved address is refused.
    pub fn strict() -> Self {
        Self::default()
    }

    /// Parses `host:port` entries (`localhost:8080`, `127.0.0.1:3000`, `[::1]:3000`); hosts are
    /// normalised, blank entries ignored. Errors: no port, a port outside 1–65535, an invalid host.
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

    /// The `(host, port)` exceptions.
    pub fn allowed_private(&self) -> &[(String, u16)] {
        &self.allowed_private
    }

    /// Whether `host` (as [`Url::host_str`] spells it, trailing dot ignored) on `port` is an
    /// exception.
    pub fn is_allowed(&self, host: &str, port: u16) -> bool {
        let host = host_key(host);
        self.allowed_private
            .iter()
            .any(|(h, p)| *p == port && h == host)
    }

    fn lists_host(&self, host: &str) -> bool {
        let host = host_key(host);
        self.allowed_private.iter().any(|(h, _)| h == host)
    }

    pub(super) fn listed_names(&self) -> HashSet<String> {
        self.allowed_private
            .iter()
            .filter(|(h, _)| matches!(Host::parse(h), Ok(Host::Domain(_))))
            .map(|(h, _)| h.clone())
            .collect()
    }
}

/// A host as exceptions compare it: lower-case, without a trailing dot.
pub(super) fn host_key(host: &str) -> &str {
    host.strip_suffix('.').unwrap_or(host)
}

/// Whether connecting to `ip` is forbidden by the SSRF rule.
/// IPv4: `0/8`, RFC 1918, CGNAT `100.64/10` (RFC 6598), `127/8`, `169.254/16`, `192.0.0/24`,
/// documentation (RFC 5737), `192.88.99/24`, `198.18/15` (RFC 2544), `224/4`, `240/4`.
/// IPv6: `::`, `::1`; IPv4-mapped, IPv4-compatible, NAT64 `64:ff9b::/96` (RFC 6052) and 6to4
/// `2002::/16` (RFC 3056) judged by their IPv4 address; `64:ff9b:1::/48`, `100::/64`, Teredo
/// `2001::/32`, `2001:db8::/32`, `3fff::/20`, `fc00::/7`, `fe80::/10`, `fec0::/10`, `ff00::/8`
/// and everything outside `2000::/3` forbidden.
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    Exception,
    PublicIp,
    Name,
}

/// The checks that need no DNS: scheme, user info, host, port exceptions and IP literals.
pub(super) fn check_static(url: &Url, policy: &NetPolicy) -> Result<Route, NetError> {
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

/// Checks `url` against the SSRF rule without fetching it (scheme, no user info, a host, IP
/// literals judged, names resolved and every address judged), so a submitted URL can be
/// refused with 400; [`SafeClient`](super::SafeClient) checks again at fetch time.
/// Errors: [`NetError::Scheme`], [`NetError::UserInfo`], [`NetError::InvalidUrl`],
/// [`NetError::Forbidden`], [`NetError::Dns`] (no answer in time).
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

/// Why [`GuardedResolver`](super::GuardedResolver) refused a name, carried through
/// `reqwest`'s error chain to become [`NetError::Forbidden`] or [`NetError::Dns`].
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

/// Resolves `host` and judges every address (returned unjudged with `permit_private`).
pub(super) async fn resolve_checked(
    host: &str,
    permit_private: bool,
) -> Result<Vec<IpAddr>, ResolveRefusal> {
    let addrs: Vec<IpAddr> = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|_| ResolveRefusal::Unresolved(host.to_owned()))?
        .map(|sa| sa.ip())
        .collect();
    judge_addresses(host, addrs, permit_private)
}

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
}
