//! The document part of the persistence boundary: knowledge documents, crawled pages,
//! chunks with what their BM25 index is kept in step by, and chunk embeddings. Every
//! backend implements [`DocumentStore`] (SQLite: `sqlite/documents.rs`); [`super::Store`]
//! requires it. The jobs that fill documents are [`super::jobs::JobQueue`]'s.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{
    jobs::{JobKind, JobRecord},
    StoreResult,
};
use crate::ids::{AgentId, ChunkId, DocumentId, UserId};

/// A knowledge document's indexing state (docs/api.md § States and transitions): `pending`
/// → `processing` → `indexed` or `failed`; a refresh puts an `indexed` or `failed`
/// document back to `pending`. Stored as its text ([`DocumentStatus::as_str`]) in
/// `documents.status` (`migrations/sqlite/0003_knowledge.sql`), and answered as that text.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "TEXT", rename_all = "lowercase")]
pub enum DocumentStatus {
    /// Stored, its job queued: set when the document is added and by a refresh
    /// (`knowledge::service`).
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

/// Where a knowledge document comes from (docs/api.md § Knowledge document, `kind`).
/// Stored as its text in `documents.kind` (`migrations/sqlite/0003_knowledge.sql`), and
/// answered as that text. Set once, when the document is added.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "TEXT", rename_all = "lowercase")]
pub enum DocumentSource {
    /// An uploaded file (docs/api.md § Upload document), indexed by an `ingest` job.
    File,
    /// A web site crawled from a start URL (docs/api.md § Add URL), indexed by a `crawl`
    /// job.
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

    /// The kind of job that indexes a document from this source: `ingest` for a file,
    /// `crawl` for a site (docs/api.md § Documents and jobs).
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

/// A chunk to store. Serialises (serde, camelCase) because extraction child processes
/// produce it (`knowledge::sandbox`).
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

/// The stored form of an embedding: each component as a little-endian IEEE 754 `f32`
/// (4 bytes per dimension, `migrations/sqlite/0004_embeddings.sql`).
pub fn vector_to_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The embedding stored as `bytes` (see [`vector_to_bytes`]); `None` when the length is
/// not a multiple of 4.
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

/// Persistence of knowledge documents and their chunks. Tenant-scoped methods take the
/// user id; another user's rows are "not found".
///
/// # Chunk ids and generations
///
/// BM25 indexes are kept in memory outside the store (`knowledge::search::index_cache`),
/// in step through [`DocumentStore::chunk_generation`] and the chunk ids. Every backend
/// keeps these rules, written by every method that writes or deletes chunks
/// ([`DocumentStore::replace_chunks`], [`DocumentStore::replace_pages`],
/// [`DocumentStore::retain_pages`], [`DocumentStore::delete_document`], and
/// `AgentStore::delete_agent`):
///
/// 1. **Generation bumps.** The agent's chunk generation changes in the same transaction
///    as any chunk of the agent written or deleted, so a reader that sees the new
///    generation sees the change. It is created by the agent's first chunk write and
///    removed with the agent. Proven by
///    `conformance::the_chunk_generation_changes_with_every_chunk_write_and_delete`.
/// 2. **Ids only grow.** A chunk id is never given twice, even after the chunk holding
///    the largest id is deleted. Proven by `conformance::chunk_ids_only_grow`.
/// 3. **Ids become visible in increasing order per agent.** Once a reader sees a chunk of
///    the agent with id `n`, it sees every chunk of the agent with a smaller id that was
///    not deleted: no write still in flight holds a smaller id of the agent. SQLite keeps
///    it with its single writer; a server backend serialises each agent's chunk writers
///    (the agent's generation row, locked before the ids are taken, until commit). An
///    index reads added chunks as those above the largest id it has seen, so without
///    this rule it would miss chunks for good. Proven by
///    `conformance::two_interleaved_chunk_writers_leave_nothing_out_of_the_index`.
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
    /// Replaces every chunk of an uploaded document at once, in one transaction that keeps
    /// the chunk rules above; `false` when the document no longer exists (deleted while it
    /// was being indexed), and nothing is written then.
    async fn replace_chunks(
        &self,
        document_id: &DocumentId,
        chunks: &[NewChunk],
    ) -> StoreResult<bool>;
    /// Replaces the chunks of crawled pages (each page's chunks with it) and records their
    /// hashes, all in one transaction that keeps the chunk rules above; `false` when the
    /// document no longer exists (nothing is written then). Proven by
    /// `conformance::crawled_pages_written_together_replace_each_pages_chunks` and
    /// `conformance::crawled_pages_of_a_deleted_document_are_not_written`.
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
    /// Marks a document indexed: recounts its chunks and stores `pages`, `bytes` and the
    /// time.
    async fn finish_document(
        &self,
        id: &DocumentId,
        pages: Option<u32>,
        bytes: u64,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;

    /// The agent's chunk generation: a number that changes whenever one of the agent's
    /// chunks is written or deleted (with its page, document or agent), in the same
    /// transaction as the change. `None` when no chunk of the agent was ever written, or
    /// the agent was deleted. BM25 indexes in memory are checked against it
    /// (`knowledge::search::index_cache`).
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

    /// Stores the embeddings made by `model` as `(chunk id, vector)` pairs, replacing a
    /// chunk's earlier one and changing the agent's [`DocumentStore::embedding_generation`]
    /// in the same transaction; pairs of chunks that no longer exist are skipped. An empty
    /// vector records that the endpoint refused to embed the chunk, so it is not asked
    /// again for this model.
    async fn put_embeddings(&self, model: &str, vectors: &[(ChunkId, Vec<f32>)])
        -> StoreResult<()>;
    /// The agent's embeddings made by `model` (refusals left out), by chunk id.
    async fn agent_embeddings(
        &self,
        agent_id: &AgentId,
        model: &str,
    ) -> StoreResult<Vec<ChunkVector>>;
    /// A number that changes whenever any of the agent's embeddings is written or deleted
    /// (with its chunk, document or agent); 0 when it never had any. In-memory copies of
    /// the vectors are checked against it.
    async fn embedding_generation(&self, agent_id: &AgentId) -> StoreResult<i64>;
    /// Chunks without an embedding of `model` (of `document_id`, or of any document),
    /// oldest first, at most `limit`.
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
