//! An agent's knowledge base: uploads, crawls, documents and the background jobs that
//! index them (docs/api.md § Knowledge base).

use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use utoipa::ToSchema;

/// `POST /api/agents/{agentId}/knowledge/file` answer (201): the document is stored and
/// waits for indexing.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct UploadResponse {
    pub success: bool,
    pub document_id: String,
    /// `pending`.
    pub status: String,
}

/// Crawl options of `POST /api/agents/{agentId}/knowledge/url`; omitted fields take the
/// defaults shown.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CrawlOptions {
    /// Links followed from the start page: 0 (that page only) to 5, default 2.
    #[serde(default)]
    pub crawl_depth: Option<u8>,
    /// Pages indexed at most: 1 to 1,000, default 50.
    #[serde(default)]
    pub max_pages: Option<u32>,
    /// Globs on the URL path a page must match (any); empty: every page.
    #[serde(default)]
    pub include_patterns: Option<Vec<String>>,
    /// Globs on the URL path that exclude a page (win over includes).
    #[serde(default)]
    pub exclude_patterns: Option<Vec<String>>,
    /// Stay on the start URL's host; default true.
    #[serde(default)]
    pub same_domain: Option<bool>,
    /// Seed the crawl from the site's sitemap; default false.
    #[serde(default)]
    pub use_sitemap: Option<bool>,
    /// Obey robots.txt for the user agent `AgentChat`; default true.
    #[serde(default)]
    pub respect_robots: Option<bool>,
}

/// `POST /api/agents/{agentId}/knowledge/url` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddUrlRequest {
    /// An http or https URL on a public address.
    pub url: String,
    #[serde(default)]
    pub config: Option<CrawlOptions>,
}

/// `POST /api/agents/{agentId}/knowledge/url` answer (202).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AddUrlResponse {
    pub success: bool,
    pub document_id: String,
    pub job_id: String,
}

/// A knowledge document (docs/api.md § Knowledge document, § Knowledge base).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct KnowledgeDocument {
    pub document_id: String,
    /// `file` or `url`.
    pub kind: String,
    /// The uploaded file's name, or the crawl's start URL.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `pending`, `processing`, `indexed` or `failed`.
    pub status: String,
    /// Why indexing failed, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Pages crawled (sites) or read (PDF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pages: Option<u32>,
    pub chunks: u32,
    pub bytes: u64,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub indexed_at: Option<String>,
}

/// `GET /api/agents/{agentId}/knowledge` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct DocumentsResponse {
    pub documents: Vec<KnowledgeDocument>,
}

/// `GET /api/agents/{agentId}/knowledge/{documentId}` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct DocumentResponse {
    pub document: KnowledgeDocument,
}

/// `POST /api/agents/{agentId}/knowledge/{documentId}/refresh` answer (202).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DocumentRefreshResponse {
    pub success: bool,
    pub job_id: String,
}

/// Progress of a job: pages done of pages found (crawls), or 0/1 then 1/1 (uploads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct JobProgress {
    pub done: u32,
    pub total: u32,
}

/// A background job (docs/api.md § Knowledge base).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Job {
    pub id: String,
    /// `ingest` (an upload) or `crawl`.
    pub kind: String,
    /// `queued`, `running`, `succeeded` or `failed`.
    pub status: String,
    pub progress: JobProgress,
    pub document_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

/// `GET /api/jobs/{jobId}` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct JobResponse {
    pub job: Job,
}
