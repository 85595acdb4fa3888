//! The mail-bombing guard (docs/api.md § Rate limits per plan): a recipient is not mailed
//! again for the same purpose within [`MAIL_COOLDOWN`]; in process, or shared in Redis.

use std::time::Duration;

use moka::sync::Cache;
use sha2::{Digest, Sha256};

use crate::ratelimit::SharedRedis;

/// How long a recipient is not mailed again for the same purpose: one minute.
pub const MAIL_COOLDOWN: Duration = Duration::from_secs(60);

/// Recipients mailed in the last minute, by `{purpose}|{email}`.
#[derive(Clone)]
pub enum MailCooldown {
    /// In this process (one instance).
    Local(Cache<String, ()>),
    /// In Redis: `{prefix}mail:{sha256(purpose|email)}` set `NX PX` for [`MAIL_COOLDOWN`];
    /// `fallback` answers while Redis does not.
    Shared {
        /// The shared connection and key prefix.
        redis: SharedRedis,
        /// In-process cooldown, also told of every mail Redis let through.
        fallback: Cache<String, ()>,
    },
}

fn local() -> Cache<String, ()> {
    Cache::builder()
        .max_capacity(100_000)
        .time_to_live(MAIL_COOLDOWN)
        .build()
}

/// Whether `key` is in `cache`; if not, it is from now on.
fn local_cooling_down(cache: &Cache<String, ()>, key: &str) -> bool {
    if cache.contains_key(key) {
        return true;
    }
    cache.insert(key.to_string(), ());
    false
}

impl Default for MailCooldown {
    fn default() -> Self {
        Self::Local(local())
    }
}

impl MailCooldown {
    /// The cooldown in Redis on `redis`.
    pub fn shared(redis: SharedRedis) -> Self {
        Self::Shared {
            redis,
            fallback: local(),
        }
    }

    /// Whether a mail for `key` (`{purpose}|{email}`) went out within the cooldown; if not,
    /// it starts now (of two concurrent askers, one gets `false`).
    pub async fn cooling_down(&self, key: &str) -> bool {
        match self {
            Self::Local(cache) => local_cooling_down(cache, key),
            Self::Shared { redis, fallback } => {
                let redis_key = redis.key(&format!(
                    "mail:{}",
                    hex::encode(Sha256::digest(key.as_bytes()))
                ));
                let set = redis
                    .run("to check the mail cooldown", |mut connection| async move {
                        ::redis::cmd("SET")
                            .arg(redis_key)
                            .arg(1)
                            .arg("NX")
                            .arg("PX")
                            .arg(MAIL_COOLDOWN.as_millis() as u64)
                            .query_async::<Option<String>>(&mut connection)
                            .await
                    })
                    .await;
                match set {
                    Some(Some(_)) => {
                        fallback.insert(key.to_string(), ());
                        false
                    }
                    Some(None) => true,
                    None => local_cooling_down(fallback, key),
                }
            }
        }
    }

    /// Forgets every recipient, as if the minute had passed for all (tests; an operator's
    /// reset). In Redis, a failure is logged and leaves the keys to expire.
    pub async fn invalidate_all(&self) {
        match self {
            Self::Local(cache) => cache.invalidate_all(),
            Self::Shared { redis, fallback } => {
                fallback.invalidate_all();
                if let Err(e) = redis.clear("mail:*").await {
                    tracing::warn!(error = %e, "cannot clear the mail cooldown in Redis");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ratelimit::redis_testing::{connect, raw_connection, unique_prefix};

    #[tokio::test]
    async fn one_mail_a_minute_in_process() {
        let c = MailCooldown::default();
        assert!(!c.cooling_down("reset|a@x.io").await);
        assert!(c.cooling_down("reset|a@x.io").await);
        assert!(!c.cooling_down("verify|a@x.io").await, "per purpose");
        assert!(!c.cooling_down("reset|b@x.io").await, "per address");
        c.invalidate_all().await;
        assert!(!c.cooling_down("reset|a@x.io").await);
    }

    #[tokio::test]
    async fn two_instances_share_the_minute() {
        let prefix = unique_prefix();
        let a = MailCooldown::shared(connect(&prefix).await);
        let b = MailCooldown::shared(connect(&prefix).await);
        let asked = futures::future::join_all(
            (0..10).map(|n| if n % 2 == 0 { &a } else { &b }.cooling_down("reset|a@x.io")),
        )
        .await;
        assert_eq!(
            asked.iter().filter(|cooling| !**cooling).count(),
            1,
            "exactly one of ten concurrent requests sends: {asked:?}"
        );
        assert!(a.cooling_down("reset|a@x.io").await);
        assert!(!b.cooling_down("verify|a@x.io").await, "per purpose");
        assert!(a.cooling_down("verify|a@x.io").await);
        let MailCooldown::Shared { redis, .. } = &a else {
            panic!("shared")
        };
        let mut c = raw_connection().await;
        let keys: Vec<String> = ::redis::cmd("KEYS")
            .arg(format!("{prefix}mail:*"))
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(keys.len(), 2);
        for key in &keys {
            assert!(!key.contains("a@x.io"), "no key names an address: {key}");
            let ttl: i64 = ::redis::cmd("PTTL")
                .arg(key)
                .query_async(&mut c)
                .await
                .unwrap();
            assert!((1..=60_000).contains(&ttl), "{ttl}");
        }
        b.invalidate_all().await;
        assert!(!a.cooling_down("reset|a@x.io").await, "forgotten for both");
        assert_eq!(redis.fallbacks(), 0);
        redis.clear("*").await.unwrap();
    }

    #[tokio::test]
    async fn without_redis_the_instances_own_cooldown_answers() {
        let redis = SharedRedis::connect("redis://127.0.0.1:9", "t:").unwrap();
        let c = MailCooldown::shared(redis.clone());
        assert!(!c.cooling_down("reset|a@x.io").await);
        assert!(c.cooling_down("reset|a@x.io").await);
        assert!(!c.cooling_down("reset|b@x.io").await);
        assert_eq!(redis.fallbacks(), 3);
        assert_eq!(redis.warnings(), 1);
    }
}
