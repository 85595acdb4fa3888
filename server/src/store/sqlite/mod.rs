//! The embedded SQLite backend: one file, WAL journal, foreign keys on, migrations from
//! `migrations/sqlite` embedded in the binary.

use std::{str::FromStr, sync::Arc, time::Duration};

use async_trait::async_trait;
use sqlx::{
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
    ConnectOptions, SqlitePool,
};

use crate::store::{Store, StoreError, StoreResult};

mod accounts;
mod agents;
mod api_keys;
mod chat;
mod documents;
mod identity;
mod integrations;
mod jobs;
mod rows;
mod sessions;
mod webhooks;

/// [`Store`] on SQLite.
///
/// Writes go through one connection (`writer`) and reads through a pool of read-only
/// connections (`pool`). SQLite lets one connection write at a time; with several writing
/// connections, a writer that finds the lock taken sleeps in SQLite's busy handler (1, 2,
/// 5, 10, ... ms) and chats pay those sleeps. One writer turns that contention into a
/// first-come, first-served queue in the pool, and WAL mode lets the readers go on while
/// it writes. The readers are opened read-only, so a write sent to them by mistake fails
/// loudly ("attempt to write a readonly database") instead of contending.
///
/// The writer never checkpoints the WAL itself (`wal_autocheckpoint = 0`): SQLite's
/// default is that the commit which takes the WAL past 1,000 pages copies them into the
/// database file and syncs both files before it returns, so that commit, and every write
/// queued behind the one writer, waits for two `fsync`s. A checkpointer of its own
/// ([`Checkpointer`], one more read-write connection) does it every
/// [`CHECKPOINT_INTERVAL`] instead, beside the writer (a passive checkpoint never blocks
/// writers or readers).
#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    writer: SqlitePool,
    /// Stops the checkpointer when the last clone of the store is dropped.
    _checkpointer: Arc<Checkpointer>,
}

/// Read-only connections in [`SqliteStore`]'s reader pool.
pub const READERS: u32 = 8;

/// How often [`Checkpointer`] copies the WAL into the database file.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);

/// Largest size the WAL file is left at after a checkpoint has emptied it, in bytes
/// (`journal_size_limit`; without it the file keeps its largest size).
pub const WAL_SIZE_LIMIT: u64 = 64 * 1024 * 1024;

/// The task that checkpoints the WAL of a [`SqliteStore`] every [`CHECKPOINT_INTERVAL`]
/// (`PRAGMA wal_checkpoint(PASSIVE)`: it copies what no reader still needs and never
/// waits for a lock, so it holds up neither the writer nor the readers). A checkpoint that
/// fails (the disk is full, say) is logged and tried again at the next interval; the WAL
/// keeps every committed write meanwhile. Dropped, it stops the task, whose connection
/// then closes.
struct Checkpointer(tokio::task::AbortHandle);

impl Checkpointer {
    fn start(mut connection: sqlx::SqliteConnection) -> Self {
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(CHECKPOINT_INTERVAL);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                    .execute(&mut connection)
                    .await
                {
                    tracing::warn!(error = %e, "checkpointing the database's WAL failed");
                }
            }
        });
        Self(task.abort_handle())
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl SqliteStore {
    /// Opens (creating when missing, with its parent folder) the database at `url`.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        if let Some(parent) = options.get_filename().parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent)?;
            }
        }
        // The writing connections: the writer and the checkpointer. Checkpoints are the
        // checkpointer's (see above).
        let writing = options
            .clone()
            .synchronous(SqliteSynchronous::Normal)
            .pragma("wal_autocheckpoint", "0")
            .pragma("journal_size_limit", WAL_SIZE_LIMIT.to_string());
        // The writer first: it creates the file and switches it to WAL, which the
        // read-only connections need.
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            // Checking a connection before handing it out is one more round trip to its
            // worker thread per query; an embedded database has no network to lose.
            .test_before_acquire(false)
            .connect_with(
                writing
                    .clone()
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal),
            )
            .await?;
        let checkpointer = Checkpointer::start(writing.connect().await?);
        let pool = SqlitePoolOptions::new()
            .max_connections(READERS)
            .min_connections(1)
            .test_before_acquire(false)
            .connect_with(options.read_only(true))
            .await?;
        Ok(Self {
            pool,
            writer,
            _checkpointer: Arc::new(checkpointer),
        })
    }

    /// The read-only pool (for backend-specific tests and tools).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The pool of the one writing connection (for backend-specific tests and tools).
    pub fn writer(&self) -> &SqlitePool {
        &self.writer
    }
}

/// Whether `err` is a violation of a UNIQUE constraint or primary key.
fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

#[async_trait]
impl Store for SqliteStore {
    async fn migrate(&self) -> StoreResult<()> {
        sqlx::migrate!("../migrations/sqlite")
            .run(&self.writer)
            .await
            .map_err(|e| StoreError::Other(e.into()))
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::knowledge::search::ChunkSearch;
    use crate::store::{
        documents as kb, jobs::JobRecord, AccountStore, AgentRecord, AgentStore, ChatStore,
        DocumentStore, MessageRecord, NewUser, ThreadRecord, TokenPurpose, UserRecord,
    };

    /// A migrated store in a temporary folder (dropped with the folder).
    pub(crate) async fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("test.db").display());
        let store = SqliteStore::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn the_wal_is_checkpointed_beside_the_writer_not_by_its_commits() {
        let (dir, store) = store().await;
        let autocheckpoint: i64 = sqlx::query_scalar("PRAGMA wal_autocheckpoint")
            .fetch_one(store.writer())
            .await
            .unwrap();
        assert_eq!(autocheckpoint, 0, "the writer's commits never checkpoint");
        // One commit of about 3,000 pages, three times SQLite's automatic threshold.
        let mut tx = store.writer().begin().await.unwrap();
        sqlx::query("CREATE TABLE filler (b BLOB)")
            .execute(&mut *tx)
            .await
            .unwrap();
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) \
             INSERT INTO filler SELECT randomblob(4000) FROM n",
        )
        .execute(&mut *tx)
        .await
        .unwrap();
        tx.commit().await.unwrap();
        // The database file grows once the checkpointer has copied the WAL into it.
        let file = dir.path().join("test.db");
        let deadline = std::time::Instant::now() + CHECKPOINT_INTERVAL * 10;
        loop {
            let size = std::fs::metadata(&file).unwrap().len();
            if size > 12_000_000 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the WAL was not checkpointed (database file at {size} bytes)"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM filler")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(rows, 3000);
    }

    /// Creates the verified user `u1` <one@example.com>.
    pub(crate) async fn verified_user(store: &SqliteStore, now: DateTime<Utc>) -> UserRecord {
        store
            .create_user(NewUser {
                id: "u1".into(),
                email: crate::domain::Email::parse("one@example.com").unwrap(),
                name: "One".into(),
                password_hash: None,
                company: None,
                country: None,
                phone: None,
                email_verified: true,
                now,
            })
            .await
            .unwrap()
    }

    async fn thread_of_new_user(store: &SqliteStore) -> ThreadRecord {
        let now = Utc::now();
        let user = verified_user(store, now).await;
        let agent = AgentRecord {
            id: "a1".into(),
            user_id: user.id.clone(),
            name: "Agent".into(),
            description: String::new(),
            system_prompt: String::new(),
            model: String::new(),
            status: "active".into(),
            created_at: now,
            updated_at: now,
            has_knowledge: false,
        };
        assert!(store.create_agent(&agent, 10).await.unwrap());
        let thread = ThreadRecord {
            id: "t1".into(),
            agent_id: agent.id,
            user_id: user.id,
            title: "Hello".into(),
            message_count: 0,
            created_at: now,
            updated_at: now,
        };
        let first = MessageRecord {
            id: "first".into(),
            ..message(&thread, 0, "user", now)
        };
        assert!(store.create_thread(&thread, &first).await.unwrap());
        thread
    }

    fn message(thread: &ThreadRecord, i: usize, role: &str, at: DateTime<Utc>) -> MessageRecord {
        MessageRecord {
            id: format!("m{i}-{role}"),
            thread_id: thread.id.clone(),
            role: role.into(),
            content: format!("message {i}"),
            model: None,
            prompt_tokens: (role == "assistant").then_some(10),
            completion_tokens: (role == "assistant").then_some(5),
            sources: None,
            latency_ms: None,
            status: "complete".into(),
            error: None,
            created_at: at,
        }
    }

    /// A crawled document `d1` of agent `a1` (user `u1`, from [`thread_of_new_user`]).
    async fn crawled_document(store: &SqliteStore) -> kb::DocumentRecord {
        let thread = thread_of_new_user(store).await;
        crawl_document(
            store,
            "d1",
            &thread.agent_id,
            &thread.user_id,
            "https://example.com/",
        )
        .await
    }

    /// A web site document `id` of `agent_id` starting at `url`, with its queued crawl job.
    async fn crawl_document(
        store: &SqliteStore,
        id: &str,
        agent_id: &str,
        user_id: &str,
        url: &str,
    ) -> kb::DocumentRecord {
        let now = Utc::now();
        let doc = kb::DocumentRecord::pending_url(id.into(), agent_id, user_id, url, None, now);
        let job = JobRecord::queued("crawl", &doc.id, &doc.user_id, now);
        store.create_document(&doc, &job).await.unwrap();
        doc
    }

    fn page(url: &str, words: &[&str]) -> (kb::PageRecord, Vec<kb::NewChunk>) {
        let record = kb::PageRecord {
            url: url.into(),
            title: format!("Title of {url}"),
            content_hash: format!("hash of {}", words.join(" ")),
        };
        let chunks = words
            .iter()
            .enumerate()
            .map(|(i, word)| kb::NewChunk {
                page_url: Some(url.into()),
                title: record.title.clone(),
                heading_path: String::new(),
                position: i as u32,
                page: None,
                tokens: 1,
                text: (*word).into(),
            })
            .collect();
        (record, chunks)
    }

    #[tokio::test]
    async fn crawled_pages_written_together_replace_each_pages_chunks() {
        let (_dir, store) = store().await;
        let doc = crawled_document(&store).await;
        let search = ChunkSearch::new(Arc::new(store.clone()));
        let now = Utc::now();
        let first = [
            page("https://example.com/a", &["alpha", "apple"]),
            page("https://example.com/b", &["banana"]),
        ];
        assert!(store.replace_pages(&doc.id, &first, now).await.unwrap());
        // A later write replaces page `a` only; `b` keeps its chunks.
        let second = [page("https://example.com/a", &["avocado"])];
        assert!(store.replace_pages(&doc.id, &second, now).await.unwrap());

        let pages = store.document_pages(&doc.id).await.unwrap();
        assert_eq!(pages, vec![second[0].0.clone(), first[1].0.clone()]);
        let found = |word: &'static str| {
            let search = &search;
            let agent = doc.agent_id.clone();
            async move { search.search_chunks(&agent, word, 10).await.unwrap() }
        };
        assert!(
            found("alpha").await.is_empty(),
            "page a's old chunks are gone"
        );
        assert_eq!(found("avocado").await.len(), 1);
        let banana = found("banana").await;
        assert_eq!(banana.len(), 1);
        assert_eq!(banana[0].url.as_deref(), Some("https://example.com/b"));
    }

    #[tokio::test]
    async fn crawled_pages_of_a_deleted_document_are_not_written() {
        let (_dir, store) = store().await;
        let doc = crawled_document(&store).await;
        let search = ChunkSearch::new(Arc::new(store.clone()));
        assert!(store
            .delete_document(&doc.user_id, &doc.agent_id, &doc.id)
            .await
            .unwrap());
        let pages = [page("https://example.com/a", &["alpha"])];
        assert!(!store
            .replace_pages(&doc.id, &pages, Utc::now())
            .await
            .unwrap());
        assert!(store.document_pages(&doc.id).await.unwrap().is_empty());
        assert!(search
            .search_chunks(&doc.agent_id, "alpha", 10)
            .await
            .unwrap()
            .is_empty());
    }

    /// The ids of the document's chunks, ascending.
    async fn chunk_ids(store: &SqliteStore, document_id: &str) -> Vec<i64> {
        sqlx::query_scalar("SELECT id FROM chunks WHERE document_id = ? ORDER BY id")
            .bind(document_id)
            .fetch_all(store.pool())
            .await
            .unwrap()
    }

    /// The BM25 index learns of new chunks as those above the largest id it has seen, so
    /// an id must never come back after the chunk holding it (the newest) is deleted.
    #[tokio::test]
    async fn chunk_ids_only_grow() {
        let (_dir, store) = store().await;
        let doc = crawled_document(&store).await;
        let pages = [page("https://example.com/a", &["alpha", "beta"])];
        assert!(store
            .replace_pages(&doc.id, &pages, Utc::now())
            .await
            .unwrap());
        let first = chunk_ids(&store, &doc.id).await;
        store.retain_pages(&doc.id, &[]).await.unwrap();
        assert!(chunk_ids(&store, &doc.id).await.is_empty());
        let pages = [page("https://example.com/a", &["gamma", "delta"])];
        assert!(store
            .replace_pages(&doc.id, &pages, Utc::now())
            .await
            .unwrap());
        let second = chunk_ids(&store, &doc.id).await;
        assert_eq!(second.len(), 2);
        assert!(
            second[0] > *first.last().unwrap(),
            "{second:?} reuses ids of {first:?}"
        );
    }

    fn words(hits: &[kb::ChunkHit]) -> Vec<&str> {
        hits.iter().map(|h| h.text.as_str()).collect()
    }

    /// The texts of the agent's best 10 chunks for `question`, best first.
    async fn texts(search: &ChunkSearch, agent: &str, question: &str) -> Vec<String> {
        let hits = search.search_chunks(agent, question, 10).await.unwrap();
        hits.into_iter().map(|h| h.text).collect()
    }

    /// A search sees every chunk written or deleted before it, through whichever store
    /// (process) wrote it: the index checks the agent's chunk generation each time.
    #[tokio::test]
    async fn searches_see_chunks_written_by_another_process_at_once() {
        let (dir, store) = store().await;
        let url = format!("sqlite://{}", dir.path().join("test.db").display());
        let other = SqliteStore::connect(&url).await.unwrap();
        let doc = crawled_document(&store).await;
        let search = ChunkSearch::new(Arc::new(store.clone()));
        let agent = doc.agent_id.clone();
        assert!(texts(&search, &agent, "alpha").await.is_empty());
        let pages = [
            page("https://example.com/a", &["alpha", "alpha beta"]),
            page("https://example.com/b", &["beta"]),
        ];
        assert!(other
            .replace_pages(&doc.id, &pages, Utc::now())
            .await
            .unwrap());
        let found = search.search_chunks(&agent, "alpha", 10).await.unwrap();
        assert_eq!(
            words(&found),
            ["alpha", "alpha beta"],
            "added chunks are found"
        );
        assert!(found[0].score > found[1].score && found[1].score > 0.0);
        assert_eq!(found[0].url.as_deref(), Some("https://example.com/a"));
        // A page refreshed with new text: its old chunks go, the new ones come in.
        let pages = [page("https://example.com/a", &["gamma"])];
        assert!(other
            .replace_pages(&doc.id, &pages, Utc::now())
            .await
            .unwrap());
        assert!(texts(&search, &agent, "alpha").await.is_empty());
        assert_eq!(texts(&search, &agent, "gamma").await, ["gamma"]);
        assert_eq!(texts(&search, &agent, "beta").await, ["beta"]);
        // The whole document deleted elsewhere.
        assert!(other
            .delete_document(&doc.user_id, &agent, &doc.id)
            .await
            .unwrap());
        assert!(texts(&search, &agent, "beta gamma").await.is_empty());
        // The agent deleted: its index is dropped.
        assert!(other.delete_agent(&doc.user_id, &agent).await.unwrap());
        assert!(texts(&search, &agent, "beta").await.is_empty());
        assert_eq!(
            search.cached_agents(),
            0,
            "a deleted agent's index is not kept"
        );
    }

    /// A search dropped at any point while it builds the index (the chat's client left)
    /// leaves nothing half-built behind: the next search ranks as a fresh process does.
    #[tokio::test]
    async fn an_interrupted_index_build_is_started_over() {
        let (dir, store) = store().await;
        let doc = crawled_document(&store).await;
        let search = ChunkSearch::new(Arc::new(store.clone()));
        // More chunks than one read step of the index, so a build has several steps.
        let texts: Vec<String> = (0..4_500)
            .map(|i| format!("common word{} other{}", i % 97, i % 13))
            .collect();
        let words: Vec<&str> = texts.iter().map(String::as_str).collect();
        let pages = [page("https://example.com/a", &words)];
        assert!(store
            .replace_pages(&doc.id, &pages, Utc::now())
            .await
            .unwrap());
        let url = format!("sqlite://{}", dir.path().join("test.db").display());
        let fresh = ChunkSearch::new(Arc::new(SqliteStore::connect(&url).await.unwrap()));
        let question = "common word5 other7";
        let expected = fresh
            .search_chunks(&doc.agent_id, question, 20)
            .await
            .unwrap();
        assert_eq!(expected.len(), 20);
        let started = std::time::Instant::now();
        search
            .search_chunks(&doc.agent_id, question, 20)
            .await
            .unwrap();
        let whole_build = started.elapsed();
        search.forget(&doc.agent_id);
        // Interrupted at tenths of a whole build's time: while the generation is read,
        // while chunks are read, while they are analysed.
        let mut interrupted = 0;
        for tenth in 1..10 {
            let after = whole_build * tenth / 10;
            let pending = search.search_chunks(&doc.agent_id, question, 20);
            if tokio::time::timeout(after, pending).await.is_err() {
                interrupted += 1;
            }
            let found = search
                .search_chunks(&doc.agent_id, question, 20)
                .await
                .unwrap();
            assert_eq!(found, expected, "after a search dropped at {after:?}");
            search.forget(&doc.agent_id);
        }
        assert!(interrupted > 0, "no search was interrupted");
    }

    /// Another agent's chunks neither match nor change the statistics of a search.
    #[tokio::test]
    async fn searches_are_scoped_to_the_agent() {
        let (_dir, store) = store().await;
        let doc = crawled_document(&store).await;
        let search = ChunkSearch::new(Arc::new(store.clone()));
        let pages = [page(
            "https://example.com/a",
            &["shared words", "shared other"],
        )];
        assert!(store
            .replace_pages(&doc.id, &pages, Utc::now())
            .await
            .unwrap());
        let first = search
            .search_chunks(&doc.agent_id, "shared", 10)
            .await
            .unwrap();
        let agent = AgentRecord {
            id: "a2".into(),
            name: "second".into(),
            ..store
                .agent(&doc.user_id, &doc.agent_id)
                .await
                .unwrap()
                .unwrap()
        };
        store.create_agent(&agent, 100).await.unwrap();
        let second = crawl_document(&store, "d2", "a2", &doc.user_id, "https://example.org/").await;
        let pages = [page(
            "https://example.org/x",
            &["shared", "shared", "shared", "only here"],
        )];
        assert!(store
            .replace_pages(&second.id, &pages, Utc::now())
            .await
            .unwrap());
        assert!(search
            .search_chunks(&doc.agent_id, "only here", 10)
            .await
            .unwrap()
            .is_empty());
        assert_eq!(
            search
                .search_chunks(&doc.agent_id, "shared", 10)
                .await
                .unwrap(),
            first,
            "the same hits and scores as before the other agent had chunks"
        );
        assert_eq!(
            search
                .search_chunks("a2", "shared", 10)
                .await
                .unwrap()
                .len(),
            3
        );
    }

    #[tokio::test]
    async fn a_thread_needs_its_users_agent() {
        let (_dir, store) = store().await;
        let thread = thread_of_new_user(&store).await;
        let now = Utc::now();
        let other_user = ThreadRecord {
            id: "t2".into(),
            user_id: "someone-else".into(),
            ..thread.clone()
        };
        let first = message(&other_user, 0, "user", now);
        assert!(!store.create_thread(&other_user, &first).await.unwrap());
        assert!(store
            .thread(&thread.user_id, &thread.agent_id, "t2")
            .await
            .unwrap()
            .is_none());
        assert!(
            store.recent_messages("t2", 10).await.unwrap().is_empty(),
            "a refused thread leaves no message behind"
        );
        let kept = store.recent_messages(&thread.id, 10).await.unwrap();
        assert_eq!(kept.len(), 1, "the first message goes in with its thread");
        assert_eq!(
            (kept[0].id.as_str(), kept[0].role.as_str()),
            ("first", "user")
        );
        assert!(store
            .delete_agent(&thread.user_id, &thread.agent_id)
            .await
            .unwrap());
        let deleted_agent = ThreadRecord {
            id: "t3".into(),
            created_at: now,
            ..thread
        };
        assert!(!store
            .create_thread(&deleted_agent, &message(&deleted_agent, 0, "user", now))
            .await
            .unwrap());
    }

    #[tokio::test]
    async fn the_read_pool_refuses_writes() {
        let (_dir, store) = store().await;
        let err = sqlx::query("CREATE TABLE sneaky (x INTEGER)")
            .execute(store.pool())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("readonly"), "{err}");
        sqlx::query("CREATE TABLE allowed (x INTEGER)")
            .execute(store.writer())
            .await
            .unwrap();
    }

    /// Many concurrent writers queue for the one writing connection: none fails with
    /// "database is locked", and the triggers of migration 0010 count every message into
    /// its thread and every assistant message into the day's usage.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_messages_are_all_written_and_counted() {
        let (_dir, store) = store().await;
        let thread = thread_of_new_user(&store).await;
        let at = Utc::now();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..100 {
            let (store, thread) = (store.clone(), thread.clone());
            tasks.spawn(async move {
                store
                    .append_message(&message(&thread, i, "user", at))
                    .await?;
                store
                    .append_message(&message(&thread, i, "assistant", at))
                    .await
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.unwrap().unwrap();
        }
        let stored = store
            .thread(&thread.user_id, &thread.agent_id, &thread.id)
            .await
            .unwrap()
            .unwrap();
        // 200 and the thread's first message.
        assert_eq!(stored.message_count, 201);
        assert_eq!(stored.updated_at.timestamp_millis(), at.timestamp_millis());
        let usage = store.usage(&thread.user_id, at.date_naive()).await.unwrap();
        assert_eq!(usage.len(), 1);
        assert_eq!(usage[0].day, at.date_naive());
        assert_eq!(
            (
                usage[0].chats,
                usage[0].prompt_tokens,
                usage[0].completion_tokens
            ),
            (100, 1_000, 500)
        );
    }

    #[tokio::test]
    async fn of_an_accounts_outstanding_links_only_one_is_ever_consumed() {
        let (_dir, store) = store().await;
        let now = Utc::now();
        verified_user(&store, now).await;
        let hashes: Vec<String> = (0..8).map(|i| format!("reset-{i}")).collect();
        for hash in &hashes {
            store
                .create_email_token(
                    "u1",
                    TokenPurpose::ResetPassword,
                    hash,
                    now + chrono::Duration::hours(1),
                    now,
                )
                .await
                .unwrap();
        }
        // A verification link of the same account is another purpose: untouched.
        store
            .create_email_token(
                "u1",
                TokenPurpose::VerifyEmail,
                "verify",
                now + chrono::Duration::hours(1),
                now,
            )
            .await
            .unwrap();
        let mut tasks = tokio::task::JoinSet::new();
        for hash in hashes.clone() {
            let store = store.clone();
            tasks.spawn(async move {
                store
                    .consume_email_token(TokenPurpose::ResetPassword, &hash, now)
                    .await
            });
        }
        let mut consumed = 0;
        while let Some(done) = tasks.join_next().await {
            if let Some(user) = done.unwrap().unwrap() {
                assert_eq!(user, "u1");
                consumed += 1;
            }
        }
        assert_eq!(consumed, 1, "the first use voids the others");
        for hash in &hashes {
            assert_eq!(
                store
                    .consume_email_token(TokenPurpose::ResetPassword, hash, now)
                    .await
                    .unwrap(),
                None
            );
        }
        assert_eq!(
            store
                .consume_email_token(TokenPurpose::VerifyEmail, "verify", now)
                .await
                .unwrap()
                .as_deref(),
            Some("u1")
        );
    }
}
