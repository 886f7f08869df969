//! Bounded memory: `--memory-limit` holds a query to a pool; a sort over
//! more data than the pool spills to `--spill-dir` and returns the same rows,
//! and an operator that cannot spill fails with a clear message and a hint,
//! never a kill. Ingest's peak RSS stays bounded as the input grows (the
//! 20 GB measurement is bench/ingest_rss.sh).

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::{bin, can_read_peak_rss, peak_rss_kib, tokscope};

/// Small batches, one partition and a small sort reservation, so that a
/// 4 MB dataset is "bigger than memory" under an 8 MB pool.
const SMALL: &[(&str, &str)] = &[
    ("DATAFUSION_EXECUTION_TARGET_PARTITIONS", "1"),
    ("DATAFUSION_EXECUTION_SORT_SPILL_RESERVATION_BYTES", "1048576"),
    ("DATAFUSION_EXECUTION_BATCH_SIZE", "512"),
];

const SORT: &str = "SELECT request_id FROM requests ORDER BY model_output DESC, request_id";

fn query(data: &Path, env: &[(&str, &str)], extra: &[&str], sql: &str) -> Output {
    let mut args = vec!["query", "--format", "csv", "--data", data.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push(sql);
    Command::new(bin()).args(&args).envs(env.iter().copied()).output().unwrap()
}

fn dataset(dir: &Path, requests: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let log = dir.join("log.jsonl");
    tokscope(&["generate", "--requests", requests, "--seed", "5", "--out", log.to_str().unwrap()]);
    let data = dir.join("ds");
    tokscope(&["ingest", "--quiet", "--out", data.to_str().unwrap(), log.to_str().unwrap()]);
    (log, data)
}

#[test]
fn a_query_over_the_limit_spills_or_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let (_, data) = dataset(dir.path(), "20000");
    let spill = dir.path().join("spill");
    let limited = ["--memory-limit", "8M", "--spill-dir", spill.to_str().unwrap()];
    // The sort spills (DataFusion's own metrics say so) ...
    let o = query(&data, SMALL, &limited, &format!("EXPLAIN ANALYZE {SORT}"));
    let plan = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let spills: u64 = plan
        .split("spill_count=")
        .skip(1)
        .filter_map(|s| s.split(|c: char| !c.is_ascii_digit()).next()?.parse::<u64>().ok())
        .sum();
    assert!(spills > 0, "no spill under an 8 MB pool: {plan}");
    // ... and returns what an unlimited run returns.
    let spilled = query(&data, SMALL, &limited, SORT);
    let unlimited = query(&data, &[], &["--memory-limit", "none"], SORT);
    assert!(spilled.status.success() && unlimited.status.success());
    assert_eq!(spilled.stdout, unlimited.stdout);
    assert_eq!(String::from_utf8_lossy(&spilled.stdout).lines().count(), 20001);
    // Without room to spill (the default 10 MB sort reservation in an 8 MB
    // pool): a clear error with a hint and exit status 1, not a kill.
    let o = query(&data, &[], &limited, SORT);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("Failed to allocate") && err.contains("hint: raise the memory limit"), "{err}");
    // A size that is not one.
    let o = query(&data, &[], &["--memory-limit", "lots"], "SELECT 1");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not a size"));
}

#[test]
fn ingest_peak_rss_does_not_grow_with_the_input() {
    if !can_read_peak_rss() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = dataset(dir.path(), "20000");
    let one = std::fs::read(&log).unwrap();
    let big = dir.path().join("big.jsonl");
    std::fs::write(&big, one.repeat(8)).unwrap();
    let rss = |input: &Path, out: &str| {
        let mut cmd = Command::new(bin());
        cmd.args([
            "ingest",
            "--quiet",
            "--format",
            "canonical",
            "--out",
            dir.path().join(out).to_str().unwrap(),
            input.to_str().unwrap(),
        ]);
        let (kib, ok) = peak_rss_kib(cmd);
        assert!(ok, "ingest of {} failed", input.display());
        kib
    };
    let (small_kib, big_kib) = (rss(&log, "a"), rss(&big, "b"));
    let (small_mb, big_mb) = (one.len() as u64 >> 20, (one.len() as u64 * 8) >> 20);
    eprintln!("peak RSS: {} MiB for {small_mb} MiB of input, {} MiB for {big_mb} MiB", small_kib >> 10, big_kib >> 10);
    // Eight times the input, far less than eight times the memory: what grows
    // is bounded by the chunk size, the channel depth and the row groups.
    assert!(big_kib < 512 * 1024, "{} MiB peak for {big_mb} MiB of input", big_kib >> 10);
    assert!(big_kib < small_kib * 3, "peak RSS grew from {small_kib} to {big_kib} KiB");
}

/// A log spread over many days keeps a Parquet file open per day in each
/// writer thread, each with a row group in memory: without a limit what is
/// buffered grows with the days and the rows. Under `--memory-limit` the
/// writers flush their largest row groups, and the peak stays within the
/// limit above what the program holds ingesting a few lines. The unlimited
/// run of the same log must go over the limit, or the log proves nothing.
#[test]
fn ingest_holds_its_memory_limit_over_many_partitions() {
    if !can_read_peak_rss() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let generate = |requests: &str, name: &str| {
        let log = dir.path().join(name);
        let args = format!("generate --requests {requests} --days 90 --output-chars 1500 --seed 9 --out");
        let mut args: Vec<&str> = args.split(' ').collect();
        args.push(log.to_str().unwrap());
        tokscope(&args);
        log
    };
    let (tiny, log) = (generate("20", "tiny.jsonl"), generate("100000", "days.jsonl"));
    const LIMIT_MIB: u64 = 256;
    let ingest = |input: &Path, limit: &str, out: &str| {
        let data = dir.path().join(out);
        let mut cmd = Command::new(bin());
        cmd.env("RAYON_NUM_THREADS", "2").args([
            "ingest",
            "--quiet",
            "--json",
            "--format",
            "canonical",
            "--max-line-bytes",
            "1048576",
            "--memory-limit",
            limit,
            "--out",
            data.to_str().unwrap(),
            input.to_str().unwrap(),
        ]);
        cmd.stdout(std::process::Stdio::null());
        let (kib, ok) = peak_rss_kib(cmd);
        assert!(ok, "ingest of {} with --memory-limit {limit} failed", input.display());
        kib >> 10
    };
    let base = ingest(&tiny, "256M", "tiny");
    let limited = ingest(&log, "256M", "limited");
    let unlimited = ingest(&log, "none", "unlimited");
    eprintln!("peak RSS: {base} MiB for a few lines, {limited} MiB under 256M, {unlimited} MiB without a limit");
    assert!(unlimited - base > LIMIT_MIB, "the log is too small to test the limit: {unlimited} MiB without one");
    assert!(limited - base <= LIMIT_MIB, "{limited} MiB peak under a 256 MiB limit ({base} MiB for a few lines)");
    // The same rows either way.
    let count = |out: &str| {
        let data = dir.path().join(out);
        let o = query(&data, &[], &[], "SELECT count(*) AS n, count(DISTINCT request_id) AS d FROM requests");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    assert_eq!(count("limited"), count("unlimited"));
    assert_eq!(count("limited"), "n,d\n100000,100000\n");
}

#[test]
fn an_ingest_limit_below_what_the_pipeline_holds_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.jsonl");
    tokscope(&["generate", "--requests", "10", "--out", log.to_str().unwrap()]);
    let data = dir.path().join("ds");
    let o = Command::new(bin())
        .env("RAYON_NUM_THREADS", "2")
        .args(["ingest", "--memory-limit", "32M", "--out", data.to_str().unwrap(), log.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--memory-limit 32 MiB is below what ingest needs") && err.contains("--max-line-bytes"),
        "{err}"
    );
    assert!(!data.join("requests").exists(), "a refused run wrote rows");
    let o = Command::new(bin())
        .args(["ingest", "--memory-limit", "lots", "--out", data.to_str().unwrap(), log.to_str().unwrap()])
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not a size"));
}
