//! How ingest shares its memory: the budget (`--memory-limit`, or a share
//! of the memory the process may use), the reading pipeline's part, the
//! writer threads and what each holds while it encodes a row group, and
//! what is left for the rows buffered per partition before they spill to
//! disk. Derived together from the thread count and the budget, so a
//! default works on any machine and a given limit is refused only when even
//! one writer cannot fit.

use serde::Serialize;
use tokscope_core::reader::ReaderBuilder;

use crate::error::Result;
pub use crate::resources::MemoryBudget as MemoryLimit;

/// Rows in a full row group.
pub const ROW_GROUP_ROWS: usize = 128 * 1024;

/// The most rows of a row group: a partition's last group takes the rows
/// after its last full one when they are fewer than half a group.
pub const MAX_GROUP_ROWS: usize = ROW_GROUP_ROWS + ROW_GROUP_ROWS / 2;

/// What a writer thread holds while it encodes a row group, besides the
/// encoded row group itself: a page being filled per column (up to 1 MiB
/// each, parquet-rs's page size) and each column's codec (about 100 KiB for
/// zstd), for `requests`' 60 leaf columns; and the allocator's pages the
/// thread keeps for its next row group.
const WRITER_FIXED_BYTES: usize = 64 << 20;

/// Row groups are cut at [`ROW_GROUP_ROWS`] or where a partition's last group
/// (one and a half of them) would pass this many bytes of Arrow data,
/// whichever comes first: the bytes only bind for rows of over 1.3 KiB
/// (long prompts and outputs), never because of the budget.
pub const ROW_GROUP_BYTES: usize = 256 << 20;

/// What a writer holds of the row group it encodes, as a share of the row
/// group's Arrow bytes: its encoded and compressed column chunks wait in
/// memory until the row group is complete (the rows themselves are read from
/// the buffers or the spill files as they are encoded).
pub(crate) const ENCODED_SHARE: usize = 4;

/// What a row group open in a writer's file holds before its first row: a
/// codec and a page being filled per column (docs/RELIABILITY.md measures
/// about 3.8 MiB for `requests`), with room for the pages of its first rows.
/// Its encoded rows add [`ENCODED_SHARE`] of their Arrow bytes.
pub(crate) const OPEN_GROUP_BYTES: usize = 8 << 20;

/// The least the buffered rows may hold before they spill.
const BUFFER_MIN_BYTES: usize = 16 << 20;

/// How ingest uses its memory; printed by `ingest --verbose` and in the
/// summary's `memory` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemoryPlan {
    /// The budget in bytes (`None`: unlimited).
    pub limit: Option<usize>,
    /// Where the budget came from: `auto`, `given` or `none`.
    pub limit_from: &'static str,
    /// Threads that parse (rayon's pool).
    pub parse_threads: usize,
    /// Threads that encode and write row groups.
    pub writer_threads: usize,
    /// The reading pipeline's part: chunks in flight, the parsed chunk, the longest line.
    pub pipeline_bytes: usize,
    /// Each writer's part while it encodes a row group.
    pub writer_bytes: usize,
    /// What the rows buffered per partition (and handed to writers, not yet
    /// written) may hold before the largest partitions spill to disk
    /// (`None`: never spill).
    pub buffer_bytes: Option<usize>,
}

/// What the reading pipeline holds: the splitter's queue of raw chunks (2),
/// the chunk it fills and the one being parsed, that chunk parsed into Arrow
/// (about three times its size with derived columns and per-token rows),
/// and the longest line the splitter may hold.
pub fn pipeline_bytes(reader: &ReaderBuilder) -> usize {
    7 * reader.chunk_bytes() + reader.max_line_bytes()
}

impl MemoryPlan {
    /// Shares `limit` among the pipeline, up to `threads` writers and the
    /// buffered rows. Each writer takes its fixed part and what it holds of
    /// the largest row group; writers are added while the buffered rows keep
    /// at least half of what is left, so a small budget costs writer threads
    /// and spills, never row-group size. A given limit too small for
    /// one writer is an error; the automatic one is raised to that least.
    pub fn new(limit: MemoryLimit, reader: &ReaderBuilder, threads: usize) -> Result<MemoryPlan> {
        let threads = threads.max(1);
        let pipeline = pipeline_bytes(reader);
        let (bytes, from) = match limit {
            MemoryLimit::Unlimited => {
                return Ok(MemoryPlan {
                    limit: None,
                    limit_from: "none",
                    parse_threads: threads,
                    writer_threads: threads,
                    pipeline_bytes: pipeline,
                    writer_bytes: WRITER_FIXED_BYTES + ROW_GROUP_BYTES / ENCODED_SHARE,
                    buffer_bytes: None,
                })
            }
            MemoryLimit::Auto => (crate::resources::auto_budget(), "auto"),
            MemoryLimit::Bytes(b) => (b, "given"),
        };
        let writer = WRITER_FIXED_BYTES + ROW_GROUP_BYTES / ENCODED_SHARE;
        let least = pipeline + writer + BUFFER_MIN_BYTES;
        let bytes = match limit {
            MemoryLimit::Bytes(b) if b < least => {
                let mib = |b: usize| format!("{:.0} MiB", b as f64 / f64::from(1 << 20));
                return Err(config_err!(
                    "--memory-limit {} is below what ingest needs: {} ({} for the chunks in flight and the longest line, \
                     set by --max-line-bytes, {} for one writer thread and {} of buffered rows); raise the limit or \
                     lower --max-line-bytes",
                    mib(b),
                    mib(least),
                    mib(pipeline),
                    mib(writer),
                    mib(BUFFER_MIN_BYTES)
                ));
            }
            _ => bytes.max(least),
        };
        let rest = bytes - pipeline;
        let writers = (rest / 2 / writer).clamp(1, threads);
        Ok(MemoryPlan {
            limit: Some(bytes),
            limit_from: from,
            parse_threads: threads,
            writer_threads: writers,
            pipeline_bytes: pipeline,
            writer_bytes: writer,
            buffer_bytes: Some(rest - writers * writer),
        })
    }
}

#[cfg(test)]
mod tests {
    use tokscope_core::reader::ReaderBuilder;

    use super::{MemoryLimit, MemoryPlan};
    use crate::resources::MemoryBudget;

    const MIB: usize = 1 << 20;

    #[test]
    fn limits_parse() {
        assert_eq!(MemoryBudget::parse("auto").unwrap(), MemoryBudget::Auto);
        assert_eq!(MemoryBudget::parse("none").unwrap(), MemoryBudget::Unlimited);
        assert_eq!(MemoryBudget::parse("512M").unwrap(), MemoryBudget::Bytes(512 * MIB));
        assert!(MemoryBudget::parse("lots").is_err());
    }

    /// Every part fits the limit, at every thread count; more threads never
    /// mean more than the limit, only fewer writers under a small one.
    #[test]
    fn the_parts_add_up_to_at_most_the_limit() {
        let reader = ReaderBuilder::new();
        for limit_mib in [256, 512, 1024, 4096, 65536] {
            for threads in [1, 2, 6, 16, 64, 256] {
                let plan = MemoryPlan::new(MemoryLimit::Bytes(limit_mib * MIB), &reader, threads).unwrap();
                let used = plan.pipeline_bytes + plan.writer_threads * plan.writer_bytes + plan.buffer_bytes.unwrap();
                assert_eq!(used, limit_mib * MIB, "{limit_mib} MiB, {threads} threads: {plan:?}");
                assert!(plan.writer_threads >= 1 && plan.writer_threads <= threads, "{plan:?}");
                assert!(plan.buffer_bytes.unwrap() >= 16 * MIB, "{plan:?}");
            }
        }
        // 4 MiB chunks and 64 MiB lines: a 92 MiB pipeline; 128 MiB a writer.
        let plan = MemoryPlan::new(MemoryLimit::Bytes(512 * MIB), &reader, 16).unwrap();
        assert_eq!((plan.pipeline_bytes, plan.writer_bytes, plan.writer_threads), (92 * MIB, 128 * MIB, 1), "{plan:?}");
        let plan = MemoryPlan::new(MemoryLimit::Bytes(4096 * MIB), &reader, 16).unwrap();
        assert_eq!(plan.writer_threads, 15, "{plan:?}");
        let plan = MemoryPlan::new(MemoryLimit::Bytes(8192 * MIB), &reader, 16).unwrap();
        assert_eq!(plan.writer_threads, 16, "{plan:?}");
    }

    #[test]
    fn a_given_limit_below_one_writer_is_refused_and_the_automatic_one_never() {
        let reader = ReaderBuilder::new();
        let e = MemoryPlan::new(MemoryLimit::Bytes(32 * MIB), &reader, 2).unwrap_err().to_string();
        assert!(
            e.contains("--memory-limit 32 MiB is below what ingest needs") && e.contains("--max-line-bytes"),
            "{e}"
        );
        for threads in [1, 64, 256] {
            let plan = MemoryPlan::new(MemoryLimit::Auto, &reader, threads).unwrap();
            assert!(plan.limit.unwrap() >= 256 * MIB && plan.writer_threads >= 1, "{plan:?}");
        }
    }
}
