//! Hostile uploads against the extraction child processes: files made to overflow a reader's
//! stack, to decode into gigabytes, or to keep a parser busy for minutes each fail their
//! document with a sentence the user understands, within the extraction deadline, without
//! a retry — while `/api/health` keeps answering, an open chat stream on the same server
//! completes, and the next normal upload is indexed.
//!
//! The files are made here from a few lines each, as an outside probe made them. Before
//! extraction ran in child processes, the first of them aborted the whole test process.

use std::{
    io::{Read, Write},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use agentchat::store::jobs::JobStatus;
use mock_provider::{MockConfig, MockProvider};
use secrecy::SecretString;
use serde_json::json;

use crate::{chat::streamed_text, helpers::*, knowledge::agent};

/// The extraction deadline of these tests (`EXTRACT_TIMEOUT_SECS`).
const DEADLINE: Duration = Duration::from_secs(4);
/// The children's address-space limit of these tests (`EXTRACT_MEMORY_MB`).
const MEMORY_LIMIT: u64 = 512 << 20;

/// A PDF with one page: `page_extra` is added to the page dictionary, `content` is the page's
/// content stream with `filter` (e.g. `/Filter /FlateDecode`) in its dictionary. The
/// cross-reference table gives every object's real offset.
fn pdf(page_extra: &[u8], filter: &[u8], content: &[u8]) -> Vec<u8> {
    pdf_pages(page_extra, &[(filter, content)])
}

/// A PDF with one page per `(filter, content)` pair.
fn pdf_pages(page_extra: &[u8], contents: &[(&[u8], &[u8])]) -> Vec<u8> {
    let pages = contents.len();
    // Objects: 1 catalog, 2 pages, 3 font, then per page: the page, its content stream.
    let kids: Vec<String> = (0..pages).map(|i| format!("{} 0 R", 4 + 2 * i)).collect();
    let mut objects: Vec<Vec<u8>> = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {pages} >>",
            kids.join(" ")
        )
        .into_bytes(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
    ];
    for (i, (filter, content)) in contents.iter().enumerate() {
        let mut page = format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {} 0 R \
             /Resources << /Font << /F1 3 0 R >> >> ",
            5 + 2 * i
        )
        .into_bytes();
        page.extend_from_slice(page_extra);
        page.extend_from_slice(b" >>");
        objects.push(page);
        let mut stream = b"<< ".to_vec();
        stream.extend_from_slice(filter);
        stream.extend_from_slice(format!(" /Length {} >>\nstream\n", content.len()).as_bytes());
        stream.extend_from_slice(content);
        stream.extend_from_slice(b"\nendstream");
        objects.push(stream);
    }
    let mut out = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend_from_slice(object);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

/// `depth` arrays nested in the page dictionary: `/Nest [[[ ... ]]]`.
fn nested_arrays_pdf(depth: usize) -> Vec<u8> {
    let mut nest = b"/Nest ".to_vec();
    nest.extend(std::iter::repeat_n(b'[', depth));
    nest.extend(std::iter::repeat_n(b']', depth));
    pdf(&nest, b"", b"")
}

/// `depth` dictionaries nested in the page dictionary: `/Nest << /A << /A ... >> >>`.
fn nested_dictionaries_pdf(depth: usize) -> Vec<u8> {
    let mut nest = b"/Nest ".to_vec();
    for _ in 0..depth {
        nest.extend_from_slice(b"<< /A ");
    }
    nest.extend_from_slice(b"0");
    for _ in 0..depth {
        nest.extend_from_slice(b" >>");
    }
    pdf(&nest, b"", b"")
}

/// A page content stream that `RunLengthDecode` expands 64-fold: `len` bytes of runs of 128
/// spaces (RLE length byte 129 = repeat the next byte 257 - 129 times).
fn run_length_bomb_pdf(len: usize) -> Vec<u8> {
    let runs: Vec<u8> = [129u8, b' '].repeat(len / 2);
    pdf(b"", b"/Filter /RunLengthDecode", &runs)
}

/// A page content stream that `LZWDecode` expands to `inflated` zero bytes.
fn lzw_bomb_pdf(inflated: u64) -> Vec<u8> {
    let mut encoded = Vec::new();
    let mut encoder = weezl::encode::Encoder::new(weezl::BitOrder::Msb, 8);
    encoder
        .into_stream(&mut encoded)
        .encode_all(std::io::BufReader::with_capacity(
            1 << 16,
            std::io::repeat(0).take(inflated),
        ))
        .status
        .expect("LZW encoding");
    pdf(b"", b"/Filter /LZWDecode", &encoded)
}

/// A page content stream under a filter chain, hex first, then Flate, that inflates to
/// `inflated` zero bytes; its dictionary also carries an `/Image` token.
fn flate_chain_bomb_pdf(inflated: u64) -> Vec<u8> {
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::copy(&mut std::io::repeat(0).take(inflated), &mut zlib).expect("deflate");
    let zlib = zlib.finish().expect("deflate");
    let mut hex = hex::encode(zlib).into_bytes();
    hex.push(b'>');
    pdf(
        b"",
        b"/Note /Image /Filter [/ASCIIHexDecode /FlateDecode]",
        &hex,
    )
}

/// Pages whose Flate-compressed content streams hold `per_page` bytes of text operators each.
fn text_operators_pdf(pages: usize, per_page: usize) -> Vec<u8> {
    let op = b"BT /F1 12 Tf 72 700 Td (All work and no play) Tj ET\n";
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    for _ in 0..per_page / op.len() {
        zlib.write_all(op).expect("deflate");
    }
    let content = zlib.finish().expect("deflate");
    let filter: &[u8] = b"/Filter /FlateDecode";
    let contents: Vec<(&[u8], &[u8])> = (0..pages).map(|_| (filter, &content[..])).collect();
    pdf_pages(b"", &contents)
}

/// Markdown (a heading, so that it is read as Markdown) with lists nested `depth` levels
/// deep (two more spaces each level).
fn nested_lists_markdown(depth: usize) -> Vec<u8> {
    let mut out = b"# Nested lists\n\n".to_vec();
    for level in 0..depth {
        out.extend(std::iter::repeat_n(b' ', 2 * level));
        out.extend_from_slice(b"- item\n");
    }
    out
}

/// Polls `/api/health` every 100 ms until stopped; counts answers and failures. A probe
/// fails when two attempts in a row (each given 5 s, the second on a new connection) get
/// no 200: a single attempt on a busy test machine can lose its reused keep-alive
/// connection or its core for a moment, which says nothing about the server.
struct HealthWatch {
    ok: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

/// One attempt at `url`: `Ok` on a 200, else what went wrong.
async fn health_attempt(client: &reqwest::Client, url: &str) -> Result<(), String> {
    match tokio::time::timeout(Duration::from_secs(5), client.get(url).send()).await {
        Ok(Ok(res)) if res.status() == 200 => Ok(()),
        Ok(Ok(res)) => Err(format!("status {}", res.status())),
        Ok(Err(e)) => Err(format!("{e}")),
        Err(_) => Err("no answer within 5 s".into()),
    }
}

impl HealthWatch {
    fn start(app: &TestApp) -> Self {
        let ok = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let (url, client) = (app.url("/api/health"), client());
        let (ok2, failed2) = (ok.clone(), failed.clone());
        let task = tokio::spawn(async move {
            loop {
                let answer = match health_attempt(&client, &url).await {
                    Ok(()) => Ok(()),
                    Err(first) => health_attempt(&crate::helpers::client(), &url)
                        .await
                        .map_err(|second| (first, second)),
                };
                match answer {
                    Ok(()) => ok2.fetch_add(1, Ordering::SeqCst),
                    Err((first, second)) => {
                        eprintln!("/api/health failed twice: {first}; then {second}");
                        failed2.fetch_add(1, Ordering::SeqCst)
                    }
                };
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Self { ok, failed, task }
    }

    fn stop(self) -> (usize, usize) {
        self.task.abort();
        (
            self.ok.load(Ordering::SeqCst),
            self.failed.load(Ordering::SeqCst),
        )
    }
}

#[tokio::test]
async fn hostile_files_fail_alone_within_the_deadline_and_the_server_goes_on() {
    let mock = MockProvider::start(MockConfig {
        token_interval: Duration::from_millis(50),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let base = mock.base_url();
    let app = spawn_app_with(|c| {
        c.providers.openai_api_key = Some(SecretString::from("sk-mock"));
        c.providers.openai_base_url = base;
        c.knowledge.extraction.timeout = DEADLINE;
        c.knowledge.extraction.memory_limit = MEMORY_LIMIT;
        c.knowledge.max_upload_bytes = 20 << 20;
        // The test polls documents and jobs often.
        c.limits.rate_limits = [1_000_000; 4];
    })
    .await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let health = HealthWatch::start(&app);

    // A chat stream that stays open (400 tokens, one each 50 ms: 20 s) while the files fail.
    let stream = {
        let res = app
            .chat(
                &user.access,
                &agent,
                json!({"message": "[[tokens:400]] keep talking", "stream": true}),
            )
            .await;
        assert_eq!(res.status(), 200);
        tokio::spawn(async move { res.text().await.unwrap() })
    };

    // (name, file, what the document's error must say)
    let files: Vec<(&str, Vec<u8>, &str)> = vec![
        // The probe's 3,000 arrays, and far deeper ones that overflow any reader's stack.
        ("arrays-3000.pdf", nested_arrays_pdf(3_000), ""),
        (
            "arrays.pdf",
            nested_arrays_pdf(400_000),
            "nested too deeply",
        ),
        (
            "dictionaries.pdf",
            nested_dictionaries_pdf(200_000),
            "nested too deeply",
        ),
        ("rle.pdf", run_length_bomb_pdf(16 << 20), "memory"),
        ("lzw.pdf", lzw_bomb_pdf(1 << 30), "memory"),
        ("chain.pdf", flate_chain_bomb_pdf(1 << 30), "memory"),
        ("operators.pdf", text_operators_pdf(6, 60 << 20), ""),
        ("lists.md", nested_lists_markdown(3_000), "took too long"),
    ];
    for (name, bytes, expected) in files {
        let started = Instant::now();
        let doc = app.uploaded(&user.access, &agent, name, bytes).await;
        let d = app.settled(&user.access, &agent, &doc).await;
        let first = started.elapsed();
        assert_eq!(d["status"], "failed", "{name}: {d}");
        let error = d["error"].as_str().unwrap().to_owned();
        assert!(
            error.ends_with('.') && error.contains(expected),
            "{name}: {error}"
        );
        assert!(
            first < DEADLINE * 2 + Duration::from_secs(4),
            "{name} took {first:?} to fail"
        );

        // Indexed again: the same outcome, in one attempt (no retry of a crash that will
        // repeat).
        let job_id = app.refreshed(&user.access, &agent, &doc).await;
        let job = loop {
            let job = app
                .state
                .store
                .job(&user.id.as_str().into(), &job_id.as_str().into())
                .await
                .unwrap()
                .expect("the refresh job");
            if matches!(job.status, JobStatus::Failed | JobStatus::Succeeded) {
                break job;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{name}: refresh did not end"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(job.status, JobStatus::Failed, "{name}");
        assert_eq!(
            job.attempts, 1,
            "{name}: a failed extraction is not retried"
        );
        // Time and memory race for the files that exhaust both: either sentence will do.
        // A machine busy with other work (a build beside the tests) may also bring the
        // deadline before the limit the first attempt met: the refresh then fails on time.
        let again = job.error.unwrap_or_default();
        if expected.is_empty() {
            assert!(again.ends_with('.'), "{name}: {again}");
        } else {
            assert!(
                again == error || again.contains("took too long"),
                "{name}: {again} (the first attempt: {error})"
            );
        }
        let d = app.settled(&user.access, &agent, &doc).await;
        assert_eq!(d["status"], "failed", "{name}: {d}");
        assert_eq!(d["chunks"], 0, "{name}");
    }

    // The stream opened before the first file completes with every token.
    let body = tokio::time::timeout(Duration::from_secs(60), stream)
        .await
        .expect("the stream ends")
        .unwrap();
    let text = streamed_text(&body);
    assert!(text.ends_with("w400"), "{text}");

    // The next normal upload is indexed.
    let good = app
        .uploaded(
            &user.access,
            &agent,
            "notes.md",
            b"# Notes\n\nThe lighthouse keeper logs every ship.\n".to_vec(),
        )
        .await;
    assert_eq!(
        app.settled(&user.access, &agent, &good).await["status"],
        "indexed"
    );

    let (ok, failed) = health.stop();
    assert_eq!(failed, 0, "/api/health failed {failed} times");
    assert!(ok > 20, "/api/health answered {ok} times");
}

#[tokio::test]
async fn a_reader_that_cannot_start_fails_the_document_with_a_reason() {
    let app =
        spawn_app_with(|c| c.knowledge.extraction.program = "/nonexistent/agentchat".into()).await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let doc = app
        .uploaded(&user.access, &agent, "a.txt", b"Plain words.\n".to_vec())
        .await;
    let d = app.settled(&user.access, &agent, &doc).await;
    assert_eq!(d["status"], "failed");
    assert_eq!(
        d["error"],
        "The document reader could not be started; try again with refresh."
    );
}
