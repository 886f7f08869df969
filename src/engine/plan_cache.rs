//! The optimized logical plans of read-only SQL, kept per session: a
//! statement run again in the same session (the SQL shell, a dashboard
//! service, `query --repeat`) skips parsing, analysis and logical
//! optimization, the bulk of DataFusion's planning for tokscope's jobs
//! (docs/performance-history.md, "Planning each job, rule by rule"), and goes
//! straight to physical planning. A plan is valid while its session lives:
//! read-only sessions register no table, view or setting after opening
//! (opening the dataset again makes a new session), so the plan's tables are
//! the ones it was made from.

use std::collections::VecDeque;
use std::sync::Mutex;

use datafusion::logical_expr::LogicalPlan;

/// Plans kept, over every session of the process; the oldest goes first.
const ENTRIES: usize = 64;

/// (session id, SQL text, optimized plan), newest last.
static CACHE: Mutex<VecDeque<(String, String, LogicalPlan)>> = Mutex::new(VecDeque::new());

/// The optimized plan of `sql` in session `session`, if made before.
pub fn get(session: &str, sql: &str) -> Option<LogicalPlan> {
    let cache = CACHE.lock().ok()?;
    cache.iter().rev().find(|(s, q, _)| s == session && q == sql).map(|(_, _, plan)| plan.clone())
}

/// Keeps the optimized plan of `sql` in session `session`.
pub fn put(session: &str, sql: &str, plan: LogicalPlan) {
    let Ok(mut cache) = CACHE.lock() else { return };
    cache.retain(|(s, q, _)| !(s == session && q == sql));
    if cache.len() >= ENTRIES {
        cache.pop_front();
    }
    cache.push_back((session.to_string(), sql.to_string(), plan));
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Int64Array, RecordBatch};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::MemTable;

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
}
