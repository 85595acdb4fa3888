//! `GET /api/agents/{agentId}/conversations/export`: the agent's messages of a period as a
//! JSON Lines or CSV download, streamed (docs/api.md § Export).

use app::api::ErrorBody;
use axum::{
    body::Body,
    extract::State,
    http::{header, HeaderValue},
    response::{IntoResponse, Response},
};
use futures::TryStreamExt;
use serde::Deserialize;
use tracing::instrument;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::openapi::{BadRequest, RateLimited};
use super::{
    extract::{ApiPath, ApiQuery, Auth},
    AppState,
};
use crate::{
    chat::{export::ExportFormat, history::day_range},
    domain::Scope,
    http::error::{ApiError, ApiResult},
    http::openapi::{day, one_of},
    ids::AgentId,
};

/// The export route.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(export))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ExportQuery {
    /// `jsonl` (the default) or `csv`.
    #[param(schema_with = formats)]
    format: Option<String>,
    /// Messages from this day on (`YYYY-MM-DD`, UTC).
    #[param(schema_with = day)]
    from: Option<String>,
    /// Messages until the end of this day (`YYYY-MM-DD`, UTC); not before `from`.
    #[param(schema_with = day)]
    to: Option<String>,
}

fn formats() -> utoipa::openapi::schema::Object {
    one_of(&[
        ExportFormat::Jsonl.extension(),
        ExportFormat::Csv.extension(),
    ])
}

/// Download every message of the agent's conversations in a period (all by default) with
/// its thread, channel, role, content, model, tokens, sources, feedback, status and time:
/// JSON Lines, one object per message, or CSV with a header row. Conversations follow each
/// other in the order they started, each one's messages oldest first.
#[utoipa::path(get, path = "/api/agents/{agentId}/conversations/export", tag = "chat", security(("bearer" = [])),
    params(("agentId" = String, Path, description = "Agent id"), ExportQuery),
    responses(
        (status = 200, description = "The file, streamed, with `Content-Disposition: attachment`",
            content((String = "application/jsonl"), (String = "text/csv"))),
        (status = 400, response = BadRequest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), RateLimited))]
#[instrument(skip_all, fields(user.id = %principal.user_id, agent.id = %agent_id))]
async fn export(
    State(state): State<AppState>,
    Auth(principal): Auth,
    ApiPath(agent_id): ApiPath<AgentId>,
    ApiQuery(query): ApiQuery<ExportQuery>,
) -> ApiResult<Response> {
    principal.require(Scope::ChatRead)?;
    let format = match query.format.as_deref() {
        None => ExportFormat::Jsonl,
        Some(name) => ExportFormat::parse(name)
            .ok_or_else(|| ApiError::bad_request("format must be jsonl or csv"))?,
    };
    let range = day_range(query.from.as_deref(), query.to.as_deref())?;
    state.agents.owned(&principal.user_id, &agent_id).await?;
    let file = format!(
        "conversations-{}-{}-{}.{}",
        agent_id.as_str(),
        query.from.as_deref().unwrap_or("start"),
        query
            .to
            .unwrap_or_else(|| state.clock.now().format("%Y-%m-%d").to_string()),
        format.extension()
    );
    let body = state
        .chat
        .export(principal.user_id.clone(), agent_id, range, format)
        .map_err(|e| {
            // The status is sent: the client sees a download cut short.
            tracing::error!(error = %e, "conversation export failed");
            std::io::Error::other(e.to_string())
        });
    let mut response = Body::from_stream(body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    // The name holds an id, ASCII digits and dashes alone: no quoting issue (RFC 6266).
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{file}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}
