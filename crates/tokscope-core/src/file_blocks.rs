//! A local file read in blocks at their positions by several threads at
//! once, handed out in file order. Reading a file is the one step of ingest
//! that a single thread does for all the others (the kernel copies every
//! byte out of the page cache, the splitter finds every newline); with
//! blocks read ahead in parallel, each with its newlines found by the thread
//! that read it, the line splitter only cuts lines where they are
//! ([`crate::lines::LineSplitter::over_blocks`]).
//!
//! Each block's buffer keeps room in front of its bytes, where the splitter
//! puts the unfinished line carried over from the block before: a block
//! becomes a chunk of lines without being copied again.
//!
//! A file that grows while it is read is read up to its size when it was
//! opened, and one truncated under the reader (logrotate's `copytruncate`)
//! ends early: a short block ends the input, as the end of a stream would.
//! Positional reads never fault, as a memory map would on a truncated file.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::sync::mpsc::{sync_channel, Receiver, RecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Name of the threads that read blocks of a file (`top -H`, `ps -L`).
pub const READER_THREAD: &str = "ingest-read";

/// Room kept in front of each block for the line carried over from the
/// block before; a longer carry is copied into a buffer of its own.
pub const CARRY_ROOM_BYTES: usize = 256 * 1024;

/// A block of the input: a buffer whose bytes from `start` on are the
/// input's next bytes, with room in front of them.
pub struct Block {
    /// The buffer, its room and the block's bytes.
    pub data: Vec<u8>,
    /// Where the block's bytes (not yet read) begin in `data`.
    pub start: usize,
    /// The newlines of `data[start..]`, in order.
    pub newlines: Vec<Newline>,
}

/// A newline in a block, found by the thread that read it, so that the
/// splitter touches neither the bytes between lines nor the one before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Newline {
    /// Its index in the block's buffer.
    pub at: usize,
    /// Whether a carriage return comes before it in the block (false for a
    /// newline that is the block's first byte: the byte before is not the
    /// block's).
    pub after_cr: bool,
}

/// The blocks of one file, read ahead by `readers` threads: thread `i`
/// reads blocks `i`, `i + readers`, ... and hands each over when its turn
/// comes, so at most `readers` blocks are read ahead of the one handed out.
pub struct FileBlocks {
    /// One per thread, in the order their blocks come: each block with
    /// whether it is the last (short: the file ends in it).
    lanes: Vec<Receiver<std::io::Result<(Block, bool)>>>,
    next_lane: usize,
    threads: Vec<JoinHandle<()>>,
    /// Buffers handed back, for the threads to read into again.
    pool: Arc<Mutex<Vec<Vec<u8>>>>,
    /// The block being read through [`Read`]: its bytes `pos..` are next.
    current: Vec<u8>,
    pos: usize,
    /// The current block's newlines.
    newlines: Vec<Newline>,
    /// Set after the last block or a failure was handed out.
    done: bool,
    /// A read that failed, to return when its turn comes.
    error: Option<std::io::Error>,
}

impl FileBlocks {
    /// Starts `readers` threads (at least one, at most one per block)
    /// reading the first `size` bytes of `file` (its size when it was
    /// opened: a file that grows is read up to there, one truncated
    /// underneath up to where it ends) in blocks of `block_bytes`; a small
    /// file gets a buffer of its size. A thread that cannot start makes
    /// the read fail when its first block's turn comes.
    pub fn new(file: File, size: u64, block_bytes: usize, readers: usize) -> FileBlocks {
        let block_bytes = block_bytes.max(1);
        let blocks = usize::try_from(size.div_ceil(block_bytes as u64)).unwrap_or(usize::MAX);
        let readers = readers.clamp(1, blocks.max(1));
        // The bytes to read at `offset`: a block, fewer at the size.
        let len_at = move |offset: u64| size.saturating_sub(offset).min(block_bytes as u64) as usize;
        let file = Arc::new(file);
        let pool = Arc::new(Mutex::new(Vec::new()));
        let (mut lanes, mut threads) = (Vec::new(), Vec::new());
        for lane in 0..readers {
            // A rendezvous: a thread holds the block it read until it is taken.
            let (tx, rx) = sync_channel(0);
            let (file, pool) = (Arc::clone(&file), Arc::clone(&pool));
            let read = move || {
                for block in (lane..).step_by(readers) {
                    let mut buf = pool.lock().ok().and_then(|mut p| p.pop()).unwrap_or_default();
                    let offset = block as u64 * block_bytes as u64;
                    let read = read_block(&file, &mut buf, offset, len_at(offset));
                    let last = !matches!(read, Ok(n) if n == block_bytes);
                    let block =
                        read.map(|_| (Block { newlines: newlines(&buf), data: buf, start: CARRY_ROOM_BYTES }, last));
                    if tx.send(block).is_err() || last {
                        break;
                    }
                }
            };
            let lane = match std::thread::Builder::new().name(READER_THREAD.into()).spawn(read) {
                Ok(thread) => {
                    threads.push(thread);
                    rx
                }
                Err(e) => {
                    let (tx, failed) = sync_channel(1);
                    let _ = tx.send(Err(std::io::Error::other(format!("could not start a reading thread: {e}"))));
                    failed
                }
            };
            lanes.push(lane);
        }
        FileBlocks {
            lanes,
            next_lane: 0,
            threads,
            pool,
            current: Vec::new(),
            pos: 0,
            newlines: Vec::new(),
            done: false,
            error: None,
        }
    }

    /// The input's next bytes as a block with at least `room` bytes in
    /// front of them that the caller may overwrite: the rest of the block
    /// being read, or the next block. `None` at the end of the input, after
    /// a failed read (the next [`Read::read`] returns the failure), or when
    /// the rest of the current block has less room in front of it.
    pub fn take_block(&mut self, room: usize) -> Option<Block> {
        if self.pos >= self.current.len() {
            self.advance();
        }
        if self.pos >= self.current.len() || self.pos < room {
            return None;
        }
        let start = std::mem::replace(&mut self.pos, 0);
        let mut newlines = std::mem::take(&mut self.newlines);
        newlines.drain(..newlines.partition_point(|n| n.at < start));
        Some(Block { data: std::mem::take(&mut self.current), start, newlines })
    }

    /// Keeps `buf` (a chunk's buffer, its lines parsed) to read a later block into.
    pub fn recycle(&self, buf: Vec<u8>) {
        if let Ok(mut pool) = self.pool.lock() {
            if pool.len() < self.lanes.len() + 1 {
                pool.push(buf);
            }
        }
    }

    /// Makes the next block the current one, or notes the end or a failure.
    fn advance(&mut self) {
        if self.done {
            return;
        }
        let Some(lane) = self.lanes.get(self.next_lane) else {
            self.done = true;
            return;
        };
        self.next_lane = (self.next_lane + 1) % self.lanes.len();
        match lane.recv() {
            Ok(Ok((block, last))) => {
                self.done = last;
                let used = std::mem::replace(&mut self.current, block.data);
                if used.capacity() > 0 {
                    self.recycle(used);
                }
                self.pos = block.start;
                self.newlines = block.newlines;
            }
            Ok(Err(e)) => {
                self.done = true;
                self.error = Some(e);
            }
            Err(RecvError) => {
                self.done = true;
                self.error = Some(std::io::Error::other("a reading thread stopped before the end of the file"));
            }
        }
    }
}

impl Read for FileBlocks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos >= self.current.len() {
            self.advance();
        }
        if self.pos >= self.current.len() {
            return self.error.take().map_or(Ok(0), Err);
        }
        let n = buf.len().min(self.current.len() - self.pos);
        buf[..n].copy_from_slice(&self.current[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

impl Drop for FileBlocks {
    fn drop(&mut self) {
        // Closing the lanes stops the threads at their next block.
        self.lanes.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Reads the block of `len` bytes at `offset` into `buf` after
/// [`CARRY_ROOM_BYTES`] of room (its bytes kept, not zeroed again); returns
/// how many bytes it holds, fewer than `len` at the end of the file.
fn read_block(file: &File, buf: &mut Vec<u8>, offset: u64, len: usize) -> std::io::Result<usize> {
    buf.resize(CARRY_ROOM_BYTES + len, 0);
    let filled = read_full_at(file, &mut buf[CARRY_ROOM_BYTES..], offset)?;
    buf.truncate(CARRY_ROOM_BYTES + filled);
    Ok(filled)
}

/// The newlines of a block read into `buf` after [`CARRY_ROOM_BYTES`].
fn newlines(buf: &[u8]) -> Vec<Newline> {
    let block = &buf[CARRY_ROOM_BYTES..];
    let after_cr = |i: usize| i > 0 && block[i - 1] == b'\r';
    memchr::memchr_iter(b'\n', block).map(|i| Newline { at: CARRY_ROOM_BYTES + i, after_cr: after_cr(i) }).collect()
}

/// Fills `buf` with the bytes of `file` from `offset` on, fewer at its end;
/// returns how many. The file's cursor does not move.
pub fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match read_at(file, &mut buf[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::{FileBlocks, CARRY_ROOM_BYTES};

    fn file_of(bytes: &[u8]) -> std::fs::File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    /// The file comes back whole and in order, whatever the number of
    /// threads and however it is taken: whole blocks, reads of odd sizes,
    /// or both in turn.
    #[test]
    fn blocks_come_back_in_file_order() {
        let bytes: Vec<u8> = (0..100_003u32).map(|i| (i % 251) as u8).collect();
        for readers in [1, 2, 3, 8] {
            for block in [1, 1000, 4096, 100_003, 1 << 20] {
                let mut blocks = FileBlocks::new(file_of(&bytes), bytes.len() as u64, block, readers);
                let mut got = Vec::new();
                let mut odd = [0; 777];
                let mut turn = 0;
                loop {
                    turn += 1;
                    if turn % 3 == 0 {
                        let n = blocks.read(&mut odd).unwrap();
                        if n == 0 {
                            break;
                        }
                        got.extend_from_slice(&odd[..n]);
                    } else if let Some(b) = blocks.take_block(CARRY_ROOM_BYTES) {
                        assert!(b.start >= CARRY_ROOM_BYTES);
                        let want: Vec<usize> = (b.start..b.data.len()).filter(|&i| b.data[i] == b'\n').collect();
                        assert_eq!(b.newlines.iter().map(|n| n.at).collect::<Vec<_>>(), want);
                        for n in &b.newlines {
                            assert_eq!(n.after_cr, n.at > b.start && b.data[n.at - 1] == b'\r', "{n:?}");
                        }
                        got.extend_from_slice(&b.data[b.start..]);
                        blocks.recycle(b.data);
                    } else {
                        assert_eq!(blocks.read(&mut odd).unwrap(), 0, "no block, yet bytes to read");
                        break;
                    }
                }
                assert!(got == bytes, "readers {readers}, blocks of {block}: {} bytes of {}", got.len(), bytes.len());
            }
        }
    }

    /// A file gets no more threads than it has blocks, and a small one a
    /// buffer of its size; bytes appended after it was opened are left for
    /// the next read.
    #[test]
    fn threads_and_buffers_fit_the_file() {
        let mut file = file_of(&[b'x'; 2500]);
        let mut blocks = FileBlocks::new(file.try_clone().unwrap(), 2500, 1000, 8);
        assert_eq!(blocks.threads.len(), 3);
        file.write_all(&[b'y'; 1000]).unwrap();
        let mut small = FileBlocks::new(file_of(b"{}\n"), 3, 1 << 20, 8);
        assert_eq!(small.threads.len(), 1);
        let block = small.take_block(0).unwrap();
        assert_eq!(block.data.len(), CARRY_ROOM_BYTES + 3);
        assert!(small.take_block(0).is_none());
        let mut total = 0;
        while let Some(b) = blocks.take_block(0) {
            total += b.data.len() - b.start;
        }
        assert_eq!(total, 2500);
    }

    /// An empty file is an empty input; dropping the blocks early stops the threads.
    #[test]
    fn empty_files_and_early_drops() {
        let mut blocks = FileBlocks::new(file_of(b""), 0, 16, 4);
        assert!(blocks.take_block(0).is_none());
        assert_eq!(blocks.read(&mut [0; 8]).unwrap(), 0);
        let blocks = FileBlocks::new(file_of(&[7; 10_000]), 10_000, 16, 4);
        drop(blocks);
    }

    /// A file truncated while it is read (logrotate's `copytruncate`) gives
    /// a prefix of what it held, then its end: no fault, no error.
    #[test]
    fn a_file_truncated_underneath_ends_early() {
        let bytes: Vec<u8> = (0..50_000u32).map(|i| (i % 253) as u8).collect();
        let file = file_of(&bytes);
        let mut blocks = FileBlocks::new(file.try_clone().unwrap(), bytes.len() as u64, 1000, 3);
        let first = blocks.take_block(0).unwrap();
        let mut got = first.data[first.start..].to_vec();
        file.set_len(2500).unwrap();
        while let Some(b) = blocks.take_block(0) {
            got.extend_from_slice(&b.data[b.start..]);
        }
        assert_eq!(blocks.read(&mut [0; 8]).unwrap(), 0);
        assert!(got.len() >= 1000 && got.len() < bytes.len() && bytes.starts_with(&got), "{} bytes", got.len());
    }

    /// A failed read is the input's error when its turn comes, after the
    /// blocks before it.
    #[cfg(unix)]
    #[test]
    fn a_failed_read_is_an_error_in_its_turn() {
        // A directory opens as a file whose reads fail.
        let dir = tempfile::tempdir().unwrap();
        let mut blocks = FileBlocks::new(std::fs::File::open(dir.path()).unwrap(), 32, 16, 2);
        assert!(blocks.take_block(0).is_none());
        assert!(blocks.read(&mut [0; 8]).is_err());
        assert_eq!(blocks.read(&mut [0; 8]).unwrap(), 0);
    }
}
