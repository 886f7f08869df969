//! A JSON trace document is read event by event: memory stays bounded by the
//! chunk size, not by the document. An 80 MB trace (a 48 MB metadata string,
//! then 32 MB of pretty-printed events) is generated on the fly, read through
//! the reader, and the process's peak resident memory (`VmHWM`) must grow by
//! far less than the document. This file holds one test, so nothing else runs
//! in the process while it measures. (`bench/kernel_trace.sh` ingests a
//! 300 MB trace end to end under `/usr/bin/time`.)

use std::io::Read;

use tokscope_core::catalog::tables;
use tokscope_core::reader::{LineCounts, ReaderBuilder};

/// Peak resident set size of this process, bytes (Linux `/proc/self/status`).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Writes `{"schemaVersion": 1, "systemTraceEvents": "<48 MB>", "traceEvents": [<events>]}`
/// as it is read, never holding more than one event.
struct TraceSource {
    target: u64,
    written: u64,
    events: u64,
    stage: u8,
    pending: Vec<u8>,
    at: usize,
}

const BLOB: u64 = 48 << 20;

impl TraceSource {
    fn refill(&mut self) -> bool {
        self.pending.clear();
        self.at = 0;
        match self.stage {
            0 => {
                self.pending.extend_from_slice(b"{\n  \"schemaVersion\": 1,\n  \"systemTraceEvents\": \"");
                self.stage = 1;
            }
            1 if self.written < BLOB => self.pending.extend_from_slice(&[b'x'; 65536]),
            1 => {
                self.pending.extend_from_slice(b"\",\n  \"traceEvents\": [\n");
                self.stage = 2;
            }
            2 if self.written < self.target => {
                let i = self.events;
                let sep = if i == 0 { "" } else { ",\n" };
                let event = format!(
                    "{sep}  {{\n    \"ph\": \"X\",\n    \"cat\": \"kernel\",\n    \"name\": \"layer_{}.attn_head_{}\",\n    \"pid\": 0,\n    \"tid\": 7,\n    \"ts\": {}.5,\n    \"dur\": 12.25,\n    \"args\": {{\"flops\": 2000000, \"correlation\": {i}}}\n  }}",
                    i % 32,
                    i % 8,
                    1000 + i * 20
                );
                self.pending.extend_from_slice(event.as_bytes());
                self.events += 1;
            }
            2 => {
                self.pending.extend_from_slice(b"\n  ]\n}\n");
                self.stage = 3;
            }
            _ => return false,
        }
        true
    }
}

impl Read for TraceSource {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at == self.pending.len() && !self.refill() {
            return Ok(0);
        }
        let n = buf.len().min(self.pending.len() - self.at);
        buf[..n].copy_from_slice(&self.pending[self.at..self.at + n]);
        self.at += n;
        self.written += n as u64;
        Ok(n)
    }
}

#[test]
fn an_80_mb_trace_is_read_in_bounded_memory() {
    let target = 80 << 20;
    let source = TraceSource { target, written: 0, events: 0, stage: 0, pending: Vec::new(), at: 0 };
    let before = peak_rss().expect("/proc/self/status");
    let mut reader = ReaderBuilder::new().build(source, "generated.pt.trace.json");
    assert_eq!(reader.format().map(|f| f.name()), Some("kernel_trace"));
    let (mut counts, mut kernel_rows) = (LineCounts::default(), 0);
    for slices in &mut reader {
        for slice in slices.expect("chunk parses") {
            counts.add(&slice.counts);
            kernel_rows += slice.rows(tables::KERNELS);
        }
    }
    let bytes = reader.finish().expect("reader finishes");
    let grew = peak_rss().expect("/proc/self/status").saturating_sub(before);
    assert!(bytes > target, "{bytes}");
    assert!(counts.reconciles() && counts.lines_rejected == 0, "{counts:?}");
    assert_eq!(counts.rows_written, kernel_rows as u64);
    assert!(kernel_rows > 130_000, "{kernel_rows} events");
    eprintln!("{bytes} bytes, {kernel_rows} events, peak RSS grew by {} MiB", grew >> 20);
    // Chunks are 4 MiB, at most four in flight (two queued, one filling, one
    // parsing), plus their batches: far below the document's 80 MB.
    assert!(grew < 40 << 20, "peak RSS grew by {} MiB reading a {} MiB document", grew >> 20, bytes >> 20);
}
