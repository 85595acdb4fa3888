//! The embedded SQLite backend: one file, WAL journal, foreign keys on, migrations from
//! `migrations/sqlite` embedded in the binary.

use std::{str::FromStr, sync::Arc, time::Duration};

use sqlx::{
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
    ConnectOptions, SqlitePool,
};

use crate::store::{sqlx_error::is_unique_violation, StoreError, StoreResult};

super::backend!(SqliteStore, sqlx::Sqlite, pool);

/// [`crate::store::Store`] on SQLite: writes through one connection, reads through read-only
/// ones, the WAL checkpointed beside them (docs/architecture.md § Store).
#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    writer: SqlitePool,
    /// The database file (the migration lock is a file beside it).
    path: std::path::PathBuf,
    /// Stops the checkpointer when the last clone of the store is dropped.
    _checkpointer: Arc<Checkpointer>,
}

/// Read-only connections in [`SqliteStore`]'s reader pool.
pub const READERS: u32 = 8;

/// How often the checkpointer copies the WAL into the database file.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);

/// Largest size, in bytes, the WAL file is left at after a checkpoint (`journal_size_limit`).
pub const WAL_SIZE_LIMIT: u64 = 64 * 1024 * 1024;

/// The task running a passive WAL checkpoint every [`CHECKPOINT_INTERVAL`] (a failure is
/// logged); stops when dropped.
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
        let path = options.get_filename().to_path_buf();
        if let Some(parent) = options.get_filename().parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent)?;
            }
        }
        // Processes opening one file at once take turns, as they do to migrate: switching a
        // new file to WAL takes an exclusive lock, and SQLite answers "database is locked"
        // at once, without waiting, to a connection that asks for it while another one
        // holds a shared lock it wants to upgrade too (<https://sqlite.org/lockingv3.html>).
        let lock = migration_lock(&path).await?;
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
        drop(lock);
        Ok(Self {
            pool,
            writer,
            path,
            _checkpointer: Arc::new(checkpointer),
        })
    }

    /// The pool of the one writing connection (for backend-specific tests and tools).
    pub fn writer(&self) -> &SqlitePool {
        &self.writer
    }
}

/// A shared statement's row lock: none, as the one writer runs no other write meanwhile.
fn row_lock(_clause: &'static str) -> &'static str {
    ""
}

/// The rows (column `value`) of the JSON array bound as `param`.
fn json_rows(param: &str) -> String {
    format!("json_each({param})")
}

/// "Is in the list bound as `param`" for a JSON array: SQLite binds no arrays.
fn in_list(param: &str) -> String {
    format!("IN (SELECT value FROM json_each({param}))")
}

/// `items` bound as a JSON array for [`in_list`].
fn list<T: serde::Serialize>(items: &[T]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".into())
}

/// How the shared statements' (`*_store!`) transactions begin.
impl SqliteStore {
    /// Begins a transaction on the one writer, taking the write lock at once
    /// (`BEGIN IMMEDIATE`: <https://sqlite.org/lang_transaction.html>), in a task of its own
    /// ([`crate::store::begin_in_task`]).
    async fn begin_write(&self) -> StoreResult<sqlx::Transaction<'static, sqlx::Sqlite>> {
        crate::store::begin_in_task(&self.writer, Some("BEGIN IMMEDIATE")).await
    }
}

impl SqliteStore {
    /// [`crate::store::Store::migrate`] under a `flock(2)` on `{database}.migrate-lock`,
    /// foreign keys off (<https://sqlite.org/lang_altertable.html#otheralter>), then
    /// checked: a broken reference is a [`StoreError::Other`].
    async fn run_migrations(&self) -> StoreResult<()> {
        use sqlx::migrate::Migrate as _;
        let lock = migration_lock(&self.path)
            .await
            .map_err(|e| StoreError::Other(e.context("taking the migration lock")))?;
        let migrator = sqlx::migrate!("../migrations/sqlite");
        let mut conn = self.writer.acquire().await?;
        let migrating = |e: sqlx::migrate::MigrateError| StoreError::Other(e.into());
        conn.ensure_migrations_table().await.map_err(migrating)?;
        // Up to date: every migration applied as it is written, none left half done. Anything
        // else goes to the migrator, which also reports an edited or failed migration.
        let done = conn.list_applied_migrations().await.map_err(migrating)?;
        let dirty = conn.dirty_version().await.map_err(migrating)?;
        if dirty.is_none()
            && migrator.iter().all(|m| {
                done.iter()
                    .any(|d| d.version == m.version && d.checksum == m.checksum)
            })
        {
            return Ok(());
        }
        sqlx::query("PRAGMA foreign_keys = OFF")
            .execute(&mut *conn)
            .await?;
        let applied = migrator.run_direct(&mut *conn).await.map_err(migrating);
        sqlx::query("PRAGMA foreign_keys = ON")
            .execute(&mut *conn)
            .await?;
        applied?;
        let broken: Option<(String, Option<i64>, String)> =
            sqlx::query_as("SELECT \"table\", rowid, parent FROM pragma_foreign_key_check LIMIT 1")
                .fetch_optional(&mut *conn)
                .await?;
        drop(lock);
        match broken {
            None => Ok(()),
            Some((table, row, parent)) => Err(StoreError::Other(anyhow::anyhow!(
                "after the migrations, a row of {table} (rowid {row:?}) references a missing row of {parent}"
            ))),
        }
    }
}

/// Waits for the exclusive lock on the database's migration lock file, held until the
/// returned file drops; `None` for an in-memory database.
async fn migration_lock(path: &std::path::Path) -> anyhow::Result<Option<std::fs::File>> {
    if path.as_os_str().is_empty() || path.as_os_str() == ":memory:" {
        return Ok(None);
    }
    let mut lock_path = path.as_os_str().to_owned();
    lock_path.push(".migrate-lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)?;
    let file = tokio::task::spawn_blocking(move || {
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).map(|()| file)
    })
    .await??;
    Ok(Some(file))
}

#[cfg(test)]
pub(crate) mod tests {
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::store::{AccountStore, NewUser, Store, UserRecord};

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

    /// A write transaction's begin dropped at any point leaves the one writer outside a
    /// transaction: the next begin works and its commit is seen by the readers. (sqlx's
    /// custom `BEGIN` could be dropped after the `BEGIN` ran and before a `Transaction`
    /// existed to roll it back: the writer then stayed inside it, later writes were never
    /// committed, and the next `BEGIN IMMEDIATE` failed.)
    #[tokio::test]
    async fn a_write_begin_dropped_at_any_point_leaves_no_transaction_open() {
        let (_dir, store) = store().await;
        sqlx::query("CREATE TABLE marks (i INTEGER)")
            .execute(store.writer())
            .await
            .unwrap();
        for i in 0..300_i64 {
            let mut begin = Box::pin(store.begin_write());
            // Polled a varying number of times, some of them spaced, then dropped.
            for p in 0..(i % 6) {
                if futures::poll!(begin.as_mut()).is_ready() {
                    break;
                }
                if p % 2 == 1 {
                    tokio::time::sleep(Duration::from_micros(20 * (i as u64 % 7))).await;
                } else {
                    tokio::task::yield_now().await;
                }
            }
            drop(begin);
            let mut tx = tokio::time::timeout(Duration::from_secs(10), store.begin_write())
                .await
                .expect("the writer waited on a transaction left open")
                .unwrap_or_else(|e| panic!("begin after {} polls: {e}", i % 6));
            sqlx::query("INSERT INTO marks VALUES ($1)")
                .bind(i)
                .execute(&mut *tx)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM marks")
                .fetch_one(store.pool())
                .await
                .unwrap();
            assert_eq!(seen, i + 1, "every committed write is seen by the readers");
        }
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

    /// Migration 12 rebuilds two tables WITHOUT ROWID, keeping rows, keys and triggers.
    #[tokio::test]
    async fn migration_12_keeps_every_conversation_and_the_rules_of_the_tables_it_rebuilds() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("test.db").display());
        let store = SqliteStore::connect(&url).await.unwrap();
        let mut before = sqlx::migrate!("../migrations/sqlite");
        before.migrations = before
            .migrations
            .iter()
            .filter(|m| m.version < 12)
            .cloned()
            .collect::<Vec<_>>()
            .into();
        before.run(store.writer()).await.unwrap();
        verified_user(&store, Utc::now()).await;
        let seed = "INSERT INTO agents (id, user_id, name, created_at, updated_at) \
                        VALUES ('a1', 'u1', 'Agent', 1, 1); \
                    INSERT INTO threads (id, agent_id, user_id, title, created_at, updated_at) \
                        VALUES ('t1', 'a1', 'u1', 'Hello', 1, 1); \
                    INSERT INTO messages (id, thread_id, role, content, created_at) \
                        VALUES ('m1', 't1', 'user', 'hi', 86400000); \
                    INSERT INTO messages (id, thread_id, role, content, prompt_tokens, completion_tokens, created_at) \
                        VALUES ('m2', 't1', 'assistant', 'hello', 7, 3, 86400001);";
        sqlx::raw_sql(seed).execute(store.writer()).await.unwrap();

        store.migrate().await.unwrap();

        for table in ["threads", "usage_daily"] {
            let sql: String = sqlx::query_scalar("SELECT sql FROM sqlite_schema WHERE name = ?1")
                .bind(table)
                .fetch_one(store.pool())
                .await
                .unwrap();
            assert!(sql.ends_with("WITHOUT ROWID"), "{sql}");
        }
        let on: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
            .fetch_one(store.writer())
            .await
            .unwrap();
        assert_eq!(on, 1, "foreign keys are on again on the writer");
        let broken: Vec<(String,)> = sqlx::query_as("PRAGMA foreign_key_check")
            .fetch_all(store.writer())
            .await
            .unwrap();
        assert!(broken.is_empty(), "{broken:?}");
        let thread: (String, i64, i64) =
            sqlx::query_as("SELECT title, message_count, updated_at FROM threads WHERE id = 't1'")
                .fetch_one(store.pool())
                .await
                .unwrap();
        assert_eq!(thread, ("Hello".into(), 2, 86400001));
        let messages: i64 =
            sqlx::query_scalar("SELECT count(*) FROM messages WHERE thread_id = 't1'")
                .fetch_one(store.pool())
                .await
                .unwrap();
        assert_eq!(messages, 2);
        let usage: (String, i64, i64, i64) = sqlx::query_as(
            "SELECT day, chats, prompt_tokens, completion_tokens FROM usage_daily WHERE user_id = 'u1'",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        assert_eq!(usage, ("1970-01-02".into(), 1, 7, 3));

        sqlx::raw_sql(
            "INSERT INTO messages (id, thread_id, role, content, prompt_tokens, completion_tokens, created_at) \
                 VALUES ('m3', 't1', 'assistant', 'again', 5, 2, 86400002);",
        )
        .execute(store.writer())
        .await
        .unwrap();
        let counted: (i64, i64, i64) = sqlx::query_as(
            "SELECT t.message_count, u.chats, u.prompt_tokens FROM threads t \
             JOIN usage_daily u ON u.user_id = t.user_id WHERE t.id = 't1'",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        assert_eq!(
            counted,
            (3, 2, 12),
            "the triggers count into the rebuilt tables"
        );

        sqlx::query("DELETE FROM agents WHERE id = 'a1'")
            .execute(store.writer())
            .await
            .unwrap();
        let left: (i64, i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM threads), (SELECT count(*) FROM messages), \
                    (SELECT count(*) FROM usage_daily)",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        assert_eq!(
            left,
            (0, 0, 1),
            "threads and messages go with their agent, usage stays"
        );
    }

    /// Migrating an up-to-date database keeps its data and foreign keys on.
    #[tokio::test]
    async fn migrating_an_up_to_date_database_changes_nothing() {
        let (_dir, store) = store().await;
        verified_user(&store, Utc::now()).await;
        store.migrate().await.unwrap();
        let on: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
            .fetch_one(store.writer())
            .await
            .unwrap();
        assert_eq!(on, 1);
        let users: i64 = sqlx::query_scalar("SELECT count(*) FROM users")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(users, 1);
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
}
