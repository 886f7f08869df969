//! `tokscope scheduler` and `tokscope executor`: a Ballista cluster that
//! runs tokscope's jobs and SQL (docs/DISTRIBUTED.md). Both log Ballista's
//! warnings on stderr (`TOKSCOPE_LOG` sets the level), so an operator reads
//! there which executor was lost or which task failed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tokscope::engine::distributed::{self, ExecutorOptions, SchedulerOptions};

/// `tokscope scheduler`.
#[derive(clap::Args)]
pub struct SchedulerArgs {
    /// Address to listen on (clients use `--engine ballista://HOST:PORT`).
    #[arg(long, default_value = "0.0.0.0:50050")]
    bind: SocketAddr,
    /// Host name executors and clients reach this scheduler at (default: the bind address).
    #[arg(long)]
    advertise: Option<String>,
    /// Seconds without word from an executor before it is lost: its running
    /// tasks, and finished ones whose output is still needed, run again on the
    /// others. A busy executor reports every 5 s; at least 10.
    #[arg(long, value_name = "SECONDS", default_value_t = SchedulerOptions::EXECUTOR_TIMEOUT_S)]
    executor_timeout: u64,
    /// Seconds between the scheduler's checks for lost executors.
    #[arg(long, value_name = "SECONDS", default_value_t = SchedulerOptions::EXECUTOR_CHECK_INTERVAL_S)]
    executor_check_interval: u64,
    /// With every executor lost, seconds running jobs wait for one to come
    /// back before they fail (default: --executor-timeout).
    #[arg(long, value_name = "SECONDS")]
    no_executors_grace: Option<u64>,
    /// Attempts of a task failing with an I/O error before its job fails.
    #[arg(long, value_name = "N", default_value_t = SchedulerOptions::MAX_FAILURES)]
    task_max_failures: usize,
    /// Attempts of a stage whose input was lost with an executor before its job fails.
    #[arg(long, value_name = "N", default_value_t = SchedulerOptions::MAX_FAILURES)]
    stage_max_failures: usize,
}

/// `tokscope executor`.
#[derive(clap::Args)]
pub struct ExecutorArgs {
    /// The scheduler, HOST:PORT.
    #[arg(long)]
    scheduler: String,
    /// Address of this executor's Arrow Flight server (task results, shuffles).
    #[arg(long, default_value = "0.0.0.0:50051")]
    bind: SocketAddr,
    /// Host name the scheduler and clients reach this executor at (default: the bind address; for 0.0.0.0,
    /// the address the scheduler sees this executor connect from).
    #[arg(long)]
    advertise: Option<String>,
    /// gRPC port (give each executor on a host its own).
    #[arg(long, default_value_t = 50052)]
    grpc_port: u16,
    /// Tasks run at once (0: one per thread of --threads, fewer when --memory
    /// would give each less than 64 MiB).
    #[arg(long, default_value_t = 0)]
    slots: usize,
    /// Directory for shuffle files and spills (one per executor).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Memory for task execution in bytes, shared by the slots (default: half
    /// the memory available, cgroup limit included, as a local query; 0: unbounded).
    #[arg(long)]
    memory: Option<u64>,
}

/// Ballista's log records (and tokscope's) on stderr, one line each, at
/// the level `TOKSCOPE_LOG` names (`error`, `warn`, `info`, `debug`,
/// `trace`; default `warn`); other crates' below `error` are dropped.
struct StderrLog {
    level: log::LevelFilter,
}

impl log::Log for StderrLog {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        let ours = ["ballista", "tokscope"].iter().any(|t| metadata.target().starts_with(t));
        metadata.level() <= if ours { self.level } else { log::LevelFilter::Error }
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ");
            eprintln!("{now} {} {}: {}", record.level(), record.target(), record.args());
        }
    }

    fn flush(&self) {}
}

fn start_logging() {
    let level = std::env::var("TOKSCOPE_LOG").ok().and_then(|l| l.parse().ok()).unwrap_or(log::LevelFilter::Warn);
    if log::set_logger(Box::leak(Box::new(StderrLog { level }))).is_ok() {
        log::set_max_level(level.max(log::LevelFilter::Error));
    }
}

/// Runs `tokscope scheduler` until stopped.
pub fn run_scheduler(args: &SchedulerArgs) -> anyhow::Result<()> {
    start_logging();
    let options = SchedulerOptions {
        advertise: args.advertise.clone(),
        executor_timeout: Duration::from_secs(args.executor_timeout),
        executor_check_interval: Duration::from_secs(args.executor_check_interval),
        no_executors_grace: Duration::from_secs(args.no_executors_grace.unwrap_or(args.executor_timeout)),
        task_max_failures: args.task_max_failures,
        stage_max_failures: args.stage_max_failures,
        ..SchedulerOptions::new(args.bind)
    };
    options.check()?;
    eprintln!(
        "tokscope scheduler listening on {}; an executor silent for {} s is lost",
        args.bind, args.executor_timeout
    );
    distributed::runtime()?.block_on(distributed::run_scheduler(options))?;
    Ok(())
}

/// Runs `tokscope executor` until stopped.
pub fn run_executor(args: &ExecutorArgs) -> anyhow::Result<()> {
    start_logging();
    let (host, port) = distributed::parse_engine_url(&format!("ballista://{}", args.scheduler))?;
    let options = ExecutorOptions {
        scheduler: (host, port),
        bind: args.bind,
        advertise: args.advertise.clone(),
        grpc_port: args.grpc_port,
        slots: args.slots,
        work_dir: args.work_dir.clone(),
        memory: args.memory,
    };
    eprintln!("tokscope executor on {} for scheduler {}", args.bind, args.scheduler);
    distributed::runtime()?.block_on(distributed::run_executor(options))?;
    Ok(())
}
