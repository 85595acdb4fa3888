//! The knowledge use cases of an agent's owner: add a file or a site, list, read, refresh and
//! delete documents, read a job (docs/api.md § Knowledge base). Each runs on an agent the
//! caller owns ([`AgentService::owned`]); the work is queued for [`super::worker`].

use tracing::info;

use super::{crawl::CrawlConfig, extract, Knowledge};
use crate::{
    agents::AgentService,
    clock::Clock,
    ids::{DocumentId, JobId},
    public_url::{self, UrlError},
    store::{
        documents::{next_refresh, DocumentRecord, DocumentSource},
        jobs::{JobKind, JobRecord},
        AgentRecord, StoreError,
    },
};

/// Why a knowledge operation failed. The texts are the messages clients are shown.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    /// The uploaded file has no bytes.
    #[error("The file is empty")]
    EmptyFile,
    /// The uploaded file is not a PDF, DOCX, Markdown or text file (by its content).
    #[error("{0} Upload a PDF, Word (DOCX), Markdown or plain text file.")]
    UnsupportedFormat(extract::ExtractError),
    /// A crawl option breaks its rule; the text names it.
    #[error("{0}")]
    InvalidCrawlOptions(String),
    /// A refresh schedule was given for an uploaded file.
    #[error("Only a crawled site (kind `url`) has a refresh schedule")]
    NotASite,
    /// The site's URL cannot be crawled.
    #[error(transparent)]
    Url(#[from] UrlError),
    #[error("Document not found")]
    DocumentNotFound,
    #[error("Job not found")]
    JobNotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Anything else; not shown to clients.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// The knowledge use cases over the knowledge base's shared parts.
#[derive(Clone)]
pub struct Documents {
    knowledge: Knowledge,
    /// Told of every change ([`AgentService::knowledge_changed`]).
    agents: AgentService,
    clock: Clock,
}

impl Documents {
    pub fn new(knowledge: Knowledge, agents: AgentService, clock: Clock) -> Self {
        Self {
            knowledge,
            agents,
            clock,
        }
    }

    /// Largest upload in bytes (`MAX_UPLOAD_BYTES`).
    pub fn max_upload_bytes(&self) -> usize {
        self.knowledge.max_upload_bytes
    }

    /// Adds file `name` to `agent`'s knowledge (recognised by content, stored, queued), answered
    /// `pending`. Errors: [`KnowledgeError::EmptyFile`], [`KnowledgeError::UnsupportedFormat`],
    /// the store's.
    pub async fn add_file(
        &self,
        agent: &AgentRecord,
        name: String,
        bytes: Vec<u8>,
    ) -> Result<DocumentRecord, KnowledgeError> {
        let format = match extract::detect(&bytes) {
            Ok(kind) => kind,
            Err(extract::ExtractError::Empty) => return Err(KnowledgeError::EmptyFile),
            Err(err) => return Err(KnowledgeError::UnsupportedFormat(err)),
        };
        let now = self.clock.now();
        let id = DocumentId::new();
        tracing::Span::current().record("document.id", id.as_str());
        let doc = DocumentRecord::pending_file(
            id.clone(),
            &agent.id,
            &agent.user_id,
            name,
            format.as_str(),
            bytes.len() as u64,
            now,
        );
        let job = JobRecord::queued(JobKind::Ingest, &id, &agent.user_id, now);
        self.knowledge
            .uploads
            .create_file_document(&doc, &job, &bytes)
            .await?;
        self.agents.knowledge_changed(&agent.id);
        self.knowledge.job_queued();
        info!(format = %format, bytes = bytes.len(), "document uploaded");
        Ok(doc)
    }

    /// Adds the site at `url` and queues its crawl, to be refreshed every `refresh_hours`
    /// (`None`: never); answers document and job.
    /// Errors: [`KnowledgeError::InvalidCrawlOptions`], [`KnowledgeError::Url`], the store's.
    pub async fn add_url(
        &self,
        agent: &AgentRecord,
        url: &str,
        config: CrawlConfig,
        refresh_hours: Option<u32>,
    ) -> Result<(DocumentRecord, JobRecord), KnowledgeError> {
        config
            .validate()
            .map_err(KnowledgeError::InvalidCrawlOptions)?;
        let url = public_url::check(url, &self.knowledge.policy, "be crawled").await?;
        let now = self.clock.now();
        let id = DocumentId::new();
        tracing::Span::current().record("document.id", id.as_str());
        let crawl_config = serde_json::to_string(&config).map_err(anyhow::Error::from)?;
        let doc = DocumentRecord::pending_url(
            id.clone(),
            &agent.id,
            &agent.user_id,
            url.as_str(),
            Some(crawl_config),
            refresh_hours,
            now,
        );
        let job = JobRecord::queued(JobKind::Crawl, &id, &agent.user_id, now);
        self.knowledge.documents.create_document(&doc, &job).await?;
        self.agents.knowledge_changed(&agent.id);
        self.knowledge.job_queued();
        Ok((doc, job))
    }

    /// `agent`'s documents, oldest first. Errors: the store's.
    pub async fn list(&self, agent: &AgentRecord) -> Result<Vec<DocumentRecord>, KnowledgeError> {
        Ok(self
            .knowledge
            .documents
            .list_documents(&agent.user_id, &agent.id)
            .await?)
    }

    /// The document `document_id` of `agent`.
    /// Errors: [`KnowledgeError::DocumentNotFound`]; the store's.
    pub async fn document(
        &self,
        agent: &AgentRecord,
        document_id: &DocumentId,
    ) -> Result<DocumentRecord, KnowledgeError> {
        self.knowledge
            .documents
            .document(&agent.user_id, &agent.id, document_id)
            .await?
            .ok_or(KnowledgeError::DocumentNotFound)
    }

    /// Deletes a document: chunks leave retrieval at once, a running job stops, the upload goes.
    /// Errors: [`KnowledgeError::DocumentNotFound`]; the store's.
    pub async fn delete(
        &self,
        agent: &AgentRecord,
        document_id: &DocumentId,
    ) -> Result<(), KnowledgeError> {
        if !self
            .knowledge
            .documents
            .delete_document(&agent.user_id, &agent.id, document_id)
            .await?
        {
            return Err(KnowledgeError::DocumentNotFound);
        }
        self.agents.knowledge_changed(&agent.id);
        // The document is gone; an upload left behind is only disk space.
        let _ = self
            .knowledge
            .uploads
            .remove_uploads(std::slice::from_ref(document_id))
            .await;
        Ok(())
    }

    /// Queues a re-crawl (unchanged pages skipped) or re-index, or answers the job already queued;
    /// a new job sets the document `pending`.
    /// Errors: [`KnowledgeError::DocumentNotFound`]; the store's.
    pub async fn refresh(
        &self,
        agent: &AgentRecord,
        document_id: &DocumentId,
    ) -> Result<JobRecord, KnowledgeError> {
        let doc = self.document(agent, document_id).await?;
        Ok(super::refresh::queue(
            &self.knowledge,
            &doc.id,
            doc.kind.job_kind(),
            &agent.user_id,
        )
        .await?)
    }

    /// Queues the refreshes due now ([`super::refresh::queue_due`], which every instance's
    /// scheduler runs on its own); answers how many this call queued. Errors: the store's.
    pub async fn queue_due_refreshes(&self) -> Result<usize, KnowledgeError> {
        Ok(super::refresh::queue_due(&self.knowledge).await?)
    }

    /// Sets the refresh schedule of the site `document_id` to every `hours` (`None`: off), next
    /// due `hours` after its last refresh (or now, when it has none), and answers it.
    /// Errors: [`KnowledgeError::NotASite`] for an upload; [`KnowledgeError::DocumentNotFound`];
    /// the store's.
    pub async fn set_refresh(
        &self,
        agent: &AgentRecord,
        document_id: &DocumentId,
        hours: Option<u32>,
    ) -> Result<DocumentRecord, KnowledgeError> {
        let doc = self.document(agent, document_id).await?;
        if doc.kind != DocumentSource::Url {
            return Err(KnowledgeError::NotASite);
        }
        let now = self.clock.now();
        let from = doc.last_refreshed_at.or(doc.indexed_at).unwrap_or(now);
        let next = hours.map(|h| next_refresh(from, h));
        if !self
            .knowledge
            .documents
            .set_refresh_schedule(&agent.user_id, &agent.id, &doc.id, hours, next, now)
            .await?
        {
            return Err(KnowledgeError::DocumentNotFound);
        }
        self.document(agent, document_id).await
    }

    /// The caller's job `job_id`; for an API key bound to agents, only a job of one of those
    /// agents' documents ([`crate::auth::Principal::may_use`]), others as if absent.
    /// Errors: [`KnowledgeError::JobNotFound`], the store's.
    pub async fn job(
        &self,
        caller: &crate::auth::Principal,
        job_id: &JobId,
    ) -> Result<JobRecord, KnowledgeError> {
        let job = self
            .knowledge
            .jobs
            .job(&caller.user_id, job_id)
            .await?
            .ok_or(KnowledgeError::JobNotFound)?;
        if caller.agent_scope().is_some() {
            let document = self
                .knowledge
                .documents
                .document_by_id(&job.document_id)
                .await?;
            if !document.is_some_and(|d| caller.may_use(&d.agent_id)) {
                return Err(KnowledgeError::JobNotFound);
            }
        }
        Ok(job)
    }
}
