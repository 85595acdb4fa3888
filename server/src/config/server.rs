//! The HTTP server's part: listener, public address, connections and dashboard files.

use std::net::SocketAddr;

use anyhow::Context;

use super::Settings;
use crate::{
    connection::{
        ConnectionLimits, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT,
        DEFAULT_MAX_CONNECTIONS,
    },
    forwarded::TrustedProxies,
};

/// The live-reload port of `cargo leptos watch` unless `LEPTOS_RELOAD_PORT` says another.
pub const DEFAULT_RELOAD_PORT: u16 = 3001;

/// The listener, public address, client connection limits and the dashboard's files.
#[derive(Clone)]
pub struct ServerConfig {
    /// `LEPTOS_SITE_ADDR`, default `127.0.0.1:3000`. Port 0 picks a free port (tests).
    pub site_addr: SocketAddr,
    /// `PUBLIC_URL`, default `http://{LEPTOS_SITE_ADDR}`, no trailing slash; https sets `Secure`.
    pub public_url: String,
    /// `HEADER_READ_TIMEOUT_SECS`: longest time to send a request's head; then the connection
    /// closes unanswered (slow-loris, README.md § Security).
    pub header_read_timeout: std::time::Duration,
    /// `IDLE_TIMEOUT_SECS`: longest wait of a kept-alive connection for its next request.
    pub idle_timeout: std::time::Duration,
    /// `MAX_CONNECTIONS`: client connections served at once; beyond, new ones wait in the kernel's
    /// listen queue.
    pub max_connections: usize,
    /// `TRUSTED_PROXIES`, whose `X-Forwarded-For` is believed ([`TrustedProxies::client_ip`]).
    pub trusted_proxies: TrustedProxies,
    /// Leptos output: `LEPTOS_OUTPUT_NAME` (default `agentchat`).
    pub leptos_output_name: String,
    /// `LEPTOS_SITE_ROOT`, default `target/site`.
    pub leptos_site_root: String,
    /// `LEPTOS_SITE_PKG_DIR`, default `pkg`.
    pub leptos_site_pkg_dir: String,
    /// `LEPTOS_RELOAD_PORT` under `cargo leptos watch`, else `None` (pages load the reload script).
    pub live_reload_port: Option<u16>,
}

impl ServerConfig {
    /// The defaults for a server on `site_addr`, with no environment read.
    pub fn new(site_addr: SocketAddr) -> Self {
        Self {
            site_addr,
            public_url: format!("http://{site_addr}"),
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            trusted_proxies: TrustedProxies::default(),
            leptos_output_name: "agentchat".into(),
            leptos_site_root: "target/site".into(),
            leptos_site_pkg_dir: "pkg".into(),
            live_reload_port: None,
        }
    }

    /// Takes the server variables from `settings`. Errors: an unparsable reload port.
    pub(super) fn apply(&mut self, settings: &Settings) -> anyhow::Result<()> {
        if let Some(url) = &settings.public_url {
            self.public_url = url.trim_end_matches('/').to_string();
        }
        self.header_read_timeout =
            std::time::Duration::from_secs(settings.header_read_timeout_secs);
        self.idle_timeout = std::time::Duration::from_secs(settings.idle_timeout_secs);
        self.max_connections = settings.max_connections;
        if let Some(proxies) = &settings.trusted_proxies {
            self.trusted_proxies = proxies.clone();
        }
        self.leptos_output_name = settings.leptos_output_name.clone();
        self.leptos_site_root = settings.leptos_site_root.clone();
        self.leptos_site_pkg_dir = settings.leptos_site_pkg_dir.clone();
        if settings.leptos_watch.is_some() {
            self.live_reload_port = Some(match &settings.leptos_reload_port {
                Some(v) => v
                    .trim()
                    .parse()
                    .context("LEPTOS_RELOAD_PORT must be a port number")?,
                None => DEFAULT_RELOAD_PORT,
            });
        }
        Ok(())
    }

    /// `HEADER_READ_TIMEOUT_SECS`, `IDLE_TIMEOUT_SECS` and `MAX_CONNECTIONS` as limits.
    pub fn connection_limits(&self) -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: self.header_read_timeout,
            idle_timeout: self.idle_timeout,
            max_connections: self.max_connections,
        }
    }

    /// Whether cookies must carry `Secure` (PUBLIC_URL is https).
    pub fn secure_cookies(&self) -> bool {
        self.public_url.starts_with("https://")
    }
}
