//! Reading a `text/event-stream` answer event by event in tests. Each event keeps the `id:`
//! its own frame carried, `None` without one: the tests check which frames the server
//! numbered, which a client following the specification hides by repeating the last id
//! (https://html.spec.whatwg.org/multipage/server-sent-events.html#dispatchMessage).

use std::time::Duration;

use futures::{stream::BoxStream, StreamExt};

/// One event: the id its frame carried, if any, and its data (`data: ` lines; one per
/// frame in AgentChat's streams).
pub type Event = (Option<u64>, String);

/// The events of one answer, read as they arrive; comment-only frames are skipped.
pub struct Events {
    body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl Events {
    /// Reads the body of `res`.
    pub fn of(res: reqwest::Response) -> Self {
        Self {
            body: res.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    /// The next event; `None` once the answer has ended or broken, or after 30 s of silence.
    /// Panics on an `id:` that is not a whole number, or a body that is not UTF-8.
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let raw: String = self.buffer.drain(..end + 2).collect();
                let id = raw
                    .lines()
                    .find_map(|l| l.strip_prefix("id: "))
                    .map(|v| v.parse().expect("a numeric event id"));
                if let Some(data) = raw.lines().find_map(|l| l.strip_prefix("data: ")) {
                    return Some((id, data.to_string()));
                }
            }
            let bytes = tokio::time::timeout(Duration::from_secs(30), self.body.next())
                .await
                .ok()??
                .ok()?;
            self.buffer
                .push_str(std::str::from_utf8(&bytes).expect("a UTF-8 event stream"));
        }
    }

    /// The next `n` events. Panics when the answer ends before them.
    pub async fn take(&mut self, n: usize) -> Vec<Event> {
        let mut got = Vec::with_capacity(n);
        for _ in 0..n {
            got.push(self.next().await.expect("an event"));
        }
        got
    }

    /// Every event left, until the answer ends (or breaks).
    pub async fn rest(mut self) -> Vec<Event> {
        let mut got = Vec::new();
        while let Some(event) = self.next().await {
            got.push(event);
        }
        got
    }
}
