//! `tokscope scheduler` and `tokscope executor`: a Ballista cluster that
//! runs tokscope's jobs and SQL (docs/DISTRIBUTED.md).

use std::net::SocketAddr;
use std::path::PathBuf;

use tokscope::engine::distributed::{self, ExecutorOptions};

/// `tokscope scheduler`.
#[derive(clap::Args)]
pub struct SchedulerArgs {
    /// Address to listen on (clients use `--engine ballista://HOST:PORT`).
    #[arg(long, default_value = "0.0.0.0:50050")]
    bind: SocketAddr,
    /// Host name executors and clients reach this scheduler at (default: the bind address).
    #[arg(long)]
    advertise: Option<String>,
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

/// Runs `tokscope scheduler` until stopped.
pub fn run_scheduler(args: &SchedulerArgs) -> anyhow::Result<()> {
    eprintln!("tokscope scheduler listening on {}", args.bind);
    distributed::runtime()?.block_on(distributed::run_scheduler(args.bind, args.advertise.clone()))?;
    Ok(())
}

/// Runs `tokscope executor` until stopped.
pub fn run_executor(args: &ExecutorArgs) -> anyhow::Result<()> {
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
