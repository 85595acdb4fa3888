//! Streamed answers: a list of steps played into a response body, with bookkeeping of open,
//! completed and cancelled streams.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::Notify;

use crate::server::Shared;

/// How long a cut stream waits before dropping its connection, so that the chunks written
/// before the cut reach the client.
const CUT_FLUSH_GRACE: Duration = Duration::from_millis(20);

/// Drops the connection a request arrived on. Inserted into every request's extensions.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionKiller(pub(crate) Arc<Notify>);

impl ConnectionKiller {
    /// Drops the connection: nothing more is written to it, not even the end of a response.
    pub(crate) fn kill(&self) {
        self.0.notify_one();
    }
}

/// One step of a streamed answer.
#[derive(Debug)]
pub(crate) enum Step {
    /// Write these bytes.
    Send(Bytes),
    /// Wait.
    Sleep(Duration),
    /// Drop the connection without ending the response.
    Cut,
}

/// The steps of a streamed answer, built frame by frame.
#[derive(Debug, Default)]
pub(crate) struct Steps(Vec<Step>);

impl Steps {
    /// Writes one frame.
    pub(crate) fn send(&mut self, frame: String) {
        self.0.push(Step::Send(Bytes::from(frame)));
    }

    /// Waits, unless `duration` is zero.
    pub(crate) fn sleep(&mut self, duration: Duration) {
        if !duration.is_zero() {
            self.0.push(Step::Sleep(duration));
        }
    }

    /// Drops the connection.
    pub(crate) fn cut(&mut self) {
        self.0.push(Step::Cut);
    }

    /// Writes the token chunks made by `frame`, honouring the token interval and the `cut`
    /// and `pause` markers. Returns false when the stream is cut (nothing may follow).
    pub(crate) fn tokens(
        &mut self,
        tokens: &[String],
        interval: Duration,
        pause: Option<Duration>,
        cut: Option<usize>,
        mut frame: impl FnMut(&str) -> String,
    ) -> bool {
        for (index, token) in tokens.iter().enumerate() {
            if cut == Some(index) {
                self.cut();
                return false;
            }
            if index > 0 {
                self.sleep(interval);
            }
            self.send(frame(token));
            if index == 0 {
                self.sleep(pause.unwrap_or_default());
            }
        }
        if tokens.is_empty() {
            self.sleep(pause.unwrap_or_default());
        }
        if cut.is_some() {
            // Fewer tokens than the cut asks for: the stream is cut after all of them.
            self.cut();
            return false;
        }
        true
    }

    /// The `text/event-stream` response playing these steps.
    pub(crate) fn into_response(
        self,
        shared: &Arc<Shared>,
        killer: Option<ConnectionKiller>,
    ) -> Response {
        let guard = StreamGuard::new(Arc::clone(shared));
        let state = Player {
            steps: self.0.into(),
            guard,
            killer,
        };
        let stream = futures::stream::unfold(state, Player::next);
        let mut response = (StatusCode::OK, Body::from_stream(stream)).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        response
    }
}

/// The state of a playing stream.
struct Player {
    steps: VecDeque<Step>,
    guard: StreamGuard,
    killer: Option<ConnectionKiller>,
}

impl Player {
    async fn next(mut self) -> Option<(Result<Bytes, std::io::Error>, Self)> {
        loop {
            match self.steps.pop_front() {
                Some(Step::Send(bytes)) => return Some((Ok(bytes), self)),
                Some(Step::Sleep(duration)) => tokio::time::sleep(duration).await,
                Some(Step::Cut) => {
                    self.guard.end = End::Cut;
                    tokio::time::sleep(CUT_FLUSH_GRACE).await;
                    if let Some(killer) = &self.killer {
                        killer.kill();
                        // The connection is dropped with this stream in it.
                        std::future::pending::<()>().await;
                    }
                    let error = std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "stream cut by a control marker",
                    );
                    return Some((Err(error), self));
                }
                None => {
                    self.guard.end = End::Completed;
                    return None;
                }
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Still writing: dropping the stream now means the client went away.
    Running,
    Completed,
    Cut,
}

/// Counts a stream as open while it lives and records how it ended when dropped.
struct StreamGuard {
    shared: Arc<Shared>,
    end: End,
}

impl StreamGuard {
    fn new(shared: Arc<Shared>) -> Self {
        shared.open_streams.fetch_add(1, Ordering::SeqCst);
        Self {
            shared,
            end: End::Running,
        }
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        match self.end {
            End::Running => {
                self.shared.cancelled_streams.fetch_add(1, Ordering::SeqCst);
            }
            End::Completed => {
                self.shared.completed_streams.fetch_add(1, Ordering::SeqCst);
            }
            End::Cut => {}
        }
        self.shared.open_streams.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Drops the connection of a request without answering it.
pub(crate) async fn drop_connection(killer: Option<ConnectionKiller>) -> Response {
    if let Some(killer) = killer {
        killer.kill();
        // The connection is dropped with this handler in it.
        std::future::pending::<()>().await;
    }
    // Without a connection to drop, end the answer with an error after its head.
    let error = std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "answer cut by a control marker",
    );
    let stream = futures::stream::once(async move { Err::<Bytes, _>(error) });
    (StatusCode::OK, Body::from_stream(stream)).into_response()
}
