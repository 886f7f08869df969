//! Where long model work (a causal-tracing grid) reports its progress: the
//! `tokscope` binary draws a bar on a terminal; library callers may ignore it.

/// Receives the size of a piece of work, then its steps as they finish.
pub trait ProgressSink: Sync {
    /// The work has `total` steps of kind `what` ("cells").
    fn begin(&self, total: u64, what: &str) {
        let _ = (total, what);
    }

    /// `n` more steps are done.
    fn inc(&self, n: u64);
}

/// No progress reported.
impl ProgressSink for () {
    fn inc(&self, _: u64) {}
}
