//! `rejects`: one row per input line that could not become a row (or per
//! record rejected inside a line that holds several), with enough to find it
//! again (file, line, byte offset, record) and its raw bytes.

use super::columns::table;
use crate::record::LineOrigin;

/// Longest raw-line prefix kept in `rejects.raw_line`.
pub const REJECT_SNIPPET_BYTES: usize = 64 * 1024;

table! {
    /// One row per input line that could not become a row, or per record rejected inside a line.
    pub table RejectsBuilder(o: &LineOrigin<'_>, record: Option<&str>, error: &str, raw: &[u8], cut: bool) {
        name: "rejects",
        key: ["source_file", "source_line", "record"],
        partition: None,
        written_by: "tokscope ingest",
    } {
        /// Input path or URL.
        source_file: Utf8 [Dictionary] = o.file,
        /// Format the file was parsed as (`unknown` if undetectable).
        source_format: Utf8 nullable [Dictionary] = Some(o.format),
        /// 1-based line number.
        source_line: UInt64 = o.line_no,
        /// Offset of the line in the decompressed input.
        byte_offset: UInt64 = o.byte_offset,
        /// The record rejected inside a line of several (an OTLP span's `spanId`, `[i]` for element i of a JSON array line); null when the whole line was rejected.
        record: Utf8 nullable = record,
        /// Why the line was rejected.
        error: Utf8 = error,
        /// The raw line (or the rejected record's JSON), cut at 64 KiB, bytes kept exactly but for secrets a format knows its lines carry (hashed API keys, pre-signed URLs: `REDACTED`).
        raw_line: Binary [NoStatistics] = &raw[..raw.len().min(REJECT_SNIPPET_BYTES)],
        /// True when raw_line was cut.
        raw_line_truncated: Boolean = cut || raw.len() > REJECT_SNIPPET_BYTES,
    }
}
