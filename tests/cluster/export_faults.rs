//! An export killed (SIGKILL) at any point: a reader of `DEST/latest/`
//! always finds one complete export, the old one or the new one, never two
//! mixed or a page without its results; retention never removes the export
//! `latest` names. Locally (symbolic links moved atomically) and on an
//! object store (moto: the `latest.json` pointer and one page object; the
//! uploads slowed by tests/support/fault_proxy.py so that kills land among
//! them). The kill tests check that kills landed mid-export: before and
//! after the local `latest` moved, among the uploads on the object store.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{bin, FaultProxy, S3Server};

/// Two datasets whose exports differ in every job's result: `old` is the
/// sample logs, `new` the samples and a generated log on top.
fn datasets(dir: &Path) -> (String, String) {
    let samples = common::repo().join("sample_logs");
    let old = dir.join("old");
    common::ingest(&[samples.to_str().unwrap()], &old, &["--threads", "2"]);
    let log = dir.join("more.jsonl");
    common::tokscope(&["generate", "--requests", "3000", "--days", "2", "--out", log.to_str().unwrap()]);
    let new = dir.join("new");
    common::ingest(&[samples.to_str().unwrap(), log.to_str().unwrap()], &new, &["--threads", "2"]);
    (old.display().to_string(), new.display().to_string())
}

/// An export of four jobs, on one thread: one partition per query, so float
/// sums add up in one order and two exports of the same data are equal byte
/// for byte.
fn export_args<'a>(data: &'a str, to: &'a str, date: &'a str) -> Vec<&'a str> {
    let jobs = "report,eos,latency,daily";
    vec!["--threads", "1", "export", "--quiet", "--data", data, "--to", to, "--date", date, "--jobs", jobs]
}

/// The CSV results in a folder, by name.
fn csvs(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "csv"))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read_to_string(e.path()).unwrap()))
        .collect()
}

/// Starts `args`, kills it with SIGKILL after `after`, and waits for it.
/// True when it had already ended by itself.
fn run_killed(args: &[&str], env: &[(&'static str, String)], after: Duration) -> bool {
    let mut child = Command::new(bin())
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let ended = matches!(child.try_wait(), Ok(Some(_)));
    let _ = child.kill();
    let _ = child.wait();
    ended
}

/// How long a whole export takes here (the kills are spread over it).
fn timed(args: &[&str], env: &[(&'static str, String)]) -> Duration {
    let started = Instant::now();
    let out = Command::new(bin()).args(args).envs(env.iter().map(|(k, v)| (*k, v.as_str()))).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    started.elapsed()
}

#[test]
fn a_killed_local_export_leaves_latest_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = datasets(dir.path());
    let site = dir.path().join("site");
    let to = site.to_str().unwrap();
    common::tokscope(&export_args(&old, to, "2024-06-01"));
    let old_results = csvs(&site.join("latest"));
    let reference = dir.path().join("reference");
    let new_args = export_args(&new, to, "2024-06-02");
    let full = timed(&export_args(&new, reference.to_str().unwrap(), "2024-06-02"), &[]);
    let new_results = csvs(&reference.join("latest"));
    assert_ne!(old_results, new_results, "the two exports must differ to tell them apart");
    let mut outcomes = std::collections::BTreeSet::new();
    // Kill points spread over the whole run as timed, its start included;
    // a busy machine makes the killed runs slower than the timed one, so
    // the points go on growing until a run publishes (or ends) before its kill.
    for i in 0u32.. {
        let after =
            if i < 12 { full.mul_f64(f64::from(i) / 11.0 * 1.1) } else { full.mul_f64(1.5f64.powi(i as i32 - 10)) };
        let ended = run_killed(&new_args, &[], after);
        let latest = site.join("latest");
        assert!(latest.join("index.html").is_file(), "kill {i}: latest has no page");
        let seen = csvs(&latest);
        assert!(seen == old_results || seen == new_results, "kill {i}: latest holds a mix: {:?}", seen.keys());
        // The dated link of the export latest names is whole too.
        let date = if seen == old_results { "2024-06-01" } else { "2024-06-02" };
        assert_eq!(csvs(&site.join(date)), seen, "kill {i}");
        assert!(!ended || seen == new_results, "kill {i}: the export ended but latest names the old one");
        outcomes.insert(date);
        if i >= 11 && outcomes.len() == 2 {
            break;
        }
    }
    assert_eq!(outcomes.len(), 2, "the kills fell before and after the new export's publication: {outcomes:?}");
    // A whole export afterwards: the new results, and no generation left that no link names.
    common::tokscope(&new_args);
    assert_eq!(csvs(&site.join("latest")), new_results);
    let generations: Vec<String> = std::fs::read_dir(site.join(".exports"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(generations.len(), 2, "one generation per date: {generations:?}");
}

#[test]
fn retention_keeps_the_export_latest_names() {
    let dir = tempfile::tempdir().unwrap();
    let (old, _) = datasets(dir.path());
    let site = dir.path().join("site");
    let to = site.to_str().unwrap();
    for date in ["2024-06-03", "2024-06-04", "2024-06-01"] {
        let mut args = export_args(&old, to, date);
        args.extend(["--keep", "2"]);
        common::tokscope(&args);
    }
    // The last export is of the oldest date: latest names it, so retention
    // keeps it beside the newest two.
    assert_eq!(std::fs::read_link(site.join("latest")).unwrap().file_name().unwrap().to_string_lossy(), "2024-06-01-3");
    assert!(site.join("latest/index.html").is_file());
    for date in ["2024-06-01", "2024-06-03", "2024-06-04"] {
        assert!(site.join(date).join("index.html").is_file(), "{date} was removed");
    }
    // Once latest names a newer export, the older ones beyond --keep go.
    let mut args = export_args(&old, to, "2024-06-05");
    args.extend(["--keep", "2"]);
    common::tokscope(&args);
    let kept: Vec<bool> =
        ["2024-06-01", "2024-06-03", "2024-06-04", "2024-06-05"].iter().map(|d| site.join(d).exists()).collect();
    assert_eq!(kept, [false, false, true, true]);
    let generations = std::fs::read_dir(site.join(".exports")).unwrap().count();
    assert_eq!(generations, 2, "removed exports' files are gone too");
}

#[test]
fn a_killed_export_to_an_object_store_leaves_latest_whole() {
    let s3 = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = datasets(dir.path());
    s3.put("site", &[]);
    let out =
        Command::new(bin()).args(export_args(&old, "s3://site/dash", "2024-06-01")).envs(s3.env()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Each object an export puts is answered 50 ms late: the uploads take a
    // good part of the run, so kills spread over it land among them too.
    let proxy = FaultProxy::start(&s3, &["--delay-first", "1000000", "--delay", "0.05", "--only-prefix", "/site/"]);
    let env = proxy.env(&s3);
    // The latest export under `prefix` is whole: its date, and how many
    // objects the new export has there.
    let check = |prefix: &str, what: &str| -> (String, usize) {
        let keys = s3.list("site");
        let latest: Vec<&String> = keys.iter().filter(|k| k.starts_with(&format!("{prefix}/latest/"))).collect();
        assert_eq!(latest, vec![&format!("{prefix}/latest/index.html")], "{what}: latest is one page object");
        let pointer: serde_json::Value =
            serde_json::from_slice(&s3.get("site", &format!("{prefix}/latest.json"))).unwrap();
        let date = pointer["date"].as_str().unwrap().to_string();
        for file in pointer["files"].as_array().unwrap() {
            let key = format!("{prefix}/{date}/{}", file.as_str().unwrap());
            assert!(keys.contains(&key), "{what}: latest.json names {key}, which is missing");
        }
        (date, keys.iter().filter(|k| k.starts_with(&format!("{prefix}/2024-06-02/"))).count())
    };
    // The whole new export, timed, beside the one the kills are aimed at.
    let full = timed(&export_args(&new, "s3://site/whole", "2024-06-02"), &env);
    let (date, objects) = check("whole", "the new export");
    assert_eq!((date.as_str(), objects), ("2024-06-02", 13), "four jobs' CSV, JSON and Parquet, and the page");
    // Kill the new export at points spread over its run.
    let new_args = export_args(&new, "s3://site/dash", "2024-06-02");
    let mut kills = Vec::new();
    let mut among_uploads = false;
    for i in 0..8u32 {
        let at = full.mul_f64(f64::from(i) / 7.0 * 1.1);
        let ended = run_killed(&new_args, &env, at);
        let (date, objects) = check("dash", &format!("kill {i}"));
        // Objects of the new export while latest names the old one: a run
        // killed among its uploads put them.
        among_uploads |= date == "2024-06-01" && objects > 0;
        kills.push(format!("kill {i} at {at:?}: ended {ended}, latest {date}, {objects} objects of the new export"));
    }
    assert!(among_uploads, "no kill landed among the new export's uploads:\n{}", kills.join("\n"));
}

#[test]
fn a_link_a_killed_export_never_moved_does_not_keep_its_generation() {
    // An export killed between making its new `latest` link and renaming it
    // into place leaves `.latest.link-<pid>` naming its generation: the next
    // export removes both, and keeps what the visible links name.
    let dir = tempfile::tempdir().unwrap();
    let samples = common::repo().join("sample_logs");
    let data = dir.path().join("data");
    common::ingest(&[samples.to_str().unwrap()], &data, &["--threads", "2"]);
    let site = dir.path().join("site");
    let (data, to) = (data.to_str().unwrap(), site.to_str().unwrap());
    common::tokscope(&export_args(data, to, "2024-06-01"));
    let orphan = site.join(".exports/2024-06-02-7");
    std::fs::create_dir_all(&orphan).unwrap();
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let leftover = site.join(format!(".latest.link-{dead}"));
    std::os::unix::fs::symlink(".exports/2024-06-02-7", &leftover).unwrap();
    common::tokscope(&export_args(data, to, "2024-06-03"));
    assert!(!orphan.exists(), "the generation only a leftover link named was kept");
    assert!(std::fs::symlink_metadata(&leftover).is_err(), "the leftover link was kept");
    let mut generations: Vec<String> = std::fs::read_dir(site.join(".exports"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    generations.sort();
    assert_eq!(generations, ["2024-06-01-1", "2024-06-03-8"]);
    assert_eq!(csvs(&site.join("latest")), csvs(&site.join("2024-06-03")));
}
