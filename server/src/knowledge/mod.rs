//! The knowledge base: uploads and crawled sites go in, chunks come out into every chat.
//!
//! - [`extract`]: what a file is (by content) and its text, bounded against hostile files.
//! - [`sandbox`]: extraction and chunking in child processes with a deadline and a memory
//!   limit, so that a hostile file can crash or stall only its reader.
//! - [`chunk`]: token-bounded chunks with overlap, keeping heading path and position.
//! - [`crawl`]: the crawling policy (crawl depth, page limit, patterns, robots.txt,
//!   sitemaps, canonical URLs).
//! - [`worker`]: durable jobs from the database, run by a worker pool with leases, so a
//!   job interrupted by a crash or restart is retried.
//! - [`embed`]: chunk embeddings through the OpenAI-compatible endpoint when
//!   `EMBEDDING_MODEL` is set, their failure semantics, and the in-memory vectors.
//! - [`search`]: BM25 ranking (word analysis, each agent's in-memory inverted index, top-k
//!   search with MaxScore pruning), the indexes kept in step with the store over a few of
//!   its primitives, and retrieval scoped to an agent, fused with vector similarity by
//!   reciprocal rank fusion when embeddings are configured.
//! - [`eval`]: hit@1, hit@5 and MRR of retrieval on a question set.
//! - [`service`]: the owner's use cases (add a file or a site, refresh, delete) over
//!   these parts.

pub mod chunk;
pub mod crawl;
pub mod embed;
pub mod eval;
pub mod extract;
pub mod sandbox;
pub mod search;
pub mod service;
pub mod worker;

use std::sync::Arc;

use tokio::sync::Notify;

use crate::{
    cluster::{Bus, Queue},
    config::{KnowledgeConfig, OutboundConfig, ProvidersConfig},
    outbound::{FetchLimits, NetPolicy, SafeClient},
    store::{uploads::UploadStore, DocumentStore, JobQueue},
};

/// The knowledge base's shared parts (uploads, HTTP client, job wake-up).
#[derive(Clone)]
pub struct Knowledge {
    /// Documents, their chunks and embeddings.
    pub documents: Arc<dyn DocumentStore>,
    /// The durable queue of ingestion and crawl jobs.
    pub jobs: Arc<dyn JobQueue>,
    /// BM25 search over the agents' chunks, with their indexes kept in memory.
    pub search: search::ChunkSearch,
    /// Where uploads are kept until (and after) they are indexed, until their document is
    /// deleted: `DATA_DIR/uploads/{documentId}` with SQLite, the database with PostgreSQL
    /// ([`crate::store::uploads`]).
    pub uploads: Arc<dyn UploadStore>,
    /// The SSRF-safe client of crawls.
    pub client: Arc<SafeClient>,
    /// The rules the client enforces (also used to refuse URLs at submission).
    pub policy: Arc<NetPolicy>,
    /// Wakes an idle worker when a job is queued.
    pub wake: Arc<Notify>,
    /// Limits of text extraction (checked inside the readers; `deadline` is
    /// `EXTRACT_TIMEOUT_SECS`).
    pub limits: Arc<extract::ExtractLimits>,
    /// The extraction child processes every upload and crawled page is read in.
    pub sandbox: Arc<sandbox::Sandbox>,
    /// Largest upload in bytes (`MAX_UPLOAD_BYTES`).
    pub max_upload_bytes: usize,
    /// The embedding client when `EMBEDDING_MODEL` is set; `None` means BM25 only and no
    /// embedding request is ever made.
    pub embedder: Option<Arc<embed::Embedder>>,
    /// Agents' vectors kept in memory between queries.
    pub vectors: embed::VectorCache,
    /// Wakes the embedding catch-up task ([`embed::catch_up`]).
    pub embed_wake: Arc<Notify>,
    /// Webhook events of jobs (`document.indexed`, `document.failed`, `crawl.completed`).
    pub events: crate::webhooks::Events,
    /// The service clock jobs read the time from (claims, leases, recorded times).
    pub clock: crate::clock::Clock,
    /// Where queued jobs are announced to the other instances ([`Knowledge::with_bus`];
    /// local by default).
    bus: Bus,
}

impl Knowledge {
    /// The knowledge base of `config` over `documents`, `jobs` and `uploads` (one store's
    /// parts, and its upload store: [`crate::store::uploads::for_backend`]), crawling
    /// within the exceptions of `outbound` and embedding with the model of `providers`
    /// (when set); its jobs emit webhook events through `events` and read the time from
    /// `clock`.
    ///
    /// Errors: a malformed `ALLOWED_PRIVATE_HOSTS` entry, or an HTTP client (crawls,
    /// embeddings) that cannot be built.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: &KnowledgeConfig,
        outbound: &OutboundConfig,
        providers: &ProvidersConfig,
        documents: Arc<dyn DocumentStore>,
        jobs: Arc<dyn JobQueue>,
        uploads: Arc<dyn UploadStore>,
        events: crate::webhooks::Events,
        clock: crate::clock::Clock,
    ) -> anyhow::Result<Self> {
        let policy = Arc::new(NetPolicy::from_list(&outbound.allowed_private_hosts)?);
        let client = Arc::new(SafeClient::new((*policy).clone(), FetchLimits::default())?);
        Ok(Self {
            search: search::ChunkSearch::new(documents.clone()),
            documents,
            jobs,
            uploads,
            client,
            policy,
            wake: Arc::new(Notify::new()),
            limits: Arc::new(extract::ExtractLimits {
                deadline: config.extraction.timeout,
                ..extract::ExtractLimits::default()
            }),
            sandbox: Arc::new(sandbox::Sandbox::new(config.extraction.clone())),
            max_upload_bytes: config.max_upload_bytes,
            embedder: embed::Embedder::from_config(providers)?.map(Arc::new),
            vectors: embed::VectorCache::default(),
            embed_wake: Arc::new(Notify::new()),
            events,
            clock,
            bus: Bus::local(),
        })
    }

    /// This knowledge base on `bus`: its job workers ([`Knowledge::wake`]) wake when a
    /// job is queued through any instance ([`crate::cluster`]).
    pub fn with_bus(mut self, bus: &Bus) -> Self {
        bus.wake_on(Queue::Jobs, self.wake.clone());
        self.bus = bus.clone();
        self
    }

    /// Wakes the job workers of every instance (call after a job was queued): this
    /// instance's through [`Knowledge::wake`], the others' through the cluster bus.
    pub fn job_queued(&self) {
        self.wake.notify_one();
        self.bus.work_queued(Queue::Jobs);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{
        cluster::tests::{bus, scratch},
        config::OutboundConfig,
    };

    /// A knowledge base over a fresh SQLite store in `dir`, on `bus`.
    async fn knowledge(dir: &tempfile::TempDir, bus: &Bus) -> Knowledge {
        let store: Arc<dyn crate::store::Store> = Arc::new(
            crate::store::sqlite::SqliteStore::connect(&format!(
                "sqlite://{}",
                dir.path().join("test.db").display()
            ))
            .await
            .unwrap(),
        );
        let clock = crate::clock::Clock::default();
        Knowledge::new(
            &KnowledgeConfig::new(dir.path()),
            &OutboundConfig::default(),
            &ProvidersConfig::default(),
            store.clone(),
            store.clone(),
            Arc::new(
                crate::store::uploads::UploadDir::new(dir.path().join("uploads"), store.clone())
                    .unwrap(),
            ),
            crate::webhooks::Events::new(store, clock.clone()),
            clock,
        )
        .unwrap()
        .with_bus(bus)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_queued_through_one_instance_wakes_the_workers_of_the_other() {
        let database = scratch().await;
        let dir = tempfile::tempdir().unwrap();
        let a = knowledge(&dir, &bus(&database).await).await;
        let b = knowledge(&dir, &bus(&database).await).await;
        a.job_queued();
        tokio::time::timeout(Duration::from_secs(1), b.wake.notified())
            .await
            .expect("B's job workers are woken");
        tokio::time::timeout(Duration::from_secs(1), a.wake.notified())
            .await
            .expect("A's own are woken");
    }
}
