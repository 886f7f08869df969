//! `request_counts` (docs/metrics.md#request_counts): what ingest counts
//! equals DuckDB's count of the `requests` Parquet by keys it derives from
//! the logged columns (`tests/oracles/request_metrics.sql`), run after run,
//! and the eos job over the counts equals DuckDB's eos from its definition;
//! a dataset whose requests predate the table reads the SQL definition and
//! gets the table, counting its old rows, at its next ingest; compaction
//! keeps it.

use crate::common;

use std::path::Path;

use common::{ingest, query, tokscope};
use serde_json::Value;

const KEYS: &str = "date, model, variant, context_bin, context_bin_lo, eos_status, has_eos_marker";

fn generate(dir: &Path, name: &str, requests: &str, seed: &str, days: &str) -> String {
    let out = dir.join(name);
    let out = out.to_str().unwrap();
    tokscope(&[
        "generate",
        "--requests",
        requests,
        "--seed",
        seed,
        "--days",
        days,
        "--arms",
        "control,candidate",
        "--out",
        out,
    ]);
    out.to_string()
}

/// Generated Anthropic lines over two days, without arms: null `variant`,
/// and no raw output (null `has_eos_marker`).
fn anthropic(dir: &Path, name: &str, requests: &str, seed: &str) -> String {
    let out = dir.join(name);
    let out = out.to_str().unwrap();
    tokscope(&[
        "generate",
        "--format",
        "anthropic",
        "--requests",
        requests,
        "--seed",
        seed,
        "--days",
        "2",
        "--out",
        out,
    ]);
    out.to_string()
}

/// DuckDB's rows of each query, over views of the dataset's Parquet files
/// (`request_counts` with its hive partitions) and the oracle's views of
/// `requests` computed from their definitions, as JSON.
fn duckdb(ds: &Path, queries: &[String]) -> Vec<Vec<Value>> {
    let mut setup = common::request_metrics_oracle(ds);
    setup.push(common::parquet_view(ds, "request_counts", "request_counts"));
    common::duckdb_rows(&setup, queries)
}

/// The rows of request_counts in key order, as DuckDB reads the files ingest
/// wrote, and DuckDB's own count of the requests by the keys it derives from
/// the logged columns.
fn counts_and_oracle(ds: &Path) -> (Vec<Value>, Vec<Value>) {
    let order = format!("ORDER BY {KEYS}");
    let mut rows = duckdb(
        ds,
        &[
            format!("SELECT {KEYS}, sum(requests) AS requests FROM request_counts GROUP BY ALL {order}"),
            format!("SELECT {KEYS}, requests FROM request_counts_by_definition {order}"),
        ],
    );
    let theirs = rows.pop().unwrap();
    (rows.pop().unwrap(), theirs)
}

fn total(ds: &Path, sql: &str) -> i64 {
    query(ds, sql)[0]["n"].as_i64().unwrap()
}

#[test]
fn ingest_counts_every_request_run_after_run() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let a = generate(dir.path(), "a.jsonl", "3000", "5", "4");
    let b = generate(dir.path(), "b.jsonl", "2000", "6", "3");
    let c = anthropic(dir.path(), "c.jsonl", "300", "9");
    ingest(&[&a], &ds, &[]);
    ingest(&[&b, &c], &ds, &[]);
    let (ours, theirs) = counts_and_oracle(&ds);
    common::assert_rows_match("request_counts", &ours, &theirs, 0.0);
    assert!(theirs.len() > 100, "many keys over several days, models, arms and bins: {}", theirs.len());
    let nulls = theirs.iter().filter(|r| r["variant"].is_null() && r["has_eos_marker"].is_null()).count();
    assert!(nulls > 10, "keys with null variant and has_eos_marker: {nulls}");
    let sum = total(&ds, "SELECT sum(requests) AS n FROM request_counts");
    assert_eq!(sum, 5300);
    assert_eq!(sum, total(&ds, "SELECT count(*) AS n FROM requests"));
    // The eos job reads them and agrees with DuckDB's eos from its definition over the requests rows.
    let eos = tokscope(&["job", "eos", "--data", ds.to_str().unwrap(), "--format", "json"]);
    let eos_sql = "SELECT * EXCLUDE (context_bin_lo) FROM eos_by_definition ORDER BY model, context_bin_lo NULLS LAST";
    let oracle = duckdb(&ds, &[eos_sql.to_string()]).remove(0);
    let ours: Vec<Value> = eos.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    common::assert_rows_match("eos", &ours, &oracle, 1e-12);
}

/// Removes `request_counts` from a dataset as if an older tokscope wrote it.
fn forget_counts(ds: &Path) {
    std::fs::remove_dir_all(ds.join("request_counts")).unwrap();
    let list = ds.join("_files.json");
    let mut files: Value = serde_json::from_slice(&std::fs::read(&list).unwrap()).unwrap();
    files["files"].as_object_mut().unwrap().retain(|path, _| !path.starts_with("request_counts/"));
    std::fs::write(&list, serde_json::to_vec(&files).unwrap()).unwrap();
}

#[test]
fn older_datasets_read_the_definition_then_get_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let d = ds.to_str().unwrap();
    let a = generate(dir.path(), "a.jsonl", "1500", "7", "3");
    let c = anthropic(dir.path(), "c.jsonl", "200", "10");
    ingest(&[&a, &c], &ds, &[]);
    let eos_with_table = tokscope(&["job", "eos", "--data", d, "--format", "csv"]);
    let all = format!("SELECT {KEYS}, requests FROM request_counts ORDER BY {KEYS}");
    let with_table = query(&ds, &all);

    forget_counts(&ds);
    assert!(!ds.join("request_counts").exists());
    // The view over requests: the same rows, the same job result, DuckDB's count by the definition.
    let from_view = query(&ds, &all);
    let oracle = common::duckdb_rows(
        &common::request_metrics_oracle(&ds),
        &[format!("SELECT {KEYS}, requests FROM request_counts_by_definition ORDER BY {KEYS}")],
    );
    common::assert_rows_match("request_counts view", &from_view, &oracle[0], 0.0);
    assert_eq!(from_view, with_table);
    assert_eq!(tokscope(&["job", "eos", "--data", d, "--format", "csv"]), eos_with_table);

    // The next ingest counts the old rows with its own: the table is whole again.
    let b = generate(dir.path(), "b.jsonl", "700", "8", "2");
    ingest(&[&b], &ds, &[]);
    assert!(ds.join("request_counts").is_dir());
    let (ours, theirs) = counts_and_oracle(&ds);
    common::assert_rows_match("request_counts", &ours, &theirs, 0.0);
    assert_eq!(total(&ds, "SELECT sum(requests) AS n FROM request_counts"), 2400);

    // Compaction merges the counts files with the rest and changes no count.
    let before = query(&ds, &all);
    tokscope(&["compact", "--data", d, "--quiet"]);
    let (ours, theirs) = counts_and_oracle(&ds);
    common::assert_rows_match("request_counts", &ours, &theirs, 0.0);
    let after = query(
        &ds,
        &format!("SELECT {KEYS}, sum(requests) AS requests FROM request_counts GROUP BY ALL ORDER BY {KEYS}"),
    );
    assert_eq!(after.len(), before.len());
    for (x, y) in after.iter().zip(&before) {
        assert_eq!(x["requests"].as_i64(), y["requests"].as_i64());
    }
}

#[test]
fn a_run_without_requests_writes_no_counts() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let bad = common::write_file(dir.path(), "bad.jsonl", "not json\n{\"also\": \"not a request\"}\n");
    let summary = ingest(&[&bad], &ds, &[]);
    assert_eq!(summary["totals"]["rows_written"].as_u64(), Some(0));
    assert!(!ds.join("request_counts").exists());
    let o = common::tokscope_output(&["job", "eos", "--data", ds.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("holds none"), "{}", String::from_utf8_lossy(&o.stderr));
}
