//! Lines in, Arrow batches out: the reader behind `tokscope ingest`, usable
//! on its own (like arrow-json's `ReaderBuilder`).
//!
//! A thread splits the input into chunks of whole lines ([`crate::lines`]),
//! or, for a format whose input is one JSON document of events, into chunks
//! of events ([`crate::event_array`]; an event counts as a line), or, for
//! JSON that is not JSON lines (pretty-printed documents, arrays of records),
//! into chunks of records (each counts as a line), or, for server-sent event
//! streams saved as sent, into chunks of streams ([`crate::event_stream`];
//! each counts as a line); each chunk
//! is parsed in parallel with rayon, one slice of lines per task, into
//! batches of the catalog's tables (`requests`, `tokens`,
//! `profiles`, `kernels`, `moe_routing`, `evals`, `rejects`) ([`crate::catalog`]). Every data line is
//! ingested (as one row, or several) or rejected, and blank and header lines
//! (and events of phases that carry no row) are counted apart, so the counts
//! reconcile: `lines_read = lines_ingested + lines_rejected`.
//!
//! Begin/end trace events are paired after the parallel step, in input
//! order, per (`pid`, `tid`) stack ([`SpanPairing`]); a pair is two lines
//! ingested and one row, an end without a begin, or a begin still open at
//! the end of the input, one line rejected.
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

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

pub use crate::catalog::DatedBatch;
use std::thread::JoinHandle;

use arrow_array::RecordBatch;
use rayon::prelude::*;
use serde::Serialize;

use crate::catalog::append::{AnyTableRow, TableBuilder};
use crate::catalog::columns::BuilderSizes;
use crate::catalog::profiles::ProfilesBuilder;
use crate::catalog::rejects::{RejectsBuilder, REJECT_SNIPPET_BYTES};
use crate::catalog::requests::RequestsBuilder;
use crate::catalog::tokens::{TokenOwner, TokensBuilder};
use crate::catalog::{tables, Partition, TableDef};
use crate::derive::{derive_profile, derive_request, DeriveSettings};
use crate::error::Result;
use crate::event_array::{is_json_document, EventSplitter};
use crate::event_stream::StreamSplitter;
use crate::file_blocks::FileBlocks;
use crate::formats::kernel_trace::{self, SpanEvent};
use crate::formats::{CsvHeader, Format, Framing, LineContext, Parsed, Row, TimeUnit, HEAD_BYTES};
use crate::lines::{self, LineChunk, LineSplitter};
use crate::record::{LineOrigin, ProfileRecord, RequestRecord, TokenRecord};
use crate::redact::Redactor;

/// Name of the thread that splits the input into chunks (`top -H`, `ps -L`).
pub const SPLITTER_THREAD: &str = "ingest-split";

/// Chunks the splitting thread reads ahead of the parser by default.
pub const DEFAULT_QUEUE_CHUNKS: usize = 2;

/// How many of a file's first non-blank lines are tried for format detection.
pub const DETECT_LINES: usize = 32;

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
    /// Rows written: requests, and the rows of the other tables formats fill
    /// (kernels, MoE routing records, evaluation records).
    pub rows_written: u64,
    /// Lines rejected.
    pub lines_rejected: u64,
    /// Blank lines and header lines, which carry no request (and trace events
    /// of phases that carry no row: metadata, instants, counters, flows).
    pub lines_skipped: u64,
    /// Records inside ingested lines that are not rows (spans that are not
    /// model calls, embedding calls, cache hits): skipped and counted, not rejected.
    pub records_skipped: u64,
    /// Records rejected inside ingested lines that hold several (an OTLP
    /// span without usage): each has its `rejects` row naming the record.
    pub records_rejected: u64,
    /// Token rows written (gateway and engine).
    pub tokens_written: u64,
    /// Engine profiling records written (`profiles` rows).
    pub profiles_written: u64,
    /// Requests whose logged finish reason is not in the finish-reason table
    /// (`derive::FINISH_REASONS`): written with `finish_reason = 'other'` and
    /// the value kept in `finish_reason_raw`; counted so that a new value shows.
    pub finish_reasons_unmapped: u64,
    /// Requests written with an optional field nulled because its value did
    /// not fit (the issue `invalid_optional_field`, the value kept in
    /// `extra.invalid_fields`): kept, not rejected, and counted so it shows.
    pub fields_nulled: u64,
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
        self.records_rejected += other.records_rejected;
        self.tokens_written += other.tokens_written;
        self.profiles_written += other.profiles_written;
        self.finish_reasons_unmapped += other.finish_reasons_unmapped;
        self.fields_nulled += other.fields_nulled;
    }

    /// True when every line read was ingested or rejected.
    pub fn reconciles(&self) -> bool {
        self.lines_read == self.lines_ingested + self.lines_rejected
    }
}

/// What one slice of lines became.
pub struct ParsedSlice {
    /// One batch per table that got rows, with the table it belongs to.
    batches: Vec<(&'static TableDef, DatedBatch)>,
    /// Begin/end trace events of the slice, in input order, for the reader to pair.
    spans: Vec<PendingSpan>,
    /// The slice's line accounting.
    pub counts: LineCounts,
    /// Bytes of the slice's lines (for progress reporting).
    pub bytes: u64,
    /// How much its high-volume builders held, to size the next chunk's.
    sizes: SliceSizes,
}

impl ParsedSlice {
    /// The slice's rows of `table`, if it got any.
    pub fn batch(&self, table: &TableDef) -> Option<&RecordBatch> {
        self.batches.iter().find(|(t, _)| t.name == table.name).map(|(_, dated)| &dated.batch)
    }

    /// How many rows of `table` the slice holds.
    pub fn rows(&self, table: &TableDef) -> usize {
        self.batch(table).map_or(0, RecordBatch::num_rows)
    }

    /// The slice's batches with the table each belongs to.
    pub fn into_batches(self) -> impl Iterator<Item = (&'static TableDef, DatedBatch)> {
        self.batches.into_iter()
    }
}

/// Configures a [`Reader`].
#[derive(Debug, Clone)]
pub struct ReaderBuilder {
    format: Option<Format>,
    settings: DeriveSettings,
    default_model: Option<String>,
    base_time_micros: i64,
    time_unit: TimeUnit,
    chunk_bytes: usize,
    max_line_bytes: usize,
    queue_chunks: usize,
    read_threads: usize,
}

impl Default for ReaderBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl ReaderBuilder {
    /// Defaults: format detected from the first lines, default bins, markers
    /// and no redaction, 4 MiB chunks, lines up to 64 MiB, two chunks read
    /// ahead of the parser, one thread reading a local file's blocks.
    pub fn new() -> Self {
        ReaderBuilder {
            format: None,
            settings: DeriveSettings::default(),
            default_model: None,
            base_time_micros: 0,
            time_unit: TimeUnit::default(),
            chunk_bytes: 4 << 20,
            max_line_bytes: 64 << 20,
            queue_chunks: DEFAULT_QUEUE_CHUNKS,
            read_threads: 1,
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

    /// Start of traces with relative timestamps (Mooncake), and arrival of
    /// responses that carry no time (bare TGI and Anthropic responses),
    /// microseconds since the epoch.
    pub fn with_base_time_micros(mut self, micros: i64) -> Self {
        self.base_time_micros = micros;
        self
    }

    /// Unit of durations logged as bare numbers of unknown unit (Langfuse); default seconds.
    pub fn with_time_unit(mut self, unit: TimeUnit) -> Self {
        self.time_unit = unit;
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

    /// How many chunks the splitting thread may have read and not yet
    /// handed to the parser (at least one): how far it reads ahead.
    pub fn with_queue_chunks(mut self, chunks: usize) -> Self {
        self.queue_chunks = chunks.max(1);
        self
    }

    /// Chunks the splitting thread may read ahead of the parser.
    pub fn queue_chunks(&self) -> usize {
        self.queue_chunks
    }

    /// How many threads read a local file's blocks ahead of the splitter
    /// ([`ReaderBuilder::build_file`]): each holds one block (a chunk, with
    /// [`crate::file_blocks::CARRY_ROOM_BYTES`] in front of it). With none,
    /// every file is read by its splitter.
    pub fn with_read_threads(mut self, threads: usize) -> Self {
        self.read_threads = threads;
        self
    }

    /// Threads that read a local file's blocks ahead of the splitter.
    pub fn read_threads(&self) -> usize {
        self.read_threads
    }

    /// Target bytes per parsed chunk.
    pub fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// The longest line held in memory; longer ones are rejected unread.
    pub fn max_line_bytes(&self) -> usize {
        self.max_line_bytes
    }

    /// A reader over `input` (already decompressed), named `location` in
    /// `source_file` and `rejects`. The first bytes are read here, to
    /// recognise formats whose input is one document ([`Format::detect_head`]);
    /// the splitting runs on its own thread, by lines or by events as the
    /// format's [`Framing`] says.
    pub fn build<R: Read + Send + 'static>(mut self, input: R, location: &str) -> Reader {
        let (head, input) = read_head(input, HEAD_BYTES);
        let framing = self.detect(&head);
        self.start(framing, SplitInput::Stream(Box::new(std::io::Cursor::new(head).chain(input))), location)
    }

    /// A reader over the first `size` bytes (its size when opened) of a
    /// local file that holds its input as is (neither compressed nor
    /// Parquet), as [`ReaderBuilder::build`] would be over it. Lines of a
    /// file larger than a chunk ([`ReaderBuilder::reads_in_blocks`]) are
    /// read in blocks at their positions by [`ReaderBuilder::read_threads`]
    /// threads ([`FileBlocks`]), each block with its newlines found by the
    /// thread that read it: the splitting thread is left only the lines to
    /// cut.
    pub fn build_file(mut self, file: File, size: u64, location: &str) -> Reader {
        let (head, file) = read_head(file, HEAD_BYTES);
        let framing = self.detect(&head);
        let input = match (framing, file.error) {
            (Framing::Lines, None) if self.reads_in_blocks(size) => {
                SplitInput::Blocks(FileBlocks::new(file.input, size, self.chunk_bytes, self.read_threads))
            }
            (_, error) => {
                let rest = ReplayError { error, input: file.input };
                SplitInput::Stream(Box::new(std::io::Cursor::new(head).chain(rest)))
            }
        };
        self.start(framing, input, location)
    }

    /// Whether [`ReaderBuilder::build_file`] reads a file of `size` bytes
    /// in blocks on reading threads: when there are any, and it is larger
    /// than one chunk (a file of one block is read by the splitter; a
    /// thread to read it ahead would cost more than it saves).
    pub fn reads_in_blocks(&self, size: u64) -> bool {
        self.read_threads > 0 && size > self.chunk_bytes as u64
    }

    /// The format, when none is forced, and the framing its first bytes `head` say.
    fn detect(&mut self, head: &[u8]) -> Framing {
        if self.format.is_none() {
            self.format = Format::detect_head(head);
        }
        match self.format.map(Format::framing).unwrap_or(Framing::Lines) {
            Framing::Lines if is_json_document(head, head.len() < HEAD_BYTES) => Framing::JsonRecords,
            framing => framing,
        }
    }

    /// A reader over `input`, an input held whole in memory and already
    /// decompressed, as [`ReaderBuilder::build`] would be over it, but split
    /// on the caller's thread before this returns, into chunks that hold the
    /// whole input where its lines allow: no thread of its own, so many small
    /// inputs (objects fetched whole) cost no thread each.
    ///
    /// ```
    /// use tokscope_core::reader::ReaderBuilder;
    /// let log = b"{\"ts\":\"2024-06-01T00:00:00Z\",\"model\":\"m\",\"prompt_tokens\":3,\"completion_tokens\":1}\n".to_vec();
    /// let reader = ReaderBuilder::new().build_in_memory(log, "one.jsonl");
    /// let rows: usize = reader.map(|s| s.unwrap().iter().map(|s| s.counts.rows_written as usize).sum::<usize>()).sum();
    /// assert_eq!(rows, 1);
    /// ```
    pub fn build_in_memory<B: AsRef<[u8]> + Send + 'static>(mut self, input: B, location: &str) -> Reader {
        let bytes = input.as_ref();
        let framing = self.detect(&bytes[..bytes.len().min(HEAD_BYTES)]);
        let (chunk_bytes, max_line) = (self.chunk_bytes.min(bytes.len() + 1), self.max_line_bytes);
        let mut chunks = VecDeque::new();
        let input = SplitInput::Stream(Box::new(std::io::Cursor::new(input)));
        let read = split(framing, input, chunk_bytes, max_line, None, &mut |chunk| {
            chunks.push_back(chunk);
            true
        });
        let spare = sync_channel::<Vec<u8>>(0).0;
        self.reader(framing, Chunks::Split(chunks), spare, Splitter::Done(read), location)
    }

    /// Starts the splitting thread over `input`, cut as `framing` says.
    fn start(self, framing: Framing, input: SplitInput, location: &str) -> Reader {
        let (tx, chunks) = sync_channel::<LineChunk>(self.queue_chunks);
        // Parsed chunks' buffers go back to the line splitter (a few at a time;
        // the others are freed, as all are for the other framings).
        let (spare, spare_rx) = sync_channel::<Vec<u8>>(2);
        let spare_rx = matches!(framing, Framing::Lines).then_some(spare_rx);
        let (chunk_bytes, max_line) = (self.chunk_bytes, self.max_line_bytes);
        let splitter = std::thread::Builder::new().name(SPLITTER_THREAD.into()).spawn(move || -> u64 {
            split(framing, input, chunk_bytes, max_line, spare_rx, &mut |chunk| tx.send(chunk).is_ok())
        });
        let splitter = match splitter {
            Ok(handle) => Splitter::Thread(handle),
            Err(e) => Splitter::Failed(format!("could not start the line-splitting thread: {e}")),
        };
        self.reader(framing, Chunks::Queue(chunks), spare, splitter, location)
    }

    fn reader(
        self,
        framing: Framing,
        chunks: Chunks,
        spare: SyncSender<Vec<u8>>,
        splitter: Splitter,
        location: &str,
    ) -> Reader {
        let pairing = SpanPairing { redaction: self.settings.redaction.clone(), open: HashMap::new() };
        Reader {
            config: self,
            framing,
            location: location.to_string(),
            chunks,
            spare,
            splitter,
            header: None,
            started: false,
            detected: false,
            pairing,
            finished: false,
            sizes: SliceSizes::default(),
        }
    }
}

/// Splits `input` to its end (or until `emit` refuses a chunk), cut as
/// `framing` says, handing each chunk to `emit`; returns the bytes read.
fn split(
    framing: Framing,
    input: SplitInput,
    chunk_bytes: usize,
    max_line: usize,
    spare: Option<Receiver<Vec<u8>>>,
    emit: &mut dyn FnMut(LineChunk) -> bool,
) -> u64 {
    match framing {
        Framing::Lines => match input {
            SplitInput::Blocks(blocks) => {
                let split = LineSplitter::over_blocks(blocks, chunk_bytes, max_line, REJECT_SNIPPET_BYTES);
                split_lines(split, spare, emit)
            }
            SplitInput::Stream(input) => {
                let split = LineSplitter::new(input, chunk_bytes, max_line, REJECT_SNIPPET_BYTES);
                split_lines(split, spare, emit)
            }
        },
        Framing::JsonEventArray { key } => {
            let mut split = EventSplitter::new(input.into_read(), key, chunk_bytes, max_line, REJECT_SNIPPET_BYTES);
            send_chunks(emit, || split.next_chunk());
            split.bytes_read()
        }
        Framing::JsonRecords => {
            let mut split = EventSplitter::records(input.into_read(), chunk_bytes, max_line, REJECT_SNIPPET_BYTES);
            send_chunks(emit, || split.next_chunk());
            split.bytes_read()
        }
        Framing::EventStream => {
            let mut split = StreamSplitter::new(input.into_read(), chunk_bytes, max_line, REJECT_SNIPPET_BYTES);
            send_chunks(emit, || split.next_chunk());
            split.bytes_read()
        }
    }
}

/// What reading one input gave, for a conformance report over a folder of
/// files (`tokscope formats --check DIR`): the format detected (or forced),
/// how the input was cut, the line accounting, and the first reject's error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileCheck {
    /// The format used; `None` when none was recognised.
    pub format: Option<&'static str>,
    /// `lines`, `json_records`, `json_event_array` or `event_stream`.
    pub framing: &'static str,
    /// Lines read, ingested, rejected, skipped; rows and records.
    #[serde(flatten)]
    pub counts: LineCounts,
    /// The error of the first `rejects` row (a line or a record), if any.
    pub first_error: Option<String>,
}

/// Reads `input` whole with `builder` (batches are dropped as they come) and
/// reports what it gave ([`FileCheck`]).
pub fn check_input<R: Read + Send + 'static>(builder: ReaderBuilder, input: R, location: &str) -> Result<FileCheck> {
    let mut reader = builder.build(input, location);
    let (mut counts, mut first_error) = (LineCounts::default(), None);
    for slices in &mut reader {
        for slice in slices? {
            counts.add(&slice.counts);
            if first_error.is_none() {
                first_error = slice.batch(tables::REJECTS).and_then(|r| {
                    let errors = r.column_by_name("error")?.as_any().downcast_ref::<arrow_array::StringArray>()?;
                    (arrow_array::Array::len(errors) > 0).then(|| errors.value(0).to_string())
                });
            }
        }
    }
    let framing = match reader.framing() {
        Framing::Lines => "lines",
        Framing::JsonRecords => "json_records",
        Framing::JsonEventArray { .. } => "json_event_array",
        Framing::EventStream => "event_stream",
    };
    let format = reader.format().map(Format::name);
    reader.finish()?;
    Ok(FileCheck { format, framing, counts, first_error })
}

/// Reads up to `limit` bytes of `input` (fewer at its end); a read error
/// stops the head there and is replayed to whoever reads on, so the splitter
/// reports it where it happened.
fn read_head<R: Read>(mut input: R, limit: usize) -> (Vec<u8>, ReplayError<R>) {
    let mut head = vec![0; limit];
    let mut filled = 0;
    let mut error = None;
    while filled < limit {
        match input.read(&mut head[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    head.truncate(filled);
    (head, ReplayError { error, input })
}

/// What a splitting thread reads: any byte stream, or a local file's blocks.
enum SplitInput {
    Stream(Box<dyn Read + Send>),
    Blocks(FileBlocks),
}

impl SplitInput {
    /// The input as a byte stream, for the splitters that read one.
    fn into_read(self) -> Box<dyn Read + Send> {
        match self {
            SplitInput::Stream(input) => input,
            SplitInput::Blocks(blocks) => Box::new(blocks),
        }
    }
}

/// Hands on the chunks `next` gives until the input ends or `emit` refuses one (the reader is dropped).
fn send_chunks(emit: &mut dyn FnMut(LineChunk) -> bool, mut next: impl FnMut() -> Option<LineChunk>) {
    while let Some(chunk) = next() {
        if !emit(chunk) {
            break;
        }
    }
}

/// Splits lines to the end of the input, reading into parsed chunks'
/// buffers that come back on `spare`; returns the bytes read.
fn split_lines<R: lines::SplitInput>(
    mut split: LineSplitter<R>,
    spare: Option<Receiver<Vec<u8>>>,
    emit: &mut dyn FnMut(LineChunk) -> bool,
) -> u64 {
    if let Some(spare) = spare {
        split = split.with_spare_buffers(spare);
    }
    send_chunks(emit, || split.next_chunk());
    split.bytes_read()
}

/// A reader that first returns a stored error, then reads on.
struct ReplayError<R> {
    error: Option<std::io::Error>,
    input: R,
}

impl<R: Read> Read for ReplayError<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.error.take() {
            Some(e) => Err(e),
            None => self.input.read(buf),
        }
    }
}

/// The chunks of a reader's input: as its splitting thread sends them, or
/// all split already (an input held in memory).
enum Chunks {
    Queue(Receiver<LineChunk>),
    Split(VecDeque<LineChunk>),
}

impl Chunks {
    fn next(&mut self) -> Option<LineChunk> {
        match self {
            Chunks::Queue(rx) => rx.recv().ok(),
            Chunks::Split(chunks) => chunks.pop_front(),
        }
    }
}

/// What splits a reader's input: its thread, or nothing more (split in
/// memory, the bytes it read), or a thread that could not start (why, as
/// the error says it: the reader then reads nothing and says so).
enum Splitter {
    Thread(JoinHandle<u64>),
    Done(u64),
    Failed(String),
}

/// Parses an input chunk by chunk; each item holds the chunk's slices in
/// input order. See [`ReaderBuilder`].
pub struct Reader {
    config: ReaderBuilder,
    /// How the input is cut into records.
    framing: Framing,
    location: String,
    chunks: Chunks,
    /// Where a parsed chunk's buffer goes back to the splitter.
    spare: SyncSender<Vec<u8>>,
    splitter: Splitter,
    /// The file's CSV header, for formats that read rows by column name.
    header: Option<CsvHeader>,
    /// Whether the first chunk (where detection and the header are) was seen.
    started: bool,
    /// Whether the format was detected from the input (not forced by `--format`).
    detected: bool,
    /// Begin events still open, carried from chunk to chunk.
    pairing: SpanPairing,
    /// True once the end of input was handled.
    finished: bool,
    /// The largest slice of the last chunk, to size the next chunk's builders.
    sizes: SliceSizes,
}

impl Reader {
    /// The format used so far: forced, detected, or `None` while undetected.
    pub fn format(&self) -> Option<Format> {
        self.config.format
    }

    /// How the input is cut into records: the format's framing, or JSON
    /// records for a JSON file that is not JSON lines.
    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// Waits for the splitting thread; returns the decompressed bytes it read.
    pub fn finish(mut self) -> Result<u64> {
        // Dropping the receiver stops a splitter that is still reading.
        self.chunks = Chunks::Split(VecDeque::new());
        match std::mem::replace(&mut self.splitter, Splitter::Done(0)) {
            Splitter::Thread(h) => h.join().map_err(|_| internal_err!("the line-splitting thread panicked")),
            Splitter::Done(read) => Ok(read),
            Splitter::Failed(e) => Err(internal_err!("{e}")),
        }
    }

    fn parse(&mut self, chunk: &LineChunk) -> Result<Vec<ParsedSlice>> {
        if self.config.format.is_none() {
            self.config.format = detect_format(chunk);
            self.detected = self.config.format.is_some();
        }
        // Forced, recognised by the head or by the lines: every format that
        // logs no model gets `--model`, else `<format>:<file stem>`.
        if let (Some(f), None) = (self.config.format, &self.config.default_model) {
            self.config.default_model = Some(default_model_for(f, &self.location));
        }
        if !self.started {
            self.started = true;
            if let (Some(f), Some(first)) = (self.config.format, first_line(chunk)) {
                self.header = f.header(first);
            }
        }
        let ctx = LineContext {
            default_model: self.config.default_model.as_deref().unwrap_or("unknown"),
            base_time_micros: self.config.base_time_micros,
            time_unit: self.config.time_unit,
            header: self.header.as_ref(),
        };
        // A file of JSON records whose format was detected may mix producers
        // (an application logging every upstream's responses): a record its
        // format rejects is read by the format that recognises it.
        let per_line =
            self.detected && self.header.is_none() && matches!(self.framing, Framing::Lines | Framing::JsonRecords);
        let formats = LineFormats { file: self.config.format, per_line };
        let mut slices = parse_chunk(chunk, formats, &ctx, &self.location, &self.config.settings, &self.sizes)?;
        self.sizes = slices.iter().fold(SliceSizes::default(), |largest, s| largest.max(&s.sizes));
        if slices.iter().any(|s| !s.spans.is_empty()) {
            let spans: Vec<PendingSpan> = slices.iter_mut().flat_map(|s| std::mem::take(&mut s.spans)).collect();
            slices.push(self.pairing.pair(spans, &self.location)?);
        }
        Ok(slices)
    }
}

impl Iterator for Reader {
    type Item = Result<Vec<ParsedSlice>>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Splitter::Failed(e) = &self.splitter {
            if !self.finished {
                self.finished = true;
                return Some(Err(internal_err!("{e}")));
            }
            return None;
        }
        if let Some(chunk) = self.chunks.next() {
            let parsed = self.parse(&chunk);
            // Dropped when the splitter has enough, or is gone.
            let _ = self.spare.try_send(chunk.data);
            return Some(parsed);
        }
        if self.finished {
            return None;
        }
        self.finished = true;
        // Begin events never ended are rejected once the input is over.
        self.pairing.finish(&self.location).transpose().map(|slice| slice.map(|s| vec![s]))
    }
}

/// Longest raw prefix of a begin/end event kept for its `rejects` row.
const SPAN_SNIPPET_BYTES: usize = 1024;

/// A begin or end trace event with where it came from, waiting to be paired.
struct PendingSpan {
    event: SpanEvent,
    format: &'static str,
    line_no: u64,
    byte_offset: u64,
    raw: Vec<u8>,
}

impl PendingSpan {
    fn origin<'a>(&'a self, file: &'a str) -> LineOrigin<'a> {
        LineOrigin { file, format: self.format, line_no: self.line_no, byte_offset: self.byte_offset }
    }
}

/// Pairs begin and end trace events in input order: per (`pid`, `tid`), an
/// end closes the most recent open begin (events nest like a stack).
struct SpanPairing {
    /// How rejected events are stored.
    redaction: Redactor,
    open: HashMap<(Option<String>, Option<String>), Vec<PendingSpan>>,
}

impl SpanPairing {
    /// Pairs `spans` (in input order) with what is open; returns the slice of
    /// the pairs' rows, the rejects, and their accounting.
    fn pair(&mut self, spans: Vec<PendingSpan>, file: &str) -> Result<ParsedSlice> {
        let mut out = SliceBuilders::new(&self.redaction);
        for span in spans {
            let key = (span.event.pid.clone(), span.event.tid.clone());
            if span.event.begin {
                self.open.entry(key).or_default().push(span);
                continue;
            }
            let Some(begin) = self.open.get_mut(&key).and_then(Vec::pop) else {
                out.counts.lines_read += 1;
                out.counts.lines_rejected += 1;
                let error = "an E event without an open B event on the same pid and tid";
                out.reject(&span.origin(file), None, error, &span.raw, false, span.raw.len());
                continue;
            };
            out.counts.lines_read += 2;
            match kernel_trace::pair(begin.event.clone(), span.event.clone()) {
                Ok(row) => {
                    out.counts.lines_ingested += 2;
                    out.table_row(&row, &begin.origin(file))?;
                }
                Err(e) => {
                    out.counts.lines_rejected += 2;
                    out.reject(&begin.origin(file), None, &e, &begin.raw, false, begin.raw.len());
                    out.reject(&span.origin(file), None, &e, &span.raw, false, span.raw.len());
                }
            }
        }
        out.finish(0)
    }

    /// Rejects the begin events still open at the end of the input.
    fn finish(&mut self, file: &str) -> Result<Option<ParsedSlice>> {
        let mut open: Vec<PendingSpan> = self.open.drain().flat_map(|(_, stack)| stack).collect();
        if open.is_empty() {
            return Ok(None);
        }
        open.sort_by_key(|s| s.byte_offset);
        let mut out = SliceBuilders::new(&self.redaction);
        for span in &open {
            out.counts.lines_read += 1;
            out.counts.lines_rejected += 1;
            let error = "a B event without an E event on the same pid and tid";
            out.reject(&span.origin(file), None, error, &span.raw, false, span.raw.len());
        }
        out.finish(0).map(Some)
    }
}

/// The default model of formats that log none: `<format>:<file stem>`.
fn default_model_for(format: Format, location: &str) -> String {
    let name = Path::new(location).file_name().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
    let stem = name.split('.').next().unwrap_or_default();
    format!("{}:{stem}", format.name())
}

/// The first non-blank line of a chunk.
fn first_line(chunk: &LineChunk) -> Option<&[u8]> {
    chunk.lines.iter().map(|s| &chunk.data[s.start..s.end]).find(|l| !l.trim_ascii().is_empty())
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

/// The formats a chunk's lines are read by.
#[derive(Clone, Copy)]
struct LineFormats {
    /// The file's, forced or detected.
    file: Option<Format>,
    /// Whether a line the file's format rejects is read by the format that
    /// recognises it (a detected format of JSON records).
    per_line: bool,
}

impl LineFormats {
    /// `line` parsed by the file's format, or, when that fails and lines may
    /// mix formats, by the format that recognises it; with the format that read it.
    fn parse<'a>(self, line: &'a [u8], ctx: &LineContext<'_>) -> (Result<Parsed<'a>, String>, Option<Format>) {
        let Some(file) = self.file else {
            return (Err("could not detect the file's format; pass --format".to_string()), None);
        };
        match file.parse(line, ctx) {
            Err(e) if self.per_line => {
                match Format::detect(line).filter(|f| *f != file && f.framing() == Framing::Lines) {
                    Some(own) => (own.parse(line, ctx), Some(own)),
                    None => (Err(e), Some(file)),
                }
            }
            outcome => (outcome, Some(file)),
        }
    }
}

/// Parses a chunk in parallel: one slice of lines per rayon task, each
/// producing its own batches, returned in input order.
fn parse_chunk(
    chunk: &LineChunk,
    formats: LineFormats,
    ctx: &LineContext<'_>,
    file: &str,
    settings: &DeriveSettings,
    sizes: &SliceSizes,
) -> Result<Vec<ParsedSlice>> {
    let per_task = chunk.lines.len().div_ceil(rayon::current_num_threads() * 2).max(256);
    let last = chunk.lines.len().saturating_sub(1);
    let file_format = formats.file;
    chunk
        .lines
        .par_chunks(per_task)
        .enumerate()
        .map(|(task, spans)| {
            let mut out = SliceBuilders::with_sizes(&settings.redaction, sizes);
            for (i, span) in spans.iter().enumerate() {
                let line = &chunk.data[span.start..span.end];
                let stream_failed = task * per_task + i == last && chunk.stream_error.is_some();
                if !stream_failed && !span.is_cut() && line.trim_ascii().is_empty() {
                    out.counts.lines_skipped += 1;
                    continue;
                }
                let (outcome, format) = if let Some(err) = chunk.stream_error.as_ref().filter(|_| stream_failed) {
                    (Err(err.clone()), file_format)
                } else if span.is_cut() {
                    (Err(format!("line is {} bytes, longer than --max-line-bytes", span.original_len)), file_format)
                } else {
                    formats.parse(line, ctx)
                };
                let format_name = format.map(Format::name).unwrap_or("unknown");
                let origin =
                    LineOrigin { file, format: format_name, line_no: span.line_no, byte_offset: span.byte_offset };
                match outcome {
                    Ok(Parsed::Request(rec)) => {
                        out.counts.lines_read += 1;
                        out.counts.lines_ingested += 1;
                        out.request(&rec, &origin, settings);
                    }
                    Ok(Parsed::Rows { rows, skipped }) => {
                        // A begin/end event is counted when the reader pairs it.
                        if !matches!(rows.as_slice(), [Row::KernelSpan(_)]) {
                            out.counts.lines_read += 1;
                            out.counts.lines_ingested += 1;
                        }
                        out.counts.records_skipped += skipped;
                        for row in rows {
                            match row {
                                Row::Request(rec) => out.request(&rec, &origin, settings),
                                Row::Reject(r) => {
                                    out.counts.records_rejected += 1;
                                    let raw = format.map_or(Cow::Borrowed(&r.raw[..]), |f| f.reject_raw(&r.raw, ctx));
                                    out.reject(&origin, Some(&r.record), &r.error, &raw, false, r.raw.len());
                                }
                                Row::KernelSpan(event) => out.spans.push(PendingSpan {
                                    event,
                                    format: format_name,
                                    line_no: span.line_no,
                                    byte_offset: span.byte_offset,
                                    raw: line[..line.len().min(SPAN_SNIPPET_BYTES)].to_vec(),
                                }),
                                Row::Profile(rec) => out.profile(&rec, &origin),
                                Row::Table(row) => out.table_row(row.as_ref(), &origin)?,
                            }
                        }
                    }
                    Ok(Parsed::Skip) => out.counts.lines_skipped += 1,
                    Err(e) => {
                        out.counts.lines_read += 1;
                        out.counts.lines_rejected += 1;
                        let raw = format.map_or(Cow::Borrowed(line), |f| f.reject_raw(line, ctx));
                        out.reject(&origin, None, &e, &raw, span.is_cut(), span.original_len as usize);
                    }
                }
            }
            out.finish(spans.iter().map(|s| (s.end - s.start) as u64).sum())
        })
        .collect()
}

/// The batches one slice of lines is building, and its counts.
struct SliceBuilders {
    /// How rejected lines are stored.
    redaction: Redactor,
    requests: RequestsBuilder,
    request_days: Vec<i32>,
    tokens: TokensBuilder,
    token_days: Vec<i32>,
    profiles: ProfilesBuilder,
    profile_days: Vec<i32>,
    rejects: RejectsBuilder,
    /// One builder per other table the slice got rows of ([`Row::Table`]).
    tables: Vec<TableSlot>,
    spans: Vec<PendingSpan>,
    counts: LineCounts,
}

/// The builder of a table that rows reach through [`AnyTableRow`], and the
/// `date` partition of each row when the table has one.
struct TableSlot {
    builder: Box<dyn TableBuilder>,
    days: Vec<i32>,
}

/// How much a slice's `requests` and `tokens` builders held (the tables with
/// a row per line or per token; the others are small or rare and start empty).
#[derive(Debug, Clone, Default)]
struct SliceSizes {
    requests: BuilderSizes,
    tokens: BuilderSizes,
}

impl SliceSizes {
    fn max(self, other: &SliceSizes) -> SliceSizes {
        SliceSizes { requests: self.requests.max(&other.requests), tokens: self.tokens.max(&other.tokens) }
    }
}

impl SliceBuilders {
    fn new(redaction: &Redactor) -> Self {
        Self::with_sizes(redaction, &SliceSizes::default())
    }

    /// Builders with room for a slice as large as `sizes` says: slices of one
    /// chunk hold as many lines as the last chunk's, so their builders seldom
    /// grow (each growth copies the buffer).
    fn with_sizes(redaction: &Redactor, sizes: &SliceSizes) -> Self {
        SliceBuilders {
            redaction: redaction.clone(),
            requests: RequestsBuilder::with_sizes(&sizes.requests),
            request_days: Vec::with_capacity(sizes.requests.rows),
            tokens: TokensBuilder::with_sizes(&sizes.tokens),
            token_days: Vec::with_capacity(sizes.tokens.rows),
            profiles: Default::default(),
            profile_days: Vec::new(),
            rejects: Default::default(),
            tables: Vec::new(),
            spans: Vec::new(),
            counts: LineCounts::default(),
        }
    }

    /// Appends a rejected line (or record): its first bytes `raw` (`cut` when
    /// the splitter kept fewer than the line's `line_bytes`), redacted.
    fn reject(
        &mut self,
        origin: &LineOrigin<'_>,
        record: Option<&str>,
        error: &str,
        raw: &[u8],
        cut: bool,
        line_bytes: usize,
    ) {
        self.rejects.append(origin, record, error, raw, cut, line_bytes as u64, &self.redaction);
    }

    /// Appends a request and its tokens, deriving the analytic columns.
    fn request(&mut self, rec: &RequestRecord<'_>, origin: &LineOrigin<'_>, settings: &DeriveSettings) {
        let derived = derive_request(rec, origin, settings);
        self.counts.finish_reasons_unmapped += u64::from(derived.finish_reason_unmapped);
        self.counts.fields_nulled +=
            u64::from(rec.token_issues.iter().any(|i| i == crate::formats::fields::issue::INVALID_OPTIONAL_FIELD));
        self.requests.append(rec, &derived, origin);
        self.request_days.push(derived.day);
        let owner = TokenOwner::of_request(rec, &derived);
        for (position, token) in rec.tokens.iter().enumerate() {
            self.tokens.append(&owner, position, token);
            self.token_days.push(derived.day);
        }
    }

    /// Appends an engine profile and one `tokens` row per decode step.
    fn profile(&mut self, rec: &ProfileRecord<'_>, origin: &LineOrigin<'_>) {
        let derived = derive_profile(rec);
        self.profiles.append(rec, &derived, origin);
        self.profile_days.push(derived.day);
        let owner = TokenOwner::of_profile(rec);
        for (position, &itl_ms) in rec.decode_latency_ms.iter().enumerate() {
            self.tokens.append(&owner, position, &TokenRecord { itl_ms, ..Default::default() });
            self.token_days.push(derived.day);
        }
    }

    /// Appends a row of a table the reader does not name, to that table's
    /// builder (made at its first row).
    fn table_row(&mut self, row: &dyn AnyTableRow, origin: &LineOrigin<'_>) -> Result<()> {
        let table = row.table().name;
        let slot = match self.tables.iter().position(|slot| slot.builder.def().name == table) {
            Some(i) => &mut self.tables[i],
            None => {
                self.tables.push(TableSlot { builder: row.new_builder(), days: Vec::new() });
                let last = self.tables.len() - 1;
                &mut self.tables[last]
            }
        };
        if let Some(day) = row.append_to(slot.builder.as_mut(), origin, &self.redaction)? {
            slot.days.push(day);
        }
        Ok(())
    }

    /// The slice's batches and its row counts, which come from the batches.
    fn finish(mut self, bytes: u64) -> Result<ParsedSlice> {
        let sizes = SliceSizes { requests: self.requests.sizes(), tokens: self.tokens.sizes() };
        let mut batches = Vec::new();
        let mut add = |table: &'static TableDef, batch: RecordBatch, days: Vec<i32>| -> Result<()> {
            if batch.num_rows() == 0 {
                return Ok(());
            }
            if table.partition == Partition::Date && days.len() != batch.num_rows() {
                return Err(internal_err!(
                    "{} rows of {} came with {} partition days",
                    batch.num_rows(),
                    table.name,
                    days.len()
                ));
            }
            batches.push((table, DatedBatch { batch, days }));
            Ok(())
        };
        add(tables::REQUESTS, self.requests.finish()?, self.request_days)?;
        add(tables::TOKENS, self.tokens.finish()?, self.token_days)?;
        add(tables::PROFILES, self.profiles.finish()?, self.profile_days)?;
        add(tables::REJECTS, self.rejects.finish()?, Vec::new())?;
        for mut slot in self.tables {
            add(slot.builder.def(), slot.builder.finish_batch()?, slot.days)?;
        }
        let rows = |table: &TableDef| -> u64 {
            batches.iter().filter(|(t, _)| t.name == table.name).map(|(_, d)| d.batch.num_rows() as u64).sum()
        };
        let (tokens, profiles, rejects) = (rows(tables::TOKENS), rows(tables::PROFILES), rows(tables::REJECTS));
        let all: u64 = batches.iter().map(|(_, d)| d.batch.num_rows() as u64).sum();
        // Rows written: requests and every other table's rows, except
        // `tokens`, `profiles` (counted apart) and `rejects`.
        self.counts.rows_written = all - tokens - profiles - rejects;
        self.counts.tokens_written = tokens;
        self.counts.profiles_written = profiles;
        Ok(ParsedSlice { batches, spans: self.spans, counts: self.counts, bytes, sizes })
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
                requests.extend(s.batch(tables::REQUESTS).cloned());
                rejects.extend(s.batch(tables::REJECTS).cloned());
            }
        }
        assert!(reader.finish().is_ok());
        (counts, requests, rejects)
    }

    /// A file is read in blocks only where there are reading threads and
    /// it is larger than one chunk; its lines are the same either way.
    #[test]
    fn a_file_is_read_in_blocks_only_by_reading_threads() {
        use std::io::Write;
        let builder = ReaderBuilder::new().with_chunk_bytes(64);
        assert!(builder.reads_in_blocks(65) && !builder.reads_in_blocks(64));
        assert!(!builder.clone().with_read_threads(0).reads_in_blocks(1 << 30));
        let log: String = (0..200)
            .map(|i| format!("{{\"ts\":{i},\"model\":\"m\",\"prompt_tokens\":{i},\"completion_tokens\":1}}\n"))
            .collect();
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(log.as_bytes()).unwrap();
        let counts = |threads: usize| {
            let input = File::open(file.path()).unwrap();
            let mut reader = builder.clone().with_read_threads(threads).build_file(input, log.len() as u64, "x.jsonl");
            let mut counts = LineCounts::default();
            for slices in &mut reader {
                slices.expect("chunk parses").iter().for_each(|s| counts.add(&s.counts));
            }
            assert!(reader.finish().is_ok());
            counts
        };
        assert_eq!(counts(0).rows_written, 200);
        assert_eq!(counts(0), counts(2));
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
                records_rejected: 0,
                tokens_written: 0,
                profiles_written: 0,
                finish_reasons_unmapped: 0,
                fields_nulled: 0
            }
        );
        assert_eq!(requests.iter().map(RecordBatch::num_rows).sum::<usize>(), 2);
        assert_eq!(rejects.iter().map(RecordBatch::num_rows).sum::<usize>(), 1);
    }

    /// An input held in memory reads as the same input streamed: the same
    /// counts and rows, for lines (with a blank line and a reject) and for
    /// an array of pretty-printed records, split before the reader returns
    /// (its splitter has nothing left to send: no thread is waited for).
    #[test]
    fn an_input_in_memory_reads_as_the_same_input_streamed() {
        let lines = "{\"ts\":0,\"model\":\"m\",\"prompt_tokens\":1,\"completion_tokens\":2}\n\n[1,2]\n{\"ts\":0,\"model\":\"m\",\"prompt_tokens\":5,\"completion_tokens\":1}\n";
        let litellm = include_str!("../../../sample_logs/litellm.jsonl");
        let array = format!("[\n{}\n]\n", pretty(litellm, 0..4).join(",\n"));
        fn read_whole(mut reader: Reader) -> (LineCounts, Vec<RecordBatch>, u64) {
            let (mut counts, mut requests) = (LineCounts::default(), Vec::new());
            for slices in &mut reader {
                for s in slices.expect("chunk parses") {
                    counts.add(&s.counts);
                    requests.extend(s.batch(tables::REQUESTS).cloned());
                }
            }
            (counts, requests, reader.finish().expect("splitter finished"))
        }
        for (input, want) in [(lines.to_string(), (3, 2, 1, 1)), (array, (4, 4, 0, 0))] {
            let in_memory = ReaderBuilder::new().build_in_memory(input.clone().into_bytes(), "x.json");
            assert!(matches!(in_memory.splitter, Splitter::Done(_)) && matches!(in_memory.chunks, Chunks::Split(_)));
            let (counts, requests, read) = read_whole(in_memory);
            let c = (counts.lines_read, counts.rows_written, counts.lines_rejected, counts.lines_skipped);
            assert_eq!((c, read), (want, input.len() as u64));
            let streamed = ReaderBuilder::new().build(std::io::Cursor::new(input.into_bytes()), "x.json");
            assert_eq!((counts, requests, read), read_whole(streamed));
        }
    }

    /// `lines` of a sample, each parsed and written back pretty-printed.
    fn pretty(sample: &str, lines: std::ops::Range<usize>) -> Vec<String> {
        sample
            .lines()
            .skip(lines.start)
            .take(lines.len())
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("sample line is JSON");
                serde_json::to_string_pretty(&v).expect("serialises")
            })
            .collect()
    }

    #[test]
    fn pretty_printed_documents_and_arrays_are_read_record_by_record() {
        let litellm = include_str!("../../../sample_logs/litellm.jsonl");
        let otel = include_str!("../../../sample_logs/otel.jsonl");
        // An indented array of four payloads: four records, each a line.
        let array = format!("[\n{}\n]\n", pretty(litellm, 0..4).join(",\n"));
        let mut reader =
            ReaderBuilder::new().with_chunk_bytes(300).build(std::io::Cursor::new(array.into_bytes()), "x.json");
        let mut counts = LineCounts::default();
        for slices in &mut reader {
            slices.expect("chunk parses").iter().for_each(|s| counts.add(&s.counts));
        }
        assert_eq!(reader.format().map(Format::name), Some("litellm"));
        assert_eq!(
            (counts.lines_read, counts.lines_ingested, counts.rows_written, counts.lines_rejected),
            (4, 4, 4, 0)
        );
        // Two indented OTLP documents one after the other (a saved export, twice).
        let docs = pretty(otel, 0..2).join("\n");
        let (counts, requests, _) = read_all(&docs, ReaderBuilder::new());
        assert_eq!(
            (counts.lines_read, counts.rows_written, counts.records_skipped, counts.lines_rejected),
            (2, 2, 3, 0)
        );
        let lines: Vec<u64> = requests
            .iter()
            .flat_map(|b| {
                b.column_by_name("source_line")
                    .unwrap()
                    .as_any()
                    .downcast_ref::<arrow_array::UInt64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect();
        let second = pretty(otel, 0..1)[0].lines().count() as u64 + 1;
        assert_eq!(lines, [1, second], "each record's line is the line it starts on");
        // Cut short: the complete document is kept, the rest is one reject.
        let cut = &docs[..docs.len() - 40];
        let (counts, requests, rejects) = read_all(cut, ReaderBuilder::new());
        assert_eq!((counts.lines_read, counts.rows_written, counts.lines_rejected), (2, 1, 1));
        assert_eq!((requests.len(), rejects.iter().map(RecordBatch::num_rows).sum::<usize>()), (1, 1));
    }

    #[test]
    fn requests_with_an_optional_field_nulled_are_counted() {
        let line = |cap: &str| {
            format!(
                "{{\"ts\":0,\"request\":{{\"max_tokens\":{cap}}},\"response\":{{\"object\":\"chat.completion\",\"choices\":[],\"usage\":{{\"prompt_tokens\":1,\"completion_tokens\":2}}}}}}\n"
            )
        };
        let log = ["-1", "64", "-1", "1.5"].map(line).concat();
        let (counts, _, _) = read_all(&log, ReaderBuilder::new());
        assert_eq!((counts.rows_written, counts.lines_rejected, counts.fields_nulled), (4, 0, 3));
    }

    #[test]
    fn finish_reasons_outside_the_table_are_counted() {
        let line = |f: &str| {
            format!(
                "{{\"ts\":0,\"model\":\"m\",\"prompt_tokens\":1,\"completion_tokens\":2,\"finish_reason\":\"{f}\"}}\n"
            )
        };
        let log = ["stop", "FINISH_REASON_WHATEVER", "", "tool_call", "weird"].map(line).concat();
        let (counts, requests, _) = read_all(&log, ReaderBuilder::new());
        assert_eq!((counts.rows_written, counts.finish_reasons_unmapped), (5, 2));
        let finish: Vec<Option<&str>> = requests
            .iter()
            .flat_map(|b| {
                b.column_by_name("finish_reason")
                    .unwrap()
                    .as_any()
                    .downcast_ref::<arrow_array::StringArray>()
                    .unwrap()
                    .iter()
            })
            .collect();
        assert_eq!(finish, [Some("stop"), Some("other"), None, Some("tool_calls"), Some("other")]);
    }

    #[test]
    fn a_profile_line_is_a_profiles_row_with_engine_token_rows() {
        let log = "{\"request_id\":\"r1\",\"inference_steps\":3,\"prefill_latency_ms\":20,\"decode_latency_ms\":[5,6.5]}\n{\"request_id\":\"r2\",\"inference_steps\":1,\"prefill_latency_ms\":20,\"decode_latency_ms\":7}\n";
        let mut reader = ReaderBuilder::new().build(std::io::Cursor::new(log.as_bytes().to_vec()), "p.jsonl");
        let (mut counts, mut profiles, mut tokens) = (LineCounts::default(), 0, Vec::new());
        for slices in &mut reader {
            for s in slices.expect("chunk parses") {
                counts.add(&s.counts);
                profiles += s.rows(tables::PROFILES);
                tokens.extend(s.batch(tables::TOKENS).cloned());
            }
        }
        assert_eq!(reader.format().map(Format::name), Some("profile"));
        assert_eq!((counts.lines_read, counts.lines_ingested, counts.lines_rejected), (2, 1, 1));
        assert_eq!((counts.rows_written, counts.profiles_written, counts.tokens_written), (0, 1, 2));
        assert_eq!(profiles, 1);
        let t = &tokens[0];
        let source = t.column_by_name("source").unwrap().as_any().downcast_ref::<arrow_array::StringArray>().unwrap();
        assert_eq!((source.value(0), source.value(1)), ("engine", "engine"));
        let itl = t.column_by_name("itl_ms").unwrap().as_any().downcast_ref::<arrow_array::Float64Array>().unwrap();
        assert_eq!((itl.value(0), itl.value(1)), (5.0, 6.5));
    }

    #[test]
    fn builders_are_sized_from_the_largest_slice_of_the_last_chunk() {
        let line = |m: &str| format!("{{\"ts\":0,\"model\":\"{m}\",\"prompt_tokens\":1,\"completion_tokens\":2}}\n");
        let log = [line("aa"), line("bbbb"), line("c")].concat();
        let mut reader = ReaderBuilder::new().build(std::io::Cursor::new(log.into_bytes()), "x.jsonl");
        assert_eq!(reader.sizes.requests, BuilderSizes::default());
        let slices = reader.next().expect("one chunk").expect("chunk parses");
        let rows: usize = slices.iter().map(|s| s.rows(tables::REQUESTS)).sum();
        assert_eq!((slices.len(), rows), (1, 3));
        let model = RequestsBuilder::DEF.columns.iter().position(|c| c.name == "model").unwrap();
        let sizes = &reader.sizes.requests;
        assert_eq!((sizes.rows, sizes.bytes.len(), sizes.bytes[model]), (3, RequestsBuilder::DEF.columns.len(), 7));
        assert_eq!(reader.sizes.tokens.rows, 0);
    }

    #[test]
    fn undetectable_files_are_rejected_line_by_line() {
        let (counts, _, rejects) = read_all("hello\nworld\n", ReaderBuilder::new());
        assert_eq!((counts.lines_read, counts.lines_rejected), (2, 2));
        assert_eq!(rejects.iter().map(RecordBatch::num_rows).sum::<usize>(), 2);
    }

    /// Reads `input` whole; returns the counts, the `kernels` batches and the rejects' errors.
    fn read_tables(input: Vec<u8>, builder: ReaderBuilder) -> (LineCounts, Vec<RecordBatch>, Vec<String>) {
        let mut reader = builder.with_chunk_bytes(256).build(std::io::Cursor::new(input), "t.json");
        let (mut counts, mut kernels, mut errors) = (LineCounts::default(), Vec::new(), Vec::new());
        for slices in &mut reader {
            for s in slices.expect("chunk parses") {
                counts.add(&s.counts);
                kernels.extend(s.batch(tables::KERNELS).cloned());
                if let Some(r) = s.batch(tables::REJECTS) {
                    let e = r.column_by_name("error").unwrap();
                    let e = e.as_any().downcast_ref::<arrow_array::StringArray>().unwrap();
                    errors.extend(e.iter().map(|x| x.unwrap().to_string()));
                }
            }
        }
        assert!(reader.finish().is_ok());
        (counts, kernels, errors)
    }

    #[test]
    fn kernel_trace_sample_events_are_rows_skips_or_rejects() {
        // tests/data/formats/kernel_trace.sample.json: 19 events; 7 of phases
        // without rows (3 M, s, f, i, C); 7 X and 2 B/E pairs give 9 rows from
        // 11 events; the last event (an X without ts) is rejected.
        let sample = include_bytes!("../../../tests/data/formats/kernel_trace.sample.json").to_vec();
        let (counts, kernels, errors) = read_tables(sample, ReaderBuilder::new());
        assert_eq!(
            counts,
            LineCounts {
                lines_read: 12,
                lines_ingested: 11,
                rows_written: 9,
                lines_rejected: 1,
                lines_skipped: 7,
                records_skipped: 0,
                records_rejected: 0,
                tokens_written: 0,
                profiles_written: 0,
                finish_reasons_unmapped: 0,
                fields_nulled: 0
            }
        );
        assert_eq!(kernels.iter().map(RecordBatch::num_rows).sum::<usize>(), 9);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].contains("numeric ts (missing)"), "{errors:?}");
    }

    #[test]
    fn unmatched_begin_and_end_events_are_rejected() {
        let doc = br#"[{"ph":"E","tid":1,"ts":1},{"ph":"B","tid":1,"ts":2},{"ph":"B","tid":2,"ts":3},{"ph":"E","tid":2,"ts":5},{"ph":"B","tid":3,"ts":9},{"ph":"E","tid":3,"ts":8}]"#;
        let (counts, kernels, errors) = read_tables(doc.to_vec(), ReaderBuilder::new());
        // tid 2 pairs; tid 1's E comes first and its B never ends; tid 3 ends before it begins.
        assert_eq!(
            (counts.lines_read, counts.lines_ingested, counts.lines_rejected, counts.rows_written),
            (6, 2, 4, 1)
        );
        assert_eq!(kernels.iter().map(RecordBatch::num_rows).sum::<usize>(), 1);
        assert!(errors.iter().any(|e| e.contains("E event without an open B")), "{errors:?}");
        assert!(errors.iter().any(|e| e.contains("B event without an E")), "{errors:?}");
        assert_eq!(errors.iter().filter(|e| e.contains("ends before")).count(), 2, "{errors:?}");
    }

    #[test]
    fn a_forced_trace_format_reads_a_truncated_document() {
        let doc = b"{\"traceEvents\": [{\"ph\":\"X\",\"ts\":1,\"dur\":2},\n{\"ph\":\"X\",\"ts\":3,";
        let format = "kernel_trace".parse().ok();
        let (counts, kernels, errors) = read_tables(doc.to_vec(), ReaderBuilder::new().with_format(format));
        assert_eq!((counts.lines_read, counts.lines_ingested, counts.lines_rejected), (2, 1, 1));
        assert_eq!(kernels.iter().map(RecordBatch::num_rows).sum::<usize>(), 1);
        assert!(errors[0].contains("ends inside this event") && errors[0].contains("byte 44"), "{errors:?}");
    }

    #[test]
    fn records_inside_a_line_are_rows_skips_or_rejects() {
        let otel = include_str!("../../../sample_logs/otel.jsonl");
        let (counts, requests, rejects) = read_all(otel, ReaderBuilder::new());
        // 9 lines: 8 parse (13 spans: 7 requests, 5 other spans, 1 failed call
        // without usage), the last is cut short.
        assert_eq!(
            counts,
            LineCounts {
                lines_read: 9,
                lines_ingested: 8,
                rows_written: 7,
                lines_rejected: 1,
                lines_skipped: 0,
                records_skipped: 5,
                records_rejected: 1,
                tokens_written: 0,
                profiles_written: 0,
                finish_reasons_unmapped: 0,
                fields_nulled: 0
            }
        );
        assert!(counts.reconciles());
        assert_eq!(requests.iter().map(RecordBatch::num_rows).sum::<usize>(), 7);
        let records: Vec<Option<String>> = rejects
            .iter()
            .flat_map(|b| {
                let col =
                    b.column_by_name("record").unwrap().as_any().downcast_ref::<arrow_array::StringArray>().unwrap();
                col.iter().map(|v| v.map(str::to_string)).collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(records, vec![Some("6e0c63257de34c93".to_string()), None]);
    }

    #[test]
    fn a_forced_format_without_a_model_gets_the_default_model_too() {
        let line = "{\"ts\":\"2024-06-01T00:00:00Z\",\"response\":{\"generated_text\":\"x\",\"details\":{\"finish_reason\":\"eos_token\",\"generated_tokens\":1,\"prefill\":[{\"id\":1}]}}}\n";
        for (builder, want) in [
            (ReaderBuilder::new().with_format("tgi".parse().ok()), "tgi:x"),
            (ReaderBuilder::new().with_format("tgi".parse().ok()).with_default_model(Some("llama".into())), "llama"),
        ] {
            let (counts, requests, _) = read_all(line, builder);
            assert_eq!(counts.rows_written, 1);
            let model = requests[0].column_by_name("model").unwrap();
            let model = model.as_any().downcast_ref::<arrow_array::StringArray>().unwrap();
            assert_eq!(model.value(0), want);
        }
    }

    #[test]
    fn traces_without_a_model_get_the_format_and_file_stem() {
        assert_eq!(default_model_for("mooncake".parse().unwrap(), "s3://b/trace.jsonl.gz"), "mooncake:trace");
    }

    #[test]
    fn a_row_appends_to_its_own_tables_builder_only() {
        use crate::catalog::evals::EvalRow;
        use crate::catalog::kernels::KernelRow;
        use crate::catalog::CATALOG;
        let origin = LineOrigin { file: "f", format: "eval", line_no: 1, byte_offset: 0 };
        let eval: Box<dyn AnyTableRow> = Box::new(EvalRow { request_id: "r".into(), ..Default::default() });
        let kernel: Box<dyn AnyTableRow> = Box::new(KernelRow::default());
        let mut builder = eval.new_builder();
        assert_eq!(builder.def().name, "evals");
        assert_eq!(eval.append_to(builder.as_mut(), &origin, &Redactor::default()).ok(), Some(None));
        assert_eq!(builder.rows(), 1);
        let err = kernel.append_to(builder.as_mut(), &origin, &Redactor::default());
        assert!(err.is_err_and(|e| e.to_string().contains("kernels row was given the builder of evals")));
        let batch = builder.finish_batch().expect("one row");
        assert_eq!((batch.num_rows(), builder.rows()), (1, 0));
        assert!(CATALOG.iter().any(|t| t.name == eval.table().name && t.schema() == batch.schema()));
    }
}
