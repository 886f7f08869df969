//! `rejects`: one row per input line that could not become a row, with
//! enough to find it again (file, line, byte offset) and its raw bytes.

use super::columns::table;
use crate::record::LineOrigin;
use crate::redact::Redactor;

/// Longest raw-line prefix kept in `rejects.raw_line`.
pub const REJECT_SNIPPET_BYTES: usize = 64 * 1024;

table! {
    /// One row per input line that could not become a row.
    pub table RejectsBuilder(o: &LineOrigin<'_>, error: &str, raw: &[u8], original_len: u64, redaction: &Redactor) {
        name: "rejects",
        key: ["source_file", "source_line"],
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
        /// Why the line was rejected (under redaction, quoted values in it are replaced by `…`).
        error: Utf8 = redaction.message(error).as_ref(),
        /// The raw line, cut at 64 KiB, bytes kept exactly (the keyed hash of those bytes under `--redact hash`, null under `drop`).
        raw_line: Binary nullable [NoStatistics] = redaction.bytes(&raw[..raw.len().min(REJECT_SNIPPET_BYTES)]).as_deref(),
        /// Length of the whole line, bytes (kept under redaction).
        raw_line_bytes: UInt64 = original_len,
        /// True when raw_line holds less than the whole line.
        raw_line_truncated: Boolean = original_len > raw.len().min(REJECT_SNIPPET_BYTES) as u64,
    }
}
