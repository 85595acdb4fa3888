//! The dashboard's HTTP client for the REST API under `/api`, used from the browser only.
//!
//! Every request goes through `fetch` with `credentials: same-origin`, so the session
//! cookies the server sets at sign-in travel with it; the dashboard never stores a token
//! itself. Unsafe requests (POST, PUT, PATCH, DELETE) echo the readable CSRF cookie
//! ([`CSRF_COOKIE`](crate::api::CSRF_COOKIE)) in the [`CSRF_HEADER`](crate::api::CSRF_HEADER)
//! header, the double-submit defence the server checks on cookie-authenticated requests
//! (OWASP CSRF Prevention Cheat Sheet, "Signed Double-Submit Cookie").
//!
//! Server-side rendering never calls these functions (they run in event handlers and
//! effects only); without the `hydrate` feature they answer an error instead of fetching.
//!
//! Requests of the signed-in user (`*_signed_in`, [`open_chat`], [`open_approval`],
//! [`open_resume`], [`cancel_reply`], [`upload_file`]) renew an expired access token once
//! with the refresh cookie and retry; when the session has ended they send the browser to
//! the sign-in page.

use crate::{
    api::{ApprovalRequest, ChatRequest, ErrorBody, UploadResponse},
    sse::{ReplyCursor, StreamFrame},
};
use serde::{de::DeserializeOwned, Serialize};

/// A failed API call: the HTTP status (0 when no answer arrived) and the contract's
/// `{error, message}` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status code, or 0 for a network failure or an unreadable answer.
    pub status: u16,
    /// The error body; synthesised when the answer carried none.
    pub body: ErrorBody,
}

impl ApiError {
    /// The human-readable message to show next to the form.
    pub fn message(&self) -> &str {
        &self.body.message
    }

    /// An error that did not come from the server (network failure, unreadable answer).
    fn local(message: impl Into<String>) -> Self {
        Self {
            status: 0,
            body: ErrorBody {
                error: "Network error".to_owned(),
                message: message.into(),
            },
        }
    }

    /// The error for an answer with `status` whose body is not the contract's JSON.
    fn from_status(status: u16, text: &str) -> Self {
        match serde_json::from_str::<ErrorBody>(text) {
            Ok(body) => Self { status, body },
            Err(_) => Self {
                status,
                body: ErrorBody {
                    error: format!("HTTP {status}"),
                    message: format!("The server answered with status {status}. Please try again."),
                },
            },
        }
    }
}

/// `GET path` and decode the JSON answer.
///
/// # Errors
/// Any non-2xx answer as its [`ApiError`], or a network failure with status 0.
pub async fn get_json<T: DeserializeOwned>(path: &str) -> Result<T, ApiError> {
    request("GET", path, None).await
}

/// `POST path` with `body` as JSON and decode the JSON answer.
///
/// # Errors
/// Any non-2xx answer as its [`ApiError`], or a network failure with status 0.
pub async fn post_json<B: Serialize, T: DeserializeOwned>(
    path: &str,
    body: &B,
) -> Result<T, ApiError> {
    let body = serde_json::to_string(body)
        .map_err(|err| ApiError::local(format!("Could not encode the request: {err}")))?;
    request("POST", path, Some(body)).await
}

/// `GET path` for the signed-in user (see [`signed_in`] for expired and ended sessions).
///
/// # Errors
/// 401 when the session cannot be refreshed, or the request's error.
pub async fn get_json_signed_in<T: DeserializeOwned>(path: &str) -> Result<T, ApiError> {
    signed_in("GET", path, None).await
}

/// `POST path` with `body` as JSON for the signed-in user.
///
/// # Errors
/// 401 when the session cannot be refreshed, or the request's error.
pub async fn post_signed_in<B: Serialize, T: DeserializeOwned>(
    path: &str,
    body: &B,
) -> Result<T, ApiError> {
    signed_in("POST", path, Some(encode(body)?)).await
}

/// `PUT path` with `body` as JSON for the signed-in user.
///
/// # Errors
/// 401 when the session cannot be refreshed, or the request's error.
pub async fn put_signed_in<B: Serialize, T: DeserializeOwned>(
    path: &str,
    body: &B,
) -> Result<T, ApiError> {
    signed_in("PUT", path, Some(encode(body)?)).await
}

/// `PATCH path` with `body` as JSON for the signed-in user.
///
/// # Errors
/// 401 when the session cannot be refreshed, or the request's error.
pub async fn patch_signed_in<B: Serialize, T: DeserializeOwned>(
    path: &str,
    body: &B,
) -> Result<T, ApiError> {
    signed_in("PATCH", path, Some(encode(body)?)).await
}

/// `DELETE path` for the signed-in user.
///
/// # Errors
/// 401 when the session cannot be refreshed, or the request's error.
pub async fn delete_signed_in<T: DeserializeOwned>(path: &str) -> Result<T, ApiError> {
    signed_in("DELETE", path, None).await
}

fn encode<B: Serialize>(body: &B) -> Result<String, ApiError> {
    serde_json::to_string(body)
        .map_err(|err| ApiError::local(format!("Could not encode the request: {err}")))
}

/// One request of the signed-in user. When the access token has expired (401), rotates
/// the session once with `POST /api/auth/refresh` (the refresh cookie carries the refresh
/// token, so the body is `{}`) and retries once. When the session has ended (revoked,
/// expired, signed out elsewhere) the browser goes to the sign-in page.
async fn signed_in<T: DeserializeOwned>(
    method: &str,
    path: &str,
    body: Option<String>,
) -> Result<T, ApiError> {
    match request(method, path, body.clone()).await {
        Err(err) if err.status == 401 => {
            if refresh_once().await.is_err() {
                to_sign_in();
                return Err(err);
            }
            let again = request(method, path, body).await;
            if matches!(&again, Err(err) if err.status == 401) {
                to_sign_in();
            }
            again
        }
        other => other,
    }
}

/// Sends the browser to `/login` (a full page load, so no state of the old session stays).
pub fn to_sign_in() {
    go_to("/login");
}

/// Sends the browser to `href` with a full page load (another site, or a server route).
pub fn go_to(href: &str) {
    if cfg!(feature = "hydrate") {
        if let Some(window) = web_sys::window() {
            let _ = window.location().set_href(href);
        }
    }
}

thread_local! {
    /// The refresh under way, shared by every request that found its access token expired.
    static REFRESHING: std::cell::RefCell<Option<js_sys::Promise>> = const { std::cell::RefCell::new(None) };
}

/// [`refresh_session`], once for all requests that need it at the same time. Refresh
/// tokens rotate and replaying a rotated one ends the session (docs/api.md § Auth), so two
/// concurrent refreshes with the same cookie would sign the user out.
async fn refresh_once() -> Result<(), ApiError> {
    let running = REFRESHING.with(|cell| cell.borrow().clone());
    let promise = match running {
        Some(promise) => promise,
        None => {
            let promise = wasm_bindgen_futures::future_to_promise(async {
                let outcome = refresh_session().await;
                REFRESHING.with(|cell| cell.borrow_mut().take());
                outcome
                    .map(|()| wasm_bindgen::JsValue::TRUE)
                    .map_err(|err| wasm_bindgen::JsValue::from_str(err.message()))
            });
            REFRESHING.with(|cell| *cell.borrow_mut() = Some(promise.clone()));
            promise
        }
    };
    wasm_bindgen_futures::JsFuture::from(promise)
        .await
        .map(|_| ())
        .map_err(|_| ApiError::local("The session could not be renewed."))
}

/// Rotates the session tokens held in cookies (`POST /api/auth/refresh` with `{}`).
///
/// # Errors
/// 401 when the refresh cookie is missing, expired or revoked.
pub async fn refresh_session() -> Result<(), ApiError> {
    post_json::<_, serde::de::IgnoredAny>("/api/auth/refresh", &serde_json::Map::new())
        .await
        .map(|_| ())
}

/// Sends one request and decodes the answer: 2xx as `T` (an empty body reads as JSON
/// `null`), anything else as [`ApiError`].
async fn request<T: DeserializeOwned>(
    method: &str,
    path: &str,
    body: Option<String>,
) -> Result<T, ApiError> {
    let (status, text) = browser::fetch(method, path, body).await?;
    decode(status, &text)
}

fn decode<T: DeserializeOwned>(status: u16, text: &str) -> Result<T, ApiError> {
    if (200..300).contains(&status) {
        let text = if text.trim().is_empty() { "null" } else { text };
        serde_json::from_str(text)
            .map_err(|err| ApiError::local(format!("Unexpected answer from the server: {err}")))
    } else {
        Err(ApiError::from_status(status, text))
    }
}

/// Cancels a running chat stream: wraps the `AbortController` whose signal the request
/// carries. Create it in an event handler (it needs the browser).
#[derive(Clone)]
pub struct Abort(web_sys::AbortController);

impl Abort {
    /// A fresh controller.
    ///
    /// # Errors
    /// When the browser cannot create an `AbortController`.
    pub fn new() -> Result<Self, ApiError> {
        web_sys::AbortController::new()
            .map(Self)
            .map_err(browser::js_error)
    }

    /// Aborts the request: its pending read rejects and the server sees the client leave
    /// (a resumable reply goes on generating: [`cancel_reply`] stops it).
    pub fn abort(&self) {
        self.0.abort();
    }

    /// Whether [`Abort::abort`] was called: requests with this controller fail at once.
    pub fn is_aborted(&self) -> bool {
        self.0.signal().aborted()
    }
}

/// How a chat stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEnd {
    /// `[DONE]` arrived (after the reply, or after an error frame).
    Done,
    /// [`Abort::abort`] stopped it.
    Stopped,
    /// It ended without `[DONE]`: the connection closed or failed, or the server asked for
    /// the reply to be resumed ([`crate::sse::Step::Resume`], whose reason this holds). A resumable
    /// reply may still be generating: [`open_resume`] from the cursor's last id follows it.
    Cut(Option<ErrorBody>),
}

/// The answer of a chat stream request, its body not read yet: the headers say which
/// thread and reply it streams, [`ReplyStream::read`] reads the frames.
pub struct ReplyStream {
    response: web_sys::Response,
}

impl ReplyStream {
    /// The thread the reply belongs to (`X-Thread-Id`).
    pub fn thread_id(&self) -> Option<String> {
        self.header("x-thread-id")
    }

    /// The reply's message id (`X-Reply-Id`); absent from the stream of a decision that
    /// only says which calls still wait, and from servers older than resumable streams.
    pub fn reply_id(&self) -> Option<String> {
        self.header("x-reply-id")
    }

    fn header(&self, name: &str) -> Option<String> {
        self.response.headers().get(name).ok().flatten()
    }

    /// Reads the body to its end: every event goes through `cursor` ([`ReplyCursor::step`],
    /// which skips frames received already and moves the last id), and every new frame to
    /// `on_frame`, in order. A connection that fails midway ends it as [`StreamEnd::Cut`].
    pub async fn read(
        self,
        cursor: &mut ReplyCursor,
        on_frame: impl FnMut(StreamFrame),
    ) -> StreamEnd {
        browser::read_events(&self.response, cursor, on_frame).await
    }

    /// Closes the answer without reading it (a stream that is not wanted after all).
    pub async fn close(self) {
        if let Some(body) = self.response.body() {
            let _ = wasm_bindgen_futures::JsFuture::from(body.cancel()).await;
        }
    }
}

/// `POST /api/agents/{agent_id}/chat` with `stream: true`, read with `fetch` and a
/// `ReadableStream` reader (not `EventSource`, which cannot POST): the answer, once its
/// headers have arrived.
///
/// # Errors
/// An [`ApiError`] when the server refuses the request (4xx/5xx before the stream; 409
/// while the thread's previous reply is in progress) or the network fails; an error after
/// the start arrives as a [`StreamFrame::Error`] frame.
pub async fn open_chat(
    agent_id: &str,
    body: &ChatRequest,
    abort: &Abort,
) -> Result<ReplyStream, ApiError> {
    let path = format!("/api/agents/{agent_id}/chat");
    open_stream("POST", &path, Some(encode(body)?), None, abort).await
}

/// `POST /api/agents/{agent_id}/conversations/{thread_id}/approvals` with `stream: true`:
/// decides a tool call that waits for approval; the continued reply is read as
/// [`open_chat`]'s (docs/api.md § Approvals). While other calls of the reply still wait,
/// the stream holds this call's outcome and a `pendingApprovals` frame only. Not
/// resumable.
///
/// # Errors
/// As [`open_chat`]; 404 for an unknown call, 409 for a call already decided or expired.
pub async fn open_approval(
    agent_id: &str,
    thread_id: &str,
    body: &ApprovalRequest,
    abort: &Abort,
) -> Result<ReplyStream, ApiError> {
    let path = format!("/api/agents/{agent_id}/conversations/{thread_id}/approvals");
    open_stream("POST", &path, Some(encode(body)?), None, abort).await
}

/// `GET /api/agents/{agent_id}/conversations/{thread_id}/stream` with `Last-Event-ID:
/// last_event_id` (0: from the first frame): the thread's latest resumable reply from the
/// next frame on, live while it is generated, replayed for 10 minutes after it ended
/// (docs/api.md § Resumable streams). Compare its [`ReplyStream::reply_id`] with the reply
/// followed ([`ReplyCursor::follows`]): the thread may have moved on to another.
///
/// # Errors
/// 404 when the thread has no such reply (not resumable, ended longer ago, its frames
/// after that id dropped; the stored messages then hold the reply) or the thread is not
/// stored yet; a network failure with status 0.
pub async fn open_resume(
    agent_id: &str,
    thread_id: &str,
    last_event_id: u64,
    abort: &Abort,
) -> Result<ReplyStream, ApiError> {
    let path = format!("/api/agents/{agent_id}/conversations/{thread_id}/stream");
    open_stream("GET", &path, None, Some(last_event_id), abort).await
}

/// `POST /api/agents/{agent_id}/conversations/{thread_id}/cancel`: stops the thread's reply
/// in progress. It is stored as `cancelled`, and its stream ends with the error frame
/// "The reply was cancelled" ([`crate::sse::stopped_status`]) and `[DONE]`. Answers once
/// the thread takes a new message.
///
/// # Errors
/// 404 when no reply of the thread is in progress (it has just ended), or the request's
/// error.
pub async fn cancel_reply(agent_id: &str, thread_id: &str) -> Result<(), ApiError> {
    let path = format!("/api/agents/{agent_id}/conversations/{thread_id}/cancel");
    post_signed_in::<_, serde::de::IgnoredAny>(&path, &serde_json::Map::new())
        .await
        .map(drop)
}

/// A request answered with a server-sent event stream: renews an expired session once,
/// then answers the response whose body is still to be read.
async fn open_stream(
    method: &str,
    path: &str,
    body: Option<String>,
    last_event_id: Option<u64>,
    abort: &Abort,
) -> Result<ReplyStream, ApiError> {
    let mut response = browser::open(method, path, body.as_deref(), last_event_id, abort).await?;
    if response.status() == 401 {
        if refresh_once().await.is_err() {
            to_sign_in();
        } else {
            response = browser::open(method, path, body.as_deref(), last_event_id, abort).await?;
        }
    }
    if !response.ok() {
        let text = browser::text(&response).await?;
        if response.status() == 401 {
            to_sign_in();
        }
        return Err(ApiError::from_status(response.status(), &text));
    }
    Ok(ReplyStream { response })
}

/// Uploads `file` as the multipart field `file` to `path` with `XMLHttpRequest` (`fetch`
/// reports no upload progress); `on_progress` receives the fraction sent, 0.0 to 1.0.
/// Retries once after refreshing an expired session.
///
/// # Errors
/// The server's error (413 too large, 415 unsupported kind, ...) or a network failure.
pub async fn upload_file(
    path: &str,
    file: &web_sys::File,
    on_progress: impl Fn(f64) + Clone + 'static,
) -> Result<UploadResponse, ApiError> {
    let (mut status, mut text) = browser::upload(path, file, on_progress.clone()).await?;
    if status == 401 {
        if refresh_once().await.is_err() {
            to_sign_in();
        } else {
            (status, text) = browser::upload(path, file, on_progress).await?;
        }
    }
    decode(status, &text)
}

/// Writes `text` to the clipboard (`navigator.clipboard.writeText`).
///
/// # Errors
/// When the browser refuses (no permission, insecure context).
pub async fn copy_text(text: &str) -> Result<(), ApiError> {
    let window = web_sys::window().ok_or_else(|| ApiError::local("No browser window"))?;
    let promise = window.navigator().clipboard().write_text(text);
    wasm_bindgen_futures::JsFuture::from(promise)
        .await
        .map(|_| ())
        .map_err(|_| {
            ApiError::local(
                "The browser did not allow copying; select the text and copy it yourself.",
            )
        })
}

/// Waits `ms` milliseconds (a `setTimeout` promise); returns at once outside the browser.
pub async fn sleep(ms: i32) {
    if !cfg!(feature = "hydrate") {
        return;
    }
    let Some(window) = web_sys::window() else {
        return;
    };
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// The browser side of the client. It compiles on the host too (the bindings exist
/// there), but the public functions above reach it only in the browser: during
/// server-side rendering [`fetch`] answers an error at once.
mod browser {
    use super::{ApiError, StreamEnd};
    use crate::{
        api::{CSRF_COOKIE, CSRF_HEADER},
        sse::{ReplyCursor, SseParser, Step, StreamFrame},
    };
    use wasm_bindgen::{closure::Closure, JsCast, JsValue};
    use wasm_bindgen_futures::JsFuture;
    use web_sys::{
        FormData, Headers, HtmlDocument, ProgressEvent, ReadableStreamDefaultReader,
        RequestCredentials, RequestInit, Response, XmlHttpRequest,
    };

    /// Performs the request with `window.fetch` and reads the whole answer as text.
    pub(super) async fn fetch(
        method: &str,
        path: &str,
        body: Option<String>,
    ) -> Result<(u16, String), ApiError> {
        if !cfg!(feature = "hydrate") {
            // The server renders the loading state; the browser does the work after
            // hydration.
            return Err(ApiError::local("Requests are made from the browser only."));
        }
        let init = init(method, body.as_deref())?;
        let response = send(path, &init).await?;
        let text = text(&response).await?;
        Ok((response.status(), text))
    }

    /// The request options: method, same-origin credentials, JSON body and CSRF header.
    fn init(method: &str, body: Option<&str>) -> Result<RequestInit, ApiError> {
        init_with(method, body, &[])
    }

    /// [`init`] with the headers `extra` added.
    fn init_with(
        method: &str,
        body: Option<&str>,
        extra: &[(&str, &str)],
    ) -> Result<RequestInit, ApiError> {
        let headers = Headers::new().map_err(js_error)?;
        headers
            .set("Accept", "application/json")
            .map_err(js_error)?;
        for (name, value) in extra {
            headers.set(name, value).map_err(js_error)?;
        }
        let init = RequestInit::new();
        init.set_method(method);
        init.set_credentials(RequestCredentials::SameOrigin);
        if let Some(body) = body {
            headers
                .set("Content-Type", "application/json")
                .map_err(js_error)?;
            init.set_body(&JsValue::from_str(body));
        }
        if !matches!(method, "GET" | "HEAD" | "OPTIONS") {
            if let Some(token) = cookie(CSRF_COOKIE) {
                headers.set(CSRF_HEADER, &token).map_err(js_error)?;
            }
        }
        init.set_headers(&headers);
        Ok(init)
    }

    async fn send(path: &str, init: &RequestInit) -> Result<Response, ApiError> {
        let window = web_sys::window().ok_or_else(|| ApiError::local("No browser window"))?;
        JsFuture::from(window.fetch_with_str_and_init(path, init))
            .await
            .map_err(js_error)?
            .dyn_into()
            .map_err(js_error)
    }

    /// The whole body of `response` as text.
    pub(super) async fn text(response: &Response) -> Result<String, ApiError> {
        Ok(JsFuture::from(response.text().map_err(js_error)?)
            .await
            .map_err(js_error)?
            .as_string()
            .unwrap_or_default())
    }

    /// Starts a request answered with an event stream that `abort` can cancel, with
    /// `Last-Event-ID` when resuming.
    pub(super) async fn open(
        method: &str,
        path: &str,
        body: Option<&str>,
        last_event_id: Option<u64>,
        abort: &super::Abort,
    ) -> Result<Response, ApiError> {
        let id = last_event_id.map(|id| id.to_string());
        let extra: Vec<(&str, &str)> = id.iter().map(|id| ("Last-Event-ID", id.as_str())).collect();
        let init = init_with(method, body, &extra)?;
        init.set_signal(Some(&abort.0.signal()));
        send(path, &init).await
    }

    /// Reads the body of a streamed answer chunk by chunk and hands over its new frames.
    pub(super) async fn read_events(
        response: &Response,
        cursor: &mut ReplyCursor,
        mut on_frame: impl FnMut(StreamFrame),
    ) -> StreamEnd {
        let Some(body) = response.body() else {
            return StreamEnd::Cut(None);
        };
        let reader: ReadableStreamDefaultReader = body.get_reader().unchecked_into();
        let mut parser = SseParser::default();
        loop {
            let result = match JsFuture::from(reader.read()).await {
                Ok(result) => result,
                Err(err) if is_abort(&err) => return StreamEnd::Stopped,
                // The connection failed midway (network change, proxy cut, server gone).
                Err(_) => return StreamEnd::Cut(None),
            };
            let done = js_sys::Reflect::get(&result, &JsValue::from_str("done"))
                .map(|v| v.is_truthy())
                .unwrap_or(true);
            if done {
                return StreamEnd::Cut(None);
            }
            let Ok(value) = js_sys::Reflect::get(&result, &JsValue::from_str("value")) else {
                return StreamEnd::Cut(None);
            };
            let bytes = js_sys::Uint8Array::new(&value).to_vec();
            for event in parser.push(&bytes) {
                match cursor.step(&event) {
                    Step::Frame(frame) => on_frame(frame),
                    Step::Done => {
                        let _ = reader.cancel();
                        return StreamEnd::Done;
                    }
                    Step::Resume(reason) => {
                        let _ = reader.cancel();
                        return StreamEnd::Cut(Some(reason));
                    }
                    Step::Skip => {}
                }
            }
        }
    }

    fn is_abort(err: &JsValue) -> bool {
        err.dyn_ref::<web_sys::DomException>()
            .is_some_and(|e| e.name() == "AbortError")
    }

    /// `POST path` with `file` as multipart field `file`, reporting upload progress.
    pub(super) async fn upload(
        path: &str,
        file: &web_sys::File,
        on_progress: impl Fn(f64) + 'static,
    ) -> Result<(u16, String), ApiError> {
        let xhr = XmlHttpRequest::new().map_err(js_error)?;
        xhr.open_with_async("POST", path, true).map_err(js_error)?;
        xhr.set_request_header("Accept", "application/json")
            .map_err(js_error)?;
        if let Some(token) = cookie(CSRF_COOKIE) {
            xhr.set_request_header(CSRF_HEADER, &token)
                .map_err(js_error)?;
        }
        let form = FormData::new().map_err(js_error)?;
        form.append_with_blob_and_filename("file", file, &file.name())
            .map_err(js_error)?;
        let progress = Closure::<dyn FnMut(ProgressEvent)>::new(move |event: ProgressEvent| {
            if event.length_computable() && event.total() > 0.0 {
                on_progress(event.loaded() / event.total());
            }
        });
        xhr.upload()
            .map_err(js_error)?
            .set_onprogress(Some(progress.as_ref().unchecked_ref()));
        let finished = js_sys::Promise::new(&mut |resolve, reject| {
            xhr.set_onload(Some(&resolve));
            xhr.set_onerror(Some(&reject));
            xhr.set_onabort(Some(&reject));
        });
        xhr.send_with_opt_form_data(Some(&form)).map_err(js_error)?;
        let outcome = JsFuture::from(finished).await;
        // The progress handler must live until the request has finished.
        drop(progress);
        if outcome.is_err() {
            return Err(ApiError::local(
                "The upload did not reach the server; check your connection and try again.",
            ));
        }
        let status = xhr.status().map_err(js_error)?;
        let text = xhr.response_text().map_err(js_error)?.unwrap_or_default();
        Ok((status, text))
    }

    /// The value of the cookie `name` readable from `document.cookie`, if set.
    fn cookie(name: &str) -> Option<String> {
        let cookies = web_sys::window()?
            .document()?
            .dyn_into::<HtmlDocument>()
            .ok()?
            .cookie()
            .ok()?;
        cookies.split(';').find_map(|pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key == name && !value.is_empty()).then(|| value.to_owned())
        })
    }

    /// A JavaScript exception (e.g. a network failure) as an [`ApiError`] with status 0.
    pub(super) fn js_error(err: JsValue) -> ApiError {
        let detail = err
            .dyn_ref::<js_sys::Error>()
            .map(|e| String::from(e.message()))
            .or_else(|| err.as_string())
            .unwrap_or_else(|| "unknown error".to_owned());
        ApiError::local(format!("Could not reach the server ({detail})."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_body_is_kept_when_the_server_sends_one() {
        let err = ApiError::from_status(
            401,
            r#"{"error":"Unauthorized","message":"Invalid email or password"}"#,
        );
        assert_eq!(err.status, 401);
        assert_eq!(err.message(), "Invalid email or password");
    }

    #[test]
    fn a_body_that_is_not_json_gets_a_generic_message() {
        let err = ApiError::from_status(502, "<html>Bad Gateway</html>");
        assert_eq!(err.status, 502);
        assert_eq!(err.body.error, "HTTP 502");
        assert!(err.message().contains("502"));
    }
}
