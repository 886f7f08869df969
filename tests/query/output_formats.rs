//! Snapshots of each text output format: the report of the bundled sample
//! logs as `table` (key columns, at a fixed terminal width, and `--wide`),
//! `csv` and `json`. A change in layout is a reviewed diff of
//! `tests/snapshots/` (regenerate with `TOKSCOPE_BLESS=1 cargo test --test
//! output_formats`), never an accident. The samples are ingested on one
//! thread (one writer: the rows in one order on any machine) and the job runs
//! on one partition: float sums then add up in one order, so the last digit
//! is the same every run.

use crate::common;

use std::process::Command;

/// `tokscope job report` over `data` with `extra` flags; `columns`: the
/// `$COLUMNS` it sees (none: unset). Stdout is a pipe, never a terminal.
fn report(data: &std::path::Path, columns: Option<&str>, extra: &[&str]) -> String {
    let pricing = common::repo().join("config/pricing.example.toml");
    let mut cmd = Command::new(common::bin());
    cmd.args(["job", "report", "--data", data.to_str().unwrap(), "--pricing", pricing.to_str().unwrap()])
        .args(extra)
        .env("DATAFUSION_EXECUTION_TARGET_PARTITIONS", "1")
        .env_remove("COLUMNS");
    if let Some(c) = columns {
        cmd.env("COLUMNS", c);
    }
    let out = cmd.output().expect("run tokscope");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

fn snapshot(name: &str, actual: &str) {
    let path = common::repo().join("tests/snapshots").join(name);
    common::assert_snapshot(&path, actual, "cargo test --test query output_formats::");
}

#[test]
fn report_of_the_samples_in_every_text_format() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    common::ingest(&[common::repo().join("sample_logs").to_str().unwrap()], &data, &["--threads", "1"]);
    // Not a terminal and no $COLUMNS: the key columns, rounded, no width limit.
    let table = report(&data, None, &[]);
    snapshot("report.table", &table);
    // A 100-column terminal: headers wrap at `_`, columns that still do not fit are named below.
    let narrow = report(&data, Some("100"), &[]);
    snapshot("report.100.table", &narrow);
    assert!(narrow.lines().all(|l| console_width(l) <= 100), "{narrow}");
    // --wide: every column, whatever the width.
    let wide = report(&data, Some("100"), &["--wide"]);
    snapshot("report.wide.table", &wide);
    assert_eq!(wide, report(&data, None, &["--wide"]), "--wide ignores $COLUMNS");
    for format in ["csv", "json"] {
        snapshot(&format!("report.{format}"), &report(&data, Some("100"), &["--format", format]));
    }
}

/// Terminal cells of a line (the tables hold ASCII and `…` only).
fn console_width(line: &str) -> usize {
    line.chars().count()
}

#[test]
fn table_values_are_rounded_and_csv_keeps_every_digit() {
    // One row whose every column kind is known, checked by hand.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    common::ingest(&[common::repo().join("sample_logs").to_str().unwrap()], &data, &["--threads", "1"]);
    let sql = "SELECT 'm' AS model, CAST(1234567 AS BIGINT) AS requests, 0.785714 AS eos_rate, \
               14431.14 AS latency_ms, 0.0230459 AS cost_usd, 0.00529306 AS cost_per_1k_tokens, \
               49.7424 AS decode_tps";
    let run = |format: &str| {
        let out = Command::new(common::bin())
            .args(["query", "--data", data.to_str().unwrap(), "--format", format, sql])
            .env_remove("COLUMNS")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        run("table"),
        "model   requests  eos_rate  latency_ms  cost_usd  cost_per_1m_tokens  decode_tps\n\
         -----  ---------  --------  ----------  --------  ------------------  ----------\n\
         m      1,234,567     78.6%    14,431.1   0.02305               5.293       49.74\n"
    );
    assert_eq!(
        run("csv"),
        "model,requests,eos_rate,latency_ms,cost_usd,cost_per_1k_tokens,decode_tps\n\
         m,1234567,0.785714,14431.14,0.0230459,0.00529306,49.7424\n"
    );
}

#[test]
fn csv_writes_list_columns_as_text_and_json_keeps_them_nested() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    common::ingest(&[common::repo().join("tests/data/formats/moe_routing.sample.csv").to_str().unwrap()], &data, &[]);
    let sql = "SELECT 1 AS layer, [0.25, 0.75] AS shares, CAST(NULL AS DOUBLE[]) AS none, ['a'] AS names";
    let csv = common::tokscope(&["query", "--data", data.to_str().unwrap(), "--format", "csv", sql]);
    assert_eq!(csv, "layer,shares,none,names\n1,\"[0.25, 0.75]\",,[a]\n");
    let json = common::tokscope(&["query", "--data", data.to_str().unwrap(), "--format", "json", sql]);
    assert_eq!(json.trim(), r#"{"layer":1,"shares":[0.25,0.75],"names":["a"]}"#);
    // The job whose CSV needs it.
    let moe = common::tokscope(&["job", "moe_load", "--data", data.to_str().unwrap(), "--format", "csv"]);
    assert!(moe.lines().count() > 1 && moe.contains("\"[0."), "{moe}");
}
