//! The scheduled run (`tokscope run --config job.toml`): what a platform
//! team puts in cron. Under the dataset's lease, it ingests the inputs the
//! manifest does not list yet, then runs the jobs and publishes the export.
//!
//! - Incremental and idempotent: inputs are ingested once (the manifest); a
//!   run with nothing new changes nothing in the dataset (it still refreshes
//!   the export).
//! - Atomic: data files become visible at one commit (`dataset::commit`),
//!   an export's `latest` moves last (`export::publish`).
//! - Exclusive: one writer at a time (`dataset::lease`); a run that finds the
//!   lease held waits up to `[lease] wait_s`, then fails with `LeaseBusy`.
//! - What happened is an [`Outcome`]; the binary maps it to an exit code
//!   (docs/OPERATIONS.md).

pub mod config;
pub mod listing;

use std::time::Instant;

use chrono::NaiveDate;
use serde::Serialize;

use crate::dataset::compact::{self, CompactSummary};
use crate::dataset::lease::Lease;
use crate::dataset::DatasetRoot;
use crate::derive::ContextBins;
use crate::engine::{self, UdfConfig};
use crate::error::Result;
use crate::export::publish::{self, ExportOptions, ExportSummary};
use crate::ingest::{self, IngestOptions, IngestSettings, IngestSummary};
use config::{IngestConfig, RunConfig};

/// How a run ended, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// New inputs were ingested without a rejected line; jobs and export done.
    Success,
    /// No new input: nothing ingested (the export was refreshed).
    NothingNew,
    /// New inputs were ingested, but some lines were rejected (see `rejects`).
    Partial,
}

/// Settings of one run besides the configuration file.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// List what would be ingested and exported; write nothing, take no lease.
    pub dry_run: bool,
    /// Show progress bars (only on a terminal).
    pub progress: bool,
    /// The export's date (default: today, UTC).
    pub date: Option<NaiveDate>,
}

/// What a run did.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// How it ended.
    pub outcome: Outcome,
    /// The dataset.
    pub dataset: String,
    /// Inputs ingested, or (dry run) to be ingested.
    pub ingested: Vec<String>,
    /// Inputs skipped because the manifest lists them.
    pub already_ingested: usize,
    /// The ingest (none in a dry run).
    pub ingest: Option<IngestSummary>,
    /// The compaction after the ingest (none when nothing new was ingested,
    /// `[compact] enabled = false`, or in a dry run).
    pub compact: Option<CompactSummary>,
    /// The export (none without `[export]` or in a dry run).
    pub export: Option<ExportSummary>,
    /// Whether nothing was written.
    pub dry_run: bool,
    /// Wall time, seconds.
    pub elapsed_s: f64,
    /// Where that time went.
    pub steps: RunSteps,
}

/// A run's wall time by step, seconds; with `other_s` they add up to the
/// run's `elapsed_s`.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct RunSteps {
    /// Reading and writing the new inputs (with the commit).
    pub ingest_s: f64,
    /// Compacting what the ingest added to.
    pub compact_s: f64,
    /// Opening the dataset for queries, the export's jobs and publishing.
    pub export_s: f64,
    /// The rest: listing the sources against the manifest, the lease.
    pub other_s: f64,
}

impl RunSteps {
    /// The steps as `ingest 8.1s (66%), compact ...`, the ones that ran.
    pub fn describe(&self, elapsed_s: f64) -> String {
        let total = elapsed_s.max(f64::MIN_POSITIVE);
        [("ingest", self.ingest_s), ("compact", self.compact_s), ("export", self.export_s), ("other", self.other_s)]
            .iter()
            .filter(|(_, s)| *s > 0.0)
            .map(|(name, s)| format!("{name} {s:.1}s ({:.0}%)", 100.0 * s / total))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl IngestConfig {
    /// These settings, typed (the defaults of `tokscope ingest` where absent).
    pub fn settings(&self) -> Result<IngestSettings> {
        let d = IngestSettings::default();
        Ok(IngestSettings {
            format: self.format.as_deref().map(str::parse).transpose()?,
            bins: self.bins.as_deref().map(ContextBins::parse).transpose()?.unwrap_or(d.bins),
            eos_markers: self.eos_markers.clone(),
            model: self.model.clone(),
            base_time_micros: self.base_time.as_deref().map(ingest::parse_base_time).transpose()?.unwrap_or(0),
            redact: named(&self.redact)?.unwrap_or(d.redact),
            max_line_bytes: self.max_line_bytes,
            time_unit: named(&self.time_unit)?.unwrap_or(d.time_unit),
            variants: self.variants.clone(),
            compression: self
                .compression
                .as_deref()
                .map(crate::dataset::writer::parse_compression)
                .transpose()?
                .unwrap_or(d.compression),
            memory_limit: self
                .memory_limit
                .as_deref()
                .map(crate::resources::MemoryBudget::parse)
                .transpose()?
                .unwrap_or(d.memory_limit),
            io_concurrency: match self.io_concurrency {
                Some(0) => return Err(config_err!("[ingest] io_concurrency must be at least 1")),
                Some(n) => n,
                None => d.io_concurrency,
            },
        })
    }
}

/// A named setting (`redact = "hash"`), parsed by its type.
fn named<T: std::str::FromStr<Err = String>>(name: &Option<String>) -> Result<Option<T>> {
    name.as_deref().map(str::parse).transpose().map_err(|e: String| config_err!("{e}"))
}

/// Runs `config` once.
pub fn run(config: &RunConfig, options: &RunOptions) -> Result<RunReport> {
    let started = Instant::now();
    let rt = crate::store::io_runtime()?;
    let store = config.store_options();
    let dataset = DatasetRoot::parse_with(&config.dataset, &store)?;
    let settings = config.ingest.settings()?;
    let ingest_options = IngestOptions {
        reader: settings.reader()?,
        progress: options.progress,
        force: false,
        store: store.clone(),
        lease: config.lease_options(),
        compression: settings.compression,
        memory_limit: settings.memory_limit,
        io_concurrency: settings.io_concurrency,
    };
    let listing = match config.ingest.list_after_last {
        Some(true) => Some(listing::ListingState::load(&dataset, &rt)?),
        _ => None,
    };
    let every = match config.ingest.full_listing_every {
        Some(0) => return Err(config_err!("[ingest] full_listing_every must be at least 1")),
        n => n.unwrap_or(listing::DEFAULT_FULL_LISTING_EVERY),
    };
    let starts = listing.as_ref().map(|l| l.starts(every)).unwrap_or_default();
    let (objects, listed) = ingest::resolve_after(&config.sources, &ingest_options, &starts, &rt)?;
    if options.dry_run {
        let plan = ingest::plan(&dataset, objects, &ingest_options, &rt)?;
        return Ok(RunReport {
            outcome: if plan.todo.is_empty() { Outcome::NothingNew } else { Outcome::Success },
            dataset: dataset.display(),
            ingested: plan.todo.into_iter().map(|o| o.location).collect(),
            already_ingested: plan.skipped.len(),
            ingest: None,
            compact: None,
            export: None,
            dry_run: true,
            elapsed_s: started.elapsed().as_secs_f64(),
            steps: RunSteps::default(),
        });
    }
    let run_id = crate::dataset::new_run_id();
    let mut lease = Lease::acquire(&dataset, &run_id, ingest_options.lease, &rt)?;
    let mut steps = RunSteps::default();
    let step = Instant::now();
    let summary = ingest::ingest_into(&dataset, objects, &ingest_options, &run_id, &rt)?;
    if let Some(listing) = &listing {
        listing.after_run(&starts, listed).save(&dataset, &rt)?;
    }
    steps.ingest_s = step.elapsed().as_secs_f64();
    lease.renew()?;
    // Compact what this run added to before the export reads it.
    let compact = match config.compact_options()? {
        Some(opts) if !summary.files.is_empty() => {
            let step = Instant::now();
            let done = compact::compact_held(&dataset, &run_id, &opts, &rt)?;
            steps.compact_s = step.elapsed().as_secs_f64();
            lease.renew()?;
            Some(done)
        }
        _ => None,
    };
    let step = Instant::now();
    let export = match &config.export {
        Some(export) => {
            let udf = UdfConfig::load(
                config.pricing.as_deref(),
                config.architectures.as_deref(),
                config.ingest.eos_markers.as_deref(),
            )?;
            let options = ExportOptions {
                to: export.to.clone(),
                date: options.date.unwrap_or_else(|| chrono::Utc::now().date_naive()),
                jobs: export.jobs.clone(),
                priced: config.pricing.is_some(),
                keep: export.keep,
                trend_days: export.trend_days.unwrap_or(30),
                dataset: dataset.display(),
                store,
                progress: options.progress,
                jobs_at_once: match export.jobs_at_once {
                    Some(0) => return Err(config_err!("[export] jobs_at_once must be at least 1")),
                    n => n.unwrap_or(publish::DEFAULT_JOBS_AT_ONCE),
                },
            };
            let exported = engine::runtime()?.block_on(async {
                let ctx = engine::open(&dataset, &udf, config.remote().as_ref(), &Default::default()).await?;
                publish::export(&ctx, &options).await
            })?;
            Some(exported)
        }
        None => None,
    };
    if export.is_some() {
        steps.export_s = step.elapsed().as_secs_f64();
    }
    drop(lease);
    let elapsed_s = started.elapsed().as_secs_f64();
    let outcome = if summary.files.is_empty() {
        Outcome::NothingNew
    } else if summary.totals.counts.lines_rejected > 0 {
        Outcome::Partial
    } else {
        Outcome::Success
    };
    Ok(RunReport {
        outcome,
        dataset: dataset.display(),
        ingested: summary.files.iter().map(|f| f.location.clone()).collect(),
        already_ingested: summary.files_skipped.len(),
        ingest: Some(summary),
        compact,
        export,
        dry_run: false,
        elapsed_s,
        steps: RunSteps { other_s: (elapsed_s - steps.ingest_s - steps.compact_s - steps.export_s).max(0.0), ..steps },
    })
}

#[cfg(test)]
mod tests {
    use super::RunSteps;

    #[test]
    fn steps_are_described_with_their_share_of_the_run() {
        let steps = RunSteps { ingest_s: 6.0, compact_s: 0.0, export_s: 3.5, other_s: 0.5 };
        assert_eq!(steps.describe(10.0), "ingest 6.0s (60%), export 3.5s (35%), other 0.5s (5%)");
        assert_eq!(RunSteps::default().describe(0.0), "");
    }
}
