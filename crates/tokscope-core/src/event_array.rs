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
//!
//! The same scanner cuts any JSON file that is not JSON lines into records
//! ([`EventSplitter::records`]): a pretty-printed document, several
//! documents one after another (`jq .` output, concatenated bucket objects),
//! or an array of records, pretty-printed or longer than the file's head.
//! Each top-level value is a record, except a top-level array, whose
//! elements are. [`is_json_document`] tells such a file from JSON lines by
//! its head.

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

/// What the splitter cuts out: the events of one trace document, or the
/// records of a stream of JSON values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The array under a key of one top-level object (or a bare array).
    Events,
    /// Every top-level value; the elements of a top-level array.
    Records,
}

impl Mode {
    /// What a record is called in messages.
    fn record(self) -> &'static str {
        match self {
            Mode::Events => "event",
            Mode::Records => "record",
        }
    }

    /// What the input is called in messages.
    fn document(self) -> &'static str {
        match self {
            Mode::Events => "a trace document",
            Mode::Records => "JSON",
        }
    }
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
    mode: Mode,
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
            mode: Mode::Events,
            in_object: false,
            key: key.as_bytes().to_vec(),
            chunk_bytes,
            max_event_bytes,
            keep_when_cut,
        }
    }

    /// A splitter of a stream of JSON values into records: each top-level
    /// value is one, and each element of a top-level array (sizes as in [`EventSplitter::new`]).
    pub fn records(reader: R, chunk_bytes: usize, max_record_bytes: usize, keep_when_cut: usize) -> Self {
        EventSplitter { mode: Mode::Records, ..Self::new(reader, "", chunk_bytes, max_record_bytes, keep_when_cut) }
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
                let why = self.error.clone().unwrap_or_else(|| match self.mode {
                    Mode::Events => "the document ends inside this event (truncated trace)".into(),
                    Mode::Records => "the input ends inside this record (truncated JSON)".into(),
                });
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
            "not {} at byte {} (line {}): expected {expected}, found {:?}; the rest of the input is not read",
            self.mode.document(),
            self.offset,
            self.line,
            found as char
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
            Err(e) => self.fail(chunk, format!("not {} at byte {}: {e}", self.mode.document(), self.offset)),
        }
    }

    /// Scans one event (or record) into the chunk; `then` is the state after it.
    fn event(&mut self, chunk: &mut LineChunk, then: State) {
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
                self.state = then;
            }
            Ok((ScanEnd::Truncated(why), _)) => {
                self.take_stream_error();
                chunk.data.truncate(at + self.keep_when_cut.min(end - at));
                let end = chunk.data.len();
                chunk.lines.push(LineSpan { start: at, end, line_no, byte_offset, original_len: (end - at) as u64 });
                chunk.stream_error = Some(format!("{why}; the {} starts at byte {byte_offset}", self.mode.record()));
                self.state = State::Done;
            }
            Err(e) => {
                chunk.data.truncate(at);
                self.fail(chunk, format!("not {} at byte {byte_offset}: {e}", self.mode.document()));
            }
        }
    }

    /// In a stream of records, at the next top-level value (first byte `b`):
    /// an array's elements are records, any other value is one.
    fn record_or_array(&mut self, chunk: &mut LineChunk, b: u8) {
        if b == b'[' {
            self.consume(1);
            self.state = State::Element;
        } else {
            self.event(chunk, State::Trailing);
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
                        Some(b) if self.mode == Mode::Records => self.record_or_array(&mut chunk, b),
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
                    Some(_) => self.event(&mut chunk, State::AfterElement),
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
                    Some(b) => {
                        let expected = match self.mode {
                            Mode::Events => "`,` or `]` after an event",
                            Mode::Records => "`,` or `]` after a record",
                        };
                        self.unexpected(&mut chunk, b, expected)
                    }
                },
                State::Trailing => match self.peek_non_space() {
                    None => self.at_end(&mut chunk),
                    Some(b) if self.mode == Mode::Records => self.record_or_array(&mut chunk, b),
                    Some(b) => self.unexpected(&mut chunk, b, "the end of the document"),
                },
                State::Done => {}
            }
        }
        (!chunk.lines.is_empty()).then_some(chunk)
    }
}

/// Whether a file whose first bytes are `head` holds JSON that is not JSON
/// lines, to be cut into records by [`EventSplitter::records`]: its first
/// value is an object or array that spans lines (pretty-printed), or runs
/// past a full `head` (`whole`: the head is the whole input) over several
/// lines, or is an array longer than `head` on one line. A first value that
/// ends on its first line is JSON lines (a one-line array included: the
/// formats read it as one line of records), and so is a head that is not
/// valid JSON from its start (JSON lines whose first line is cut or broken).
pub fn is_json_document(head: &[u8], whole: bool) -> bool {
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let Some(start) = head.iter().position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r')) else { return false };
    let rest = &head[start..];
    if !matches!(rest[0], b'{' | b'[') {
        return false;
    }
    let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<serde::de::IgnoredAny>();
    match values.next() {
        Some(Ok(_)) => memchr::memchr(b'\n', &rest[..values.byte_offset()]).is_some(),
        Some(Err(e)) if e.is_eof() && !whole => rest[0] == b'[' || memchr::memchr(b'\n', rest).is_some(),
        _ => false,
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

    /// Every record of a stream of JSON values with `(line_no, byte_offset, text)`, and the error.
    fn records(doc: &[u8], chunk_bytes: usize) -> (Vec<(u64, u64, String)>, Option<String>) {
        let mut s = EventSplitter::records(doc, chunk_bytes, 1 << 20, 64);
        let (mut out, mut error) = (Vec::new(), None);
        while let Some(chunk) = s.next_chunk() {
            for l in &chunk.lines {
                let text = String::from_utf8_lossy(&chunk.data[l.start..l.end]).into_owned();
                out.push((l.line_no, l.byte_offset, text));
            }
            error = error.or(chunk.stream_error);
        }
        assert_eq!(s.bytes_read(), doc.len() as u64);
        (out, error)
    }

    #[test]
    fn pretty_documents_one_after_another_are_records() {
        let doc = b"\xEF\xBB\xBF{\n  \"a\": [1, 2],\n  \"b\": \"}\"\n}\n{\"c\": 3}\n\n  {\n \"d\": {}\n}";
        for chunk_bytes in [1, 1 << 20] {
            let (recs, error) = records(doc, chunk_bytes);
            assert_eq!(
                recs,
                [
                    (1, 3, "{\n  \"a\": [1, 2],\n  \"b\": \"}\"\n}".to_string()),
                    (5, 33, "{\"c\": 3}".to_string()),
                    (7, 45, "{\n \"d\": {}\n}".to_string())
                ]
            );
            assert_eq!(error, None);
        }
    }

    #[test]
    fn arrays_give_their_elements_as_records() {
        let doc = b"[\n  {\"a\": 1},\n  {\"b\": [2]}\n]\n[{\"c\": 3}]\n";
        let (recs, error) = records(doc, 1);
        let texts: Vec<&str> = recs.iter().map(|r| r.2.as_str()).collect();
        assert_eq!(texts, ["{\"a\": 1}", "{\"b\": [2]}", "{\"c\": 3}"]);
        assert_eq!((recs[1].0, recs[1].1, recs[2].0), (3, 16, 5));
        assert_eq!(error, None);
        assert_eq!(records(b"[]", 1), (vec![], None));
    }

    #[test]
    fn a_truncated_or_broken_stream_ends_with_one_rejected_record() {
        let (recs, error) = records(b"{\"a\": 1}\n{\"b\": ", 1 << 20);
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].1, 9);
        let error = error.unwrap();
        assert!(error.contains("truncated JSON") && error.contains("record starts at byte 9"), "{error}");
        let (recs, error) = records(b"[{\"a\": 1} {\"b\": 2}]", 1 << 20);
        assert_eq!(recs.len(), 2);
        assert!(error.unwrap().contains("not JSON at byte 10"));
    }

    #[test]
    fn json_documents_are_told_from_json_lines_by_their_head() {
        let whole = |head: &[u8]| is_json_document(head, true);
        let part = |head: &[u8]| is_json_document(head, false);
        assert!(whole(b"{\n  \"resourceSpans\": []\n}\n"));
        assert!(whole(b"\xEF\xBB\xBF  [\n {\"a\": 1}\n]"));
        assert!(whole(b"{\"trace\": {\"id\": \"t\",\n \"x\": 1}}"));
        // A document longer than the head: pretty-printed, or an array on one line.
        assert!(part(b"{\n  \"observations\": [\n    {\"id\": "));
        assert!(part(b"[{\"a\": 1}, {\"b\": "));
        // JSON lines: one-line values, a one-line array, a first line longer
        // than the head, a file that ends inside its first value, a broken first line.
        assert!(!whole(b"{\"a\": 1}\n{\"a\": 2}\n"));
        assert!(!whole(b"[{\"a\": 1}, {\"a\": 2}]\n"));
        assert!(!part(b"{\"a\": 1, \"b\": \"long line beyond the head"));
        assert!(!whole(b"{\"a\": 1,\n\n"));
        assert!(!part(b"{\"a\": 1, \"b\": \"cut\n{\"a\": 2}\n"));
        assert!(!part(b"{\"a\": 1,\n{\"a\": 2}\n"));
        assert!(!whole(b"id,model\n1,m\n"));
        assert!(!whole(b"data: {}\n\n"));
        assert!(!whole(b""));
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
