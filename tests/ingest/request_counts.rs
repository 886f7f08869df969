//! `request_counts` (docs/metrics.md#request_counts): what ingest counts
//! equals DuckDB's count of the `requests` Parquet, run after run; a dataset
//! whose requests predate the table reads the SQL definition and gets the
//! table, counting its old rows, at its next ingest; compaction keeps it.

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

/// DuckDB's rows of `sql`, over views of the dataset's Parquet files
/// (`requests` and `request_counts`) with hive partitions, as JSON.
fn duckdb(ds: &Path, sql: &str) -> Vec<Value> {
    let views = ["requests", "request_counts"].map(|t| common::parquet_view(ds, t, t));
    common::duckdb_rows(&views, &[sql.to_string()]).remove(0)
}

/// The rows of request_counts in key order, as DuckDB reads the files ingest wrote,
/// and DuckDB's own count of the requests files.
fn counts_and_oracle(ds: &Path) -> (Vec<Value>, Vec<Value>) {
    let order = format!("ORDER BY {KEYS}");
    let ours =
        duckdb(ds, &format!("SELECT {KEYS}, sum(requests) AS requests FROM request_counts GROUP BY ALL {order}"));
    let theirs = duckdb(ds, &format!("SELECT {KEYS}, count(*) AS requests FROM requests GROUP BY ALL {order}"));
    (ours, theirs)
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
    ingest(&[&a], &ds, &[]);
    ingest(&[&b], &ds, &[]);
    let (ours, theirs) = counts_and_oracle(&ds);
    assert!(ours.len() > 100, "many keys over several days, models, arms and bins: {}", ours.len());
    assert_eq!(ours, theirs);
    let sum = total(&ds, "SELECT sum(requests) AS n FROM request_counts");
    assert_eq!(sum, 5000);
    assert_eq!(sum, total(&ds, "SELECT count(*) AS n FROM requests"));
    // The eos job reads them and agrees with DuckDB's eos over the requests rows.
    let d = ds.to_str().unwrap();
    let eos = tokscope(&["job", "eos", "--data", d, "--format", "json"]);
    let rows_sql =
        tokscope(&["job", "eos", "--show-sql"]).replace("FROM request_counts", "FROM request_counts_from_rows");
    let oracle = duckdb(
        &ds,
        &format!(
            "WITH request_counts_from_rows AS (SELECT {KEYS}, count(*) AS requests FROM requests GROUP BY ALL) {}",
            rows_sql.lines().filter(|l| !l.starts_with("--")).collect::<Vec<_>>().join("\n")
        ),
    );
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
    ingest(&[&a], &ds, &[]);
    let eos_with_table = tokscope(&["job", "eos", "--data", d, "--format", "csv"]);
    let all = format!("SELECT {KEYS}, requests FROM request_counts ORDER BY {KEYS}");
    let with_table = query(&ds, &all);

    forget_counts(&ds);
    assert!(!ds.join("request_counts").exists());
    // The view over requests: the same rows, the same job result.
    assert_eq!(query(&ds, &all), with_table);
    assert_eq!(tokscope(&["job", "eos", "--data", d, "--format", "csv"]), eos_with_table);

    // The next ingest counts the old rows with its own: the table is whole again.
    let b = generate(dir.path(), "b.jsonl", "700", "8", "2");
    ingest(&[&b], &ds, &[]);
    assert!(ds.join("request_counts").is_dir());
    let (ours, theirs) = counts_and_oracle(&ds);
    assert_eq!(ours, theirs);
    assert_eq!(total(&ds, "SELECT sum(requests) AS n FROM request_counts"), 2200);

    // Compaction merges the counts files with the rest and changes no count.
    let before = query(&ds, &all);
    tokscope(&["compact", "--data", d, "--quiet"]);
    let (ours, theirs) = counts_and_oracle(&ds);
    assert_eq!(ours, theirs);
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
