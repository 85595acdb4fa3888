//! Shared parts of the OpenAPI document (`GET /api/openapi.json`): the error answers that
//! whole kinds of operations share, referenced from the handlers' `#[utoipa::path]`
//! annotations instead of being described again in each.
//!
//! Which operation lists which shared answer:
//! - every operation with input (a JSON body, a path or a query parameter): 400,
//!   [`BadRequest`] or a description of its own;
//! - every operation with a JSON body: 413 and 415, [`JsonBodyErrors`];
//! - every operation but `GET /api/health`: 429 with its headers, [`RateLimited`].

use app::api::ErrorBody;
use utoipa::{IntoResponses, ToResponse};

/// The input is invalid: the JSON body is malformed or not a JSON object, a field is
/// missing, has the wrong type or breaks its rule (see the request schema), or a path or
/// query parameter is malformed. `message` says which, and how to fix it.
#[derive(ToResponse)]
pub struct BadRequest(pub ErrorBody);

/// The request body is larger than allowed: 1 MiB for JSON bodies (README § Limits).
#[derive(ToResponse)]
pub struct PayloadTooLarge(pub ErrorBody);

/// The body is not sent as JSON: `Content-Type` must be `application/json` (parameters
/// such as `charset` allowed) or another `application/*+json` type.
#[derive(ToResponse)]
pub struct UnsupportedMediaType(pub ErrorBody);

/// A request budget is spent (README § Limits): the account's plan, the client IP's on
/// unauthenticated endpoints, or the one of the endpoint itself where its description names
/// one. The body is the contract's fixed `{"error": "Rate limit exceeded", "message": ...}`.
#[derive(ToResponse)]
#[response(headers(
    ("Retry-After" = u64, description = "Seconds to wait before a request can succeed (RFC 9110 § 10.2.3)"),
    ("X-RateLimit-Limit" = u32, description = "Requests per minute of the budget"),
    ("X-RateLimit-Remaining" = u32, description = "Requests that may still be made now: 0"),
    ("X-RateLimit-Reset" = i64, description = "Unix epoch seconds at which the full budget is back")
))]
pub struct TooManyRequests(pub ErrorBody);

/// The answers of the body rules every JSON request body has, besides its 400: list it in
/// the `responses(...)` of each operation that reads a JSON body.
#[derive(IntoResponses)]
pub enum JsonBodyErrors {
    /// Over the body limit.
    #[response(status = 413)]
    TooLarge(#[ref_response] PayloadTooLarge),
    /// Not sent as JSON.
    #[response(status = 415)]
    NotJson(#[ref_response] UnsupportedMediaType),
}

/// The 429 of every metered operation (every one but `GET /api/health`): list it in the
/// `responses(...)` of each.
#[derive(IntoResponses)]
#[response(status = 429)]
pub struct RateLimited(#[ref_response] pub TooManyRequests);
