//! Chunk embeddings through the OpenAI-compatible endpoint (`OPENAI_BASE_URL`,
//! `OPENAI_API_KEY`, `EMBEDDING_MODEL`) and the in-memory vectors retrieval compares a query
//! with. Embeddings never hold up BM25: failures are retried by [`catch_up`], chunks the
//! endpoint refuses stay BM25-only, and a chat whose query cannot be embedded uses BM25
//! alone (docs/knowledge.md § Embeddings).

use std::{
    sync::{
        atomic::{AtomicI64, Ordering},
        Arc,
    },
    time::Duration,
};

use genai::{adapter::AdapterKind, embed::EmbedRequest, ServiceTarget};
use moka::sync::Cache;
use secrecy::SecretString;
use tracing::{info, warn};

use super::Knowledge;
use crate::{
    config::ProvidersConfig,
    ids::{AgentId, ChunkId, DocumentId},
    llm::{
        remote::{classify, endpoint_url, mask, target},
        ProviderError, ProviderErrorKind,
    },
    store::{documents::ChunkText, DocumentStore, StoreError},
};

/// Texts sent in one embedding request at most.
pub const BATCH: usize = 64;
/// Longest wait for a chat query's embedding; past it the chat uses BM25 alone.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
/// After a query embedding timed out, queries are not embedded for this long.
pub const QUERY_COOL_DOWN: Duration = Duration::from_secs(30);
/// How often the catch-up task looks for chunks without a vector when nothing woke it.
pub const CATCH_UP_INTERVAL: Duration = Duration::from_secs(60);
/// Most bytes the cached vectors of all agents may take; a larger agent is read per query.
pub const VECTOR_CACHE_BYTES: u64 = 512 * 1024 * 1024;

/// A client of the embedding endpoint.
pub struct Embedder {
    client: genai::Client,
    base_url: String,
    key: SecretString,
    model: String,
    timeout: Duration,
    cool_until_ms: AtomicI64,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is left out on purpose.
        f.debug_struct("Embedder")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl Embedder {
    /// `None` without `EMBEDDING_MODEL` or `OPENAI_API_KEY` (warned). Errors: no HTTP client.
    pub fn from_config(config: &ProvidersConfig) -> anyhow::Result<Option<Self>> {
        let Some(model) = config.embedding_model.clone() else {
            return Ok(None);
        };
        let Some(key) = config.openai_api_key.clone() else {
            warn!(
                model = %model,
                "EMBEDDING_MODEL is set but OPENAI_API_KEY is not; retrieval stays BM25 only"
            );
            return Ok(None);
        };
        Ok(Some(Self::new(
            &config.openai_base_url,
            key,
            &model,
            config.timeout,
        )?))
    }

    /// An embedder of `model` at `base_url` (+ `embeddings`); `timeout` bounds each batch.
    /// Errors: the HTTP client cannot be built.
    pub fn new(
        base_url: &str,
        key: SecretString,
        model: &str,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let client = genai::Client::new()
            .map_err(|e| anyhow::anyhow!("building the embedding client failed: {e}"))?;
        Ok(Self {
            client,
            base_url: endpoint_url(base_url),
            key,
            model: model.to_string(),
            timeout,
            cool_until_ms: AtomicI64::new(0),
        })
    }

    /// The model name, stored beside every vector.
    pub fn model(&self) -> &str {
        &self.model
    }

    fn target(&self) -> ServiceTarget {
        target(&self.base_url, &self.key, AdapterKind::OpenAI, &self.model)
    }

    fn error(&self, err: &genai::Error) -> ProviderError {
        let (kind, detail) = classify(err);
        let detail = mask(&detail, &self.key);
        let status = match kind {
            ProviderErrorKind::Status(s) => format!(" ({s})"),
            _ => String::new(),
        };
        ProviderError {
            message: format!("The embedding endpoint failed{status}: {detail}"),
            kind,
        }
    }

    async fn request(
        &self,
        texts: Vec<String>,
        timeout: Duration,
    ) -> Result<Vec<Vec<f32>>, ProviderError> {
        let expected = texts.len();
        let call = self
            .client
            .exec_embed(self.target(), EmbedRequest::new_batch(texts), None);
        let response = match tokio::time::timeout(timeout, call).await {
            Ok(Ok(response)) => response,
            Ok(Err(err)) => return Err(self.error(&err)),
            Err(_) => {
                return Err(ProviderError {
                    kind: ProviderErrorKind::Timeout,
                    message: format!(
                        "The embedding endpoint failed: no answer within {} s",
                        timeout.as_secs()
                    ),
                })
            }
        };
        let mut embeddings = response.embeddings;
        embeddings.sort_by_key(|e| e.index);
        let invalid = |why: &str| ProviderError {
            kind: ProviderErrorKind::Other,
            message: format!("The embedding endpoint failed: {why}"),
        };
        if embeddings.len() != expected || embeddings.iter().enumerate().any(|(i, e)| e.index != i)
        {
            return Err(invalid(&format!(
                "it returned {} embeddings for {expected} texts",
                embeddings.len()
            )));
        }
        let vectors: Vec<Vec<f32>> = embeddings.into_iter().map(|e| e.vector).collect();
        let dims = vectors.first().map_or(0, Vec::len);
        if vectors
            .iter()
            .any(|v| v.is_empty() || v.len() != dims || v.iter().any(|x| !x.is_finite()))
        {
            return Err(invalid("it returned empty, uneven or non-finite vectors"));
        }
        Ok(vectors)
    }

    /// The embeddings of `texts`, in order, [`BATCH`] at a time. Errors: the first failed request.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ProviderError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            out.extend(self.request(batch.to_vec(), self.timeout).await?);
        }
        Ok(out)
    }

    /// A chat query's embedding within [`QUERY_TIMEOUT`]; after a timeout queries fail at once for
    /// [`QUERY_COOL_DOWN`]. Errors: as [`Embedder::embed`].
    pub async fn embed_query(&self, text: &str) -> Result<Vec<f32>, ProviderError> {
        let now = chrono::Utc::now().timestamp_millis();
        if now < self.cool_until_ms.load(Ordering::Relaxed) {
            return Err(ProviderError {
                kind: ProviderErrorKind::Timeout,
                message: "The embedding endpoint timed out recently; not asked again yet".into(),
            });
        }
        let result = self
            .request(vec![text.to_string()], QUERY_TIMEOUT.min(self.timeout))
            .await;
        if let Err(err) = &result {
            if err.kind == ProviderErrorKind::Timeout {
                let until = now + QUERY_COOL_DOWN.as_millis() as i64;
                self.cool_until_ms.store(until, Ordering::Relaxed);
            }
        }
        result.and_then(|mut v| {
            v.pop().ok_or_else(|| ProviderError {
                kind: ProviderErrorKind::Other,
                message: "The embedding endpoint failed: it returned no vector".into(),
            })
        })
    }
}

/// The text embedded for a chunk: its title and headings, then its text.
pub fn embed_input(chunk: &ChunkText) -> String {
    if chunk.heading_path.is_empty() {
        format!("{}\n\n{}", chunk.title, chunk.text)
    } else {
        format!("{} — {}\n\n{}", chunk.title, chunk.heading_path, chunk.text)
    }
}

/// Why embedding chunks stopped.
#[derive(Debug, thiserror::Error)]
pub enum EmbedFailure {
    #[error(transparent)]
    Endpoint(#[from] ProviderError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn refused(err: &ProviderError) -> bool {
    matches!(err.kind, ProviderErrorKind::Status(400 | 413 | 422))
}

/// Embeds the chunks of `document_id` (or all) lacking a vector of the model; a chunk refused
/// alone is recorded refused. Returns how many got one. Errors: the first non-refusal failure.
pub async fn embed_missing(
    store: &dyn DocumentStore,
    embedder: &Embedder,
    document_id: Option<&DocumentId>,
) -> Result<u64, EmbedFailure> {
    let model = embedder.model();
    let mut done = 0u64;
    loop {
        let chunks = store
            .chunks_without_embedding(model, document_id, BATCH as u32)
            .await?;
        if chunks.is_empty() {
            return Ok(done);
        }
        let texts: Vec<String> = chunks.iter().map(embed_input).collect();
        let pairs: Vec<(ChunkId, Vec<f32>)> = match embedder.embed(&texts).await {
            Ok(vectors) => chunks.iter().map(|c| c.chunk_id).zip(vectors).collect(),
            Err(err) if refused(&err) => {
                let mut pairs = Vec::with_capacity(chunks.len());
                for (chunk, text) in chunks.iter().zip(texts) {
                    match embedder.embed(&[text]).await {
                        Ok(mut v) => pairs.push((chunk.chunk_id, v.pop().unwrap_or_default())),
                        Err(err) if refused(&err) => {
                            warn!(chunk = chunk.chunk_id.get(), error = %err, "the embedding endpoint refused a chunk");
                            pairs.push((chunk.chunk_id, Vec::new()));
                        }
                        Err(err) => return Err(err.into()),
                    }
                }
                pairs
            }
            Err(err) => return Err(err.into()),
        };
        done += pairs.iter().filter(|(_, v)| !v.is_empty()).count() as u64;
        store.put_embeddings(model, &pairs).await?;
    }
}

/// Wait before the catch-up's next attempt after `failures` in a row: 2 s doubling, ≤ 5 min.
pub fn retry_delay(failures: u32) -> Duration {
    let secs = 2u64.saturating_mul(1 << failures.saturating_sub(1).min(16));
    Duration::from_secs(secs.min(300))
}

/// Embeds every chunk lacking a vector, forever: at start, after failures (backoff), when woken
/// and every [`CATCH_UP_INTERVAL`]. No-op without embedder.
pub async fn catch_up(k: Knowledge) {
    let Some(embedder) = k.embedder.clone() else {
        return;
    };
    let mut failures = 0u32;
    loop {
        let wait = match embed_missing(k.documents.as_ref(), &embedder, None).await {
            Ok(done) => {
                if done > 0 || failures > 0 {
                    info!(chunks = done, "embeddings caught up");
                }
                failures = 0;
                CATCH_UP_INTERVAL
            }
            Err(err) => {
                failures = failures.saturating_add(1);
                let wait = retry_delay(failures);
                warn!(error = %err, failures, retry_in_s = wait.as_secs(), "embedding chunks failed; BM25 still serves them");
                wait
            }
        };
        tokio::select! {
            _ = k.embed_wake.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// An agent's unit vectors of one model, as of one
/// [`crate::store::DocumentStore::embedding_generation`].
#[derive(Debug)]
pub struct AgentVectors {
    pub model: String,
    pub generation: i64,
    pub ids: Vec<i64>,
    /// Unit vectors (zero vectors left out), parallel to `ids`.
    pub vectors: Vec<Vec<f32>>,
}

impl AgentVectors {
    pub fn new(model: &str, generation: i64, stored: Vec<(i64, Vec<f32>)>) -> Self {
        let mut ids = Vec::with_capacity(stored.len());
        let mut vectors = Vec::with_capacity(stored.len());
        for (id, v) in stored {
            if let Some(unit) = normalized(v) {
                ids.push(id);
                vectors.push(unit);
            }
        }
        Self {
            model: model.to_string(),
            generation,
            ids,
            vectors,
        }
    }

    fn bytes(&self) -> u64 {
        self.vectors
            .iter()
            .map(|v| v.len() as u64 * 4 + 32)
            .sum::<u64>()
            + 64
    }

    /// The `n` chunks nearest `query` (cosine, best first, ties by id); other dimensions skipped.
    pub fn nearest(&self, query: &[f32], n: usize) -> Vec<(i64, f32)> {
        let Some(query) = normalized(query.to_vec()) else {
            return Vec::new();
        };
        let mut scored: Vec<(i64, f32)> = self
            .ids
            .iter()
            .zip(&self.vectors)
            .filter(|(_, v)| v.len() == query.len())
            .map(|(id, v)| (*id, dot(v, &query)))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(n);
        scored
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn normalized(mut v: Vec<f32>) -> Option<Vec<f32>> {
    let norm = dot(&v, &v).sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return None;
    }
    v.iter_mut().for_each(|x| *x /= norm);
    Some(v)
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
            ],
        );
        assert_eq!(set.ids, vec![1, 2, 4, 5], "the zero vector is left out");
        let found = set.nearest(&[3.0, 0.0], 10);
        assert_eq!(
            found.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            vec![2, 5, 1],
            "length does not count, only direction; other dimensions are skipped"
        );
        assert!((found[1].1 - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert_eq!(set.nearest(&[1.0, 0.0], 1).len(), 1);
        assert!(
            set.nearest(&[0.0, 0.0], 5).is_empty(),
            "a zero query finds nothing"
        );
    }

    #[test]
    fn retry_delays_double_up_to_five_minutes() {
        let secs: Vec<u64> = (1..=10).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(secs, vec![2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(retry_delay(u32::MAX).as_secs(), 300);
    }

    #[test]
    fn keys_are_masked_in_messages() {
        assert_eq!(
            mask("bad key sk-123 given", &SecretString::from("sk-123")),
            "bad key [redacted] given"
        );
        assert_eq!(mask("nothing", &SecretString::from("")), "nothing");
    }

    #[test]
    fn the_embedded_text_carries_title_and_headings() {
        let chunk = ChunkText {
            chunk_id: 1.into(),
            title: "Guide".into(),
            heading_path: "Intro > Setup".into(),
            text: "Install it.".into(),
        };
        assert_eq!(embed_input(&chunk), "Guide — Intro > Setup\n\nInstall it.");
        let bare = ChunkText {
            heading_path: String::new(),
            ..chunk
        };
        assert_eq!(embed_input(&bare), "Guide\n\nInstall it.");
    }
}
