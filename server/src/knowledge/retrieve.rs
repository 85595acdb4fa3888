//! Retrieval: turns a chat message into a BM25 query over the agent's chunks (SQLite FTS5)
//! and keeps the best hits above a score floor.

use std::collections::HashSet;

use crate::store::{knowledge::ChunkHit, Store, StoreResult};

/// Chunks put into a prompt at most.
pub const TOP_K: u32 = 5;
/// Candidates read from the index before the score floor is applied.
const CANDIDATES: u32 = 20;
/// Query terms used at most (the longest message still makes a small query).
const MAX_TERMS: usize = 32;
/// A hit scoring below this share of the best hit's score is dropped: it matched only
/// on a word or two that the best passages match much better.
pub const RELATIVE_SCORE_FLOOR: f64 = 0.35;

/// English function words that carry no topic; matching on them only adds noise (the
/// index keeps them, so phrase-like queries still work).
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "because", "been", "before", "being", "between", "both", "but", "by", "can", "could", "did",
    "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has",
    "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in", "into",
    "is", "it", "its", "itself", "just", "me", "more", "most", "my", "no", "nor", "not", "now",
    "of", "off", "on", "once", "only", "or", "other", "our", "out", "over", "own", "same", "she",
    "should", "so", "some", "such", "than", "that", "the", "their", "them", "then", "there",
    "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "use",
    "used", "using", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who",
    "whom", "why", "will", "with", "would", "you", "your", "yours",
];

/// The FTS5 query for `message`: its distinct content words, each quoted (so no word is
/// read as FTS5 syntax), joined with OR and ranked by BM25. `None` when the message has
/// no content word.
pub fn fts_query(message: &str) -> Option<String> {
    let mut seen = HashSet::new();
    let mut terms = Vec::new();
    for word in message
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
    {
        let word = word.to_lowercase();
        if word.chars().count() < 2 || STOPWORDS.contains(&word.as_str()) {
            continue;
        }
        if seen.insert(word.clone()) {
            terms.push(format!("\"{word}\""));
            if terms.len() == MAX_TERMS {
                break;
            }
        }
    }
    (!terms.is_empty()).then(|| terms.join(" OR "))
}

/// The agent's best chunks for `message`, best first: at most `k`, none below
/// [`RELATIVE_SCORE_FLOOR`] of the best score.
///
/// Errors: the store's.
pub async fn search(
    store: &dyn Store,
    agent_id: &str,
    message: &str,
    k: u32,
) -> StoreResult<Vec<ChunkHit>> {
    let Some(query) = fts_query(message) else {
        return Ok(Vec::new());
    };
    let hits = store
        .search_chunks(agent_id, &query, CANDIDATES.max(k))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_quote_distinct_content_words() {
        assert_eq!(
            fts_query("How do I declare a MUTABLE variable? mutable!").as_deref(),
            Some("\"declare\" OR \"mutable\" OR \"variable\"")
        );
        assert_eq!(fts_query("what is it?"), None);
        assert_eq!(fts_query(""), None);
    }

    #[test]
    fn fts_syntax_in_a_message_is_only_text() {
        let q = fts_query("NEAR(a b) OR \"x\" AND title:* ^col -not").unwrap();
        assert_eq!(
            q, "\"near\" OR \"title\" OR \"col\"",
            "operators and punctuation never reach FTS5 unquoted"
        );
    }

    #[test]
    fn the_score_floor_drops_weak_hits() {
        let hit = |score: f64| ChunkHit {
            chunk_id: 1,
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
