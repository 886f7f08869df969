//! `tokscope run --config`: the scheduled loop over local directories and a
//! loopback S3 server (moto), under faults: reruns change nothing, `kill -9`
//! anywhere leaves exactly-once rows and no orphan files, overlapping runs
//! never double-ingest, object-store errors are retried then reported, no
//! credential leaks, and the exported files equal the jobs' own outputs.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::loopback::json_lines;
use common::{bin, FaultProxy, S3Server};
use sha2::{Digest, Sha256};

/// Writes `files` generated canonical logs of `lines` requests each (seeds 1..).
fn write_logs(dir: &Path, files: usize, lines: usize) -> PathBuf {
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    for i in 0..files {
        add_log(&logs, i, lines);
    }
    logs
}

fn add_log(logs: &Path, i: usize, lines: usize) {
    let out = logs.join(format!("gateway-{i:03}.jsonl"));
    common::tokscope(&[
        "generate",
        "--requests",
        &lines.to_string(),
        "--seed",
        &(i + 1).to_string(),
        "--output-chars",
        "200",
        "--out",
        out.to_str().unwrap(),
    ]);
}

/// A configuration file in `dir`.
fn config(dir: &Path, dataset: &str, sources: &[&str], export: Option<&str>, extra: &str) -> PathBuf {
    let sources: Vec<String> = sources.iter().map(|s| format!("{s:?}")).collect();
    let mut text = format!("dataset = {dataset:?}\nsources = [{}]\n", sources.join(", "));
    text.push_str(
        "pricing = \"../config/pricing.example.toml\"\n".replace("..", common::repo().to_str().unwrap()).as_str(),
    );
    if let Some(to) = export {
        text.push_str(&format!("[export]\nto = {to:?}\nkeep = 2\n"));
    }
    text.push_str(extra);
    let path = dir.join("job.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn run(config: &Path, env: &[(&str, String)]) -> Output {
    Command::new(bin())
        .args(["run", "--config", config.to_str().unwrap(), "--quiet", "--date", "2024-06-03"])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("run tokscope")
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn text(o: &Output) -> String {
    format!("stdout:\n{}\nstderr:\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Every file below `dir` (links followed) with the SHA-256 of its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, format!("{:x}", Sha256::digest(std::fs::read(&p).unwrap())));
            }
        }
    }
    out
}

fn count_requests(data: &str, env: &[(&str, String)]) -> u64 {
    let out = Command::new(bin())
        .args([
            "query",
            "--format",
            "json",
            "--data",
            data,
            "SELECT count(*) AS n, count(DISTINCT source_file || ' ' || request_id) AS ids FROM requests",
        ])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    // A run killed before it created the dataset leaves none: no rows yet.
    if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("no tokscope dataset at") {
        return 0;
    }
    assert!(out.status.success(), "{}", text(&out));
    let row: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(row["n"], row["ids"], "a request id appears twice: {row}");
    row["n"].as_u64().unwrap()
}

#[test]
fn a_second_run_changes_nothing_and_a_new_file_is_ingested_once() {
    let dir = tempfile::tempdir().unwrap();
    let logs = write_logs(dir.path(), 3, 200);
    let data = dir.path().join("lake");
    let site = dir.path().join("site");
    let cfg = config(dir.path(), "lake", &["logs"], Some("site"), "");

    let first = run(&cfg, &[]);
    assert_eq!(code(&first), 0, "{}", text(&first));
    assert!(
        String::from_utf8_lossy(&first.stdout)
            .starts_with("tokscope run: ok: 3 input(s) ingested (600 rows, 0 lines rejected)"),
        "{}",
        text(&first)
    );
    assert_eq!(count_requests(data.to_str().unwrap(), &[]), 600);
    // The line says where the time went: every step that ran.
    let line = String::from_utf8_lossy(&first.stdout).to_string();
    for step in ["(ingest ", ", compact ", ", export "] {
        assert!(line.contains(step), "{step:?} in {line}");
    }
    let before = snapshot(&data);

    let second = run(&cfg, &[]);
    assert_eq!(code(&second), 3, "nothing new is exit code 3: {}", text(&second));
    assert!(String::from_utf8_lossy(&second.stdout).contains("nothing new: 0 input(s) ingested"), "{}", text(&second));
    assert_eq!(snapshot(&data), before, "a run with nothing new must not change the dataset");

    // The export: dated and latest, the jobs' own outputs, a page.
    assert!(site.join("2024-06-03/index.html").is_file() && site.join("latest/index.html").is_file());
    for job in ["report", "daily", "eos", "cost"] {
        let exported = std::fs::read_to_string(site.join(format!("latest/{job}.csv"))).unwrap();
        let pricing = common::repo().join("config/pricing.example.toml");
        let direct = common::tokscope_with_env(
            &[("DATAFUSION_EXECUTION_TARGET_PARTITIONS", "1")],
            &["job", job, "--data", data.to_str().unwrap(), "--pricing", pricing.to_str().unwrap(), "--format", "csv"],
        );
        // Floats summed in another order may differ in the last digit: compare row by row, numerically.
        assert_same_csv(&exported, &direct, job);
    }

    add_log(&logs, 7, 50);
    let third = run(&cfg, &[]);
    assert_eq!(code(&third), 0, "{}", text(&third));
    assert_eq!(count_requests(data.to_str().unwrap(), &[]), 650);
    // Each run compacts what it added to: one file per partition after two runs.
    let files = snapshot(&data);
    let parts: Vec<&String> = files.keys().filter(|k| k.starts_with("requests/") && k.ends_with(".parquet")).collect();
    let dirs: std::collections::BTreeSet<&str> = parts.iter().filter_map(|k| k.rsplit_once('/').map(|d| d.0)).collect();
    assert_eq!(parts.len(), dirs.len(), "one file per partition: {parts:?}");
}

/// Two CSV texts with the same header and rows, numbers equal to 1e-9 relative.
fn assert_same_csv(a: &str, b: &str, what: &str) {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    assert_eq!(la.len(), lb.len(), "{what}: row counts differ");
    for (x, y) in la.iter().zip(&lb) {
        for (u, v) in x.split(',').zip(y.split(',')) {
            match (u.parse::<f64>(), v.parse::<f64>()) {
                (Ok(p), Ok(q)) => {
                    assert!((p - q).abs() <= 1e-9 * p.abs().max(q.abs()).max(1e-300), "{what}: {u} vs {v}")
                }
                _ => assert_eq!(u, v, "{what}"),
            }
        }
    }
}

#[test]
fn dry_run_lists_what_would_be_ingested_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_logs(dir.path(), 2, 20);
    let cfg = config(dir.path(), "lake", &["logs"], Some("site"), "");
    let out = Command::new(bin()).args(["run", "--config", cfg.to_str().unwrap(), "--dry-run"]).output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("2 input(s) to ingest, 0 already ingested"), "{stdout}");
    assert!(stdout.contains("would ingest") && stdout.contains("gateway-001.jsonl"), "{stdout}");
    assert!(!dir.path().join("lake").exists() && !dir.path().join("site").exists(), "a dry run writes nothing");
}

/// Holds an OS lock on `<data>/_lease` from another process until the returned child is killed.
fn hold_local_lease(data: &Path) -> Child {
    std::fs::create_dir_all(data).unwrap();
    let script = format!(
        "import fcntl, sys\nf = open({:?}, 'a')\nfcntl.flock(f, fcntl.LOCK_EX)\nprint('locked', flush=True)\nsys.stdin.read()\n",
        data.join("_lease").display().to_string()
    );
    let mut child =
        Command::new("python3").args(["-c", &script]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "locked");
    child
}

#[test]
fn a_held_lease_makes_a_run_wait_or_exit_busy() {
    let dir = tempfile::tempdir().unwrap();
    write_logs(dir.path(), 1, 30);
    let data = dir.path().join("lake");
    let mut holder = hold_local_lease(&data);
    let cfg = config(dir.path(), "lake", &["logs"], None, "");
    let busy = run(&cfg, &[]);
    assert_eq!(code(&busy), 75, "{}", text(&busy));
    assert!(String::from_utf8_lossy(&busy.stderr).contains("is being written by"), "{}", text(&busy));
    assert!(String::from_utf8_lossy(&busy.stderr).contains("hint: wait for that run"), "{}", text(&busy));
    assert!(!data.join("_manifest.jsonl").exists() && !data.join("requests").exists(), "a busy run writes nothing");

    // With a wait, the run goes on once the holder lets go.
    let cfg = config(dir.path(), "lake", &["logs"], None, "[lease]\nwait_s = 30\n");
    let waiting = Command::new(bin()).args(["run", "--config", cfg.to_str().unwrap(), "--quiet"]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    holder.kill().unwrap();
    holder.wait().unwrap();
    let waited = waiting.wait_with_output().unwrap();
    assert_eq!(code(&waited), 0);
    assert_eq!(count_requests(data.to_str().unwrap(), &[]), 30);
}

#[test]
fn overlapping_runs_never_ingest_an_input_twice() {
    let dir = tempfile::tempdir().unwrap();
    write_logs(dir.path(), 4, 2000);
    let data = dir.path().join("lake");
    let cfg = config(dir.path(), "lake", &["logs"], None, "[lease]\nwait_s = 120\n");
    let runs: Vec<Child> = (0..3)
        .map(|_| {
            Command::new(bin())
                .args(["run", "--config", cfg.to_str().unwrap(), "--quiet"])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let codes: Vec<i32> = runs.into_iter().map(|c| code(&c.wait_with_output().unwrap())).collect();
    let mut sorted = codes.clone();
    sorted.sort();
    assert_eq!(sorted, [0, 3, 3], "one run ingests, the others find nothing new: {codes:?}");
    assert_eq!(count_requests(data.to_str().unwrap(), &[]), 8000);
}

/// Files a dead run may leave: temporary data files and commit records.
fn leftovers(data: &Path) -> Vec<String> {
    snapshot(data).into_keys().filter(|p| p.ends_with(".tmp") || p.starts_with("_commits/")).collect()
}

#[test]
fn kill_9_anywhere_then_a_rerun_gives_exactly_once_rows_and_no_orphans() {
    let dir = tempfile::tempdir().unwrap();
    write_logs(dir.path(), 3, 4000);
    let data = dir.path().join("lake");
    let site = dir.path().join("site");
    let cfg = config(dir.path(), "lake", &["logs"], Some("site"), "");
    // How long a whole run takes here, to spread the kills over it.
    let scratch = dir.path().join("timing");
    std::fs::create_dir_all(&scratch).unwrap();
    let timing_cfg = config(
        &scratch,
        dir.path().join("timing-lake").to_str().unwrap(),
        &[dir.path().join("logs").to_str().unwrap()],
        None,
        "",
    );
    let started = Instant::now();
    assert_eq!(code(&run(&timing_cfg, &[])), 0);
    let full = started.elapsed();
    // In ascending order: until a run gets past the ingest's commit, each next
    // run starts over from the same dataset and is killed further into its
    // work, so the kills walk through the run's steps (reading, writing the
    // data files, the commit, the export).
    let mut points = common::kill_points(full, 1.2, 20, 0x9e3779b97f4a7c15);
    points.sort();
    let mut trials = Vec::new();
    let mut mid_write = 0;
    for (trial, at) in points.into_iter().enumerate() {
        let status = common::kill_after(&["run", "--config", cfg.to_str().unwrap(), "--quiet"], at);
        let rows = count_requests(data.to_str().unwrap(), &[]);
        assert!(
            rows == 0 || rows == 4000 || rows == 8000 || rows == 12000,
            "trial {trial}: partial inputs visible ({rows} rows, {status:?})"
        );
        // Temporary data files or a commit record: only a run killed while it
        // wrote the dataset leaves them (a killed run before its cleanup may
        // show a previous one's).
        let left = if data.exists() { leftovers(&data).len() } else { 0 };
        mid_write += usize::from(left > 0);
        trials.push(format!("kill at {at:?}: {status}, {rows} rows, {left} temporary files or commit records"));
    }
    assert!(mid_write > 0, "no kill landed while a run wrote the dataset:\n{}", trials.join("\n"));
    let last = run(&cfg, &[]);
    assert!(matches!(code(&last), 0 | 3), "{}", text(&last));
    assert_eq!(count_requests(data.to_str().unwrap(), &[]), 12000, "exactly once after the kills");
    assert_eq!(leftovers(&data), Vec::<String>::new(), "no temporary file or commit record survives a rerun");
    assert!(site.join("latest/index.html").is_file() && site.join("latest/report.csv").is_file());
    // Hidden files are the exports' own (`.exports/<date>-<n>`), each named by
    // a link (`<date>`, `latest`): none a killed export left half-written.
    let linked: std::collections::BTreeSet<String> = std::fs::read_dir(&site)
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .map(|target| target.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let hidden: Vec<String> = snapshot(&site).into_keys().filter(|p| p.starts_with('.')).collect();
    let named = |p: &String| p.split('/').nth(1).is_some_and(|generation| linked.contains(generation));
    assert!(hidden.iter().all(|p| p.starts_with(".exports/") && named(p)), "{hidden:?} (links to {linked:?})");
}

fn s3_setup(dir: &Path, s3: &S3Server, files: usize, lines: usize) {
    let logs = write_logs(dir, files, lines);
    let objects: Vec<(String, PathBuf)> = (0..files)
        .map(|i| (format!("gateway/gateway-{i:03}.jsonl"), logs.join(format!("gateway-{i:03}.jsonl"))))
        .collect();
    let refs: Vec<(&str, &Path)> = objects.iter().map(|(k, p)| (k.as_str(), p.as_path())).collect();
    s3.put("logs", &refs);
    s3.put("lake", &[]);
    s3.put("site", &[]);
}

#[test]
fn runs_over_s3_are_idempotent_and_export_to_s3() {
    let s3 = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    s3_setup(dir.path(), &s3, 2, 100);
    let cfg = config(dir.path(), "s3://lake/ds", &["s3://logs/gateway/"], Some("s3://site/dash"), "");
    let env = s3.env();
    let first = run(&cfg, &env);
    assert_eq!(code(&first), 0, "{}", text(&first));
    assert_eq!(count_requests("s3://lake/ds", &env), 200);
    let listing = |bucket: &str| s3.list(bucket);
    let before = listing("lake");
    assert!(
        before.iter().all(|k| !k.ends_with(".tmp") && !k.contains("_commits/") && !k.ends_with("_lease.json")),
        "{before:?}"
    );
    let second = run(&cfg, &env);
    assert_eq!(code(&second), 3, "{}", text(&second));
    assert_eq!(listing("lake"), before, "nothing new: the dataset's objects are unchanged");
    let site = listing("site");
    assert!(
        site.contains(&"dash/2024-06-03/index.html".to_string())
            && site.contains(&"dash/2024-06-03/report.csv".to_string())
            && site.contains(&"dash/latest.json".to_string())
            && site.contains(&"dash/latest/index.html".to_string()),
        "{site:?}"
    );
}

/// A bucket whose keys sort by time, listed by runs with `list_after_last`
/// and a full listing every second run: the second run lists from after the
/// first's last key (`start-after`) and so ingests the object written after
/// it, not the one written late under an earlier day; the third, a full
/// listing, ingests that one; none twice.
#[test]
fn a_time_sorted_bucket_is_listed_from_where_the_last_run_stopped() {
    let s3 = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let logs = write_logs(dir.path(), 4, 10);
    let put = |day: &str, i: usize| {
        let log = logs.join(format!("gateway-{i:03}.jsonl"));
        s3.put("logs", &[(format!("gateway/2026/01/{day}/{i}.jsonl").as_str(), log.as_path())]);
    };
    put("01", 0);
    put("02", 1);
    s3.put("lake", &[]);
    let extra = "[ingest]\nlist_after_last = true\nfull_listing_every = 2\n[compact]\nenabled = false\n";
    let cfg = config(dir.path(), "s3://lake/ds", &["s3://logs/gateway/"], None, extra);
    let env = s3.env();
    let ingested = |o: &Output| -> Vec<String> {
        assert_eq!(code(o), 0, "{}", text(o));
        let listing = String::from_utf8_lossy(&s3.get("lake", "ds/_listing.json")).into_owned();
        let summary: serde_json::Value = serde_json::from_slice(&s3.get("lake", "ds/_ingest_summary.json")).unwrap();
        let files = summary["files"].as_array().unwrap().iter().map(|f| f["location"].as_str().unwrap().to_string());
        files.chain([listing]).collect()
    };
    let first = ingested(&run(&cfg, &env));
    assert_eq!(first[..2], ["s3://logs/gateway/2026/01/01/0.jsonl", "s3://logs/gateway/2026/01/02/1.jsonl"]);
    assert!(first[2].contains("\"gateway/2026/01/02/1.jsonl\""), "{}", first[2]);
    put("03", 2);
    put("01", 3); // late: sorts before the last key listed
    let second = ingested(&run(&cfg, &env));
    assert_eq!(second[..1], ["s3://logs/gateway/2026/01/03/2.jsonl"]);
    assert_eq!(count_requests("s3://lake/ds", &env), 30, "the late object is not listed yet");
    let third = ingested(&run(&cfg, &env));
    assert_eq!(third[..1], ["s3://logs/gateway/2026/01/01/3.jsonl"]);
    assert_eq!(count_requests("s3://lake/ds", &env), 40, "each object once");
}

#[test]
fn an_expired_s3_lease_is_taken_over_and_a_live_one_is_respected() {
    let s3 = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    s3_setup(dir.path(), &s3, 1, 20);
    let cfg = config(dir.path(), "s3://lake/ds", &["s3://logs/gateway/"], None, "");
    let env = s3.env();
    let lease = |expires_at: i64| {
        let file = dir.path().join("lease.json");
        std::fs::write(
            &file,
            format!(r#"{{"host":"elsewhere","pid":1,"run_id":"other-run","expires_at":{expires_at}}}"#),
        )
        .unwrap();
        s3.put("lake", &[("ds/_lease.json", file.as_path())]);
    };
    lease(chrono::Utc::now().timestamp() + 3600);
    let busy = run(&cfg, &env);
    assert_eq!(code(&busy), 75, "{}", text(&busy));
    assert!(String::from_utf8_lossy(&busy.stderr).contains("run other-run (pid 1 on elsewhere)"), "{}", text(&busy));
    lease(chrono::Utc::now().timestamp() - 10);
    let took_over = run(&cfg, &env);
    assert_eq!(code(&took_over), 0, "{}", text(&took_over));
    assert!(!s3.list("lake").iter().any(|k| k.ends_with("_lease.json")), "the lease is released at the end");
}

#[test]
fn object_store_faults_are_retried_then_reported_with_the_object() {
    let s3 = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    s3_setup(dir.path(), &s3, 1, 30);
    // The first requests fail with 503 SlowDown: retried with backoff, the run succeeds.
    let proxy = FaultProxy::start(&s3, &["--fail-first", "3", "--only-prefix", "/logs"]);
    let fast = "[store]\nbackoff_initial_ms = 20\nbackoff_max_s = 0.2\n";
    let cfg = config(dir.path(), "s3://lake/ds", &["s3://logs/gateway/"], None, fast);
    let ok = run(&cfg, &proxy.env(&s3));
    let log = proxy.log();
    assert_eq!(code(&ok), 0, "{}\nproxy:\n{log}", text(&ok));
    assert_eq!(log.matches("(injected)").count(), 3, "{log}");
    assert_eq!(count_requests("s3://lake/ds", &s3.env()), 30);

    // Slow answers past the timeout are retried too: the request answered
    // after 2 s (the timeout is 0.5 s) was sent again, and the repeat was
    // answered before the slow answer came, the client no longer waiting for it.
    let proxy = FaultProxy::start(&s3, &["--delay-first", "2", "--delay", "2", "--only-prefix", "/logs"]);
    let slow = "[store]\ntimeout_s = 0.5\nbackoff_initial_ms = 20\nbackoff_max_s = 0.2\n";
    let cfg = config(dir.path(), "s3://lake/slow", &["s3://logs/gateway/"], None, slow);
    let ok = run(&cfg, &proxy.env(&s3));
    let log = proxy.log();
    assert_eq!(code(&ok), 0, "{}\nproxy:\n{log}", text(&ok));
    // "<n> <METHOD> <path> -> <answer>", in the order answered; n in the order received.
    let answered: Vec<(u64, &str, &str)> = log
        .lines()
        .filter_map(|line| {
            let (n, rest) = line.split_once(' ')?;
            let (request, answer) = rest.split_once(" -> ")?;
            Some((n.parse().ok()?, request, answer))
        })
        .collect();
    let slow = answered.iter().position(|(_, _, a)| a.contains("(injected delay)")).expect("a delayed answer");
    let (slow_n, request, _) = answered[slow];
    let repeat = answered.iter().position(|&(n, r, a)| r == request && n > slow_n && a == "200");
    assert!(repeat.is_some_and(|at| at < slow), "{request}, answered after 2 s, retried and answered first:\n{log}");
    let rows = json_lines(
        s3.tokscope(&[
            "query",
            "--format",
            "json",
            "--data",
            "s3://lake/slow",
            "SELECT request_id, prompt_tokens, completion_tokens FROM requests ORDER BY request_id",
        ])
        .as_bytes(),
    );
    let columns = ["request_id", "prompt_tokens", "completion_tokens"];
    let mut logged: Vec<serde_json::Value> =
        json_lines(&std::fs::read(dir.path().join("logs/gateway-000.jsonl")).unwrap())
            .into_iter()
            .map(|line| columns.iter().map(|&c| (c, line[c].clone())).collect())
            .collect();
    logged.sort_by(|a, b| a["request_id"].as_str().cmp(&b["request_id"].as_str()));
    assert_eq!(rows, logged, "the rows ingested through the slow answers are the log's");

    // A server that keeps failing: the retries end, and the error names the object and the cause.
    // The count of retries is what ends them here: the retry timeout is far
    // beyond what three requests take on a loaded machine (5 s once cut the
    // third request off while the suite kept both cores busy).
    let proxy = FaultProxy::start(&s3, &["--fail-first", "100000", "--only-prefix", "/logs"]);
    let give_up = "[store]\nmax_retries = 2\nretry_timeout_s = 600\nbackoff_initial_ms = 20\nbackoff_max_s = 0.1\n";
    let cfg = config(dir.path(), "s3://lake/broken", &["s3://logs/gateway/"], None, give_up);
    let failed = run(&cfg, &proxy.env(&s3));
    let log = proxy.log();
    assert_eq!(code(&failed), 1, "{}", text(&failed));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("listing s3://logs/gateway/"), "the error names what it read: {stderr}");
    assert!(stderr.contains("503") && stderr.contains("SlowDown"), "{stderr}");
    assert!(stderr.contains("after 2 retries"), "{stderr}");
    assert_eq!(log.matches("(injected)").count(), 3, "one request and two retries: {log}");
}

#[test]
fn no_credential_appears_in_any_output_or_file() {
    let s3 = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    s3_setup(dir.path(), &s3, 1, 20);
    let secret = "SECRETabc123planted9Z";
    let token = "TOKENdef456planted8Y";
    let mut env = s3.env();
    for (k, v) in env.iter_mut() {
        if *k == "AWS_SECRET_ACCESS_KEY" {
            *v = secret.to_string();
        }
    }
    env.push(("AWS_SESSION_TOKEN", token.to_string()));
    let site = dir.path().join("site");
    let cfg = config(dir.path(), "s3://lake/ds", &["s3://logs/gateway/"], Some(site.to_str().unwrap()), "");
    let ok = run(&cfg, &env);
    assert_eq!(code(&ok), 0, "{}", text(&ok));
    // An error path too: a missing bucket.
    let bad = config(dir.path(), "s3://lake/ds2", &["s3://no-such-bucket/x/"], None, "");
    let failed = run(&bad, &env);
    assert_ne!(code(&failed), 0);
    let mut haystack = text(&ok) + &text(&failed);
    for (_, digest) in snapshot(&site) {
        haystack.push_str(&digest);
    }
    for path in snapshot(&site).keys() {
        haystack.push_str(&String::from_utf8_lossy(&std::fs::read(site.join(path)).unwrap()));
    }
    for key in s3.list("lake") {
        haystack.push_str(&String::from_utf8_lossy(&s3.get("lake", &key)));
    }
    assert!(!haystack.contains(secret) && !haystack.contains(token), "a credential leaked");
}

#[test]
fn the_exported_dashboard_loads_in_headless_chromium() {
    if !common::chromium_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("lake");
    // A month of traffic, so the trend charts have days to draw.
    let month = dir.path().join("month.jsonl");
    common::tokscope(&[
        "generate",
        "--requests",
        "3000",
        "--days",
        "30",
        "--output-chars",
        "100",
        "--out",
        month.to_str().unwrap(),
    ]);
    common::ingest(&[month.to_str().unwrap()], &data, &[]);
    let page = common::export_priced(&data, &dir.path().join("site"), "2024-06-30").join("index.html");
    let expected = ["cost_per_1k", "eos_compliance", "implicit_truncation", "ttft", "tpot", "kv_cache", "daily_cost"];
    let out = common::browser_check(&page, &expected, dir.path(), &[]);
    assert!(out.status.success(), "browser check failed:\n{}", text(&out));
    let size = std::fs::metadata(&page).unwrap().len();
    assert!(size < 2_000_000, "the page is {size} bytes");
    std::io::stdout().write_all(&out.stdout).unwrap();
}
