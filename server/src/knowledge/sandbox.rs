//! Document extraction outside the server process.
//!
//! Reading a hostile file is the riskiest work the service does. A PDF whose dictionaries
//! nest thousands of levels deep overflows a recursive reader's stack, which aborts the whole
//! process (a stack overflow is not a panic: `catch_unwind` cannot stop it); a stream filter
//! that decodes before checking sizes allocates gigabytes; a Markdown file of deeply nested
//! lists keeps a parser busy for minutes between two deadline checks. The in-process limits of
//! [`ExtractLimits`] stay the first line of defence; this module is the second, for whatever
//! they miss.
//!
//! Every extraction — an upload's detection, text extraction and chunking, a crawled page's
//! HTML parsing (readability) and the chunking of its text — runs in a **child process**: the
//! `agentchat` binary itself, started with the hidden `extract` subcommand, which serves
//! [`Task`]s over its standard input and output one after another. The child
//!
//! - lives under an address-space limit (`RLIMIT_AS`, [`ExtractionConfig::memory_limit`])
//!   that it sets on itself before reading anything, and writes no core dumps
//!   (`RLIMIT_CORE` 0);
//! - starts with an empty environment (no secrets to read) in `/`;
//! - is killed when a task runs past [`ExtractionConfig::timeout`] (plus [`KILL_GRACE`], so
//!   that the child's own deadline check answers first when it can);
//! - answers at most [`MAX_OUTPUT_BYTES`]; a longer answer kills it.
//!
//! Whatever the child does — overflow its stack, abort, loop, allocate without end — the
//! caller gets an [`ExtractError`] whose `Display` is a sentence for the user who uploaded
//! the file, and the server with everything else it runs goes on. A crash is classified by
//! the child's exit and the last lines it wrote to its standard error (Rust's runtime writes
//! "has overflowed its stack" and "memory allocation of … failed" there before aborting).
//!
//! Children are pooled: at most [`ExtractionConfig::processes`] work at once (callers wait
//! for a free one), a child that answered goes back to the pool for the next task, and one
//! that crashed, timed out or served [`MAX_TASKS_PER_CHILD`] tasks is replaced by a fresh
//! one. Idle children are kept per instance (nothing is shared between instances) and ended
//! after [`IDLE_TTL`] unused.
//!
//! The protocol (both directions little-endian) is private to this module and the binary
//! that contains it: the child first writes [`HELLO`]; a task is a `u32` length and a JSON
//! head ([`Head`]) followed by a `u64` length and the raw body (the file, the page or the
//! text); an answer is a `u64` length and a JSON [`Output`].

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

/// The first bytes a child writes: proof that the program is an extraction child of this
/// protocol version (and not, say, a test harness that was started by mistake).
pub const HELLO: &[u8] = b"agentchat-extract 1\n";
/// How long a new child may take to say [`HELLO`].
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Time the parent adds to a task's deadline before it kills the child, so that the child's
/// own deadline check (between pages and parser events) answers first when it can.
pub const KILL_GRACE: Duration = Duration::from_secs(1);
/// Longest answer a child may give (bytes of JSON): chunks of the largest document that
/// [`ExtractLimits::max_text_chars`] allows, with their overlap and escaping, fit well below.
pub const MAX_OUTPUT_BYTES: u64 = 512 << 20;
/// Longest task head a child accepts (bytes of JSON).
const MAX_HEAD_BYTES: u32 = 1 << 20;
/// Tasks one child serves before it is replaced (bounds what heap fragmentation can grow to).
pub const MAX_TASKS_PER_CHILD: u32 = 500;
/// An idle child unused this long is ended.
pub const IDLE_TTL: Duration = Duration::from_secs(300);
/// Bytes of a child's standard error kept to explain a crash.
const STDERR_TAIL_BYTES: usize = 8 * 1024;

pub use crate::config::ExtractionConfig;

/// A document read in full: what the ingestion job stores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkedDocument {
    /// The title ([`extract::Extracted::title`], else the upload's name).
    pub title: String,
    /// A PDF's page count (its last page with text); `None` for other kinds.
    pub pages: Option<u32>,
    /// The chunks, in document order.
    pub chunks: Vec<NewChunk>,
}

/// What a child is asked to do; the bytes it works on travel beside the head.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "task", rename_all = "camelCase")]
enum Head {
    /// Detect, extract and chunk an uploaded file (the body).
    Document {
        /// The upload's name, the title when the document has none.
        name: String,
        limits: ExtractLimits,
    },
    /// Read a fetched web page (the body) into its title, text and links.
    Page {
        url: Url,
        content_type: Option<String>,
        kind: ContentKind,
    },
    /// Cut a crawled page's text (the body, UTF-8) into chunks under its headings.
    PageChunks {
        url: String,
        title: String,
        limits: ExtractLimits,
    },
}

/// A child's answer to one [`Head`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Output {
    Document(Result<ChunkedDocument, ExtractError>),
    Page(PageDoc),
    Chunks(Vec<NewChunk>),
    /// The task failed in a way the child survived (a contained panic, a body that is not
    /// UTF-8 where text was promised).
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
    /// A pool that starts children of `config.program` as tasks need them.
    pub fn new(config: ExtractionConfig) -> Self {
        let processes = config.processes.max(1);
        Self {
            config,
            slots: Semaphore::new(processes),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// The configuration the pool runs with.
    pub fn config(&self) -> &ExtractionConfig {
        &self.config
    }

    /// Detects what `bytes` are, extracts their text and cuts it into chunks
    /// ([`extract::detect`], [`extract::extract`], [`super::chunk::chunk`]) in a child.
    ///
    /// # Errors
    /// Every [`ExtractError`] of detection and extraction, and those of [`Sandbox`] failures:
    /// [`ExtractError::Timeout`] (killed at the deadline), [`ExtractError::TooLarge`] (the
    /// memory limit, or an answer over [`MAX_OUTPUT_BYTES`]), [`ExtractError::TooDeep`]
    /// (stack overflow), [`ExtractError::Crashed`] (any other crash) and
    /// [`ExtractError::Unavailable`] (no child could be started).
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

    /// Reads a fetched page (HTML through readability, or text) in a child: its title, main
    /// text, canonical URL, links and robots directives.
    ///
    /// # Errors
    /// The [`Sandbox`] failures listed on [`Sandbox::document`].
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

    /// Cuts a crawled page's text into chunks in a child ([`worker::page_sections`], then
    /// chunking as for uploads).
    ///
    /// # Errors
    /// The [`Sandbox`] failures listed on [`Sandbox::document`].
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

/// An answer of the wrong kind: the child does not speak this protocol.
fn unexpected(output: Output) -> ExtractError {
    warn!(?output, "a document reader answered another task");
    ExtractError::Crashed
}

/// Why an exchange with a child did not give an answer.
enum Exchange {
    /// The pipe broke or closed (the child ended) or the answer was not valid.
    Io(io::Error),
    /// The child announced an answer over [`MAX_OUTPUT_BYTES`].
    TooLong(u64),
}

impl From<io::Error> for Exchange {
    fn from(err: io::Error) -> Self {
        Exchange::Io(err)
    }
}

/// One child and its pipes.
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

    /// Sends one task and reads its answer.
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

    /// What ended a child whose pipe broke during a task, as the user's sentence; the
    /// technical cause is logged.
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

    /// The child's standard error so far, once its writer has closed it (briefly waited for).
    async fn stderr_tail(&mut self) -> String {
        let _ = tokio::time::timeout(Duration::from_secs(1), &mut self.stderr_reader).await;
        let tail = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&tail).into_owned()
    }

    /// Kills the child (if it still runs) and reaps it.
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

/// The `agentchat extract` process: sets its limits, says [`HELLO`], then serves tasks from
/// standard input until it closes. Writes nothing else to standard output.
///
/// `memory_limit` is the address-space limit in bytes (0: none). Exit code 0 when standard
/// input closed between tasks, 1 on a protocol or pipe error.
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

/// Reads one task; `None` when the input ends before a task starts.
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

/// Does one task (in the child).
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
