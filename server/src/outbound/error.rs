//! [`NetError`]: why an outbound request failed, as a sentence a user understands.

use std::convert::Infallible;

/// Why a URL could not be fetched. `Display` is a sentence for the user, never holding a
/// resolved address or configuration.
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
    /// The page did not arrive within [`FetchLimits::timeout`](super::FetchLimits::timeout).
    #[error("the page took too long to respond")]
    Timeout,
    /// The body is over [`FetchLimits::max_body_bytes`](super::FetchLimits::max_body_bytes) (the
    /// limit).
    #[error("the page is larger than the limit of {0} bytes")]
    TooLarge(usize),
    /// More than [`FetchLimits::max_redirects`](super::FetchLimits::max_redirects) redirects,
    /// or a redirect without a usable `Location`.
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

/// Why [`SafeClient::get_with_hop_check`](super::SafeClient::get_with_hop_check) failed.
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
    pub(super) fn into_net_error(self) -> NetError {
        match self {
            Self::Net(e) => e,
            Self::Refused(never) => match never {},
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbound::{policy::ResolveRefusal, CRAWLER_USER_AGENT};

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
        assert!(CRAWLER_USER_AGENT.starts_with("AgentChat/"));
        assert!(CRAWLER_USER_AGENT.ends_with("(+knowledge crawler)"));
    }
}
