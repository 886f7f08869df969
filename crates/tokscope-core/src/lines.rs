//! Splits a decompressed byte stream into chunks of whole lines, streaming:
//! memory is bounded by the chunk size plus the longest accepted line, never
//! by the file. Lines longer than the limit are cut (kept up to the reject
//! snippet size) so that a 100 MB line cannot exhaust memory.

use std::io::{ErrorKind, Read};

/// A chunk of complete lines with their positions in the (decompressed) input.
pub struct LineChunk {
    /// Concatenated line bytes (without line terminators).
    pub data: Vec<u8>,
    /// Per line: range in `data`, 1-based line number, byte offset in the input,
    /// and whether the line was cut because it exceeded the line limit.
    pub lines: Vec<LineSpan>,
    /// Set when the stream failed (or, for an event document, its structure
    /// broke): the chunk's last line is then the unreadable tail of the input
    /// (possibly empty) and is rejected with this message.
    pub stream_error: Option<String>,
}

impl LineChunk {
    /// Whether a line of `len` bytes may join this chunk: it fits in the
    /// buffer (growing it would copy the whole chunk), or the chunk is empty,
    /// so a line longer than the chunk size still gets a chunk of its own.
    fn has_room(&self, len: usize) -> bool {
        self.lines.is_empty() || self.data.len() + len <= self.data.capacity()
    }
}

/// Position of one line inside a [`LineChunk`].
#[derive(Debug, Clone, Copy)]
pub struct LineSpan {
    /// Start index in `LineChunk::data`.
    pub start: usize,
    /// End index (exclusive) in `LineChunk::data`.
    pub end: usize,
    /// 1-based line number in the input.
    pub line_no: u64,
    /// Byte offset of the line's first byte in the decompressed input.
    pub byte_offset: u64,
    /// Length of the original line, which is larger than `end - start` when cut.
    pub original_len: u64,
}

impl LineSpan {
    /// True when the line exceeded the line limit and only a prefix was kept.
    pub fn is_cut(&self) -> bool {
        self.original_len > (self.end - self.start) as u64
    }
}

/// Reads once into `buf`, again when interrupted: `Ok(0)` at the end of the
/// input; on failure, the error a rejected tail of the input carries.
pub(crate) fn read_some<R: Read>(reader: &mut R, buf: &mut [u8]) -> Result<usize, String> {
    loop {
        match reader.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("input stream failed after this point: {e}")),
        }
    }
}

/// Streaming line splitter over any reader.
pub struct LineSplitter<R> {
    reader: R,
    buf: Vec<u8>,
    /// Bytes `buf[pos..filled]` are read but not yet handed out.
    pos: usize,
    filled: usize,
    eof: bool,
    error: Option<String>,
    next_line_no: u64,
    offset: u64,
    chunk_bytes: usize,
    max_line_bytes: usize,
    keep_when_cut: usize,
    first: bool,
}

impl<R: Read> LineSplitter<R> {
    /// `chunk_bytes`: target size of each chunk; `max_line_bytes`: longer lines
    /// are cut to their first `keep_when_cut` bytes (at most `max_line_bytes`).
    pub fn new(reader: R, chunk_bytes: usize, max_line_bytes: usize, keep_when_cut: usize) -> Self {
        Self {
            reader,
            buf: vec![0; chunk_bytes.max(64 * 1024)],
            pos: 0,
            filled: 0,
            eof: false,
            error: None,
            next_line_no: 1,
            offset: 0,
            chunk_bytes,
            max_line_bytes,
            keep_when_cut,
            first: true,
        }
    }

    /// Total decompressed bytes handed out so far.
    pub fn bytes_read(&self) -> u64 {
        self.offset
    }

    /// Reads more input into `buf`, compacting first. Returns false at EOF or error.
    fn fill(&mut self) -> bool {
        if self.eof || self.error.is_some() {
            return false;
        }
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.filled, 0);
            self.filled -= self.pos;
            self.pos = 0;
        }
        if self.filled == self.buf.len() {
            let new_len = self.buf.len() * 2;
            self.buf.resize(new_len, 0);
        }
        match read_some(&mut self.reader, &mut self.buf[self.filled..]) {
            Ok(0) => {
                self.eof = true;
                false
            }
            Ok(n) => {
                self.filled += n;
                true
            }
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    /// The next chunk of lines, or `None` at the end of input.
    pub fn next_chunk(&mut self) -> Option<LineChunk> {
        let mut chunk = LineChunk { data: Vec::with_capacity(self.chunk_bytes), lines: Vec::new(), stream_error: None };
        loop {
            if chunk.data.len() >= self.chunk_bytes {
                return Some(chunk);
            }
            match memchr::memchr(b'\n', &self.buf[self.pos..self.filled]) {
                Some(i) if i > self.max_line_bytes => {
                    // The whole over-long line fit in the buffer: keep only its head,
                    // shorter than the line, so the span reads as cut.
                    let keep = self.keep_when_cut.min(self.max_line_bytes);
                    let at = chunk.data.len();
                    chunk.data.extend_from_slice(&self.buf[self.pos..self.pos + keep]);
                    chunk.lines.push(LineSpan {
                        start: at,
                        end: chunk.data.len(),
                        line_no: self.next_line_no,
                        byte_offset: self.offset,
                        original_len: i as u64,
                    });
                    self.next_line_no += 1;
                    self.offset += (i + 1) as u64;
                    self.pos += i + 1;
                    self.first = false;
                }
                // A line that would overflow the chunk's buffer starts the next chunk.
                Some(i) if !chunk.has_room(i) => return Some(chunk),
                Some(i) => {
                    let end = self.pos + i;
                    self.push_line(&mut chunk, end, (i + 1) as u64);
                    self.pos = end + 1;
                }
                None => {
                    let pending = self.filled - self.pos;
                    if pending > self.max_line_bytes {
                        self.skip_long_line(&mut chunk);
                        continue;
                    }
                    if self.fill() {
                        continue;
                    }
                    // End of input or a stream error: the unterminated tail is the last line
                    // (in the next chunk if it does not fit in this one).
                    let pending = self.filled - self.pos;
                    if !chunk.has_room(pending) {
                        return Some(chunk);
                    }
                    if let Some(err) = self.error.take() {
                        let end = self.pos + pending;
                        self.push_line(&mut chunk, end, pending as u64);
                        self.pos = end;
                        self.eof = true;
                        chunk.stream_error = Some(err);
                    } else if pending > 0 {
                        let end = self.filled;
                        self.push_line(&mut chunk, end, pending as u64);
                        self.pos = end;
                    }
                    return if chunk.lines.is_empty() { None } else { Some(chunk) };
                }
            }
        }
    }

    fn push_line(&mut self, chunk: &mut LineChunk, end: usize, consumed: u64) {
        let mut start = self.pos;
        if self.first {
            self.first = false;
            if self.buf[start..end].starts_with(b"\xEF\xBB\xBF") {
                start += 3;
            }
        }
        let mut line_end = end;
        if line_end > start && self.buf[line_end - 1] == b'\r' {
            line_end -= 1;
        }
        let at = chunk.data.len();
        chunk.data.extend_from_slice(&self.buf[start..line_end]);
        chunk.lines.push(LineSpan {
            start: at,
            end: chunk.data.len(),
            line_no: self.next_line_no,
            byte_offset: self.offset,
            original_len: (line_end - start) as u64,
        });
        self.next_line_no += 1;
        self.offset += consumed;
    }

    /// Consumes a line longer than the limit, keeping only its first
    /// `keep_when_cut` bytes (at most `max_line_bytes`), however the input's reads fall.
    fn skip_long_line(&mut self, chunk: &mut LineChunk) {
        let at = chunk.data.len();
        let mut len = 0u64;
        let mut terminated = false;
        loop {
            let pending = &self.buf[self.pos..self.filled];
            let (end, found) = match memchr::memchr(b'\n', pending) {
                Some(i) => (i, true),
                None => (pending.len(), false),
            };
            // As for a line that fits the buffer: its head, shorter than the line.
            let room = self.keep_when_cut.min(self.max_line_bytes).saturating_sub(chunk.data.len() - at);
            chunk.data.extend_from_slice(&pending[..room.min(end)]);
            len += end as u64;
            self.pos += end + found as usize;
            if found {
                terminated = true;
                break;
            }
            if !self.fill() {
                break;
            }
        }
        chunk.lines.push(LineSpan {
            start: at,
            end: chunk.data.len(),
            line_no: self.next_line_no,
            byte_offset: self.offset,
            original_len: len,
        });
        self.next_line_no += 1;
        self.offset += len + terminated as u64;
        self.first = false;
    }
}

#[cfg(test)]
mod tests {
    use super::LineSplitter;

    /// Every line comes back once, in order, with its number and byte offset;
    /// no chunk outgrows its buffer unless it holds a single line longer than it.
    #[test]
    fn chunks_hold_whole_lines_within_their_buffer() {
        let lines: Vec<String> = (0..500).map(|i| "x".repeat(i % 97) + &format!("#{i}")).collect();
        let input = lines.join("\n") + "\n" + &"y".repeat(300);
        let mut split = LineSplitter::new(input.as_bytes(), 256, 1 << 20, 64);
        let (mut got, mut offsets) = (Vec::new(), Vec::new());
        while let Some(chunk) = split.next_chunk() {
            assert!(chunk.data.len() <= 256 || chunk.lines.len() == 1, "chunk of {} bytes", chunk.data.len());
            for l in &chunk.lines {
                got.push(String::from_utf8(chunk.data[l.start..l.end].to_vec()).unwrap());
                offsets.push((l.line_no, l.byte_offset));
            }
        }
        let want: Vec<String> = lines.iter().cloned().chain(["y".repeat(300)]).collect();
        assert_eq!(got, want);
        let mut offset = 0;
        for (i, (no, at)) in offsets.iter().enumerate() {
            assert_eq!((*no, *at), (i as u64 + 1, offset));
            offset += want[i].len() as u64 + 1;
        }
        assert_eq!(split.bytes_read(), input.len() as u64);
    }

    /// A line over the limit is cut even when it is shorter than the snippet kept of it.
    #[test]
    fn lines_over_the_limit_are_cut_whatever_their_length() {
        let input = format!("short\n{}\nshort\n", "x".repeat(2000));
        let mut split = LineSplitter::new(input.as_bytes(), 1 << 20, 1000, 64 * 1024);
        let chunk = split.next_chunk().unwrap();
        let cut: Vec<bool> = chunk.lines.iter().map(|l| l.is_cut()).collect();
        assert_eq!(cut, [false, true, false]);
        assert_eq!((chunk.lines[1].original_len, chunk.lines[1].end - chunk.lines[1].start), (2000, 1000));
    }
}
