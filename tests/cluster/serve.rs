//! `tokscope serve` driven by a client no one here wrote: the ADBC Flight SQL
//! driver from PyPI (`adbc-driver-flightsql`, Apache Arrow's Go driver behind
//! Python's DB-API). Its answers must equal `tokscope query` and `tokscope
//! job` on the same dataset; its catalog calls list the dataset's tables; a
//! call without the token, or with another, is refused; writes are refused.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::{assert_rows_match, bin, python, query, tokscope};

const TOKEN: &str = "t0k-serve-test-2f9c";

/// A `tokscope serve` on a free loopback port, stopped on drop.
struct Server {
    child: Child,
    uri: String,
}

impl Server {
    /// Starts `tokscope serve --data data` with the token in the environment
    /// and `extra` flags; waits for the line saying where it listens.
    fn start(data: &Path, extra: &[&str]) -> Self {
        let mut child = Command::new(bin())
            .args(["serve", "--data", data.to_str().unwrap(), "--listen", "127.0.0.1:0"])
            .args(extra)
            .env("TOKSCOPE_SERVE_TOKEN", TOKEN)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run tokscope serve");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        let addr = line
            .strip_prefix("tokscope serve: Flight SQL on ")
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("tokscope serve did not say where it listens: {line:?}"))
            .to_string();
        // Keep reading its stderr so that it never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        Server { child, uri: format!("grpc://{addr}") }
    }

    /// Runs `body` in Python with `conn` an ADBC connection made with
    /// `db_kwargs` (a Python dict literal, `{token}` replaced by the token);
    /// returns what it prints.
    fn adbc(&self, db_kwargs: &str, body: &str) -> String {
        let script = format!(
            r#"
import json, sys
import adbc_driver_flightsql.dbapi as flightsql
def rows(sql):
    cur = conn.cursor()
    cur.execute(sql)
    table = cur.fetch_arrow_table()
    cur.close()
    return table.to_pylist()
# Basic auth is checked at connect (the handshake); a refusal then is the answer.
try:
    conn = flightsql.connect("{uri}", db_kwargs={kwargs})
    refused_at_connect = None
except Exception as e:
    refused_at_connect = str(e)
def error(sql):
    if refused_at_connect:
        return refused_at_connect
    try:
        rows(sql)
    except Exception as e:
        return str(e)
    return None
{body}
"#,
            uri = self.uri,
            kwargs = db_kwargs.replace("{token}", TOKEN),
        );
        python(&script)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const BEARER: &str = r#"{"adbc.flight.sql.authorization_header": "Bearer {token}"}"#;

/// A generated dataset (two models, 300 requests) in `dir/ds`.
fn dataset(dir: &Path) -> std::path::PathBuf {
    let logs = dir.join("logs.jsonl");
    tokscope(&["generate", "--requests", "300", "--seed", "7", "--out", logs.to_str().unwrap()]);
    let data = dir.join("ds");
    common::ingest(&[logs.to_str().unwrap()], &data, &[]);
    data
}

/// `text` as a Python string literal (a JSON string is one).
fn py_str(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

fn json_rows(text: &str) -> Vec<serde_json::Value> {
    serde_json::from_str(text.trim()).expect("the Python side prints JSON rows")
}

#[test]
fn adbc_answers_equal_tokscope_query_and_tokscope_job() {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(dir.path());
    let server = Server::start(&data, &[]);
    let ad_hoc = "SELECT model, count(*) AS n, sum(completion_tokens) AS completion_tokens, avg(ttft_ms) AS ttft_ms \
                  FROM requests GROUP BY model ORDER BY model";
    let eos_sql = tokscope(&["job", "eos", "--show-sql"]);
    let body = format!("print(json.dumps(rows({})))\nprint(json.dumps(rows({})))", py_str(ad_hoc), py_str(&eos_sql));
    let out = server.adbc(BEARER, &body);
    let mut lines = out.lines();
    let served = json_rows(lines.next().expect("the ad-hoc query's rows"));
    assert!(served.len() >= 2, "the generated logs have several models: {served:?}");
    assert_rows_match("ad-hoc query", &query(&data, ad_hoc), &served, 1e-12);
    let job = tokscope(&["job", "eos", "--format", "json", "--data", data.to_str().unwrap()]);
    let job: Vec<serde_json::Value> = job.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let served_job = json_rows(lines.next().expect("the job's rows"));
    assert!(!job.is_empty());
    assert_rows_match("eos job", &job, &served_job, 1e-12);
}

#[test]
fn catalog_calls_list_the_dataset_tables() {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(dir.path());
    let server = Server::start(&data, &[]);
    let out = server.adbc(
        BEARER,
        r#"
objects = conn.adbc_get_objects(depth="all").read_all().to_pylist()
tables = {}
for catalog in objects:
    for schema in catalog["catalog_db_schemas"]:
        for table in schema["db_schema_tables"]:
            tables[catalog["catalog_name"] + "." + schema["db_schema_name"] + "." + table["table_name"]] = [
                c["column_name"] for c in (table["table_columns"] or [])]
info = conn.adbc_get_info()
requests = conn.adbc_get_table_schema("requests", catalog_filter="datafusion", db_schema_filter="public")
print(json.dumps(dict(tables=tables, vendor=info.get("vendor_name"), requests=requests.names)))
"#,
    );
    let got: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let tables = got["tables"].as_object().unwrap();
    // What ingest writes (docs/ARCHITECTURE.md, tables), in DataFusion's default catalog and schema.
    for name in ["requests", "tokens", "rejects", "request_counts"] {
        let key = format!("datafusion.public.{name}");
        assert!(tables.contains_key(&key), "{key} not listed: {:?}", tables.keys().collect::<Vec<_>>());
    }
    let columns: Vec<&str> =
        tables["datafusion.public.requests"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    for column in ["request_id", "model", "completion_tokens", "eos_status"] {
        assert!(columns.contains(&column), "requests' columns lack {column}: {columns:?}");
    }
    let schema_names: Vec<&str> = got["requests"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(schema_names, columns, "GetTables' schema and get_objects' columns agree");
    assert_eq!(got["vendor"], "tokscope", "GetSqlInfo's server name");
}

#[test]
fn calls_without_the_token_are_refused_and_basic_auth_with_it_passes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(dir.path());
    let server = Server::start(&data, &[]);
    let attempt = "print(json.dumps(error('SELECT count(*) AS n FROM requests')))";
    let refused = |kwargs: &str| -> String {
        let out = server.adbc(kwargs, attempt);
        serde_json::from_str::<Option<String>>(out.trim()).unwrap().expect("the call was refused")
    };
    for kwargs in [
        "{}",
        r#"{"adbc.flight.sql.authorization_header": "Bearer t0k-serve-test-2f9"}"#,
        r#"{"adbc.flight.sql.authorization_header": "Bearer {token}x"}"#,
        r#"{"username": "analyst", "password": "not-the-token"}"#,
    ] {
        let message = refused(kwargs);
        assert!(message.contains("Unauthenticated"), "{kwargs}: {message}");
    }
    for kwargs in [BEARER, r#"{"username": "analyst", "password": "{token}"}"#] {
        let out = server.adbc(kwargs, "print(json.dumps(rows('SELECT count(*) AS n FROM requests')))");
        assert_eq!(json_rows(&out), vec![serde_json::json!({"n": 300})], "{kwargs}");
    }
}

#[test]
fn writes_through_the_server_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(dir.path());
    let server = Server::start(&data, &[]);
    let copied = dir.path().join("copied.csv");
    let writes = [
        format!("COPY (SELECT * FROM requests) TO '{}'", copied.display()),
        "CREATE TABLE t AS SELECT * FROM requests".to_string(),
        "CREATE VIEW v AS SELECT 1 AS x".to_string(),
        "SET datafusion.execution.batch_size = 1".to_string(),
    ];
    let body = writes.iter().map(|sql| format!("print(json.dumps(error({})))\n", py_str(sql))).collect::<String>();
    let out = server.adbc(BEARER, &body);
    for (sql, line) in writes.iter().zip(out.lines()) {
        let message: Option<String> = serde_json::from_str(line).unwrap();
        let message = message.unwrap_or_else(|| panic!("{sql} was answered"));
        assert!(message.contains("not supported"), "{sql}: {message}");
    }
    assert_eq!(out.lines().count(), writes.len());
    assert!(!copied.exists(), "COPY wrote a file");
    // Nothing was created: the table is unknown afterwards.
    let after = server.adbc(BEARER, "print(json.dumps(error('SELECT * FROM t')))");
    assert!(after.contains("not found"), "{after}");
}

#[test]
fn serve_needs_a_token_unless_no_auth_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    let refused = |args: &[&str]| {
        let out = Command::new(bin())
            .args(["serve", "--data", data.to_str().unwrap()])
            .args(args)
            .env_remove("TOKSCOPE_SERVE_TOKEN")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let no_token = refused(&["--listen", "127.0.0.1:0"]);
    assert!(no_token.contains("needs a token"), "{no_token}");
    let open_to_all = refused(&["--listen", "0.0.0.0:0", "--no-auth"]);
    assert!(open_to_all.contains("--no-auth is only allowed on a loopback address"), "{open_to_all}");
    // On loopback, --no-auth answers a client that sends nothing.
    let data = dataset(dir.path());
    let server = Server::start(&data, &["--no-auth"]);
    let out = server.adbc("{}", "print(json.dumps(rows('SELECT count(*) AS n FROM requests')))");
    assert_eq!(json_rows(&out), vec![serde_json::json!({"n": 300})]);
}
