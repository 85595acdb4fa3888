//! The providers part: the language-model and embedding endpoints.

use anyhow::Context;
use secrecy::SecretString;

use super::var;

/// The language-model providers (start-up builds [`crate::llm::Models`] from them) and the
/// embedding model at the OpenAI-compatible one (`knowledge::embed::Embedder`).
#[derive(Clone)]
pub struct ProvidersConfig {
    /// `OPENAI_API_KEY`: enables the OpenAI-compatible provider.
    pub openai_api_key: Option<SecretString>,
    /// `OPENAI_BASE_URL`, default `https://api.openai.com/v1/` (Ollama:
    /// `http://localhost:11434/v1/`).
    pub openai_base_url: String,
    /// `ANTHROPIC_API_KEY`: enables the Anthropic provider.
    pub anthropic_api_key: Option<SecretString>,
    /// `ANTHROPIC_BASE_URL`, default `https://api.anthropic.com/v1/`.
    pub anthropic_base_url: String,
    /// `DEFAULT_MODEL`: the model of agents that name none.
    pub default_model: Option<String>,
    /// `PROVIDER_TIMEOUT_SECS`: longest wait for a reply's first token, retries and their
    /// backoff included, and longest silence inside a reply, default 60 s; past it the chat
    /// answers 504 (an error frame in a stream).
    pub timeout: std::time::Duration,
    /// `EMBEDDING_MODEL`: embeddings through the OpenAI-compatible endpoint; unset means
    /// BM25 retrieval only.
    pub embedding_model: Option<String>,
}

impl Default for ProvidersConfig {
    fn default() -> Self {
        Self {
            openai_api_key: None,
            openai_base_url: "https://api.openai.com/v1/".into(),
            anthropic_api_key: None,
            anthropic_base_url: "https://api.anthropic.com/v1/".into(),
            default_model: None,
            timeout: std::time::Duration::from_secs(60),
            embedding_model: None,
        }
    }
}

impl ProvidersConfig {
    /// Reads `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `DEFAULT_MODEL`, `EMBEDDING_MODEL` and,
    /// when set, `OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL` and `PROVIDER_TIMEOUT_SECS`.
    ///
    /// Errors: a timeout that is not whole seconds.
    pub(super) fn override_from_env(&mut self) -> anyhow::Result<()> {
        self.openai_api_key = var("OPENAI_API_KEY").map(SecretString::from);
        if let Some(v) = var("OPENAI_BASE_URL") {
            self.openai_base_url = v;
        }
        self.anthropic_api_key = var("ANTHROPIC_API_KEY").map(SecretString::from);
        if let Some(v) = var("ANTHROPIC_BASE_URL") {
            self.anthropic_base_url = v;
        }
        self.default_model = var("DEFAULT_MODEL");
        if let Some(v) = var("PROVIDER_TIMEOUT_SECS") {
            self.timeout = std::time::Duration::from_secs(
                v.parse()
                    .context("PROVIDER_TIMEOUT_SECS must be whole seconds")?,
            );
        }
        self.embedding_model = var("EMBEDDING_MODEL");
        Ok(())
    }
}
