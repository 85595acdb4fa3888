//! Limits on connections and request heads, over real TCP sockets (README.md § Security):
//! the header-read timeout, the idle timeout, `MAX_CONNECTIONS`, and the JSON 431 for heads
//! over 32 KiB or 100 header fields; a streamed reply outlives both timeouts. HTTP/2 with
//! prior knowledge (docs/api.md § Limits): chat streams share a connection, which is idle
//! between requests whatever frames arrive.

use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

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

/// An HTTP/2 connection opened with prior knowledge, pinging every 200 ms while idle too: its
/// sending half, and the task driving it, which ends when the connection closes.
async fn http2(app: &TestApp) -> (Http2, tokio::task::JoinHandle<()>) {
    let tcp = TcpStream::connect(app.addr).await.unwrap();
    let mut builder = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .keep_alive_interval(Duration::from_millis(200))
        .keep_alive_while_idle(true);
    let (send, connection) = builder.handshake(TokioIo::new(tcp)).await.unwrap();
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    (send, driver)
}

type Http2 = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

/// Sends `method path` (with `bearer` and a JSON `body`) on `send`: status and body text.
async fn send_http2(
    send: &mut Http2,
    app: &TestApp,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<Value>,
) -> (u16, String) {
    let mut request = hyper::Request::builder()
        .method(method)
        .uri(format!("http://{}{path}", app.addr));
    if let Some(bearer) = bearer {
        request = request.header("authorization", format!("Bearer {bearer}"));
    }
    let body = match body {
        Some(body) => {
            request = request.header("content-type", "application/json");
            Bytes::from(body.to_string())
        }
        None => Bytes::new(),
    };
    send.ready().await.unwrap();
    let answer = send
        .send_request(request.body(Full::new(body)).unwrap())
        .await
        .unwrap();
    assert_eq!(answer.version(), hyper::Version::HTTP_2);
    let status = answer.status().as_u16();
    let bytes = answer.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn chat_streams_share_an_http2_connection_opened_with_prior_knowledge() {
    let (app, mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let agent = agent_with(&app, &user, "gpt-4o-mini").await;
    let (mut send, _driver) = http2(&app).await;
    let (status, _) = send_http2(&mut send, &app, "GET", "/api/health", None, None).await;
    assert_eq!(status, 200);

    let path = format!("/api/agents/{agent}/chat");
    let streams = (0..5).map(|i| {
        let mut send = send.clone();
        let (app, path, access) = (&app, &path, &user.access);
        async move {
            let body = json!({"message": format!("stream {i} [[pause:1500]]"), "stream": true});
            send_http2(&mut send, app, "POST", path, Some(access), Some(body)).await
        }
    });
    let all = futures::future::join_all(streams);
    let watch = async {
        // All five are in progress upstream at once, on the one connection.
        let deadline = Instant::now() + Duration::from_secs(10);
        while mock.open_streams() < 5 {
            assert!(
                Instant::now() < deadline,
                "the streams did not run together"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let (answers, ()) = tokio::join!(all, watch);
    for (i, (status, body)) in answers.into_iter().enumerate() {
        assert_eq!(status, 200, "{body}");
        assert!(
            streamed_text(&body).contains(&format!("stream {i}")),
            "{body}"
        );
    }
}

#[tokio::test]
async fn an_http2_connection_is_idle_between_requests_whatever_frames_arrive() {
    let app = spawn_app_with(|c| {
        c.server.header_read_timeout = Duration::from_secs(1);
        c.server.idle_timeout = Duration::from_secs(3);
    })
    .await;
    // The preface and a SETTINGS frame, but no request: cut at the header-read timeout.
    let opened = Instant::now();
    let mut silent = TcpStream::connect(app.addr).await.unwrap();
    silent
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let mut sink = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), silent.read_to_end(&mut sink))
        .await
        .expect("closed after the header-read timeout")
        .ok();
    assert!(opened.elapsed() >= Duration::from_millis(900));

    // Pings every 200 ms do not start a head: past the header-read timeout the connection
    // still serves, and it closes once idle for the idle timeout.
    let (mut send, driver) = http2(&app).await;
    assert_eq!(
        send_http2(&mut send, &app, "GET", "/api/health", None, None)
            .await
            .0,
        200
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        send_http2(&mut send, &app, "GET", "/api/health", None, None)
            .await
            .0,
        200
    );
    let answered = Instant::now();
    tokio::time::timeout(Duration::from_secs(8), driver)
        .await
        .expect("closed after the idle timeout")
        .unwrap();
    let after = answered.elapsed();
    assert!(
        after >= Duration::from_millis(2_800) && after < Duration::from_secs(5),
        "{after:?}"
    );
}

#[tokio::test]
async fn http2_request_heads_over_the_limits_get_the_json_431() {
    let app = spawn_app().await;
    let (mut send, _driver) = http2(&app).await;
    let health = || hyper::Request::get(format!("http://{}/api/health", app.addr));
    let large = health()
        .header("x-big", "a".repeat(40 * 1024))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let many = (0..150)
        .fold(health(), |request, i| {
            request.header(format!("x-field-{i}"), i.to_string())
        })
        .body(Full::new(Bytes::new()))
        .unwrap();
    for request in [large, many] {
        send.ready().await.unwrap();
        let answer = send.send_request(request).await.unwrap();
        assert_eq!(answer.status(), 431);
        let body = answer.into_body().collect().await.unwrap().to_bytes();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"], "Request Header Fields Too Large", "{body}");
    }
    // The connection goes on serving.
    let (status, _) = send_http2(&mut send, &app, "GET", "/api/health", None, None).await;
    assert_eq!(status, 200);
}
