//! The `tokscope` binary: parse flags ([`cli`]), run the command, map errors
//! to one `error:` line (and a `hint:`) and exit status 1. All real work
//! lives in the library crate.

mod cli;

use std::process::ExitCode;

use clap::Parser;

// mimalloc instead of glibc malloc: the engine allocates and frees many
// short-lived, batch-sized buffers; with glibc about half of a latency-job
// query went to the kernel (page faults and page zeroing after memory went
// back to the OS). datafusion-cli makes the same choice. docs/performance-history.md,
// "Earlier figures (mimalloc, quantile_cont fast paths)".
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay`: its position in `mi_option_e`
/// (mimalloc.h, v3), for which the sys crate exports no constant.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Two memory settings, each overridden by its `MIMALLOC_*` variable in the
/// environment (docs/performance-history.md, "Memory settings: no transparent huge pages").
///
/// Freed memory is kept for reuse instead of going back to the OS after
/// mimalloc's purge delay (1 s in the bundled v3): ingest frees and
/// reallocates chunk- and batch-sized buffers many times a second, and
/// returned pages came back through page faults and kernel zeroing, which
/// made ingest 13% slower than with glibc. A process keeps its peak RSS
/// until it exits.
///
/// No transparent huge pages: mimalloc asks for them (`MADV_HUGEPAGE`) on
/// the memory it maps, and the kernel then zeroes 2 MiB on the first touch
/// of any byte of such a range. Ingest's and the jobs' peak RSS was 7-35%
/// higher with them, and their wall time up to 2.6x longer on a VM whose
/// host backs guest memory lazily. mimalloc reads its own THP option when
/// the process loads, before `main`, so the process's THP flag is cleared
/// here instead (`PR_SET_THP_DISABLE`, checked by the kernel at each fault).
fn tune_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: stores one integer option. Called first thing in `main`,
        // before any other thread exists, as mimalloc requires.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
    }
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        disable_transparent_huge_pages();
    }
    if std::env::var_os("GLIBC_TUNABLES").is_none() {
        keep_freed_c_memory();
    }
}

/// The C code in the process (zstd, under parquet-rs) allocates from
/// glibc's `malloc`, not mimalloc, and glibc gives memory back to the
/// kernel as soon as more than 128 KiB is free at the top of a heap, and
/// maps blocks of 128 KiB or more on their own. parquet-rs creates a zstd
/// compressor and decompressor for every column chunk it reads, so a query
/// over many small files had each one's pages faulted in and zeroed again:
/// `report` over 365 daily files (365,000 requests) took 279,000 page
/// faults in 10 runs, 40,000 with these settings, and ran about a fifth
/// faster (docs/performance-history.md, "Freed C memory kept"). Up to 64
/// MiB may stay free at the top of a heap, and blocks under 32 MiB come
/// from the heaps: the most glibc's own adaptive thresholds reach.
/// `GLIBC_TUNABLES` in the environment leaves glibc's defaults, or its own
/// settings, alone.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_freed_c_memory() {
    // SAFETY: mallopt sets one integer parameter of glibc's allocator; it
    // is called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_freed_c_memory() {}

#[cfg(target_os = "linux")]
fn disable_transparent_huge_pages() {
    // prctl is variadic and the kernel reads its four arguments as unsigned
    // longs (PR_SET_THP_DISABLE refuses non-zero third to fifth ones), so
    // they are passed as such, not as 32-bit literals.
    let (on, unused): (libc::c_ulong, libc::c_ulong) = (1, 0);
    // SAFETY: PR_SET_THP_DISABLE takes integers only and sets one flag of
    // this process. A kernel without it returns an error: nothing changes.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, on, unused, unused, unused) };
}

#[cfg(not(target_os = "linux"))]
fn disable_transparent_huge_pages() {}

/// Exit code when another run holds the dataset's writer lease (sysexits' EX_TEMPFAIL: try again later).
const EXIT_BUSY: u8 = 75;

fn main() -> ExitCode {
    tune_memory();
    // Usage errors, --help and --version exit here (clap: status 2 or 0).
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        // `tokscope query ... | head`: the reader left; nothing went wrong.
        Err(e) if cli::errors::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprint!("{}", cli::errors::render(&*e));
            match e.downcast_ref::<tokscope::Error>() {
                Some(tokscope::Error::LeaseBusy { .. }) => ExitCode::from(EXIT_BUSY),
                _ => ExitCode::FAILURE,
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// The kernel reports the flag `disable_transparent_huge_pages` sets in
    /// `/proc/self/status` (Linux 5.0 and later).
    #[test]
    fn transparent_huge_pages_turned_off_for_the_process() {
        super::disable_transparent_huge_pages();
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let thp = status.lines().find_map(|l| l.strip_prefix("THP_enabled:")).map(str::trim);
        assert_eq!(thp, Some("0"));
    }

    /// zstd contexts made and freed over and over on a thread of their own
    /// (as parquet-rs does for each column chunk a query reads) reuse the
    /// memory freed before them: no page faults after the first round.
    #[cfg(target_env = "gnu")]
    #[test]
    fn freed_c_memory_is_reused_without_page_faults() {
        super::keep_freed_c_memory();
        let text: Vec<u8> =
            (0..256 * 1024u32).map(|i| b"tokens of a log line "[(i % 21) as usize] ^ (i / 97) as u8).collect();
        let faults = std::thread::spawn(move || {
            let minor_faults = || {
                // SAFETY: getrusage fills the struct it is given.
                let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
                unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
                usage.ru_minflt
            };
            // A query's column chunks: each its contexts, all freed at the end.
            let round = || {
                let mut contexts = Vec::new();
                for _ in 0..20 {
                    let mut compressor = zstd::bulk::Compressor::new(1).expect("a compressor");
                    let frame = compressor.compress(&text).expect("compresses");
                    let mut decompressor = zstd::bulk::Decompressor::new().expect("a decompressor");
                    assert!(decompressor.decompress(&frame, text.len()).expect("decompresses") == text);
                    contexts.push((compressor, decompressor));
                }
            };
            round();
            let before = minor_faults();
            (0..50).for_each(|_| round());
            minor_faults() - before
        });
        let faults = faults.join().expect("thread ran");
        assert!(faults < 50, "{faults} page faults in 50 rounds");
    }
}
