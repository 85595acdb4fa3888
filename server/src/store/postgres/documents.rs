//! [`DocumentStore`] on PostgreSQL: documents, pages and chunks with the generations and ids
//! that BM25 indexes are kept in step by, and chunk embeddings
//! (`migrations/postgres/0003_knowledge.sql`, `0004_embeddings.sql`, `0011_bm25.sql`).
//!
//! Write transactions start with `BEGIN IMMEDIATE`: they take the write lock up front and
//! wait for it (busy timeout), instead of failing with `SQLITE_BUSY` when two workers
//! upgrade read transactions at the same time.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{
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

async fn insert_chunks(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    document_id: &DocumentId,
    agent_id: &AgentId,
    chunks: &[NewChunk],
) -> Result<(), sqlx::Error> {
    if chunks.is_empty() {
        return Ok(());
    }
    // Ids from `chunk_id_seq`, so they only grow (migration 0011); the `max` keeps them
    // above any id however it was written.
    let count = chunks.len() as i64;
    let first: i64 = sqlx::query_scalar(
        "UPDATE chunk_id_seq SET next = max(next, (SELECT coalesce(max(id), 0) + 1 FROM chunks)) + $1 \
         RETURNING next - $1",
    )
    .bind(count)
    .fetch_one(&mut **tx)
    .await?;
    let mut ids = first..;
    // Multi-row INSERTs: one round trip to the connection per batch instead of per chunk.
    for batch in chunks.chunks(CHUNK_INSERT_BATCH) {
        let mut insert = sqlx::QueryBuilder::<sqlx::Postgres>::new(
            "INSERT INTO chunks (id, document_id, agent_id, page_url, title, heading_path, \
             position, page, tokens, text) ",
        );
        insert.push_values(batch, |mut row, c| {
            row.push_bind(ids.next().unwrap_or(i64::MAX))
                .push_bind(document_id)
                .push_bind(agent_id)
                .push_bind(&c.page_url)
                .push_bind(&c.title)
                .push_bind(&c.heading_path)
                .push_bind(i64::from(c.position))
                .push_bind(c.page.map(i64::from))
                .push_bind(i64::from(c.tokens))
                .push_bind(&c.text);
        });
        insert.build().execute(&mut **tx).await?;
    }
    Ok(())
}

/// Chunks per multi-row INSERT: 10 parameters each, well under SQLite's limit of 32,766
/// parameters per statement.
const CHUNK_INSERT_BATCH: usize = 500;

/// The agent id of a live document, inside `tx` (so a concurrent delete is seen).
async fn live_agent(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    document_id: &DocumentId,
) -> Result<Option<AgentId>, sqlx::Error> {
    sqlx::query_scalar("SELECT agent_id FROM documents WHERE id = $1")
        .bind(document_id)
        .fetch_optional(&mut **tx)
        .await
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
        let mut tx = self.pool.begin().await?;
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
        .execute(&mut *tx)
        .await?;
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
        let mut tx = self.pool.begin().await?;
        let Some(agent_id) = live_agent(&mut tx, document_id).await? else {
            return Ok(false);
        };
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
        let mut tx = self.pool.begin().await?;
        let Some(agent_id) = live_agent(&mut tx, document_id).await? else {
            return Ok(false);
        };
        for (page, chunks) in pages {
            sqlx::query("DELETE FROM chunks WHERE document_id = $1 AND page_url = $2")
                .bind(document_id)
                .bind(&page.url)
                .execute(&mut *tx)
                .await?;
            insert_chunks(&mut tx, document_id, &agent_id, chunks).await?;
            sqlx::query(
                "INSERT INTO document_pages (document_id, url, title, content_hash, fetched_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (document_id, url) DO UPDATE SET \
                 title = excluded.title, content_hash = excluded.content_hash, \
                 fetched_at = excluded.fetched_at",
            )
            .bind(document_id)
            .bind(&page.url)
            .bind(&page.title)
            .bind(&page.content_hash)
            .bind(ms(now))
            .execute(&mut *tx)
            .await?;
        }
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
        let mut tx = self.pool.begin().await?;
        for page in stored.iter().filter(|p| !keep.contains(p.url.as_str())) {
            sqlx::query("DELETE FROM chunks WHERE document_id = $1 AND page_url = $2")
                .bind(document_id)
                .bind(&page.url)
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM document_pages WHERE document_id = $1 AND url = $2")
                .bind(document_id)
                .bind(&page.url)
                .execute(&mut *tx)
                .await?;
        }
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
        let mut tx = self.pool.begin().await?;
        for (chunk_id, vector) in vectors {
            // Through SELECT, so a chunk deleted meanwhile is skipped, not an FK error.
            sqlx::query(
                "INSERT INTO chunk_embeddings (chunk_id, agent_id, model, dimensions, vector) \
                 SELECT id, agent_id, $1, $2, $3 FROM chunks WHERE id = $4 \
                 ON CONFLICT (chunk_id) DO UPDATE SET model = excluded.model, \
                 dimensions = excluded.dimensions, vector = excluded.vector",
            )
            .bind(model)
            .bind(vector.len() as i64)
            .bind(vector_to_bytes(vector))
            .bind(*chunk_id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
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
             WHERE ($1 IS NULL OR c.document_id = $1) AND NOT EXISTS \
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
        let placeholders = vec!["$1"; ids.len()].join(", ");
        let sql = format!(
            "SELECT c.id, c.document_id, c.title, c.page_url, c.heading_path, c.text, \
             d.name AS document_name, 0.0 AS score \
             FROM chunks c JOIN documents d ON d.id = c.document_id \
             WHERE c.agent_id = $1 AND c.id IN ({placeholders})"
        );
        let mut query = sqlx::query(&sql).bind(agent_id);
        for id in ids {
            query = query.bind(*id);
        }
        let rows = query.fetch_all(&self.pool).await?;
        Ok(rows.iter().map(hit).collect::<Result<_, sqlx::Error>>()?)
    }
}
