//! SQL jobs: each job is a readable SQL file in `sql/`, compiled into the
//! binary, run over a dataset registered by [`crate::engine`] (tables and UDFs).
//!
//! A job's SQL may include shared metrics from `sql/metrics.sql` as
//! `{{> name}}` (expanded to `<expression> AS name`, so every metric is
//! written once) and take parameters as `{{name}}`: numbers, durations
//! (expanded to microseconds) and labels (expanded to a quoted SQL string, or
//! `NULL` when unset), each validated so that a parameter cannot inject SQL.
//!
//! Adding a job: a file `sql/<name>.sql` and one entry in [`JOBS`].

use std::collections::HashMap;
use std::sync::OnceLock;

use arrow::record_batch::RecordBatch;
use datafusion::prelude::SessionContext;

use datafusion::datasource::empty::EmptyTable;
use tokscope_core::catalog::{TableDef, CATALOG};

use crate::engine;
use crate::error::{Error, Result};

/// A named SQL job.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    /// Name used on the command line.
    pub name: &'static str,
    /// What it computes.
    pub about: &'static str,
    /// Its SQL (from `sql/<name>.sql`), before includes and parameters are expanded.
    pub sql: &'static str,
    /// Parameters and their defaults, set with `--param name=value`.
    pub params: &'static [Param],
    /// Tables whose rows it needs (those it reads, and `tokens` for the columns
    /// derived from per-token data): the job runs only where they hold rows.
    pub tables: &'static [&'static TableDef],
    /// The columns a terminal table shows by default (`--wide`: all); empty: all.
    pub key_columns: &'static [&'static str],
}

/// A job parameter: `{{name}}` in the job's SQL.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    /// Name used by `--param name=value`.
    pub name: &'static str,
    /// Value when not given (an empty label means unset).
    pub default: &'static str,
    /// What values it takes.
    pub kind: ParamKind,
}

/// What a job parameter's values are, and how they are written into the SQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// A number, written as given.
    Number,
    /// A positive duration with a unit (`500ms`, `60s`, `5m`, `1h`, `1d`; a
    /// bare number is seconds), written as whole microseconds.
    Duration,
    /// A label such as an experiment arm: letters, digits and `._:/+-@ `,
    /// written as a quoted SQL string; an empty value is `NULL` (unset).
    Label,
    /// The `requests` column rows are grouped by, one of [`GROUPINGS`],
    /// written as the column's name (the job's first output column).
    Grouping,
    /// A whole number, zero or more, written as given.
    Count,
}

/// The columns a job's `by` parameter may group requests by: the model, its
/// version (a migration from one version to the next), the experiment arm,
/// or an attribution column (docs/metrics.md, "Attribution"); `tag` counts a
/// request once under each of its tags (see [`Grouping`]).
pub const GROUPINGS: [&str; 10] =
    ["model", "model_version", "variant", "user_id", "team", "project", "environment", "tag", "key_alias", "provider"];

/// What a grouping job's rows are read from, written into its SQL where it
/// says `{{requests}}` (or `{{request_counts}}`, for `eos`): the table
/// itself when grouped by a column it holds, else a subquery that
/// - for `by=tag`, gives each request one row per tag (`tag`; those starting
///   with `tag_prefix` when it is set), or one row with a null tag when it
///   has none, so that each is counted under each of its tags;
/// - for `request_counts` grouped by a column it lacks, reads `requests`
///   with a count of 1 per row (`requests`);
/// - with `top=N`, keeps the N largest groups (by cost in the jobs that
///   price requests, else by requests; ties by name) and labels every other
///   group `(other)`, so that the other rows are aggregated together and
///   totals never change; rows without a value keep theirs (null).
#[derive(Debug, Clone)]
struct Grouping {
    /// The grouping column.
    by: String,
    /// Groups kept apart; 0: all.
    top: u64,
    /// `tag_prefix` as SQL (a quoted string or `NULL`).
    tag_prefix: String,
    /// Rank groups by cost (the job prices requests).
    by_cost: bool,
}

/// The columns of `request_counts` a grouping may use directly.
const REQUEST_COUNTS_GROUPINGS: [&str; 2] = ["model", "variant"];

impl Grouping {
    /// The relation standing for `table` (`requests` or `request_counts`).
    fn source(&self, table: &str) -> Result<String> {
        let by = self.by.as_str();
        let counts = table == "request_counts";
        let rows = if counts && !REQUEST_COUNTS_GROUPINGS.contains(&by) {
            "(SELECT *, CAST(1 AS BIGINT) AS requests FROM requests)".to_string()
        } else {
            table.to_string()
        };
        let rows = if by == "tag" {
            let counted = if counts { ", CAST(1 AS BIGINT) AS requests" } else { "" };
            format!("(SELECT *{counted}, unnest(group_tags(tags, {})) AS tag FROM requests)", self.tag_prefix)
        } else {
            rows
        };
        if self.top == 0 {
            return Ok(if rows == table { rows } else { format!("{rows} AS {table}") });
        }
        let size = if counts { "sum(requests)" } else { "count(*)" };
        let (ranked, rank) = if self.by_cost && !counts {
            let price = metric("price")?;
            let cost = metric("cost_usd")?;
            (format!("(SELECT *, {price} AS price FROM grouped_rows)"), format!("{cost} DESC NULLS LAST, {size} DESC"))
        } else {
            ("grouped_rows".to_string(), format!("{size} DESC"))
        };
        Ok(format!(
            "(WITH grouped_rows AS (SELECT * FROM {rows}), \
             top_groups AS (SELECT {by} AS top_key FROM {ranked} WHERE {by} IS NOT NULL \
             GROUP BY {by} ORDER BY {rank}, {by} LIMIT {top}) \
             SELECT g.* EXCLUDE ({by}), \
             CASE WHEN g.{by} IS NULL OR t.top_key IS NOT NULL THEN g.{by} ELSE '(other)' END AS {by} \
             FROM grouped_rows g LEFT JOIN top_groups t ON g.{by} = t.top_key) AS {table}",
            top = self.top
        ))
    }
}

/// A metric's expression (`sql/metrics.sql`).
fn metric(name: &str) -> Result<&'static str> {
    metrics().get(name).copied().ok_or_else(|| internal_err!("sql/metrics.sql has no metric {name}"))
}

impl ParamKind {
    /// `value` as SQL text for this kind, or why it is not acceptable.
    fn to_sql(self, name: &str, value: &str) -> Result<String> {
        let value = value.trim();
        match self {
            ParamKind::Number => match value.parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(value.to_string()),
                _ => Err(config_err!("parameter {name} must be a number, got {value:?}")),
            },
            ParamKind::Duration => duration_micros(value).map(|us| us.to_string()).ok_or_else(|| {
                config_err!(
                    "parameter {name} must be a positive duration such as 500ms, 60s, 5m, 1h or 1d, got {value:?}"
                )
            }),
            ParamKind::Grouping => match GROUPINGS.iter().find(|g| **g == value) {
                Some(column) => Ok(column.to_string()),
                None => Err(config_err!("parameter {name} must be one of {}, got {value:?}", GROUPINGS.join(", "))),
            },
            ParamKind::Count => match value.parse::<u64>() {
                Ok(_) => Ok(value.to_string()),
                Err(_) => Err(config_err!("parameter {name} must be a whole number, 0 or more, got {value:?}")),
            },
            ParamKind::Label if value.is_empty() => Ok("NULL".to_string()),
            ParamKind::Label => {
                let ok = |c: char| c.is_alphanumeric() || "._:/+-@ ".contains(c);
                if value.chars().all(ok) {
                    Ok(format!("'{value}'"))
                } else {
                    Err(config_err!(
                        "parameter {name} may hold letters, digits, spaces and ._:/+-@ only, got {value:?}"
                    ))
                }
            }
        }
    }
}

/// A duration with a unit (`ms`, `s`, `m`, `h`, `d`; none means seconds) in
/// whole microseconds; `None` unless positive and finite.
fn duration_micros(text: &str) -> Option<i64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let per_unit = match unit.trim() {
        "ms" => 1e3,
        "" | "s" => 1e6,
        "m" | "min" => 60e6,
        "h" => 3600e6,
        "d" => 86_400e6,
        _ => return None,
    };
    let micros = (number.trim().parse::<f64>().ok()? * per_unit).round();
    (1.0..9e18).contains(&micros).then_some(micros as i64)
}

/// The shared metric expressions (`sql/metrics.sql`).
const METRICS_SQL: &str = include_str!("../../sql/metrics.sql");

macro_rules! job {
    ($name:literal, $about:literal, tables: [$($table:ident),*]
     $(, params: [$(($p:literal, $d:literal $(, $kind:ident)?)),*])? $(, key: [$($key:literal),*])?) => {
        Job {
            name: $name,
            about: $about,
            sql: include_str!(concat!("../../sql/", $name, ".sql")),
            params: &[$($(Param { name: $p, default: $d, kind: job!(@kind $($kind)?) }),*)?],
            tables: &[$(tokscope_core::catalog::tables::$table),*],
            key_columns: &[$($($key),*)?],
        }
    };
    (@kind) => { ParamKind::Number };
    (@kind $kind:ident) => { ParamKind::$kind };
}

/// Every job.
pub const JOBS: &[Job] = &[
    job!(
        "eos",
        "EOS compliance and silent-truncation rate per model (or --param by=...) x context bin",
        tables: [REQUESTS, REQUEST_COUNTS],
        params: [("by", "model", Grouping), ("top", "0", Count), ("tag_prefix", "", Label)]
    ),
    job!(
        "latency",
        "exact TTFT / TPOT / latency percentiles and throughput per model (or --param by=model_version|variant) x context bin",
        tables: [REQUESTS],
        params: [("by", "model", Grouping), ("top", "0", Count), ("tag_prefix", "", Label)]
    ),
    job!(
        "cost",
        "cost per model (or --param by=...) x context bin: priced (--pricing, default the bundled LiteLLM \
         table), else as logged; cost_source says which",
        tables: [REQUESTS],
        params: [("by", "model", Grouping), ("top", "0", Count), ("tag_prefix", "", Label)]
    ),
    job!(
        "kv_cache",
        "KV-cache GiB per request and per GPU (mean, max) per model x context bin",
        tables: [REQUESTS],
        params: [("tp", "0")]
    ),
    job!(
        "report",
        "eos + latency + cost side by side (what `tokscope run` prints)",
        tables: [REQUESTS],
        params: [("by", "model", Grouping), ("top", "0", Count), ("tag_prefix", "", Label)],
        // What a reader scans first; the other columns with `--wide` (docs/cli.md).
        key: ["model", "context_bin", "requests", "eos_compliance_rate", "implicit_truncation_rate",
              "ttft_p50_ms", "tpot_p50_ms", "latency_p95_ms", "cost_usd", "cost_source", "cost_per_1k_tokens"]
    ),
    job!(
        "daily",
        "cost, EOS compliance, truncation and TTFT per UTC day x model (or --param by=...) (the dashboard's trends)",
        tables: [REQUESTS],
        params: [("by", "model", Grouping), ("top", "0", Count), ("tag_prefix", "", Label)]
    ),
    job!(
        "reconcile",
        "logged against priced cost per UTC day x model: sums, difference, ratio, requests over --param tolerance",
        tables: [REQUESTS],
        params: [("tolerance", "0.01")]
    ),
    job!(
        "reconcile_requests",
        "the requests whose logged and priced costs differ by more than --param tolerance (relative)",
        tables: [REQUESTS],
        params: [("tolerance", "0.01")]
    ),
    // The jitter jobs and eos_logprob read columns of `requests` that ingest derives from
    // per-token data: without token rows there is nothing to report.
    job!(
        "jitter",
        "inter-token and tail-token jitter, first- and last-token latency per model (or --param by=model_version|variant) \
         x context bin",
        tables: [REQUESTS, TOKENS],
        params: [("by", "model", Grouping), ("top", "0", Count), ("tag_prefix", "", Label)]
    ),
    job!("jitter_requests", "per-request itl_std_ms, first_token_ms, last_token_ms", tables: [REQUESTS, TOKENS]),
    job!(
        "confidence",
        "logprob / entropy confidence and low-confidence spans per model x context bin x eos_status",
        tables: [TOKENS],
        params: [("low_logprob", "-0.6931471805599453"), ("high_entropy_bits", "1.0")]
    ),
    job!("eos_logprob", "logprob of the last token: EOS tokens vs silent truncations, per model x context bin", tables: [REQUESTS, TOKENS]),
    job!("replay", "replay verdicts (natural stop / confirmed truncation / ...) per model x context bin", tables: [REPLAY_VERDICTS]),
    job!(
        "mediation",
        "causal mediation per layer: TE, IE, DE of corruption and of changed layers, weight perturbation (mean, 95% bootstrap CI)",
        tables: [INTERVENTIONS],
        params: [("resamples", "1000"), ("seed", "0")]
    ),
    job!(
        "mediation_layers",
        "direct and indirect effect of each changed layer (weight noise, skipped layer) per study (mean, 95% bootstrap CI)",
        tables: [INTERVENTIONS],
        params: [("resamples", "1000"), ("seed", "0")]
    ),
    job!("mediation_heatmap", "mean indirect effect per metric x layer x restored position", tables: [INTERVENTIONS]),
    job!(
        "head_waste",
        "attention layer x head of a kernel trace: actual vs peak FLOPs, waste ratio, flagged heads",
        tables: [KERNELS],
        params: [("peak_tflops", "989"), ("threshold", "0.5"), ("q_len", "0"), ("kv_len", "0"), ("head_dim", "0")]
    ),
    job!(
        "moe_load",
        "MoE router load per layer: expert shares, hot experts, imbalance, CV, routing entropy, redundancy bound",
        tables: [MOE_ROUTING]
    ),
    job!(
        "drift",
        "intent drift per query-length bin: KL divergence of model vs gold relevance (mean, p95, share above threshold)",
        tables: [EVALS],
        params: [("short_max", "3"), ("medium_max", "6"), ("threshold", "0.85")]
    ),
    job!(
        "quality",
        "answer quality per model x task: mean BLEU-4 against the reference, mean FactScore, f1_fact",
        tables: [EVALS],
        params: [("bleu_weight", "0.4"), ("factscore_weight", "0.6")]
    ),
    job!(
        "composite",
        "composite serving score per model: throughput, p95 latency, recall, semantic similarity",
        tables: [REQUESTS, EVALS],
        params: [("w1", "0.3"), ("w2", "0.25"), ("w3", "0.25"), ("w4", "0.2"), ("qps_scale", "1000"), ("latency_budget_ms", "200")]
    ),
    job!(
        "recall",
        "retrieval recall of evaluation records per model x context bin: mean, P50, P10",
        tables: [EVALS]
    ),
    job!(
        "recall_at_k",
        "top-K recall curve (K = 1..max_k) of evaluation records with ranked retrieval results, per model",
        tables: [EVALS],
        params: [("max_k", "100")]
    ),
    job!(
        "gateway_engine",
        "gateway log joined to engine profiles: matches, clock offset, prefill / decode / overhead percentiles per model x context bin",
        tables: [REQUESTS, PROFILES]
    ),
    job!(
        "engine",
        "engine profiles per model x variant x context bin: queue / prefill / decode / overhead P50 and P95, \
         KV-cache hit rate, CUDA kernel time, decode-step jitter",
        tables: [PROFILES]
    ),
    job!(
        "kv_cache_peak",
        "the most KV cache held at once per GPU (engine profiles' engine_id / gpu_id), with peak concurrency",
        tables: [REQUESTS, PROFILES],
        params: [("tp", "0")]
    ),
    job!(
        "throughput",
        "requests, tokens/s, mean and peak concurrency, TTFT and end-to-end percentiles per model (or --param \
         by=model_version|variant) x time window",
        tables: [REQUESTS],
        params: [("window", "60s", Duration), ("by", "model", Grouping), ("top", "0", Count), ("tag_prefix", "", Label)]
    ),
    job!(
        "load_summary",
        "a load test's whole run per model (or --param by=model_version|variant): throughput over wall time, \
         concurrency, latency percentiles",
        tables: [REQUESTS],
        params: [("by", "model", Grouping), ("top", "0", Count), ("tag_prefix", "", Label)]
    ),
    job!(
        "ab",
        "two experiment arms compared per context bin, B against A: split check, rates, latency, jitter, KV cache, \
         throughput, cost, with 95% CIs and Holm-adjusted p-values",
        tables: [REQUESTS],
        params: [("a", "", Label), ("b", "", Label), ("resamples", "1000"), ("seed", "0"), ("split", "0.5"),
                 ("srm_alpha", "0.001")]
    ),
    job!(
        "spend",
        "who spends what: requests, tokens, cost, cost per 1K tokens, EOS compliance, implicit truncation and P95 \
         latency per team (or --param by=...)",
        tables: [REQUESTS],
        params: [("by", "team", Grouping), ("top", "0", Count), ("tag_prefix", "", Label)]
    ),
];

/// One result the export publishes: a job run with parameters under a name of
/// its own (its files `<name>.csv`, `.json`, `.parquet`, and the table name
/// the dashboard's charts draw from).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DashboardRun {
    /// The result's name.
    pub name: &'static str,
    /// The job it runs (a name in [`JOBS`]).
    pub job: &'static str,
    /// Its `--param` values; the job's defaults for the others.
    pub params: &'static [(&'static str, &'static str)],
}

macro_rules! run {
    ($job:literal) => {
        DashboardRun { name: $job, job: $job, params: &[] }
    };
    ($name:literal = $job:literal $(, $p:literal = $v:literal)*) => {
        DashboardRun { name: $name, job: $job, params: &[$(($p, $v)),*] }
    };
}

/// What `tokscope export` runs by default, in this order (the files' order in
/// its summary; the page's order is the charts', `dashboard::BUILTIN_CHARTS`):
/// a job under its own name, or a named run of a job with parameters. A run
/// whose tables hold no rows is left out, as is one grouped (`by=`) by a
/// column that is null on every request (its charts then say "not in this
/// dataset").
pub const DASHBOARD: &[DashboardRun] = &[
    run!("report"),
    run!("daily"),
    run!("eos"),
    run!("latency"),
    run!("cost"),
    // Who spends: the top 8 teams, users and tags (the rest summed as `(other)`).
    run!("spend_daily_by_team" = "daily", "by" = "team", "top" = "8"),
    run!("spend_by_team" = "spend", "by" = "team", "top" = "8"),
    run!("spend_by_user" = "spend", "by" = "user_id", "top" = "8"),
    run!("spend_by_tag" = "spend", "by" = "tag", "top" = "8"),
    run!("spend_by_provider" = "spend", "by" = "provider"),
    run!("kv_cache"),
    run!("jitter"),
    run!("confidence"),
    run!("eos_logprob"),
    run!("replay"),
    run!("mediation"),
    run!("mediation_heatmap"),
    run!("mediation_layers"),
    run!("throughput"),
    run!("load_summary"),
    run!("gateway_engine"),
    run!("engine"),
    run!("kv_cache_peak"),
    run!("ab"),
    run!("head_waste"),
    run!("moe_load"),
    run!("quality"),
    run!("composite"),
    run!("drift"),
    run!("recall"),
    run!("recall_at_k"),
];

impl DashboardRun {
    /// The run named `name` in [`DASHBOARD`], else the job of that name with
    /// its defaults (`tokscope export --jobs` takes either).
    pub fn named(name: &str) -> Result<DashboardRun> {
        if let Some(run) = DASHBOARD.iter().find(|r| r.name == name) {
            return Ok(*run);
        }
        let job = job(name)?;
        Ok(DashboardRun { name: job.name, job: job.name, params: &[] })
    }

    /// The job it runs.
    pub fn job(&self) -> Result<&'static Job> {
        job(self.job)
    }

    /// Its parameters as `--param` pairs.
    pub fn params(&self) -> Vec<(String, String)> {
        self.params.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect()
    }

    /// For a run that names its grouping (`by=`): a query that returns a row
    /// when some request has a value to group by (for `by=tag`, a tag, of
    /// `tag_prefix` when set); `None` for a run without one.
    pub fn grouping_check_sql(&self) -> Result<Option<String>> {
        let job = self.job()?;
        let Some(by) = job.params.iter().find(|p| p.kind == ParamKind::Grouping) else { return Ok(None) };
        if !self.params.iter().any(|(name, _)| *name == by.name) {
            return Ok(None);
        }
        // Which groups are kept apart (`top`) does not change which rows have a value.
        let grouping = Grouping { top: 0, ..job.grouping(&self.params())? };
        Ok(Some(format!("SELECT 1 FROM {} WHERE {} IS NOT NULL LIMIT 1", grouping.source("requests")?, grouping.by)))
    }
}

/// Looks a job up by name.
pub fn job(name: &str) -> Result<&'static Job> {
    JOBS.iter().find(|j| j.name == name).ok_or_else(|| {
        let names: Vec<_> = JOBS.iter().map(|j| j.name).collect();
        Error::NotFound {
            what: format!("unknown job {name:?}"),
            hint: format!("jobs: {}; `tokscope job --help` says what each computes", names.join(", ")),
        }
    })
}

/// The metrics of `sql/metrics.sql` by name.
fn metrics() -> &'static HashMap<&'static str, &'static str> {
    static METRICS: OnceLock<HashMap<&'static str, &'static str>> = OnceLock::new();
    METRICS.get_or_init(|| {
        METRICS_SQL
            .split("-- metric: ")
            .skip(1)
            .filter_map(|section| section.split_once('\n'))
            .map(|(name, expr)| (name.trim(), expr.trim()))
            .collect()
    })
}

/// `sql` with every `{{> name}}` replaced by `<metric expression> AS name`,
/// and every `{{> name | counted}}` by the metric computed over
/// `request_counts` rows ([`counted`]).
fn expand_metrics(sql: &str) -> Result<String> {
    let mut out = String::with_capacity(sql.len() * 2);
    let mut rest = sql;
    while let Some(start) = rest.find("{{> ") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 4..];
        let end = after.find("}}").ok_or_else(|| config_err!("unclosed `{{{{> ` in job SQL"))?;
        let (name, filter) = match after[..end].split_once('|') {
            Some((name, filter)) => (name.trim(), Some(filter.trim())),
            None => (after[..end].trim(), None),
        };
        let expr = metrics()
            .get(name)
            .ok_or_else(|| config_err!("job SQL includes unknown metric {name:?} (sql/metrics.sql)"))?;
        match filter {
            None => out.push_str(expr),
            Some("counted") => out.push_str(&counted(name, expr)?),
            Some(other) => {
                return Err(config_err!(
                    "job SQL includes metric {name} with unknown filter {other:?} (known: counted)"
                ))
            }
        }
        out.push_str(" AS ");
        out.push_str(name);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A metric written over `requests` rows, computed instead over
/// `request_counts` rows, each of which stands for `requests` of them:
/// `count(*) FILTER (WHERE c)` becomes `sum(CASE WHEN c THEN requests ELSE 0
/// END)` and `count(*)` becomes `sum(requests)`. A metric built from
/// anything but counts of rows cannot be computed from counts: an error.
fn counted(name: &str, expr: &str) -> Result<String> {
    const COUNT: &str = "count(*)";
    const FILTER: &str = "FILTER (WHERE ";
    let not_a_count =
        || config_err!("metric {name} is not made of counts of requests; it cannot be computed from request_counts");
    let lower = expr.to_ascii_lowercase();
    let aggregates = ["sum(", "avg(", "min(", "max(", "quantile", "median(", "price", "stddev", "bootstrap"];
    if aggregates.iter().any(|a| lower.contains(a)) || lower.matches("count(").count() != lower.matches(COUNT).count() {
        return Err(not_a_count());
    }
    let mut out = String::with_capacity(expr.len() * 2);
    let mut rest = expr;
    while let Some(at) = rest.find(COUNT) {
        out.push_str(&rest[..at]);
        rest = &rest[at + COUNT.len()..];
        let trimmed = rest.trim_start();
        match trimmed.strip_prefix(FILTER) {
            Some(filter) => {
                // The condition ends at the parenthesis that closes `FILTER (`.
                let mut depth = 1;
                let close = filter
                    .char_indices()
                    .find(|&(_, c)| {
                        depth += match c {
                            '(' => 1,
                            ')' => -1,
                            _ => 0,
                        };
                        depth == 0
                    })
                    .map(|(i, _)| i)
                    .ok_or_else(not_a_count)?;
                out.push_str(&format!("sum(CASE WHEN {} THEN requests ELSE 0 END)", &filter[..close]));
                rest = &filter[close + 1..];
            }
            None => out.push_str("sum(requests)"),
        }
    }
    out.push_str(rest);
    Ok(out)
}

impl Job {
    /// Each parameter's value as SQL (`overrides`, else its default), checked
    /// against its [`ParamKind`].
    fn param_values(&self, overrides: &[(String, String)]) -> Result<HashMap<&'static str, String>> {
        let value_of = |p: &Param| overrides.iter().rev().find(|(n, _)| n == p.name).map_or(p.default, |(_, v)| v);
        self.params.iter().map(|p| Ok((p.name, p.kind.to_sql(p.name, value_of(p))?))).collect()
    }

    /// How a grouping job's rows are grouped with these parameters.
    fn grouping(&self, overrides: &[(String, String)]) -> Result<Grouping> {
        let values = self.param_values(overrides)?;
        let by = self.params.iter().find(|p| p.kind == ParamKind::Grouping).map(|p| p.name);
        Ok(Grouping {
            by: by.and_then(|by| values.get(by)).cloned().unwrap_or_default(),
            top: values.get("top").and_then(|t| t.parse().ok()).unwrap_or(0),
            tag_prefix: values.get("tag_prefix").cloned().unwrap_or_else(|| "NULL".into()),
            by_cost: self.sql.contains("{{> price}}"),
        })
    }

    /// The job's SQL with metrics expanded and `{{name}}` parameters replaced
    /// by `overrides`, else their defaults. Values are checked against the
    /// parameter's [`ParamKind`], so a parameter cannot inject SQL.
    pub fn sql_with(&self, overrides: &[(String, String)]) -> Result<String> {
        for (name, _) in overrides {
            if !self.params.iter().any(|p| p.name == name) {
                let known: Vec<_> = self.params.iter().map(|p| p.name).collect();
                return Err(config_err!(
                    "job {} has no parameter {name:?} (parameters: {})",
                    self.name,
                    known.join(", ")
                ));
            }
        }
        let mut sql = expand_metrics(self.sql)?;
        let values = self.param_values(overrides)?;
        for (name, value) in &values {
            sql = sql.replace(&format!("{{{{{name}}}}}"), value);
        }
        if self.params.iter().any(|p| p.kind == ParamKind::Grouping) {
            let grouping = self.grouping(overrides)?;
            for table in ["requests", "request_counts"] {
                let placeholder = format!("{{{{{table}}}}}");
                if sql.contains(&placeholder) {
                    sql = sql.replace(&placeholder, &grouping.source(table)?);
                }
            }
        }
        Ok(sql)
    }
}

/// Runs a job with its default parameters in a session where the dataset is registered.
pub async fn run_job(ctx: &SessionContext, job: &Job) -> Result<Vec<RecordBatch>> {
    run_job_with(ctx, job, &[]).await
}

/// Runs a job with parameter overrides (`--param name=value`). A job whose
/// input table the dataset lacks, or holds no rows of, is an error, not an
/// empty report.
pub async fn run_job_with(ctx: &SessionContext, job: &Job, params: &[(String, String)]) -> Result<Vec<RecordBatch>> {
    let sql = job.sql_with(params)?;
    for name in job.tables.iter().map(|t| t.name) {
        // A table the dataset lacks fails here, with the dataset's own message.
        let provider = ctx.table_provider(name).await?;
        let any: &dyn std::any::Any = provider.as_ref();
        if any.is::<EmptyTable>() {
            let written_by = CATALOG.iter().find(|t| t.name == name).map(|t| (t.written_by, t.description()));
            return Err(Error::NotFound {
                what: format!("job {} needs rows of `{name}`, and the dataset holds none", job.name),
                hint: match written_by {
                    Some((command, about)) => {
                        format!("`{command}` writes it ({})", engine::lowercase_first(about.trim_end_matches('.')))
                    }
                    None => format!("`{name}` is empty"),
                },
            });
        }
    }
    engine::run_sql(ctx, &sql, false).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dashboard_run_has_its_own_name_and_runs_a_job_with_its_parameters() {
        let mut names: Vec<&str> = DASHBOARD.iter().map(|r| r.name).collect();
        assert_eq!(&names[..3], ["report", "daily", "eos"]);
        names.sort();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "each name once");
        for run in DASHBOARD {
            let job = run.job().unwrap_or_else(|e| panic!("{}: {e}", run.name));
            job.sql_with(&run.params()).unwrap_or_else(|e| panic!("{}: {e}", run.name));
            // A run under a job's name is that job as it is.
            assert!(run.name != job.name || run.params.is_empty(), "{} runs its job with other parameters", run.name);
            assert!(JOBS.iter().all(|j| j.name != run.name || j.name == run.job), "{} is another job's name", run.name);
        }
        assert_eq!(DashboardRun::named("spend_by_tag").unwrap().params, [("by", "tag"), ("top", "8")]);
        assert_eq!(DashboardRun::named("jitter_requests").unwrap().job, "jitter_requests");
        assert!(DashboardRun::named("nope").is_err());
    }

    #[test]
    fn a_run_grouped_by_a_column_checks_that_some_request_has_a_value() {
        let check = |name: &str| DashboardRun::named(name).unwrap().grouping_check_sql().unwrap();
        assert_eq!(check("report"), None, "grouped by its default, model");
        assert_eq!(check("cost"), None);
        assert_eq!(check("spend_by_user").unwrap(), "SELECT 1 FROM requests WHERE user_id IS NOT NULL LIMIT 1");
        let tags = check("spend_by_tag").unwrap();
        assert!(
            tags.contains("unnest(group_tags(tags, NULL)) AS tag") && tags.ends_with("WHERE tag IS NOT NULL LIMIT 1")
        );
    }

    #[test]
    fn every_job_expands_and_names_its_metrics() {
        for job in JOBS {
            let sql = job.sql_with(&[]).unwrap_or_else(|e| panic!("{}: {e}", job.name));
            assert!(!sql.contains("{{"), "{}: unexpanded template in\n{sql}", job.name);
            assert!(job.sql.starts_with("-- "), "{}: a job file starts with what it computes", job.name);
        }
        let report = job("report").and_then(|j| j.sql_with(&[])).unwrap();
        assert!(report.contains("quantile_cont(ttft_ms, 0.50) AS ttft_p50_ms"), "{report}");
        for job in JOBS {
            for key in job.key_columns {
                assert!(
                    job.sql_with(&[]).unwrap().contains(&format!(" AS {key}")) || job.sql.contains(key),
                    "{}: key column {key} is not in its SQL",
                    job.name
                );
            }
        }
    }

    #[test]
    fn counted_metrics_sum_the_counts() {
        assert_eq!(counted("m", "count(*)").unwrap(), "sum(requests)");
        assert_eq!(
            counted("m", "CAST(count(*) FILTER (WHERE s IN ('a', 'b')) AS DOUBLE) / NULLIF(count(*), 0)").unwrap(),
            "CAST(sum(CASE WHEN s IN ('a', 'b') THEN requests ELSE 0 END) AS DOUBLE) / NULLIF(sum(requests), 0)"
        );
        for not_counts in
            ["avg(x)", "count(x)", "quantile_cont(x, 0.5)", "sum(price['total_usd'])", "count(*) FILTER (WHERE (x"]
        {
            assert!(counted("m", not_counts).is_err(), "{not_counts}");
        }
        assert!(expand_metrics("SELECT {{> eos | counted}}").unwrap().contains("THEN requests ELSE 0 END) AS eos"));
        assert!(expand_metrics("SELECT {{> ttft_p50_ms | counted}}").is_err());
        assert!(expand_metrics("SELECT {{> eos | squared}}").is_err());
    }

    #[test]
    fn unknown_metrics_and_parameters_are_errors() {
        assert!(expand_metrics("SELECT {{> nope}}").is_err());
        assert!(expand_metrics("SELECT {{> requests").is_err());
        let confidence = job("confidence").unwrap();
        assert!(confidence.sql_with(&[("nope".into(), "1".into())]).is_err());
        assert!(confidence.sql_with(&[("low_logprob".into(), "1; DROP".into())]).is_err());
    }

    #[test]
    fn durations_become_microseconds() {
        assert_eq!(duration_micros("60s"), Some(60_000_000));
        assert_eq!(duration_micros("60"), Some(60_000_000));
        assert_eq!(duration_micros("250ms"), Some(250_000));
        assert_eq!(duration_micros("1.5m"), Some(90_000_000));
        assert_eq!(duration_micros("2h"), Some(7_200_000_000));
        assert_eq!(duration_micros("1d"), Some(86_400_000_000));
        for bad in ["0s", "-5s", "5 parsecs", "s", "NaNs", ""] {
            assert_eq!(duration_micros(bad), None, "{bad}");
        }
    }

    #[test]
    fn groupings_are_column_names_from_a_fixed_list() {
        assert_eq!(ParamKind::Grouping.to_sql("by", "model_version").unwrap(), "model_version");
        assert_eq!(ParamKind::Grouping.to_sql("by", " variant ").unwrap(), "variant");
        for bad in ["prompt", "model; DROP TABLE requests", "", "MODEL"] {
            assert!(ParamKind::Grouping.to_sql("by", bad).is_err(), "{bad}");
        }
        let latency = job("latency").unwrap().sql_with(&[("by".into(), "variant".into())]).unwrap();
        assert!(latency.contains("SELECT\n  variant,") && latency.contains("GROUP BY variant,"), "{latency}");
    }

    #[test]
    fn labels_are_quoted_or_null_and_never_sql() {
        assert_eq!(ParamKind::Label.to_sql("a", "control-v2").unwrap(), "'control-v2'");
        assert_eq!(ParamKind::Label.to_sql("a", "").unwrap(), "NULL");
        assert!(ParamKind::Label.to_sql("a", "x' OR '1'='1").is_err());
        assert!(ParamKind::Number.to_sql("n", "inf").is_err());
    }
}
