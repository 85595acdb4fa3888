//! Foreground and background work on one instance. Requests and chat turns are foreground;
//! the built-in model's chunk embedding is background and runs in their gaps, so that a crawl
//! being embedded does not lengthen anyone's reply (docs/knowledge.md § Embeddings).
//!
//! Foreground work marks itself with [`Foreground::touch`] (an event: a request arrives or is
//! answered, a provider's first event or end is read) or [`Foreground::busy`] (a span of CPU work: a query
//! is embedded). Before each step of the model (one matrix product of one layer: a few
//! milliseconds of one core) a chunk thread asks its [`Gate`], which lets it go once no span
//! is open and no event has come for [`QUIET`]. When foreground work never pauses that long,
//! the waiting threads still take forced steps, one at a time, for [`MIN_SHARE`] of one core,
//! so that a crawl's vectors keep coming.

use std::{
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed},
        Arc,
    },
    time::{Duration, Instant},
};

/// Time without foreground events after which background steps run.
pub const QUIET: Duration = Duration::from_millis(5);
/// How often a waiting background thread looks again.
pub const POLL: Duration = Duration::from_millis(5);
/// Share of one core that background steps get when foreground work never pauses: after a
/// forced step of `d`, the next forced step waits `d / MIN_SHARE − d`.
pub const MIN_SHARE: f64 = 0.005;

/// One instance's foreground activity, shared by its requests, its chat turns and its
/// embedding threads. Marking costs one relaxed atomic operation.
#[derive(Debug)]
pub struct Foreground {
    events: AtomicU64,
    spans: AtomicUsize,
    /// When the next forced step may start, in microseconds since `epoch`.
    next_forced: AtomicU64,
    epoch: Instant,
}

impl Default for Foreground {
    fn default() -> Self {
        Self {
            events: AtomicU64::new(0),
            spans: AtomicUsize::new(0),
            next_forced: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

impl Foreground {
    /// Notes a foreground event now.
    pub fn touch(&self) {
        self.events.fetch_add(1, Relaxed);
    }

    /// Foreground events noted so far.
    pub fn events(&self) -> u64 {
        self.events.load(Relaxed)
    }

    /// Opens a span of foreground CPU work; background steps wait until the returned guard
    /// is dropped (and then [`QUIET`]).
    pub fn busy(self: &Arc<Self>) -> Busy {
        self.spans.fetch_add(1, Relaxed);
        Busy(self.clone())
    }

    /// A gate for one background thread's steps.
    pub fn gate(self: &Arc<Self>) -> Gate {
        let now = Instant::now();
        Gate {
            seen: self.events.load(Relaxed),
            changed_at: now.checked_sub(QUIET).unwrap_or(now),
            forced_at: None,
            foreground: self.clone(),
        }
    }

    fn micros(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_micros()).unwrap_or(u64::MAX)
    }

    /// Takes the one forced step allowed at `now`, if it is still free.
    fn take_forced(&self, now: Instant) -> bool {
        let now = self.micros(now);
        let next = self.next_forced.load(Relaxed);
        now >= next
            && self
                .next_forced
                .compare_exchange(next, u64::MAX, Relaxed, Relaxed)
                .is_ok()
    }

    /// A forced step that started at `started` ended at `now`: the next one waits so that
    /// forced steps take [`MIN_SHARE`] of one core.
    fn forced_done(&self, started: Instant, now: Instant) {
        let took = now.saturating_duration_since(started).as_secs_f64();
        let rest = Duration::from_secs_f64(took * (1.0 / MIN_SHARE - 1.0));
        self.next_forced.store(self.micros(now + rest), Relaxed);
    }
}

/// An open span of foreground work ([`Foreground::busy`]); dropping it closes the span.
#[derive(Debug)]
pub struct Busy(Arc<Foreground>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.touch();
        self.0.spans.fetch_sub(1, Relaxed);
    }
}

/// One background thread's view of [`Foreground`]: call [`Gate::pause`] before each step.
#[derive(Debug)]
pub struct Gate {
    foreground: Arc<Foreground>,
    /// The event count last seen, and when it was first seen.
    seen: u64,
    changed_at: Instant,
    /// When the step running now started, if it was forced.
    forced_at: Option<Instant>,
}

impl Gate {
    /// Returns when the next step may run: at once when the instance is quiet, else after
    /// waiting for quiet or for a forced step. Sleeps in [`POLL`]s; never fails.
    pub fn pause(&mut self) {
        while !self.may_run(Instant::now()) {
            std::thread::sleep(POLL);
        }
    }

    /// Whether a step may start at `now` (the step before it, if any, ended at `now`).
    pub fn may_run(&mut self, now: Instant) -> bool {
        let fg = &self.foreground;
        if let Some(started) = self.forced_at.take() {
            fg.forced_done(started, now);
        }
        let events = fg.events.load(Relaxed);
        if events != self.seen {
            self.seen = events;
            self.changed_at = now;
        }
        if fg.spans.load(Relaxed) == 0 && now.saturating_duration_since(self.changed_at) >= QUIET {
            return true;
        }
        if fg.take_forced(now) {
            self.forced_at = Some(now);
            return true;
        }
        false
    }
}

impl Drop for Gate {
    /// A thread that leaves during a forced step lets the next one be scheduled.
    fn drop(&mut self) {
        if let Some(started) = self.forced_at.take() {
            self.foreground.forced_done(started, Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn background_runs_at_once_on_a_quiet_instance_and_waits_for_quiet_after_an_event() {
        let fg = Arc::new(Foreground::default());
        let mut gate = fg.gate();
        let t0 = Instant::now();
        assert!(gate.may_run(t0), "nothing in the foreground: run");
        // Take the first forced step now, so that the rest of this test sees no forced one.
        fg.take_forced(t0);
        fg.forced_done(t0, t0 + MS);
        fg.touch();
        assert!(!gate.may_run(t0 + MS), "an event: wait");
        assert!(!gate.may_run(t0 + 5 * MS), "quiet for 4 ms only");
        assert!(gate.may_run(t0 + 6 * MS), "quiet for QUIET: run");
    }

    #[test]
    fn background_waits_while_a_span_is_open_and_for_quiet_after_it() {
        let fg = Arc::new(Foreground::default());
        let t0 = Instant::now();
        fg.take_forced(t0);
        fg.forced_done(t0, t0 + MS);
        let mut gate = fg.gate();
        let busy = fg.busy();
        assert!(
            !gate.may_run(t0 + 50 * MS),
            "a span is open, for however long"
        );
        drop(busy);
        let closed = t0 + 60 * MS;
        assert!(!gate.may_run(closed), "the span just closed");
        assert!(gate.may_run(closed + QUIET));
    }

    #[test]
    fn when_the_foreground_never_pauses_one_forced_step_runs_at_a_time_for_min_share_of_a_core() {
        let fg = Arc::new(Foreground::default());
        let (mut a, mut b) = (fg.gate(), fg.gate());
        let _busy = fg.busy();
        let t0 = Instant::now();
        assert!(a.may_run(t0), "the first forced step");
        assert!(!b.may_run(t0 + MS), "one forced step at a time");
        // `a`'s step took 4 ms: the next forced step comes 4 / MIN_SHARE ms after it started.
        let ended = t0 + 4 * MS;
        assert!(!a.may_run(ended));
        let next = t0 + Duration::from_secs_f64(0.004 / MIN_SHARE);
        assert!(!b.may_run(next - 2 * MS));
        assert!(b.may_run(next + MS), "the second forced step");
        assert!(!a.may_run(next + 2 * MS));
        // `b` leaves during its forced step: the next one is still scheduled.
        drop(b);
        let mut c = fg.gate();
        assert!(c.may_run(Instant::now() + Duration::from_secs(10)));
    }
}
