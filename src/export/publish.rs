//! `tokscope export`: run the dashboard's jobs over a dataset and publish
//! `DEST/<date>/` (the dashboard `index.html` and each job's result as
//! `<name>.csv`, `<name>.json`, `<name>.parquet`: a job's name, or a named
//! run of a job with parameters, `jobs::DASHBOARD`), then `DEST/latest/`, and
//! prune old dated exports.
//!
//! Readers never see a half-written export, nor two exports mixed, and a
//! process killed at any point leaves the last complete export in place.
//! Locally, each export is written whole into its own hidden directory
//! (`.exports/<date>-<n>`), then `<date>` and `latest` are symbolic links
//! moved onto it atomically (a new link renamed over the old one); older
//! generations are removed once no link names them. On an object store there
//! is no atomic rename of many objects, so `latest` is one object: the dated
//! objects are put first (`index.html` last), then `latest.json` (the date
//! and the file names: the pointer readers follow into `<date>/`), then the
//! page as `latest/index.html`. Retention never removes the export `latest`
//! names.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::Float64Array;
use arrow::record_batch::RecordBatch;
use chrono::NaiveDate;
use datafusion::prelude::SessionContext;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::Serialize;

use super::dashboard::{self, DashboardInput};
use super::{write_batches, OutputFormat, TableLayout};
use crate::engine;
use crate::error::{Error, Result};
use crate::jobs::{self, DashboardRun};
use crate::progress::Progress;
use crate::store::{self, StoreOptions};

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
    /// Jobs (or [`jobs::DASHBOARD`] runs) to run, by name; `None`: the
    /// dashboard's runs whose tables hold rows, `ab` only
    /// when the requests name at least two experiment arms (`variant`),
    /// and a run grouped by a column only when some request has a value in it.
    pub jobs: Option<Vec<String>>,
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
    /// Jobs whose queries run at once ([`DEFAULT_JOBS_AT_ONCE`]; 1 runs them in turn).
    pub jobs_at_once: usize,
    /// Lines shown as a banner at the top of the page (a scheduled run's alerts).
    pub banner: Vec<String>,
    /// Files published with the jobs' results, by name (a scheduled run's `alerts.json`).
    pub extra_files: Vec<(String, Vec<u8>)>,
}

/// Jobs whose queries run at once by default: the jobs read the dataset and
/// nothing of each other, so while one is in a stage that leaves cores idle
/// (a final merge, a sort, the next plan) another uses them. More at once
/// add memory (each holds its hash tables, within the session's budget) for
/// little more overlap.
pub const DEFAULT_JOBS_AT_ONCE: usize = 4;

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
    /// Of that, the wall time of the jobs' queries, from the first one's
    /// start to the last one's end (the rest is the export's own: choosing
    /// the jobs, writing CSV/JSON/Parquet, charts, the page, publishing).
    pub jobs_s: f64,
    /// Jobs whose queries ran at once.
    pub jobs_at_once: usize,
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
    input.alerts = options.banner.clone();
    let progress = Progress::items(options.progress, jobs.len() as u64, "jobs");
    let queries_started = Instant::now();
    // In the jobs' order whatever order they finish in (`buffered`).
    let results: Vec<Vec<RecordBatch>> = futures::stream::iter(jobs.iter().map(|run| {
        let progress = &progress;
        async move {
            let job = run.job()?;
            let mut params = run.params();
            if job.name == "throughput" {
                params.push(("window".to_string(), throughput_window(ctx).await?));
            }
            let batches = jobs::run_job_with(ctx, job, &params).await?;
            progress.set_message(run.name);
            progress.inc(1);
            Ok::<_, Error>(batches)
        }
    }))
    .buffered(options.jobs_at_once.max(1))
    .try_collect()
    .await?;
    let jobs_s = queries_started.elapsed().as_secs_f64();
    for (job, batches) in jobs.iter().zip(results) {
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
    files.extend(options.extra_files.iter().cloned());
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
        jobs_at_once: options.jobs_at_once.max(1),
    })
}

fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string()
}

/// The jobs to run: the ones asked for, or the defaults whose tables hold rows.
async fn choose_jobs(ctx: &SessionContext, options: &ExportOptions) -> Result<Vec<DashboardRun>> {
    if let Some(names) = &options.jobs {
        return names.iter().map(|n| DashboardRun::named(n)).collect();
    }
    let mut chosen = Vec::new();
    for run in jobs::DASHBOARD {
        let job = run.job()?;
        // `ab` compares two arms; with fewer there is nothing to compare.
        if job.name == "ab" && count(ctx, "SELECT DISTINCT variant FROM requests WHERE variant IS NOT NULL").await? < 2
        {
            continue;
        }
        let mut present = true;
        for table in job.tables {
            present &= has_rows(ctx, table.name).await?;
        }
        // A run grouped by a column no request has a value in would be one null group.
        if let (true, Some(sql)) = (present, run.grouping_check_sql()?) {
            present = count(ctx, &sql).await? > 0;
        }
        if present {
            chosen.push(*run);
        }
    }
    Ok(chosen)
}

/// Whether `table` is registered and holds at least one row.
async fn has_rows(ctx: &SessionContext, table: &str) -> Result<bool> {
    Ok(count(ctx, &format!("SELECT 1 FROM {table} LIMIT 1")).await? > 0)
}

/// Rows `sql` returns; 0 when it cannot be planned (a table or column the
/// dataset lacks). A query that fails while it runs (on a cluster: a lost
/// node) fails the export, which must not quietly leave the job out.
async fn count(ctx: &SessionContext, sql: &str) -> Result<usize> {
    let Ok(df) = ctx.sql(sql).await else { return Ok(0) };
    let plan = df.create_physical_plan().await?;
    Ok(engine::run_plan(ctx, plan).await?.iter().map(|b| b.num_rows()).sum())
}

/// The `throughput` window for this dataset: the shortest of
/// [`THROUGHPUT_WINDOWS`] covering the requests' arrivals in at most
/// [`THROUGHPUT_MAX_WINDOWS`] windows, as a `window` parameter (`"300s"`).
async fn throughput_window(ctx: &SessionContext) -> Result<String> {
    let span_sql = "SELECT CAST(CAST(max(ts) AS BIGINT) - CAST(min(ts) AS BIGINT) AS DOUBLE) AS span FROM \
                    (SELECT arrow_cast(ts, 'Timestamp(Millisecond, None)') AS ts FROM requests)";
    let batches = engine::run_sql(ctx, span_sql, false).await?;
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

/// On an object store: the pointer to the current export (`{"date", "files"}`).
const LATEST_POINTER: &str = "latest.json";

/// Locally: where each export's files are, one directory per export.
const GENERATIONS: &str = ".exports";

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

    /// Writes `files` as `<date>/` and then makes it the latest export.
    async fn publish(&self, date: &str, files: &[(String, Vec<u8>)]) -> Result<()> {
        match self {
            Destination::Local(root) => publish_local(root, date, files),
            Destination::Remote { store, prefix, .. } => {
                for (name, bytes) in files {
                    store.put(&child(prefix, &[date, name]), PutPayload::from(bytes.clone())).await?;
                }
                let names: Vec<&str> = files.iter().map(|(name, _)| name.as_str()).collect();
                let pointer = serde_json::json!({ "date": date, "files": names });
                store
                    .put(&child(prefix, &[LATEST_POINTER]), PutPayload::from(pointer.to_string().into_bytes()))
                    .await?;
                let page = files.iter().find(|(name, _)| name == "index.html");
                if let Some((name, bytes)) = page {
                    store.put(&child(prefix, &[LATEST, name]), PutPayload::from(bytes.clone())).await?;
                }
                // Copies of results an older tokscope kept in `latest/`: a reader
                // must not mix them with the current page.
                let folder = child(prefix, &[LATEST]);
                let stale: Vec<ObjectPath> = store
                    .list(Some(&folder))
                    .map_ok(|m| m.location)
                    .try_filter(|p| futures::future::ready(p.filename() != Some("index.html")))
                    .try_collect()
                    .await?;
                for object in stale {
                    store.delete(&object).await?;
                }
                Ok(())
            }
        }
    }

    /// The date of the export `latest` names, if any.
    async fn latest_date(&self) -> Result<Option<String>> {
        match self {
            Destination::Local(root) => Ok(std::fs::read_link(root.join(LATEST))
                .ok()
                .and_then(|target| target.file_name().map(|n| n.to_string_lossy().into_owned()))
                .map(|generation| generation_date(&generation).to_string())),
            Destination::Remote { store, prefix, .. } => {
                let pointer = match store.get(&child(prefix, &[LATEST_POINTER])).await {
                    Ok(found) => found.bytes().await?,
                    Err(object_store::Error::NotFound { .. }) => return Ok(None),
                    Err(e) => return Err(e.into()),
                };
                let value: serde_json::Value = serde_json::from_slice(&pointer)
                    .map_err(|source| Error::Json { path: LATEST_POINTER.into(), source })?;
                Ok(value["date"].as_str().map(str::to_string))
            }
        }
    }

    /// Removes all but the newest `keep` dated exports, never the one
    /// `latest` names; returns their names.
    async fn prune(&self, keep: usize) -> Result<Vec<String>> {
        let mut dates = self.dated_exports().await?;
        dates.sort();
        let excess = dates.len().saturating_sub(keep);
        let latest = self.latest_date().await?;
        let removed: Vec<String> =
            dates.into_iter().take(excess).filter(|d| Some(d.as_str()) != latest.as_deref()).collect();
        for date in &removed {
            match self {
                Destination::Local(root) => {
                    let link = root.join(date);
                    let target = std::fs::read_link(&link).ok();
                    if target.is_some() {
                        std::fs::remove_file(&link).map_err(|e| Error::io(link.display(), e))?;
                    } else {
                        // A dated directory an older tokscope wrote in place.
                        std::fs::remove_dir_all(&link).map_err(|e| Error::io(link.display(), e))?;
                    }
                    remove_unlinked_generations(root)?;
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
                    .filter(|e| e.path().is_dir() && e.file_name() != LATEST)
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

/// Writes `files` into a new generation directory (`.exports/<date>-<n>`,
/// `n` one more than any before), then moves the `<date>` and `latest` links
/// onto it, each by renaming a new link over the old one: a reader that
/// resolves either sees the old export or the new one, whole. A process
/// killed before the links move leaves a generation no link names, removed by
/// the next export.
fn publish_local(root: &Path, date: &str, files: &[(String, Vec<u8>)]) -> Result<()> {
    let generations = root.join(GENERATIONS);
    std::fs::create_dir_all(&generations).map_err(|e| Error::io(generations.display(), e))?;
    let next = std::fs::read_dir(&generations)
        .map_err(|e| Error::io(generations.display(), e))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_string_lossy().rsplit_once('-').and_then(|(_, n)| n.parse::<u64>().ok()))
        .max()
        .map_or(1, |n| n + 1);
    let name = format!("{date}-{next}");
    let generation = generations.join(&name);
    let staged = generations.join(format!(".{name}.tmp"));
    if staged.exists() {
        // Left by an export killed while it wrote.
        std::fs::remove_dir_all(&staged).map_err(|e| Error::io(staged.display(), e))?;
    }
    std::fs::create_dir(&staged).map_err(|e| Error::io(staged.display(), e))?;
    for (file, bytes) in files {
        let path = staged.join(file);
        std::fs::write(&path, bytes).map_err(|e| Error::io(path.display(), e))?;
    }
    std::fs::rename(&staged, &generation).map_err(|e| Error::io(generation.display(), e))?;
    let target = Path::new(GENERATIONS).join(&name);
    for link in [date, LATEST] {
        point_link(root, link, &target)?;
    }
    remove_unlinked_generations(root)
}

/// Makes `root/<name>` a symbolic link to `target` atomically. A directory
/// an older tokscope left there (a dated export written in place, a
/// `latest` copied from an object store) becomes a generation first.
fn point_link(root: &Path, name: &str, target: &Path) -> Result<()> {
    let path = root.join(name);
    if path.is_dir() && !path.is_symlink() {
        let kept = root.join(GENERATIONS).join(format!("{name}-0"));
        if kept.exists() {
            std::fs::remove_dir_all(&path).map_err(|e| Error::io(path.display(), e))?;
        } else {
            std::fs::rename(&path, &kept).map_err(|e| Error::io(path.display(), e))?;
        }
    }
    let link = root.join(format!(".{name}.link-{}", std::process::id()));
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(target, &link).map_err(|e| Error::io(link.display(), e))?;
    std::fs::rename(&link, &path).map_err(|e| Error::io(path.display(), e))
}

/// Removes the generations no link in `root` names (superseded exports, and
/// ones a killed export left before its links moved).
fn remove_unlinked_generations(root: &Path) -> Result<()> {
    let generations = root.join(GENERATIONS);
    let Ok(entries) = std::fs::read_dir(&generations) else { return Ok(()) };
    let mut linked = std::collections::HashSet::new();
    for entry in std::fs::read_dir(root).map_err(|e| Error::io(root.display(), e))?.filter_map(|e| e.ok()) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            // A link `point_link` made but a killed export never renamed
            // into place names nothing a reader sees: not kept, and removed
            // once its process is gone.
            if stale_link(&name) {
                let _ = std::fs::remove_file(entry.path());
            }
            continue;
        }
        if let Some(generation) = std::fs::read_link(entry.path()).ok().and_then(|t| t.file_name().map(PathBuf::from)) {
            linked.insert(generation);
        }
    }
    for entry in entries.filter_map(|e| e.ok()) {
        if !linked.contains(&PathBuf::from(entry.file_name())) {
            let path = entry.path();
            std::fs::remove_dir_all(&path).map_err(|e| Error::io(path.display(), e))?;
        }
    }
    Ok(())
}

/// Whether `name` is a `.<link>.link-<pid>` file of a process that no
/// longer runs (known only where `/proc` is).
fn stale_link(name: &str) -> bool {
    let Some((_, pid)) = name.rsplit_once(".link-") else { return false };
    let Ok(pid) = pid.parse::<u32>() else { return false };
    pid != std::process::id() && Path::new("/proc/self").exists() && !Path::new(&format!("/proc/{pid}")).exists()
}

/// The date of a generation's name (`2024-06-10-3` -> `2024-06-10`; a
/// dated directory an older tokscope linked `latest` to is its date).
fn generation_date(generation: &str) -> &str {
    if NaiveDate::parse_from_str(generation, "%Y-%m-%d").is_ok() {
        return generation;
    }
    generation.rsplit_once('-').map_or(generation, |(date, _)| date)
}
