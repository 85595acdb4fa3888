//! Retrieval: ranks the agent's chunks for a chat message by BM25 ([`super::bm25`], through
//! [`ChunkSearch`]) and keeps the best hits above a score floor. When `EMBEDDING_MODEL` is
//! configured, [`hybrid`] also ranks the agent's chunks by the cosine similarity of their
//! embeddings to the message's, and fuses both rankings by reciprocal rank fusion ([`rrf`]).
//! Whatever the ranking, no page fills the hits alone while others are relevant
//! ([`diversify`]).

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use tracing::warn;

use super::{
    vectors::{AgentVectors, VectorCache, SCAN_PART},
    ChunkSearch,
};
use crate::{
    ids::{AgentId, ChunkId},
    knowledge::{embed::Embedder, Knowledge},
    store::{documents::ChunkHit, StoreResult},
};

/// Chunks put into a prompt at most.
pub const TOP_K: u32 = 5;
/// Hits of each ranking that the fusion ranks.
const CANDIDATES: u32 = 30;
/// Hits of each ranking read in all: those past [`CANDIDATES`] only fill the places that
/// [`diversify`] leaves, after the ranked ones.
const POOL: u32 = 40;
/// A hit below this share of the best hit's score is dropped.
pub const RELATIVE_SCORE_FLOOR: f64 = 0.35;

/// The agent's best chunks for `message` by BM25, best first: at most `k`, none below
/// [`RELATIVE_SCORE_FLOOR`] of the best, sources kept diverse ([`diversify`]). Errors: the
/// store's.
pub async fn search(
    search: &ChunkSearch,
    agent_id: &AgentId,
    message: &str,
    k: u32,
) -> StoreResult<Vec<ChunkHit>> {
    let pool = POOL.max(k);
    let hits = search.search_chunks(agent_id, message, pool).await?;
    Ok(diversify(apply_floor(hits, pool), k as usize))
}

/// Keeps at most `k` hits scoring at least [`RELATIVE_SCORE_FLOOR`] of the first's.
pub fn apply_floor(hits: Vec<ChunkHit>, k: u32) -> Vec<ChunkHit> {
    let best = hits.first().map_or(0.0, |h| h.score);
    hits.into_iter()
        .filter(|h| h.score > 0.0 && h.score >= best * RELATIVE_SCORE_FLOOR)
        .take(k as usize)
        .collect()
}

/// The `k` of reciprocal rank fusion: rank `r` (1-based) adds `weight / (k + r)`; 60 as in
/// Cormack, Clarke and Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and individual
/// Rank Learning Methods" (SIGIR 2009).
pub const RRF_K: f64 = 60.0;
/// Weight of the BM25 ranking in the fusion; chosen from `kb_quality`'s figures
/// (BENCHMARKS.md, retrieval quality rows).
pub const BM25_WEIGHT: f64 = 1.0;
/// Weight of the embedding ranking in the fusion (see [`BM25_WEIGHT`]).
pub const VECTOR_WEIGHT: f64 = 1.0;
/// Vector hits below this cosine similarity are dropped (unrelated text scores below it with
/// OpenAI's text-embedding-3 models, all-MiniLM-L6-v2 and comparable ones).
pub const MIN_SIMILARITY: f32 = 0.3;
/// Vector hits below this share of the best vector hit are dropped (similarities crowd into
/// a narrow band, hence higher than BM25's floor).
pub const RELATIVE_SIMILARITY_FLOOR: f32 = 0.75;
/// Longest part of a message embedded as the query, in characters.
pub const QUERY_EMBED_CHARS: usize = 4_000;
/// Chunks of one page (a crawled URL, or an uploaded document) among the hits at most, while
/// other relevant chunks are left ([`diversify`]).
pub const MAX_PER_PAGE: usize = 2;

/// Fuses rankings by weighted reciprocal rank fusion ([`RRF_K`]): each list is `(weight,
/// ids best first)`; every id once, best first; ties by better single rank, then earlier list
/// (BM25 first), then smaller id.
pub fn rrf(lists: &[(f64, &[i64])]) -> Vec<(i64, f64)> {
    // id -> (score, best rank, first list it was best in)
    let mut fused: HashMap<i64, (f64, usize, usize)> = HashMap::new();
    for (list_no, (weight, list)) in lists.iter().enumerate() {
        let mut seen = HashSet::new();
        for (i, id) in list.iter().enumerate() {
            if !seen.insert(*id) {
                continue;
            }
            let rank = i + 1;
            let entry = fused.entry(*id).or_insert((0.0, usize::MAX, usize::MAX));
            entry.0 += weight / (RRF_K + rank as f64);
            if rank < entry.1 {
                entry.1 = rank;
                entry.2 = list_no;
            }
        }
    }
    let mut out: Vec<(i64, (f64, usize, usize))> = fused.into_iter().collect();
    out.sort_by(|a, b| {
        b.1 .0
            .total_cmp(&a.1 .0)
            .then(a.1 .1.cmp(&b.1 .1))
            .then(a.1 .2.cmp(&b.1 .2))
            .then(a.0.cmp(&b.0))
    });
    out.into_iter()
        .map(|(id, (score, _, _))| (id, score))
        .collect()
}

/// Keeps vector hits at or above [`MIN_SIMILARITY`] and [`RELATIVE_SIMILARITY_FLOOR`] of the best.
pub fn vector_floor(hits: Vec<(i64, f32)>) -> Vec<(i64, f32)> {
    let best = hits.first().map_or(0.0, |h| h.1);
    let floor = MIN_SIMILARITY.max(best * RELATIVE_SIMILARITY_FLOOR);
    hits.into_iter().filter(|h| h.1 >= floor).collect()
}

/// The first `k` of `hits` (best first) with at most [`MAX_PER_PAGE`] chunks of one page
/// (same document and URL); when fewer than `k` remain, the chunks held back fill the rest
/// in their order. Order is otherwise kept.
pub fn diversify(hits: Vec<ChunkHit>, k: usize) -> Vec<ChunkHit> {
    let mut per_page: HashMap<(String, Option<String>), usize> = HashMap::new();
    let mut kept = Vec::with_capacity(k.min(hits.len()));
    let mut held = Vec::new();
    for hit in hits {
        if kept.len() == k {
            break;
        }
        let count = per_page
            .entry((hit.document_id.to_string(), hit.url.clone()))
            .or_default();
        if *count < MAX_PER_PAGE {
            *count += 1;
            kept.push(hit);
        } else {
            held.push(hit);
        }
    }
    let missing = k.saturating_sub(kept.len());
    kept.extend(held.into_iter().take(missing));
    kept
}

/// The fusion's order of the ids of two rankings (best first): the first `candidates` of
/// each fused by [`rrf`] with `weights` (BM25's, the embeddings'), scored over the best
/// possible fused score (1.0 for first in both); then the rest of each list, alternately,
/// scored as if just past the fused ones' last rank. Every id once.
pub fn fusion_order(
    bm25: &[i64],
    vectors: &[i64],
    [bm25_weight, vector_weight]: [f64; 2],
    candidates: usize,
) -> Vec<(i64, f64)> {
    let (bm25_fused, bm25_rest) = bm25.split_at(bm25.len().min(candidates));
    let (vector_fused, vector_rest) = vectors.split_at(vectors.len().min(candidates));
    let best_possible = (bm25_weight + vector_weight) / (RRF_K + 1.0);
    let mut order: Vec<(i64, f64)> =
        rrf(&[(bm25_weight, bm25_fused), (vector_weight, vector_fused)])
            .into_iter()
            .map(|(id, score)| (id, score / best_possible))
            .collect();
    let mut seen: HashSet<i64> = order.iter().map(|(id, _)| *id).collect();
    let reserve =
        bm25_weight.max(vector_weight) / (RRF_K + candidates as f64 + 1.0) / best_possible;
    order.extend(
        interleave(bm25_rest, vector_rest)
            .into_iter()
            .filter(|id| seen.insert(*id))
            .map(|id| (id, reserve)),
    );
    order
}

/// `a[0], b[0], a[1], b[1], …`, then the longer list's rest.
fn interleave(a: &[i64], b: &[i64]) -> Vec<i64> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    for i in 0..a.len().max(b.len()) {
        out.extend(a.get(i));
        out.extend(b.get(i));
    }
    out
}

/// Which rankings retrieval uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// BM25 alone.
    Bm25,
    /// The embeddings alone (nothing without an embedder or vectors).
    Vectors,
    /// Both, fused by [`rrf`] with the retriever's weights; what chats use.
    Fusion,
}

/// Retrieval over one knowledge base's parts: BM25, and embeddings when an embedder is given.
#[derive(Clone, Copy)]
pub struct Retriever<'a> {
    pub search: &'a ChunkSearch,
    pub embedder: Option<&'a Embedder>,
    pub vectors: &'a VectorCache,
    /// The fusion's weights of BM25 and of the embeddings ([`BM25_WEIGHT`], [`VECTOR_WEIGHT`]).
    pub weights: [f64; 2],
}

impl<'a> Retriever<'a> {
    /// The retriever chats use.
    pub fn new(knowledge: &'a Knowledge) -> Self {
        Self {
            search: &knowledge.search,
            embedder: knowledge.embedder.as_deref(),
            vectors: &knowledge.vectors,
            weights: [BM25_WEIGHT, VECTOR_WEIGHT],
        }
    }

    /// The agent's best chunks for `message` by `mode`, best first, at most `k`, sources kept
    /// diverse ([`diversify`]). BM25: [`search`]. Vectors: the nearest chunks above
    /// [`vector_floor`], `score` the cosine similarity. Fusion: the first 30 BM25 hits
    /// ([`apply_floor`]) and 30 vector hits fused by [`rrf`], `score` the fused score over the
    /// best possible (1.0 first in both); hits 31–40 of each list only fill the places
    /// [`diversify`] leaves; BM25 ranks while the query is embedded and the vectors scanned.
    /// Without an embedder, or when the message cannot be embedded (a warning is logged), the
    /// fusion is BM25 alone. Errors: the store's, never the embedder's.
    pub async fn retrieve(
        &self,
        agent_id: &AgentId,
        message: &str,
        k: u32,
        mode: Mode,
    ) -> StoreResult<Vec<ChunkHit>> {
        if mode == Mode::Bm25 || (mode == Mode::Fusion && self.embedder.is_none()) {
            return search(self.search, agent_id, message, k).await;
        }
        let pool = POOL.max(k);
        let (bm25, nearest) = tokio::try_join!(
            self.bm25(agent_id, message, pool, mode),
            self.nearest(agent_id, message, pool)
        )?;
        self.rank(agent_id, bm25, nearest, k, mode).await
    }

    /// [`Retriever::retrieve`] with the query's embedding given (`vector`, of `model`) rather
    /// than computed: the ranking alone, as benchmarks time it. Errors: the store's.
    pub async fn retrieve_with_vector(
        &self,
        agent_id: &AgentId,
        message: &str,
        model: &str,
        vector: &[f32],
        k: u32,
        mode: Mode,
    ) -> StoreResult<Vec<ChunkHit>> {
        if mode == Mode::Bm25 {
            return search(self.search, agent_id, message, k).await;
        }
        let pool = POOL.max(k);
        let nearest = async {
            let store = self.search.store().as_ref();
            let set = self.vectors.get(store, agent_id, model).await?;
            Ok(scan(set, vector.to_vec(), pool as usize).await)
        };
        let (bm25, nearest) = tokio::try_join!(self.bm25(agent_id, message, pool, mode), nearest)?;
        self.rank(agent_id, bm25, nearest, k, mode).await
    }

    /// The first `pool` BM25 hits above [`apply_floor`] for the fusion; none for the
    /// embeddings alone.
    async fn bm25(
        &self,
        agent_id: &AgentId,
        message: &str,
        pool: u32,
        mode: Mode,
    ) -> StoreResult<Vec<ChunkHit>> {
        if mode == Mode::Vectors {
            return Ok(Vec::new());
        }
        let hits = self.search.search_chunks(agent_id, message, pool).await?;
        Ok(apply_floor(hits, pool))
    }

    /// The hits of `mode` given the BM25 hits `bm25` and the vector hits `nearest` (best
    /// first).
    async fn rank(
        &self,
        agent_id: &AgentId,
        bm25: Vec<ChunkHit>,
        nearest: Vec<(i64, f32)>,
        k: u32,
        mode: Mode,
    ) -> StoreResult<Vec<ChunkHit>> {
        let candidates = CANDIDATES.max(k) as usize;
        let store = self.search.store().as_ref();
        let vector_ids: Vec<i64> = nearest.iter().map(|h| h.0).collect();
        if mode == Mode::Vectors {
            let ids: Vec<ChunkId> = vector_ids.iter().copied().map(ChunkId::from).collect();
            let mut by_id: HashMap<i64, ChunkHit> = store
                .chunk_hits(agent_id, &ids)
                .await?
                .into_iter()
                .map(|h| (h.chunk_id.get(), h))
                .collect();
            let hits = nearest
                .iter()
                .filter_map(|(id, similarity)| {
                    by_id.remove(id).map(|mut hit| {
                        hit.score = f64::from(*similarity);
                        hit
                    })
                })
                .collect();
            return Ok(diversify(hits, k as usize));
        }
        let bm25_ids: Vec<i64> = bm25.iter().map(|h| h.chunk_id.get()).collect();
        let order = fusion_order(&bm25_ids, &vector_ids, self.weights, candidates);
        let mut by_id: HashMap<i64, ChunkHit> =
            bm25.into_iter().map(|h| (h.chunk_id.get(), h)).collect();
        let vector_only: Vec<ChunkId> = vector_ids
            .iter()
            .copied()
            .filter(|id| !by_id.contains_key(id))
            .map(ChunkId::from)
            .collect();
        // Read through the chunks table: a chunk deleted since the vectors were read is
        // simply not there.
        for hit in store.chunk_hits(agent_id, &vector_only).await? {
            by_id.insert(hit.chunk_id.get(), hit);
        }
        let hits = order
            .into_iter()
            .filter_map(|(id, score)| {
                by_id.remove(&id).map(|mut hit| {
                    hit.score = score;
                    hit
                })
            })
            .collect();
        Ok(diversify(hits, k as usize))
    }

    /// The agent's chunks nearest `message`'s embedding above [`vector_floor`]; empty without
    /// an embedder or vectors, or when the message cannot be embedded (logged).
    async fn nearest(
        &self,
        agent_id: &AgentId,
        message: &str,
        candidates: u32,
    ) -> StoreResult<Vec<(i64, f32)>> {
        let Some(embedder) = self.embedder else {
            return Ok(Vec::new());
        };
        let store = self.search.store().as_ref();
        let set = self.vectors.get(store, agent_id, embedder.model()).await?;
        if set.ids.is_empty() || message.trim().is_empty() {
            return Ok(Vec::new());
        }
        let query: String = message.chars().take(QUERY_EMBED_CHARS).collect();
        match embedder.embed_query(&query).await {
            Ok(vector) => Ok(scan(set, vector, candidates as usize).await),
            Err(err) => {
                warn!(agent = agent_id.as_str(), error = %err, "embedding the query failed; retrieving with BM25 alone");
                Ok(Vec::new())
            }
        }
    }
}

/// The `n` vectors of `set` nearest `query` above [`vector_floor`]. A set of more than
/// [`SCAN_PART`] vectors is scanned on a blocking thread, so that BM25 ranks beside it; a
/// smaller one, scanned in well under a millisecond, costs less in place than the handover.
async fn scan(set: Arc<AgentVectors>, query: Vec<f32>, n: usize) -> Vec<(i64, f32)> {
    if set.ids.len() <= SCAN_PART {
        return vector_floor(set.nearest(&query, n));
    }
    match tokio::task::spawn_blocking(move || set.nearest(&query, n)).await {
        Ok(hits) => vector_floor(hits),
        Err(err) => {
            warn!(error = %err, "the vector scan failed; retrieving with BM25 alone");
            Vec::new()
        }
    }
}

/// The agent's best chunks for `message`, best first, at most `k`: [`Retriever::retrieve`]
/// with [`Mode::Fusion`] over the knowledge base's parts. Errors: the store's.
pub async fn hybrid(
    knowledge: &Knowledge,
    agent_id: &AgentId,
    message: &str,
    k: u32,
) -> StoreResult<Vec<ChunkHit>> {
    Retriever::new(knowledge)
        .retrieve(agent_id, message, k, Mode::Fusion)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(fused: &[(i64, f64)]) -> Vec<i64> {
        fused.iter().map(|(id, _)| *id).collect()
    }

    #[test]
    fn the_fusion_ranks_thirty_hits_of_each_list_and_keeps_the_rest_after_them() {
        // 2000 is 26th in both lists: fused, it beats 1000, first in BM25 alone (2 / 86 >
        // 1 / 61). Ranked on 20 of each, it would have come after every fused hit.
        let mut bm25: Vec<i64> = vec![1000];
        bm25.extend(1..=24);
        bm25.push(2000);
        bm25.extend(3001..=3014);
        let mut vectors: Vec<i64> = (101..=125).collect();
        vectors.push(2000);
        vectors.extend(4001..=4014);
        let order = fusion_order(&bm25, &vectors, [1.0, 1.0], CANDIDATES as usize);
        assert_eq!(order[0].0, 2000);
        assert_eq!(order[1].0, 1000);
        assert!((order[0].1 - (2.0 / 86.0) / (2.0 / 61.0)).abs() < 1e-9);
        // Hits 31–40 of each list follow, alternately, below every fused hit.
        let fused = 30 + 30 - 1;
        let rest: Vec<i64> = order[fused..].iter().map(|(id, _)| *id).collect();
        assert_eq!(&rest[..4], &[3005, 4005, 3006, 4006]);
        assert_eq!(rest.len(), 20);
        assert!(order[fused].1 < order[fused - 1].1);
        let mut ids: Vec<i64> = order.iter().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), order.len(), "every id once");
    }

    #[test]
    fn rrf_rewards_agreement_between_lists() {
        // 3 is second in both lists; 1 and 4 are first in one list and absent from the other.
        let fused = rrf(&[(1.0, &[1, 3, 2]), (1.0, &[4, 3, 5])]);
        assert_eq!(ids(&fused), vec![3, 1, 4, 2, 5]);
        let score = |id| fused.iter().find(|f| f.0 == id).unwrap().1;
        assert!((score(3) - 2.0 / 62.0).abs() < 1e-12);
        assert!((score(1) - 1.0 / 61.0).abs() < 1e-12);
        assert!((score(2) - 1.0 / 63.0).abs() < 1e-12);
    }

    #[test]
    fn rrf_uses_k_60() {
        // 1000 is first in the BM25 list only; 2000 is 30th in both. With k = 60,
        // 2/90 > 1/61 and agreement wins; with a small k (1: 1/2 > 2/31) it would lose.
        let mut bm25: Vec<i64> = vec![1000];
        bm25.extend(1..=28);
        bm25.push(2000);
        let mut vector: Vec<i64> = (101..=129).collect();
        vector.push(2000);
        let fused = rrf(&[(1.0, &bm25), (1.0, &vector)]);
        assert_eq!(fused[0].0, 2000);
        assert!((fused[0].1 - 2.0 / 90.0).abs() < 1e-12);
        assert_eq!(fused[1].0, 1000);
    }

    #[test]
    fn rrf_breaks_ties_deterministically() {
        // 1 and 2 are both first in one list: the earlier (BM25) list wins the tie.
        assert_eq!(ids(&rrf(&[(1.0, &[1]), (1.0, &[2])])), vec![1, 2]);
        assert_eq!(ids(&rrf(&[(1.0, &[2]), (1.0, &[1])])), vec![2, 1]);
        // Equal scores from the same ranks: the smaller id first.
        assert_eq!(ids(&rrf(&[(1.0, &[5, 6]), (1.0, &[6, 5])])), vec![5, 6]);
    }

    #[test]
    fn rrf_with_one_list_empty_keeps_the_other_order() {
        assert_eq!(ids(&rrf(&[(1.0, &[3, 1, 2]), (1.0, &[])])), vec![3, 1, 2]);
        assert_eq!(ids(&rrf(&[(1.0, &[]), (1.0, &[9, 8])])), vec![9, 8]);
        assert!(rrf(&[(1.0, &[]), (1.0, &[])]).is_empty());
        // A duplicate inside one list counts once, at its best rank.
        let fused = rrf(&[(1.0, &[4, 4]), (1.0, &[])]);
        assert_eq!(fused.len(), 1);
        assert!((fused[0].1 - 1.0 / 61.0).abs() < 1e-12);
    }

    #[test]
    fn the_vector_floor_is_absolute_and_relative() {
        let kept = vector_floor(vec![(1, 0.9), (2, 0.7), (3, 0.6), (4, 0.1)]);
        assert_eq!(kept, vec![(1, 0.9), (2, 0.7)], "0.6 < 0.75 × 0.9");
        let kept = vector_floor(vec![(1, 0.35), (2, 0.29)]);
        assert_eq!(kept, vec![(1, 0.35)], "0.29 is under the absolute floor");
        assert!(vector_floor(vec![(1, 0.2)]).is_empty());
        assert!(vector_floor(Vec::new()).is_empty());
    }

    #[test]
    fn the_score_floor_drops_weak_hits() {
        let hit = |score: f64| ChunkHit {
            chunk_id: 1.into(),
            document_id: "d".into(),
            title: "t".into(),
            url: None,
            document_name: "n".into(),
            heading_path: String::new(),
            text: "x".into(),
            score,
        };
        let kept = apply_floor(vec![hit(10.0), hit(5.0), hit(3.0), hit(1.0)], 5);
        assert_eq!(
            kept.iter().map(|h| h.score).collect::<Vec<_>>(),
            vec![10.0, 5.0]
        );
        assert_eq!(apply_floor(vec![hit(10.0), hit(9.0)], 1).len(), 1);
    }

    fn page_hit(id: i64, document: &str, url: Option<&str>) -> ChunkHit {
        ChunkHit {
            chunk_id: id.into(),
            document_id: document.into(),
            title: "t".into(),
            url: url.map(str::to_string),
            document_name: "n".into(),
            heading_path: String::new(),
            text: "x".into(),
            score: 1.0,
        }
    }

    fn chunk_ids(hits: &[ChunkHit]) -> Vec<i64> {
        hits.iter().map(|h| h.chunk_id.get()).collect()
    }

    #[test]
    fn no_page_gives_more_than_two_of_five_hits_while_others_are_relevant() {
        let a = Some("http://site/a.html");
        let b = Some("http://site/b.html");
        let hits = vec![
            page_hit(1, "d", a),
            page_hit(2, "d", a),
            page_hit(3, "d", a),
            page_hit(4, "d", a),
            page_hit(5, "d", b),
            page_hit(6, "e", None),
            page_hit(7, "e", None),
            page_hit(8, "e", None),
            page_hit(9, "d", b),
        ];
        assert_eq!(chunk_ids(&diversify(hits.clone(), 5)), vec![1, 2, 5, 6, 7]);
        // Same URL in another document is another page.
        let other = vec![
            page_hit(1, "d", a),
            page_hit(2, "d", a),
            page_hit(3, "x", a),
        ];
        assert_eq!(chunk_ids(&diversify(other, 3)), vec![1, 2, 3]);
    }

    #[test]
    fn one_page_fills_the_hits_when_nothing_else_is_relevant() {
        let a = Some("http://site/a.html");
        let hits = vec![
            page_hit(1, "d", a),
            page_hit(2, "d", a),
            page_hit(3, "d", a),
            page_hit(4, "e", None),
            page_hit(5, "d", a),
            page_hit(6, "d", a),
        ];
        // Two of the page, the other page, then the held-back chunks in their order.
        assert_eq!(chunk_ids(&diversify(hits, 5)), vec![1, 2, 4, 3, 5]);
        let single = vec![
            page_hit(1, "d", None),
            page_hit(2, "d", None),
            page_hit(3, "d", None),
        ];
        assert_eq!(chunk_ids(&diversify(single, 5)), vec![1, 2, 3]);
        assert!(diversify(Vec::new(), 5).is_empty());
    }

    #[test]
    fn rrf_weights_scale_each_list() {
        // With BM25 weighted 2 and vectors 1, BM25's first beats the vectors' first.
        let fused = rrf(&[(2.0, &[1]), (1.0, &[2])]);
        assert_eq!(ids(&fused), vec![1, 2]);
        assert!((fused[0].1 - 2.0 / 61.0).abs() < 1e-12);
        let fused = rrf(&[(1.0, &[1]), (3.0, &[2])]);
        assert_eq!(ids(&fused), vec![2, 1]);
    }
}
