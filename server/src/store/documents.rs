//! Knowledge documents, crawled pages, chunks and embeddings ([`DocumentStore`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{
    jobs::{JobKind, JobRecord},
    StoreResult,
};
use crate::ids::{AgentId, ChunkId, DocumentId, UserId};

/// A knowledge document's indexing state (docs/api.md § States and transitions).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "TEXT", rename_all = "lowercase")]
pub enum DocumentStatus {
    /// Stored, its job queued: when added and on a refresh.
    Pending,
    /// A worker runs its job (`knowledge::worker`).
    Processing,
    /// Searchable: its job ended well ([`super::jobs::JobQueue::complete_job`]).
    Indexed,
    /// Indexing failed; `error` says why ([`super::jobs::JobQueue::complete_job`]).
    Failed,
}

impl DocumentStatus {
    pub const ALL: [Self; 4] = [Self::Pending, Self::Processing, Self::Indexed, Self::Failed];

    /// The stored and wire text: `pending`, `processing`, `indexed` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Processing => "processing",
            Self::Indexed => "indexed",
            Self::Failed => "failed",
        }
    }
}

impl std::fmt::Display for DocumentStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a knowledge document comes from (docs/api.md § Knowledge document, `kind`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "TEXT", rename_all = "lowercase")]
pub enum DocumentSource {
    /// An uploaded file (docs/api.md § Upload document), indexed by an `ingest` job.
    File,
    /// A web site crawled from a start URL (docs/api.md § Add URL).
    Url,
}

impl DocumentSource {
    pub const ALL: [Self; 2] = [Self::File, Self::Url];

    /// The stored and wire text: `file` or `url`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Url => "url",
        }
    }

    /// The job kind that indexes this source: `ingest` for a file, `crawl` for a site.
    pub fn job_kind(self) -> JobKind {
        match self {
            Self::File => JobKind::Ingest,
            Self::Url => JobKind::Crawl,
        }
    }
}

impl std::fmt::Display for DocumentSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A knowledge document: an uploaded file or a crawled site.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentRecord {
    pub id: DocumentId,
    pub agent_id: AgentId,
    pub user_id: UserId,
    pub kind: DocumentSource,
    /// File name of an upload, the start URL of a crawl.
    pub name: String,
    pub url: Option<String>,
    /// `pdf`, `docx`, `markdown` or `text` for uploads.
    pub format: Option<String>,
    /// The crawl options as JSON (url documents).
    pub crawl_config: Option<String>,
    pub status: DocumentStatus,
    pub error: Option<String>,
    /// Pages crawled (url documents) or read (PDF).
    pub pages: Option<u32>,
    pub chunks: u32,
    /// Size of the upload, or of the crawled pages' text, in bytes.
    pub bytes: u64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub indexed_at: Option<DateTime<Utc>>,
    /// Hours between scheduled refreshes (url documents); `None`: off.
    pub refresh_hours: Option<u32>,
    /// When the scheduler next queues a refresh; `None` when off.
    pub next_refresh_at: Option<DateTime<Utc>>,
    /// When the last crawl (the first or a refresh) finished well.
    pub last_refreshed_at: Option<DateTime<Utc>>,
    /// That crawl's page counts against the crawl before it.
    pub refresh_counts: Option<RefreshCounts>,
}

/// A crawl's pages compared with the pages the crawl before it kept (docs/knowledge.md §
/// Refresh): new, re-indexed, dropped and kept as they were (304 or the same text).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RefreshCounts {
    pub added: u32,
    pub changed: u32,
    pub removed: u32,
    pub unchanged: u32,
}

/// A document whose scheduled refresh is due ([`DocumentStore::due_refreshes`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DueRefresh {
    pub id: DocumentId,
    pub user_id: UserId,
    /// The due time as stored: the compare-and-set value of [`DocumentStore::claim_refresh`].
    pub next_refresh_at: DateTime<Utc>,
    pub refresh_hours: u32,
}

/// `start` plus `hours` hours: when a schedule of `hours` next comes due after a refresh
/// that started at `start` (docs/knowledge.md § Refresh).
pub fn next_refresh(start: DateTime<Utc>, hours: u32) -> DateTime<Utc> {
    start + chrono::Duration::hours(i64::from(hours))
}

impl DocumentRecord {
    /// A new `pending` document of `kind` named `name`, created at `now`.
    fn pending(
        id: DocumentId,
        agent_id: &AgentId,
        user_id: &UserId,
        kind: DocumentSource,
        name: String,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            id,
            agent_id: agent_id.clone(),
            user_id: user_id.clone(),
            kind,
            name,
            url: None,
            format: None,
            crawl_config: None,
            status: DocumentStatus::Pending,
            error: None,
            pages: None,
            chunks: 0,
            bytes: 0,
            created_at: now,
            updated_at: now,
            indexed_at: None,
            refresh_hours: None,
            next_refresh_at: None,
            last_refreshed_at: None,
            refresh_counts: None,
        }
    }

    /// A new `pending` upload of `format` (`pdf`, `docx`, `markdown`, `text`) and `bytes`.
    pub fn pending_file(
        id: DocumentId,
        agent_id: &AgentId,
        user_id: &UserId,
        name: String,
        format: &str,
        bytes: u64,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            format: Some(format.to_string()),
            bytes,
            ..Self::pending(id, agent_id, user_id, DocumentSource::File, name, now)
        }
    }

    /// A new `pending` site to crawl from `url`, with the crawl options as JSON, refreshed
    /// every `refresh_hours` (first due that long after `now`) or never (`None`).
    pub fn pending_url(
        id: DocumentId,
        agent_id: &AgentId,
        user_id: &UserId,
        url: &str,
        crawl_config: Option<String>,
        refresh_hours: Option<u32>,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            url: Some(url.to_string()),
            crawl_config,
            refresh_hours,
            next_refresh_at: refresh_hours.map(|h| next_refresh(now, h)),
            ..Self::pending(
                id,
                agent_id,
                user_id,
                DocumentSource::Url,
                url.to_string(),
                now,
            )
        }
    }
}

/// A chunk to store; serde (camelCase) because extraction child processes produce it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewChunk {
    /// The page a crawled chunk came from.
    pub page_url: Option<String>,
    /// Title of the document or page.
    pub title: String,
    /// Enclosing headings joined with ` > `.
    pub heading_path: String,
    /// Order within the document (or page).
    pub position: u32,
    /// 1-based PDF page.
    pub page: Option<u32>,
    pub tokens: u32,
    pub text: String,
}

/// A crawled page as last indexed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PageRecord {
    pub url: String,
    pub title: String,
    /// SHA-256 (hex) of the page's extracted text.
    pub content_hash: String,
    /// The URL requested for it (before redirects); `None` for pages stored before it was kept.
    pub fetch_url: Option<String>,
    /// The `ETag` it was last answered with, verbatim (sent back as `If-None-Match`).
    pub etag: Option<String>,
    /// The `Last-Modified` it was last answered with, verbatim (sent as `If-Modified-Since`).
    pub last_modified: Option<String>,
    /// Its outgoing links as last read (followed again when it answers 304); empty when it
    /// asked not to be followed.
    pub links: Vec<String>,
    /// Size of its text in bytes (UTF-8), counted into the document's `bytes` when it
    /// answers 304.
    pub bytes: u64,
}

impl PageRecord {
    /// The stored row of the page as JSON (what `json_rows` of the upsert reads).
    fn row(&self) -> serde_json::Value {
        serde_json::json!({
            "url": self.url, "title": self.title, "content_hash": self.content_hash,
            "fetch_url": self.fetch_url, "etag": self.etag, "last_modified": self.last_modified,
            "links": serde_json::to_string(&self.links).unwrap_or_else(|_| "[]".into()),
            "bytes": self.bytes,
        })
    }
}

/// The rows of `pages` as one JSON array, for the page upsert.
pub(crate) fn page_rows<'a>(pages: impl Iterator<Item = &'a PageRecord>) -> String {
    serde_json::Value::Array(pages.map(PageRecord::row).collect()).to_string()
}

/// A chunk found by a search.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkHit {
    pub chunk_id: ChunkId,
    pub document_id: DocumentId,
    /// The document's name (uploads) or the page title (crawls).
    pub title: String,
    pub url: Option<String>,
    /// The document's file name or start URL (what an evaluation's `expect` names).
    pub document_name: String,
    pub heading_path: String,
    pub text: String,
    /// Relevance, larger is better (0 from [`DocumentStore::chunk_hits`]).
    pub score: f64,
}

/// The text of a chunk: what is embedded, and what a BM25 index analyses.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkText {
    pub chunk_id: ChunkId,
    pub title: String,
    pub heading_path: String,
    pub text: String,
}

/// A chunk's stored embedding.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkVector {
    pub chunk_id: ChunkId,
    pub vector: Vec<f32>,
}

/// The stored form of an embedding: little-endian `f32`s, 4 bytes per dimension.
pub fn vector_to_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The embedding stored as `bytes`; `None` when the length is not a multiple of 4.
pub fn vector_from_bytes(bytes: &[u8]) -> Option<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    )
}

/// The columns of `chunks` a backend's chunk insert writes, in order.
pub(crate) const CHUNK_COLUMNS: &str =
    "id, document_id, agent_id, page_url, title, heading_path, position, page, tokens, text";

/// The upsert of the embeddings `select` gives (chunk id, agent id, model, dimensions, vector).
pub(crate) fn upsert_embeddings_sql(select: &str) -> String {
    format!(
        "INSERT INTO chunk_embeddings (chunk_id, agent_id, model, dimensions, vector) {select} \
         ON CONFLICT (chunk_id) DO UPDATE SET model = excluded.model, \
         dimensions = excluded.dimensions, vector = excluded.vector"
    )
}

/// Persistence of knowledge documents and their chunks; another user's rows are "not found".
///
/// Chunk writes and deletes keep three rules, for the BM25 indexes: 1. the agent's
/// generation changes in the same transaction; 2. a chunk id is never given twice; 3. per
/// agent, ids become visible in increasing order.
#[async_trait]
pub trait DocumentStore: Send + Sync {
    /// Stores a new document and its first job in one transaction (both or neither).
    async fn create_document(&self, doc: &DocumentRecord, job: &JobRecord) -> StoreResult<()>;
    /// The agent's documents, oldest first.
    async fn list_documents(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
    ) -> StoreResult<Vec<DocumentRecord>>;
    /// One of the agent's documents.
    async fn document(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        id: &DocumentId,
    ) -> StoreResult<Option<DocumentRecord>>;
    /// A document by id alone (workers).
    async fn document_by_id(&self, id: &DocumentId) -> StoreResult<Option<DocumentRecord>>;
    /// Deletes a document with its chunks, pages, jobs and embeddings; `false`: not there.
    async fn delete_document(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        id: &DocumentId,
    ) -> StoreResult<bool>;
    /// Sets a document's status (and error, cleared when `None`).
    async fn set_document_status(
        &self,
        id: &DocumentId,
        status: DocumentStatus,
        error: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Replaces every chunk of a document; `false` (nothing written) when it is gone.
    async fn replace_chunks(
        &self,
        document_id: &DocumentId,
        chunks: &[NewChunk],
    ) -> StoreResult<bool>;
    /// Replaces crawled pages' chunks and hashes; `false` (nothing written): document gone.
    async fn replace_pages(
        &self,
        document_id: &DocumentId,
        pages: &[(PageRecord, Vec<NewChunk>)],
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Writes crawled pages' titles, hashes, validators and links, leaving their chunks as
    /// they are (pages found unchanged); `false` (nothing written): document gone.
    async fn update_pages(
        &self,
        document_id: &DocumentId,
        pages: &[PageRecord],
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Sets a url document's refresh schedule: every `hours` (`None`: off), next due at `next`
    /// (`None` when off). `false`: no such document of the user's agent.
    async fn set_refresh_schedule(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        id: &DocumentId,
        hours: Option<u32>,
        next: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Up to `limit` documents whose `next_refresh_at` is at or before `now`, earliest first.
    async fn due_refreshes(&self, now: DateTime<Utc>, limit: u32) -> StoreResult<Vec<DueRefresh>>;
    /// Moves a due document's `next_refresh_at` from `due` to `next` if it still is `due`
    /// (compare-and-set): of several schedulers that saw it due, exactly one gets `true`.
    async fn claim_refresh(
        &self,
        id: &DocumentId,
        due: DateTime<Utc>,
        next: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// The pages a crawled document had at its last crawl.
    async fn document_pages(&self, document_id: &DocumentId) -> StoreResult<Vec<PageRecord>>;
    /// Removes the pages (and their chunks) of a crawled document not in `keep`.
    async fn retain_pages(&self, document_id: &DocumentId, keep: &[String]) -> StoreResult<()>;
    /// Marks a document indexed: recounts its chunks, stores `pages`, `bytes` and the time.
    async fn finish_document(
        &self,
        id: &DocumentId,
        pages: Option<u32>,
        bytes: u64,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;

    /// The agent's chunk generation (rule 1); `None` when no chunk was ever written.
    async fn chunk_generation(&self, agent_id: &AgentId) -> StoreResult<Option<i64>>;
    /// How many of the agent's chunks have an id of at most `max_id`.
    async fn count_chunks_up_to(&self, agent_id: &AgentId, max_id: ChunkId) -> StoreResult<u64>;
    /// The ids of the agent's chunks of at most `max_id`, ascending.
    async fn chunk_ids_up_to(
        &self,
        agent_id: &AgentId,
        max_id: ChunkId,
    ) -> StoreResult<Vec<ChunkId>>;
    /// The agent's chunks with an id above `after_id`, ascending, at most `limit`.
    async fn chunks_after(
        &self,
        agent_id: &AgentId,
        after_id: ChunkId,
        limit: u32,
    ) -> StoreResult<Vec<ChunkText>>;

    /// Stores `model`'s embeddings, replacing earlier ones; missing chunks are skipped, and
    /// an empty vector records a refusal.
    async fn put_embeddings(&self, model: &str, vectors: &[(ChunkId, Vec<f32>)])
        -> StoreResult<()>;
    /// The agent's embeddings made by `model` (refusals left out), by chunk id.
    async fn agent_embeddings(
        &self,
        agent_id: &AgentId,
        model: &str,
    ) -> StoreResult<Vec<ChunkVector>>;
    /// Changes whenever any of the agent's embeddings is written or deleted; 0 if none ever.
    async fn embedding_generation(&self, agent_id: &AgentId) -> StoreResult<i64>;
    /// Chunks without an embedding of `model` (of `document_id`, or any), oldest first.
    async fn chunks_without_embedding(
        &self,
        model: &str,
        document_id: Option<&DocumentId>,
        limit: u32,
    ) -> StoreResult<Vec<ChunkText>>;
    /// The agent's chunks among `ids` as hits scored 0, in no particular order.
    async fn chunk_hits(&self, agent_id: &AgentId, ids: &[ChunkId]) -> StoreResult<Vec<ChunkHit>>;
}

/// Defines the [`DocumentStore`] of `$store` (`$writer` pool writes, `$reader` reads) over
/// the invoking file's `hold_chunk_ids` (rule 3), `insert_chunks` and `upsert_embeddings`.
macro_rules! document_store {
    ($store:ident, $db:ty, $writer:ident, $reader:ident) => {
        pub(super) mod shared {
            use std::collections::HashMap;

            use chrono::{DateTime, Utc};
            use sqlx::Row;

            use super::super::{
                jobs::shared::insert_job,
                rows::{document, hit, ms, DOCUMENT_COLUMNS},
                $store,
            };
            use super::super::{in_list, json_rows, list, row_lock};
            use super::{hold_chunk_ids, insert_chunks, upsert_embeddings};
            use crate::ids::{AgentId, ChunkId, DocumentId, UserId};
            use crate::store::{
                documents::{
                    page_rows, vector_from_bytes, ChunkHit, ChunkText, ChunkVector,
                    DocumentRecord, DocumentStatus, DocumentStore, DueRefresh, NewChunk,
                    PageRecord,
                },
                jobs::JobRecord,
                StoreResult,
            };

            /// The agent of a live document, read `FOR SHARE` (a delete waits, or this finds none).
            async fn live_agent(
                tx: &mut sqlx::Transaction<'_, $db>,
                document_id: &DocumentId,
            ) -> Result<Option<AgentId>, sqlx::Error> {
                let sql = format!(
                    "SELECT agent_id FROM documents WHERE id = $1{}",
                    row_lock(" FOR SHARE")
                );
                sqlx::query_scalar(&sql)
                    .bind(document_id)
                    .fetch_optional(&mut **tx)
                    .await
            }

            /// Deletes the chunks of the document's pages `urls`.
            async fn delete_page_chunks(
                tx: &mut sqlx::Transaction<'_, $db>,
                document_id: &DocumentId,
                urls: &[&str],
            ) -> Result<(), sqlx::Error> {
                let sql = format!(
                    "DELETE FROM chunks WHERE document_id = $1 AND page_url {}",
                    in_list("$2")
                );
                sqlx::query(&sql)
                    .bind(document_id)
                    .bind(list(urls))
                    .execute(&mut **tx)
                    .await?;
                Ok(())
            }

            /// Upserts the rows of `pages` (title, hash, validators, links, fetch time).
            async fn upsert_pages<'a>(
                tx: &mut sqlx::Transaction<'_, $db>,
                document_id: &DocumentId,
                pages: impl Iterator<Item = &'a PageRecord>,
                now: DateTime<Utc>,
            ) -> Result<(), sqlx::Error> {
                // `WHERE true` tells SQLite's parser the ON CONFLICT is the upsert's.
                let sql = format!(
                    "INSERT INTO document_pages (document_id, url, title, content_hash, fetched_at, \
                     fetch_url, etag, last_modified, links, bytes) \
                     SELECT $1, value ->> 'url', value ->> 'title', value ->> 'content_hash', $3, \
                     value ->> 'fetch_url', value ->> 'etag', value ->> 'last_modified', \
                     value ->> 'links', CAST(value ->> 'bytes' AS BIGINT) \
                     FROM {} WHERE true ON CONFLICT (document_id, url) DO UPDATE SET \
                     title = excluded.title, content_hash = excluded.content_hash, \
                     fetched_at = excluded.fetched_at, fetch_url = excluded.fetch_url, \
                     etag = excluded.etag, last_modified = excluded.last_modified, \
                     links = excluded.links, bytes = excluded.bytes",
                    json_rows("$2")
                );
                sqlx::query(&sql)
                    .bind(document_id)
                    .bind(page_rows(pages))
                    .bind(ms(now))
                    .execute(&mut **tx)
                    .await?;
                Ok(())
            }

            /// Inserts the document `d` on `conn`.
            pub(crate) async fn insert_document(
                conn: &mut <$db as sqlx::Database>::Connection,
                d: &DocumentRecord,
            ) -> StoreResult<()> {
                sqlx::query(&format!(
                    "INSERT INTO documents ({DOCUMENT_COLUMNS}) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, \
                     $17, $18, $19, $20)"
                ))
                .bind(&d.id)
                .bind(&d.agent_id)
                .bind(&d.user_id)
                .bind(d.kind)
                .bind(&d.name)
                .bind(&d.url)
                .bind(&d.format)
                .bind(&d.crawl_config)
                .bind(d.status)
                .bind(&d.error)
                .bind(d.pages.map(i64::from))
                .bind(i64::from(d.chunks))
                .bind(d.bytes as i64)
                .bind(ms(d.created_at))
                .bind(ms(d.updated_at))
                .bind(d.indexed_at.map(ms))
                .bind(d.refresh_hours.map(i64::from))
                .bind(d.next_refresh_at.map(ms))
                .bind(d.last_refreshed_at.map(ms))
                .bind(
                    d.refresh_counts
                        .map(|c| serde_json::to_string(&c))
                        .transpose()
                        .map_err(|e| crate::store::StoreError::Other(e.into()))?,
                )
                .execute(conn)
                .await?;
                Ok(())
            }

            /// Marks a document indexed, its chunks recounted.
            pub(crate) async fn mark_indexed<'e>(
                executor: impl sqlx::Executor<'e, Database = $db>,
                id: &DocumentId,
                pages: Option<u32>,
                bytes: u64,
                now: DateTime<Utc>,
            ) -> StoreResult<()> {
                sqlx::query(
                    "UPDATE documents SET status = $1, error = NULL, pages = $2, bytes = $3, \
                     chunks = (SELECT count(*) FROM chunks WHERE document_id = documents.id), \
                     updated_at = $4, indexed_at = $5 WHERE id = $6",
                )
                .bind(DocumentStatus::Indexed)
                .bind(pages.map(i64::from))
                .bind(bytes as i64)
                .bind(ms(now))
                .bind(ms(now))
                .bind(id)
                .execute(executor)
                .await?;
                Ok(())
            }

            #[async_trait::async_trait]
            impl DocumentStore for $store {
                async fn create_document(
                    &self,
                    d: &DocumentRecord,
                    j: &JobRecord,
                ) -> StoreResult<()> {
                    let mut tx = self.begin_write().await?;
                    insert_document(&mut tx, d).await?;
                    insert_job(&mut *tx, j, "").await?;
                    tx.commit().await?;
                    Ok(())
                }

                async fn list_documents(
                    &self,
                    user_id: &UserId,
                    agent_id: &AgentId,
                ) -> StoreResult<Vec<DocumentRecord>> {
                    let rows = sqlx::query(&format!(
                        "SELECT {DOCUMENT_COLUMNS} FROM documents WHERE user_id = $1 AND agent_id = $2 \
                         ORDER BY created_at, id"
                    ))
                    .bind(user_id)
                    .bind(agent_id)
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows.iter().map(document).collect::<Result<_, _>>()?)
                }

                async fn document(
                    &self,
                    user_id: &UserId,
                    agent_id: &AgentId,
                    id: &DocumentId,
                ) -> StoreResult<Option<DocumentRecord>> {
                    let row = sqlx::query(&format!(
                        "SELECT {DOCUMENT_COLUMNS} FROM documents WHERE user_id = $1 AND agent_id = $2 AND id = $3"
                    ))
                    .bind(user_id)
                    .bind(agent_id)
                    .bind(id)
                    .fetch_optional(&self.$reader)
                    .await?;
                    Ok(row.as_ref().map(document).transpose()?)
                }

                async fn document_by_id(
                    &self,
                    id: &DocumentId,
                ) -> StoreResult<Option<DocumentRecord>> {
                    let row = sqlx::query(&format!(
                        "SELECT {DOCUMENT_COLUMNS} FROM documents WHERE id = $1"
                    ))
                    .bind(id)
                    .fetch_optional(&self.$reader)
                    .await?;
                    Ok(row.as_ref().map(document).transpose()?)
                }

                async fn delete_document(
                    &self,
                    user_id: &UserId,
                    agent_id: &AgentId,
                    id: &DocumentId,
                ) -> StoreResult<bool> {
                    // Chunks (and through the trigger their index entries), pages and jobs go by
                    // ON DELETE CASCADE in the same statement.
                    let done = sqlx::query(
                        "DELETE FROM documents WHERE user_id = $1 AND agent_id = $2 AND id = $3",
                    )
                    .bind(user_id)
                    .bind(agent_id)
                    .bind(id)
                    .execute(&self.$writer)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn set_document_status(
                    &self,
                    id: &DocumentId,
                    status: DocumentStatus,
                    error: Option<&str>,
                    now: DateTime<Utc>,
                ) -> StoreResult<()> {
                    sqlx::query("UPDATE documents SET status = $1, error = $2, updated_at = $3 WHERE id = $4")
                        .bind(status)
                        .bind(error)
                        .bind(ms(now))
                        .bind(id)
                        .execute(&self.$writer)
                        .await?;
                    Ok(())
                }

                async fn replace_chunks(
                    &self,
                    document_id: &DocumentId,
                    chunks: &[NewChunk],
                ) -> StoreResult<bool> {
                    let mut tx = self.begin_write().await?;
                    let Some(agent_id) = live_agent(&mut tx, document_id).await? else {
                        return Ok(false);
                    };
                    if !chunks.is_empty() {
                        hold_chunk_ids(&mut tx, &agent_id).await?;
                    }
                    sqlx::query("DELETE FROM chunks WHERE document_id = $1")
                        .bind(document_id)
                        .execute(&mut *tx)
                        .await?;
                    if !chunks.is_empty() {
                        let chunks: Vec<&NewChunk> = chunks.iter().collect();
                        insert_chunks(&mut tx, document_id, &agent_id, &chunks).await?;
                    }
                    tx.commit().await?;
                    Ok(true)
                }

                async fn replace_pages(
                    &self,
                    document_id: &DocumentId,
                    pages: &[(PageRecord, Vec<NewChunk>)],
                    now: DateTime<Utc>,
                ) -> StoreResult<bool> {
                    // A page given twice is written as its last copy (as writing the pages one
                    // after the other would leave it).
                    let mut last: HashMap<&str, usize> = HashMap::new();
                    for (i, (page, _)) in pages.iter().enumerate() {
                        last.insert(page.url.as_str(), i);
                    }
                    let pages: Vec<&(PageRecord, Vec<NewChunk>)> = pages
                        .iter()
                        .enumerate()
                        .filter(|(i, (page, _))| last.get(page.url.as_str()) == Some(i))
                        .map(|(_, p)| p)
                        .collect();
                    let mut tx = self.begin_write().await?;
                    let Some(agent_id) = live_agent(&mut tx, document_id).await? else {
                        return Ok(false);
                    };
                    if pages.is_empty() {
                        return Ok(true);
                    }
                    let chunks: Vec<&NewChunk> =
                        pages.iter().flat_map(|(_, chunks)| chunks.iter()).collect();
                    if !chunks.is_empty() {
                        hold_chunk_ids(&mut tx, &agent_id).await?;
                    }
                    let urls: Vec<&str> = pages.iter().map(|(p, _)| p.url.as_str()).collect();
                    delete_page_chunks(&mut tx, document_id, &urls).await?;
                    if !chunks.is_empty() {
                        insert_chunks(&mut tx, document_id, &agent_id, &chunks).await?;
                    }
                    upsert_pages(&mut tx, document_id, pages.iter().map(|(p, _)| p), now).await?;
                    tx.commit().await?;
                    Ok(true)
                }

                async fn document_pages(
                    &self,
                    document_id: &DocumentId,
                ) -> StoreResult<Vec<PageRecord>> {
                    let rows = sqlx::query(
                        "SELECT url, title, content_hash, fetch_url, etag, last_modified, links, bytes \
                         FROM document_pages WHERE document_id = $1 ORDER BY url",
                    )
                    .bind(document_id)
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows
                        .iter()
                        .map(|r| {
                            let links: String = r.try_get("links")?;
                            Ok(PageRecord {
                                url: r.try_get("url")?,
                                title: r.try_get("title")?,
                                content_hash: r.try_get("content_hash")?,
                                fetch_url: r.try_get("fetch_url")?,
                                etag: r.try_get("etag")?,
                                last_modified: r.try_get("last_modified")?,
                                // A row that does not decode only costs its links a full fetch.
                                links: serde_json::from_str(&links).unwrap_or_default(),
                                bytes: r.try_get::<i64, _>("bytes")?.max(0) as u64,
                            })
                        })
                        .collect::<Result<_, sqlx::Error>>()?)
                }

                async fn update_pages(
                    &self,
                    document_id: &DocumentId,
                    pages: &[PageRecord],
                    now: DateTime<Utc>,
                ) -> StoreResult<bool> {
                    let mut last: HashMap<&str, usize> = HashMap::new();
                    for (i, page) in pages.iter().enumerate() {
                        last.insert(page.url.as_str(), i);
                    }
                    let mut tx = self.begin_write().await?;
                    if live_agent(&mut tx, document_id).await?.is_none() {
                        return Ok(false);
                    }
                    if pages.is_empty() {
                        return Ok(true);
                    }
                    let pages = pages
                        .iter()
                        .enumerate()
                        .filter(|(i, p)| last.get(p.url.as_str()) == Some(i))
                        .map(|(_, p)| p);
                    upsert_pages(&mut tx, document_id, pages, now).await?;
                    tx.commit().await?;
                    Ok(true)
                }

                async fn set_refresh_schedule(
                    &self,
                    user_id: &UserId,
                    agent_id: &AgentId,
                    id: &DocumentId,
                    hours: Option<u32>,
                    next: Option<DateTime<Utc>>,
                    now: DateTime<Utc>,
                ) -> StoreResult<bool> {
                    let done = sqlx::query(
                        "UPDATE documents SET refresh_hours = $1, next_refresh_at = $2, updated_at = $3 \
                         WHERE user_id = $4 AND agent_id = $5 AND id = $6",
                    )
                    .bind(hours.map(i64::from))
                    .bind(next.map(ms))
                    .bind(ms(now))
                    .bind(user_id)
                    .bind(agent_id)
                    .bind(id)
                    .execute(&self.$writer)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn due_refreshes(
                    &self,
                    now: DateTime<Utc>,
                    limit: u32,
                ) -> StoreResult<Vec<DueRefresh>> {
                    let rows: Vec<(DocumentId, UserId, i64, i64)> = sqlx::query_as(
                        "SELECT id, user_id, next_refresh_at, refresh_hours FROM documents \
                         WHERE next_refresh_at <= $1 AND refresh_hours IS NOT NULL \
                         ORDER BY next_refresh_at, id LIMIT $2",
                    )
                    .bind(ms(now))
                    .bind(i64::from(limit))
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows
                        .into_iter()
                        .map(|(id, user_id, next, hours)| DueRefresh {
                            id,
                            user_id,
                            next_refresh_at: crate::store::from_millis(next),
                            refresh_hours: u32::try_from(hours.max(1)).unwrap_or(u32::MAX),
                        })
                        .collect())
                }

                async fn claim_refresh(
                    &self,
                    id: &DocumentId,
                    due: DateTime<Utc>,
                    next: DateTime<Utc>,
                ) -> StoreResult<bool> {
                    let done = sqlx::query(
                        "UPDATE documents SET next_refresh_at = $1 WHERE id = $2 AND next_refresh_at = $3",
                    )
                    .bind(ms(next))
                    .bind(id)
                    .bind(ms(due))
                    .execute(&self.$writer)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn retain_pages(
                    &self,
                    document_id: &DocumentId,
                    keep: &[String],
                ) -> StoreResult<()> {
                    let stored = self.document_pages(document_id).await?;
                    let keep: std::collections::HashSet<&str> =
                        keep.iter().map(String::as_str).collect();
                    let gone: Vec<&str> = stored
                        .iter()
                        .map(|p| p.url.as_str())
                        .filter(|url| !keep.contains(url))
                        .collect();
                    if gone.is_empty() {
                        return Ok(());
                    }
                    let mut tx = self.begin_write().await?;
                    delete_page_chunks(&mut tx, document_id, &gone).await?;
                    let sql = format!(
                        "DELETE FROM document_pages WHERE document_id = $1 AND url {}",
                        in_list("$2")
                    );
                    sqlx::query(&sql)
                        .bind(document_id)
                        .bind(list(&gone))
                        .execute(&mut *tx)
                        .await?;
                    tx.commit().await?;
                    Ok(())
                }

                async fn finish_document(
                    &self,
                    id: &DocumentId,
                    pages: Option<u32>,
                    bytes: u64,
                    now: DateTime<Utc>,
                ) -> StoreResult<()> {
                    mark_indexed(&self.$writer, id, pages, bytes, now).await
                }

                async fn chunk_generation(&self, agent_id: &AgentId) -> StoreResult<Option<i64>> {
                    Ok(sqlx::query_scalar(
                        "SELECT generation FROM chunk_generations WHERE agent_id = $1",
                    )
                    .bind(agent_id)
                    .fetch_optional(&self.$reader)
                    .await?)
                }

                async fn count_chunks_up_to(
                    &self,
                    agent_id: &AgentId,
                    max_id: ChunkId,
                ) -> StoreResult<u64> {
                    let count: i64 = sqlx::query_scalar(
                        "SELECT count(*) FROM chunks WHERE agent_id = $1 AND id <= $2",
                    )
                    .bind(agent_id)
                    .bind(max_id)
                    .fetch_one(&self.$reader)
                    .await?;
                    Ok(count.max(0) as u64)
                }

                async fn chunk_ids_up_to(
                    &self,
                    agent_id: &AgentId,
                    max_id: ChunkId,
                ) -> StoreResult<Vec<ChunkId>> {
                    Ok(sqlx::query_scalar(
                        "SELECT id FROM chunks WHERE agent_id = $1 AND id <= $2 ORDER BY id",
                    )
                    .bind(agent_id)
                    .bind(max_id)
                    .fetch_all(&self.$reader)
                    .await?)
                }

                async fn chunks_after(
                    &self,
                    agent_id: &AgentId,
                    after_id: ChunkId,
                    limit: u32,
                ) -> StoreResult<Vec<ChunkText>> {
                    let rows: Vec<(ChunkId, String, String, String)> = sqlx::query_as(
                        "SELECT id, title, heading_path, text FROM chunks \
                         WHERE agent_id = $1 AND id > $2 ORDER BY id LIMIT $3",
                    )
                    .bind(agent_id)
                    .bind(after_id)
                    .bind(i64::from(limit))
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows
                        .into_iter()
                        .map(|(chunk_id, title, heading_path, text)| ChunkText {
                            chunk_id,
                            title,
                            heading_path,
                            text,
                        })
                        .collect())
                }

                async fn put_embeddings(
                    &self,
                    model: &str,
                    vectors: &[(ChunkId, Vec<f32>)],
                ) -> StoreResult<()> {
                    // A chunk given twice gets its last vector (one upsert may not touch a row
                    // twice).
                    let mut last: HashMap<ChunkId, usize> = HashMap::new();
                    for (i, (chunk_id, _)) in vectors.iter().enumerate() {
                        last.insert(*chunk_id, i);
                    }
                    let vectors: Vec<&(ChunkId, Vec<f32>)> = vectors
                        .iter()
                        .enumerate()
                        .filter(|(i, (chunk_id, _))| last.get(chunk_id) == Some(i))
                        .map(|(_, v)| v)
                        .collect();
                    if vectors.is_empty() {
                        return Ok(());
                    }
                    upsert_embeddings(self, model, &vectors).await
                }

                async fn agent_embeddings(
                    &self,
                    agent_id: &AgentId,
                    model: &str,
                ) -> StoreResult<Vec<ChunkVector>> {
                    let rows = sqlx::query(
                        "SELECT chunk_id, vector FROM chunk_embeddings \
                         WHERE agent_id = $1 AND model = $2 AND dimensions > 0 ORDER BY chunk_id",
                    )
                    .bind(agent_id)
                    .bind(model)
                    .fetch_all(&self.$reader)
                    .await?;
                    let mut out = Vec::with_capacity(rows.len());
                    for r in &rows {
                        let bytes: Vec<u8> = r.try_get("vector")?;
                        // The table's CHECK keeps lengths whole; a row that still does not decode
                        // is left out rather than failing the chat.
                        if let Some(vector) = vector_from_bytes(&bytes) {
                            out.push(ChunkVector {
                                chunk_id: r.try_get("chunk_id")?,
                                vector,
                            });
                        }
                    }
                    Ok(out)
                }

                async fn embedding_generation(&self, agent_id: &AgentId) -> StoreResult<i64> {
                    let generation: Option<i64> = sqlx::query_scalar(
                        "SELECT generation FROM embedding_generations WHERE agent_id = $1",
                    )
                    .bind(agent_id)
                    .fetch_optional(&self.$reader)
                    .await?;
                    Ok(generation.unwrap_or(0))
                }

                async fn chunks_without_embedding(
                    &self,
                    model: &str,
                    document_id: Option<&DocumentId>,
                    limit: u32,
                ) -> StoreResult<Vec<ChunkText>> {
                    let rows = sqlx::query(
                        "SELECT c.id, c.title, c.heading_path, c.text FROM chunks c \
                         WHERE (CAST($1 AS TEXT) IS NULL OR c.document_id = $1) AND NOT EXISTS \
                         (SELECT 1 FROM chunk_embeddings e WHERE e.chunk_id = c.id AND e.model = $2) \
                         ORDER BY c.id LIMIT $3",
                    )
                    .bind(document_id)
                    .bind(model)
                    .bind(i64::from(limit))
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows
                        .iter()
                        .map(|r| {
                            Ok(ChunkText {
                                chunk_id: r.try_get("id")?,
                                title: r.try_get("title")?,
                                heading_path: r.try_get("heading_path")?,
                                text: r.try_get("text")?,
                            })
                        })
                        .collect::<Result<_, sqlx::Error>>()?)
                }

                async fn chunk_hits(
                    &self,
                    agent_id: &AgentId,
                    ids: &[ChunkId],
                ) -> StoreResult<Vec<ChunkHit>> {
                    if ids.is_empty() {
                        return Ok(Vec::new());
                    }
                    let ids: Vec<i64> = ids.iter().map(|id| id.get()).collect();
                    let sql = format!(
                        "SELECT c.id, c.document_id, c.title, c.page_url, c.heading_path, c.text, \
                         d.name AS document_name, CAST(0 AS DOUBLE PRECISION) AS score \
                         FROM chunks c JOIN documents d ON d.id = c.document_id \
                         WHERE c.agent_id = $1 AND c.id {}",
                        in_list("$2")
                    );
                    let rows = sqlx::query(&sql)
                        .bind(agent_id)
                        .bind(list(&ids))
                        .fetch_all(&self.$reader)
                        .await?;
                    Ok(rows.iter().map(hit).collect::<Result<_, sqlx::Error>>()?)
                }
            }
        }
    };
}
pub(crate) use document_store;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_as_little_endian_f32() {
        let v = vec![1.0f32, -0.5, 0.0, f32::MIN_POSITIVE, 3.25e7];
        let bytes = vector_to_bytes(&v);
        assert_eq!(bytes.len(), 4 * v.len());
        assert_eq!(&bytes[..4], &[0x00, 0x00, 0x80, 0x3f], "1.0 little-endian");
        assert_eq!(
            &bytes[4..8],
            &[0x00, 0x00, 0x00, 0xbf],
            "-0.5 little-endian"
        );
        assert_eq!(vector_from_bytes(&bytes), Some(v));
        assert_eq!(vector_from_bytes(&[]), Some(Vec::new()));
        assert_eq!(vector_from_bytes(&[0, 0, 0]), None, "not whole f32s");
    }

    #[test]
    fn document_states_and_sources_are_the_stored_and_wire_text() {
        // The CHECK lists of `documents.status` and `documents.kind`
        // (migrations/sqlite/0003_knowledge.sql), and docs/api.md § Knowledge document.
        let states: Vec<&str> = DocumentStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(states, ["pending", "processing", "indexed", "failed"]);
        for s in DocumentStatus::ALL {
            let json = serde_json::to_value(s).unwrap();
            assert_eq!(json, s.as_str());
            assert_eq!(serde_json::from_value::<DocumentStatus>(json).unwrap(), s);
            assert_eq!(s.to_string(), s.as_str());
        }
        let sources: Vec<&str> = DocumentSource::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(sources, ["file", "url"]);
        for s in DocumentSource::ALL {
            let json = serde_json::to_value(s).unwrap();
            assert_eq!(json, s.as_str());
            assert_eq!(serde_json::from_value::<DocumentSource>(json).unwrap(), s);
            assert_eq!(s.to_string(), s.as_str());
        }
        assert_eq!(DocumentSource::File.job_kind(), JobKind::Ingest);
        assert_eq!(DocumentSource::Url.job_kind(), JobKind::Crawl);
    }
}
