//! Test support for AgentChat, a dev-dependency of the server and a dependency of the
//! benchmarks, so that none of it ships in the `agentchat` library: [`conformance`], the
//! store rules every backend must keep, [`scratch`] PostgreSQL databases, [`sse`] event
//! streams read frame by frame, and where the
//! reference embedding model is ([`embedding_model_path`]).

pub mod conformance;
pub mod scratch;
pub mod sse;

use std::path::PathBuf;

/// The sentence-transformers folder of the reference embedding model (all-MiniLM-L6-v2):
/// `AGENTCHAT_TEST_EMBEDDING_MODEL_PATH`, else where `scripts/setup.sh` installs it
/// (`~/.cache/agentchat/models/all-MiniLM-L6-v2`). Not checked to exist.
pub fn embedding_model_path() -> PathBuf {
    if let Some(path) = std::env::var_os("AGENTCHAT_TEST_EMBEDDING_MODEL_PATH") {
        return PathBuf::from(path);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache/agentchat/models/all-MiniLM-L6-v2")
}
