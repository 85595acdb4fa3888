//! Search over an agent's knowledge: BM25 ([`bm25`]) over in-memory indexes kept in step with
//! the store ([`index_cache`]) behind [`ChunkSearch`], and chat retrieval ([`retrieve`]). No
//! backend code: every backend ranks the same.

pub mod bm25;
pub mod index_cache;
pub mod retrieve;
pub mod vectors;

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

    /// BM25 search for `question` (plain text, no syntax; [`bm25::query_terms`]): the best `limit`
    /// hits containing a term, best first; empty without content words. Sees every chunk
    /// written or deleted before it started, by any instance.
    /// Errors: the store's, or [`crate::store::StoreError::Other`] when analysis panicked.
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
