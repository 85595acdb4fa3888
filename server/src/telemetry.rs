//! Structured logs through `tracing`: human-readable by default, JSON lines with
//! `LOG_FORMAT=json`; the level comes from `RUST_LOG` (default `info`).

use tracing_subscriber::{fmt, EnvFilter};

/// Installs the global subscriber (once; later calls do nothing).
pub fn init() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=info,leptos=warn"));
    let json = std::env::var("LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    let builder = fmt().with_env_filter(filter).with_target(false);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
