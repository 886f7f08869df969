//! A Ballista cluster of `tokscope scheduler` and `tokscope executor` child
//! processes on loopback ports, generated logs to run it on, and the
//! comparison of its results with the local engine's (floats to a relative
//! tolerance, rows in any order). Shared by the cluster tests.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{bin, free_port, tokscope};

/// A scheduler and its executors on loopback, stopped on drop.
pub struct Cluster {
    /// Processes by name (`scheduler`, `executor0`, ...).
    children: Vec<(String, Child)>,
    /// `ballista://127.0.0.1:PORT`.
    pub url: String,
    scheduler_port: u16,
    scheduler_flags: Vec<String>,
    env: Vec<(&'static str, String)>,
    executors: usize,
    dir: tempfile::TempDir,
}

impl Cluster {
    /// Two executors of two slots each, the scheduler's defaults, `env`
    /// added to each process's environment.
    pub fn start(env: &[(&'static str, String)]) -> Cluster {
        let mut cluster = Cluster::scheduler(env, &[]);
        for _ in 0..2 {
            cluster.add_executor(2, &[]);
        }
        cluster
    }

    /// A scheduler with `flags` (`--executor-timeout 10`, ...) and no executor yet.
    pub fn scheduler(env: &[(&'static str, String)], flags: &[&str]) -> Cluster {
        let scheduler_port = free_port();
        let mut cluster = Cluster {
            children: Vec::new(),
            url: format!("ballista://127.0.0.1:{scheduler_port}"),
            scheduler_port,
            scheduler_flags: flags.iter().map(|f| f.to_string()).collect(),
            env: env.to_vec(),
            executors: 0,
            dir: tempfile::tempdir().unwrap(),
        };
        cluster.start_scheduler();
        cluster
    }

    fn start_scheduler(&mut self) {
        let mut args = vec!["scheduler".to_string(), "--bind".into(), format!("127.0.0.1:{}", self.scheduler_port)];
        args.extend(self.scheduler_flags.iter().cloned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.spawn("scheduler", &args, self.scheduler_port, &[]);
    }

    /// Starts an executor of `slots` slots with `env` on top of the
    /// cluster's; returns its name (`executorN`) and Flight address.
    pub fn add_executor(&mut self, slots: usize, env: &[(&'static str, String)]) -> (String, String) {
        let name = format!("executor{}", self.executors);
        self.executors += 1;
        let (flight, grpc) = (free_port(), free_port());
        let work = self.dir.path().join(&name);
        let address = format!("127.0.0.1:{flight}");
        self.spawn(
            &name,
            &[
                "executor",
                "--scheduler",
                &format!("127.0.0.1:{}", self.scheduler_port),
                "--bind",
                &address,
                "--grpc-port",
                &grpc.to_string(),
                "--slots",
                &slots.to_string(),
                "--work-dir",
                work.to_str().unwrap(),
            ],
            flight,
            env,
        );
        (name, address)
    }

    fn spawn(&mut self, name: &str, args: &[&str], port: u16, env: &[(&'static str, String)]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{name}.log")))
            .unwrap();
        let child = Command::new(bin())
            .args(args)
            .envs(self.env.iter().chain(env).map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start a cluster process");
        self.children.push((name.to_string(), child));
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "{name} did not listen on {port}:\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the process `name` with SIGKILL and waits for it.
    pub fn kill(&mut self, name: &str) {
        let at = self.children.iter().position(|(n, _)| n == name).unwrap_or_else(|| panic!("no process {name}"));
        let (_, mut child) = self.children.remove(at);
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Kills the scheduler (SIGKILL) and starts a new one on the same port.
    pub fn restart_scheduler(&mut self) {
        self.kill("scheduler");
        self.start_scheduler();
    }

    /// The log (stderr) of the process `name` so far.
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{name}.log"))).unwrap_or_default()
    }

    /// The processes' logs, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for entry in std::fs::read_dir(self.dir.path()).unwrap().flatten() {
            if entry.path().extension().is_some_and(|e| e == "log") {
                let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(20).collect();
                out += &format!(
                    "--- {}\n{}\n",
                    entry.path().display(),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
        }
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One generated log of `requests` requests over `days` days, split into
/// `files` files (one log, so request ids are unique across the files).
pub fn generated_logs(dir: &Path, requests: usize, days: usize, files: usize, extra: &[&str]) -> Vec<String> {
    let whole = dir.join("generated.jsonl");
    let mut args = vec!["generate", "--out", whole.to_str().unwrap()];
    let (requests, days) = (requests.to_string(), days.to_string());
    args.extend(["--requests", &requests, "--days", &days]);
    args.extend_from_slice(extra);
    tokscope(&args);
    let text = std::fs::read_to_string(&whole).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let per_file = lines.len().div_ceil(files);
    lines
        .chunks(per_file)
        .enumerate()
        .map(|(i, chunk)| common::write_file(dir, &format!("part{i}.jsonl"), chunk.join("\n") + "\n"))
        .collect()
}

/// Record batches as JSON rows.
pub fn rows(batches: &[arrow::record_batch::RecordBatch]) -> Vec<Value> {
    let mut writer = arrow::json::ArrayWriter::new(Vec::new());
    for b in batches {
        writer.write(b).unwrap();
    }
    writer.finish().unwrap();
    let bytes = writer.into_inner();
    if bytes.is_empty() {
        return Vec::new();
    }
    serde_json::from_slice::<Vec<Value>>(&bytes).unwrap()
}

/// `tokscope ... --format json` output (one JSON object a line) as rows.
pub fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A CSV export (header, then plain cells) as rows, numbers parsed.
pub fn csv_rows(text: &str) -> Vec<Value> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    lines
        .map(|l| {
            let cells = l.split(',').map(|c| match c.parse::<f64>() {
                Ok(x) => serde_json::json!(x),
                Err(_) => Value::String(c.to_string()),
            });
            Value::Object(header.iter().map(|h| h.to_string()).zip(cells).collect())
        })
        .collect()
}

/// A row as a sort key: floats to 6 significant digits, so rows whose
/// floats differ in the last bits still sort alike.
fn sort_key(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_f64() => format!("{:.6e}", n.as_f64().unwrap()),
        Value::Object(m) => m.iter().map(|(k, v)| format!("{k}={}", sort_key(v))).collect::<Vec<_>>().join(","),
        Value::Array(a) => a.iter().map(sort_key).collect::<Vec<_>>().join(";"),
        other => other.to_string(),
    }
}

/// Whether `a` and `b` are the same value, floats within `rel` relative.
fn close(a: &Value, b: &Value, rel: f64) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            x == y || (x - y).abs() <= rel * x.abs().max(y.abs())
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| close(v, w, rel)))
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(v, w)| close(v, w, rel)),
        _ => a == b,
    }
}

/// Asserts that `local` and `remote` hold the same rows in any order.
pub fn assert_same_rows(what: &str, mut local: Vec<Value>, mut remote: Vec<Value>, rel: f64) {
    assert_eq!(local.len(), remote.len(), "{what}: {} local rows, {} on the cluster", local.len(), remote.len());
    local.sort_by_cached_key(sort_key);
    remote.sort_by_cached_key(sort_key);
    for (l, r) in local.iter().zip(&remote) {
        assert!(close(l, r, rel), "{what}: local row\n  {l}\non the cluster\n  {r}");
    }
}
