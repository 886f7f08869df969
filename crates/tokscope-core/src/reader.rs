//! Lines in, Arrow batches out: the reader behind `tokscope ingest`, usable
//! on its own (like arrow-json's `ReaderBuilder`).
//!
//! A thread splits the input into chunks of whole lines ([`crate::lines`]);
//! each chunk is parsed in parallel with rayon, one slice of lines per task,
//! into `requests`, `tokens` and `rejects` batches ([`crate::catalog`]).
//! Every data line is ingested (as one row, or several) or rejected, and
//! blank and header lines are counted apart, so the counts reconcile:
//! `lines_read = lines_ingested + lines_rejected`.
//!
//! ```
//! use tokscope_core::reader::ReaderBuilder;
//! let log = br#"{"ts":"2024-06-01T00:00:00Z","model":"m","prompt_tokens":3,"completion_tokens":2}
//! not json
//! "#;
//! let mut reader = ReaderBuilder::new().build(std::io::Cursor::new(log.to_vec()), "log.jsonl");
//! let mut counts = tokscope_core::reader::LineCounts::default();
//! for slices in &mut reader {
//!     for slice in slices? {
//!         counts.add(&slice.counts);
//!     }
//! }
//! assert_eq!((counts.lines_read, counts.rows_written, counts.lines_rejected), (2, 1, 1));
//! # Ok::<(), tokscope_core::Error>(())
//! ```

use std::io::Read;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;

use arrow_array::RecordBatch;
use rayon::prelude::*;
use serde::Serialize;

use crate::catalog::rejects::{RejectsBuilder, REJECT_SNIPPET_BYTES};
use crate::catalog::requests::RequestsBuilder;
use crate::catalog::tokens::TokensBuilder;
use crate::catalog::TableDef;
use crate::derive::{derive_request, DeriveSettings};
use crate::error::Result;
use crate::formats::{Format, LineContext, Parsed, Row};
use crate::lines::{LineChunk, LineSplitter};
use crate::record::{LineOrigin, RequestRecord};

/// How many of a file's first non-blank lines are tried for format detection.
pub const DETECT_LINES: usize = 32;

/// A batch plus the `date` partition (days since the epoch) of each row;
/// `days` is empty for tables without partitions.
pub struct DatedBatch {
    /// The rows.
    pub batch: RecordBatch,
    /// Partition day per row.
    pub days: Vec<i32>,
}

/// Line accounting of an input or a part of it. Every data line is either
/// ingested or rejected: `lines_read = lines_ingested + lines_rejected`.
/// Most formats make one request of a line (`rows_written = lines_ingested`);
/// some make several, or none, of one line.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct LineCounts {
    /// Data lines read (blank lines and headers excluded).
    pub lines_read: u64,
    /// Data lines that parsed (whatever number of rows each gave).
    pub lines_ingested: u64,
    /// Requests written.
    pub rows_written: u64,
    /// Lines rejected.
    pub lines_rejected: u64,
    /// Blank lines and header lines, which carry no request.
    pub lines_skipped: u64,
    /// Records inside ingested lines that are not rows (spans that are not
    /// model calls): skipped and counted, not rejected.
    pub records_skipped: u64,
    /// Token rows written.
    pub tokens_written: u64,
}

impl LineCounts {
    /// Adds `other` to these counts.
    pub fn add(&mut self, other: &LineCounts) {
        self.lines_read += other.lines_read;
        self.lines_ingested += other.lines_ingested;
        self.rows_written += other.rows_written;
        self.lines_rejected += other.lines_rejected;
        self.lines_skipped += other.lines_skipped;
        self.records_skipped += other.records_skipped;
        self.tokens_written += other.tokens_written;
    }

    /// True when every line read was ingested or rejected.
    pub fn reconciles(&self) -> bool {
        self.lines_read == self.lines_ingested + self.lines_rejected
    }
}

/// What one slice of lines became.
pub struct ParsedSlice {
    /// `requests` rows, if any.
    pub requests: Option<DatedBatch>,
    /// `tokens` rows, if any.
    pub tokens: Option<DatedBatch>,
    /// `rejects` rows, if any.
    pub rejects: Option<RecordBatch>,
    /// The slice's line accounting.
    pub counts: LineCounts,
    /// Bytes of the slice's lines (for progress reporting).
    pub bytes: u64,
}

impl ParsedSlice {
    /// The slice's batches with the table each belongs to.
    pub fn into_batches(self) -> impl Iterator<Item = (&'static TableDef, DatedBatch)> {
        let rejects = self.rejects.map(|batch| DatedBatch { batch, days: Vec::new() });
        [(&RequestsBuilder::DEF, self.requests), (&TokensBuilder::DEF, self.tokens), (&RejectsBuilder::DEF, rejects)]
            .into_iter()
            .filter_map(|(table, batch)| Some((table, batch?)))
    }
}

/// Configures a [`Reader`].
#[derive(Debug, Clone)]
pub struct ReaderBuilder {
    format: Option<Format>,
    settings: DeriveSettings,
    default_model: Option<String>,
    base_time_micros: i64,
    chunk_bytes: usize,
    max_line_bytes: usize,
}

impl Default for ReaderBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl ReaderBuilder {
    /// Defaults: format detected from the first lines, default bins, markers
    /// and no redaction, 4 MiB chunks, lines up to 64 MiB.
    pub fn new() -> Self {
        ReaderBuilder {
            format: None,
            settings: DeriveSettings::default(),
            default_model: None,
            base_time_micros: 0,
            chunk_bytes: 4 << 20,
            max_line_bytes: 64 << 20,
        }
    }

    /// Forces a format (`None`: detect it from the first lines).
    pub fn with_format(mut self, format: Option<Format>) -> Self {
        self.format = format;
        self
    }

    /// Bins, EOS markers and redaction.
    pub fn with_derive_settings(mut self, settings: DeriveSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Model name for formats that log none; default `<format>:<file stem>`.
    pub fn with_default_model(mut self, model: Option<String>) -> Self {
        self.default_model = model;
        self
    }

    /// Start of traces with relative timestamps (Mooncake), microseconds since the epoch.
    pub fn with_base_time_micros(mut self, micros: i64) -> Self {
        self.base_time_micros = micros;
        self
    }

    /// Target bytes per parsed chunk.
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = bytes;
        self
    }

    /// Longer lines are rejected without being held in memory.
    pub fn with_max_line_bytes(mut self, bytes: usize) -> Self {
        self.max_line_bytes = bytes;
        self
    }

    /// A reader over `input` (already decompressed), named `location` in
    /// `source_file` and `rejects`. The splitting runs on its own thread.
    pub fn build<R: Read + Send + 'static>(self, input: R, location: &str) -> Reader {
        let (tx, chunks) = sync_channel::<LineChunk>(2);
        let (chunk_bytes, max_line) = (self.chunk_bytes, self.max_line_bytes);
        let splitter = std::thread::spawn(move || -> u64 {
            let mut split = LineSplitter::new(input, chunk_bytes, max_line, REJECT_SNIPPET_BYTES);
            while let Some(chunk) = split.next_chunk() {
                if tx.send(chunk).is_err() {
                    break;
                }
            }
            split.bytes_read()
        });
        Reader { config: self, location: location.to_string(), chunks, splitter: Some(splitter) }
    }
}

/// Parses an input chunk by chunk; each item holds the chunk's slices in
/// input order. See [`ReaderBuilder`].
pub struct Reader {
    config: ReaderBuilder,
    location: String,
    chunks: Receiver<LineChunk>,
    splitter: Option<JoinHandle<u64>>,
}

impl Reader {
    /// The format used so far: forced, detected, or `None` while undetected.
    pub fn format(&self) -> Option<Format> {
        self.config.format
    }

    /// Waits for the splitting thread; returns the decompressed bytes it read.
    pub fn finish(mut self) -> Result<u64> {
        // Dropping the receiver stops a splitter that is still reading.
        let (_, closed) = sync_channel(0);
        drop(std::mem::replace(&mut self.chunks, closed));
        match self.splitter.take() {
            Some(h) => h.join().map_err(|_| internal_err!("the line-splitting thread panicked")),
            None => Ok(0),
        }
    }

    fn parse(&mut self, chunk: &LineChunk) -> Result<Vec<ParsedSlice>> {
        if self.config.format.is_none() {
            self.config.format = detect_format(chunk);
            if let (Some(f), None) = (self.config.format, &self.config.default_model) {
                self.config.default_model = Some(default_model_for(f, &self.location));
            }
        }
        let ctx = LineContext {
            default_model: self.config.default_model.as_deref().unwrap_or("unknown"),
            base_time_micros: self.config.base_time_micros,
        };
        parse_chunk(chunk, self.config.format, &ctx, &self.location, &self.config.settings)
    }
}

impl Iterator for Reader {
    type Item = Result<Vec<ParsedSlice>>;

    fn next(&mut self) -> Option<Self::Item> {
        let chunk = self.chunks.recv().ok()?;
        Some(self.parse(&chunk))
    }
}

/// The default model of formats that log none: `<format>:<file stem>`.
fn default_model_for(format: Format, location: &str) -> String {
    let name = Path::new(location).file_name().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
    let stem = name.split('.').next().unwrap_or_default();
    format!("{}:{stem}", format.name())
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

/// Parses a chunk in parallel: one slice of lines per rayon task, each
/// producing its own batches, returned in input order.
fn parse_chunk(
    chunk: &LineChunk,
    format: Option<Format>,
    ctx: &LineContext<'_>,
    file: &str,
    settings: &DeriveSettings,
) -> Result<Vec<ParsedSlice>> {
    let per_task = chunk.lines.len().div_ceil(rayon::current_num_threads() * 2).max(256);
    let last = chunk.lines.len().saturating_sub(1);
    let format_name = format.map(Format::name).unwrap_or("unknown");
    chunk
        .lines
        .par_chunks(per_task)
        .enumerate()
        .map(|(task, spans)| {
            let mut out = SliceBuilders::default();
            for (i, span) in spans.iter().enumerate() {
                let line = &chunk.data[span.start..span.end];
                let origin =
                    LineOrigin { file, format: format_name, line_no: span.line_no, byte_offset: span.byte_offset };
                let stream_failed = task * per_task + i == last && chunk.stream_error.is_some();
                if !stream_failed && !span.is_cut() && line.trim_ascii().is_empty() {
                    out.counts.lines_skipped += 1;
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
                        out.counts.lines_read += 1;
                        out.counts.lines_ingested += 1;
                        out.request(&rec, &origin, settings);
                    }
                    Ok(Parsed::Rows { rows, skipped }) => {
                        out.counts.lines_read += 1;
                        out.counts.lines_ingested += 1;
                        out.counts.records_skipped += skipped;
                        for row in rows {
                            match row {
                                Row::Request(rec) => out.request(&rec, &origin, settings),
                            }
                        }
                    }
                    Ok(Parsed::Skip) => out.counts.lines_skipped += 1,
                    Err(e) => {
                        out.counts.lines_read += 1;
                        out.counts.lines_rejected += 1;
                        out.rejects.append(&origin, &e, line, span.original_len, &settings.redaction);
                    }
                }
            }
            out.finish(spans.iter().map(|s| (s.end - s.start) as u64).sum())
        })
        .collect()
}

/// The batches one slice of lines is building, and its counts.
#[derive(Default)]
struct SliceBuilders {
    requests: RequestsBuilder,
    request_days: Vec<i32>,
    tokens: TokensBuilder,
    token_days: Vec<i32>,
    rejects: RejectsBuilder,
    counts: LineCounts,
}

impl SliceBuilders {
    /// Appends a request and its tokens, deriving the analytic columns.
    fn request(&mut self, rec: &RequestRecord<'_>, origin: &LineOrigin<'_>, settings: &DeriveSettings) {
        let derived = derive_request(rec, origin, settings);
        self.counts.rows_written += 1;
        self.counts.tokens_written += rec.tokens.len() as u64;
        self.requests.append(rec, &derived, origin);
        self.request_days.push(derived.day);
        for (position, token) in rec.tokens.iter().enumerate() {
            self.tokens.append(rec, &derived, position, token);
            self.token_days.push(derived.day);
        }
    }

    fn finish(mut self, bytes: u64) -> Result<ParsedSlice> {
        fn dated(rows: usize, batch: RecordBatch, days: Vec<i32>) -> Option<DatedBatch> {
            (rows > 0).then_some(DatedBatch { batch, days })
        }
        let (n_requests, n_tokens, n_rejects) = (self.requests.len(), self.tokens.len(), self.rejects.len());
        Ok(ParsedSlice {
            requests: dated(n_requests, self.requests.finish()?, self.request_days),
            tokens: dated(n_tokens, self.tokens.finish()?, self.token_days),
            rejects: if n_rejects > 0 { Some(self.rejects.finish()?) } else { None },
            counts: self.counts,
            bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(log: &str, builder: ReaderBuilder) -> (LineCounts, Vec<RecordBatch>, Vec<RecordBatch>) {
        let mut reader = builder.with_chunk_bytes(64).build(std::io::Cursor::new(log.as_bytes().to_vec()), "x.jsonl");
        let (mut counts, mut requests, mut rejects) = (LineCounts::default(), Vec::new(), Vec::new());
        for slices in &mut reader {
            for s in slices.expect("chunk parses") {
                counts.add(&s.counts);
                requests.extend(s.requests.map(|d| d.batch));
                rejects.extend(s.rejects);
            }
        }
        assert!(reader.finish().is_ok());
        (counts, requests, rejects)
    }

    #[test]
    fn every_line_is_a_row_a_reject_or_a_skip() {
        let log = "{\"ts\":0,\"model\":\"m\",\"prompt_tokens\":1,\"completion_tokens\":2}\n\n[1,2]\n{\"ts\":0,\"model\":\"m\",\"prompt_tokens\":5,\"completion_tokens\":1}\n";
        let (counts, requests, rejects) = read_all(log, ReaderBuilder::new());
        assert_eq!(
            counts,
            LineCounts {
                lines_read: 3,
                lines_ingested: 2,
                rows_written: 2,
                lines_rejected: 1,
                lines_skipped: 1,
                records_skipped: 0,
                tokens_written: 0
            }
        );
        assert_eq!(requests.iter().map(RecordBatch::num_rows).sum::<usize>(), 2);
        assert_eq!(rejects.iter().map(RecordBatch::num_rows).sum::<usize>(), 1);
    }

    #[test]
    fn undetectable_files_are_rejected_line_by_line() {
        let (counts, _, rejects) = read_all("hello\nworld\n", ReaderBuilder::new());
        assert_eq!((counts.lines_read, counts.lines_rejected), (2, 2));
        assert_eq!(rejects.iter().map(RecordBatch::num_rows).sum::<usize>(), 2);
    }

    #[test]
    fn traces_without_a_model_get_the_format_and_file_stem() {
        assert_eq!(default_model_for("mooncake".parse().unwrap(), "s3://b/trace.jsonl.gz"), "mooncake:trace");
    }
}
