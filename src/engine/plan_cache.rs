//! The plans of read-only SQL, kept per session: a statement run again in
//! the same session (the SQL shell, a dashboard service, `query --repeat`)
//! skips parsing, analysis and logical optimization, and, where its physical
//! plan can run again, physical planning too: the kept physical plan gets
//! fresh operators ([`reset_plan_states`]) and runs. A plan is valid while
//! its session lives: read-only sessions register no table, view or setting
//! after opening (opening the dataset again makes a new session), and a
//! session's file list does not change, so the plan's tables and files are
//! the ones it was made from.
//!
//! A physical plan is kept only where DataFusion can run it again
//! ([`reset_plan_states`]'s limits): no dynamic filter (a join's or a top-k's
//! filter pushed into a scan is filled by the first run), no recursive
//! query, no `EXPLAIN ANALYZE` (its counters would add up over runs), and
//! no job on a cluster (the cluster plans it). Those keep their logical plan
//! alone.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use datafusion::common::tree_node::TreeNode;
use datafusion::error::Result;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::execution_plan::reset_plan_states;
use datafusion::physical_plan::{displayable, ExecutionPlan};

/// Plans kept, over every session of the process; the oldest goes first.
const ENTRIES: usize = 64;

/// What is kept of one statement.
#[derive(Clone)]
pub struct Kept {
    /// The optimized logical plan.
    pub logical: LogicalPlan,
    /// The physical plan, where it can run again ([`reusable`]).
    physical: Option<Arc<dyn ExecutionPlan>>,
}

impl Kept {
    /// The kept physical plan with fresh operators (each run gets its own),
    /// ready to run; `None` when only the logical plan was kept.
    pub fn physical(&self) -> Option<Result<Arc<dyn ExecutionPlan>>> {
        self.physical.as_ref().map(|plan| reset_plan_states(Arc::clone(plan)))
    }
}

/// (session id, SQL text, plans), newest last.
static CACHE: Mutex<VecDeque<(String, String, Kept)>> = Mutex::new(VecDeque::new());

/// The plans of `sql` in session `session`, if made before.
pub fn get(session: &str, sql: &str) -> Option<Kept> {
    let cache = CACHE.lock().ok()?;
    cache.iter().rev().find(|(s, q, _)| s == session && q == sql).map(|(_, _, kept)| kept.clone())
}

/// Keeps the optimized plan of `sql` in session `session`, and its physical
/// plan where that can run again: a copy with fresh operators, never run, so
/// that the cache holds nothing a run keeps in its operators (a join's build
/// side).
pub fn put(session: &str, sql: &str, logical: LogicalPlan, physical: &Arc<dyn ExecutionPlan>) {
    let physical = reusable(physical).then(|| reset_plan_states(Arc::clone(physical)).ok()).flatten();
    let Ok(mut cache) = CACHE.lock() else { return };
    cache.retain(|(s, q, _)| !(s == session && q == sql));
    if cache.len() >= ENTRIES {
        cache.pop_front();
    }
    cache.push_back((session.to_string(), sql.to_string(), Kept { logical, physical }));
}

/// Operators whose plan is not run again: a recursive query, `EXPLAIN
/// ANALYZE`, a job on a cluster.
const NOT_RUN_AGAIN: [&str; 3] = ["RecursiveQueryExec", "AnalyzeExec", "DistributedQueryExec"];

/// Whether `plan` can run again after [`reset_plan_states`]: none of
/// [`NOT_RUN_AGAIN`], and no dynamic filter (they show in the plan's text).
fn reusable(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let once = plan.exists(|node| Ok(NOT_RUN_AGAIN.contains(&node.name())));
    once.is_ok_and(|found| !found) && !displayable(plan.as_ref()).indent(true).to_string().contains("DynamicFilter")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Int64Array, RecordBatch};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::MemTable;
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::prelude::ParquetReadOptions;

    use crate::engine::{new_session, plan_sql, run_plan, runtime};

    #[test]
    fn a_statement_run_again_in_a_session_reuses_its_plan_and_gives_the_same_rows() {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![3, 1, 2]))]).unwrap();
        let ctx = new_session().unwrap();
        ctx.register_table("t", Arc::new(MemTable::try_new(schema, vec![vec![batch]]).unwrap())).unwrap();
        let sql = "SELECT sum(x) AS s, max(x) AS m FROM t WHERE x > 1";
        let rt = runtime().unwrap();
        let run = || rt.block_on(async { run_plan(&ctx, plan_sql(&ctx, sql, false).await?).await }).unwrap();
        assert!(super::get(&ctx.session_id(), sql).is_none());
        let first = run();
        assert!(super::get(&ctx.session_id(), sql).is_some(), "kept after the first run");
        assert_eq!(first, run());
        // Another session plans its own; statements that may write are never kept.
        assert!(super::get(&new_session().unwrap().session_id(), sql).is_none());
        rt.block_on(plan_sql(&ctx, "SELECT 1 AS one", true)).unwrap();
        assert!(super::get(&ctx.session_id(), "SELECT 1 AS one").is_none());
    }

    #[test]
    fn a_physical_plan_is_kept_only_where_it_can_run_again() {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let batch =
            RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![3, 1, 2, 5, 4]))]).unwrap();
        let ctx = new_session().unwrap();
        ctx.register_table("t", Arc::new(MemTable::try_new(schema, vec![vec![batch.clone()]]).unwrap())).unwrap();
        let rt = runtime().unwrap();
        let run = |sql: &str| rt.block_on(async { run_plan(&ctx, plan_sql(&ctx, sql, false).await?).await }).unwrap();
        let kept = |sql: &str| super::get(&ctx.session_id(), sql).unwrap().physical().is_some();
        // Joins, windows and sorts run again from fresh operators and give the same rows.
        let again = "SELECT a.x, count(*) OVER () AS n FROM t a CROSS JOIN t b WHERE a.x = b.x + 1 ORDER BY a.x";
        let first = run(again);
        assert!(kept(again));
        assert_eq!(run(again), first);
        assert_eq!(run(again), first);
        let top = "SELECT x FROM t ORDER BY x DESC LIMIT 2";
        let first = run(top);
        assert!(kept(top));
        assert_eq!(run(top), first);
        // Over Parquet, the top-k's dynamic filter goes into the scan and is
        // filled by the run: that plan is made again each time.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.parquet");
        let mut writer = ArrowWriter::try_new(std::fs::File::create(&file).unwrap(), batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        rt.block_on(ctx.register_parquet("p", file.to_str().unwrap(), ParquetReadOptions::default())).unwrap();
        let top = "SELECT x FROM p ORDER BY x DESC LIMIT 2";
        let first = run(top);
        assert!(!kept(top), "a plan with a dynamic filter in its scan was kept");
        assert_eq!(run(top), first);
        // EXPLAIN ANALYZE counts its run's rows: made again each time.
        run("EXPLAIN ANALYZE SELECT sum(x) FROM t");
        assert!(!kept("EXPLAIN ANALYZE SELECT sum(x) FROM t"));
    }
}
