//! # `kb_pdf_memory`: peak memory while a 20 MiB PDF is ingested
//!
//! **Target:** peak memory while ingesting a 20 MiB PDF **≤ 300 MiB**.
//!
//! ## What is measured
//!
//! Two PDFs of `--size-mib` MiB (default 20) are generated at run time (no PDF library: a
//! small writer in this file emits valid PDF 1.7 with a cross-reference table, the standard
//! Helvetica font and `/Info /Title`):
//!
//! - `text`: about 1,500 pages of dense text (100 lines of about 120 characters each, taken
//!   from *The Rust Programming Language*), shown with `TJ` arrays with kerning as
//!   typesetting programs write them; content streams uncompressed, so the file's 20 MiB are
//!   nearly all text (about 18 million characters: under the extraction limit of 20 million
//!   and the page limit of 2,000).
//! - `images`: pages of about 3,000 characters of text (Flate-compressed content streams)
//!   with a 160 × 160 RGB image on each (Flate-compressed noise, so it does not shrink),
//!   as many pages as make the file 20 MiB: the shape of a scanned or illustrated book.
//!
//! Each PDF is then ingested in a fresh child process (this binary run again with the hidden
//! `--child PATH` flag), which does what the ingestion job does with an upload: read the file
//! into memory, `knowledge::extract::detect`, `knowledge::extract::extract` with the default
//! `ExtractLimits`, `knowledge::chunk::chunk` with the default `ChunkConfig`, and the chunks
//! mapped to the `NewChunk`s that would be stored. The tokenizer is loaded first, as the
//! service does at start-up. The child reports its own peak resident set (`VmHWM` of
//! `/proc/self/status`) before it exits, and its resident set before reading the file
//! (the baseline); the parent cross-checks with `getrusage(RUSAGE_CHILDREN)` (`ru_maxrss`,
//! the largest peak of the children waited for so far).
//!
//! The figure compared with the target is the child's whole peak resident set (binary,
//! tokenizer and all), so it is an upper bound of what ingesting the file costs; the
//! increase over the baseline is what the ingestion itself adds to a running service.
//!
//! With `--isolated` the measured process stands for the server and does what the
//! ingestion job does since extraction left the server process: it reads the file and hands
//! it to an extraction child process (`knowledge::sandbox`, the `agentchat` binary beside
//! this one), which detects, extracts and chunks it and answers the chunks. The table then
//! gives what the upload added to the server's resident set and the extraction child's
//! peak (compared with the target).
//!
//! ```text
//! export CARGO_TARGET_DIR=$HOME/.cache/agentchat/target
//! cargo build --release -p server --bin agentchat -p bench --bin kb_pdf_memory
//! $CARGO_TARGET_DIR/release/kb_pdf_memory --size-mib 20 [--isolated]
//! ```

use std::{
    fmt::Write as _,
    io::Write as _,
    path::{Path, PathBuf},
    time::Instant,
};

use agentchat::knowledge::{
    extract::{self, ExtractLimits},
    worker,
};
use anyhow::{bail, ensure, Context};
use bench::{
    kb::{self, Rng},
    load,
};
use clap::Parser;
use serde_json::{json, Value};

/// Peak resident memory the issue allows, in MiB.
const TARGET_PEAK_MIB: f64 = 300.0;
/// Text lines per page of the `text` PDF.
const TEXT_LINES_PER_PAGE: usize = 100;
/// Characters per line of the `text` PDF (about).
const TEXT_LINE_CHARS: usize = 120;
/// Characters of text per page of the `images` PDF (about).
const IMAGE_PAGE_TEXT_CHARS: usize = 3_000;
/// Side of the image of every page of the `images` PDF, in pixels.
const IMAGE_SIDE: usize = 160;

/// Peak memory of ingesting a 20 MiB PDF, in a child process. See the binary's
/// documentation for details.
#[derive(Parser, Debug)]
#[command(name = "kb_pdf_memory", version, about, long_about = None)]
struct Args {
    /// The Rust book's HTML folder (default: `$(rustc --print sysroot)/share/doc/rust/html/book`).
    #[arg(long)]
    book_dir: Option<PathBuf>,
    /// Size of each generated PDF in MiB.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=200))]
    size_mib: u64,
    /// Which PDFs to generate and ingest (`text`, `images`), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec!["text".to_string(), "images".to_string()])]
    kinds: Vec<String>,
    /// Keep the generated PDFs in this folder.
    #[arg(long)]
    keep_pdfs: Option<PathBuf>,
    /// Ingest as the service does: the measured process stands for the server and hands the
    /// file to an extraction child process (`knowledge::sandbox`, the `agentchat` binary
    /// beside this one); both processes' peaks are reported.
    #[arg(long)]
    isolated: bool,
    /// Internal: ingest the PDF at this path and report (the measured child process).
    #[arg(long, hide = true)]
    child: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(path) = &args.child {
        return match args.isolated {
            true => isolated_child(path),
            false => child(path),
        };
    }
    parent(&args)
}

/// Generates the PDFs, ingests each in a child process and prints the table.
fn parent(args: &Args) -> anyhow::Result<()> {
    let book = kb::book_dir(args.book_dir.as_deref())?;
    let pages = kb::read_book(&book)?;
    let text: String = pages
        .iter()
        .map(|p| p.markdown.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let lines = ascii_lines(&text);
    let temp = tempfile::Builder::new().prefix("kb-pdf-").tempdir()?;
    let folder = args
        .keep_pdfs
        .clone()
        .unwrap_or_else(|| temp.path().to_path_buf());
    std::fs::create_dir_all(&folder)?;
    let target = (args.size_mib as usize) << 20;
    println!("kb_pdf_memory: peak resident memory of PDF ingestion in a fresh child process");
    println!("machine: {}", load::machine());
    let mut rows = Vec::new();
    for kind in &args.kinds {
        let (bytes, page_count) = match kind.as_str() {
            "text" => text_pdf(&lines, target),
            "images" => image_pdf(&lines, target),
            other => bail!("unknown PDF kind {other:?} (expected text or images)"),
        };
        let path = folder.join(format!("{kind}-{}mib.pdf", args.size_mib));
        std::fs::write(&path, &bytes)?;
        println!(
            "{kind}: {} bytes ({} MiB), {page_count} pages at {}; load {}",
            bytes.len(),
            kb::mib(bytes.len() as u64),
            path.display(),
            kb::load_average()
        );
        drop(bytes);
        let mut command = std::process::Command::new(std::env::current_exe()?);
        command.arg("--child").arg(&path);
        if args.isolated {
            command.arg("--isolated");
        }
        let output = command.output().context("starting the child process")?;
        ensure!(
            output.status.success(),
            "the child failed on {}: {}",
            path.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        let report: Value = stdout
            .lines()
            .find_map(|l| l.strip_prefix("RESULT "))
            .context("the child printed no result")
            .and_then(|l| Ok(serde_json::from_str(l)?))?;
        let children_max_kib =
            nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)?.max_rss();
        println!(
            "  child: {report}\n  getrusage(RUSAGE_CHILDREN).ru_maxrss so far: {} MiB",
            kb::mib(children_max_kib as u64 * 1024)
        );
        rows.push((
            kind.clone(),
            std::fs::metadata(&path)?.len(),
            page_count,
            report,
        ));
    }

    println!();
    if args.isolated {
        println!(
            "| PDF | size (MiB) | chunks | extract + chunk in the child (s) | server RSS before (MiB) | server peak RSS (MiB) | added to the server (MiB) | extraction child's peak RSS (MiB) | target (child) | result |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        let mut all_pass = true;
        for (kind, size, _pages, r) in &rows {
            let mib = |key: &str| r[key].as_u64().unwrap_or(0) as f64 / 1024.0;
            let child_peak = mib("child_peak_kib");
            let pass = child_peak <= TARGET_PEAK_MIB && r["error"].is_null();
            all_pass &= pass;
            println!(
                "| {kind} | {} | {} | {:.2} | {:.0} | {:.0} | {:.0} | {child_peak:.0} | ≤ {TARGET_PEAK_MIB:.0} | {} |",
                kb::mib(*size),
                r["chunks"],
                r["extract_s"].as_f64().unwrap_or(0.0),
                mib("baseline_kib"),
                mib("peak_kib"),
                mib("peak_kib") - mib("baseline_kib"),
                kb::verdict(pass)
            );
            if let Some(error) = r["error"].as_str() {
                println!("{kind}: extraction refused the file: {error}");
            }
        }
        println!(
            "{}: peak resident memory of the extraction child on a {} MiB PDF (target ≤ {TARGET_PEAK_MIB:.0} MiB)",
            kb::verdict(all_pass),
            args.size_mib
        );
        return Ok(());
    }
    println!(
        "| PDF | size (MiB) | pages | chars extracted | chunks | read + detect + extract (s) | chunk (s) | RSS before (MiB) | peak RSS (MiB) | added by ingestion (MiB) | target | result |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut all_pass = true;
    let mut summary = String::new();
    for (kind, size, pages, r) in &rows {
        let kib = |key: &str| r[key].as_u64().unwrap_or(0);
        let peak = kib("peak_kib") as f64 / 1024.0;
        let base = kib("baseline_kib") as f64 / 1024.0;
        let pass = peak <= TARGET_PEAK_MIB && r["error"].is_null();
        all_pass &= pass;
        println!(
            "| {kind} | {} | {pages} | {} | {} | {:.2} | {:.2} | {base:.0} | {peak:.0} | {:.0} | ≤ {TARGET_PEAK_MIB:.0} | {} |",
            kb::mib(*size),
            r["chars"],
            r["chunks"],
            r["extract_s"].as_f64().unwrap_or(0.0),
            r["chunk_s"].as_f64().unwrap_or(0.0),
            peak - base,
            kb::verdict(pass)
        );
        if let Some(error) = r["error"].as_str() {
            let _ = writeln!(summary, "{kind}: extraction refused the file: {error}");
        }
    }
    print!("{summary}");
    println!(
        "{}: peak resident memory of ingesting a {} MiB PDF (target ≤ {TARGET_PEAK_MIB:.0} MiB)",
        kb::verdict(all_pass),
        args.size_mib
    );
    Ok(())
}

/// The measured child: ingest the PDF at `path` as the job does and print one `RESULT` line.
fn child(path: &Path) -> anyhow::Result<()> {
    agentchat::llm::tokens::warm_up();
    let baseline_kib = status_kib("VmRSS:")?;
    let started = Instant::now();
    let bytes = std::fs::read(path)?;
    let size = bytes.len();
    let limits = ExtractLimits::default();
    let extracted =
        extract::detect(&bytes).and_then(|kind| extract::extract(&bytes, kind, &limits));
    drop(bytes);
    let extract_s = started.elapsed().as_secs_f64();
    let (error, sections, chars, chunks, pages, chunk_s) = match extracted {
        Ok(extracted) => {
            let started = Instant::now();
            let title = extracted
                .title
                .clone()
                .unwrap_or_else(|| "upload.pdf".into());
            let pages = extracted.sections.iter().filter_map(|s| s.page).max();
            let chunks = worker::new_chunks(&extracted, &title, None);
            let chunk_s = started.elapsed().as_secs_f64();
            (
                None,
                extracted.sections.len(),
                extracted.char_count(),
                chunks.len(),
                pages,
                chunk_s,
            )
        }
        Err(err) => (Some(err.to_string()), 0, 0, 0, None, 0.0),
    };
    let report = json!({
        "bytes": size,
        "pages_read": pages,
        "sections": sections,
        "chars": chars,
        "chunks": chunks,
        "extract_s": extract_s,
        "chunk_s": chunk_s,
        "baseline_kib": baseline_kib,
        "peak_kib": status_kib("VmHWM:")?,
        "error": error,
    });
    let mut out = std::io::stdout().lock();
    writeln!(out, "RESULT {report}")?;
    Ok(())
}

/// The measured process standing for the server (`--isolated`): reads the file as the
/// ingestion job does and hands it to a fresh extraction child process; reports its own
/// peak and, before the child ends, the child's peak (`VmHWM` of `/proc/PID/status` of
/// every process whose parent is this one).
fn isolated_child(path: &Path) -> anyhow::Result<()> {
    use agentchat::knowledge::sandbox::{ExtractionConfig, Sandbox};

    let baseline_kib = status_kib("VmRSS:")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let sandbox = Sandbox::new(ExtractionConfig {
        program: bench::service::extraction_program()?,
        processes: 1,
        ..ExtractionConfig::default()
    });
    let started = Instant::now();
    let bytes = std::fs::read(path)?;
    let size = bytes.len();
    let result =
        runtime.block_on(sandbox.document(&bytes, "upload.pdf", &ExtractLimits::default()));
    drop(bytes);
    let extract_s = started.elapsed().as_secs_f64();
    let me = std::process::id().to_string();
    let mut child_peak_kib = 0;
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let dir = entry.path();
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: the parent is the second field after the comm.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1));
        if ppid == Some(me.as_str()) {
            child_peak_kib = child_peak_kib.max(status_kib_of(&dir.join("status"), "VmHWM:")?);
        }
    }
    let (error, chunks) = match &result {
        Ok(doc) => (None, doc.chunks.len()),
        Err(err) => (Some(err.to_string()), 0),
    };
    let report = json!({
        "bytes": size,
        "chunks": chunks,
        "extract_s": extract_s,
        "baseline_kib": baseline_kib,
        "peak_kib": status_kib("VmHWM:")?,
        "child_peak_kib": child_peak_kib,
        "error": error,
    });
    drop(result);
    drop(sandbox);
    let mut out = std::io::stdout().lock();
    writeln!(out, "RESULT {report}")?;
    Ok(())
}

/// A field of `/proc/self/status` in KiB (`VmRSS:`, `VmHWM:`).
fn status_kib(field: &str) -> anyhow::Result<u64> {
    status_kib_of(Path::new("/proc/self/status"), field)
}

/// A field of a `/proc/PID/status` file in KiB.
fn status_kib_of(file: &Path, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(file)?;
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .with_context(|| format!("{} has no {field}", file.display()))?;
    Ok(line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?)
}

/// The text as printable ASCII lines of at most [`TEXT_LINE_CHARS`] characters, filled
/// like a typeset paragraph (other characters dropped; the source's line breaks ignored).
fn ascii_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let word: String = word.chars().filter(char::is_ascii_graphic).collect();
        if word.is_empty() {
            continue;
        }
        if !line.is_empty() && line.len() + 1 + word.len() > TEXT_LINE_CHARS {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// A PDF string literal's content: `\`, `(` and `)` escaped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if matches!(c, '\\' | '(' | ')') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A line as a `TJ` array: words in groups of three with a small kerning step between the
/// groups, as typesetting programs write justified text.
fn tj_line(line: &str) -> String {
    let words: Vec<&str> = line.split(' ').collect();
    let mut out = String::from("[");
    for (i, group) in words.chunks(3).enumerate() {
        if i > 0 {
            out.push_str("-12");
        }
        let mut text = group.join(" ");
        if (i + 1) * 3 < words.len() {
            text.push(' ');
        }
        let _ = write!(out, "({})", escape(&text));
    }
    out.push_str("]TJ");
    out
}

/// A minimal PDF writer: objects with recorded offsets, then the cross-reference table.
struct PdfWriter {
    out: Vec<u8>,
    offsets: Vec<usize>,
}

impl PdfWriter {
    fn new(capacity: usize) -> Self {
        let mut out = Vec::with_capacity(capacity);
        out.extend_from_slice(b"%PDF-1.7\n%\xE2\xE3\xCF\xD3\n");
        Self {
            out,
            offsets: Vec::new(),
        }
    }

    /// A new object number (written later with [`PdfWriter::object`] or [`PdfWriter::stream`]).
    fn reserve(&mut self) -> usize {
        self.offsets.push(0);
        self.offsets.len()
    }

    fn object(&mut self, number: usize, body: &str) {
        self.offsets[number - 1] = self.out.len();
        self.out
            .extend_from_slice(format!("{number} 0 obj\n{body}\nendobj\n").as_bytes());
    }

    fn stream(&mut self, number: usize, dict: &str, data: &[u8]) {
        self.offsets[number - 1] = self.out.len();
        self.out.extend_from_slice(
            format!(
                "{number} 0 obj\n<< {dict} /Length {} >>\nstream\n",
                data.len()
            )
            .as_bytes(),
        );
        self.out.extend_from_slice(data);
        self.out.extend_from_slice(b"\nendstream\nendobj\n");
    }

    /// Writes the cross-reference table and trailer; returns the file.
    fn finish(mut self, root: usize, info: usize) -> Vec<u8> {
        let xref = self.out.len();
        let mut table = format!("xref\n0 {}\n0000000000 65535 f\r\n", self.offsets.len() + 1);
        for offset in &self.offsets {
            let _ = write!(table, "{offset:010} 00000 n\r\n");
        }
        let _ = write!(
            table,
            "trailer\n<< /Size {} /Root {root} 0 R /Info {info} 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            self.offsets.len() + 1
        );
        self.out.extend_from_slice(table.as_bytes());
        self.out
    }
}

/// The objects every generated PDF starts with: catalog, page tree, font and info.
struct Skeleton {
    catalog: usize,
    pages: usize,
    font: usize,
    info: usize,
}

impl Skeleton {
    fn new(pdf: &mut PdfWriter, title: &str) -> Self {
        let skeleton = Self {
            catalog: pdf.reserve(),
            pages: pdf.reserve(),
            font: pdf.reserve(),
            info: pdf.reserve(),
        };
        pdf.object(
            skeleton.font,
            "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        );
        pdf.object(
            skeleton.info,
            &format!(
                "<< /Title ({}) /Producer (AgentChat kb_pdf_memory) >>",
                escape(title)
            ),
        );
        skeleton
    }

    fn finish(self, mut pdf: PdfWriter, kids: &[usize]) -> Vec<u8> {
        let list: Vec<String> = kids.iter().map(|k| format!("{k} 0 R")).collect();
        pdf.object(
            self.pages,
            &format!(
                "<< /Type /Pages /Kids [{}] /Count {} >>",
                list.join(" "),
                kids.len()
            ),
        );
        pdf.object(
            self.catalog,
            &format!("<< /Type /Catalog /Pages {} 0 R >>", self.pages),
        );
        pdf.finish(self.catalog, self.info)
    }
}

/// The `text` PDF: dense text pages with uncompressed content streams until `target` bytes.
fn text_pdf(lines: &[String], target: usize) -> (Vec<u8>, usize) {
    let mut pdf = PdfWriter::new(target + (1 << 20));
    let skeleton = Skeleton::new(&mut pdf, "The Rust Programming Language (dense print)");
    let mut kids = Vec::new();
    let mut at = 0usize;
    while pdf.out.len() < target {
        let mut content = String::from("BT\n/F1 6 Tf\n7 TL\n28 800 Td\n");
        for _ in 0..TEXT_LINES_PER_PAGE {
            content.push_str(&tj_line(&lines[at % lines.len()]));
            content.push_str("\nT*\n");
            at += 1;
        }
        content.push_str("ET\n");
        kids.push(add_page(&mut pdf, &skeleton, content.as_bytes(), "", None));
    }
    let pages = kids.len();
    (skeleton.finish(pdf, &kids), pages)
}

/// The `images` PDF: pages of text (compressed content) with one noise image each until
/// `target` bytes.
fn image_pdf(lines: &[String], target: usize) -> (Vec<u8>, usize) {
    let mut pdf = PdfWriter::new(target + (1 << 20));
    let skeleton = Skeleton::new(&mut pdf, "The Rust Programming Language (illustrated)");
    let mut rng = Rng::new(7);
    let mut kids = Vec::new();
    let mut at = 0usize;
    while pdf.out.len() < target {
        let pixels: Vec<u8> = (0..IMAGE_SIDE * IMAGE_SIDE * 3)
            .map(|_| (rng.next_u64() >> 56) as u8)
            .collect();
        let image = pdf.reserve();
        pdf.stream(
            image,
            &format!(
                "/Type /XObject /Subtype /Image /Width {IMAGE_SIDE} /Height {IMAGE_SIDE} \
                 /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /FlateDecode"
            ),
            &deflate(&pixels),
        );
        let mut content =
            String::from("q 300 0 0 300 148 480 cm /Im1 Do Q\nBT\n/F1 9 Tf\n11 TL\n40 450 Td\n");
        let mut chars = 0;
        while chars < IMAGE_PAGE_TEXT_CHARS {
            let line = &lines[at % lines.len()];
            at += 1;
            chars += line.len();
            let _ = writeln!(content, "({}) Tj T*", escape(line));
        }
        content.push_str("ET\n");
        let compressed = deflate(content.as_bytes());
        kids.push(add_page(
            &mut pdf,
            &skeleton,
            &compressed,
            "/Filter /FlateDecode",
            Some(image),
        ));
    }
    let pages = kids.len();
    (skeleton.finish(pdf, &kids), pages)
}

/// Writes one A4 page with its content stream; returns the page's object number.
fn add_page(
    pdf: &mut PdfWriter,
    skeleton: &Skeleton,
    content: &[u8],
    filter: &str,
    image: Option<usize>,
) -> usize {
    let stream = pdf.reserve();
    pdf.stream(stream, filter, content);
    let page = pdf.reserve();
    let xobject = image
        .map(|i| format!(" /XObject << /Im1 {i} 0 R >>"))
        .unwrap_or_default();
    pdf.object(
        page,
        &format!(
            "<< /Type /Page /Parent {} 0 R /MediaBox [0 0 595 842] \
             /Resources << /Font << /F1 {} 0 R >>{xobject} >> /Contents {stream} 0 R >>",
            skeleton.pages, skeleton.font
        ),
    );
    page
}

/// zlib (Flate) compression.
fn deflate(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(
        Vec::with_capacity(data.len()),
        flate2::Compression::default(),
    );
    let _ = encoder.write_all(data);
    encoder.finish().unwrap_or_default()
}
