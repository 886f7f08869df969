//! The scheduled run (`tokscope run --config job.toml`): what a platform
//! team puts in cron. Under the dataset's lease, it ingests the inputs the
//! manifest does not list yet, evaluates the budgets and alerts, then runs
//! the jobs and publishes the export, and hands the alerts it fired to
//! `on_alert` ([`alerts`]).
//!
//! - Incremental and idempotent: inputs are ingested once (the manifest); a
//!   run with nothing new changes nothing in the dataset (it still refreshes
//!   the export).
//! - Atomic: data files become visible at one commit (`dataset::commit`),
//!   an export's `latest` moves last (`export::publish`).
//! - Exclusive: one writer at a time (`dataset::lease`); a run that finds the
//!   lease held waits up to `[lease] wait_s`, then fails with `LeaseBusy`.
//! - Once per breach: an alert is recorded pending before the export and
//!   notified after `on_alert`, in the dataset's `_alerts.json`
//!   ([`alerts::state`]).
//! - What happened is an [`Outcome`] (and the alerts fired); the binary maps
//!   it to an exit code (docs/OPERATIONS.md).

pub mod alerts;
pub mod config;
pub mod listing;

use std::time::{Duration, Instant};

use chrono::{NaiveDate, SecondsFormat};
use serde::Serialize;

use crate::dataset::compact::{self, CompactSummary};
use crate::dataset::lease::Lease;
use crate::dataset::DatasetRoot;
use crate::derive::ContextBins;
use crate::engine::{self, UdfConfig};
use crate::error::Result;
use crate::export::publish::{self, ExportOptions, ExportSummary};
use crate::ingest::{self, IngestOptions, IngestSettings, IngestSummary};
use alerts::notify::{self, Notification};
use alerts::state::AlertState;
use alerts::Alert;
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
    /// Budgets and alerts (none without `[[budgets]]` or `[[alerts]]`, or in a dry run).
    pub alerts: Option<AlertsReport>,
    /// Whether nothing was written.
    pub dry_run: bool,
    /// Wall time, seconds.
    pub elapsed_s: f64,
    /// Where that time went.
    pub steps: RunSteps,
}

/// What a run's budgets and alerts found.
#[derive(Debug, Clone, Serialize)]
pub struct AlertsReport {
    /// Every breach active now (each with `fired`: whether this run sent it).
    pub active: Vec<Alert>,
    /// How many this run fired (new, or left pending by an earlier run).
    pub fired: usize,
    /// The `on_alert` call, when there was one.
    pub on_alert: Option<Notification>,
}

/// The export's file of the alerts active now.
pub const ALERTS_FILE: &str = "alerts.json";

/// `{"dataset", "date", "alerts": [...]}`: `alerts.json` in the export, and
/// what `on_alert` reads on stdin (the fired alerts only).
fn alerts_json<A: Serialize>(dataset: &DatasetRoot, date: NaiveDate, alerts: &[A]) -> Result<Vec<u8>> {
    let document = serde_json::json!({ "dataset": dataset.display(), "date": date.to_string(), "alerts": alerts });
    serde_json::to_vec_pretty(&document)
        .map_err(|source| crate::error::Error::Json { path: ALERTS_FILE.into(), source })
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
    /// Evaluating budgets and alerts, their state, `on_alert`.
    pub alerts_s: f64,
    /// The rest: listing the sources against the manifest, the lease.
    pub other_s: f64,
}

impl RunSteps {
    /// The steps as `ingest 8.1s (66%), compact ...`, the ones that ran.
    pub fn describe(&self, elapsed_s: f64) -> String {
        let total = elapsed_s.max(f64::MIN_POSITIVE);
        [
            ("ingest", self.ingest_s),
            ("compact", self.compact_s),
            ("export", self.export_s),
            ("alerts", self.alerts_s),
            ("other", self.other_s),
        ]
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
            attributes: Default::default(),
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
    let mut settings = config.ingest.settings()?;
    settings.attributes = config.attributes()?;
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
            alerts: None,
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
    let date = options.date.unwrap_or_else(|| chrono::Utc::now().date_naive());
    let step = Instant::now();
    let (export, alerts) = if config.export.is_some() || config.alerting() {
        let mut udf = UdfConfig::load(
            config.pricing.as_deref(),
            config.architectures.as_deref(),
            config.ingest.eos_markers.as_deref(),
        )?;
        udf.attributes = config.attributes()?;
        let engine_rt = engine::runtime()?;
        let ctx = engine_rt.block_on(engine::open(&dataset, &udf, config.remote().as_ref(), &Default::default()))?;
        // Breaches are recorded (pending) before the export publishes them,
        // and notified after: a run killed between the two leaves them for
        // the next run to send (`alerts::state`).
        let mut evaluated = None;
        if config.alerting() {
            let alerts_step = Instant::now();
            let mut active = engine_rt.block_on(alerts::evaluate(&ctx, &config.alerts, &config.budgets, date))?;
            let mut state = AlertState::load(&dataset, &rt)?;
            let fired = state.observe(&mut active, &chrono::Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true));
            state.save(&dataset, &rt)?;
            steps.alerts_s += alerts_step.elapsed().as_secs_f64();
            evaluated = Some((active, state, fired));
        }
        let export = match &config.export {
            Some(export) => {
                let (banner, extra_files) = match &evaluated {
                    Some((active, ..)) => (
                        active.iter().map(|a| a.message.clone()).collect(),
                        vec![(ALERTS_FILE.to_string(), alerts_json(&dataset, date, active)?)],
                    ),
                    None => (Vec::new(), Vec::new()),
                };
                let options = ExportOptions {
                    to: export.to.clone(),
                    date,
                    jobs: export.jobs.clone(),
                    keep: export.keep,
                    trend_days: export.trend_days.unwrap_or(30),
                    dataset: dataset.display(),
                    store,
                    progress: options.progress,
                    jobs_at_once: match export.jobs_at_once {
                        Some(0) => return Err(config_err!("[export] jobs_at_once must be at least 1")),
                        n => n.unwrap_or(publish::DEFAULT_JOBS_AT_ONCE),
                    },
                    banner,
                    extra_files,
                };
                Some(engine_rt.block_on(publish::export(&ctx, &options))?)
            }
            None => None,
        };
        let alerts = match evaluated {
            Some((active, mut state, fired)) => {
                let alerts_step = Instant::now();
                let on_alert = match (&config.on_alert, fired.is_empty()) {
                    (Some(command), false) => {
                        let sent: Vec<&Alert> = active.iter().filter(|a| a.fired).collect();
                        let payload = alerts_json(&dataset, date, &sent)?;
                        let timeout = Duration::from_secs(config.on_alert_timeout_s.unwrap_or(60));
                        Some(notify::run(command, &config.base_dir, payload, fired.len(), timeout))
                    }
                    _ => None,
                };
                // Without `on_alert`, the export and the exit code are the notification.
                if on_alert.as_ref().is_none_or(|n| n.ok) {
                    state.notified(&fired);
                }
                lease.renew()?;
                state.save(&dataset, &rt)?;
                steps.alerts_s += alerts_step.elapsed().as_secs_f64();
                Some(AlertsReport { fired: fired.len(), active, on_alert })
            }
            None => None,
        };
        (export, alerts)
    } else {
        (None, None)
    };
    if export.is_some() || alerts.is_some() {
        steps.export_s = step.elapsed().as_secs_f64() - steps.alerts_s;
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
        alerts,
        dry_run: false,
        elapsed_s,
        steps: RunSteps {
            other_s: (elapsed_s - steps.ingest_s - steps.compact_s - steps.export_s - steps.alerts_s).max(0.0),
            ..steps
        },
    })
}

#[cfg(test)]
mod tests {
    use super::RunSteps;

    #[test]
    fn steps_are_described_with_their_share_of_the_run() {
        let steps = RunSteps { ingest_s: 6.0, compact_s: 0.0, export_s: 3.5, alerts_s: 0.0, other_s: 0.5 };
        assert_eq!(steps.describe(10.0), "ingest 6.0s (60%), export 3.5s (35%), other 0.5s (5%)");
        assert_eq!(RunSteps::default().describe(0.0), "");
    }
}
