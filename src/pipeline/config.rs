//! The scheduled run's configuration file (`tokscope run --config job.toml`):
//! sources, dataset, ingest settings, prices, jobs, export, object-store
//! client, lease, budgets and alerts (`super::alerts`). docs/OPERATIONS.md shows a complete file. Relative
//! paths are relative to the file's directory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::alerts::{AlertRule, Budget};
use crate::dataset::lease::LeaseOptions;
use crate::error::{Error, Result};
use crate::store::{self, StoreOptions};

/// A parsed configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// The dataset: a local directory or an object-store URL.
    pub dataset: String,
    /// Inputs: paths, directories, globs, or object-store URLs and globs.
    pub sources: Vec<String>,
    /// How inputs are read.
    #[serde(default)]
    pub ingest: IngestConfig,
    /// `[attribution]`: your own fields sent to attribution columns,
    /// `COLUMN = "FIELD"` (`team = "metadata.cost_center"`), as `--attribute`
    /// does at ingest and `--attribute` of `job` / `export` at query time.
    #[serde(default)]
    pub attribution: std::collections::BTreeMap<String, String>,
    /// Prices: a TOML file or `litellm:FILE.json` (the `cost` job needs them).
    pub pricing: Option<String>,
    /// Model shapes for `kv_cache` (TOML over the bundled file).
    pub architectures: Option<PathBuf>,
    /// Where the export's jobs run: `ballista://HOST:PORT` for a Ballista
    /// cluster (docs/DISTRIBUTED.md); without it, in this process.
    pub engine: Option<String>,
    /// With `engine`: a job whose state and finished stages stay the same
    /// this many seconds is cancelled and the run fails (0: no limit;
    /// default [`crate::engine::distributed::Remote::DEFAULT_JOB_TIMEOUT`]).
    pub job_timeout_s: Option<u64>,
    /// The export; without it a run only ingests.
    pub export: Option<ExportConfig>,
    /// Compaction of the partitions a run added files to (on by default).
    #[serde(default)]
    pub compact: CompactConfig,
    /// Object-store client settings.
    #[serde(default)]
    pub store: StoreConfig,
    /// The dataset's writer lease.
    #[serde(default)]
    pub lease: LeaseConfig,
    /// Threads for the run's parallel work (default: `--threads`,
    /// `TOKSCOPE_THREADS`, else the cores the process may use).
    pub threads: Option<usize>,
    /// A shell command run with the alerts a run fires as JSON on stdin
    /// (`super::alerts::notify`).
    pub on_alert: Option<String>,
    /// `on_alert` is killed after this many seconds (default 60).
    pub on_alert_timeout_s: Option<u64>,
    /// `[[budgets]]`: USD a month per team, user, project, key or tag.
    #[serde(default)]
    pub budgets: Vec<Budget>,
    /// `[[alerts]]`: thresholds on jobs' columns.
    #[serde(default)]
    pub alerts: Vec<AlertRule>,
    /// The file's directory (where `on_alert` runs).
    #[serde(skip)]
    pub base_dir: PathBuf,
}

/// `[ingest]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngestConfig {
    /// Force a format instead of detecting it per file.
    pub format: Option<String>,
    /// Context-bin edges (`0,1K,4K,...`).
    pub bins: Option<String>,
    /// JSON file of extra EOS markers.
    pub eos_markers: Option<PathBuf>,
    /// Model name for traces that log none.
    pub model: Option<String>,
    /// Start of traces with relative timestamps, RFC 3339.
    pub base_time: Option<String>,
    /// `none`, `hash` or `drop`.
    pub redact: Option<String>,
    /// Longer lines are rejected unread.
    pub max_line_bytes: Option<usize>,
    /// `s` or `ms`: the unit of durations logged as bare numbers (Langfuse).
    pub time_unit: Option<String>,
    /// JSON file of rules mapping models to experiment arms (`--variants`).
    pub variants: Option<PathBuf>,
    /// Parquet codec: `zstd(N)`, `lz4`, `snappy` or `none` (default zstd(1)).
    pub compression: Option<String>,
    /// Most memory the ingest (and the compaction after it) may hold
    /// (`512M`, `1G`, `none`; default `auto`: a quarter of the memory
    /// available, between 256 MiB and 8 GiB).
    pub memory_limit: Option<String>,
    /// Most requests to the object store in flight at once (`--io-concurrency`, default 64).
    pub io_concurrency: Option<usize>,
    /// List each source in a store from after the last key the runs before
    /// listed (`_listing.json`), for buckets whose keys sort by time.
    pub list_after_last: Option<bool>,
    /// With `list_after_last`, every this many runs lists everything
    /// (default 24), to catch objects written late under earlier keys.
    pub full_listing_every: Option<u32>,
}

/// `[compact]`: after ingesting something new, a run merges each
/// partition's small files (`tokscope compact`) before it exports.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactConfig {
    /// Whether to compact (default true).
    pub enabled: Option<bool>,
    /// Files of at least this size are left alone; merged files are cut at
    /// about it (default 256M).
    pub target_size: Option<String>,
}

/// `[export]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportConfig {
    /// Destination: a local directory or an object-store URL.
    pub to: String,
    /// Jobs to export (default: the dashboard's jobs whose tables hold rows).
    pub jobs: Option<Vec<String>>,
    /// Dated exports to keep.
    pub keep: Option<usize>,
    /// Days the trend charts show (default 30).
    pub trend_days: Option<u32>,
    /// Jobs whose queries run at once (default 4; 1: one after another).
    pub jobs_at_once: Option<usize>,
}

/// `[store]`: object-store retries and timeouts (defaults: `StoreOptions`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// Retries of a failed request (5xx, 429, connection errors).
    pub max_retries: Option<usize>,
    /// Stop retrying a request after this many seconds.
    pub retry_timeout_s: Option<f64>,
    /// First backoff, milliseconds.
    pub backoff_initial_ms: Option<u64>,
    /// Longest backoff, seconds.
    pub backoff_max_s: Option<f64>,
    /// Backoff growth factor.
    pub backoff_base: Option<f64>,
    /// A request fails after this many seconds.
    pub timeout_s: Option<f64>,
    /// Connecting fails after this many seconds.
    pub connect_timeout_s: Option<f64>,
}

/// `[lease]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseConfig {
    /// An object-store lease not renewed for this many seconds may be taken over (default 3600).
    pub expiry_s: Option<u64>,
    /// Wait this many seconds for a held lease before giving up (default 0).
    pub wait_s: Option<u64>,
}

impl RunConfig {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path.display(), e))?;
        let mut config: RunConfig =
            toml::from_str(&text).map_err(|e| config_err!("{}: {}", path.display(), e.to_string().trim()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        config.resolve_paths(base);
        config.base_dir = if base.as_os_str().is_empty() { PathBuf::from(".") } else { base.to_path_buf() };
        config.check(path)?;
        Ok(config)
    }

    /// Makes relative local paths relative to `base` (the file's directory).
    fn resolve_paths(&mut self, base: &Path) {
        let local = |p: &str| -> String {
            if store::is_url(p) || Path::new(p).is_absolute() {
                p.to_string()
            } else {
                base.join(p).display().to_string()
            }
        };
        self.dataset = local(&self.dataset);
        self.sources = self.sources.iter().map(|s| local(s)).collect();
        if let Some(p) = &self.pricing {
            self.pricing = Some(match p.strip_prefix("litellm:") {
                Some(file) => format!("litellm:{}", local(file)),
                None => local(p),
            });
        }
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| base.join(p));
        self.architectures = path(&self.architectures);
        self.ingest.eos_markers = path(&self.ingest.eos_markers);
        self.ingest.variants = path(&self.ingest.variants);
        if let Some(export) = &mut self.export {
            export.to = local(&export.to);
        }
    }

    fn check(&self, path: &Path) -> Result<()> {
        if self.sources.is_empty() {
            return Err(config_err!("{}: `sources` is empty: name at least one path, glob or URL", path.display()));
        }
        if let Some(engine) = &self.engine {
            crate::engine::distributed::parse_engine_url(engine)
                .map_err(|e| config_err!("{}: `engine`: {e}", path.display()))?;
        }
        if self.job_timeout_s.is_some() && self.engine.is_none() {
            return Err(config_err!("{}: `job_timeout_s` needs `engine` (a Ballista cluster)", path.display()));
        }
        super::alerts::check(&self.alerts, &self.budgets).map_err(|e| config_err!("{}: {e}", path.display()))?;
        if self.on_alert.is_some() && self.alerts.is_empty() && self.budgets.is_empty() {
            return Err(config_err!("{}: `on_alert` needs [[alerts]] or [[budgets]]", path.display()));
        }
        if let Some(jobs) = self.export.as_ref().and_then(|e| e.jobs.as_ref()) {
            for job in jobs {
                crate::jobs::job(job).map_err(|e| config_err!("{}: [export] jobs: {e}", path.display()))?;
            }
        }
        Ok(())
    }

    /// The cluster the export's jobs run on, if any.
    pub fn remote(&self) -> Option<crate::engine::distributed::Remote> {
        let remote = |url: &String| crate::engine::distributed::Remote::new(url).with_job_timeout(self.job_timeout_s);
        self.engine.as_ref().map(remote)
    }

    /// The object-store client settings.
    pub fn store_options(&self) -> StoreOptions {
        let d = StoreOptions::default();
        let secs = |s: Option<f64>, default: Duration| s.map(Duration::from_secs_f64).unwrap_or(default);
        StoreOptions {
            max_retries: self.store.max_retries.unwrap_or(d.max_retries),
            retry_timeout: secs(self.store.retry_timeout_s, d.retry_timeout),
            backoff_initial: self.store.backoff_initial_ms.map(Duration::from_millis).unwrap_or(d.backoff_initial),
            backoff_max: secs(self.store.backoff_max_s, d.backoff_max),
            backoff_base: self.store.backoff_base.unwrap_or(d.backoff_base),
            timeout: secs(self.store.timeout_s, d.timeout),
            connect_timeout: secs(self.store.connect_timeout_s, d.connect_timeout),
        }
    }

    /// The `[attribution]` mappings.
    pub fn attributes(&self) -> Result<tokscope_core::attribution::AttributeMap> {
        let mappings = self
            .attribution
            .iter()
            .map(|(column, path)| format!("{column}={path}").parse().map_err(|e| config_err!("[attribution] {e}")))
            .collect::<Result<Vec<_>>>()?;
        Ok(tokscope_core::attribution::AttributeMap::new(mappings)?)
    }

    /// The compaction a run does after ingesting, `None` when `[compact]`
    /// turns it off; merged files use the ingest's codec.
    pub fn compact_options(&self) -> Result<Option<crate::dataset::compact::CompactOptions>> {
        if self.compact.enabled == Some(false) {
            return Ok(None);
        }
        let settings = self.ingest.settings()?;
        let mut opts = crate::dataset::compact::CompactOptions {
            compression: settings.compression,
            lease: self.lease_options(),
            memory_limit: settings.memory_limit,
            ..Default::default()
        };
        if let Some(size) = &self.compact.target_size {
            opts.target_bytes = crate::dataset::compact::parse_target_size(size)
                .map_err(|e| config_err!("[compact] target_size: {e}"))?;
        }
        Ok(Some(opts))
    }

    /// Whether the run evaluates budgets or alerts.
    pub fn alerting(&self) -> bool {
        !self.alerts.is_empty() || !self.budgets.is_empty()
    }

    /// The lease settings.
    pub fn lease_options(&self) -> LeaseOptions {
        let d = LeaseOptions::default();
        LeaseOptions {
            expiry: self.lease.expiry_s.map(Duration::from_secs).unwrap_or(d.expiry),
            wait: self.lease.wait_s.map(Duration::from_secs).unwrap_or(d.wait),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_follow_the_file_and_unknown_keys_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.toml");
        std::fs::write(
            &path,
            r#"
dataset = "lake"
sources = ["logs/*.jsonl", "s3://bucket/logs/"]
pricing = "litellm:prices.json"
engine = "ballista://scheduler.internal:50050"
job_timeout_s = 45
[ingest]
memory_limit = "1.5G"
io_concurrency = 16
[export]
to = "site"
keep = 3
[store]
max_retries = 2
timeout_s = 1.5
[lease]
wait_s = 10
"#,
        )
        .unwrap();
        let c = RunConfig::load(&path).unwrap();
        assert_eq!(c.dataset, dir.path().join("lake").display().to_string());
        assert_eq!(c.sources[1], "s3://bucket/logs/");
        assert_eq!(
            c.pricing.as_deref(),
            Some(format!("litellm:{}", dir.path().join("prices.json").display()).as_str())
        );
        assert_eq!(c.engine.as_deref(), Some("ballista://scheduler.internal:50050"));
        assert_eq!(c.remote().unwrap().job_timeout, Some(Duration::from_secs(45)));
        assert_eq!(c.store_options().max_retries, 2);
        assert_eq!(c.store_options().timeout, Duration::from_millis(1500));
        assert_eq!(c.lease_options().wait, Duration::from_secs(10));
        assert_eq!(c.ingest.settings().unwrap().memory_limit, crate::resources::MemoryBudget::Bytes(3 << 29));
        assert_eq!(IngestConfig::default().settings().unwrap().memory_limit, crate::resources::MemoryBudget::Auto);
        assert_eq!(c.ingest.settings().unwrap().io_concurrency, 16);
        assert_eq!(IngestConfig::default().settings().unwrap().io_concurrency, 64);
        let none = IngestConfig { io_concurrency: Some(0), ..Default::default() };
        assert!(none.settings().unwrap_err().to_string().contains("io_concurrency must be at least 1"));
        let lots = IngestConfig { memory_limit: Some("lots".into()), ..Default::default() };
        assert!(lots.settings().unwrap_err().to_string().contains("is not a size"));
        std::fs::write(&path, "dataset = \"d\"\nsources = [\"x\"]\nsurprise = 1\n").unwrap();
        let err = RunConfig::load(&path).unwrap_err().to_string();
        assert!(err.contains("surprise"), "{err}");
        std::fs::write(&path, "dataset = \"d\"\nsources = [\"x\"]\n[export]\nto = \"s\"\njobs = [\"nope\"]\n").unwrap();
        assert!(RunConfig::load(&path).unwrap_err().to_string().contains("unknown job"));
        std::fs::write(&path, "dataset = \"d\"\nsources = [\"x\"]\nengine = \"http://h:1\"\n").unwrap();
        let err = RunConfig::load(&path).unwrap_err().to_string();
        assert!(err.contains("`engine`") && err.contains("ballista://HOST:PORT"), "{err}");
        std::fs::write(&path, "dataset = \"d\"\nsources = [\"x\"]\njob_timeout_s = 5\n").unwrap();
        let err = RunConfig::load(&path).unwrap_err().to_string();
        assert!(err.contains("`job_timeout_s` needs `engine`"), "{err}");
    }

    #[test]
    fn compaction_is_on_by_default_and_configurable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.toml");
        let load = |extra: &str| {
            std::fs::write(&path, format!("dataset = \"d\"\nsources = [\"x\"]\n{extra}")).unwrap();
            RunConfig::load(&path).unwrap()
        };
        let default = load("").compact_options().unwrap().expect("on by default");
        assert_eq!(default.target_bytes, crate::dataset::compact::DEFAULT_TARGET_BYTES);
        let sized = load("[ingest]\ncompression = \"zstd(3)\"\n[compact]\ntarget_size = \"64M\"\n");
        let opts = sized.compact_options().unwrap().unwrap();
        assert_eq!(opts.target_bytes, 64 << 20);
        assert_eq!(opts.compression, crate::dataset::writer::parse_compression("zstd(3)").unwrap());
        assert!(load("[compact]\nenabled = false\n").compact_options().unwrap().is_none());
        let zero = load("[compact]\ntarget_size = \"0\"\n").compact_options().unwrap_err().to_string();
        assert!(zero.contains("target_size"), "{zero}");
    }

    #[test]
    fn alerts_and_budgets_are_checked_when_the_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.toml");
        let load = |extra: &str| {
            std::fs::write(&path, format!("dataset = \"d\"\nsources = [\"x\"]\n{extra}")).unwrap();
            RunConfig::load(&path)
        };
        let ok = load(
            "on_alert = \"cat\"\n[[budgets]]\ntag = \"cc:1\"\nusd_per_month = 10\n[[alerts]]\njob = \"eos\"\n\
             column = \"eos_compliance_rate\"\nbelow = 0.98\nwhere = { model = \"m\", n = 3 }\nparams = { by = \"team\", top = 5 }\n",
        )
        .unwrap();
        assert!(ok.alerting());
        assert_eq!(ok.base_dir, dir.path());
        assert_eq!(ok.alerts[0].filter["n"], super::super::alerts::Value::Number(3.0));
        let err = |extra: &str| load(extra).unwrap_err().to_string();
        let alert = "[[alerts]]\njob = \"eos\"\ncolumn = \"eos_compliance_rate\"\n";
        assert!(err(&format!("{alert}above = 1\n[alerts.params]\nwindow = 5\n")).contains("no parameter \"window\""));
        assert!(err(&format!("{alert}above = 1\nparams = {{ by = \"colour\" }}\n")).contains("must be one of"));
        assert!(err(alert).contains("give `above` or `below`"));
        assert!(err("[[alerts]]\njob = \"nope\"\ncolumn = \"c\"\nabove = 1\n").contains("unknown job"));
        assert!(err("[[budgets]]\nteam = \"a\"\nusd_per_month = 0\n").contains("positive"));
        assert!(err("on_alert = \"cat\"\n").contains("`on_alert` needs [[alerts]] or [[budgets]]"));
    }
}
