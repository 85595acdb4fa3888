//! Search over an agent's knowledge: BM25 ranking ([`bm25`]) of each agent's in-memory
//! index, kept between searches and in step with the store ([`index_cache`]), behind
//! [`ChunkSearch`]; and retrieval for chats ([`retrieve`]), which fuses BM25 with vector
//! similarity when embeddings are configured.
//!
//! None of it is backend code: the store only answers the primitives of
//! [`DocumentStore`] that [`index_cache`] names, so every backend ranks the same.

pub mod bm25;
pub mod index_cache;
pub mod retrieve;

use std::{collections::HashMap, sync::Arc};

use crate::{
    ids::{AgentId, ChunkId},
    store::{documents::ChunkHit, DocumentStore, StoreResult},
};

/// BM25 search over agents' chunks, with each agent's index kept in memory between
/// searches ([`index_cache::Bm25Cache`]). Cheap to clone (clones share the indexes).
#[derive(Clone)]
pub struct ChunkSearch {
    store: Arc<dyn DocumentStore>,
    indexes: Arc<index_cache::Bm25Cache>,
}

impl ChunkSearch {
    /// A search over `store`'s chunks, with no index built yet.
    pub fn new(store: Arc<dyn DocumentStore>) -> Self {
        Self {
            store,
            indexes: Arc::default(),
        }
    }

    /// The store searched.
    pub fn store(&self) -> &Arc<dyn DocumentStore> {
        &self.store
    }

    /// BM25 search over the agent's chunks for `question` (plain text: its content
    /// words, analysed as [`bm25::query_terms`] says; nothing in it is syntax): the best
    /// `limit` hits containing at least one of its terms, best first, each scored as
    /// [`bm25`] says. Empty when the question has no content word. Sees every chunk
    /// written or deleted before it started, through whichever server process wrote it
    /// ([`index_cache`]); a chunk deleted while it ran is left out.
    ///
    /// Errors: the store's, or [`crate::store::StoreError::Other`] when analysing chunks
    /// panicked.
    pub async fn search_chunks(
        &self,
        agent_id: &AgentId,
        question: &str,
        limit: u32,
    ) -> StoreResult<Vec<ChunkHit>> {
        let terms = bm25::query_terms(question);
        if terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let started = std::time::Instant::now();
        let ranked = index_cache::rank_chunks(
            self.store.as_ref(),
            &self.indexes,
            agent_id,
            &terms,
            limit as usize,
        )
        .await?;
        let ids: Vec<ChunkId> = ranked.iter().map(|r| ChunkId::from(r.0)).collect();
        let mut found: HashMap<ChunkId, ChunkHit> = self
            .store
            .chunk_hits(agent_id, &ids)
            .await?
            .into_iter()
            .map(|h| (h.chunk_id, h))
            .collect();
        // A chunk deleted since the index was checked is left out.
        let hits = ranked
            .into_iter()
            .filter_map(|(id, score)| {
                let mut hit = found.remove(&ChunkId::from(id))?;
                hit.score = f64::from(score);
                Some(hit)
            })
            .collect();
        crate::metrics::bm25_searched(started.elapsed());
        Ok(hits)
    }

    /// Drops the agent's index from memory; its next search builds it again.
    pub fn forget(&self, agent_id: &AgentId) {
        self.indexes.forget(agent_id);
    }

    /// How many agents have an index in memory.
    pub fn cached_agents(&self) -> usize {
        self.indexes.agents()
    }
}
