//! Chunk embeddings through the OpenAI-compatible endpoint (`OPENAI_BASE_URL`,
//! `OPENAI_API_KEY`, `EMBEDDING_MODEL`) and the in-memory vectors retrieval compares a query
//! with. Embeddings never hold up BM25: failures are retried by [`catch_up`], chunks the
//! endpoint refuses stay BM25-only, and a chat whose query cannot be embedded uses BM25
//! alone (docs/knowledge.md § Embeddings).

use std::{
    sync::atomic::{AtomicI64, Ordering},
    time::Duration,
};

use genai::{adapter::AdapterKind, embed::EmbedRequest, ServiceTarget};
use secrecy::SecretString;
use tracing::{info, warn};

use super::Knowledge;
use crate::{
    config::ProvidersConfig,
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
