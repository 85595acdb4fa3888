//! Group commits of chat turns: [`TurnWriter`] stores the turns of many conversations in
//! one transaction ([`crate::store::ChatStore::record_turns`]). An [`Urgency::Now`] turn
//! with no batch in flight is written at once; turns arriving meanwhile go in the next
//! batch (at most [`MAX_BATCH`]); a batch of only [`Urgency::Grouped`] turns waits up to
//! [`GROUP_WINDOW`] for company. A crash loses at most the batch in flight, each turn
//! whole (`server/tests/crash.rs`).

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use tokio::sync::{mpsc, oneshot, Notify};

use crate::store::{ChatStore, StoreError, StoreResult, TurnRecord};

/// The most turns one transaction stores.
pub const MAX_BATCH: usize = 256;

/// How long a batch of [`Urgency::Grouped`] turns waits for others after its first turn.
pub const GROUP_WINDOW: Duration = Duration::from_millis(2);

/// How soon a turn handed to [`TurnWriter::record`] must be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Urgency {
    /// As soon as the writer is free: a client waits for it (a JSON reply, a channel's answer).
    Now,
    /// Within [`GROUP_WINDOW`], with other ending turns: a stream waiting only for `[DONE]`.
    Grouped,
}

/// Where a turn's outcome goes: whether it was stored, and the turn itself back.
type Answer = oneshot::Sender<(StoreResult<bool>, TurnRecord)>;

/// A turn waiting to be written, and where its outcome goes.
struct Pending {
    turn: TurnRecord,
    urgency: Urgency,
    done: Answer,
}

/// Turns handed over and not yet written (for [`TurnWriter::flush`]), and the urgent ones
/// (waking a writer holding a batch open, [`gather`]).
#[derive(Default)]
struct InFlight {
    count: AtomicUsize,
    idle: Notify,
    urgent: Urgent,
}

/// Urgent turns not yet batched, and the wake-up of a writer waiting out [`GROUP_WINDOW`].
#[derive(Default)]
struct Urgent {
    queued: AtomicUsize,
    arrived: Notify,
}

impl Urgent {
    /// Counts an urgent item before it is queued.
    fn queuing(&self) {
        self.queued.fetch_add(1, Ordering::SeqCst);
    }

    /// Wakes a writer waiting out its window once the [`Urgent::queuing`] item is queued.
    fn queued(&self) {
        self.arrived.notify_waiters();
    }

    /// Queues `item`, counting and waking for [`Urgency::Now`]. Errors: closed (the item back).
    fn send<T>(
        &self,
        queue: &mpsc::UnboundedSender<T>,
        item: T,
        urgency: Urgency,
    ) -> Result<(), mpsc::error::SendError<T>> {
        let urgent = urgency == Urgency::Now;
        if urgent {
            self.queuing();
        }
        let sent = queue.send(item);
        if urgent {
            self.queued();
        }
        sent
    }
}

/// Hands chat turns to a task storing them in batches; it ends after the last clone drops.
#[derive(Clone)]
pub struct TurnWriter {
    queue: mpsc::UnboundedSender<Pending>,
    in_flight: Arc<InFlight>,
}

impl TurnWriter {
    /// Starts the writing task. Panics outside a Tokio runtime.
    pub fn start(store: Arc<dyn ChatStore>) -> Self {
        let (queue, receiver) = mpsc::unbounded_channel();
        let in_flight = Arc::new(InFlight::default());
        tokio::spawn(write_batches(store, receiver, Arc::clone(&in_flight)));
        Self { queue, in_flight }
    }

    /// Stores `turn` with other waiting turns; answers once committed: the turn, or `None` when its
    /// agent or thread is gone. Errors: the store's (nothing of the turn written).
    pub async fn record(
        &self,
        turn: TurnRecord,
        urgency: Urgency,
    ) -> StoreResult<Option<TurnRecord>> {
        let (done, outcome) = oneshot::channel();
        self.in_flight.count.fetch_add(1, Ordering::SeqCst);
        let pending = Pending {
            turn,
            urgency,
            done,
        };
        let sent = self.in_flight.urgent.send(&self.queue, pending, urgency);
        if sent.is_err() {
            // The task is gone (the runtime is shutting down).
            finished(&self.in_flight, 1);
            return Err(StoreError::Unavailable(anyhow::anyhow!(
                "the chat writer has stopped"
            )));
        }
        match outcome.await {
            Ok((stored, turn)) => Ok(stored?.then_some(turn)),
            // The task ended with the turn unanswered (the runtime is shutting down).
            Err(_) => Err(StoreError::Unavailable(anyhow::anyhow!(
                "the chat writer stopped before writing the turn"
            ))),
        }
    }

    /// Waits until every turn handed over so far is written or failed (graceful shutdown).
    pub async fn flush(&self) {
        loop {
            let idle = self.in_flight.idle.notified();
            if self.in_flight.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }
}

fn finished(in_flight: &InFlight, n: usize) {
    if in_flight.count.fetch_sub(n, Ordering::SeqCst) == n {
        in_flight.idle.notify_waiters();
    }
}

/// The writing task: gather a batch, write it in one transaction, answer each, repeat.
async fn write_batches(
    store: Arc<dyn ChatStore>,
    mut receiver: mpsc::UnboundedReceiver<Pending>,
    in_flight: Arc<InFlight>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while gather(&mut receiver, &mut batch, |p| p.urgency, &in_flight.urgent).await > 0 {
        let n = batch.len();
        write_batch(store.as_ref(), &mut batch).await;
        finished(&in_flight, n);
    }
}

/// Takes the next batch (≤ [`MAX_BATCH`]), waiting up to [`GROUP_WINDOW`] when all are grouped.
/// Answers how many; 0 when the channel is closed and empty.
async fn gather<T>(
    receiver: &mut mpsc::UnboundedReceiver<T>,
    batch: &mut Vec<T>,
    urgency: impl Fn(&T) -> Urgency,
    urgent: &Urgent,
) -> usize {
    if receiver.recv_many(batch, MAX_BATCH).await == 0 {
        return 0;
    }
    if batch.len() < MAX_BATCH && batch.iter().all(|t| urgency(t) == Urgency::Grouped) {
        let deadline = tokio::time::Instant::now() + GROUP_WINDOW;
        let arrived = urgent.arrived.notified();
        tokio::pin!(arrived);
        // Listening before looking: an urgent item queued after the look wakes `arrived`.
        arrived.as_mut().enable();
        if urgent.queued.load(Ordering::SeqCst) == 0 {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                () = arrived => {}
            }
        }
        while batch.len() < MAX_BATCH {
            match receiver.try_recv() {
                Ok(item) => batch.push(item),
                Err(_) => break,
            }
        }
    }
    let taken = batch.iter().filter(|t| urgency(t) == Urgency::Now).count();
    urgent.queued.fetch_sub(taken, Ordering::SeqCst);
    batch.len()
}

/// Writes `batch`, ordered by user and thread (one lock order across instances); a failed
/// transaction is retried turn by turn.
async fn write_batch(store: &dyn ChatStore, batch: &mut Vec<Pending>) {
    batch.sort_by(|a, b| {
        let (a, b) = (&a.turn.thread, &b.turn.thread);
        (&a.user_id, &a.id).cmp(&(&b.user_id, &b.id))
    });
    let (turns, answers): (Vec<TurnRecord>, Vec<Answer>) =
        batch.drain(..).map(|p| (p.turn, p.done)).unzip();
    let outcome = store.record_turns(&turns).await;
    if let Ok(stored) = &outcome {
        if stored.len() == turns.len() {
            for ((answer, turn), stored) in answers.into_iter().zip(turns).zip(stored) {
                let _ = answer.send((Ok(*stored), turn));
            }
            return;
        }
    }
    if turns.len() > 1 {
        if let Err(err) = &outcome {
            tracing::warn!(error = %err, turns = turns.len(), "a batch of chat turns failed; writing them one by one");
        }
        for (turn, answer) in turns.into_iter().zip(answers) {
            let result = store
                .record_turns(std::slice::from_ref(&turn))
                .await
                .and_then(one_outcome);
            let _ = answer.send((result, turn));
        }
        return;
    }
    // A batch of one turn: its outcome as it is.
    if let (Some(answer), Some(turn)) = (answers.into_iter().next(), turns.into_iter().next()) {
        let _ = answer.send((outcome.and_then(one_outcome), turn));
    }
}

/// The outcome of a batch of one turn.
fn one_outcome(stored: Vec<bool>) -> StoreResult<bool> {
    match stored[..] {
        [stored] => Ok(stored),
        _ => Err(StoreError::Other(anyhow::anyhow!(
            "the store answered {} outcomes for one chat turn",
            stored.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::{Duration, Instant};

    use super::*;

    fn urgency(item: &(Urgency, u32)) -> Urgency {
        item.0
    }

    /// Queues `item` as [`TurnWriter::record`] does.
    fn send(queue: &mpsc::UnboundedSender<(Urgency, u32)>, urgent: &Urgent, item: (Urgency, u32)) {
        urgent.send(queue, item, item.0).unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn an_urgent_turn_is_taken_at_once_with_those_already_waiting() {
        let (queue, mut receiver) = mpsc::unbounded_channel();
        let urgent = Arc::new(Urgent::default());
        send(&queue, &urgent, (Urgency::Grouped, 1));
        send(&queue, &urgent, (Urgency::Now, 2));
        let started = Instant::now();
        let mut batch = Vec::new();
        assert_eq!(gather(&mut receiver, &mut batch, urgency, &urgent).await, 2);
        assert_eq!(started.elapsed(), Duration::ZERO);
        assert_eq!(urgent.queued.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn grouped_turns_wait_the_window_for_company_and_no_longer() {
        let (queue, mut receiver) = mpsc::unbounded_channel();
        let urgent = Arc::new(Urgent::default());
        send(&queue, &urgent, (Urgency::Grouped, 1));
        let (later, urgent_later) = (queue.clone(), Arc::clone(&urgent));
        tokio::spawn(async move {
            tokio::time::sleep(GROUP_WINDOW / 2).await;
            send(&later, &urgent_later, (Urgency::Grouped, 2));
            tokio::time::sleep(GROUP_WINDOW).await;
            send(&later, &urgent_later, (Urgency::Grouped, 3));
        });
        let started = Instant::now();
        let mut batch = Vec::new();
        assert_eq!(gather(&mut receiver, &mut batch, urgency, &urgent).await, 2);
        assert_eq!(
            started.elapsed(),
            GROUP_WINDOW,
            "written when the window ends"
        );
        assert_eq!(batch, [(Urgency::Grouped, 1), (Urgency::Grouped, 2)]);
        // The turn that came after the window starts the next batch.
        batch.clear();
        assert_eq!(gather(&mut receiver, &mut batch, urgency, &urgent).await, 1);
        assert_eq!(batch, [(Urgency::Grouped, 3)]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_urgent_turn_ends_the_window_when_it_arrives() {
        let (queue, mut receiver) = mpsc::unbounded_channel();
        let urgent = Arc::new(Urgent::default());
        send(&queue, &urgent, (Urgency::Grouped, 1));
        let (later, urgent_later) = (queue.clone(), Arc::clone(&urgent));
        tokio::spawn(async move {
            tokio::time::sleep(GROUP_WINDOW / 2).await;
            send(&later, &urgent_later, (Urgency::Grouped, 2));
            send(&later, &urgent_later, (Urgency::Now, 3));
        });
        let started = Instant::now();
        let mut batch = Vec::new();
        assert_eq!(gather(&mut receiver, &mut batch, urgency, &urgent).await, 3);
        assert_eq!(started.elapsed(), GROUP_WINDOW / 2);
        assert_eq!(urgent.queued.load(Ordering::SeqCst), 0);
    }

    /// An urgent item counted but not yet queued when the window opens: the writer does not
    /// wait (it will find the item at once in the next batch).
    #[tokio::test(start_paused = true)]
    async fn an_urgent_turn_on_its_way_keeps_the_window_shut() {
        let (queue, mut receiver) = mpsc::unbounded_channel();
        let urgent = Urgent::default();
        send(&queue, &urgent, (Urgency::Grouped, 1));
        urgent.queuing();
        let started = Instant::now();
        let mut batch = Vec::new();
        assert_eq!(gather(&mut receiver, &mut batch, urgency, &urgent).await, 1);
        assert_eq!(started.elapsed(), Duration::ZERO);
        queue.send((Urgency::Now, 2)).unwrap();
        urgent.queued();
        batch.clear();
        assert_eq!(gather(&mut receiver, &mut batch, urgency, &urgent).await, 1);
        assert_eq!(started.elapsed(), Duration::ZERO);
        assert_eq!(urgent.queued.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_batch_does_not_wait_and_a_closed_channel_ends_the_window() {
        let (queue, mut receiver) = mpsc::unbounded_channel();
        let urgent = Urgent::default();
        for i in 0..MAX_BATCH as u32 + 1 {
            send(&queue, &urgent, (Urgency::Grouped, i));
        }
        let started = Instant::now();
        let mut batch = Vec::new();
        assert_eq!(
            gather(&mut receiver, &mut batch, urgency, &urgent).await,
            MAX_BATCH
        );
        assert_eq!(started.elapsed(), Duration::ZERO);
        batch.clear();
        drop(queue);
        assert_eq!(gather(&mut receiver, &mut batch, urgency, &urgent).await, 1);
        batch.clear();
        assert_eq!(gather(&mut receiver, &mut batch, urgency, &urgent).await, 0);
    }
}
