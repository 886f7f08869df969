//! Ingest: access logs in, Parquet dataset out.
//!
//! Per input object: [`source`] resolves and decompresses it; the core's
//! [`Reader`](tokscope_core::reader::Reader) splits it into chunks of lines
//! and parses each chunk in parallel into `requests`, `tokens` and `rejects`
//! batches, split by partition (day) on the same threads; [`partitions`]
//! buffers each partition's rows until they make a row group (spilling to
//! disk over the budget [`budget`] sets), and a pool of writer threads
//! encodes the row groups into the partitioned dataset
//! ([`crate::dataset::writer`]) under temporary names, and one commit
//! ([`crate::dataset::commit`]) publishes them and records the inputs in the
//! manifest, under the dataset's lease ([`crate::dataset::lease`]). Every
//! line ends up as a row, a reject, or a counted skip (blank line, CSV
//! header), so the summary reconciles exactly.

pub mod budget;
pub mod fetch;
mod partitions;
mod read_ahead;
pub mod settings;
pub mod source;
mod spill;

use std::path::Path;
use std::sync::mpsc::channel;
use std::time::Instant;

use arrow::array::RecordBatch;
use rayon::prelude::*;
use serde::Serialize;
use tokscope_core::catalog::request_counts::{RequestCounts, RequestCountsBuilder};
use tokscope_core::catalog::requests::RequestsBuilder;
use tokscope_core::catalog::TableDef;
use tokscope_core::reader::{check_input, DatedBatch, FileCheck, LineCounts, ParsedSlice, Reader, ReaderBuilder};

use crate::dataset::commit::{self, Commit};
use crate::dataset::files::FileList;
use crate::dataset::lease::{Lease, LeaseOptions};
use crate::dataset::manifest::{Manifest, ManifestEntry};
use crate::dataset::writer::{split_by_day, DatasetWriter, OpenFile, WrittenFile, MAX_OPEN_FILES};
use crate::dataset::DatasetRoot;
use crate::engine::{TableTypes, UdfConfig};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::store::StoreOptions;
pub use budget::{MemoryLimit, MemoryPlan};
use partitions::{Partitions, RowGroupJob, RowGroupSink};
use read_ahead::{Fetching, ReadAhead};
pub use settings::{parse_base_time, IngestSettings};
use source::InputObject;
pub use tokscope_core::derive::DeriveSettings;
pub use tokscope_core::formats::Format;
pub use tokscope_core::redact::{Redaction, Redactor};

/// Settings of an ingest run.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// How each input is read: format, derived-column settings, trace defaults, line limits.
    pub reader: ReaderBuilder,
    /// Show a progress bar (only when stderr is a terminal).
    pub progress: bool,
    /// Ingest objects again even when the manifest lists them.
    pub force: bool,
    /// Object-store client settings (retries, timeouts).
    pub store: StoreOptions,
    /// How the dataset's writer lease is taken.
    pub lease: LeaseOptions,
    /// The Parquet codec of the files written (`--compression`).
    pub compression: parquet::basic::Compression,
    /// Most bytes the run may hold (`--memory-limit`): see [`MemoryPlan`].
    pub memory_limit: MemoryLimit,
    /// Most requests to the store in flight at once (`--io-concurrency`):
    /// GETs of the small objects fetched whole, HEADs of the inputs named.
    pub io_concurrency: usize,
}

impl Default for IngestOptions {
    fn default() -> Self {
        Self {
            reader: Default::default(),
            progress: false,
            force: false,
            store: Default::default(),
            lease: Default::default(),
            compression: crate::dataset::writer::default_compression(),
            memory_limit: MemoryLimit::Auto,
            io_concurrency: fetch::DEFAULT_IO_CONCURRENCY,
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
    /// Lines read, written, rejected and skipped.
    #[serde(flatten)]
    pub counts: LineCounts,
}

/// The result of an ingest run, also written as `_ingest_summary.json`.
/// Invariant: `lines_read == lines_ingested + lines_rejected`.
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
    /// Totals over `files` (`location` is the dataset).
    pub totals: FileSummary,
    /// Runs that died after their commit point, finished by this run.
    pub commits_recovered: Vec<String>,
    /// Temporary files of runs that died before their commit point, removed by this run.
    pub orphans_removed: Vec<String>,
    /// How the run shared its memory and threads (none when nothing was read).
    pub memory: Option<MemoryPlan>,
    /// Arrow bytes of rows that waited for their row group on disk (the
    /// budget was too small to hold them).
    pub spilled_bytes: u64,
    /// Wall-clock seconds.
    pub elapsed_s: f64,
}

impl IngestSummary {
    /// True when every line read became a row or a reject.
    pub fn reconciles(&self) -> bool {
        self.totals.counts.reconciles()
    }
}

/// Name of the ingest writer threads, numbered from 0 (`top -H`, `ps -L`).
pub const WRITER_THREAD: &str = "ingest-write";

/// Writer threads, each with its own Parquet files. Encoding and zstd are the
/// most expensive steps of ingest, so one writer would leave the other cores
/// idle; each row group goes to the next writer in turn (the job names it),
/// so the files depend only on the input and the number of writers, not on
/// thread timing.
struct WriterPool {
    senders: Vec<std::sync::mpsc::Sender<RowGroupJob>>,
    handles: Vec<std::thread::JoinHandle<Result<Vec<WrittenFile>>>>,
}

impl RowGroupSink for OpenFile {
    fn append(&mut self, batch: &RecordBatch) -> Result<()> {
        OpenFile::append(self, batch)
    }

    fn end_row_group(&mut self) -> Result<()> {
        OpenFile::end_row_group(self)
    }

    fn discard_row_group(&mut self) {
        OpenFile::discard_row_group(self)
    }
}

impl WriterPool {
    fn new(n: usize, root: &Path, run_id: &str, compression: parquet::basic::Compression) -> Result<Self> {
        let (mut senders, mut handles) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for i in 0..n {
            // Jobs wait for their writer in memory (bounded by bytes: `Partitions::send_jobs`),
            // so the reader runs ahead to partitions other writers can take.
            let (tx, rx) = channel::<RowGroupJob>();
            let (root, run) = (root.to_path_buf(), format!("{run_id}-w{i}"));
            let writer = move || -> Result<Vec<WrittenFile>> {
                let mut w = DatasetWriter::new(&root, &run, compression, MAX_OPEN_FILES / n)
                    .with_max_group_rows(budget::MAX_GROUP_ROWS);
                for job in rx {
                    let file = w.file(job.table, job.day)?;
                    job.write(file)?;
                }
                w.finish()
            };
            let name = format!("{WRITER_THREAD}-{i}");
            let spawned = std::thread::Builder::new().name(name).spawn(writer);
            handles.push(spawned.map_err(|e| internal_err!("could not start an ingest writer thread: {e}"))?);
            senders.push(tx);
        }
        Ok(Self { senders, handles })
    }

    /// Hands `job` to its writer.
    fn send(&mut self, job: RowGroupJob) -> Result<()> {
        let tx = &self.senders[job.writer % self.senders.len()];
        tx.send(job).map_err(|_| internal_err!("a writer thread stopped"))
    }

    /// Closes every writer and waits for all of them: their files, and the
    /// first error of any of them.
    fn finish(self) -> (Vec<WrittenFile>, Option<Error>) {
        drop(self.senders);
        let (mut files, mut error) = (Vec::new(), None);
        for h in self.handles {
            match h.join().map_err(|_| internal_err!("a writer thread panicked")).and_then(|r| r) {
                Ok(written) => files.extend(written),
                Err(e) => error = error.or(Some(e)),
            }
        }
        (files, error)
    }
}

/// A parsed slice split by partition, on the parsing threads: its rows per
/// (table, day), its `requests` counted, its accounting.
struct SplitSlice {
    parts: Vec<(&'static TableDef, i32, RecordBatch)>,
    counts: RequestCounts,
    lines: LineCounts,
    bytes: u64,
}

fn split_slice(slice: ParsedSlice) -> Result<SplitSlice> {
    let (lines, bytes) = (slice.counts, slice.bytes);
    let mut split = SplitSlice { parts: Vec::new(), counts: RequestCounts::default(), lines, bytes };
    for (table, dated) in slice.into_batches() {
        if table.name == RequestsBuilder::DEF.name {
            split.counts.add(&dated)?;
        }
        if dated.days.is_empty() {
            split.parts.push((table, 0, dated.batch));
        } else {
            split.parts.extend(split_by_day(&dated.batch, &dated.days)?.into_iter().map(|(d, b)| (table, d, b)));
        }
    }
    Ok(split)
}

/// Where a run's rows go: partition buffers, writer threads, the requests counted.
struct Sink {
    partitions: Partitions,
    writers: WriterPool,
    counts: RequestCounts,
}

impl Sink {
    fn push(&mut self, split: SplitSlice) -> Result<()> {
        self.counts.merge(split.counts);
        self.partitions.read_lines(split.lines.lines_read);
        for (table, day, batch) in split.parts {
            let jobs = self.partitions.push(table, day, batch)?;
            self.partitions.send_jobs(jobs, |job| self.writers.send(job))?;
        }
        let jobs = self.partitions.finish_left_behind()?;
        self.partitions.send_jobs(jobs, |job| self.writers.send(job))
    }

    /// Writes what the partitions still hold and waits for the writers.
    fn finish(mut self) -> (Vec<WrittenFile>, RequestCounts, u64, Result<()>) {
        let last = self.partitions.finish().and_then(|jobs| jobs.into_iter().try_for_each(|j| self.writers.send(j)));
        let spilled = self.partitions.spilled_bytes();
        let (files, error) = self.writers.finish();
        let result = match (last, error) {
            (_, Some(e)) | (Err(e), None) => Err(e),
            (Ok(()), None) => Ok(()),
        };
        (files, self.counts, spilled, result)
    }
}

/// Writes `counts` as this run's `request_counts` files under `staging` (one
/// per day). A dataset whose `requests` predate the table has its existing
/// rows counted first, so the table covers every request once committed.
fn write_request_counts(
    dataset: &DatasetRoot,
    staging: &Path,
    run_id: &str,
    mut counts: RequestCounts,
    opts: &IngestOptions,
    rt: &tokio::runtime::Runtime,
) -> Result<Vec<WrittenFile>> {
    let (store, root) = dataset.store_and_root()?;
    let list = rt.block_on(FileList::load_or_scan(store.as_ref(), &root))?;
    let table = &RequestCountsBuilder::DEF;
    if list.table_entries(RequestsBuilder::DEF.name).next().is_some() && list.table_entries(table.name).next().is_none()
    {
        counts.merge(rt.block_on(count_existing_requests(dataset))?);
    }
    let mut writer = DatasetWriter::new(staging, &format!("{run_id}-counts"), opts.compression, MAX_OPEN_FILES);
    for batch in counts.into_batches()? {
        writer.write(table, batch)?;
    }
    writer.finish()
}

/// Counts the `requests` rows a dataset already holds, read back through the engine.
async fn count_existing_requests(dataset: &DatasetRoot) -> Result<RequestCounts> {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Date32Type;

    let ctx = crate::engine::new_session()?;
    crate::engine::register_dataset_for(&ctx, dataset, &UdfConfig::new()?, TableTypes::Plain).await?;
    let sql = "SELECT date, model, variant, context_bin, context_bin_lo, eos_status, has_eos_marker FROM requests";
    let mut counts = RequestCounts::default();
    crate::engine::for_each_batch(&ctx, sql, |batch| {
        let date =
            batch.column(0).as_primitive_opt::<Date32Type>().ok_or_else(|| internal_err!("date is not a date"))?;
        let days = date.iter().map(|d| d.unwrap_or(0)).collect();
        Ok(counts.add(&DatedBatch { batch, days })?)
    })
    .await?;
    Ok(counts)
}

/// What an ingest would do: the inputs to read, and those skipped because
/// the manifest lists them unchanged.
pub struct Plan {
    /// Inputs not ingested yet (or all, with `force`), in order.
    pub todo: Vec<InputObject>,
    /// Locations of the inputs already ingested.
    pub skipped: Vec<String>,
    /// The manifest they were sorted by, to add the inputs ingested to.
    pub manifest: Manifest,
}

/// Lists the input objects `inputs` (files, directories, globs, bucket
/// prefixes) name; an input that names nothing is an error. Reads only, so
/// a run whose inputs are wrong fails before it touches the dataset.
pub fn resolve(inputs: &[String], opts: &IngestOptions, rt: &tokio::runtime::Runtime) -> Result<Vec<InputObject>> {
    source::resolve_inputs(inputs, &opts.store, opts.io_concurrency, rt)
}

/// [`resolve`], each input in a store that `after` names listed from after
/// that key only; also the last key each input in a store listed.
pub fn resolve_after(
    inputs: &[String],
    opts: &IngestOptions,
    after: &source::ListedUpTo,
    rt: &tokio::runtime::Runtime,
) -> Result<(Vec<InputObject>, source::ListedUpTo)> {
    source::resolve_inputs_after(inputs, &opts.store, opts.io_concurrency, after, rt)
}

/// Sorts `objects` against `dataset`'s manifest; reads only.
pub fn plan(
    dataset: &DatasetRoot,
    objects: Vec<InputObject>,
    opts: &IngestOptions,
    rt: &tokio::runtime::Runtime,
) -> Result<Plan> {
    let mut manifest = Manifest::load(dataset, rt)?;
    let (todo, skipped): (Vec<InputObject>, Vec<InputObject>) =
        objects.into_iter().partition(|o| opts.force || !manifest.contains(&o.location, o.size, &o.version));
    Ok(Plan { todo, skipped: skipped.into_iter().map(|o| o.location).collect(), manifest })
}

/// One input as `tokscope formats --check` reports it: where it is, and
/// what reading it gave ([`FileCheck`]).
#[derive(Debug, Clone, Serialize)]
pub struct InputCheck {
    /// The input's location (an absolute path or an object URL).
    pub file: String,
    /// Its format, framing, counts and first error.
    #[serde(flatten)]
    pub check: FileCheck,
}

impl InputCheck {
    /// Whether every line and record of the input was read without a reject.
    pub fn is_clean(&self) -> bool {
        self.check.counts.lines_rejected + self.check.counts.records_rejected == 0
    }
}

/// Reads every input `inputs` names (resolved, opened and decompressed as
/// ingest does) with `reader`, and reports each; writes nothing.
pub fn check_inputs(inputs: &[String], reader: &ReaderBuilder, store: &StoreOptions) -> Result<Vec<InputCheck>> {
    let rt = crate::store::io_runtime()?;
    let objects = source::resolve_inputs(inputs, store, fetch::DEFAULT_IO_CONCURRENCY, &rt)?;
    let mut checks = Vec::with_capacity(objects.len());
    for obj in objects {
        let check = check_input(reader.clone(), obj.open(&rt)?, &obj.location)?;
        checks.push(InputCheck { file: obj.location, check });
    }
    Ok(checks)
}

/// Ingests `inputs` into the dataset at `out`, holding the dataset's
/// writer lease for the whole run (see `dataset::lease`).
pub fn ingest(inputs: &[String], out: &str, opts: &IngestOptions) -> Result<IngestSummary> {
    let rt = crate::store::io_runtime()?;
    let dataset = DatasetRoot::parse_with(out, &opts.store)?;
    let objects = resolve(inputs, opts, &rt)?;
    let run_id = crate::dataset::new_run_id();
    let _lease = Lease::acquire(&dataset, &run_id, opts.lease, &rt)?;
    ingest_into(&dataset, objects, opts, &run_id, &rt)
}

/// Ingests `objects` (from [`resolve`]) into `dataset` as run `run_id`; the caller holds the
/// dataset's lease. First finishes or cleans up what dead runs left
/// (`dataset::commit::recover`); then ingests the inputs the manifest does
/// not list, writing every file under a temporary name, and commits them
/// all at once. With nothing new to ingest, nothing in the dataset changes.
pub fn ingest_into(
    dataset: &DatasetRoot,
    objects: Vec<InputObject>,
    opts: &IngestOptions,
    run_id: &str,
    rt: &tokio::runtime::Runtime,
) -> Result<IngestSummary> {
    let started = Instant::now();
    let recovery = commit::recover(dataset, rt)?;
    let Plan { todo, skipped, manifest } = plan(dataset, objects, opts, rt)?;
    let blocks = todo.iter().any(|o| o.may_read_in_blocks(&opts.reader));
    let whole = todo.iter().filter(|o| o.fetched_whole()).count();
    let threads = rayon::current_num_threads();
    let (streamed, concurrency) = (todo.len() - whole, opts.io_concurrency);
    let memory = MemoryPlan::new(opts.memory_limit, &opts.reader, threads, streamed, blocks, whole, concurrency)?;
    let mut summary = IngestSummary {
        run_id: run_id.to_string(),
        dataset: dataset.display(),
        commits_recovered: recovery.commits_finished,
        orphans_removed: recovery.orphans_removed,
        files_skipped: skipped,
        ..Default::default()
    };
    summary.totals.location = dataset.display();
    if todo.is_empty() {
        summary.elapsed_s = started.elapsed().as_secs_f64();
        return Ok(summary);
    }

    let staging = dataset.staging_dir()?;
    let progress = Progress::bytes(opts.progress, todo.iter().map(|o| o.size).sum());
    summary.memory = Some(memory);
    let mut sink = Sink {
        partitions: Partitions::new(&memory, run_id),
        writers: WriterPool::new(memory.writer_threads, &staging, run_id, opts.compression)?,
        counts: RequestCounts::default(),
    };
    let reader = opts.reader.clone().with_queue_chunks(memory.queue_chunks).with_read_threads(memory.read_threads);
    let result = std::thread::scope(|scope| {
        let fetching = Fetching { concurrency: memory.io_concurrency, bytes: memory.fetch_bytes };
        let readers = ReadAhead::new(scope, &todo, reader, rt, memory.inputs_ahead, fetching);
        for (obj, reader) in todo.iter().zip(readers) {
            let fs = ingest_object(obj, reader?, &mut sink, &progress)?;
            summary.totals.counts.add(&fs.counts);
            summary.totals.bytes_read += fs.bytes_read;
            summary.files.push(fs);
        }
        Ok(())
    });
    let (mut files, counts, spilled, written) = sink.finish();
    summary.spilled_bytes = spilled;
    let result = match result.and(written) {
        Ok(()) => write_request_counts(dataset, &staging, run_id, counts, opts, rt).map(|more| files.extend(more)),
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        // A failed run leaves no file of its own: what the writers finished is not committed.
        files.iter().for_each(WrittenFile::discard);
        return Err(e);
    }
    drop(progress);
    let staged = dataset.stage_for_commit(&staging, &files, rt)?;
    let entries = todo
        .iter()
        .zip(&summary.files)
        .map(|(obj, fs)| ManifestEntry {
            location: obj.location.clone(),
            size: obj.size,
            version: obj.version.clone(),
            run_id: run_id.to_string(),
            rows_written: fs.counts.rows_written,
            lines_rejected: fs.counts.lines_rejected,
        })
        .collect();
    commit::commit_adding_to(dataset, &Commit { manifest: entries, ..Commit::of(run_id, staged) }, manifest, rt)?;
    summary.elapsed_s = started.elapsed().as_secs_f64();
    let json = serde_json::to_vec_pretty(&summary)
        .map_err(|source| Error::Json { path: "_ingest_summary.json".into(), source })?;
    dataset.write_side_file("_ingest_summary.json", json, rt)?;
    Ok(summary)
}

fn ingest_object(obj: &InputObject, mut reader: Reader, sink: &mut Sink, progress: &Progress) -> Result<FileSummary> {
    let mut fs = FileSummary { location: obj.location.clone(), size: obj.size, ..Default::default() };
    for slices in &mut reader {
        let mut chunk_bytes = 0;
        let split: Vec<SplitSlice> = slices?.into_par_iter().map(split_slice).collect::<Result<_>>()?;
        for slice in split {
            fs.counts.add(&slice.lines);
            chunk_bytes += slice.bytes;
            sink.push(slice)?;
        }
        progress.inc(chunk_bytes);
        if progress.is_shown() {
            progress.set_message(format!("{} rows, {} rejects", fs.counts.rows_written, fs.counts.lines_rejected));
        }
    }
    fs.format = reader.format().map(|f| f.name().to_string());
    fs.bytes_read = reader.finish()?;
    Ok(fs)
}
