//! Rows wait here, per table and partition (day), until they make a full
//! row group; then they go to a writer thread as a [`RowGroupJob`]. Row
//! groups are cut by rows alone (at most [`ROW_GROUP_ROWS`], or fewer when
//! rows are so wide that a group would pass [`ROW_GROUP_BYTES`]), so
//! the layout of the files does not depend on the memory budget: over the
//! budget, the partitions holding the most memory spill their rows to disk
//! ([`super::spill`]) and the writer reads them back. A partition keeps
//! half a row group back until the input ends, so its last row group is as
//! large as half a full one unless the whole partition is smaller.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arrow::array::RecordBatch;
use tokscope_core::catalog::TableDef;

use super::budget::{MemoryPlan, ROW_GROUP_BYTES, ROW_GROUP_ROWS};
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
}

/// Rows of one partition for one writer thread to encode: `groups` gives
/// the rows of each row group, in order (they add up to the pieces' rows).
#[derive(Debug)]
pub struct RowGroupJob {
    /// The table.
    pub table: &'static TableDef,
    /// The partition (days since the epoch; 0 for tables without one).
    pub day: i32,
    pieces: Vec<Piece>,
    groups: Vec<usize>,
    /// What the job holds in memory until it is written (counted in flight).
    memory: usize,
    in_flight: Arc<AtomicUsize>,
}

impl RowGroupJob {
    /// Writes the rows to `sink`, ending a row group after each group's last
    /// row. Spilled rows are read back one batch at a time.
    pub fn write(self, sink: &mut impl RowGroupSink) -> Result<()> {
        let mut reader = SpillReader::default();
        let mut groups = self.groups.iter().copied();
        let mut left = groups.next().unwrap_or(0);
        for piece in &self.pieces {
            let mut batch = match &piece.rows {
                Rows::Memory(batch) => batch.clone(),
                Rows::Spilled { file, index, offset } => reader.read(file, *index)?.slice(*offset, piece.len),
            };
            while batch.num_rows() > 0 {
                let n = left.min(batch.num_rows());
                if n == 0 {
                    return Err(internal_err!("a row-group job has more rows than its groups"));
                }
                sink.append(&batch.slice(0, n))?;
                batch = batch.slice(n, batch.num_rows() - n);
                left -= n;
                if left == 0 {
                    sink.end_row_group()?;
                    left = groups.next().unwrap_or(0);
                }
            }
        }
        reader.close();
        Ok(())
    }
}

impl Drop for RowGroupJob {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(self.memory, Ordering::Relaxed);
    }
}

/// The rows buffered for one partition.
#[derive(Default)]
struct Partition {
    pieces: VecDeque<Piece>,
    rows: usize,
    bytes: usize,
    memory: usize,
}

impl Partition {
    /// Rows in a full row group of this partition: [`ROW_GROUP_ROWS`], or
    /// fewer where that many rows would pass `max_bytes`.
    fn group_rows(&self, max_bytes: usize) -> usize {
        if self.bytes == 0 {
            return ROW_GROUP_ROWS;
        }
        let fitting = max_bytes as u128 * self.rows as u128 / self.bytes as u128;
        (fitting as usize).clamp(1, ROW_GROUP_ROWS)
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
            self.bytes -= piece.bytes;
            self.memory -= piece.in_memory();
            taken.push(piece);
        }
        taken
    }
}

/// Row counts of the row groups `rows` make at the end of a partition: one
/// group, or two halves when one would pass `group` rows (each then at
/// least half a full group).
fn last_groups(rows: usize, group: usize) -> Vec<usize> {
    match rows {
        0 => Vec::new(),
        r if r <= group => vec![r],
        r => vec![r - r / 2, r / 2],
    }
}

/// Every partition's buffered rows, the budget they share with the jobs in
/// flight, and where they spill.
pub struct Partitions {
    parts: BTreeMap<(&'static str, i32), (&'static TableDef, Partition)>,
    row_group_bytes: usize,
    budget: Option<usize>,
    memory: usize,
    in_flight: Arc<AtomicUsize>,
    spill: SpillDir,
    spilled_bytes: u64,
}

impl Partitions {
    /// Empty buffers sized by `plan`; spills go to a directory named after `run_id`.
    pub fn new(plan: &MemoryPlan, run_id: &str) -> Partitions {
        Partitions {
            parts: BTreeMap::new(),
            row_group_bytes: ROW_GROUP_BYTES,
            budget: plan.buffer_bytes,
            memory: 0,
            in_flight: Arc::new(AtomicUsize::new(0)),
            spill: SpillDir::new(run_id),
            spilled_bytes: 0,
        }
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
        let (_, part) = self.parts.entry((table.name, day)).or_insert_with(|| (table, Partition::default()));
        part.pieces.push_back(Piece { rows: Rows::Memory(batch), len, bytes });
        part.rows += len;
        part.bytes += bytes;
        part.memory += bytes;
        self.memory += bytes;
        let mut jobs = Vec::new();
        loop {
            let (_, part) =
                self.parts.get_mut(&(table.name, day)).ok_or_else(|| internal_err!("partition buffer vanished"))?;
            let group = part.group_rows(self.row_group_bytes);
            // Half a group stays back for the partition's last row group.
            if part.rows < group + group / 2 {
                break;
            }
            let pieces = part.take_front(group);
            let freed: usize = pieces.iter().map(Piece::in_memory).sum();
            self.memory -= freed;
            jobs.push(self.job(table, day, pieces, vec![group])?);
        }
        self.hold_budget()?;
        Ok(jobs)
    }

    /// The rows left in every partition, as their last row groups.
    pub fn finish(&mut self) -> Result<Vec<RowGroupJob>> {
        let parts = std::mem::take(&mut self.parts);
        let mut jobs = Vec::new();
        for ((_, day), (table, mut part)) in parts {
            let groups = last_groups(part.rows, part.group_rows(self.row_group_bytes));
            let pieces = part.take_front(part.rows);
            self.memory -= pieces.iter().map(Piece::in_memory).sum::<usize>();
            if !groups.is_empty() {
                jobs.push((table, day, pieces, groups));
            }
        }
        let mut out = Vec::with_capacity(jobs.len());
        for (table, day, pieces, groups) in jobs {
            out.push(self.job(table, day, pieces, groups)?);
        }
        Ok(out)
    }

    /// A job for `pieces`, counted in flight. Over the budget, its rows in
    /// memory are spilled first, so what writers hold stays bounded however
    /// many of them there are.
    fn job(
        &mut self,
        table: &'static TableDef,
        day: i32,
        mut pieces: Vec<Piece>,
        groups: Vec<usize>,
    ) -> Result<RowGroupJob> {
        let mut memory: usize = pieces.iter().map(Piece::in_memory).sum();
        if let Some(budget) = self.budget {
            if memory > 0 && self.in_flight.load(Ordering::Relaxed) + self.memory + memory > budget {
                self.spilled_bytes += memory as u64;
                spill(&self.spill, &mut pieces)?;
                memory = 0;
            }
        }
        self.in_flight.fetch_add(memory, Ordering::Relaxed);
        Ok(RowGroupJob { table, day, pieces, groups, memory, in_flight: self.in_flight.clone() })
    }

    /// Over the budget (buffered rows in memory plus jobs in flight), spills
    /// the partitions holding the most memory until half of it is used.
    fn hold_budget(&mut self) -> Result<()> {
        let Some(budget) = self.budget else { return Ok(()) };
        let held = |s: &Self| s.memory + s.in_flight.load(Ordering::Relaxed);
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
    use super::last_groups;

    #[test]
    fn a_partitions_last_row_groups_are_at_least_half_a_full_one() {
        assert_eq!(last_groups(0, 100), Vec::<usize>::new());
        assert_eq!(last_groups(7, 100), vec![7]);
        assert_eq!(last_groups(100, 100), vec![100]);
        assert_eq!(last_groups(101, 100), vec![51, 50]);
        assert_eq!(last_groups(149, 100), vec![75, 74]);
    }
}
