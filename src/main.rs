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
}

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
}
