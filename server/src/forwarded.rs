//! The client's address behind reverse proxies: the right-most `X-Forwarded-For` address
//! that is not one of our `TRUSTED_PROXIES` (MDN, "X-Forwarded-For", § Selecting an IP
//! address; as RFC 7239 § 8.1).

use std::{fmt, net::IpAddr};

use http::HeaderMap;
use ipnet::IpNet;

/// `X-Forwarded-For`: the de facto standard header of the addresses a request came
/// through, client first, each proxy appending its own peer.
pub const X_FORWARDED_FOR: http::HeaderName = http::HeaderName::from_static("x-forwarded-for");

/// The proxies whose `X-Forwarded-For` is believed (`TRUSTED_PROXIES`): a list of address
/// ranges, empty by default (the header is then ignored and the client is the TCP peer).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl fmt::Debug for TrustedProxies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(ToString::to_string))
            .finish()
    }
}

/// An entry of `TRUSTED_PROXIES` that is neither an IP address nor a CIDR range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("TRUSTED_PROXIES: `{0}` is not an IP address or CIDR range (e.g. 10.0.0.0/8, 192.0.2.7, 2001:db8::/32)")]
pub struct BadProxyEntry(pub String);

impl TrustedProxies {
    /// Parses comma-separated CIDR ranges and bare addresses (`/32` or `/128`); blanks are
    /// ignored, and host bits in a range are dropped.
    ///
    /// Errors: the first entry that is neither ([`BadProxyEntry`] names it).
    pub fn parse(raw: &str) -> Result<Self, BadProxyEntry> {
        raw.split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                entry
                    .parse::<IpNet>()
                    .map(|net| net.trunc())
                    .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| BadProxyEntry(entry.to_string()))
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Whether no proxy is trusted (the default).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `ip` is a trusted proxy; IPv4-mapped IPv6 compares as IPv4.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client's address for a request from `peer`: `peer` itself when untrusted;
    /// otherwise the right-most untrusted hop of the joined `X-Forwarded-For` fields
    /// (RFC 9110 § 5.3), the left-most when all are trusted, `peer` with none. Hops may
    /// carry ports or brackets; empty elements are skipped (RFC 9110 § 5.6.1). A malformed
    /// hop stops the walk, and the nearest trusted address to its right is the client, so
    /// text a client controls never picks an address.
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if self.0.is_empty() || !self.contains(peer) {
            return peer;
        }
        let mut nearest = peer.to_canonical();
        for field in headers.get_all(X_FORWARDED_FOR).iter().rev() {
            let Ok(field) = field.to_str() else {
                return nearest;
            };
            for hop in field.rsplit(',').map(str::trim) {
                if hop.is_empty() {
                    continue;
                }
                let Some(ip) = parse_hop(hop) else {
                    return nearest;
                };
                if !self.contains(ip) {
                    return ip;
                }
                nearest = ip;
            }
        }
        nearest
    }
}

/// One `X-Forwarded-For` hop as an address (with or without port or brackets);
/// IPv4-mapped IPv6 becomes IPv4.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let ip = if let Ok(ip) = hop.parse::<IpAddr>() {
        ip
    } else if let Ok(socket) = hop.parse::<std::net::SocketAddr>() {
        socket.ip()
    } else {
        hop.strip_prefix('[')?
            .strip_suffix(']')?
            .parse::<std::net::Ipv6Addr>()
            .ok()?
            .into()
    };
    Some(ip.to_canonical())
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn forwarded(fields: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for field in fields {
            headers.append(X_FORWARDED_FOR, HeaderValue::from_str(field).unwrap());
        }
        headers
    }

    fn proxies(raw: &str) -> TrustedProxies {
        TrustedProxies::parse(raw).unwrap()
    }

    #[test]
    fn entries_are_ranges_or_bare_addresses() {
        let list = proxies(" 10.0.0.0/8, 192.0.2.7 ,,2001:db8::/32, ::1, 172.16.5.4/12");
        assert_eq!(
            format!("{list:?}"),
            "[\"10.0.0.0/8\", \"192.0.2.7/32\", \"2001:db8::/32\", \"::1/128\", \"172.16.0.0/12\"]"
        );
        assert!(list.contains(ip("10.200.3.4")));
        assert!(list.contains(ip("192.0.2.7")));
        assert!(!list.contains(ip("192.0.2.8")), "a bare address is /32");
        assert!(list.contains(ip("2001:db8:1::9")));
        assert!(list.contains(ip("::1")));
        assert!(!list.contains(ip("::2")), "a bare IPv6 address is /128");
        assert!(
            list.contains(ip("172.31.0.1")),
            "host bits mean the network"
        );
        assert!(
            list.contains(ip("::ffff:10.0.0.1")),
            "IPv4-mapped addresses are compared as IPv4"
        );
        assert!(TrustedProxies::parse("").unwrap().is_empty());
        assert!(TrustedProxies::parse(" , ").unwrap().is_empty());
    }

    #[test]
    fn a_bad_entry_is_named() {
        for (raw, bad) in [
            ("10.0.0.0/8,10.0.0.0/33", "10.0.0.0/33"),
            ("lb.example.com", "lb.example.com"),
            ("10.0.0.1, 300.1.1.1", "300.1.1.1"),
            ("10.0.0.0/", "10.0.0.0/"),
            ("fe80::1%eth0", "fe80::1%eth0"),
        ] {
            let err = TrustedProxies::parse(raw).unwrap_err();
            assert_eq!(err, BadProxyEntry(bad.into()), "{raw}");
            let message = err.to_string();
            assert!(message.starts_with("TRUSTED_PROXIES: "), "{message}");
            assert!(message.contains(&format!("`{bad}`")), "{message}");
        }
    }

    #[test]
    fn without_trusted_proxies_the_client_is_the_peer() {
        let none = TrustedProxies::default();
        let headers = forwarded(&["203.0.113.9"]);
        assert_eq!(none.client_ip(ip("10.0.0.1"), &headers), ip("10.0.0.1"));
    }

    #[test]
    fn the_header_of_an_untrusted_peer_is_ignored() {
        let list = proxies("10.0.0.0/8");
        let spoofed = forwarded(&["203.0.113.9", "10.0.0.2"]);
        assert_eq!(
            list.client_ip(ip("198.51.100.1"), &spoofed),
            ip("198.51.100.1")
        );
    }

    #[test]
    fn the_client_is_the_right_most_untrusted_hop() {
        let list = proxies("10.0.0.0/8");
        let peer = ip("10.0.0.1");
        // The client sent its own header; the proxy appended the real client.
        let headers = forwarded(&["6.6.6.6, 203.0.113.9"]);
        assert_eq!(list.client_ip(peer, &headers), ip("203.0.113.9"));
        // Two proxies of ours in a row.
        let headers = forwarded(&["6.6.6.6, 203.0.113.9, 10.1.1.1"]);
        assert_eq!(list.client_ip(peer, &headers), ip("203.0.113.9"));
        // The same hops over several fields, joined in order.
        let headers = forwarded(&["6.6.6.6", "203.0.113.9", "10.1.1.1"]);
        assert_eq!(list.client_ip(peer, &headers), ip("203.0.113.9"));
        let headers = forwarded(&["6.6.6.6, 203.0.113.9", "10.1.1.1, 10.2.2.2"]);
        assert_eq!(list.client_ip(peer, &headers), ip("203.0.113.9"));
        // IPv6 hops.
        let list = proxies("10.0.0.0/8, 2001:db8::/32");
        let headers = forwarded(&["2001:db8:ffff::1, 2a00:1450::5, 2001:db8::7"]);
        assert_eq!(list.client_ip(peer, &headers), ip("2a00:1450::5"));
    }

    #[test]
    fn when_every_hop_is_trusted_the_left_most_is_the_client() {
        let list = proxies("10.0.0.0/8");
        let headers = forwarded(&["10.9.9.9, 10.1.1.1"]);
        assert_eq!(list.client_ip(ip("10.0.0.1"), &headers), ip("10.9.9.9"));
        // No header at all: the peer.
        assert_eq!(
            list.client_ip(ip("10.0.0.1"), &HeaderMap::new()),
            ip("10.0.0.1")
        );
        // Only empty elements: the peer.
        let headers = forwarded(&[" , ,"]);
        assert_eq!(list.client_ip(ip("10.0.0.1"), &headers), ip("10.0.0.1"));
    }

    #[test]
    fn ports_brackets_spaces_and_empty_elements_are_read() {
        let list = proxies("10.0.0.0/8");
        let peer = ip("10.0.0.1");
        for (field, client) in [
            ("203.0.113.9:4711", "203.0.113.9"),
            ("[2a00:1450::5]:443", "2a00:1450::5"),
            ("[2a00:1450::5]", "2a00:1450::5"),
            ("  203.0.113.9  ,, 10.1.1.1 ,", "203.0.113.9"),
            ("::ffff:203.0.113.9", "203.0.113.9"),
        ] {
            assert_eq!(
                list.client_ip(peer, &forwarded(&[field])),
                ip(client),
                "{field}"
            );
        }
        assert_eq!(
            list.client_ip(ip("::ffff:10.0.0.1"), &forwarded(&["203.0.113.9"])),
            ip("203.0.113.9"),
            "an IPv4-mapped peer is trusted as its IPv4 address"
        );
    }

    #[test]
    fn a_malformed_hop_stops_the_walk_at_the_nearest_trusted_address() {
        let list = proxies("10.0.0.0/8");
        let peer = ip("10.0.0.1");
        // Nothing to the right of the malformed hop: the peer.
        for field in [
            "unknown",
            "203.0.113.9, garbage",
            "10.1.1.1:99999",
            "_hidden",
        ] {
            assert_eq!(list.client_ip(peer, &forwarded(&[field])), peer, "{field}");
        }
        // A trusted hop to its right: that proxy, never an address left of it.
        let headers = forwarded(&["203.0.113.9, unknown, 10.1.1.1"]);
        assert_eq!(list.client_ip(peer, &headers), ip("10.1.1.1"));
        let headers = forwarded(&["203.0.113.9", "not-an-ip", "10.2.2.2, 10.1.1.1"]);
        assert_eq!(list.client_ip(peer, &headers), ip("10.2.2.2"));
        // A field that is not visible ASCII is malformed as a whole.
        let mut headers = forwarded(&["203.0.113.9"]);
        headers.append(
            X_FORWARDED_FOR,
            HeaderValue::from_bytes(b"10.1.1.1, \xff").unwrap(),
        );
        assert_eq!(list.client_ip(peer, &headers), peer);
        // An untrusted hop right of a malformed one is found first.
        let headers = forwarded(&["garbage, 203.0.113.9"]);
        assert_eq!(list.client_ip(peer, &headers), ip("203.0.113.9"));
    }
}
