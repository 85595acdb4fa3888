//! Chunk embeddings through the OpenAI-compatible endpoint (`OPENAI_BASE_URL`,
//! `OPENAI_API_KEY`, `EMBEDDING_MODEL`) or the built-in CPU model (`EMBEDDING_MODEL=local`,
//! [`local`]), and the in-memory vectors retrieval compares a query with. Embeddings never hold up BM25: failures are retried by [`catch_up`], chunks the
//! endpoint refuses stay BM25-only, and a chat whose query cannot be embedded uses BM25
//! alone (docs/knowledge.md § Embeddings).

pub mod bert;
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
use secrecy::SecretString;
use tracing::{info, warn};

use super::Knowledge;
use crate::{
    config::ProvidersConfig,
    foreground::Foreground,
    ids::{ChunkId, DocumentId},
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
    /// The built-in model's chunk batches yield to `foreground`.
    pub fn from_config(
        config: &ProvidersConfig,
        foreground: Arc<Foreground>,
    ) -> anyhow::Result<Option<Self>> {
        let Some(model) = config.embedding_model.clone() else {
            return Ok(None);
        };
        if model == LOCAL {
            let Some(path) = config.embedding_model_path.as_deref() else {
                anyhow::bail!(
                    "EMBEDDING_MODEL_PATH is not set: EMBEDDING_MODEL=local needs the folder of a sentence-transformers model (README § Embeddings)"
                );
            };
            let embedder = Self::local(path, config.embedding_threads, config.timeout, foreground)?;
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

    /// The built-in model in `dir` on `threads` threads (`None`: [`local::default_threads`]),
    /// its chunk batches yielding to `foreground`; its name is [`local::LocalModel::name`].
    /// Errors: as [`local::LocalModel::load`].
    pub fn local(
        dir: &Path,
        threads: Option<usize>,
        timeout: Duration,
        foreground: Arc<Foreground>,
    ) -> anyhow::Result<Self> {
        let local = local::LocalEmbedder::start(dir, threads, foreground)?;
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

#[cfg(test)]
mod tests {
    use super::*;

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
