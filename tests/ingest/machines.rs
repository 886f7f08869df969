//! The product as other machines run it: the README's main job and the
//! commands that work in parallel, with their defaults, at forced thread
//! counts (1, 2, 6, 16, 64), inside a simulated container: a 64-core host
//! whose cgroup (v2) limits the process to 1 GiB, read through
//! `TOKSCOPE_SYSTEM_ROOT`, the code path a real container's files take.
//! Each command exits 0, gives the same rows and results at every count
//! (floating-point results to 1e-12 relative), and ingest and compaction
//! stay within their memory budget as the kernel measures their peak RSS.
//! Row groups keep their size whatever the budget.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{bin, can_read_peak_rss, peak_rss_kib};
use serde_json::{json, Value};

const THREADS: [usize; 5] = [1, 2, 6, 16, 64];

/// The simulated container's memory limit, and what its automatic budget is
/// (a quarter of it, at least 256 MiB).
const CONTAINER_MIB: u64 = 1024;
const AUTO_BUDGET_MIB: u64 = 256;

/// Files laid out like `/proc` and `/sys/fs/cgroup` of a container limited
/// to [`CONTAINER_MIB`] on a 64-core host with 256 GiB.
fn container(dir: &Path) -> PathBuf {
    let root = dir.join("machine");
    let write = |rel: &str, text: &str| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("proc/meminfo", "MemTotal:       268435456 kB\nMemAvailable:   251658240 kB\n");
    write("sys/devices/system/cpu/online", "0-63\n");
    write("proc/self/cgroup", "0::/\n");
    write("sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
    write("sys/fs/cgroup/memory.max", &format!("{}\n", CONTAINER_MIB << 20));
    write("sys/fs/cgroup/memory.current", "0\n");
    write("sys/fs/cgroup/cpu.max", "max 100000\n");
    root
}

/// `tokscope --threads N ARGS` on the simulated container.
fn command(machine: &Path, threads: usize, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.env("TOKSCOPE_SYSTEM_ROOT", machine).env_remove("TOKSCOPE_THREADS").env_remove("RAYON_NUM_THREADS");
    cmd.arg("--threads").arg(threads.to_string()).args(args);
    cmd
}

fn run(machine: &Path, threads: usize, args: &[&str]) -> String {
    let out = command(machine, threads, args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{threads} threads: tokscope {args:?} failed:\n{stderr}");
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `args` and returns its peak RSS in MiB, asserting success.
fn peak_mib(machine: &Path, threads: usize, args: &[&str]) -> u64 {
    let mut cmd = command(machine, threads, args);
    cmd.stdout(std::process::Stdio::null());
    let (kib, ok) = peak_rss_kib(cmd);
    assert!(ok, "{threads} threads: tokscope {args:?} failed");
    kib >> 10
}

/// A multi-file input: canonical over five days, OpenAI chat, and a file of
/// lines of about 300 KB each.
fn logs(dir: &Path) -> PathBuf {
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    for (name, args) in [
        ("a.jsonl", "--requests 4000 --days 5 --seed 1 --token-data"),
        ("b.jsonl", "--requests 2000 --format openai_chat --seed 2"),
        ("c.jsonl", "--requests 40 --output-chars 300000 --seed 3"),
    ] {
        let out = logs.join(name);
        let mut all: Vec<&str> = vec!["generate", "--out", out.to_str().unwrap()];
        all.extend(args.split(' '));
        common::tokscope(&all);
    }
    logs
}

fn csv(machine: &Path, threads: usize, data: &Path, sql: &str) -> String {
    run(machine, threads, &["query", "--format", "csv", "--data", data.to_str().unwrap(), sql])
}

/// Asserts two CSV texts hold the same cells, numbers within 1e-12 relative.
fn assert_same_csv(what: &str, a: &str, b: &str) {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    assert_eq!(la.len(), lb.len(), "{what}: row count");
    for (ra, rb) in la.iter().zip(&lb) {
        let (ca, cb): (Vec<&str>, Vec<&str>) = (ra.split(',').collect(), rb.split(',').collect());
        assert_eq!(ca.len(), cb.len(), "{what}: {ra} / {rb}");
        for (x, y) in ca.iter().zip(&cb) {
            let same = match (x.parse::<f64>(), y.parse::<f64>()) {
                (Ok(p), Ok(q)) => p == q || (p - q).abs() <= 1e-12 * p.abs().max(q.abs()),
                _ => x == y,
            };
            assert!(same, "{what}: {x} against {y} in\n{ra}\n{rb}");
        }
    }
}

/// `tokscope run`, the README's main job, exactly as a user types it (here
/// with `--report-format csv` to compare full precision).
#[test]
fn the_main_job_runs_with_defaults_at_every_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let machine = container(dir.path());
    let mut first: Option<String> = None;
    for threads in THREADS {
        let out = dir.path().join(format!("run{threads}"));
        let report =
            run(&machine, threads, &["run", "--quiet", "--out", out.to_str().unwrap(), "--report-format", "csv"]);
        assert!(report.lines().count() > 10, "{report}");
        match &first {
            None => first = Some(report),
            Some(one) => assert_same_csv(&format!("report at {threads} threads"), one, &report),
        }
    }
}

/// Ingest, export and compaction of a multi-file input with long lines:
/// the same rows, job results and counts at every thread count, and peak
/// RSS within the automatic budget above what the program holds for a
/// few lines.
#[test]
fn ingest_export_and_compact_agree_and_hold_their_budget_at_every_thread_count() {
    if !can_read_peak_rss() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let machine = container(dir.path());
    let logs = logs(dir.path());
    let tiny = dir.path().join("tiny.jsonl");
    common::tokscope(&["generate", "--requests", "5", "--out", tiny.to_str().unwrap()]);
    let rows_sql = "SELECT * EXCLUDE (source_file) FROM requests ORDER BY request_id";
    let tokens_sql = "SELECT request_id, position, token, logprob FROM tokens ORDER BY request_id, position";
    let mut expected: Option<(String, String, BTreeMap<String, String>)> = None;
    for threads in THREADS {
        let data = dir.path().join(format!("data{threads}"));
        let base_data = dir.path().join(format!("base{threads}"));
        let base = peak_mib(
            &machine,
            threads,
            &["ingest", "--quiet", "--out", base_data.to_str().unwrap(), tiny.to_str().unwrap()],
        );
        let summary = run(
            &machine,
            threads,
            &["ingest", "--quiet", "--json", "--out", data.to_str().unwrap(), logs.to_str().unwrap()],
        );
        let summary: Value = serde_json::from_str(&summary).unwrap();
        let plan = &summary["memory"];
        assert_eq!(plan["limit"], json!(AUTO_BUDGET_MIB << 20), "{plan}");
        assert_eq!((plan["limit_from"].as_str(), plan["parse_threads"].as_u64()), (Some("auto"), Some(threads as u64)));
        assert!(plan["writer_threads"].as_u64().unwrap() >= 1, "{plan}");
        assert_eq!(summary["totals"]["lines_rejected"], json!(0), "{summary}");

        // The same input again, measured (a rerun of an ingested input is a no-op: --force).
        let measured = dir.path().join(format!("measured{threads}"));
        let peak = peak_mib(
            &machine,
            threads,
            &["ingest", "--quiet", "--out", measured.to_str().unwrap(), logs.to_str().unwrap()],
        );
        eprintln!("{threads} threads: ingest peak RSS {peak} MiB, {base} MiB for a few lines");
        assert!(peak <= base + AUTO_BUDGET_MIB, "{threads} threads: {peak} MiB over {base} + {AUTO_BUDGET_MIB} MiB");

        let site = dir.path().join(format!("site{threads}"));
        run(
            &machine,
            threads,
            &[
                "export",
                "--quiet",
                "--data",
                data.to_str().unwrap(),
                "--to",
                site.to_str().unwrap(),
                "--date",
                "2024-06-10",
            ],
        );
        let mut exported = BTreeMap::new();
        for entry in std::fs::read_dir(site.join("2024-06-10")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "csv") {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                exported.insert(name, std::fs::read_to_string(&path).unwrap());
            }
        }
        assert!(exported.len() >= 5, "{:?}", exported.keys());

        let compact_peak = peak_mib(&machine, threads, &["compact", "--quiet", "--data", measured.to_str().unwrap()]);
        assert!(compact_peak <= base + AUTO_BUDGET_MIB, "{threads} threads: compaction {compact_peak} MiB");
        let after = csv(&machine, threads, &measured, rows_sql);

        let (rows, tokens) = (csv(&machine, threads, &data, rows_sql), csv(&machine, threads, &data, tokens_sql));
        assert_eq!(rows, after, "{threads} threads: compaction changed the rows");
        match &expected {
            None => expected = Some((rows, tokens, exported)),
            Some((r, t, e)) => {
                assert_same_csv(&format!("requests at {threads} threads"), r, &rows);
                assert_same_csv(&format!("tokens at {threads} threads"), t, &tokens);
                assert_eq!(e.keys().collect::<Vec<_>>(), exported.keys().collect::<Vec<_>>());
                for (name, text) in e {
                    assert_same_csv(&format!("{name} at {threads} threads"), text, &exported[name]);
                }
            }
        }
    }
}

/// Replay on the CPU decoder: the same verdicts at every thread count.
#[test]
fn replay_gives_the_same_verdicts_at_every_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let machine = container(dir.path());
    let model = common::data_dir().join("models/tiny-stories-a");
    let golden: Value = serde_json::from_str(&std::fs::read_to_string(model.join("golden.json")).unwrap()).unwrap();
    let case = |i: usize, k: &str| golden["cases"][i][k].as_str().unwrap().to_string();
    let cut: String = case(0, "greedy_text").split(' ').take(3).collect::<Vec<_>>().join(" ");
    let line = |id: &str, prompt: &str, output: &str| {
        json!({"ts": "2024-06-01T00:00:00Z", "request_id": id, "model": "m", "prompt_tokens": 12,
               "completion_tokens": 9, "max_tokens": 256, "finish_reason": "stop",
               "prompt": prompt, "model_output": output})
        .to_string()
    };
    let log = dir.path().join("log.jsonl");
    let lines =
        [line("a-cut", &case(0, "prompt"), &cut), line("b-complete", &case(1, "prompt"), &case(1, "greedy_text"))];
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let mut first: Option<String> = None;
    for threads in THREADS {
        let data = dir.path().join(format!("data{threads}"));
        run(&machine, threads, &["ingest", "--quiet", "--out", data.to_str().unwrap(), log.to_str().unwrap()]);
        run(
            &machine,
            threads,
            &[
                "replay",
                "--quiet",
                "--data",
                data.to_str().unwrap(),
                "--model",
                model.to_str().unwrap(),
                "--device",
                "cpu",
            ],
        );
        let verdicts = csv(
            &machine,
            threads,
            &data,
            "SELECT request_id, verdict, p_eos_at_cut FROM replay_verdicts ORDER BY request_id",
        );
        assert_eq!(verdicts.lines().count(), 3, "{verdicts}");
        match &first {
            None => first = Some(verdicts),
            Some(one) => assert_same_csv(&format!("verdicts at {threads} threads"), one, &verdicts),
        }
    }
}

/// Row groups, per table partition, from the files' footers.
fn row_groups(data: &Path, table: &str) -> BTreeMap<String, Vec<i64>> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let mut groups: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let dir = data.join(table);
    for part in std::fs::read_dir(&dir).unwrap() {
        let part = part.unwrap().path();
        let name = part.file_name().unwrap().to_string_lossy().into_owned();
        for file in std::fs::read_dir(&part).unwrap() {
            let file = file.unwrap().path();
            if file.extension().is_none_or(|e| e != "parquet") {
                continue;
            }
            let reader = SerializedFileReader::new(std::fs::File::open(&file).unwrap()).unwrap();
            let sizes = reader.metadata().row_groups().iter().map(|g| g.num_rows());
            groups.entry(name.clone()).or_default().extend(sizes);
        }
        if let Some(sizes) = groups.get_mut(&name) {
            sizes.sort_unstable();
        }
    }
    groups
}

/// A log of 300,000 requests over two days (150,000 a day: two row groups
/// per day) and the same number over 30 days (one per day): every row group
/// holds at least 65,536 rows or its whole partition, and the row groups
/// are the same under a tight budget (rows spill to disk) as without one.
#[test]
fn row_groups_keep_their_size_under_any_budget() {
    let dir = tempfile::tempdir().unwrap();
    for days in ["2", "30"] {
        let log = dir.path().join(format!("days{days}.jsonl"));
        let args = [
            "generate",
            "--requests",
            "300000",
            "--days",
            days,
            "--output-chars",
            "100",
            "--out",
            log.to_str().unwrap(),
        ];
        common::tokscope(&args);
        let mut layouts = Vec::new();
        for limit in ["256M", "none"] {
            let data = dir.path().join(format!("d{days}-{limit}"));
            let summary =
                common::ingest(&[log.to_str().unwrap()], &data, &["--memory-limit", limit, "--format", "canonical"]);
            if limit != "none" && days == "2" {
                assert!(summary["spilled_bytes"].as_u64().unwrap() > 0, "the tight budget spilled nothing: {summary}");
            }
            let groups = row_groups(&data, "requests");
            // Full groups of 128Ki rows, then a last one of 64Ki to 192Ki (or the whole partition).
            for (partition, sizes) in &groups {
                let total: i64 = sizes.iter().sum();
                let (last, full) = sizes.split_last().unwrap();
                assert!(full.iter().all(|&n| n == 131_072), "{days} days, {limit}: {partition} has {sizes:?}");
                assert!(
                    (65_536.min(total)..=196_608).contains(last),
                    "{days} days, {limit}: {partition} has row groups {sizes:?}"
                );
            }
            let total: i64 = groups.values().flatten().sum();
            assert_eq!(total, 300_000);
            layouts.push(groups);
        }
        assert_eq!(layouts[0], layouts[1], "{days} days: the budget changed the row groups");
        // 150,000 rows a day: one full group and 18,928 rows after it, fewer than half a
        // group, so they join it; 10,000 a day: the whole partition.
        assert!(layouts[0].values().all(|g| g.len() == 1), "{:?}", layouts[0]);
    }
}
