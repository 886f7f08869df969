//! Running tokscope's SQL on an Apache DataFusion Ballista cluster: the
//! scheduler and the executor embedded in the `tokscope` binary
//! (`tokscope scheduler`, `tokscope executor`), and [`connect`], which gives
//! a `SessionContext` whose queries run on the cluster with the same tables
//! and SQL functions as the local engine (docs/DISTRIBUTED.md).
//!
//! - Functions travel in the plan ([`codec`]): executors take no pricing or
//!   architecture files and compute exactly what the client asked for.
//! - Object stores are built on demand from each process's environment
//!   ([`EnvStores`]), as locally: credentials never enter a plan.
//! - Both sides use pull scheduling: executors poll the scheduler, so only
//!   the scheduler's port and the executors' Flight ports must be reachable.
//! - Faults are bounded: the scheduler gives up on a silent executor after
//!   [`SchedulerOptions::executor_timeout`] and reruns its tasks elsewhere;
//!   an executor names itself in the errors of the tasks it fails
//!   ([`node`]); the client watches each job ([`watch`]).

pub mod codec;
mod node;
mod watch;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use ballista::prelude::SessionContextExt;
use ballista_core::config::{TaskSchedulingPolicy, BALLISTA_CLIENT_PULL};
use ballista_core::extension::SessionConfigExt;
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use datafusion::execution::object_store::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
use datafusion::execution::FunctionRegistry;
use datafusion::prelude::{SessionConfig, SessionContext};
use object_store::ObjectStore;
use url::Url;

use super::udfs::{self, Plain, Udf};
use super::{register_dataset_for, TableTypes, UdfConfig};
use crate::dataset::DatasetRoot;
use crate::error::{Error, Result};
use crate::store::{self, StoreOptions};
use codec::{LogicalCodec, PhysicalCodec};

/// The scheduler's default port, Ballista's.
pub const DEFAULT_SCHEDULER_PORT: u16 = 50050;

/// Object stores for every process of a cluster: built on first use from
/// the URL and the process's environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`),
/// then reused.
#[derive(Debug, Default)]
pub struct EnvStores {
    registered: DefaultObjectStoreRegistry,
    built: RwLock<HashMap<String, Arc<dyn ObjectStore>>>,
}

impl ObjectStoreRegistry for EnvStores {
    fn register_store(&self, url: &Url, store: Arc<dyn ObjectStore>) -> Option<Arc<dyn ObjectStore>> {
        self.registered.register_store(url, store)
    }

    fn get_store(&self, url: &Url) -> datafusion::error::Result<Arc<dyn ObjectStore>> {
        if let Ok(store) = self.registered.get_store(url) {
            return Ok(store);
        }
        let key = format!("{}://{}", url.scheme(), url.authority());
        if let Some(store) = self.built.read().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(store);
        }
        let store = store::store_for(url, &StoreOptions::default())
            .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
        if let Ok(mut m) = self.built.write() {
            m.insert(key, Arc::clone(&store));
        }
        Ok(store)
    }
}

fn ballista_error(e: ballista_core::error::BallistaError) -> Error {
    config_err!("ballista: {e}")
}

/// A multi-threaded runtime with the large worker stacks Ballista's own
/// binaries use (deep plans recurse while being (de)serialised).
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(32 << 20)
        .build()
        .map_err(|e| Error::io("tokio runtime", e))
}

/// How often a busy executor reports to the scheduler: Ballista 55's pull
/// loop polls at least this often while every slot runs a task (an idle one
/// polls every 50 ms). Not configurable in Ballista.
pub const EXECUTOR_REPORT_INTERVAL: Duration = Duration::from_secs(5);

/// How a scheduler runs, and how soon it gives up on an executor.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// Address clients and executors reach the scheduler at.
    pub bind: SocketAddr,
    /// Host name of the scheduler (Ballista's push mode only).
    pub advertise: Option<String>,
    /// An executor not heard from for this long is lost: its running tasks,
    /// and the finished ones whose output later stages still need, run again
    /// on the other executors.
    pub executor_timeout: Duration,
    /// How often the scheduler looks for lost executors.
    pub executor_check_interval: Duration,
    /// With every executor lost, how long running jobs wait for one to come
    /// back before they fail.
    pub no_executors_grace: Duration,
    /// Attempts of a task failing with an I/O error before its job fails.
    pub task_max_failures: usize,
    /// Attempts of a stage whose input was lost with an executor before its job fails.
    pub stage_max_failures: usize,
}

impl SchedulerOptions {
    /// Seconds an executor may be silent before it is lost (Ballista's own
    /// default is 180, which a client waited out with no word).
    pub const EXECUTOR_TIMEOUT_S: u64 = 30;
    /// Seconds between checks for lost executors.
    pub const EXECUTOR_CHECK_INTERVAL_S: u64 = 2;
    /// Attempts per task and per stage, as Ballista.
    pub const MAX_FAILURES: usize = 4;

    /// tokscope's defaults on `bind`; with no executor left, jobs fail after
    /// the executor timeout.
    pub fn new(bind: SocketAddr) -> Self {
        SchedulerOptions {
            bind,
            advertise: None,
            executor_timeout: Duration::from_secs(Self::EXECUTOR_TIMEOUT_S),
            executor_check_interval: Duration::from_secs(Self::EXECUTOR_CHECK_INTERVAL_S),
            no_executors_grace: Duration::from_secs(Self::EXECUTOR_TIMEOUT_S),
            task_max_failures: Self::MAX_FAILURES,
            stage_max_failures: Self::MAX_FAILURES,
        }
    }

    /// Refuses settings under which a live executor would be taken for lost,
    /// or a lost one never noticed.
    pub fn check(&self) -> Result<()> {
        if self.executor_timeout < 2 * EXECUTOR_REPORT_INTERVAL {
            return Err(config_err!(
                "--executor-timeout {} s is too short: a busy executor reports every {} s, so it must be at least \
                 twice that ({} s)",
                self.executor_timeout.as_secs(),
                EXECUTOR_REPORT_INTERVAL.as_secs(),
                2 * EXECUTOR_REPORT_INTERVAL.as_secs()
            ));
        }
        if self.executor_check_interval.is_zero() || self.executor_check_interval >= self.executor_timeout {
            return Err(config_err!(
                "--executor-check-interval must be at least 1 s and shorter than --executor-timeout ({} s)",
                self.executor_timeout.as_secs()
            ));
        }
        if self.task_max_failures == 0 || self.stage_max_failures == 0 {
            return Err(config_err!("--task-max-failures and --stage-max-failures must be at least 1"));
        }
        Ok(())
    }
}

/// Runs a scheduler until the process is stopped.
pub async fn run_scheduler(options: SchedulerOptions) -> Result<()> {
    options.check()?;
    let bind = options.bind;
    let stores = Arc::new(EnvStores::default());
    let mut config = SchedulerConfig::default()
        .with_scheduler_policy(TaskSchedulingPolicy::PullStaged)
        .with_hostname(options.advertise.unwrap_or_else(|| bind.ip().to_string()))
        .with_port(bind.port())
        .with_no_executors_grace_period_seconds(options.no_executors_grace.as_secs())
        .with_override_config_producer(Arc::new(ballista_core::utils::default_config_producer))
        .with_override_session_builder(Arc::new(move |cfg: SessionConfig| scheduler_session(stores.clone(), cfg)));
    config.bind_host = bind.ip().to_string();
    config.executor_timeout_seconds = options.executor_timeout.as_secs();
    config.expire_dead_executor_interval_seconds = options.executor_check_interval.as_secs();
    config.task_max_failures = options.task_max_failures;
    config.stage_max_failures = options.stage_max_failures;
    config.override_logical_codec = Some(Arc::new(LogicalCodec::default()));
    config.override_physical_codec = Some(Arc::new(PhysicalCodec::default()));
    let cluster = BallistaCluster::new_from_config(&config).await.map_err(ballista_error)?;
    ballista_scheduler::scheduler_process::start_server(cluster, bind, Arc::new(config)).await.map_err(ballista_error)
}

/// How an executor runs.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// The scheduler's host and port.
    pub scheduler: (String, u16),
    /// Address of the executor's Arrow Flight server (task results and shuffles).
    pub bind: SocketAddr,
    /// The host name the scheduler and clients reach the executor at
    /// (default: the bind address; for 0.0.0.0, the address the scheduler
    /// sees the executor connect from).
    pub advertise: Option<String>,
    /// The gRPC port (used by push scheduling only; give each executor on a host its own).
    pub grpc_port: u16,
    /// Tasks run at once (0: one per thread, `--threads`, fewer where the
    /// memory would give each task less than a local query's partition gets).
    pub slots: usize,
    /// Shuffle files and spills (default: a directory under the system temp dir named after the port).
    pub work_dir: Option<PathBuf>,
    /// Memory for task execution, bytes, shared evenly by the slots (`None`:
    /// as the local engine's default pool; `Some(0)`: unbounded).
    pub memory: Option<u64>,
}

/// tokscope's functions as a remote process resolves them by name: the
/// expressions inside Ballista's own plan nodes (shuffles, windows) travel by
/// name, not with tokscope's payloads. The plain functions are the real
/// ones; functions that need configuration are stand-ins that refuse to run
/// ([`udfs::unconfigured`]) rather than use defaults.
///
/// On executors this also hides DataFusion's `quantile_cont` alias of
/// `percentile_cont` (their registry is keyed by name, without aliases). The
/// scheduler's sessions are rebuilt by Ballista (to share a statistics
/// cache), which registers every function again with its aliases in no set
/// order, so there the alias may win: the scheduler relies on the payloads
/// alone, which every tokscope function carries ([`codec`]).
pub fn by_name_functions() -> Vec<Udf> {
    let mut functions: Vec<Udf> = Plain::ALL.iter().map(|p| p.build()).collect();
    functions.extend(udfs::CONFIGURED.iter().map(|name| Udf::Scalar(udfs::unconfigured(name))));
    functions
}

/// What an executor resolves by name: DataFusion's functions, including the
/// nested ones (`cardinality`, `array_*`, `make_array`) that Ballista's
/// default registry leaves out, then tokscope's ([`by_name_functions`]).
fn executor_functions() -> BallistaFunctionRegistry {
    let mut registry = BallistaFunctionRegistry::default();
    for f in ballista_core::extension::ballista_scalar_functions() {
        registry.scalar_functions.entry(f.name().to_string()).or_insert(f);
    }
    for function in by_name_functions() {
        let name = function.name().to_string();
        match function {
            Udf::Scalar(f) => registry.scalar_functions.insert(name, Arc::new(f)).map(drop),
            Udf::Aggregate(f) => registry.aggregate_functions.insert(name, Arc::new(f)).map(drop),
            Udf::Window(f) => registry.window_functions.insert(name, Arc::new(f)).map(drop),
        };
    }
    registry
}

/// The scheduler's session for one job: DataFusion's defaults, the
/// environment's object stores, and tokscope's functions by name.
fn scheduler_session(stores: Arc<EnvStores>, config: SessionConfig) -> datafusion::error::Result<SessionState> {
    let runtime = RuntimeEnvBuilder::new().with_object_store_registry(stores).build_arc()?;
    let mut state =
        SessionStateBuilder::new().with_default_features().with_config(config).with_runtime_env(runtime).build();
    for function in by_name_functions() {
        match function {
            Udf::Scalar(f) => state.register_udf(Arc::new(f)).map(drop)?,
            Udf::Aggregate(f) => state.register_udaf(Arc::new(f)).map(drop)?,
            Udf::Window(f) => state.register_udwf(Arc::new(f)).map(drop)?,
        }
    }
    Ok(state)
}

/// Runs an executor until the process is stopped (SIGINT/SIGTERM drain its tasks).
pub async fn run_executor(options: ExecutorOptions) -> Result<()> {
    let stores = Arc::new(EnvStores::default());
    let work_dir = options
        .work_dir
        .unwrap_or_else(|| std::env::temp_dir().join(format!("tokscope-executor-{}", options.bind.port())));
    std::fs::create_dir_all(&work_dir).map_err(|e| Error::io(work_dir.display(), e))?;
    let spill_dir = work_dir.clone();
    let memory = options.memory.unwrap_or_else(|| crate::engine::MemoryLimit::default_bytes() as u64);
    let slots = match options.slots {
        0 => crate::engine::target_partitions(usize::try_from(memory).unwrap_or(usize::MAX)),
        n => n,
    };
    // Bound to every interface and not told a name: the scheduler takes
    // the address this executor connects from.
    let external_host =
        options.advertise.or_else(|| (!options.bind.ip().is_unspecified()).then(|| options.bind.ip().to_string()));
    let node = node::Node::new(external_host.as_deref(), options.bind.port());
    let config = ExecutorProcessConfig {
        executor_id: node.executor_id(),
        bind_host: options.bind.ip().to_string(),
        external_host,
        port: options.bind.port(),
        grpc_port: options.grpc_port,
        scheduler_host: options.scheduler.0,
        scheduler_port: options.scheduler.1,
        scheduler_connect_timeout_seconds: 30,
        vcores: slots,
        task_scheduling_policy: TaskSchedulingPolicy::PullStaged,
        work_dir: Some(work_dir.display().to_string()),
        memory_pool_size: Some(memory),
        override_logical_codec: Some(Arc::new(LogicalCodec::default())),
        override_physical_codec: Some(Arc::new(PhysicalCodec::default())),
        override_function_registry: Some(Arc::new(executor_functions())),
        override_execution_engine: Some(Arc::new(node::NamingEngine::new(node))),
        override_runtime_producer: Some(Arc::new(move |_: &SessionConfig| {
            RuntimeEnvBuilder::new()
                .with_temp_file_path(spill_dir.clone())
                .with_object_store_registry(stores.clone())
                .build_arc()
        })),
        ..Default::default()
    };
    start_executor_process(Arc::new(config)).await.map_err(ballista_error)
}

/// `ballista://HOST:PORT` (or `df://`) as host and port.
pub fn parse_engine_url(engine: &str) -> Result<(String, u16)> {
    let url = Url::parse(engine)
        .map_err(|e| config_err!("--engine {engine:?} is not a URL ({e}); expected ballista://HOST:PORT"))?;
    if !matches!(url.scheme(), "ballista" | "df") {
        return Err(config_err!("--engine {engine:?}: expected ballista://HOST:PORT"));
    }
    let host = url.host_str().ok_or_else(|| config_err!("--engine {engine:?} names no host"))?;
    Ok((host.to_string(), url.port().unwrap_or(DEFAULT_SCHEDULER_PORT)))
}

/// Where a client's queries run on a cluster, and how long it waits for a
/// job that makes no progress.
#[derive(Debug, Clone)]
pub struct Remote {
    /// `ballista://HOST:PORT` (or `df://`).
    pub url: String,
    /// A job whose state and finished stages stay the same this long is
    /// cancelled and the command fails (`None`: wait as long as it takes).
    pub job_timeout: Option<Duration>,
}

impl Remote {
    /// tokscope's default job timeout: long enough for a stage scanning a
    /// day of a terabyte-a-day fleet on a few executors (docs/DISTRIBUTED.md).
    pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(1800);

    /// The cluster at `url` with the default job timeout.
    pub fn new(url: &str) -> Self {
        Remote { url: url.to_string(), job_timeout: Some(Self::DEFAULT_JOB_TIMEOUT) }
    }

    /// The same cluster with a job timeout of `seconds` (0: none).
    pub fn with_job_timeout(mut self, seconds: Option<u64>) -> Self {
        if let Some(s) = seconds {
            self.job_timeout = (s > 0).then(|| Duration::from_secs(s));
        }
        self
    }
}

/// A session whose queries run on the Ballista cluster `remote` names, with
/// `dataset`'s tables and tokscope's functions configured by `udf`. Fails at
/// once when no scheduler answers there; each query's job is watched
/// ([`watch`]).
pub async fn connect(remote: &Remote, dataset: &DatasetRoot, udf: &UdfConfig) -> Result<SessionContext> {
    let (host, port) = parse_engine_url(&remote.url)?;
    let endpoint = format!("http://{host}:{port}");
    SchedulerGrpcClient::connect(endpoint.clone()).await.map_err(|e| {
        config_err!("no Ballista scheduler answers at {host}:{port} ({e}); start one with `tokscope scheduler`")
    })?;
    let config = SessionConfig::from_env()?
        .upgrade_for_ballista()
        .with_information_schema(true)
        .with_ballista_logical_extension_codec(Arc::new(LogicalCodec::default()))
        .with_ballista_physical_extension_codec(Arc::new(PhysicalCodec::default()))
        // The client polls for its job (the job id is known at once, so the
        // watch follows the job from its start; pushed statuses carry it
        // only from the first update), and the scheduler plans it with its
        // static planner: Ballista 55's adaptive planner loses a job whose
        // executor dies after a stage finished ("Can't find active stage to
        // update stage outputs"), where the static one runs the lost tasks
        // again (docs/DISTRIBUTED.md, "Faults").
        .set_bool(BALLISTA_CLIENT_PULL, true);
    let state = SessionStateBuilder::new().with_config(config).with_default_features().build();
    let ballista = SessionContext::remote_with_state(&format!("df://{host}:{port}"), state).await?.state();
    let planner = watch::WatchingPlanner::new(
        Arc::clone(ballista.query_planner()),
        watch::JobWatch::new(&host, port, remote.job_timeout),
    );
    let ctx = SessionContext::new_with_state(
        SessionStateBuilder::new_from_existing(ballista).with_query_planner(Arc::new(planner)).build(),
    );
    // The client sends its optimised logical plan. These two rules alias
    // struct-field reads (`price_usd(..)['total_usd']`) as
    // `__datafusion_extracted_N` columns that an aggregate above refers to
    // by a name the plan's serialised form does not preserve: the
    // scheduler then refuses the plan ("No field named
    // sum(__datafusion_extracted_4)"). The scheduler optimises the plan
    // again, with them, before it runs it.
    for rule in ["extract_leaf_expressions", "push_down_leaf_projections"] {
        ctx.remove_optimizer_rule(rule);
    }
    // After the context exists: Ballista's upgrade of the state replaces its
    // function lists with DataFusion's, so tokscope's go in now.
    register_dataset_for(&ctx, dataset, udf, TableTypes::Plain).await?;
    Ok(ctx)
}
