//! The knowledge base over HTTP: uploads of real and hostile files, crawls of a loopback
//! site, durable jobs (including recovery after a dead worker), deletion, tenant isolation
//! and retrieved chunks reaching the model's prompt.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use agentchat::store::{documents::DocumentStatus, jobs::JobStatus};
use axum::{extract::State, response::Html, routing::get, Router};
use reqwest::multipart::{Form, Part};
use serde_json::{json, Value};

use crate::helpers::*;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/knowledge/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

pub(crate) async fn agent(app: &TestApp, token: &str) -> String {
    agent_named(app, token, "Librarian").await
}

async fn agent_named(app: &TestApp, token: &str, name: &str) -> String {
    let res = app
        .post(
            "/api/agents",
            Some(token),
            json!({"name": name, "systemPrompt": "Answer from the documents."}),
        )
        .await;
    assert_eq!(res.status(), 201);
    res.json::<Value>().await.unwrap()["agent"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

impl TestApp {
    async fn upload(
        &self,
        token: &str,
        agent: &str,
        name: &str,
        bytes: Vec<u8>,
    ) -> reqwest::Response {
        let form = Form::new().part("file", Part::bytes(bytes).file_name(name.to_string()));
        self.client
            .post(self.url(&format!("/api/agents/{agent}/knowledge/file")))
            .bearer_auth(token)
            .multipart(form)
            .send()
            .await
            .unwrap()
    }

    /// Uploads and returns the document id (asserting 201 pending).
    pub(crate) async fn uploaded(
        &self,
        token: &str,
        agent: &str,
        name: &str,
        bytes: Vec<u8>,
    ) -> String {
        let res = self.upload(token, agent, name, bytes).await;
        assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["success"], true);
        assert_eq!(body["status"], "pending");
        body["documentId"].as_str().unwrap().to_string()
    }

    async fn document(&self, token: &str, agent: &str, doc: &str) -> Value {
        let res = self
            .get(&format!("/api/agents/{agent}/knowledge/{doc}"), Some(token))
            .await;
        assert_eq!(res.status(), 200);
        res.json::<Value>().await.unwrap()["document"].clone()
    }

    /// Polls until the document is indexed or failed (at most 30 s).
    pub(crate) async fn settled(&self, token: &str, agent: &str, doc: &str) -> Value {
        for _ in 0..300 {
            let d = self.document(token, agent, doc).await;
            if d["status"] == "indexed" || d["status"] == "failed" {
                return d;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("document {doc} did not settle");
    }

    /// Asks for the document to be indexed again (202) and returns the refresh job's id.
    pub(crate) async fn refreshed(&self, token: &str, agent: &str, doc: &str) -> String {
        let res = self
            .post(
                &format!("/api/agents/{agent}/knowledge/{doc}/refresh"),
                Some(token),
                json!({}),
            )
            .await;
        assert_eq!(res.status(), 202);
        res.json::<Value>().await.unwrap()["jobId"]
            .as_str()
            .unwrap()
            .to_string()
    }

    async fn job(&self, token: &str, job: &str) -> Value {
        let res = self.get(&format!("/api/jobs/{job}"), Some(token)).await;
        assert_eq!(res.status(), 200);
        res.json::<Value>().await.unwrap()["job"].clone()
    }

    /// The job of a settled document: it ended in the same transaction as its document
    /// became `indexed` or `failed`, so it is never seen still running.
    async fn ended_job(&self, token: &str, job: &str) -> Value {
        let j = self.job(token, job).await;
        assert!(
            j["status"] == JobStatus::Succeeded.as_str()
                || j["status"] == JobStatus::Failed.as_str(),
            "the document settled before its job ended: {j}"
        );
        j
    }

    async fn ask(&self, token: &str, agent: &str, message: &str) -> Value {
        let res = self.chat(token, agent, json!({"message": message})).await;
        assert_eq!(res.status(), 200);
        res.json().await.unwrap()
    }
}

#[tokio::test]
async fn real_files_are_indexed_and_retrieved_into_the_prompt() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let cases = [
        ("Apache-2.0.txt", "text"),
        ("tokio-README.md", "markdown"),
        ("MPL-2.0.docx", "docx"),
        ("shared-mime-info-spec.pdf", "pdf"),
    ];
    let mut ids = Vec::new();
    for (name, _) in cases {
        // Misleading names and types: recognition is by content.
        let id = app
            .uploaded(&user.access, &agent, &format!("{name}.bin"), fixture(name))
            .await;
        ids.push(id);
    }
    for (id, (name, _)) in ids.iter().zip(cases) {
        let d = app.settled(&user.access, &agent, id).await;
        assert_eq!(d["status"], "indexed", "{name}: {d}");
        assert!(d["chunks"].as_u64().unwrap() > 0, "{name}");
        assert_eq!(d["kind"], "file");
        assert!(d["indexedAt"].is_string());
        assert_eq!(d["bytes"].as_u64().unwrap() as usize, fixture(name).len());
    }
    let pdf = app.document(&user.access, &agent, &ids[3]).await;
    assert!(pdf["pages"].as_u64().unwrap() > 1, "PDF pages counted");

    let list = app
        .get(
            &format!("/api/agents/{agent}/knowledge"),
            Some(&user.access),
        )
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(list["documents"].as_array().unwrap().len(), 4);

    // The offline model quotes what retrieval put in the prompt, with sources.
    let reply = app
        .ask(&user.access, &agent, "What is the grant of patent license?")
        .await;
    assert!(reply["ragChunksUsed"].as_u64().unwrap() >= 1, "{reply}");
    let sources = reply["sources"].as_array().unwrap();
    assert_eq!(
        sources.len() as u64,
        reply["ragChunksUsed"].as_u64().unwrap()
    );
    assert_eq!(sources[0]["documentId"], ids[0].as_str(), "{reply}");
    assert!(sources[0]["score"].as_f64().unwrap() > 0.0);
    assert!(sources[0]["chunkId"].is_string());
    assert!(reply["message"]
        .as_str()
        .unwrap()
        .to_lowercase()
        .contains("patent"));
    // The stored assistant message keeps its sources.
    let msgs = app
        .messages(&user.access, &agent, reply["threadId"].as_str().unwrap())
        .await;
    assert_eq!(msgs[1]["sources"].as_array().unwrap().len(), sources.len());

    let reply = app
        .ask(
            &user.access,
            &agent,
            "How does the tokio runtime schedule tasks?",
        )
        .await;
    assert!(reply["sources"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["documentId"] == ids[1].as_str()));
}

#[tokio::test]
async fn the_stream_usage_frame_reports_rag_chunks_and_sources() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let id = app
        .uploaded(&user.access, &agent, "a.txt", fixture("Apache-2.0.txt"))
        .await;
    app.settled(&user.access, &agent, &id).await;
    let res = app
        .chat(
            &user.access,
            &agent,
            json!({"message": "patent license termination", "stream": true, "streamOptions": {"includeUsage": true}}),
        )
        .await;
    let body = res.text().await.unwrap();
    let usage = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .find(|v| v.get("usage").is_some())
        .expect("usage frame");
    assert!(usage["ragChunksUsed"].as_u64().unwrap() >= 1);
    assert_eq!(usage["sources"][0]["documentId"], id.as_str());
}

#[tokio::test]
async fn hostile_and_unsupported_uploads_are_refused_or_fail_alone() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;

    let mut elf = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0".to_vec();
    elf.extend(std::iter::repeat_n(0u8, 512));
    let res = app.upload(&user.access, &agent, "report.pdf", elf).await;
    assert_error(res, 415, "Unsupported Media Type", None).await;

    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    let res = app.upload(&user.access, &agent, "notes.txt", png).await;
    assert_error(res, 415, "Unsupported Media Type", None).await;

    let res = app
        .upload(&user.access, &agent, "empty.txt", Vec::new())
        .await;
    assert_error(res, 400, "Bad Request", Some("The file is empty")).await;

    // A truncated PDF is accepted, then fails with a reason; nothing else is affected.
    let pdf = fixture("shared-mime-info-spec.pdf");
    let truncated = pdf[..pdf.len() * 2 / 5].to_vec();
    let bad = app
        .uploaded(&user.access, &agent, "cut.pdf", truncated)
        .await;
    let good = app
        .uploaded(&user.access, &agent, "a.txt", fixture("Apache-2.0.txt"))
        .await;
    let d = app.settled(&user.access, &agent, &bad).await;
    assert_eq!(d["status"], "failed");
    assert!(!d["error"].as_str().unwrap().is_empty());
    assert_eq!(d["chunks"], 0);
    assert_eq!(
        app.settled(&user.access, &agent, &good).await["status"],
        "indexed"
    );

    // A DOCX zip bomb: a small upload whose document.xml inflates far past the limits.
    let bomb = docx_bomb();
    assert!(bomb.len() < 2 * 1024 * 1024);
    let id = app.uploaded(&user.access, &agent, "bomb.docx", bomb).await;
    let d = app.settled(&user.access, &agent, &id).await;
    assert_eq!(d["status"], "failed", "{d}");
}

/// A DOCX whose `word/document.xml` inflates to 300 MiB.
fn docx_bomb() -> Vec<u8> {
    use std::io::Write;
    let mut out = std::io::Cursor::new(Vec::new());
    {
        let mut zip = zip::ZipWriter::new(&mut out);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .large_file(true);
        zip.start_file("[Content_Types].xml", opts).unwrap();
        zip.write_all(br#"<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>"#)
            .unwrap();
        zip.start_file("word/document.xml", opts).unwrap();
        zip.write_all(br#"<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>"#)
            .unwrap();
        let block = vec![b'a'; 1024 * 1024];
        for _ in 0..300 {
            zip.write_all(&block).unwrap();
        }
        zip.write_all(b"</w:t></w:r></w:p></w:body></w:document>")
            .unwrap();
        zip.finish().unwrap();
    }
    out.into_inner()
}

#[tokio::test]
async fn uploads_over_the_limit_are_413_and_bad_forms_400() {
    let app = spawn_app_with(|c| c.knowledge.max_upload_bytes = 64 * 1024).await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let res = app
        .upload(&user.access, &agent, "big.txt", vec![b'a'; 64 * 1024 + 1])
        .await;
    assert_error(res, 413, "Payload Too Large", None).await;
    let res = app
        .upload(&user.access, &agent, "ok.txt", vec![b'a'; 1000])
        .await;
    assert_eq!(res.status(), 201);

    let form = Form::new().text("other", "x");
    let res = app
        .client
        .post(app.url(&format!("/api/agents/{agent}/knowledge/file")))
        .bearer_auth(&user.access)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let res = app
        .post(
            &format!("/api/agents/{agent}/knowledge/file"),
            Some(&user.access),
            json!({"file": "x"}),
        )
        .await;
    assert_eq!(res.status(), 400);
}

/// Chat skips retrieval for an agent without knowledge documents, judging by the agent as
/// read (and cached) earlier: adding a document must make the very next chat retrieve.
#[tokio::test]
async fn a_document_added_after_chatting_is_retrieved_in_the_next_chat() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let question = "patent license termination";
    let before = app.ask(&user.access, &agent, question).await;
    assert_eq!(before["ragChunksUsed"], 0, "{before}");
    let id = app
        .uploaded(&user.access, &agent, "a.txt", fixture("Apache-2.0.txt"))
        .await;
    assert_eq!(
        app.settled(&user.access, &agent, &id).await["status"],
        "indexed"
    );
    let after = app.ask(&user.access, &agent, question).await;
    assert!(after["ragChunksUsed"].as_u64().unwrap() > 0, "{after}");
    assert_eq!(after["sources"][0]["documentId"], id.as_str(), "{after}");
}

#[tokio::test]
async fn deleting_a_document_removes_it_from_retrieval_at_once() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let id = app
        .uploaded(&user.access, &agent, "a.txt", fixture("Apache-2.0.txt"))
        .await;
    app.settled(&user.access, &agent, &id).await;
    let question = "patent license termination";
    assert!(
        app.ask(&user.access, &agent, question).await["ragChunksUsed"]
            .as_u64()
            .unwrap()
            > 0
    );
    let res = app
        .delete(
            &format!("/api/agents/{agent}/knowledge/{id}"),
            Some(&user.access),
        )
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap(), json!({"success": true}));
    let reply = app.ask(&user.access, &agent, question).await;
    assert_eq!(reply["ragChunksUsed"], 0);
    assert_eq!(reply["sources"], json!([]));
    assert!(!app.upload_exists(&id).await);
    let res = app
        .get(
            &format!("/api/agents/{agent}/knowledge/{id}"),
            Some(&user.access),
        )
        .await;
    assert_error(res, 404, "Not Found", Some("Document not found")).await;
}

#[tokio::test]
async fn knowledge_is_tenant_isolated_and_scoped() {
    let app = spawn_app().await;
    let alice = app.user().await;
    let bob = app.user().await;
    let a_agent = agent(&app, &alice.access).await;
    let b_agent = agent(&app, &bob.access).await;
    let doc = app
        .uploaded(&alice.access, &a_agent, "a.txt", fixture("Apache-2.0.txt"))
        .await;
    app.settled(&alice.access, &a_agent, &doc).await;
    // Bob sees nothing of Alice's, on every verb.
    let paths = [
        format!("/api/agents/{a_agent}/knowledge"),
        format!("/api/agents/{a_agent}/knowledge/{doc}"),
    ];
    for p in &paths {
        assert_eq!(app.get(p, Some(&bob.access)).await.status(), 404, "{p}");
    }
    assert_eq!(
        app.get(
            &format!("/api/agents/{b_agent}/knowledge/{doc}"),
            Some(&bob.access)
        )
        .await
        .status(),
        404
    );
    assert_eq!(app.delete(&paths[1], Some(&bob.access)).await.status(), 404);
    assert_eq!(
        app.post(
            &format!("{}/refresh", paths[1]),
            Some(&bob.access),
            json!({})
        )
        .await
        .status(),
        404
    );
    assert_eq!(
        app.upload(&bob.access, &a_agent, "x.txt", b"hello there".to_vec())
            .await
            .status(),
        404
    );
    // Bob's agent retrieves nothing from Alice's documents.
    let reply = app
        .ask(&bob.access, &b_agent, "patent license termination")
        .await;
    assert_eq!(reply["ragChunksUsed"], 0);
    // Jobs are the owner's only.
    let job = app
        .post(
            &format!("{}/refresh", paths[1]),
            Some(&alice.access),
            json!({}),
        )
        .await;
    assert_eq!(job.status(), 202);
    let job_id = job.json::<Value>().await.unwrap()["jobId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        app.get(&format!("/api/jobs/{job_id}"), Some(&bob.access))
            .await
            .status(),
        404
    );

    // Scopes: knowledge:read lists but cannot write; no knowledge scope cannot list.
    let (_, reader) = app.api_key(&alice, &["knowledge:read"]).await;
    assert_eq!(app.get(&paths[0], Some(&reader)).await.status(), 200);
    assert_eq!(
        app.get(&format!("/api/jobs/{job_id}"), Some(&reader))
            .await
            .status(),
        200
    );
    let res = app
        .upload(&reader, &a_agent, "x.txt", b"hello there".to_vec())
        .await;
    assert_eq!(res.status(), 403);
    assert_eq!(app.delete(&paths[1], Some(&reader)).await.status(), 403);
    let (_, chatter) = app.api_key(&alice, &["chat:write"]).await;
    assert_eq!(app.get(&paths[0], Some(&chatter)).await.status(), 403);
    assert_unauthorized(app.get(&paths[0], None).await).await;
}

#[tokio::test]
async fn a_job_whose_worker_died_is_retried_after_a_restart() {
    // First instance: no workers. A worker takes the job and dies (its lease runs out).
    let first = spawn_app_with(|c| c.jobs.workers = 0).await;
    let user = first.user().await;
    let agent = agent(&first, &user.access).await;
    let doc = first
        .uploaded(&user.access, &agent, "a.txt", fixture("Apache-2.0.txt"))
        .await;
    let now = chrono::Utc::now();
    let claimed = first
        .state
        .store
        .claim_job(now, now - chrono::Duration::seconds(1))
        .await
        .unwrap()
        .expect("the queued job");
    assert_eq!(claimed.document_id, doc);
    assert_eq!(claimed.attempts, 1);
    first
        .state
        .store
        .set_document_status(&doc.as_str().into(), DocumentStatus::Processing, None, now)
        .await
        .unwrap();
    let job = first.job(&user.access, claimed.id.as_str()).await;
    assert_eq!(job["status"], "running");
    // Second instance on the same data: it takes over the expired job and finishes it.
    let second = spawn_app_in(first.dir, |_| {}).await;
    // Tokens name their issuer (the instance's URL), so sign in again.
    let (token, _) = second.tokens(&user.email, &user.password).await;
    let d = second.settled(&token, &agent, &doc).await;
    assert_eq!(d["status"], "indexed");
    let job = second.ended_job(&token, claimed.id.as_str()).await;
    assert_eq!(job["status"], JobStatus::Succeeded.as_str());
    assert_eq!(job["progress"], json!({"done": 1, "total": 1}));
    assert!(job["finishedAt"].is_string());
}

#[tokio::test]
async fn a_job_whose_lease_ran_out_on_the_service_clock_is_taken_again() {
    // No workers at start, so the job stays queued until the test claims it.
    let app = spawn_app_with(|c| c.jobs.workers = 0).await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let doc = app
        .uploaded(&user.access, &agent, "a.txt", fixture("Apache-2.0.txt"))
        .await;
    // A worker takes the job with a 60 s lease on the service clock, and dies.
    let clock = &app.state.auth.clock;
    let now = clock.now();
    let store = &app.state.store;
    let claimed = store
        .claim_job(now, now + chrono::Duration::seconds(60))
        .await
        .unwrap()
        .expect("the queued job");
    // A job loop starts: while the lease runs the job is not taken again.
    let workers = agentchat::knowledge::worker::spawn(app.state.knowledge.clone(), 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = store
        .job(&user.id.as_str().into(), &claimed.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((held.status, held.attempts), (JobStatus::Running, 1));
    assert_eq!(
        app.document(&user.access, &agent, &doc).await["status"],
        "pending"
    );
    // The clock handlers read moves past the lease: the loop takes the job over at once
    // (woken rather than after its poll) and indexes the document.
    clock.advance(chrono::Duration::seconds(61));
    app.state.knowledge.wake.notify_one();
    let d = tokio::time::timeout(
        Duration::from_secs(20),
        app.settled(&user.access, &agent, &doc),
    )
    .await
    .expect("the expired job is taken again");
    assert_eq!(d["status"], "indexed", "{d}");
    let job = app.ended_job(&user.access, claimed.id.as_str()).await;
    assert_eq!(job["status"], JobStatus::Succeeded.as_str());
    let ended = store
        .job(&user.id.as_str().into(), &claimed.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ended.attempts, 2, "the dead worker's attempt counts");
    assert!(
        ended.finished_at.unwrap() >= now + chrono::Duration::seconds(61),
        "the end is recorded at the service clock's time: {ended:?}"
    );
    for worker in workers {
        worker.abort();
    }
}

#[tokio::test]
async fn a_job_ends_with_its_document_and_only_under_the_attempt_that_holds_it() {
    use agentchat::store::jobs::JobOutcome;

    let app = spawn_app_with(|c| c.jobs.workers = 0).await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let doc = app
        .uploaded(&user.access, &agent, "a.txt", fixture("Apache-2.0.txt"))
        .await;
    let store = &app.state.store;
    let now = chrono::Utc::now();
    let expired = now - chrono::Duration::seconds(1);
    // A worker takes the job and its lease runs out; a second worker takes it over.
    let first = store
        .claim_job(now, expired)
        .await
        .unwrap()
        .expect("queued job");
    let second = store
        .claim_job(now, now + chrono::Duration::seconds(60))
        .await
        .unwrap()
        .expect("the expired job again");
    assert_eq!(
        (first.id.as_str(), first.attempts, second.attempts),
        (second.id.as_str(), 1, 2)
    );
    let indexed = JobOutcome::Indexed {
        pages: None,
        bytes: 11_358,
        progress: (1, 1),
        refresh: None,
    };
    // The first worker no longer holds the job: its end is not recorded.
    assert!(!store.complete_job(&first, indexed, now).await.unwrap());
    let d = app.document(&user.access, &agent, &doc).await;
    assert_eq!(d["status"], "pending", "{d}");
    assert_eq!(
        app.job(&user.access, first.id.as_str()).await["status"],
        "running"
    );
    // The holder's end makes the document indexed and the job succeeded at once.
    assert!(store.complete_job(&second, indexed, now).await.unwrap());
    let d = app.document(&user.access, &agent, &doc).await;
    assert_eq!(
        (d["status"].as_str(), d["bytes"].as_u64()),
        (Some("indexed"), Some(11_358))
    );
    let j = app.job(&user.access, second.id.as_str()).await;
    assert_eq!(j["status"], JobStatus::Succeeded.as_str());
    assert_eq!(j["progress"], json!({"done": 1, "total": 1}));
    assert_eq!(j["finishedAt"], d["indexedAt"]);
    // An ended job is not ended again.
    let failed = JobOutcome::Failed {
        reason: "Too late.",
    };
    assert!(!store.complete_job(&second, failed, now).await.unwrap());
    assert_eq!(
        app.document(&user.access, &agent, &doc).await["status"],
        "indexed"
    );
}

#[tokio::test]
async fn a_job_interrupted_too_often_fails_its_document() {
    let first = spawn_app_with(|c| c.jobs.workers = 0).await;
    let user = first.user().await;
    let agent = agent(&first, &user.access).await;
    let doc = first
        .uploaded(&user.access, &agent, "a.txt", fixture("Apache-2.0.txt"))
        .await;
    let now = chrono::Utc::now();
    for _ in 0..3 {
        first
            .state
            .store
            .claim_job(now, now - chrono::Duration::seconds(1))
            .await
            .unwrap()
            .expect("an expired job is claimable again");
    }
    let second = spawn_app_in(first.dir, |_| {}).await;
    let (token, _) = second.tokens(&user.email, &user.password).await;
    let d = second.settled(&token, &agent, &doc).await;
    assert_eq!(d["status"], "failed");
    assert!(d["error"].as_str().unwrap().contains("interrupted"), "{d}");
}

/// A small site on loopback whose page `/b` can change, and a canary that must never be
/// reached.
struct Site {
    addr: SocketAddr,
    b_text: Arc<Mutex<String>>,
}

async fn site() -> Site {
    let b_text = Arc::new(Mutex::new(
        "Borrowing lets code use a value without owning it.".to_string(),
    ));
    let page = |title: &str, body: &str| {
        format!("<!doctype html><html><head><title>{title}</title></head><body><nav><a href=\"/\">Home</a></nav><main><article><h1>{title}</h1><p>{body}</p><p>{body}</p></article></main></body></html>")
    };
    let index = page(
        "Index",
        "Welcome to the guide. Read <a href=\"/a\">ownership</a> and <a href=\"/b#intro\">borrowing</a>.",
    );
    let a = page(
        "Ownership",
        "Each value in Rust has an owner; when the owner goes out of scope the value is dropped.",
    );
    let router = Router::new()
        .route("/", get(move || async move { Html(index) }))
        .route("/a", get(move || async move { Html(a) }))
        .route(
            "/b",
            get(|State(text): State<Arc<Mutex<String>>>| async move {
                let t = text.lock().unwrap().clone();
                Html(format!("<!doctype html><html><head><title>Borrowing</title></head><body><main><article><h1>Borrowing</h1><p>{t}</p><p>{t}</p></article></main></body></html>"))
            }),
        )
        .with_state(b_text.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    Site { addr, b_text }
}

async fn canary() -> (SocketAddr, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let router = Router::new().fallback(move || {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            "canary"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (addr, hits)
}

async fn add_url(app: &TestApp, token: &str, agent: &str, body: Value) -> reqwest::Response {
    app.post(
        &format!("/api/agents/{agent}/knowledge/url"),
        Some(token),
        body,
    )
    .await
}

#[tokio::test]
async fn a_crawled_site_is_indexed_with_page_sources_and_refreshed_incrementally() {
    let site = site().await;
    let allowed = format!("127.0.0.1:{}", site.addr.port());
    let app = spawn_app_with(|c| c.outbound.allowed_private_hosts = vec![allowed]).await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let ask = "When is a value dropped once its owner goes out of scope?";
    // Chatting first caches the agent as one without knowledge; adding the URL must
    // undo that, or the chat below would not retrieve.
    assert_eq!(app.ask(&user.access, &agent, ask).await["ragChunksUsed"], 0);
    let res = add_url(
        &app,
        &user.access,
        &agent,
        json!({"url": format!("http://{}/", site.addr), "config": {"crawlDepth": 1, "maxPages": 10}}),
    )
    .await;
    assert_eq!(res.status(), 202);
    let body: Value = res.json().await.unwrap();
    let doc = body["documentId"].as_str().unwrap().to_string();
    let job_id = body["jobId"].as_str().unwrap().to_string();
    let d = app.settled(&user.access, &agent, &doc).await;
    assert_eq!(d["status"], "indexed", "{d}");
    assert_eq!(d["kind"], "url");
    assert_eq!(
        d["pages"], 3,
        "index, /a and /b (its fragment link de-duplicated)"
    );
    let job = app.ended_job(&user.access, &job_id).await;
    assert_eq!(job["kind"], "crawl");
    assert_eq!(job["status"], "succeeded");
    assert_eq!(job["progress"]["done"], 3);

    let reply = app.ask(&user.access, &agent, ask).await;
    let source = &reply["sources"][0];
    assert_eq!(source["url"], format!("http://{}/a", site.addr), "{reply}");
    assert_eq!(source["title"], "Ownership");
    let a_chunk = source["chunkId"].clone();

    // Refresh: /a is unchanged (its chunks stay), /b changed (re-indexed).
    *site.b_text.lock().unwrap() =
        "Lifetimes and references: a reference never outlives its referent.".into();
    let refresh_job = app.refreshed(&user.access, &agent, &doc).await;
    for _ in 0..300 {
        if app.job(&user.access, &refresh_job).await["status"] == "succeeded" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reply = app.ask(&user.access, &agent, ask).await;
    assert_eq!(
        reply["sources"][0]["chunkId"], a_chunk,
        "unchanged page kept"
    );
    let reply = app
        .ask(
            &user.access,
            &agent,
            "Does a reference outlive its referent?",
        )
        .await;
    assert_eq!(
        reply["sources"][0]["url"],
        format!("http://{}/b", site.addr)
    );
    let reply = app
        .ask(&user.access, &agent, "borrowing without owning")
        .await;
    assert!(
        reply["sources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| !s["snippet"].as_str().unwrap().contains("without owning")),
        "the old text of /b is gone: {reply}"
    );
}

#[tokio::test]
async fn forbidden_or_malformed_urls_are_400_and_never_fetched() {
    let (canary, hits) = canary().await;
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let port = canary.port();
    for url in [
        format!("http://127.0.0.1:{port}/"),
        format!("http://localhost:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://0x7f000001:{port}/"),
        format!("http://[::1]:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://10.0.0.1/".to_string(),
        "file:///etc/passwd".to_string(),
        "ftp://example.com/".to_string(),
        "not a url".to_string(),
        String::new(),
    ] {
        let res = add_url(&app, &user.access, &agent, json!({"url": url})).await;
        assert_eq!(res.status(), 400, "{url}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"], "Bad Request");
    }
    for config in [
        json!({"crawlDepth": 6}),
        json!({"maxPages": 0}),
        json!({"maxPages": 1001}),
        json!({"includePatterns": ["[unclosed"]}),
        json!({"unknownOption": true}),
    ] {
        let res = add_url(
            &app,
            &user.access,
            &agent,
            json!({"url": "https://example.com/", "config": config}),
        )
        .await;
        assert_eq!(res.status(), 400, "{config}");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0, "the canary was reached");
    let list = app
        .get(
            &format!("/api/agents/{agent}/knowledge"),
            Some(&user.access),
        )
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(list["documents"], json!([]), "nothing was stored");
}

#[tokio::test]
async fn deleting_an_agent_removes_its_documents_and_uploads() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    let doc = app
        .uploaded(&user.access, &agent, "a.txt", fixture("Apache-2.0.txt"))
        .await;
    app.settled(&user.access, &agent, &doc).await;
    assert!(app.upload_exists(&doc).await);
    let res = app
        .delete(&format!("/api/agents/{agent}"), Some(&user.access))
        .await;
    assert_eq!(res.status(), 200);
    assert!(!app.upload_exists(&doc).await);
    assert!(app
        .state
        .store
        .document_by_id(&doc.as_str().into())
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn no_document_gives_more_than_two_sources_while_others_are_relevant() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = agent(&app, &user.access).await;
    // One long document whose every chunk is about quokkas, and three short ones that
    // mention them once: BM25 ranks the long one's chunks first.
    let long: String = (1..=12)
        .map(|n| {
            format!(
                "# Part {n}\n\n{}\n\n",
                "The quokka is a small marsupial; every quokka lives on islands where the quokka thrives. "
                    .repeat(30)
            )
        })
        .collect();
    let long_id = app
        .uploaded(
            &user.access,
            &agent,
            "quokkas.md",
            long.clone().into_bytes(),
        )
        .await;
    let mut short_ids = Vec::new();
    for (name, text) in [
        (
            "ferry.txt",
            "The ferry to Rottnest leaves at nine; visitors hope to see a quokka.",
        ),
        (
            "bikes.txt",
            "Bikes can be hired at the pier. Please do not feed the quokka.",
        ),
        ("zoo.txt", "The zoo keeps one quokka beside the wombats."),
    ] {
        short_ids.push(app.uploaded(&user.access, &agent, name, text.into()).await);
    }
    for id in std::iter::once(&long_id).chain(&short_ids) {
        assert_eq!(
            app.settled(&user.access, &agent, id).await["status"],
            "indexed"
        );
    }
    let chunks = app.settled(&user.access, &agent, &long_id).await["chunks"]
        .as_u64()
        .unwrap();
    assert!(chunks >= 5, "the long document has {chunks} chunks");

    let reply = app.ask(&user.access, &agent, "quokka").await;
    let sources = reply["sources"].as_array().unwrap();
    let from_long = sources
        .iter()
        .filter(|s| s["documentId"] == long_id.as_str())
        .count();
    assert_eq!(from_long, 2, "{reply}");
    for id in &short_ids {
        assert!(
            sources.iter().any(|s| s["documentId"] == id.as_str()),
            "{id} is relevant and must be among the sources: {reply}"
        );
    }

    // With nothing else relevant, the one document fills the sources.
    let alone = agent_named(&app, &user.access, "Alone").await;
    let id = app
        .uploaded(&user.access, &alone, "quokkas.md", long.into_bytes())
        .await;
    assert_eq!(
        app.settled(&user.access, &alone, &id).await["status"],
        "indexed"
    );
    let reply = app.ask(&user.access, &alone, "quokka").await;
    let sources = reply["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 5, "{reply}");
    assert!(
        sources.iter().all(|s| s["documentId"] == id.as_str()),
        "{reply}"
    );
}
