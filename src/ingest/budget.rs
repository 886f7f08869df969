//! How ingest shares its memory: the budget (`--memory-limit`, or a share
//! of the memory the process may use), the reading pipeline's part, the
//! writer threads and what each holds while it encodes a row group, the
//! inputs opened and read ahead of the one being parsed, the small objects
//! fetched whole and not yet parsed (bytes in flight), and what is left
//! for the rows buffered per partition before they spill to disk. Derived
//! together from the thread count and the budget, so a default works on
//! any machine and a given limit is refused only when even one writer
//! cannot fit.

use serde::Serialize;
use tokscope_core::file_blocks::CARRY_ROOM_BYTES;
use tokscope_core::reader::ReaderBuilder;

use super::source::WHOLE_OBJECT_BYTES;
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

/// Most inputs opened and read ahead of the one being parsed.
pub const MAX_INPUTS_AHEAD: usize = 8;

/// Threads per input read ahead: a splitter that inflates gzip keeps about
/// four parsing and writing threads busy.
const THREADS_PER_INPUT_AHEAD: usize = 4;

/// Chunks each reader may queue when inputs are read ahead (32 MiB of 4 MiB
/// chunks): how far an input's splitter, and its decompressor, get before
/// the parser reaches that input.
pub const AHEAD_QUEUE_CHUNKS: usize = 8;

/// What an input's decoder holds besides its chunks: its 1 MiB read buffer,
/// the head read for format detection, a gzip or zstd window.
const DECODER_BYTES: usize = 2 << 20;

/// At most this share of what the writers leave goes to inputs read ahead.
const READ_AHEAD_SHARE: usize = 4;

/// Threads per thread reading a local file's blocks: reading a block (the
/// copy out of the page cache, finding its newlines) takes about 3 % of the
/// CPU time ingesting it takes, so one such thread keeps ahead of eight
/// others with most of its time to spare.
const THREADS_PER_READER: usize = 8;

/// Most threads reading one local file's blocks.
pub const MAX_READ_THREADS: usize = 8;

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
    /// Threads that read a local file's blocks ahead of its splitter.
    pub read_threads: usize,
    /// The reading pipeline's part: chunks in flight, the parsed chunk, the
    /// blocks read ahead, the longest line.
    pub pipeline_bytes: usize,
    /// Inputs opened and read ahead of the one being parsed (0: one at a time).
    pub inputs_ahead: usize,
    /// Chunks each reader's splitter may queue ahead of the parser.
    pub queue_chunks: usize,
    /// The inputs read ahead's part: their queues, decoders and longest
    /// lines, and the parsed input's longer queue.
    pub read_ahead_bytes: usize,
    /// Requests in flight at most for the objects fetched whole (`--io-concurrency`).
    pub io_concurrency: usize,
    /// What the objects fetched whole may hold: bodies in flight, fetched
    /// and not yet parsed (0: none is fetched whole).
    pub fetch_bytes: usize,
    /// Each writer's part while it encodes a row group.
    pub writer_bytes: usize,
    /// What the rows buffered per partition (and handed to writers, not yet
    /// written) may hold before the largest partitions spill to disk
    /// (`None`: never spill).
    pub buffer_bytes: Option<usize>,
}

/// What the reading pipeline holds: the splitter's queue of raw chunks (2
/// by default), the chunk it fills and the one being parsed, the blocks its
/// `read_threads` reading threads hold (each raw chunk or block with room
/// for a carried line in front), the parsed chunk in Arrow (about three
/// times its size with derived columns and per-token rows), and the longest
/// line the splitter may hold.
fn pipeline_bytes(reader: &ReaderBuilder, read_threads: usize) -> usize {
    let raw = reader.queue_chunks() + 2 + read_threads;
    raw * raw_chunk_bytes(reader) + 3 * reader.chunk_bytes() + reader.max_line_bytes()
}

/// A raw chunk's buffer: the chunk, and room in front for a carried line.
fn raw_chunk_bytes(reader: &ReaderBuilder) -> usize {
    reader.chunk_bytes() + CARRY_ROOM_BYTES
}

/// What `inputs` inputs read ahead hold: each its queue of
/// [`AHEAD_QUEUE_CHUNKS`], the chunk its splitter fills, its
/// `read_threads` reading threads' blocks, its longest line and its
/// decoder; and the parsed input's queue, as long as theirs.
fn read_ahead_bytes(reader: &ReaderBuilder, read_threads: usize, inputs: usize) -> usize {
    if inputs == 0 {
        return 0;
    }
    let raw = raw_chunk_bytes(reader);
    let each = (AHEAD_QUEUE_CHUNKS + 1 + read_threads) * raw + reader.max_line_bytes() + DECODER_BYTES;
    inputs * each + AHEAD_QUEUE_CHUNKS.saturating_sub(reader.queue_chunks()) * raw
}

impl MemoryPlan {
    /// Shares `limit` among the pipeline, the inputs read ahead, up to
    /// `threads` writers and the buffered rows, for a run of `inputs`
    /// inputs. Each writer takes its fixed part and what it holds of the
    /// largest row group; writers are added while the buffered rows keep at
    /// least half of what the pipeline leaves. One input is read ahead per
    /// four threads (at most [`MAX_INPUTS_AHEAD`], one fewer than the
    /// inputs), while they take at most a quarter of what the writers leave
    /// to the buffered rows. Where some input may be read in blocks
    /// (`blocks`: a local file stored as is and larger than a chunk), its
    /// blocks are read by one thread per eight (at most
    /// [`MAX_READ_THREADS`]), fewer where a budget would not fit one writer
    /// with them; otherwise by none. So a small budget costs reading
    /// threads, inputs read ahead, writer threads and spills, never
    /// row-group size. `fetched` objects fetched whole, `io_concurrency`
    /// at a time, may hold [`WHOLE_OBJECT_BYTES`] each in flight, within a
    /// quarter of what the inputs read ahead leave to the buffered rows.
    /// A given limit too small for one writer is an error; the automatic one
    /// is raised to that least.
    pub fn new(
        limit: MemoryLimit,
        reader: &ReaderBuilder,
        threads: usize,
        inputs: usize,
        blocks: bool,
        fetched: usize,
        io_concurrency: usize,
    ) -> Result<MemoryPlan> {
        let threads = threads.max(1);
        let most_readers = if blocks { threads.div_ceil(THREADS_PER_READER).min(MAX_READ_THREADS) } else { 0 };
        let least_readers = most_readers.min(1);
        let wanted = threads.div_ceil(THREADS_PER_INPUT_AHEAD).min(MAX_INPUTS_AHEAD).min(inputs.saturating_sub(1));
        let writer = WRITER_FIXED_BYTES + ROW_GROUP_BYTES / ENCODED_SHARE;
        // The least a run needs with `n` reading threads: its pipeline, one writer, the fewest buffered rows.
        let least = |n: usize| pipeline_bytes(reader, n) + writer + BUFFER_MIN_BYTES;
        let needed = least(least_readers);
        let (bytes, limit_from) = match limit {
            MemoryLimit::Unlimited => (None, "none"),
            MemoryLimit::Auto => (Some(crate::resources::auto_budget().max(needed)), "auto"),
            MemoryLimit::Bytes(b) if b < needed => {
                let mib = |b: usize| format!("{:.0} MiB", b as f64 / f64::from(1 << 20));
                return Err(config_err!(
                    "--memory-limit {} is below what ingest needs: {} ({} for the chunks in flight and the longest line, \
                     set by --max-line-bytes, {} for one writer thread and {} of buffered rows); raise the limit or \
                     lower --max-line-bytes",
                    mib(b),
                    mib(needed),
                    mib(pipeline_bytes(reader, least_readers)),
                    mib(writer),
                    mib(BUFFER_MIN_BYTES)
                ));
            }
            MemoryLimit::Bytes(b) => (Some(b), "given"),
        };
        // Reading threads past the first only where the least still fits.
        let read_threads = match bytes {
            None => most_readers,
            Some(b) => (least_readers..=most_readers).rev().find(|&n| least(n) <= b).unwrap_or(least_readers),
        };
        let pipeline = pipeline_bytes(reader, read_threads);
        let io_concurrency = io_concurrency.max(1);
        let wanted_fetch = io_concurrency.min(fetched) * WHOLE_OBJECT_BYTES as usize;
        let (writer_threads, inputs_ahead, fetch_bytes, buffer_bytes) = match bytes {
            None => (threads, wanted, wanted_fetch, None),
            Some(bytes) => {
                let rest = bytes - pipeline;
                let writers = (rest / 2 / writer).clamp(1, threads);
                let buffer = rest - writers * writer;
                let fits = |n: usize| read_ahead_bytes(reader, read_threads, n) <= buffer / READ_AHEAD_SHARE;
                let ahead = (0..=wanted).rev().find(|&n| fits(n)).unwrap_or(0);
                let buffer = buffer - read_ahead_bytes(reader, read_threads, ahead);
                let fetch = wanted_fetch.min(buffer / READ_AHEAD_SHARE);
                (writers, ahead, fetch, Some(buffer - fetch))
            }
        };
        Ok(MemoryPlan {
            limit: bytes,
            limit_from,
            parse_threads: threads,
            writer_threads,
            read_threads,
            pipeline_bytes: pipeline,
            inputs_ahead,
            queue_chunks: if inputs_ahead > 0 { AHEAD_QUEUE_CHUNKS } else { reader.queue_chunks() },
            read_ahead_bytes: read_ahead_bytes(reader, read_threads, inputs_ahead),
            io_concurrency,
            fetch_bytes,
            writer_bytes: writer,
            buffer_bytes,
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
                let cases = [1, 2, 1000].into_iter().flat_map(|n| [(n, false, 0), (n, true, 0), (n, false, n)]);
                for (inputs, blocks, fetched) in cases {
                    let limit = MemoryLimit::Bytes(limit_mib * MIB);
                    let plan = MemoryPlan::new(limit, &reader, threads, inputs, blocks, fetched, 64).unwrap();
                    let used = plan.pipeline_bytes
                        + plan.read_ahead_bytes
                        + plan.fetch_bytes
                        + plan.writer_threads * plan.writer_bytes
                        + plan.buffer_bytes.unwrap();
                    assert_eq!(used, limit_mib * MIB, "{limit_mib} MiB, {threads} threads, {inputs} inputs: {plan:?}");
                    assert!(plan.writer_threads >= 1 && plan.writer_threads <= threads, "{plan:?}");
                    assert!(plan.buffer_bytes.unwrap() >= 16 * MIB, "{plan:?}");
                    assert!(plan.inputs_ahead < inputs && plan.read_ahead_bytes <= limit_mib * MIB / 4, "{plan:?}");
                }
            }
        }
        // 4 MiB chunks with 256 KiB of room and 64 MiB lines, 16 threads: 6
        // raw chunks (2 queued, 1 filled, 1 parsed, 2 blocks read ahead), the
        // parsed one in Arrow (12 MiB) and a line: 101.5 MiB; 128 MiB a writer.
        let plan = MemoryPlan::new(MemoryLimit::Bytes(512 * MIB), &reader, 16, 1, true, 0, 64).unwrap();
        let pipeline = 6 * (4 * MIB + MIB / 4) + 12 * MIB + 64 * MIB;
        assert_eq!(
            (plan.read_threads, plan.pipeline_bytes, plan.writer_bytes, plan.writer_threads),
            (2, pipeline, 128 * MIB, 1),
            "{plan:?}"
        );
        // One block-reading thread per 8 threads, at most 8; fewer where the
        // budget would not hold one writer with them: at 256 MiB and 64
        // threads, 4 (a 110 MiB pipeline, a writer, 16 MiB of rows: 254 MiB).
        for (threads, readers) in [(1, 1), (2, 1), (6, 1), (16, 2), (64, 8), (256, 8)] {
            let plan = MemoryPlan::new(MemoryLimit::Unlimited, &reader, threads, 1, true, 0, 64).unwrap();
            assert_eq!(plan.read_threads, readers, "{plan:?}");
        }
        let plan = MemoryPlan::new(MemoryLimit::Bytes(256 * MIB), &reader, 64, 1, true, 0, 64).unwrap();
        assert_eq!(plan.read_threads, 4, "{plan:?}");
        let plan = MemoryPlan::new(MemoryLimit::Bytes(4096 * MIB), &reader, 16, 1, true, 0, 64).unwrap();
        assert_eq!(plan.writer_threads, 15, "{plan:?}");
        let plan = MemoryPlan::new(MemoryLimit::Bytes(8192 * MIB), &reader, 16, 1, true, 0, 64).unwrap();
        assert_eq!(plan.writer_threads, 16, "{plan:?}");
    }

    /// One input read ahead per four threads, one fewer than the inputs, at
    /// most eight; each holds 8 queued chunks, the one its splitter fills,
    /// its reading threads' blocks (4.25 MiB each with 4 MiB chunks), a
    /// longest line (64 MiB) and a 2 MiB decoder: 108.5 MiB at 1 to 8
    /// threads, 112.75 at 16; and the parsed input's queue grows by 6
    /// chunks (25.5 MiB). A budget gives them at most a quarter of what the
    /// writers leave, never a writer.
    #[test]
    fn inputs_are_read_ahead_one_per_four_threads_within_a_quarter_of_the_buffered_rows() {
        let reader = ReaderBuilder::new();
        let ahead = |limit: MemoryLimit, threads: usize, inputs: usize| {
            let plan = MemoryPlan::new(limit, &reader, threads, inputs, true, 0, 64).unwrap();
            (plan.inputs_ahead, plan.queue_chunks, plan.read_ahead_bytes / MIB)
        };
        assert_eq!(ahead(MemoryLimit::Unlimited, 2, 1), (0, 2, 0));
        assert_eq!(ahead(MemoryLimit::Unlimited, 2, 2), (1, 8, 134)); // 108.5 + 25.5
        assert_eq!(ahead(MemoryLimit::Unlimited, 16, 100), (4, 8, 476)); // 4 * 112.75 + 25.5
        assert_eq!(ahead(MemoryLimit::Unlimited, 16, 3), (2, 8, 251));
        // 256 threads: 8 reading threads, each input 138.25 MiB.
        assert_eq!(ahead(MemoryLimit::Unlimited, 256, 100), (8, 8, 1131));
        // 1024 MiB at 16 threads leave 922.5 after the 101.5 MiB pipeline,
        // 538.5 after 3 writers: a quarter (134.6) is less than one input's 138.25.
        assert_eq!(ahead(MemoryLimit::Bytes(1024 * MIB), 16, 100), (0, 2, 0));
        // 2048 MiB: 1946.5, then 1050.5 after 7 writers, a quarter 262.6.
        assert_eq!(ahead(MemoryLimit::Bytes(2048 * MIB), 16, 100), (2, 8, 251));
        assert_eq!(ahead(MemoryLimit::Bytes(4096 * MIB), 16, 100), (4, 8, 476));
        // Inputs none of which is read in blocks (compressed, remote, or a
        // chunk or less) count no reading threads: 1024 MiB at 16 threads
        // leave 931 after the 93 MiB pipeline, 547 after 3 writers, and a
        // quarter of that (136.75) holds one input (104.25 MiB) with the
        // parsed input's longer queue (25.5).
        let plan = MemoryPlan::new(MemoryLimit::Bytes(1024 * MIB), &reader, 16, 100, false, 0, 64).unwrap();
        let bytes = (plan.pipeline_bytes, plan.read_ahead_bytes, plan.buffer_bytes);
        assert_eq!((plan.read_threads, plan.writer_threads, plan.inputs_ahead), (0, 3, 1), "{plan:?}");
        assert_eq!(bytes, (93 * MIB, 129 * MIB + 3 * MIB / 4, Some(417 * MIB + MIB / 4)), "{plan:?}");
        for (limit, writers) in [(1024, 3), (4096, 15), (8192, 16)] {
            let plan = MemoryPlan::new(MemoryLimit::Bytes(limit * MIB), &reader, 16, 100, true, 0, 64).unwrap();
            assert_eq!(plan.writer_threads, writers, "{plan:?}");
        }
    }

    /// Objects fetched whole hold 1 MiB each of `--io-concurrency` in
    /// flight (fewer when fewer are fetched), within a quarter of what the
    /// writers and the inputs read ahead leave: 1024 MiB at 16 threads
    /// leave 547 MiB after the 93 MiB pipeline and 3 writers, so all 64
    /// MiB; 256 MiB at 2 threads leave 35 MiB after one writer, so 8.75.
    #[test]
    fn bytes_in_flight_take_a_quarter_of_the_buffered_rows_at_most() {
        let reader = ReaderBuilder::new();
        let fetch = |limit: MemoryLimit, threads: usize, fetched: usize, concurrency: usize| {
            let plan = MemoryPlan::new(limit, &reader, threads, 0, false, fetched, concurrency).unwrap();
            (plan.fetch_bytes, plan.buffer_bytes.map(|b| b / (MIB / 4)))
        };
        assert_eq!(fetch(MemoryLimit::Unlimited, 2, 100, 64), (64 * MIB, None));
        assert_eq!(fetch(MemoryLimit::Unlimited, 2, 100, 8), (8 * MIB, None));
        assert_eq!(fetch(MemoryLimit::Unlimited, 2, 10, 64), (10 * MIB, None));
        assert_eq!(fetch(MemoryLimit::Unlimited, 2, 0, 64), (0, None));
        assert_eq!(fetch(MemoryLimit::Bytes(1024 * MIB), 16, 1000, 64), (64 * MIB, Some(483 * 4)));
        assert_eq!(fetch(MemoryLimit::Bytes(256 * MIB), 2, 1000, 64), (8 * MIB + 3 * MIB / 4, Some(105)));
    }

    #[test]
    fn a_given_limit_below_one_writer_is_refused_and_the_automatic_one_never() {
        let reader = ReaderBuilder::new();
        let e = MemoryPlan::new(MemoryLimit::Bytes(32 * MIB), &reader, 2, 1, true, 0, 64).unwrap_err().to_string();
        assert!(
            e.contains("--memory-limit 32 MiB is below what ingest needs") && e.contains("--max-line-bytes"),
            "{e}"
        );
        for threads in [1, 64, 256] {
            let plan = MemoryPlan::new(MemoryLimit::Auto, &reader, threads, 10, true, 0, 64).unwrap();
            assert!(plan.limit.unwrap() >= 256 * MIB && plan.writer_threads >= 1, "{plan:?}");
        }
    }
}
