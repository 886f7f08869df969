//! A Ballista cluster under faults (docs/RELIABILITY.md, "Cluster faults"):
//! an executor killed (SIGKILL) while `job report` or `export` runs, every
//! executor lost, the scheduler restarted during a job, an executor that
//! cannot read the object store, a cluster with no executor. Each command
//! either finishes with the local engine's results (Ballista ran the lost
//! tasks again) or exits 1 with an error naming the node and a hint, with
//! nothing on stdout and no new export; it never waits without end (every
//! command here is killed, and the test fails, past `BOUND`). Executors log
//! their tasks, so the executor kills are checked to have landed while the
//! command ran with tasks on the killed executor.

use crate::common;
use crate::loopback::{assert_same_rows, csv_rows, generated_logs, json_lines, Cluster};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{bin, FaultProxy, S3Server};
use serde_json::Value;

/// Scheduler flags under which a lost executor counts in seconds (a busy
/// executor reports every 5 s; 10 s is the shortest timeout allowed).
const FAST: &[&str] = &["--executor-timeout", "10", "--executor-check-interval", "1"];

/// The client's job timeout here: above the executor timeout, so a lost
/// executor's tasks are rescheduled before the client gives up.
const JOB_TIMEOUT: &str = "30";

/// A command still running after this long waits without end: a failure.
const BOUND: Duration = Duration::from_secs(150);

/// An executor's environment under which it logs each task it starts and
/// finishes (Ballista's `info` records).
fn task_log() -> Vec<(&'static str, String)> {
    vec![("TOKSCOPE_LOG", "info".into())]
}

/// The tasks (`TID job/stage.attempt/task.attempt`) an executor's `log`
/// shows started, and of those the ones not finished: those it ran when
/// killed at the log's end.
fn tasks(log: &str) -> (Vec<&str>, Vec<&str>) {
    let records = |record: &str| -> Vec<&str> {
        log.lines().filter_map(|line| line.split_once(record)?.1.split(']').next()).collect()
    };
    let (started, finished) = (records("Received task: ["), records("Finished task : ["));
    let running = started.iter().copied().filter(|task| !finished.contains(task)).collect();
    (started, running)
}

/// Where the kill of an executor fell in a command's run.
struct Landed {
    /// Whether the command was still running.
    mid_command: bool,
    /// The command's tasks the executor had started.
    started: usize,
    /// Of those, the ones it was running.
    cut: Vec<String>,
}

impl Landed {
    /// Mid-work: the command still ran, and had tasks on the killed executor
    /// (running, or done with their output there).
    fn mid_work(&self) -> bool {
        self.mid_command && self.started > 0
    }
}

impl std::fmt::Display for Landed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let when = if self.mid_command { "during the command" } else { "after the command ended" };
        write!(f, "{when}, {} of its tasks started there, running {:?}", self.started, self.cut)
    }
}

/// Starts `args`, kills the executor `victim` (started with [`task_log`])
/// after `after`, or later, once it has started a task of the command (a
/// command still planning has none yet), and says where the kill landed.
fn kill_executor_during(
    args: &[&str],
    cluster: &mut Cluster,
    victim: &str,
    after: Duration,
    runs: &Path,
) -> (Running, Landed) {
    let logged = cluster.log(victim).len();
    let mut running = start(args, &[], runs);
    std::thread::sleep(after);
    let mut mid_command = matches!(running.child.try_wait(), Ok(None));
    while mid_command && tasks(&cluster.log(victim)[logged..]).0.is_empty() && running.started.elapsed() < BOUND {
        std::thread::sleep(Duration::from_millis(10));
        mid_command = matches!(running.child.try_wait(), Ok(None));
    }
    cluster.kill(victim);
    let log = cluster.log(victim);
    let (started, cut) = tasks(&log[logged..]);
    let cut = cut.into_iter().map(String::from).collect();
    (running, Landed { mid_command, started: started.len(), cut })
}

/// A command running in the background, its output in files.
struct Running {
    child: Child,
    out: PathBuf,
    err: PathBuf,
    started: Instant,
}

/// How a command ended.
struct Ended {
    code: i32,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Ended {
    fn text(&self) -> String {
        format!("exit {} after {:?}\nstdout:\n{}\nstderr:\n{}", self.code, self.took, self.stdout, self.stderr)
    }

    /// A clear failure: exit status 1, nothing on stdout, one `error:` line naming `node`, a hint.
    fn assert_clear_failure(&self, node: &str, cluster: &Cluster) {
        assert_eq!(self.code, 1, "{}\n{}", self.text(), cluster.logs());
        assert!(self.stdout.trim().is_empty(), "a failed command printed results: {}", self.text());
        assert!(self.stderr.starts_with("error: ") && self.stderr.contains(node), "{}", self.text());
        assert!(self.stderr.contains("\nhint: "), "no hint: {}", self.text());
    }

    /// The failure of a command whose executor at `address` was killed: the
    /// executor named (its results could not be fetched, or it failed a
    /// task), or the job that Ballista 55's adaptive planner lost with it
    /// (a stage rolled back that never runs again) cancelled after the job
    /// timeout, naming the scheduler (docs/DISTRIBUTED.md, "Faults").
    fn assert_lost_executor_failure(&self, address: &str, cluster: &Cluster) {
        let scheduler = format!("cluster at {}", cluster.url.trim_start_matches("ballista://"));
        if self.stderr.contains(&format!("executor {address}")) {
            self.assert_clear_failure(&format!("executor {address}"), cluster);
        } else {
            self.assert_clear_failure(&scheduler, cluster);
            assert!(
                self.stderr.contains("made no progress for") && self.stderr.contains("was cancelled"),
                "{}",
                self.text()
            );
        }
    }
}

fn start(args: &[&str], env: &[(&'static str, String)], dir: &Path) -> Running {
    let n = std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
    let (out, err) = (dir.join(format!("{n}.out")), dir.join(format!("{n}.err")));
    let child = Command::new(bin())
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .stdin(Stdio::null())
        .spawn()
        .expect("run tokscope");
    Running { child, out, err, started: Instant::now() }
}

impl Running {
    /// Waits for the command, at most until `BOUND` after its start.
    fn finish(mut self, cluster: &Cluster) -> Ended {
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if self.started.elapsed() > BOUND {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "still running after {BOUND:?}: a wait without end\nstderr:\n{}\n{}",
                    std::fs::read_to_string(&self.err).unwrap_or_default(),
                    cluster.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        Ended {
            code: status.code().unwrap_or(-1),
            stdout: std::fs::read_to_string(&self.out).unwrap(),
            stderr: std::fs::read_to_string(&self.err).unwrap(),
            took: self.started.elapsed(),
        }
    }
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn run(args: &[&str], env: &[(&'static str, String)], dir: &Path, cluster: &Cluster) -> Ended {
    start(args, env, dir).finish(cluster)
}

/// `job report` of `data` as JSON, on the cluster at `engine` or locally.
fn report_args<'a>(data: &'a str, engine: Option<&'a str>) -> Vec<&'a str> {
    let mut args = vec!["job", "report", "--format", "json", "--data", data];
    if let Some(url) = engine {
        args.extend(["--engine", url, "--job-timeout", JOB_TIMEOUT]);
    }
    args
}

/// A local dataset of `requests` generated requests over two days, in eight files.
fn dataset(dir: &Path, requests: usize) -> String {
    let logs = generated_logs(dir, requests, 2, 8, &[]);
    let logs: Vec<&str> = logs.iter().map(String::as_str).collect();
    let lake = dir.join("lake");
    common::ingest(&logs, &lake, &[]);
    lake.display().to_string()
}

/// Requests in the datasets the kills are spread over: enough for a job of
/// a few seconds on a loopback cluster of two single-slot executors.
const REQUESTS: usize = 200_000;

#[test]
fn an_executor_killed_during_a_job_is_replaced_or_named() {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(dir.path(), REQUESTS);
    let runs = dir.path().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let mut cluster = Cluster::scheduler(&[], FAST);
    let mut live: Vec<(String, String)> = (0..2).map(|_| cluster.add_executor(1, &task_log())).collect();
    let local = run(&report_args(&data, None), &[], &runs, &cluster);
    assert_eq!(local.code, 0, "{}", local.text());
    let want = json_lines(local.stdout.as_bytes());
    let clean = run(&report_args(&data, Some(&cluster.url)), &[], &runs, &cluster);
    assert_eq!(clean.code, 0, "{}\n{}", clean.text(), cluster.logs());
    assert_same_rows("report on the cluster", want.clone(), json_lines(clean.stdout.as_bytes()), 1e-9);
    let mut outcomes = Vec::new();
    let mut mid_work = 0;
    for (trial, fraction) in [0.2, 0.5, 0.8].into_iter().enumerate() {
        let (victim, address) = live.remove(trial % live.len());
        let url = cluster.url.clone();
        let args = report_args(&data, Some(&url));
        let (running, landed) = kill_executor_during(&args, &mut cluster, &victim, clean.took.mul_f64(fraction), &runs);
        mid_work += usize::from(landed.mid_work());
        let ended = running.finish(&cluster);
        if ended.code == 0 {
            assert_same_rows(&format!("trial {trial}"), want.clone(), json_lines(ended.stdout.as_bytes()), 1e-9);
        } else {
            ended.assert_lost_executor_failure(&address, &cluster);
        }
        outcomes.push(format!("kill at {fraction} ({landed}): exit {} after {:?}", ended.code, ended.took));
        live.push(cluster.add_executor(1, &task_log()));
    }
    let outcomes = outcomes.join("\n");
    eprintln!("{outcomes}");
    assert!(mid_work > 0, "no kill landed during the job with tasks on the killed executor:\n{outcomes}");
}

#[test]
fn a_cluster_that_lost_every_executor_fails_the_job_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(dir.path(), REQUESTS / 4);
    let runs = dir.path().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let mut flags = FAST.to_vec();
    flags.extend(["--no-executors-grace", "0"]);
    let mut cluster = Cluster::scheduler(&[], &flags);
    let (only, _) = cluster.add_executor(1, &[]);
    let running = start(&report_args(&data, Some(&cluster.url)), &[], &runs);
    std::thread::sleep(Duration::from_millis(300));
    cluster.kill(&only);
    let ended = running.finish(&cluster);
    ended.assert_clear_failure(&format!("cluster at {}", cluster.url.trim_start_matches("ballista://")), &cluster);
    assert!(ended.stderr.contains("all executors were lost"), "{}", ended.text());
    assert!(ended.stderr.contains("hint: start executors"), "{}", ended.text());
}

#[test]
fn an_executor_killed_during_an_export_never_publishes_a_partial_one() {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(dir.path(), REQUESTS / 2);
    let runs = dir.path().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let site = dir.path().join("site");
    let export = |engine: Option<&str>, to: &Path, date: &str| -> Vec<String> {
        let to = to.display().to_string();
        let mut args =
            vec!["export", "--quiet", "--data", &data, "--jobs", "report,daily,eos", "--date", date, "--to", &to];
        if let Some(url) = engine {
            args.extend(["--engine", url, "--job-timeout", JOB_TIMEOUT]);
        }
        args.into_iter().map(String::from).collect()
    };
    let mut cluster = Cluster::scheduler(&[], FAST);
    let mut live: Vec<(String, String)> = (0..2).map(|_| cluster.add_executor(1, &task_log())).collect();
    let reference = dir.path().join("reference");
    let local = run(&strs(&export(None, &reference, "2024-06-02")), &[], &runs, &cluster);
    assert_eq!(local.code, 0, "{}", local.text());
    let first = run(&strs(&export(Some(&cluster.url), &site, "2024-06-01")), &[], &runs, &cluster);
    assert_eq!(first.code, 0, "{}\n{}", first.text(), cluster.logs());
    let mut outcomes = Vec::new();
    let mut mid_work = 0;
    for (trial, fraction) in [0.3, 0.7].into_iter().enumerate() {
        let before = std::fs::read_link(site.join("latest")).unwrap();
        let (victim, address) = live.remove(0);
        let args = export(Some(&cluster.url), &site, "2024-06-02");
        let (running, landed) =
            kill_executor_during(&strs(&args), &mut cluster, &victim, first.took.mul_f64(fraction), &runs);
        mid_work += usize::from(landed.mid_work());
        let ended = running.finish(&cluster);
        if ended.code == 0 {
            for job in ["report", "daily", "eos"] {
                let read = |root: &Path| std::fs::read_to_string(root.join(format!("latest/{job}.csv"))).unwrap();
                let (want, got) = (csv_rows(&read(&reference)), csv_rows(&read(&site)));
                assert_same_rows(&format!("trial {trial}: exported {job}"), want, got, 1e-9);
            }
        } else {
            ended.assert_lost_executor_failure(&address, &cluster);
            assert_eq!(std::fs::read_link(site.join("latest")).unwrap(), before, "a failed export moved latest");
        }
        outcomes.push(format!("export, kill at {fraction} ({landed}): exit {} after {:?}", ended.code, ended.took));
        live.push(cluster.add_executor(1, &task_log()));
    }
    let outcomes = outcomes.join("\n");
    eprintln!("{outcomes}");
    assert!(mid_work > 0, "no kill landed during the export with tasks on the killed executor:\n{outcomes}");
}

#[test]
fn a_scheduler_restarted_during_a_job_fails_it_and_names_the_scheduler() {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(dir.path(), REQUESTS / 2);
    let runs = dir.path().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let mut cluster = Cluster::scheduler(&[], FAST);
    for _ in 0..2 {
        cluster.add_executor(1, &[]);
    }
    let local = run(&report_args(&data, None), &[], &runs, &cluster);
    let want = json_lines(local.stdout.as_bytes());
    let clean = run(&report_args(&data, Some(&cluster.url)), &[], &runs, &cluster);
    assert_eq!(clean.code, 0, "{}\n{}", clean.text(), cluster.logs());
    let scheduler = format!("scheduler at {}", cluster.url.trim_start_matches("ballista://"));
    let mut failed = 0;
    for fraction in [0.3, 0.6] {
        let running = start(&report_args(&data, Some(&cluster.url)), &[], &runs);
        std::thread::sleep(clean.took.mul_f64(fraction));
        cluster.restart_scheduler();
        let ended = running.finish(&cluster);
        if ended.code == 0 {
            assert_same_rows("a job done before the restart", want.clone(), json_lines(ended.stdout.as_bytes()), 1e-9);
        } else {
            ended.assert_clear_failure(&scheduler, &cluster);
            assert!(ended.stderr.contains("run the command again"), "{}", ended.text());
            failed += 1;
        }
        eprintln!("scheduler restart at {fraction}: exit {} after {:?}", ended.code, ended.took);
    }
    assert!(failed > 0, "no restart fell inside a job: the test tested nothing");
    // The executors found the new scheduler: the command run again succeeds.
    let again = run(&report_args(&data, Some(&cluster.url)), &[], &runs, &cluster);
    assert_eq!(again.code, 0, "{}\n{}", again.text(), cluster.logs());
    assert_same_rows("after the restart", want, json_lines(again.stdout.as_bytes()), 1e-9);
}

#[test]
fn an_executor_that_cannot_read_the_store_is_named() {
    let s3 = S3Server::start();
    s3.put("lake", &[]);
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let logs = generated_logs(dir.path(), 2000, 2, 2, &[]);
    let mut args = vec!["ingest", "--quiet", "--out", "s3://lake/llm"];
    args.extend(logs.iter().map(String::as_str));
    s3.tokscope(&args);
    let env = s3.env();
    // Every request this executor makes is refused, as with wrong credentials.
    let refusing = FaultProxy::start(&s3, &["--fail-first", "1000000", "--status", "403"]);
    let mut cluster = Cluster::scheduler(&env, FAST);
    let (bad, address) = cluster.add_executor(1, &refusing.env(&s3));
    let failed = run(&report_args("s3://lake/llm", Some(&cluster.url)), &env, &runs, &cluster);
    failed.assert_clear_failure(&format!("failed on executor {address}#"), &cluster);
    assert!(failed.stderr.contains("could not read the dataset's store"), "{}", failed.text());
    // With an executor that can read it instead, the same command succeeds.
    cluster.add_executor(1, &[]);
    cluster.kill(&bad);
    let local = run(&report_args("s3://lake/llm", None), &env, &runs, &cluster);
    let ok = run(&report_args("s3://lake/llm", Some(&cluster.url)), &env, &runs, &cluster);
    assert_eq!(ok.code, 0, "{}\n{}", ok.text(), cluster.logs());
    let rows: Vec<Value> = json_lines(ok.stdout.as_bytes());
    assert_same_rows("report from s3", json_lines(local.stdout.as_bytes()), rows, 1e-9);
}

#[test]
fn a_job_on_a_cluster_without_executors_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(dir.path(), 1000);
    let runs = dir.path().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let cluster = Cluster::scheduler(&[], &[]);
    let args = ["job", "report", "--data", &data, "--engine", &cluster.url, "--job-timeout", "2"];
    let ended = run(&args, &[], &runs, &cluster);
    ended.assert_clear_failure("made no progress for 2 s", &cluster);
    assert!(ended.stderr.contains("and was cancelled"), "{}", ended.text());
    assert!(ended.took < Duration::from_secs(30), "{}", ended.text());
}
