//! Embeddings (`EMBEDDING_MODEL`) against the mock provider's `/v1/embeddings`: chunks of
//! uploads and crawled pages get vectors, retrieval fuses BM25 with vector similarity,
//! deletions leave retrieval at once, an endpoint that is down leaves BM25 serving and is
//! caught up later, refused chunks are not asked again, and without `EMBEDDING_MODEL` no
//! embedding request is made.

use std::time::Duration;

use agentchat::{ids::DocumentId, knowledge::embed::embed_input, store::documents::ChunkText};
use axum::{response::Html, routing::get, Router};
use mock_provider::{MockConfig, MockProvider};
use reqwest::multipart::{Form, Part};
use secrecy::SecretString;
use serde_json::{json, Value};

use crate::helpers::*;

const KEY: &str = "sk-embed-secret-key";
const MODEL: &str = "text-embedding-3-small";

/// Shares no word with [`QUESTION`] (BM25 cannot find it); the mock's synonym groups put
/// it near (automobile ~ car, maintenance ~ service): cosine ≈ 0.41.
const CAR: &str = "Automobile maintenance: change engine oil yearly.";
/// Shares `service` with [`QUESTION`] (BM25 finds it); cosine ≈ 0.22, under the
/// vector floor.
const BIKE: &str = "Bicycle service shops true wheels and adjust brakes.";
/// Related to nothing asked here.
const PLANTS: &str = "Photosynthesis turns sunlight into chemical energy inside green leaves.";
const QUESTION: &str = "When is my car due for service?";

/// The app with the OpenAI-compatible endpoint at a fresh mock, and `EMBEDDING_MODEL` =
/// `model`.
async fn app_with(
    model: Option<&str>,
    tweak: impl FnOnce(&mut agentchat::config::Config),
) -> (TestApp, MockProvider) {
    let mock = MockProvider::start(MockConfig {
        api_key: Some(KEY.into()),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let base = mock.base_url();
    let model = model.map(str::to_string);
    let app = spawn_app_with(|c| {
        c.providers.openai_api_key = Some(SecretString::from(KEY));
        c.providers.openai_base_url = base;
        c.providers.embedding_model = model;
        tweak(c);
    })
    .await;
    (app, mock)
}

/// An agent on the offline model, so chats make no request to the mock.
pub(crate) async fn agent(app: &TestApp, token: &str) -> String {
    let res = app
        .post(
            "/api/agents",
            Some(token),
            json!({"name": "Librarian", "systemPrompt": "Answer from the documents.", "model": "agentchat-offline"}),
        )
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    res.json::<Value>().await.unwrap()["agent"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Uploads `text` as a text file and waits until it is indexed; returns its id.
pub(crate) async fn indexed(
    app: &TestApp,
    token: &str,
    agent: &str,
    name: &str,
    text: &str,
) -> String {
    let form = Form::new().part(
        "file",
        Part::bytes(text.as_bytes().to_vec()).file_name(name.to_string()),
    );
    let res = app
        .client
        .post(app.url(&format!("/api/agents/{agent}/knowledge/file")))
        .bearer_auth(token)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let id = res.json::<Value>().await.unwrap()["documentId"]
        .as_str()
        .unwrap()
        .to_string();
    settled(app, token, agent, &id, "indexed").await;
    id
}

/// Polls the document until its status is `want` (at most 30 s); returns it.
async fn settled(app: &TestApp, token: &str, agent: &str, id: &str, want: &str) -> Value {
    for _ in 0..300 {
        let res = app
            .get(&format!("/api/agents/{agent}/knowledge/{id}"), Some(token))
            .await;
        assert_eq!(res.status(), 200);
        let doc = res.json::<Value>().await.unwrap()["document"].clone();
        if doc["status"] == "indexed" || doc["status"] == "failed" {
            assert_eq!(doc["status"], want, "{doc}");
            return doc;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("document {id} did not settle");
}

/// The chat reply to `message`.
async fn ask(app: &TestApp, token: &str, agent: &str, message: &str) -> Value {
    let res = app.chat(token, agent, json!({"message": message})).await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    res.json().await.unwrap()
}

/// The document ids of a reply's sources, in order.
fn source_docs(reply: &Value) -> Vec<String> {
    reply["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["documentId"].as_str().unwrap().to_string())
        .collect()
}

/// Chunks of `document` (or of any) still without a vector of [`MODEL`].
async fn missing(app: &TestApp, document: Option<&str>) -> Vec<ChunkText> {
    app.state
        .store
        .chunks_without_embedding(MODEL, document.map(DocumentId::from).as_ref(), 1000)
        .await
        .unwrap()
}

#[tokio::test]
async fn chunks_of_uploads_and_crawled_pages_get_embeddings_from_the_endpoint() {
    let page = "<!doctype html><html><head><title>Tyres</title></head><body><main><h1>Tyres</h1><p>Check tyre pressure monthly with a gauge.</p></main></body></html>";
    let router = Router::new().route("/", get(move || async move { Html(page) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let site = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let (app, mock) = app_with(Some(MODEL), |c| {
        c.outbound.allowed_private_hosts = vec![format!("127.0.0.1:{}", site.port())];
    })
    .await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;

    let text = String::from_utf8(
        std::fs::read(format!(
            "{}/tests/fixtures/knowledge/Apache-2.0.txt",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    let file = indexed(&app, &user.access, &agent, "license.txt", &text).await;
    let doc = app
        .get(
            &format!("/api/agents/{agent}/knowledge/{file}"),
            Some(&user.access),
        )
        .await
        .json::<Value>()
        .await
        .unwrap()["document"]
        .clone();
    let chunks = doc["chunks"].as_u64().unwrap() as usize;
    assert!(chunks > 1, "{doc}");
    // Indexed means embedded: no chunk is left without a vector, and every chunk went in
    // one batch request (fewer than 64 chunks).
    assert!(missing(&app, Some(&file)).await.is_empty());
    assert_eq!(mock.embedding_requests(), 1);
    let vectors = app
        .state
        .store
        .agent_embeddings(&agent.as_str().into(), MODEL)
        .await
        .unwrap();
    assert_eq!(vectors.len(), chunks);
    // The stored vector is the endpoint's for the chunk's title, headings and text.
    let first = &vectors[0];
    let hit = app
        .state
        .store
        .chunk_hits(&agent.as_str().into(), &[first.chunk_id])
        .await
        .unwrap()
        .pop()
        .unwrap();
    let expected = mock_provider::embedding(&embed_input(&ChunkText {
        chunk_id: hit.chunk_id,
        title: hit.title,
        heading_path: hit.heading_path,
        text: hit.text,
    }));
    assert_eq!(first.vector, expected);
    let request = mock
        .requests()
        .into_iter()
        .find(|r| r.path == "/v1/embeddings")
        .unwrap();
    assert_eq!(request.body["model"], MODEL);
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(request.body["input"].as_array().unwrap().len(), chunks);

    // A crawled page's chunks are embedded too.
    let res = app
        .post(
            &format!("/api/agents/{agent}/knowledge/url"),
            Some(&user.access),
            json!({"url": format!("http://{site}/"), "config": {"crawlDepth": 0, "maxPages": 1}}),
        )
        .await;
    assert_eq!(res.status(), 202, "{}", res.text().await.unwrap());
    let crawl = res.json::<Value>().await.unwrap()["documentId"]
        .as_str()
        .unwrap()
        .to_string();
    settled(&app, &user.access, &agent, &crawl, "indexed").await;
    assert!(missing(&app, Some(&crawl)).await.is_empty());
    assert_eq!(mock.embedding_requests(), 2);
    assert!(
        app.state
            .store
            .agent_embeddings(&agent.as_str().into(), MODEL)
            .await
            .unwrap()
            .len()
            > chunks
    );
}

#[tokio::test]
async fn retrieval_fuses_bm25_and_vector_similarity() {
    let (app, mock) = app_with(Some(MODEL), |_| {}).await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let car = indexed(&app, &user.access, &agent, "car.txt", CAR).await;
    let bike = indexed(&app, &user.access, &agent, "bike.txt", BIKE).await;
    let plants = indexed(&app, &user.access, &agent, "plants.txt", PLANTS).await;
    let before = mock.embedding_requests();

    let reply = ask(&app, &user.access, &agent, QUESTION).await;
    // BM25 finds only the bicycle text (it shares `service`); the vector list finds only
    // the car text (synonyms, no shared word). Both are first in their list: equal fused
    // scores, the tie going to BM25. The plants text is under both floors.
    assert_eq!(
        source_docs(&reply),
        vec![bike.clone(), car.clone()],
        "{reply}"
    );
    assert!(!source_docs(&reply).contains(&plants));
    assert_eq!(reply["ragChunksUsed"], 2);
    for s in reply["sources"].as_array().unwrap() {
        assert_eq!(
            s["score"], 0.5,
            "first in one list of two: half the best fused score"
        );
    }
    // The vector-only chunk reached the prompt (the offline model quotes it).
    assert!(
        reply["message"]
            .as_str()
            .unwrap()
            .contains("change engine oil yearly"),
        "{reply}"
    );
    assert_eq!(
        mock.embedding_requests(),
        before + 1,
        "one request for the query"
    );

    // Agreement wins: a question both lists rank first scores 1.0.
    let reply = ask(&app, &user.access, &agent, "automobile maintenance").await;
    assert_eq!(source_docs(&reply)[0], car, "{reply}");
    assert_eq!(reply["sources"][0]["score"], 1.0);
}

#[tokio::test]
async fn deleted_documents_leave_vector_retrieval_at_once_and_new_ones_join_it() {
    let (app, _mock) = app_with(Some(MODEL), |_| {}).await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let car = indexed(&app, &user.access, &agent, "car.txt", CAR).await;
    assert_eq!(
        source_docs(&ask(&app, &user.access, &agent, QUESTION).await),
        vec![car.clone()]
    );

    let res = app
        .delete(
            &format!("/api/agents/{agent}/knowledge/{car}"),
            Some(&user.access),
        )
        .await;
    assert_eq!(res.status(), 200);
    // The next chat, with the agent's vectors cached in memory, no longer finds it.
    let reply = ask(&app, &user.access, &agent, QUESTION).await;
    assert_eq!(reply["sources"], json!([]), "{reply}");
    assert_eq!(reply["ragChunksUsed"], 0);
    assert!(app
        .state
        .store
        .agent_embeddings(&agent.as_str().into(), MODEL)
        .await
        .unwrap()
        .is_empty());

    // A document added after the vectors were cached is found by the next chat.
    let again = indexed(&app, &user.access, &agent, "car2.txt", CAR).await;
    assert_eq!(
        source_docs(&ask(&app, &user.access, &agent, QUESTION).await),
        vec![again]
    );

    // Deleting the agent drops its vectors with its chunks.
    let res = app
        .delete(&format!("/api/agents/{agent}"), Some(&user.access))
        .await;
    assert_eq!(res.status(), 200);
    assert!(app
        .state
        .store
        .agent_embeddings(&agent.as_str().into(), MODEL)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn an_embedding_endpoint_that_is_down_leaves_bm25_serving_and_is_caught_up() {
    let (app, mock) = app_with(Some(MODEL), |_| {}).await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let car = indexed(&app, &user.access, &agent, "car.txt", CAR).await;

    mock.set_embeddings_status(Some(503));
    // Indexing does not fail: the document is indexed, searchable by BM25, without vectors.
    let bike = indexed(&app, &user.access, &agent, "bike.txt", BIKE).await;
    let doc = settled(&app, &user.access, &agent, &bike, "indexed").await;
    assert!(doc.get("error").is_none_or(Value::is_null), "{doc}");
    assert_eq!(missing(&app, Some(&bike)).await.len(), 1);
    // The query cannot be embedded: the chat is answered from BM25 alone.
    let failed_before = mock.embedding_requests();
    let reply = ask(&app, &user.access, &agent, QUESTION).await;
    assert_eq!(source_docs(&reply), vec![bike.clone()], "{reply}");
    assert_eq!(
        mock.embedding_requests(),
        failed_before + 1,
        "the query was tried"
    );

    // The endpoint is back: the next successful embedding wakes the catch-up, which
    // embeds what the outage left without vectors.
    mock.set_embeddings_status(None);
    indexed(&app, &user.access, &agent, "plants.txt", PLANTS).await;
    let mut left = missing(&app, None).await.len();
    for _ in 0..100 {
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = missing(&app, None).await.len();
    }
    assert_eq!(left, 0, "the outage's chunks were caught up");
    assert_eq!(
        source_docs(&ask(&app, &user.access, &agent, QUESTION).await),
        vec![bike, car]
    );
}

#[tokio::test]
async fn a_chunk_the_endpoint_refuses_stays_bm25_only_and_is_not_asked_again() {
    let (app, mock) = app_with(Some(MODEL), |_| {}).await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    mock.set_embeddings_status(Some(400));
    let doc = indexed(&app, &user.access, &agent, "bike.txt", BIKE).await;
    // The batch, then the chunk alone, were refused; the refusal is recorded.
    assert_eq!(mock.embedding_requests(), 2);
    assert!(missing(&app, Some(&doc)).await.is_empty());
    assert!(app
        .state
        .store
        .agent_embeddings(&agent.as_str().into(), MODEL)
        .await
        .unwrap()
        .is_empty());
    mock.set_embeddings_status(None);
    // Nothing asks for it again (the job woke the catch-up, which found nothing to do),
    // and BM25 still finds it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(mock.embedding_requests(), 2);
    assert_eq!(
        source_docs(&ask(&app, &user.access, &agent, QUESTION).await),
        vec![doc]
    );
}

#[tokio::test]
async fn without_embedding_model_retrieval_is_bm25_only_and_no_embedding_is_requested() {
    let (app, mock) = app_with(None, |_| {}).await;
    assert!(app.state.knowledge.embedder.is_none());
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    indexed(&app, &user.access, &agent, "car.txt", CAR).await;
    let bike = indexed(&app, &user.access, &agent, "bike.txt", BIKE).await;
    let reply = ask(&app, &user.access, &agent, QUESTION).await;
    assert_eq!(source_docs(&reply), vec![bike], "{reply}");
    // The score is BM25's (tiny on a two-document corpus), not a fused share.
    let score = reply["sources"][0]["score"].as_f64().unwrap();
    assert_ne!(score, 0.5, "{reply}");
    assert_eq!(mock.embedding_requests(), 0);
    assert!(mock.requests().iter().all(|r| r.path != "/v1/embeddings"));
    assert!(app
        .state
        .store
        .agent_embeddings(&agent.as_str().into(), MODEL)
        .await
        .unwrap()
        .is_empty());
}
