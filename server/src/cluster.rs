//! The cluster bus: cache invalidations and "work queued" wake-ups between instances.
//! Local with SQLite (nothing crosses the process); with PostgreSQL, `LISTEN`/`NOTIFY`
//! (<https://www.postgresql.org/docs/current/sql-notify.html>) on [`INVALIDATE_CHANNEL`]
//! (ids only, never a secret), [`JOBS_CHANNEL`] and [`WEBHOOKS_CHANNEL`], over one connection
//! of its own per instance (session mode behind a pooler). Delivery is at most once: the
//! caches' 2 s bounds and the workers' poll stay the contract, and a listener that reconnects
//! invalidates everything and wakes every worker. Details: docs/operations.md § The cluster bus.

use std::{
    str::FromStr,
    sync::{Arc, PoisonError, RwLock},
    time::Duration,
};

use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use tokio::{
    sync::{mpsc, Notify},
    task::JoinHandle,
};

use crate::{
    config::Backend,
    ids::{AgentId, ApiKeyId, SessionId, UserId},
};

/// The channel of [`Invalidation`] messages (JSON).
pub const INVALIDATE_CHANNEL: &str = "agentchat_invalidate";
/// The channel announcing a queued knowledge job (empty payload).
pub const JOBS_CHANNEL: &str = "agentchat_jobs";
/// The channel announcing a queued webhook delivery (empty payload).
pub const WEBHOOKS_CHANNEL: &str = "agentchat_webhooks";
/// The `application_name` of the bus's connection (`pg_stat_activity`).
pub const APPLICATION_NAME: &str = "agentchat-bus";

/// Messages waiting to be sent at most; beyond, new ones are dropped.
const OUTBOX: usize = 4_096;
/// Shortest interval between two warnings about dropped notifications.
const DROP_WARNING_INTERVAL: Duration = Duration::from_secs(60);
/// Messages sent in one statement at most.
const BATCH: usize = 256;
/// First reconnect wait; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(250);
/// The longest wait between two connection attempts.
const RETRY_MAX: Duration = Duration::from_secs(5);
/// How long a connection attempt may wait for the server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A change to something instances cache, by ids only: `{"kind": …, "id": …, "origin": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Invalidation {
    /// `session`: the session `id` ended or changed; cached reads and grants are dropped.
    Session {
        /// The `sid` claim.
        id: SessionId,
    },
    /// `api_key`: the API key `id` was revoked or rotated away.
    ApiKey {
        /// Never the key or its hash.
        id: ApiKeyId,
    },
    /// `agent`: the agent `id` changed, was deleted, or its knowledge changed.
    Agent { id: AgentId },
    /// `webhooks`: user `id`'s webhook subscriptions changed.
    Webhooks { id: UserId },
}

/// An [`Invalidation`] as sent: with the id of the instance that published it.
#[derive(Debug, Serialize, Deserialize)]
struct Message {
    #[serde(flatten)]
    what: Invalidation,
    origin: String,
}

/// A queue whose workers the bus wakes when work was queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// Knowledge jobs (ingestion and crawls): [`JOBS_CHANNEL`].
    Jobs,
    /// Webhook deliveries: [`WEBHOOKS_CHANNEL`].
    Webhooks,
}

impl Queue {
    pub fn channel(self) -> &'static str {
        match self {
            Self::Jobs => JOBS_CHANNEL,
            Self::Webhooks => WEBHOOKS_CHANNEL,
        }
    }
}

/// A cache that other instances' changes invalidate; its methods act locally and never publish.
pub trait LocalCache: Send + Sync + 'static {
    /// Drops what `what` names, if this cache holds that kind of thing.
    fn forget(&self, what: &Invalidation);
    /// Drops everything (a notification may have been missed).
    fn forget_all(&self);
}

/// The cluster bus handle. Cheap to clone; [`Bus::default`] is [`Bus::local`].
#[derive(Clone, Default)]
pub struct Bus(Option<Arc<Cluster>>);

struct Cluster {
    shared: Arc<Shared>,
    outbox: mpsc::Sender<Outgoing>,
    task: JoinHandle<()>,
    /// Notifications dropped because the outbox was full, and when that was last logged.
    dropped: std::sync::Mutex<(u64, Option<std::time::Instant>)>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A notification waiting to be sent.
struct Outgoing {
    channel: &'static str,
    payload: String,
}

/// What received notifications act on.
struct Shared {
    /// This instance's id, the `origin` of what it publishes.
    origin: String,
    caches: RwLock<Vec<Arc<dyn LocalCache>>>,
    wakes: RwLock<Vec<(Queue, Arc<Notify>)>>,
}

impl Bus {
    /// The bus of one instance alone: publishing and announcing do nothing.
    pub fn local() -> Self {
        Self(None)
    }

    /// [`Bus::postgres`] for a `postgres://` `database_url`, else [`Bus::local`].
    pub async fn for_database(database_url: &str) -> anyhow::Result<Self> {
        match Backend::of(database_url) {
            Some(Backend::Postgres) => Self::postgres(database_url).await,
            _ => Ok(Self::local()),
        }
    }

    /// The bus over PostgreSQL at `url`, listening when this returns. Errors: a malformed URL, or
    /// the database cannot be reached or refuses `LISTEN`.
    pub async fn postgres(url: &str) -> anyhow::Result<Self> {
        let options = PgConnectOptions::from_str(url)?.application_name(APPLICATION_NAME);
        // One connection, kept for as long as the bus lives; the pool only reconnects it.
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .idle_timeout(None)
            .max_lifetime(None)
            .acquire_timeout(CONNECT_TIMEOUT)
            .connect_lazy_with(options);
        let listener = listen(&pool)
            .await
            .map_err(|e| anyhow::anyhow!("the cluster bus cannot listen on PostgreSQL: {e}"))?;
        let shared = Arc::new(Shared {
            origin: uuid::Uuid::now_v7().simple().to_string(),
            caches: RwLock::default(),
            wakes: RwLock::default(),
        });
        let (outbox, pending) = mpsc::channel(OUTBOX);
        let task = tokio::spawn(run(listener, pool, shared.clone(), pending));
        Ok(Self(Some(Arc::new(Cluster {
            shared,
            outbox,
            task,
            dropped: std::sync::Mutex::default(),
        }))))
    }

    pub fn mode(&self) -> &'static str {
        match self.0 {
            None => "local",
            Some(_) => "postgres",
        }
    }

    /// This instance's id on the bus; `None` for the local bus.
    pub fn origin(&self) -> Option<&str> {
        self.0.as_ref().map(|c| c.shared.origin.as_str())
    }

    /// Applies other instances' invalidations to `cache` (all after a miss); local: nothing.
    pub fn add_cache(&self, cache: Arc<dyn LocalCache>) {
        if let Some(cluster) = &self.0 {
            write(&cluster.shared.caches).push(cache);
        }
    }

    /// Wakes `notify` when any instance announces work on `queue`; local: nothing.
    pub fn wake_on(&self, queue: Queue, notify: Arc<Notify>) {
        if let Some(cluster) = &self.0 {
            write(&cluster.shared.wakes).push((queue, notify));
        }
    }

    /// Tells other instances that `what` changed (after forgetting it here and storing it). Returns
    /// at once; an unsendable message is dropped with a warning.
    pub fn publish(&self, what: Invalidation) {
        let Some(cluster) = &self.0 else { return };
        let message = Message {
            what,
            origin: cluster.shared.origin.clone(),
        };
        match serde_json::to_string(&message) {
            Ok(payload) => cluster.send(INVALIDATE_CHANNEL, payload),
            Err(err) => tracing::warn!(error = %err, "cannot encode an invalidation"),
        }
    }

    /// Tells every instance that work was queued on `queue` (after storing); returns at once.
    pub fn work_queued(&self, queue: Queue) {
        if let Some(cluster) = &self.0 {
            cluster.send(queue.channel(), String::new());
        }
    }
}

impl Cluster {
    fn send(&self, channel: &'static str, payload: String) {
        match self.outbox.try_send(Outgoing { channel, payload }) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                // Logged at most once a minute: while the database is away, every change
                // and every queued job would otherwise log.
                let mut dropped = self.dropped.lock().unwrap_or_else(PoisonError::into_inner);
                dropped.0 += 1;
                if dropped
                    .1
                    .is_none_or(|at| at.elapsed() >= DROP_WARNING_INTERVAL)
                {
                    tracing::warn!(
                        dropped = dropped.0,
                        "the cluster bus is behind (is the database reachable?): notifications are dropped, and the caches' 2-second bound applies"
                    );
                    *dropped = (0, Some(std::time::Instant::now()));
                }
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Acts on a notification received on `channel`.
    fn deliver(&self, channel: &str, payload: &str) {
        match channel {
            INVALIDATE_CHANNEL => match serde_json::from_str::<Message>(payload) {
                Ok(message) if message.origin == self.origin => {}
                Ok(message) => {
                    for cache in read(&self.caches).iter() {
                        cache.forget(&message.what);
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "an invalidation this instance cannot read (from another version?); every cache is invalidated");
                    self.forget_all();
                }
            },
            JOBS_CHANNEL => self.wake(|q| q == Queue::Jobs),
            WEBHOOKS_CHANNEL => self.wake(|q| q == Queue::Webhooks),
            _ => {}
        }
    }

    fn forget_all(&self) {
        for cache in read(&self.caches).iter() {
            cache.forget_all();
        }
    }

    fn wake(&self, which: impl Fn(Queue) -> bool) {
        for (queue, notify) in read(&self.wakes).iter() {
            if which(*queue) {
                notify.notify_one();
            }
        }
    }

    fn missed(&self) {
        self.forget_all();
        self.wake(|_| true);
    }
}

/// A listener on the bus's channels; it reconnects only through [`relisten`].
async fn listen(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.ignore_pool_close_event(true);
    listener.eager_reconnect(false);
    listener
        .listen_all([INVALIDATE_CHANNEL, JOBS_CHANNEL, WEBHOOKS_CHANNEL])
        .await?;
    Ok(listener)
}

/// `listener` listening again after a lost connection: its own reconnection, else a new one.
async fn relisten(mut listener: PgListener, pool: &PgPool) -> PgListener {
    match sqlx::query("SELECT 1").execute(&mut listener).await {
        Ok(_) => listener,
        Err(err) => {
            tracing::warn!(error = %err, "the cluster bus cannot reconnect yet; retrying");
            drop(listener);
            reconnect(pool).await
        }
    }
}

/// A new listener, trying again (with a growing wait) until the database answers.
async fn reconnect(pool: &PgPool) -> PgListener {
    let mut wait = RETRY_FIRST;
    loop {
        tokio::time::sleep(wait).await;
        match listen(pool).await {
            Ok(listener) => {
                tracing::info!("the cluster bus is listening again");
                return listener;
            }
            Err(err) => {
                tracing::debug!(error = %err, "the cluster bus cannot reconnect yet");
                wait = (wait * 2).min(RETRY_MAX);
            }
        }
    }
}

/// What the bus's task waited for.
enum Event {
    Received(Result<Option<sqlx::postgres::PgNotification>, sqlx::Error>),
    Outbox(usize),
}

/// The bus's task: sends what is published and acts on what is received.
async fn run(
    mut listener: PgListener,
    pool: PgPool,
    shared: Arc<Shared>,
    mut outbox: mpsc::Receiver<Outgoing>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        // `try_recv` is cancel-safe while connected, and the bus reconnects only below,
        // outside this `select!` (eager reconnection is off).
        let event = tokio::select! {
            received = listener.try_recv() => Event::Received(received),
            sent = outbox.recv_many(&mut batch, BATCH) => Event::Outbox(sent),
        };
        match event {
            Event::Received(Ok(Some(notification))) => {
                shared.deliver(notification.channel(), notification.payload());
            }
            Event::Received(Ok(None)) => {
                tracing::warn!("the cluster bus lost its connection; notifications sent meanwhile are lost: reconnecting, then every cache is invalidated and every worker woken");
                listener = relisten(listener, &pool).await;
                shared.missed();
            }
            Event::Received(Err(err)) => {
                tracing::warn!(error = %err, "the cluster bus's listener failed: reconnecting, then every cache is invalidated and every worker woken");
                drop(listener);
                listener = reconnect(&pool).await;
                shared.missed();
            }
            // Every handle is gone.
            Event::Outbox(0) => return,
            Event::Outbox(_) => {
                let channels: Vec<&str> = batch.iter().map(|m| m.channel).collect();
                let payloads: Vec<&str> = batch.iter().map(|m| m.payload.as_str()).collect();
                let sent = sqlx::query(
                    "SELECT pg_notify(m.channel, m.payload) \
                     FROM unnest($1::text[], $2::text[]) AS m(channel, payload)",
                )
                .bind(channels)
                .bind(payloads)
                .execute(&mut listener)
                .await;
                if let Err(err) = sent {
                    tracing::warn!(error = %err, notifications = batch.len(), "the cluster bus cannot send; notifications are dropped");
                }
                batch.clear();
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Mutex;

    use super::*;
    use test_support::scratch::ScratchDatabase;

    /// A cache that records what it was told to forget.
    #[derive(Default)]
    pub(crate) struct Recorder {
        pub(crate) forgotten: Mutex<Vec<Invalidation>>,
        pub(crate) all: std::sync::atomic::AtomicUsize,
    }

    impl LocalCache for Recorder {
        fn forget(&self, what: &Invalidation) {
            self.forgotten.lock().unwrap().push(what.clone());
        }

        fn forget_all(&self) {
            self.all.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    impl Recorder {
        fn seen(&self) -> Vec<Invalidation> {
            self.forgotten.lock().unwrap().clone()
        }

        fn flushes(&self) -> usize {
            self.all.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    /// The tests' PostgreSQL: `AGENTCHAT_TEST_DATABASE_URL`, else the local server.
    pub(crate) fn test_server() -> String {
        std::env::var("AGENTCHAT_TEST_DATABASE_URL")
            .ok()
            .filter(|u| Backend::of(u) == Some(Backend::Postgres))
            .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into())
    }

    /// A scratch database on the test server; panics, naming the server, when unreachable.
    pub(crate) async fn scratch() -> ScratchDatabase {
        let server = test_server();
        ScratchDatabase::create(&server).await.unwrap_or_else(|e| {
            panic!("these tests need PostgreSQL at {server} (scripts/services.sh starts it): {e}")
        })
    }

    /// A PostgreSQL bus on `database`.
    pub(crate) async fn bus(database: &ScratchDatabase) -> Bus {
        Bus::postgres(database.url())
            .await
            .expect("a bus on the scratch database")
    }

    /// Waits up to `within` for `done`; answers how long it took, or panics with `what`.
    pub(crate) async fn eventually(
        within: Duration,
        what: &str,
        mut done: impl FnMut() -> bool,
    ) -> Duration {
        let start = std::time::Instant::now();
        while !done() {
            assert!(start.elapsed() < within, "{what}: not within {within:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        start.elapsed()
    }

    /// Whether `notify` holds a wake-up (taking it), waiting at most `within`.
    async fn woken(notify: &Notify, within: Duration) -> bool {
        tokio::time::timeout(within, notify.notified())
            .await
            .is_ok()
    }

    #[test]
    fn messages_are_small_json_objects_of_ids() {
        let message = Message {
            what: Invalidation::ApiKey { id: "k1".into() },
            origin: "o1".into(),
        };
        assert_eq!(
            serde_json::to_value(&message).unwrap(),
            serde_json::json!({"kind": "api_key", "id": "k1", "origin": "o1"})
        );
        for (what, kind) in [
            (Invalidation::Session { id: "s".into() }, "session"),
            (Invalidation::Agent { id: "a".into() }, "agent"),
            (Invalidation::Webhooks { id: "u".into() }, "webhooks"),
        ] {
            let text = serde_json::to_string(&Message {
                what: what.clone(),
                origin: "o".into(),
            })
            .unwrap();
            assert!(text.contains(&format!("\"kind\":\"{kind}\"")), "{text}");
            assert_eq!(serde_json::from_str::<Message>(&text).unwrap().what, what);
        }
    }

    #[tokio::test]
    async fn the_local_bus_changes_nothing() {
        let bus = Bus::local();
        assert_eq!(bus.mode(), "local");
        assert_eq!(bus.origin(), None);
        assert_eq!(
            Bus::for_database("sqlite:///tmp/agentchat.db")
                .await
                .unwrap()
                .mode(),
            "local"
        );
        let cache = Arc::new(Recorder::default());
        let notify = Arc::new(Notify::new());
        bus.add_cache(cache.clone());
        bus.wake_on(Queue::Jobs, notify.clone());
        bus.publish(Invalidation::Session { id: "s1".into() });
        bus.work_queued(Queue::Jobs);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(cache.seen().is_empty(), "nothing is delivered locally");
        assert_eq!(cache.flushes(), 0);
        assert!(
            !woken(&notify, Duration::from_millis(50)).await,
            "the local bus wakes nobody: the service wakes its own workers"
        );
        // A cache and a notify given to the local bus are not kept.
        assert_eq!(Arc::strong_count(&cache), 1);
        assert_eq!(Arc::strong_count(&notify), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_publish_on_one_instance_runs_the_forget_on_the_other() {
        let database = scratch().await;
        let (a, b) = (bus(&database).await, bus(&database).await);
        assert_eq!(a.mode(), "postgres");
        assert_ne!(a.origin(), b.origin());
        let (on_a, on_b) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
        a.add_cache(on_a.clone());
        b.add_cache(on_b.clone());
        // Everything sent on the invalidation channel, by anyone.
        let mut wire = PgListener::connect(database.url()).await.unwrap();
        wire.listen(INVALIDATE_CHANNEL).await.unwrap();

        let what = Invalidation::Session { id: "s1".into() };
        a.publish(what.clone());
        let took = eventually(Duration::from_secs(1), "B forgets the session", || {
            on_b.seen() == [what.clone()]
        })
        .await;
        eprintln!("delivered to the other instance in {took:?}");
        let sent = tokio::time::timeout(Duration::from_secs(1), wire.recv())
            .await
            .expect("the message is on the wire")
            .unwrap();
        let sent: serde_json::Value = serde_json::from_str(sent.payload()).unwrap();
        assert_eq!(sent["kind"], "session");
        assert_eq!(sent["id"], "s1");
        assert_eq!(sent["origin"], a.origin().unwrap());

        // The publisher skips its own message, and the receiver does not send it on.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            on_a.seen().is_empty(),
            "the publisher skips its own message"
        );
        assert!(
            tokio::time::timeout(Duration::from_millis(300), wire.recv())
                .await
                .is_err(),
            "applying a message publishes nothing"
        );
        assert_eq!(on_b.seen(), [what], "delivered once");
        assert_eq!((on_a.flushes(), on_b.flushes()), (0, 0));

        // Every kind crosses, both ways.
        let kinds = [
            Invalidation::ApiKey { id: "k1".into() },
            Invalidation::Agent { id: "a1".into() },
            Invalidation::Webhooks { id: "u1".into() },
        ];
        for what in &kinds {
            b.publish(what.clone());
        }
        eventually(Duration::from_secs(1), "A forgets all three", || {
            on_a.seen() == kinds
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queued_work_wakes_the_workers_of_every_instance() {
        let database = scratch().await;
        let (a, b) = (bus(&database).await, bus(&database).await);
        let (jobs_a, jobs_b, deliveries_b) = (
            Arc::new(Notify::new()),
            Arc::new(Notify::new()),
            Arc::new(Notify::new()),
        );
        a.wake_on(Queue::Jobs, jobs_a.clone());
        b.wake_on(Queue::Jobs, jobs_b.clone());
        b.wake_on(Queue::Webhooks, deliveries_b.clone());

        a.work_queued(Queue::Jobs);
        assert!(
            woken(&jobs_b, Duration::from_secs(1)).await,
            "B's job workers wake"
        );
        assert!(
            woken(&jobs_a, Duration::from_secs(1)).await,
            "so do A's own"
        );
        assert!(
            !woken(&deliveries_b, Duration::from_millis(200)).await,
            "a job wakes no delivery worker"
        );

        a.work_queued(Queue::Webhooks);
        assert!(
            woken(&deliveries_b, Duration::from_secs(1)).await,
            "B's delivery worker wakes"
        );
        assert!(!woken(&jobs_b, Duration::from_millis(200)).await);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lost_connection_is_reestablished_and_everything_invalidated() {
        let database = scratch().await;
        let (a, b) = (bus(&database).await, bus(&database).await);
        let (on_a, on_b) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
        a.add_cache(on_a.clone());
        b.add_cache(on_b.clone());
        let (jobs_b, deliveries_b) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        b.wake_on(Queue::Jobs, jobs_b.clone());
        b.wake_on(Queue::Webhooks, deliveries_b.clone());

        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(database.url())
            .await
            .unwrap();
        let killed: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name = $1",
        )
        .bind(APPLICATION_NAME)
        .fetch_all(&admin)
        .await
        .unwrap();
        assert_eq!(killed, [true, true], "both buses' connections are ended");

        let took = eventually(
            Duration::from_secs(5),
            "both instances invalidate everything",
            || on_a.flushes() >= 1 && on_b.flushes() >= 1,
        )
        .await;
        eprintln!("reconnected and invalidated in {took:?}");
        assert!(
            woken(&jobs_b, Duration::from_secs(1)).await,
            "job workers wake"
        );
        assert!(
            woken(&deliveries_b, Duration::from_secs(1)).await,
            "delivery workers wake"
        );
        let listening: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name = $1",
        )
        .bind(APPLICATION_NAME)
        .fetch_one(&admin)
        .await
        .unwrap();
        assert_eq!(listening, 2, "each bus is connected again");

        // Messages flow again, both ways.
        let what = Invalidation::Agent { id: "a1".into() };
        a.publish(what.clone());
        eventually(Duration::from_secs(1), "B hears A again", || {
            on_b.seen() == [what.clone()]
        })
        .await;
        b.publish(what.clone());
        eventually(Duration::from_secs(1), "A hears B again", || {
            on_a.seen() == [what.clone()]
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bus_keeps_trying_while_the_database_refuses_it() {
        let database = scratch().await;
        let b = bus(&database).await;
        let on_b = Arc::new(Recorder::default());
        b.add_cache(on_b.clone());
        let jobs_b = Arc::new(Notify::new());
        b.wake_on(Queue::Jobs, jobs_b.clone());
        // Connected to the server's own database: the scratch one is refused below.
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(&test_server())
            .await
            .unwrap();
        let name = url::Url::parse(database.url()).unwrap().path()[1..].to_string();
        // New connections are refused, and the bus's is ended.
        sqlx::query(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false"))
            .execute(&admin)
            .await
            .unwrap();
        let killed: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND application_name = $2",
        )
        .bind(&name)
        .bind(APPLICATION_NAME)
        .fetch_all(&admin)
        .await
        .unwrap();
        assert_eq!(killed, [true]);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            on_b.flushes(),
            0,
            "not listening yet: nothing to start from"
        );
        // Meanwhile publishing never waits: what the outbox cannot hold is dropped, with
        // one warning.
        let start = std::time::Instant::now();
        for i in 0..OUTBOX + 100 {
            b.publish(Invalidation::Session {
                id: format!("s{i}").into(),
            });
        }
        assert!(start.elapsed() < Duration::from_secs(1));
        let dropped = *b.0.as_ref().unwrap().dropped.lock().unwrap();
        assert_eq!(dropped.0, 99, "counted since the one warning");
        assert!(dropped.1.is_some(), "warned once");

        sqlx::query(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true"))
            .execute(&admin)
            .await
            .unwrap();
        eventually(
            RETRY_MAX * 2,
            "B listens again and invalidates everything",
            || on_b.flushes() == 1,
        )
        .await;
        assert!(woken(&jobs_b, Duration::from_secs(1)).await);
        let a = bus(&database).await;
        let what = Invalidation::Webhooks { id: "u1".into() };
        a.publish(what.clone());
        eventually(Duration::from_secs(1), "B hears A", || {
            on_b.seen() == [what.clone()]
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unreadable_message_invalidates_everything() {
        let database = scratch().await;
        let b = bus(&database).await;
        let on_b = Arc::new(Recorder::default());
        b.add_cache(on_b.clone());
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(database.url())
            .await
            .unwrap();
        sqlx::query("SELECT pg_notify($1, '{\"kind\":\"something_new\",\"origin\":\"x\"}')")
            .bind(INVALIDATE_CHANNEL)
            .execute(&admin)
            .await
            .unwrap();
        eventually(Duration::from_secs(1), "B invalidates everything", || {
            on_b.flushes() == 1
        })
        .await;
        assert!(on_b.seen().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_bus_closes_its_connection_with_its_last_handle() {
        let database = scratch().await;
        let a = bus(&database).await;
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(database.url())
            .await
            .unwrap();
        let count = || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND application_name = $1",
            )
            .bind(APPLICATION_NAME)
            .fetch_one(&admin)
            .await
            .unwrap()
        };
        assert_eq!(count().await, 1, "one connection per bus");
        let clone = a.clone();
        drop(a);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(count().await, 1, "a clone keeps it");
        drop(clone);
        let start = std::time::Instant::now();
        while count().await != 0 {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "the connection is closed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
