//! Cases of documents, chunks and the BM25 index kept in step with them
//! (`knowledge::search`, over the store's primitives).

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use chrono::Utc;

use super::{agent, crawl_document, crawled_document, page};
use agentchat::{
    ids::{AgentId, ChunkId},
    knowledge::search::ChunkSearch,
    store::{documents::ChunkHit, jobs::JobOutcome, AgentRecord, Store},
};

/// [`agentchat::store::DocumentStore::replace_pages`]: pages written together each replace
/// only their own chunks.
pub async fn crawled_pages_written_together_replace_each_pages_chunks(store: Arc<dyn Store>) {
    let doc = crawled_document(store.as_ref()).await;
    let search = ChunkSearch::new(store.clone());
    let now = Utc::now();
    let first = [
        page("https://example.com/a", &["alpha", "apple"]),
        page("https://example.com/b", &["banana"]),
    ];
    assert!(store.replace_pages(&doc.id, &first, now).await.unwrap());
    // A later write replaces page `a` only; `b` keeps its chunks.
    let second = [page("https://example.com/a", &["avocado"])];
    assert!(store.replace_pages(&doc.id, &second, now).await.unwrap());

    let pages = store.document_pages(&doc.id).await.unwrap();
    assert_eq!(pages, vec![second[0].0.clone(), first[1].0.clone()]);
    let found = |word: &'static str| {
        let search = &search;
        let agent = doc.agent_id.clone();
        async move { search.search_chunks(&agent, word, 10).await.unwrap() }
    };
    assert!(
        found("alpha").await.is_empty(),
        "page a's old chunks are gone"
    );
    assert_eq!(found("avocado").await.len(), 1);
    let banana = found("banana").await;
    assert_eq!(banana.len(), 1);
    assert_eq!(banana[0].url.as_deref(), Some("https://example.com/b"));
}

/// [`agentchat::store::DocumentStore::replace_pages`]: nothing is written for a deleted
/// document.
pub async fn crawled_pages_of_a_deleted_document_are_not_written(store: Arc<dyn Store>) {
    let doc = crawled_document(store.as_ref()).await;
    let search = ChunkSearch::new(store.clone());
    assert!(store
        .delete_document(&doc.user_id, &doc.agent_id, &doc.id)
        .await
        .unwrap());
    let pages = [page("https://example.com/a", &["alpha"])];
    assert!(!store
        .replace_pages(&doc.id, &pages, Utc::now())
        .await
        .unwrap());
    assert!(store.document_pages(&doc.id).await.unwrap().is_empty());
    assert!(search
        .search_chunks(&doc.agent_id, "alpha", 10)
        .await
        .unwrap()
        .is_empty());
}

/// Documents each written, indexed and deleted at once (as a worker still indexing a
/// document its owner deletes): [`agentchat::store::DocumentStore::replace_pages`],
/// [`agentchat::store::DocumentStore::replace_chunks`] and
/// [`agentchat::store::jobs::JobQueue::complete_job`] each either happen before the delete
/// (which then removes what they wrote) or find the document gone; none fails, and
/// nothing of the documents is left.
pub async fn documents_deleted_while_written_leave_nothing_behind(store: Arc<dyn Store>) {
    const DOCUMENTS: usize = 24;
    let first = crawled_document(store.as_ref()).await;
    let (agent, user) = (first.agent_id.clone(), first.user_id.clone());
    let mut docs = vec![first];
    for i in 1..DOCUMENTS {
        let url = format!("https://site{i}.example/");
        docs.push(crawl_document(store.as_ref(), &format!("site{i}"), &agent, &user, &url).await);
    }
    let now = Utc::now();
    let mut jobs = Vec::new();
    while let Some(job) = store
        .claim_job(now, now + chrono::Duration::seconds(60))
        .await
        .unwrap()
    {
        jobs.push(job);
    }
    assert_eq!(jobs.len(), DOCUMENTS);
    let mut tasks = Vec::new();
    for job in jobs {
        let doc = docs
            .iter()
            .find(|d| d.id == job.document_id)
            .expect("a job of one of the documents")
            .clone();
        let url = doc.url.clone().unwrap_or_default();
        let pages = vec![page(&url, &["alpha", "beta", "gamma"])];
        let chunks = page(&url, &["delta"]).1;
        let s = store.clone();
        let d = doc.clone();
        tasks.push(tokio::spawn(async move {
            s.replace_pages(&d.id, &pages, Utc::now()).await.map(|_| ())
        }));
        let s = store.clone();
        let d = doc.clone();
        tasks.push(tokio::spawn(async move {
            s.replace_chunks(&d.id, &chunks).await.map(|_| ())
        }));
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            let indexed = JobOutcome::Indexed {
                pages: Some(1),
                bytes: 10,
                progress: (1, 1),
                refresh: None,
            };
            s.complete_job(&job, indexed, Utc::now()).await.map(|_| ())
        }));
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            s.delete_document(&doc.user_id, &doc.agent_id, &doc.id)
                .await
                .map(|deleted| assert!(deleted, "the document was there to delete"))
        }));
    }
    for task in tasks {
        task.await
            .expect("a task panicked")
            .expect("a write beside a delete failed");
    }
    assert!(store
        .list_documents(&user, &agent)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .chunk_ids_up_to(&agent, ChunkId::from(i64::MAX))
        .await
        .unwrap()
        .is_empty());
    for doc in &docs {
        assert!(store.document_pages(&doc.id).await.unwrap().is_empty());
    }
    let search = ChunkSearch::new(store.clone());
    assert!(search
        .search_chunks(&agent, "alpha delta", 10)
        .await
        .unwrap()
        .is_empty());
}

/// The BM25 index learns of new chunks as those above the largest id it has seen, so
/// an id must never come back after the chunk holding it (the newest) is deleted.
pub async fn chunk_ids_only_grow(store: Arc<dyn Store>) {
    let doc = crawled_document(store.as_ref()).await;
    let ids = || store.chunk_ids_up_to(&doc.agent_id, ChunkId::from(i64::MAX));
    let pages = [page("https://example.com/a", &["alpha", "beta"])];
    assert!(store
        .replace_pages(&doc.id, &pages, Utc::now())
        .await
        .unwrap());
    let first = ids().await.unwrap();
    store.retain_pages(&doc.id, &[]).await.unwrap();
    assert!(ids().await.unwrap().is_empty());
    let pages = [page("https://example.com/a", &["gamma", "delta"])];
    assert!(store
        .replace_pages(&doc.id, &pages, Utc::now())
        .await
        .unwrap());
    let second = ids().await.unwrap();
    assert_eq!(second.len(), 2);
    assert!(
        second[0] > *first.last().unwrap(),
        "{second:?} reuses ids of {first:?}"
    );
}

/// [`agentchat::store::DocumentStore::chunk_generation`]: absent before the agent's first
/// chunk, changed by every write or delete of its chunks (and of its embeddings for the
/// embedding generation), untouched by another agent's, and gone with the agent.
pub async fn the_chunk_generation_changes_with_every_chunk_write_and_delete(store: Arc<dyn Store>) {
    let doc = crawled_document(store.as_ref()).await;
    let agent_id = doc.agent_id.clone();
    let generation = || store.chunk_generation(&agent_id);
    assert_eq!(generation().await.unwrap(), None, "no chunk written yet");
    let mut seen = Vec::new();
    let mut changed = |g: Option<i64>, what: &str| {
        let g = g.unwrap_or_else(|| panic!("no generation after {what}"));
        assert!(!seen.contains(&g), "{what} left the generation at {g}");
        seen.push(g);
    };
    let now = Utc::now();
    let pages = [page("https://example.com/a", &["alpha", "beta"])];
    assert!(store.replace_pages(&doc.id, &pages, now).await.unwrap());
    changed(generation().await.unwrap(), "writing pages");
    let other = crawl_document(
        store.as_ref(),
        "d2",
        &agent_id,
        &doc.user_id,
        "https://x.example/",
    )
    .await;
    let chunks = page("https://x.example/", &["gamma"]).1;
    assert!(store.replace_chunks(&other.id, &chunks).await.unwrap());
    changed(generation().await.unwrap(), "replacing chunks");
    assert!(store.replace_chunks(&other.id, &[]).await.unwrap());
    changed(generation().await.unwrap(), "replacing chunks with none");
    store.retain_pages(&doc.id, &[]).await.unwrap();
    changed(generation().await.unwrap(), "removing pages");
    assert!(store
        .chunk_ids_up_to(&agent_id, ChunkId::from(i64::MAX))
        .await
        .unwrap()
        .is_empty());

    // Another agent's chunks leave this agent's generation alone.
    let before = generation().await.unwrap();
    let a2 = agent(store.as_ref(), "a2", &doc.user_id).await.id;
    let elsewhere = crawl_document(
        store.as_ref(),
        "d3",
        &a2,
        &doc.user_id,
        "https://y.example/",
    )
    .await;
    assert!(store
        .replace_pages(
            &elsewhere.id,
            &[page("https://y.example/", &["delta"])],
            now
        )
        .await
        .unwrap());
    assert_eq!(generation().await.unwrap(), before);

    // Embeddings: written, then deleted with their chunk's document.
    assert!(store.replace_pages(&doc.id, &pages, now).await.unwrap());
    changed(generation().await.unwrap(), "writing pages again");
    let ids = store
        .chunk_ids_up_to(&agent_id, ChunkId::from(i64::MAX))
        .await
        .unwrap();
    let e0 = store.embedding_generation(&agent_id).await.unwrap();
    assert_eq!(e0, 0, "no embedding yet");
    let vectors: Vec<(ChunkId, Vec<f32>)> = ids.iter().map(|id| (*id, vec![1.0, 0.0])).collect();
    store.put_embeddings("model", &vectors).await.unwrap();
    let e1 = store.embedding_generation(&agent_id).await.unwrap();
    assert_ne!(e1, e0, "writing embeddings");
    assert_eq!(
        store
            .agent_embeddings(&agent_id, "model")
            .await
            .unwrap()
            .len(),
        2
    );
    assert!(store
        .delete_document(&doc.user_id, &agent_id, &doc.id)
        .await
        .unwrap());
    changed(generation().await.unwrap(), "deleting the document");
    assert_ne!(store.embedding_generation(&agent_id).await.unwrap(), e1);
    assert!(store
        .agent_embeddings(&agent_id, "model")
        .await
        .unwrap()
        .is_empty());

    assert!(store.delete_agent(&doc.user_id, &agent_id).await.unwrap());
    assert_eq!(generation().await.unwrap(), None, "gone with the agent");
    assert_eq!(store.embedding_generation(&agent_id).await.unwrap(), 0);
}

fn words(hits: &[ChunkHit]) -> Vec<&str> {
    hits.iter().map(|h| h.text.as_str()).collect()
}

/// The texts of the agent's best 10 chunks for `question`, best first.
async fn texts(search: &ChunkSearch, agent: &AgentId, question: &str) -> Vec<String> {
    let hits = search.search_chunks(agent, question, 10).await.unwrap();
    hits.into_iter().map(|h| h.text).collect()
}

/// A search sees every chunk written or deleted before it, whichever process wrote it:
/// the index checks the agent's chunk generation each time. (Writes never touch a
/// search's indexes, so writing through the store stands for any other process.)
pub async fn searches_see_chunks_written_by_another_process_at_once(store: Arc<dyn Store>) {
    let doc = crawled_document(store.as_ref()).await;
    let search = ChunkSearch::new(store.clone());
    let other = store.as_ref();
    let agent = doc.agent_id.clone();
    assert!(texts(&search, &agent, "alpha").await.is_empty());
    let pages = [
        page("https://example.com/a", &["alpha", "alpha beta"]),
        page("https://example.com/b", &["beta"]),
    ];
    assert!(other
        .replace_pages(&doc.id, &pages, Utc::now())
        .await
        .unwrap());
    let found = search.search_chunks(&agent, "alpha", 10).await.unwrap();
    assert_eq!(
        words(&found),
        ["alpha", "alpha beta"],
        "added chunks are found"
    );
    assert!(found[0].score > found[1].score && found[1].score > 0.0);
    assert_eq!(found[0].url.as_deref(), Some("https://example.com/a"));
    // A page refreshed with new text: its old chunks go, the new ones come in.
    let pages = [page("https://example.com/a", &["gamma"])];
    assert!(other
        .replace_pages(&doc.id, &pages, Utc::now())
        .await
        .unwrap());
    assert!(texts(&search, &agent, "alpha").await.is_empty());
    assert_eq!(texts(&search, &agent, "gamma").await, ["gamma"]);
    assert_eq!(texts(&search, &agent, "beta").await, ["beta"]);
    // The whole document deleted elsewhere.
    assert!(other
        .delete_document(&doc.user_id, &agent, &doc.id)
        .await
        .unwrap());
    assert!(texts(&search, &agent, "beta gamma").await.is_empty());
    // The agent deleted: its index is dropped.
    assert!(other.delete_agent(&doc.user_id, &agent).await.unwrap());
    assert!(texts(&search, &agent, "beta").await.is_empty());
    assert_eq!(
        search.cached_agents(),
        0,
        "a deleted agent's index is not kept"
    );
}

/// A search dropped at any point while it builds the index (the chat's client left)
/// leaves nothing half-built behind: the next search ranks as a fresh process does.
pub async fn an_interrupted_index_build_is_started_over(store: Arc<dyn Store>) {
    let doc = crawled_document(store.as_ref()).await;
    let search = ChunkSearch::new(store.clone());
    // More chunks than one read step of the index, so a build has several steps.
    let texts: Vec<String> = (0..4_500)
        .map(|i| format!("common word{} other{}", i % 97, i % 13))
        .collect();
    let words: Vec<&str> = texts.iter().map(String::as_str).collect();
    let pages = [page("https://example.com/a", &words)];
    assert!(store
        .replace_pages(&doc.id, &pages, Utc::now())
        .await
        .unwrap());
    let fresh = ChunkSearch::new(store.clone());
    let question = "common word5 other7";
    let expected = fresh
        .search_chunks(&doc.agent_id, question, 20)
        .await
        .unwrap();
    assert_eq!(expected.len(), 20);
    let started = std::time::Instant::now();
    search
        .search_chunks(&doc.agent_id, question, 20)
        .await
        .unwrap();
    let whole_build = started.elapsed();
    search.forget(&doc.agent_id);
    // Interrupted at tenths of a whole build's time: while the generation is read,
    // while chunks are read, while they are analysed.
    let mut interrupted = 0;
    for tenth in 1..10 {
        let after = whole_build * tenth / 10;
        let pending = search.search_chunks(&doc.agent_id, question, 20);
        if tokio::time::timeout(after, pending).await.is_err() {
            interrupted += 1;
        }
        let found = search
            .search_chunks(&doc.agent_id, question, 20)
            .await
            .unwrap();
        assert_eq!(found, expected, "after a search dropped at {after:?}");
        search.forget(&doc.agent_id);
    }
    assert!(interrupted > 0, "no search was interrupted");
}

/// Another agent's chunks neither match nor change the statistics of a search.
pub async fn searches_are_scoped_to_the_agent(store: Arc<dyn Store>) {
    let doc = crawled_document(store.as_ref()).await;
    let search = ChunkSearch::new(store.clone());
    let pages = [page(
        "https://example.com/a",
        &["shared words", "shared other"],
    )];
    assert!(store
        .replace_pages(&doc.id, &pages, Utc::now())
        .await
        .unwrap());
    let first = search
        .search_chunks(&doc.agent_id, "shared", 10)
        .await
        .unwrap();
    let agent = AgentRecord {
        id: "a2".into(),
        name: "second".into(),
        ..store
            .agent(&doc.user_id, &doc.agent_id)
            .await
            .unwrap()
            .unwrap()
    };
    store.create_agent(&agent, 100).await.unwrap();
    let second = crawl_document(
        store.as_ref(),
        "d2",
        &agent.id,
        &doc.user_id,
        "https://example.org/",
    )
    .await;
    let pages = [page(
        "https://example.org/x",
        &["shared", "shared", "shared", "only here"],
    )];
    assert!(store
        .replace_pages(&second.id, &pages, Utc::now())
        .await
        .unwrap());
    assert!(search
        .search_chunks(&doc.agent_id, "only here", 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        search
            .search_chunks(&doc.agent_id, "shared", 10)
            .await
            .unwrap(),
        first,
        "the same hits and scores as before the other agent had chunks"
    );
    assert_eq!(
        search
            .search_chunks(&agent.id, "shared", 10)
            .await
            .unwrap()
            .len(),
        3
    );
}

/// Rounds of pages each writer writes in
/// [`two_interleaved_chunk_writers_leave_nothing_out_of_the_index`].
const WRITER_ROUNDS: usize = 20;
/// Chunks per page there.
const CHUNKS_PER_PAGE: usize = 5;

/// The chunk-id rule of [`agentchat::store::DocumentStore`] (ids visible in increasing order
/// per agent): two documents of one agent are written at once, page after page, while a
/// search keeps bringing the agent's index up to date from the store's primitives; then
/// every chunk written is in that index (found by its own word), none left behind below
/// the largest id the index had seen.
pub async fn two_interleaved_chunk_writers_leave_nothing_out_of_the_index(store: Arc<dyn Store>) {
    let first = crawled_document(store.as_ref()).await;
    let (agent, user) = (first.agent_id.clone(), first.user_id.clone());
    let second = crawl_document(store.as_ref(), "d2", &agent, &user, "https://two.example/").await;
    let search = ChunkSearch::new(store.clone());
    let writing = Arc::new(AtomicBool::new(true));
    let reader = {
        let (search, agent, writing) = (search.clone(), agent.clone(), writing.clone());
        tokio::spawn(async move {
            let mut updates = 0u32;
            while writing.load(Ordering::Acquire) {
                search.search_chunks(&agent, "common", 1).await.unwrap();
                updates += 1;
                tokio::task::yield_now().await;
            }
            updates
        })
    };
    let writers: Vec<_> = [first.id.clone(), second.id.clone()]
        .into_iter()
        .enumerate()
        .map(|(w, doc_id)| {
            let store = store.clone();
            tokio::spawn(async move {
                for round in 0..WRITER_ROUNDS {
                    let texts: Vec<String> = (0..CHUNKS_PER_PAGE)
                        .map(|c| format!("common w{w}r{round}c{c}"))
                        .collect();
                    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
                    let url = format!("https://writer{w}.example/{round}");
                    let pages = [page(&url, &texts)];
                    assert!(store
                        .replace_pages(&doc_id, &pages, Utc::now())
                        .await
                        .unwrap());
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.expect("a writer panicked");
    }
    // Let the reader see the last writes too before it stops.
    tokio::time::sleep(Duration::from_millis(20)).await;
    writing.store(false, Ordering::Release);
    let updates = reader.await.expect("the reader panicked");
    assert!(updates > 0, "the index was never read during the writes");
    let stored = store
        .chunk_ids_up_to(&agent, ChunkId::from(i64::MAX))
        .await
        .unwrap();
    assert_eq!(stored.len(), 2 * WRITER_ROUNDS * CHUNKS_PER_PAGE);
    let mut missing = Vec::new();
    for w in 0..2 {
        for round in 0..WRITER_ROUNDS {
            for c in 0..CHUNKS_PER_PAGE {
                let word = format!("w{w}r{round}c{c}");
                let hits = search.search_chunks(&agent, &word, 1).await.unwrap();
                let text = format!("common {word}");
                if hits.first().map(|h| h.text.as_str()) != Some(text.as_str()) {
                    missing.push(word);
                }
            }
        }
    }
    assert!(missing.is_empty(), "left out of the index: {missing:?}");
}
