//! Replies in progress (docs/api.md § Resumable streams, § Turns in order): each thread's
//! turn, which one reply holds at a time ([`Replies::begin_turn`]); the frames of resumable
//! replies, kept so that a client can resume ([`ReplyLog`], [`Replies::follow`]); cancelling
//! a reply ([`Replies::cancel`]); and the drain at shutdown ([`Replies::drain`]).
//!
//! One instance keeps all of it in memory. With Redis (`REDIS_URL`) every instance sees the
//! same turns and frames: a thread's turn is a lease (`turn:{threadId}`, renewed every second
//! by the instance holding it, in one pipeline for all its turns, which also reads the cancel
//! requests sent to them, `cancel:{replyId}`), and the
//! frames of a resumable reply are appended to a Redis Stream (`reply:{replyId}`, entry id
//! `0-{frame id}`, bounded to [`MAX_FRAMES`] and expiring [`RETENTION`] after the reply ends)
//! that any instance replays and follows (<https://redis.io/docs/latest/develop/data-types/streams/>).
//! Without Redis, the finished replies' frames outlive a graceful restart through a file
//! ([`Replies::save`], [`Replies::restore`]).

use std::{
    collections::{HashMap, VecDeque},
    path::Path,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, MutexGuard, PoisonError,
    },
    time::{Duration, Instant},
};

use futures::{Stream, StreamExt as _};
use redis::AsyncCommands as _;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    ids::{AgentId, MessageId, ThreadId, UserId},
    ratelimit::SharedRedis,
};

/// Whose a reply is: the thread's user and agent. Resuming and cancelling check it, also
/// for a new conversation, which is stored only when its first reply ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub user_id: UserId,
    pub agent_id: AgentId,
}

impl Owner {
    /// `reply user agent`: a turn's lease and a thread's latest reply in Redis.
    fn tag(&self, reply: &MessageId) -> String {
        format!("{reply} {} {}", self.user_id, self.agent_id)
    }

    /// The reply of a [`Owner::tag`] if it is this owner's.
    fn reply_in(&self, tag: &str) -> Option<MessageId> {
        let mut parts = tag.split(' ');
        let (reply, user, agent) = (parts.next()?, parts.next()?, parts.next()?);
        (user == self.user_id.as_str() && agent == self.agent_id.as_str())
            .then(|| MessageId::from(reply))
    }
}

/// How long a finished reply's frames stay replayable.
pub const RETENTION: Duration = Duration::from_secs(600);
/// Frames kept per reply at most; a longer reply keeps its last ones.
pub const MAX_FRAMES: usize = 8_192;
/// Bytes of finished replies' frames one instance keeps at most; the oldest go first.
pub const RETAINED_BYTES: usize = 64 << 20;
/// How long resumable replies go on generating after the grace period, for clients that
/// resume on another instance; then they are stored as `interrupted`.
pub const HANDOVER: Duration = Duration::from_secs(10);
/// How long a message sent with `queue: true` waits for the thread's reply in progress.
pub const QUEUE_WAIT: Duration = Duration::from_secs(600);
/// A turn's lease in Redis; its instance renews it every [`TURN_RENEWAL`].
const TURN_LEASE: Duration = Duration::from_secs(30);
/// How often an instance renews its turns' leases and reads whether they were cancelled.
const TURN_RENEWAL: Duration = Duration::from_secs(1);
/// How often a follower of another instance's reply reads the reply's new frames.
const FOLLOW_POLL: Duration = Duration::from_millis(20);
/// How often a queued turn asks Redis whether the thread's turn is free.
const QUEUE_POLL: Duration = Duration::from_millis(50);
/// The longest wait for one Redis call of this module.
const REDIS_CALL: Duration = Duration::from_secs(2);
/// A follower of another instance's reply gives up after this long without a frame once the
/// reply's turn has no holder (its instance stopped without ending it).
const ORPHAN_AFTER: Duration = Duration::from_secs(5);

/// The stored error of a reply cancelled by `POST .../cancel`.
pub const CANCELLED: &str = "cancelled by request";
/// The stored error of a reply its instance stopped when its shutdown's handover ended.
pub const INTERRUPTED: &str = "the server generating it shut down";

/// The text of the last frame of every reply.
pub use app::api::STREAM_DONE as DONE;

/// A thread's previous reply is still in progress ([`Replies::begin_turn`] without `queue`,
/// or a queued turn that waited [`QUEUE_WAIT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnBusy;

/// The frames after the one a client asked to resume from are no longer kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FramesGone;

/// One frame of a reply: its id (from 1) and its SSE `data`.
pub type LoggedFrame = (u64, Arc<str>);

/// The frames of one resumable reply, in order; followers wait on its changes.
pub struct ReplyLog {
    pub reply_id: MessageId,
    pub thread_id: ThreadId,
    pub owner: Owner,
    frames: watch::Sender<Frames>,
    /// The writer of the instance's frames into Redis, and this reply's keys there.
    mirror: Option<(mpsc::UnboundedSender<Mirrored>, Arc<MirrorKeys>)>,
}

/// A reply's keys in Redis: its stream, and its thread's pointer with the value it gets.
struct MirrorKeys {
    stream: String,
    pointer: String,
    tag: String,
}

/// What the instance's writer into Redis ([`mirror`]) is sent.
enum Mirrored {
    Frame(Arc<MirrorKeys>, u64, Arc<str>),
    /// Answered once everything sent before is written (or failed).
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// The kept frames of a [`ReplyLog`].
#[derive(Default)]
struct Frames {
    list: VecDeque<Arc<str>>,
    /// The id of `list[0]`.
    first: u64,
    bytes: usize,
    /// Whether the last frame is in.
    finished: bool,
}

impl Frames {
    fn next_id(&self) -> u64 {
        self.first + self.list.len() as u64
    }
}

impl ReplyLog {
    /// Appends a frame; returns its id (1 for the first).
    pub fn push(&self, data: Arc<str>) -> u64 {
        let mut id = 0;
        self.frames.send_modify(|f| {
            id = f.next_id();
            f.bytes += data.len();
            f.list.push_back(data.clone());
            if f.list.len() > MAX_FRAMES {
                if let Some(old) = f.list.pop_front() {
                    f.bytes -= old.len();
                    f.first += 1;
                }
            }
        });
        if let Some((mirror, keys)) = &self.mirror {
            let _ = mirror.send(Mirrored::Frame(keys.clone(), id, data));
        }
        id
    }

    fn bytes(&self) -> usize {
        self.frames.borrow().bytes
    }
}

/// A finished reply's frames as [`Replies::save`] writes them (JSON).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SavedReply {
    reply_id: String,
    thread_id: String,
    user_id: String,
    agent_id: String,
    /// When the reply ended, in Unix milliseconds.
    ended_at: i64,
    /// The id of `frames[0]`.
    first: u64,
    frames: Vec<String>,
}

/// A thread's turn in this instance: one permit, and its holder.
struct Slot {
    gate: Arc<Semaphore>,
    holder: Option<Holder>,
}

/// Where the reply holding a thread's turn runs ([`Replies::holding`]).
enum Holding {
    /// On this instance: its cancel token.
    Here(CancellationToken),
    /// On another instance: its id (`cancel:{reply}` asks it to stop).
    There(MessageId),
}

/// The reply holding a thread's turn in this instance.
#[derive(Clone)]
struct Holder {
    reply: MessageId,
    owner: Owner,
    cancel: CancellationToken,
    /// Whether the turn holds a lease in Redis, which [`renew_leases`] renews.
    leased: bool,
}

#[derive(Default)]
struct Local {
    turns: HashMap<ThreadId, Slot>,
    /// Each thread's latest resumable reply generated here, running or finished.
    logs: HashMap<ThreadId, Arc<ReplyLog>>,
    /// Finished replies in the order they ended, with when, for [`RETENTION`].
    finished: VecDeque<(Instant, Arc<ReplyLog>)>,
    finished_bytes: usize,
}

/// The registry of replies in progress and just finished ([module docs](self)).
pub struct Replies {
    local: Mutex<Local>,
    redis: Option<SharedRedis>,
    /// Set when the instance begins to shut down.
    draining: CancellationToken,
    /// Set when the shutdown's grace period is over: streams end, unresumable replies stop.
    grace_over: CancellationToken,
    /// Set when the handover after the grace period is over: resumable replies stop.
    handover_over: CancellationToken,
    /// Generation of resumable replies.
    tasks: TaskTracker,
    /// The writer of resumable replies' frames into Redis ([`mirror`]).
    mirror: Option<mpsc::UnboundedSender<Mirrored>>,
    /// Pipelines [`renew_leases`] has sent.
    renewals: AtomicU64,
}

impl Replies {
    /// The registry; with `redis` (a connection of its own: frames come in bursts that other
    /// callers should not queue behind), shared by every instance that uses it. Starts the
    /// writer of frames into Redis and the renewal of the turns' leases, so it must be
    /// called within a Tokio runtime when `redis` is given.
    pub fn new(redis: Option<SharedRedis>) -> Arc<Self> {
        let mirror = redis.as_ref().map(|redis| {
            let (sender, receiver) = mpsc::unbounded_channel();
            tokio::spawn(mirror(redis.clone(), receiver));
            sender
        });
        Arc::new_cyclic(|me| {
            if let Some(redis) = &redis {
                tokio::spawn(renew_leases(me.clone(), redis.clone()));
            }
            Self {
                local: Mutex::default(),
                redis,
                draining: CancellationToken::new(),
                grace_over: CancellationToken::new(),
                handover_over: CancellationToken::new(),
                tasks: TaskTracker::new(),
                mirror,
                renewals: AtomicU64::new(0),
            }
        })
    }

    /// Whether instances share the replies through Redis.
    pub fn is_shared(&self) -> bool {
        self.redis.is_some()
    }

    fn lock(&self) -> MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes `thread`'s turn for `reply`: at once, or with `queue` once the reply in progress
    /// has ended (FIFO on this instance; every [`QUEUE_POLL`] across instances).
    /// Errors: [`TurnBusy`] when another reply holds it (after [`QUEUE_WAIT`] with `queue`).
    /// Redis failing leaves each instance its own order (logged).
    pub async fn begin_turn(
        self: &Arc<Self>,
        thread: &ThreadId,
        reply: &MessageId,
        owner: &Owner,
        queue: bool,
    ) -> Result<TurnGuard, TurnBusy> {
        let gate = {
            let mut local = self.lock();
            local
                .turns
                .entry(thread.clone())
                .or_insert_with(|| Slot {
                    gate: Arc::new(Semaphore::new(1)),
                    holder: None,
                })
                .gate
                .clone()
        };
        let deadline = tokio::time::Instant::now() + QUEUE_WAIT;
        let permit = if queue {
            tokio::time::timeout_at(deadline, gate.acquire_owned())
                .await
                .ok()
                .and_then(Result::ok)
        } else {
            gate.try_acquire_owned().ok()
        };
        let Some(permit) = permit else {
            self.tidy(thread);
            return Err(TurnBusy);
        };
        let lease = match &self.redis {
            None => None,
            Some(redis) => {
                let key = redis.key(&format!("turn:{thread}"));
                let tag = owner.tag(reply);
                loop {
                    match take_lease(redis, &key, &tag).await {
                        Some(true) => break Some((redis.clone(), key, tag)),
                        Some(false) if queue && tokio::time::Instant::now() < deadline => {
                            tokio::time::sleep(QUEUE_POLL).await
                        }
                        Some(false) => {
                            drop(permit);
                            self.tidy(thread);
                            return Err(TurnBusy);
                        }
                        // Redis does not answer (warned): this instance's order alone.
                        None => break None,
                    }
                }
            }
        };
        let cancel = CancellationToken::new();
        if let Some(slot) = self.lock().turns.get_mut(thread) {
            slot.holder = Some(Holder {
                reply: reply.clone(),
                owner: owner.clone(),
                cancel: cancel.clone(),
                leased: lease.is_some(),
            });
        }
        Ok(TurnGuard {
            replies: self.clone(),
            thread: thread.clone(),
            reply: reply.clone(),
            held: Mutex::new(Held {
                permit: Some(permit),
                lease,
            }),
            cancel,
        })
    }

    /// Forgets `thread`'s slot when no turn holds or waits for it.
    fn tidy(&self, thread: &ThreadId) {
        let mut local = self.lock();
        if let Some(slot) = local.turns.get(thread) {
            if slot.gate.available_permits() == 1 && Arc::strong_count(&slot.gate) == 1 {
                local.turns.remove(thread);
            }
        }
    }

    /// Ends `reply`'s hold on `thread` (its [`TurnGuard`] was dropped).
    fn release(&self, thread: &ThreadId, reply: &MessageId, permit: OwnedSemaphorePermit) {
        let mut local = self.lock();
        drop(permit);
        if let Some(slot) = local.turns.get_mut(thread) {
            if slot.holder.as_ref().is_some_and(|h| &h.reply == reply) {
                slot.holder = None;
            }
            if slot.gate.available_permits() == 1 && Arc::strong_count(&slot.gate) == 1 {
                local.turns.remove(thread);
            }
        }
    }

    /// The reply of `owner`'s that holds `thread`'s turn: on this instance, or (with Redis)
    /// on another one. `None` when there is none, it is someone else's, or Redis does not
    /// answer.
    async fn holding(&self, thread: &ThreadId, owner: &Owner) -> Option<Holding> {
        let holder = self
            .lock()
            .turns
            .get(thread)
            .and_then(|slot| slot.holder.clone());
        if let Some(holder) = holder {
            return (&holder.owner == owner).then_some(Holding::Here(holder.cancel));
        }
        let redis = self.redis.as_ref()?;
        let turn = redis.key(&format!("turn:{thread}"));
        redis
            .run("reading a conversation's turn", |mut c| async move {
                c.get::<_, Option<String>>(turn).await
            })
            .await?
            .and_then(|tag| owner.reply_in(&tag))
            .map(Holding::There)
    }

    /// Cancels `thread`'s reply in progress if it is `owner`'s, on this instance or (with
    /// Redis) the one that generates it, within [`TURN_RENEWAL`]. Returns whether there was
    /// one.
    pub async fn cancel(&self, thread: &ThreadId, owner: &Owner) -> bool {
        match self.holding(thread, owner).await {
            None => false,
            Some(Holding::Here(cancel)) => {
                cancel.cancel();
                true
            }
            Some(Holding::There(reply)) => {
                let Some(redis) = &self.redis else {
                    return false;
                };
                let asked = redis.key(&format!("cancel:{reply}"));
                redis
                    .run("asking to cancel a reply", |mut c| async move {
                        c.set_ex::<_, _, ()>(asked, 1, 60).await
                    })
                    .await
                    .is_some()
            }
        }
    }

    /// Whether a reply of `owner`'s holds `thread`'s turn, here or (with Redis) anywhere.
    pub async fn in_progress(&self, thread: &ThreadId, owner: &Owner) -> bool {
        self.holding(thread, owner).await.is_some()
    }

    /// A new log for `reply`, the latest of `thread`; with Redis, mirrored into its stream.
    pub fn open_log(&self, thread: &ThreadId, reply: &MessageId, owner: &Owner) -> Arc<ReplyLog> {
        let mirror = self
            .redis
            .as_ref()
            .zip(self.mirror.as_ref())
            .map(|(redis, mirror)| {
                let keys = MirrorKeys {
                    stream: redis.key(&format!("reply:{reply}")),
                    pointer: redis.key(&format!("thread-reply:{thread}")),
                    tag: owner.tag(reply),
                };
                (mirror.clone(), Arc::new(keys))
            });
        let log = Arc::new(ReplyLog {
            reply_id: reply.clone(),
            thread_id: thread.clone(),
            owner: owner.clone(),
            frames: watch::Sender::new(Frames {
                first: 1,
                ..Frames::default()
            }),
            mirror,
        });
        let mut local = self.lock();
        self.expire(&mut local);
        local.logs.insert(thread.clone(), log.clone());
        log
    }

    /// Marks `log` finished: its last frame is in. It stays replayable for [`RETENTION`].
    pub fn finish_log(&self, log: &Arc<ReplyLog>) {
        log.frames.send_modify(|f| f.finished = true);
        let mut local = self.lock();
        local.finished_bytes += log.bytes();
        local.finished.push_back((Instant::now(), log.clone()));
        self.expire(&mut local);
    }

    /// Drops finished logs past [`RETENTION`] or beyond [`RETAINED_BYTES`], oldest first.
    fn expire(&self, local: &mut Local) {
        let now = Instant::now();
        while let Some((ended, log)) = local.finished.front() {
            if now.duration_since(*ended) < RETENTION && local.finished_bytes <= RETAINED_BYTES {
                break;
            }
            let bytes = log.bytes();
            let (thread, reply) = (log.thread_id.clone(), log.reply_id.clone());
            local.finished.pop_front();
            local.finished_bytes = local.finished_bytes.saturating_sub(bytes);
            if local
                .logs
                .get(&thread)
                .is_some_and(|latest| latest.reply_id == reply)
            {
                local.logs.remove(&thread);
            }
        }
    }

    /// The frames of `thread`'s latest resumable reply after frame `after`, as they come,
    /// up to [`DONE`]: from this instance's memory, else (with Redis) from the reply's
    /// stream. `None`: no such reply of `owner`'s in progress or finished within
    /// [`RETENTION`]. Errors: [`FramesGone`] when frame `after + 1` is no longer kept.
    pub async fn follow(
        &self,
        thread: &ThreadId,
        owner: &Owner,
        after: u64,
    ) -> Result<Option<(MessageId, FrameStream)>, FramesGone> {
        let log = {
            let mut local = self.lock();
            self.expire(&mut local);
            local.logs.get(thread).cloned()
        };
        if let Some(log) = log {
            if &log.owner != owner {
                return Ok(None);
            }
            if after.saturating_add(1) < log.frames.borrow().first {
                return Err(FramesGone);
            }
            let reply = log.reply_id.clone();
            return Ok(Some((reply, follow_local(log, after).boxed())));
        }
        let Some(redis) = &self.redis else {
            return Ok(None);
        };
        let pointer = redis.key(&format!("thread-reply:{thread}"));
        let Some(Some(reply)) = redis
            .run("finding a reply to resume", |mut c| async move {
                c.get::<_, Option<String>>(pointer).await
            })
            .await
            .map(|tag| tag.and_then(|tag| owner.reply_in(&tag)))
        else {
            return Ok(None);
        };
        let key = redis.key(&format!("reply:{reply}"));
        let oldest = key.clone();
        let first = redis
            .run("reading a reply's first frame", |mut c| async move {
                c.xrange_count::<_, _, _, _, redis::streams::StreamRangeReply>(oldest, "-", "+", 1)
                    .await
            })
            .await;
        match first.map(|f| f.ids.first().and_then(|e| frame_id(&e.id))) {
            Some(Some(first)) if after.saturating_add(1) < first => return Err(FramesGone),
            Some(None) => return Ok(None),
            // Or Redis did not answer: following it will tell.
            _ => {}
        }
        let stream = follow_remote(
            redis.clone(),
            key,
            redis.key(&format!("turn:{thread}")),
            after,
        );
        Ok(Some((reply, stream.boxed())))
    }

    /// Runs `generation` (a resumable reply) to its end whatever its clients do; a graceful
    /// shutdown waits for it ([`Replies::drained`]).
    pub fn spawn(&self, generation: impl std::future::Future<Output = ()> + Send + 'static) {
        self.tasks.spawn(generation);
    }

    /// Starts the drain: readiness answers 503 from now on.
    pub fn drain(&self) {
        self.draining.cancel();
    }

    /// Whether the instance is shutting down.
    pub fn is_draining(&self) -> bool {
        self.draining.is_cancelled()
    }

    /// Ends the grace period: streams end with a frame telling the client to resume, and
    /// replies that cannot be resumed stop and are stored as `interrupted`. Resumable replies
    /// go on generating, for clients that resume elsewhere, until [`Replies::end_handover`].
    pub fn end_grace(&self) {
        self.grace_over.cancel();
    }

    /// Ends the handover: resumable replies still generating stop and are stored as
    /// `interrupted`, their streams ending with an error frame and [`DONE`].
    pub fn end_handover(&self) {
        self.grace_over.cancel();
        self.handover_over.cancel();
    }

    /// Cancelled when the grace period is over ([`Replies::end_grace`]).
    pub fn grace_token(&self) -> CancellationToken {
        self.grace_over.clone()
    }

    /// Cancelled when the handover is over ([`Replies::end_handover`]).
    pub fn handover_token(&self) -> CancellationToken {
        self.handover_over.clone()
    }

    /// Writes the frames of the finished replies still replayable to `path` (JSON, through a
    /// temporary file beside it that replaces it; readable by the owner alone), so that
    /// [`Replies::restore`] brings them back after a restart; no file when there are none.
    /// Call it once the replies have drained. Returns how many replies were written.
    /// Errors: the file cannot be written.
    pub fn save(&self, path: &Path) -> std::io::Result<usize> {
        let now_ms = chrono::Utc::now().timestamp_millis();
        let saved: Vec<SavedReply> = {
            let mut local = self.lock();
            self.expire(&mut local);
            local
                .finished
                .iter()
                .filter(|(_, log)| {
                    local
                        .logs
                        .get(&log.thread_id)
                        .is_some_and(|latest| Arc::ptr_eq(latest, log))
                })
                .map(|(ended, log)| {
                    let frames = log.frames.borrow();
                    SavedReply {
                        reply_id: log.reply_id.to_string(),
                        thread_id: log.thread_id.to_string(),
                        user_id: log.owner.user_id.to_string(),
                        agent_id: log.owner.agent_id.to_string(),
                        ended_at: now_ms - ended.elapsed().as_millis() as i64,
                        first: frames.first,
                        frames: frames.list.iter().map(|f| f.to_string()).collect(),
                    }
                })
                .collect()
        };
        if saved.is_empty() {
            return Ok(0);
        }
        let temporary = path.with_extension("json.tmp");
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = std::io::BufWriter::new(options.open(&temporary)?);
        serde_json::to_writer(&mut file, &saved)?;
        std::io::Write::flush(&mut file)?;
        file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&temporary, path)?;
        Ok(saved.len())
    }

    /// Brings back the replies [`Replies::save`] wrote to `path`, those that ended less than
    /// [`RETENTION`] ago, as if they had just been generated here; then deletes the file. A
    /// missing file is no replies; an unreadable one is warned about and deleted. Returns how
    /// many replies came back.
    pub fn restore(&self, path: &Path) -> usize {
        let text = match std::fs::read(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return 0,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "the replies kept at the last shutdown cannot be read");
                return 0;
            }
        };
        if let Err(e) = std::fs::remove_file(path) {
            tracing::warn!(path = %path.display(), error = %e, "the replies kept at the last shutdown cannot be deleted");
        }
        let mut saved: Vec<SavedReply> = match serde_json::from_slice(&text) {
            Ok(saved) => saved,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "the replies kept at the last shutdown are not readable; they are dropped");
                return 0;
            }
        };
        saved.sort_by_key(|r| r.ended_at);
        let now_ms = chrono::Utc::now().timestamp_millis();
        let mut local = self.lock();
        let mut restored = 0;
        for reply in saved {
            let age = Duration::from_millis(now_ms.saturating_sub(reply.ended_at).max(0) as u64);
            let Some(ended) = Instant::now().checked_sub(age).filter(|_| age < RETENTION) else {
                continue;
            };
            if reply.first == 0 || reply.frames.is_empty() {
                continue;
            }
            let list: VecDeque<Arc<str>> = reply.frames.into_iter().map(Arc::from).collect();
            let bytes = list.iter().map(|f| f.len()).sum();
            let log = Arc::new(ReplyLog {
                reply_id: MessageId::from(reply.reply_id),
                thread_id: ThreadId::from(reply.thread_id),
                owner: Owner {
                    user_id: UserId::from(reply.user_id),
                    agent_id: AgentId::from(reply.agent_id),
                },
                frames: watch::Sender::new(Frames {
                    list,
                    first: reply.first,
                    bytes,
                    finished: true,
                }),
                mirror: None,
            });
            local.finished_bytes += bytes;
            local.finished.push_back((ended, log.clone()));
            local.logs.insert(log.thread_id.clone(), log);
            restored += 1;
        }
        self.expire(&mut local);
        restored
    }

    /// `log`'s frames after `after` as they come, up to [`DONE`].
    pub fn frames(&self, log: Arc<ReplyLog>, after: u64) -> FrameStream {
        follow_local(log, after).boxed()
    }

    /// Waits, at most `max`, until no reply holds `thread`'s turn (here, and with Redis on
    /// any instance).
    pub async fn wait_idle(&self, thread: &ThreadId, max: Duration) {
        let deadline = tokio::time::Instant::now() + max;
        let gate = self.lock().turns.get(thread).map(|slot| slot.gate.clone());
        if let Some(gate) = gate {
            let _ = tokio::time::timeout_at(deadline, gate.acquire()).await;
        }
        self.tidy(thread);
        let Some(redis) = &self.redis else {
            return;
        };
        let key = redis.key(&format!("turn:{thread}"));
        while tokio::time::Instant::now() < deadline {
            let mut connection = redis.connection();
            let held: Result<redis::RedisResult<bool>, _> =
                tokio::time::timeout(REDIS_CALL, connection.exists(&key)).await;
            if !matches!(held, Ok(Ok(true))) {
                return;
            }
            tokio::time::sleep(QUEUE_POLL).await;
        }
    }

    /// Waits for the generation tasks to end and their frames to be written to Redis (at
    /// most [`REDIS_CALL`] for the last writes).
    pub async fn drained(&self) {
        self.tasks.close();
        self.tasks.wait().await;
        if let Some(mirror) = &self.mirror {
            let (written, done) = tokio::sync::oneshot::channel();
            if mirror.send(Mirrored::Flush(written)).is_ok() {
                let _ = tokio::time::timeout(REDIS_CALL, done).await;
            }
        }
    }
}

/// A thread's turn, held by one reply until dropped (once the reply is stored).
pub struct TurnGuard {
    replies: Arc<Replies>,
    thread: ThreadId,
    reply: MessageId,
    /// The turn on this instance and, with Redis, everywhere; taken when released.
    held: Mutex<Held>,
    cancel: CancellationToken,
}

/// A turn's lease in Redis: the connection, the key and its value ([`Owner::tag`]).
type Lease = (SharedRedis, String, String);

/// What a [`TurnGuard`] holds until released.
struct Held {
    permit: Option<OwnedSemaphorePermit>,
    lease: Option<Lease>,
}

impl TurnGuard {
    /// Cancelled when someone asks to cancel this reply ([`Replies::cancel`]).
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Frees the conversation for its next turn, the lease in Redis first, so that a client
    /// told the reply has ended finds it free on every instance. Once; dropping the guard
    /// does the same in a task of its own when this was not called.
    pub async fn release(&self) {
        let taken = self
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(release) = taken.map(|held| self.releasing(held)) {
            release.await;
        }
    }

    /// Ends the hold: the lease in Redis first, so that the next turn here finds the thread
    /// free there too, then the permit.
    fn releasing(
        &self,
        (permit, lease): (OwnedSemaphorePermit, Option<Lease>),
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (replies, thread, reply) = (
            self.replies.clone(),
            self.thread.clone(),
            self.reply.clone(),
        );
        async move {
            if let Some((redis, key, tag)) = lease {
                if let Err(e) = end_lease(&redis, &key, &tag).await {
                    tracing::warn!(error = %e, "a thread's turn was not released in Redis; it lapses within 30 s");
                }
            }
            replies.release(&thread, &reply, permit);
        }
    }
}

impl Held {
    /// What is still held, once: the permit and the lease.
    fn take(&mut self) -> Option<(OwnedSemaphorePermit, Option<Lease>)> {
        Some((self.permit.take()?, self.lease.take()))
    }
}

impl std::fmt::Debug for TurnGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnGuard")
            .field("thread", &self.thread)
            .field("reply", &self.reply)
            .finish_non_exhaustive()
    }
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        let Some((permit, lease)) = self
            .held
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return;
        };
        match (lease.is_some(), tokio::runtime::Handle::try_current()) {
            (true, Ok(runtime)) => {
                runtime.spawn(self.releasing((permit, lease)));
            }
            _ => self.replies.release(&self.thread, &self.reply, permit),
        }
    }
}

/// The frames of a followed reply: `Err` when the follower fell so far behind that frames it
/// had not read were dropped ([`MAX_FRAMES`]).
pub type FrameStream = futures::stream::BoxStream<'static, Result<LoggedFrame, FramesGone>>;

/// `log`'s frames after `after`, waiting for new ones until the last.
fn follow_local(
    log: Arc<ReplyLog>,
    after: u64,
) -> impl Stream<Item = Result<LoggedFrame, FramesGone>> {
    struct State {
        frames: watch::Receiver<Frames>,
        next: u64,
        batch: VecDeque<LoggedFrame>,
        ended: bool,
    }
    let state = State {
        frames: log.frames.subscribe(),
        next: after.saturating_add(1),
        batch: VecDeque::new(),
        ended: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(frame) = st.batch.pop_front() {
                return Some((Ok(frame), st));
            }
            if st.ended {
                return None;
            }
            let finished = {
                let frames = st.frames.borrow_and_update();
                if st.next < frames.first {
                    st.ended = true;
                    drop(frames);
                    return Some((Err(FramesGone), st));
                }
                let skip = (st.next - frames.first) as usize;
                for (i, data) in frames.list.iter().enumerate().skip(skip).take(256) {
                    st.batch.push_back((frames.first + i as u64, data.clone()));
                }
                st.next += st.batch.len() as u64;
                frames.finished && st.next >= frames.next_id()
            };
            if !st.batch.is_empty() {
                continue;
            }
            if finished || st.frames.changed().await.is_err() {
                return None;
            }
        }
    })
}

/// The frames of another instance's reply after `after`, read from its Redis Stream `key`
/// every [`FOLLOW_POLL`] until [`DONE`].
fn follow_remote(
    redis: SharedRedis,
    key: String,
    turn: String,
    after: u64,
) -> impl Stream<Item = Result<LoggedFrame, FramesGone>> {
    struct State {
        redis: SharedRedis,
        key: String,
        turn: String,
        next: u64,
        batch: VecDeque<LoggedFrame>,
        ended: bool,
        quiet_since: Instant,
    }
    let state = State {
        redis,
        key,
        turn,
        next: after.saturating_add(1),
        batch: VecDeque::new(),
        ended: false,
        quiet_since: Instant::now(),
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(frame) = st.batch.pop_front() {
                if &*frame.1 == DONE {
                    st.ended = true;
                }
                return Some((Ok(frame), st));
            }
            if st.ended {
                return None;
            }
            let mut connection = st.redis.connection();
            let read: Result<Result<redis::streams::StreamRangeReply, _>, _> =
                tokio::time::timeout(
                    REDIS_CALL,
                    connection.xrange_count(&st.key, format!("0-{}", st.next), "+", 512),
                )
                .await;
            match read {
                Ok(Ok(found)) => {
                    for entry in found.ids {
                        let (Some(id), Some(data)) =
                            (frame_id(&entry.id), entry.get::<String>("d"))
                        else {
                            continue;
                        };
                        if id >= st.next {
                            st.next = id + 1;
                            st.batch.push_back((id, data.into()));
                        }
                    }
                }
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "reading a reply's frames from Redis failed")
                }
                Err(_) => tracing::debug!("reading a reply's frames from Redis timed out"),
            }
            if !st.batch.is_empty() {
                st.quiet_since = Instant::now();
                continue;
            }
            if st.quiet_since.elapsed() >= ORPHAN_AFTER {
                // Its instance stopped without its last frame: the turn has no holder left.
                let held: Result<Result<bool, _>, _> =
                    tokio::time::timeout(REDIS_CALL, connection.exists(&st.turn)).await;
                if let Ok(Ok(false)) = held {
                    st.ended = true;
                    return Some((Err(FramesGone), st));
                }
                st.quiet_since = Instant::now();
            }
            tokio::time::sleep(FOLLOW_POLL).await;
        }
    })
}

/// The frame id of a stream entry id `0-{n}`.
fn frame_id(entry: &str) -> Option<u64> {
    entry.strip_prefix("0-")?.parse().ok()
}

/// `SET turn:{thread} {tag} NX PX lease`: whether the turn was free; `None` when Redis does
/// not answer ([`SharedRedis::run`]: within 50 ms, warned at most once a minute).
async fn take_lease(redis: &SharedRedis, key: &str, tag: &str) -> Option<bool> {
    let command = redis::cmd("SET")
        .arg(key)
        .arg(tag)
        .arg("NX")
        .arg("PX")
        .arg(TURN_LEASE.as_millis() as u64)
        .to_owned();
    redis
        .run("taking a conversation's turn", |mut c| async move {
            command.query_async::<Option<String>>(&mut c).await
        })
        .await
        .map(|taken| taken.is_some())
}

/// Deletes the lease `key` if its value is still `tag`.
async fn end_lease(redis: &SharedRedis, key: &str, tag: &str) -> redis::RedisResult<()> {
    static END: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
        redis::Script::new(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
        )
    });
    let mut connection = redis.connection();
    tokio::time::timeout(
        REDIS_CALL,
        END.key(key).arg(tag).invoke_async::<i64>(&mut connection),
    )
    .await
    .map_err(|_| redis::RedisError::from((redis::ErrorKind::Io, "timed out")))??;
    Ok(())
}

/// Renews the leases of every turn this instance holds, every [`TURN_RENEWAL`], in one
/// pipeline (`PEXPIRE turn:{thread}` and `GETDEL cancel:{reply}` per turn), and cancels the
/// replies someone asked to cancel. Ends with the registry.
async fn renew_leases(replies: std::sync::Weak<Replies>, redis: SharedRedis) {
    let mut tick = tokio::time::interval(TURN_RENEWAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is at once, before the registry is made.
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(registry) = replies.upgrade() else {
            return;
        };
        let held: Vec<(ThreadId, MessageId, CancellationToken)> = registry
            .lock()
            .turns
            .iter()
            .filter_map(|(thread, slot)| {
                let holder = slot.holder.as_ref().filter(|h| h.leased)?;
                Some((thread.clone(), holder.reply.clone(), holder.cancel.clone()))
            })
            .collect();
        if held.is_empty() {
            continue;
        }
        registry.renewals.fetch_add(1, Ordering::Relaxed);
        drop(registry);
        let mut pipe = redis::pipe();
        for (thread, reply, _) in &held {
            pipe.cmd("PEXPIRE")
                .arg(redis.key(&format!("turn:{thread}")))
                .arg(TURN_LEASE.as_millis() as u64)
                .ignore()
                .cmd("GETDEL")
                .arg(redis.key(&format!("cancel:{reply}")));
        }
        let mut connection = redis.connection();
        let answer: Result<redis::RedisResult<Vec<Option<String>>>, _> =
            tokio::time::timeout(REDIS_CALL, pipe.query_async(&mut connection)).await;
        match answer {
            Ok(Ok(asked)) => {
                for ((_, _, cancel), asked) in held.iter().zip(asked) {
                    if asked.is_some() {
                        cancel.cancel();
                    }
                }
            }
            Ok(Err(e)) => tracing::debug!(error = %e, "renewing the turns' leases in Redis failed"),
            Err(_) => tracing::debug!("renewing the turns' leases in Redis timed out"),
        }
    }
}

/// The instance's writer of resumable replies' frames into Redis: each reply's frames go to
/// its stream, and its first and last point its thread at it (expiring with the stream: an
/// hour while it runs, so that a crashed instance's stream goes too, then [`RETENTION`]).
/// Whatever was sent while a write was on its way goes in the next pipeline, so that the
/// calls stay few under load. Failures are warned once per run of them.
async fn mirror(redis: SharedRedis, mut sent: mpsc::UnboundedReceiver<Mirrored>) {
    const RUNNING_TTL: u64 = 3_600;
    let mut batch = Vec::with_capacity(1_024);
    let mut failed = false;
    loop {
        if sent.recv_many(&mut batch, 4_096).await == 0 {
            return;
        }
        let mut pipe = redis::pipe();
        let mut flushes = Vec::new();
        for item in batch.drain(..) {
            let (keys, id, data) = match item {
                Mirrored::Frame(keys, id, data) => (keys, id, data),
                Mirrored::Flush(written) => {
                    flushes.push(written);
                    continue;
                }
            };
            pipe.cmd("XADD")
                .arg(&keys.stream)
                .arg("MAXLEN")
                .arg("~")
                .arg(MAX_FRAMES)
                .arg(format!("0-{id}"))
                .arg("d")
                .arg(&*data)
                .ignore();
            let ttl = match (id, &*data == DONE) {
                (_, true) => RETENTION.as_secs(),
                (1, false) => RUNNING_TTL,
                _ => continue,
            };
            pipe.cmd("SET")
                .arg(&keys.pointer)
                .arg(&keys.tag)
                .arg("EX")
                .arg(ttl)
                .ignore();
            pipe.cmd("EXPIRE").arg(&keys.stream).arg(ttl).ignore();
        }
        if pipe.cmd_iter().next().is_some() {
            let mut connection = redis.connection();
            match tokio::time::timeout(REDIS_CALL, pipe.query_async::<()>(&mut connection)).await {
                Ok(Ok(())) => failed = false,
                Ok(Err(e)) if !failed => {
                    failed = true;
                    tracing::warn!(error = %e, "replies' frames were not written to Redis: other instances cannot resume them");
                }
                Err(_) if !failed => {
                    failed = true;
                    tracing::warn!("Redis took too long to take replies' frames: other instances cannot resume them");
                }
                _ => {}
            }
        }
        for written in flushes {
            let _ = written.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner_of(user: &str, agent: &str) -> Owner {
        Owner {
            user_id: UserId::from(user),
            agent_id: AgentId::from(agent),
        }
    }

    fn owner() -> Owner {
        owner_of("u", "a")
    }

    fn frames(log: &ReplyLog, n: usize) {
        for i in 0..n {
            log.push(format!("{{\"chunk\":\"{i}\"}}").into());
        }
    }

    async fn collect(stream: FrameStream) -> Vec<u64> {
        stream.map(|f| f.unwrap().0).collect().await
    }

    #[tokio::test]
    async fn finished_replies_saved_at_shutdown_are_replayed_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("replies.json");
        let replies = Replies::new(None);
        let (thread, reply) = (ThreadId::new(), MessageId::new());
        let log = replies.open_log(&thread, &reply, &owner());
        frames(&log, 3);
        log.push(DONE.into());
        replies.finish_log(&log);
        // A reply still running is not kept: its frames would stop short of [DONE].
        let running = replies.open_log(&ThreadId::new(), &MessageId::new(), &owner());
        frames(&running, 2);
        assert_eq!(replies.save(&path).unwrap(), 1);

        let restarted = Replies::new(None);
        assert_eq!(restarted.restore(&path), 1);
        assert!(!path.exists(), "read once");
        let (id, stream) = restarted
            .follow(&thread, &owner(), 1)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(id, reply);
        assert_eq!(collect(stream).await, [2, 3, 4]);
        let stranger = owner_of("v", "a");
        assert!(restarted
            .follow(&thread, &stranger, 0)
            .await
            .unwrap()
            .is_none());

        // Past the retention, or unreadable: nothing comes back, and the file goes.
        let old = serde_json::json!([{
            "replyId": "r", "threadId": "t", "userId": "u", "agentId": "a",
            "endedAt": chrono::Utc::now().timestamp_millis() - RETENTION.as_millis() as i64 - 1_000,
            "first": 1, "frames": ["{}", DONE],
        }]);
        std::fs::write(&path, old.to_string()).unwrap();
        assert_eq!(Replies::new(None).restore(&path), 0);
        std::fs::write(&path, "not json").unwrap();
        assert_eq!(Replies::new(None).restore(&path), 0);
        assert!(!path.exists());
        assert_eq!(Replies::new(None).restore(&path), 0, "no file: none");
        assert_eq!(Replies::new(None).save(&path).unwrap(), 0);
        assert!(!path.exists(), "nothing to keep, no file");
    }

    #[tokio::test]
    async fn a_follower_gets_every_frame_after_its_id_once_live_or_replayed() {
        let replies = Replies::new(None);
        let thread = ThreadId::new();
        let reply = MessageId::new();
        let log = replies.open_log(&thread, &reply, &owner());
        frames(&log, 3);
        let (found, stream) = replies.follow(&thread, &owner(), 1).await.unwrap().unwrap();
        assert_eq!(found, reply);
        let follower = tokio::spawn(collect(stream));
        tokio::task::yield_now().await;
        frames(&log, 2);
        log.push(DONE.into());
        replies.finish_log(&log);
        assert_eq!(follower.await.unwrap(), vec![2, 3, 4, 5, 6]);
        // Finished: replayed at once, from the start or from the end.
        let (_, all) = replies.follow(&thread, &owner(), 0).await.unwrap().unwrap();
        assert_eq!(collect(all).await, (1..=6).collect::<Vec<_>>());
        let (_, none) = replies.follow(&thread, &owner(), 6).await.unwrap().unwrap();
        assert!(collect(none).await.is_empty());
        let stranger = owner_of("u", "b");
        assert!(replies
            .follow(&thread, &stranger, 0)
            .await
            .unwrap()
            .is_none());
        assert!(replies
            .follow(&ThreadId::new(), &owner(), 0)
            .await
            .unwrap()
            .is_none());
    }

    #[tokio::test]
    async fn frames_dropped_from_a_long_reply_are_reported_gone() {
        let replies = Replies::new(None);
        let thread = ThreadId::new();
        let log = replies.open_log(&thread, &MessageId::new(), &owner());
        frames(&log, MAX_FRAMES + 9);
        log.push(DONE.into());
        replies.finish_log(&log);
        // Frames 1..=10 were dropped; 11 is the first kept.
        assert!(matches!(
            replies.follow(&thread, &owner(), 9).await,
            Err(FramesGone)
        ));
        let (_, rest) = replies
            .follow(&thread, &owner(), 10)
            .await
            .unwrap()
            .unwrap();
        let ids = collect(rest).await;
        assert_eq!(ids.len(), MAX_FRAMES);
        assert_eq!(ids[0], 11);
    }

    #[tokio::test]
    async fn a_thread_has_one_turn_at_a_time_and_a_queued_one_waits_for_it() {
        let replies = Replies::new(None);
        let thread = ThreadId::new();
        let first = replies
            .begin_turn(&thread, &MessageId::new(), &owner(), false)
            .await
            .unwrap();
        assert_eq!(
            replies
                .begin_turn(&thread, &MessageId::new(), &owner(), false)
                .await
                .unwrap_err(),
            TurnBusy
        );
        // Other threads are not held up.
        let _other = replies
            .begin_turn(&ThreadId::new(), &MessageId::new(), &owner(), false)
            .await
            .unwrap();
        let queued = {
            let replies = replies.clone();
            let thread = thread.clone();
            tokio::spawn(async move {
                replies
                    .begin_turn(&thread, &MessageId::new(), &owner(), true)
                    .await
            })
        };
        tokio::task::yield_now().await;
        assert!(!queued.is_finished());
        drop(first);
        let second = queued.await.unwrap().unwrap();
        drop(second);
        assert!(
            replies.lock().turns.len() == 1,
            "only the other thread is held"
        );
    }

    #[tokio::test]
    async fn cancel_reaches_the_holder_of_the_turn() {
        let replies = Replies::new(None);
        let thread = ThreadId::new();
        assert!(!replies.cancel(&thread, &owner()).await);
        let turn = replies
            .begin_turn(&thread, &MessageId::new(), &owner(), false)
            .await
            .unwrap();
        assert!(!turn.cancel_token().is_cancelled());
        // Nobody else's: not in progress for them, not theirs to cancel.
        let stranger = owner_of("v", "a");
        assert!(!replies.in_progress(&thread, &stranger).await);
        assert!(!replies.cancel(&thread, &stranger).await);
        assert!(!turn.cancel_token().is_cancelled());
        assert!(replies.in_progress(&thread, &owner()).await);
        assert!(replies.cancel(&thread, &owner()).await);
        assert!(turn.cancel_token().is_cancelled());
        drop(turn);
        assert!(!replies.cancel(&thread, &owner()).await);
    }

    #[tokio::test]
    async fn one_pipeline_a_second_renews_every_lease_and_reads_every_cancel() {
        use crate::ratelimit::redis_testing as testing;
        let prefix = testing::unique_prefix();
        let replies = Replies::new(Some(testing::connect(&prefix).await));
        let mut raw = testing::raw_connection().await;
        let mut turns = Vec::new();
        for _ in 0..20 {
            let (thread, reply) = (ThreadId::new(), MessageId::new());
            let turn = replies
                .begin_turn(&thread, &reply, &owner(), false)
                .await
                .unwrap();
            turns.push((thread, reply, turn));
        }
        // Another instance asks for one of them to stop.
        let asked = format!("{prefix}cancel:{}", turns[3].1);
        raw.set_ex::<_, _, ()>(&asked, 1, 60).await.unwrap();
        // Two rounds (about 2 s), then time for the second's answer.
        let began = Instant::now();
        while replies.renewals.load(Ordering::Relaxed) < 2 && began.elapsed().as_secs() < 10 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let rounds = replies.renewals.load(Ordering::Relaxed);
        assert!(
            (2..=3).contains(&rounds),
            "{rounds} renewals of 20 turns in {:?}: one pipeline a second for them all",
            began.elapsed()
        );
        for (n, (thread, _, turn)) in turns.iter().enumerate() {
            let ttl: i64 = raw.pttl(format!("{prefix}turn:{thread}")).await.unwrap();
            // Unrenewed since it was taken 2 s ago or more, a 30 s lease would have at most
            // 28 s left.
            assert!(
                ttl > 28_500,
                "turn {n}'s lease was not renewed: {ttl} ms left"
            );
            assert_eq!(turn.cancel_token().is_cancelled(), n == 3, "turn {n}");
        }
        assert!(!raw.exists::<_, bool>(&asked).await.unwrap());
        for (thread, _, turn) in &turns {
            turn.release().await;
            let held: bool = raw.exists(format!("{prefix}turn:{thread}")).await.unwrap();
            assert!(!held, "a released turn leaves no lease");
        }
        let before = replies.renewals.load(Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        assert_eq!(
            replies.renewals.load(Ordering::Relaxed),
            before,
            "nothing is renewed when no turn is held"
        );
    }

    #[tokio::test]
    async fn finished_replies_are_forgotten_beyond_the_byte_bound() {
        let replies = Replies::new(None);
        let big: Arc<str> = "x".repeat(RETAINED_BYTES / 2 + 1).into();
        let threads: Vec<ThreadId> = (0..3).map(|_| ThreadId::new()).collect();
        for thread in &threads {
            let log = replies.open_log(thread, &MessageId::new(), &owner());
            log.push(big.clone());
            replies.finish_log(&log);
        }
        assert!(replies
            .follow(&threads[0], &owner(), 0)
            .await
            .unwrap()
            .is_none());
        assert!(replies
            .follow(&threads[1], &owner(), 0)
            .await
            .unwrap()
            .is_none());
        assert!(replies
            .follow(&threads[2], &owner(), 0)
            .await
            .unwrap()
            .is_some());
    }
}
