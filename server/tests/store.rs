//! The store conformance suite (`agentchat::store::conformance`): one test per case, each
//! on a fresh, migrated, empty database of the backend under test.
//!
//! The backend comes from `AGENTCHAT_TEST_DATABASE_URL`: unset (or a `sqlite:` URL), a
//! SQLite file in a temporary folder per case; a `postgres://` URL names a server on which
//! each case gets a scratch database of its own, dropped after the case.

use std::sync::Arc;

use agentchat::store::{self, Store};
use test_support::{conformance, scratch::ScratchDatabase};

/// A migrated store for one case, with what keeps its database alive.
struct Fresh {
    store: Arc<dyn Store>,
    /// The URL the store was opened from.
    url: String,
    /// The temporary folder of a SQLite database (removed when dropped).
    _dir: Option<tempfile::TempDir>,
    /// The scratch database on a server (dropped after the store).
    _database: Option<ScratchDatabase>,
}

async fn fresh() -> Fresh {
    let url = std::env::var("AGENTCHAT_TEST_DATABASE_URL").unwrap_or_default();
    let (url, dir, database) = if url.is_empty() || url.starts_with("sqlite:") {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let url = format!("sqlite://{}", dir.path().join("store.db").display());
        (url, Some(dir), None)
    } else {
        let database = ScratchDatabase::create(&url)
            .await
            .expect("creating a scratch database");
        (database.url().to_string(), None, Some(database))
    };
    let store = store::connect(&url).await.expect("opening the store");
    store.migrate().await.expect("migrating the store");
    Fresh {
        store,
        url,
        _dir: dir,
        _database: database,
    }
}

macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let fresh = fresh().await;
                conformance::$case(fresh.store.clone()).await;
            }
        )*
    };
}

test_support::for_each_store_conformance_case!(cases);

/// Instances starting at once all migrate the same database: each succeeds, and the
/// migrations are applied once (sqlx's migrator takes an advisory lock on PostgreSQL; on
/// SQLite the write lock serialises them).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instances_migrating_one_database_at_once_all_start() {
    let server = std::env::var("AGENTCHAT_TEST_DATABASE_URL").unwrap_or_default();
    let dir = tempfile::tempdir().expect("a temporary folder");
    let (url, _database) = if server.is_empty() || server.starts_with("sqlite:") {
        let url = format!("sqlite://{}", dir.path().join("store.db").display());
        (url, None)
    } else {
        let database = ScratchDatabase::create(&server)
            .await
            .expect("creating a scratch database");
        (database.url().to_string(), Some(database))
    };
    let starts = (0..4).map(|_| {
        let url = url.clone();
        tokio::spawn(async move {
            let store = store::connect(&url).await?;
            store.migrate().await?;
            anyhow::Ok(())
        })
    });
    for started in futures::future::join_all(starts).await {
        started
            .expect("the start did not panic")
            .expect("the instance migrated and started");
    }
    let store = store::connect(&url).await.expect("opening the store");
    conformance::an_email_is_taken_once(store).await;
}

/// The PostgreSQL server of `AGENTCHAT_TEST_DATABASE_URL`, or `None` (with a note) when the
/// variable names none: the checks of one backend against the other run only on the
/// suite's PostgreSQL run (CI runs the suite on both backends).
fn postgres_server(test: &str) -> Option<String> {
    let url = std::env::var("AGENTCHAT_TEST_DATABASE_URL").unwrap_or_default();
    if store::Backend::of(&url) == Some(store::Backend::Postgres) {
        Some(url)
    } else {
        eprintln!(
            "{test}: skipped on SQLite; it runs when AGENTCHAT_TEST_DATABASE_URL is a \
             postgres:// URL"
        );
        None
    }
}

/// A migrated PostgreSQL store in a scratch database of `server` (dropped with it).
async fn migrated_postgres(server: &str) -> (ScratchDatabase, store::postgres::PgStore) {
    let database = ScratchDatabase::create(server)
        .await
        .unwrap_or_else(|e| panic!("cannot create a scratch database on {server}: {e}"));
    let store = store::postgres::PgStore::connect(database.url(), 2)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the scratch database: {e}"));
    store.migrate().await.expect("migrating PostgreSQL");
    (database, store)
}

/// A column as both backends are compared: its normalised type (`integer`, `text`,
/// `blob`, `real`, `boolean`) and whether it may hold NULL.
type Columns = std::collections::BTreeMap<(String, String), (String, bool)>;

/// Tables only the SQLite schema has. The FTS5 index of the messages' words (`messages_fts`
/// and the tables FTS5 keeps it in) is left out of the comparison: PostgreSQL's is the
/// index `messages_words`.
const ONLY_SQLITE: &[&str] = &[
    // The next chunk id; PostgreSQL draws chunk ids from the sequence `chunk_ids`.
    "chunk_id_seq",
];

/// Tables only the PostgreSQL schema has.
const ONLY_POSTGRES: &[&str] = &[
    // The bytes of an upload until it is indexed, readable by every instance; SQLite keeps
    // them in DATA_DIR/uploads.
    "document_uploads",
];

/// Columns whose types differ, as `(table, column, SQLite type, PostgreSQL type)`.
const TYPE_DIFFERENCES: &[(&str, &str, &str, &str)] = &[
    // Flags: SQLite has no boolean type and stores 0 or 1.
    ("agent_tools", "enabled", "integer", "boolean"),
    ("agent_tools", "requires_approval", "integer", "boolean"),
    ("tool_approvals", "continued", "integer", "boolean"),
    ("webhooks", "active", "integer", "boolean"),
];

/// The two migration folders describe one schema: every table of one is a table of the
/// other (but for [`ONLY_SQLITE`] and [`ONLY_POSTGRES`]), with the same columns, each of
/// the same normalised type (but for [`TYPE_DIFFERENCES`]) and nullability. sqlx's own
/// `_sqlx_migrations` is left out. Every listed difference must still exist, so the lists
/// stay true.
#[tokio::test]
async fn the_postgres_schema_matches_the_sqlite_schema() {
    let Some(server) = postgres_server("the_postgres_schema_matches_the_sqlite_schema") else {
        return;
    };
    let (_database, pg) = migrated_postgres(&server).await;
    let dir = tempfile::tempdir().expect("a temporary folder");
    let sqlite_url = format!("sqlite://{}", dir.path().join("schema.db").display());
    let sqlite = store::sqlite::SqliteStore::connect(&sqlite_url)
        .await
        .expect("opening SQLite");
    sqlite.migrate().await.expect("migrating SQLite");

    let mut in_postgres = Columns::new();
    let rows: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT c.table_name::text, c.column_name::text, c.data_type::text, \
         c.is_nullable::text \
         FROM information_schema.columns c JOIN information_schema.tables t \
           ON t.table_schema = c.table_schema AND t.table_name = c.table_name \
         WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' \
           AND c.table_name <> '_sqlx_migrations'",
    )
    .fetch_all(pg.pool())
    .await
    .expect("reading PostgreSQL's columns");
    for (table, column, data_type, nullable) in rows {
        // BIGINT only: the row mappers read i64, which sqlx decodes from BIGINT alone.
        let normalised = match data_type.as_str() {
            "bigint" => "integer",
            "text" => "text",
            "bytea" => "blob",
            "double precision" => "real",
            "boolean" => "boolean",
            other => panic!("{table}.{column}: PostgreSQL type {other} has no SQLite twin"),
        };
        in_postgres.insert((table, column), (normalised.into(), nullable == "YES"));
    }

    let mut in_sqlite = Columns::new();
    let rows: Vec<(String, String, String, i64, i64)> = sqlx::query_as(
        "SELECT m.name, p.name, p.type, p.\"notnull\", p.pk \
         FROM sqlite_master m JOIN pragma_table_info(m.name) p \
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' \
           AND m.name <> '_sqlx_migrations' AND m.name NOT LIKE 'messages_fts%'",
    )
    .fetch_all(sqlite.pool())
    .await
    .expect("reading SQLite's columns");
    for (table, column, declared, not_null, pk) in rows {
        let normalised = match declared.to_ascii_uppercase().as_str() {
            "INTEGER" => "integer",
            "TEXT" => "text",
            "BLOB" => "blob",
            "REAL" => "real",
            other => panic!("{table}.{column}: SQLite type {other} is not normalised"),
        };
        // A primary key column is NOT NULL on PostgreSQL; SQLite lets a non-INTEGER primary
        // key hold NULL (https://www.sqlite.org/lang_createtable.html#the_primary_key), which
        // the service never writes, so both are compared as NOT NULL.
        let nullable = not_null == 0 && pk == 0;
        in_sqlite.insert((table, column), (normalised.into(), nullable));
    }

    let tables = |columns: &Columns| -> std::collections::BTreeSet<String> {
        columns.keys().map(|(table, _)| table.clone()).collect()
    };
    let (pg_tables, sqlite_tables) = (tables(&in_postgres), tables(&in_sqlite));
    let only_sqlite: Vec<&String> = sqlite_tables.difference(&pg_tables).collect();
    let only_postgres: Vec<&String> = pg_tables.difference(&sqlite_tables).collect();
    assert_eq!(only_sqlite, ONLY_SQLITE, "tables only SQLite has");
    assert_eq!(only_postgres, ONLY_POSTGRES, "tables only PostgreSQL has");

    let mut differences = Vec::new();
    for table in pg_tables.intersection(&sqlite_tables) {
        let of = |columns: &Columns| -> std::collections::BTreeMap<String, (String, bool)> {
            columns
                .iter()
                .filter(|((t, _), _)| t == table)
                .map(|((_, c), v)| (c.clone(), v.clone()))
                .collect()
        };
        let (pg_columns, sqlite_columns) = (of(&in_postgres), of(&in_sqlite));
        assert_eq!(
            pg_columns.keys().collect::<Vec<_>>(),
            sqlite_columns.keys().collect::<Vec<_>>(),
            "the columns of {table}"
        );
        for (column, (pg_type, pg_nullable)) in &pg_columns {
            let (sqlite_type, sqlite_nullable) = &sqlite_columns[column];
            assert_eq!(
                pg_nullable, sqlite_nullable,
                "{table}.{column} may hold NULL on one backend only"
            );
            if pg_type != sqlite_type {
                differences.push((
                    table.clone(),
                    column.clone(),
                    sqlite_type.clone(),
                    pg_type.clone(),
                ));
            }
        }
    }
    let expected: Vec<(String, String, String, String)> = TYPE_DIFFERENCES
        .iter()
        .map(|(t, c, s, p)| (t.to_string(), c.to_string(), s.to_string(), p.to_string()))
        .collect();
    assert_eq!(differences, expected, "columns whose types differ");
}

/// Binds every value of an enum stored as text on PostgreSQL, checks that the server
/// receives exactly its text, and that the text decodes back to the value.
async fn round_trip<T>(pool: &sqlx::PgPool, values: impl IntoIterator<Item = (T, &'static str)>)
where
    T: for<'q> sqlx::Encode<'q, sqlx::Postgres>
        + for<'r> sqlx::Decode<'r, sqlx::Postgres>
        + sqlx::Type<sqlx::Postgres>
        + Copy
        + std::fmt::Debug
        + PartialEq
        + Send
        + Unpin
        + 'static,
{
    for (value, text) in values {
        let stored: String = sqlx::query_scalar("SELECT $1::text")
            .bind(value)
            .fetch_one(pool)
            .await
            .unwrap_or_else(|e| panic!("binding {value:?}: {e}"));
        assert_eq!(stored, text, "{value:?} is stored as its text");
        let read: T = sqlx::query_scalar("SELECT $1::text")
            .bind(text)
            .fetch_one(pool)
            .await
            .unwrap_or_else(|e| panic!("decoding {text}: {e}"));
        assert_eq!(read, value, "{text} is read back");
    }
}

/// The quoted values of the CHECK constraint of `table` on `column`
/// (`CHECK (column IN ('a', 'b'))`, which PostgreSQL keeps as `column = ANY (ARRAY[…])`),
/// sorted.
async fn check_list(pool: &sqlx::PgPool, table: &str, column: &str) -> Vec<String> {
    let definitions: Vec<String> = sqlx::query_scalar(
        "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c \
         JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey) \
         WHERE c.contype = 'c' AND c.conrelid = $1::regclass AND a.attname = $2",
    )
    .bind(table)
    .bind(column)
    .fetch_all(pool)
    .await
    .expect("reading the CHECK constraints");
    assert_eq!(definitions.len(), 1, "{table}.{column}: {definitions:?}");
    let mut values: Vec<String> = definitions[0]
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    values.sort_unstable();
    values
}

/// Every enum of the store boundary (`#[sqlx(type_name = "TEXT")]`) binds as its text and
/// decodes from a PostgreSQL TEXT value, and the CHECK lists of the PostgreSQL schema are
/// exactly the enums' texts (as `enums_are_stored_as_the_text_the_migrations_use` checks
/// on SQLite).
#[tokio::test]
async fn enums_are_stored_as_text_on_postgres() {
    use agentchat::{
        domain::OAuthProvider,
        domain::{Channel, Plan, Role, ToolType},
        integrations::catalog::ProviderCode,
        store::{
            agents::AgentStatus,
            chat::ReplyStatus,
            documents::{DocumentSource, DocumentStatus},
            integrations::IntegrationStatus,
            jobs::{JobKind, JobStatus},
            webhooks::DeliveryStatus,
            TokenPurpose,
        },
        webhooks::EventType,
    };
    let Some(server) = postgres_server("enums_are_stored_as_text_on_postgres") else {
        return;
    };
    let (_database, pg) = migrated_postgres(&server).await;
    let pool = pg.pool();
    round_trip(pool, DocumentStatus::ALL.map(|v| (v, v.as_str()))).await;
    round_trip(pool, DocumentSource::ALL.map(|v| (v, v.as_str()))).await;
    round_trip(pool, JobStatus::ALL.map(|v| (v, v.as_str()))).await;
    round_trip(pool, JobKind::ALL.map(|v| (v, v.as_str()))).await;
    round_trip(pool, DeliveryStatus::ALL.map(|v| (v, v.as_str()))).await;
    round_trip(pool, EventType::ALL.map(|v| (v, v.as_str()))).await;
    round_trip(pool, Role::ALL.map(|v| (v, v.as_str()))).await;
    round_trip(pool, ReplyStatus::ALL.map(|v| (v, v.as_str()))).await;
    round_trip(pool, IntegrationStatus::ALL.map(|v| (v, v.as_str()))).await;
    round_trip(pool, ProviderCode::ALL.map(|v| (v, v.as_str()))).await;
    round_trip(pool, ToolType::ALL.map(|v| (v, v.as_str()))).await;
    round_trip(pool, AgentStatus::ALL.map(|v| (v, v.as_str()))).await;
    round_trip(pool, OAuthProvider::ALL.map(|v| (v, v.code()))).await;
    round_trip(pool, TokenPurpose::ALL.map(|v| (v, v.as_str()))).await;
    round_trip(pool, Channel::ALL.map(|v| (v, v.as_str()))).await;

    fn sorted(texts: impl IntoIterator<Item = &'static str>) -> Vec<String> {
        let mut texts: Vec<String> = texts.into_iter().map(str::to_string).collect();
        texts.sort_unstable();
        texts
    }
    let checks = [
        ("users", "plan", sorted(Plan::ALL.map(|v| v.as_str()))),
        (
            "documents",
            "status",
            sorted(DocumentStatus::ALL.map(|v| v.as_str())),
        ),
        (
            "documents",
            "kind",
            sorted(DocumentSource::ALL.map(|v| v.as_str())),
        ),
        ("jobs", "status", sorted(JobStatus::ALL.map(|v| v.as_str()))),
        ("jobs", "kind", sorted(JobKind::ALL.map(|v| v.as_str()))),
        (
            "webhook_deliveries",
            "status",
            sorted(DeliveryStatus::ALL.map(|v| v.as_str())),
        ),
        ("messages", "role", sorted(Role::ALL.map(|v| v.as_str()))),
        (
            "threads",
            "channel",
            sorted(Channel::ALL.map(|v| v.as_str())),
        ),
        (
            "messages",
            "status",
            sorted(ReplyStatus::ALL.map(|v| v.as_str())),
        ),
        (
            "user_identities",
            "provider",
            sorted(OAuthProvider::ALL.map(|v| v.code())),
        ),
        (
            "email_tokens",
            "purpose",
            sorted(TokenPurpose::ALL.map(|v| v.as_str())),
        ),
    ];
    for (table, column, texts) in checks {
        assert_eq!(
            check_list(pool, table, column).await,
            texts,
            "{table}.{column}"
        );
    }
}

/// [`store::uploads::UploadStore`] of the backend under test, as the service picks it
/// ([`store::uploads::for_backend`]): an upload stored through one handle of the database
/// is read through another one (as another instance's worker reads it), a document that
/// cannot be created leaves no upload, and a deleted document's upload is gone once its
/// removal was asked for (PostgreSQL: at once, with the document).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_is_read_through_another_handle_and_deleted_with_its_document() {
    use agentchat::{
        domain::Email,
        ids::{AgentId, DocumentId, UserId},
        store::{
            agents::AgentStatus,
            documents::DocumentRecord,
            jobs::{JobKind, JobRecord},
            AgentRecord, NewUser,
        },
    };
    use chrono::Utc;

    let fresh = fresh().await;
    let folder = tempfile::tempdir().expect("a temporary folder");
    let dir = folder.path().join("uploads");
    let other = store::connect(&fresh.url)
        .await
        .expect("opening a second handle");
    let one = store::uploads::for_backend(&fresh.url, fresh.store.clone(), &dir)
        .expect("the upload store");
    let two = store::uploads::for_backend(&fresh.url, other.clone(), &dir)
        .expect("the second handle's upload store");
    let now = Utc::now();
    let user = fresh
        .store
        .create_user(NewUser {
            id: UserId::from("u1"),
            email: Email::parse("u1@example.com").expect("an email"),
            name: "One".into(),
            password_hash: None,
            company: None,
            country: None,
            phone: None,
            email_verified: true,
            now,
        })
        .await
        .expect("creating a user");
    let agent = AgentRecord {
        id: AgentId::from("a1"),
        user_id: user.id.clone(),
        name: "Agent".into(),
        description: String::new(),
        system_prompt: String::new(),
        model: String::new(),
        status: AgentStatus::Active,
        created_at: now,
        updated_at: now,
        has_knowledge: false,
        has_tools: false,
    };
    assert!(fresh.store.create_agent(&agent, 10).await.unwrap());
    let bytes: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    let doc = DocumentRecord::pending_file(
        DocumentId::new(),
        &agent.id,
        &user.id,
        "notes.txt".into(),
        "text",
        bytes.len() as u64,
        now,
    );
    let job = JobRecord::queued(JobKind::Ingest, &doc.id, &user.id, now);
    one.create_file_document(&doc, &job, &bytes)
        .await
        .expect("storing an upload");
    assert_eq!(
        two.upload(&doc.id).await.unwrap().as_deref(),
        Some(bytes.as_slice()),
        "the upload is read through another handle"
    );
    let claimed = other
        .claim_job(now, now + chrono::Duration::seconds(60))
        .await
        .unwrap()
        .expect("the upload's job, seen through the other handle");
    assert_eq!(claimed.document_id, doc.id);

    // A document that cannot be stored (its agent is unknown) keeps no upload.
    let orphan = DocumentRecord::pending_file(
        DocumentId::new(),
        &AgentId::from("nobody"),
        &user.id,
        "orphan.txt".into(),
        "text",
        3,
        now,
    );
    let orphan_job = JobRecord::queued(JobKind::Ingest, &orphan.id, &user.id, now);
    assert!(one
        .create_file_document(&orphan, &orphan_job, b"abc")
        .await
        .is_err());
    assert_eq!(two.upload(&orphan.id).await.unwrap(), None);
    assert_eq!(one.upload(&orphan.id).await.unwrap(), None);

    // Deleted with its document.
    assert!(fresh
        .store
        .delete_document(&user.id, &agent.id, &doc.id)
        .await
        .unwrap());
    if store::Backend::of(&fresh.url) == Some(store::Backend::Postgres) {
        assert_eq!(
            two.upload(&doc.id).await.unwrap(),
            None,
            "the database's upload goes with its document"
        );
    }
    one.remove_uploads(std::slice::from_ref(&doc.id))
        .await
        .expect("removing the upload");
    assert_eq!(two.upload(&doc.id).await.unwrap(), None);
    assert_eq!(one.upload(&doc.id).await.unwrap(), None);
}

/// A pooled connection that the server closed while it sat idle (a restart, an idle
/// timeout) is replaced before a query uses it: connections idle for
/// `ALIVE_BYPASS_WINDOW` or longer are pinged when handed out, and the dead one is swapped
/// for a new one, so the query succeeds.
#[tokio::test]
async fn a_postgres_connection_closed_while_idle_is_replaced_before_use() {
    let Some(server) =
        postgres_server("a_postgres_connection_closed_while_idle_is_replaced_before_use")
    else {
        return;
    };
    let (database, _) = migrated_postgres(&server).await;
    // One connection, so the query below can only get the one that was closed, or a new one.
    let store = store::postgres::PgStore::connect(database.url(), 1)
        .await
        .expect("connecting");
    let first: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(store.pool())
        .await
        .unwrap();
    let admin = sqlx::PgPool::connect(&server).await.unwrap();
    let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(first)
        .fetch_one(&admin)
        .await
        .unwrap();
    assert!(ended, "the pooled connection's backend was terminated");
    tokio::time::sleep(
        store::postgres::ALIVE_BYPASS_WINDOW + std::time::Duration::from_millis(100),
    )
    .await;
    let second: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(store.pool())
        .await
        .expect("the query runs on a new connection, not the closed one");
    assert_ne!(first, second);
    store.pool().close().await;
    admin.close().await;
}

/// Chat turns commit through connections of their own whose `synchronous_commit` is `off`
/// by default (`TurnCommit::Asynchronous`, `CHAT_SYNCHRONOUS_COMMIT=off`), even when the
/// URL's `options` ask otherwise; with `TurnCommit::Synchronous` they keep the server's
/// setting, or the URL's. Every other write keeps the server's setting (or the URL's).
#[tokio::test]
async fn chat_turns_commit_asynchronously_on_postgres_unless_asked_and_nothing_else_does() {
    let Some(server) = postgres_server(
        "chat_turns_commit_asynchronously_on_postgres_unless_asked_and_nothing_else_does",
    ) else {
        return;
    };
    let (database, _) = migrated_postgres(&server).await;
    async fn setting(pool: &sqlx::PgPool) -> String {
        sqlx::query_scalar("SHOW synchronous_commit")
            .fetch_one(pool)
            .await
            .unwrap()
    }
    let admin = sqlx::PgPool::connect(&server).await.unwrap();
    let servers = setting(&admin).await;

    let store = store::postgres::PgStore::connect(database.url(), 2)
        .await
        .unwrap();
    assert_eq!(store.turn_pool().size(), 0, "opened when a turn is stored");
    conformance::store_one_turn(&store).await;
    assert!(
        store.turn_pool().size() >= 1,
        "the turn went through the turns' connections"
    );
    assert_eq!(setting(store.turn_pool()).await, "off");
    assert_eq!(setting(store.pool()).await, servers);

    // The URL's `options` are the operator's: every other write keeps them, and only the
    // asynchronous turns override them.
    let separator = if database.url().contains('?') {
        '&'
    } else {
        '?'
    };
    let local = format!(
        "{}{separator}options=-c%20synchronous_commit%3Dlocal",
        database.url()
    );
    let store = store::postgres::PgStore::connect(&local, 2).await.unwrap();
    assert_eq!(setting(store.turn_pool()).await, "off");
    assert_eq!(setting(store.pool()).await, "local");
    let store = store::postgres::PgStore::connect_with(&local, 2, store::TurnCommit::Synchronous)
        .await
        .unwrap();
    assert_eq!(setting(store.turn_pool()).await, "local");
    let store =
        store::postgres::PgStore::connect_with(database.url(), 2, store::TurnCommit::Synchronous)
            .await
            .unwrap();
    assert_eq!(setting(store.turn_pool()).await, servers);
}
