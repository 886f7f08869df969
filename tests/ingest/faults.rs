//! Faults: a full disk and a read-only directory under the dataset, corrupt
//! Parquet and manifest files in it, and a damaged model directory. Each is
//! a clear error naming what failed, never a panic; a failed ingest leaves no
//! file of its own behind and the dataset as the last complete run left it.
//! (`kill -9` during runs: tests/cluster/scheduled.rs.)

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{bin, repo, tokscope};

/// Every file under `dir` (relative path -> size).
fn files(dir: &Path) -> BTreeMap<String, u64> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, u64>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, e.metadata().map(|m| m.len()).unwrap_or(0));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The files a reader of the dataset sees (not the lease or the summary of the last run).
fn data_files(dir: &Path) -> BTreeMap<String, u64> {
    files(dir).into_iter().filter(|(k, _)| k.ends_with(".parquet") || k == "_manifest.jsonl").collect()
}

fn requests(data: &Path) -> u64 {
    let out =
        tokscope(&["query", "--format", "csv", "--data", data.to_str().unwrap(), "SELECT count(*) AS n FROM requests"]);
    out.lines().nth(1).unwrap().trim().parse().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A small and a large generated log.
fn logs(dir: &Path) -> (PathBuf, PathBuf) {
    let big = dir.join("big.jsonl");
    tokscope(&["generate", "--requests", "20000", "--seed", "3", "--out", big.to_str().unwrap()]);
    let text = std::fs::read_to_string(&big).unwrap();
    let small = dir.join("small.jsonl");
    std::fs::write(&small, text.lines().take(200).collect::<Vec<_>>().join("\n") + "\n").unwrap();
    (small, big)
}

fn ingest(data: &Path, input: &Path) -> Output {
    Command::new(bin())
        .args(["ingest", "--quiet", "--out", data.to_str().unwrap(), input.to_str().unwrap()])
        .output()
        .unwrap()
}

/// A dataset of the small log's 200 requests, in `dir/ds`, and the path of
/// one of its `requests` parts (relative to the dataset).
fn dataset_of_small_log(dir: &Path, small: &Path) -> (PathBuf, String) {
    let data = dir.join("ds");
    assert!(ingest(&data, small).status.success());
    let part = data_files(&data).into_keys().find(|k| k.starts_with("requests/")).unwrap();
    (data, part)
}

/// A tmpfs mounted for the test, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts one of `size` at `dir`, or says why it cannot.
    fn mount(dir: &Path, size: &str) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(dir).unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs", dir.to_str().unwrap()])
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if o.status.success() {
            Ok(Tmpfs(dir.to_path_buf()))
        } else {
            Err(format!("mount -t tmpfs: {}", stderr(&o).trim()))
        }
    }

    fn remount_read_only(&self) -> bool {
        Command::new("mount").args(["-o", "remount,ro", self.0.to_str().unwrap()]).status().is_ok_and(|s| s.success())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Checks a failed ingest: a clear message, no file of its own left, the
/// dataset's files and rows as before.
fn assert_failed_cleanly(o: &Output, data: &Path, before: &BTreeMap<String, u64>, rows: u64, says: &[&str]) {
    let err = stderr(o);
    assert!(!o.status.success(), "the ingest should fail");
    assert!(says.iter().any(|s| err.contains(s)), "unclear error: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains(data.to_str().unwrap()), "the error names no path in the dataset: {err}");
    let leftovers: Vec<String> = files(data).into_keys().filter(|k| k.ends_with(".tmp")).collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    assert_eq!(&data_files(data), before, "the dataset changed");
    assert_eq!(requests(data), rows);
}

#[test]
fn a_full_disk_fails_clearly_and_leaves_the_dataset_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let (small, big) = logs(dir.path());
    // A real full disk: a 600 KiB tmpfs (needs the right to mount).
    match Tmpfs::mount(&dir.path().join("disk"), "600k") {
        Ok(disk) => {
            let data = disk.0.join("ds");
            assert!(ingest(&data, &small).status.success());
            let before = data_files(&data);
            let o = ingest(&data, &big);
            assert_failed_cleanly(&o, &data, &before, 200, &["No space left on device"]);
            // Room again (a bigger disk): the same input goes in, exactly once.
            drop(disk);
        }
        Err(why) => eprintln!("skipped the tmpfs case: {why}; the file-size limit case below still runs"),
    }
    // Unprivileged: a file-size limit on the child (SIGXFSZ ignored, so a
    // write past it fails with EFBIG like a full disk).
    let data = dir.path().join("ds");
    assert!(ingest(&data, &small).status.success());
    let before = data_files(&data);
    let script = format!(
        "trap '' XFSZ; ulimit -f 600; exec '{}' ingest --quiet --out '{}' '{}'",
        bin(),
        data.display(),
        big.display()
    );
    let o = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert_failed_cleanly(&o, &data, &before, 200, &["File too large"]);
    // Without the limit the same input is ingested, exactly once.
    assert!(ingest(&data, &big).status.success());
    assert_eq!(requests(&data), 20200);
}

#[test]
fn a_read_only_directory_fails_clearly_and_leaves_the_dataset_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let (small, big) = logs(dir.path());
    let is_root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    let (data, _mounted) = match Tmpfs::mount(&dir.path().join("disk"), "64m") {
        Ok(disk) => {
            let data = disk.0.join("ds");
            assert!(ingest(&data, &small).status.success());
            assert!(disk.remount_read_only(), "remount read-only");
            (data, Some(disk))
        }
        Err(why) if is_root => {
            eprintln!("skipped: {why}, and as root a directory's mode bits do not stop writes");
            return;
        }
        Err(_) => {
            let data = dir.path().join("ds");
            assert!(ingest(&data, &small).status.success());
            Command::new("chmod").args(["-R", "a-w", data.to_str().unwrap()]).status().unwrap();
            (data, None)
        }
    };
    let before = data_files(&data);
    let o = ingest(&data, &big);
    assert_failed_cleanly(&o, &data, &before, 200, &["Read-only file system", "Permission denied"]);
    // Reading a read-only dataset still works.
    assert_eq!(requests(&data), 200);
}

#[test]
fn corrupt_parquet_and_manifest_files_are_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let (small, _) = logs(dir.path());
    let (data, part) = dataset_of_small_log(dir.path(), &small);
    let part = data.join(part);
    let good = std::fs::read(&part).unwrap();
    let name = part.file_name().unwrap().to_str().unwrap().to_string();
    for (what, bytes) in [("truncated", good[..good.len() / 2].to_vec()), ("garbage", b"not parquet at all".to_vec())] {
        std::fs::write(&part, &bytes).unwrap();
        for args in [vec!["query", "SELECT count(*) FROM requests"], vec!["job", "report"]] {
            let mut args = args.clone();
            args.extend(["--data", data.to_str().unwrap()]);
            let o = Command::new(bin()).args(&args).output().unwrap();
            let err = stderr(&o);
            assert!(!o.status.success(), "{what} {args:?}");
            assert!(err.contains(&name) && err.contains("corrupt"), "{what} {args:?}: {err}");
            assert!(!err.contains("panicked"), "{err}");
        }
    }
    std::fs::write(&part, &good).unwrap();
    assert_eq!(requests(&data), 200);
    // A manifest line that is not JSON: ingest stops, naming the manifest.
    let manifest = data.join("_manifest.jsonl");
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    text.push_str("{not json\n");
    std::fs::write(&manifest, text).unwrap();
    let o = ingest(&data, &small);
    let err = stderr(&o);
    assert!(!o.status.success() && err.contains("_manifest.jsonl") && !err.contains("panicked"), "{err}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn a_damaged_model_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.jsonl");
    std::fs::write(
        &log,
        r#"{"ts":1717200000000,"request_id":"a","model":"m","prompt_tokens":5,"completion_tokens":3,"max_tokens":100,"finish_reason":"stop","prompt":"Once upon a time","model_output":" there was"}"#.to_string() + "\n",
    )
    .unwrap();
    let data = dir.path().join("ds");
    assert!(ingest(&data, &log).status.success());
    let good = repo().join("tests/data/models/tiny-stories-a");
    let replay = |model: &Path| {
        Command::new(bin())
            .args(["replay", "--data", data.to_str().unwrap(), "--model", model.to_str().unwrap(), "--device", "cpu"])
            .output()
            .unwrap()
    };
    // Truncated weights.
    let truncated = dir.path().join("truncated");
    copy_dir(&good, &truncated);
    let weights = std::fs::read(truncated.join("model.safetensors")).unwrap();
    std::fs::write(truncated.join("model.safetensors"), &weights[..weights.len() / 2]).unwrap();
    let o = replay(&truncated);
    let err = stderr(&o);
    assert!(!o.status.success() && err.contains("model.safetensors") && !err.contains("panicked"), "{err}");
    // A config whose shapes do not match the weights.
    let mismatched = dir.path().join("mismatched");
    copy_dir(&good, &mismatched);
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(mismatched.join("config.json")).unwrap()).unwrap();
    let hidden = config["hidden_size"].as_u64().unwrap();
    config["hidden_size"] = (hidden * 2).into();
    config["intermediate_size"] = (config["intermediate_size"].as_u64().unwrap() * 2).into();
    std::fs::write(mismatched.join("config.json"), config.to_string()).unwrap();
    let o = replay(&mismatched);
    let err = stderr(&o);
    assert!(!o.status.success() && !err.contains("panicked"), "{err}");
    assert!(err.contains("shape") || err.contains("config"), "{err}");
}

/// A run that fails after its writers finished their files removes them:
/// here counting the requests of a dataset from before `request_counts` (and
/// its file list), one of whose parts is corrupt. The error names the part.
#[test]
fn a_run_failing_after_its_files_are_finished_leaves_none_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let (small, big) = logs(dir.path());
    let (data, part) = dataset_of_small_log(dir.path(), &small);
    std::fs::remove_file(data.join("_files.json")).unwrap();
    std::fs::remove_dir_all(data.join("request_counts")).unwrap();
    std::fs::write(data.join(&part), b"not parquet at all").unwrap();
    let before = data_files(&data);
    let o = ingest(&data, &big);
    let err = stderr(&o);
    assert!(!o.status.success(), "the ingest should fail");
    assert!(err.contains("corrupt dataset file") && err.contains(&part), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let leftovers: Vec<String> = files(&data).into_keys().filter(|k| k.ends_with(".tmp")).collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    assert_eq!(data_files(&data), before, "the dataset changed");
}
