//! Throttling of failed sign-ins (OWASP Authentication Cheat Sheet; ASVS 2.2.1) that cannot
//! lock the owner out: 5 failures in 15 minutes block an email and IP pair, 50 an IP, and
//! 20 an email only from IPs that never signed in to it (known for 30 days). Windows start
//! at the first failure; a success clears the pair. In process ([`LoginThrottle`]) or in
//! Redis ([`RedisThrottle`]); [`Throttle`] is the one in use.

use std::{
    net::IpAddr,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use moka::sync::Cache;
use sha2::{Digest, Sha256};

use crate::{ids::UserId, ratelimit::SharedRedis};

/// Length of a counting window.
pub const WINDOW: Duration = Duration::from_secs(15 * 60);
/// Failures allowed per (email, IP) in a window.
pub const PER_PAIR: u32 = 5;
/// Failures allowed per IP in a window.
pub const PER_IP: u32 = 50;
/// Failures allowed per email from unknown IPs in a window.
pub const PER_EMAIL: u32 = 20;
/// How long an IP stays known after a successful sign-in.
pub const KNOWN_IP_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

struct Window {
    started: Instant,
    failures: AtomicU32,
}

type Counter = Cache<String, Arc<Window>>;

/// In-process failed-login counters.
#[derive(Clone)]
pub struct LoginThrottle {
    pairs: Counter,
    ips: Counter,
    emails: Counter,
    known: Cache<String, ()>,
}

impl Default for LoginThrottle {
    fn default() -> Self {
        let counter = || {
            Cache::builder()
                .max_capacity(200_000)
                .time_to_live(WINDOW)
                .build()
        };
        Self {
            pairs: counter(),
            ips: counter(),
            emails: counter(),
            known: Cache::builder()
                .max_capacity(500_000)
                .time_to_live(KNOWN_IP_TTL)
                .build(),
        }
    }
}

fn over(counter: &Counter, key: &str, limit: u32) -> Option<Duration> {
    let window = counter.get(key)?;
    (window.failures.load(Ordering::Relaxed) >= limit)
        .then(|| WINDOW.saturating_sub(window.started.elapsed()))
}

fn bump(counter: &Counter, key: String) {
    counter
        .get_with(key, || {
            Arc::new(Window {
                started: Instant::now(),
                failures: AtomicU32::new(0),
            })
        })
        .failures
        .fetch_add(1, Ordering::Relaxed);
}

impl LoginThrottle {
    /// `Some(wait)` when a sign-in for `email` from `ip` must be refused for `wait`.
    /// `user_id` is the account's id when the email exists (known IPs are per account).
    pub fn blocked(&self, email: &str, ip: IpAddr, user_id: Option<&UserId>) -> Option<Duration> {
        if let Some(wait) = over(&self.pairs, &format!("{email}|{ip}"), PER_PAIR) {
            return Some(wait);
        }
        if let Some(wait) = over(&self.ips, &ip.to_string(), PER_IP) {
            return Some(wait);
        }
        let known = user_id.is_some_and(|id| self.known.contains_key(&format!("{id}|{ip}")));
        if known {
            return None;
        }
        over(&self.emails, email, PER_EMAIL)
    }

    /// Records a failed sign-in.
    pub fn failed(&self, email: &str, ip: IpAddr) {
        bump(&self.pairs, format!("{email}|{ip}"));
        bump(&self.ips, ip.to_string());
        bump(&self.emails, email.to_string());
    }

    /// Records a successful sign-in: the pair's failures are forgotten, the IP is known.
    pub fn succeeded(&self, email: &str, ip: IpAddr, user_id: &UserId) {
        self.pairs.invalidate(&format!("{email}|{ip}"));
        self.known.insert(format!("{user_id}|{ip}"), ());
    }
}

/// The failed-sign-in throttle in use: in process, or in Redis.
#[derive(Clone)]
pub enum Throttle {
    /// Counters in this process (one instance).
    Local(LoginThrottle),
    /// Counters in Redis, shared by every instance (`REDIS_URL`).
    Shared(RedisThrottle),
}

impl Default for Throttle {
    fn default() -> Self {
        Self::Local(LoginThrottle::default())
    }
}

impl Throttle {
    /// Counters in Redis on `redis`, shared by every instance that uses it.
    pub fn shared(redis: SharedRedis) -> Self {
        Self::Shared(RedisThrottle::new(redis))
    }

    /// `Some(wait)` when a sign-in for `email` from `ip` must be refused for `wait`.
    /// `user_id` is the account's id when the email exists (known IPs are per account).
    pub async fn blocked(
        &self,
        email: &str,
        ip: IpAddr,
        user_id: Option<&UserId>,
    ) -> Option<Duration> {
        match self {
            Self::Local(t) => t.blocked(email, ip, user_id),
            Self::Shared(t) => t.blocked(email, ip, user_id).await,
        }
    }

    /// Records a failed sign-in.
    pub async fn failed(&self, email: &str, ip: IpAddr) {
        match self {
            Self::Local(t) => t.failed(email, ip),
            Self::Shared(t) => t.failed(email, ip).await,
        }
    }

    /// Records a successful sign-in: the pair's failures are forgotten, the IP is known.
    pub async fn succeeded(&self, email: &str, ip: IpAddr, user_id: &UserId) {
        match self {
            Self::Local(t) => t.succeeded(email, ip, user_id),
            Self::Shared(t) => t.succeeded(email, ip, user_id).await,
        }
    }
}

/// [`LoginThrottle`]'s rules in Redis for every instance: counters `login:pair:{h}`,
/// `login:ip:{ip}`, `login:email:{h}` (h a SHA-256, so no key names an address) expiring
/// [`WINDOW`] after the first failure, and `login:known:{user_id}:{ip}` for
/// [`KNOWN_IP_TTL`]. In-process counters answer while Redis does not ([`SharedRedis`]).
#[derive(Clone)]
pub struct RedisThrottle {
    redis: SharedRedis,
    fallback: LoginThrottle,
}

/// SHA-256 of `s` in hex.
fn hashed(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

impl RedisThrottle {
    /// Counters on `redis`.
    pub fn new(redis: SharedRedis) -> Self {
        Self {
            redis,
            fallback: LoginThrottle::default(),
        }
    }

    fn pair_key(&self, email: &str, ip: IpAddr) -> String {
        self.redis
            .key(&format!("login:pair:{}", hashed(&format!("{email}|{ip}"))))
    }

    fn ip_key(&self, ip: IpAddr) -> String {
        self.redis.key(&format!("login:ip:{ip}"))
    }

    fn email_key(&self, email: &str) -> String {
        self.redis.key(&format!("login:email:{}", hashed(email)))
    }

    fn known_key(&self, user_id: &UserId, ip: IpAddr) -> String {
        self.redis.key(&format!("login:known:{user_id}:{ip}"))
    }

    /// See [`Throttle::blocked`]: one atomic read of the three counters, their time to
    /// live and whether the IP is known.
    pub async fn blocked(
        &self,
        email: &str,
        ip: IpAddr,
        user_id: Option<&UserId>,
    ) -> Option<Duration> {
        let mut pipe = ::redis::pipe();
        pipe.atomic();
        for key in [
            self.pair_key(email, ip),
            self.ip_key(ip),
            self.email_key(email),
        ] {
            pipe.get(&key).cmd("PTTL").arg(&key);
        }
        if let Some(id) = user_id {
            pipe.exists(self.known_key(id, ip));
        }
        let read = self
            .redis
            .run(
                "to read the sign-in throttle",
                |mut connection| async move {
                    pipe.query_async::<Vec<Option<i64>>>(&mut connection).await
                },
            )
            .await;
        let Some(read) = read else {
            return self.fallback.blocked(email, ip, user_id);
        };
        let at = |i: usize| read.get(i).copied().flatten();
        let over = |i: usize, limit: u32| {
            let failures = at(i).unwrap_or(0);
            (failures >= i64::from(limit)).then(|| match at(i + 1) {
                Some(ms) if ms >= 0 => Duration::from_millis(ms.unsigned_abs()),
                _ => WINDOW,
            })
        };
        if let Some(wait) = over(0, PER_PAIR) {
            return Some(wait);
        }
        if let Some(wait) = over(2, PER_IP) {
            return Some(wait);
        }
        if user_id.is_some() && at(6).unwrap_or(0) > 0 {
            return None;
        }
        over(4, PER_EMAIL)
    }

    /// See [`Throttle::failed`]: the three counters raised in one transaction.
    pub async fn failed(&self, email: &str, ip: IpAddr) {
        self.fallback.failed(email, ip);
        let window = WINDOW.as_millis() as u64;
        let mut pipe = ::redis::pipe();
        pipe.atomic();
        for key in [
            self.pair_key(email, ip),
            self.ip_key(ip),
            self.email_key(email),
        ] {
            pipe.incr(&key, 1)
                .ignore()
                .cmd("PEXPIRE")
                .arg(&key)
                .arg(window)
                .arg("NX")
                .ignore();
        }
        self.redis
            .run("to count a failed sign-in", |mut connection| async move {
                pipe.query_async::<()>(&mut connection).await
            })
            .await;
    }

    /// See [`Throttle::succeeded`].
    pub async fn succeeded(&self, email: &str, ip: IpAddr, user_id: &UserId) {
        self.fallback.succeeded(email, ip, user_id);
        let mut pipe = ::redis::pipe();
        pipe.atomic()
            .del(self.pair_key(email, ip))
            .ignore()
            .set_ex(self.known_key(user_id, ip), 1, KNOWN_IP_TTL.as_secs())
            .ignore();
        self.redis
            .run("to record a sign-in", |mut connection| async move {
                pipe.query_async::<()>(&mut connection).await
            })
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, n])
    }

    #[test]
    fn a_pair_is_blocked_after_five_failures_but_not_other_ips() {
        let t = LoginThrottle::default();
        let u = UserId::from("u");
        for _ in 0..PER_PAIR {
            assert!(t.blocked("a@x.io", ip(1), Some(&u)).is_none());
            t.failed("a@x.io", ip(1));
        }
        assert!(t.blocked("a@x.io", ip(1), Some(&u)).is_some());
        assert!(
            t.blocked("a@x.io", ip(2), Some(&u)).is_none(),
            "the owner elsewhere is not locked out"
        );
        assert!(t.blocked("b@x.io", ip(1), None).is_none());
    }

    #[test]
    fn an_ip_spraying_many_emails_is_blocked() {
        let t = LoginThrottle::default();
        for n in 0..PER_IP {
            t.failed(&format!("u{n}@x.io"), ip(3));
        }
        assert!(t.blocked("fresh@x.io", ip(3), None).is_some());
        assert!(t.blocked("fresh@x.io", ip(4), None).is_none());
    }

    #[test]
    fn a_distributed_attack_on_one_email_spares_the_owners_known_ip() {
        let t = LoginThrottle::default();
        let u = UserId::from("u");
        t.succeeded("a@x.io", ip(9), &u);
        for n in 0..PER_EMAIL {
            t.failed("a@x.io", ip(100 + n as u8));
        }
        assert!(
            t.blocked("a@x.io", ip(50), Some(&u)).is_some(),
            "unknown IP blocked"
        );
        assert!(
            t.blocked("a@x.io", ip(9), Some(&u)).is_none(),
            "known IP still allowed"
        );
    }
}

/// The same rules with the counters in Redis, and two instances sharing them.
#[cfg(test)]
mod shared_tests {
    use super::*;
    use crate::ratelimit::redis_testing::{connect, raw_connection, unique_prefix};

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, n])
    }

    /// Two instances' throttles on one Redis, under a prefix of their own.
    async fn two() -> (Throttle, Throttle, SharedRedis) {
        let prefix = unique_prefix();
        let redis = connect(&prefix).await;
        (
            Throttle::shared(redis.clone()),
            Throttle::shared(connect(&prefix).await),
            redis,
        )
    }

    #[tokio::test]
    async fn failures_on_two_instances_add_up_for_a_pair() {
        let (a, b, redis) = two().await;
        let u = UserId::from("u");
        for n in 0..PER_PAIR {
            let (this, other) = if n % 2 == 0 { (&a, &b) } else { (&b, &a) };
            assert!(this.blocked("a@x.io", ip(1), Some(&u)).await.is_none());
            other.failed("a@x.io", ip(1)).await;
        }
        for t in [&a, &b] {
            let wait = t.blocked("a@x.io", ip(1), Some(&u)).await.expect("blocked");
            assert!(
                wait <= WINDOW && wait > WINDOW - Duration::from_secs(60),
                "{wait:?}"
            );
            assert!(
                t.blocked("a@x.io", ip(2), Some(&u)).await.is_none(),
                "the owner elsewhere is not locked out"
            );
            assert!(t.blocked("b@x.io", ip(1), None).await.is_none());
        }
        // A success on one instance clears the pair for both.
        a.succeeded("a@x.io", ip(1), &u).await;
        assert!(b.blocked("a@x.io", ip(1), Some(&u)).await.is_none());
        assert_eq!(redis.fallbacks(), 0, "Redis answered every call");
        redis.clear("*").await.unwrap();
    }

    #[tokio::test]
    async fn an_ip_spraying_many_emails_over_two_instances_is_blocked() {
        let (a, b, redis) = two().await;
        for n in 0..PER_IP {
            let t = if n % 2 == 0 { &a } else { &b };
            t.failed(&format!("u{n}@x.io"), ip(3)).await;
        }
        assert!(a.blocked("fresh@x.io", ip(3), None).await.is_some());
        assert!(b.blocked("fresh@x.io", ip(3), None).await.is_some());
        assert!(b.blocked("fresh@x.io", ip(4), None).await.is_none());
        redis.clear("*").await.unwrap();
    }

    #[tokio::test]
    async fn an_ip_known_on_one_instance_is_spared_on_the_other() {
        let (a, b, redis) = two().await;
        let u = UserId::from("u");
        a.succeeded("a@x.io", ip(9), &u).await;
        for n in 0..PER_EMAIL {
            let t = if n % 2 == 0 { &a } else { &b };
            t.failed("a@x.io", ip(100 + n as u8)).await;
        }
        assert!(
            b.blocked("a@x.io", ip(50), Some(&u)).await.is_some(),
            "unknown IP blocked"
        );
        assert!(
            b.blocked("a@x.io", ip(9), Some(&u)).await.is_none(),
            "known IP still allowed"
        );
        assert!(
            b.blocked("a@x.io", ip(9), None).await.is_some(),
            "known per account"
        );
        let mut c = raw_connection().await;
        let known_ttl: i64 = ::redis::cmd("TTL")
            .arg(redis.key("login:known:u:10.0.0.9"))
            .query_async(&mut c)
            .await
            .unwrap();
        assert!(
            known_ttl > 0 && known_ttl <= KNOWN_IP_TTL.as_secs() as i64,
            "{known_ttl}"
        );
        let keys: Vec<String> = ::redis::cmd("KEYS")
            .arg(format!("{}login:*", redis.prefix()))
            .query_async(&mut c)
            .await
            .unwrap();
        assert!(
            keys.iter().all(|k| !k.contains("a@x.io")),
            "no key names an address: {keys:?}"
        );
        redis.clear("*").await.unwrap();
    }

    #[tokio::test]
    async fn without_redis_the_instances_own_counters_answer() {
        let redis = SharedRedis::connect("redis://127.0.0.1:9", "t:").unwrap();
        let t = Throttle::shared(redis.clone());
        for _ in 0..PER_PAIR {
            assert!(t.blocked("a@x.io", ip(1), None).await.is_none());
            t.failed("a@x.io", ip(1)).await;
        }
        assert!(t.blocked("a@x.io", ip(1), None).await.is_some());
        assert!(redis.fallbacks() >= 11);
        assert_eq!(redis.warnings(), 1);
    }
}
