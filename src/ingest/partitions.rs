//! Rows wait here, per table and partition (day), until they can go to a
//! writer thread as a [`RowGroupJob`]. Row groups are cut by rows alone, as
//! a function of the partition's row count: full groups of
//! [`ROW_GROUP_ROWS`] (fewer when the partition's rows are so wide that a
//! last group would pass [`ROW_GROUP_BYTES`]), the last one taking the rows
//! after them when they are fewer than half a group (so it holds from half
//! a group to one and a half: [`super::budget::MAX_GROUP_ROWS`]), or the whole partition
//! when it is smaller. So the layout of the files depends neither on the
//! memory budget nor on timing, and no group is smaller than half a full
//! one unless the whole partition is.
//!
//! A partition's rows stream to the writer of its open row group as they
//! arrive, so writers encode while the input is still being parsed; a full
//! group stays open until half a group more has come (those rows then open
//! the next group, on the next writer) or the input ends (they join it).
//! Where the budget has room, the rows after a full group begin the next
//! group on another writer at once, kept until half a group has come; if the
//! input ends first, that writer drops the group unwritten and the kept rows
//! join the full one (so the last group of a day is not encoded by one
//! writer after the input ends). An open group holds a codec and a page per
//! column and its encoded rows ([`OPEN_GROUP_BYTES`] plus [`ENCODED_SHARE`]
//! of their bytes), counted in the budget: groups open while they fit in
//! half of it, and other partitions wait for whole groups. Over the budget,
//! the partitions holding the most memory spill their waiting rows to disk
//! ([`super::spill`]) and the writer reads them back.
//!
//! A partition with an open group is finished, as at the end of the input,
//! once a full group's worth of input lines has been read after the one that
//! gave its last row: a log sorted by time has left that day behind, and its
//! last group is written then instead of held open (with a codec and a page
//! per column, and its encoded pages) until the input ends. Rows of that day
//! that still come start the partition anew, in groups of their own: the
//! row groups then depend on the order of the input too, never on the
//! budget, the threads or timing.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use arrow::array::RecordBatch;
use tokscope_core::catalog::TableDef;

use super::budget::{MemoryPlan, ENCODED_SHARE, OPEN_GROUP_BYTES, ROW_GROUP_BYTES, ROW_GROUP_ROWS};
use super::spill::{SpillDir, SpillFile, SpillReader};
use crate::error::Result;

/// Some consecutive rows of a partition: in memory, or rows
/// `offset..offset + rows` of a batch in a spill file.
#[derive(Debug, Clone)]
enum Rows {
    Memory(RecordBatch),
    Spilled { file: Arc<SpillFile>, index: usize, offset: usize },
}

#[derive(Debug, Clone)]
struct Piece {
    rows: Rows,
    len: usize,
    /// The Arrow bytes these rows stand for (in memory or not).
    bytes: usize,
}

impl Piece {
    fn in_memory(&self) -> usize {
        match self.rows {
            Rows::Memory(_) => self.bytes,
            Rows::Spilled { .. } => 0,
        }
    }

    /// Splits off the first `n` rows (`0 < n < len`).
    fn split_front(&mut self, n: usize) -> Piece {
        let front_bytes = (self.bytes as u128 * n as u128 / self.len as u128) as usize;
        let front = match &mut self.rows {
            Rows::Memory(batch) => {
                let front = batch.slice(0, n);
                *batch = batch.slice(n, self.len - n);
                Rows::Memory(front)
            }
            Rows::Spilled { file, index, offset } => {
                let front = Rows::Spilled { file: file.clone(), index: *index, offset: *offset };
                *offset += n;
                front
            }
        };
        self.len -= n;
        self.bytes -= front_bytes;
        Piece { rows: front, len: n, bytes: front_bytes }
    }
}

/// Where a [`RowGroupJob`] writes: a Parquet file being written.
pub trait RowGroupSink {
    /// Appends rows to the row group in progress.
    fn append(&mut self, batch: &RecordBatch) -> Result<()>;
    /// Ends the row group in progress.
    fn end_row_group(&mut self) -> Result<()>;
    /// Drops the row group in progress unwritten (its rows went elsewhere).
    fn discard_row_group(&mut self);
}

/// Some rows of a row group: how many, and whether the group ends after them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    rows: usize,
    ends_group: bool,
}

/// What a [`RowGroupJob`] does to its writer's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobKind {
    /// Appends the job's rows, cut into groups by its segments.
    Write,
    /// Drops the group in progress unwritten: a group begun before the end
    /// of the one before it was known, whose rows joined that one instead.
    Discard,
}

/// Rows of one partition for one writer thread to encode: `segments` gives
/// the rows of each (part of a) row group, in order (they add up to the
/// pieces' rows). The first segment may continue the group the writer's
/// file has open; the last may leave its group open for the next job.
#[derive(Debug)]
pub struct RowGroupJob {
    /// The table.
    pub table: &'static TableDef,
    /// The partition (days since the epoch; 0 for tables without one).
    pub day: i32,
    /// The writer thread that encodes it (all of a row group's rows go to one).
    pub writer: usize,
    kind: JobKind,
    pieces: Vec<Piece>,
    segments: Vec<Segment>,
    /// What the job holds in memory until it is written (counted in flight).
    memory: usize,
    in_flight: Arc<InFlight>,
}

/// The Arrow bytes of the jobs handed to writers and not written yet, in
/// all and per writer: a job adds its own when made and takes them back when
/// dropped, and the reader waits while too many are in flight.
#[derive(Debug)]
struct InFlight {
    by_writer: Vec<AtomicUsize>,
    lock: Mutex<()>,
    freed: Condvar,
}

impl InFlight {
    fn new(writers: usize) -> InFlight {
        let by_writer = (0..writers.max(1)).map(|_| AtomicUsize::new(0)).collect();
        InFlight { by_writer, lock: Mutex::new(()), freed: Condvar::new() }
    }

    /// The bytes in flight to all writers.
    fn get(&self) -> usize {
        self.by_writer.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// Where `writer`'s bytes are counted (and its unsent ones in `send_jobs`).
    fn slot(&self, writer: usize) -> usize {
        writer % self.by_writer.len()
    }

    fn add(&self, writer: usize, bytes: usize) {
        self.by_writer[self.slot(writer)].fetch_add(bytes, Ordering::Relaxed);
    }

    fn sub(&self, writer: usize, bytes: usize) {
        self.by_writer[self.slot(writer)].fetch_sub(bytes, Ordering::Relaxed);
        if bytes > 0 {
            // Under the lock, so a waiter between its check and its wait hears it.
            let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.freed.notify_all();
        }
    }

    /// Whether the reader must wait: more than `bound` bytes in flight, or
    /// every writer with more than [`WRITER_QUEUE_BYTES`] handed to it. The
    /// bytes of `unsent` (jobs made but not handed over, per writer) do not
    /// count: only writers bring the bytes down, and they have not got those.
    fn too_many(&self, bound: usize, unsent: &[usize]) -> bool {
        let unsent_total: usize = unsent.iter().sum();
        let queued = |w: usize| self.by_writer[w].load(Ordering::Relaxed).saturating_sub(unsent[w]);
        self.get() > bound + unsent_total || (0..self.by_writer.len()).all(|w| queued(w) > WRITER_QUEUE_BYTES)
    }

    /// Waits while [`InFlight::too_many`].
    fn wait(&self, bound: usize, unsent: &[usize]) {
        let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        while self.too_many(bound, unsent) {
            guard = match self.freed.wait_timeout(guard, Duration::from_millis(100)) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

impl RowGroupJob {
    /// Writes the rows to `sink`, ending a row group after each segment that
    /// ends one. Spilled rows are read back one batch at a time.
    pub fn write(self, sink: &mut impl RowGroupSink) -> Result<()> {
        if self.kind == JobKind::Discard {
            sink.discard_row_group();
            return Ok(());
        }
        let mut reader = SpillReader::default();
        let mut segments = self.segments.iter().copied();
        let mut current = next_with_rows(&mut segments, sink)?;
        for piece in &self.pieces {
            let mut batch = match &piece.rows {
                Rows::Memory(batch) => batch.clone(),
                Rows::Spilled { file, index, offset } => reader.read(file, *index)?.slice(*offset, piece.len),
            };
            while batch.num_rows() > 0 {
                let Some(segment) = current.as_mut() else {
                    return Err(internal_err!("a row-group job has more rows than its segments"));
                };
                let n = segment.rows.min(batch.num_rows());
                sink.append(&batch.slice(0, n))?;
                batch = batch.slice(n, batch.num_rows() - n);
                segment.rows -= n;
                if segment.rows == 0 {
                    if segment.ends_group {
                        sink.end_row_group()?;
                    }
                    current = next_with_rows(&mut segments, sink)?;
                }
            }
        }
        reader.close();
        match current {
            Some(_) => Err(internal_err!("a row-group job has fewer rows than its segments")),
            None => Ok(()),
        }
    }
}

/// The next segment that has rows, ending the groups that segments without
/// rows end (a group whose rows all went out before its end was known).
fn next_with_rows(
    segments: &mut impl Iterator<Item = Segment>,
    sink: &mut impl RowGroupSink,
) -> Result<Option<Segment>> {
    for segment in segments.by_ref() {
        if segment.rows > 0 {
            return Ok(Some(segment));
        }
        if segment.ends_group {
            sink.end_row_group()?;
        }
    }
    Ok(None)
}

impl Drop for RowGroupJob {
    fn drop(&mut self) {
        self.in_flight.sub(self.writer, self.memory);
    }
}

/// A row group whose rows go to a writer as they come, before its end is known.
#[derive(Debug, Clone, Copy)]
struct OpenGroup {
    writer: usize,
    /// Rows sent so far.
    sent: usize,
    /// What it holds in its writer (counted in the budget).
    charge: usize,
}

impl OpenGroup {
    fn new(writer: usize) -> OpenGroup {
        OpenGroup { writer, sent: 0, charge: OPEN_GROUP_BYTES }
    }

    /// The group once `pieces` went to its writer too; `open_bytes` (what
    /// all open groups hold) follows its charge.
    fn sent_more(self, pieces: &[Piece], open_bytes: &mut usize) -> OpenGroup {
        let (rows, bytes) = pieces.iter().fold((0, 0), |(r, b), p| (r + p.len, b + p.bytes));
        let grown = OpenGroup { sent: self.sent + rows, charge: self.charge + bytes / ENCODED_SHARE, ..self };
        *open_bytes = *open_bytes + grown.charge - self.charge;
        grown
    }
}

/// The rows waiting in one partition (not counting an open group's sent rows).
struct Partition {
    /// Rows in a full row group, fixed by the partition's first rows.
    group: usize,
    /// Arrow bytes per row of the partition's first rows.
    row_bytes: usize,
    pieces: VecDeque<Piece>,
    rows: usize,
    memory: usize,
    open: Option<OpenGroup>,
    /// The group after the full open one, begun before the open one's end
    /// is known ([`Partitions::release`]), and the rows sent to it, kept
    /// (shared, not copied) until it holds half a group.
    next: Option<OpenGroup>,
    kept: Vec<Piece>,
    /// The input lines read so far ([`Partitions::lines`]) when this
    /// partition's last rows came.
    last_line: u64,
}

impl Partition {
    /// A partition whose first rows are `len` rows of `bytes` Arrow bytes:
    /// full row groups of [`ROW_GROUP_ROWS`], or fewer where a last group of
    /// one and a half as many such rows would pass `max_bytes`.
    fn new(len: usize, bytes: usize, max_bytes: usize) -> Partition {
        let fitting = max_bytes as u128 * 2 * len as u128 / (3 * bytes.max(1) as u128);
        let group = fitting.clamp(1, ROW_GROUP_ROWS as u128) as usize;
        let row_bytes = bytes.div_ceil(len.max(1));
        Partition {
            group,
            row_bytes,
            pieces: VecDeque::new(),
            rows: 0,
            memory: 0,
            open: None,
            next: None,
            kept: Vec::new(),
            last_line: 0,
        }
    }

    /// What the rows kept for the next group hold in memory.
    fn kept_memory(&self) -> usize {
        self.kept.iter().map(Piece::in_memory).sum()
    }

    /// Rows that must follow a full group before it ends (fewer join it):
    /// half a full one.
    fn hold(&self) -> usize {
        self.group / 2
    }

    /// Takes the first `n` rows out.
    fn take_front(&mut self, n: usize) -> Vec<Piece> {
        let mut taken = Vec::new();
        let mut left = n;
        while left > 0 {
            let Some(mut piece) = self.pieces.pop_front() else { break };
            if piece.len > left {
                let front = piece.split_front(left);
                self.pieces.push_front(piece);
                piece = front;
            }
            left -= piece.len;
            self.rows -= piece.len;
            self.memory -= piece.in_memory();
            taken.push(piece);
        }
        taken
    }
}

/// The most Arrow bytes in flight to the writers without a budget
/// (`--memory-limit none`).
const IN_FLIGHT_UNLIMITED_BYTES: usize = 1 << 30;

/// What a writer may have handed to it and not written before the reader
/// waits, once every writer has as much: a few of the reader's chunks, so
/// no writer runs short while the next one is parsed, and the rows read
/// ahead of the writers stay this much per writer instead of growing while
/// parsing outruns encoding.
const WRITER_QUEUE_BYTES: usize = 32 << 20;

/// Fewest rows that open a row group before it is full: a partition with
/// fewer waits (a trickle of rows does not hold an open group).
const OPEN_MIN_ROWS: usize = 1024;

/// Every partition's buffered rows, the budget they share with the jobs in
/// flight, and where they spill.
pub struct Partitions {
    parts: BTreeMap<(&'static str, i32), (&'static TableDef, Partition)>,
    /// Input lines read so far: the clock that tells a partition left behind.
    lines: u64,
    row_group_bytes: usize,
    writers: usize,
    /// The writer of the next row group (each group goes to the next in turn).
    next_writer: usize,
    /// What the row groups open in a writer's file hold, and the most they may (half the budget).
    open_bytes: usize,
    open_budget: Option<usize>,
    budget: Option<usize>,
    memory: usize,
    in_flight: Arc<InFlight>,
    /// The most bytes in flight before the reader waits for the writers.
    in_flight_bound: usize,
    spill: SpillDir,
    spilled_bytes: u64,
}

impl Partitions {
    /// Empty buffers sized by `plan`; spills go to a directory named after `run_id`.
    pub fn new(plan: &MemoryPlan, run_id: &str) -> Partitions {
        Partitions {
            parts: BTreeMap::new(),
            lines: 0,
            row_group_bytes: ROW_GROUP_BYTES,
            writers: plan.writer_threads.max(1),
            next_writer: 0,
            open_bytes: 0,
            open_budget: plan.buffer_bytes.map(|b| b / 2),
            budget: plan.buffer_bytes,
            memory: 0,
            in_flight: Arc::new(InFlight::new(plan.writer_threads)),
            in_flight_bound: plan.buffer_bytes.map_or(IN_FLIGHT_UNLIMITED_BYTES, |b| b / 2),
            spill: SpillDir::new(run_id),
            spilled_bytes: 0,
        }
    }

    /// Hands `jobs` (made together: by one [`Partitions::push`], or by
    /// [`Partitions::finish_left_behind`]) to `send` in order, waiting
    /// before each while the jobs already handed to writers hold more than
    /// half the budget, or more than [`WRITER_QUEUE_BYTES`] for every
    /// writer: the reader runs ahead of the writers only while one of them
    /// may run short of rows, and never by more than half the budget. The
    /// jobs not yet handed over are not waited for: only writers can bring
    /// the bytes in flight down.
    pub fn send_jobs(&self, jobs: Vec<RowGroupJob>, mut send: impl FnMut(RowGroupJob) -> Result<()>) -> Result<()> {
        let mut unsent = vec![0; self.in_flight.by_writer.len()];
        jobs.iter().for_each(|j| unsent[self.in_flight.slot(j.writer)] += j.memory);
        for job in jobs {
            self.in_flight.wait(self.in_flight_bound, &unsent);
            unsent[self.in_flight.slot(job.writer)] -= job.memory;
            send(job)?;
        }
        Ok(())
    }

    /// Arrow bytes written to spill files so far.
    pub fn spilled_bytes(&self) -> u64 {
        self.spilled_bytes
    }

    /// Buffers `batch` (rows of `table` in partition `day`); returns the
    /// row groups it completed, with the rows spilled as the budget needs.
    pub fn push(&mut self, table: &'static TableDef, day: i32, batch: RecordBatch) -> Result<Vec<RowGroupJob>> {
        let (len, bytes) = (batch.num_rows(), batch.get_array_memory_size());
        if len == 0 {
            return Ok(Vec::new());
        }
        let max_bytes = self.row_group_bytes;
        let (_, part) =
            self.parts.entry((table.name, day)).or_insert_with(|| (table, Partition::new(len, bytes, max_bytes)));
        part.pieces.push_back(Piece { rows: Rows::Memory(batch), len, bytes });
        part.rows += len;
        part.memory += bytes;
        part.last_line = self.lines;
        self.memory += bytes;
        let mut jobs = Vec::new();
        while let Some((pieces, segment, writer)) = self.release(table, day)? {
            self.memory -= pieces.iter().map(Piece::in_memory).sum::<usize>();
            jobs.push(self.job(table, day, writer, JobKind::Write, pieces, vec![segment])?);
        }
        self.hold_budget()?;
        Ok(jobs)
    }

    /// Counts `n` more input lines read: the rows pushed next came from them.
    pub fn read_lines(&mut self, n: u64) {
        self.lines += n;
    }

    /// The last row groups of the partitions with an open group that got no
    /// rows from the last full row group's worth of input lines
    /// ([`Partitions::read_lines`]): a log sorted by time has moved past
    /// their day, so their last groups are written now instead of held open,
    /// with their codecs and pages, until the input ends. Rows of such a day
    /// that still come start a partition anew. A partition of a table with
    /// several rows a line (`tokens`) counts lines all the same, so the day a
    /// log has left behind is one day for every table. A partition without
    /// an open group holds only rows waiting (fewer than [`OPEN_MIN_ROWS`],
    /// or spilled under a tight budget): it stays, so a table whose rows come
    /// in rare bursts is not cut into a group a burst.
    pub fn finish_left_behind(&mut self) -> Result<Vec<RowGroupJob>> {
        let lines = self.lines;
        let behind = self.parts.iter().filter(|(_, (_, p))| p.open.is_some() && lines - p.last_line >= p.group as u64);
        let behind: Vec<(&'static str, i32)> = behind.map(|(k, _)| *k).collect();
        let mut jobs = Vec::new();
        for key in behind {
            if let Some((table, part)) = self.parts.remove(&key) {
                self.finish_partition(table, key.1, part, &mut jobs)?;
            }
        }
        Ok(jobs)
    }

    /// The next rows of partition `(table, day)` that can go to a writer,
    /// with the writer: rows for its open row group (opened if the budget
    /// holds one more), or the end of that group once half a group follows
    /// it; without an open group, a whole group that half a group follows.
    ///
    /// The rows after a full open group begin the next group at once, on
    /// the next writer, while the budget has room for them twice (in the
    /// writer and kept here): a log sorted by time fills one partition at a
    /// time, and otherwise the writer of its last group would get all of it
    /// at the end of the input, one thread encoding while the others wait.
    /// Once that group holds half a group, the open one ends and it becomes
    /// the open one; if the partition ends first, its rows join the open
    /// group and the writer drops the begun one ([`Partitions::finish`]).
    /// The groups are the same either way.
    fn release(&mut self, table: &'static TableDef, day: i32) -> Result<Option<(Vec<Piece>, Segment, usize)>> {
        let held = self.held();
        let Partitions { parts, writers, next_writer, open_bytes, open_budget, budget, memory, .. } = self;
        let (_, part) = parts.get_mut(&(table.name, day)).ok_or_else(|| internal_err!("partition buffer vanished"))?;
        let (group, hold, waiting) = (part.group, part.hold(), part.rows);
        let fits = open_budget.is_none_or(|b| *open_bytes + OPEN_GROUP_BYTES <= b);
        if part.open.is_none() && waiting >= OPEN_MIN_ROWS.min(group) && fits {
            let open = OpenGroup::new(in_turn(next_writer, *writers));
            *open_bytes += open.charge;
            part.open = Some(open);
        }
        if let Some(open) = part.open.filter(|o| o.sent == group && part.next.is_none()) {
            let room_to_keep = budget.is_none_or(|b| held + hold * part.row_bytes <= b / 2);
            if (1..hold).contains(&waiting) && fits && room_to_keep && *writers > 1 {
                // On another writer than the open group's, whose file for
                // this partition has that group in progress.
                let mut writer = in_turn(next_writer, *writers);
                if writer == open.writer {
                    writer = in_turn(next_writer, *writers);
                }
                let next = OpenGroup::new(writer);
                *open_bytes += next.charge;
                part.next = Some(next);
            }
        }
        match (part.open, part.next) {
            (None, _) if waiting >= group + hold => {
                let pieces = part.take_front(group);
                let writer = in_turn(next_writer, *writers);
                Ok(Some((pieces, Segment { rows: group, ends_group: true }, writer)))
            }
            (None, _) => Ok(None),
            (Some(open), None) if open.sent < group && waiting > 0 => {
                let n = waiting.min(group - open.sent);
                let pieces = part.take_front(n);
                part.open = Some(open.sent_more(&pieces, open_bytes));
                Ok(Some((pieces, Segment { rows: n, ends_group: false }, open.writer)))
            }
            (Some(open), None) if open.sent == group && waiting >= hold => {
                // Full, and not the partition's last: it ends here.
                part.open = None;
                *open_bytes -= open.charge;
                Ok(Some((Vec::new(), Segment { rows: 0, ends_group: true }, open.writer)))
            }
            (Some(open), Some(next)) if next.sent >= hold => {
                // Half a group follows the open one: it ends, and the next is open.
                *memory -= part.kept_memory();
                part.kept.clear();
                part.open = Some(next);
                part.next = None;
                *open_bytes -= open.charge;
                Ok(Some((Vec::new(), Segment { rows: 0, ends_group: true }, open.writer)))
            }
            (Some(_), Some(next)) if waiting > 0 => {
                let n = waiting.min(group - next.sent);
                let pieces = part.take_front(n);
                part.next = Some(next.sent_more(&pieces, open_bytes));
                part.kept.extend(pieces.iter().cloned());
                *memory += pieces.iter().map(Piece::in_memory).sum::<usize>();
                Ok(Some((pieces, Segment { rows: n, ends_group: false }, next.writer)))
            }
            (Some(_), _) => Ok(None),
        }
    }

    /// The rows left in every partition, as its last row group: the open
    /// group with the rows waiting after it (fewer than half a group), or
    /// the rows waiting (fewer than a group and a half).
    pub fn finish(&mut self) -> Result<Vec<RowGroupJob>> {
        let parts = std::mem::take(&mut self.parts);
        let mut jobs = Vec::new();
        for ((_, day), (table, part)) in parts {
            self.finish_partition(table, day, part, &mut jobs)?;
        }
        Ok(jobs)
    }

    /// The jobs that write `part`'s last row group (taken out of `parts`):
    /// the open group with the rows waiting after it, or the rows waiting.
    fn finish_partition(
        &mut self,
        table: &'static TableDef,
        day: i32,
        mut part: Partition,
        jobs: &mut Vec<RowGroupJob>,
    ) -> Result<()> {
        let mut rows = part.rows;
        let waiting = part.take_front(rows);
        self.memory -= waiting.iter().map(Piece::in_memory).sum::<usize>();
        // A group begun after the full open one, with fewer than half a
        // group: its rows join the open one, and its writer drops it.
        let mut pieces = Vec::new();
        if let Some(next) = part.next.take() {
            self.open_bytes -= next.charge;
            self.memory -= part.kept_memory();
            rows += part.kept.iter().map(|p| p.len).sum::<usize>();
            pieces.append(&mut part.kept);
            jobs.push(self.job(table, day, next.writer, JobKind::Discard, Vec::new(), Vec::new())?);
        }
        pieces.extend(waiting);
        let writer = match part.open {
            Some(o) => {
                self.open_bytes -= o.charge;
                o.writer
            }
            None if rows == 0 => return Ok(()),
            None => in_turn(&mut self.next_writer, self.writers),
        };
        jobs.push(self.job(table, day, writer, JobKind::Write, pieces, vec![Segment { rows, ends_group: true }])?);
        Ok(())
    }

    /// A job of `kind` for `pieces`, counted in flight. Over the budget, its
    /// rows in memory are spilled first, so what writers hold stays bounded
    /// however many of them there are.
    fn job(
        &mut self,
        table: &'static TableDef,
        day: i32,
        writer: usize,
        kind: JobKind,
        mut pieces: Vec<Piece>,
        segments: Vec<Segment>,
    ) -> Result<RowGroupJob> {
        let mut memory: usize = pieces.iter().map(Piece::in_memory).sum();
        if let Some(budget) = self.budget {
            if memory > 0 && self.held() + memory > budget {
                self.spilled_bytes += memory as u64;
                spill(&self.spill, &mut pieces)?;
                memory = 0;
            }
        }
        self.in_flight.add(writer, memory);
        let in_flight = self.in_flight.clone();
        Ok(RowGroupJob { table, day, writer, kind, pieces, segments, memory, in_flight })
    }

    /// What the budget holds now: rows waiting in memory, jobs in flight, open groups.
    fn held(&self) -> usize {
        self.memory + self.in_flight.get() + self.open_bytes
    }

    /// Over the budget (rows waiting in memory, jobs in flight, open groups), spills
    /// the partitions holding the most memory until half of it is used.
    fn hold_budget(&mut self) -> Result<()> {
        let Some(budget) = self.budget else { return Ok(()) };
        let held = Self::held;
        if held(self) <= budget {
            return Ok(());
        }
        let mut by_memory: Vec<((&'static str, i32), usize)> =
            self.parts.iter().filter(|(_, (_, p))| p.memory > 0).map(|(k, (_, p))| (*k, p.memory)).collect();
        by_memory.sort_unstable_by_key(|(k, m)| (std::cmp::Reverse(*m), *k));
        for (key, memory) in by_memory {
            if held(self) <= budget / 2 {
                break;
            }
            let Some((_, part)) = self.parts.get_mut(&key) else { continue };
            let mut pieces: Vec<Piece> = part.pieces.drain(..).collect();
            spill(&self.spill, &mut pieces)?;
            part.pieces = pieces.into();
            part.memory = 0;
            self.memory -= memory;
            self.spilled_bytes += memory as u64;
        }
        Ok(())
    }
}

/// The writer of the next row group: each group goes to the next in turn.
fn in_turn(next_writer: &mut usize, writers: usize) -> usize {
    let writer = *next_writer % writers;
    *next_writer += 1;
    writer
}

/// Writes the pieces held in memory to one spill file and points them at it.
fn spill(dir: &SpillDir, pieces: &mut [Piece]) -> Result<()> {
    let batches: Vec<RecordBatch> = pieces
        .iter()
        .filter_map(|p| match &p.rows {
            Rows::Memory(b) => Some(b.clone()),
            Rows::Spilled { .. } => None,
        })
        .collect();
    if batches.is_empty() {
        return Ok(());
    }
    let file = dir.write(&batches)?;
    let mut index = 0;
    for piece in pieces.iter_mut() {
        if let Rows::Memory(_) = piece.rows {
            piece.rows = Rows::Spilled { file: file.clone(), index, offset: 0 };
            index += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use tokscope_core::catalog::requests::RequestsBuilder;
    use tokscope_core::catalog::tokens::TokensBuilder;

    use super::{Partitions, RowGroupSink};
    use crate::error::Result;
    use crate::ingest::budget::{MemoryPlan, MAX_GROUP_ROWS, ROW_GROUP_ROWS};

    /// A memory plan of `writers` writer (and parsing) threads and `budget`
    /// bytes for rows.
    fn plan(writers: usize, budget: Option<usize>) -> MemoryPlan {
        MemoryPlan {
            limit: budget,
            limit_from: "given",
            parse_threads: writers,
            writer_threads: writers,
            read_threads: 1,
            pipeline_bytes: 0,
            inputs_ahead: 0,
            queue_chunks: 2,
            read_ahead_bytes: 0,
            io_concurrency: 1,
            fetch_bytes: 0,
            writer_bytes: 0,
            buffer_bytes: budget,
        }
    }

    /// A batch of one Int64 column holding `values`.
    fn batch(values: std::ops::Range<i64>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(values))]).expect("a valid batch")
    }

    /// One writer's file of one partition: its ended row groups (the values
    /// of their rows) and the group in progress.
    #[derive(Default)]
    struct Recorded {
        groups: Vec<Vec<i64>>,
        open: Vec<i64>,
        /// Rows of groups dropped unwritten.
        discarded: usize,
    }

    impl RowGroupSink for Recorded {
        fn append(&mut self, batch: &RecordBatch) -> Result<()> {
            let values = batch.column(0).as_any().downcast_ref::<Int64Array>().expect("an Int64 column");
            self.open.extend(values.values().iter());
            Ok(())
        }

        fn end_row_group(&mut self) -> Result<()> {
            assert!(!self.open.is_empty(), "an empty row group was ended");
            self.groups.push(std::mem::take(&mut self.open));
            Ok(())
        }

        fn discard_row_group(&mut self) {
            assert!(!self.open.is_empty(), "an empty row group was discarded");
            self.discarded += self.open.len();
            self.open.clear();
        }
    }

    /// Rows pushed in batches of uneven sizes to four partitions, streamed
    /// to open groups as they come: every partition ends up in full row
    /// groups of consecutive rows, in order, and a last one of half a group
    /// to one and a half, however many writers share them and whatever the
    /// budget. With several writers and room, the rows after a full group
    /// begin the next group at once: dropped unwritten where the partition
    /// ends within half a group (its rows join the group before), kept where
    /// half a group comes.
    #[test]
    fn streamed_row_groups_are_whole_ordered_and_cut_by_rows() {
        let table = &RequestsBuilder::DEF;
        // Partition 1 gets 3.3 groups, partition 2 a third of a group,
        // partition 3 (interleaved with 1) 2.2 groups, partition 4 2.7.
        // Under the small budget one group is open at a time: partition 1
        // streams, the others wait for whole groups.
        let plan_rows = [(1, 3.3), (2, 0.33), (3, 2.2), (4, 2.7)].map(|(d, g)| (d, (g * ROW_GROUP_ROWS as f64) as i64));
        let small = 2 * super::OPEN_GROUP_BYTES + (4 << 20);
        for (writers, budget) in [(1, None), (2, None), (3, None), (1, Some(small)), (2, Some(small))] {
            let plan = plan(writers, budget);
            let mut parts = Partitions::new(&plan, &format!("test-{}", std::process::id()));
            parts.row_group_bytes = usize::MAX;
            let mut sinks: BTreeMap<(usize, i32), Recorded> = BTreeMap::new();
            let mut streamed = 0;
            let mut run = |jobs: Vec<super::RowGroupJob>, sinks: &mut BTreeMap<(usize, i32), Recorded>| {
                for job in jobs {
                    assert!(job.writer < writers);
                    streamed += job.segments.iter().filter(|s| !s.ends_group).count();
                    let sink = sinks.entry((job.writer, job.day)).or_default();
                    job.write(sink).unwrap();
                }
            };
            let mut next = [0i64; 5];
            let mut size = 1000i64;
            while plan_rows.iter().any(|&(d, n)| next[d as usize] < n) {
                for &(day, total) in &plan_rows {
                    let from = next[day as usize];
                    let n = size.min(total - from);
                    if n <= 0 {
                        continue;
                    }
                    next[day as usize] += n;
                    run(parts.push(table, day, batch(from..from + n)).unwrap(), &mut sinks);
                    let open_groups = parts.parts.values().filter(|(_, p)| p.open.is_some()).count();
                    assert!(parts.open_bytes >= open_groups * super::OPEN_GROUP_BYTES);
                    if budget.is_some() {
                        assert!(open_groups <= 1, "{writers} writers: more groups open than the budget holds");
                    }
                }
                size = size * 7 % 9973 + 500;
            }
            run(parts.finish().unwrap(), &mut sinks);
            assert_eq!(parts.open_bytes, 0, "{writers} writers: an open group's charge was not returned");
            assert!(streamed > 0, "{writers} writers: no row group was streamed before it was full");
            for &(day, total) in &plan_rows {
                let mut groups: Vec<&Vec<i64>> = Vec::new();
                let mut discarded = 0;
                for ((_, d), rec) in &sinks {
                    if *d == day {
                        assert!(rec.open.is_empty(), "{writers} writers, day {day}: a group was left open");
                        groups.extend(&rec.groups);
                        discarded += rec.discarded;
                    }
                }
                // Begun early and dropped: the rows after the last full group
                // of partitions 1 and 3 (fewer than half a group), with
                // several writers and no budget; none otherwise.
                let after_full = total as usize % ROW_GROUP_ROWS;
                let dropped = writers > 1 && budget.is_none() && (day == 1 || day == 3);
                assert_eq!(discarded, if dropped { after_full } else { 0 }, "{writers} writers, day {day}");
                groups.sort_by_key(|g| g[0]);
                let sizes: Vec<usize> = groups.iter().map(|g| g.len()).collect();
                let flat: Vec<i64> = groups.iter().flat_map(|g| g.iter().copied()).collect();
                assert_eq!(
                    flat,
                    (0..total).collect::<Vec<_>>(),
                    "{writers} writers, day {day}: rows lost or reordered"
                );
                // Full groups while at least a group and a half remain; then the rest.
                let full = (total as usize).saturating_sub(ROW_GROUP_ROWS / 2) / ROW_GROUP_ROWS;
                let mut expected = vec![ROW_GROUP_ROWS; full];
                expected.push(total as usize - full * ROW_GROUP_ROWS);
                assert_eq!(sizes, expected, "{writers} writers, day {day}");
                assert!(sizes.iter().all(|&n| n <= MAX_GROUP_ROWS), "{sizes:?}");
            }
        }
    }

    /// One push can make several jobs: here the rest of a full group, its
    /// end, and the first rows of the next. The reader waits only on the
    /// jobs it handed to writers: with the rows in flight bounded at
    /// nothing, each job goes out once the ones before it are written.
    #[test]
    fn the_reader_never_waits_on_jobs_it_has_not_handed_over() {
        let table = &RequestsBuilder::DEF;
        let plan = plan(1, None);
        let mut parts = Partitions::new(&plan, &format!("test-send-{}", std::process::id()));
        parts.in_flight_bound = 0;
        let rows = (ROW_GROUP_ROWS + ROW_GROUP_ROWS / 2 + 1000) as i64;
        let jobs = parts.push(table, 1, batch(0..rows)).unwrap();
        let held: Vec<bool> = jobs.iter().map(|j| j.memory > 0).collect();
        assert_eq!(held, [true, false, true], "rows of a group, its end, rows of the next");
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = 0;
            let result = parts.send_jobs(jobs, |_| {
                sent += 1;
                Ok(())
            });
            let _ = done.send(result.map(|()| sent));
        });
        let sent = finished.recv_timeout(std::time::Duration::from_secs(30));
        assert_eq!(sent.expect("the reader waited on a job it had not handed over").unwrap(), 3);
    }

    /// The reader waits while every writer has more than
    /// `WRITER_QUEUE_BYTES` handed to it (and not once one of them may run
    /// short), never on bytes of jobs it has not handed over.
    #[test]
    fn the_reader_waits_once_every_writer_has_rows_queued() {
        let over = super::WRITER_QUEUE_BYTES + 1;
        let in_flight = super::InFlight::new(2);
        let unbounded = usize::MAX / 2;
        in_flight.add(0, over);
        assert!(!in_flight.too_many(unbounded, &[0, 0]), "waited while writer 1 had nothing");
        in_flight.add(1, over);
        assert!(in_flight.too_many(unbounded, &[0, 0]), "read on while both writers were behind");
        assert!(!in_flight.too_many(unbounded, &[0, over]), "waited on a job not handed over");
        in_flight.sub(1, over);
        assert!(!in_flight.too_many(unbounded, &[0, 0]));
        assert!(in_flight.too_many(over - 1, &[0, 0]), "the bound on all bytes in flight no longer holds");
    }

    /// A log sorted by time leaves a day behind: once a full row group's
    /// worth of input lines has been read after the last one that gave a row
    /// of a day, that day's last group is written at once (not at the end of
    /// the input), for every table, and rows of it that come later form a
    /// group of their own. Lines count, not rows: a day's `tokens` are not
    /// left behind by the many token rows of the next day's first requests.
    #[test]
    fn a_day_the_log_left_behind_is_written_before_the_input_ends() {
        let (requests, tokens) = (&RequestsBuilder::DEF, &TokensBuilder::DEF);
        let plan = plan(2, None);
        let mut parts = Partitions::new(&plan, &format!("test-behind-{}", std::process::id()));
        parts.row_group_bytes = usize::MAX;
        type Sinks = BTreeMap<(&'static str, usize, i32), Recorded>;
        let mut sinks = Sinks::new();
        let run = |jobs: Vec<super::RowGroupJob>, sinks: &mut Sinks| {
            for job in jobs {
                let key = (job.table.name, job.writer, job.day);
                job.write(sinks.entry(key).or_default()).unwrap();
            }
        };
        // `lines` lines giving `requests` of `day`, and `per_line` token rows each.
        let read = |parts: &mut Partitions, sinks: &mut Sinks, day: i32, lines: std::ops::Range<i64>, per_line: i64| {
            parts.read_lines((lines.end - lines.start) as u64);
            run(parts.push(requests, day, batch(lines.clone())).unwrap(), sinks);
            run(parts.push(tokens, day, batch(lines.start * per_line..lines.end * per_line)).unwrap(), sinks);
            run(parts.finish_left_behind().unwrap(), sinks);
        };
        let ended = |sinks: &Sinks, table: &str, day: i32| -> Vec<usize> {
            let groups = sinks.iter().filter(|((t, _, d), _)| *t == table && *d == day);
            let mut sizes: Vec<usize> = groups.flat_map(|(_, r)| r.groups.iter().map(Vec::len)).collect();
            sizes.sort_unstable();
            sizes
        };
        let group = ROW_GROUP_ROWS as i64;
        // A few requests of day 3 and no tokens: too few rows to open a group.
        read(&mut parts, &mut sinks, 3, 0..500, 0);
        read(&mut parts, &mut sinks, 1, 0..group / 3, 10);
        read(&mut parts, &mut sinks, 2, 0..group - 1, 10);
        assert_eq!(ended(&sinks, "requests", 1), Vec::<usize>::new(), "day 1 ended before a group of lines");
        // 3.3 groups of tokens: the full groups that a group and a half follow.
        assert_eq!(ended(&sinks, "tokens", 1), vec![ROW_GROUP_ROWS; 2], "day 1's tokens: only full groups");
        read(&mut parts, &mut sinks, 2, group - 1..group, 10);
        assert_eq!(ended(&sinks, "requests", 1), vec![ROW_GROUP_ROWS / 3], "day 1 still open after a group of lines");
        let day1_tokens: usize = ended(&sinks, "tokens", 1).iter().sum();
        assert_eq!(day1_tokens, 10 * (ROW_GROUP_ROWS / 3), "day 1's tokens still open after a group of lines");
        // A late line of day 1, 500 more of day 3 (whose rows without an
        // open group waited: not left behind), then the end.
        read(&mut parts, &mut sinks, 1, group / 3..group / 3 + 1, 10);
        read(&mut parts, &mut sinks, 3, 500..1000, 0);
        run(parts.finish().unwrap(), &mut sinks);
        assert_eq!(ended(&sinks, "requests", 1), vec![1, ROW_GROUP_ROWS / 3]);
        assert_eq!(ended(&sinks, "requests", 2), vec![ROW_GROUP_ROWS]);
        assert_eq!(ended(&sinks, "requests", 3), vec![1000], "day 3's waiting rows were cut into two groups");
        assert!(ended(&sinks, "tokens", 1).contains(&10), "the late line's tokens are not a group of their own");
        assert!(sinks.values().all(|r| r.open.is_empty()), "a group was left open");
        assert_eq!(parts.open_bytes, 0, "an open group's charge was not returned");
    }
}
