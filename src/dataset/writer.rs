//! Writes batches as a hive-partitioned Parquet dataset:
//! `requests/date=YYYY-MM-DD/part-<run>-<n>.parquet`, the same for `tokens`,
//! and `rejects/part-<run>-<n>.parquet`. Files are written under a hidden
//! temporary name and renamed when complete, so readers never see half a file.
//! Ingest decides where its row groups end (`ingest::partitions`) and hands
//! each to one writer thread's [`DatasetWriter`], which appends it to that
//! thread's file for the partition: a row group is encoded only while it is
//! written, so an open file holds no codec or page buffers between groups.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{RecordBatch, UInt32Array};
use arrow::compute::take_record_batch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_writer::{compute_leaves, ArrowColumnWriter, ArrowRowGroupWriterFactory};
use parquet::arrow::{ArrowSchemaConverter, ArrowWriter};
use parquet::basic::{Compression, Encoding, Type as PhysicalType, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{ColumnPath, SchemaDescriptor};
use tokscope_core::catalog::{ColumnFlag, Partition, TableCodec, TableDef, DATE_PARTITION};
use tokscope_core::reader::DatedBatch;

use crate::error::{Error, Result};

/// Rows per Parquet row group (also bounded by [`FLUSH_BYTES`]). Ingest
/// cuts its own at the same count, a partition's last one at up to one and
/// a half as many (`ingest::budget::MAX_GROUP_ROWS`:
/// [`DatasetWriter::with_max_group_rows`]).
const ROW_GROUP_ROWS: usize = 128 * 1024;
/// A file written with [`OpenFile::write`] flushes its row group once it
/// holds this many bytes.
const FLUSH_BYTES: usize = 64 * 1024 * 1024;

/// Files a [`DatasetWriter`] keeps open at once (all of them together, over
/// every writer thread: each thread gets its share); the least recently
/// used is finished when another is needed. Keeps ingest of a log over
/// hundreds of days under the usual limit of 1,024 open descriptors.
pub const MAX_OPEN_FILES: usize = 512;

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
    /// PLAIN, for ingest's files.
    Plain,
    /// DELTA_BINARY_PACKED, for files written one at a time (compaction, a
    /// command's own table): as small as plain values under the codec and a
    /// quarter of the instructions to read; parquet-rs's encoder holds a
    /// 1 MiB buffer per column while a row group is open.
    Delta,
}

/// Writer properties of every tokscope Parquet file: `compression` (none
/// for a table whose [`TableCodec`] says so), row
/// groups of at most `max_group_rows`, and the catalog's per-column hints: dictionaries only where a
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
    max_group_rows: usize,
) -> WriterProperties {
    let compression = match table.codec {
        TableCodec::Given => compression,
        TableCodec::None => Compression::UNCOMPRESSED,
    };
    let mut b = WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(Some(max_group_rows))
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
///
/// It drives parquet-rs's column writers itself (what `ArrowWriter` does
/// inside), so that a row group in progress can also be dropped unwritten
/// ([`OpenFile::discard_row_group`]).
pub struct OpenFile {
    /// `None` once closed.
    writer: Option<SerializedFileWriter<File>>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    /// The row group in progress: one writer per leaf column.
    group: Option<GroupInProgress>,
    max_group_rows: usize,
    tmp: PathBuf,
    dest: PathBuf,
}

/// The column writers of a row group being written, and its rows so far.
struct GroupInProgress {
    columns: Vec<ArrowColumnWriter>,
    rows: usize,
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
    /// Opens `.<name>.tmp` beside `dest`, for row groups of at most [`ROW_GROUP_ROWS`].
    pub fn create(table: &TableDef, dest: PathBuf, compression: Compression, integers: Integers) -> Result<Self> {
        Self::create_with(table, dest, compression, integers, ROW_GROUP_ROWS)
    }

    /// [`OpenFile::create`], for row groups of at most `max_group_rows`.
    pub fn create_with(
        table: &TableDef,
        dest: PathBuf,
        compression: Compression,
        integers: Integers,
        max_group_rows: usize,
    ) -> Result<Self> {
        let dir = dest.parent().ok_or_else(|| internal_err!("{} has no parent directory", dest.display()))?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display(), e))?;
        let tmp = temporary_path(&dest);
        let file = File::create(&tmp).map_err(|e| Error::Write {
            path: tmp.display().to_string(),
            source: ParquetError::External(Box::new(e)),
        })?;
        let schema = table.schema();
        let leaves = ArrowSchemaConverter::new().convert(&schema)?;
        let props = writer_props(table, &leaves, compression, integers, max_group_rows);
        // `ArrowWriter` sets the file up (the Parquet schema, and the Arrow
        // schema in the footer's metadata); its parts write the row groups.
        let (writer, factory) = ArrowWriter::try_new(file, schema.clone(), Some(props))?.into_serialized_writer()?;
        let max_group_rows = max_group_rows.max(1);
        Ok(OpenFile { writer: Some(writer), factory, schema, group: None, max_group_rows, tmp, dest })
    }

    fn failed(&self) -> impl FnOnce(ParquetError) -> Error + '_ {
        |source| Error::Write { path: self.tmp.display().to_string(), source }
    }

    /// Appends `batch`, flushing a row group when the buffered one is large.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.append(batch)?;
        if self.in_progress_size() > FLUSH_BYTES {
            self.end_row_group()?;
        }
        Ok(())
    }

    /// Appends `batch` to the row group in progress (a new one after
    /// the file's most rows per group), whatever its size.
    pub fn append(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut rest = batch.clone();
        while rest.num_rows() > 0 {
            let n = (self.max_group_rows - self.rows_in_progress()).min(rest.num_rows());
            let part = rest.slice(0, n);
            rest = rest.slice(n, rest.num_rows() - n);
            self.encode(&part).map_err(self.failed())?;
            if self.rows_in_progress() >= self.max_group_rows {
                self.end_row_group()?;
            }
        }
        Ok(())
    }

    /// Encodes `batch` into the row group in progress (opened if none is).
    fn encode(&mut self, batch: &RecordBatch) -> parquet::errors::Result<()> {
        let Some(writer) = self.writer.as_ref() else { return Err(ParquetError::General("write after close".into())) };
        let group = match &mut self.group {
            Some(group) => group,
            none => none.insert(GroupInProgress {
                columns: self.factory.create_column_writers(writer.flushed_row_groups().len())?,
                rows: 0,
            }),
        };
        let mut columns = group.columns.iter_mut();
        for (field, array) in self.schema.fields().iter().zip(batch.columns()) {
            for leaf in compute_leaves(field, array)? {
                let column = columns.next().ok_or_else(|| ParquetError::General("more leaves than columns".into()))?;
                column.write(&leaf)?;
            }
        }
        group.rows += batch.num_rows();
        Ok(())
    }

    /// Writes the row group in progress out, freeing its buffers and codecs.
    pub fn end_row_group(&mut self) -> Result<()> {
        let result = self.write_group();
        result.map_err(self.failed())
    }

    /// Drops the row group in progress unwritten (its rows will be written
    /// elsewhere).
    pub fn discard_row_group(&mut self) {
        self.group = None;
    }

    fn write_group(&mut self) -> parquet::errors::Result<()> {
        let Some(group) = self.group.take() else { return Ok(()) };
        let Some(writer) = self.writer.as_mut() else { return Err(ParquetError::General("flush after close".into())) };
        let mut row_group = writer.next_row_group()?;
        for column in group.columns {
            column.close()?.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
        Ok(())
    }

    /// Rows of the row group in progress.
    pub fn rows_in_progress(&self) -> usize {
        self.group.as_ref().map_or(0, |g| g.rows)
    }

    /// The encoded size the row group in progress is expected to have.
    fn in_progress_size(&self) -> usize {
        self.group.as_ref().map_or(0, |g| g.columns.iter().map(ArrowColumnWriter::get_estimated_total_bytes).sum())
    }

    /// Bytes written so far plus the buffered row group's estimate: about
    /// the file's size if it were closed now.
    pub fn size(&self) -> usize {
        self.writer.as_ref().map_or(0, |w| w.bytes_written() + self.in_progress_size())
    }

    /// Finishes the file under its temporary name; returns its final path
    /// (`dataset::commit` gives it that name) and its row count.
    pub fn finish(mut self) -> Result<WrittenFile> {
        let closed = self.write_group().and_then(|()| match self.writer.take() {
            Some(writer) => writer.close(),
            None => Err(ParquetError::General("closed twice".into())),
        });
        let rows = match closed {
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

/// The files one writer thread has open, one per table and partition (the
/// least recently used finished when more than its share of
/// [`MAX_OPEN_FILES`] would be open), and the ones it finished.
pub struct DatasetWriter {
    root: PathBuf,
    run_id: String,
    compression: Compression,
    seq: usize,
    max_open: usize,
    max_group_rows: usize,
    /// Open files by (table, partition), with when each was last used.
    open: BTreeMap<(&'static str, i32), (u64, OpenFile)>,
    clock: u64,
    finished: Vec<WrittenFile>,
}

impl DatasetWriter {
    /// A writer for `root`; `run_id` makes this run's file names unique.
    /// `max_open` files are open at most (at least one).
    pub fn new(root: &Path, run_id: &str, compression: Compression, max_open: usize) -> Self {
        Self {
            root: root.to_path_buf(),
            run_id: run_id.to_string(),
            compression,
            seq: 0,
            max_open: max_open.max(1),
            max_group_rows: ROW_GROUP_ROWS,
            open: BTreeMap::new(),
            clock: 0,
            finished: Vec::new(),
        }
    }

    /// Files whose row groups may hold up to `rows` rows (ingest, which cuts
    /// its own row groups).
    pub fn with_max_group_rows(mut self, rows: usize) -> Self {
        self.max_group_rows = rows;
        self
    }

    /// The open file of `table`'s partition `day` (days since the epoch;
    /// ignored for a table without partitions), opened if needed.
    pub fn file(&mut self, table: &'static TableDef, day: i32) -> Result<&mut OpenFile> {
        let day = if table.partition == Partition::None { 0 } else { day };
        let key = (table.name, day);
        self.clock += 1;
        if !self.open.contains_key(&key) {
            if self.open.len() >= self.max_open {
                // The least recently used file, unless it has a row group in
                // progress (closing it would cut that group short).
                let oldest = self
                    .open
                    .iter()
                    .min_by_key(|(_, (used, file))| (file.rows_in_progress() > 0, *used))
                    .map(|(k, _)| *k);
                if let Some((_, file)) = oldest.and_then(|k| self.open.remove(&k)) {
                    self.close(file)?;
                }
            }
            let dir = match table.partition {
                Partition::Date => self.root.join(table.name).join(format!("{DATE_PARTITION}={}", date_string(day))),
                Partition::None => self.root.join(table.name),
            };
            self.seq += 1;
            let dest = dir.join(format!("part-{}-{:05}.parquet", self.run_id, self.seq));
            let file = OpenFile::create_with(table, dest, self.compression, Integers::Plain, self.max_group_rows)?;
            self.open.insert(key, (self.clock, file));
        }
        let (used, file) = self.open.get_mut(&key).ok_or_else(|| internal_err!("partition writer vanished"))?;
        *used = self.clock;
        Ok(file)
    }

    /// Appends rows of `table`, each to its day's file (`dated.days`), in
    /// row groups of [`ROW_GROUP_ROWS`].
    pub fn write(&mut self, table: &'static TableDef, dated: DatedBatch) -> Result<()> {
        let DatedBatch { batch, days } = dated;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let first = days.first().copied().unwrap_or(0);
        if table.partition == Partition::None || days.iter().all(|&d| d == first) {
            return self.file(table, first)?.write(&batch);
        }
        for (day, part) in split_by_day(&batch, &days)? {
            self.file(table, day)?.write(&part)?;
        }
        Ok(())
    }

    /// Closes every file, still under its temporary name (the commit gives
    /// it its final one: `dataset::commit`).
    pub fn finish(mut self) -> Result<Vec<WrittenFile>> {
        for (_, (_, file)) in std::mem::take(&mut self.open) {
            self.close(file)?;
        }
        Ok(std::mem::take(&mut self.finished))
    }

    /// Finishes `file`; one left without rows (its only row group
    /// discarded) is removed instead of kept.
    fn close(&mut self, file: OpenFile) -> Result<()> {
        let written = file.finish()?;
        if written.rows == 0 {
            written.discard();
        } else {
            self.finished.push(written);
        }
        Ok(())
    }
}

/// The rows of `batch` grouped by their day (`days`, one per row), in
/// order of day, each group in input order.
pub fn split_by_day(batch: &RecordBatch, days: &[i32]) -> Result<Vec<(i32, RecordBatch)>> {
    if days.len() != batch.num_rows() {
        return Err(internal_err!("a batch of {} rows with {} days", batch.num_rows(), days.len()));
    }
    let mut groups: BTreeMap<i32, Vec<u32>> = BTreeMap::new();
    for (i, d) in days.iter().enumerate() {
        groups.entry(*d).or_default().push(i as u32);
    }
    if groups.len() == 1 {
        return Ok(groups.into_keys().map(|day| (day, batch.clone())).collect());
    }
    groups.into_iter().map(|(day, idx)| Ok((day, take_record_batch(batch, &UInt32Array::from(idx))?))).collect()
}

#[cfg(test)]
mod tests {
    use arrow::array::RecordBatch;
    use arrow::compute::concat_batches;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::basic::{Compression, ZstdLevel};
    use tokscope_core::catalog::requests::RequestsBuilder;
    use tokscope_core::catalog::DATE_PARTITION;
    use tokscope_core::reader::{DatedBatch, ReaderBuilder};

    use super::{default_compression, parse_compression, temporary_path, DatasetWriter, Integers, OpenFile};
    use crate::generate::{generate, GenOptions};

    /// The `requests` rows of 3,000 generated requests, as one batch.
    fn generated_requests() -> RecordBatch {
        let mut log = Vec::new();
        generate(&GenOptions { requests: 3_000, output_chars: 200, ..Default::default() }, &mut log).unwrap();
        let mut batches = Vec::new();
        for slices in ReaderBuilder::new().build(std::io::Cursor::new(log), "generated.jsonl") {
            for slice in slices.unwrap() {
                batches.extend(slice.batch(&RequestsBuilder::DEF).cloned());
            }
        }
        concat_batches(&batches[0].schema(), &batches).unwrap()
    }

    /// A row group dropped unwritten leaves the groups before and after it
    /// whole; a file whose only group was dropped is removed, not kept.
    #[test]
    fn a_discarded_row_group_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let rows = generated_requests();
        let table = &RequestsBuilder::DEF;
        let dest = dir.path().join("part.parquet");
        let mut file = OpenFile::create(table, dest, default_compression(), Integers::Plain).unwrap();
        file.append(&rows.slice(0, 1000)).unwrap();
        file.end_row_group().unwrap();
        file.append(&rows.slice(1000, 500)).unwrap();
        assert_eq!(file.rows_in_progress(), 500);
        file.discard_row_group();
        assert_eq!(file.rows_in_progress(), 0);
        file.append(&rows.slice(1500, 1500)).unwrap();
        let written = file.finish().unwrap();
        assert_eq!(written.rows, 2500);
        let bytes = bytes::Bytes::from(std::fs::read(temporary_path(&written.path)).unwrap());
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap();
        let groups: Vec<i64> = reader.metadata().row_groups().iter().map(|g| g.num_rows()).collect();
        assert_eq!(groups, [1000, 1500]);
        let back: Vec<RecordBatch> = reader.build().unwrap().map(Result::unwrap).collect();
        let expected = concat_batches(&rows.schema(), &[rows.slice(0, 1000), rows.slice(1500, 1500)]).unwrap();
        assert_eq!(concat_batches(&rows.schema(), &back).unwrap(), expected);

        let root = dir.path().join("dataset");
        let mut writer = DatasetWriter::new(&root, "run", default_compression(), 4);
        let day = 20_000;
        writer.file(table, day).unwrap().append(&rows.slice(0, 10)).unwrap();
        writer.file(table, day).unwrap().discard_row_group();
        writer.write(table, DatedBatch { batch: rows.slice(10, 5), days: vec![day + 1; 5] }).unwrap();
        let files = writer.finish().unwrap();
        assert_eq!(files.len(), 1, "{files:?}");
        assert_eq!(files[0].rows, 5);
        assert!(temporary_path(&files[0].path).exists());
        let dropped = root.join(table.name).join(format!("{DATE_PARTITION}={}", super::date_string(day)));
        let left: Vec<_> = std::fs::read_dir(&dropped).unwrap().map(|e| e.unwrap().path()).collect();
        assert!(left.is_empty(), "the file of the dropped group is left: {left:?}");
    }

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
