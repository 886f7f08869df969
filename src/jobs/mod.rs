//! SQL jobs: each job is a readable SQL file in `sql/`, compiled into the
//! binary, run over a dataset registered by [`crate::engine`] (tables and UDFs).

pub mod cli;

use arrow::record_batch::RecordBatch;
use datafusion::prelude::SessionContext;

use crate::engine;
use crate::error::{Error, Result};

/// A named SQL job.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    /// Name used on the command line.
    pub name: &'static str,
    /// What it computes.
    pub about: &'static str,
    /// Its SQL (from `sql/<name>.sql`); `{{name}}` marks a parameter.
    pub sql: &'static str,
    /// Parameters and their defaults, set with `--param name=value` (numbers only).
    pub params: &'static [(&'static str, &'static str)],
}

/// Every job.
pub const JOBS: &[Job] = &[
    Job {
        name: "eos",
        about: "EOS compliance and silent-truncation rate per model x context bin",
        sql: include_str!("../../sql/eos.sql"),
        params: &[],
    },
    Job {
        name: "latency",
        about: "exact TTFT / TPOT / latency percentiles and throughput per model x context bin",
        sql: include_str!("../../sql/latency.sql"),
        params: &[],
    },
    Job {
        name: "cost",
        about: "cost (needs --pricing) per model x context bin, unpriced requests counted",
        sql: include_str!("../../sql/cost.sql"),
        params: &[],
    },
    Job {
        name: "kv_cache",
        about: "KV-cache GiB per request (mean, max) per model x context bin",
        sql: include_str!("../../sql/kv_cache.sql"),
        params: &[],
    },
    Job {
        name: "report",
        about: "eos + latency + cost side by side (what `tokscope run` prints)",
        sql: include_str!("../../sql/report.sql"),
        params: &[],
    },
    Job {
        name: "jitter",
        about: "inter-token latency jitter, first- and last-token latency per model x context bin",
        sql: include_str!("../../sql/jitter.sql"),
        params: &[],
    },
    Job {
        name: "jitter_requests",
        about: "per-request itl_std_ms, first_token_ms, last_token_ms",
        sql: include_str!("../../sql/jitter_requests.sql"),
        params: &[],
    },
    Job {
        name: "confidence",
        about: "logprob / entropy confidence and low-confidence spans per model x context bin x eos_status",
        sql: include_str!("../../sql/confidence.sql"),
        params: &[("low_logprob", "-0.6931471805599453"), ("high_entropy_bits", "1.0")],
    },
    Job {
        name: "eos_logprob",
        about: "logprob of the last token: EOS tokens vs silent truncations, per model x context bin",
        sql: include_str!("../../sql/eos_logprob.sql"),
        params: &[],
    },
    Job {
        name: "replay",
        about: "Replay verdicts (natural stop / confirmed truncation / ...) per model x context bin",
        sql: include_str!("../../sql/replay.sql"),
        params: &[],
    },
    // The SQL gives per-prompt effects; `mediation::run_job` adds the mean and
    // bootstrap CI per layer (resampling is done in Rust, not SQL).
    Job {
        name: "mediation",
        about:
            "causal mediation per layer: TE, IE, DE, weight perturbation (mean, 95% bootstrap CI)",
        sql: crate::mediation::EFFECTS_SQL,
        params: &[],
    },
];

/// Looks a job up by name.
pub fn job(name: &str) -> Result<&'static Job> {
    JOBS.iter().find(|j| j.name == name).ok_or_else(|| {
        let names: Vec<_> = JOBS.iter().map(|j| j.name).collect();
        Error::Config(format!("unknown job {name:?}; jobs: {}", names.join(", ")))
    })
}

impl Job {
    /// The job's SQL with `{{name}}` parameters replaced by `overrides`, else
    /// their defaults. Values must be numbers, so a parameter cannot inject SQL.
    pub fn sql_with(&self, overrides: &[(String, String)]) -> Result<String> {
        for (name, _) in overrides {
            if !self.params.iter().any(|(p, _)| p == name) {
                let known: Vec<_> = self.params.iter().map(|(p, _)| *p).collect();
                return Err(Error::Config(format!("job {} has no parameter {name:?} (parameters: {})", self.name, known.join(", "))));
            }
        }
        let mut sql = self.sql.to_string();
        for (name, default) in self.params {
            let value = overrides.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v.as_str()).unwrap_or(default);
            if value.trim().parse::<f64>().is_err() {
                return Err(Error::Config(format!("parameter {name} must be a number, got {value:?}")));
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

/// Runs a job with parameter overrides (`--param name=value`).
pub async fn run_job_with(ctx: &SessionContext, job: &Job, params: &[(String, String)]) -> Result<Vec<RecordBatch>> {
    if job.name == "mediation" {
        // Its SQL yields per-prompt effects; the report is their bootstrap summary.
        use crate::mediation::effects::{DEFAULT_RESAMPLES, DEFAULT_SEED};
        return crate::mediation::run_job(ctx, DEFAULT_RESAMPLES, DEFAULT_SEED).await;
    }
    engine::run_sql(ctx, &job.sql_with(params)?, false).await
}
