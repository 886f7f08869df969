//! `tokscope ingest` and `tokscope run`: logs in, dataset (and report) out.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use tokscope::derive::{ContextBins, DeriveSettings, EosMarkers, VariantMap};
use tokscope::engine::pricing::Pricing;
use tokscope::engine::UdfConfig;
use tokscope::export::{self, OutputFormat};
use tokscope::formats::Format;
use tokscope::ingest::{self, IngestOptions, IngestSummary};
use tokscope::reader::ReaderBuilder;
use tokscope::redact::Redaction;
use tokscope::{engine, jobs, samples};

use super::args::{choice, input_format, EosMarkerArgs};
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
    #[arg(long, default_value = "0,1K,2K,4K,8K,16K,32K,64K,128K")]
    bins: String,
    /// Experiment arms of requests that log none: a JSON array of rules
    /// [{"arm": "B", "model" | "model_pattern": ..., "model_version" | "model_version_pattern": ...}],
    /// the first matching rule wins; a logged `variant`/`arm`/`experiment` field wins over it.
    #[arg(long, value_name = "FILE")]
    variants: Option<PathBuf>,
    /// Model name for traces that log none (Azure, Mooncake); default `<format>:<file stem>`.
    #[arg(long)]
    model: Option<String>,
    /// Start time of traces with relative timestamps (Mooncake), RFC 3339.
    #[arg(long, default_value = "1970-01-01T00:00:00Z")]
    base_time: String,
    /// Store prompts, outputs and token texts as logged, as SHA-256 hashes, or not at all.
    #[arg(long, default_value_t = Redaction::None, value_parser = choice::<Redaction>(Redaction::NAMES))]
    redact: Redaction,
    /// Ingest inputs again even if the dataset's manifest lists them.
    #[arg(long)]
    force: bool,
    /// Lines longer than this many bytes are rejected without being buffered.
    #[arg(long, default_value_t = 64 << 20)]
    max_line_bytes: usize,
    /// No progress bar and no summary on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

impl IngestFlags {
    fn options(&self) -> anyhow::Result<IngestOptions> {
        let markers = match &self.markers.eos_markers {
            Some(p) => EosMarkers::from_file(p)?,
            None => EosMarkers::default(),
        };
        let base = chrono::DateTime::parse_from_rfc3339(&self.base_time)
            .with_context(|| format!("--base-time {:?} is not RFC 3339", self.base_time))?;
        let variants = match &self.variants {
            Some(p) => VariantMap::from_file(p)?,
            None => VariantMap::default(),
        };
        let derive =
            DeriveSettings { bins: ContextBins::parse(&self.bins)?, markers, redaction: self.redact, variants };
        Ok(IngestOptions {
            reader: ReaderBuilder::new()
                .with_format(self.format)
                .with_derive_settings(derive)
                .with_default_model(self.model.clone())
                .with_base_time_micros(base.timestamp_micros())
                .with_max_line_bytes(self.max_line_bytes),
            progress: !self.quiet,
            force: self.force,
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
    /// Inputs to ingest; none means the bundled sample logs.
    inputs: Vec<String>,
    /// Output dataset directory.
    #[arg(long, default_value = "tokscope-out")]
    out: String,
    #[command(flatten)]
    flags: IngestFlags,
    /// Prices for the report's cost columns: a TOML file, or `litellm:FILE.json`
    /// (default for the bundled samples: config/pricing.example.toml).
    #[arg(long, value_name = "FILE")]
    pricing: Option<String>,
    /// Model shapes for `kv_cache_bytes` (TOML over the bundled config/architectures.toml).
    #[arg(long, value_name = "FILE")]
    architectures: Option<PathBuf>,
    /// Report format.
    #[arg(long, default_value_t = OutputFormat::Table, value_parser = choice::<OutputFormat>(OutputFormat::NAMES))]
    report_format: OutputFormat,
}

fn print_summary(s: &IngestSummary) {
    let t = &s.totals.counts;
    eprintln!(
        "ingested {} file(s) into {} ({} skipped as already ingested): lines_read={} lines_ingested={} rows_written={} lines_rejected={} lines_skipped={} records_skipped={} tokens_written={} profiles_written={} in {:.2}s",
        s.files.len(), s.dataset, s.files_skipped.len(), t.lines_read, t.lines_ingested, t.rows_written, t.lines_rejected, t.lines_skipped, t.records_skipped, t.tokens_written, t.profiles_written, s.elapsed_s
    );
    if t.lines_rejected > 0 {
        eprintln!(
            "  rejected lines are in the `rejects` table: tokscope query --data {} \"SELECT * FROM rejects\"",
            s.dataset
        );
    }
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

/// Runs `tokscope run`: ingest (the bundled samples by default), then the report.
pub fn run_run(args: &RunArgs) -> anyhow::Result<()> {
    let bundled = args.inputs.is_empty();
    let inputs = if bundled { vec![samples::extract()?.display().to_string()] } else { args.inputs.clone() };
    ingest_and_report(&inputs, &args.out, &args.flags)?;
    let markers = args.flags.markers.eos_markers.as_deref();
    let mut udf = UdfConfig::load(args.pricing.as_deref(), args.architectures.as_deref(), markers)?;
    if bundled && args.pricing.is_none() {
        // The bundled samples are priced with the bundled example prices.
        udf.pricing = Arc::new(Pricing::from_toml(samples::EXAMPLE_PRICING, "config/pricing.example.toml")?);
    }
    let batches = engine::runtime()?.block_on(async {
        let ctx = session(&args.out, &udf).await?;
        jobs::run_job(&ctx, jobs::job("report")?).await
    })?;
    export::write_batches(&batches, args.report_format, &mut std::io::stdout().lock())?;
    Ok(())
}
