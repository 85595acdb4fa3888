//! Chunk embeddings through the OpenAI-compatible endpoint (`OPENAI_BASE_URL`,
//! `OPENAI_API_KEY`, `EMBEDDING_MODEL`) or the built-in CPU model (`EMBEDDING_MODEL=local`,
//! [`local`]), and the in-memory vectors retrieval compares a query with. Embeddings never hold up BM25: failures are retried by [`catch_up`], chunks the
//! endpoint refuses stay BM25-only, and a chat whose query cannot be embedded uses BM25
//! alone (docs/knowledge.md § Embeddings).

pub mod local;

use std::{
    path::Path,
    sync::{
        atomic::{AtomicI64, Ordering},
        Arc,
    },
    time::Duration,
};

use genai::{adapter::AdapterKind, embed::EmbedRequest};
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

/// Where vectors come from: the OpenAI-compatible endpoint, or the built-in model.
enum Source {
    Remote {
        client: genai::Client,
        base_url: String,
        key: SecretString,
    },
    Local(local::LocalEmbedder),
}

/// The embedding model: a client of the endpoint, or the built-in CPU model
/// (`EMBEDDING_MODEL=local`, [`local`]). Both fail the same way ([`ProviderError`]).
pub struct Embedder {
    source: Source,
    model: String,
    timeout: Duration,
    cool_until_ms: AtomicI64,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is left out on purpose.
        let mut d = f.debug_struct("Embedder");
        match &self.source {
            Source::Remote { base_url, .. } => d.field("base_url", base_url),
            Source::Local(local) => d.field("local", local),
        };
        d.field("model", &self.model).finish_non_exhaustive()
    }
}

/// The `EMBEDDING_MODEL` value that selects the built-in model.
pub const LOCAL: &str = "local";

impl Embedder {
    /// `None` without `EMBEDDING_MODEL`, or with a remote model and no `OPENAI_API_KEY`
    /// (warned). `local` loads the model at `EMBEDDING_MODEL_PATH`. Errors (one line naming the
    /// variable): `local` without `EMBEDDING_MODEL_PATH` or with an unusable folder
    /// ([`local::LocalModel::load`]); no HTTP client.
    pub fn from_config(config: &ProvidersConfig) -> anyhow::Result<Option<Self>> {
        let Some(model) = config.embedding_model.clone() else {
            return Ok(None);
        };
        if model == LOCAL {
            let Some(path) = config.embedding_model_path.as_deref() else {
                anyhow::bail!(
                    "EMBEDDING_MODEL_PATH is not set: EMBEDDING_MODEL=local needs the folder of a sentence-transformers model (README § Embeddings)"
                );
            };
            let embedder = Self::local(path, config.embedding_threads, config.timeout)?;
            info!(model = %embedder.model, "built-in embedding model loaded");
            return Ok(Some(embedder));
        }
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
            source: Source::Remote {
                client,
                base_url: endpoint_url(base_url),
                key,
            },
            model: model.to_string(),
            timeout,
            cool_until_ms: AtomicI64::new(0),
        })
    }

    /// The built-in model in `dir` on `threads` threads (`None`: [`local::default_threads`]);
    /// its name is [`local::LocalModel::name`]. Errors: as [`local::LocalModel::load`].
    pub fn local(dir: &Path, threads: Option<usize>, timeout: Duration) -> anyhow::Result<Self> {
        let local = local::LocalEmbedder::start(dir, threads)?;
        Ok(Self {
            model: local.name().to_string(),
            source: Source::Local(local),
            timeout,
            cool_until_ms: AtomicI64::new(0),
        })
    }

    /// The model name, stored beside every vector.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Whether this is the built-in model (`EMBEDDING_MODEL=local`).
    pub fn is_local(&self) -> bool {
        matches!(self.source, Source::Local(_))
    }

    fn error(&self, err: &genai::Error, key: &SecretString) -> ProviderError {
        let (kind, detail) = classify(err);
        let detail = mask(&detail, key);
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
        let (client, base_url, key) = match &self.source {
            Source::Remote {
                client,
                base_url,
                key,
            } => (client, base_url, key),
            Source::Local(local) => return local_result(local.embed(&texts).await),
        };
        let expected = texts.len();
        let target = target(base_url, key, AdapterKind::OpenAI, &self.model);
        let call = client.exec_embed(target, EmbedRequest::new_batch(texts), None);
        let response = match tokio::time::timeout(timeout, call).await {
            Ok(Ok(response)) => response,
            Ok(Err(err)) => return Err(self.error(&err, key)),
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

    /// The embeddings of `texts`, in order, [`BATCH`] at a time. Errors: the first failed request
    /// (for the built-in model: inference failed, kind `Other`).
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ProviderError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            out.extend(self.request(batch.to_vec(), self.timeout).await?);
        }
        Ok(out)
    }

    /// A chat query's embedding within [`QUERY_TIMEOUT`]; after a timeout queries fail at once for
    /// [`QUERY_COOL_DOWN`]. The built-in model runs it before queued chunk batches. Errors: as
    /// [`Embedder::embed`].
    pub async fn embed_query(&self, text: &str) -> Result<Vec<f32>, ProviderError> {
        let now = chrono::Utc::now().timestamp_millis();
        if now < self.cool_until_ms.load(Ordering::Relaxed) {
            return Err(ProviderError {
                kind: ProviderErrorKind::Timeout,
                message: "The embedding model timed out recently; not asked again yet".into(),
            });
        }
        let limit = QUERY_TIMEOUT.min(self.timeout);
        let result = match &self.source {
            Source::Remote { .. } => self.request(vec![text.to_string()], limit).await,
            Source::Local(local) => {
                match tokio::time::timeout(limit, local.embed_query(text)).await {
                    Ok(result) => local_result(result.map(|v| vec![v])),
                    Err(_) => Err(ProviderError {
                        kind: ProviderErrorKind::Timeout,
                        message: format!(
                            "The built-in embedding model failed: no answer within {} s",
                            limit.as_secs()
                        ),
                    }),
                }
            }
        };
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

/// The built-in model's answer as the endpoint's would be: a failure is of kind `Other`.
fn local_result(result: Result<Vec<Vec<f32>>, String>) -> Result<Vec<Vec<f32>>, ProviderError> {
    result.map_err(|why| ProviderError {
        kind: ProviderErrorKind::Other,
        message: format!("The built-in embedding model failed: {why}"),
    })
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
///
/// With the built-in model a document's call (a job's) returns 0 at once: the CPU model would
/// hold the job, and a crawl's page loop, for as long as it takes, delaying BM25; the
/// catch-up, which the job wakes when it ends, embeds the chunks in the background.
pub async fn embed_missing(
    store: &dyn DocumentStore,
    embedder: &Embedder,
    document_id: Option<&DocumentId>,
) -> Result<u64, EmbedFailure> {
    if document_id.is_some() && embedder.is_local() {
        return Ok(0);
    }
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
