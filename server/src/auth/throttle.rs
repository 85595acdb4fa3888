//! Throttling of failed sign-ins (OWASP Authentication Cheat Sheet, "Protect against
//! automated attacks"; OWASP ASVS 2.2.1), built so an attacker cannot lock the owner out:
//!
//! - per email *and* client IP: 5 failures in 15 minutes block that pair only;
//! - per client IP: 50 failures in 15 minutes block that IP for every email;
//! - per email from everywhere: 20 failures in 15 minutes block the email only from IPs
//!   that have never signed in to that account before; an IP the owner has signed in from
//!   (remembered 30 days) keeps working.
//!
//! Counting windows start at the first failure. A successful sign-in clears the pair.

use std::{
    net::IpAddr,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use moka::sync::Cache;

use crate::ids::UserId;

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
