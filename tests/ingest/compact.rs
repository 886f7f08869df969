//! `tokscope compact` and the dataset's file list (`_files.json`): each
//! partition's small files merged into one with every row kept (checked by
//! DuckDB reading the files), queries reading the files the list names and
//! not a listing, and `kill -9` at any point of a compaction never showing
//! a row twice or losing one.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use common::{bin, tokscope};

/// The visible Parquet files under `data/<table>/`, by directory.
fn parts(data: &Path, table: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut stack = vec![data.join(table)];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            if p.is_dir() {
                stack.push(p);
            } else if name.ends_with(".parquet") && !name.starts_with('.') {
                out.entry(d.strip_prefix(data).unwrap().display().to_string()).or_default().push(name);
            }
        }
    }
    out
}

/// Every file below `dir` that a dead writer may leave.
fn leftovers(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            if p.is_dir() {
                stack.push(p);
            } else if rel.ends_with(".tmp") || rel.starts_with("_commits/") {
                out.push(rel);
            }
        }
    }
    out
}

/// A dataset written by three ingest runs of logs spread over three days:
/// every date partition holds several small files.
fn three_runs(dir: &Path) -> std::path::PathBuf {
    let data = dir.join("lake");
    for seed in 1..=3 {
        let log = dir.join(format!("gateway-{seed}.jsonl"));
        let (seed, log_s) = (seed.to_string(), log.to_str().unwrap().to_string());
        tokscope(&["generate", "--requests", "3000", "--days", "3", "--seed", &seed, "--out", &log_s]);
        common::ingest(&[&log_s], &data, &[]);
    }
    data
}

/// Every request row, in request-id order, as tokscope returns it.
fn all_rows(data: &Path) -> String {
    tokscope(&[
        "query",
        "--format",
        "csv",
        "--data",
        data.to_str().unwrap(),
        "SELECT * FROM requests ORDER BY source_file, request_id",
    ])
}

/// `to` made a fresh copy of the dataset `from` (whatever `to` held before is gone).
fn copy_dataset(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    assert!(Command::new("cp").arg("-a").arg(from).arg(to).status().unwrap().success(), "cp -a {from:?}");
}

/// The error a query that must fail prints.
fn query_error(data: &Path, sql: &str) -> String {
    let o = Command::new(bin()).args(["query", "--data", data.to_str().unwrap(), sql]).output().unwrap();
    assert!(!o.status.success(), "{sql} must fail");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn count(data: &Path) -> u64 {
    let rows =
        common::query(data, "SELECT count(*) AS n, count(DISTINCT source_file || request_id) AS ids FROM requests");
    assert_eq!(rows[0]["n"], rows[0]["ids"], "a row appears twice: {}", rows[0]);
    rows[0]["n"].as_u64().unwrap()
}

#[test]
fn compact_merges_each_partitions_small_files_and_keeps_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let data = three_runs(dir.path());
    let before = parts(&data, "requests");
    assert!(before.len() >= 3, "three days or more: {before:?}");
    let several = before.values().filter(|f| f.len() >= 2).count();
    assert!(several >= 3, "three runs, a file each at least: {before:?}");
    let rows_before = all_rows(&data);
    // Generated logs have no rejected lines and no per-token data: only `requests`
    // and the `request_counts` written with them have files.
    let counts_before = parts(&data, "request_counts");
    let counted = common::query(&data, "SELECT count(*) AS n FROM request_counts")[0]["n"].as_u64().unwrap();
    let total_before = common::query(&data, "SELECT sum(requests) AS n FROM request_counts");

    let out = tokscope(&["compact", "--data", data.to_str().unwrap(), "--json", "--quiet"]);
    let summary: serde_json::Value = serde_json::from_str(&out).unwrap();
    let after = parts(&data, "requests");
    assert!(after.values().all(|f| f.len() == 1), "one file per partition: {after:?}");
    assert!(parts(&data, "request_counts").values().all(|f| f.len() == 1));
    assert_eq!(summary["rows"].as_u64(), Some(9000 + counted), "{summary}");
    let merged: usize = before.values().chain(counts_before.values()).filter(|f| f.len() >= 2).map(Vec::len).sum();
    let several = several + counts_before.values().filter(|f| f.len() >= 2).count();
    assert_eq!(summary["files_before"].as_u64().unwrap() as usize, merged, "{summary}");
    assert_eq!(summary["files_after"].as_u64().unwrap() as usize, several, "{summary}");
    assert_eq!(summary["partitions"].as_u64().unwrap() as usize, several, "{summary}");
    assert_eq!(common::query(&data, "SELECT sum(requests) AS n FROM request_counts"), total_before);
    assert_eq!(all_rows(&data), rows_before, "the same rows, cell for cell");
    assert_eq!(leftovers(&data), Vec::<String>::new());

    // DuckDB reads the compacted files directly: the same rows and sums.
    let glob = data.join("requests/*/*.parquet");
    let duck = common::python(&format!(
        "import duckdb\nprint(duckdb.sql(\"SELECT count(*), count(DISTINCT request_id || source_file), sum(prompt_tokens), \
         sum(completion_tokens), count(DISTINCT date) FROM read_parquet('{}', hive_partitioning=true)\").fetchall()[0])",
        glob.display()
    ));
    let ours = common::query(
        &data,
        "SELECT count(*) AS n, sum(prompt_tokens) AS p, sum(completion_tokens) AS c, count(DISTINCT date) AS d FROM requests",
    );
    let expect = format!("(9000, 9000, {}, {}, {})", ours[0]["p"], ours[0]["c"], before.len());
    assert_eq!(duck.trim(), expect, "DuckDB over the merged files");
    // Compaction writes one file at a time, so its integer columns without a
    // dictionary are delta-encoded in every chunk (ingest's are plain);
    // pyarrow finds the encoding and the same sum.
    let chunks = common::parquet_chunks(&data);
    for leaf in ["ts", "source_line", "prompt_tokens", "completion_tokens", "output_token_count"] {
        let encodings = chunks["leaves"][format!("requests.{leaf}")]["encodings"].as_array().unwrap();
        assert!(
            !encodings.is_empty() && encodings.iter().all(|e| e.as_str().unwrap().contains("DELTA_BINARY_PACKED")),
            "{leaf}: {encodings:?}"
        );
    }
    let arrow = common::python(&format!(
        "import glob, pyarrow.parquet as pq\nprint(sum(sum(pq.ParquetFile(f).read(columns=['prompt_tokens']).column(0).to_pylist()) \
         for f in glob.glob({glob:?})))",
        glob = glob.display().to_string()
    ));
    assert_eq!(arrow.trim(), ours[0]["p"].to_string(), "pyarrow over the merged files");

    // Nothing left to merge: a second compaction changes nothing.
    let again = tokscope(&["compact", "--data", data.to_str().unwrap(), "--json", "--quiet"]);
    let again: serde_json::Value = serde_json::from_str(&again).unwrap();
    assert_eq!(again["files_before"], 0, "{again}");
    assert_eq!(parts(&data, "requests"), after);
}

#[test]
fn files_at_least_the_target_size_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let data = three_runs(dir.path());
    let before = parts(&data, "requests");
    let out = tokscope(&["compact", "--data", data.to_str().unwrap(), "--target-size", "1K", "--json", "--quiet"]);
    let summary: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["files_before"], 0, "every file is over 1 KiB: {summary}");
    assert_eq!(parts(&data, "requests"), before);
    let o =
        Command::new(bin()).args(["compact", "--data", data.to_str().unwrap(), "--target-size", "0"]).output().unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--target-size"));
    let o =
        Command::new(bin()).args(["compact", "--data", dir.path().join("nope").to_str().unwrap()]).output().unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("no tokscope dataset"));
}

#[test]
fn queries_read_the_files_the_list_names_not_a_listing() {
    let dir = tempfile::tempdir().unwrap();
    let data = three_runs(dir.path());
    assert!(data.join("_files.json").is_file(), "every commit writes the file list");
    assert_eq!(count(&data), 9000);
    // A copy of a data file that no commit wrote is not part of the dataset...
    let (part, files) = parts(&data, "requests").into_iter().next().unwrap();
    let stray = data.join(&part).join("part-stray.parquet");
    std::fs::copy(data.join(&part).join(&files[0]), &stray).unwrap();
    assert_eq!(count(&data), 9000, "a file outside the list is not read");
    // ...until the list is gone: a dataset without one is listed.
    std::fs::remove_file(data.join("_files.json")).unwrap();
    let rows = common::query(&data, "SELECT count(*) AS n FROM requests");
    assert!(rows[0]["n"].as_u64().unwrap() > 9000, "listed: {}", rows[0]);
    // A file the list names that was deleted outside tokscope is a clear error.
    std::fs::remove_file(&stray).unwrap();
    common::ingest(&[dir.path().join("gateway-1.jsonl").to_str().unwrap()], &data, &["--force"]);
    assert!(data.join("_files.json").is_file(), "the next commit writes the list again");
    let rows = common::query(&data, "SELECT count(*) AS n FROM requests");
    assert_eq!(rows[0]["n"], 12000, "the forced input's rows a second time");
    let victim = parts(&data, "requests").into_iter().next().map(|(p, f)| data.join(p).join(&f[0])).unwrap();
    std::fs::remove_file(&victim).unwrap();
    let err = query_error(&data, "SELECT count(*) FROM requests");
    assert!(err.contains("is gone") && err.contains("_files.json"), "{err}");
}

#[test]
fn count_star_takes_row_counts_from_the_list_and_opens_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = three_runs(dir.path());
    let list: serde_json::Value = serde_json::from_slice(&std::fs::read(data.join("_files.json")).unwrap()).unwrap();
    let requests = list["files"].as_object().unwrap().iter().filter(|(path, _)| path.starts_with("requests/"));
    let listed: u64 = requests.map(|(_, f)| f["rows"].as_u64().unwrap()).sum();
    assert_eq!(listed, 9000, "each file's footer row count, kept at commit: {list}");
    // Zero every file's footer, keeping its size: only a reader of the footers notices.
    for (part, files) in parts(&data, "requests") {
        for path in files.iter().map(|name| data.join(&part).join(name)) {
            let mut bytes = std::fs::read(&path).unwrap();
            let n = bytes.len();
            bytes[n - 1024..].fill(0);
            std::fs::write(&path, bytes).unwrap();
        }
    }
    let rows = common::query(&data, "SELECT count(*) AS n FROM requests");
    assert_eq!(rows[0]["n"], 9000, "count(*) from the list, no footer read");
    let err = query_error(&data, "SELECT sum(prompt_tokens) FROM requests");
    assert!(err.contains("corrupt") && err.contains(".parquet"), "reading data does: {err}");
}

#[test]
fn a_compaction_dead_between_any_two_commit_steps_shows_every_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let pristine = three_runs(dir.path());
    let data = dir.path().join("victim");
    for step in ["recorded", "renamed", "listed", "replaced"] {
        copy_dataset(&pristine, &data);
        let o = Command::new(bin())
            .args(["compact", "--data", data.to_str().unwrap(), "--quiet"])
            .env("TOKSCOPE_CRASH_AT", step)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{step}: the compaction must have died");
        assert!(!leftovers(&data).is_empty(), "{step}: the dead compaction left its commit record");
        // Between the renames and the deletions both the merged files and their
        // inputs are in the directories: only the file list keeps them apart.
        assert_eq!(count(&data), 9000, "{step}: rows seen after the crash");
        tokscope(&["compact", "--data", data.to_str().unwrap(), "--quiet"]);
        assert_eq!(count(&data), 9000, "{step}: after the next compaction");
        assert_eq!(leftovers(&data), Vec::<String>::new(), "{step}");
        assert!(parts(&data, "requests").values().all(|f| f.len() == 1), "{step}");
    }
}

#[test]
fn an_ingest_dead_after_renaming_its_files_shows_none_of_their_rows() {
    let dir = tempfile::tempdir().unwrap();
    let data = three_runs(dir.path());
    let log = dir.path().join("more.jsonl");
    tokscope(&["generate", "--requests", "500", "--seed", "9", "--out", log.to_str().unwrap()]);
    let o = Command::new(bin())
        .args(["ingest", "--quiet", "--out", data.to_str().unwrap(), log.to_str().unwrap()])
        .env("TOKSCOPE_CRASH_AT", "renamed")
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert_eq!(count(&data), 9000, "the dead run's files have their names but are not listed yet");
    common::ingest(&[log.to_str().unwrap()], &data, &[]);
    assert_eq!(count(&data), 9500, "the next run finishes the commit; the input is not ingested twice");
}

#[test]
fn kill_9_during_compaction_never_shows_a_row_twice_or_loses_one() {
    let dir = tempfile::tempdir().unwrap();
    let pristine = three_runs(dir.path());
    let data = dir.path().join("victim");
    copy_dataset(&pristine, &data);
    let started = Instant::now();
    tokscope(&["compact", "--data", data.to_str().unwrap(), "--quiet"]);
    let full = started.elapsed();
    // One compaction killed at `at`, then finished by the next: true when
    // the killed one had merged every partition already.
    let trial = |trial: usize, at: std::time::Duration| -> bool {
        copy_dataset(&pristine, &data);
        common::kill_after(&["compact", "--data", data.to_str().unwrap(), "--quiet"], at);
        assert_eq!(count(&data), 9000, "trial {trial}: rows seen after a kill at {at:?}");
        let merged = parts(&data, "requests").values().all(|f| f.len() == 1);
        // The next compaction finishes or undoes what the dead one left.
        tokscope(&["compact", "--data", data.to_str().unwrap(), "--quiet"]);
        assert_eq!(count(&data), 9000, "trial {trial}: after the rerun");
        assert_eq!(leftovers(&data), Vec::<String>::new(), "trial {trial}");
        assert!(parts(&data, "requests").values().all(|f| f.len() == 1), "trial {trial}");
        merged
    };
    let points = common::kill_points(full, 1.1, 12, 0x2545f4914f6cdd1d);
    let mut merged: Vec<bool> = points.into_iter().enumerate().map(|(i, at)| trial(i, at)).collect();
    // A timed run slower than the killed ones (a busy machine at that moment)
    // can put every point past their end: earlier points until one lands before it.
    let mut at = full;
    while merged.iter().all(|&m| m) && merged.len() < 24 {
        at /= 2;
        merged.push(trial(merged.len(), at));
    }
    assert!(merged.contains(&false), "some kills must land before the compaction finished");
}

/// One partition that cannot be merged fails the whole compaction, and the
/// partitions merged beside it in parallel leave nothing behind: no
/// temporary file, no commit record, every file and row as before.
#[test]
fn a_partition_that_cannot_be_merged_leaves_the_dataset_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let data = three_runs(dir.path());
    // The last file of the last partition gains a column the catalog does not declare.
    let (part, files) = parts(&data, "requests").into_iter().next_back().unwrap();
    let bad = data.join(&part).join(files.last().unwrap());
    common::python(&format!(
        r#"
import json, pyarrow as pa, pyarrow.parquet as pq, os
path, listed = {bad:?}, {list:?}
t = pq.read_table(path)
pq.write_table(t.append_column("zzz_undeclared", pa.array([1] * t.num_rows)), path)
files = json.load(open(listed))
rel = os.path.relpath(path, os.path.dirname(listed))
files["files"][rel]["size"] = os.path.getsize(path)
json.dump(files, open(listed, "w"))
"#,
        bad = bad.display().to_string(),
        list = data.join("_files.json").display().to_string(),
    ));
    let before = parts(&data, "requests");
    let o = common::tokscope_output(&["compact", "--data", data.to_str().unwrap(), "--quiet"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("zzz_undeclared") && err.contains("no longer declares"), "{err}");
    assert_eq!(leftovers(&data), Vec::<String>::new());
    assert_eq!(parts(&data, "requests"), before);
    assert_eq!(common::query(&data, "SELECT count(*) AS n FROM requests")[0]["n"], 9000);
}
