//! The providers part: the language-model and embedding endpoints.

use secrecy::SecretString;

use super::Settings;

/// The language-model providers (start-up builds [`crate::llm::Models`] from them) and the
/// embedding model at the OpenAI-compatible one or built in (`knowledge::embed::Embedder`).
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
    /// `PROVIDER_TIMEOUT_SECS`: longest wait for a reply's first token (retries included)
    /// and longest silence inside a reply; past it the chat answers 504.
    pub timeout: std::time::Duration,
    /// `EMBEDDING_MODEL`: embeddings via the OpenAI-compatible endpoint, or `local` for the
    /// built-in model at `embedding_model_path`; unset: BM25 only.
    pub embedding_model: Option<String>,
    /// `EMBEDDING_MODEL_PATH`: the sentence-transformers folder `local` runs.
    pub embedding_model_path: Option<std::path::PathBuf>,
    /// `EMBEDDING_THREADS`: chunk-batch threads of the built-in model; `None`: see
    /// `knowledge::embed::local::default_threads`.
    pub embedding_threads: Option<usize>,
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
            embedding_model_path: None,
            embedding_threads: None,
        }
    }
}

impl ProvidersConfig {
    /// Takes the provider, model and timeout variables from `settings`.
    pub(super) fn apply(&mut self, settings: &Settings) {
        self.openai_api_key = settings.openai_api_key.clone().map(SecretString::from);
        self.openai_base_url = settings.openai_base_url.clone();
        self.anthropic_api_key = settings.anthropic_api_key.clone().map(SecretString::from);
        self.anthropic_base_url = settings.anthropic_base_url.clone();
        self.default_model = settings.default_model.clone();
        self.timeout = std::time::Duration::from_secs(settings.provider_timeout_secs);
        self.embedding_model = settings.embedding_model.clone();
        self.embedding_model_path = settings.embedding_model_path.clone();
        self.embedding_threads = settings.embedding_threads;
    }
}
