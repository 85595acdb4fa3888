//! [`crate::store::DocumentStore`] on SQLite: chunk ids and row-by-row writes differ.

use super::SqliteStore;
use crate::ids::{AgentId, ChunkId, DocumentId};
use crate::store::{
    documents::{upsert_embeddings_sql, vector_to_bytes, NewChunk, CHUNK_COLUMNS},
    StoreResult,
};

type Tx<'c> = sqlx::Transaction<'c, sqlx::Sqlite>;

/// Inserts `chunks` (at least one) of the document, their ids drawn from `chunk_id_seq`.
async fn insert_chunks(
    tx: &mut Tx<'_>,
    document_id: &DocumentId,
    agent_id: &AgentId,
    chunks: &[&NewChunk],
) -> Result<(), sqlx::Error> {
    // Ids from `chunk_id_seq`, so they only grow (migration 0011); the `max` keeps them
    // above any id however it was written.
    let first: i64 = sqlx::query_scalar(
        "UPDATE chunk_id_seq SET next = max(next, (SELECT coalesce(max(id), 0) + 1 FROM chunks)) + ?1 \
         RETURNING next - ?1",
    )
    .bind(chunks.len() as i64)
    .fetch_one(&mut **tx)
    .await?;
    let mut ids = first..;
    // Multi-row INSERTs (SQLite binds no arrays): one writer call per batch, not per chunk.
    for batch in chunks.chunks(CHUNK_INSERT_BATCH) {
        let mut insert =
            sqlx::QueryBuilder::<sqlx::Sqlite>::new(format!("INSERT INTO chunks ({CHUNK_COLUMNS}) "));
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

/// Chunks per multi-row INSERT (10 parameters each; SQLite allows 32,766 per statement).
const CHUNK_INSERT_BATCH: usize = 500;

/// Nothing to hold: the one writer draws an agent's chunk ids one transaction at a time.
async fn hold_chunk_ids(_tx: &mut Tx<'_>, _agent_id: &AgentId) -> Result<(), sqlx::Error> {
    Ok(())
}

/// Stores `model`'s embeddings one statement each (SQLite binds no arrays), in one transaction.
async fn upsert_embeddings(
    store: &SqliteStore,
    model: &str,
    vectors: &[&(ChunkId, Vec<f32>)],
) -> StoreResult<()> {
    let sql = upsert_embeddings_sql("SELECT id, agent_id, $1, $2, $3 FROM chunks WHERE id = $4");
    let mut tx = store.begin_write().await?;
    for (chunk_id, vector) in vectors {
        sqlx::query(&sql)
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

crate::store::documents::document_store!(SqliteStore, sqlx::Sqlite, writer, pool);
