//! Shared test support: the built binary, the test data in `tests/data/`,
//! Python oracles (pyarrow, DuckDB) and a local S3-compatible server (moto).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `tokscope` binary under test: the one cargo built with the tests,
/// or `TOKSCOPE_BIN` (a test binary copied to another machine with its
/// `tokscope`, as `bench/gpu_check.sh` does).
pub fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| std::env::var("TOKSCOPE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tokscope").to_string()))
}

/// `tests/data/`: real trace excerpts, the LiteLLM price table and the tiny
/// checkpoint with its golden file (provenance in `tests/data/README.md`).
pub fn data_dir() -> PathBuf {
    repo().join("tests/data")
}

/// The repository root: `CARGO_MANIFEST_DIR` as cargo sets it when it runs the
/// tests, else where the tests were built (a test binary copied to another
/// machine, as `bench/gpu_check.sh` does, is run with the variable set).
pub fn repo() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// Compares `actual` with the file `path` (under the repository), writing it
/// first when `TOKSCOPE_BLESS` is set; `how` says how to regenerate it.
pub fn assert_snapshot(path: &Path, actual: &str, how: &str) {
    if std::env::var_os("TOKSCOPE_BLESS").is_some() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("snapshot dir");
        }
        std::fs::write(path, actual).expect("write snapshot");
    }
    let expected = std::fs::read_to_string(path).unwrap_or_default();
    assert_eq!(actual, expected, "{} differs; review the change and run TOKSCOPE_BLESS=1 {how}", path.display());
}

/// Writes a test input file into `dir` and returns its path as a string.
pub fn write_file(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write test input");
    p.to_str().expect("utf-8 path").to_string()
}

/// `bytes` gzipped at `level`, as one gzip member.
pub fn gzip(bytes: &[u8], level: flate2::Compression) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), level);
    enc.write_all(bytes).expect("gzip in memory");
    enc.finish().expect("gzip in memory")
}

/// Runs tokscope and asserts success; returns stdout.
pub fn tokscope(args: &[&str]) -> String {
    let out = tokscope_output(args);
    assert!(out.status.success(), "tokscope {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// Runs tokscope with extra environment variables and asserts success; returns stdout.
pub fn tokscope_with_env(env: &[(&str, &str)], args: &[&str]) -> String {
    let out = Command::new(bin()).args(args).envs(env.iter().copied()).output().expect("run tokscope");
    assert!(out.status.success(), "tokscope {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// Runs tokscope and returns its whole output.
pub fn tokscope_output(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().expect("run tokscope")
}

/// Ingests `inputs` into `out` and returns the parsed JSON summary.
pub fn ingest(inputs: &[&str], out: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["ingest", "--quiet", "--json", "--out", out.to_str().expect("utf-8 path")];
    args.extend_from_slice(extra);
    args.extend_from_slice(inputs);
    let stdout = tokscope(&args);
    let summary: serde_json::Value = serde_json::from_str(&stdout).expect("summary JSON");
    let t = &summary["totals"];
    assert_eq!(
        t["lines_read"].as_u64(),
        Some(t["lines_ingested"].as_u64().unwrap() + t["lines_rejected"].as_u64().unwrap()),
        "summary must reconcile: {t}"
    );
    summary
}

/// Runs SQL through `tokscope query --format json` and returns the rows.
pub fn query(data: &Path, sql: &str) -> Vec<serde_json::Value> {
    let out = tokscope(&["query", "--format", "json", "--data", data.to_str().expect("utf-8"), sql]);
    out.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).expect("json row")).collect()
}

/// Asserts that `ours` (rows as tokscope's JSON output gives them) equals an
/// oracle's `theirs` cell by cell, in order: the same rows, every column of
/// either side (an absent cell is null, as tokscope's JSON leaves null
/// columns out), numbers within `rel` of the oracle's (relative), anything
/// else equal.
pub fn assert_rows_match(what: &str, ours: &[serde_json::Value], theirs: &[serde_json::Value], rel: f64) {
    assert_eq!(ours.len(), theirs.len(), "{what}: row count");
    let null = serde_json::Value::Null;
    for (i, (row, oracle_row)) in ours.iter().zip(theirs).enumerate() {
        let o = row.as_object().expect("tokscope rows are objects");
        let t = oracle_row.as_object().expect("oracle rows are objects");
        for k in t.keys().chain(o.keys().filter(|k| !t.contains_key(*k))) {
            let (ov, tv) = (o.get(k).unwrap_or(&null), t.get(k).unwrap_or(&null));
            let same = match (ov.as_f64(), tv.as_f64()) {
                (Some(a), Some(b)) => (a - b).abs() <= rel * b.abs().max(1e-12),
                _ => ov == tv,
            };
            assert!(same, "{what} row {i} column {k}: tokscope {ov}, oracle {tv}\ntokscope {row}\noracle {oracle_row}");
        }
    }
}

/// DuckDB's setup for the metrics of `requests` written from their
/// definitions in docs/metrics.md (`tests/oracles/request_metrics.sql`: its
/// tables and views, `requests_by_definition` and the jobs over it), over
/// dataset `ds`'s `requests` Parquet files.
pub fn request_metrics_oracle(ds: &Path) -> Vec<String> {
    let statements = include_str!("../oracles/request_metrics.sql")
        .split(";\n")
        .filter(|s| s.lines().any(|l| !l.trim().is_empty() && !l.trim_start().starts_with("--")));
    std::iter::once(parquet_view(ds, "requests", "requests")).chain(statements.map(str::to_string)).collect()
}

/// DuckDB's `CREATE VIEW {view}` over the Parquet files of `table` in dataset
/// `ds`, with its hive partitions.
pub fn parquet_view(ds: &Path, view: &str, table: &str) -> String {
    format!(
        "CREATE VIEW {view} AS SELECT * FROM read_parquet('{}/{table}/*/*.parquet', hive_partitioning=true)",
        ds.display()
    )
}

/// DuckDB as an independent oracle: runs the `setup` statements, then each of
/// `queries`, in one connection; returns each query's rows as JSON objects
/// (decimals as numbers, dates and other values as text).
pub fn duckdb_rows(setup: &[String], queries: &[String]) -> Vec<Vec<serde_json::Value>> {
    let payload = serde_json::to_string(&(setup, queries)).expect("statements as JSON");
    let script = format!(
        r#"
import decimal, duckdb, json
setup, queries = json.loads({payload:?})
con = duckdb.connect()
for statement in setup:
    con.execute(statement)
out = []
for sql in queries:
    cur = con.execute(sql)
    cols = [d[0] for d in cur.description]
    out.append([dict(zip(cols, row)) for row in cur.fetchall()])
print(json.dumps(out, default=lambda v: float(v) if isinstance(v, decimal.Decimal) else str(v)))
"#
    );
    serde_json::from_str(python(&script).trim()).expect("DuckDB's rows as JSON")
}

/// What pyarrow finds in the footers of dataset `ds`'s Parquet files:
/// `rows` per table, and per leaf column (`table.path`) the `codecs` of its
/// column chunks and their `encodings` (each chunk's list, comma-joined), as
/// sorted sets.
pub fn parquet_chunks(ds: &Path) -> serde_json::Value {
    let script = format!(
        r#"
import glob, json, os, pyarrow.parquet as pq
rows, leaves = {{}}, {{}}
for f in glob.glob({root:?} + "/**/*.parquet", recursive=True):
    md = pq.ParquetFile(f).metadata
    table = os.path.relpath(f, {root:?}).split(os.sep)[0]
    rows[table] = rows.get(table, 0) + md.num_rows
    for g in range(md.num_row_groups):
        for c in range(md.num_columns):
            col = md.row_group(g).column(c)
            leaf = leaves.setdefault(table + "." + col.path_in_schema, dict(codecs=set(), encodings=set()))
            leaf["codecs"].add(col.compression)
            leaf["encodings"].add(",".join(sorted(col.encodings)))
print(json.dumps(dict(rows=rows, leaves={{k: {{n: sorted(v) for n, v in l.items()}} for k, l in leaves.items()}})))
"#,
        root = ds.display().to_string()
    );
    serde_json::from_str(python(&script).trim()).expect("pyarrow's footers as JSON")
}

/// Runs a Python script (pyarrow / DuckDB as independent oracles); returns stdout.
pub fn python(script: &str) -> String {
    let out = Command::new("python3").arg("-c").arg(script).output().expect("python3 is needed for oracle tests");
    assert!(
        out.status.success(),
        "python failed (install the test peers with `pip install duckdb pyarrow moto[server]`):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `n` kill points spread over `0..spread * full`, from a xorshift seeded
/// with `seed`: the same sequence on every machine.
pub fn kill_points(full: Duration, spread: f64, n: usize, mut seed: u64) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            full.mul_f64((seed % 1000) as f64 / 1000.0 * spread)
        })
        .collect()
}

/// Starts tokscope with `args` (output discarded) and kills it (SIGKILL)
/// after `at`; returns how it ended.
pub fn kill_after(args: &[&str], at: Duration) -> std::process::ExitStatus {
    kill_after_with_env(&[], args, at)
}

/// [`kill_after`] with extra environment variables.
pub fn kill_after_with_env(env: &[(&str, &str)], args: &[&str], at: Duration) -> std::process::ExitStatus {
    let mut child = Command::new(bin())
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run tokscope");
    std::thread::sleep(at);
    let _ = child.kill();
    child.wait().expect("wait for tokscope")
}

/// A port nothing listens on now (the OS's pick; free until someone binds it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

/// A moto S3 server on a free loopback port, stopped on drop.
pub struct S3Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
}

impl S3Server {
    /// Starts `moto_server` (from the `moto[server]` Python package).
    pub fn start() -> Self {
        let port = free_port();
        let child = Command::new("python3")
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto server (pip install 'moto[server]')");
        let endpoint = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto server did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        S3Server { child, endpoint }
    }

    /// Environment for tokscope and boto3 to reach this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_DEFAULT_REGION", "us-east-1".into()),
        ]
    }

    /// A boto3 client on this server, as Python source.
    fn client(&self) -> String {
        format!(
            "import boto3\ns3 = boto3.client('s3', endpoint_url={:?}, aws_access_key_id='testing', aws_secret_access_key='testing', region_name='us-east-1')\n",
            self.endpoint
        )
    }

    /// Creates a bucket (if it does not exist) and uploads local files as `key -> path`.
    pub fn put(&self, bucket: &str, objects: &[(&str, &Path)]) {
        let uploads: Vec<String> = objects
            .iter()
            .map(|(k, p)| format!("s3.upload_file({:?}, {bucket:?}, {k:?})", p.display().to_string()))
            .collect();
        let script = format!(
            "{}try:\n    s3.create_bucket(Bucket={bucket:?})\nexcept s3.exceptions.BucketAlreadyOwnedByYou:\n    pass\n{}\n",
            self.client(),
            uploads.join("\n")
        );
        python(&script);
    }

    /// The keys in `bucket`, sorted.
    pub fn list(&self, bucket: &str) -> Vec<String> {
        let script = format!(
            "{}p = s3.get_paginator('list_objects_v2')\nfor page in p.paginate(Bucket={bucket:?}):\n    for o in page.get('Contents', []):\n        print(o['Key'])\n",
            self.client()
        );
        let mut keys: Vec<String> = python(&script).lines().map(str::to_string).collect();
        keys.sort();
        keys
    }

    /// The bytes of one object.
    pub fn get(&self, bucket: &str, key: &str) -> Vec<u8> {
        let script = format!(
            "{}import sys\nsys.stdout.buffer.write(s3.get_object(Bucket={bucket:?}, Key={key:?})['Body'].read())\n",
            self.client()
        );
        let out = Command::new("python3").arg("-c").arg(script).output().expect("python3");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    }

    /// Runs tokscope with this server's environment; asserts success.
    pub fn tokscope(&self, args: &[&str]) -> String {
        let out = Command::new(bin()).args(args).envs(self.env()).output().expect("run tokscope");
        assert!(out.status.success(), "tokscope {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("utf-8")
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fault proxy in front of `s3`: `args` as in tests/support/fault_proxy.py.
pub struct FaultProxy {
    child: Child,
    endpoint: String,
}

impl FaultProxy {
    /// Starts the proxy in front of `s3`; it prints its port first.
    pub fn start(s3: &S3Server, args: &[&str]) -> Self {
        let mut child = Command::new("python3")
            .arg(repo().join("tests/support/fault_proxy.py"))
            .args(["--upstream", &s3.endpoint])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the fault proxy");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().strip_prefix("listening ").expect("proxy prints its port").to_string();
        FaultProxy { child, endpoint: format!("http://127.0.0.1:{port}") }
    }

    /// The S3 server's environment, pointed at the proxy.
    pub fn env(&self, s3: &S3Server) -> Vec<(&'static str, String)> {
        let mut env = s3.env();
        for (k, v) in env.iter_mut() {
            if *k == "AWS_ENDPOINT_URL" {
                *v = self.endpoint.clone();
            }
        }
        env
    }

    /// The requests the proxy saw, one line each: it stops once those in
    /// flight (a delayed answer to a client that gave up) are answered.
    pub fn log(mut self) -> String {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let out = self.child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// Whether headless Chromium is installed for the browser checks; without it a
/// test skips its browser part, unless `TOKSCOPE_REQUIRE_BROWSER=1` (CI) makes
/// that a failure.
pub fn chromium_available() -> bool {
    let require = std::env::var("TOKSCOPE_REQUIRE_BROWSER").as_deref() == Ok("1");
    let found = Command::new("sh").args(["-c", "command -v chromium"]).output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(!require, "TOKSCOPE_REQUIRE_BROWSER=1 but chromium is not installed");
        eprintln!("skipped the browser check: no chromium (apt-get install -y chromium)");
    }
    found
}

/// Runs `tests/support/browser_check.py` on `page`, expecting the charts
/// `expect`, with screenshots in `out` and any `extra` flags.
pub fn browser_check(page: &Path, expect: &[&str], out: &Path, extra: &[String]) -> Output {
    Command::new("python3")
        .arg(repo().join("tests/support/browser_check.py"))
        .arg(page)
        .arg(format!("--expect={}", expect.join(",")))
        .arg(format!("--out={}", out.display()))
        .args(extra)
        .output()
        .expect("run browser_check.py")
}

/// `tokscope export` of `data` to `site` with the example prices, dated `date`;
/// returns `site/latest`.
pub fn export_priced(data: &Path, site: &Path, date: &str) -> PathBuf {
    let pricing = repo().join("config/pricing.example.toml");
    let (data, to, pricing) =
        (data.to_str().expect("utf-8 path"), site.to_str().expect("utf-8 path"), pricing.to_str().expect("utf-8 path"));
    tokscope(&["export", "--data", data, "--to", to, "--pricing", pricing, "--date", date]);
    site.join("latest")
}

/// Whether this system has `/proc` to read a child's peak RSS from (says so
/// when not: the test is skipped).
pub fn can_read_peak_rss() -> bool {
    let yes = Path::new("/proc/self/status").exists();
    if !yes {
        eprintln!("skipped: no /proc to read a child's peak RSS from");
    }
    yes
}

/// Runs `cmd` to its end; returns the high-water mark of its resident set
/// in KiB (`VmHWM`, kept by the kernel for the program's own memory, read
/// until it exits) and whether it succeeded. (`wait4`'s `ru_maxrss` would
/// count the test process's own memory: Linux keeps it across `exec`.)
pub fn peak_rss_kib(mut cmd: Command) -> (u64, bool) {
    let mut child = cmd.spawn().expect("spawn");
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Ok(s) = std::fs::read_to_string(&status_path) {
            if let Some(kib) =
                s.lines().find_map(|l| l.strip_prefix("VmHWM:")?.trim().strip_suffix("kB")?.trim().parse().ok())
            {
                peak = peak.max(kib);
            }
        }
        if let Some(status) = child.try_wait().expect("wait") {
            return (peak, status.success());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}
