//! The `/api` middleware, one tower service ([`ApiService`]) in front of the router:
//! identity ([`identity`]), request budgets and their headers ([`rate_limit`]), and JSON
//! bodies for the framework's own errors ([`json_errors`]).

pub mod identity;
pub mod json_errors;
pub mod rate_limit;

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use axum::{
    extract::Request,
    response::{IntoResponse, Response},
};
use tower::{Layer, Service};

use self::{
    identity::{identify, identify_now},
    json_errors::json_errors,
    rate_limit::{add_rate_headers, channel_integration, is_unmetered, rate_key, refused},
};
use crate::{
    http::extract::{ClientIp, Identity},
    metrics::Refusal,
    ratelimit::RateDecision,
    services::AppState,
};

/// The `/api` middleware as a tower layer ([`ApiService`]). Wrap the whole router with it
/// (`ApiLayer::new(state).layer(router)`), not `Router::layer`, which wraps each route.
#[derive(Clone)]
pub struct ApiLayer {
    state: AppState,
}

impl ApiLayer {
    /// The middleware over the service's state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

impl<S> Layer<S> for ApiLayer {
    type Service = ApiService<S>;

    fn layer(&self, inner: S) -> ApiService<S> {
        ApiService {
            inner,
            state: self.state.clone(),
        }
    }
}

/// The `/api` middleware around `S`: for `/api` requests, the client IP
/// ([`ClientIp::resolve`]), identity (put in the extensions for
/// [`crate::http::extract::Auth`]), the rate limit and its `X-RateLimit-*` headers (none on
/// `/api/health`), and JSON bodies for the framework's own errors (OpenAI's shape under
/// `/api/openai/v1`). Other paths go to `S` untouched. A tower service rather than
/// `from_fn_with_state`, whose boxing and extractors cost as much as authentication.
#[derive(Clone)]
pub struct ApiService<S> {
    inner: S,
    state: AppState,
}

impl<S> Service<Request> for ApiService<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = ApiFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    /// Decides at once when no lookup or wait is needed, without allocating; otherwise
    /// runs the whole check in a boxed future.
    fn call(&mut self, mut request: Request) -> Self::Future {
        if !is_api(request.uri().path()) {
            return ApiFuture::Other {
                inner: self.inner.call(request),
            };
        }
        if is_unmetered(request.uri().path()) {
            return ApiFuture::Inner {
                inner: self.inner.call(request),
                decision: None,
            };
        }
        let state = &self.state;
        ClientIp::resolve(&state.server.trusted_proxies, &mut request);
        if crate::http::openai::is_openai_path(request.uri().path()) {
            // The OpenAI-compatible API answers errors in OpenAI's shape, those of this
            // middleware and of the framework included: its answers are rewritten.
            let clone = self.inner.clone();
            let inner = std::mem::replace(&mut self.inner, clone);
            let state = self.state.clone();
            return ApiFuture::Checking {
                future: Box::pin(async move {
                    crate::http::openai::rewrite(api_middleware(&state, request, inner).await).await
                }),
            };
        }
        let identity = if channel_integration(request.uri().path()).is_some() {
            Some(Identity::Anonymous)
        } else {
            identify_now(state, request.headers(), request.method())
        };
        let decided = identity.and_then(|identity| {
            let (key, budget) = rate_key(state, &identity, &request);
            let kind = Refusal::from(key);
            Some((state.limiter.check_now(key, budget)?, identity, kind))
        });
        match decided {
            Some((decision, identity, _)) if decision.allowed => {
                request.extensions_mut().insert(identity);
                ApiFuture::Inner {
                    inner: self.inner.call(request),
                    decision: Some(decision),
                }
            }
            Some((decision, _, kind)) => ApiFuture::Ready {
                response: Some(refused(decision, kind)),
            },
            None => {
                // The instance that was polled ready serves this request; a clone takes
                // its place.
                let clone = self.inner.clone();
                let inner = std::mem::replace(&mut self.inner, clone);
                let state = self.state.clone();
                ApiFuture::Checking {
                    future: Box::pin(async move { api_middleware(&state, request, inner).await }),
                }
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// The answer of [`ApiService`].
    #[project = ApiFutureProjection]
    pub enum ApiFuture<F> {
        /// The request was let through: the inner service's answer, to which the
        /// `X-RateLimit-*` headers of `decision` are added.
        Inner {
            #[pin]
            inner: F,
            decision: Option<RateDecision>,
        },
        /// Not an `/api` request: the inner service's answer as it is.
        Other {
            #[pin]
            inner: F,
        },
        /// The request was refused (429).
        Ready { response: Option<Response> },
        /// The caller's credential or budget had to be looked up.
        Checking {
            future: Pin<Box<dyn Future<Output = Response> + Send + 'static>>,
        },
    }
}

impl<F> Future for ApiFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            ApiFutureProjection::Inner { inner, decision } => {
                let Ok(response) = std::task::ready!(inner.poll(cx));
                let mut response = json_errors(response);
                if let Some(decision) = decision {
                    add_rate_headers(&mut response, decision);
                }
                Poll::Ready(Ok(response))
            }
            ApiFutureProjection::Other { inner } => inner.poll(cx),
            ApiFutureProjection::Ready { response } => {
                Poll::Ready(Ok(response.take().unwrap_or_default()))
            }
            ApiFutureProjection::Checking { future } => future.as_mut().poll(cx).map(Ok),
        }
    }
}

/// Whether `path` is the REST API's (`/api` or under `/api/`).
fn is_api(path: &str) -> bool {
    path.strip_prefix("/api")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The whole check, for requests whose credential or budget had to be looked up.
async fn api_middleware<S>(state: &AppState, mut request: Request, mut inner: S) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let identity = if channel_integration(request.uri().path()).is_some() {
        Identity::Anonymous
    } else {
        match identify(state, request.headers(), request.method()).await {
            Ok(identity) => identity,
            Err(err) => return err.into_response(),
        }
    };
    let (key, budget) = rate_key(state, &identity, &request);
    let decision = match state.limiter.check_now(key, budget) {
        Some(decision) => decision,
        None => state.limiter.check(key, budget).await,
    };
    if !decision.allowed {
        return refused(decision, Refusal::from(key));
    }
    request.extensions_mut().insert(identity);
    let Ok(response) = inner.call(request).await;
    let mut response = json_errors(response);
    add_rate_headers(&mut response, &decision);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_api_paths_go_through_the_api_middleware() {
        for path in ["/api", "/api/", "/api/agents", "/api/health"] {
            assert!(is_api(path), "{path}");
        }
        for path in ["/", "/apiary", "/api-docs", "/pkg/app.wasm", "/agents/api"] {
            assert!(!is_api(path), "{path}");
        }
    }
}
