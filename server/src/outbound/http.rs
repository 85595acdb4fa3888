//! Where every HTTP client of the server is built.
//!
//! [`client_builder`] starts each `reqwest::Client` the server uses to reach another host —
//! the [`SafeClient`](super::SafeClient) of crawls and webhook deliveries, the sign-in client
//! (OAuth 2.0 and OpenID Connect providers, GitHub's API) and the channel client (Telegram
//! Bot API, Slack Web API) — with what they all share:
//!
//! - the `User-Agent` of the client's [`Purpose`];
//! - no automatic redirects (`redirect::Policy::none()`): following a redirect would let an
//!   answer point a request anywhere, private addresses included (SSRF). The
//!   [`SafeClient`](super::SafeClient) follows redirects itself, judging every hop; the other
//!   clients take a 3xx as the answer.
//!
//! Each caller adds its own settings: its timeouts, and for the
//! [`SafeClient`](super::SafeClient) the guarded resolver, no proxy and no `Referer`. The
//! model-provider and embedding clients are built inside `genai`, on its own `reqwest`
//! version, and do not start here.

use reqwest::redirect;

/// The `User-Agent` of sign-in and channel requests: `AgentChat/<version>`.
pub const USER_AGENT: &str = concat!("AgentChat/", env!("CARGO_PKG_VERSION"));

/// The `User-Agent` of every knowledge-base request: `AgentChat/<version> (+knowledge crawler)`.
pub const CRAWLER_USER_AGENT: &str = concat!(
    "AgentChat/",
    env!("CARGO_PKG_VERSION"),
    " (+knowledge crawler)"
);

/// The `User-Agent` of webhook deliveries: `AgentChat-Webhooks/<version>`.
pub const WEBHOOK_USER_AGENT: &str = concat!("AgentChat-Webhooks/", env!("CARGO_PKG_VERSION"));

/// What an outbound client is for; it decides the `User-Agent` the client names itself with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Knowledge-base crawls: [`CRAWLER_USER_AGENT`].
    Crawl,
    /// Webhook deliveries: [`WEBHOOK_USER_AGENT`].
    Webhooks,
    /// Third-party sign-in — OAuth 2.0 and OpenID Connect providers, and GitHub's API, which
    /// refuses requests without a `User-Agent`: [`USER_AGENT`].
    SignIn,
    /// The provider APIs of live channels (Telegram Bot API, Slack Web API): [`USER_AGENT`].
    Channels,
    /// Agents' custom HTTP actions: [`USER_AGENT`].
    Tools,
}

impl Purpose {
    /// The `User-Agent` header value of clients built for this purpose.
    pub const fn user_agent(self) -> &'static str {
        match self {
            Self::Crawl => CRAWLER_USER_AGENT,
            Self::Webhooks => WEBHOOK_USER_AGENT,
            Self::SignIn | Self::Channels | Self::Tools => USER_AGENT,
        }
    }
}

/// A `reqwest::ClientBuilder` for `purpose`: its `User-Agent`
/// ([`Purpose::user_agent`]) and no automatic redirects (see the module documentation).
/// Timeouts and everything else are the caller's; the builder keeps `reqwest`'s defaults
/// otherwise.
pub fn client_builder(purpose: Purpose) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .redirect(redirect::Policy::none())
        .user_agent(purpose.user_agent())
}
