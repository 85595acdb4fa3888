//! The HTTP server's part: where it listens and is reached, how it holds connections, and
//! where the dashboard's built files are.

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

/// The live-reload port of `cargo leptos watch` unless `LEPTOS_RELOAD_PORT` says another
/// (the workspace's `reload-port` in Cargo.toml).
pub const DEFAULT_RELOAD_PORT: u16 = 3001;

/// The listener, the public address, the limits on client connections and the dashboard's
/// files: what start-up binds and serves with, and what the HTTP layer reads while serving
/// (links, cookies' `Secure`, HSTS, the pages' Content Security Policy).
#[derive(Clone)]
pub struct ServerConfig {
    /// `LEPTOS_SITE_ADDR`, default `127.0.0.1:3000`. Port 0 picks a free port (tests).
    pub site_addr: SocketAddr,
    /// `PUBLIC_URL`, default `http://{LEPTOS_SITE_ADDR}`, without a trailing slash: the
    /// base of links in emails and OAuth redirects. When it is https, cookies are `Secure`.
    pub public_url: String,
    /// `HEADER_READ_TIMEOUT_SECS`: longest time a client may take to send a request's head
    /// (request line and header fields), counted from the connection's acceptance or from
    /// the first byte of a next request on a kept-alive connection; default 10 s, 1 to 30 s
    /// (README.md § Security). Then the connection is closed without an answer, so a client
    /// that sends its head slowly ("slow loris") cannot hold a connection.
    pub header_read_timeout: std::time::Duration,
    /// `IDLE_TIMEOUT_SECS`: longest time a kept-alive connection may wait for its next
    /// request after an answer has been sent; default 60 s, 1 s to 1 hour (RFC 9112 § 9.5).
    /// A connection whose answer is still being sent, such as a chat stream, is not idle
    /// and is never closed for this.
    pub idle_timeout: std::time::Duration,
    /// `MAX_CONNECTIONS`: client connections served at once; default 4,096, 1 to 2^20.
    /// Beyond it the server stops accepting until one closes: new connections wait in the
    /// kernel's listen queue (1,024 long) and are served in order as slots free, and when
    /// that queue is full too the kernel turns further attempts away, which clients retry
    /// later. Waiting rather than refusing is what established HTTP servers do: a waiting
    /// connection holds no descriptor or memory of this process, a burst is absorbed
    /// instead of failed, and refusing would mean accepting (a descriptor) only to close
    /// at once. At start the soft limit on open files is raised, up to the hard limit, to
    /// fit this many connections and 1,024 more descriptors (a warning is logged when the
    /// hard limit is lower).
    pub max_connections: usize,
    /// `TRUSTED_PROXIES`: the reverse proxies (load balancers) whose `X-Forwarded-For` is
    /// believed, as comma-separated CIDR ranges or addresses; default none, and the
    /// client's IP is then the TCP peer. From a trusted peer, the client's IP is the
    /// right-most hop of `X-Forwarded-For` that is not trusted
    /// ([`TrustedProxies::client_ip`]).
    pub trusted_proxies: TrustedProxies,
    /// Leptos output: `LEPTOS_OUTPUT_NAME` (default `agentchat`).
    pub leptos_output_name: String,
    /// `LEPTOS_SITE_ROOT`, default `target/site`.
    pub leptos_site_root: String,
    /// `LEPTOS_SITE_PKG_DIR`, default `pkg`.
    pub leptos_site_pkg_dir: String,
    /// The live-reload websocket's port while the site runs under `cargo leptos watch`,
    /// which sets `LEPTOS_WATCH` (and `LEPTOS_RELOAD_PORT`, default 3001, the workspace's
    /// `reload-port`); `None` otherwise. Pages then load the live-reload script, and their
    /// Content Security Policy lets it connect (see `http::security::DashboardPolicy`).
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

    /// Takes `PUBLIC_URL` (when set, without a trailing slash), `HEADER_READ_TIMEOUT_SECS`,
    /// `IDLE_TIMEOUT_SECS`, `MAX_CONNECTIONS`, `TRUSTED_PROXIES`, `LEPTOS_OUTPUT_NAME`,
    /// `LEPTOS_SITE_ROOT`, `LEPTOS_SITE_PKG_DIR` and, under `LEPTOS_WATCH`,
    /// `LEPTOS_RELOAD_PORT` from `settings`. (`LEPTOS_SITE_ADDR` is taken before, by
    /// [`super::Config::from_settings`].)
    ///
    /// Errors: an unparsable reload port (the ranges and the proxies are checked when the
    /// settings are read).
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

    /// The limits on client connections: `HEADER_READ_TIMEOUT_SECS`, `IDLE_TIMEOUT_SECS`
    /// and `MAX_CONNECTIONS`.
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
