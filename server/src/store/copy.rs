//! `agentchat copy-data`: copies a SQLite installation into an empty PostgreSQL database
//! in one transaction (README.md § Upgrading from SQLite to PostgreSQL).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    str::FromStr,
};

use anyhow::Context;
use futures::TryStreamExt;
use sqlx::{
    postgres::PgConnectOptions, sqlite::SqliteConnectOptions, Connection, PgConnection, Row,
    SqliteConnection,
};

use super::{postgres::PgStore, sqlite::SqliteStore, Store};

/// The tables copied, parents before children (the order foreign keys need).
pub const TABLES: [&str; 26] = [
    "users",
    "email_tokens",
    "sessions",
    "api_keys",
    "agents",
    "threads",
    "messages",
    "usage_daily",
    "documents",
    "document_pages",
    "chunks",
    "chunk_generations",
    "chunk_embeddings",
    "embedding_generations",
    "jobs",
    "user_identities",
    "oauth_flows",
    "oauth_exchange_codes",
    "webhooks",
    "webhook_deliveries",
    "webhook_attempts",
    "integrations",
    "channel_threads",
    "channel_events",
    "agent_tools",
    "tool_approvals",
];

/// Rows sent to PostgreSQL per INSERT.
const BATCH: usize = 500;

/// How many rows one table holds in the source and in the target after the copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableCount {
    /// The table.
    pub table: String,
    /// Rows in the SQLite source.
    pub source: i64,
    /// Rows in the PostgreSQL target.
    pub target: i64,
}

/// What a finished copy did: the row counts per table and the uploads moved.
#[derive(Debug, Clone)]
pub struct CopyReport {
    /// One entry per table of [`TABLES`], in that order.
    pub tables: Vec<TableCount>,
    /// Upload files copied into `document_uploads`.
    pub uploads: u64,
}

/// One column value, typed by the target's column.
enum Value {
    Int(Option<i64>),
    Text(Option<String>),
    Bytes(Option<Vec<u8>>),
    Bool(Option<bool>),
    Float(Option<f64>),
}

/// The target type of a column, from `information_schema.columns.data_type`.
#[derive(Clone, Copy)]
enum Kind {
    Int,
    Text,
    Bytes,
    Bool,
    Float,
}

impl Kind {
    fn of(data_type: &str) -> anyhow::Result<Self> {
        Ok(match data_type {
            "bigint" | "integer" | "smallint" => Self::Int,
            "text" | "character varying" | "jsonb" | "json" => Self::Text,
            "bytea" => Self::Bytes,
            "boolean" => Self::Bool,
            "double precision" | "real" => Self::Float,
            other => anyhow::bail!("copy-data cannot copy a column of type {other}"),
        })
    }

    fn read(self, row: &sqlx::sqlite::SqliteRow, index: usize) -> Result<Value, sqlx::Error> {
        Ok(match self {
            Self::Int => Value::Int(row.try_get(index)?),
            Self::Text => Value::Text(row.try_get(index)?),
            Self::Bytes => Value::Bytes(row.try_get(index)?),
            Self::Bool => Value::Bool(row.try_get(index)?),
            Self::Float => Value::Float(row.try_get(index)?),
        })
    }
}

/// Copies the SQLite installation at `from` (uploads in `uploads_dir`) into the empty
/// PostgreSQL database at `to`. Errors: a database fails, the target holds data, or row
/// counts differ afterwards (the target is left empty).
pub async fn copy_data(
    from: &str,
    to: &str,
    uploads_dir: &Path,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<CopyReport> {
    anyhow::ensure!(
        super::Backend::of(from) == Some(super::Backend::Sqlite),
        "--from must be a sqlite:// URL"
    );
    anyhow::ensure!(
        super::Backend::of(to) == Some(super::Backend::Postgres),
        "--to must be a postgres:// URL"
    );
    // Both at the schema of this build.
    let source = SqliteStore::connect(from).await.context("opening --from")?;
    source.migrate().await.context("migrating --from")?;
    drop(source);
    let target = PgStore::connect(to, 2).await.context("opening --to")?;
    target.migrate().await.context("migrating --to")?;
    drop(target);

    let mut src =
        SqliteConnection::connect_with(&SqliteConnectOptions::from_str(from)?.read_only(true))
            .await?;
    let mut dst = PgConnection::connect_with(&PgConnectOptions::from_str(to)?).await?;

    for table in TABLES.iter().chain(std::iter::once(&"document_uploads")) {
        let taken: bool = sqlx::query_scalar(&format!("SELECT EXISTS (SELECT 1 FROM {table})"))
            .fetch_one(&mut dst)
            .await?;
        anyhow::ensure!(
            !taken,
            "the target database already holds data (table {table} has rows); copy-data only \
             fills an empty installation"
        );
    }

    // `dst` is a connection of its own, not a pooled one: a copy dropped part-way drops it,
    // which closes it, and the server rolls the copy back. The hazard that makes the
    // PostgreSQL store begin through `store::postgres::begin` (a pooled connection going
    // back to its pool inside a transaction) cannot arise here.
    let mut tx = dst.begin().await?;
    for table in TABLES {
        sqlx::query(&format!("ALTER TABLE {table} DISABLE TRIGGER USER"))
            .execute(&mut *tx)
            .await?;
    }
    let mut counts = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        let source_count: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(&mut src)
            .await?;
        let columns = shared_columns(&mut src, &mut tx, table).await?;
        let names = columns
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let select = format!("SELECT {names} FROM {table}");
        let mut rows = sqlx::query(&select).fetch(&mut src);
        let mut batch: Vec<Vec<Value>> = Vec::with_capacity(BATCH);
        let mut copied = 0i64;
        while let Some(row) = rows.try_next().await? {
            let values = columns
                .iter()
                .enumerate()
                .map(|(i, (_, kind))| kind.read(&row, i))
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("reading a row of {table}"))?;
            batch.push(values);
            if batch.len() == BATCH {
                copied += insert(&mut tx, table, &names, std::mem::take(&mut batch)).await?;
                progress(&format!("{table}: {copied}/{source_count} rows"));
            }
        }
        drop(rows);
        if !batch.is_empty() {
            copied += insert(&mut tx, table, &names, batch).await?;
        }
        progress(&format!("{table}: {copied}/{source_count} rows"));
        let target_count: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(&mut *tx)
            .await?;
        counts.push(TableCount {
            table: table.to_string(),
            source: source_count,
            target: target_count,
        });
    }

    // The uploads kept beside the SQLite file.
    let documents: Vec<String> =
        sqlx::query_scalar("SELECT id FROM documents WHERE kind = 'file' ORDER BY id")
            .fetch_all(&mut *tx)
            .await?;
    let mut uploads = 0u64;
    for id in documents {
        let path = upload_path(uploads_dir, &id);
        let bytes = match tokio::fs::read(&path).await {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        sqlx::query("INSERT INTO document_uploads (document_id, bytes) VALUES ($1, $2)")
            .bind(&id)
            .bind(bytes)
            .execute(&mut *tx)
            .await?;
        uploads += 1;
    }
    progress(&format!("uploads: {uploads} files"));

    sqlx::query("SELECT setval('chunk_ids', GREATEST((SELECT MAX(id) FROM chunks), 1), (SELECT MAX(id) FROM chunks) IS NOT NULL)")
        .execute(&mut *tx)
        .await?;
    for table in TABLES {
        sqlx::query(&format!("ALTER TABLE {table} ENABLE TRIGGER USER"))
            .execute(&mut *tx)
            .await?;
    }
    if let Some(bad) = counts.iter().find(|c| c.source != c.target) {
        anyhow::bail!(
            "row counts differ for {}: {} in the source, {} in the target; nothing was copied",
            bad.table,
            bad.source,
            bad.target
        );
    }
    tx.commit().await?;
    Ok(CopyReport {
        tables: counts,
        uploads,
    })
}

/// The file an upload of document `id` is kept in under `uploads_dir`.
fn upload_path(uploads_dir: &Path, id: &str) -> PathBuf {
    uploads_dir.join(id)
}

/// The columns of `table` both databases have, with the target's type of each.
async fn shared_columns(
    src: &mut SqliteConnection,
    dst: &mut PgConnection,
    table: &str,
) -> anyhow::Result<Vec<(String, Kind)>> {
    let source: Vec<String> =
        sqlx::query_scalar("SELECT name FROM pragma_table_info($1) ORDER BY cid")
            .bind(table)
            .fetch_all(&mut *src)
            .await?;
    let target: BTreeMap<String, String> = sqlx::query(
        "SELECT column_name::text, data_type::text FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name = $1",
    )
    .bind(table)
    .fetch_all(&mut *dst)
    .await?
    .into_iter()
    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
    .collect::<Result<_, sqlx::Error>>()?;
    anyhow::ensure!(!target.is_empty(), "the target has no table {table}");
    source
        .into_iter()
        .filter_map(|name| target.get(&name).map(|t| (name.clone(), t.clone())))
        .map(|(name, t)| Ok((name, Kind::of(&t)?)))
        .collect()
}

/// Inserts `rows` (values in the order of `names`) into `table`; returns how many.
async fn insert(
    tx: &mut PgConnection,
    table: &str,
    names: &str,
    rows: Vec<Vec<Value>>,
) -> anyhow::Result<i64> {
    let count = rows.len() as i64;
    let mut insert =
        sqlx::QueryBuilder::<sqlx::Postgres>::new(format!("INSERT INTO {table} ({names}) "));
    insert.push_values(rows, |mut b, values| {
        for v in values {
            match v {
                Value::Int(x) => b.push_bind(x),
                Value::Text(x) => b.push_bind(x),
                Value::Bytes(x) => b.push_bind(x),
                Value::Bool(x) => b.push_bind(x),
                Value::Float(x) => b.push_bind(x),
            };
        }
    });
    insert
        .build()
        .execute(tx)
        .await
        .with_context(|| format!("writing rows of {table}"))?;
    Ok(count)
}
