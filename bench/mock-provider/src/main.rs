//! `mock-provider`: runs the mock model provider until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use mock_provider::{IdpKind, MockConfig, MockIdentity, MockIdp, MockProvider};

/// A mock model provider speaking the OpenAI Chat Completions and Anthropic Messages APIs.
///
/// Clients use the printed base URL (ending in `/v1/`). Control markers in the last user
/// message steer single requests, e.g. `[[tokens:200]]` for a 200-word reply. With
/// `--identity-addr`, a mock GitHub OAuth provider runs as well.
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
    /// Also run a mock GitHub (OAuth authorize/token endpoints and the `/api/user` API, with
    /// a consent page) on this address, e.g. `127.0.0.1:8089`. Off when absent.
    #[arg(long)]
    identity_addr: Option<SocketAddr>,
    /// The OAuth client id the mock GitHub accepts.
    #[arg(long, default_value = "mock-github-client")]
    identity_client_id: String,
    /// The OAuth client secret the mock GitHub accepts.
    #[arg(long, default_value = "mock-github-secret")]
    identity_client_secret: String,
    /// The (verified, primary) email of the mock GitHub user.
    #[arg(long, default_value = "octo@example.test")]
    identity_email: String,
    /// The login of the mock GitHub user (its id is 4242).
    #[arg(long, default_value = "octo-tester")]
    identity_login: String,
    /// The display name of the mock GitHub user.
    #[arg(long, default_value = "Octo Tester")]
    identity_name: String,
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
    let identity = match args.identity_addr {
        Some(addr) => {
            let idp = MockIdp::start_on(
                addr,
                IdpKind::Github,
                &args.identity_client_id,
                &args.identity_client_secret,
            )
            .await?;
            idp.set_auto_approve(false);
            idp.set_identity(MockIdentity {
                subject: "4242".to_owned(),
                email: args.identity_email,
                email_verified: true,
                name: args.identity_name,
                login: args.identity_login,
            });
            println!("mock GitHub listening on {}", idp.base_url());
            println!("  authorize URL: {}", idp.authorize_url());
            println!("  token URL:     {}", idp.token_url());
            println!("  API URL:       {}", idp.api_url());
            println!("  client id:     {}", args.identity_client_id);
            Some(idp)
        }
        None => None,
    };
    shutdown_signal().await?;
    drop(identity);
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
