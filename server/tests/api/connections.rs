//! Limits on connections and request heads, over real TCP sockets (README.md § Security):
//! the header-read timeout, the idle timeout, `MAX_CONNECTIONS`, and the JSON 431 for heads
//! over 32 KiB or 100 header fields; a streamed reply outlives both timeouts.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::{
    chat::streamed_text,
    helpers::*,
    providers::{agent_with, with_mock},
};

/// An answer read off a socket: status, head (lower-cased) and body.
struct RawAnswer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl RawAnswer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (n, v) = line.split_once(':')?;
            (n.trim() == name).then(|| v.trim())
        })
    }
}

/// Reads one answer with a `Content-Length` body; `None` when the connection closed or
/// nothing complete came within `wait`.
async fn read_answer(stream: &mut TcpStream, wait: Duration) -> Option<RawAnswer> {
    let mut bytes = Vec::new();
    let read = async {
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&bytes[..end]).to_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if bytes.len() >= end + 4 + length {
                    let status = head[9..12].parse().unwrap();
                    let body = bytes[end + 4..end + 4 + length].to_vec();
                    return Some(RawAnswer { status, head, body });
                }
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::time::timeout(wait, read).await.ok().flatten()
}

/// Waits up to `wait` for the server to close `stream`; returns when it did, or `None` if
/// it stayed open. Fails if the server sends anything.
async fn closed_within(stream: &mut TcpStream, wait: Duration) -> Option<Instant> {
    let mut byte = [0u8; 1];
    match tokio::time::timeout(wait, stream.read(&mut byte)).await {
        Ok(Ok(0)) | Ok(Err(_)) => Some(Instant::now()),
        Ok(Ok(_)) => panic!("the server answered instead of closing"),
        Err(_) => None,
    }
}

const HEALTH: &[u8] = b"GET /api/health HTTP/1.1\r\nHost: localhost\r\n\r\n";

/// A connection that has sent `GET /api/health` and read its 200.
async fn served(app: &TestApp) -> TcpStream {
    let mut stream = TcpStream::connect(app.addr).await.unwrap();
    stream.write_all(HEALTH).await.unwrap();
    let answer = read_answer(&mut stream, Duration::from_secs(5))
        .await
        .expect("an answer");
    assert_eq!(answer.status, 200);
    stream
}

#[tokio::test]
async fn a_request_head_sent_too_slowly_is_cut_at_the_header_read_timeout() {
    let app = spawn_app_with(|c| {
        c.server.header_read_timeout = Duration::from_secs(1);
        c.server.idle_timeout = Duration::from_secs(30);
    })
    .await;
    let opened = Instant::now();
    // Half a head, and nothing more.
    let mut half = TcpStream::connect(app.addr).await.unwrap();
    half.write_all(b"GET /api/health HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    // No head at all.
    let mut silent = TcpStream::connect(app.addr).await.unwrap();
    for stream in [&mut half, &mut silent] {
        let closed = closed_within(stream, Duration::from_secs(5))
            .await
            .expect("closed after the header-read timeout");
        let after = closed - opened;
        assert!(after >= Duration::from_millis(900), "{after:?}");
    }
    // A head that arrives in time is answered.
    served(&app).await;
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed_at_the_idle_timeout() {
    let app = spawn_app_with(|c| {
        c.server.header_read_timeout = Duration::from_secs(1);
        c.server.idle_timeout = Duration::from_secs(2);
    })
    .await;
    let mut stream = served(&app).await;
    // Idle for longer than the header-read timeout: still open, and serves the next request.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    stream.write_all(HEALTH).await.unwrap();
    let answer = read_answer(&mut stream, Duration::from_secs(5))
        .await
        .expect("the idle connection is still open after the header-read timeout");
    assert_eq!(answer.status, 200);
    // Then closed once idle for the idle timeout.
    let answered = Instant::now();
    let after = closed_within(&mut stream, Duration::from_secs(6))
        .await
        .expect("closed after the idle timeout")
        - answered;
    assert!(
        after >= Duration::from_millis(1_800) && after < Duration::from_secs(4),
        "{after:?}"
    );
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_until_one_closes() {
    let app = spawn_app_with(|c| c.server.max_connections = 2).await;
    let first = served(&app).await;
    let _second = served(&app).await;
    // The third connects (the kernel queues it) but is not served while two are open.
    let mut third = TcpStream::connect(app.addr).await.unwrap();
    third.write_all(HEALTH).await.unwrap();
    assert!(
        read_answer(&mut third, Duration::from_secs(1))
            .await
            .is_none(),
        "not served while the cap is reached"
    );
    drop(first);
    let answer = read_answer(&mut third, Duration::from_secs(5))
        .await
        .expect("served once a connection closed");
    assert_eq!(answer.status, 200);
}

#[tokio::test]
async fn a_stream_in_flight_outlives_both_timeouts() {
    let (mut app, _mock) = with_mock(|c| {
        c.server.header_read_timeout = Duration::from_secs(1);
        c.server.idle_timeout = Duration::from_secs(1);
        c.chat.sse_heartbeat = Duration::from_millis(200);
    })
    .await;
    // A new connection per request: a pooled one may be closed by the idle timeout just as
    // the next request is sent on it.
    app.client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let user = app.user().await;
    let agent = agent_with(&app, &user, "gpt-4o-mini").await;

    let started = Instant::now();
    let res = app
        .chat(
            &user.access,
            &agent,
            json!({"message": "hello [[pause:3000]]", "stream": true}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let body = res.text().await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert!(body.contains(": ping\n"), "heartbeats were sent: {body}");
    assert!(streamed_text(&body).contains("hello"), "{body}");

    // An answer that has not started yet is in flight too.
    let res = app
        .chat(
            &user.access,
            &agent,
            json!({"message": "slow [[delay:2500]]"}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert!(body["message"].as_str().unwrap().contains("slow"), "{body}");
}

/// Sends `head` (a GET with `fields` after `Host`) and reads the answer.
async fn send_head(app: &TestApp, fields: &str) -> RawAnswer {
    let mut stream = TcpStream::connect(app.addr).await.unwrap();
    let head = format!("GET /api/health HTTP/1.1\r\nHost: localhost\r\n{fields}\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    read_answer(&mut stream, Duration::from_secs(5))
        .await
        .expect("an answer")
}

fn assert_json_431(answer: &RawAnswer) {
    assert_eq!(answer.status, 431, "{}", answer.head);
    assert!(
        answer
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/json")),
        "{}",
        answer.head
    );
    let body: Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(body["error"], "Request Header Fields Too Large", "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| m.contains("100")),
        "{body}"
    );
    assert_eq!(body.as_object().unwrap().len(), 2, "{body}");
    assert_eq!(answer.header("x-content-type-options"), Some("nosniff"));
}

#[tokio::test]
async fn request_heads_over_the_limits_get_a_json_431() {
    let app = spawn_app().await;
    // One 40 KiB header field.
    let large = send_head(&app, &format!("X-Big: {}\r\n", "a".repeat(40 * 1024))).await;
    assert_json_431(&large);
    // 150 small header fields.
    let many: String = (0..150).map(|i| format!("X-Field-{i}: {i}\r\n")).collect();
    assert_json_431(&send_head(&app, &many).await);
    // Just within the limits: answered.
    let fitting: String = (0..90).map(|i| format!("X-Field-{i}: {i}\r\n")).collect();
    assert_eq!(send_head(&app, &fitting).await.status, 200);
    // The server goes on serving.
    let res = app.get("/api/health", None).await;
    assert_eq!(res.status(), 200);
}
