//! Splits one JSON document holding an array of events (a profiler trace:
//! `{"traceEvents": [...], ...}`, or a bare `[...]`) into chunks of events,
//! streaming: memory is bounded by the chunk size plus the longest accepted
//! event, never by the document, which may be hundreds of MB on one line or
//! pretty-printed over millions.
//!
//! The scanner only finds where each element of the array starts and ends
//! (strings, escapes and nesting are tracked; other top-level values such as
//! `deviceProperties` or a many-MB `systemTraceEvents` string are skipped
//! without being kept); each element is then parsed with serde_json by the
//! format, in parallel, exactly as a line is. Chunks are [`LineChunk`]s whose
//! "lines" are events: `line_no` is the line the event starts on, and
//! `byte_offset` its first byte in the decompressed input.
//!
//! A document that ends inside an event (a profiler killed mid-write, a
//! truncated download) or breaks the JSON structure between events yields
//! every complete event before that point, then one last record holding the
//! rest, rejected with the reason and its offset ([`LineChunk::stream_error`]).
//! A bare array may end without its `]` (the Trace Event Format allows it).

use std::io::Read;

use crate::lines::{read_some, LineChunk, LineSpan};

/// Where the scanner is in the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the top-level value.
    Start,
    /// In the top-level object, before a key (or its closing brace).
    Key,
    /// In the top-level object, after a value.
    AfterValue,
    /// In the events array, before an element (or its closing bracket).
    Element,
    /// In the events array, after an element.
    AfterElement,
    /// After the top-level value: only whitespace may follow.
    Trailing,
    /// Nothing more to read.
    Done,
}

/// What stopped the scan of one value.
enum ScanEnd {
    /// The value is complete.
    Complete,
    /// The input ended (or failed) inside the value: the message says which.
    Truncated(String),
}

/// A JSON value being scanned, resumable across buffer refills.
#[derive(Default)]
struct ValueScan {
    started: bool,
    depth: u32,
    in_string: bool,
    escape: bool,
    scalar: bool,
}

impl ValueScan {
    /// Consumes bytes of the value from `bytes`; returns how many and whether
    /// the value ended. A scalar (number, `true`, ...) ends before the first
    /// delimiter, which is not consumed.
    fn advance(&mut self, bytes: &[u8]) -> Result<(usize, bool), String> {
        let mut i = 0;
        if !self.started {
            let Some(&first) = bytes.first() else { return Ok((0, false)) };
            self.started = true;
            i = 1;
            match first {
                b'{' | b'[' => self.depth = 1,
                b'"' => self.in_string = true,
                b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => self.scalar = true,
                other => return Err(format!("expected a JSON value, found {:?}", other as char)),
            }
        }
        while i < bytes.len() {
            if self.escape {
                // The byte after a backslash, which may start a new buffer.
                self.escape = false;
                i += 1;
                continue;
            }
            if self.in_string {
                // Jump to the next quote or backslash.
                let Some(j) = memchr::memchr2(b'"', b'\\', &bytes[i..]) else { return Ok((bytes.len(), false)) };
                i += j + 1;
                if bytes[i - 1] == b'\\' {
                    self.escape = true;
                    continue;
                }
                self.in_string = false;
                if self.depth == 0 {
                    return Ok((i, true));
                }
                continue;
            }
            let b = bytes[i];
            if self.scalar {
                if matches!(b, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r') {
                    return Ok((i, true));
                }
                i += 1;
                continue;
            }
            i += 1;
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        return Ok((i, true));
                    }
                }
                _ => {}
            }
        }
        Ok((i, false))
    }

    /// A scalar at the very end of the input is complete; anything else is not.
    fn complete_at_eof(&self) -> bool {
        self.scalar
    }
}

/// Streaming splitter of a JSON event array into [`LineChunk`]s.
pub struct EventSplitter<R> {
    reader: R,
    buf: Vec<u8>,
    pos: usize,
    filled: usize,
    eof: bool,
    error: Option<String>,
    /// Offset of `buf[pos]` in the decompressed input.
    offset: u64,
    /// 1-based line of `buf[pos]`.
    line: u64,
    state: State,
    /// True when the events array is the value of a key of the top-level object.
    in_object: bool,
    key: Vec<u8>,
    chunk_bytes: usize,
    max_event_bytes: usize,
    keep_when_cut: usize,
}

impl<R: Read> EventSplitter<R> {
    /// `key`: the top-level key holding the events; `chunk_bytes`: target
    /// size of each chunk; events longer than `max_event_bytes` are cut to
    /// their first `keep_when_cut` bytes (and rejected by the reader).
    pub fn new(reader: R, key: &str, chunk_bytes: usize, max_event_bytes: usize, keep_when_cut: usize) -> Self {
        EventSplitter {
            reader,
            buf: vec![0; 256 * 1024],
            pos: 0,
            filled: 0,
            eof: false,
            error: None,
            offset: 0,
            line: 1,
            state: State::Start,
            in_object: false,
            key: key.as_bytes().to_vec(),
            chunk_bytes,
            max_event_bytes,
            keep_when_cut,
        }
    }

    /// Total decompressed bytes consumed so far.
    pub fn bytes_read(&self) -> u64 {
        self.offset
    }

    /// Refills the buffer when it is empty. Returns false at EOF or on error.
    fn fill(&mut self) -> bool {
        if self.pos < self.filled {
            return true;
        }
        if self.eof || self.error.is_some() {
            return false;
        }
        self.pos = 0;
        self.filled = 0;
        match read_some(&mut self.reader, &mut self.buf) {
            Ok(0) => {
                self.eof = true;
                false
            }
            Ok(n) => {
                self.filled = n;
                true
            }
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    fn consume(&mut self, n: usize) {
        let bytes = &self.buf[self.pos..self.pos + n];
        self.line += memchr::memchr_iter(b'\n', bytes).count() as u64;
        self.offset += n as u64;
        self.pos += n;
    }

    /// The next byte that is not JSON whitespace (not consumed); `None` at the end of input.
    fn peek_non_space(&mut self) -> Option<u8> {
        loop {
            if !self.fill() {
                return None;
            }
            let bytes = &self.buf[self.pos..self.filled];
            match bytes.iter().position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
                Some(i) => {
                    self.consume(i);
                    return Some(self.buf[self.pos]);
                }
                None => self.consume(bytes.len()),
            }
        }
    }

    /// Scans one value from the current position; its bytes are appended to
    /// `sink` up to `keep` bytes. Returns how it ended and its full length.
    fn scan_value(&mut self, mut sink: Option<&mut Vec<u8>>, keep: usize) -> Result<(ScanEnd, u64), String> {
        let mut scan = ValueScan::default();
        let mut len = 0u64;
        loop {
            if !self.fill() {
                if scan.complete_at_eof() && self.error.is_none() {
                    return Ok((ScanEnd::Complete, len));
                }
                let why = self
                    .error
                    .clone()
                    .unwrap_or_else(|| "the document ends inside this event (truncated trace)".into());
                return Ok((ScanEnd::Truncated(why), len));
            }
            let (n, done) = scan.advance(&self.buf[self.pos..self.filled])?;
            if let Some(sink) = sink.as_deref_mut() {
                let room = keep.saturating_sub(len as usize).min(n);
                sink.extend_from_slice(&self.buf[self.pos..self.pos + room]);
            }
            self.consume(n);
            len += n as u64;
            if done {
                return Ok((ScanEnd::Complete, len));
            }
        }
    }

    /// The stream's failure, if any; no more reads are tried after it.
    fn take_stream_error(&mut self) -> Option<String> {
        let error = self.error.take();
        if error.is_some() {
            self.eof = true;
        }
        error
    }

    /// Records the rest of the input from here as one rejected record (its
    /// first bytes kept) and stops.
    fn fail(&mut self, chunk: &mut LineChunk, why: String) {
        let (line_no, byte_offset, at) = (self.line, self.offset, chunk.data.len());
        let mut kept = 0;
        while self.fill() {
            let n = self.filled - self.pos;
            let room = self.keep_when_cut.saturating_sub(kept).min(n);
            chunk.data.extend_from_slice(&self.buf[self.pos..self.pos + room]);
            kept += room;
            self.consume(n);
        }
        let why = match self.take_stream_error() {
            Some(stream) => format!("{why}; then {stream}"),
            None => why,
        };
        let end = chunk.data.len();
        chunk.lines.push(LineSpan { start: at, end, line_no, byte_offset, original_len: (end - at) as u64 });
        chunk.stream_error = Some(why);
        self.state = State::Done;
    }

    /// A byte that does not belong where it is: the structure is lost, so the
    /// rest of the document is one rejected record.
    fn unexpected(&mut self, chunk: &mut LineChunk, found: u8, expected: &str) {
        let why = format!(
            "not a trace document at byte {} (line {}): expected {expected}, found {:?}; the rest of the input is not read",
            self.offset, self.line, found as char
        );
        self.fail(chunk, why);
    }

    /// At the end of input: a stream failure becomes a rejected record.
    fn at_end(&mut self, chunk: &mut LineChunk) {
        match self.take_stream_error() {
            Some(why) => self.fail(chunk, why),
            None => self.state = State::Done,
        }
    }

    /// Scans the value of a key that is not the events array.
    fn skip_value(&mut self, chunk: &mut LineChunk) {
        if self.peek_non_space().is_none() {
            return self.at_end(chunk);
        }
        match self.scan_value(None, 0) {
            Ok((ScanEnd::Complete, _)) => self.state = State::AfterValue,
            // No event is lost when the document ends inside metadata, unless the stream failed.
            Ok((ScanEnd::Truncated(_), _)) => self.at_end(chunk),
            Err(e) => self.fail(chunk, format!("not a trace document at byte {}: {e}", self.offset)),
        }
    }

    /// Scans one event into the chunk.
    fn event(&mut self, chunk: &mut LineChunk) {
        let (line_no, byte_offset, at) = (self.line, self.offset, chunk.data.len());
        let keep = self.max_event_bytes;
        let result = self.scan_value(Some(&mut chunk.data), keep);
        let end = chunk.data.len();
        match result {
            Ok((ScanEnd::Complete, len)) => {
                if len as usize > self.max_event_bytes {
                    // Keep only the head of an over-long event, shorter than the
                    // event so the reader sees it cut and rejects it.
                    chunk.data.truncate(at + self.keep_when_cut.min(self.max_event_bytes).min(end - at));
                }
                let end = chunk.data.len();
                chunk.lines.push(LineSpan { start: at, end, line_no, byte_offset, original_len: len });
                self.state = State::AfterElement;
            }
            Ok((ScanEnd::Truncated(why), _)) => {
                self.take_stream_error();
                chunk.data.truncate(at + self.keep_when_cut.min(end - at));
                let end = chunk.data.len();
                chunk.lines.push(LineSpan { start: at, end, line_no, byte_offset, original_len: (end - at) as u64 });
                chunk.stream_error = Some(format!("{why}; the event starts at byte {byte_offset}"));
                self.state = State::Done;
            }
            Err(e) => {
                chunk.data.truncate(at);
                self.fail(chunk, format!("not a trace document at byte {byte_offset}: {e}"));
            }
        }
    }

    /// The next chunk of events, or `None` at the end of input.
    pub fn next_chunk(&mut self) -> Option<LineChunk> {
        let mut chunk = LineChunk { data: Vec::with_capacity(self.chunk_bytes), lines: Vec::new(), stream_error: None };
        while chunk.data.len() < self.chunk_bytes && self.state != State::Done {
            match self.state {
                State::Start => {
                    if self.offset == 0 && self.fill() && self.buf[..self.filled].starts_with(b"\xEF\xBB\xBF") {
                        self.consume(3);
                    }
                    match self.peek_non_space() {
                        None => self.at_end(&mut chunk),
                        Some(b'{') => {
                            self.consume(1);
                            self.in_object = true;
                            self.state = State::Key;
                        }
                        Some(b'[') => {
                            self.consume(1);
                            self.state = State::Element;
                        }
                        Some(b) => self.unexpected(&mut chunk, b, "`{` or `[`"),
                    }
                }
                State::Key => match self.peek_non_space() {
                    None => self.at_end(&mut chunk),
                    Some(b'}') => {
                        self.consume(1);
                        self.state = State::Trailing;
                    }
                    Some(b'"') => {
                        let mut key = Vec::with_capacity(32);
                        let keep = self.key.len() + 2;
                        match self.scan_value(Some(&mut key), keep) {
                            Ok((ScanEnd::Complete, len)) => {
                                let is_events = len as usize == keep && key[1..key.len() - 1] == self.key[..];
                                match self.peek_non_space() {
                                    Some(b':') => self.consume(1),
                                    Some(b) => {
                                        self.unexpected(&mut chunk, b, "`:` after a key");
                                        continue;
                                    }
                                    None => {
                                        self.at_end(&mut chunk);
                                        continue;
                                    }
                                }
                                if !is_events {
                                    self.skip_value(&mut chunk);
                                    continue;
                                }
                                match self.peek_non_space() {
                                    Some(b'[') => {
                                        self.consume(1);
                                        self.state = State::Element;
                                    }
                                    Some(b) => {
                                        let expected = format!(
                                            "an array as the value of {:?}",
                                            String::from_utf8_lossy(&self.key)
                                        );
                                        self.unexpected(&mut chunk, b, &expected);
                                    }
                                    None => self.at_end(&mut chunk),
                                }
                            }
                            _ => self.at_end(&mut chunk),
                        }
                    }
                    Some(b) => self.unexpected(&mut chunk, b, "a key"),
                },
                State::AfterValue => match self.peek_non_space() {
                    None => self.at_end(&mut chunk),
                    Some(b',') => {
                        self.consume(1);
                        self.state = State::Key;
                    }
                    Some(b'}') => {
                        self.consume(1);
                        self.state = State::Trailing;
                    }
                    Some(b) => self.unexpected(&mut chunk, b, "`,` or `}`"),
                },
                State::Element => match self.peek_non_space() {
                    None => self.at_end(&mut chunk),
                    Some(b']') => {
                        self.consume(1);
                        self.state = if self.in_object { State::AfterValue } else { State::Trailing };
                    }
                    Some(_) => self.event(&mut chunk),
                },
                State::AfterElement => match self.peek_non_space() {
                    None => self.at_end(&mut chunk),
                    Some(b',') => {
                        self.consume(1);
                        self.state = State::Element;
                    }
                    Some(b']') => {
                        self.consume(1);
                        self.state = if self.in_object { State::AfterValue } else { State::Trailing };
                    }
                    Some(b) => self.unexpected(&mut chunk, b, "`,` or `]` after an event"),
                },
                State::Trailing => match self.peek_non_space() {
                    None => self.at_end(&mut chunk),
                    Some(b) => self.unexpected(&mut chunk, b, "the end of the document"),
                },
                State::Done => {}
            }
        }
        (!chunk.lines.is_empty()).then_some(chunk)
    }
}

/// A scanner over `head` (BOM removed) just past its first non-space byte,
/// when that byte is `open`; `head` is returned without its BOM, as offsets count.
fn head_scan(head: &[u8], open: u8) -> Option<(&[u8], EventSplitter<&[u8]>)> {
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let mut split = EventSplitter::new(head, "", 0, 0, 0);
    if split.peek_non_space() != Some(open) {
        return None;
    }
    split.consume(1);
    Some((head, split))
}

/// The keys of the top-level object that start within `head` (a file's
/// first bytes), in order; empty when `head` does not start with `{`. Values
/// are skipped; the scan stops at the first value that does not end within
/// `head`.
pub fn head_object_keys(head: &[u8]) -> Vec<String> {
    let mut keys = Vec::new();
    let Some((head, mut split)) = head_scan(head, b'{') else { return keys };
    loop {
        if split.peek_non_space() != Some(b'"') {
            return keys;
        }
        let start = split.offset as usize;
        if !matches!(split.scan_value(None, 0), Ok((ScanEnd::Complete, _))) {
            return keys;
        }
        match serde_json::from_slice::<String>(&head[start..split.offset as usize]) {
            Ok(k) => keys.push(k),
            Err(_) => return keys,
        }
        if split.peek_non_space() != Some(b':') {
            return keys;
        }
        split.consume(1);
        if split.peek_non_space().is_none() || !matches!(split.scan_value(None, 0), Ok((ScanEnd::Complete, _))) {
            return keys;
        }
        if split.peek_non_space() != Some(b',') {
            return keys;
        }
        split.consume(1);
    }
}

/// The first element of a top-level array when it ends within `head`.
pub fn head_first_element(head: &[u8]) -> Option<&[u8]> {
    let (head, mut split) = head_scan(head, b'[')?;
    split.peek_non_space()?;
    let start = split.offset as usize;
    match split.scan_value(None, 0) {
        Ok((ScanEnd::Complete, _)) => Some(&head[start..split.offset as usize]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event of a document with `(line_no, byte_offset, text)`, and the chunk-level error.
    fn split(doc: &[u8], chunk_bytes: usize) -> (Vec<(u64, u64, String)>, Option<String>) {
        let mut s = EventSplitter::new(doc, "traceEvents", chunk_bytes, 1 << 20, 64);
        let (mut events, mut error) = (Vec::new(), None);
        while let Some(chunk) = s.next_chunk() {
            for l in &chunk.lines {
                events.push((
                    l.line_no,
                    l.byte_offset,
                    String::from_utf8_lossy(&chunk.data[l.start..l.end]).into_owned(),
                ));
            }
            error = error.or(chunk.stream_error);
        }
        assert_eq!(s.bytes_read(), doc.len() as u64);
        (events, error)
    }

    #[test]
    fn events_of_an_object_document_with_positions() {
        let doc = b"{\"schemaVersion\": 1, \"deviceProperties\": [{\"n\": \"a]}\\\"\"}],\n \"traceEvents\": [\n  {\"ph\": \"X\", \"name\": \"a,b]\"},\n  {\"ph\": \"B\"}\n ],\n \"traceName\": \"x\"\n}\n";
        let (events, error) = split(doc, 1);
        let text = String::from_utf8_lossy(doc);
        let first = text.find("{\"ph\": \"X\"").unwrap() as u64;
        let second = text.find("{\"ph\": \"B\"").unwrap() as u64;
        assert_eq!(
            events,
            [(3, first, "{\"ph\": \"X\", \"name\": \"a,b]\"}".to_string()), (4, second, "{\"ph\": \"B\"}".to_string())]
        );
        assert_eq!(error, None);
    }

    #[test]
    fn bare_arrays_may_end_without_their_bracket() {
        let (events, error) = split(b"[{\"ph\":\"X\"},{\"ph\":\"E\"},\n", 1 << 20);
        assert_eq!(events.len(), 2);
        assert_eq!(error, None);
        let (events, _) = split(b"[1, \"s\", {\"a\":[1,2]}, null]", 1 << 20);
        let texts: Vec<&str> = events.iter().map(|e| e.2.as_str()).collect();
        assert_eq!(texts, ["1", "\"s\"", "{\"a\":[1,2]}", "null"]);
    }

    #[test]
    fn a_truncated_last_event_is_the_one_error_record() {
        let (events, error) = split(b"{\"traceEvents\":[{\"ph\":\"X\"},\n{\"ph\":\"X\",\"na", 1 << 20);
        assert_eq!(events.len(), 2);
        assert_eq!(events[1], (2, 28, "{\"ph\":\"X\",\"na".to_string()));
        assert!(error.unwrap().contains("ends inside this event"));
    }

    #[test]
    fn broken_structure_rejects_the_rest_once() {
        let (events, error) = split(b"{\"traceEvents\":[{\"ph\":\"X\"} {\"ph\":\"X\"}]}", 1 << 20);
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].1, 27);
        assert!(error.unwrap().contains("expected `,` or `]` after an event"));
        let (events, error) = split(b"{\"traceEvents\": 5}", 1 << 20);
        assert_eq!(events.len(), 1);
        assert!(error.unwrap().contains("an array as the value of \"traceEvents\""));
        let (events, error) = split(b"{\"traceEvents\": []} trailing", 1 << 20);
        assert_eq!(events.len(), 1);
        assert!(error.unwrap().contains("the end of the document"));
    }

    #[test]
    fn empty_and_eventless_documents_have_no_records() {
        assert_eq!(split(b"", 1 << 20), (vec![], None));
        assert_eq!(split(b"  \n", 1 << 20), (vec![], None));
        assert_eq!(split(b"{\"traceEvents\": [], \"x\": {\"y\": [1]}}", 1 << 20), (vec![], None));
        // Metadata cut short loses no event.
        assert_eq!(split(b"{\"traceEvents\": [], \"x\": {\"y\": [1", 1 << 20), (vec![], None));
    }

    #[test]
    fn over_long_events_are_cut_to_their_head() {
        let big = format!("[{{\"ph\":\"X\",\"s\":\"{}\"}},{{\"ph\":\"B\"}}]", "x".repeat(5000));
        let mut s = EventSplitter::new(big.as_bytes(), "traceEvents", 1 << 20, 1000, 10);
        let chunk = s.next_chunk().unwrap();
        assert_eq!(chunk.lines.len(), 2);
        assert!(chunk.lines[0].is_cut());
        assert_eq!(chunk.lines[0].end - chunk.lines[0].start, 10);
        assert_eq!(chunk.lines[0].original_len, 5000 + 17);
        assert_eq!(&chunk.data[chunk.lines[1].start..chunk.lines[1].end], b"{\"ph\":\"B\"}");
        // Over the limit but within the snippet size: still cut.
        let mut s = EventSplitter::new(big.as_bytes(), "traceEvents", 1 << 20, 1000, 64 * 1024);
        let chunk = s.next_chunk().unwrap();
        assert!(chunk.lines[0].is_cut() && !chunk.lines[1].is_cut());
    }

    #[test]
    fn head_scans_find_keys_and_first_elements() {
        let head = b"\xEF\xBB\xBF{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"a\": 1}],\n  \"traceEvents\": [\n    {\"ph\"";
        assert_eq!(head_object_keys(head), ["schemaVersion", "deviceProperties", "traceEvents"]);
        assert_eq!(head_object_keys(b"{\"a\":1,\"b\":{\"c\":"), ["a", "b"]);
        assert!(head_object_keys(b"[1]").is_empty());
        assert_eq!(head_first_element(b" [ {\"ph\":\"X\",\"ts\":1}, {\"p"), Some(&b"{\"ph\":\"X\",\"ts\":1}"[..]));
        assert_eq!(head_first_element(b"[{\"ph\":\"X\""), None);
        assert_eq!(head_first_element(b"{}"), None);
    }
}
