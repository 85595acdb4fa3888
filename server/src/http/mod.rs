//! The HTTP layer: `/api` routes and their middleware ([`ApiService`]) over the service's
//! state; every error leaving `/api` is the contract's `{error, message}` body.

pub mod agents;
pub mod analytics;
pub mod api_keys;
pub mod auth;
pub mod channels;
pub mod chat;
pub mod cookies;
pub mod error;
pub mod export;
pub mod extract;
pub mod inbox;
pub mod integrations;
pub mod knowledge;
pub mod mcp;
pub mod metrics;
pub mod middleware;
pub mod oauth;
pub mod openai;
pub mod openapi;
pub mod ops;
pub mod security;
pub mod tools;
pub mod usage;
pub mod webhooks;
pub mod widget;

use axum::extract::FromRef;
use leptos::prelude::LeptosOptions;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

pub use self::middleware::{
    rate_limit::{
        ANONYMOUS_PER_MINUTE, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING, X_RATELIMIT_RESET,
    },
    ApiFuture, ApiLayer, ApiService,
};
use self::{error::ApiError, openapi::ApiDoc};

use crate::services::AppState;

/// Largest JSON body accepted (docs/api.md § Conventions: over 1 MiB → 413).
pub const MAX_JSON_BODY: usize = 1024 * 1024;

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos.clone()
    }
}

/// Every `/api` route with its OpenAPI description.
pub fn api_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(auth::router())
        .merge(oauth::router())
        .merge(api_keys::router())
        .merge(agents::router())
        .merge(tools::router())
        .merge(chat::router())
        .merge(inbox::router())
        .merge(analytics::router())
        .merge(export::router())
        .merge(knowledge::router())
        .merge(ops::router())
        .merge(usage::router())
        .merge(integrations::router())
        .merge(webhooks::router())
        .merge(channels::router())
        .merge(widget::router())
        .merge(openai::router())
        .merge(mcp::router())
}

/// The answer for an unknown `/api` path.
pub async fn api_not_found() -> ApiError {
    ApiError::NotFound("No API endpoint at this path; see /api/docs".into())
}
