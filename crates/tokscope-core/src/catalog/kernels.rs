//! `kernels`: one row per kernel interval of a profiler trace (the
//! `kernel_trace` format): a complete event, or a matched begin/end pair.
//! Read by the `head_waste` job.

use super::append::TableRow;
use super::columns::table;
use crate::record::LineOrigin;
use crate::redact::Redactor;

/// One kernel interval, as the `kernel_trace` format parses it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelRow {
    /// Event name (a `B`/`E` pair takes the `B`'s).
    pub name: Option<String>,
    /// Categories, comma-separated as logged (`kernel`, `cpu_op`, ...).
    pub cat: Option<String>,
    /// `X` for a complete event, `B` for a begin/end pair.
    pub phase: &'static str,
    /// Process id as logged (numbers as their decimal text).
    pub pid: Option<String>,
    /// Thread or stream id as logged.
    pub tid: Option<String>,
    /// Start, microseconds on the trace's clock.
    pub ts_us: f64,
    /// Duration, microseconds.
    pub dur_us: f64,
    /// Decoder layer of an attention kernel.
    pub layer: Option<i32>,
    /// Attention head of an attention kernel.
    pub head: Option<i32>,
    /// Floating-point operations the profiler counted (`args.flops`).
    pub flops: Option<f64>,
    /// The event's `args` object (a pair's merged) as compact JSON.
    pub args: Option<String>,
    /// The event's keys no column holds (a pair's merged) as a JSON object.
    pub extra: Option<String>,
}

table! {
    /// One row per kernel interval of a profiler trace: a complete (`X`) event or a matched begin/end (`B`/`E`) pair.
    pub table KernelsBuilder(k: &KernelRow, o: &LineOrigin<'_>) {
        name: "kernels",
        key: ["source_file", "byte_offset"],
        partition: None,
        written_by: Ingest,
    } {
        /// Event name (a pair's begin event's).
        name: Utf8 nullable [Dictionary] = k.name.as_deref(),
        /// Categories as logged (`kernel`, `cpu_op`, `user_annotation`, ...).
        cat: Utf8 nullable [Dictionary] = k.cat.as_deref(),
        /// `X` (complete event) or `B` (a begin/end pair).
        phase: Utf8 [Dictionary] = k.phase,
        /// Process id as logged (numbers as decimal text).
        pid: Utf8 nullable [Dictionary] = k.pid.as_deref(),
        /// Thread or stream id as logged (numbers as decimal text).
        tid: Utf8 nullable [Dictionary] = k.tid.as_deref(),
        /// Start time on the trace's clock, microseconds (fractions kept).
        ts_us: Float64 = k.ts_us,
        /// Duration, microseconds: `dur` of a complete event, end `ts` minus begin `ts` of a pair.
        dur_us: Float64 = k.dur_us,
        /// Decoder layer of an attention kernel (`args.layer`, or the name `layer_<l>.attn_head_<h>`); null for other kernels.
        layer: Int32 nullable = k.layer,
        /// Attention head of an attention kernel (`args.head`, or the name); null for other kernels.
        head: Int32 nullable = k.head,
        /// Floating-point operations counted by the profiler (`args.flops`); null when not logged.
        flops: Float64 nullable = k.flops,
        /// The event's `args` (a pair's begin and end merged) as compact JSON.
        args: Utf8 nullable [NoStatistics] = k.args.as_deref(),
        /// The event's other keys (`id`, `bp`, `tts`, `cname`, ...; a pair's begin and end merged) as a JSON object; credentials never; null when none.
        extra: Utf8 nullable [NoStatistics] = k.extra.as_deref(),
        /// Input path or object URL.
        source_file: Utf8 [Dictionary] = o.file,
        /// 1-based line where the event (a pair's begin event) starts in the decompressed input.
        source_line: UInt64 = o.line_no,
        /// Byte offset of the event (a pair's begin event) in the decompressed input.
        byte_offset: UInt64 = o.byte_offset,
    }
}

impl TableRow for KernelRow {
    type Builder = KernelsBuilder;

    fn append(&self, builder: &mut KernelsBuilder, origin: &LineOrigin<'_>, _: &Redactor) -> Option<i32> {
        builder.append(self, origin);
        None
    }
}
