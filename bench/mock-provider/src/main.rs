//! `mock-provider`: runs the mock model provider until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use mock_provider::{MockConfig, MockProvider};

/// A mock model provider speaking the OpenAI Chat Completions and Anthropic Messages APIs.
///
/// Clients use the printed base URL (ending in `/v1/`). Control markers in the last user
/// message steer single requests, e.g. `[[tokens:200]]` for a 200-word reply.
#[derive(Debug, Parser)]
#[command(name = "mock-provider", version)]
struct Args {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:8088")]
    addr: SocketAddr,
    /// Milliseconds waited before the first byte of every answer.
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
    /// Milliseconds waited between two streamed token chunks.
    #[arg(long, default_value_t = 0)]
    token_interval_ms: u64,
    /// The API key clients must present; any request is accepted when absent.
    #[arg(long)]
    api_key: Option<String>,
    /// A fixed reply text instead of echoing the last user message.
    #[arg(long)]
    reply: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = MockConfig {
        api_key: args.api_key,
        delay: Duration::from_millis(args.delay_ms),
        token_interval: Duration::from_millis(args.token_interval_ms),
        reply: args.reply,
        // Nobody reads them, and a long benchmark would pile them up.
        record_requests: false,
        ..MockConfig::default()
    };
    let provider = MockProvider::start_on(args.addr, config).await?;
    println!("mock-provider listening on {}", provider.base_url());
    shutdown_signal().await?;
    drop(provider);
    Ok(())
}

/// Waits for Ctrl-C or, on Unix, SIGTERM.
async fn shutdown_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            result = tokio::signal::ctrl_c() => result?,
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await?;
    Ok(())
}
