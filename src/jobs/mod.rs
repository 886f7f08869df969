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
    /// Its SQL (from `sql/<name>.sql`).
    pub sql: &'static str,
}

/// Every job.
pub const JOBS: &[Job] = &[
    Job {
        name: "eos",
        about: "EOS compliance and silent-truncation rate per model x context bin",
        sql: include_str!("../../sql/eos.sql"),
    },
    Job {
        name: "latency",
        about: "exact TTFT / TPOT / latency percentiles and throughput per model x context bin",
        sql: include_str!("../../sql/latency.sql"),
    },
    Job {
        name: "cost",
        about: "cost (needs --pricing) per model x context bin, unpriced requests counted",
        sql: include_str!("../../sql/cost.sql"),
    },
    Job {
        name: "kv_cache",
        about: "KV-cache GiB per request (mean, max) per model x context bin",
        sql: include_str!("../../sql/kv_cache.sql"),
    },
    Job {
        name: "report",
        about: "eos + latency + cost side by side (what `tokscope run` prints)",
        sql: include_str!("../../sql/report.sql"),
    },
    Job {
        name: "replay",
        about: "Replay verdicts (natural stop / confirmed truncation / ...) per model x context bin",
        sql: include_str!("../../sql/replay.sql"),
    },
    // The SQL gives per-prompt effects; `mediation::run_job` adds the mean and
    // bootstrap CI per layer (resampling is done in Rust, not SQL).
    Job {
        name: "mediation",
        about:
            "causal mediation per layer: TE, IE, DE, weight perturbation (mean, 95% bootstrap CI)",
        sql: crate::mediation::EFFECTS_SQL,
    },
];

/// Looks a job up by name.
pub fn job(name: &str) -> Result<&'static Job> {
    JOBS.iter().find(|j| j.name == name).ok_or_else(|| {
        let names: Vec<_> = JOBS.iter().map(|j| j.name).collect();
        Error::Config(format!("unknown job {name:?}; jobs: {}", names.join(", ")))
    })
}

/// Runs a job in a session where the dataset is registered.
pub async fn run_job(ctx: &SessionContext, job: &Job) -> Result<Vec<RecordBatch>> {
    if job.name == "mediation" {
        // Its SQL yields per-prompt effects; the report is their bootstrap summary.
        use crate::mediation::effects::{DEFAULT_RESAMPLES, DEFAULT_SEED};
        return crate::mediation::run_job(ctx, DEFAULT_RESAMPLES, DEFAULT_SEED).await;
    }
    engine::run_sql(ctx, job.sql, false).await
}
