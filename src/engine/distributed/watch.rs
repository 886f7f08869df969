//! A query's job on the cluster, watched from the client. Ballista 55's
//! client polls the scheduler until the job ends: with no deadline, forever
//! when a restarted scheduler no longer knows the job, and with errors that
//! name neither the node nor what to do. Every query of a cluster session
//! runs under a [`JobWatch`] ([`WatchingPlanner`] wraps Ballista's planner):
//! a job without progress for the job timeout is cancelled, and a job that
//! cannot finish fails with an [`Error::Cluster`] naming the scheduler or the
//! executor and what to do.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ballista_core::execution_plans::DistributedQueryExec;
use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use ballista_core::serde::protobuf::{
    job_status, CancelJobParams, GetJobMetricsParams, GetJobStatusParams, SuccessfulJob,
};
use ballista_core::JobId;
use datafusion::catalog::Session;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::context::QueryPlanner;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use datafusion_proto::protobuf::LogicalPlanNode;
use futures::{FutureExt, StreamExt};
use tonic::transport::Channel;

use super::node;
use crate::error::Error;

/// How often the watch asks the scheduler about the job.
const POLL: Duration = Duration::from_millis(500);

/// How long a scheduler may not know a job it accepted before the job
/// counts as lost with it (a restarted scheduler keeps no jobs).
const FORGOTTEN_AFTER: Duration = Duration::from_secs(5);

/// Longest wait for the scheduler to answer one of the watch's requests.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the watch gave up on a job: the error to report, and the job to
/// cancel once its results are no longer read.
struct Stuck {
    error: Error,
    cancel: Option<JobId>,
}

/// What a client watches its jobs on the scheduler at `host:port` for.
#[derive(Debug, Clone)]
pub struct JobWatch {
    host: String,
    port: u16,
    /// A job whose state and finished stages stay the same this long is cancelled.
    no_progress: Option<Duration>,
}

impl JobWatch {
    /// Watches jobs on `host:port`, cancelling those without progress for `no_progress`.
    pub fn new(host: &str, port: u16, no_progress: Option<Duration>) -> Self {
        JobWatch { host: host.to_string(), port, no_progress }
    }

    fn scheduler(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    async fn client(&self) -> Option<SchedulerGrpcClient<Channel>> {
        let connect = SchedulerGrpcClient::connect(format!("http://{}:{}", self.host, self.port));
        tokio::time::timeout(ANSWER_TIMEOUT, connect).await.ok()?.ok()
    }

    /// The job's status as the scheduler has it: `Err` when it does not
    /// answer, `Ok(None)` when it does not know the job.
    async fn status(
        client: &mut SchedulerGrpcClient<Channel>,
        job: &JobId,
    ) -> Result<Option<job_status::Status>, String> {
        let request = client.get_job_status(GetJobStatusParams { job_id: job.to_string() });
        match tokio::time::timeout(ANSWER_TIMEOUT, request).await {
            Ok(Ok(answer)) => Ok(answer.into_inner().status.and_then(|s| s.status)),
            Ok(Err(e)) => Err(e.message().to_string()),
            Err(_) => Err(format!("no answer in {} s", ANSWER_TIMEOUT.as_secs())),
        }
    }

    /// The job's finished stages (Ballista reports metrics of those only).
    async fn stages_done(client: &mut SchedulerGrpcClient<Channel>, job: &JobId) -> Option<usize> {
        let request = client.get_job_metrics(GetJobMetricsParams { job_id: job.to_string() });
        let answer = tokio::time::timeout(ANSWER_TIMEOUT, request).await.ok()?.ok()?;
        Some(answer.into_inner().stages.len())
    }

    /// Resolves with an error when the job cannot finish: the scheduler no
    /// longer knows it, or it made no progress for the job timeout (then it
    /// is cancelled). Resolves `Ok` once the job ended, or when the scheduler
    /// stopped answering: Ballista's own poll then fails, and [`Self::explain`]
    /// says why.
    async fn until_stuck(&self, job: Arc<DistributedQueryExec<LogicalPlanNode>>) -> Result<(), Stuck> {
        let started = Instant::now();
        let mut client = None;
        let mut known_at: Option<Instant> = None;
        let mut progress: (Option<&'static str>, Option<usize>) = (None, None);
        let mut progressed_at = Instant::now();
        loop {
            tokio::time::sleep(POLL).await;
            let Some(id) = job.job_id() else {
                // Not accepted yet: planning on the scheduler counts against the timeout too.
                if self.no_progress.is_some_and(|limit| started.elapsed() > limit) {
                    return Err(Stuck {
                        error: self.no_progress_error(None, "not accepted by the scheduler", 0),
                        cancel: None,
                    });
                }
                continue;
            };
            if client.is_none() {
                client = self.client().await;
            }
            let Some(c) = client.as_mut() else { return Ok(()) };
            let state = match Self::status(c, &id).await {
                Err(_) => return Ok(()),
                Ok(None) => {
                    // Just accepted, or lost with a restarted scheduler.
                    if known_at.is_some() || started.elapsed() > FORGOTTEN_AFTER {
                        return Err(Stuck { error: self.forgotten(&id), cancel: None });
                    }
                    continue;
                }
                Ok(Some(job_status::Status::Queued(_))) => "queued",
                Ok(Some(job_status::Status::Running(_))) => "running",
                Ok(Some(_)) => return Ok(()),
            };
            known_at.get_or_insert_with(Instant::now);
            let Some(limit) = self.no_progress else { continue };
            let stages = Self::stages_done(c, &id).await;
            let now = (Some(state), stages.or(progress.1));
            if now != progress {
                progress = now;
                progressed_at = Instant::now();
            } else if progressed_at.elapsed() > limit {
                let error = self.no_progress_error(Some(&id), state, progress.1.unwrap_or(0));
                return Err(Stuck { error, cancel: Some(id) });
            }
        }
    }

    /// Asks the scheduler to cancel `job` (best effort: a scheduler that
    /// does not answer has nothing left to run it).
    async fn cancel(&self, job: &JobId) {
        if let Some(mut c) = self.client().await {
            let request = c.cancel_job(CancelJobParams { job_id: job.to_string() });
            let _ = tokio::time::timeout(ANSWER_TIMEOUT, request).await;
        }
    }

    fn no_progress_error(&self, job: Option<&JobId>, state: &str, stages: usize) -> Error {
        let limit = self.no_progress.unwrap_or_default().as_secs();
        let job = job.map(|j| format!("job {j}")).unwrap_or_else(|| "the job".to_string());
        Error::Cluster {
            what: format!(
                "{job} on the Ballista cluster at {} made no progress for {limit} s ({state}, {stages} stage(s) \
                 finished) and was cancelled",
                self.scheduler()
            ),
            hint: "an executor may have hung, or the cluster has none: the scheduler's log names the executors it \
                   lost; check the `tokscope executor` processes and run the command again. A job with stages \
                   longer than that needs a larger --job-timeout (`job_timeout_s` in a run file)"
                .to_string(),
        }
    }

    fn forgotten(&self, job: &JobId) -> Error {
        Error::Cluster {
            what: format!(
                "the Ballista scheduler at {} restarted while job {job} ran, and the job was lost with it",
                self.scheduler()
            ),
            hint: "a scheduler keeps its jobs in memory: run the command again (nothing was printed or written)"
                .to_string(),
        }
    }

    /// What the error `e` of the job `job` means for the user: asks the
    /// scheduler what became of the job.
    async fn explain(&self, job: Option<JobId>, e: DataFusionError) -> DataFusionError {
        let cause = e.to_string();
        let Some(job) = job else {
            // Before the job was accepted: the scheduler refused the plan (an
            // SQL or planning error, as it is), or it stopped answering.
            if self.client().await.is_some() {
                return e;
            }
            return DataFusionError::External(Box::new(Error::Cluster {
                what: format!(
                    "the Ballista scheduler at {} stopped answering before it accepted the job ({cause})",
                    self.scheduler()
                ),
                hint: "start it again (`tokscope scheduler`) and run the command again".to_string(),
            }));
        };
        let status = match self.client().await {
            Some(mut c) => Self::status(&mut c, &job).await,
            None => Err(cause.clone()),
        };
        let ours = match status {
            Err(why) => Error::Cluster {
                what: format!(
                    "the Ballista scheduler at {} stopped answering while job {job} ran ({why})",
                    self.scheduler()
                ),
                hint: "start it again (`tokscope scheduler`) and run the command again: a scheduler keeps its jobs \
                       in memory, so this one is lost (nothing was printed or written)"
                    .to_string(),
            },
            Ok(None) => self.forgotten(&job),
            Ok(Some(job_status::Status::Failed(failed))) => match self.failed(&job, &failed.error) {
                Some(ours) => ours,
                None => return e,
            },
            Ok(Some(job_status::Status::Successful(done))) => match lost_results(&done).await {
                Some(executor) => Error::Cluster {
                    what: format!("the results of job {job} could not be fetched from executor {executor} ({cause})"),
                    hint: "that executor stopped after the job finished, and its results went with it: run the \
                           command again (nothing was printed or written)"
                        .to_string(),
                },
                None => return e,
            },
            Ok(Some(_)) => return e,
        };
        DataFusionError::External(Box::new(ours))
    }

    /// A failed job as an error; `None` for a file that vanished under the
    /// query, which the caller opens the dataset again for
    /// ([`crate::engine::retry_vanished`]).
    fn failed(&self, job: &JobId, failure: &str) -> Option<Error> {
        let failure = failure.trim();
        if crate::error::names_a_missing_object(failure) {
            return None;
        }
        let at = self.scheduler();
        Some(match node::failed_on(failure) {
            Some((executor, cause)) => {
                let hint = if cause.contains("Object Store") || cause.contains("object store") {
                    "that executor could not read the dataset's store: check its network and credentials (its own \
                     environment's AWS_*, GOOGLE_* or AZURE_*), then run the command again"
                } else if cause.contains("Resources exhausted") {
                    "raise that executor's --memory, or narrow the query (fewer columns, a WHERE on date)"
                } else {
                    "that executor's log says more; run the command again once the cause is fixed"
                };
                Error::Cluster {
                    what: format!("job {job} failed on executor {executor} (scheduler {at}): {cause}"),
                    hint: hint.to_string(),
                }
            }
            None if failure.contains("all executors were lost") => Error::Cluster {
                what: format!("job {job} failed on the Ballista cluster at {at}: {failure}"),
                hint: format!(
                    "start executors (`tokscope executor --scheduler {at}`) and run the command again (nothing \
                     was printed or written)"
                ),
            },
            None => Error::Cluster {
                what: format!("job {job} failed on the Ballista cluster at {at}: {failure}"),
                hint: "the scheduler's and the executors' logs say more; run the command again once the cause is \
                       fixed"
                    .to_string(),
            },
        })
    }
}

/// The executor holding some of a finished job's results that no longer
/// takes connections on its Flight port.
async fn lost_results(done: &SuccessfulJob) -> Option<String> {
    for location in &done.partition_location {
        let Some(meta) = &location.executor_meta else { continue };
        let address = (meta.host.as_str(), meta.port as u16);
        let connect = tokio::net::TcpStream::connect(address);
        if !matches!(tokio::time::timeout(ANSWER_TIMEOUT, connect).await, Ok(Ok(_))) {
            return Some(meta.id.clone());
        }
    }
    None
}

/// Ballista's client planner, whose cluster jobs run under a [`JobWatch`].
#[derive(Debug)]
pub struct WatchingPlanner {
    inner: Arc<dyn QueryPlanner + Send + Sync>,
    watch: JobWatch,
}

impl WatchingPlanner {
    /// Wraps `inner` (the planner of a Ballista session).
    pub fn new(inner: Arc<dyn QueryPlanner + Send + Sync>, watch: JobWatch) -> Self {
        WatchingPlanner { inner, watch }
    }
}

#[async_trait]
impl QueryPlanner for WatchingPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session_state: &dyn Session,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let plan = self.inner.create_physical_plan(logical_plan, session_state).await?;
        // Queries the client answers itself (information_schema), and
        // EXPLAIN ANALYZE's wrapper, run as Ballista plans them.
        match plan.downcast_ref::<DistributedQueryExec<LogicalPlanNode>>() {
            Some(job) => Ok(Arc::new(WatchedJobExec::new(Arc::new(job.clone()), self.watch.clone()))),
            None => Ok(plan),
        }
    }
}

/// A cluster job ([`DistributedQueryExec`]) whose results stream ends early,
/// with an explained error, when the job cannot finish.
#[derive(Debug)]
struct WatchedJobExec {
    job: Arc<DistributedQueryExec<LogicalPlanNode>>,
    watch: JobWatch,
}

impl WatchedJobExec {
    fn new(job: Arc<DistributedQueryExec<LogicalPlanNode>>, watch: JobWatch) -> Self {
        WatchedJobExec { job, watch }
    }
}

impl DisplayAs for WatchedJobExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        self.job.fmt_as(t, f)
    }
}

impl ExecutionPlan for WatchedJobExec {
    fn name(&self) -> &str {
        self.job.name()
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.job.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, _children: Vec<Arc<dyn ExecutionPlan>>) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> DfResult<SendableRecordBatchStream> {
        let results = self.job.execute(partition, context)?;
        let (job, watch) = (Arc::clone(&self.job), self.watch.clone());
        let alarm = {
            let (job, watch) = (Arc::clone(&job), watch.clone());
            async move { watch.until_stuck(job).await }.boxed()
        };
        // Batches as they come; the first error (the job's, explained, or
        // the watch's alarm) ends the stream.
        let stream = futures::stream::unfold(Some((results, alarm)), move |state| {
            let (job, watch) = (Arc::clone(&job), watch.clone());
            async move {
                let (mut results, mut alarm) = state?;
                loop {
                    tokio::select! {
                        item = results.next() => return match item {
                            None => None,
                            Some(Ok(batch)) => Some((Ok(batch), Some((results, alarm)))),
                            Some(Err(e)) => Some((Err(watch.explain(job.job_id(), e).await), None)),
                        },
                        stuck = &mut alarm => match stuck {
                            Err(Stuck { error, cancel }) => {
                                // Stop reading the job before cancelling it, so its
                                // "Cancelled" never takes the place of the reason.
                                drop(results);
                                if let Some(id) = cancel {
                                    watch.cancel(&id).await;
                                }
                                return Some((Err(DataFusionError::External(Box::new(error))), None));
                            }
                            // The job ended: only its results are left to read.
                            Ok(()) => alarm = futures::future::pending().boxed(),
                        },
                    }
                }
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), stream)))
    }
}
