//! Knowledge documents, crawled pages, chunks and embeddings ([`DocumentStore`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{
    jobs::{JobKind, JobRecord},
    StoreResult,
};
use crate::ids::{AgentId, ChunkId, DocumentId, UserId};

/// A knowledge document's indexing state (docs/api.md § States and transitions): `pending`
/// → `processing` → `indexed` or `failed`; a refresh puts it back to `pending`. Stored and
/// answered as its text ([`DocumentStatus::as_str`]).
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
    /// Every state, in the order of docs/api.md § States and transitions.
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

/// Where a knowledge document comes from (docs/api.md § Knowledge document, `kind`); stored
/// and answered as its text, set once when the document is added.
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
    /// Both sources.
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
    /// An upload or a crawled site.
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
        }
    }

    /// A new uploaded file (`kind` `file`), `pending`: `format` is `pdf`, `docx`,
    /// `markdown` or `text`, `bytes` the upload's size.
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

    /// A new web site to crawl from `url` (`kind` `url`, named by its URL), `pending`;
    /// `crawl_config` is the crawl options as JSON.
    pub fn pending_url(
        id: DocumentId,
        agent_id: &AgentId,
        user_id: &UserId,
        url: &str,
        crawl_config: Option<String>,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            url: Some(url.to_string()),
            crawl_config,
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
#[derive(Debug, Clone, PartialEq)]
pub struct PageRecord {
    pub url: String,
    pub title: String,
    /// SHA-256 (hex) of the page's extracted text.
    pub content_hash: String,
}

/// A chunk found by a search.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkHit {
    pub chunk_id: ChunkId,
    pub document_id: DocumentId,
    /// The document's name (uploads) or the page title (crawls).
    pub title: String,
    /// The page URL (crawls).
    pub url: Option<String>,
    /// The document's file name or start URL (what an evaluation's `expect` names).
    pub document_name: String,
    pub heading_path: String,
    pub text: String,
    /// Relevance, larger is better: 0 from [`DocumentStore::chunk_hits`]; BM25 from
    /// `knowledge::search::ChunkSearch`, and retrieval may replace it with a fused score
    /// (`knowledge::search::retrieve`).
    pub score: f64,
}

/// The text of a chunk: what is embedded, and what a BM25 index analyses.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkText {
    pub chunk_id: ChunkId,
    /// Title of the document or page.
    pub title: String,
    /// Enclosing headings joined with ` > `.
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

/// Persistence of knowledge documents and their chunks; another user's rows are "not found".
///
/// In-memory BM25 indexes (`knowledge::search::index_cache`) stay in step through the chunk
/// ids and [`DocumentStore::chunk_generation`], so every method that writes or deletes
/// chunks keeps three rules (each proven by a `conformance` test):
/// 1. the agent's generation changes in the same transaction as the chunk write or delete;
/// 2. a chunk id is never given twice, even after the largest one is deleted;
/// 3. per agent, ids become visible in increasing order (SQLite: its single writer; a
///    server backend locks the agent's generation row before taking ids), or an index
///    reading "ids above the largest seen" would miss chunks for good.
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
    /// Deletes a document with its chunks, pages, jobs and embeddings, bumping the agent's
    /// chunk generation (see the rules above); `false` when it was not there.
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
    /// Replaces every chunk of an uploaded document in one transaction keeping the chunk
    /// rules; `false` (nothing written) when the document no longer exists.
    async fn replace_chunks(
        &self,
        document_id: &DocumentId,
        chunks: &[NewChunk],
    ) -> StoreResult<bool>;
    /// Replaces the chunks of crawled pages and records their hashes, in one transaction
    /// keeping the chunk rules; `false` (nothing written) when the document no longer exists.
    async fn replace_pages(
        &self,
        document_id: &DocumentId,
        pages: &[(PageRecord, Vec<NewChunk>)],
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// The pages a crawled document had at its last crawl.
    async fn document_pages(&self, document_id: &DocumentId) -> StoreResult<Vec<PageRecord>>;
    /// Removes the pages (and their chunks) of a crawled document that are not in `keep`,
    /// in one transaction that keeps the chunk rules above.
    async fn retain_pages(&self, document_id: &DocumentId, keep: &[String]) -> StoreResult<()>;
    /// Marks a document indexed: recounts its chunks, stores `pages`, `bytes` and the time.
    async fn finish_document(
        &self,
        id: &DocumentId,
        pages: Option<u32>,
        bytes: u64,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;

    /// The agent's chunk generation, changed in the same transaction as any write or delete
    /// of its chunks; `None` when no chunk was ever written or the agent is gone.
    async fn chunk_generation(&self, agent_id: &AgentId) -> StoreResult<Option<i64>>;
    /// How many of the agent's chunks have an id of at most `max_id` (an index counts the
    /// chunks it knows, to tell whether any was deleted).
    async fn count_chunks_up_to(&self, agent_id: &AgentId, max_id: ChunkId) -> StoreResult<u64>;
    /// The ids of the agent's chunks of at most `max_id`, ascending.
    async fn chunk_ids_up_to(
        &self,
        agent_id: &AgentId,
        max_id: ChunkId,
    ) -> StoreResult<Vec<ChunkId>>;
    /// The agent's chunks with an id above `after_id`, ascending by id, at most `limit`:
    /// what was added since an index saw `after_id`, complete by rule 3 above.
    async fn chunks_after(
        &self,
        agent_id: &AgentId,
        after_id: ChunkId,
        limit: u32,
    ) -> StoreResult<Vec<ChunkText>>;

    /// Stores `model`'s embeddings as `(chunk id, vector)` pairs, replacing earlier ones and
    /// changing [`DocumentStore::embedding_generation`] in the same transaction; pairs of
    /// missing chunks are skipped. An empty vector records a refusal, not asked again.
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
    /// The agent's chunks among `ids`, as hits scored 0, in no particular order; ids of
    /// deleted chunks or of another agent's are left out.
    async fn chunk_hits(&self, agent_id: &AgentId, ids: &[ChunkId]) -> StoreResult<Vec<ChunkHit>>;
}

/// Defines, in a private module `shared` of the invoking backend file, the
/// [`DocumentStore`] implementation of `$store` (`$writer` pool writes, `$reader` reads),
/// plus `insert_document` and `mark_indexed`. The invoking file supplies what differs:
/// `live_agent`, `hold_chunk_ids` (keeps chunk rule 3), `insert_chunks`, `delete_pages`,
/// and `own_replace_pages` / `own_put_embeddings` / `own_chunk_hits` with the trait
/// methods' signatures; its `rows` module gives the row mappers, `jobs` gives `insert_job`.
macro_rules! document_store {
    ($store:ident, $db:ty, $writer:ident, $reader:ident) => {
        mod shared {
            use chrono::{DateTime, Utc};
            use sqlx::Row;

            use super::super::{
                jobs::insert_job,
                rows::{document, ms, DOCUMENT_COLUMNS},
                $store,
            };
            use super::{delete_pages, hold_chunk_ids, insert_chunks, live_agent};
            use crate::ids::{AgentId, ChunkId, DocumentId, UserId};
            use crate::store::{
                documents::{
                    vector_from_bytes, ChunkHit, ChunkText, ChunkVector, DocumentRecord,
                    DocumentStatus, DocumentStore, NewChunk, PageRecord,
                },
                jobs::JobRecord,
                StoreResult,
            };

            /// Inserts the document `d` on `conn`.
            pub(crate) async fn insert_document(
                conn: &mut <$db as sqlx::Database>::Connection,
                d: &DocumentRecord,
            ) -> StoreResult<()> {
                sqlx::query(&format!(
                    "INSERT INTO documents ({DOCUMENT_COLUMNS}) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)"
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
                .execute(conn)
                .await?;
                Ok(())
            }

            /// Marks a document indexed: error cleared, chunks recounted, `pages`, `bytes`
            /// and the time.
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
                    insert_chunks(&mut tx, document_id, &agent_id, chunks).await?;
                    tx.commit().await?;
                    Ok(true)
                }

                async fn replace_pages(
                    &self,
                    document_id: &DocumentId,
                    pages: &[(PageRecord, Vec<NewChunk>)],
                    now: DateTime<Utc>,
                ) -> StoreResult<bool> {
                    self.own_replace_pages(document_id, pages, now).await
                }

                async fn document_pages(
                    &self,
                    document_id: &DocumentId,
                ) -> StoreResult<Vec<PageRecord>> {
                    let rows = sqlx::query(
                        "SELECT url, title, content_hash FROM document_pages WHERE document_id = $1 ORDER BY url",
                    )
                    .bind(document_id)
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows
                        .iter()
                        .map(|r| {
                            Ok(PageRecord {
                                url: r.try_get("url")?,
                                title: r.try_get("title")?,
                                content_hash: r.try_get("content_hash")?,
                            })
                        })
                        .collect::<Result<_, sqlx::Error>>()?)
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
                    delete_pages(&mut tx, document_id, &gone).await?;
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
                    self.own_put_embeddings(model, vectors).await
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
                    self.own_chunk_hits(agent_id, ids).await
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
