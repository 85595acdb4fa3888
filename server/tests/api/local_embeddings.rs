//! The built-in embedding model (`EMBEDDING_MODEL=local`, all-MiniLM-L6-v2 as installed by
//! scripts/setup.sh): uploads get vectors stored under the local model's name, a chat finds a
//! chunk by a paraphrase sharing no word with it (the vector half of hybrid retrieval), and a
//! server started on another model folder re-embeds every chunk in the background.

use std::{path::Path, time::Duration};

use agentchat::knowledge::embed::LOCAL;
use serde_json::{json, Value};
use test_support::embedding_model_path as test_model_path;

use crate::{
    embeddings::{agent, indexed},
    helpers::*,
};

/// Shares no word (nor stem) with [`QUESTION`]; all-MiniLM-L6-v2 puts them at cosine ≈ 0.56.
const PLANTS: &str = "Photosynthesis turns sunlight into chemical energy inside green leaves.";
const CAR: &str = "Automobile maintenance: change engine oil yearly.";
const QUESTION: &str = "How do plants make food from light?";

/// The reference model's folder; the test fails without it.
fn reference() -> std::path::PathBuf {
    let path = test_model_path();
    assert!(
        path.join("model.safetensors").is_file(),
        "the reference embedding model (all-MiniLM-L6-v2) is not at {}: run scripts/setup.sh, or set AGENTCHAT_TEST_EMBEDDING_MODEL_PATH to its folder",
        path.display()
    );
    path
}

fn local(c: &mut agentchat::config::Config, folder: &Path) {
    c.providers.embedding_model = Some(LOCAL.into());
    c.providers.embedding_model_path = Some(folder.to_path_buf());
    c.providers.embedding_threads = Some(1);
}

/// Waits (at most 60 s) until the agent has `n` vectors of `model`; returns them.
async fn embedded(
    app: &TestApp,
    agent: &str,
    model: &str,
    n: usize,
) -> Vec<agentchat::store::documents::ChunkVector> {
    for _ in 0..600 {
        let stored = app
            .state
            .store
            .agent_embeddings(&agent.into(), model)
            .await
            .unwrap();
        if stored.len() >= n {
            assert_eq!(stored.len(), n);
            return stored;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the agent's chunks did not get {n} vectors of {model}");
}

async fn sources(app: &TestApp, token: &str, agent: &str, message: &str) -> Vec<String> {
    let res = app.chat(token, agent, json!({"message": message})).await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let reply: Value = res.json().await.unwrap();
    reply["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["documentId"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn the_built_in_model_embeds_chunks_finds_paraphrases_and_re_embeds_after_a_switch() {
    let model = reference();
    let (dir, database, agent_id) = {
        let app = spawn_app_with(|c| local(c, &model)).await;
        let embedder = app.state.knowledge.embedder.clone().expect("an embedder");
        let name = embedder.model().to_string();
        let folder = model.file_name().unwrap().to_string_lossy();
        assert_eq!(name, format!("local:{folder}:53aa51172d14"));
        let user = app.user().await;
        let agent = agent(&app, &user.access).await;
        let plants = indexed(&app, &user.access, &agent, "plants.txt", PLANTS).await;
        indexed(&app, &user.access, &agent, "car.txt", CAR).await;
        // The catch-up embeds them after their jobs, under the local model's name: 384
        // dimensions, unit length.
        let stored = embedded(&app, &agent, &name, 2).await;
        for v in &stored {
            assert_eq!(v.vector.len(), 384);
            let norm: f32 = v.vector.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-3, "{norm}");
        }
        // BM25 alone finds nothing for the paraphrase; the vectors find the plants text.
        let bm25 = app
            .state
            .knowledge
            .search
            .search_chunks(&agent.as_str().into(), QUESTION, 5)
            .await
            .unwrap();
        assert!(bm25.is_empty(), "no shared word: {bm25:?}");
        assert_eq!(
            sources(&app, &user.access, &agent, QUESTION).await,
            vec![plants.clone()]
        );
        (app.dir, app.database, agent)
    };

    // The same data on another model folder (the same files under another name): the
    // catch-up gives every chunk a vector of the new name, with no new upload.
    let renamed = tempfile::tempdir().unwrap();
    let folder = renamed.path().join("minilm-renamed");
    std::fs::create_dir(&folder).unwrap();
    for file in [
        "config.json",
        "tokenizer.json",
        "model.safetensors",
        "sentence_bert_config.json",
    ] {
        std::os::unix::fs::symlink(model.join(file), folder.join(file)).unwrap();
    }
    let app = spawn_app_on(dir, database, |c| local(c, &folder)).await;
    let name = app
        .state
        .knowledge
        .embedder
        .clone()
        .unwrap()
        .model()
        .to_string();
    assert_eq!(name, "local:minilm-renamed:53aa51172d14");
    embedded(&app, &agent_id, &name, 2).await;
    assert!(app
        .state
        .store
        .chunks_without_embedding(&name, None, 100)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_server_with_an_unusable_local_model_refuses_to_start_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = agentchat::config::Config::with_data_dir(
        dir.path().to_path_buf(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .unwrap();
    config.providers.embedding_model = Some(LOCAL.into());
    let err = agentchat::startup::Application::build(config.clone())
        .await
        .err()
        .expect("no model path: no start")
        .to_string();
    assert!(err.starts_with("EMBEDDING_MODEL_PATH is not set"), "{err}");
    config.providers.embedding_model_path = Some(dir.path().join("nothing-here"));
    let err = agentchat::startup::Application::build(config)
        .await
        .err()
        .expect("a missing folder: no start")
        .to_string();
    assert!(
        err.starts_with("EMBEDDING_MODEL_PATH: ") && err.contains("nothing-here is not a folder"),
        "{err}"
    );
}
