//! The command line: every clap definition and the orchestration of each
//! command. The library takes plain option structs; this module parses
//! flags into them, calls the library, and prints.

mod args;
mod cluster;
mod docs;
pub mod errors;
mod export;
mod formats;
mod generate;
mod ingest;
mod mediation;
mod query;
mod replay;
mod serve;
mod shell;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use clap::{Parser, Subcommand};
use tokscope::resources;

/// Token-level analytics for LLM serving logs.
#[derive(Parser)]
#[command(name = "tokscope", version = env!("TOKSCOPE_VERSION"), about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Threads for parallel work: ingest's parsing and writing, a query's
    /// partitions, compaction, the CPU decoder (default: TOKSCOPE_THREADS,
    /// else the cores the process may use, cgroup quota included).
    #[arg(long, global = true, value_name = "N")]
    threads: Option<usize>,
    /// Print what the command chose from the machine (threads, memory) on stderr.
    #[arg(long, short, global = true)]
    verbose: bool,
}

/// `--threads` as given, for commands that read a run file first.
static THREADS_FLAG: OnceLock<Option<usize>> = OnceLock::new();
static VERBOSE: AtomicBool = AtomicBool::new(false);

/// Whether `--verbose` was given.
pub fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}

/// Sets the process's thread count from `--threads`, else `file` (a run
/// file's `threads`), else the environment or the machine; with
/// `--verbose`, says what the machine offers and what was chosen.
pub fn configure_threads(file: Option<usize>) -> anyhow::Result<()> {
    let flag = THREADS_FLAG.get().copied().flatten().or(file);
    let (threads, from) = resources::choose_threads(flag)?;
    resources::configure_threads(threads)?;
    if verbose() {
        let m = resources::machine();
        let gib = |b: u64| b as f64 / f64::from(1 << 30);
        eprintln!(
            "machine: {} cores{}, {:.1} GiB memory{} ({:.1} GiB available); threads: {threads} ({})",
            m.cores,
            if m.cores_limited_by_cgroup { " (cgroup quota)" } else { "" },
            gib(m.memory_total),
            if m.memory_limited_by_cgroup { " (cgroup limit)" } else { "" },
            gib(m.memory_available),
            match from {
                resources::ThreadsFrom::Flag => "--threads",
                resources::ThreadsFrom::Environment => resources::THREADS_VAR,
                resources::ThreadsFrom::Rayon => "RAYON_NUM_THREADS",
                resources::ThreadsFrom::Machine => "the machine's cores",
            }
        );
    }
    Ok(())
}

#[derive(Subcommand)]
enum Command {
    /// Ingest access logs (files, directories, globs, object-store URLs) into a Parquet dataset.
    Ingest(ingest::IngestArgs),
    /// List the input formats, or report how each file of a folder reads (--check), writing nothing.
    Formats(formats::FormatsArgs),
    /// Run ad-hoc SQL over a dataset's tables (read-only unless --allow-write).
    Query(query::QueryArgs),
    /// Run a named SQL job from sql/ over a dataset.
    Job(query::JobArgs),
    /// Serve a dataset over Arrow Flight SQL (read-only; ADBC, JDBC, Grafana), with a token.
    Serve(serve::ServeArgs),
    /// Interactive SQL shell over a dataset (statements end with `;`; reads stdin when piped).
    Sql(shell::SqlArgs),
    /// The main job end to end: ingest (the bundled sample logs by default) and print the report.
    Run(ingest::RunArgs),
    /// Merge each partition's small Parquet files into one (atomically, under the dataset's lease).
    Compact(ingest::CompactArgs),
    /// Publish the dashboard and every job's result as DEST/<date>/ and DEST/latest/.
    Export(export::ExportArgs),
    /// Write realistic synthetic access logs.
    Generate(generate::GenerateArgs),
    /// Greedy-decode a prompt with a local Llama-family model.
    Decode(replay::DecodeArgs),
    /// Teacher-forced log-probabilities of a continuation after a prompt.
    Score(replay::ScoreArgs),
    /// Replay suspected silent truncations through a model; write `replay_verdicts`.
    Replay(replay::ReplayArgs),
    /// Causal tracing: corrupt the subject, restore each layer x position, print P(target).
    Trace(mediation::TraceArgs),
    /// Run mediation interventions for logged requests (or import rows) into `interventions`.
    Mediate(mediation::MediateArgs),
    /// TE / IE / DE per layer with bootstrap CIs, or the layer x position heatmap.
    MediationReport(mediation::ReportArgs),
    /// Prefill and greedy-decode tokens/s on a model directory with fixed ids (bench/decode.sh).
    DecodeBench(replay::DecodeBenchArgs),
    /// Print a shell completion script, e.g. `tokscope completions bash > /etc/bash_completion.d/tokscope`.
    Completions(docs::CompletionsArgs),
    /// Print the man page (roff), or write one page per command with --out-dir.
    Man(docs::ManArgs),
    /// Run a Ballista scheduler that runs tokscope's jobs and SQL (clients: --engine ballista://HOST:PORT).
    Scheduler(cluster::SchedulerArgs),
    /// Run a Ballista executor for a tokscope scheduler.
    Executor(cluster::ExecutorArgs),
}

/// Runs the parsed command; the exit code of a command that succeeded.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let out = &mut std::io::stdout().lock();
    VERBOSE.store(cli.verbose, Ordering::Relaxed);
    let _ = THREADS_FLAG.set(cli.threads);
    if let Command::Run(args) = &cli.command {
        if !args.is_scheduled() {
            configure_threads(None)?;
        }
        return ingest::run_run(args);
    }
    configure_threads(None)?;
    if let Command::Formats(args) = &cli.command {
        return formats::run_formats(args, out);
    }
    match cli.command {
        Command::Ingest(args) => ingest::run_ingest(&args),
        Command::Query(args) => query::run_query(&args),
        Command::Job(args) => query::run_job(&args),
        Command::Sql(args) => shell::run_shell(&args),
        Command::Serve(args) => serve::run_serve(&args),
        Command::Run(_) | Command::Formats(_) => unreachable!("handled above"),
        Command::Compact(args) => ingest::run_compact(&args),
        Command::Export(args) => export::run_export(&args),
        Command::Generate(args) => generate::run_generate(&args),
        Command::Decode(args) => replay::run_decode(&args, out),
        Command::Score(args) => replay::run_score(&args, out),
        Command::Replay(args) => replay::run_replay(&args, out),
        Command::Trace(args) => mediation::run_trace(&args, out),
        Command::Mediate(args) => mediation::run_mediate(&args, out),
        Command::MediationReport(args) => mediation::run_report(&args, out),
        Command::DecodeBench(args) => replay::run_decode_bench(&args, out),
        Command::Completions(args) => docs::run_completions(&args, out),
        Command::Man(args) => docs::run_man(&args, out),
        Command::Scheduler(args) => cluster::run_scheduler(&args),
        Command::Executor(args) => cluster::run_executor(&args),
    }
    .map(|()| ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_tree_is_consistent() {
        // Duplicate flags, bad defaults and conflicting names panic here, not in a user's hands.
        super::Cli::command().debug_assert();
    }
}
