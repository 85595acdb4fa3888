//! The load generator's parts.
//!
//! Requests go over raw HTTP/1.1 keep-alive connections ([`connect`]), one request in flight
//! per connection, so that the client adds as little and as constant a cost as possible.
//! Latencies are recorded in microseconds in HDR histograms ([`histogram`]).

use std::{net::SocketAddr, time::Duration};

use anyhow::Context;
use hdrhistogram::Histogram;
use http_body_util::Full;
use hyper::{
    body::Bytes,
    client::conn::http1::SendRequest,
    header::{self, HeaderValue},
    Method, Request,
};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// One HTTP/1.1 connection's sending half.
pub type Conn = SendRequest<Full<Bytes>>;

/// One HTTP/2 connection's sending half: clones send requests on the same connection.
pub type Http2Conn = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

/// Opens a keep-alive HTTP/1.1 connection to `addr` (`TCP_NODELAY` on); its driver runs on a
/// spawned task that ends with the connection.
pub async fn connect(addr: SocketAddr) -> anyhow::Result<Conn> {
    let tcp = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    tcp.set_nodelay(true)?;
    let (send, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
    tokio::spawn(async move {
        // Ends when the connection closes; errors show up on the requests.
        let _ = connection.await;
    });
    Ok(send)
}

/// Opens an HTTP/2 connection to `addr` with prior knowledge (h2c, RFC 9113 § 3.3;
/// `TCP_NODELAY` on); its driver runs on a spawned task that ends with the connection.
/// Requests sent on it need an absolute URI ([`RequestTemplate::request_absolute`]).
pub async fn connect_http2(addr: SocketAddr) -> anyhow::Result<Http2Conn> {
    let tcp = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    tcp.set_nodelay(true)?;
    let (send, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(tcp),
    )
    .await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(send)
}

/// A `POST` request sent many times: only the body and headers are cloned.
#[derive(Debug, Clone)]
pub struct RequestTemplate {
    /// Where it is sent.
    pub addr: SocketAddr,
    path: String,
    host: HeaderValue,
    authorization: HeaderValue,
    body: Bytes,
}

impl RequestTemplate {
    /// `POST path` to `addr` with `Authorization: Bearer bearer` and a JSON `body`.
    pub fn post_json(
        addr: SocketAddr,
        path: &str,
        bearer: &str,
        body: &serde_json::Value,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            addr,
            path: path.to_owned(),
            host: HeaderValue::from_str(&addr.to_string())?,
            authorization: HeaderValue::from_str(&format!("Bearer {bearer}"))?,
            body: Bytes::from(serde_json::to_vec(body)?),
        })
    }

    /// The body's size in bytes.
    pub fn body_len(&self) -> usize {
        self.body.len()
    }

    /// A new request.
    pub fn request(&self) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(self.body.clone()));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self
            .path
            .parse()
            .unwrap_or_else(|_| hyper::Uri::from_static("/"));
        let headers = request.headers_mut();
        headers.insert(header::HOST, self.host.clone());
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(header::AUTHORIZATION, self.authorization.clone());
        headers.insert(
            header::CONTENT_LENGTH,
            HeaderValue::from(self.body.len() as u64),
        );
        request
    }

    /// A new request whose URI is absolute (`http://addr/path`), as HTTP/2 sends it
    /// (`:scheme` and `:authority`).
    pub fn request_absolute(&self) -> Request<Full<Bytes>> {
        let mut request = self.request();
        *request.uri_mut() = format!("http://{}{}", self.addr, self.path)
            .parse()
            .unwrap_or_else(|_| hyper::Uri::from_static("/"));
        request.headers_mut().remove(header::HOST);
        request
    }
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseEvent {
    /// An event with `data:` lines (joined with `\n`).
    Data(String),
    /// A block of comment lines only (`: ping` heartbeats).
    Comment,
}

/// An incremental `text/event-stream` parser: feed it the body's bytes as they come.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
}

impl SseParser {
    /// Adds `bytes` and returns the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut start = 0;
        while let Some(end) = find_blank_line(&self.buffer[start..]) {
            let block = &self.buffer[start..start + end.0];
            if let Some(event) = parse_block(block) {
                events.push(event);
            }
            start += end.1;
        }
        self.buffer.drain(..start);
        events
    }

    /// Like [`SseParser::push`], each event with the value of its `id:` field, if it has one
    /// (the last `id:` line of the event wins; `id:` lines are not events of their own).
    pub fn push_with_ids(&mut self, bytes: &[u8]) -> Vec<(Option<String>, SseEvent)> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut start = 0;
        while let Some(end) = find_blank_line(&self.buffer[start..]) {
            let block = &self.buffer[start..start + end.0];
            let (id, event) = parse_block_with_id(block);
            if let Some(event) = event {
                events.push((id, event));
            }
            start += end.1;
        }
        self.buffer.drain(..start);
        events
    }

    /// Bytes received after the last complete event.
    pub fn pending(&self) -> usize {
        self.buffer.len()
    }
}

/// The end of the first event in `bytes`: (end of its text, start of what follows).
fn find_blank_line(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut index = 0;
    while index + 1 < bytes.len() {
        if bytes[index] == b'\n' {
            if bytes[index + 1] == b'\n' {
                return Some((index, index + 2));
            }
            if bytes[index + 1] == b'\r' && bytes.get(index + 2) == Some(&b'\n') {
                return Some((index, index + 3));
            }
        }
        index += 1;
    }
    None
}

fn parse_block(block: &[u8]) -> Option<SseEvent> {
    parse_block_with_id(block).1
}

/// The event of `block`, and the value of its last `id:` line.
fn parse_block_with_id(block: &[u8]) -> (Option<String>, Option<SseEvent>) {
    let text = String::from_utf8_lossy(block);
    let mut data: Option<String> = None;
    let mut id: Option<String> = None;
    let mut any_line = false;
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        any_line = true;
        if let Some(value) = line.strip_prefix("id:") {
            id = Some(value.strip_prefix(' ').unwrap_or(value).to_owned());
        } else if let Some(value) = line.strip_prefix("data:") {
            let value = value.strip_prefix(' ').unwrap_or(value);
            match &mut data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => data = Some(value.to_owned()),
            }
        }
    }
    let event = match data {
        Some(data) => Some(SseEvent::Data(data)),
        None if any_line => Some(SseEvent::Comment),
        None => None,
    };
    (id, event)
}

/// A histogram of microseconds from 1 µs to 10 minutes, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

/// Records `duration` in microseconds (clamped to the histogram's range).
pub fn record(histogram: &mut Histogram<u64>, duration: Duration) {
    let micros = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
    histogram.saturating_record(micros.max(1));
}

/// The latency percentiles reported.
pub const PERCENTILES: [f64; 4] = [50.0, 90.0, 99.0, 99.9];

/// `[p50, p90, p99, p99.9, max]` of `histogram` in microseconds (zeros when empty).
pub fn summary(histogram: &Histogram<u64>) -> [u64; 5] {
    if histogram.is_empty() {
        return [0; 5];
    }
    let mut out = [0; 5];
    for (slot, percentile) in out.iter_mut().zip(PERCENTILES) {
        *slot = histogram.value_at_percentile(percentile);
    }
    out[4] = histogram.max();
    out
}

/// Microseconds as milliseconds with two decimals.
pub fn ms(micros: u64) -> String {
    format!("{:.2}", micros as f64 / 1000.0)
}

/// A signed difference of microseconds as milliseconds with two decimals and a sign.
pub fn ms_delta(micros: i64) -> String {
    format!("{:+.2}", micros as f64 / 1000.0)
}

/// Resident memory of process `pid` from `/proc/<pid>/status`: `(VmRSS, RssAnon)` in KiB.
pub fn rss_kib(pid: u32) -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let field = |name: &str| -> anyhow::Result<u64> {
        let line = status
            .lines()
            .find(|line| line.starts_with(name))
            .with_context(|| format!("/proc/{pid}/status has no {name}"))?;
        line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .with_context(|| format!("parsing {line:?}"))
    };
    Ok((field("VmRSS:")?, field("RssAnon:")?))
}

/// CPU time (user + system) consumed so far by process `pid`, all threads, from
/// `/proc/<pid>/stat`.
pub fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // The command name may hold spaces and parentheses: count fields after the last `)`.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("malformed /proc/<pid>/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the whole line (utime, stime) are the 12th and 13th after `)`.
    let ticks = |index: usize| -> anyhow::Result<u64> {
        fields
            .get(index)
            .context("short /proc/<pid>/stat")?
            .parse::<u64>()
            .context("parsing /proc/<pid>/stat")
    };
    let total = ticks(11)? + ticks(12)?;
    Ok(Duration::from_secs_f64(
        total as f64 / clock_ticks_per_second(),
    ))
}

/// CPU time and context switches of a group of threads.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThreadTotals {
    /// Threads in the group.
    pub threads: u64,
    /// User CPU time.
    pub user: Duration,
    /// System (kernel) CPU time.
    pub system: Duration,
    /// Voluntary context switches (the thread blocked: waiting for work, a lock, I/O).
    pub voluntary_switches: u64,
    /// Involuntary context switches (the thread was preempted).
    pub involuntary_switches: u64,
}

impl ThreadTotals {
    /// `self - earlier`, saturating.
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            threads: self.threads,
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
            voluntary_switches: self
                .voluntary_switches
                .saturating_sub(earlier.voluntary_switches),
            involuntary_switches: self
                .involuntary_switches
                .saturating_sub(earlier.involuntary_switches),
        }
    }
}

/// The threads of process `pid` grouped by name (`/proc/<pid>/task/*/comm`, at most 15
/// characters, e.g. `tokio-rt-worker`), with their CPU times and context switches so far.
/// Threads that exited are not included.
pub fn thread_totals(pid: u32) -> anyhow::Result<std::collections::BTreeMap<String, ThreadTotals>> {
    let mut groups = std::collections::BTreeMap::<String, ThreadTotals>::new();
    let ticks = clock_ticks_per_second();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let dir = entry?.path();
        // A thread may exit between the listing and the reads: skip it.
        let (Ok(comm), Ok(stat), Ok(status)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("stat")),
            std::fs::read_to_string(dir.join("status")),
        ) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let tick = |index: usize| {
            fields
                .get(index)
                .and_then(|value| value.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let switches = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|value| value.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        let group = groups.entry(comm.trim().to_owned()).or_default();
        group.threads += 1;
        group.user += Duration::from_secs_f64(tick(11) as f64 / ticks);
        group.system += Duration::from_secs_f64(tick(12) as f64 / ticks);
        group.voluntary_switches += switches("voluntary_ctxt_switches:");
        group.involuntary_switches += switches("nonvoluntary_ctxt_switches:");
    }
    Ok(groups)
}

/// `sysconf(_SC_CLK_TCK)` as `getconf CLK_TCK` reports it; 100 (the Linux default) when
/// the command is missing.
fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|text| text.trim().parse::<f64>().ok())
            .filter(|ticks| *ticks > 0.0)
            .unwrap_or(100.0)
    })
}

/// The machine: CPU count, CPU model, load averages.
pub fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, name)| name.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    format!("{cpus} CPUs ({model}), load average {load}")
}

/// The send times of an open-loop run: `rate` per second for `duration`, from `started`
/// (5 ms after [`Schedule::start`]). A thread keeps the schedule: it wakes within tens of
/// microseconds of each time, where the runtime's timer would round to whole milliseconds,
/// and sends each time on `times` when it comes.
pub struct Schedule {
    /// Each scheduled send time, when it comes.
    pub times: tokio::sync::mpsc::UnboundedReceiver<std::time::Instant>,
    /// The first send time.
    pub started: std::time::Instant,
    thread: std::thread::JoinHandle<()>,
}

impl Schedule {
    /// Starts the schedule's thread.
    pub fn start(rate: u64, duration: Duration) -> Self {
        let (tx, times) = tokio::sync::mpsc::unbounded_channel();
        let interval = Duration::from_secs_f64(1.0 / rate as f64);
        let count = (duration.as_secs_f64() * rate as f64).round() as u32;
        let started = std::time::Instant::now() + Duration::from_millis(5);
        let thread = std::thread::spawn(move || {
            for index in 0..count {
                let at = started + interval * index;
                let now = std::time::Instant::now();
                if at > now {
                    std::thread::sleep(at - now);
                }
                if tx.send(at).is_err() {
                    break;
                }
            }
        });
        Self {
            times,
            started,
            thread,
        }
    }

    /// Waits for the schedule's thread (after `times` has ended).
    pub fn finish(self) -> anyhow::Result<()> {
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("the scheduler thread panicked"))
    }
}

/// Locks `mutex`, whether or not a holder panicked.
pub fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Raises this process's soft open-file limit to at least `wanted` (up to the hard limit);
/// child processes inherit it. Returns the soft limit now in force.
pub fn raise_open_files(wanted: u64) -> anyhow::Result<u64> {
    let (soft, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE)?;
    if soft < wanted {
        let target = wanted.min(hard);
        rlimit::setrlimit(rlimit::Resource::NOFILE, target, hard)?;
        return Ok(target);
    }
    Ok(soft)
}

/// Total and idle (idle + iowait) jiffies of the whole machine since boot (`/proc/stat`,
/// its first line); two readings give the share of the machine that was busy between them.
/// Errors: `/proc/stat` cannot be read or is shorter than expected.
pub fn machine_jiffies() -> anyhow::Result<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let line = stat.lines().next().context("empty /proc/stat")?;
    let values: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    anyhow::ensure!(values.len() >= 5, "short /proc/stat: {line}");
    Ok((values.iter().sum(), values[3] + values[4]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_are_parsed_across_pushes() {
        let mut parser = SseParser::default();
        assert!(parser.push(b"data: {\"chunk\":\"a\"}\n").is_empty());
        let events = parser.push(b"\n: ping\n\ndata: [DONE]\n\ndata: x");
        assert_eq!(
            events,
            vec![
                SseEvent::Data("{\"chunk\":\"a\"}".into()),
                SseEvent::Comment,
                SseEvent::Data("[DONE]".into()),
            ]
        );
        assert_eq!(parser.pending(), 7);
        assert_eq!(parser.push(b"\r\n\r\n"), vec![SseEvent::Data("x".into())]);
    }

    #[test]
    fn sse_ids_are_read_beside_the_events() {
        let mut parser = SseParser::default();
        assert!(parser
            .push_with_ids(b"id: 1\ndata: {\"chunk\":\"a\"}\n")
            .is_empty());
        let events = parser.push_with_ids(b"\n: ping\n\ndata: x\n\nid:7\r\ndata: [DONE]\r\n\r\n");
        assert_eq!(
            events,
            vec![
                (Some("1".into()), SseEvent::Data("{\"chunk\":\"a\"}".into())),
                (None, SseEvent::Comment),
                (None, SseEvent::Data("x".into())),
                (Some("7".into()), SseEvent::Data("[DONE]".into())),
            ]
        );
        // `push` reads the same events, without their ids.
        let mut plain = SseParser::default();
        assert_eq!(
            plain.push(b"id: 1\ndata: y\n\nid: 2\n\n"),
            vec![SseEvent::Data("y".into()), SseEvent::Comment]
        );
    }

    #[test]
    fn summaries_are_in_microseconds() {
        let mut h = histogram();
        for micros in 1..=1000 {
            record(&mut h, Duration::from_micros(micros));
        }
        let [p50, _, p99, _, max] = summary(&h);
        assert!((499..=501).contains(&p50));
        assert!((989..=991).contains(&p99));
        assert_eq!(max, 1000);
        assert_eq!(ms(1500), "1.50");
        assert_eq!(ms_delta(-250), "-0.25");
    }
}
