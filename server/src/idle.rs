//! Silences in streams, with one lazy timer per stream: a reply watches the provider's
//! silence (`PROVIDER_TIMEOUT_SECS`) and its own towards the client (a `: ping` after
//! `SSE_HEARTBEAT_SECS`, docs/api.md § Events). [`Idle`] notes each item's time and moves its
//! timer only when it fires, instead of re-arming it per item; the behaviour is the same.

use std::{
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
    time::Duration,
};

use futures::Stream;
use tokio::time::{Instant, Sleep};

pin_project_lite::pin_project! {
    /// `inner`'s items, and `on_silence()` after every `period` in which `inner` yielded
    /// nothing. Ends when `inner` ends. See the module documentation.
    pub struct Idle<S, F> {
        #[pin]
        inner: S,
        #[pin]
        timer: Sleep,
        period: Duration,
        // When `inner` last yielded an item, or the last silence was reported.
        last: Instant,
        on_silence: F,
    }
}

/// `inner` with `on_silence()` yielded after every `period` of silence ([`Idle`]); the first
/// period starts now.
pub fn idle<S, F>(inner: S, period: Duration, on_silence: F) -> Idle<S, F>
where
    S: Stream,
    F: FnMut() -> S::Item,
{
    let now = Instant::now();
    Idle {
        inner,
        timer: tokio::time::sleep_until(now + period),
        period,
        last: now,
        on_silence,
    }
}

impl<S, F> Stream for Idle<S, F>
where
    S: Stream,
    F: FnMut() -> S::Item,
{
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let mut this = self.project();
        if let Poll::Ready(item) = this.inner.poll_next(cx) {
            if item.is_some() {
                *this.last = Instant::now();
            }
            return Poll::Ready(item);
        }
        loop {
            ready!(this.timer.as_mut().poll(cx));
            let now = Instant::now();
            let due = *this.last + *this.period;
            if due <= now {
                *this.last = now;
                this.timer.as_mut().reset(now + *this.period);
                return Poll::Ready(Some((this.on_silence)()));
            }
            // An item came during the period: the silence started then.
            this.timer.as_mut().reset(due);
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.inner.size_hint().0, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    /// Items at the given offsets (ms from the start), then the end.
    fn paced(offsets: &'static [u64]) -> impl Stream<Item = &'static str> {
        let start = Instant::now();
        futures::stream::iter(offsets).then(move |ms| async move {
            tokio::time::sleep_until(start + Duration::from_millis(*ms)).await;
            "item"
        })
    }

    /// What a stream yields, each with the time it came (ms from the start).
    async fn timeline(s: impl Stream<Item = &'static str>) -> Vec<(u64, &'static str)> {
        let start = Instant::now();
        s.map(|item| (start.elapsed().as_millis() as u64, item))
            .collect()
            .await
    }

    #[tokio::test(start_paused = true)]
    async fn a_silence_is_reported_once_per_full_period_after_the_last_item() {
        let stream = idle(
            paced(&[50, 100, 350, 400]),
            Duration::from_millis(100),
            || "silence",
        );
        assert_eq!(
            timeline(stream).await,
            [
                (50, "item"),
                (100, "item"),
                // 100 ms after the last item, and again 100 ms later.
                (200, "silence"),
                (300, "silence"),
                // 350 is 50 ms after the last silence: none before it.
                (350, "item"),
                (400, "item"),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn items_closer_than_the_period_keep_it_quiet() {
        let offsets: &'static [u64] = &[90, 180, 270, 360, 450];
        let stream = idle(paced(offsets), Duration::from_millis(100), || "silence");
        let seen = timeline(stream).await;
        assert!(seen.iter().all(|(_, what)| *what == "item"), "{seen:?}");
        assert_eq!(seen.len(), offsets.len());
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_period_starts_when_the_stream_is_made() {
        let stream = idle(paced(&[250]), Duration::from_millis(100), || "silence");
        assert_eq!(
            timeline(stream).await,
            [(100, "silence"), (200, "silence"), (250, "item")]
        );
    }
}
