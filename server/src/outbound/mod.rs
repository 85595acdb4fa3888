//! Outbound HTTP: every request the server makes to another host.
//!
//! - [`policy`]: the SSRF rule ([`is_forbidden_ip`]), the `ALLOWED_PRIVATE_HOSTS` exceptions,
//!   and [`check_url`] for URLs as they are submitted.
//! - [`safe_client`]: [`SafeClient`], the client of crawls, webhooks and HTTP tools: DNS
//!   judged and pinned by [`GuardedResolver`], redirects judged hop by hop, [`FetchLimits`].
//! - [`http`]: [`client_builder`], where every `reqwest::Client` starts ([`Purpose`]'s
//!   `User-Agent`, no automatic redirects).
//! - [`error`]: [`NetError`], why a URL could not be fetched, as a sentence for the user.
//!
//! The rule: only `http`/`https` URLs, and no request reaches a forbidden address, after
//! DNS, on any redirect hop, or as an IP literal in any notation. How it is enforced
//! (resolver, literals, redirects, proxies, port-bound exceptions): docs/security.md § Outbound
//! requests.

pub mod error;
pub mod http;
pub mod policy;
pub mod safe_client;

pub use error::{HopError, NetError};
pub use http::{client_builder, Purpose, CRAWLER_USER_AGENT, USER_AGENT, WEBHOOK_USER_AGENT};
pub use policy::{check_url, is_forbidden_ip, NetPolicy, PolicyError, ResolveRefusal};
pub use safe_client::{FetchLimits, Fetched, GuardedResolver, SafeClient, Validators};
