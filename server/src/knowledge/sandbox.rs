//! Document extraction outside the server process: every detection, extraction, page
//! parsing and chunking runs in a pooled `agentchat extract` child under an address-space
//! limit, an empty environment and a deadline, so a hostile file can crash or stall only its
//! reader and the caller gets an [`ExtractError`]. Design and protocol: docs/knowledge.md §
//! Extraction.

use std::{
    io::{self, BufReader, BufWriter, Read, Write},
    panic::{catch_unwind, AssertUnwindSafe},
    process::{ExitCode, ExitStatus, Stdio},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use serde::{Deserialize, Serialize};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    process::{Child, ChildStdin, ChildStdout, Command},
    sync::Semaphore,
};
use tracing::warn;
use url::Url;

use super::{
    crawl::{self, ContentKind, PageDoc},
    extract::{self, ExtractError, ExtractLimits},
    worker,
};
use crate::store::documents::NewChunk;

/// First bytes a child writes: proof it is an extraction child of this protocol version.
pub const HELLO: &[u8] = b"agentchat-extract 1\n";
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Added to a task's deadline before the child is killed, so its own deadline check answers first.
pub const KILL_GRACE: Duration = Duration::from_secs(1);
/// Longest answer a child may give (bytes of JSON); the largest allowed document fits well below.
pub const MAX_OUTPUT_BYTES: u64 = 512 << 20;
const MAX_HEAD_BYTES: u32 = 1 << 20;
/// Tasks one child serves before it is replaced (bounds heap fragmentation).
pub const MAX_TASKS_PER_CHILD: u32 = 500;
/// An idle child unused this long is ended.
pub const IDLE_TTL: Duration = Duration::from_secs(300);
const STDERR_TAIL_BYTES: usize = 8 * 1024;

pub use crate::config::ExtractionConfig;

/// A document read in full: what the ingestion job stores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkedDocument {
    pub title: String,
    /// A PDF's page count (last page with text); `None` for other kinds.
    pub pages: Option<u32>,
    pub chunks: Vec<NewChunk>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "task", rename_all = "camelCase")]
enum Head {
    Document {
        name: String,
        limits: ExtractLimits,
    },
    Page {
        url: Url,
        content_type: Option<String>,
        kind: ContentKind,
    },
    PageChunks {
        url: String,
        title: String,
        limits: ExtractLimits,
    },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Output {
    Document(Result<ChunkedDocument, ExtractError>),
    Page(PageDoc),
    Chunks(Vec<NewChunk>),
    /// A failure the child survived (a contained panic, a body that is not UTF-8).
    Failed(ExtractError),
}

/// The pool of extraction children of one server instance.
pub struct Sandbox {
    config: ExtractionConfig,
    slots: Semaphore,
    idle: Mutex<Vec<Worker>>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Sandbox {
    pub fn new(config: ExtractionConfig) -> Self {
        let processes = config.processes.max(1);
        Self {
            config,
            slots: Semaphore::new(processes),
            idle: Mutex::new(Vec::new()),
        }
    }

    pub fn config(&self) -> &ExtractionConfig {
        &self.config
    }

    /// Detects, extracts and chunks `bytes` in a child. Errors: every [`ExtractError`]; the child's
    /// are `Timeout`, `TooLarge` (memory, [`MAX_OUTPUT_BYTES`]), `TooDeep`, `Crashed` and
    /// `Unavailable`.
    pub async fn document(
        &self,
        bytes: &[u8],
        name: &str,
        limits: &ExtractLimits,
    ) -> Result<ChunkedDocument, ExtractError> {
        let head = Head::Document {
            name: name.to_owned(),
            limits: limits.clone(),
        };
        match self.run(&head, bytes, limits.deadline).await? {
            Output::Document(result) => result,
            other => Err(unexpected(other)),
        }
    }

    /// Reads a fetched page (HTML via readability, or text) in a child: title, text, canonical URL,
    /// links, robots directives. Errors: as [`Sandbox::document`].
    pub(crate) async fn page(
        &self,
        body: &[u8],
        url: &Url,
        content_type: Option<String>,
        kind: ContentKind,
    ) -> Result<PageDoc, ExtractError> {
        let head = Head::Page {
            url: url.clone(),
            content_type,
            kind,
        };
        match self.run(&head, body, self.config.timeout).await? {
            Output::Page(page) => Ok(page),
            other => Err(unexpected(other)),
        }
    }

    /// Cuts a crawled page's text into chunks in a child. Errors: as [`Sandbox::document`].
    pub async fn page_chunks(
        &self,
        text: &str,
        title: &str,
        url: &str,
        limits: &ExtractLimits,
    ) -> Result<Vec<NewChunk>, ExtractError> {
        let head = Head::PageChunks {
            url: url.to_owned(),
            title: title.to_owned(),
            limits: limits.clone(),
        };
        match self.run(&head, text.as_bytes(), limits.deadline).await? {
            Output::Chunks(chunks) => Ok(chunks),
            other => Err(unexpected(other)),
        }
    }

    /// Runs one task in a pooled child, bounded by `deadline` (plus [`KILL_GRACE`]).
    async fn run(
        &self,
        head: &Head,
        body: &[u8],
        deadline: Duration,
    ) -> Result<Output, ExtractError> {
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| ExtractError::Unavailable)?;
        let mut worker = match self.take_idle() {
            Some(worker) => worker,
            None => Worker::start(&self.config).await.map_err(|err| {
                warn!(program = %self.config.program.display(), error = %err, "cannot start a document reader process");
                ExtractError::Unavailable
            })?,
        };
        let answer = tokio::time::timeout(
            deadline.saturating_add(KILL_GRACE),
            worker.exchange(head, body),
        )
        .await;
        match answer {
            Ok(Ok(Output::Failed(err))) => {
                // The child survived; whatever failed may have left it in a poor state.
                worker.end().await;
                Err(err)
            }
            Ok(Ok(output)) => {
                worker.tasks += 1;
                self.put_idle(worker);
                Ok(output)
            }
            Ok(Err(Exchange::TooLong(len))) => {
                warn!(
                    bytes = len,
                    "a document reader's answer was too long; it was stopped"
                );
                worker.end().await;
                Err(ExtractError::TooLarge(format!(
                    "its text takes more than {} to store",
                    extract::size_phrase(MAX_OUTPUT_BYTES)
                )))
            }
            Ok(Err(Exchange::Io(err))) => Err(worker.crashed(&err, self.config.memory_limit).await),
            Err(_elapsed) => {
                warn!(
                    seconds = deadline.as_secs(),
                    "a document reader ran past its deadline; it was killed"
                );
                worker.end().await;
                Err(ExtractError::Timeout)
            }
        }
    }

    fn take_idle(&self) -> Option<Worker> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.retain(|w| w.idle_since.elapsed() < IDLE_TTL);
        while let Some(mut worker) = idle.pop() {
            // A child that ended while idle (killed from outside) is not handed a task.
            if matches!(worker.child.try_wait(), Ok(None)) {
                return Some(worker);
            }
        }
        None
    }

    fn put_idle(&self, mut worker: Worker) {
        if worker.tasks >= MAX_TASKS_PER_CHILD {
            return; // dropped: `kill_on_drop` ends it
        }
        worker.idle_since = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.retain(|w| w.idle_since.elapsed() < IDLE_TTL);
        if idle.len() < self.config.processes.max(1) {
            idle.push(worker);
        }
    }
}

fn unexpected(output: Output) -> ExtractError {
    warn!(?output, "a document reader answered another task");
    ExtractError::Crashed
}

enum Exchange {
    Io(io::Error),
    TooLong(u64),
}

impl From<io::Error> for Exchange {
    fn from(err: io::Error) -> Self {
        Exchange::Io(err)
    }
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: tokio::io::BufReader<ChildStdout>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_reader: tokio::task::JoinHandle<()>,
    tasks: u32,
    idle_since: Instant,
}

impl Worker {
    /// Starts `config.program extract` and waits for its [`HELLO`].
    async fn start(config: &ExtractionConfig) -> io::Result<Self> {
        let mut child = Command::new(&config.program)
            .arg("extract")
            .arg("--memory-limit")
            .arg(config.memory_limit.to_string())
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let missing = || io::Error::other("a pipe of the child is missing");
        let stdin = child.stdin.take().ok_or_else(missing)?;
        let stdout = child.stdout.take().ok_or_else(missing)?;
        let mut stderr_pipe = child.stderr.take().ok_or_else(missing)?;
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let tail = stderr.clone();
        // The child's standard error is drained all the time (a full pipe would block it);
        // only its last bytes are kept.
        let stderr_reader = tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = stderr_pipe.read(&mut buf).await {
                let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > STDERR_TAIL_BYTES {
                    let cut = tail.len() - STDERR_TAIL_BYTES;
                    tail.drain(..cut);
                }
            }
        });
        let mut worker = Worker {
            child,
            stdin,
            stdout: tokio::io::BufReader::new(stdout),
            stderr,
            stderr_reader,
            tasks: 0,
            idle_since: Instant::now(),
        };
        let mut hello = [0u8; HELLO.len()];
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, worker.stdout.read_exact(&mut hello)).await {
            Ok(Ok(_)) if hello == HELLO => Ok(worker),
            Ok(Ok(_)) => {
                worker.end().await;
                Err(io::Error::other("the program is not an extraction child"))
            }
            Ok(Err(err)) => {
                let tail = worker.stderr_tail().await;
                worker.end().await;
                Err(io::Error::other(format!(
                    "the child ended at once ({err}): {tail}"
                )))
            }
            Err(_) => {
                worker.end().await;
                Err(io::Error::other("the child did not answer"))
            }
        }
    }

    async fn exchange(&mut self, head: &Head, body: &[u8]) -> Result<Output, Exchange> {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        let head = serde_json::to_vec(head).map_err(io::Error::other)?;
        let head_len = u32::try_from(head.len()).map_err(io::Error::other)?;
        self.stdin.write_all(&head_len.to_le_bytes()).await?;
        self.stdin.write_all(&head).await?;
        self.stdin
            .write_all(&(body.len() as u64).to_le_bytes())
            .await?;
        self.stdin.write_all(body).await?;
        self.stdin.flush().await?;
        let len = self.stdout.read_u64_le().await?;
        if len > MAX_OUTPUT_BYTES {
            return Err(Exchange::TooLong(len));
        }
        let mut answer = vec![0u8; len as usize];
        self.stdout.read_exact(&mut answer).await?;
        Ok(serde_json::from_slice(&answer).map_err(io::Error::other)?)
    }

    /// What ended a child whose pipe broke, as the user's sentence; the cause is logged.
    async fn crashed(mut self, err: &io::Error, memory_limit: u64) -> ExtractError {
        let status = match tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await {
            Ok(Ok(status)) => Some(status),
            _ => None,
        };
        let tail = self.stderr_tail().await;
        let failure = classify(status, &tail, memory_limit);
        warn!(
            error = %err,
            status = ?status,
            stderr = %tail.chars().rev().take(1000).collect::<String>().chars().rev().collect::<String>(),
            failure = failure.code(),
            "a document reader process ended during a task"
        );
        self.end().await;
        failure
    }

    async fn stderr_tail(&mut self) -> String {
        let _ = tokio::time::timeout(Duration::from_secs(1), &mut self.stderr_reader).await;
        let tail = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&tail).into_owned()
    }

    async fn end(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        self.stderr_reader.abort();
    }
}

/// Names what ended a child from its exit and the end of its standard error.
fn classify(status: Option<ExitStatus>, stderr: &str, memory_limit: u64) -> ExtractError {
    use std::os::unix::process::ExitStatusExt;

    let memory = || {
        ExtractError::TooLarge(format!(
            "reading it needs more than {} of memory",
            extract::size_phrase(memory_limit)
        ))
    };
    if stderr.contains("has overflowed its stack") {
        ExtractError::TooDeep
    } else if stderr.contains("memory allocation of") || stderr.contains("capacity overflow") {
        memory()
    } else if status.and_then(|s| s.signal()) == Some(9) {
        // Killed by someone else than this pool: the kernel's out-of-memory killer.
        memory()
    } else {
        ExtractError::Crashed
    }
}

// ---------------------------------------------------------------------------------------
// The child
// ---------------------------------------------------------------------------------------

/// The `agentchat extract` process: sets its limits, says [`HELLO`], serves tasks from stdin.
/// `memory_limit` in bytes (0: none). Exit 0 when input closed between tasks, else 1.
pub fn child_main(memory_limit: u64) -> ExitCode {
    use nix::sys::resource::{setrlimit, Resource};

    // No core file for a crash: it would hold the document and take disk for nothing.
    if let Err(err) = setrlimit(Resource::RLIMIT_CORE, 0, 0) {
        eprintln!("extract: cannot disable core dumps: {err}");
    }
    if memory_limit > 0 {
        if let Err(err) = setrlimit(Resource::RLIMIT_AS, memory_limit, memory_limit) {
            eprintln!("extract: cannot set the memory limit: {err}");
            return ExitCode::FAILURE;
        }
    }
    let mut input = BufReader::new(io::stdin().lock());
    let mut output = BufWriter::new(io::stdout().lock());
    if output
        .write_all(HELLO)
        .and_then(|()| output.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    loop {
        let (head, body) = match read_task(&mut input) {
            Ok(Some(task)) => task,
            Ok(None) => return ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("extract: bad task: {err}");
                return ExitCode::FAILURE;
            }
        };
        let answer = catch_unwind(AssertUnwindSafe(|| perform(head, body)))
            .unwrap_or(Output::Failed(ExtractError::Panicked));
        let written = serde_json::to_vec(&answer)
            .map_err(io::Error::other)
            .and_then(|json| {
                output.write_all(&(json.len() as u64).to_le_bytes())?;
                output.write_all(&json)?;
                output.flush()
            });
        if let Err(err) = written {
            eprintln!("extract: cannot answer: {err}");
            return ExitCode::FAILURE;
        }
    }
}

fn read_task(input: &mut impl Read) -> io::Result<Option<(Head, Vec<u8>)>> {
    let mut len = [0u8; 4];
    match input.read_exact(&mut len) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(err) => return Err(err),
    }
    let head_len = u32::from_le_bytes(len);
    if head_len > MAX_HEAD_BYTES {
        return Err(io::Error::other("task head too long"));
    }
    let mut head = vec![0u8; head_len as usize];
    input.read_exact(&mut head)?;
    let head: Head = serde_json::from_slice(&head).map_err(io::Error::other)?;
    let mut len = [0u8; 8];
    input.read_exact(&mut len)?;
    let body_len = usize::try_from(u64::from_le_bytes(len)).map_err(io::Error::other)?;
    let mut body = Vec::new();
    input.take(body_len as u64).read_to_end(&mut body)?;
    if body.len() != body_len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(Some((head, body)))
}

fn perform(head: Head, body: Vec<u8>) -> Output {
    match head {
        Head::Document { name, limits } => Output::Document(read_document(&body, name, &limits)),
        Head::Page {
            url,
            content_type,
            kind,
        } => Output::Page(crawl::read_page(&body, content_type.as_deref(), kind, &url)),
        Head::PageChunks { url, title, limits } => match String::from_utf8(body) {
            Ok(text) => {
                let extracted = worker::page_sections(text, &title, &limits);
                Output::Chunks(worker::new_chunks(&extracted, &title, Some(&url)))
            }
            Err(_) => Output::Failed(ExtractError::Malformed("page".to_owned())),
        },
    }
}

/// Detection, extraction and chunking of an upload, as the ingestion job stores it.
pub fn read_document(
    bytes: &[u8],
    name: String,
    limits: &ExtractLimits,
) -> Result<ChunkedDocument, ExtractError> {
    let kind = extract::detect(bytes)?;
    let extracted = extract::extract(bytes, kind, limits)?;
    let title = extracted.title.clone().unwrap_or(name);
    let pages = extracted.sections.iter().filter_map(|s| s.page).max();
    let chunks = worker::new_chunks(&extracted, &title, None);
    Ok(ChunkedDocument {
        title,
        pages,
        chunks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crashes_are_named_from_the_childs_last_words() {
        let limit = 256 << 20;
        assert_eq!(
            classify(
                None,
                "\nthread 'main' has overflowed its stack\nfatal runtime error: stack overflow\n",
                limit
            ),
            ExtractError::TooDeep
        );
        let memory = classify(
            None,
            "memory allocation of 1073741824 bytes failed\n",
            limit,
        );
        assert_eq!(
            memory.to_string(),
            "The document is too large to index: reading it needs more than 256 MiB of memory."
        );
        assert_eq!(
            classify(None, "Segmentation fault", limit),
            ExtractError::Crashed
        );
    }

    #[test]
    fn a_task_survives_the_pipe_format() {
        let head = Head::PageChunks {
            url: "https://example.com/".into(),
            title: "Example".into(),
            limits: ExtractLimits::default(),
        };
        let head = serde_json::to_vec(&head).unwrap();
        let body = b"# Example\n\nSome text.";
        let mut frame = Vec::new();
        frame.extend_from_slice(&(head.len() as u32).to_le_bytes());
        frame.extend_from_slice(&head);
        frame.extend_from_slice(&(body.len() as u64).to_le_bytes());
        frame.extend_from_slice(body);
        let mut input = &frame[..];
        let (read_head, read_body) = read_task(&mut input).unwrap().unwrap();
        assert!(matches!(read_head, Head::PageChunks { ref title, .. } if title == "Example"));
        assert_eq!(read_body, body);
        assert!(
            read_task(&mut input).unwrap().is_none(),
            "input ends between tasks"
        );
        let mut cut = &frame[..frame.len() - 3];
        assert!(read_task(&mut cut).is_err(), "a body cut short is an error");
    }
}
