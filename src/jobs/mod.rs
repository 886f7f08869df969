//! SQL jobs: each job is a readable SQL file in `sql/`, compiled into the
//! binary, run over a dataset registered by [`crate::engine`] (tables and UDFs).
//!
//! A job's SQL may include shared metrics from `sql/metrics.sql` as
//! `{{> name}}` (expanded to `<expression> AS name`, so every metric is
//! written once) and take numeric parameters as `{{name}}`.
//!
//! Adding a job: a file `sql/<name>.sql` and one entry in [`JOBS`].

use std::collections::HashMap;
use std::sync::OnceLock;

use arrow::record_batch::RecordBatch;
use datafusion::prelude::SessionContext;

use datafusion::datasource::empty::EmptyTable;
use tokscope_core::catalog::CATALOG;

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
    /// Parameters and their defaults, set with `--param name=value` (numbers only).
    pub params: &'static [(&'static str, &'static str)],
    /// Tables it reads: the job runs only where they hold rows (see [`Job::tables`]).
    pub tables: &'static [&'static str],
    /// The columns a terminal table shows by default (`--wide`: all); empty: all.
    pub key_columns: &'static [&'static str],
}

/// The shared metric expressions (`sql/metrics.sql`).
const METRICS_SQL: &str = include_str!("../../sql/metrics.sql");

macro_rules! job {
    ($name:literal, $about:literal, tables: [$($table:literal),*]
     $(, params: [$(($p:literal, $d:literal)),*])? $(, key: [$($key:literal),*])?) => {
        Job {
            name: $name,
            about: $about,
            sql: include_str!(concat!("../../sql/", $name, ".sql")),
            params: &[$($(($p, $d)),*)?],
            tables: &[$($table),*],
            key_columns: &[$($($key),*)?],
        }
    };
}

/// Every job.
pub const JOBS: &[Job] = &[
    job!("eos", "EOS compliance and silent-truncation rate per model x context bin", tables: ["requests"]),
    job!("latency", "exact TTFT / TPOT / latency percentiles and throughput per model x context bin", tables: ["requests"]),
    job!("cost", "cost (needs --pricing) per model x context bin, unpriced requests counted", tables: ["requests"]),
    job!(
        "kv_cache",
        "KV-cache GiB per request and per GPU (mean, max) per model x context bin",
        tables: ["requests"],
        params: [("tp", "0")]
    ),
    job!(
        "report",
        "eos + latency + cost side by side (what `tokscope run` prints)",
        tables: ["requests"],
        // What a reader scans first; the other columns with `--wide` (docs/cli.md).
        key: ["model", "context_bin", "requests", "eos_compliance_rate", "implicit_truncation_rate",
              "ttft_p50_ms", "tpot_p50_ms", "latency_p95_ms", "cost_usd", "cost_per_1k_tokens"]
    ),
    job!("daily", "cost, EOS compliance, truncation and TTFT per UTC day x model (the dashboard's trends)", tables: ["requests"]),
    job!("jitter", "inter-token latency jitter, first- and last-token latency per model x context bin", tables: ["tokens"]),
    job!("jitter_requests", "per-request itl_std_ms, first_token_ms, last_token_ms", tables: ["tokens"]),
    job!(
        "confidence",
        "logprob / entropy confidence and low-confidence spans per model x context bin x eos_status",
        tables: ["tokens"],
        params: [("low_logprob", "-0.6931471805599453"), ("high_entropy_bits", "1.0")]
    ),
    job!("eos_logprob", "logprob of the last token: EOS tokens vs silent truncations, per model x context bin", tables: ["tokens"]),
    job!("replay", "replay verdicts (natural stop / confirmed truncation / ...) per model x context bin", tables: ["replay_verdicts"]),
    job!(
        "mediation",
        "causal mediation per layer: TE, IE, DE, weight perturbation (mean, 95% bootstrap CI)",
        tables: ["interventions"],
        params: [("resamples", "1000"), ("seed", "0")]
    ),
    job!("mediation_heatmap", "mean indirect effect per metric x layer x restored position", tables: ["interventions"]),
    job!(
        "head_waste",
        "attention layer x head of a kernel trace: actual vs peak FLOPs, waste ratio, flagged heads",
        tables: ["kernels"],
        params: [("peak_tflops", "989"), ("threshold", "0.5"), ("q_len", "0"), ("kv_len", "0"), ("head_dim", "0")]
    ),
    job!(
        "moe_load",
        "MoE router load per layer: expert shares, hot experts, imbalance, CV, routing entropy, redundancy bound",
        tables: ["moe_routing"]
    ),
    job!(
        "drift",
        "intent drift per query-length bin: KL divergence of model vs gold relevance (mean, p95, share above threshold)",
        tables: ["evals"],
        params: [("short_max", "3"), ("medium_max", "6"), ("threshold", "0.85")]
    ),
    job!(
        "quality",
        "answer quality per model x task: mean BLEU-4 against the reference, mean FactScore, f1_fact",
        tables: ["evals"],
        params: [("bleu_weight", "0.4"), ("factscore_weight", "0.6")]
    ),
    job!(
        "composite",
        "composite serving score per model: throughput, p95 latency, recall, semantic similarity",
        tables: ["requests", "evals"],
        params: [("w1", "0.3"), ("w2", "0.25"), ("w3", "0.25"), ("w4", "0.2"), ("qps_scale", "1000"), ("latency_budget_ms", "200")]
    ),
];

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

/// `sql` with every `{{> name}}` replaced by `<metric expression> AS name`.
fn expand_metrics(sql: &str) -> Result<String> {
    let mut out = String::with_capacity(sql.len() * 2);
    let mut rest = sql;
    while let Some(start) = rest.find("{{> ") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 4..];
        let end = after.find("}}").ok_or_else(|| config_err!("unclosed `{{{{> ` in job SQL"))?;
        let name = after[..end].trim();
        let expr = metrics()
            .get(name)
            .ok_or_else(|| config_err!("job SQL includes unknown metric {name:?} (sql/metrics.sql)"))?;
        out.push_str(expr);
        out.push_str(" AS ");
        out.push_str(name);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

impl Job {
    /// The job's SQL with metrics expanded and `{{name}}` parameters replaced
    /// by `overrides`, else their defaults. Values must be numbers, so a
    /// parameter cannot inject SQL.
    pub fn sql_with(&self, overrides: &[(String, String)]) -> Result<String> {
        for (name, _) in overrides {
            if !self.params.iter().any(|(p, _)| p == name) {
                let known: Vec<_> = self.params.iter().map(|(p, _)| *p).collect();
                return Err(config_err!(
                    "job {} has no parameter {name:?} (parameters: {})",
                    self.name,
                    known.join(", ")
                ));
            }
        }
        let mut sql = expand_metrics(self.sql)?;
        for (name, default) in self.params {
            let value = overrides.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v.as_str()).unwrap_or(default);
            if value.trim().parse::<f64>().is_err() {
                return Err(config_err!("parameter {name} must be a number, got {value:?}"));
            }
            sql = sql.replace(&format!("{{{{{name}}}}}"), value.trim());
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
    for &name in job.tables {
        // A table the dataset lacks fails here, with the dataset's own message.
        let provider = ctx.table_provider(name).await?;
        let any: &dyn std::any::Any = provider.as_ref();
        if any.is::<EmptyTable>() {
            let written_by = CATALOG.iter().find(|t| t.name == name).map(|t| (t.written_by, t.description()));
            return Err(Error::NotFound {
                what: format!("job {} reads `{name}`, and the dataset holds no rows of it", job.name),
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
    fn unknown_metrics_and_parameters_are_errors() {
        assert!(expand_metrics("SELECT {{> nope}}").is_err());
        assert!(expand_metrics("SELECT {{> requests").is_err());
        let confidence = job("confidence").unwrap();
        assert!(confidence.sql_with(&[("nope".into(), "1".into())]).is_err());
        assert!(confidence.sql_with(&[("low_logprob".into(), "1; DROP".into())]).is_err());
    }
}
