//! `tokscope ingest` and `tokscope run`: logs in, dataset (and report) out.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use parquet::basic::Compression;
use tokscope::attribution::{AttributeMap, AttributeMapping};
use tokscope::dataset::compact::{self, CompactOptions, CompactSummary};
use tokscope::dataset::lease::LeaseOptions;
use tokscope::dataset::writer::parse_compression;
use tokscope::derive::ContextBins;
use tokscope::engine::pricing::Pricing;
use tokscope::engine::UdfConfig;
use tokscope::export::{self, OutputFormat};
use tokscope::formats::{Format, TimeUnit};
use tokscope::ingest::{self, IngestOptions, IngestSettings, IngestSummary};
use tokscope::pipeline::config::RunConfig;
use tokscope::pipeline::{self, Outcome, RunOptions, RunReport};
use tokscope::redact::Redaction;
use tokscope::resources::MemoryBudget;
use tokscope::{engine, jobs, samples};

use super::args::{choice, input_format, EosMarkerArgs, TableArgs};
use super::query::session;

/// How inputs are read and what is derived from them.
#[derive(clap::Args)]
pub struct IngestFlags {
    #[command(flatten)]
    markers: EosMarkerArgs,
    /// Force an input format instead of detecting it per file.
    #[arg(long, value_parser = input_format())]
    format: Option<Format>,
    /// Context-bin edges over prompt_tokens, comma-separated, K = 1024.
    #[arg(long, default_value = "0,1K,2K,4K,8K,16K,32K,64K,128K", value_parser = ContextBins::parse)]
    bins: ContextBins,
    /// Experiment arms of requests that log none: a JSON array of rules
    /// [{"arm": "B", "model" | "model_pattern": ..., "model_version" | "model_version_pattern": ...}],
    /// the first matching rule wins; a logged `variant`/`arm`/`experiment` field wins over it.
    #[arg(long, value_name = "FILE")]
    variants: Option<PathBuf>,
    /// Send a field of your own to an attribution column, e.g.
    /// `--attribute team=metadata.cost_center` (repeatable; columns: user_id,
    /// team, project, environment, tags, key_alias, provider). FIELD is a
    /// key the request's `extra` keeps, dotted into nested objects; where a
    /// record holds it, it replaces what the format read.
    #[arg(long = "attribute", value_name = "COLUMN=FIELD")]
    attributes: Vec<AttributeMapping>,
    /// Model name for traces that log none (Azure, Mooncake); default `<format>:<file stem>`.
    #[arg(long)]
    model: Option<String>,
    /// Start time of traces with relative timestamps (Mooncake), and arrival
    /// time of responses saved without any (bare TGI and Anthropic responses), RFC 3339.
    #[arg(long, default_value = "1970-01-01T00:00:00Z", value_parser = ingest::parse_base_time)]
    base_time: i64,
    /// Unit of durations logged as bare numbers when a row has no timestamps to
    /// take them from (Langfuse `latency`, `time_to_first_token`): seconds in
    /// current exports, milliseconds in events exports of integrations created
    /// before April 2026.
    #[arg(long, default_value_t = TimeUnit::Seconds, value_parser = choice::<TimeUnit>(TimeUnit::NAMES))]
    time_unit: TimeUnit,
    /// Store prompts, outputs, unknown keys, token texts and rejected lines as
    /// logged, as keyed hashes (HMAC-SHA-256 with the secret in
    /// TOKSCOPE_REDACT_KEY) with their lengths, or not at all.
    #[arg(long, default_value_t = Redaction::None, value_parser = choice::<Redaction>(Redaction::NAMES))]
    redact: Redaction,
    /// Ingest inputs again even if the dataset's manifest lists them.
    #[arg(long)]
    force: bool,
    /// Parquet codec of the files written: zstd(N) with N from 1 to 22, lz4,
    /// snappy or none (docs/PERFORMANCE.md compares sizes and speeds).
    /// Floating-point columns with full mantissas (logprobs, ratios), and
    /// the few rows a day of `request_counts`, are written uncompressed
    /// whatever the codec.
    #[arg(long, default_value = "zstd(1)", value_name = "CODEC", value_parser = parse_compression)]
    compression: Compression,
    /// Most memory ingest may hold: `auto` (a quarter of the memory
    /// available to the process, cgroup limits included, between 256 MiB and
    /// 8 GiB), bytes or a size with a unit (512M, 1G), or `none`. The
    /// writer threads and the rows waiting for their row group share it;
    /// over it, rows wait on local disk (same row groups, slower).
    #[arg(long, default_value = "auto", value_name = "SIZE", value_parser = MemoryBudget::parse)]
    memory_limit: MemoryBudget,
    /// Lines longer than this many bytes are rejected without being buffered.
    #[arg(long, default_value_t = 64 << 20)]
    max_line_bytes: usize,
    /// Most requests to an object store in flight at once: objects of up to
    /// 1 MiB are fetched whole this many at a time (their bytes within the
    /// memory limit) and parsed in their order, so the dataset is the same
    /// at any value; 1 fetches one object after another.
    #[arg(long, default_value_t = ingest::fetch::DEFAULT_IO_CONCURRENCY, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    io_concurrency: usize,
    /// Wait up to this many seconds for another run's lease on the dataset
    /// instead of failing at once.
    #[arg(long, default_value_t = 0, value_name = "SECONDS")]
    lease_wait: u64,
    /// No progress bar and no summary on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

impl IngestFlags {
    fn options(&self) -> anyhow::Result<IngestOptions> {
        let settings = IngestSettings {
            format: self.format,
            bins: self.bins.clone(),
            eos_markers: self.markers.eos_markers.clone(),
            model: self.model.clone(),
            base_time_micros: self.base_time,
            redact: self.redact,
            max_line_bytes: Some(self.max_line_bytes),
            time_unit: self.time_unit,
            variants: self.variants.clone(),
            attributes: AttributeMap::new(self.attributes.clone())?,
            compression: self.compression,
            memory_limit: self.memory_limit,
            io_concurrency: self.io_concurrency,
        };
        Ok(IngestOptions {
            reader: settings.reader()?,
            progress: !self.quiet,
            force: self.force,
            store: Default::default(),
            lease: LeaseOptions { wait: Duration::from_secs(self.lease_wait), ..Default::default() },
            compression: settings.compression,
            memory_limit: settings.memory_limit,
            io_concurrency: settings.io_concurrency,
        })
    }
}

/// `tokscope ingest`.
#[derive(clap::Args)]
pub struct IngestArgs {
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

/// `tokscope run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// A scheduled run: ingest the new inputs, run the jobs and publish the
    /// export as the file says (docs/OPERATIONS.md); exit codes: 0 success,
    /// 3 nothing new, 4 some lines rejected, 5 an alert fired, 75 dataset
    /// busy, 1 failure.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["inputs", "out"])]
    config: Option<PathBuf>,
    /// With --config: list what would be ingested and exported, write nothing.
    #[arg(long, requires = "config")]
    dry_run: bool,
    /// With --config: the export's date (YYYY-MM-DD; default today, UTC).
    #[arg(long, requires = "config")]
    date: Option<chrono::NaiveDate>,
    /// With --config: print the run's report as JSON on stdout instead of one line.
    #[arg(long, requires = "config")]
    json: bool,
    /// Inputs to ingest; none means the bundled sample logs.
    inputs: Vec<String>,
    /// Output dataset directory.
    #[arg(long, default_value = "tokscope-out")]
    out: String,
    #[command(flatten)]
    flags: IngestFlags,
    /// Prices for the report's cost columns: a TOML file, `litellm:FILE.json` or
    /// `none`; default: the bundled LiteLLM table (LiteLLM 1.110.2, 2026-11-20),
    /// and config/pricing.example.toml for the bundled samples.
    #[arg(long, value_name = "FILE")]
    pricing: Option<String>,
    /// Model shapes for `kv_cache_bytes` (TOML over the bundled config/architectures.toml).
    #[arg(long, value_name = "FILE")]
    architectures: Option<PathBuf>,
    /// Report format.
    #[arg(long, default_value_t = OutputFormat::Table, value_parser = choice::<OutputFormat>(OutputFormat::NAMES))]
    report_format: OutputFormat,
    #[command(flatten)]
    table: TableArgs,
}

fn print_summary(s: &IngestSummary) {
    if super::verbose() {
        if let Some(m) = &s.memory {
            eprintln!("{}", memory_line(m, s.spilled_bytes));
        }
    }
    let t = &s.totals.counts;
    // A finish reason outside the table is named only when there is one, so the usual line stays as it was.
    let mut unmapped = match t.finish_reasons_unmapped {
        0 => String::new(),
        n => format!(" finish_reasons_unmapped={n}"),
    };
    if t.fields_nulled > 0 {
        unmapped.push_str(&format!(" fields_nulled={}", t.fields_nulled));
    }
    eprintln!(
        "ingested {} file(s) into {} ({} skipped as already ingested): lines_read={} lines_ingested={} rows_written={} lines_rejected={} lines_skipped={} records_skipped={} records_rejected={} tokens_written={} profiles_written={}{unmapped} in {:.2}s",
        s.files.len(), s.dataset, s.files_skipped.len(), t.lines_read, t.lines_ingested, t.rows_written, t.lines_rejected, t.lines_skipped, t.records_skipped, t.records_rejected, t.tokens_written, t.profiles_written, s.elapsed_s
    );
    if t.lines_rejected + t.records_rejected > 0 {
        eprintln!(
            "  rejected lines are in the `rejects` table: tokscope query --data {} \"SELECT * FROM rejects\"",
            s.dataset
        );
    }
}

/// How an ingest shared its memory, for `--verbose`.
fn memory_line(m: &ingest::MemoryPlan, spilled: u64) -> String {
    let mib = |b: usize| format!("{:.0} MiB", b as f64 / f64::from(1 << 20));
    let limit = m.limit.map_or_else(|| "none".to_string(), |b| format!("{} ({})", mib(b), m.limit_from));
    let buffer = m.buffer_bytes.map_or_else(|| "unlimited".to_string(), mib);
    format!(
        "ingest memory: limit {limit}; {} parse threads, {} writer threads ({} each), {} block-reading threads; \
         pipeline {}; {} inputs read ahead ({}); {} requests in flight ({}); buffered rows {buffer}; spilled {}",
        m.parse_threads,
        m.writer_threads,
        mib(m.writer_bytes),
        m.read_threads,
        mib(m.pipeline_bytes),
        m.inputs_ahead,
        mib(m.read_ahead_bytes),
        m.io_concurrency,
        mib(m.fetch_bytes),
        mib(spilled as usize)
    )
}

/// Ingests, prints the summary, and fails when the counts do not reconcile.
fn ingest_and_report(inputs: &[String], out: &str, flags: &IngestFlags) -> anyhow::Result<IngestSummary> {
    let summary = ingest::ingest(inputs, out, &flags.options()?)?;
    if !flags.quiet {
        print_summary(&summary);
    }
    if !summary.reconciles() {
        bail!("ingest did not reconcile: lines_read != lines_ingested + lines_rejected");
    }
    Ok(summary)
}

/// Runs `tokscope ingest`.
pub fn run_ingest(args: &IngestArgs) -> anyhow::Result<()> {
    let summary = ingest_and_report(&args.inputs, &args.out, &args.flags)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    }
    Ok(())
}

impl RunArgs {
    /// Whether this is a scheduled run (`--config`), whose file may set the threads.
    pub fn is_scheduled(&self) -> bool {
        self.config.is_some()
    }
}

/// Runs `tokscope run`: a scheduled run with `--config`, else ingest (the
/// bundled samples by default) and the report.
pub fn run_run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.config {
        return run_scheduled(path, args);
    }
    let bundled = args.inputs.is_empty();
    let inputs = if bundled { vec![samples::extract()?.display().to_string()] } else { args.inputs.clone() };
    ingest_and_report(&inputs, &args.out, &args.flags)?;
    let markers = args.flags.markers.eos_markers.as_deref();
    let mut udf = UdfConfig::load(args.pricing.as_deref(), args.architectures.as_deref(), markers)?;
    if bundled && args.pricing.is_none() {
        // The bundled samples are priced with the bundled example prices.
        udf.pricing = Arc::new(Pricing::from_toml(samples::EXAMPLE_PRICING, "config/pricing.example.toml")?);
    }
    let report = jobs::job("report")?;
    let batches = engine::runtime()?.block_on(async {
        let ctx = session(&args.out, &udf, None, &Default::default()).await?;
        jobs::run_job(&ctx, report).await
    })?;
    export::write_output(&batches, args.report_format, None, &args.table.layout(report.key_columns))?;
    Ok(ExitCode::SUCCESS)
}

/// Exit code of a run that found nothing new to ingest.
pub const EXIT_NOTHING_NEW: u8 = 3;
/// Exit code of a run that ingested new inputs but rejected some lines.
pub const EXIT_PARTIAL: u8 = 4;
/// Exit code of a run that fired an alert (over 3 and 4: docs/OPERATIONS.md).
pub const EXIT_ALERT: u8 = 5;

/// `tokscope run --config`: one line on stdout, details on stderr.
fn run_scheduled(path: &std::path::Path, args: &RunArgs) -> anyhow::Result<ExitCode> {
    let config = RunConfig::load(path)?;
    super::configure_threads(config.threads)?;
    let options = RunOptions { dry_run: args.dry_run, progress: !args.flags.quiet, date: args.date };
    let report = pipeline::run(&config, &options)?;
    if let Some(summary) = report.ingest.as_ref().filter(|_| !args.flags.quiet) {
        print_summary(summary);
    }
    let alerts = report.alerts.as_ref();
    if let Some(failed) = alerts.and_then(|a| a.on_alert.as_ref()).filter(|n| !n.ok) {
        eprintln!(
            "warning: on_alert failed ({}); its {} alert(s) stay pending and are sent again by the next run",
            failed.error.as_deref().unwrap_or("unknown error"),
            failed.alerts
        );
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", one_line(&report));
    }
    if alerts.is_some_and(|a| a.fired > 0) {
        return Ok(ExitCode::from(EXIT_ALERT));
    }
    Ok(match report.outcome {
        Outcome::Success => ExitCode::SUCCESS,
        Outcome::NothingNew => ExitCode::from(EXIT_NOTHING_NEW),
        Outcome::Partial => ExitCode::from(EXIT_PARTIAL),
    })
}

/// The run's summary line, for cron mail and logs.
fn one_line(report: &RunReport) -> String {
    if report.dry_run {
        let mut line = format!(
            "tokscope run --dry-run: {} input(s) to ingest, {} already ingested, into {}",
            report.ingested.len(),
            report.already_ingested,
            report.dataset
        );
        for input in &report.ingested {
            line.push_str(&format!("\n  would ingest {input}"));
        }
        return line;
    }
    let counts = report.ingest.as_ref().map(|s| s.totals.counts).unwrap_or_default();
    let status = match report.outcome {
        Outcome::Success => "ok",
        Outcome::NothingNew => "nothing new",
        Outcome::Partial => "partial (lines rejected)",
    };
    let export = match &report.export {
        Some(e) => format!(", exported {} job(s) to {}", e.jobs.len(), e.location),
        None => String::new(),
    };
    let alerts = match &report.alerts {
        Some(a) => format!(", {} alert(s) fired ({} active)", a.fired, a.active.len()),
        None => String::new(),
    };
    let steps = match report.steps.describe(report.elapsed_s) {
        s if s.is_empty() => s,
        s => format!(" ({s})"),
    };
    format!(
        "tokscope run: {status}: {} input(s) ingested ({} rows, {} lines rejected), {} already ingested{export}{alerts} in {:.1}s{steps}",
        report.ingested.len(),
        counts.rows_written,
        counts.lines_rejected,
        report.already_ingested,
        report.elapsed_s,
    )
}

/// `tokscope compact`.
#[derive(clap::Args)]
pub struct CompactArgs {
    /// The dataset to compact (local directory or object-store URL).
    #[arg(long)]
    data: String,
    /// A table to compact (repeat for more; default: every table the dataset holds).
    #[arg(long = "table", value_name = "TABLE")]
    tables: Vec<String>,
    /// Files of at least this size are left alone; the others are merged per
    /// partition into files cut at about this size.
    #[arg(long, default_value = "256M", value_name = "SIZE")]
    target_size: String,
    /// Parquet codec of the merged files (as ingest's --compression).
    #[arg(long, default_value = "zstd(1)", value_name = "CODEC")]
    compression: String,
    /// Most memory the partitions merged at once may hold together: `auto`
    /// (as ingest's), a size, or `none`; fewer merge in parallel under it.
    #[arg(long, default_value = "auto", value_name = "SIZE")]
    memory_limit: String,
    /// Wait up to this many seconds for another run's lease on the dataset
    /// instead of failing at once.
    #[arg(long, default_value_t = 0, value_name = "SECONDS")]
    lease_wait: u64,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// No summary on stderr.
    #[arg(long, short)]
    quiet: bool,
}

/// Runs `tokscope compact`.
pub fn run_compact(args: &CompactArgs) -> anyhow::Result<()> {
    let opts = CompactOptions {
        tables: args.tables.iter().map(|t| tokscope::catalog::table(t)).collect::<Result<_, _>>()?,
        target_bytes: compact::parse_target_size(&args.target_size).context("--target-size")?,
        compression: tokscope::dataset::writer::parse_compression(&args.compression)?,
        lease: LeaseOptions { wait: Duration::from_secs(args.lease_wait), ..Default::default() },
        memory_limit: tokscope::resources::MemoryBudget::parse(&args.memory_limit).context("--memory-limit")?,
    };
    let rt = tokscope::store::io_runtime()?;
    let dataset = tokscope::dataset::DatasetRoot::parse(&args.data)?;
    // Checked before the lease is taken: taking it creates the directory.
    rt.block_on(dataset.contents())?;
    let s = compact::compact(&dataset, &tokscope::dataset::new_run_id(), &opts, &rt)?;
    if !args.quiet {
        eprintln!("{}", compact_line(&s, &dataset.display()));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    }
    Ok(())
}

/// One line saying what a compaction did.
fn compact_line(s: &CompactSummary, dataset: &str) -> String {
    if s.files_before == 0 {
        return format!("compacted {dataset}: no partition has two or more small files");
    }
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    format!(
        "compacted {dataset}: {} files in {} partition(s) merged into {} ({} rows, {:.1} MiB -> {:.1} MiB)",
        s.files_before,
        s.partitions,
        s.files_after,
        s.rows,
        mib(s.bytes_before),
        mib(s.bytes_after)
    )
}
