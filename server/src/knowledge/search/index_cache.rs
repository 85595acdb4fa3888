//! The agent's BM25 indexes kept in memory between searches ([`Bm25Cache`]) and brought up to
//! date before each search ([`rank_chunks`]) through four [`DocumentStore`] primitives:
//! [`DocumentStore::chunk_generation`] (unchanged: the index answers alone),
//! [`DocumentStore::count_chunks_up_to`] / [`DocumentStore::chunk_ids_up_to`] (deletions) and
//! [`DocumentStore::chunks_after`] (additions; complete because chunk ids become visible in
//! increasing order). So every instance sees a write at its next search.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Instant,
};

use super::bm25::Bm25Index;
use crate::{
    ids::{AgentId, ChunkId},
    store::{DocumentStore, StoreError, StoreResult},
};

/// Largest total [`Bm25Index::heap_bytes`] kept; beyond it the least recently searched
/// indexes are dropped and rebuilt on next use.
pub const CACHE_BUDGET_BYTES: usize = 1 << 30;

/// Chunks read per step while an index is built or updated.
pub const INDEX_BATCH: u32 = 2_000;

/// An agent's index as the cache keeps it, with what it was built from.
#[derive(Debug, Default)]
pub struct CachedIndex {
    /// The chunk generation the index reflects; `None` before it is built or after an interrupted
    /// build.
    pub generation: Option<i64>,
    /// Largest chunk id indexed.
    pub max_chunk_id: i64,
    pub index: Bm25Index,
}

/// The agents' indexes, each behind its own lock, within [`CACHE_BUDGET_BYTES`].
#[derive(Debug, Default)]
pub struct Bm25Cache {
    agents: Mutex<HashMap<AgentId, CacheEntry>>,
}

#[derive(Debug)]
struct CacheEntry {
    index: Arc<tokio::sync::RwLock<CachedIndex>>,
    bytes: usize,
    used: Instant,
}

impl Bm25Cache {
    /// The agent's cached index (an empty, unbuilt one the first time).
    pub fn entry(&self, agent_id: &AgentId) -> Arc<tokio::sync::RwLock<CachedIndex>> {
        let mut agents = self.agents.lock().unwrap_or_else(|e| e.into_inner());
        let entry = agents
            .entry(agent_id.clone())
            .or_insert_with(|| CacheEntry {
                index: Arc::default(),
                bytes: 0,
                used: Instant::now(),
            });
        entry.used = Instant::now();
        entry.index.clone()
    }

    /// Records the agent's index size and drops the least recently searched others over `budget`.
    pub fn resized(&self, agent_id: &AgentId, bytes: usize, budget: usize) {
        let mut agents = self.agents.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = agents.get_mut(agent_id) {
            entry.bytes = bytes;
        }
        let mut total: usize = agents.values().map(|e| e.bytes).sum();
        while total > budget {
            let Some(oldest) = agents
                .iter()
                .filter(|(id, _)| *id != agent_id)
                .min_by_key(|(_, e)| e.used)
                .map(|(id, _)| id.clone())
            else {
                break;
            };
            if let Some(entry) = agents.remove(&oldest) {
                total -= entry.bytes;
            }
        }
    }

    /// Drops the agent's index (the agent has no chunks left, or was deleted).
    pub fn forget(&self, agent_id: &AgentId) {
        let mut agents = self.agents.lock().unwrap_or_else(|e| e.into_inner());
        agents.remove(agent_id);
    }

    /// Agents with an index kept.
    pub fn agents(&self) -> usize {
        self.agents.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// The agent's best `k` chunks for `terms` by BM25 (`(chunk id, score)`, best first), after
/// bringing its index up to date with `store`. An agent without a generation has no hits.
/// Errors: the store's, or [`StoreError::Other`] when analysis panicked.
pub async fn rank_chunks(
    store: &dyn DocumentStore,
    cache: &Bm25Cache,
    agent_id: &AgentId,
    terms: &[String],
    k: usize,
) -> StoreResult<Vec<(i64, f32)>> {
    let Some(generation) = store.chunk_generation(agent_id).await? else {
        cache.forget(agent_id);
        return Ok(Vec::new());
    };
    let entry = cache.entry(agent_id);
    {
        let cached = entry.read().await;
        if cached.generation == Some(generation) {
            return Ok(cached.index.search(terms, k));
        }
    }
    let mut cached = entry.write().await;
    if cached.generation != Some(generation) {
        update_index(store, agent_id, &mut cached).await?;
        // Read before the changes were: a write since then only makes the next search
        // check again.
        cached.generation = Some(generation);
        cache.resized(agent_id, cached.index.heap_bytes(), CACHE_BUDGET_BYTES);
    }
    Ok(cached.index.search(terms, k))
}

/// Brings `cached` up to date (not its generation); an interrupted update leaves it empty.
async fn update_index(
    store: &dyn DocumentStore,
    agent_id: &AgentId,
    cached: &mut CachedIndex,
) -> StoreResult<()> {
    let seen_up_to = ChunkId::from(cached.max_chunk_id);
    let known = store.count_chunks_up_to(agent_id, seen_up_to).await?;
    if known != cached.index.len() as u64 {
        let kept: HashSet<i64> = store
            .chunk_ids_up_to(agent_id, seen_up_to)
            .await?
            .into_iter()
            .map(ChunkId::get)
            .collect();
        on_blocking_pool(cached, move |index| {
            index.retain(|id| kept.contains(&id));
        })
        .await?;
    }
    loop {
        let rows = store
            .chunks_after(agent_id, ChunkId::from(cached.max_chunk_id), INDEX_BATCH)
            .await?;
        let Some(last) = rows.last().map(|c| c.chunk_id.get()) else {
            break;
        };
        on_blocking_pool(cached, move |index| {
            for c in &rows {
                index.add(c.chunk_id.get(), &c.title, &c.heading_path, &c.text);
            }
        })
        .await?;
        cached.max_chunk_id = last;
    }
    Ok(())
}

/// Runs `work` on the blocking pool, `cached` empty meanwhile (never half-updated).
async fn on_blocking_pool(
    cached: &mut CachedIndex,
    work: impl FnOnce(&mut Bm25Index) + Send + 'static,
) -> StoreResult<()> {
    let max_chunk_id = cached.max_chunk_id;
    let generation = cached.generation.take();
    cached.max_chunk_id = 0;
    let mut index = std::mem::take(&mut cached.index);
    let index = tokio::task::spawn_blocking(move || {
        work(&mut index);
        index
    })
    .await
    .map_err(|e| StoreError::Other(anyhow::anyhow!("indexing chunks failed: {e}")))?;
    cached.index = index;
    cached.max_chunk_id = max_chunk_id;
    cached.generation = generation;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_drops_the_least_recently_searched_beyond_its_budget() {
        let cache = Bm25Cache::default();
        let (a, b) = (AgentId::from("a"), AgentId::from("b"));
        cache.entry(&a);
        cache.entry(&b);
        cache.resized(&a, 600, 1000);
        cache.resized(&b, 600, 1000);
        assert_eq!(cache.agents(), 1, "a was searched longest ago");
        cache.entry(&a);
        cache.resized(&a, 300, 1000);
        assert_eq!(cache.agents(), 2, "within the budget");
        cache.forget(&a);
        assert_eq!(cache.agents(), 1);
    }
}
