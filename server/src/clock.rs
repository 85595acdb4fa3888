//! The service's one clock. Handlers, sessions, knowledge jobs and webhook retries read the
//! time through [`Clock`], so a test that advances it moves every deadline of the service
//! at once (token lifetimes, idle sessions, job leases, retry schedules).

use std::sync::{
    atomic::{AtomicI64, Ordering},
    Arc,
};

use chrono::{DateTime, Duration, Utc};

/// Real time plus an offset that tests may advance. Clones share the offset.
#[derive(Clone, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicI64>,
}

impl Clock {
    /// Now, as the service sees it.
    pub fn now(&self) -> DateTime<Utc> {
        Utc::now() + Duration::milliseconds(self.offset_ms.load(Ordering::Relaxed))
    }

    /// Now, as the service sees it, in Unix epoch milliseconds.
    pub fn now_ms(&self) -> i64 {
        let real = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        real + self.offset_ms.load(Ordering::Relaxed)
    }

    /// Moves the clock forward by `by` (tests of lifetimes, leases and retries).
    pub fn advance(&self, by: Duration) {
        self.offset_ms
            .fetch_add(by.num_milliseconds(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_advanced_time() {
        let clock = Clock::default();
        let other = clock.clone();
        let before = other.now();
        clock.advance(Duration::hours(2));
        assert!(other.now() - before >= Duration::hours(2));
        assert!(other.now_ms() - before.timestamp_millis() >= 2 * 3600 * 1000);
    }
}
