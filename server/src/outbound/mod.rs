//! Outbound HTTP: every request the server makes to another host.
//!
//! - [`policy`]: which addresses may be reached, and why — the SSRF rule, the
//!   `ALLOWED_PRIVATE_HOSTS` exceptions, and [`check_url`] for URLs as they are submitted.
//! - [`safe_client`]: [`SafeClient`], the client of crawls and webhook deliveries — DNS
//!   answers judged and pinned by [`GuardedResolver`], redirects followed (and judged) hop by
//!   hop, and size and time limits ([`FetchLimits`]).
//! - [`http`]: [`client_builder`], where every `reqwest::Client` of the server is started
//!   (the `User-Agent` of its [`Purpose`], no automatic redirects); the sign-in and channel
//!   clients start there too.
//! - [`error`]: [`NetError`], why a URL could not be fetched, as a sentence for the user.
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
//! - **Redirects** are never followed by `reqwest` (`redirect::Policy::none()`, set by
//!   [`client_builder`]); [`SafeClient`] follows them itself, judging every hop like the first
//!   request.
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

pub mod error;
pub mod http;
pub mod policy;
pub mod safe_client;

pub use error::{HopError, NetError};
pub use http::{client_builder, Purpose, CRAWLER_USER_AGENT, USER_AGENT, WEBHOOK_USER_AGENT};
pub use policy::{check_url, is_forbidden_ip, NetPolicy, PolicyError, ResolveRefusal};
pub use safe_client::{FetchLimits, Fetched, GuardedResolver, SafeClient};
