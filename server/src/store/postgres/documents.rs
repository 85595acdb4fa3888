//! [`DocumentStore`] on PostgreSQL: documents, pages and chunks with the generations and ids
//! that BM25 indexes are kept in step by, and chunk embeddings
//! (`migrations/postgres/0001_baseline.sql`).
//!
//! Transactions run side by side at READ COMMITTED, so the chunk rules of
//! [`DocumentStore`] are kept by locks, always taken in the same order (the document, then
//! the agent's generation row), so that writers never deadlock:
//!
//! 1. a chunk writer reads its document `FOR SHARE`: a delete of the document waits for
//!    the writer's commit, and a writer that comes after the delete finds no document and
//!    writes nothing;
//! 2. before it draws ids from the sequence `chunk_ids`, it locks its agent's
//!    `chunk_generations` row (an upsert that creates the row if needed), which it holds
//!    until commit, so the agent's writers run one after the other and each draws its ids
//!    after the previous one committed: ids become visible in increasing order per agent;
//! 3. the statement triggers of the baseline bump the generation in the writer's own
//!    transaction.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{
    begin,
    jobs::insert_job,
    rows::{document, hit, ms, DOCUMENT_COLUMNS},
    PgStore,
};
use crate::ids::{AgentId, ChunkId, DocumentId, UserId};
use crate::store::{
    documents::{
        vector_from_bytes, vector_to_bytes, ChunkHit, ChunkText, ChunkVector, DocumentRecord,
        DocumentStatus, DocumentStore, NewChunk, PageRecord,
    },
    jobs::JobRecord,
    StoreResult,
};

/// A transaction on the PostgreSQL store.
type PgTx<'c> = sqlx::Transaction<'c, sqlx::Postgres>;

/// Inserts `doc` inside `tx`.
pub(super) async fn insert_document(
    tx: &mut PgTx<'_>,
    d: &DocumentRecord,
) -> Result<(), sqlx::Error> {
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
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The agent id of a live document, read `FOR SHARE` inside `tx` (rule 1 of the module):
/// `None` when the document is gone, also when a delete committed while this waited.
async fn live_agent(
    tx: &mut PgTx<'_>,
    document_id: &DocumentId,
) -> Result<Option<AgentId>, sqlx::Error> {
    sqlx::query_scalar("SELECT agent_id FROM documents WHERE id = $1 FOR SHARE")
        .bind(document_id)
        .fetch_optional(&mut **tx)
        .await
}

/// Locks the agent's `chunk_generations` row until `tx` ends, creating it (at 0; the
/// insert trigger then bumps it) for the agent's first chunks: rule 2 of the module. Must
/// come before the transaction draws chunk ids.
async fn lock_generation(tx: &mut PgTx<'_>, agent_id: &AgentId) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO chunk_generations AS g (agent_id, generation) VALUES ($1, 0) \
         ON CONFLICT (agent_id) DO UPDATE SET generation = g.generation",
    )
    .bind(agent_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Inserts `chunks` of the document (of `agent_id`) in one statement, their ids drawn from
/// `chunk_ids` in the order given. The caller holds the agent's generation row
/// ([`lock_generation`]).
async fn insert_chunks<'a>(
    tx: &mut PgTx<'_>,
    document_id: &DocumentId,
    agent_id: &AgentId,
    chunks: impl Iterator<Item = &'a NewChunk>,
) -> Result<(), sqlx::Error> {
    let mut page_urls: Vec<Option<&str>> = Vec::new();
    let mut titles: Vec<&str> = Vec::new();
    let mut heading_paths: Vec<&str> = Vec::new();
    let mut positions: Vec<i64> = Vec::new();
    let mut pages: Vec<Option<i64>> = Vec::new();
    let mut tokens: Vec<i64> = Vec::new();
    let mut texts: Vec<&str> = Vec::new();
    for c in chunks {
        page_urls.push(c.page_url.as_deref());
        titles.push(&c.title);
        heading_paths.push(&c.heading_path);
        positions.push(i64::from(c.position));
        pages.push(c.page.map(i64::from));
        tokens.push(i64::from(c.tokens));
        texts.push(&c.text);
    }
    if texts.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO chunks (id, document_id, agent_id, page_url, title, heading_path, \
         position, page, tokens, text) \
         SELECT nextval('chunk_ids'), $1, $2, c.page_url, c.title, c.heading_path, \
         c.position, c.page, c.tokens, c.text \
         FROM UNNEST($3::text[], $4::text[], $5::text[], $6::int8[], $7::int8[], $8::int8[], \
         $9::text[]) AS c(page_url, title, heading_path, position, page, tokens, text)",
    )
    .bind(document_id)
    .bind(agent_id)
    .bind(page_urls)
    .bind(titles)
    .bind(heading_paths)
    .bind(positions)
    .bind(pages)
    .bind(tokens)
    .bind(texts)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Marks a document indexed: error cleared, chunks recounted, `pages`, `bytes` and the time.
pub(super) async fn mark_indexed<'e>(
    executor: impl sqlx::PgExecutor<'e>,
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

#[async_trait]
impl DocumentStore for PgStore {
    async fn create_document(&self, d: &DocumentRecord, j: &JobRecord) -> StoreResult<()> {
        let mut tx = begin(&self.pool).await?;
        insert_document(&mut tx, d).await?;
        insert_job(&mut tx, j).await?;
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
        .fetch_all(&self.pool)
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
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(document).transpose()?)
    }

    async fn document_by_id(&self, id: &DocumentId) -> StoreResult<Option<DocumentRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {DOCUMENT_COLUMNS} FROM documents WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
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
        let done =
            sqlx::query("DELETE FROM documents WHERE user_id = $1 AND agent_id = $2 AND id = $3")
                .bind(user_id)
                .bind(agent_id)
                .bind(id)
                .execute(&self.pool)
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
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn replace_chunks(
        &self,
        document_id: &DocumentId,
        chunks: &[NewChunk],
    ) -> StoreResult<bool> {
        let mut tx = begin(&self.pool).await?;
        let Some(agent_id) = live_agent(&mut tx, document_id).await? else {
            return Ok(false);
        };
        if !chunks.is_empty() {
            lock_generation(&mut tx, &agent_id).await?;
        }
        sqlx::query("DELETE FROM chunks WHERE document_id = $1")
            .bind(document_id)
            .execute(&mut *tx)
            .await?;
        insert_chunks(&mut tx, document_id, &agent_id, chunks.iter()).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn replace_pages(
        &self,
        document_id: &DocumentId,
        pages: &[(PageRecord, Vec<NewChunk>)],
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        // A page given twice is written as its last copy (as writing the pages one after
        // the other would leave it).
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
        let mut tx = begin(&self.pool).await?;
        let Some(agent_id) = live_agent(&mut tx, document_id).await? else {
            return Ok(false);
        };
        if pages.is_empty() {
            return Ok(true);
        }
        if pages.iter().any(|(_, chunks)| !chunks.is_empty()) {
            lock_generation(&mut tx, &agent_id).await?;
        }
        let urls: Vec<&str> = pages.iter().map(|(p, _)| p.url.as_str()).collect();
        sqlx::query("DELETE FROM chunks WHERE document_id = $1 AND page_url = ANY($2)")
            .bind(document_id)
            .bind(&urls)
            .execute(&mut *tx)
            .await?;
        insert_chunks(
            &mut tx,
            document_id,
            &agent_id,
            pages.iter().flat_map(|(_, chunks)| chunks.iter()),
        )
        .await?;
        let titles: Vec<&str> = pages.iter().map(|(p, _)| p.title.as_str()).collect();
        let hashes: Vec<&str> = pages.iter().map(|(p, _)| p.content_hash.as_str()).collect();
        sqlx::query(
            "INSERT INTO document_pages (document_id, url, title, content_hash, fetched_at) \
             SELECT $1, p.url, p.title, p.content_hash, $5 \
             FROM UNNEST($2::text[], $3::text[], $4::text[]) AS p(url, title, content_hash) \
             ON CONFLICT (document_id, url) DO UPDATE SET \
             title = excluded.title, content_hash = excluded.content_hash, \
             fetched_at = excluded.fetched_at",
        )
        .bind(document_id)
        .bind(&urls)
        .bind(&titles)
        .bind(&hashes)
        .bind(ms(now))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn document_pages(&self, document_id: &DocumentId) -> StoreResult<Vec<PageRecord>> {
        let rows = sqlx::query(
            "SELECT url, title, content_hash FROM document_pages WHERE document_id = $1 ORDER BY url",
        )
        .bind(document_id)
        .fetch_all(&self.pool)
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

    async fn retain_pages(&self, document_id: &DocumentId, keep: &[String]) -> StoreResult<()> {
        let stored = self.document_pages(document_id).await?;
        let keep: std::collections::HashSet<&str> = keep.iter().map(String::as_str).collect();
        let gone: Vec<&str> = stored
            .iter()
            .map(|p| p.url.as_str())
            .filter(|url| !keep.contains(url))
            .collect();
        if gone.is_empty() {
            return Ok(());
        }
        let mut tx = begin(&self.pool).await?;
        sqlx::query("DELETE FROM chunks WHERE document_id = $1 AND page_url = ANY($2)")
            .bind(document_id)
            .bind(&gone)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM document_pages WHERE document_id = $1 AND url = ANY($2)")
            .bind(document_id)
            .bind(&gone)
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
        mark_indexed(&self.pool, id, pages, bytes, now).await
    }

    async fn chunk_generation(&self, agent_id: &AgentId) -> StoreResult<Option<i64>> {
        Ok(
            sqlx::query_scalar("SELECT generation FROM chunk_generations WHERE agent_id = $1")
                .bind(agent_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn count_chunks_up_to(&self, agent_id: &AgentId, max_id: ChunkId) -> StoreResult<u64> {
        let count: i64 =
            sqlx::query_scalar("SELECT count(*) FROM chunks WHERE agent_id = $1 AND id <= $2")
                .bind(agent_id)
                .bind(max_id)
                .fetch_one(&self.pool)
                .await?;
        Ok(count.max(0) as u64)
    }

    async fn chunk_ids_up_to(
        &self,
        agent_id: &AgentId,
        max_id: ChunkId,
    ) -> StoreResult<Vec<ChunkId>> {
        Ok(
            sqlx::query_scalar(
                "SELECT id FROM chunks WHERE agent_id = $1 AND id <= $2 ORDER BY id",
            )
            .bind(agent_id)
            .bind(max_id)
            .fetch_all(&self.pool)
            .await?,
        )
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
        .fetch_all(&self.pool)
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
        // A chunk given twice gets its last vector (one upsert may not touch a row twice).
        let mut last: HashMap<ChunkId, usize> = HashMap::new();
        for (i, (chunk_id, _)) in vectors.iter().enumerate() {
            last.insert(*chunk_id, i);
        }
        let mut ids: Vec<i64> = Vec::with_capacity(last.len());
        let mut dimensions: Vec<i64> = Vec::with_capacity(last.len());
        let mut bytes: Vec<Vec<u8>> = Vec::with_capacity(last.len());
        for (i, (chunk_id, vector)) in vectors.iter().enumerate() {
            if last.get(chunk_id) == Some(&i) {
                ids.push(chunk_id.get());
                dimensions.push(vector.len() as i64);
                bytes.push(vector_to_bytes(vector));
            }
        }
        if ids.is_empty() {
            return Ok(());
        }
        // Through the chunks, read `FOR KEY SHARE`: a chunk deleted meanwhile (also by a
        // delete that commits while this waits) is skipped, not a foreign-key error.
        sqlx::query(
            "INSERT INTO chunk_embeddings (chunk_id, agent_id, model, dimensions, vector) \
             SELECT c.id, c.agent_id, $1, v.dimensions, v.vector \
             FROM UNNEST($2::int8[], $3::int8[], $4::bytea[]) AS v(chunk_id, dimensions, vector) \
             JOIN chunks c ON c.id = v.chunk_id \
             ORDER BY c.id \
             FOR KEY SHARE OF c \
             ON CONFLICT (chunk_id) DO UPDATE SET model = excluded.model, \
             dimensions = excluded.dimensions, vector = excluded.vector",
        )
        .bind(model)
        .bind(&ids)
        .bind(&dimensions)
        .bind(&bytes)
        .execute(&self.pool)
        .await?;
        Ok(())
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
        .fetch_all(&self.pool)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let bytes: Vec<u8> = r.try_get("vector")?;
            // The table's CHECK keeps lengths whole; a row that still does not decode is
            // left out rather than failing the chat.
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
        let generation: Option<i64> =
            sqlx::query_scalar("SELECT generation FROM embedding_generations WHERE agent_id = $1")
                .bind(agent_id)
                .fetch_optional(&self.pool)
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
             WHERE ($1::text IS NULL OR c.document_id = $1) AND NOT EXISTS \
             (SELECT 1 FROM chunk_embeddings e WHERE e.chunk_id = c.id AND e.model = $2) \
             ORDER BY c.id LIMIT $3",
        )
        .bind(document_id)
        .bind(model)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
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

    async fn chunk_hits(&self, agent_id: &AgentId, ids: &[ChunkId]) -> StoreResult<Vec<ChunkHit>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = ids.iter().map(|id| id.get()).collect();
        let rows = sqlx::query(
            "SELECT c.id, c.document_id, c.title, c.page_url, c.heading_path, c.text, \
             d.name AS document_name, 0.0::float8 AS score \
             FROM chunks c JOIN documents d ON d.id = c.document_id \
             WHERE c.agent_id = $1 AND c.id = ANY($2)",
        )
        .bind(agent_id)
        .bind(&ids)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(hit).collect::<Result<_, sqlx::Error>>()?)
    }
}
