//! [`crate::store::DocumentStore`] on SQLite. Write transactions start with `BEGIN
//! IMMEDIATE`, taking the write lock up front instead of failing with `SQLITE_BUSY` when
//! two workers upgrade read transactions at once.

use chrono::{DateTime, Utc};

use super::{
    rows::{hit, ms},
    SqliteStore,
};
use crate::ids::{AgentId, ChunkId, DocumentId};
use crate::store::{
    documents::{vector_to_bytes, ChunkHit, NewChunk, PageRecord},
    StoreResult,
};

/// Inserts `chunks` of the document (of `agent_id`), their ids drawn from `chunk_id_seq`.
async fn insert_chunks(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
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
        "UPDATE chunk_id_seq SET next = max(next, (SELECT coalesce(max(id), 0) + 1 FROM chunks)) + ?1 \
         RETURNING next - ?1",
    )
    .bind(count)
    .fetch_one(&mut **tx)
    .await?;
    let mut ids = first..;
    // Multi-row INSERTs: one round trip to the connection per batch instead of per chunk.
    for batch in chunks.chunks(CHUNK_INSERT_BATCH) {
        let mut insert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
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

/// Nothing to hold: the one writer draws an agent's chunk ids one transaction at a time.
async fn hold_chunk_ids(
    _tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    _agent_id: &AgentId,
) -> Result<(), sqlx::Error> {
    Ok(())
}

/// The agent id of a live document, inside `tx` (so a concurrent delete is seen).
async fn live_agent(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    document_id: &DocumentId,
) -> Result<Option<AgentId>, sqlx::Error> {
    sqlx::query_scalar("SELECT agent_id FROM documents WHERE id = ?")
        .bind(document_id)
        .fetch_optional(&mut **tx)
        .await
}

/// Deletes the pages `urls` of the document and their chunks, page by page: SQLite binds
/// no arrays.
async fn delete_pages(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    document_id: &DocumentId,
    urls: &[&str],
) -> Result<(), sqlx::Error> {
    for url in urls {
        sqlx::query("DELETE FROM chunks WHERE document_id = ? AND page_url = ?")
            .bind(document_id)
            .bind(url)
            .execute(&mut **tx)
            .await?;
        sqlx::query("DELETE FROM document_pages WHERE document_id = ? AND url = ?")
            .bind(document_id)
            .bind(url)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

crate::store::documents::document_store!(SqliteStore, sqlx::Sqlite, writer, pool);
pub(super) use shared::mark_indexed;

/// Row by row, and chunk hits through an `IN` list: SQLite binds no arrays.
impl SqliteStore {
    /// [`crate::store::DocumentStore::replace_pages`] page by page: SQLite binds no arrays.
    async fn own_replace_pages(
        &self,
        document_id: &DocumentId,
        pages: &[(PageRecord, Vec<NewChunk>)],
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let mut tx = self.begin_write().await?;
        let Some(agent_id) = live_agent(&mut tx, document_id).await? else {
            return Ok(false);
        };
        for (page, chunks) in pages {
            sqlx::query("DELETE FROM chunks WHERE document_id = ? AND page_url = ?")
                .bind(document_id)
                .bind(&page.url)
                .execute(&mut *tx)
                .await?;
            insert_chunks(&mut tx, document_id, &agent_id, chunks).await?;
            sqlx::query(
                "INSERT INTO document_pages (document_id, url, title, content_hash, fetched_at) \
                 VALUES (?, ?, ?, ?, ?) ON CONFLICT (document_id, url) DO UPDATE SET \
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

    /// [`crate::store::DocumentStore::put_embeddings`] chunk by chunk: SQLite binds no arrays.
    async fn own_put_embeddings(
        &self,
        model: &str,
        vectors: &[(ChunkId, Vec<f32>)],
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        for (chunk_id, vector) in vectors {
            // Through SELECT, so a chunk deleted meanwhile is skipped, not an FK error.
            sqlx::query(
                "INSERT INTO chunk_embeddings (chunk_id, agent_id, model, dimensions, vector) \
                 SELECT id, agent_id, ?, ?, ? FROM chunks WHERE id = ? \
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

    /// [`crate::store::DocumentStore::chunk_hits`] through an `IN` list: SQLite binds no arrays.
    async fn own_chunk_hits(
        &self,
        agent_id: &AgentId,
        ids: &[ChunkId],
    ) -> StoreResult<Vec<ChunkHit>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders = vec!["?"; ids.len()].join(", ");
        let sql = format!(
            "SELECT c.id, c.document_id, c.title, c.page_url, c.heading_path, c.text, \
             d.name AS document_name, 0.0 AS score \
             FROM chunks c JOIN documents d ON d.id = c.document_id \
             WHERE c.agent_id = ? AND c.id IN ({placeholders})"
        );
        let mut query = sqlx::query(&sql).bind(agent_id);
        for id in ids {
            query = query.bind(*id);
        }
        let rows = query.fetch_all(&self.pool).await?;
        Ok(rows.iter().map(hit).collect::<Result<_, sqlx::Error>>()?)
    }
}
