//! [`crate::store::DocumentStore`] on PostgreSQL: chunk ids drawn under the agent's
//! `chunk_generations` row lock (taken after the document's), many rows bound as arrays.

use super::PgStore;
use crate::ids::{AgentId, ChunkId, DocumentId};
use crate::store::{
    documents::{upsert_embeddings_sql, vector_to_bytes, NewChunk, CHUNK_COLUMNS},
    StoreResult,
};

/// A transaction on the PostgreSQL store.
type PgTx<'c> = sqlx::Transaction<'c, sqlx::Postgres>;

/// Locks (creating) the agent's `chunk_generations` row until `tx` ends, before ids are drawn.
async fn hold_chunk_ids(tx: &mut PgTx<'_>, agent_id: &AgentId) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO chunk_generations AS g (agent_id, generation) VALUES ($1, 0) \
         ON CONFLICT (agent_id) DO UPDATE SET generation = g.generation",
    )
    .bind(agent_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Inserts `chunks` (at least one) in one statement, ids from `chunk_ids` in order.
async fn insert_chunks(
    tx: &mut PgTx<'_>,
    document_id: &DocumentId,
    agent_id: &AgentId,
    chunks: &[&NewChunk],
) -> Result<(), sqlx::Error> {
    let page_urls: Vec<Option<&str>> = chunks.iter().map(|c| c.page_url.as_deref()).collect();
    let titles: Vec<&str> = chunks.iter().map(|c| c.title.as_str()).collect();
    let heading_paths: Vec<&str> = chunks.iter().map(|c| c.heading_path.as_str()).collect();
    let positions: Vec<i64> = chunks.iter().map(|c| i64::from(c.position)).collect();
    let pages: Vec<Option<i64>> = chunks.iter().map(|c| c.page.map(i64::from)).collect();
    let tokens: Vec<i64> = chunks.iter().map(|c| i64::from(c.tokens)).collect();
    let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    let sql = format!(
        "INSERT INTO chunks ({CHUNK_COLUMNS}) \
         SELECT nextval('chunk_ids'), $1, $2, c.page_url, c.title, c.heading_path, \
         c.position, c.page, c.tokens, c.text \
         FROM UNNEST($3::text[], $4::text[], $5::text[], $6::int8[], $7::int8[], $8::int8[], \
         $9::text[]) AS c(page_url, title, heading_path, position, page, tokens, text)"
    );
    sqlx::query(&sql)
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

/// Stores `model`'s embeddings in one upsert bound as arrays, the chunks read `FOR KEY SHARE`.
async fn upsert_embeddings(
    store: &PgStore,
    model: &str,
    vectors: &[&(ChunkId, Vec<f32>)],
) -> StoreResult<()> {
    let ids: Vec<i64> = vectors.iter().map(|(id, _)| id.get()).collect();
    let dimensions: Vec<i64> = vectors.iter().map(|(_, v)| v.len() as i64).collect();
    let bytes: Vec<Vec<u8>> = vectors.iter().map(|(_, v)| vector_to_bytes(v)).collect();
    let sql = upsert_embeddings_sql(
        "SELECT c.id, c.agent_id, $1, v.dimensions, v.vector \
         FROM UNNEST($2::int8[], $3::int8[], $4::bytea[]) AS v(chunk_id, dimensions, vector) \
         JOIN chunks c ON c.id = v.chunk_id ORDER BY c.id FOR KEY SHARE OF c",
    );
    sqlx::query(&sql)
    .bind(model)
    .bind(&ids)
    .bind(&dimensions)
    .bind(&bytes)
    .execute(&store.pool)
    .await?;
    Ok(())
}

crate::store::documents::document_store!(PgStore, sqlx::Postgres, pool, pool);
