//! STREAM-like memory bandwidth of this machine, for `bench/decode.sh`: the
//! ceiling a memory-bound decoder can reach (every weight is read once per
//! token). Two kernels over arrays far larger than the caches, split across
//! THREADS threads, best of REPEAT passes: `copy` (b = a; STREAM counts the
//! bytes read plus written) and `read` (a sum over a, bytes read: what a
//! matrix-vector product does with its weights). Prints one JSON line.
//!
//! Built on its own, no dependencies: `rustc -C opt-level=3 bench/stream.rs`.
//! `stream [MiB per array 1024] [threads 2] [repeat 5]`

use std::time::Instant;

fn arg(i: usize, default: usize) -> usize {
    std::env::args().nth(i).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let (mib, threads, repeat) = (arg(1, 1024), arg(2, 2).max(1), arg(3, 5).max(1));
    let len = mib * (1 << 20) / 8;
    let a: Vec<f64> = (0..len).map(|i| i as f64).collect();
    let mut b = vec![0.0f64; len];
    let chunk = len.div_ceil(threads);
    let (mut copy, mut read, mut checksum) = (f64::MAX, f64::MAX, 0.0);
    for _ in 0..repeat {
        let start = Instant::now();
        std::thread::scope(|s| {
            for (dst, src) in b.chunks_mut(chunk).zip(a.chunks(chunk)) {
                s.spawn(move || dst.copy_from_slice(src));
            }
        });
        copy = copy.min(start.elapsed().as_secs_f64());
        let start = Instant::now();
        let sums: Vec<f64> = std::thread::scope(|s| {
            let handles: Vec<_> = b
                .chunks(chunk)
                .map(|part| {
                    s.spawn(move || {
                        // Eight accumulators, so the adds pipeline and the loop is bound by loads.
                        let mut acc = [0.0f64; 8];
                        for c in part.chunks_exact(8) {
                            for k in 0..8 {
                                acc[k] += c[k];
                            }
                        }
                        acc.iter().sum::<f64>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        read = read.min(start.elapsed().as_secs_f64());
        checksum += sums.iter().sum::<f64>();
    }
    let bytes = (len * 8) as f64;
    println!(
        "{{\"threads\": {threads}, \"mib_per_array\": {mib}, \"copy_gb_s\": {:.2}, \"read_gb_s\": {:.2}, \"checksum\": {checksum:e}}}",
        2.0 * bytes / copy / 1e9,
        bytes / read / 1e9
    );
}
