//! Independent readers of a dataset: the DuckDB, Polars and pandas examples
//! of `docs/reading.md`, run as written on the ingested sample logs, give the
//! same per-model answers as tokscope's own query. Polars (a Rust Parquet
//! reader) is a third implementation besides pyarrow and DuckDB.

use crate::common;

use serde_json::Value;

/// The ```python block of `docs/reading.md` that starts with `# reader: <name>`.
fn doc_block(name: &str) -> String {
    let doc = std::fs::read_to_string(common::repo().join("docs/reading.md")).unwrap();
    doc.split("```python\n")
        .skip(1)
        .filter_map(|b| b.split_once("\n```").map(|(code, _)| code))
        .find(|code| code.starts_with(&format!("# reader: {name}")))
        .unwrap_or_else(|| panic!("docs/reading.md has no block `# reader: {name}`"))
        .to_string()
}

/// Runs the documented block for `reader` against `data`, then `tail`
/// (which prints JSON); returns the parsed output.
fn run_doc(reader: &str, data: &std::path::Path, tail: &str) -> Value {
    let block = doc_block(reader).replace("lake/", &format!("{}/", data.display()));
    let out = common::python(&format!("{block}\nimport json\n{tail}"));
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{reader}: {e}: {out}"))
}

#[test]
fn duckdb_polars_and_pandas_read_the_dataset_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("lake");
    common::ingest(&[common::repo().join("sample_logs").to_str().unwrap()], &data, &[]);
    let ours = common::query(
        &data,
        "SELECT model, count(*) AS n, CAST(max(date) AS VARCHAR) AS last_day, sum(prompt_tokens) AS prompt_tokens, \
         sum(CASE WHEN eos_status = 'implicit_truncation' THEN 1 ELSE 0 END) AS truncated, avg(ttft_ms) AS ttft_mean \
         FROM requests GROUP BY model ORDER BY model",
    );
    assert!(ours.len() >= 9, "{ours:?}");
    let expected: Vec<Value> =
        ours.iter().map(|r| Value::from(vec![r["model"].clone(), r["n"].clone(), r["last_day"].clone()])).collect();
    let expected = Value::from(expected);

    let duck = run_doc("duckdb", &data, "print(json.dumps([[m, n, d.isoformat()] for m, n, d in per_model]))");
    assert_eq!(duck, expected, "DuckDB");
    let pandas = run_doc(
        "pandas",
        &data,
        "print(json.dumps([[r.model, int(r.n), r.last_day.isoformat()] for r in per_model.itertuples()]))",
    );
    assert_eq!(pandas, expected, "pandas");

    // Polars: the documented counts, and a few values recomputed from the columns.
    let polars = run_doc(
        "polars",
        &data,
        r#"
assert requests.collect_schema()["date"] == pl.Date
more = (
    requests.group_by("model")
    .agg(
        pl.col("prompt_tokens").sum().alias("prompt_tokens"),
        (pl.col("eos_status") == "implicit_truncation").sum().alias("truncated"),
        pl.col("ttft_ms").mean().alias("ttft_mean"),
    )
    .sort("model")
    .collect()
)
tokens = pl.scan_parquet("{tokens}", hive_partitioning=True).select(pl.len()).collect().item()
print(json.dumps({
    "per_model": [[r["model"], r["n"], r["last_day"].isoformat()] for r in per_model.iter_rows(named=True)],
    "more": [[r["model"], r["prompt_tokens"], r["truncated"], r["ttft_mean"]] for r in more.iter_rows(named=True)],
    "tokens": tokens,
}))
"#
        .replace("{tokens}", &format!("{}/tokens/**/*.parquet", data.display()))
        .as_str(),
    );
    assert_eq!(polars["per_model"], expected, "Polars");
    for (ours, theirs) in ours.iter().zip(polars["more"].as_array().unwrap()) {
        assert_eq!(theirs[0], ours["model"]);
        assert_eq!(theirs[1], ours["prompt_tokens"], "{}", ours["model"]);
        assert_eq!(theirs[2], ours["truncated"], "{}", ours["model"]);
        match (theirs[3].as_f64(), ours["ttft_mean"].as_f64()) {
            (Some(a), Some(b)) => assert!((a - b).abs() <= 1e-9 * b.abs(), "{}: {a} vs {b}", ours["model"]),
            (a, b) => assert_eq!(a, b, "{}: both null", ours["model"]),
        }
    }
    let tokens = common::query(&data, "SELECT count(*) AS n FROM tokens");
    assert_eq!(polars["tokens"], tokens[0]["n"]);
    assert!(polars["tokens"].as_u64().unwrap() > 0);
}
