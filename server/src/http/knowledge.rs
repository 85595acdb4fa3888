//! `/api/agents/{agentId}/knowledge` and `/api/jobs/{jobId}`: uploads, crawled sites,
//! documents and their jobs (docs/api.md § Knowledge document, § Add URL, § Upload document;
//! docs/api.md § Knowledge base).

use app::api::{
    AddUrlRequest, AddUrlResponse, CrawlOptions, DocumentRefreshResponse, DocumentResponse,
    DocumentsResponse, ErrorBody, JobResponse, Refresh, SuccessResponse, UpdateDocumentRequest,
    UploadResponse,
};
use axum::{
    extract::{multipart::MultipartRejection, DefaultBodyLimit, Multipart, State},
    http::StatusCode,
    Json,
};
use tracing::instrument;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::openapi::{BadRequest, JsonBodyErrors, RateLimited};
use super::{
    extract::{ApiJson, ApiPath, Auth},
    AppState,
};
use crate::{
    domain::Scope,
    http::error::{ApiError, ApiResult},
    ids::{AgentId, DocumentId, JobId},
    knowledge::crawl::CrawlConfig,
    views::{document_view, job_view},
};

/// Longest file name kept for an upload, in characters.
pub const FILE_NAME_MAX: usize = 255;

/// The knowledge routes.
pub fn router() -> OpenApiRouter<AppState> {
    // The upload enforces MAX_UPLOAD_BYTES itself while reading (413), so the JSON body
    // limit of the other routes does not apply to it.
    let upload = OpenApiRouter::new()
        .routes(routes!(upload))
        .layer(DefaultBodyLimit::disable());
    OpenApiRouter::new()
        .merge(upload)
        .routes(routes!(add_url))
        .routes(routes!(list))
        .routes(routes!(get, update, delete))
        .routes(routes!(refresh))
        .routes(routes!(job))
}

/// A file name safe to show and store: the last path component, control characters
/// removed, at most [`FILE_NAME_MAX`] characters; `upload` when nothing is left.
fn clean_file_name(name: Option<&str>) -> String {
    let base = name
        .unwrap_or_default()
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or_default();
    let cleaned: String = base
        .chars()
        .filter(|c| !c.is_control())
        .take(FILE_NAME_MAX)
        .collect();
    let cleaned = cleaned.trim();
    if cleaned.is_empty() {
        "upload".to_string()
    } else {
        cleaned.to_string()
    }
}

/// Upload a document: multipart field `file` holding a PDF, DOCX, Markdown or plain text
/// file, recognised by its content. 201 with status `pending`; indexing runs as a job.
#[utoipa::path(post, path = "/api/agents/{agentId}/knowledge/file", tag = "knowledge", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id")),
    request_body(content_type = "multipart/form-data", description = "Field `file`: the document (PDF, DOCX, Markdown or text; at most MAX_UPLOAD_BYTES, default 20 MiB)"),
    responses((status = 201, body = UploadResponse), (status = 400, response = BadRequest), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 413, description = "The file is larger than allowed", body = ErrorBody),
        (status = 415, description = "Not a PDF, DOCX, Markdown or text file", body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id, document.id))]
async fn upload(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(agent_id): ApiPath<AgentId>,
    multipart: Result<Multipart, MultipartRejection>,
) -> ApiResult<(StatusCode, Json<UploadResponse>)> {
    principal.require(Scope::KnowledgeWrite)?;
    let agent = state.agents.owned(&principal.user_id, &agent_id).await?;
    let mut multipart = multipart.map_err(|_| {
        ApiError::bad_request("Send the file as multipart/form-data in a field named `file`")
    })?;
    let max = state.documents.max_upload_bytes();
    let mut file: Option<(String, Vec<u8>)> = None;
    loop {
        let field = match multipart.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(err) => return Err(multipart_error(err.status(), max)),
        };
        if field.name() != Some("file") {
            return Err(ApiError::bad_request(format!(
                "Unexpected multipart field `{}`; send only the field `file`",
                field.name().unwrap_or_default()
            )));
        }
        if file.is_some() {
            return Err(ApiError::bad_request("Send one file per request"));
        }
        let name = clean_file_name(field.file_name());
        let mut bytes = Vec::new();
        let mut field = field;
        loop {
            match field.chunk().await {
                Ok(Some(chunk)) => {
                    if bytes.len() + chunk.len() > max {
                        return Err(too_large(max));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(err) => return Err(multipart_error(err.status(), max)),
            }
        }
        file = Some((name, bytes));
    }
    let Some((name, bytes)) = file else {
        return Err(ApiError::bad_request(
            "The multipart body has no field named `file`",
        ));
    };
    let doc = state.documents.add_file(&agent, name, bytes).await?;
    Ok((
        StatusCode::CREATED,
        Json(UploadResponse {
            success: true,
            document_id: doc.id.into_string(),
            status: doc.status.as_str().into(),
        }),
    ))
}

fn too_large(max: usize) -> ApiError {
    ApiError::PayloadTooLarge(format!(
        "The file is larger than the {} MiB upload limit",
        max / (1024 * 1024)
    ))
}

fn multipart_error(status: StatusCode, max: usize) -> ApiError {
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        too_large(max)
    } else {
        ApiError::bad_request("The multipart body is malformed")
    }
}

/// Hours between refreshes of `refresh` (omitted: off); a 400 naming the rule otherwise.
fn refresh_hours(refresh: Option<&Refresh>) -> ApiResult<Option<u32>> {
    refresh
        .map_or(Ok(None), Refresh::hours)
        .map_err(ApiError::bad_request)
}

/// The crawl settings of `options`, with the defaults for those omitted.
fn crawl_config(options: Option<CrawlOptions>) -> CrawlConfig {
    let o = options.unwrap_or_default();
    let d = CrawlConfig::default();
    CrawlConfig {
        crawl_depth: o.crawl_depth.unwrap_or(d.crawl_depth),
        max_pages: o.max_pages.unwrap_or(d.max_pages),
        include_patterns: o.include_patterns.unwrap_or(d.include_patterns),
        exclude_patterns: o.exclude_patterns.unwrap_or(d.exclude_patterns),
        same_domain: o.same_domain.unwrap_or(d.same_domain),
        use_sitemap: o.use_sitemap.unwrap_or(d.use_sitemap),
        respect_robots: o.respect_robots.unwrap_or(d.respect_robots),
    }
}

/// Add a web site (or one page): 202 with the document and the crawl job; the crawl runs
/// in the background.
#[utoipa::path(post, path = "/api/agents/{agentId}/knowledge/url", tag = "knowledge", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id")), request_body = AddUrlRequest,
    responses((status = 202, body = AddUrlResponse),
        (status = 400, description = "Not http(s), a forbidden address, or a bad crawl option", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id, document.id))]
async fn add_url(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(agent_id): ApiPath<AgentId>,
    ApiJson(body): ApiJson<AddUrlRequest>,
) -> ApiResult<(StatusCode, Json<AddUrlResponse>)> {
    principal.require(Scope::KnowledgeWrite)?;
    let refresh = refresh_hours(body.config.as_ref().and_then(|c| c.refresh.as_ref()))?;
    let agent = state.agents.owned(&principal.user_id, &agent_id).await?;
    let (doc, job) = state
        .documents
        .add_url(&agent, &body.url, crawl_config(body.config), refresh)
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(AddUrlResponse {
            success: true,
            document_id: doc.id.into_string(),
            job_id: job.id.into_string(),
        }),
    ))
}

/// The agent's knowledge documents, oldest first.
#[utoipa::path(get, path = "/api/agents/{agentId}/knowledge", tag = "knowledge", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id")),
    responses((status = 200, body = DocumentsResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn list(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(agent_id): ApiPath<AgentId>,
) -> ApiResult<Json<DocumentsResponse>> {
    principal.require(Scope::KnowledgeRead)?;
    let agent = state.agents.owned(&principal.user_id, &agent_id).await?;
    let docs = state.documents.list(&agent).await?;
    Ok(Json(DocumentsResponse {
        documents: docs.iter().map(document_view).collect(),
    }))
}

/// One knowledge document with its status.
#[utoipa::path(get, path = "/api/agents/{agentId}/knowledge/{documentId}", tag = "knowledge", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id"), ("documentId" = String, Path, description = "Document id")),
    responses((status = 200, body = DocumentResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id, document.id = %document_id))]
async fn get(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath((agent_id, document_id)): ApiPath<(AgentId, DocumentId)>,
) -> ApiResult<Json<DocumentResponse>> {
    principal.require(Scope::KnowledgeRead)?;
    let agent = state.agents.owned(&principal.user_id, &agent_id).await?;
    let doc = state.documents.document(&agent, &document_id).await?;
    Ok(Json(DocumentResponse {
        document: document_view(&doc),
    }))
}

/// Change a crawled site's settings: `config.refresh` sets its refresh schedule (next due one
/// interval after its last refresh, or after now when it has none). 400 for an upload.
#[utoipa::path(patch, path = "/api/agents/{agentId}/knowledge/{documentId}", tag = "knowledge", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id"), ("documentId" = String, Path, description = "Document id")),
    request_body = UpdateDocumentRequest,
    responses((status = 200, body = DocumentResponse),
        (status = 400, description = "Not a schedule, or the document is an uploaded file", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), JsonBodyErrors, RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id, document.id = %document_id))]
async fn update(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath((agent_id, document_id)): ApiPath<(AgentId, DocumentId)>,
    ApiJson(body): ApiJson<UpdateDocumentRequest>,
) -> ApiResult<Json<DocumentResponse>> {
    principal.require(Scope::KnowledgeWrite)?;
    let agent = state.agents.owned(&principal.user_id, &agent_id).await?;
    let doc = match &body.config.refresh {
        Some(refresh) => {
            let hours = refresh_hours(Some(refresh))?;
            state
                .documents
                .set_refresh(&agent, &document_id, hours)
                .await?
        }
        None => state.documents.document(&agent, &document_id).await?,
    };
    Ok(Json(DocumentResponse {
        document: document_view(&doc),
    }))
}

/// Delete a document: its chunks leave retrieval at once and a running job stops.
#[utoipa::path(delete, path = "/api/agents/{agentId}/knowledge/{documentId}", tag = "knowledge", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id"), ("documentId" = String, Path, description = "Document id")),
    responses((status = 200, body = SuccessResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id, document.id = %document_id))]
async fn delete(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath((agent_id, document_id)): ApiPath<(AgentId, DocumentId)>,
) -> ApiResult<Json<SuccessResponse>> {
    principal.require(Scope::KnowledgeWrite)?;
    let agent = state.agents.owned(&principal.user_id, &agent_id).await?;
    state.documents.delete(&agent, &document_id).await?;
    Ok(Json(SuccessResponse { success: true }))
}

/// Re-crawl a site (pages whose content is unchanged are skipped) or re-index a file;
/// 202 with the job (an already queued or running job is returned instead of a second).
#[utoipa::path(post, path = "/api/agents/{agentId}/knowledge/{documentId}/refresh", tag = "knowledge", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id"), ("documentId" = String, Path, description = "Document id")),
    responses((status = 202, body = DocumentRefreshResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id, document.id = %document_id))]
async fn refresh(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath((agent_id, document_id)): ApiPath<(AgentId, DocumentId)>,
) -> ApiResult<(StatusCode, Json<DocumentRefreshResponse>)> {
    principal.require(Scope::KnowledgeWrite)?;
    let agent = state.agents.owned(&principal.user_id, &agent_id).await?;
    let job = state.documents.refresh(&agent, &document_id).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(DocumentRefreshResponse {
            success: true,
            job_id: job.id.into_string(),
        }),
    ))
}

/// A knowledge job with its progress.
#[utoipa::path(get, path = "/api/jobs/{jobId}", tag = "knowledge", security(("bearer" = [])),
    params(("jobId" = String, Path, description = "Job id")),
    responses((status = 200, body = JobResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 400, response = BadRequest), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, job.id = %job_id))]
async fn job(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(job_id): ApiPath<JobId>,
) -> ApiResult<Json<JobResponse>> {
    principal.require(Scope::KnowledgeRead)?;
    let job = state.documents.job(&principal, &job_id).await?;
    Ok(Json(JobResponse {
        job: job_view(&job),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_cleaned() {
        assert_eq!(clean_file_name(Some("../../etc/passwd")), "passwd");
        assert_eq!(clean_file_name(Some("C:\\docs\\a.pdf")), "a.pdf");
        assert_eq!(clean_file_name(Some("a\u{0}b\nc.txt")), "abc.txt");
        assert_eq!(clean_file_name(None), "upload");
        assert_eq!(clean_file_name(Some("   ")), "upload");
        assert_eq!(
            clean_file_name(Some(&"x".repeat(300))).chars().count(),
            FILE_NAME_MAX
        );
    }
}
