//! The knowledge-base part of the persistence boundary: documents, crawled pages, chunks
//! with their BM25 index, and durable jobs. Every backend implements [`KnowledgeStore`]
//! (the SQLite backend in `sqlite_knowledge.rs`); [`super::Store`] requires it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;

/// Document status values (contract § Status values).
pub mod status {
    /// Stored, waiting for its job.
    pub const PENDING: &str = "pending";
    /// Its job is running.
    pub const PROCESSING: &str = "processing";
    /// Searchable.
    pub const INDEXED: &str = "indexed";
    /// Indexing failed; `error` says why.
    pub const FAILED: &str = "failed";
}

/// Job status values (api.md § Knowledge base: queued, running, succeeded, failed).
pub mod job_status {
    /// Waiting for a worker.
    pub const QUEUED: &str = "queued";
    /// A worker holds its lease.
    pub const RUNNING: &str = "running";
    /// Finished.
    pub const SUCCEEDED: &str = "succeeded";
    /// Gave up; `error` says why.
    pub const FAILED: &str = "failed";
}

/// A knowledge document: an uploaded file or a crawled site.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentRecord {
    pub id: String,
    pub agent_id: String,
    pub user_id: String,
    /// `file` or `url`.
    pub kind: String,
    /// File name of an upload, the start URL of a crawl.
    pub name: String,
    pub url: Option<String>,
    /// `pdf`, `docx`, `markdown` or `text` for uploads.
    pub format: Option<String>,
    /// The crawl options as JSON (url documents).
    pub crawl_config: Option<String>,
    /// One of [`status`].
    pub status: String,
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

/// A background job (ingestion of an upload or a crawl).
#[derive(Debug, Clone, PartialEq)]
pub struct JobRecord {
    pub id: String,
    /// `ingest` or `crawl`.
    pub kind: String,
    pub document_id: String,
    pub user_id: String,
    /// One of [`job_status`].
    pub status: String,
    pub progress_done: u32,
    pub progress_total: u32,
    pub error: Option<String>,
    /// Times a worker has started it (a restart after a crash counts).
    pub attempts: u32,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// A chunk to store.
#[derive(Debug, Clone, PartialEq)]
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
    pub chunk_id: i64,
    pub document_id: String,
    /// The document's name (uploads) or the page title (crawls).
    pub title: String,
    /// The page URL (crawls).
    pub url: Option<String>,
    /// The document's file name or start URL (what an evaluation's `expect` names).
    pub document_name: String,
    pub heading_path: String,
    pub text: String,
    /// BM25 relevance, larger is better (FTS5's `bm25()` negated).
    pub score: f64,
}

/// Persistence of the knowledge base. Tenant-scoped methods take the user id; another
/// user's rows are "not found".
#[async_trait]
pub trait KnowledgeStore: Send + Sync + 'static {
    /// Stores a new document and its first job in one transaction.
    async fn create_document(&self, doc: &DocumentRecord, job: &JobRecord) -> StoreResult<()>;
    /// The agent's documents, oldest first.
    async fn list_documents(
        &self,
        user_id: &str,
        agent_id: &str,
    ) -> StoreResult<Vec<DocumentRecord>>;
    /// One of the agent's documents.
    async fn document(
        &self,
        user_id: &str,
        agent_id: &str,
        id: &str,
    ) -> StoreResult<Option<DocumentRecord>>;
    /// A document by id alone (workers).
    async fn document_by_id(&self, id: &str) -> StoreResult<Option<DocumentRecord>>;
    /// Deletes a document with its chunks, pages and jobs; `false` when it was not there.
    async fn delete_document(&self, user_id: &str, agent_id: &str, id: &str) -> StoreResult<bool>;
    /// Sets a document's status (and error, cleared when `None`).
    async fn set_document_status(
        &self,
        id: &str,
        status: &str,
        error: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Replaces every chunk of an uploaded document at once; `false` when the document no
    /// longer exists (deleted while it was being indexed).
    async fn replace_chunks(&self, document_id: &str, chunks: &[NewChunk]) -> StoreResult<bool>;
    /// Replaces the chunks of one crawled page and records its hash, in one transaction;
    /// `false` when the document no longer exists.
    async fn replace_page(
        &self,
        document_id: &str,
        page: &PageRecord,
        chunks: &[NewChunk],
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// The pages a crawled document had at its last crawl.
    async fn document_pages(&self, document_id: &str) -> StoreResult<Vec<PageRecord>>;
    /// Removes the pages (and their chunks) of a crawled document that are not in `keep`.
    async fn retain_pages(&self, document_id: &str, keep: &[String]) -> StoreResult<()>;
    /// Marks a document indexed: recounts its chunks and stores `pages`, `bytes` and the
    /// time.
    async fn finish_document(
        &self,
        id: &str,
        pages: Option<u32>,
        bytes: u64,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;

    /// Queues a job (a refresh) unless one for the document is already queued or running;
    /// returns the job that will do the work.
    async fn enqueue_job(&self, job: &JobRecord) -> StoreResult<JobRecord>;
    /// Takes the oldest queued job, or a running job whose lease ran out (its worker died),
    /// marks it running with a lease until `lease_until`, and counts the attempt.
    async fn claim_job(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<JobRecord>>;
    /// Records progress and extends the lease.
    async fn job_progress(
        &self,
        id: &str,
        done: u32,
        total: u32,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Ends a job as succeeded or failed.
    async fn finish_job(
        &self,
        id: &str,
        status: &str,
        error: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// A job of the user.
    async fn job(&self, user_id: &str, id: &str) -> StoreResult<Option<JobRecord>>;

    /// BM25 search over the agent's chunks: `query` is an FTS5 query expression; the best
    /// `limit` hits, best first.
    async fn search_chunks(
        &self,
        agent_id: &str,
        query: &str,
        limit: u32,
    ) -> StoreResult<Vec<ChunkHit>>;
}
