//! Structured logs through `tracing`: human-readable by default, JSON lines with
//! `LOG_FORMAT=json`; the level comes from `RUST_LOG` (default `info`).

use tracing_subscriber::{fmt, EnvFilter};

/// The log filter without `RUST_LOG`. genai is held to errors: its OpenAI stream reader
/// warns "EMPTY CHOICE CONTENT" for the role-only first chunk that OpenAI-compatible
/// servers send, i.e. once per chat.
pub const DEFAULT_FILTER: &str = "info,sqlx=warn,tower_http=info,leptos=warn,genai=error";

/// Installs the global subscriber (once; later calls do nothing).
pub fn init() {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let json = std::env::var("LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    let builder = fmt().with_env_filter(filter).with_target(false);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

#[cfg(test)]
mod tests {
    use std::{
        io::Write,
        sync::{Arc, Mutex},
    };

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_default_filter_keeps_genai_to_errors() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = fmt()
            .with_env_filter(EnvFilter::new(DEFAULT_FILTER))
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(target: "genai::adapter::adapters::openai::streamer", "EMPTY CHOICE CONTENT");
            tracing::error!(target: "genai::webc", "genai failure");
            tracing::info!(target: "agentchat::chat", "service line");
        });
        let logged = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(!logged.contains("EMPTY CHOICE CONTENT"), "{logged}");
        assert!(logged.contains("genai failure"), "{logged}");
        assert!(logged.contains("service line"), "{logged}");
    }
}
