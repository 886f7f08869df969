//! Ad-hoc SQL reads the dataset and nothing else: every way a statement could
//! reach a local file or a URL outside it (path and URL tables, table
//! functions, `CREATE EXTERNAL TABLE`, `COPY`, `SET` of the catalog location,
//! DML) is refused with a clear message and a non-zero exit, in `tokscope
//! query` and in the `tokscope sql` shell, and nothing is read or written.

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{bin, ingest, repo};

/// (statement, what the refusal says), with `{dir}` the directory outside the dataset.
const WAYS_IN: &[(&str, &str)] = &[
    ("SELECT * FROM '{dir}/outside.csv'", "not found"),
    ("SELECT * FROM 'file://{dir}/outside.csv'", "not found"),
    ("SELECT * FROM '{dir}/ds/../outside.csv'", "not found"),
    ("SELECT * FROM 'https://example.com/outside.csv'", "not found"),
    ("SELECT * FROM 's3://bucket/outside.parquet'", "not found"),
    ("SELECT * FROM read_csv('{dir}/outside.csv')", "not found"),
    ("SELECT * FROM read_parquet('{dir}/outside.csv')", "not found"),
    ("SELECT * FROM read_json('{dir}/outside.csv')", "not found"),
    ("CREATE EXTERNAL TABLE t STORED AS CSV LOCATION '{dir}/outside.csv'", "DDL not supported"),
    ("COPY (SELECT 1 AS x) TO '{dir}/copied.csv'", "not supported"),
    ("COPY requests TO '{dir}/copied.parquet'", "not supported"),
    ("SET datafusion.catalog.location = '{dir}'", "not supported"),
    ("INSERT INTO requests SELECT * FROM requests", "not supported"),
    ("CREATE VIEW v AS SELECT * FROM requests", "DDL not supported"),
    ("DROP TABLE requests", "not supported"),
];

#[test]
fn ad_hoc_sql_reaches_nothing_outside_the_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    std::fs::write(tmp.path().join("outside.csv"), "a,b\nOUTSIDE_ROW,1\n").unwrap();
    let data = tmp.path().join("ds");
    ingest(&[repo().join("sample_logs/tgi.jsonl").to_str().unwrap()], &data, &[]);
    for (sql, refusal) in WAYS_IN {
        let sql = sql.replace("{dir}", dir);
        // tokscope query
        let o = Command::new(bin()).args(["query", "--data", data.to_str().unwrap(), &sql]).output().unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(!o.status.success(), "query ran `{sql}`: {stdout}");
        assert!(stderr.contains(refusal), "query `{sql}`: {stderr}");
        assert!(!stdout.contains("OUTSIDE_ROW") && !stderr.contains("OUTSIDE_ROW"), "query `{sql}` read outside");
        // tokscope sql: the statement, then a query that shows the session still works.
        let mut child = Command::new(bin())
            .args(["sql", "--no-history", "--data", data.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let script = format!("{sql};\nSELECT 'still' || 'here' AS s;\n");
        child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
        let o = child.wait_with_output().unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(!o.status.success(), "sql shell ran `{sql}`: {stdout}");
        assert!(stderr.contains(refusal), "sql `{sql}`: {stderr}");
        assert!(stdout.contains("stillhere"), "sql `{sql}`: the shell went on: {stdout}");
        assert!(!stdout.contains("OUTSIDE_ROW") && !stderr.contains("OUTSIDE_ROW"), "sql `{sql}` read outside");
    }
    // Nothing was written anywhere.
    assert!(!tmp.path().join("copied.csv").exists() && !tmp.path().join("copied.parquet").exists());
}

/// `--allow-write` permits DDL, but a path in a query is still no table.
#[test]
fn allow_write_does_not_make_paths_into_tables() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("outside.csv"), "a,b\nOUTSIDE_ROW,1\n").unwrap();
    let data = tmp.path().join("ds");
    ingest(&[repo().join("sample_logs/tgi.jsonl").to_str().unwrap()], &data, &[]);
    let sql = format!("SELECT * FROM '{}/outside.csv'", tmp.path().display());
    let o =
        Command::new(bin()).args(["query", "--allow-write", "--data", data.to_str().unwrap(), &sql]).output().unwrap();
    assert!(!o.status.success());
    assert!(!String::from_utf8_lossy(&o.stdout).contains("OUTSIDE_ROW"));
}
