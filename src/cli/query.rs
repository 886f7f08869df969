//! `tokscope query` and `tokscope job`: SQL over a dataset, results out.

use datafusion::prelude::SessionContext;
use tokscope::dataset::DatasetRoot;
use tokscope::engine::distributed::Remote;
use tokscope::engine::{self, UdfConfig};
use tokscope::export;
use tokscope::jobs;

use super::args::{job_help, parse_param, EngineArgs, OutputArgs, UdfArgs};

/// `tokscope query`.
#[derive(clap::Args)]
pub struct QueryArgs {
    /// The dataset (local directory or object-store URL).
    #[arg(long)]
    data: String,
    /// The SQL to run (may start with a `--` comment, like the files in `sql/`).
    #[arg(allow_hyphen_values = true)]
    sql: String,
    #[command(flatten)]
    output: OutputArgs,
    /// Allow DDL/DML statements (ad-hoc SQL is read-only by default).
    #[arg(long)]
    allow_write: bool,
    /// Print the query's wall time (planning and execution, file listing and
    /// Parquet footers included; process start and output excluded) to
    /// stderr, the part of it spent planning (parse, optimise, physical
    /// plan), then the time opening the dataset took before it (session,
    /// file list, tables).
    #[arg(long)]
    timing: bool,
    /// With --timing: run the query this many times in the same session
    /// (one timing line each; the output is the last run's), to tell a cold
    /// process's first query from the warm ones after it.
    #[arg(long, default_value_t = 1, requires = "timing", value_name = "N")]
    repeat: usize,
    #[command(flatten)]
    udf: UdfArgs,
    #[command(flatten)]
    engine: EngineArgs,
}

/// `tokscope job`.
#[derive(clap::Args)]
pub struct JobArgs {
    /// The job.
    #[arg(help = job_help())]
    name: String,
    /// A job parameter, `name=value` (repeatable), e.g. `--param low_logprob=-1.5` for `confidence`.
    #[arg(long = "param", value_name = "NAME=VALUE", value_parser = parse_param)]
    params: Vec<(String, String)>,
    /// The dataset (local directory or object-store URL); not needed with --show-sql.
    #[arg(long, required_unless_present = "show_sql")]
    data: Option<String>,
    /// Print the job's SQL (shared metrics and parameters expanded) instead of running it.
    #[arg(long)]
    show_sql: bool,
    #[command(flatten)]
    udf: UdfArgs,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    engine: EngineArgs,
}

/// A session with `data`'s tables and the UDFs configured by `udf`: local,
/// its queries held to `limit`, or on the cluster `engine` names (whose
/// executors hold their own memory limits).
pub async fn session(
    data: &str,
    udf: &UdfConfig,
    engine: Option<&Remote>,
    limit: &engine::MemoryLimit,
) -> tokscope::Result<SessionContext> {
    engine::open(&DatasetRoot::parse(data)?, udf, engine, limit).await
}

/// Runs `tokscope query`.
pub fn run_query(args: &QueryArgs) -> anyhow::Result<()> {
    export::check_destination(args.output.format, args.output.output.as_deref())?;
    let udf = args.udf.config()?;
    // Opened again if a compaction replaces a file the query was told of.
    let batches = engine::runtime()?.block_on(engine::retry_vanished(|| async {
        let opened = std::time::Instant::now();
        let ctx = session(&args.data, &udf, args.engine.remote().as_ref(), &args.udf.memory.limit()).await?;
        let mut open_s = Some(opened.elapsed().as_secs_f64());
        let mut runs = 0;
        loop {
            let start = std::time::Instant::now();
            let plan = engine::plan_sql(&ctx, &args.sql, args.allow_write).await?;
            let planned = start.elapsed().as_secs_f64();
            let batches = engine::run_plan(&ctx, plan).await?;
            if args.timing {
                let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
                let elapsed = start.elapsed().as_secs_f64();
                let head = format!("elapsed: {elapsed:.4} s ({rows} rows; planning {planned:.4} s)");
                match open_s.take() {
                    Some(open) => eprintln!("{head}; opening the dataset before it: {open:.4} s"),
                    None => eprintln!("{head}; run again in the same session"),
                }
            }
            runs += 1;
            if runs >= args.repeat.max(1) {
                return Ok::<_, tokscope::Error>(batches);
            }
        }
    }))?;
    export::write_output(&batches, args.output.format, args.output.output.as_deref(), &args.output.table.layout(&[]))?;
    Ok(())
}

/// Runs `tokscope job`.
pub fn run_job(args: &JobArgs) -> anyhow::Result<()> {
    let job = jobs::job(&args.name)?;
    if args.show_sql {
        println!("{}", job.sql_with(&args.params)?);
        return Ok(());
    }
    let Some(data) = &args.data else { anyhow::bail!("tokscope job needs --data DATASET") };
    // Bad parameters are refused before the dataset is opened.
    job.sql_with(&args.params)?;
    export::check_destination(args.output.format, args.output.output.as_deref())?;
    let udf = args.udf.config()?;
    let batches = engine::runtime()?.block_on(engine::retry_vanished(|| async {
        let ctx = session(data, &udf, args.engine.remote().as_ref(), &args.udf.memory.limit()).await?;
        jobs::run_job_with(&ctx, job, &args.params).await
    }))?;
    let layout = args.output.table.layout(job.key_columns);
    export::write_output(&batches, args.output.format, args.output.output.as_deref(), &layout)?;
    Ok(())
}
