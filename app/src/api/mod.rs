//! Request and response bodies of the REST API under `/api`, shared by the server (which
//! produces them) and the dashboard (which consumes them), so both speak one API.
//!
//! Field names are camelCase (docs/api.md: "field names are camelCase"). Timestamps are ISO
//! 8601 UTC strings such as `2026-11-20T10:00:00Z` (docs/api.md § Conventions).
//!
//! One submodule per area of the API; every type is re-exported here, so callers name it
//! `app::api::Foo` whatever its area. The OpenAPI document names each schema after its type
//! (utoipa), so these names are part of the contract. Lists that page (conversations,
//! messages) answer `nextCursor`: pass it back as `?cursor=` for the next page; it is null on
//! the last page.

mod agents;
mod api_keys;
mod auth;
mod chat;
mod integrations;
mod knowledge;
pub mod limits;
mod stream;
mod tools;
mod usage;
mod webhooks;
mod widget;

pub use agents::*;
pub use api_keys::*;
pub use auth::*;
pub use chat::*;
pub use integrations::*;
pub use knowledge::*;
pub use stream::*;
pub use tools::*;
pub use usage::*;
pub use webhooks::*;
pub use widget::*;

use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use utoipa::ToSchema;

/// Every error body of the API: `{"error": reason, "message": what to fix}`
/// (docs/api.md § Errors, § Conventions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct ErrorBody {
    /// The HTTP reason phrase, or the contract's fixed value for 401/403/429.
    pub error: String,
    /// A human-readable explanation of what went wrong and how to fix it.
    pub message: String,
}

/// `{success}` answer of deletions.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct SuccessResponse {
    pub success: bool,
}

/// `GET /api/health` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct HealthResponse {
    /// `ok` when the database answers.
    pub status: String,
    pub version: String,
}

/// `GET /api/health/ready` answer while the instance is ready (docs/api.md § Operations);
/// otherwise 503 with the error body.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct ReadyResponse {
    /// Always `ready`.
    pub status: String,
    /// The server's version.
    pub version: String,
    /// `ok`: the database answered.
    pub database: String,
    /// `ok` when Redis (`REDIS_URL`) answered, `not configured` without `REDIS_URL`.
    pub redis: String,
}
