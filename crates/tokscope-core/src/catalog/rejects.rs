//! `rejects`: one row per input line that could not become a row (or per
//! record rejected inside a line that holds several), with enough to find it
//! again (file, line, byte offset, record) and its raw bytes.

use super::columns::table;
use crate::record::LineOrigin;
use crate::redact::Redactor;

/// Longest raw-line prefix kept in `rejects.raw_line`.
pub const REJECT_SNIPPET_BYTES: usize = 64 * 1024;

table! {
    /// One row per input line that could not become a row, or per record rejected inside a line.
    pub table RejectsBuilder(o: &LineOrigin<'_>, record: Option<&str>, error: &str, raw: &[u8], cut: bool, line_bytes: u64, redaction: &Redactor) {
        name: "rejects",
        key: ["source_file", "source_line", "record"],
        partition: None,
        written_by: Ingest,
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
        /// Why the line was rejected (under redaction, quoted values in it are replaced by `…`).
        error: Utf8 = redaction.message(error).as_ref(),
        /// The raw line (or the rejected record's JSON), cut at 64 KiB, bytes kept exactly but for secrets a format knows its lines carry (hashed API keys, pre-signed URLs: `REDACTED`); the keyed hash of those bytes under `--redact hash`, null under `drop`.
        raw_line: Binary nullable [NoStatistics] = redaction.bytes(&raw[..raw.len().min(REJECT_SNIPPET_BYTES)]).as_deref(),
        /// Length of the whole line (or record) as logged, bytes (kept under redaction).
        raw_line_bytes: UInt64 = line_bytes,
        /// True when raw_line holds less than the whole line.
        raw_line_truncated: Boolean = cut || raw.len() > REJECT_SNIPPET_BYTES,
    }
}
