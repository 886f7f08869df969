//! Ingest: access logs in, Parquet dataset out.
//!
//! Per input object: a reader thread decompresses and splits lines into
//! chunks ([`lines`]); each chunk is parsed in parallel with rayon (one
//! [`format`] parser per file, detected from its first lines) into Arrow
//! batches ([`batch`]); a pool of writer threads streams them into the partitioned
//! dataset ([`writer`]). Every line ends up as a row, a reject, or a counted
//! skip (blank line, CSV header), so the summary reconciles exactly.

pub mod anthropic;
pub mod azure;
pub mod batch;
pub mod canonical;
pub mod envelope;
pub mod fields;
pub mod format;
pub mod lines;
pub mod manifest;
pub mod mooncake;
pub mod openai;
pub mod source;
pub mod tgi;
pub mod writer;

use std::path::Path;
use std::sync::mpsc::sync_channel;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use rayon::prelude::*;
use serde::Serialize;

use crate::dataset::DatasetRoot;
use crate::error::{Error, Result};
pub use batch::{DeriveSettings, Redaction};
use batch::{DatedBatch, LineOrigin, RejectsBuilder, RequestsBuilder};
pub use format::Format;
use format::{LineContext, Parsed};
use lines::{LineChunk, LineSplitter};
use source::InputObject;

/// How many of a file's first lines are tried for format detection.
const DETECT_LINES: usize = 32;

/// Settings of an ingest run.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// Force a format instead of detecting it per file.
    pub format: Option<Format>,
    /// Derived-column settings (bins, EOS markers, redaction).
    pub derive: DeriveSettings,
    /// Model name for formats that log none; default `<format>:<file stem>`.
    pub default_model: Option<String>,
    /// Trace start for relative timestamps (Mooncake), microseconds since the epoch.
    pub base_time_micros: i64,
    /// Target bytes per parse chunk.
    pub chunk_bytes: usize,
    /// Longer lines are rejected without being held in memory.
    pub max_line_bytes: usize,
    /// Show a progress bar (only when stderr is a terminal).
    pub progress: bool,
    /// Ingest objects again even when the manifest lists them.
    pub force: bool,
}

impl Default for IngestOptions {
    fn default() -> Self {
        Self {
            format: None,
            derive: DeriveSettings::default(),
            default_model: None,
            base_time_micros: 0,
            chunk_bytes: 4 << 20,
            max_line_bytes: 64 << 20,
            progress: false,
            force: false,
        }
    }
}

/// Counts for one input object.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct FileSummary {
    /// Input location.
    pub location: String,
    /// Detected or forced format (`null` when undetectable).
    pub format: Option<String>,
    /// Stored size in bytes.
    pub size: u64,
    /// Decompressed bytes read.
    pub bytes_read: u64,
    /// Data lines read (blank lines and headers excluded).
    pub lines_read: u64,
    /// Requests written.
    pub rows_written: u64,
    /// Lines rejected.
    pub lines_rejected: u64,
    /// Blank lines and header lines, which carry no request.
    pub lines_skipped: u64,
    /// Token rows written.
    pub tokens_written: u64,
}

impl FileSummary {
    fn add(&mut self, o: &FileSummary) {
        self.bytes_read += o.bytes_read;
        self.lines_read += o.lines_read;
        self.rows_written += o.rows_written;
        self.lines_rejected += o.lines_rejected;
        self.lines_skipped += o.lines_skipped;
        self.tokens_written += o.tokens_written;
    }
}

/// The result of an ingest run, also written as `_ingest_summary.json`.
/// Invariant: `lines_read == rows_written + lines_rejected`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IngestSummary {
    /// Unique id of the run, part of every file name it wrote.
    pub run_id: String,
    /// The dataset written.
    pub dataset: String,
    /// Objects ingested.
    pub files: Vec<FileSummary>,
    /// Objects skipped because the manifest lists them unchanged.
    pub files_skipped: Vec<String>,
    /// Totals over `files`.
    pub totals: FileSummary,
    /// Wall-clock seconds.
    pub elapsed_s: f64,
}

impl IngestSummary {
    /// True when every line read became a row or a reject.
    pub fn reconciles(&self) -> bool {
        self.totals.lines_read == self.totals.rows_written + self.totals.lines_rejected
    }
}

enum Output {
    Requests(DatedBatch),
    Tokens(DatedBatch),
    Rejects(RecordBatch),
}

/// Writer threads, each with its own Parquet files. Encoding and zstd are the
/// most expensive steps of ingest, so one writer would leave the other cores
/// idle; each parsed slice goes to the next writer in turn.
struct WriterPool {
    senders: Vec<std::sync::mpsc::SyncSender<Output>>,
    handles: Vec<std::thread::JoinHandle<Result<Vec<std::path::PathBuf>>>>,
    next: usize,
}

impl WriterPool {
    fn new(n: usize, root: &Path, run_id: &str) -> Self {
        let (mut senders, mut handles) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for i in 0..n {
            let (tx, rx) = sync_channel::<Output>(2);
            let (root, run) = (root.to_path_buf(), format!("{run_id}-w{i}"));
            handles.push(std::thread::spawn(move || -> Result<Vec<std::path::PathBuf>> {
                let mut w = writer::DatasetWriter::new(&root, &run);
                for out in rx {
                    match out {
                        Output::Requests(b) => w.write_requests(b)?,
                        Output::Tokens(b) => w.write_tokens(b)?,
                        Output::Rejects(b) => w.write_rejects(b)?,
                    }
                }
                w.finish()
            }));
            senders.push(tx);
        }
        Self { senders, handles, next: 0 }
    }

    /// Hands one slice's batches to the next writer.
    fn send(&mut self, (requests, tokens, rejects): (Option<DatedBatch>, Option<DatedBatch>, Option<RecordBatch>)) -> Result<()> {
        let tx = &self.senders[self.next % self.senders.len()];
        self.next += 1;
        let stopped = || Error::Config("a writer thread stopped".into());
        if let Some(b) = requests {
            tx.send(Output::Requests(b)).map_err(|_| stopped())?;
        }
        if let Some(b) = tokens {
            tx.send(Output::Tokens(b)).map_err(|_| stopped())?;
        }
        if let Some(b) = rejects {
            tx.send(Output::Rejects(b)).map_err(|_| stopped())?;
        }
        Ok(())
    }

    /// Closes every writer; returns all files written, or the first error.
    fn finish(self) -> Result<Vec<std::path::PathBuf>> {
        drop(self.senders);
        let mut files = Vec::new();
        for h in self.handles {
            files.extend(h.join().map_err(|_| Error::Config("writer thread panicked".into()))??);
        }
        Ok(files)
    }
}

/// A fresh id per run: UTC time plus process id, sortable and unique enough
/// for one writer per dataset at a time.
fn new_run_id() -> String {
    format!("{}-{:x}", chrono::Utc::now().format("%Y%m%dT%H%M%S%3f"), std::process::id())
}

fn default_model_for(format: Format, location: &str) -> String {
    let stem = Path::new(location).file_name().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
    let stem = stem.split('.').next().unwrap_or_default();
    format!("{}:{stem}", format.name())
}

/// Ingests `inputs` into the dataset at `out`.
pub fn ingest(inputs: &[String], out: &str, opts: &IngestOptions) -> Result<IngestSummary> {
    let started = Instant::now();
    let rt = crate::store::io_runtime()?;
    let dataset = DatasetRoot::parse(out)?;
    let objects = source::resolve_inputs(inputs, &rt)?;
    let mut manifest = manifest::Manifest::load(&dataset, &rt)?;
    let run_id = new_run_id();
    let staging = dataset.staging_dir()?;
    let mut summary = IngestSummary { run_id: run_id.clone(), dataset: dataset.display(), ..Default::default() };

    let (todo, skipped): (Vec<&InputObject>, Vec<&InputObject>) =
        objects.iter().partition(|o| opts.force || !manifest.contains(o));
    summary.files_skipped = skipped.iter().map(|o| o.location.clone()).collect();

    let progress = progress_bar(opts.progress, todo.iter().map(|o| o.size).sum());
    let mut writers = WriterPool::new(rayon::current_num_threads().max(1), &staging, &run_id);
    let mut result = Ok(());
    for obj in &todo {
        match ingest_object(obj, opts, &rt, &mut writers, progress.as_ref()) {
            Ok(fs) => {
                summary.totals.add(&fs);
                summary.files.push(fs);
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let written = writers.finish()?;
    result?;
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    dataset.publish(&staging, &written, &rt)?;
    for (obj, fs) in todo.iter().zip(&summary.files) {
        manifest.record(obj, &run_id, fs);
    }
    manifest.save(&dataset, &rt)?;
    summary.totals.location = dataset.display();
    summary.elapsed_s = started.elapsed().as_secs_f64();
    let json = serde_json::to_vec_pretty(&summary).map_err(|source| Error::Json { path: "_ingest_summary.json".into(), source })?;
    dataset.write_side_file("_ingest_summary.json", json, &rt)?;
    Ok(summary)
}

fn progress_bar(enabled: bool, total: u64) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !enabled || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} {bytes_per_sec} {wide_msg}") {
        bar.set_style(style);
    }
    Some(bar)
}

fn detect_format(chunk: &LineChunk) -> Option<Format> {
    chunk
        .lines
        .iter()
        .map(|s| &chunk.data[s.start..s.end])
        .filter(|l| !l.trim_ascii().is_empty())
        .take(DETECT_LINES)
        .find_map(Format::detect)
}

fn ingest_object(
    obj: &InputObject,
    opts: &IngestOptions,
    rt: &tokio::runtime::Runtime,
    writers: &mut WriterPool,
    progress: Option<&indicatif::ProgressBar>,
) -> Result<FileSummary> {
    let reader = obj.open(rt)?;
    let mut fs = FileSummary { location: obj.location.clone(), size: obj.size, ..Default::default() };
    let (ctx_tx, chunk_rx) = sync_channel::<LineChunk>(2);
    let chunk_bytes = opts.chunk_bytes;
    let max_line = opts.max_line_bytes;
    let reader_thread = std::thread::spawn(move || -> u64 {
        let mut split = LineSplitter::new(reader, chunk_bytes, max_line, batch::REJECT_SNIPPET_BYTES);
        while let Some(chunk) = split.next_chunk() {
            if ctx_tx.send(chunk).is_err() {
                break;
            }
        }
        split.bytes_read()
    });

    let mut format = opts.format;
    let mut default_model = opts.default_model.clone();
    for chunk in chunk_rx {
        if format.is_none() {
            format = detect_format(&chunk);
        }
        if let Some(f) = format {
            fs.format.get_or_insert_with(|| f.name().to_string());
            default_model.get_or_insert_with(|| default_model_for(f, &obj.location));
        }
        let ctx = LineContext { default_model: default_model.as_deref().unwrap_or("unknown"), base_time_micros: opts.base_time_micros };
        let outputs = parse_chunk(&chunk, format, &ctx, &obj.location, &opts.derive)?;
        for (out, counts) in outputs {
            fs.add(&counts);
            writers.send(out)?;
        }
        if let Some(p) = progress {
            p.inc(chunk.data.len() as u64);
            p.set_message(format!("{} rows, {} rejects", fs.rows_written, fs.lines_rejected));
        }
    }
    fs.bytes_read = reader_thread.join().map_err(|_| Error::Config("reader thread panicked".into()))?;
    Ok(fs)
}

type ChunkOutput = ((Option<DatedBatch>, Option<DatedBatch>, Option<RecordBatch>), FileSummary);

/// Parses a chunk in parallel: one slice of lines per rayon task, each
/// producing its own batches, returned in input order.
fn parse_chunk(
    chunk: &LineChunk,
    format: Option<Format>,
    ctx: &LineContext<'_>,
    file: &str,
    settings: &DeriveSettings,
) -> Result<Vec<ChunkOutput>> {
    let per_task = chunk.lines.len().div_ceil(rayon::current_num_threads() * 2).max(256);
    let last = chunk.lines.len().saturating_sub(1);
    let format_name = format.map(Format::name).unwrap_or("unknown");
    chunk
        .lines
        .par_chunks(per_task)
        .enumerate()
        .map(|(task, spans)| {
            let mut requests = RequestsBuilder::default();
            let mut rejects = RejectsBuilder::default();
            let mut counts = FileSummary::default();
            for (i, span) in spans.iter().enumerate() {
                let line = &chunk.data[span.start..span.end];
                let origin = LineOrigin { file, format: format_name, line_no: span.line_no, byte_offset: span.byte_offset };
                let stream_failed = task * per_task + i == last && chunk.stream_error.is_some();
                if !stream_failed && !span.is_cut() && line.trim_ascii().is_empty() {
                    counts.lines_skipped += 1;
                    continue;
                }
                let outcome = if let Some(err) = chunk.stream_error.as_ref().filter(|_| stream_failed) {
                    Err(format!("input stream failed after this point: {err}"))
                } else if span.is_cut() {
                    Err(format!("line is {} bytes, longer than --max-line-bytes", span.original_len))
                } else if let Some(f) = format {
                    f.parse(line, ctx)
                } else {
                    Err("could not detect the file's format; pass --format".to_string())
                };
                match outcome {
                    Ok(Parsed::Request(rec)) => {
                        counts.lines_read += 1;
                        counts.rows_written += 1;
                        counts.tokens_written += rec.tokens.len() as u64;
                        requests.append(rec, &origin, settings);
                    }
                    Ok(Parsed::Skip) => counts.lines_skipped += 1,
                    Err(e) => {
                        counts.lines_read += 1;
                        counts.lines_rejected += 1;
                        rejects.append(&origin, &e, line, span.is_cut());
                    }
                }
            }
            let (req, tok) = requests.finish()?;
            let rej = if rejects.is_empty() { None } else { Some(rejects.finish()?) };
            let req = (req.batch.num_rows() > 0).then_some(req);
            let tok = (tok.batch.num_rows() > 0).then_some(tok);
            Ok(((req, tok, rej), counts))
        })
        .collect()
}
