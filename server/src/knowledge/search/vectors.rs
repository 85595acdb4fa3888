//! An agent's chunk vectors in memory, for the embedding half of retrieval: one contiguous
//! block of 8-bit codes (symmetric scalar quantisation, one scale per vector), scanned
//! exhaustively for the nearest chunks to a query. Exact search over 8-bit codes reads a
//! quarter of the bytes of `f32` vectors, which is what bounds a scan of 100,000 vectors;
//! the ranking error is far below the gaps retrieval acts on (docs/knowledge.md § Embeddings).

use std::{sync::Arc, time::Duration};

use moka::sync::Cache;
use rayon::prelude::*;

use crate::{
    ids::AgentId,
    store::{DocumentStore, StoreError},
};

/// Most bytes the cached vectors of all agents may take; a larger agent is read per query.
pub const VECTOR_CACHE_BYTES: u64 = 512 * 1024 * 1024;

/// Vectors quantised to `i8`: `x ≈ code × scale`, `scale = max |x| / 127`.
#[derive(Debug, Clone, PartialEq)]
struct Quantised {
    codes: Vec<i8>,
    scale: f32,
}

fn quantise(v: &[f32]) -> Option<Quantised> {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if !max.is_finite() || max == 0.0 {
        return None;
    }
    let scale = max / 127.0;
    let codes = v
        .iter()
        .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    Some(Quantised { codes, scale })
}

/// Σ a·b over `i8` codes, summed in `i32` (exact for any length below 2^17); an integer sum
/// may be reordered, so the compiler vectorises it, unlike an `f32` one.
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum()
}

/// The dot product of `query` with each `dims`-long vector of `codes`, in order: with AVX2
/// when the CPU has it (detected at run time) and `dims` is a multiple of 16, else with
/// [`dot_i8`]. Both are exact.
fn dots(codes: &[i8], dims: usize, query: &[i8]) -> Vec<i32> {
    #[cfg(target_arch = "x86_64")]
    if dims > 0 && dims.is_multiple_of(16) {
        if let Some(simd) = pulp::x86::V3::try_new() {
            let dots = Avx2Dots {
                simd,
                codes,
                dims,
                query,
            };
            return pulp::Simd::vectorize(simd, dots);
        }
    }
    codes
        .chunks_exact(dims.max(1))
        .map(|v| dot_i8(v, query))
        .collect()
}

/// [`dots`] with AVX2: the query is widened to `i16` once, then each vector's codes are
/// sign-extended sixteen at a time and multiplied and pair-summed into eight `i32` lanes.
#[cfg(target_arch = "x86_64")]
struct Avx2Dots<'a> {
    simd: pulp::x86::V3,
    codes: &'a [i8],
    dims: usize,
    query: &'a [i8],
}

#[cfg(target_arch = "x86_64")]
impl pulp::WithSimd for Avx2Dots<'_> {
    type Output = Vec<i32>;

    // Inlined into `vectorize`'s AVX2 function, and written without closures (a closure is
    // a function of its own, without AVX2), so that each intrinsic is one instruction.
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> Vec<i32> {
        let Self {
            simd,
            codes,
            dims,
            query,
        } = self;
        let (avx, avx2) = (simd.avx, simd.avx2);
        let mut wide = Vec::with_capacity(dims / 16);
        for block in pulp::as_arrays::<16, i8>(query).0 {
            wide.push(avx2._mm256_cvtepi8_epi16(pulp::cast(*block)));
        }
        let mut out = Vec::with_capacity(codes.len() / dims);
        for vector in codes.chunks_exact(dims) {
            let mut sum = avx._mm256_setzero_si256();
            for (block, q) in pulp::as_arrays::<16, i8>(vector).0.iter().zip(&wide) {
                let codes = avx2._mm256_cvtepi8_epi16(pulp::cast(*block));
                sum = avx2._mm256_add_epi32(sum, avx2._mm256_madd_epi16(codes, *q));
            }
            let lanes: [i32; 8] = pulp::cast(sum);
            out.push(lanes.iter().sum());
        }
        out
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn unit(v: &[f32]) -> Option<Vec<f32>> {
    let norm = dot(v, v).sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return None;
    }
    Some(v.iter().map(|x| x / norm).collect())
}

/// Cosine similarity in [-1, 1]; 0 for a zero vector or different lengths.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (na, nb) = (dot(a, a).sqrt(), dot(b, b).sqrt());
    if na == 0.0 || nb == 0.0 || !na.is_finite() || !nb.is_finite() {
        return 0.0;
    }
    (dot(a, b) / (na * nb)).clamp(-1.0, 1.0)
}

/// An agent's vectors of one model, as of one
/// [`crate::store::DocumentStore::embedding_generation`]: unit vectors quantised to `i8`,
/// `dims` codes each, stored back to back.
#[derive(Debug)]
pub struct AgentVectors {
    pub model: String,
    pub generation: i64,
    /// Length of every vector kept.
    pub dims: usize,
    /// Chunk ids, parallel to the vectors.
    pub ids: Vec<i64>,
    codes: Vec<i8>,
    scales: Vec<f32>,
}

impl AgentVectors {
    /// Keeps the vectors of the most common length (one model gives one length), scaled to
    /// unit length and quantised; zero and non-finite vectors are left out.
    pub fn new(model: &str, generation: i64, stored: Vec<(i64, Vec<f32>)>) -> Self {
        let mut lengths: std::collections::HashMap<usize, usize> = Default::default();
        for (_, v) in &stored {
            *lengths.entry(v.len()).or_default() += 1;
        }
        let dims = lengths
            .into_iter()
            .filter(|(len, _)| *len > 0)
            .max_by_key(|(len, count)| (*count, *len))
            .map_or(0, |(len, _)| len);
        let mut ids = Vec::with_capacity(stored.len());
        let mut codes = Vec::with_capacity(stored.len() * dims);
        let mut scales = Vec::with_capacity(stored.len());
        for (id, v) in stored {
            if v.len() != dims {
                continue;
            }
            let Some(q) = unit(&v).and_then(|u| quantise(&u)) else {
                continue;
            };
            ids.push(id);
            codes.extend_from_slice(&q.codes);
            scales.push(q.scale);
        }
        Self {
            model: model.to_string(),
            generation,
            dims,
            ids,
            codes,
            scales,
        }
    }

    /// Bytes held (codes, scales and ids, plus a fixed overhead).
    pub fn bytes(&self) -> u64 {
        (self.codes.capacity() + self.scales.capacity() * 4 + self.ids.capacity() * 8) as u64 + 128
    }

    /// The `n` chunks nearest `query` by cosine similarity, best first, ties by id; empty for
    /// a zero query or one of another length than the vectors. Blocks while it scans, on
    /// rayon's global pool too for sets of more than [`SCAN_PART`] vectors.
    pub fn nearest(&self, query: &[f32], n: usize) -> Vec<(i64, f32)> {
        if query.len() != self.dims || n == 0 {
            return Vec::new();
        }
        let Some(q) = unit(query).and_then(|u| quantise(&u)) else {
            return Vec::new();
        };
        let parts: Vec<std::ops::Range<usize>> = (0..self.ids.len())
            .step_by(SCAN_PART)
            .map(|start| start..self.ids.len().min(start + SCAN_PART))
            .collect();
        let best = |rows| top(self.similarities(rows, &q), n);
        if parts.len() > 1 {
            top(parts.into_par_iter().flat_map_iter(best).collect(), n)
        } else {
            parts.into_iter().flat_map(best).collect()
        }
    }

    /// `(chunk id, similarity to q)` of the vectors in `rows`, in order.
    fn similarities(&self, rows: std::ops::Range<usize>, q: &Quantised) -> Vec<(i64, f32)> {
        let codes = &self.codes[rows.start * self.dims..rows.end * self.dims];
        dots(codes, self.dims, &q.codes)
            .into_iter()
            .zip(&self.scales[rows.clone()])
            .zip(&self.ids[rows])
            .map(|((dot, scale), id)| (*id, (dot as f32 * scale * q.scale).clamp(-1.0, 1.0)))
            .collect()
    }
}

/// Vectors a scan reads as one part: larger sets are scanned a part per core (rayon's
/// global pool), each part keeping its own best before they are merged.
pub const SCAN_PART: usize = 16_384;

/// The best `n` of `scored`, best first: higher similarity, then smaller id.
fn top(mut scored: Vec<(i64, f32)>, n: usize) -> Vec<(i64, f32)> {
    let order = |a: &(i64, f32), b: &(i64, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if scored.len() > n {
        scored.select_nth_unstable_by(n - 1, order);
        scored.truncate(n);
    }
    scored.sort_by(order);
    scored
}

/// Per-agent vectors kept between queries, used while of the store's generation and current model.
#[derive(Clone)]
pub struct VectorCache {
    entries: Cache<AgentId, Arc<AgentVectors>>,
}

impl Default for VectorCache {
    fn default() -> Self {
        Self {
            entries: Cache::builder()
                .weigher(|_: &AgentId, v: &Arc<AgentVectors>| {
                    u32::try_from(v.bytes() / 1024).unwrap_or(u32::MAX)
                })
                .max_capacity(VECTOR_CACHE_BYTES / 1024)
                .time_to_idle(Duration::from_secs(30 * 60))
                .build(),
        }
    }
}

impl VectorCache {
    /// The agent's current vectors of `model`, cached when current. Errors: the store's.
    pub async fn get(
        &self,
        store: &dyn DocumentStore,
        agent_id: &AgentId,
        model: &str,
    ) -> Result<Arc<AgentVectors>, StoreError> {
        let generation = store.embedding_generation(agent_id).await?;
        if let Some(hit) = self.entries.get(agent_id) {
            if hit.generation == generation && hit.model == model {
                return Ok(hit);
            }
        }
        let stored = store
            .agent_embeddings(agent_id, model)
            .await?
            .into_iter()
            .map(|c| (c.chunk_id.get(), c.vector))
            .collect();
        let fresh = Arc::new(AgentVectors::new(model, generation, stored));
        self.entries.insert(agent_id.clone(), fresh.clone());
        Ok(fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_of_known_vectors() {
        assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-6);
        assert!(cosine(&[1.0, 0.0], &[0.0, 3.0]).abs() < 1e-6);
        assert!((cosine(&[1.0, 1.0], &[-1.0, -1.0]) + 1.0).abs() < 1e-6);
        assert!((cosine(&[1.0, 1.0], &[1.0, 0.0]) - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0, "zero vector");
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0, "other dimension");
    }

    #[test]
    fn nearest_ranks_by_cosine_and_skips_odd_vectors() {
        let set = AgentVectors::new(
            "m",
            1,
            vec![
                (1, vec![0.0, 1.0]),
                (2, vec![10.0, 0.1]),
                (3, vec![0.0, 0.0]),
                (4, vec![1.0, 0.0, 0.0]),
                (5, vec![1.0, 1.0]),
                (6, vec![f32::NAN, 1.0]),
            ],
        );
        assert_eq!(
            set.ids,
            vec![1, 2, 5],
            "zero, non-finite and other-length vectors are left out"
        );
        let found = set.nearest(&[3.0, 0.0], 10);
        assert_eq!(
            found.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            vec![2, 5, 1],
            "length does not count, only direction"
        );
        assert!((found[1].1 - std::f32::consts::FRAC_1_SQRT_2).abs() < 0.01);
        assert_eq!(set.nearest(&[1.0, 0.0], 1).len(), 1);
        assert!(set.nearest(&[0.0, 0.0], 5).is_empty(), "a zero query");
        assert!(
            set.nearest(&[1.0, 0.0, 0.0], 5).is_empty(),
            "another length"
        );
    }

    /// A deterministic pseudo-random vector (xorshift), for comparisons with exact cosine.
    fn vector(seed: u64, dims: usize) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..dims)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn a_scan_in_parts_finds_what_one_pass_finds() {
        // Short vectors, so many similarities tie and the ties' order (by id) is checked too.
        let dims = 16;
        let count = 2 * SCAN_PART + 1_000;
        let stored: Vec<(i64, Vec<f32>)> = (0..count as i64)
            .map(|i| (i, vector(i as u64, dims)))
            .collect();
        let set = AgentVectors::new("m", 1, stored);
        let query = vector(7, dims);
        let q = unit(&query).and_then(|u| quantise(&u)).unwrap();
        let one_pass = set.similarities(0..count, &q);
        for n in [1, 10, 40, count + 1] {
            assert_eq!(set.nearest(&query, n), top(one_pass.clone(), n), "n = {n}");
        }
    }

    #[test]
    fn quantised_similarities_stay_within_a_hundredth_of_exact_cosine() {
        let dims = 384;
        let stored: Vec<(i64, Vec<f32>)> = (0..300).map(|i| (i, vector(i as u64, dims))).collect();
        let set = AgentVectors::new("m", 1, stored.clone());
        for seed in 1000..1010 {
            let query = vector(seed, dims);
            let found = set.nearest(&query, stored.len());
            assert_eq!(found.len(), stored.len());
            for (id, score) in &found {
                let exact = cosine(&stored[*id as usize].1, &query);
                assert!((score - exact).abs() < 0.01, "{score} against {exact}");
            }
            // The top 10 agree with an exact ranking up to the quantisation error.
            let mut exact: Vec<(i64, f32)> = stored
                .iter()
                .map(|(id, v)| (*id, cosine(v, &query)))
                .collect();
            exact.sort_by(|a, b| b.1.total_cmp(&a.1));
            let tenth = exact[9].1;
            for (id, _) in &found[..10] {
                let e = exact.iter().find(|(i, _)| i == id).unwrap().1;
                assert!(
                    e >= tenth - 0.02,
                    "chunk {id} ({e}) is far from the exact top 10"
                );
            }
        }
    }

    #[test]
    fn the_i8_dot_product_matches_a_plain_sum() {
        for len in [0, 1, 31, 32, 33, 384, 1000] {
            let a: Vec<i8> = (0..len).map(|i| ((i * 37) % 255) as i8).collect();
            let b: Vec<i8> = (0..len).map(|i| ((i * 11 + 3) % 255) as i8).collect();
            let plain: i32 = a.iter().zip(&b).map(|(x, y)| *x as i32 * *y as i32).sum();
            assert_eq!(dot_i8(&a, &b), plain, "length {len}");
        }
    }

    #[test]
    fn the_vectorised_scan_gives_the_portable_dot_products() {
        for dims in [16, 32, 48, 384, 1536] {
            let codes: Vec<i8> = (0..dims * 7)
                .map(|i| ((i * 37 + 5) % 256) as u8 as i8)
                .collect();
            let query: Vec<i8> = (0..dims)
                .map(|i| ((i * 11 + 3) % 256) as u8 as i8)
                .collect();
            let plain: Vec<i32> = codes
                .chunks_exact(dims)
                .map(|v| dot_i8(v, &query))
                .collect();
            assert_eq!(dots(&codes, dims, &query), plain, "{dims} dimensions");
        }
        let extremes = vec![-128i8; 384];
        assert_eq!(dots(&extremes, 384, &extremes), vec![384 * 128 * 128]);
        assert_eq!(
            dots(&[1, 2, 3], 3, &[1, 1, 1]),
            vec![6],
            "a length not a multiple of 16"
        );
    }

    #[test]
    fn a_set_weighs_a_quarter_of_its_f32_vectors() {
        let stored: Vec<(i64, Vec<f32>)> = (0..1000).map(|i| (i, vector(i as u64, 384))).collect();
        let set = AgentVectors::new("m", 1, stored);
        assert!(set.bytes() < 1000 * (384 + 4 + 8) + 1024, "{}", set.bytes());
    }
}
