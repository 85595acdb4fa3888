//! The knowledge base: uploads and crawled sites go in, chunks come out into every chat.
//! The parts and their rules are described in docs/knowledge.md.

pub mod chunk;
pub mod crawl;
pub mod embed;
pub mod eval;
pub mod extract;
pub mod refresh;
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
    pub documents: Arc<dyn DocumentStore>,
    pub jobs: Arc<dyn JobQueue>,
    /// BM25 search over the agents' chunks, indexes in memory.
    pub search: search::ChunkSearch,
    /// Uploads until their document is deleted ([`crate::store::uploads`]).
    pub uploads: Arc<dyn UploadStore>,
    pub client: Arc<SafeClient>,
    /// The rules the client enforces (also used to refuse URLs at submission).
    pub policy: Arc<NetPolicy>,
    pub wake: Arc<Notify>,
    /// Limits of text extraction (`deadline` is `EXTRACT_TIMEOUT_SECS`).
    pub limits: Arc<extract::ExtractLimits>,
    pub sandbox: Arc<sandbox::Sandbox>,
    /// Largest upload in bytes (`MAX_UPLOAD_BYTES`).
    pub max_upload_bytes: usize,
    /// `None` without `EMBEDDING_MODEL`: BM25 only.
    pub embedder: Option<Arc<embed::Embedder>>,
    /// This instance's foreground work, which the built-in model's chunk batches yield to:
    /// requests and provider events mark it ([`crate::foreground`]).
    pub foreground: Arc<crate::foreground::Foreground>,
    pub vectors: search::vectors::VectorCache,
    pub embed_wake: Arc<Notify>,
    pub events: crate::webhooks::Events,
    pub clock: crate::clock::Clock,
    /// Where queued jobs are announced to other instances.
    bus: Bus,
}

impl Knowledge {
    /// The knowledge base over one store's parts, crawling within `outbound`'s exceptions.
    /// Errors: a malformed `ALLOWED_PRIVATE_HOSTS` entry, or an HTTP client that cannot be built.
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
        let foreground = Arc::new(crate::foreground::Foreground::default());
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
            embedder: embed::Embedder::from_config(providers, foreground.clone())?.map(Arc::new),
            foreground,
            vectors: search::vectors::VectorCache::default(),
            embed_wake: Arc::new(Notify::new()),
            events,
            clock,
            bus: Bus::local(),
        })
    }

    /// This knowledge base on `bus`, so a job queued through any instance wakes its workers.
    pub fn with_bus(mut self, bus: &Bus) -> Self {
        bus.wake_on(Queue::Jobs, self.wake.clone());
        self.bus = bus.clone();
        self
    }

    /// Wakes the job workers of every instance (call after queueing a job).
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
