//! Queries while ingest, compaction and scheduled runs commit on the same
//! dataset (locally and on moto S3): every query succeeds, sees each row
//! once, and sees a row count that never goes down. Each query opens the
//! dataset afresh, as `tokscope query` does; hundreds run during each kind of
//! writer operation.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::{bin, S3Server};
use tokscope::dataset::DatasetRoot;
use tokscope::engine;

/// `count(*)` and `count(DISTINCT request_id)` of `requests`, each read as
/// a new `tokscope query` reads it: the dataset opened afresh.
trait Reader {
    fn counts(&self) -> Result<(i64, i64), String>;
}

/// A local dataset read in this process through the library, as `tokscope
/// query` reads it: opened afresh, again if a commit replaced a file it was
/// told of (`engine::retry_vanished`).
struct InProcess {
    rt: tokio::runtime::Runtime,
    dataset: DatasetRoot,
}

impl Reader for InProcess {
    fn counts(&self) -> Result<(i64, i64), String> {
        let batches = self
            .rt
            .block_on(engine::retry_vanished(|| async {
                let ctx = engine::new_session()?;
                engine::register_dataset(&ctx, &self.dataset).await?;
                engine::run_sql(&ctx, COUNTS, false).await
            }))
            .map_err(|e| e.to_string())?;
        let value =
            |c: usize| batches[0].column(c).as_any().downcast_ref::<arrow::array::Int64Array>().map(|a| a.value(0));
        Ok((value(0).ok_or("not a count")?, value(1).ok_or("not a count")?))
    }
}

/// A dataset read by `tokscope query` processes (an object store: its
/// credentials stay in the children's environment).
struct Processes {
    data: String,
    env: Vec<(&'static str, String)>,
}

impl Reader for Processes {
    fn counts(&self) -> Result<(i64, i64), String> {
        let out = Command::new(bin())
            .args(["query", "--format", "csv", "--data", &self.data, COUNTS])
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .unwrap();
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let row = text.lines().nth(1).ok_or(format!("no row: {text}"))?;
        let (n, d) = row.split_once(',').ok_or(format!("not two counts: {row}"))?;
        Ok((n.parse().map_err(|_| row.to_string())?, d.parse().map_err(|_| row.to_string())?))
    }
}

const COUNTS: &str = "SELECT count(*) AS n, count(DISTINCT source_file || ' ' || request_id) AS d FROM requests";

/// Runs `start()` (a writer process) again and again, reading all the while,
/// until `queries` reads ran during it; checks each result: no error, each
/// row once, a count that never goes down.
fn read_during(what: &str, reader: &dyn Reader, queries: usize, last: &mut i64, mut start: impl FnMut() -> Child) {
    let (mut done_queries, mut rounds) = (0, 0);
    while done_queries < queries {
        let mut writer = start();
        rounds += 1;
        loop {
            let finished = writer.try_wait().unwrap();
            let (n, d) = reader.counts().unwrap_or_else(|e| panic!("{what}, query {done_queries}: {e}"));
            assert_eq!(n, d, "{what}: a row seen twice ({n} rows, {d} distinct)");
            assert!(n >= *last, "{what}: the row count went down from {} to {n}", *last);
            *last = n;
            done_queries += 1;
            if let Some(status) = finished {
                assert!(matches!(status.code(), Some(0 | 3)), "{what}: the writer failed: {status}");
                break;
            }
        }
    }
    eprintln!("{what}: {done_queries} queries over {rounds} runs, last count {last}");
}

fn spawn(args: &[&str], env: &[(&'static str, String)]) -> Child {
    Command::new(bin())
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// A new small log for each writer run.
fn new_log(dir: &Path, i: usize) -> String {
    let path = dir.join(format!("log{i:04}.jsonl"));
    let seed = (i + 1).to_string();
    common::tokscope(&[
        "generate",
        "--requests",
        "300",
        "--days",
        "2",
        "--seed",
        &seed,
        "--out",
        path.to_str().unwrap(),
    ]);
    path.display().to_string()
}

fn readers_see_each_row_once(
    data: &str,
    env: &[(&'static str, String)],
    dir: &Path,
    reader: &dyn Reader,
    queries: usize,
) {
    let run_ok = |args: &[&str]| {
        let out = Command::new(bin()).args(args).envs(env.iter().map(|(k, v)| (*k, v.as_str()))).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let mut i = 0;
    let mut next_log = || {
        i += 1;
        new_log(dir, i)
    };
    run_ok(&["ingest", "--quiet", "--out", data, &next_log()]);
    let mut last = 0;
    read_during("ingest", reader, queries, &mut last, || {
        let log = next_log();
        spawn(&["ingest", "--quiet", "--out", data, "--lease-wait", "60", &log], env)
    });
    read_during("compact", reader, queries, &mut last, || {
        // New small files first, so every compaction has files to merge.
        run_ok(&["ingest", "--quiet", "--out", data, "--lease-wait", "60", &next_log()]);
        spawn(&["compact", "--quiet", "--data", data, "--lease-wait", "60"], env)
    });
    // Scheduled runs over a folder that gains one log before each run.
    let incoming = dir.join("incoming");
    std::fs::create_dir_all(&incoming).unwrap();
    let config = dir.join("run.toml");
    let sources = format!("{:?}", incoming.join("*.jsonl").display().to_string());
    std::fs::write(&config, format!("dataset = {data:?}\nsources = [{sources}]\n[lease]\nwait_s = 60\n")).unwrap();
    read_during("run --config", reader, queries, &mut last, || {
        let log = next_log();
        std::fs::rename(&log, incoming.join(Path::new(&log).file_name().unwrap())).unwrap();
        spawn(&["run", "--config", config.to_str().unwrap(), "--quiet"], env)
    });
}

#[test]
fn queries_during_local_writes_see_each_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("lake");
    let reader =
        InProcess { rt: engine::runtime().unwrap(), dataset: DatasetRoot::parse(data.to_str().unwrap()).unwrap() };
    readers_see_each_row_once(data.to_str().unwrap(), &[], dir.path(), &reader, 300);
}

#[test]
fn queries_during_writes_to_an_object_store_see_each_row_once() {
    let s3 = S3Server::start();
    s3.put("lake", &[]);
    let dir = tempfile::tempdir().unwrap();
    let reader = Processes { data: "s3://lake/ds".into(), env: s3.env() };
    readers_see_each_row_once("s3://lake/ds", &s3.env(), dir.path(), &reader, 100);
}
