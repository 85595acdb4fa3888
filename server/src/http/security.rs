//! Protections of every answer (README.md § Security): the limit on a request's head
//! ([`HeadLimitLayer`]).

use std::{
    convert::Infallible,
    task::{Context, Poll},
};

use axum::{
    extract::Request,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use futures::future::Either;
use tower::{Layer, Service};

use crate::error::ApiError;

/// Largest request head accepted, in bytes: the request line and every header field,
/// counted as `name: value` plus CRLF (RFC 9112 § 2.1). Larger: 431 (RFC 6585 § 5) with
/// the contract's JSON body.
pub const MAX_HEAD_BYTES: usize = 32 * 1024;
/// Most header fields accepted in one request (each repetition of a name counts). More:
/// 431 with the contract's JSON body.
pub const MAX_HEADER_FIELDS: usize = 100;

/// The size of `request`'s head as [`MAX_HEAD_BYTES`] counts it, in bytes: `METHOD SP
/// request-target SP HTTP/1.1 CRLF`, then `name: value CRLF` per field, then CRLF.
pub fn head_bytes<B>(request: &http::Request<B>) -> usize {
    let uri = request.uri();
    let target = uri.scheme_str().map_or(0, |s| s.len() + 3)
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(1, |p| p.as_str().len());
    let line = request.method().as_str().len() + 1 + target + 1 + "HTTP/1.1\r\n".len();
    request.headers().iter().fold(line + 2, |n, (name, value)| {
        n + name.as_str().len() + 2 + value.len() + 2
    })
}

/// Whether `request`'s head is within [`MAX_HEAD_BYTES`] and [`MAX_HEADER_FIELDS`].
pub fn head_within_limits<B>(request: &http::Request<B>) -> bool {
    request.headers().len() <= MAX_HEADER_FIELDS && head_bytes(request) <= MAX_HEAD_BYTES
}

/// The answer to a head over the limits: 431 `{"error": "Request Header Fields Too Large",
/// "message": ...}`.
pub fn head_too_large() -> Response {
    ApiError::Status {
        status: StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        message: format!(
            "The request's header fields are too large: at most {MAX_HEADER_FIELDS} fields \
             and {MAX_HEAD_BYTES} bytes with the request line"
        ),
    }
    .into_response()
}

/// Answers requests whose head is over [`MAX_HEAD_BYTES`] or [`MAX_HEADER_FIELDS`] with
/// [`head_too_large`]; passes the others to the inner service. (hyper's parser refuses
/// heads over twice these limits itself, with a bare 431: see
/// [`crate::startup::PARSER_BUFFER_BYTES`].)
#[derive(Clone, Copy, Debug, Default)]
pub struct HeadLimitLayer;

impl<S> Layer<S> for HeadLimitLayer {
    type Service = HeadLimit<S>;

    fn layer(&self, inner: S) -> HeadLimit<S> {
        HeadLimit { inner }
    }
}

/// The service of [`HeadLimitLayer`].
#[derive(Clone, Debug)]
pub struct HeadLimit<S> {
    inner: S,
}

impl<S> Service<Request> for HeadLimit<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<std::future::Ready<Result<Response, Infallible>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if head_within_limits(&request) {
            Either::Right(self.inner.call(request))
        } else {
            Either::Left(std::future::ready(Ok(head_too_large())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, String)]) -> http::Request<()> {
        let mut builder = http::Request::get("/api/health");
        for (name, value) in headers {
            builder = builder.header(*name, value);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn the_head_is_counted_as_it_was_sent() {
        let head = request(&[("host", "localhost".into())]);
        assert_eq!(
            head_bytes(&head),
            "GET /api/health HTTP/1.1\r\nhost: localhost\r\n\r\n".len()
        );
    }

    #[test]
    fn heads_over_the_limits_are_refused() {
        let fits = request(&[("x-big", "a".repeat(MAX_HEAD_BYTES - 100))]);
        assert!(head_within_limits(&fits));
        let large = request(&[("x-big", "a".repeat(MAX_HEAD_BYTES))]);
        assert!(!head_within_limits(&large));
        let many: Vec<(&str, String)> = (0..=MAX_HEADER_FIELDS)
            .map(|i| ("x-n", i.to_string()))
            .collect();
        assert!(!head_within_limits(&request(&many)));
        assert!(head_within_limits(&request(&many[1..])));
    }
}
