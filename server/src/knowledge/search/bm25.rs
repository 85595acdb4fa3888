//! BM25 ranking of an agent's chunks: the word analysis shared by chunks and questions, an
//! in-memory inverted index per agent ([`Bm25Index`]) and exact top-k search with MaxScore
//! pruning; [`super::index_cache`] keeps the indexes in step with the store. Scoring (Okapi
//! BM25 as Lucene computes it, title ×2, headings ×1.5) is in docs/knowledge.md § Ranking.

use std::{
    cmp::Ordering,
    collections::{BinaryHeap, HashMap},
    sync::LazyLock,
};

use rust_stemmers::{Algorithm, Stemmer};
use unicode_normalization::{char::is_combining_mark, UnicodeNormalization};

/// Term-frequency saturation (`k1`; Lucene's and Elasticsearch's default).
pub const K1: f32 = 1.2;
/// Length normalisation (`b`; Lucene's and Elasticsearch's default).
pub const B: f32 = 0.75;
/// Weights of one occurrence in the title, heading path and text, in half units (2, 1.5, 1).
const TITLE_HALVES: u16 = 4;
const HEADING_HALVES: u16 = 3;
const TEXT_HALVES: u16 = 2;
/// Distinct terms of a question used at most.
pub const MAX_QUERY_TERMS: usize = 32;

/// English function words that carry no topic: neither indexed nor searched (a chunk's
/// length still counts them).
pub const STOPWORDS: &[&str] = &[
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

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// The words of `text`: maximal runs of letters, digits and `_`.
pub fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

fn fold(word: &str, out: &mut String) {
    out.clear();
    if word.is_ascii() {
        out.push_str(word);
        out.make_ascii_lowercase();
    } else {
        for c in word.nfd().filter(|c| !is_combining_mark(*c)) {
            out.extend(c.to_lowercase());
        }
    }
}

/// The indexed term of a folded word: its Snowball English stem; `None` for a stop word or
/// a single character.
fn term_of_folded(folded: &str) -> Option<String> {
    if folded.chars().nth(1).is_none() || STOPWORDS.binary_search(&folded).is_ok() {
        return None;
    }
    Some(STEMMER.stem(folded).into_owned())
}

/// The distinct terms of a question (folded, stop words and single characters dropped,
/// stemmed), in order of first appearance, at most [`MAX_QUERY_TERMS`]. No query syntax.
pub fn query_terms(question: &str) -> Vec<String> {
    let mut folded = String::new();
    let mut terms: Vec<String> = Vec::new();
    for word in words(question) {
        fold(word, &mut folded);
        if let Some(term) = term_of_folded(&folded) {
            if !terms.contains(&term) {
                terms.push(term);
                if terms.len() == MAX_QUERY_TERMS {
                    break;
                }
            }
        }
    }
    terms
}

/// One term's postings: chunk slots ascending, with weighted frequency (half units).
#[derive(Debug, Default, Clone)]
struct Postings {
    slots: Vec<u32>,
    tfs: Vec<u16>,
    max_tf: u16,
}

/// An inverted index of one agent's chunks, in memory (about 6 bytes per (chunk, distinct
/// term) pair plus the vocabulary; [`Bm25Index::heap_bytes`]).
#[derive(Debug, Default)]
pub struct Bm25Index {
    chunk_ids: Vec<i64>,
    /// Words by slot (title, heading path and text, stop words included).
    lengths: Vec<u32>,
    total_length: u64,
    min_length: u32,
    terms: HashMap<Box<str>, u32>,
    postings: Vec<Postings>,
    /// Folded word → its term (`None`: not indexed), so each distinct word is stemmed once.
    forms: HashMap<Box<str>, Option<u32>>,
}

/// Top-k heap entry: by score, ties to the earlier slot (so results do not depend on pruning).
#[derive(Debug, Clone, Copy)]
struct Ranked {
    score: f32,
    slot: u32,
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then(other.slot.cmp(&self.slot))
    }
}

struct Cursor<'a> {
    slots: &'a [u32],
    tfs: &'a [u16],
    pos: usize,
    idf: f32,
    bound: f32,
}

impl Cursor<'_> {
    fn slot(&self) -> u32 {
        self.slots.get(self.pos).copied().unwrap_or(u32::MAX)
    }

    fn seek(&mut self, target: u32) {
        let slots = self.slots;
        if self.pos >= slots.len() || slots[self.pos] >= target {
            return;
        }
        let mut low = self.pos;
        let mut step = 1;
        let mut high = self.pos + 1;
        while high < slots.len() && slots[high] < target {
            low = high;
            step *= 2;
            high = self.pos + step;
        }
        let high = high.min(slots.len());
        self.pos = low + slots[low..high].partition_point(|&s| s < target);
    }
}

/// BM25's term-frequency part for a frequency in half units and the length normaliser.
fn saturate(tf_halves: u16, norm: f32) -> f32 {
    let tf = f32::from(tf_halves) * 0.5;
    tf * (K1 + 1.0) / (tf + norm)
}

/// Pruning bounds are raised by this share so rounding cannot drop a top-k chunk.
const BOUND_SLACK: f32 = 1e-4;

impl Bm25Index {
    /// Chunks indexed.
    pub fn len(&self) -> usize {
        self.chunk_ids.len()
    }

    /// Whether no chunk is indexed.
    pub fn is_empty(&self) -> bool {
        self.chunk_ids.is_empty()
    }

    fn term_id(&mut self, word: &str, folded: &mut String) -> Option<u32> {
        fold(word, folded);
        if let Some(known) = self.forms.get(folded.as_str()) {
            return *known;
        }
        let id = term_of_folded(folded).map(|term| {
            let next = self.postings.len() as u32;
            let id = *self.terms.entry(term.into_boxed_str()).or_insert(next);
            if id == next {
                self.postings.push(Postings::default());
            }
            id
        });
        self.forms.insert(folded.as_str().into(), id);
        id
    }

    /// Indexes a chunk; its id must not be indexed already.
    pub fn add(&mut self, chunk_id: i64, title: &str, heading_path: &str, text: &str) {
        let slot = self.chunk_ids.len() as u32;
        let mut counts: HashMap<u32, u16> = HashMap::new();
        let mut folded = String::new();
        let mut length: u32 = 0;
        for (field, weight) in [
            (title, TITLE_HALVES),
            (heading_path, HEADING_HALVES),
            (text, TEXT_HALVES),
        ] {
            for word in words(field) {
                length = length.saturating_add(1);
                if let Some(term) = self.term_id(word, &mut folded) {
                    let tf = counts.entry(term).or_default();
                    *tf = tf.saturating_add(weight);
                }
            }
        }
        for (term, tf) in counts {
            let postings = &mut self.postings[term as usize];
            postings.slots.push(slot);
            postings.tfs.push(tf);
            postings.max_tf = postings.max_tf.max(tf);
        }
        self.min_length = if self.chunk_ids.is_empty() {
            length
        } else {
            self.min_length.min(length)
        };
        self.chunk_ids.push(chunk_id);
        self.lengths.push(length);
        self.total_length += u64::from(length);
    }

    /// Keeps the chunks for which `keep(chunk id)` holds; returns how many were dropped.
    pub fn retain(&mut self, mut keep: impl FnMut(i64) -> bool) -> usize {
        let mut new_slot = vec![u32::MAX; self.chunk_ids.len()];
        let mut chunk_ids = Vec::new();
        let mut lengths = Vec::new();
        for (slot, (&id, &length)) in self.chunk_ids.iter().zip(&self.lengths).enumerate() {
            if keep(id) {
                new_slot[slot] = chunk_ids.len() as u32;
                chunk_ids.push(id);
                lengths.push(length);
            }
        }
        let dropped = self.chunk_ids.len() - chunk_ids.len();
        if dropped == 0 {
            return 0;
        }
        for postings in &mut self.postings {
            let mut kept = 0;
            let mut max_tf = 0;
            for i in 0..postings.slots.len() {
                let slot = new_slot[postings.slots[i] as usize];
                if slot != u32::MAX {
                    postings.slots[kept] = slot;
                    postings.tfs[kept] = postings.tfs[i];
                    max_tf = max_tf.max(postings.tfs[i]);
                    kept += 1;
                }
            }
            postings.slots.truncate(kept);
            postings.tfs.truncate(kept);
            // Not every list on every removal (each would be reallocated for a few
            // entries): a list is shrunk once most of its capacity is unused.
            if postings.slots.capacity() > 2 * kept.max(4) {
                postings.slots.shrink_to_fit();
                postings.tfs.shrink_to_fit();
            }
            postings.max_tf = max_tf;
        }
        self.total_length = lengths.iter().map(|&l| u64::from(l)).sum();
        self.min_length = lengths.iter().copied().min().unwrap_or(0);
        self.chunk_ids = chunk_ids;
        self.lengths = lengths;
        let unused = self.postings.iter().filter(|p| p.slots.is_empty()).count();
        if unused * 2 > self.postings.len() {
            self.drop_unused_terms();
        }
        dropped
    }

    fn drop_unused_terms(&mut self) {
        let mut new_id = vec![u32::MAX; self.postings.len()];
        let mut postings = Vec::new();
        for (id, p) in std::mem::take(&mut self.postings).into_iter().enumerate() {
            if !p.slots.is_empty() {
                new_id[id] = postings.len() as u32;
                postings.push(p);
            }
        }
        self.terms.retain(|_, id| {
            *id = new_id[*id as usize];
            *id != u32::MAX
        });
        self.terms.shrink_to_fit();
        self.postings = postings;
        self.forms = HashMap::new();
    }

    /// Chunks containing at least one of `terms` (what an exhaustive ranking would score).
    pub fn matching(&self, terms: &[String]) -> usize {
        let mut hit = vec![false; self.chunk_ids.len()];
        for term in terms {
            if let Some(&id) = self.terms.get(term.as_str()) {
                for &slot in &self.postings[id as usize].slots {
                    hit[slot as usize] = true;
                }
            }
        }
        hit.into_iter().filter(|&h| h).count()
    }

    /// Estimated heap bytes of the index (allocator overhead not counted).
    pub fn heap_bytes(&self) -> usize {
        let postings: usize = self
            .postings
            .iter()
            .map(|p| p.slots.capacity() * 4 + p.tfs.capacity() * 2)
            .sum();
        let vocabulary: usize = self.terms.keys().map(|t| t.len() + 40).sum::<usize>()
            + self.forms.keys().map(|f| f.len() + 40).sum::<usize>()
            + self.postings.capacity() * std::mem::size_of::<Postings>();
        postings + vocabulary + self.chunk_ids.capacity() * 8 + self.lengths.capacity() * 4
    }

    fn cursors(&self, terms: &[String]) -> (Vec<Cursor<'_>>, f32, f32) {
        let n = self.chunk_ids.len() as f32;
        let avgdl = (self.total_length as f32 / n).max(1.0);
        let norm_base = K1 * (1.0 - B);
        let norm_per_word = K1 * B / avgdl;
        let min_norm = norm_base + norm_per_word * self.min_length as f32;
        let mut cursors: Vec<Cursor<'_>> = Vec::new();
        let mut seen = Vec::new();
        for term in terms {
            let Some(&id) = self.terms.get(term.as_str()) else {
                continue;
            };
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            let postings = &self.postings[id as usize];
            if postings.slots.is_empty() {
                continue;
            }
            let df = postings.slots.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            cursors.push(Cursor {
                slots: &postings.slots,
                tfs: &postings.tfs,
                pos: 0,
                idf,
                bound: idf * saturate(postings.max_tf, min_norm) * (1.0 + BOUND_SLACK),
            });
        }
        cursors.sort_by(|a, b| a.bound.total_cmp(&b.bound));
        (cursors, norm_base, norm_per_word)
    }

    /// The best `k` chunks for `terms` (from [`query_terms`]) as `(chunk id, score)`, best first,
    /// ties in indexing order; only chunks containing a term. MaxScore (Turtle and Flood, 1995)
    /// prunes, and the result equals the exhaustive ranking.
    pub fn search(&self, terms: &[String], k: usize) -> Vec<(i64, f32)> {
        if k == 0 || self.chunk_ids.is_empty() {
            return Vec::new();
        }
        let (mut cursors, norm_base, norm_per_word) = self.cursors(terms);
        // bounds[i]: the most cursors[0..=i] add together.
        let bounds: Vec<f32> = cursors
            .iter()
            .scan(0.0, |sum, c| {
                *sum += c.bound;
                Some(*sum)
            })
            .collect();
        let mut top: BinaryHeap<std::cmp::Reverse<Ranked>> = BinaryHeap::with_capacity(k + 1);
        // The k-th best so far, once there are k.
        let mut threshold: Option<Ranked> = None;
        // cursors[essential..] are the terms through which a chunk can still enter.
        let mut essential = 0;
        let mut contributions = vec![0.0f32; cursors.len()];
        loop {
            let slot = cursors[essential..]
                .iter()
                .map(Cursor::slot)
                .min()
                .unwrap_or(u32::MAX);
            if slot == u32::MAX {
                break;
            }
            let norm = norm_base + norm_per_word * self.lengths[slot as usize] as f32;
            // Each term's part, summed in term order at the end so that a chunk's score
            // does not depend on which terms were essential when it was met.
            contributions[..cursors.len()].fill(0.0);
            let mut partial = 0.0;
            for (i, cursor) in cursors.iter_mut().enumerate().skip(essential) {
                if cursor.slot() == slot {
                    let part = cursor.idf * saturate(cursor.tfs[cursor.pos], norm);
                    contributions[i] = part;
                    partial += part;
                    cursor.pos += 1;
                }
            }
            let mut abandoned = false;
            for i in (0..essential).rev() {
                if threshold.is_some_and(|t| partial + bounds[i] <= t.score) {
                    abandoned = true;
                    break;
                }
                let cursor = &mut cursors[i];
                cursor.seek(slot);
                if cursor.slot() == slot {
                    let part = cursor.idf * saturate(cursor.tfs[cursor.pos], norm);
                    contributions[i] = part;
                    partial += part;
                }
            }
            if abandoned {
                continue;
            }
            let score: f32 = contributions[..cursors.len()].iter().sum();
            let candidate = Ranked { score, slot };
            if threshold.is_some_and(|t| candidate <= t) {
                continue;
            }
            top.push(std::cmp::Reverse(candidate));
            if top.len() > k {
                top.pop();
            }
            if top.len() == k {
                let kth = top.peek().map(|r| r.0);
                threshold = kth;
                if let Some(t) = kth {
                    while essential < cursors.len() && bounds[essential] <= t.score {
                        essential += 1;
                    }
                }
            }
        }
        let mut ranked: Vec<Ranked> = top.into_iter().map(|r| r.0).collect();
        ranked.sort_by(|a, b| b.cmp(a));
        ranked
            .into_iter()
            .map(|r| (self.chunk_ids[r.slot as usize], r.score))
            .collect()
    }

    #[cfg(test)]
    fn search_exhaustive(&self, terms: &[String], k: usize) -> Vec<(i64, f32)> {
        if self.chunk_ids.is_empty() {
            return Vec::new();
        }
        let (cursors, norm_base, norm_per_word) = self.cursors(terms);
        let mut scores: HashMap<u32, f32> = HashMap::new();
        // Terms in the search's order (bound ascending), each chunk's parts summed in it.
        for cursor in &cursors {
            for (i, &slot) in cursor.slots.iter().enumerate() {
                let norm = norm_base + norm_per_word * self.lengths[slot as usize] as f32;
                *scores.entry(slot).or_default() += cursor.idf * saturate(cursor.tfs[i], norm);
            }
        }
        let mut ranked: Vec<Ranked> = scores
            .into_iter()
            .map(|(slot, score)| Ranked { score, slot })
            .collect();
        ranked.sort_by(|a, b| b.cmp(a));
        ranked.truncate(k);
        ranked
            .into_iter()
            .map(|r| (self.chunk_ids[r.slot as usize], r.score))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(q: &str) -> Vec<String> {
        query_terms(q)
    }

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        let mut sorted = STOPWORDS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, STOPWORDS, "STOPWORDS must stay sorted and unique");
    }

    #[test]
    fn questions_become_distinct_stemmed_content_terms() {
        assert_eq!(
            terms("How do I declare a MUTABLE variable? mutable! Variables"),
            ["declar", "mutabl", "variabl"]
        );
        assert!(
            terms("what is it? a b c").is_empty(),
            "stop words and letters"
        );
        assert!(terms("").is_empty());
        assert_eq!(terms("Café crème"), ["cafe", "creme"], "diacritics folded");
        assert_eq!(
            terms("read_line u32 Vec<T>"),
            ["read_lin", "u32", "vec"],
            "kept whole"
        );
        // FTS5 syntax is only words and separators here.
        assert_eq!(
            terms("NEAR(a b) OR \"x\" AND title:* ^col -not"),
            ["near", "titl", "col"]
        );
        let long: String = (0..100).map(|i| format!("word{i} ")).collect();
        assert_eq!(terms(&long).len(), MAX_QUERY_TERMS);
    }

    fn build(chunks: &[(&str, &str, &str)]) -> Bm25Index {
        let mut index = Bm25Index::default();
        for (i, (title, heading, text)) in chunks.iter().enumerate() {
            index.add(i as i64 + 1, title, heading, text);
        }
        index
    }

    #[test]
    fn scores_are_okapi_bm25_with_field_weights() {
        // Chunk 1: "ownership" twice in the text; 4 words in all. Chunk 2: once in the
        // title (weight 2); 4 words. Chunk 3: no match; 6 words.
        let index = build(&[
            ("Intro", "", "ownership rules ownership"),
            ("Ownership", "", "moves and borrows"),
            ("Other", "", "vectors strings and hash maps"),
        ]);
        let hits = index.search(&terms("ownership"), 10);
        let (n, df, avgdl) = (3.0f32, 2.0f32, 14.0f32 / 3.0);
        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        let expected =
            |tf: f32, dl: f32| idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * dl / avgdl));
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].0, 1, "{hits:?}");
        assert_eq!(hits[1].0, 2, "{hits:?}");
        assert!((hits[0].1 - expected(2.0, 4.0)).abs() < 1e-5, "{hits:?}");
        assert!((hits[1].1 - expected(2.0, 4.0)).abs() < 1e-5, "{hits:?}");
        let heading_only = build(&[("", "ownership", "x y z")]);
        let h = heading_only.search(&terms("ownership"), 1);
        let idf1 = (1.0f32 + 0.5 / 1.5).ln();
        let want = idf1 * 1.5 * (K1 + 1.0) / (1.5 + K1);
        assert!((h[0].1 - want).abs() < 1e-5, "heading weight 1.5: {h:?}");
    }

    #[test]
    fn equal_scores_keep_indexing_order_and_k_is_respected() {
        let chunks: Vec<(&str, &str, &str)> =
            (0..30).map(|_| ("t", "", "same words here")).collect();
        let index = build(&chunks);
        let hits = index.search(&terms("words"), 5);
        assert_eq!(
            hits.iter().map(|h| h.0).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
        assert!(index.search(&terms("absent"), 5).is_empty());
        assert!(index.search(&terms("words"), 0).is_empty());
        assert!(Bm25Index::default().search(&terms("words"), 5).is_empty());
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn word(&mut self, vocabulary: u64) -> String {
            let a = self.next() % vocabulary + 1;
            let b = self.next() % a + 1;
            format!("w{b}")
        }
    }

    fn random_index(rng: &mut Rng, chunks: usize, vocabulary: u64) -> Bm25Index {
        let mut index = Bm25Index::default();
        for i in 0..chunks {
            let title = rng.word(vocabulary);
            let heading = if i % 3 == 0 {
                rng.word(vocabulary)
            } else {
                String::new()
            };
            let len = 5 + rng.next() % 60;
            let text: Vec<String> = (0..len).map(|_| rng.word(vocabulary)).collect();
            index.add(i as i64 * 2 + 7, &title, &heading, &text.join(" "));
        }
        index
    }

    fn assert_same_ranking(index: &Bm25Index, query: &[String], k: usize) {
        assert_eq!(
            index.search(query, k),
            index.search_exhaustive(query, k),
            "{query:?}, k = {k}"
        );
    }

    #[test]
    fn maxscore_pruning_returns_the_exhaustive_top_k() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..6 {
            let index = random_index(&mut rng, 500 + round * 300, 40 + round as u64 * 60);
            for _ in 0..60 {
                let n = 1 + rng.next() % 7;
                let query: Vec<String> = (0..n).map(|_| rng.word(300)).collect();
                for k in [1, 3, 10, 20] {
                    assert_same_ranking(&index, &query, k);
                }
            }
        }
    }

    #[test]
    fn removed_chunks_leave_postings_and_statistics() {
        let mut rng = Rng(42);
        let mut index = random_index(&mut rng, 400, 80);
        let before = index.len();
        let dropped = index.retain(|id| id % 3 != 0);
        assert!(dropped > 0);
        assert_eq!(index.len(), before - dropped);
        let query = vec!["w1".to_owned(), "w7".to_owned(), "w30".to_owned()];
        for (id, _) in index.search(&query, 50) {
            assert_ne!(id % 3, 0, "a removed chunk came back");
        }
        assert_same_ranking(&index, &query, 10);
        let total: u64 = index.lengths.iter().map(|&l| u64::from(l)).sum();
        assert_eq!(index.total_length, total);
        assert_eq!(index.retain(|_| true), 0);
        index.retain(|_| false);
        assert!(index.is_empty());
        assert!(index.search(&query, 10).is_empty());
        assert!(index.terms.is_empty() && index.postings.is_empty() && index.forms.is_empty());
    }

    #[test]
    fn terms_no_chunk_contains_are_forgotten() {
        let mut index = Bm25Index::default();
        for i in 0..100 {
            index.add(i, "", "", &format!("common unique{i}"));
        }
        assert_eq!(index.terms.len(), 101);
        index.retain(|id| id >= 90);
        assert_eq!(
            index.terms.len(),
            11,
            "common and the ten kept unique words"
        );
        assert_eq!(index.postings.len(), 11);
        // Ids were renumbered consistently: every kept word still finds its chunk.
        for i in 90..100 {
            let hits = index.search(&terms(&format!("unique{i}")), 5);
            assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [i]);
        }
        assert!(index.search(&terms("unique3"), 5).is_empty());
        index.add(100, "", "", "unique3 common");
        assert_eq!(index.search(&terms("unique3"), 5)[0].0, 100);
        assert_eq!(index.search(&terms("common"), 20).len(), 11);
    }

    #[test]
    fn an_index_rebuilt_from_the_kept_chunks_ranks_the_same() {
        let docs: Vec<(i64, String)> = (0..200)
            .map(|i| (i, format!("alpha beta{} gamma{} delta", i % 7, i % 13)))
            .collect();
        let mut pruned = Bm25Index::default();
        for (id, text) in &docs {
            pruned.add(*id, "", "", text);
        }
        pruned.retain(|id| id % 4 != 1);
        let mut rebuilt = Bm25Index::default();
        for (id, text) in docs.iter().filter(|(id, _)| id % 4 != 1) {
            rebuilt.add(*id, "", "", text);
        }
        let query = terms("beta3 gamma5 alpha");
        assert_eq!(pruned.search(&query, 15), rebuilt.search(&query, 15));
    }
}
