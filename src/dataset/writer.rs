//! Writes batches as a hive-partitioned Parquet dataset:
//! `requests/date=YYYY-MM-DD/part-<run>-<n>.parquet`, the same for `tokens`,
//! and `rejects/part-<run>-<n>.parquet`. Files are written under a hidden
//! temporary name and renamed when complete, so readers never see half a file.
//! Memory stays bounded: row groups are flushed by size, not by file, and a
//! writer given a budget flushes its largest buffered row groups when all of
//! its open partitions together hold more than the budget (see
//! [`OpenFile`]'s `held` for how a row group in progress is counted).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{RecordBatch, UInt32Array};
use arrow::compute::take_record_batch;
use parquet::arrow::{ArrowSchemaConverter, ArrowWriter};
use parquet::basic::{Compression, Encoding, Type as PhysicalType, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::{ColumnPath, SchemaDescriptor};
use tokscope_core::catalog::{ColumnFlag, Partition, TableDef, DATE_PARTITION};
use tokscope_core::reader::DatedBatch;

use crate::error::{Error, Result};

/// Rows per Parquet row group (also bounded by [`FLUSH_BYTES`]).
const ROW_GROUP_ROWS: usize = 128 * 1024;
/// A partition's buffered row group is flushed once it holds this many bytes.
const FLUSH_BYTES: usize = 64 * 1024 * 1024;

/// What a buffered row group occupies, as a multiple of arrow-rs's estimate
/// of it (`ArrowWriter::memory_size`), rounded up from the 2.3 measured once
/// its vectors' spare capacity and the allocator's pages are counted.
const BUFFER_OVERHEAD: usize = 3;

/// What each column of a row group in progress holds outside arrow-rs's
/// estimate: parquet-rs gives every column writer a codec of its own, created
/// with the row group, and its zstd codec creates a decompression context
/// (95,992 bytes in zstd 1.5.7) beside the compression context (5,280 bytes
/// until its first page) up front. A log spread over many days keeps a row
/// group in progress per day and writer: with `requests`' 39 zstd columns,
/// 3.8 MiB each. The other codecs keep no state between pages, and a column
/// written uncompressed has no codec.
fn codec_bytes_per_column(compression: Compression) -> usize {
    match compression {
        Compression::ZSTD(_) => 100 << 10,
        _ => 0,
    }
}

/// What parquet-rs's delta encoder reserves for each delta-encoded column of
/// a row group in progress: a 1 MiB buffer (`DEFAULT_BIT_WRITER_SIZE`), inside
/// arrow-rs's estimate. It is resident (peak RSS grows by about that much per
/// column and open file) but does not grow with the rows, so it is counted
/// once, not times [`BUFFER_OVERHEAD`].
fn encoder_reserve_per_column(encoding: Option<Encoding>) -> usize {
    match encoding {
        Some(Encoding::DELTA_BINARY_PACKED) => 1 << 20,
        _ => 0,
    }
}

/// Formats days since the epoch as `YYYY-MM-DD`.
pub fn date_string(day: i32) -> String {
    chrono::DateTime::from_timestamp(day as i64 * 86_400, 0)
        .map(|d| d.format("%Y-%m-%d").to_string())
        .unwrap_or_else(|| "invalid".into())
}

/// The codec of every tokscope Parquet file unless ingest is told otherwise
/// (`--compression`): zstd level 1, the fastest level, within a few percent of
/// level 3's size on logs (docs/PERFORMANCE.md).
pub fn default_compression() -> Compression {
    Compression::ZSTD(ZstdLevel::default())
}

/// The names `--compression` takes, for help and errors.
pub const COMPRESSION_NAMES: &str = "zstd(N) with N from 1 to 22 (`zstd` is zstd(1)), lz4, snappy or none";

/// Parses a codec name: `zstd(N)`, `zstd`, `lz4` (Parquet's LZ4_RAW, the one
/// every current reader takes), `snappy`, `none`.
pub fn parse_compression(name: &str) -> Result<Compression> {
    let lower = name.trim().to_ascii_lowercase();
    let unknown = || config_err!("unknown compression {name:?}: use {COMPRESSION_NAMES}");
    Ok(match lower.as_str() {
        "none" | "uncompressed" => Compression::UNCOMPRESSED,
        "snappy" => Compression::SNAPPY,
        "lz4" | "lz4_raw" => Compression::LZ4_RAW,
        "zstd" => default_compression(),
        _ => {
            let level = lower.strip_prefix("zstd(").and_then(|r| r.strip_suffix(')')).ok_or_else(unknown)?;
            let level: i32 = level.trim().parse().map_err(|_| unknown())?;
            Compression::ZSTD(ZstdLevel::try_new(level).map_err(|_| unknown())?)
        }
    })
}

/// How a file's integer columns without a dictionary are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Integers {
    /// PLAIN, for writers that keep many files open at once (ingest: a file
    /// per day and writer thread).
    Plain,
    /// DELTA_BINARY_PACKED, for files written one at a time (compaction, a
    /// command's own table): as small as plain values under the codec and a
    /// quarter of the instructions to read, but parquet-rs's encoder holds a
    /// 1 MiB buffer per column while a row group is open (see
    /// [`encoder_reserve_per_column`]): over 90 open days, 2.7 GiB where
    /// plain ingest peaks at 0.64 GiB (docs/performance-history.md, "Integers
    /// delta-encoded by compaction, plain at ingest").
    Delta,
}

/// Writer properties of every tokscope Parquet file: `compression`, bounded
/// row groups, and the catalog's per-column hints: dictionaries only where a
/// column has few distinct values (a dictionary attempt on nearly unique
/// values fails and falls back after doing the work: about a tenth of ingest
/// time when it was on everywhere), no statistics on long text, no codec on
/// floating-point values with full mantissas; and the other integers as
/// `integers` says. `leaves` is the table's Parquet schema, whose leaf
/// columns the last two name.
pub fn writer_props(
    table: &TableDef,
    leaves: &SchemaDescriptor,
    compression: Compression,
    integers: Integers,
) -> WriterProperties {
    let mut b = WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_dictionary_enabled(false)
        .set_created_by(format!("tokscope {}", env!("CARGO_PKG_VERSION")));
    for col in table.columns {
        if col.has(ColumnFlag::Dictionary) {
            b = b.set_column_dictionary_enabled(ColumnPath::from(col.name), true);
        }
        if col.has(ColumnFlag::NoStatistics) {
            b = b.set_column_statistics_enabled(ColumnPath::from(col.name), EnabledStatistics::None);
        }
    }
    for leaf in leaves.columns() {
        let root = leaf.path().parts().first().map(String::as_str);
        let flagged = |flag| table.columns.iter().any(|c| Some(c.name) == root && c.has(flag));
        match leaf.physical_type() {
            PhysicalType::DOUBLE | PhysicalType::FLOAT if flagged(ColumnFlag::Incompressible) => {
                b = b.set_column_compression(leaf.path().clone(), Compression::UNCOMPRESSED);
            }
            PhysicalType::INT32 | PhysicalType::INT64
                if integers == Integers::Delta && !flagged(ColumnFlag::Dictionary) =>
            {
                b = b.set_column_encoding(leaf.path().clone(), Encoding::DELTA_BINARY_PACKED);
            }
            _ => {}
        }
    }
    b.build()
}

/// The hidden temporary name of `dest` while it is being written
/// (`dir/x.parquet` -> `dir/.x.parquet.tmp`; see `dataset::commit`).
pub fn temporary_path(dest: &Path) -> PathBuf {
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    dest.with_file_name(format!(".{name}.tmp"))
}

/// A file a writer finished, still under its temporary name: the final path
/// it gets at the commit, and the rows it holds (from the footer the writer
/// wrote, so the commit need not read it back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenFile {
    /// Final path (the temporary file is [`temporary_path`] of it).
    pub path: PathBuf,
    /// Rows in the file.
    pub rows: u64,
}

impl WrittenFile {
    /// Removes the temporary file (a run that fails after finishing it).
    pub fn discard(&self) {
        let _ = std::fs::remove_file(temporary_path(&self.path));
    }
}

/// A Parquet file being written under its temporary name. Dropped before it
/// is finished (an error anywhere in the run), it removes its temporary file:
/// a failed run leaves no part behind (a killed one does; the next run's
/// recovery removes those, under the lease).
pub struct OpenFile {
    /// `None` once closed.
    writer: Option<ArrowWriter<File>>,
    tmp: PathBuf,
    dest: PathBuf,
    /// The codec state of a row group in progress (see [`codec_bytes_per_column`]).
    codec_state: usize,
    /// The encoders' reserved buffers of a row group in progress, inside
    /// arrow-rs's estimate (see [`encoder_reserve_per_column`]).
    encoder_reserve: usize,
    /// Memory of the buffered row group after the last write or flush:
    /// arrow-rs's estimate, less `encoder_reserve`, times [`BUFFER_OVERHEAD`],
    /// plus `encoder_reserve` and `codec_state` while a row group is in
    /// progress; kept so a writer sums its files without asking every column
    /// of every file again.
    held: usize,
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        if let Some(writer) = self.writer.take() {
            drop(writer);
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

impl OpenFile {
    /// Opens `.<name>.tmp` beside `dest`.
    pub fn create(table: &TableDef, dest: PathBuf, compression: Compression, integers: Integers) -> Result<Self> {
        let dir = dest.parent().ok_or_else(|| internal_err!("{} has no parent directory", dest.display()))?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display(), e))?;
        let tmp = temporary_path(&dest);
        let file = File::create(&tmp).map_err(|e| Error::Write {
            path: tmp.display().to_string(),
            source: parquet::errors::ParquetError::External(Box::new(e)),
        })?;
        let schema = table.schema();
        let leaves = ArrowSchemaConverter::new().convert(&schema)?;
        let props = writer_props(table, &leaves, compression, integers);
        let leaf_paths = || leaves.columns().iter().map(|leaf| leaf.path());
        let codec_state = leaf_paths().map(|path| codec_bytes_per_column(props.compression(path))).sum();
        let encoder_reserve = leaf_paths().map(|path| encoder_reserve_per_column(props.encoding(path))).sum();
        let writer = ArrowWriter::try_new(file, schema, Some(props))?;
        Ok(OpenFile { writer: Some(writer), tmp, dest, codec_state, encoder_reserve, held: 0 })
    }

    /// What `writer` holds now (see `held`).
    fn holds(writer: &ArrowWriter<File>, codec_state: usize, encoder_reserve: usize) -> usize {
        let (reserve, codec) = if writer.in_progress_rows() > 0 { (encoder_reserve, codec_state) } else { (0, 0) };
        BUFFER_OVERHEAD * writer.memory_size().saturating_sub(reserve) + reserve + codec
    }

    fn failed(&self) -> impl FnOnce(parquet::errors::ParquetError) -> Error + '_ {
        |source| Error::Write { path: self.tmp.display().to_string(), source }
    }

    /// Appends `batch`, flushing a row group when the buffered one is large.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let Some(writer) = self.writer.as_mut() else { return Err(internal_err!("write after close")) };
        let result =
            writer.write(batch).and_then(
                |()| {
                    if writer.in_progress_size() > FLUSH_BYTES {
                        writer.flush()
                    } else {
                        Ok(())
                    }
                },
            );
        self.held = Self::holds(writer, self.codec_state, self.encoder_reserve);
        result.map_err(self.failed())
    }

    /// Writes the buffered row group out, freeing its buffers.
    fn flush(&mut self) -> Result<()> {
        let Some(writer) = self.writer.as_mut() else { return Err(internal_err!("flush after close")) };
        let result = writer.flush();
        self.held = Self::holds(writer, self.codec_state, self.encoder_reserve);
        result.map_err(self.failed())
    }

    /// Bytes written so far plus the buffered row group's estimate: about
    /// the file's size if it were closed now.
    pub fn size(&self) -> usize {
        self.writer.as_ref().map_or(0, |w| w.bytes_written() + w.in_progress_size())
    }

    /// Finishes the file under its temporary name; returns its final path
    /// (`dataset::commit` gives it that name) and its row count.
    pub fn finish(mut self) -> Result<WrittenFile> {
        let Some(writer) = self.writer.take() else { return Err(internal_err!("closed twice")) };
        let rows = match writer.close() {
            Ok(metadata) => metadata.file_metadata().num_rows(),
            Err(e) => {
                let _ = std::fs::remove_file(&self.tmp);
                return Err(self.failed()(e));
            }
        };
        let rows = u64::try_from(rows).map_err(|_| internal_err!("{} has {rows} rows", self.tmp.display()))?;
        Ok(WrittenFile { path: std::mem::take(&mut self.dest), rows })
    }
}

/// One table's open files, one per partition value.
struct TableWriter {
    table: &'static TableDef,
    dir: PathBuf,
    open: BTreeMap<i32, OpenFile>,
}

impl TableWriter {
    fn file_for(&mut self, day: i32, run: &RunSettings, seq: &mut usize) -> Result<&mut OpenFile> {
        if !self.open.contains_key(&day) {
            let dir = match self.table.partition {
                Partition::Date => self.dir.join(format!("{DATE_PARTITION}={}", date_string(day))),
                Partition::None => self.dir.clone(),
            };
            *seq += 1;
            let dest = dir.join(format!("part-{}-{seq:05}.parquet", run.run_id));
            self.open.insert(day, OpenFile::create(self.table, dest, run.compression, Integers::Plain)?);
        }
        self.open.get_mut(&day).ok_or_else(|| internal_err!("partition writer vanished"))
    }

    fn write(&mut self, dated: DatedBatch, run: &RunSettings, seq: &mut usize) -> Result<()> {
        let DatedBatch { batch, days } = dated;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let first = days.first().copied().unwrap_or(0);
        if self.table.partition == Partition::None || days.iter().all(|&d| d == first) {
            return self.write_to(first, &batch, run, seq);
        }
        let mut groups: BTreeMap<i32, Vec<u32>> = BTreeMap::new();
        for (i, d) in days.iter().enumerate() {
            groups.entry(*d).or_default().push(i as u32);
        }
        for (day, idx) in groups {
            let part = take_record_batch(&batch, &UInt32Array::from(idx))?;
            self.write_to(day, &part, run, seq)?;
        }
        Ok(())
    }

    fn write_to(&mut self, day: i32, batch: &RecordBatch, run: &RunSettings, seq: &mut usize) -> Result<()> {
        self.file_for(day, run, seq)?.write(batch)
    }

    fn finish(self) -> Result<Vec<WrittenFile>> {
        self.open.into_values().map(OpenFile::finish).collect()
    }
}

/// What every file of one run shares: the run id in its name and its codec.
struct RunSettings {
    run_id: String,
    compression: Compression,
}

/// Writes the tables of one ingest run under a local dataset root.
pub struct DatasetWriter {
    root: PathBuf,
    run: RunSettings,
    seq: usize,
    tables: BTreeMap<&'static str, TableWriter>,
    /// Most bytes the buffered row groups of all open files may hold (as
    /// `OpenFile` counts them); 0: no limit.
    budget: usize,
}

impl DatasetWriter {
    /// A writer for `root`; `run_id` makes this run's file names unique.
    /// `budget` bounds the memory of the row groups buffered in all its open
    /// files together, their codec state included (0: only each file's own
    /// [`FLUSH_BYTES`]).
    pub fn new(root: &Path, run_id: &str, compression: Compression, budget: usize) -> Self {
        let run = RunSettings { run_id: run_id.to_string(), compression };
        Self { root: root.to_path_buf(), run, seq: 0, tables: BTreeMap::new(), budget }
    }

    /// Appends rows of `table`.
    pub fn write(&mut self, table: &'static TableDef, batch: DatedBatch) -> Result<()> {
        let root = &self.root;
        let writer = self.tables.entry(table.name).or_insert_with(|| TableWriter {
            table,
            dir: root.join(table.name),
            open: BTreeMap::new(),
        });
        writer.write(batch, &self.run, &mut self.seq)?;
        self.hold_budget()
    }

    /// Over the budget, flushes the largest buffered row groups until what
    /// stays buffered fits half of it (a log spread over many days keeps a
    /// file open per day, each with its own row group in memory).
    fn hold_budget(&mut self) -> Result<()> {
        if self.budget == 0 {
            return Ok(());
        }
        let files =
            || self.tables.iter().flat_map(|(name, t)| t.open.iter().map(move |(day, f)| (f.held, *name, *day)));
        let mut total: usize = files().map(|h| h.0).sum();
        if total <= self.budget {
            return Ok(());
        }
        let mut held: Vec<(usize, &'static str, i32)> = files().collect();
        held.sort_unstable_by_key(|h| std::cmp::Reverse(h.0));
        for (size, name, day) in held {
            if total <= self.budget / 2 {
                break;
            }
            let file = self.tables.get_mut(name).and_then(|t| t.open.get_mut(&day));
            file.ok_or_else(|| internal_err!("partition writer vanished"))?.flush()?;
            total -= size;
        }
        Ok(())
    }

    /// Closes every file, still under its temporary name (the commit gives
    /// it its final one: `dataset::commit`).
    pub fn finish(self) -> Result<Vec<WrittenFile>> {
        let mut files = Vec::new();
        for (_, t) in self.tables {
            files.extend(t.finish()?);
        }
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use parquet::basic::{Compression, ZstdLevel};

    use super::parse_compression;

    #[test]
    fn compression_names() {
        let zstd = |n| Compression::ZSTD(ZstdLevel::try_new(n).unwrap());
        assert_eq!(parse_compression("zstd").unwrap(), zstd(1));
        assert_eq!(parse_compression("ZSTD(3)").unwrap(), zstd(3));
        assert_eq!(parse_compression(" zstd( 22 ) ").unwrap(), zstd(22));
        assert_eq!(parse_compression("lz4").unwrap(), Compression::LZ4_RAW);
        assert_eq!(parse_compression("snappy").unwrap(), Compression::SNAPPY);
        assert_eq!(parse_compression("none").unwrap(), Compression::UNCOMPRESSED);
        for bad in ["zstd(0)", "zstd(23)", "zstd(x)", "zstd(", "gzip", ""] {
            let e = parse_compression(bad).unwrap_err().to_string();
            assert!(e.contains("zstd(N)") && e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
    }
}
