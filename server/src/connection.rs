//! Limits on client connections (README § Configuration; RFC 9112 § 9.5): a connection is
//! in one of three phases ([`Activity`]): **head** (from acceptance or a next request's first
//! byte until its head is read; [`ConnectionLimits::header_read_timeout`]), **busy** (until
//! the answer is written, streams included; no limit) and **idle**
//! ([`ConnectionLimits::idle_timeout`]). When a phase runs out the connection is closed
//! without an answer. One timer per connection does both, because hyper 1.x's own
//! `header_read_timeout` starts on idle kept-alive connections (`proto/h1/conn.rs`).
//!
//! A connection speaks HTTP/1.1, or HTTP/2 when its first bytes are HTTP/2's connection
//! preface (RFC 9113 § 3.4, "prior knowledge"; [`Watched::sniff`]). On HTTP/2 the head phase
//! ends with the first request: frames between requests (`PING`, `WINDOW_UPDATE`) are not a
//! head, so such a connection is idle whenever no stream is open.

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    },
    task::{ready, Context, Poll},
    time::Duration,
};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Default `HEADER_READ_TIMEOUT_SECS`.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest `HEADER_READ_TIMEOUT_SECS` allowed.
pub const MAX_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Default `IDLE_TIMEOUT_SECS`.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest `IDLE_TIMEOUT_SECS` allowed.
pub const MAX_IDLE_TIMEOUT: Duration = Duration::from_secs(3_600);
/// Default `MAX_CONNECTIONS`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4_096;
/// Largest `MAX_CONNECTIONS` allowed.
pub const MAX_MAX_CONNECTIONS: usize = 1 << 20;

/// The limits on client connections (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Longest time to send a request's head (`HEADER_READ_TIMEOUT_SECS`).
    pub header_read_timeout: Duration,
    /// Longest wait of a kept-alive connection for its next request (`IDLE_TIMEOUT_SECS`).
    pub idle_timeout: Duration,
    /// Connections served at once (`MAX_CONNECTIONS`); further ones wait to be accepted.
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Descriptors kept free beside the connections (database, extraction pipes, outbound, mail).
pub const RESERVED_FILES: u64 = 1_024;

/// Raises the soft `RLIMIT_NOFILE` (never lowers; up to the hard limit, logged if short) to fit
/// `max_connections` and [`RESERVED_FILES`]. Returns the limit.
#[cfg(unix)]
pub fn fit_open_files(max_connections: usize) -> Option<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let wanted = u64::try_from(max_connections)
        .unwrap_or(u64::MAX)
        .saturating_add(RESERVED_FILES);
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft >= wanted {
        return Some(soft);
    }
    let target = wanted.min(hard);
    let soft = match setrlimit(Resource::RLIMIT_NOFILE, target, hard) {
        Ok(()) => target,
        Err(err) => {
            tracing::warn!(error = %err, "cannot raise the limit on open files");
            soft
        }
    };
    if soft < wanted {
        tracing::warn!(
            limit = soft,
            max_connections,
            "the limit on open files is lower than MAX_CONNECTIONS needs ({wanted}); \
             raise the hard limit (e.g. LimitNOFILE) or lower MAX_CONNECTIONS"
        );
    }
    Some(soft)
}

/// What one connection is doing, shared by its socket ([`Watched`]), requests
/// ([`Activity::begin`]) and timer ([`Deadline`]); changes are counted.
#[derive(Debug)]
pub struct Activity {
    /// Requests whose answer is not finished yet (0 or 1 on HTTP/1.1).
    in_flight: AtomicUsize,
    /// Bytes of a request's head have arrived and no request has started since.
    head_started: AtomicBool,
    /// HTTP/2: bytes outside a request never start a head ([`Activity::multiplexed`]).
    multiplexed: AtomicBool,
    changes: AtomicUsize,
}

/// The phase of a connection (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Head,
    Busy,
    Idle,
}

impl Activity {
    /// A newly accepted connection: waiting for its first request's head.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            in_flight: AtomicUsize::new(0),
            head_started: AtomicBool::new(true),
            multiplexed: AtomicBool::new(false),
            changes: AtomicUsize::new(0),
        })
    }

    /// The connection speaks HTTP/2: once its first request has begun, bytes that arrive
    /// while no request is open are frames of the connection, not a head, and leave it idle.
    pub fn multiplexed(&self) {
        self.multiplexed.store(true, Ordering::Release);
    }

    pub fn phase(&self) -> Phase {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            Phase::Busy
        } else if self.head_started.load(Ordering::Acquire) {
            Phase::Head
        } else {
            Phase::Idle
        }
    }

    /// A request's head was read: busy until the guard drops (with the answer's body).
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.head_started.store(false, Ordering::Release);
        self.changed();
        InFlight(self.clone())
    }

    pub fn changes(&self) -> usize {
        self.changes.load(Ordering::Acquire)
    }

    fn changed(&self) {
        self.changes.fetch_add(1, Ordering::AcqRel);
    }

    /// Bytes arrived from the client: outside a request, they start a request's head.
    fn received(&self) {
        if self.in_flight.load(Ordering::Acquire) == 0
            && !self.head_started.load(Ordering::Acquire)
            && !self.multiplexed.load(Ordering::Acquire)
        {
            self.head_started.store(true, Ordering::Release);
            self.changed();
        }
    }
}

/// A request being answered (see [`Activity::begin`]).
#[derive(Debug)]
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.changed();
    }
}

/// The first bytes an HTTP/2 client sends on a connection (RFC 9113 § 3.4).
pub const HTTP2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The protocol a connection speaks, told by its first bytes ([`Watched::sniff`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
}

pin_project_lite::pin_project! {
    /// A socket that tells its [`Activity`] when bytes arrive; I/O passes through unbuffered,
    /// except the at most 24 bytes [`Watched::sniff`] read, which are read again first.
    pub struct Watched<I> {
        #[pin]
        io: I,
        activity: Arc<Activity>,
        first: [u8; HTTP2_PREFACE.len()],
        kept: u8,
        replayed: u8,
    }
}

impl<I> Watched<I> {
    pub fn new(io: I, activity: Arc<Activity>) -> Self {
        Self {
            io,
            activity,
            first: [0; HTTP2_PREFACE.len()],
            kept: 0,
            replayed: 0,
        }
    }
}

impl<I: AsyncRead + Unpin> Watched<I> {
    /// Reads the connection's first bytes until they differ from [`HTTP2_PREFACE`] (HTTP/1.1)
    /// or complete it (HTTP/2), at most 24 bytes; an end of stream before either is HTTP/1.1.
    /// The bytes read are kept and read again first. Call once, before any other read.
    pub async fn sniff(&mut self) -> io::Result<Protocol> {
        let Self {
            io,
            activity,
            first,
            kept,
            ..
        } = self;
        while usize::from(*kept) < HTTP2_PREFACE.len() {
            let mut unfilled = ReadBuf::new(&mut first[usize::from(*kept)..]);
            std::future::poll_fn(|cx| Pin::new(&mut *io).poll_read(cx, &mut unfilled)).await?;
            let read = unfilled.filled().len();
            if read == 0 {
                return Ok(Protocol::Http1);
            }
            activity.received();
            *kept += u8::try_from(read).expect("at most 24 bytes");
            if !HTTP2_PREFACE.starts_with(&first[..usize::from(*kept)]) {
                return Ok(Protocol::Http1);
            }
        }
        Ok(Protocol::Http2)
    }
}

impl<I: AsyncRead> AsyncRead for Watched<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        if this.replayed < this.kept {
            let kept = &this.first[usize::from(*this.replayed)..usize::from(*this.kept)];
            let n = kept.len().min(buf.remaining());
            buf.put_slice(&kept[..n]);
            *this.replayed += u8::try_from(n).expect("at most 24 bytes");
            // What else has arrived joins them: a head read in two parts would make hyper
            // grow its 8 KiB read buffer to 16 KiB for the connection's life. Pending or an
            // error leaves these bytes as the read; the next read meets it again.
            let before = buf.filled().len();
            if buf.remaining() > 0
                && this.io.poll_read(cx, buf).is_ready()
                && buf.filled().len() > before
            {
                this.activity.received();
            }
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        ready!(this.io.poll_read(cx, buf))?;
        if buf.filled().len() > before {
            this.activity.received();
        }
        Poll::Ready(Ok(()))
    }
}

impl<I: AsyncWrite> AsyncWrite for Watched<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_shutdown(cx)
    }
}

pin_project_lite::pin_project! {
    /// A body that keeps its request [`InFlight`] until hyper drops it.
    pub struct Tracked<B> {
        #[pin]
        body: B,
        in_flight: InFlight,
    }
}

impl<B> Tracked<B> {
    pub fn new(body: B, in_flight: InFlight) -> Self {
        Self { body, in_flight }
    }
}

impl<B: hyper::body::Body> hyper::body::Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<B::Data>, B::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Why [`Deadline`] ended a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TimedOut {
    /// The client did not send a request's head within the header-read timeout.
    #[error("the request head was not received within the header-read timeout")]
    Head,
    /// The kept-alive connection saw no new request within the idle timeout.
    #[error("the connection was idle for the idle timeout")]
    Idle,
}

pin_project_lite::pin_project! {
    /// `connection` until it ends or its phase times out (then dropped); `Err` names the phase.
    pub struct Deadline<C> {
        #[pin]
        connection: C,
        #[pin]
        timer: tokio::time::Sleep,
        activity: Arc<Activity>,
        phase: Phase,
        seen: usize,
        header_read_timeout: Duration,
        idle_timeout: Duration,
    }
}

impl<C> Deadline<C> {
    /// `connection`, accepted now, whose socket and requests report to `activity`.
    pub fn new(connection: C, activity: Arc<Activity>, limits: &ConnectionLimits) -> Self {
        Self {
            connection,
            timer: tokio::time::sleep(limits.header_read_timeout),
            phase: activity.phase(),
            seen: activity.changes(),
            activity,
            header_read_timeout: limits.header_read_timeout,
            idle_timeout: limits.idle_timeout,
        }
    }
}

impl<C: Future> Future for Deadline<C> {
    type Output = Result<C::Output, TimedOut>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(done) = this.connection.poll(cx) {
            return Poll::Ready(Ok(done));
        }
        let changes = this.activity.changes();
        if changes != *this.seen {
            // The phase now in force began during this poll.
            *this.seen = changes;
            *this.phase = this.activity.phase();
            let limit = match *this.phase {
                Phase::Head => Some(*this.header_read_timeout),
                Phase::Idle => Some(*this.idle_timeout),
                Phase::Busy => None,
            };
            if let Some(limit) = limit {
                this.timer
                    .as_mut()
                    .reset(tokio::time::Instant::now() + limit);
            }
        }
        let phase = *this.phase;
        match phase {
            Phase::Busy => Poll::Pending,
            Phase::Head | Phase::Idle => {
                ready!(this.timer.poll(cx));
                Poll::Ready(Err(if phase == Phase::Head {
                    TimedOut::Head
                } else {
                    TimedOut::Idle
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_follow_bytes_requests_and_answers() {
        let activity = Activity::new();
        assert_eq!(
            activity.phase(),
            Phase::Head,
            "a new connection awaits a head"
        );
        activity.received();
        let request = activity.begin();
        assert_eq!(activity.phase(), Phase::Busy);
        activity.received();
        assert_eq!(
            activity.phase(),
            Phase::Busy,
            "a request's body or the next head does not end the answer"
        );
        drop(request);
        assert_eq!(activity.phase(), Phase::Idle);
        activity.received();
        assert_eq!(activity.phase(), Phase::Head);
        let _next = activity.begin();
        assert_eq!(activity.phase(), Phase::Busy);
    }

    #[test]
    fn on_http2_bytes_between_requests_leave_the_connection_idle() {
        let activity = Activity::new();
        activity.received();
        activity.multiplexed();
        assert_eq!(activity.phase(), Phase::Head, "until the first request");
        let first = activity.begin();
        let second = activity.begin();
        drop(first);
        assert_eq!(activity.phase(), Phase::Busy, "one stream is still open");
        drop(second);
        activity.received();
        assert_eq!(
            activity.phase(),
            Phase::Idle,
            "a PING or WINDOW_UPDATE is not a head"
        );
    }

    /// Sniffs a connection whose client writes `pieces` one by one, then everything it
    /// reads after sniffing until the end.
    async fn sniffed(pieces: &[&[u8]]) -> (Protocol, Vec<u8>, Phase) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let (client, server) = tokio::io::duplex(1024);
        let pieces: Vec<Vec<u8>> = pieces.iter().map(|p| p.to_vec()).collect();
        let writer = tokio::spawn(async move {
            let mut client = client;
            for piece in pieces {
                client.write_all(&piece).await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        let activity = Activity::new();
        let mut io = Watched::new(server, activity.clone());
        let protocol = io.sniff().await.unwrap();
        let phase = activity.phase();
        writer.await.unwrap();
        let mut read = Vec::new();
        io.read_to_end(&mut read).await.unwrap();
        (protocol, read, phase)
    }

    #[tokio::test]
    async fn the_first_read_after_sniffing_holds_all_that_has_arrived() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let (mut client, server) = tokio::io::duplex(16 * 1024);
        let head = format!(
            "POST /api/agents/a/chat HTTP/1.1\r\nHost: localhost\r\nX-Pad: {}\r\n\r\n",
            "p".repeat(500)
        );
        client.write_all(head.as_bytes()).await.unwrap();
        let mut io = Watched::new(server, Activity::new());
        assert_eq!(io.sniff().await.unwrap(), Protocol::Http1);
        let mut first = vec![0u8; 8192];
        let read = io.read(&mut first).await.unwrap();
        assert_eq!(
            &first[..read],
            head.as_bytes(),
            "one read, as without sniffing"
        );
    }

    #[tokio::test]
    async fn the_first_bytes_tell_the_protocol_and_are_read_again() {
        let get = b"GET /api/health HTTP/1.1\r\nHost: localhost\r\n\r\n";
        let (protocol, read, phase) = sniffed(&[get]).await;
        assert_eq!(protocol, Protocol::Http1);
        assert_eq!(read, get, "nothing lost or repeated");
        assert_eq!(phase, Phase::Head);

        // `POST` and `PUT` share the preface's first letter.
        let (protocol, read, _) = sniffed(&[b"P", b"OST / HTTP/1.1\r\n\r\n"]).await;
        assert_eq!(protocol, Protocol::Http1);
        assert_eq!(read, b"POST / HTTP/1.1\r\n\r\n");

        // The preface in pieces, then a frame.
        let (protocol, read, _) = sniffed(&[
            &HTTP2_PREFACE[..3],
            &HTTP2_PREFACE[3..20],
            &HTTP2_PREFACE[20..],
            b"\0\0\0\x04\0\0\0\0\0",
        ])
        .await;
        assert_eq!(protocol, Protocol::Http2);
        assert_eq!(&read[..24], HTTP2_PREFACE);
        assert_eq!(&read[24..], b"\0\0\0\x04\0\0\0\0\0");

        // A connection closed after part of the preface, or before any byte: HTTP/1.1, whose
        // parser sees what came and the end.
        let (protocol, read, _) = sniffed(&[b"PRI * HT"]).await;
        assert_eq!(
            (protocol, read.as_slice()),
            (Protocol::Http1, &b"PRI * HT"[..])
        );
        let (protocol, read, _) = sniffed(&[]).await;
        assert_eq!((protocol, read.len()), (Protocol::Http1, 0));
    }

    #[cfg(unix)]
    #[test]
    fn the_open_files_limit_fits_the_connections() {
        let soft = fit_open_files(16).expect("the limit can be read");
        assert!(soft >= 16 + RESERVED_FILES);
    }

    #[tokio::test(start_paused = true)]
    async fn the_timer_follows_the_phase() {
        let limits = ConnectionLimits {
            header_read_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(5),
            max_connections: 1,
        };
        // A head that never comes: ended after the header-read timeout.
        let activity = Activity::new();
        let started = tokio::time::Instant::now();
        let ended = Deadline::new(std::future::pending::<()>(), activity, &limits).await;
        assert_eq!(ended, Err(TimedOut::Head));
        let took = started.elapsed();
        assert!(took >= Duration::from_secs(2) && took < Duration::from_millis(2_010));

        // Idle after an answer: ended after the idle timeout, counted from the answer.
        let activity = Activity::new();
        let request = activity.begin();
        let connection = async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(request);
            std::future::pending::<()>().await
        };
        let started = tokio::time::Instant::now();
        let ended = Deadline::new(connection, activity, &limits).await;
        assert_eq!(ended, Err(TimedOut::Idle));
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(35) && took < Duration::from_millis(35_010),
            "busy for 30 s, then idle for 5 s: {took:?}"
        );

        // A request read, answered and finished within one poll: idle before and after,
        // but the idle time starts again.
        let activity = Activity::new();
        let request = activity.begin();
        let connection = {
            let activity = activity.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                drop(request);
                tokio::time::sleep(Duration::from_secs(3)).await;
                activity.received();
                drop(activity.begin());
                std::future::pending::<()>().await
            }
        };
        let started = tokio::time::Instant::now();
        let ended = Deadline::new(connection, activity, &limits).await;
        assert_eq!(ended, Err(TimedOut::Idle));
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(9) && took < Duration::from_millis(9_010),
            "idle again from the second request's end (4 s) for 5 s: {took:?}"
        );
    }
}
