//! Server-sent event streams cut into records: a streamed response saved as
//! the server sent it (`data: {...}` lines, a blank line after each event,
//! `data: [DONE]` at the end) is one request spread over many lines, so each
//! stream, from its first line to its `data: [DONE]` (or the end of the
//! input), is one record, its lines joined by `\n`; a stream of
//! newline-delimited JSON chunks (Ollama's) ends at its chunk `"done": true`; streams saved one after
//! another are records one after another. Built on [`LineSplitter`]: memory
//! is bounded by the chunk size plus the longest stream kept (longer ones
//! keep their head only and read as cut, as an over-long line does).

use std::io::Read;

use crate::lines::{LineChunk, LineSpan, LineSplitter, Stream};

/// The line that ends a stream (OpenAI and the servers that copy its protocol).
const DONE: &[u8] = b"[DONE]";

/// Whether `line` is the stream's last: `data: [DONE]`.
pub fn is_done(line: &[u8]) -> bool {
    data_payload(line).is_some_and(|p| p.trim_ascii() == DONE)
}

/// Whether `line` is the last chunk of a newline-delimited JSON stream
/// (Ollama's: `{..., "done": true, ...}`).
pub fn is_last_chunk(line: &[u8]) -> bool {
    // The key unescaped, so not inside a string; then the line read to be sure.
    let key = b"\"done\":";
    line.first() == Some(&b'{')
        && line.windows(key.len()).enumerate().any(|(i, w)| w == key && (i == 0 || line[i - 1] != b'\\'))
        && serde_json::from_slice::<serde_json::Value>(line)
            .is_ok_and(|v| v.get("done") == Some(&serde_json::Value::Bool(true)))
}

/// The payload of a `data:` field line (one optional space after the colon
/// is not part of it, as the SSE specification says); `None` for other lines.
pub fn data_payload(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(b"data:")?;
    Some(rest.strip_prefix(b" ").unwrap_or(rest))
}

/// A stream being gathered across the line splitter's chunks.
struct Pending {
    data: Vec<u8>,
    line_no: u64,
    byte_offset: u64,
    /// Bytes of the stream as logged (larger than `data` when cut).
    len: u64,
}

/// Splits an input into chunks of streams (see the module).
pub struct StreamSplitter<R> {
    lines: LineSplitter<Stream<R>>,
    pending: Option<Pending>,
    chunk_bytes: usize,
    max_stream_bytes: usize,
    keep_when_cut: usize,
    /// Set once the input has ended or failed.
    ended: bool,
}

impl<R: Read> StreamSplitter<R> {
    /// `chunk_bytes`: target size of each chunk; `max_stream_bytes`: a longer
    /// stream keeps its first `keep_when_cut` bytes and reads as cut.
    pub fn new(reader: R, chunk_bytes: usize, max_stream_bytes: usize, keep_when_cut: usize) -> Self {
        StreamSplitter {
            lines: LineSplitter::new(reader, chunk_bytes, max_stream_bytes, keep_when_cut),
            pending: None,
            chunk_bytes,
            max_stream_bytes,
            keep_when_cut,
            ended: false,
        }
    }

    /// Total decompressed bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.lines.bytes_read()
    }

    /// The next chunk of whole streams, or `None` at the end of the input.
    pub fn next_chunk(&mut self) -> Option<LineChunk> {
        let mut out = LineChunk { data: Vec::new(), lines: Vec::new(), stream_error: None };
        while !self.ended && (out.lines.is_empty() || out.data.len() < self.chunk_bytes) {
            let Some(chunk) = self.lines.next_chunk() else {
                self.ended = true;
                break;
            };
            let last = chunk.lines.len().saturating_sub(1);
            for (i, span) in chunk.lines.iter().enumerate() {
                let line = &chunk.data[span.start..span.end];
                if i == last && chunk.stream_error.is_some() {
                    // The input failed: the stream so far is kept, the unread tail rejected.
                    self.flush(&mut out);
                    push(&mut out, line, span.line_no, span.byte_offset, span.original_len);
                    out.stream_error = chunk.stream_error.clone();
                    self.ended = true;
                    return Some(out);
                }
                if self.pending.is_none() && line.trim_ascii().is_empty() && !span.is_cut() {
                    continue;
                }
                self.add_line(line, span);
                if is_done(line) || is_last_chunk(line) {
                    self.flush(&mut out);
                }
            }
        }
        if self.ended {
            self.flush(&mut out);
        }
        (!out.lines.is_empty()).then_some(out)
    }

    /// Adds one line to the stream being gathered (starting one).
    fn add_line(&mut self, line: &[u8], span: &LineSpan) {
        let p = self.pending.get_or_insert_with(|| Pending {
            data: Vec::new(),
            line_no: span.line_no,
            byte_offset: span.byte_offset,
            len: 0,
        });
        let separator = u64::from(p.len > 0);
        p.len += separator + span.original_len;
        let room = if p.len > self.max_stream_bytes as u64 {
            self.keep_when_cut.min(self.max_stream_bytes).saturating_sub(p.data.len())
        } else {
            usize::MAX
        };
        let mut piece = Vec::with_capacity(line.len() + 1);
        if separator == 1 {
            piece.push(b'\n');
        }
        piece.extend_from_slice(line);
        p.data.extend_from_slice(&piece[..piece.len().min(room)]);
    }

    /// Ends the stream being gathered, if any, as a record of `out`.
    fn flush(&mut self, out: &mut LineChunk) {
        if let Some(p) = self.pending.take() {
            push(out, &p.data, p.line_no, p.byte_offset, p.len);
        }
    }
}

/// Appends one record to a chunk.
fn push(out: &mut LineChunk, bytes: &[u8], line_no: u64, byte_offset: u64, original_len: u64) {
    let start = out.data.len();
    out.data.extend_from_slice(bytes);
    out.lines.push(LineSpan { start, end: out.data.len(), line_no, byte_offset, original_len });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(input: &str, chunk_bytes: usize, max: usize) -> Vec<(String, u64, u64, bool)> {
        let mut split = StreamSplitter::new(input.as_bytes(), chunk_bytes, max, 16);
        let mut out = Vec::new();
        while let Some(chunk) = split.next_chunk() {
            for s in &chunk.lines {
                let text = String::from_utf8_lossy(&chunk.data[s.start..s.end]).into_owned();
                out.push((text, s.line_no, s.byte_offset, s.is_cut()));
            }
        }
        out
    }

    #[test]
    fn each_stream_up_to_done_is_one_record() {
        let input = "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n\ndata: {\"b\":1}\n\ndata: [DONE]\n\n";
        for chunk_bytes in [1, 8, 4096] {
            assert_eq!(
                records(input, chunk_bytes, 1 << 20),
                [
                    ("data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]".to_string(), 1, 0, false),
                    ("data: {\"b\":1}\n\ndata: [DONE]".to_string(), 8, 45, false),
                ],
                "chunks of {chunk_bytes} bytes"
            );
        }
    }

    #[test]
    fn a_stream_without_done_ends_with_the_input_and_a_long_one_is_cut() {
        assert_eq!(records("data: {\"a\":1}\r\n\r\ndata: {\"a\":2}", 4096, 1 << 20).len(), 1);
        let long = format!("data: {{\"x\":\"{}\"}}\n\ndata: [DONE]\n", "y".repeat(100));
        let got = records(&long, 4096, 64);
        assert_eq!((got.len(), got[0].0.len(), got[0].3), (1, 16, true));
    }

    #[test]
    fn newline_delimited_streams_end_at_their_last_chunk() {
        let stream = "{\"done\":false}\n{\"done\":false}\n{\"done\":true}\n";
        let got = records(&format!("{stream}{stream}"), 4096, 1 << 20);
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].0.as_str(), got[1].1), (stream.trim_end(), 4));
    }

    #[test]
    fn data_payloads_and_the_done_line() {
        assert_eq!(data_payload(b"data: {}"), Some(&b"{}"[..]));
        assert_eq!(data_payload(b"data:{}"), Some(&b"{}"[..]));
        assert_eq!(data_payload(b"event: x"), None);
        assert!(is_done(b"data: [DONE]") && is_done(b"data:[DONE] ") && !is_done(b"data: {}"));
        assert!(is_last_chunk(br#"{"model":"m","done":true,"eval_count":1}"#));
        assert!(!is_last_chunk(br#"{"model":"m","done":false}"#));
        assert!(!is_last_chunk(br#"{"message":{"content":"{\"done\":true}"},"done":false}"#));
    }
}
