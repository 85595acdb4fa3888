//! Retrieval: ranks the agent's chunks for a chat message by BM25 ([`super::bm25`], through
//! [`ChunkSearch`]) and keeps the best hits above a score floor. When `EMBEDDING_MODEL` is
//! configured, [`hybrid`] also ranks the agent's chunks by the cosine similarity of their
//! embeddings to the message's, and fuses both rankings by reciprocal rank fusion ([`rrf`]).

use std::collections::{HashMap, HashSet};

use tracing::warn;

use super::ChunkSearch;
use crate::{
    ids::{AgentId, ChunkId},
    knowledge::Knowledge,
    store::{documents::ChunkHit, StoreResult},
};

/// Chunks put into a prompt at most.
pub const TOP_K: u32 = 5;
const CANDIDATES: u32 = 20;
/// A hit below this share of the best hit's score is dropped.
pub const RELATIVE_SCORE_FLOOR: f64 = 0.35;

/// The agent's best chunks for `message` by BM25, best first: at most `k`, none below
/// [`RELATIVE_SCORE_FLOOR`] of the best. Errors: the store's.
pub async fn search(
    search: &ChunkSearch,
    agent_id: &AgentId,
    message: &str,
    k: u32,
) -> StoreResult<Vec<ChunkHit>> {
    let hits = search
        .search_chunks(agent_id, message, CANDIDATES.max(k))
        .await?;
    Ok(apply_floor(hits, k))
}

/// Keeps at most `k` hits scoring at least [`RELATIVE_SCORE_FLOOR`] of the first's.
pub fn apply_floor(hits: Vec<ChunkHit>, k: u32) -> Vec<ChunkHit> {
    let best = hits.first().map_or(0.0, |h| h.score);
    hits.into_iter()
        .filter(|h| h.score > 0.0 && h.score >= best * RELATIVE_SCORE_FLOOR)
        .take(k as usize)
        .collect()
}

/// The `k` of reciprocal rank fusion: rank `r` (1-based) adds `1 / (k + r)`; 60 as in
/// Cormack, Clarke and Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and individual
/// Rank Learning Methods" (SIGIR 2009).
pub const RRF_K: f64 = 60.0;
/// Vector hits below this cosine similarity are dropped (unrelated text scores below it with
/// OpenAI's text-embedding-3 models and comparable ones).
pub const MIN_SIMILARITY: f32 = 0.3;
/// Vector hits below this share of the best vector hit are dropped (similarities crowd into
/// a narrow band, hence higher than BM25's floor).
pub const RELATIVE_SIMILARITY_FLOOR: f32 = 0.75;
/// Longest part of a message embedded as the query, in characters.
pub const QUERY_EMBED_CHARS: usize = 4_000;

/// Fuses rankings by reciprocal rank fusion ([`RRF_K`]); every id once, best first; ties by
/// better single rank, then earlier list (BM25 first), then smaller id.
pub fn rrf(lists: &[&[i64]]) -> Vec<(i64, f64)> {
    // id -> (score, best rank, first list it was best in)
    let mut fused: HashMap<i64, (f64, usize, usize)> = HashMap::new();
    for (list_no, list) in lists.iter().enumerate() {
        let mut seen = HashSet::new();
        for (i, id) in list.iter().enumerate() {
            if !seen.insert(*id) {
                continue;
            }
            let rank = i + 1;
            let entry = fused.entry(*id).or_insert((0.0, usize::MAX, usize::MAX));
            entry.0 += 1.0 / (RRF_K + rank as f64);
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

/// The agent's best chunks for `message`, best first, at most `k`. Without an embedder this
/// is [`search`]. With one, up to 20 BM25 hits ([`apply_floor`]) and 20 vector hits
/// ([`vector_floor`]) are fused by [`rrf`]; `score` is the fused score over the best possible
/// (`2 / (RRF_K + 1)`): 1.0 first in both. If the message cannot be embedded, BM25 alone
/// (a warning is logged). Errors: the store's, never the endpoint's.
pub async fn hybrid(
    knowledge: &Knowledge,
    agent_id: &AgentId,
    message: &str,
    k: u32,
) -> StoreResult<Vec<ChunkHit>> {
    let store = knowledge.documents.as_ref();
    let Some(embedder) = knowledge.embedder.as_deref() else {
        return search(&knowledge.search, agent_id, message, k).await;
    };
    let candidates = CANDIDATES.max(k);
    let bm25 = apply_floor(
        knowledge
            .search
            .search_chunks(agent_id, message, candidates)
            .await?,
        candidates,
    );
    let set = knowledge
        .vectors
        .get(store, agent_id, embedder.model())
        .await?;
    let mut nearest = Vec::new();
    if !set.ids.is_empty() && !message.trim().is_empty() {
        let query: String = message.chars().take(QUERY_EMBED_CHARS).collect();
        match embedder.embed_query(&query).await {
            Ok(vector) => nearest = vector_floor(set.nearest(&vector, candidates as usize)),
            Err(err) => {
                warn!(agent = agent_id.as_str(), error = %err, "embedding the query failed; retrieving with BM25 alone");
            }
        }
    }
    let bm25_ids: Vec<i64> = bm25.iter().map(|h| h.chunk_id.get()).collect();
    let vector_ids: Vec<i64> = nearest.iter().map(|h| h.0).collect();
    let fused = rrf(&[&bm25_ids, &vector_ids]);
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
    let best_possible = 2.0 / (RRF_K + 1.0);
    Ok(fused
        .into_iter()
        .filter_map(|(id, score)| {
            by_id.remove(&id).map(|mut hit| {
                hit.score = score / best_possible;
                hit
            })
        })
        .take(k as usize)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(fused: &[(i64, f64)]) -> Vec<i64> {
        fused.iter().map(|(id, _)| *id).collect()
    }

    #[test]
    fn rrf_rewards_agreement_between_lists() {
        // 3 is second in both lists; 1 and 4 are first in one list and absent from the other.
        let fused = rrf(&[&[1, 3, 2], &[4, 3, 5]]);
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
        let fused = rrf(&[&bm25, &vector]);
        assert_eq!(fused[0].0, 2000);
        assert!((fused[0].1 - 2.0 / 90.0).abs() < 1e-12);
        assert_eq!(fused[1].0, 1000);
    }

    #[test]
    fn rrf_breaks_ties_deterministically() {
        // 1 and 2 are both first in one list: the earlier (BM25) list wins the tie.
        assert_eq!(ids(&rrf(&[&[1], &[2]])), vec![1, 2]);
        assert_eq!(ids(&rrf(&[&[2], &[1]])), vec![2, 1]);
        // Equal scores from the same ranks: the smaller id first.
        assert_eq!(ids(&rrf(&[&[5, 6], &[6, 5]])), vec![5, 6]);
    }

    #[test]
    fn rrf_with_one_list_empty_keeps_the_other_order() {
        assert_eq!(ids(&rrf(&[&[3, 1, 2], &[]])), vec![3, 1, 2]);
        assert_eq!(ids(&rrf(&[&[], &[9, 8]])), vec![9, 8]);
        assert!(rrf(&[&[], &[]]).is_empty());
        // A duplicate inside one list counts once, at its best rank.
        let fused = rrf(&[&[4, 4], &[]]);
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
}
