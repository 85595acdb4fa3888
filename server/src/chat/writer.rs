//! Group commits of chat turns: [`TurnWriter`] stores the turns of many conversations
//! ([`TurnRecord`]: a new thread or an existing one, the user's message and the reply) in
//! one transaction of the store ([`crate::store::ChatStore::record_turns`]), so that a busy
//! instance pays one commit for all the conversations that ended meanwhile rather than one
//! or two each.
//!
//! There is no timer: a turn handed over while no batch is being written is written at once,
//! alone; the turns handed over while a batch is being written wait for it and go together in
//! the next one ([`MAX_BATCH`] at most). At low load a turn therefore costs one commit as
//! before, and under load the batches grow with the load.
//!
//! A crash (the process killed) loses at most the turns of the batch in flight, each of them
//! whole: a batch is one transaction and a turn's messages are written together, so a reply
//! is never stored without its user's message (proven by `server/tests/crash.rs`).

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc,
};

use tokio::sync::{mpsc, oneshot, Notify};

use crate::store::{ChatStore, StoreError, StoreResult, TurnRecord};

/// The most turns one transaction stores.
pub const MAX_BATCH: usize = 256;

/// Where a turn's outcome goes: whether it was stored, and the turn itself back.
type Answer = oneshot::Sender<(StoreResult<bool>, TurnRecord)>;

/// A turn waiting to be written, and where its outcome goes.
struct Pending {
    turn: TurnRecord,
    done: Answer,
}

/// Turns handed over and not yet written, and a wake-up for [`TurnWriter::flush`].
#[derive(Default)]
struct InFlight {
    count: AtomicUsize,
    idle: Notify,
}

/// Hands chat turns to a task that stores them in batches ([`crate::store::ChatStore::record_turns`]).
/// Cloning it shares the task; the task ends when the last clone is dropped, after writing
/// what was handed over.
#[derive(Clone)]
pub struct TurnWriter {
    queue: mpsc::UnboundedSender<Pending>,
    in_flight: Arc<InFlight>,
}

impl TurnWriter {
    /// Starts the writing task on the current Tokio runtime.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn start(store: Arc<dyn ChatStore>) -> Self {
        let (queue, receiver) = mpsc::unbounded_channel();
        let in_flight = Arc::new(InFlight::default());
        tokio::spawn(write_batches(store, receiver, Arc::clone(&in_flight)));
        Self { queue, in_flight }
    }

    /// Stores `turn` with whatever other turns are waiting, and answers once its
    /// transaction has committed: the turn back when it was stored, `None` when its agent
    /// (new thread) or thread (existing one) is gone and nothing of it was written.
    ///
    /// Errors: the store's, when the turn could not be written (nothing of it was).
    pub async fn record(&self, turn: TurnRecord) -> StoreResult<Option<TurnRecord>> {
        let (done, outcome) = oneshot::channel();
        self.in_flight.count.fetch_add(1, Ordering::SeqCst);
        if self.queue.send(Pending { turn, done }).is_err() {
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

    /// Waits until every turn handed over so far has been written (or failed): for a
    /// graceful shutdown, after the last request has ended.
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

/// The writing task: takes the first waiting turn and every other one waiting behind it (up
/// to [`MAX_BATCH`]), writes them in one transaction, answers each, and starts over.
async fn write_batches(
    store: Arc<dyn ChatStore>,
    mut receiver: mpsc::UnboundedReceiver<Pending>,
    in_flight: Arc<InFlight>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while receiver.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let n = batch.len();
        write_batch(store.as_ref(), &mut batch).await;
        finished(&in_flight, n);
    }
}

/// Writes `batch` (emptied) and answers each turn. The turns go in the order of their users
/// and threads, so that two instances writing batches at once lock the rows they share (a
/// thread's counters, a user's day of usage) in the same order. When the transaction fails
/// the turns are written again one by one, so that one turn that cannot be written fails
/// alone.
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
