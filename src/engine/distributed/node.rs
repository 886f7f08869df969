//! An executor's name in what it reports. Its id is `HOST:PORT#PID` (the
//! address clients fetch its results from, and its process), and the error
//! of a task it fails starts with `on executor HOST:PORT#PID:`, so a job that
//! fails says on which node; the client reads it back ([`failed_on`]).

use std::sync::Arc;

use arrow::error::ArrowError;
use ballista_core::error::BallistaError;
use ballista_core::serde::protobuf::{ShuffleWritePartition, TaskColumnStats, WindowStateReport};
use ballista_core::JobId;
use ballista_executor::execution_engine::{DefaultExecutionEngine, ExecutionEngine, QueryStageExecutor};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;

/// How a task's error names the executor it failed on.
const FAILED_ON: &str = "on executor ";

/// One executor process.
#[derive(Debug, Clone)]
pub struct Node {
    id: Arc<str>,
}

impl Node {
    /// The executor advertised as `host` (else this machine's host name)
    /// with its Flight server on `port`. The process id makes an executor
    /// restarted on the same port another executor to the scheduler, so the
    /// tasks its previous process ran are rescheduled, not waited for.
    pub fn new(host: Option<&str>, port: u16) -> Self {
        let host = host.map(str::to_string).unwrap_or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "executor".to_string())
        });
        Node { id: format!("{host}:{port}#{}", std::process::id()).into() }
    }

    /// The id the executor registers with.
    pub fn executor_id(&self) -> String {
        self.id.to_string()
    }
}

/// Ballista's execution engine, whose tasks' errors name this executor.
///
/// Remote shuffle reads open a connection per fetch: Ballista's connection
/// pool is private to its crate and comes only with its own engine.
pub struct NamingEngine {
    inner: DefaultExecutionEngine,
    node: Node,
}

impl NamingEngine {
    /// The engine of the executor `node`.
    pub fn new(node: Node) -> Self {
        NamingEngine { inner: DefaultExecutionEngine::new(), node }
    }
}

impl ExecutionEngine for NamingEngine {
    fn create_query_stage_exec(
        &self,
        job_id: JobId,
        stage_id: usize,
        task_id: usize,
        global_output_partition_ids: Vec<usize>,
        plan: Arc<dyn ExecutionPlan>,
        work_dir: &str,
        config: &SessionConfig,
    ) -> Result<Arc<dyn QueryStageExecutor>> {
        let inner = self.inner.create_query_stage_exec(
            job_id,
            stage_id,
            task_id,
            global_output_partition_ids,
            plan,
            work_dir,
            config,
        )?;
        Ok(Arc::new(NamedStage { inner, node: self.node.clone() }))
    }
}

/// One task's stage, run by Ballista's executor, failing with this node's name.
#[derive(Debug)]
struct NamedStage {
    inner: Arc<dyn QueryStageExecutor>,
    node: Node,
}

impl std::fmt::Display for NamedStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.inner, f)
    }
}

/// `e`, a task's error on the executor `node`, naming it. Errors Ballista
/// handles by their kind keep it: an I/O error is retried, a lost shuffle
/// input makes its stage run again (its kind travels as a `BallistaError`).
/// A shuffle read whose connection to another executor broke is an I/O error
/// here: Ballista 55 reports a connection that breaks before the partition's
/// first message as an Arrow error and fails the job, where the task's next
/// try would find the other executor gone and have its stage run again.
fn named(node: &Node, e: DataFusionError) -> DataFusionError {
    let ballista = match e.find_root() {
        DataFusionError::IoError(_) => return e,
        DataFusionError::External(inner) => inner.downcast_ref::<BallistaError>(),
        _ => None,
    };
    if ballista.is_some_and(handled_by_kind) {
        return e;
    }
    let message = e.to_string();
    let message = message.split(DataFusionError::BACK_TRACE_SEP).next().unwrap_or_default().trim_end();
    let message = format!("{FAILED_ON}{}: {message}", node.id);
    if ballista.is_some_and(broken_connection) {
        return DataFusionError::IoError(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, message));
    }
    DataFusionError::Execution(message)
}

/// The errors Ballista acts on by their kind (a wrapped DataFusion error may
/// carry a fetch failure or an I/O error further down, which it looks for).
fn handled_by_kind(e: &BallistaError) -> bool {
    matches!(
        e,
        BallistaError::FetchFailed(..)
            | BallistaError::IoError(_)
            | BallistaError::Cancelled
            | BallistaError::DataFusionError(_)
    )
}

/// What a broken gRPC connection says in the Arrow error Ballista's shuffle
/// reader makes of it (lower case).
const BROKEN_CONNECTION: &[&str] = &[
    "h2 protocol error",
    "error reading a body from connection",
    "transport error",
    "broken pipe",
    "connection reset",
];

/// A shuffle read whose connection broke (the other executor stopped).
fn broken_connection(e: &BallistaError) -> bool {
    let BallistaError::ArrowError(arrow) = e else { return false };
    let ArrowError::IpcError(message) = arrow.as_ref() else { return false };
    let message = message.to_lowercase();
    BROKEN_CONNECTION.iter().any(|sign| message.contains(sign))
}

#[async_trait::async_trait]
impl QueryStageExecutor for NamedStage {
    async fn execute_query_stage(
        &self,
        task_id: usize,
        context: Arc<TaskContext>,
    ) -> Result<Vec<ShuffleWritePartition>> {
        self.inner.execute_query_stage(task_id, context).await.map_err(|e| named(&self.node, e))
    }

    fn collect_plan_metrics(&self) -> Vec<MetricsSet> {
        self.inner.collect_plan_metrics()
    }

    fn collect_runtime_stats_reports(&self) -> Vec<ballista_core::serde::protobuf::RuntimeStatsReport> {
        self.inner.collect_runtime_stats_reports()
    }

    fn collect_window_state_reports(&self) -> Result<Vec<WindowStateReport>> {
        self.inner.collect_window_state_reports().map_err(|e| named(&self.node, e))
    }

    fn collect_column_stats(&self) -> Vec<TaskColumnStats> {
        self.inner.collect_column_stats()
    }
}

/// The executor a job's failure names, and what failed there: read back
/// from the scheduler's text, which quotes the task's error as Rust debug
/// output (`...: DataFusionError(Execution("on executor H:P#PID: ..."))`).
pub fn failed_on(failure: &str) -> Option<(String, String)> {
    let failure = failure.trim();
    let at = failure.find(FAILED_ON)?;
    let (head, tail) = (&failure[..at], &failure[at + FAILED_ON.len()..]);
    // The wrappers opened before the quote: `Execution("` closes as `"))`.
    let opened = head.rsplit(": ").next().unwrap_or_default();
    let closing = format!("\"{}", ")".repeat(opened.matches('(').count()));
    let tail = if opened.ends_with('"') { tail.strip_suffix(closing.as_str()).unwrap_or(tail) } else { tail };
    let (executor, cause) = tail.split_once(": ")?;
    let cause = cause.replace("\\\"", "\"").replace("\\n", "\n").replace("\\\\", "\\");
    Some((executor.to_string(), cause))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballista_core::serde::protobuf::{failed_task::FailedReason, FailedTask};

    #[test]
    fn a_failure_names_the_executor_and_its_cause() {
        let failure = "Job failed due to stage 2 failed: Task failed due to runtime execution error: \
                       DataFusionError(Execution(\"on executor 10.0.0.7:50051#4242: Object Store error: \
                       Generic S3 error: GET \\\"http://s3/lake\\\" (os error 111)\"))\n";
        let (executor, cause) = failed_on(failure).unwrap();
        assert_eq!(executor, "10.0.0.7:50051#4242");
        assert_eq!(cause, "Object Store error: Generic S3 error: GET \"http://s3/lake\" (os error 111)");
        assert_eq!(failed_on("Job failed due to stage 2 failed: Task cancelled"), None);
    }

    /// How the executor reports `e` to the scheduler once named.
    fn reported(e: DataFusionError) -> FailedTask {
        FailedTask::from(BallistaError::from(named(&Node::new(Some("10.0.0.7"), 50051), e)))
    }

    #[test]
    fn a_shuffle_read_cut_off_by_a_stopped_executor_is_retried() {
        // As a task reported a peer killed mid-fetch: Ballista 55's shuffle
        // reader's Arrow error, shared by the operator that read it.
        let cut = "code: 'Unknown error', message: \"h2 protocol error: error reading a body from connection\", \
                   source: hyper::Error(Body, Error { kind: Io(Custom { kind: BrokenPipe, error: \"stream closed \
                   because of a broken pipe\" }) })";
        let e = BallistaError::ArrowError(Box::new(ArrowError::IpcError(cut.to_string())));
        let task = reported(DataFusionError::Shared(Arc::new(e.into_datafusion())));
        assert!(task.retryable, "{task:?}");
        assert!(matches!(task.failed_reason, Some(FailedReason::IoError(_))), "{task:?}");
        assert!(task.error.contains("on executor 10.0.0.7:50051#"), "{}", task.error);
    }

    #[test]
    fn other_task_errors_name_the_executor_and_keep_their_kind() {
        let corrupt = BallistaError::ArrowError(Box::new(ArrowError::IpcError("Unexpected EOS".to_string())));
        let task = reported(corrupt.into_datafusion());
        assert!(!task.retryable, "{task:?}");
        assert!(matches!(task.failed_reason, Some(FailedReason::ExecutionError(_))), "{task:?}");
        let (executor, cause) = failed_on(&task.error).unwrap();
        assert!(executor.starts_with("10.0.0.7:50051#"), "{executor}");
        assert!(cause.contains("Unexpected EOS"), "{cause}");
        let lost = BallistaError::FetchFailed("10.0.0.8:50051#7".into(), 1, 0, "connection refused".into());
        assert!(matches!(reported(lost.into_datafusion()).failed_reason, Some(FailedReason::FetchPartitionError(_))));
    }
}
