//! URLs that users give the service to request: a site to crawl, a webhook receiver.
//! Checked when they are submitted, so that a client learns at once that a URL cannot work;
//! the SSRF-safe client checks every request again when it is made.

use crate::outbound::{self as net, NetError, NetPolicy};

/// Longest URL accepted (crawl starts, webhook receivers), in bytes.
pub const URL_MAX: usize = app::api::limits::URL_MAX;

/// Why a submitted URL cannot be used. The texts are the messages clients are shown.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    /// Empty after trimming.
    #[error("url is required")]
    Missing,
    /// Longer than [`URL_MAX`] bytes.
    #[error("url must be at most {URL_MAX} bytes")]
    TooLong,
    /// Not a URL (WHATWG URL Standard parsing, as the `url` crate does it).
    #[error("url is not a valid URL ({0})")]
    Malformed(url::ParseError),
    /// Not http or https, or an address the SSRF rule refuses; `purpose` says what the URL
    /// was for ("be crawled", "receive webhooks").
    #[error("url cannot {purpose}: {reason}")]
    Refused {
        /// What the URL was submitted for, as a verb phrase.
        purpose: &'static str,
        /// What the rule refused.
        reason: NetError,
    },
}

/// Checks a URL the service will request for `purpose`: http(s), at most [`URL_MAX`] bytes,
/// not a forbidden address as far as known now ([`net::check_url`]; checked again when
/// requested). Errors: [`UrlError`].
pub async fn check(
    raw: &str,
    policy: &NetPolicy,
    purpose: &'static str,
) -> Result<url::Url, UrlError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(UrlError::Missing);
    }
    if raw.len() > URL_MAX {
        return Err(UrlError::TooLong);
    }
    let url = url::Url::parse(raw).map_err(UrlError::Malformed)?;
    net::check_url(&url, policy)
        .await
        .map_err(|reason| UrlError::Refused { purpose, reason })?;
    Ok(url)
}

/// The ASCII serialization of a web origin (lowercased, default port dropped), as browsers
/// send `Origin`. Errors: not an http(s) URL with only scheme and host.
pub fn origin(raw: &str) -> Result<String, String> {
    let url = url::Url::parse(raw).map_err(|_| {
        format!("contains {raw:?}, which is not an origin such as https://example.com")
    })?;
    let plain = url.path() == "/" && url.query().is_none() && url.fragment().is_none();
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() || !plain {
        return Err(format!(
            "contains {raw:?}, which is not an origin such as https://example.com (no path)"
        ));
    }
    Ok(url.origin().ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn urls_are_checked_before_they_are_requested() {
        let policy = NetPolicy::default();
        let err = check("  ", &policy, "be crawled").await.unwrap_err();
        assert_eq!(err.to_string(), "url is required");
        let long = format!("https://example.com/{}", "a".repeat(URL_MAX));
        let err = check(&long, &policy, "be crawled").await.unwrap_err();
        assert_eq!(err.to_string(), "url must be at most 2048 bytes");
        let err = check("not a url", &policy, "be crawled").await.unwrap_err();
        assert!(
            err.to_string().starts_with("url is not a valid URL ("),
            "{err}"
        );
        let err = check("http://127.0.0.1/", &policy, "receive webhooks")
            .await
            .unwrap_err();
        assert!(
            err.to_string().starts_with("url cannot receive webhooks: "),
            "{err}"
        );
    }
}
