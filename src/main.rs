//! The `tokscope` command line: parse flags, call the library, map errors to
//! an exit code. All real work lives in the library crate.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use tokscope::derive::{ContextBins, EosMarkers};
use tokscope::export::{self, OutputFormat};
use tokscope::generate::{self, GenFormat, GenOptions};
use tokscope::ingest::{self, DeriveSettings, Format, IngestOptions, IngestSummary, Redaction};
use tokscope::jobs::cli::{session, UdfArgs};
use tokscope::{engine, jobs, samples};

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

/// Token-level analytics for LLM serving logs.
#[derive(Parser)]
#[command(name = "tokscope", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Ingest access logs (files, directories, globs, object-store URLs) into a Parquet dataset.
    Ingest(IngestArgs),
    /// Run ad-hoc SQL over a dataset's `requests`, `tokens` and `rejects` tables.
    Query(QueryArgs),
    /// Run a named SQL job (eos, latency, cost, kv_cache, report) over a dataset.
    Job(tokscope::jobs::cli::JobArgs),
    /// Interactive SQL shell over a dataset (statements end with `;`; reads stdin when piped).
    Sql(tokscope::jobs::cli::SqlArgs),
    /// The main job end to end: ingest (the bundled sample logs by default) and print the report.
    Run(RunArgs),
    /// Write realistic synthetic access logs.
    Generate(GenerateArgs),
    /// Greedy-decode a prompt with a local Llama-family model.
    Decode(tokscope::replay::cli::DecodeArgs),
    /// Teacher-forced log-probabilities of a continuation after a prompt.
    Score(tokscope::replay::cli::ScoreArgs),
    /// Replay suspected silent truncations through a model; write `replay_verdicts`.
    Replay(tokscope::replay::cli::ReplayArgs),
    /// Causal tracing: corrupt the subject, restore each layer x position, print P(target).
    Trace(tokscope::mediation::cli::TraceArgs),
    /// Run mediation interventions for logged requests (or import rows) into `interventions`.
    Mediate(tokscope::mediation::cli::MediateArgs),
    /// TE / IE / DE per layer with bootstrap CIs, or the layer x position heatmap.
    MediationReport(tokscope::mediation::cli::ReportArgs),
    /// Prefill and greedy-decode tokens/s on a model directory with fixed ids (bench/decode.sh).
    DecodeBench(tokscope::replay::bench::DecodeBenchArgs),
}

#[derive(Args)]
struct IngestFlags {
    /// Force an input format instead of detecting it per file
    /// (canonical, openai_chat, openai_batch, anthropic, tgi, azure_csv, mooncake).
    #[arg(long)]
    format: Option<Format>,
    /// Context-bin edges over prompt_tokens, comma-separated, K = 1024.
    #[arg(long, default_value = "0,1K,2K,4K,8K,16K,32K,64K,128K")]
    bins: String,
    /// JSON file of extra EOS markers: {"model name": ["<|marker|>"], "*": [...]}.
    #[arg(long)]
    eos_markers: Option<PathBuf>,
    /// Model name for traces that log none (Azure, Mooncake); default `<format>:<file stem>`.
    #[arg(long)]
    model: Option<String>,
    /// Start time of traces with relative timestamps (Mooncake), RFC 3339.
    #[arg(long, default_value = "1970-01-01T00:00:00Z")]
    base_time: String,
    /// Store prompts, outputs and token texts as logged, as SHA-256 hashes, or not at all.
    #[arg(long, value_enum, default_value_t = Redaction::None)]
    redact: Redaction,
    /// Ingest inputs again even if the dataset's manifest lists them.
    #[arg(long)]
    force: bool,
    /// Lines longer than this many bytes are rejected without being buffered.
    #[arg(long, default_value_t = 64 << 20)]
    max_line_bytes: usize,
    /// No progress bar and no summary on stderr.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args)]
struct IngestArgs {
    /// Inputs: paths, directories, globs, or s3://, gs://, az://, http(s)://, file:// URLs.
    #[arg(required = true)]
    inputs: Vec<String>,
    /// The dataset to write (local directory or object-store URL).
    #[arg(long)]
    out: String,
    #[command(flatten)]
    flags: IngestFlags,
    /// Print the ingest summary as JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct QueryArgs {
    /// The dataset (local directory or object-store URL).
    #[arg(long)]
    data: String,
    /// The SQL to run (may start with a `--` comment, like the files in `sql/`).
    #[arg(allow_hyphen_values = true)]
    sql: String,
    /// Result format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    format: OutputFormat,
    /// Write the result to this file instead of stdout.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Allow DDL/DML statements (ad-hoc SQL is read-only by default).
    #[arg(long)]
    allow_write: bool,
    /// Print the query's wall time (planning and execution, file listing and
    /// Parquet footers included; process start and output excluded) to stderr.
    #[arg(long)]
    timing: bool,
    #[command(flatten)]
    udf: UdfArgs,
}

#[derive(Args)]
struct RunArgs {
    /// Inputs to ingest; none means the bundled sample logs.
    inputs: Vec<String>,
    /// Output dataset directory.
    #[arg(long, default_value = "tokscope-out")]
    out: String,
    #[command(flatten)]
    flags: IngestFlags,
    /// Report format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    report_format: OutputFormat,
    #[command(flatten)]
    udf: UdfArgs,
}

#[derive(Args)]
struct GenerateArgs {
    /// Number of requests.
    #[arg(long, default_value_t = 1000)]
    requests: usize,
    /// Log format to write.
    #[arg(long, value_enum, default_value_t = GenFormat::Canonical)]
    format: GenFormat,
    /// Output file (`-` for stdout).
    #[arg(long)]
    out: PathBuf,
    /// Random seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Include per-token logprobs and emission times.
    #[arg(long)]
    token_data: bool,
    /// Approximate characters of output text per request.
    #[arg(long, default_value_t = 600)]
    output_chars: usize,
}

impl IngestFlags {
    fn options(&self) -> anyhow::Result<IngestOptions> {
        let bins = ContextBins::parse(&self.bins)?;
        let markers = match &self.eos_markers {
            Some(p) => EosMarkers::from_file(p)?,
            None => EosMarkers::default(),
        };
        let base = chrono::DateTime::parse_from_rfc3339(&self.base_time)
            .with_context(|| format!("--base-time {:?} is not RFC 3339", self.base_time))?;
        Ok(IngestOptions {
            format: self.format,
            derive: DeriveSettings { bins, markers, redaction: self.redact },
            default_model: self.model.clone(),
            base_time_micros: base.timestamp_micros(),
            max_line_bytes: self.max_line_bytes,
            progress: !self.quiet,
            force: self.force,
            ..Default::default()
        })
    }
}

fn print_summary(s: &IngestSummary) {
    let t = &s.totals;
    eprintln!(
        "ingested {} file(s) into {} ({} skipped as already ingested): lines_read={} rows_written={} lines_rejected={} lines_skipped={} tokens_written={} in {:.2}s",
        s.files.len(), s.dataset, s.files_skipped.len(), t.lines_read, t.rows_written, t.lines_rejected, t.lines_skipped, t.tokens_written, s.elapsed_s
    );
    if t.lines_rejected > 0 {
        eprintln!("  rejected lines are in the `rejects` table: tokscope query --data {} \"SELECT * FROM rejects\"", s.dataset);
    }
}

fn main() -> anyhow::Result<()> {
    tune_allocator();
    let cli = Cli::parse();
    match cli.command {
        Command::Ingest(args) => {
            let summary = ingest::ingest(&args.inputs, &args.out, &args.flags.options()?)?;
            if !args.flags.quiet {
                print_summary(&summary);
            }
            if args.json {
                println!("{}", serde_json::to_string_pretty(&summary)?);
            }
            if !summary.reconciles() {
                bail!("ingest did not reconcile: lines_read != rows_written + lines_rejected");
            }
        }
        Command::Query(args) => {
            export::check_destination(args.format, args.output.as_deref())?;
            let udf = args.udf.config()?;
            let rt = engine::runtime()?;
            let batches = rt.block_on(async {
                let ctx = session(&args.data, &udf).await?;
                let start = std::time::Instant::now();
                let batches = engine::run_sql(&ctx, &args.sql, args.allow_write).await?;
                if args.timing {
                    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
                    eprintln!("elapsed: {:.3} s ({rows} rows)", start.elapsed().as_secs_f64());
                }
                Ok::<_, tokscope::Error>(batches)
            })?;
            export::write_output(&batches, args.format, args.output.as_deref())?;
        }
        Command::Run(args) => {
            let inputs = if args.inputs.is_empty() {
                vec![samples::extract()?.display().to_string()]
            } else {
                args.inputs.clone()
            };
            let summary = ingest::ingest(&inputs, &args.out, &args.flags.options()?)?;
            if !args.flags.quiet {
                print_summary(&summary);
            }
            let mut udf = args.udf.config()?;
            if args.inputs.is_empty() && args.udf.pricing.is_none() {
                let example = tokscope::engine::pricing::Pricing::from_toml(samples::EXAMPLE_PRICING, "config/pricing.example.toml")?;
                udf.pricing = std::sync::Arc::new(example);
            }
            let rt = engine::runtime()?;
            let batches = rt.block_on(async {
                let ctx = session(&args.out, &udf).await?;
                jobs::run_job(&ctx, jobs::job("report")?).await
            })?;
            export::write_batches(&batches, args.report_format, &mut std::io::stdout().lock())?;
        }
        Command::Job(args) => jobs::cli::run_job(&args)?,
        Command::Sql(args) => jobs::cli::run_shell(&args)?,
        Command::Generate(args) => {
            let opts = GenOptions {
                requests: args.requests,
                format: args.format,
                seed: args.seed,
                token_data: args.token_data,
                output_chars: args.output_chars,
            };
            let mut out: Box<dyn Write> = if args.out.as_os_str() == "-" {
                Box::new(std::io::stdout().lock())
            } else {
                Box::new(std::io::BufWriter::new(
                    std::fs::File::create(&args.out).with_context(|| format!("creating {}", args.out.display()))?,
                ))
            };
            generate::generate(&opts, &mut out)?;
            out.flush()?;
        }
        Command::Decode(args) => tokscope::replay::cli::run_decode(&args, &mut std::io::stdout().lock())?,
        Command::Score(args) => tokscope::replay::cli::run_score(&args, &mut std::io::stdout().lock())?,
        Command::Replay(args) => tokscope::replay::cli::run_replay(&args, &mut std::io::stdout().lock())?,
        Command::Trace(args) => tokscope::mediation::cli::run_trace(&args, &mut std::io::stdout().lock())?,
        Command::Mediate(args) => tokscope::mediation::cli::run_mediate(&args, &mut std::io::stdout().lock())?,
        Command::MediationReport(args) => {
            tokscope::mediation::cli::run_report(&args, &mut std::io::stdout().lock())?
        }
        Command::DecodeBench(args) => {
            tokscope::replay::bench::run_decode_bench(&args, &mut std::io::stdout().lock())?
        }
    }
    Ok(())
}
