//! `tokscope export`: run the dashboard's jobs over a dataset and publish
//! `DEST/<date>/` (the dashboard `index.html` and each job's result as
//! `<job>.csv`, `<job>.json`, `<job>.parquet`), then `DEST/latest/`, and
//! prune old dated exports.
//!
//! Readers never see a half-written export. Locally, an export is written in
//! a hidden directory and renamed into place, and `latest` is a symbolic link
//! replaced atomically (rename of a new link over the old one). On an object
//! store every object is written whole by one put; the dated objects are put
//! first, then `latest/`, with `index.html` last in each.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::Float64Array;
use chrono::NaiveDate;
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::Serialize;

use super::dashboard::{self, DashboardInput};
use super::{write_batches, OutputFormat, TableLayout};
use crate::error::{Error, Result};
use crate::jobs::{self, Job};
use crate::progress::Progress;
use crate::store::{self, StoreOptions};

/// The jobs an export runs by default, in page order; each runs only when
/// its tables hold rows, `cost` only with prices and `ab` only when the
/// requests name at least two experiment arms (`variant`).
pub const DEFAULT_JOBS: &[&str] = &[
    "report",
    "daily",
    "eos",
    "latency",
    "cost",
    "kv_cache",
    "jitter",
    "confidence",
    "eos_logprob",
    "replay",
    "mediation",
    "mediation_heatmap",
    "mediation_layers",
    "throughput",
    "load_summary",
    "gateway_engine",
    "ab",
    "head_waste",
    "moe_load",
    "quality",
    "composite",
    "drift",
];

/// The most windows the exported `throughput` table spans: its window is the
/// shortest of [`THROUGHPUT_WINDOWS`] that covers the requests' time range in
/// at most this many, so a month of logs draws hours, a 10-minute load test seconds.
const THROUGHPUT_MAX_WINDOWS: f64 = 120.0;

/// Window lengths (seconds) the export chooses the `throughput` window from.
const THROUGHPUT_WINDOWS: [u64; 14] = [1, 5, 10, 15, 30, 60, 300, 600, 900, 1800, 3600, 10_800, 21_600, 86_400];

/// The result formats written for every job.
const FORMATS: [(OutputFormat, &str); 3] =
    [(OutputFormat::Csv, "csv"), (OutputFormat::Json, "json"), (OutputFormat::Parquet, "parquet")];

/// Settings of one export.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// Where exports go: a local directory or an object-store URL.
    pub to: String,
    /// The export's date: it is published as `<to>/<date>/`.
    pub date: NaiveDate,
    /// Jobs to run; `None`: [`DEFAULT_JOBS`] whose tables hold rows.
    pub jobs: Option<Vec<String>>,
    /// Whether prices were given (the `cost` job runs only then by default).
    pub priced: bool,
    /// Dated exports to keep (older ones are removed); `None` keeps all.
    pub keep: Option<usize>,
    /// Days the dashboard's trend charts show.
    pub trend_days: u32,
    /// The dataset's name, printed on the page.
    pub dataset: String,
    /// Object-store client settings (retries, timeouts).
    pub store: StoreOptions,
    /// Show a progress bar over the jobs (only on a terminal).
    pub progress: bool,
}

/// What an export wrote.
#[derive(Debug, Clone, Serialize)]
pub struct ExportSummary {
    /// The dated export, `<to>/<date>`.
    pub location: String,
    /// `<to>/latest`.
    pub latest: String,
    /// Jobs run, in order.
    pub jobs: Vec<String>,
    /// Files in the export.
    pub files: usize,
    /// Size of `index.html` in bytes.
    pub page_bytes: usize,
    /// Dated exports removed by retention.
    pub removed: Vec<String>,
    /// Wall time, seconds.
    pub elapsed_s: f64,
    /// Of that, the time the jobs' queries took (the rest is the export's
    /// own: writing CSV/JSON/Parquet, charts, the page, publishing).
    pub jobs_s: f64,
}

/// Runs the jobs on `ctx` (a session with the dataset registered) and
/// publishes the export.
pub async fn export(ctx: &SessionContext, options: &ExportOptions) -> Result<ExportSummary> {
    let started = Instant::now();
    let jobs = choose_jobs(ctx, options).await?;
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut input =
        DashboardInput::new("LLM serving: cost and quality", &options.dataset, options.date.to_string(), now());
    input.trend_days = options.trend_days;
    let mut jobs_s = 0.0;
    let progress = Progress::items(options.progress, jobs.len() as u64, "jobs");
    for job in &jobs {
        progress.set_message(job.name);
        let job_started = Instant::now();
        let params = match job.name {
            "throughput" => vec![("window".to_string(), throughput_window(ctx).await?)],
            _ => Vec::new(),
        };
        let batches = jobs::run_job_with(ctx, job, &params).await?;
        jobs_s += job_started.elapsed().as_secs_f64();
        progress.inc(1);
        for (format, extension) in FORMATS {
            // A result without batches has no schema to write a Parquet file with.
            if format == OutputFormat::Parquet && batches.is_empty() {
                continue;
            }
            let mut bytes = Vec::new();
            write_batches(&batches, format, &mut bytes, &TableLayout::default())?;
            files.push((format!("{}.{extension}", job.name), bytes));
        }
        input = input.with_table(job.name, batches);
    }
    progress.set_message("publishing");
    let page = dashboard::render(&input)?;
    let page_bytes = page.len();
    // index.html last: a reader that finds it finds everything it links to.
    files.push(("index.html".to_string(), page.into_bytes()));
    let target = Destination::parse(&options.to, &options.store)?;
    let date = options.date.to_string();
    target.publish(&date, &files).await?;
    let removed = match options.keep {
        Some(keep) => target.prune(keep.max(1)).await?,
        None => Vec::new(),
    };
    Ok(ExportSummary {
        location: target.display(&date),
        latest: target.display(LATEST),
        jobs: jobs.iter().map(|j| j.name.to_string()).collect(),
        files: files.len(),
        page_bytes,
        removed,
        elapsed_s: started.elapsed().as_secs_f64(),
        jobs_s,
    })
}

fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string()
}

/// The jobs to run: the ones asked for, or the defaults whose tables hold rows.
async fn choose_jobs(ctx: &SessionContext, options: &ExportOptions) -> Result<Vec<&'static Job>> {
    if let Some(names) = &options.jobs {
        return names.iter().map(|n| jobs::job(n)).collect();
    }
    let mut chosen = Vec::new();
    for name in DEFAULT_JOBS {
        let job = jobs::job(name)?;
        if job.name == "cost" && !options.priced {
            continue;
        }
        // `ab` compares two arms; with fewer there is nothing to compare.
        if job.name == "ab" && count(ctx, "SELECT DISTINCT variant FROM requests WHERE variant IS NOT NULL").await < 2 {
            continue;
        }
        let mut present = true;
        for table in job.tables {
            present &= has_rows(ctx, table).await;
        }
        if present {
            chosen.push(job);
        }
    }
    Ok(chosen)
}

/// Whether `table` is registered and holds at least one row.
async fn has_rows(ctx: &SessionContext, table: &str) -> bool {
    count(ctx, &format!("SELECT 1 FROM {table} LIMIT 1")).await > 0
}

/// Rows `sql` returns; 0 when it fails (e.g. a table or column the dataset lacks).
async fn count(ctx: &SessionContext, sql: &str) -> usize {
    let Ok(df) = ctx.sql(sql).await else { return 0 };
    df.collect().await.map(|b| b.iter().map(|b| b.num_rows()).sum()).unwrap_or(0)
}

/// The `throughput` window for this dataset: the shortest of
/// [`THROUGHPUT_WINDOWS`] covering the requests' arrivals in at most
/// [`THROUGHPUT_MAX_WINDOWS`] windows, as a `window` parameter (`"300s"`).
async fn throughput_window(ctx: &SessionContext) -> Result<String> {
    let span_sql = "SELECT CAST(CAST(max(ts) AS BIGINT) - CAST(min(ts) AS BIGINT) AS DOUBLE) AS span FROM \
                    (SELECT arrow_cast(ts, 'Timestamp(Millisecond, None)') AS ts FROM requests)";
    let batches = ctx.sql(span_sql).await?.collect().await?;
    let span_ms = batches
        .first()
        .filter(|b| b.num_rows() > 0)
        .and_then(|b| b.column(0).as_any().downcast_ref::<Float64Array>().map(|a| a.value(0)))
        .unwrap_or(0.0);
    let span_s = span_ms / 1000.0;
    let window = THROUGHPUT_WINDOWS
        .into_iter()
        .find(|w| span_s / *w as f64 <= THROUGHPUT_MAX_WINDOWS)
        .unwrap_or(THROUGHPUT_WINDOWS[THROUGHPUT_WINDOWS.len() - 1]);
    Ok(format!("{window}s"))
}

/// The name of the always-current export.
const LATEST: &str = "latest";

/// Where exports are published.
enum Destination {
    Local(PathBuf),
    Remote { url: String, store: Arc<dyn ObjectStore>, prefix: ObjectPath },
}

impl Destination {
    fn parse(to: &str, options: &StoreOptions) -> Result<Self> {
        if let Some(p) = to.strip_prefix("file://") {
            return Ok(Destination::Local(PathBuf::from(p)));
        }
        if !store::is_url(to) {
            return Ok(Destination::Local(PathBuf::from(to)));
        }
        let url = store::parse_url(to.trim_end_matches('/'))?;
        let store = store::store_for(&url, options)?;
        let prefix = store::object_path(&url)?;
        Ok(Destination::Remote { url: url.to_string().trim_end_matches('/').to_string(), store, prefix })
    }

    fn display(&self, name: &str) -> String {
        match self {
            Destination::Local(p) => p.join(name).display().to_string(),
            Destination::Remote { url, .. } => format!("{url}/{name}"),
        }
    }

    /// Writes `files` as `<date>/` and then as `latest/`.
    async fn publish(&self, date: &str, files: &[(String, Vec<u8>)]) -> Result<()> {
        match self {
            Destination::Local(root) => publish_local(root, date, files),
            Destination::Remote { store, prefix, .. } => {
                for folder in [date, LATEST] {
                    for (name, bytes) in files {
                        let path = child(prefix, &[folder, name]);
                        store.put(&path, PutPayload::from(bytes.clone())).await?;
                    }
                }
                Ok(())
            }
        }
    }

    /// Removes all but the newest `keep` dated exports; returns their names.
    async fn prune(&self, keep: usize) -> Result<Vec<String>> {
        let mut dates = self.dated_exports().await?;
        dates.sort();
        let excess = dates.len().saturating_sub(keep);
        let removed: Vec<String> = dates.into_iter().take(excess).collect();
        for date in &removed {
            match self {
                Destination::Local(root) => {
                    let dir = root.join(date);
                    std::fs::remove_dir_all(&dir).map_err(|e| Error::io(dir.display(), e))?;
                }
                Destination::Remote { store, prefix, .. } => {
                    let folder = child(prefix, &[date]);
                    let objects: Vec<ObjectPath> =
                        store.list(Some(&folder)).map_ok(|m| m.location).try_collect().await?;
                    for object in objects {
                        store.delete(&object).await?;
                    }
                }
            }
        }
        Ok(removed)
    }

    /// The names of the dated exports present (`YYYY-MM-DD`).
    async fn dated_exports(&self) -> Result<Vec<String>> {
        let is_date = |name: &str| NaiveDate::parse_from_str(name, "%Y-%m-%d").is_ok();
        match self {
            Destination::Local(root) => {
                let entries = match std::fs::read_dir(root) {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                    Err(e) => return Err(Error::io(root.display(), e)),
                };
                Ok(entries
                    .filter_map(|e| e.ok())
                    .filter(|e| e.path().is_dir())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| is_date(n))
                    .collect())
            }
            Destination::Remote { store, prefix, .. } => {
                let listing = store.list_with_delimiter(Some(prefix)).await?;
                Ok(listing
                    .common_prefixes
                    .iter()
                    .filter_map(|p| p.filename().map(str::to_string))
                    .filter(|n| is_date(n))
                    .collect())
            }
        }
    }
}

fn child(prefix: &ObjectPath, parts: &[&str]) -> ObjectPath {
    parts.iter().fold(prefix.clone(), |p, part| p.join(*part))
}

/// Writes `files` into a hidden directory, renames it to `<root>/<date>`
/// (moving an older export of the same date aside first), then points the
/// `latest` link at it.
fn publish_local(root: &Path, date: &str, files: &[(String, Vec<u8>)]) -> Result<()> {
    std::fs::create_dir_all(root).map_err(|e| Error::io(root.display(), e))?;
    let pid = std::process::id();
    let staged = root.join(format!(".{date}.new-{pid}"));
    if staged.exists() {
        std::fs::remove_dir_all(&staged).map_err(|e| Error::io(staged.display(), e))?;
    }
    std::fs::create_dir(&staged).map_err(|e| Error::io(staged.display(), e))?;
    for (name, bytes) in files {
        let path = staged.join(name);
        std::fs::write(&path, bytes).map_err(|e| Error::io(path.display(), e))?;
    }
    let dated = root.join(date);
    let old = root.join(format!(".{date}.old-{pid}"));
    let replaced = dated.exists();
    if replaced {
        std::fs::rename(&dated, &old).map_err(|e| Error::io(dated.display(), e))?;
    }
    std::fs::rename(&staged, &dated).map_err(|e| Error::io(dated.display(), e))?;
    if replaced {
        std::fs::remove_dir_all(&old).map_err(|e| Error::io(old.display(), e))?;
    }
    // A new link under a temporary name, renamed over `latest`: readers see
    // the old export or the new one, never a missing or partial one.
    let link = root.join(format!(".{LATEST}.new-{pid}"));
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(date, &link).map_err(|e| Error::io(link.display(), e))?;
    let latest = root.join(LATEST);
    if latest.is_dir() && !latest.is_symlink() {
        // A `latest` directory left by a copy (e.g. a sync from an object store): replace it.
        std::fs::remove_dir_all(&latest).map_err(|e| Error::io(latest.display(), e))?;
    }
    std::fs::rename(&link, &latest).map_err(|e| Error::io(latest.display(), e))
}
