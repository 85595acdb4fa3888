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
    /// Re-crawl on a schedule: `"off"` (default), `"daily"`, `"weekly"` or a whole number of
    /// hours from 1 to 8,760.
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(inline))]
    pub refresh: Option<Refresh>,
}

/// A refresh schedule as JSON: `"off"`, `"daily"`, `"weekly"`, or a whole number of hours from
/// 1 to [`REFRESH_HOURS_MAX`](super::limits::REFRESH_HOURS_MAX) (docs/knowledge.md § Refresh).
/// Kept as the JSON value received, so that the server can answer a wrong one with a 400
/// naming the rule; [`Refresh::hours`] reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Refresh(pub serde_json::Value);

impl Refresh {
    /// The message of a 400 for a value that is not a schedule.
    pub const RULE: &'static str = "`refresh` must be \"off\", \"daily\", \"weekly\" or a whole number of hours from 1 to 8760";

    /// `"off"`.
    pub fn off() -> Self {
        Self(serde_json::Value::from("off"))
    }

    /// The schedule of `hours` between refreshes (`None`: off) in its canonical form: 24 is
    /// `"daily"`, 168 `"weekly"`.
    pub fn from_hours(hours: Option<u32>) -> Self {
        Self(match hours {
            None => "off".into(),
            Some(24) => "daily".into(),
            Some(168) => "weekly".into(),
            Some(h) => h.into(),
        })
    }

    /// Hours between refreshes (`None`: off). Errors: [`Refresh::RULE`] for anything but
    /// the four forms (a fraction, 0, more than a year, another word, another JSON type).
    pub fn hours(&self) -> Result<Option<u32>, &'static str> {
        match &self.0 {
            serde_json::Value::String(s) => match s.as_str() {
                "off" => Ok(None),
                "daily" => Ok(Some(24)),
                "weekly" => Ok(Some(168)),
                _ => Err(Self::RULE),
            },
            serde_json::Value::Number(n) => match n.as_u64() {
                Some(h) if (1..=u64::from(super::limits::REFRESH_HOURS_MAX)).contains(&h) => {
                    Ok(Some(h as u32))
                }
                _ => Err(Self::RULE),
            },
            _ => Err(Self::RULE),
        }
    }
}

#[cfg(feature = "ssr")]
impl utoipa::PartialSchema for Refresh {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(["off", "daily", "weekly"])),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(1))
                    .maximum(Some(super::limits::REFRESH_HOURS_MAX)),
            )
            .description(Some(
                "Refresh schedule: \"off\", \"daily\" (24 hours), \"weekly\" (168 hours) or \
                 a whole number of hours from 1 to 8760",
            ))
            .into()
    }
}

#[cfg(feature = "ssr")]
impl utoipa::ToSchema for Refresh {}

/// `PATCH /api/agents/{agentId}/knowledge/{documentId}` body: the settings of a crawled site
/// that can change after it was added.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateDocumentRequest {
    pub config: DocumentSettings,
}

/// The changeable settings of a crawled site (omitted: unchanged).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DocumentSettings {
    /// The refresh schedule, as [`CrawlOptions::refresh`].
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(inline))]
    pub refresh: Option<Refresh>,
}

/// A re-crawl's pages compared with the crawl before it (docs/knowledge.md § Refresh).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct RefreshCounts {
    /// Pages found that the crawl before did not keep.
    pub added: u32,
    /// Pages whose text changed: indexed again.
    pub changed: u32,
    /// Pages gone (404, 410, or no longer linked within the crawl's limits): left the index.
    pub removed: u32,
    /// Pages unchanged (304 Not Modified, or the same text): neither chunked nor embedded again.
    pub unchanged: u32,
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
    /// Crawled sites: the refresh schedule (`"off"`, `"daily"`, `"weekly"` or hours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ssr", schema(inline))]
    pub refresh: Option<Refresh>,
    /// Crawled sites: when the next scheduled refresh is queued; null when off.
    #[serde(default)]
    pub next_refresh_at: Option<String>,
    /// Crawled sites: when the last refresh (a re-crawl, manual or scheduled) finished;
    /// null before the first.
    #[serde(default)]
    pub last_refreshed_at: Option<String>,
    /// Crawled sites: the last refresh's page counts; null before the first.
    #[serde(default)]
    pub refresh_counts: Option<RefreshCounts>,
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
