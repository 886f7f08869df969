//! Flags shared by several commands, and the value parsers that take their
//! choices from the library's registries (so `--help` lists what exists).

use std::path::PathBuf;
use std::str::FromStr;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use tokscope::engine::distributed::Remote;
use tokscope::engine::{self, UdfConfig};
use tokscope::export::{OutputFormat, TableLayout};
use tokscope::formats::Format;
use tokscope::jobs::JOBS;
use tokscope::size::parse_size;

/// A parser for a `named_enum!` type: its names as the possible values.
pub fn choice<T>(names: &'static [&'static str]) -> impl TypedValueParser<Value = T>
where
    T: FromStr<Err = String> + Clone + Send + Sync + 'static,
{
    PossibleValuesParser::new(names).try_map(|s| s.parse::<T>())
}

/// `--format` of ingest: the registered input formats, with what each is.
pub fn input_format() -> impl TypedValueParser<Value = Format> {
    let values: Vec<PossibleValue> = Format::all().map(|f| PossibleValue::new(f.name()).help(f.about())).collect();
    PossibleValuesParser::new(values).try_map(|s| s.parse::<Format>().map_err(|e| e.to_string()))
}

/// Help of a job-name argument: the registered jobs, with what each computes.
pub fn job_help() -> String {
    let jobs: Vec<String> = JOBS.iter().map(|j| format!("  {}: {}", j.name, j.about)).collect();
    format!("The job, one of:\n{}", jobs.join("\n"))
}

/// `--param NAME=VALUE`.
pub fn parse_param(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .ok_or_else(|| format!("expected NAME=VALUE, got {s:?}"))
}

/// `--eos-markers`: extra EOS markers, for ingest (`has_eos_marker`) and for
/// the SQL function `is_eos_marker`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EosMarkerArgs {
    /// JSON file of extra EOS markers: {"model name": ["<|marker|>"], "*": [...]}.
    #[arg(long, value_name = "FILE")]
    pub eos_markers: Option<PathBuf>,
}

/// Flags that configure tokscope's SQL functions (prices, model shapes, EOS markers).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct UdfArgs {
    /// Prices for `cost`, `report`, `reconcile` and `price_usd`: a TOML file
    /// (config/pricing.example.toml), `litellm:FILE.json` for a LiteLLM
    /// model_prices_and_context_window.json (a newer one than the bundled), or
    /// `none` (no prices: logged costs only). Default: the bundled snapshot of
    /// LiteLLM's table (LiteLLM 1.110.2, 2026-11-20; MIT; config/litellm/). A request
    /// without a price keeps the cost its gateway logged (docs/metrics.md, cost_source).
    #[arg(long, value_name = "FILE")]
    pub pricing: Option<String>,
    /// Model shapes for `kv_cache` / `kv_cache_bytes` (TOML), searched before the bundled
    /// config/architectures.toml; entries may point at a Hugging Face config.json.
    #[arg(long, value_name = "FILE")]
    pub architectures: Option<PathBuf>,
    #[command(flatten)]
    pub markers: EosMarkerArgs,
    /// Read a field of your own into an attribution column at query time,
    /// e.g. `--attribute team=metadata.cost_center` (repeatable): where a
    /// request's stored `extra` holds the field it replaces the column, as
    /// `ingest --attribute` would have; data already ingested needs no re-ingest.
    #[arg(long = "attribute", value_name = "COLUMN=FIELD")]
    pub attributes: Vec<tokscope::attribution::AttributeMapping>,
    #[command(flatten)]
    pub memory: MemoryArgs,
}

/// `--memory-limit` / `--spill-dir` of the commands that run SQL.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MemoryArgs {
    /// Most memory a query may hold: bytes, or with a unit (512M, 2G, 1.5GiB),
    /// or `none`. Sorts, aggregations and joins spill to --spill-dir beyond
    /// it; other operators fail with a clear error instead of the process
    /// being killed. Default: half the machine's memory.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory_limit: Option<usize>,
    /// Directory for the spill files of queries over the memory limit
    /// (default: the system's temporary directory).
    #[arg(long, value_name = "DIR")]
    pub spill_dir: Option<PathBuf>,
}

impl MemoryArgs {
    /// The engine's limit.
    pub fn limit(&self) -> engine::MemoryLimit {
        engine::MemoryLimit { bytes: self.memory_limit, spill_dir: self.spill_dir.clone() }
    }
}

impl UdfArgs {
    /// Loads the files named by the flags.
    pub fn config(&self) -> tokscope::Result<UdfConfig> {
        let mut config = UdfConfig::load(
            self.pricing.as_deref(),
            self.architectures.as_deref(),
            self.markers.eos_markers.as_deref(),
        )?;
        config.attributes = tokscope::attribution::AttributeMap::new(self.attributes.clone())?;
        Ok(config)
    }
}

/// `--engine`: where queries run.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EngineArgs {
    /// Run on the Ballista cluster whose scheduler is at this URL (`ballista://HOST:PORT`,
    /// see `tokscope scheduler`); default: this process.
    #[arg(long, value_name = "URL")]
    pub engine: Option<String>,
    /// With --engine: cancel a job, and fail, when its state and finished
    /// stages stay the same this many seconds (0: wait as long as it takes).
    /// Keep it above the scheduler's --executor-timeout, so a lost executor's
    /// tasks run again elsewhere first. Default: 1800.
    #[arg(long, value_name = "SECONDS", requires = "engine")]
    pub job_timeout: Option<u64>,
}

impl EngineArgs {
    /// The cluster the flags name, if any.
    pub fn remote(&self) -> Option<Remote> {
        self.engine.as_deref().map(|url| Remote::new(url).with_job_timeout(self.job_timeout))
    }
}

/// Where a result goes and in which format.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// Result format.
    #[arg(long, default_value_t = OutputFormat::Table, value_parser = choice::<OutputFormat>(OutputFormat::NAMES))]
    pub format: OutputFormat,
    /// Write the result to this file instead of stdout.
    #[arg(long)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub table: TableArgs,
}

/// `--quiet` of the long commands (replay, trace, mediate): progress is
/// drawn on stderr only when it is a terminal, and not at all with it.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct QuietArgs {
    /// No progress bar on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

impl QuietArgs {
    /// Whether the command asks for progress (shown on a terminal only).
    pub fn progress(&self) -> bool {
        !self.quiet
    }
}

/// How a terminal table is laid out.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct TableArgs {
    /// Table format: show every column and do not fit the terminal's width
    /// (by default a job's key columns, fitted to $COLUMNS or the terminal).
    #[arg(long)]
    pub wide: bool,
}

impl TableArgs {
    /// The layout for stdout, with `key_columns` shown unless `--wide`.
    pub fn layout(&self, key_columns: &[&str]) -> TableLayout {
        TableLayout::for_stdout(self.wide).with_key_columns(key_columns)
    }
}
