//! The lease loop: one task per queue that claims due items under a lease and works on up to
//! [`LeaseRules::concurrency`] at once, each in its own task, renewing leases every
//! [`LeaseRules::renew_every`] and finishing an item only while its claim holds. An idle loop
//! waits for an item to finish, [`LeaseQueue::wake`], [`LeaseQueue::next_due`] (≥ 5 ms away)
//! or [`LeaseRules::poll`]. Aborting the loop aborts its items; their leases run out and they
//! are taken again. Rules: [`crate::jobs`].

use std::{collections::HashMap, future::Future, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use tokio::{
    sync::Notify,
    task::{self, JoinError, JoinHandle, JoinSet},
};
use tracing::warn;

use crate::clock::Clock;

/// Shortest wait for a due time (so that a due time in the past does not spin the loop).
const MIN_IDLE: Duration = Duration::from_millis(5);

/// How a queue's items are held and how many are worked on at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseRules {
    /// How long a claimed item belongs to its taker without a renewal.
    pub lease: Duration,
    /// How often a running item renews its lease; `None` when work ends well within it.
    pub renew_every: Option<Duration>,
    /// Items worked on at once (at least 1).
    pub concurrency: usize,
    /// How often an idle loop looks for work it was not woken for (expired leases, elsewhere).
    pub poll: Duration,
}

/// A table of work taken under leases: [`spawn`] decides when to claim, the queue the rest.
pub trait LeaseQueue: Send + Sync + 'static {
    type Item: Send + Sync + 'static;
    /// What working on an item produced, handed to [`LeaseQueue::finish`].
    type Outcome: Send + 'static;
    type Error: std::fmt::Display + Send;
    /// The warning logged when a claim fails.
    const CLAIM_FAILED: &'static str;

    fn rules(&self) -> LeaseRules;

    /// The clock of every claim, lease end and due time.
    fn clock(&self) -> &Clock;

    /// Notified when an item was queued.
    fn wake(&self) -> &Notify;

    /// Takes up to `max` items due at `now` (or with an ended lease), leased until `lease_until`.
    fn claim(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        max: usize,
    ) -> impl Future<Output = Result<Vec<Self::Item>, Self::Error>> + Send;

    /// When the next item falls due, if the queue schedules; an idle loop wakes then.
    fn next_due(&self) -> impl Future<Output = Option<DateTime<Utc>>> + Send {
        async { None }
    }

    /// Extends `item`'s lease to `lease_until`; answers whether it is still this taker's (`true` on
    /// a logged store failure). `false` stops the work; [`LeaseQueue::finish`] is not called.
    fn renew(
        &self,
        item: &Self::Item,
        lease_until: DateTime<Utc>,
    ) -> impl Future<Output = bool> + Send {
        let _ = (item, lease_until);
        async { true }
    }

    /// Works on `item` in slot `slot` (`0..concurrency`).
    fn work(&self, item: &Self::Item, slot: usize) -> impl Future<Output = Self::Outcome> + Send;

    /// Records `outcome` for `item`; renewals have stopped by then.
    fn finish(&self, item: &Self::Item, outcome: Self::Outcome) -> impl Future<Output = ()> + Send;
}

/// The end of a lease taken or renewed at `now` and lasting `lease`.
pub fn lease_end(now: DateTime<Utc>, lease: Duration) -> DateTime<Utc> {
    now + chrono::Duration::from_std(lease).unwrap_or_default()
}

/// Starts the lease loop of `queue`; it runs until aborted or the runtime stops.
pub fn spawn<Q: LeaseQueue>(queue: Q) -> JoinHandle<()> {
    tokio::spawn(serve(Arc::new(queue)))
}

/// The items being worked on and the slots they hold.
struct Slots {
    running: JoinSet<()>,
    held: HashMap<task::Id, usize>,
    free: Vec<usize>,
}

impl Slots {
    fn new(concurrency: usize) -> Self {
        Self {
            running: JoinSet::new(),
            held: HashMap::new(),
            // Popped from the end: the lowest free slot first.
            free: (0..concurrency.max(1)).rev().collect(),
        }
    }

    /// Frees the slot of a finished item's task.
    fn release(&mut self, done: Result<(task::Id, ()), JoinError>) {
        let id = match done {
            Ok((id, ())) => id,
            Err(err) => {
                warn!(error = %err, "a leased item's task ended abnormally; its lease will run out and it is taken again");
                err.id()
            }
        };
        if let Some(slot) = self.held.remove(&id) {
            self.free.push(slot);
        }
    }

    /// Frees the slots of every item already finished, without waiting.
    fn reap(&mut self) {
        while let Some(done) = self.running.try_join_next_with_id() {
            self.release(done);
        }
    }
}

async fn serve<Q: LeaseQueue>(queue: Arc<Q>) {
    let rules = queue.rules();
    let mut slots = Slots::new(rules.concurrency);
    loop {
        slots.reap();
        let free = slots.free.len();
        let mut claimed = 0;
        if free > 0 {
            let now = queue.clock().now();
            match queue.claim(now, lease_end(now, rules.lease), free).await {
                Ok(items) => {
                    claimed = items.len();
                    for item in items {
                        // More than asked for: the extra item's lease runs out and it is
                        // taken again.
                        let Some(slot) = slots.free.pop() else { break };
                        let handle = slots.running.spawn(hold(queue.clone(), item, slot));
                        slots.held.insert(handle.id(), slot);
                    }
                }
                Err(err) => {
                    warn!(error = %err, "{}", Q::CLAIM_FAILED);
                    tokio::time::sleep(rules.poll).await;
                    continue;
                }
            }
        }
        if free > 0 && claimed >= free {
            // There may be more due right now.
            continue;
        }
        let idle = match queue.next_due().await {
            Some(due) => (due - queue.clock().now())
                .to_std()
                .unwrap_or_default()
                .clamp(MIN_IDLE, rules.poll.max(MIN_IDLE)),
            None => rules.poll,
        };
        tokio::select! {
            Some(done) = slots.running.join_next_with_id(), if !slots.running.is_empty() => {
                slots.release(done);
            }
            _ = queue.wake().notified() => {}
            _ = tokio::time::sleep(idle) => {}
        }
    }
}

/// Works on one item, renewing its lease; a lost claim drops the work and records nothing.
async fn hold<Q: LeaseQueue>(queue: Arc<Q>, item: Q::Item, slot: usize) {
    let item = Arc::new(item);
    let rules = queue.rules();
    let lost = Arc::new(Notify::new());
    let renewals = rules.renew_every.map(|every| {
        let queue = queue.clone();
        let item = item.clone();
        let lost = lost.clone();
        AbortOnDrop(tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let until = lease_end(queue.clock().now(), rules.lease);
                if !queue.renew(&item, until).await {
                    // A permit is kept if the holder is not waiting yet.
                    lost.notify_one();
                    return;
                }
            }
        }))
    });
    let outcome = tokio::select! {
        outcome = queue.work(&item, slot) => Some(outcome),
        () = lost.notified() => None,
    };
    drop(renewals);
    match outcome {
        Some(outcome) => queue.finish(&item, outcome).await,
        None => warn!(
            slot,
            "a leased item's claim was lost to another taker; its work was stopped"
        ),
    }
}

/// A task aborted when its handle is dropped, so renewals never outlive their item.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// An item of [`Memory`].
    #[derive(Clone, Copy)]
    struct Entry {
        due: DateTime<Utc>,
        lease: Option<DateTime<Utc>>,
        attempts: u32,
        finished: bool,
    }

    impl Entry {
        fn due(due: DateTime<Utc>) -> Self {
            Self {
                due,
                lease: None,
                attempts: 0,
                finished: false,
            }
        }
    }

    #[derive(Default)]
    struct Memory {
        clock: Clock,
        wake: Notify,
        concurrency: usize,
        renew_every: Option<Duration>,
        items: Mutex<Vec<Entry>>,
        /// Items being worked on now, and the most at once.
        busy: Mutex<(usize, usize)>,
        /// Slots items were worked on in.
        slots: Mutex<Vec<usize>>,
        renewals: Mutex<u32>,
        hang: bool,
        /// Renewals answer that the claim is lost.
        lose: bool,
        /// Items whose work was stopped (dropped) before it ended.
        stopped: Arc<Mutex<u32>>,
    }

    impl LeaseQueue for Arc<Memory> {
        type Item = usize;
        type Outcome = ();
        type Error = String;
        const CLAIM_FAILED: &'static str = "cannot take test items";

        fn rules(&self) -> LeaseRules {
            LeaseRules {
                lease: Duration::from_secs(60),
                renew_every: self.renew_every,
                concurrency: self.concurrency,
                poll: Duration::from_millis(50),
            }
        }

        fn clock(&self) -> &Clock {
            &self.clock
        }

        fn wake(&self) -> &Notify {
            &self.wake
        }

        async fn claim(
            &self,
            now: DateTime<Utc>,
            lease_until: DateTime<Utc>,
            max: usize,
        ) -> Result<Vec<usize>, String> {
            let mut items = self.items.lock().unwrap();
            let mut taken = Vec::new();
            for (n, item) in items.iter_mut().enumerate() {
                if taken.len() == max {
                    break;
                }
                let free = match item.lease {
                    Some(end) => end < now,
                    None => item.due <= now,
                };
                if !item.finished && free {
                    item.lease = Some(lease_until);
                    item.attempts += 1;
                    taken.push(n);
                }
            }
            Ok(taken)
        }

        async fn next_due(&self) -> Option<DateTime<Utc>> {
            let items = self.items.lock().unwrap();
            items
                .iter()
                .filter(|i| !i.finished && i.lease.is_none())
                .map(|i| i.due)
                .min()
        }

        async fn renew(&self, item: &usize, lease_until: DateTime<Utc>) -> bool {
            *self.renewals.lock().unwrap() += 1;
            if self.lose {
                return false;
            }
            self.items.lock().unwrap()[*item].lease = Some(lease_until);
            true
        }

        async fn work(&self, _item: &usize, slot: usize) {
            {
                let mut busy = self.busy.lock().unwrap();
                busy.0 += 1;
                busy.1 = busy.1.max(busy.0);
            }
            self.slots.lock().unwrap().push(slot);
            if self.hang {
                let _stopped = Stopped(self.stopped.clone());
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            self.busy.lock().unwrap().0 -= 1;
        }

        async fn finish(&self, item: &usize, _outcome: ()) {
            let mut items = self.items.lock().unwrap();
            items[*item].lease = None;
            items[*item].finished = true;
        }
    }

    /// Counts a work future dropped before its end.
    struct Stopped(Arc<Mutex<u32>>);

    impl Drop for Stopped {
        fn drop(&mut self) {
            *self.0.lock().unwrap() += 1;
        }
    }

    impl Memory {
        fn with(concurrency: usize, due: &[DateTime<Utc>]) -> Arc<Self> {
            Arc::new(Self {
                concurrency,
                items: Mutex::new(due.iter().copied().map(Entry::due).collect()),
                ..Self::default()
            })
        }

        fn finished(&self) -> usize {
            self.items
                .lock()
                .unwrap()
                .iter()
                .filter(|i| i.finished)
                .count()
        }

        async fn until(&self, what: impl Fn(&Self) -> bool) {
            for _ in 0..200 {
                if what(self) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("the queue did not get there");
        }
    }

    #[tokio::test]
    async fn due_items_are_worked_on_at_most_concurrency_at_once() {
        let now = Utc::now();
        let queue = Memory::with(3, &[now; 10]);
        let task = spawn(queue.clone());
        queue.until(|q| q.finished() == 10).await;
        task.abort();
        assert_eq!(queue.busy.lock().unwrap().1, 3);
        assert!(queue.slots.lock().unwrap().iter().all(|s| *s < 3));
        assert!(queue.items.lock().unwrap().iter().all(|i| i.attempts == 1));
    }

    #[tokio::test]
    async fn an_item_falls_due_when_the_clock_is_advanced() {
        let queue = Memory::with(2, &[Utc::now() + chrono::Duration::hours(1)]);
        let task = spawn(queue.clone());
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(queue.items.lock().unwrap()[0].attempts, 0, "not due yet");
        queue.clock.advance(chrono::Duration::hours(1));
        queue.until(|q| q.finished() == 1).await;
        task.abort();
    }

    #[tokio::test]
    async fn an_expired_lease_is_taken_again_after_the_clock_passes_it() {
        let now = Utc::now();
        let queue = Memory::with(1, &[now]);
        // Another taker holds the item and dies: its lease ends in 60 s.
        {
            let mut items = queue.items.lock().unwrap();
            items[0].lease = Some(now + chrono::Duration::seconds(60));
            items[0].attempts = 1;
        }
        let task = spawn(queue.clone());
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(
            queue.items.lock().unwrap()[0].attempts,
            1,
            "the lease still runs"
        );
        queue.clock.advance(chrono::Duration::seconds(61));
        queue.wake.notify_one();
        queue.until(|q| q.finished() == 1).await;
        task.abort();
        assert_eq!(queue.items.lock().unwrap()[0].attempts, 2);
    }

    #[tokio::test]
    async fn a_running_item_renews_its_lease_and_aborting_stops_everything() {
        let queue = Arc::new(Memory {
            concurrency: 1,
            renew_every: Some(Duration::from_millis(20)),
            hang: true,
            items: Mutex::new(vec![Entry::due(Utc::now())]),
            ..Memory::default()
        });
        let task = spawn(queue.clone());
        queue.until(|q| *q.renewals.lock().unwrap() >= 3).await;
        let lease = queue.items.lock().unwrap()[0].lease.unwrap();
        assert!(lease > Utc::now() + chrono::Duration::seconds(59));
        task.abort();
        let _ = task.await;
        tokio::time::sleep(Duration::from_millis(30)).await;
        let renewed = *queue.renewals.lock().unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(*queue.renewals.lock().unwrap(), renewed, "renewals stopped");
        assert_eq!(queue.finished(), 0);
    }

    #[tokio::test]
    async fn a_renewal_that_finds_the_claim_lost_stops_the_work_without_finishing_it() {
        let now = Utc::now();
        let queue = Arc::new(Memory {
            concurrency: 1,
            renew_every: Some(Duration::from_millis(20)),
            hang: true,
            lose: true,
            items: Mutex::new(vec![Entry::due(now), Entry::due(now)]),
            ..Memory::default()
        });
        let task = spawn(queue.clone());
        // Each item's first renewal finds its claim lost: its work is stopped, which frees
        // the one slot for the next item.
        queue.until(|q| *q.stopped.lock().unwrap() == 2).await;
        task.abort();
        let _ = task.await;
        assert_eq!(queue.finished(), 0, "a lost item is never finished");
        let items = queue.items.lock().unwrap();
        assert!(items.iter().all(|i| i.attempts == 1), "each taken once");
    }
}
