//! `tokscope compact`: merges each partition's small Parquet files into one
//! (or a few of at most the target size), so a dataset that many runs wrote
//! keeps few files and full row groups.
//!
//! A compaction is a commit like an ingest run's (`dataset::commit`): the
//! merged files are written under temporary names, the commit record names
//! them and the files they replace, then the merged files get their final
//! names and the replaced ones are deleted. A run killed before its record
//! leaves only temporary files (removed by the next writer's recovery); one
//! killed after it is finished by that recovery. Rows are never lost and
//! never kept twice once the commit is applied. It holds the dataset's lease,
//! so no ingest runs meanwhile.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::{new_null_array, RecordBatch};
use arrow::datatypes::SchemaRef;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use rayon::prelude::*;
use serde::Serialize;
use tokscope_core::catalog::{TableDef, CATALOG};

use super::commit::{self, Commit};
use super::files::FileList;
use super::lease::{Lease, LeaseOptions};
use super::writer::{Integers, OpenFile, WrittenFile};
use super::DatasetRoot;
use crate::error::{Error, Result};
use crate::resources::MemoryBudget;

/// Files at least this large are left as they are, and merged files are cut
/// at about this size (`--target-size`).
pub const DEFAULT_TARGET_BYTES: u64 = 256 << 20;

/// Parses a target size (`256M`, `1G`): a size of bytes, never 0 or `none`
/// (`--target-size`, `[compact] target_size`).
pub fn parse_target_size(text: &str) -> Result<u64> {
    match crate::size::parse_size(text)? {
        0 => Err(config_err!("a compaction's target size must be a size (e.g. 256M), not `{text}`")),
        n => Ok(n as u64),
    }
}

/// What to compact and how.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    /// Tables to compact; empty: every table the dataset holds.
    pub tables: Vec<&'static TableDef>,
    /// Files of at least this many bytes are kept; merged files are cut at about this size.
    pub target_bytes: u64,
    /// The merged files' codec.
    pub compression: Compression,
    /// How the dataset's writer lease is taken.
    pub lease: LeaseOptions,
    /// Most memory the merges in parallel may hold together (`--memory-limit`).
    pub memory_limit: MemoryBudget,
}

impl Default for CompactOptions {
    fn default() -> Self {
        Self {
            tables: Vec::new(),
            target_bytes: DEFAULT_TARGET_BYTES,
            compression: super::writer::default_compression(),
            lease: LeaseOptions::default(),
            memory_limit: MemoryBudget::Auto,
        }
    }
}

/// What one partition's merge holds besides the file it reads (whole, in
/// memory): the decoded batch, the row group it is encoding (up to 64 MiB
/// before it is flushed) with a page and an encoder buffer per column.
const MERGE_FIXED_BYTES: u64 = 192 << 20;

/// Partitions merged at once: one per thread, fewer when `budget` would not
/// hold that many merges of files up to `largest` bytes (at least one).
pub fn parallel_merges(budget: Option<usize>, largest: u64, threads: usize) -> usize {
    let Some(budget) = budget else { return threads.max(1) };
    let each = largest + MERGE_FIXED_BYTES;
    ((budget as u64 / each) as usize).clamp(1, threads.max(1))
}

/// What a compaction did.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CompactSummary {
    /// The compaction's run id (in the merged files' names).
    pub run_id: String,
    /// Partitions (directories) whose files were merged.
    pub partitions: usize,
    /// Files merged (and deleted).
    pub files_before: usize,
    /// Files written in their place.
    pub files_after: usize,
    /// Rows moved.
    pub rows: u64,
    /// Bytes of the merged files before and after.
    pub bytes_before: u64,
    /// Bytes of the files written.
    pub bytes_after: u64,
}

/// Compacts `dataset` as run `run_id`, holding its lease for the whole run.
pub fn compact(
    dataset: &DatasetRoot,
    run_id: &str,
    opts: &CompactOptions,
    rt: &tokio::runtime::Runtime,
) -> Result<CompactSummary> {
    let _lease = Lease::acquire(dataset, run_id, opts.lease, rt)?;
    commit::recover(dataset, rt)?;
    compact_held(dataset, run_id, opts, rt)
}

/// Compacts `dataset` as run `run_id`; the caller holds the lease and has
/// recovered the dataset (a scheduled run, right after its ingest).
pub fn compact_held(
    dataset: &DatasetRoot,
    run_id: &str,
    opts: &CompactOptions,
    rt: &tokio::runtime::Runtime,
) -> Result<CompactSummary> {
    let contents = rt.block_on(dataset.contents())?;
    let tables: Vec<&'static TableDef> = if opts.tables.is_empty() {
        CATALOG.iter().filter(|t| contents.tables.contains(&t.name)).collect()
    } else {
        opts.tables.clone()
    };
    let (store, root) = dataset.store_and_root()?;
    let list = rt.block_on(FileList::load_or_scan(store.as_ref(), &root))?;
    let staging = dataset.staging_dir()?;
    let mut summary = CompactSummary { run_id: run_id.to_string(), ..Default::default() };
    let jobs: Vec<(&'static TableDef, String, PartitionFiles)> = tables
        .into_iter()
        .flat_map(|table| {
            small_files_by_partition(&list, table, opts.target_bytes)
                .into_iter()
                .filter(|(_, files)| files.len() >= 2)
                .map(move |(dir, files)| (table, dir, files))
        })
        .collect();
    // Partitions are merged in parallel, one per thread as the memory budget
    // allows: each is read, decoded, encoded and compressed on its own.
    let largest = jobs.iter().flat_map(|(_, _, files)| files.iter().map(|(_, size)| *size)).max().unwrap_or(0);
    let merges = parallel_merges(opts.memory_limit.bytes(), largest, rayon::current_num_threads());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(merges)
        .thread_name(|i| format!("compact-{i}"))
        .build()
        .map_err(|e| internal_err!("compaction's thread pool: {e}"))?;
    let seq = AtomicUsize::new(0);
    let merged: Vec<(Vec<WrittenFile>, Result<u64>)> = pool.install(|| {
        jobs.par_iter()
            .map(|(table, dir, files)| {
                let mut merge =
                    Merge { table, dir, run_id, opts, staging: &staging, seq: &seq, written: Vec::new(), open: None };
                let rows = (|| {
                    let mut rows = 0;
                    for (rel, _) in files {
                        rows += merge.copy(store.as_ref(), &commit::object(&root, rel), rt)?;
                    }
                    merge.close()?;
                    Ok(rows)
                })();
                (std::mem::take(&mut merge.written), rows)
            })
            .collect()
    });
    let written: Vec<WrittenFile> = merged.iter().flat_map(|(w, _)| w.iter().cloned()).collect();
    let mut replaces = Vec::new();
    let mut failed = None;
    for ((_, _, files), (_, rows)) in jobs.iter().zip(merged) {
        match rows {
            Ok(rows) => {
                summary.partitions += 1;
                summary.rows += rows;
                summary.files_before += files.len();
                summary.bytes_before += files.iter().map(|(_, size)| size).sum::<u64>();
                replaces.extend(files.iter().map(|(rel, _)| rel.clone()));
            }
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    if let Some(e) = failed {
        written.iter().for_each(WrittenFile::discard);
        return Err(e);
    }
    if written.is_empty() {
        return Ok(summary);
    }
    summary.files_after = written.len();
    summary.bytes_after =
        written.iter().map(|f| std::fs::metadata(super::writer::temporary_path(&f.path)).map_or(0, |m| m.len())).sum();
    let staged = dataset.stage_for_commit(&staging, &written, rt)?;
    commit::commit(dataset, &Commit { replaces, ..Commit::of(run_id, staged) }, rt)?;
    Ok(summary)
}

/// A partition's files: (path relative to the dataset root, bytes).
type PartitionFiles = Vec<(String, u64)>;

/// The files of `table` smaller than `target` bytes, by directory (one per
/// partition), each directory's files in name order: (path relative to the
/// dataset root, bytes).
fn small_files_by_partition(list: &FileList, table: &TableDef, target: u64) -> BTreeMap<String, PartitionFiles> {
    let mut by_dir: BTreeMap<String, PartitionFiles> = BTreeMap::new();
    for (rel, entry) in list.table_entries(table.name) {
        if entry.size >= target {
            continue;
        }
        let parent = rel.rsplit_once('/').map_or(String::new(), |(d, _)| d.to_string());
        by_dir.entry(parent).or_default().push((rel.clone(), entry.size));
    }
    by_dir
}

/// One partition's merge. Finished files go straight into `written`, so
/// the caller can remove them if anything fails later (in this partition or
/// another); the open one removes its own temporary file when dropped unfinished.
struct Merge<'a> {
    table: &'static TableDef,
    dir: &'a str,
    run_id: &'a str,
    opts: &'a CompactOptions,
    staging: &'a std::path::Path,
    /// The run's file counter, shared by the partitions merged in parallel.
    seq: &'a AtomicUsize,
    written: Vec<WrittenFile>,
    open: Option<OpenFile>,
}

impl Merge<'_> {
    /// Appends every row of the file at `location`; returns the rows copied.
    fn copy(&mut self, store: &dyn ObjectStore, location: &ObjectPath, rt: &tokio::runtime::Runtime) -> Result<u64> {
        let at = || Error::store_at(location.to_string());
        let bytes = rt.block_on(async { store.get(location).await?.bytes().await }).map_err(at())?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)?;
        let expected = u64::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
        let schema = self.table.schema();
        let mut copied = 0u64;
        for batch in builder.with_batch_size(64 * 1024).build()? {
            let batch = conform(&batch?, &schema, self.table, location)?;
            copied += batch.num_rows() as u64;
            let file = match self.open.take() {
                Some(file) => file,
                None => self.create()?,
            };
            let file = self.open.insert(file);
            file.write(&batch)?;
            if file.size() as u64 >= self.opts.target_bytes {
                self.close()?;
            }
        }
        if copied != expected {
            return Err(internal_err!("{location}: read {copied} rows of the {expected} its footer counts"));
        }
        Ok(copied)
    }

    /// A new output file in the partition's directory under `staging`.
    fn create(&mut self) -> Result<OpenFile> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let name = format!("part-{}-c{seq:05}.parquet", self.run_id);
        let mut dest = self.staging.to_path_buf();
        for part in self.dir.split('/').filter(|p| !p.is_empty()) {
            dest.push(part);
        }
        OpenFile::create(self.table, dest.join(name), self.opts.compression, Integers::Delta)
    }

    /// Closes the open file (still under its temporary name).
    fn close(&mut self) -> Result<()> {
        if let Some(file) = self.open.take() {
            self.written.push(file.finish()?);
        }
        Ok(())
    }
}

/// `batch` (a file written by this or an earlier tokscope) with the table's
/// current columns: missing ones (added to the catalog since) as nulls, types
/// cast. A column the catalog no longer declares is refused: merging would
/// drop it.
fn conform(batch: &RecordBatch, schema: &SchemaRef, table: &TableDef, location: &ObjectPath) -> Result<RecordBatch> {
    if batch.schema().fields() == schema.fields() {
        return Ok(batch.clone());
    }
    if let Some(extra) = batch.schema().fields().iter().find(|f| schema.field_with_name(f.name()).is_err()) {
        return Err(config_err!(
            "{location} has a column `{}` that table `{}` no longer declares; compacting it would drop that column \
             (leave the file out: move it away, or keep it with a larger --target-size than its size)",
            extra.name(),
            table.name
        ));
    }
    let columns = schema
        .fields()
        .iter()
        .map(|f| match batch.column_by_name(f.name()) {
            Some(c) if c.data_type() == f.data_type() => Ok(c.clone()),
            Some(c) => Ok(arrow::compute::cast(c, f.data_type())?),
            None => Ok(new_null_array(f.data_type(), batch.num_rows())),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}
