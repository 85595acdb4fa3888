//! The metrics part: who may read `GET /metrics` and where (README § Metrics).

use std::net::SocketAddr;

use secrecy::{ExposeSecret, SecretString};

use super::Settings;

/// Shortest `METRICS_TOKEN` accepted: 16 characters (with the 66 characters allowed, over
/// 96 bits even if chosen from letters and digits only).
pub const MIN_METRICS_TOKEN_CHARS: usize = 16;

/// Access to the Prometheus metrics ([`crate::metrics`], [`crate::http::metrics`]). With
/// neither field set nothing is recorded and `GET /metrics` is 404.
#[derive(Clone, Default)]
pub struct MetricsConfig {
    /// `METRICS_TOKEN`: the bearer token a scraper presents; with it `GET /metrics` is also
    /// served on the main port (401 without it) and required on `METRICS_ADDR`. Never logged.
    pub token: Option<SecretString>,
    /// `METRICS_ADDR`: a second listener serving only `GET /metrics`; port 0 picks one.
    pub addr: Option<SocketAddr>,
}

impl std::fmt::Debug for MetricsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is left out on purpose.
        f.debug_struct("MetricsConfig")
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("addr", &self.addr)
            .finish()
    }
}

impl MetricsConfig {
    /// Whether metrics are recorded and served: `METRICS_TOKEN` or `METRICS_ADDR` is set.
    pub fn enabled(&self) -> bool {
        self.token.is_some() || self.addr.is_some()
    }

    /// Takes `METRICS_TOKEN` and `METRICS_ADDR` from `settings` when set.
    ///
    /// Errors (naming the variable, never the token): a token shorter than
    /// [`MIN_METRICS_TOKEN_CHARS`] or outside RFC 6750's `b64token`; an address equal to
    /// `LEPTOS_SITE_ADDR`.
    pub(super) fn apply(&mut self, settings: &Settings) -> anyhow::Result<()> {
        if let Some(token) = &settings.metrics_token {
            let token = SecretString::from(token.trim().to_string());
            check_token(token.expose_secret())?;
            self.token = Some(token);
        }
        if let Some(addr) = settings.metrics_addr {
            anyhow::ensure!(
                addr.port() == 0 || addr != settings.leptos_site_addr,
                "METRICS_ADDR must differ from LEPTOS_SITE_ADDR: the metrics listener is a \
                 second listener (to serve metrics on the service's port, set METRICS_TOKEN)"
            );
            self.addr = Some(addr);
        }
        Ok(())
    }
}

/// Checks `METRICS_TOKEN`: RFC 6750 § 2.1 `b64token`, at least [`MIN_METRICS_TOKEN_CHARS`].
fn check_token(token: &str) -> anyhow::Result<()> {
    let body = token.trim_end_matches('=');
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~+/".contains(c);
    anyhow::ensure!(
        !body.is_empty() && body.chars().all(allowed),
        "METRICS_TOKEN may hold only letters, digits and -._~+/ (then = padding), as a bearer \
         token does (RFC 6750)"
    );
    anyhow::ensure!(
        token.chars().count() >= MIN_METRICS_TOKEN_CHARS,
        "METRICS_TOKEN must be at least {MIN_METRICS_TOKEN_CHARS} characters; generate one with \
         `openssl rand -hex 32`"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> anyhow::Result<MetricsConfig> {
        // The service listens on LEPTOS_SITE_ADDR's default, 127.0.0.1:3000.
        let settings = Settings::from_vars(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })?;
        let mut config = MetricsConfig::default();
        config.apply(&settings)?;
        Ok(config)
    }

    #[test]
    fn unset_means_off() {
        let config = read(&[]).unwrap();
        assert!(!config.enabled());
        assert!(config.token.is_none() && config.addr.is_none());
    }

    #[test]
    fn a_token_and_an_address_are_read_and_checked() {
        let token = "0123456789abcdef0123456789abcdef";
        let config = read(&[("METRICS_TOKEN", token), ("METRICS_ADDR", "127.0.0.1:9100")]).unwrap();
        assert!(config.enabled());
        assert_eq!(config.token.as_ref().unwrap().expose_secret(), token);
        assert_eq!(config.addr, Some("127.0.0.1:9100".parse().unwrap()));
        assert!(!format!("{config:?}").contains(token));
        assert!(read(&[("METRICS_TOKEN", "abc/DEF+ghi_jkl.mno~p==")]).is_ok());

        for bad in [
            "short-token",
            "has spaces in the token",
            "quote\"d-0123456789abc",
            "==================",
        ] {
            let err = read(&[("METRICS_TOKEN", bad)]).err().unwrap().to_string();
            assert!(err.starts_with("METRICS_TOKEN "), "{err}");
            assert!(!err.contains(bad), "the token is not quoted: {err}");
        }
        for bad in ["9100", "localhost", "127.0.0.1:x"] {
            let err = read(&[("METRICS_ADDR", bad)]).err().unwrap().to_string();
            // The settings' parser quotes the value and the option before the rule.
            assert!(
                err.ends_with("METRICS_ADDR must be host:port, e.g. 127.0.0.1:9100"),
                "{err}"
            );
        }
        let err = read(&[("METRICS_ADDR", "127.0.0.1:3000")])
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.starts_with("METRICS_ADDR must differ from LEPTOS_SITE_ADDR"),
            "{err}"
        );
    }
}
