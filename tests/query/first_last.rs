//! `first_value` / `last_value` ordered by one integer go through tokscope's
//! rule and `first_last_by` (src/engine/first_last.rs); DataFusion's own
//! implementation is the reference. Both sessions run the same queries over
//! the same shuffled table (groups spread over partitions and batches, null
//! values, null keys, a FILTER), with and without partial aggregation, and
//! must print the same rows.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tokscope::engine::{self, UdfConfig};

/// One row: `(g, k, v, s, b, id)`.
type Row = (String, Option<i32>, Option<f64>, Option<String>, Option<bool>, Option<i64>);

/// Rows `(g, k, v, s, b, id)`: per group a permutation of keys 0..n, at most one
/// of them null (ties between null keys would make the reference's choice
/// depend on arrival order), values null one time in five; `id` numbers the
/// rows of the whole table (one null), a key for the query without groups.
fn table() -> (Arc<Schema>, Vec<Vec<RecordBatch>>) {
    let mut rng = StdRng::seed_from_u64(17);
    let mut rows: Vec<Row> = Vec::new();
    for g in 0..300 {
        let n = rng.random_range(1..40);
        let mut keys: Vec<Option<i32>> = (0..n).map(Some).collect();
        if rng.random_bool(0.3) {
            keys[0] = None;
        }
        for k in keys {
            let v = rng.random_bool(0.8).then(|| rng.random::<f64>());
            let s = rng.random_bool(0.8).then(|| format!("t{}", rng.random_range(0..1000)));
            let b = rng.random_bool(0.8).then(|| rng.random_bool(0.5));
            let id = (g != 7 || k.is_some_and(|k| k > 0)).then_some(rows.len() as i64);
            rows.push((format!("g{g:03}"), k, v, s, b, id));
        }
    }
    rows.shuffle(&mut rng);
    let schema = Arc::new(Schema::new(vec![
        Field::new("g", DataType::Utf8, false),
        Field::new("k", DataType::Int32, true),
        Field::new("v", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("b", DataType::Boolean, true),
        Field::new("id", DataType::Int64, true),
    ]));
    let batch = |rows: &[Row]| {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0.as_str()))),
            Arc::new(rows.iter().map(|r| r.1).collect::<Int32Array>()),
            Arc::new(rows.iter().map(|r| r.2).collect::<Float64Array>()),
            Arc::new(rows.iter().map(|r| r.3.clone()).collect::<StringArray>()),
            Arc::new(rows.iter().map(|r| r.4).collect::<BooleanArray>()),
            Arc::new(rows.iter().map(|r| r.5).collect::<Int64Array>()),
        ];
        RecordBatch::try_new(Arc::clone(&schema), columns).unwrap()
    };
    // Four partitions of batches of 97 rows.
    let partitions = rows.chunks(rows.len().div_ceil(4)).map(|p| p.chunks(97).map(batch).collect()).collect();
    (schema, partitions)
}

async fn session(ours: bool, skip_partial: bool) -> SessionContext {
    let mut config = SessionConfig::new().with_target_partitions(4).with_batch_size(64);
    if skip_partial {
        let options = config.options_mut();
        options.execution.skip_partial_aggregation_probe_rows_threshold = 1;
        options.execution.skip_partial_aggregation_probe_ratio_threshold = 0.0;
    }
    let ctx = SessionContext::new_with_config(config);
    if ours {
        engine::register_udfs(&ctx, &UdfConfig::new().unwrap());
    }
    let (schema, partitions) = table();
    ctx.register_table("t", Arc::new(MemTable::try_new(schema, partitions).unwrap())).unwrap();
    ctx
}

async fn run(ctx: &SessionContext, sql: &str) -> String {
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string()
}

/// The calls of one query ordered by `key`: each function, column and ordering.
fn calls(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    for dir in ["", " DESC", " NULLS FIRST", " DESC NULLS LAST"] {
        let order = format!("{key}{dir}");
        for f in ["first_value", "last_value"] {
            for col in ["v", "s", "b"] {
                out.push(format!("{f}({col} ORDER BY {order})"));
            }
        }
    }
    out.push(format!("last_value(s ORDER BY {key}) FILTER (WHERE v > 0.5)"));
    out.push(format!("first_value(v ORDER BY {key} DESC) FILTER (WHERE b)"));
    out
}

/// The calls as a select list.
fn select(key: &str) -> String {
    calls(key).iter().enumerate().map(|(i, c)| format!("{c} AS c{i}")).collect::<Vec<_>>().join(", ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_and_last_value_by_an_integer_equal_datafusions_own() {
    let grouped = format!("SELECT g, {} FROM t GROUP BY g ORDER BY g", select("k"));
    let whole = format!("SELECT {} FROM t", select("id"));
    for skip_partial in [false, true] {
        let (reference, ours) = (session(false, skip_partial).await, session(true, skip_partial).await);
        for sql in [&grouped, &whole] {
            let want = run(&reference, sql).await;
            assert!(want.lines().count() > 4, "{want}");
            assert_eq!(run(&ours, sql).await, want, "{sql} (skip_partial: {skip_partial})");
        }
    }
    // The rule did run: the plan calls first_last_by, and keeps the output names.
    let ours = session(true, false).await;
    let plan = run(&ours, &format!("EXPLAIN {grouped}")).await;
    assert!(plan.contains("first_last_by"), "{plan}");
    let names: Vec<String> = ours
        .sql("SELECT first_value(v ORDER BY k) FROM t")
        .await
        .unwrap()
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["first_value(t.v) ORDER BY [t.k ASC NULLS LAST]"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_orderings_stay_with_datafusion() {
    let ours = session(true, false).await;
    // Two keys, a float key, IGNORE NULLS: DataFusion's own aggregate.
    for sql in [
        "SELECT g, first_value(v ORDER BY k, s) FROM t GROUP BY g",
        "SELECT g, last_value(s ORDER BY v) FROM t GROUP BY g",
        "SELECT g, last_value(v ORDER BY k) IGNORE NULLS FROM t GROUP BY g",
    ] {
        let plan = run(&ours, &format!("EXPLAIN {sql}")).await;
        assert!(!plan.contains("first_last_by"), "{sql}: {plan}");
    }
}
