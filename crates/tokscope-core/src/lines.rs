//! Splits a decompressed byte stream into chunks of whole lines, streaming:
//! memory is bounded by the chunk size plus the longest accepted line, never
//! by the file. Lines longer than the limit are cut (kept up to the reject
//! snippet size) so that a 100 MB line cannot exhaust memory.

use std::io::{ErrorKind, Read};
use std::sync::mpsc::Receiver;

use crate::file_blocks::{Block, FileBlocks, Newline};

/// A chunk of complete lines with their positions in the (decompressed) input.
pub struct LineChunk {
    /// The chunk's bytes: each line is a span of them (`lines`); bytes
    /// outside the spans (line terminators, a byte-order mark) belong to no line.
    pub data: Vec<u8>,
    /// Per line: range in `data`, 1-based line number, byte offset in the input,
    /// and whether the line was cut because it exceeded the line limit.
    pub lines: Vec<LineSpan>,
    /// Set when the stream failed (or, for an event document, its structure
    /// broke): the chunk's last line is then the unreadable tail of the input
    /// (possibly empty) and is rejected with this message.
    pub stream_error: Option<String>,
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

/// Bytes read at a time past the chunk size while a chunk's first line is
/// still longer than what was read (up to the line limit).
const LONG_LINE_READ_BYTES: usize = 64 * 1024;

/// Where a [`LineSplitter`] reads: a byte stream ([`Stream`]), or a local
/// file read ahead in blocks ([`FileBlocks`]).
pub trait SplitInput: Read {
    /// The input's next bytes whole, as a block with at least `room` bytes
    /// to overwrite in front of them ([`FileBlocks::take_block`]); `None`
    /// when the next bytes are to be read with [`Read::read`].
    fn take_block(&mut self, _room: usize) -> Option<Block> {
        None
    }

    /// Offers back a parsed chunk's buffer; returns it when the input does not keep it.
    fn recycle(&mut self, buf: Vec<u8>) -> Option<Vec<u8>> {
        Some(buf)
    }
}

/// Any byte stream, read into the splitter's own buffers.
pub struct Stream<R>(pub R);

impl<R: Read> Read for Stream<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl<R: Read> SplitInput for Stream<R> {}

impl SplitInput for FileBlocks {
    fn take_block(&mut self, room: usize) -> Option<Block> {
        FileBlocks::take_block(self, room)
    }

    fn recycle(&mut self, buf: Vec<u8>) -> Option<Vec<u8>> {
        FileBlocks::recycle(self, buf);
        None
    }
}

/// The newlines of a chunk's buffer found before the splitter reached them
/// (by the thread that read its block): all of those in `from..to`, in
/// order, the first `next` passed.
#[derive(Default)]
struct KnownNewlines {
    list: Vec<Newline>,
    next: usize,
    from: usize,
    to: usize,
}

impl KnownNewlines {
    /// The first newline in `data[from..to]`, and whether a carriage return
    /// comes before it when that is known: from the list, or by a scan
    /// outside what it covers. Calls for one buffer come with `from` never
    /// going back.
    fn find(&mut self, data: &[u8], mut from: usize, to: usize) -> Option<(usize, Option<bool>)> {
        let scan = |from: usize, to: usize| memchr::memchr(b'\n', &data[from..to]).map(|i| (from + i, None));
        if from < self.from {
            let stop = to.min(self.from);
            if let Some(at) = scan(from, stop) {
                return Some(at);
            }
            from = stop;
        }
        if from < self.to && from < to {
            self.next += self.list[self.next..].partition_point(|n| n.at < from);
            match self.list.get(self.next) {
                // The byte before the block's first is the carried line's.
                Some(n) if n.at < to => return Some((n.at, (n.at > self.from).then_some(n.after_cr))),
                _ if to <= self.to => return None,
                _ => from = self.to,
            }
        }
        (from < to).then(|| scan(from, to)).flatten()
    }
}

/// Streaming line splitter over any reader. Input is read straight into the
/// chunk's buffer, and lines are spans of it (without their terminators):
/// each byte is copied once, by the read, and a chunk hands on the head of
/// its unfinished last line to the next. Over a file read in blocks, a
/// block is the chunk's buffer, the carried head copied in front of it,
/// and its newlines are where the block's reading thread found them.
pub struct LineSplitter<R> {
    reader: R,
    /// The newlines already found in the chunk's buffer.
    known: KnownNewlines,
    /// Bytes read after the last line handed out: the head of the next line.
    carry: Vec<u8>,
    /// Buffers of chunks already parsed, sent back to be read into again
    /// (their pages are mapped and written: no page fault, no zeroing).
    spare: Option<Receiver<Vec<u8>>>,
    eof: bool,
    error: Option<String>,
    next_line_no: u64,
    offset: u64,
    chunk_bytes: usize,
    max_line_bytes: usize,
    keep_when_cut: usize,
    first: bool,
}

impl<R: Read> LineSplitter<Stream<R>> {
    /// `chunk_bytes`: target size of each chunk; `max_line_bytes`: longer lines
    /// are cut to their first `keep_when_cut` bytes (at most `max_line_bytes`).
    pub fn new(reader: R, chunk_bytes: usize, max_line_bytes: usize, keep_when_cut: usize) -> Self {
        LineSplitter::over(Stream(reader), chunk_bytes, max_line_bytes, keep_when_cut)
    }
}

impl LineSplitter<FileBlocks> {
    /// As [`LineSplitter::new`], over a file read ahead in blocks of
    /// `chunk_bytes` (the blocks' size): a block is a chunk.
    pub fn over_blocks(blocks: FileBlocks, chunk_bytes: usize, max_line_bytes: usize, keep_when_cut: usize) -> Self {
        LineSplitter::over(blocks, chunk_bytes, max_line_bytes, keep_when_cut)
    }
}

impl<R: SplitInput> LineSplitter<R> {
    fn over(reader: R, chunk_bytes: usize, max_line_bytes: usize, keep_when_cut: usize) -> Self {
        Self {
            reader,
            known: KnownNewlines::default(),
            carry: Vec::new(),
            spare: None,
            eof: false,
            error: None,
            next_line_no: 1,
            offset: 0,
            chunk_bytes: chunk_bytes.max(1),
            max_line_bytes,
            keep_when_cut,
            first: true,
        }
    }

    /// Reads into the buffers of earlier chunks that come back on `spare`
    /// (a chunk's `data`, once its lines are parsed) when there is one.
    pub fn with_spare_buffers(mut self, spare: Receiver<Vec<u8>>) -> Self {
        self.spare = Some(spare);
        self
    }

    /// Total decompressed bytes handed out so far.
    pub fn bytes_read(&self) -> u64 {
        self.offset
    }

    /// A buffer whose bytes from `base` on are the carried head of a line
    /// and input after it up to `filled`, and past that at least `len`
    /// initialized bytes from `base`: the input's next block with the carry
    /// copied in front of it, or a buffer of earlier chunks (zeroed only
    /// past the bytes its chunk used) holding the carry alone. Returns
    /// `(buffer, base, filled)`.
    fn buffer(&mut self, len: usize) -> (Vec<u8>, usize, usize) {
        let spare = self.spare.as_ref().and_then(|rx| rx.try_recv().ok());
        let spare = spare.and_then(|b| self.reader.recycle(b));
        let carried = self.carry.len();
        if let Some(Block { mut data, start, newlines }) = self.reader.take_block(carried) {
            let base = start - carried;
            data[base..start].copy_from_slice(&self.carry);
            self.carry.clear();
            let filled = data.len();
            self.known = KnownNewlines { list: newlines, next: 0, from: start, to: filled };
            return (data, base, filled);
        }
        self.known = KnownNewlines::default();
        // One that grew for a long line is let go.
        let mut data = spare.filter(|b| b.capacity() <= 2 * len).unwrap_or_default();
        let len = len.max(carried);
        data.resize(len.max(data.len()), 0);
        data[..carried].copy_from_slice(&self.carry);
        self.carry.clear();
        (data, 0, carried)
    }

    /// The next chunk of lines, or `None` at the end of input. It holds the
    /// lines read until the chunk size is reached (at least one line), and
    /// ends early after a line cut for its length.
    pub fn next_chunk(&mut self) -> Option<LineChunk> {
        let (data, base, mut filled) = self.buffer(self.chunk_bytes);
        let mut chunk = LineChunk { data, lines: Vec::new(), stream_error: None };
        // `data[base..filled]` is input; the unfinished line starts at
        // `line_start`; bytes before `scanned` hold no newline after it.
        let (mut line_start, mut scanned) = (base, base);
        let chunk_end = base + self.chunk_bytes;
        loop {
            while line_start < chunk_end || chunk.lines.is_empty() {
                let Some((end, after_cr)) = self.known.find(&chunk.data, scanned, filled) else {
                    scanned = filled;
                    break;
                };
                if end - line_start > self.max_line_bytes {
                    // What follows the cut line is the next chunk's.
                    self.carry.extend_from_slice(&chunk.data[end + 1..filled]);
                    self.push_cut(&mut chunk, line_start, (end - line_start) as u64, true);
                    return Some(chunk);
                }
                self.push_line(&mut chunk, line_start, end, true, after_cr);
                line_start = end + 1;
                scanned = line_start;
            }
            let full = !chunk.lines.is_empty() && line_start >= chunk_end;
            let pending = filled - line_start;
            if !full && pending > self.max_line_bytes {
                self.cut_long_line(&mut chunk, line_start, filled);
                return Some(chunk);
            }
            if full || (!chunk.lines.is_empty() && filled >= chunk_end) {
                break;
            }
            if self.eof || self.error.is_some() {
                // End of input or a stream error: the unterminated tail is the last line.
                chunk.data.truncate(filled);
                if let Some(err) = self.error.take() {
                    self.push_line(&mut chunk, line_start, filled, false, None);
                    self.eof = true;
                    chunk.stream_error = Some(err);
                } else if pending > 0 {
                    self.push_line(&mut chunk, line_start, filled, false, None);
                }
                return if chunk.lines.is_empty() { None } else { Some(chunk) };
            }
            // Up to the chunk size; past it, a first line still unfinished grows
            // by at most enough to tell whether it passes the line limit.
            let want = match chunk_end.checked_sub(filled) {
                Some(room) if room > 0 => room,
                _ => LONG_LINE_READ_BYTES.min(self.max_line_bytes + 1 - pending),
            };
            if chunk.data.len() < filled + want {
                chunk.data.resize(filled + want, 0);
            }
            filled += self.read_into(&mut chunk.data[filled..filled + want]);
        }
        self.carry.extend_from_slice(&chunk.data[line_start..filled]);
        chunk.data.truncate(line_start);
        Some(chunk)
    }

    /// Fills `buf` with input, fewer bytes at the end of the input or on a
    /// failure (which are noted); returns how many.
    fn read_into(&mut self, buf: &mut [u8]) -> usize {
        let mut filled = 0;
        while filled < buf.len() {
            match read_some(&mut self.reader, &mut buf[filled..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => filled += n,
                Err(e) => {
                    self.error = Some(e);
                    break;
                }
            }
        }
        filled
    }

    /// Hands out `data[start..end]` as the next line (no longer than the
    /// limit), `terminated` by a newline at `end` or not; the first line
    /// loses a UTF-8 byte-order mark, and a line its `\r` before the newline
    /// (`after_cr`, when the block's reading thread saw it).
    fn push_line(&mut self, chunk: &mut LineChunk, start: usize, end: usize, terminated: bool, after_cr: Option<bool>) {
        let consumed = (end - start + terminated as usize) as u64;
        let mut start = start;
        if std::mem::replace(&mut self.first, false) && chunk.data[start..end].starts_with(b"\xEF\xBB\xBF") {
            start += 3;
        }
        let mut end = end;
        if end > start && after_cr.unwrap_or_else(|| chunk.data[end - 1] == b'\r') {
            end -= 1;
        }
        self.push_span(chunk, start, end, (end - start) as u64, consumed);
    }

    /// Hands out the line at `start`, `len` bytes long (over the limit), as
    /// its first `keep_when_cut` bytes (at most `max_line_bytes`): shorter
    /// than the line, so the span reads as cut. The chunk ends with it.
    fn push_cut(&mut self, chunk: &mut LineChunk, start: usize, len: u64, terminated: bool) {
        let end = start + self.keep_when_cut.min(self.max_line_bytes);
        chunk.data.truncate(end);
        self.first = false;
        self.push_span(chunk, start, end, len, len + terminated as u64);
    }

    /// Adds the span `start..end` of a line `original_len` bytes long as the
    /// next line, which took `consumed` bytes of input.
    fn push_span(&mut self, chunk: &mut LineChunk, start: usize, end: usize, original_len: u64, consumed: u64) {
        chunk.lines.push(LineSpan { start, end, line_no: self.next_line_no, byte_offset: self.offset, original_len });
        self.next_line_no += 1;
        self.offset += consumed;
    }

    /// Ends the chunk with the line at `start`, longer than the limit and
    /// unfinished at `filled` (the input read so far): reads the rest of it
    /// away ([`Self::push_cut`] keeps its head); what follows its newline is
    /// the next chunk's.
    fn cut_long_line(&mut self, chunk: &mut LineChunk, start: usize, filled: usize) {
        let mut len = (filled - start) as u64;
        let mut scratch = vec![0; LONG_LINE_READ_BYTES];
        let terminated = loop {
            if self.eof || self.error.is_some() {
                break false;
            }
            match read_some(&mut self.reader, &mut scratch) {
                Ok(0) => self.eof = true,
                Ok(n) => match memchr::memchr(b'\n', &scratch[..n]) {
                    Some(i) => {
                        len += i as u64;
                        self.carry.extend_from_slice(&scratch[i + 1..n]);
                        break true;
                    }
                    None => len += n as u64,
                },
                Err(e) => self.error = Some(e),
            }
        };
        self.push_cut(chunk, start, len, terminated);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::LineSplitter;
    use crate::file_blocks::{FileBlocks, CARRY_ROOM_BYTES};

    /// Every line's text, number, offset and length as a splitter hands it out.
    fn lines_of<R: super::SplitInput>(mut split: LineSplitter<R>) -> Vec<(Vec<u8>, u64, u64, u64)> {
        let mut out = Vec::new();
        while let Some(chunk) = split.next_chunk() {
            assert!(chunk.stream_error.is_none(), "{:?}", chunk.stream_error);
            for l in &chunk.lines {
                out.push((chunk.data[l.start..l.end].to_vec(), l.line_no, l.byte_offset, l.original_len));
            }
        }
        out
    }

    /// A file read in blocks by any number of threads gives the lines a
    /// stream of it gives, with the same numbers and offsets: lines across
    /// blocks, lines longer than a block and than the room kept in front of
    /// one, lines cut for their length, a byte-order mark, CRLF, blank
    /// lines and an unterminated last line.
    #[test]
    fn a_file_read_in_blocks_splits_as_its_stream_does() {
        let mut input = b"\xEF\xBB\xBF{\"first\":1}\r\n\n".to_vec();
        for i in 0..3000usize {
            let len = match i % 500 {
                7 => CARRY_ROOM_BYTES + 1000,
                13 => 3 * CARRY_ROOM_BYTES,
                _ => (i * 7919) % 3000,
            };
            input.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, len));
            input.extend_from_slice(if i % 3 == 0 { b"\r\n" } else { b"\n" });
        }
        input.extend_from_slice(b"no newline at the end");
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&input).unwrap();
        for (chunk, max_line) in [(64 * 1024, 1 << 20), (1 << 20, 1 << 20), (1 << 20, 500_000), (4096, 2000)] {
            let want = lines_of(LineSplitter::new(input.as_slice(), chunk, max_line, 64));
            assert!(want.len() > 3000);
            for readers in [1, 3] {
                let blocks = FileBlocks::new(file.try_clone().unwrap(), input.len() as u64, chunk, readers);
                let got = lines_of(LineSplitter::over_blocks(blocks, chunk, max_line, 64));
                assert_eq!(got.len(), want.len(), "chunks of {chunk}, lines up to {max_line}, {readers} readers");
                assert!(got == want, "chunks of {chunk}, lines up to {max_line}, {readers} readers");
            }
        }
    }

    /// A CRLF cut between two blocks, at every block size: the carriage
    /// return still leaves the line, though the reading thread of the block
    /// holding the newline did not see it.
    #[test]
    fn a_crlf_across_blocks_ends_its_line() {
        let input = b"ab\r\n\r\ncd\r\nefg\r\n\r\r\nh";
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(input).unwrap();
        let want = lines_of(LineSplitter::new(&input[..], 1 << 20, 1 << 20, 64));
        assert_eq!(
            want.iter().map(|l| l.0.as_slice()).collect::<Vec<_>>(),
            [&b"ab"[..], b"", b"cd", b"efg", b"\r", b"h"]
        );
        for block in 1..=8 {
            for readers in [1, 2] {
                let blocks = FileBlocks::new(file.try_clone().unwrap(), input.len() as u64, block, readers);
                assert!(lines_of(LineSplitter::over_blocks(blocks, block, 1 << 20, 64)) == want, "blocks of {block}");
            }
        }
    }

    /// Over blocks, each chunk is one block with the carried line in front:
    /// as many chunks as blocks, none copied into a buffer of its own.
    #[test]
    fn a_block_is_a_chunk() {
        let input: Vec<u8> = (0..20_000).flat_map(|i| format!("{{\"line\":{i}}}\n").into_bytes()).collect();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&input).unwrap();
        let block = 16 * 1024;
        let mut split =
            LineSplitter::over_blocks(FileBlocks::new(file, input.len() as u64, block, 2), block, 1 << 20, 64);
        let mut chunks = 0;
        while let Some(chunk) = split.next_chunk() {
            chunks += 1;
            assert!(chunk.lines[0].start <= CARRY_ROOM_BYTES && chunk.lines[0].start > CARRY_ROOM_BYTES - 100);
        }
        assert_eq!(chunks, input.len().div_ceil(block));
    }

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
        let mut lines = Vec::new();
        while let Some(chunk) = split.next_chunk() {
            lines.extend(chunk.lines.iter().map(|l| (l.is_cut(), l.original_len, l.end - l.start)));
        }
        assert_eq!(lines, [(false, 5, 5), (true, 2000, 1000), (false, 5, 5)]);
    }
}
