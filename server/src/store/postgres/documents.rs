//! [`crate::store::DocumentStore`] on PostgreSQL. The chunk rules are kept by locks taken in
//! one order (never deadlocking): a chunk writer reads its document `FOR SHARE` (a delete
//! waits for it, or it finds nothing), then locks the agent's `chunk_generations` row
//! before drawing ids from `chunk_ids`; the baseline's statement triggers bump the
//! generation in the writer's transaction.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::{
    rows::{hit, ms},
    PgStore,
};
use crate::ids::{AgentId, ChunkId, DocumentId};
use crate::store::{
    documents::{vector_to_bytes, ChunkHit, NewChunk, PageRecord},
    StoreResult,
};

/// A transaction on the PostgreSQL store.
type PgTx<'c> = sqlx::Transaction<'c, sqlx::Postgres>;

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

/// Locks (creating at 0) the agent's `chunk_generations` row until `tx` ends; must come
/// before the transaction draws chunk ids.
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

/// Inserts `chunks` in one statement, ids drawn from `chunk_ids` in order; the caller
/// holds [`hold_chunk_ids`].
async fn insert_chunks<'a>(
    tx: &mut PgTx<'_>,
    document_id: &DocumentId,
    agent_id: &AgentId,
    chunks: impl IntoIterator<Item = &'a NewChunk>,
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

/// Deletes the pages `urls` of the document and their chunks, one statement per table.
async fn delete_pages(
    tx: &mut PgTx<'_>,
    document_id: &DocumentId,
    urls: &[&str],
) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM chunks WHERE document_id = $1 AND page_url = ANY($2)")
        .bind(document_id)
        .bind(urls)
        .execute(&mut **tx)
        .await?;
    sqlx::query("DELETE FROM document_pages WHERE document_id = $1 AND url = ANY($2)")
        .bind(document_id)
        .bind(urls)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

crate::store::documents::document_store!(PgStore, sqlx::Postgres, pool, pool);
pub(super) use shared::{insert_document, mark_indexed};

/// Many rows per statement, bound as arrays.
impl PgStore {
    /// [`crate::store::DocumentStore::replace_pages`] in one statement per table, the pages bound as arrays.
    async fn own_replace_pages(
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
        let mut tx = self.begin_write().await?;
        let Some(agent_id) = live_agent(&mut tx, document_id).await? else {
            return Ok(false);
        };
        if pages.is_empty() {
            return Ok(true);
        }
        if pages.iter().any(|(_, chunks)| !chunks.is_empty()) {
            hold_chunk_ids(&mut tx, &agent_id).await?;
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

    /// [`crate::store::DocumentStore::put_embeddings`] in one upsert, the vectors bound as arrays.
    async fn own_put_embeddings(
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

    /// [`crate::store::DocumentStore::chunk_hits`] with the ids bound as an array (`= ANY`).
    async fn own_chunk_hits(
        &self,
        agent_id: &AgentId,
        ids: &[ChunkId],
    ) -> StoreResult<Vec<ChunkHit>> {
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
