//! Where every HTTP client of the server is built: [`client_builder`] gives each the
//! `User-Agent` of its [`Purpose`] and no automatic redirects (a redirect could point a
//! request at a private address); the [`SafeClient`](super::SafeClient) follows redirects
//! itself, the others take a 3xx as the answer. Model-provider clients are built inside `genai`.

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
    /// Third-party sign-in (OAuth 2.0, OpenID Connect, GitHub's API, which requires a
    /// `User-Agent`): [`USER_AGENT`].
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

/// A `reqwest::ClientBuilder` for `purpose` (its `User-Agent`, no redirects); timeouts and the
/// rest are the caller's.
pub fn client_builder(purpose: Purpose) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .redirect(redirect::Policy::none())
        .user_agent(purpose.user_agent())
}
