//! A connection to Redis (`REDIS_URL`) and its readiness check: one `PING`
//! (<https://redis.io/docs/latest/commands/ping/>) answered `PONG`. The handle is one
//! multiplexed `ConnectionManager` shared by clones, opened at the first command and again
//! after it breaks, so an instance starts while Redis is down.

use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::readiness::Ping;

/// Longest wait for Redis: to connect, and for the answer to a command.
pub const PING_TIMEOUT: Duration = Duration::from_secs(1);

/// A lazily opened, shared connection to one Redis server.
#[derive(Clone)]
pub struct RedisHandle {
    manager: ConnectionManager,
}

impl std::fmt::Debug for RedisHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold a password: it is not kept, and not printed.
        f.debug_struct("RedisHandle").finish_non_exhaustive()
    }
}

impl RedisHandle {
    /// A handle on the server of `url` (`redis://[user:password@]host:port[/db]`, or `rediss://`
    /// where supported), not yet connected; each attempt and answer is bounded by
    /// [`PING_TIMEOUT`]. Needs a Tokio runtime. Errors: a URL the `redis` crate refuses (not
    /// echoed: it may hold a password).
    pub fn open(url: &str) -> anyhow::Result<Self> {
        let client = redis::Client::open(url)
            .map_err(|e| anyhow::anyhow!("REDIS_URL is not a Redis URL: {:?}", e.kind()))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(PING_TIMEOUT))
            .set_response_timeout(Some(PING_TIMEOUT))
            .set_number_of_retries(0);
        let manager = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| anyhow::anyhow!("cannot set up the Redis connection: {:?}", e.kind()))?;
        Ok(Self { manager })
    }

    /// The shared connection (a clone is cheap and pipelines over the same socket).
    pub fn connection(&self) -> ConnectionManager {
        self.manager.clone()
    }
}

#[async_trait]
impl Ping for RedisHandle {
    fn name(&self) -> &'static str {
        "redis"
    }

    /// Errors: no connection, no answer within [`PING_TIMEOUT`], or not `PONG` (e.g. `NOAUTH`).
    async fn ping(&self) -> anyhow::Result<()> {
        let mut connection = self.connection();
        let answer = tokio::time::timeout(
            PING_TIMEOUT,
            redis::cmd("PING").query_async::<String>(&mut connection),
        )
        .await
        .map_err(|_| anyhow::anyhow!("Redis did not answer PING within {PING_TIMEOUT:?}"))??;
        anyhow::ensure!(answer == "PONG", "Redis answered PING with {answer:?}");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_redis() -> String {
        std::env::var("AGENTCHAT_TEST_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
    }

    #[tokio::test]
    async fn a_running_server_answers_ping() {
        let url = test_redis();
        let redis = RedisHandle::open(&url).unwrap();
        redis.ping().await.unwrap_or_else(|e| {
            panic!("Redis at {url} must be running for this test (scripts/services.sh): {e}")
        });
        assert_eq!(redis.name(), "redis");
    }

    #[tokio::test]
    async fn a_closed_port_fails_within_the_timeout() {
        // Port 1 (tcpmux) is closed on any machine these tests run on.
        let redis = RedisHandle::open("redis://127.0.0.1:1").unwrap();
        let started = std::time::Instant::now();
        assert!(redis.ping().await.is_err());
        assert!(
            started.elapsed() < PING_TIMEOUT * 2,
            "{:?}",
            started.elapsed()
        );
        assert!(redis.ping().await.is_err(), "and again");
    }

    #[test]
    fn a_bad_url_is_refused_without_repeating_it() {
        let err = RedisHandle::open("http://user:s3cret@host")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("REDIS_URL is not a Redis URL"), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
    }
}
