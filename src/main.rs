//! The `tokscope` binary: parse flags ([`cli`]), run the command, map errors
//! to one `error:` line (and a `hint:`) and exit status 1. All real work
//! lives in the library crate.

mod cli;

use std::process::ExitCode;

use clap::Parser;

// mimalloc instead of glibc malloc: the engine allocates and frees many
// short-lived, batch-sized buffers; with glibc about half of a latency-job
// query went to the kernel (page faults and page zeroing after memory went
// back to the OS). datafusion-cli makes the same choice. docs/PERFORMANCE.md.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay`: its position in `mi_option_e`
/// (mimalloc.h, v3), for which the sys crate exports no constant.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps freed memory for reuse instead of returning it to the OS after
/// mimalloc's purge delay (1 s in the bundled v3). Ingest frees and
/// reallocates chunk- and batch-sized buffers many times a second; returned
/// pages came back through page faults and kernel zeroing, which made ingest
/// 13% slower than with glibc (docs/PERFORMANCE.md). Peak RSS on the ingest
/// benchmark stays ~470-500 MiB; a process keeps it until it exits.
/// `MIMALLOC_PURGE_DELAY` in the environment wins.
fn tune_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: stores one integer option. Called first thing in `main`,
        // before any other thread exists, as mimalloc requires.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
    }
}

/// Exit code when another run holds the dataset's writer lease (sysexits' EX_TEMPFAIL: try again later).
const EXIT_BUSY: u8 = 75;

fn main() -> ExitCode {
    tune_allocator();
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
