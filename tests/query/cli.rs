//! The command line as a user meets it: one `error:` line (and a `hint:`)
//! with exit status 1; missing datasets, tables and inputs are errors, never
//! empty results (locally and on S3); shell completions, man pages and
//! `--version` from the clap definitions; progress bars only on a terminal.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::S3Server;

/// Every subcommand, as `tokscope --help` lists them.
const COMMANDS: &[&str] = &[
    "ingest",
    "query",
    "job",
    "sql",
    "run",
    "generate",
    "decode",
    "score",
    "replay",
    "trace",
    "mediate",
    "mediation-report",
    "decode-bench",
    "completions",
    "man",
];

fn run(args: &[&str]) -> Output {
    Command::new(common::bin()).args(args).env_remove("COLUMNS").output().expect("run tokscope")
}

/// Asserts `out` failed with status 1, printed nothing on stdout and exactly
/// `error: <...>` (containing `message`) and, when `hint` is given, a
/// `hint: <...>` line containing it; returns stderr.
fn assert_fails(out: &Output, message: &str, hint: Option<&str>) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "exit status; stderr:\n{err}");
    assert!(out.stdout.is_empty(), "nothing on stdout, got {:?}", String::from_utf8_lossy(&out.stdout));
    let lines: Vec<&str> = err.lines().collect();
    assert!(lines[0].starts_with("error: ") && lines[0].contains(message), "{err}");
    assert_eq!(err.matches(message).count(), 1, "the message is printed once:\n{err}");
    match hint {
        Some(h) => assert!(lines.len() == 2 && lines[1].starts_with("hint: ") && lines[1].contains(h), "{err}"),
        None => assert!(lines.len() <= 2 && lines.get(1).is_none_or(|l| l.starts_with("hint: ")), "{err}"),
    }
    err
}

/// A dataset of one Anthropic request: no rejected line, no per-token data.
fn sample_dataset(dir: &Path) -> std::path::PathBuf {
    let data = dir.join("ds");
    let log = std::fs::read_to_string(common::repo().join("sample_logs/anthropic.jsonl")).unwrap();
    let input = common::write_file(dir, "one.jsonl", format!("{}\n", log.lines().next().unwrap()));
    let summary = common::ingest(&[&input], &data, &[]);
    assert_eq!(
        (summary["totals"]["rows_written"].as_u64(), summary["totals"]["lines_rejected"].as_u64()),
        (Some(1), Some(0))
    );
    data
}

#[test]
fn errors_are_one_line_with_a_hint_and_exit_status_1() {
    let dir = tempfile::tempdir().unwrap();
    let data = sample_dataset(dir.path());
    let d = data.to_str().unwrap();
    // A planning error: DataFusion wraps it three deep; it is printed once.
    let out = run(&["query", "--data", d, "SELECT nope FROM requests"]);
    assert_fails(&out, "sql: No field named nope.", Some("Valid fields are requests.request_id"));
    let out = run(&["query", "--data", d, "SELEC 1"]);
    assert_fails(&out, "sql: syntax error: Expected: an SQL statement, found: SELEC", Some("DataFusion's"));
    let out = run(&["job", "nope", "--data", d]);
    assert_fails(&out, "unknown job \"nope\"", Some("jobs: eos, latency, cost, kv_cache, report"));
    let missing = dir.path().join("typo");
    let out = run(&["query", "--data", missing.to_str().unwrap(), "SELECT count(*) FROM requests"]);
    assert_fails(&out, "no tokscope dataset at", Some("tokscope ingest LOGS --out"));
    // clap's own usage errors keep their exit status 2.
    assert_eq!(run(&["query"]).status.code(), Some(2));
}

#[test]
fn missing_datasets_tables_and_inputs_are_errors_not_empty_results() {
    let dir = tempfile::tempdir().unwrap();
    let data = sample_dataset(dir.path());
    let d = data.to_str().unwrap();
    let typo = dir.path().join("dss");
    let t = typo.to_str().unwrap();
    for args in [
        vec!["query", "--data", t, "SELECT count(*) FROM requests"],
        vec!["job", "report", "--data", t],
        vec!["mediation-report", "--data", t],
        vec!["sql", "--data", t],
    ] {
        let err = assert_fails(&run(&args), &format!("no tokscope dataset at {t}: the directory does not exist"), None);
        assert!(err.contains("hint: "), "{args:?}: {err}");
    }
    assert!(!typo.exists(), "reading a dataset never creates it");
    // A directory that holds no dataset.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = run(&["query", "--data", empty.to_str().unwrap(), "SELECT 1"]);
    assert_fails(&out, "no _manifest.jsonl and no table directory", None);
    // Tables other commands write: named, with the command that writes them.
    let out = run(&["query", "--data", d, "SELECT count(*) FROM interventions"]);
    assert_fails(&out, &format!("dataset {d} has no table `interventions`"), Some("`tokscope mediate` writes it"));
    let out = run(&["job", "mediation", "--data", d]);
    assert_fails(&out, "has no table `interventions`", Some("`tokscope mediate` writes it"));
    // Tables ingest writes exist in every dataset: no rejected line is a real zero...
    assert_eq!(common::query(&data, "SELECT count(*) AS n FROM rejects")[0]["n"], 0);
    // ...but a job over a table without rows refuses to print an empty report.
    let out = run(&["job", "jitter", "--data", d]);
    assert_fails(&out, "job jitter needs rows of `tokens`, and the dataset holds none", Some("`tokscope ingest`"));
    // Ingest: a glob that matches nothing, an empty directory, a missing file.
    let out_ds = dir.path().join("new");
    let o = out_ds.to_str().unwrap();
    let glob = format!("{}/*.nothing", dir.path().display());
    assert_fails(&run(&["ingest", "--out", o, &glob]), "no input matches", Some("check the pattern"));
    assert_fails(&run(&["ingest", "--out", o, empty.to_str().unwrap()]), "no input file in", Some("skipped"));
    let gone = dir.path().join("gone.jsonl");
    assert_fails(&run(&["ingest", "--out", o, gone.to_str().unwrap()]), "no input at", Some("check the path"));
    assert!(!out_ds.exists(), "a failed ingest leaves no dataset behind");
}

#[test]
fn missing_datasets_and_tables_on_s3_are_errors() {
    let s3 = S3Server::start();
    let canonical = common::repo().join("sample_logs/canonical.jsonl");
    s3.put("logs", &[("in/canonical.jsonl", &canonical)]);
    s3.put("lake", &[]);
    s3.tokscope(&["ingest", "--quiet", "--out", "s3://lake/ds", "s3://logs/in/"]);
    let run_s3 = |args: &[&str]| Command::new(common::bin()).args(args).envs(s3.env()).output().unwrap();
    let n = s3.tokscope(&["query", "--format", "csv", "--data", "s3://lake/ds", "SELECT count(*) AS n FROM requests"]);
    assert_eq!(n, "n\n80\n");
    let out = run_s3(&["query", "--data", "s3://lake/typo", "SELECT count(*) FROM requests"]);
    assert_fails(
        &out,
        "no tokscope dataset at s3://lake/typo: no _manifest.jsonl and no table under that prefix",
        None,
    );
    let out = run_s3(&["job", "replay", "--data", "s3://lake/ds"]);
    assert_fails(&out, "dataset s3://lake/ds has no table `replay_verdicts`", Some("`tokscope replay` writes it"));
    let out = run_s3(&["ingest", "--out", "s3://lake/ds2", "s3://logs/in/*.gz"]);
    assert_fails(&out, "no object matches", None);
}

#[test]
fn completions_and_man_pages_name_every_command() {
    for shell in ["bash", "zsh", "fish"] {
        let out = run(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", String::from_utf8_lossy(&out.stderr));
        let script = String::from_utf8(out.stdout).unwrap();
        for cmd in COMMANDS {
            assert!(script.contains(cmd), "{shell} completion lacks {cmd}");
        }
        if shell == "bash" {
            let check = Command::new("bash")
                .args(["-n", "/dev/stdin"])
                .stdin(std::process::Stdio::piped())
                .spawn()
                .and_then(|mut c| {
                    use std::io::Write;
                    c.stdin.take().unwrap().write_all(script.as_bytes())?;
                    c.wait()
                })
                .unwrap();
            assert!(check.success(), "bash -n rejects the completion script");
        }
    }
    let out = run(&["man"]);
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.starts_with(".ie") && page.contains(".TH tokscope 1"), "{page}");
    for cmd in COMMANDS {
        assert!(page.contains(&format!("tokscope\\-{}(1)", cmd.replace('-', "\\-"))), "man page lacks {cmd}");
    }
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["man", "--out-dir", dir.path().to_str().unwrap()]);
    assert!(out.status.success());
    for cmd in COMMANDS {
        let page = std::fs::read_to_string(dir.path().join(format!("tokscope-{cmd}.1"))).unwrap();
        assert!(page.contains(".SH OPTIONS") || cmd == &"man", "tokscope-{cmd}.1");
    }
}

#[test]
fn version_names_the_commit() {
    let out = run(&["--version"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let rest = text
        .trim()
        .strip_prefix(&format!("tokscope {} (commit ", env!("CARGO_PKG_VERSION")))
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{text}"));
    let head = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).current_dir(common::repo()).output();
    match head {
        Ok(h) if h.status.success() => {
            let head = String::from_utf8(h.stdout).unwrap();
            assert_eq!(rest.trim_end_matches("-dirty"), head.trim(), "{text}");
        }
        // Built outside a git checkout (a tarball): no commit to name.
        _ => assert_eq!(rest, "unknown"),
    }
}

#[test]
fn help_names_the_bundled_price_tables_release_and_date() {
    // The help is written by hand next to the flag: it must name the snapshot the binary holds.
    let snapshot = tokscope::engine::pricing::BUNDLED_SNAPSHOT;
    for command in [&["job", "--help"][..], &["run", "--help"], &["export", "--help"], &["query", "--help"]] {
        let out = run(command);
        let help = String::from_utf8(out.stdout).unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(help.contains(&format!("({snapshot}")), "{command:?}: {help}");
        assert!(help.contains("none"), "{command:?}: {help}");
    }
}

/// `tokscope trace` on the tiny checkpoint: a few cells, long enough for a bar.
fn trace_args(model: &Path) -> Vec<String> {
    ["trace", "--model", model.to_str().unwrap(), "--prompt", "Once upon a time, Lily", "--device", "cpu"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

#[test]
fn progress_is_silent_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::data_dir().join("models/tiny-stories-a");
    let out = Command::new(common::bin()).args(trace_args(&model)).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{:?}", String::from_utf8_lossy(&out.stderr));
    // Ingest prints its summary, never the bar's carriage returns.
    let canonical = common::repo().join("sample_logs/canonical.jsonl");
    let data = dir.path().join("ds");
    let out = run(&["ingest", "--out", data.to_str().unwrap(), canonical.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.starts_with("ingested 1 file(s)"), "{err}");
    assert!(!err.contains('\r') && !err.contains('\x1b'), "{err:?}");
}

/// Runs tokscope with `args` on a pseudo-terminal (Python's pty: stdout and
/// stderr both on it); returns `(exit code, everything printed)` as Python's repr.
fn run_on_pty(args: &[String]) -> String {
    let mut argv: Vec<String> = vec![common::bin().to_string()];
    argv.extend(args.iter().cloned());
    let script = format!(
        r#"
import os, pty, select, sys
pid, fd = pty.fork()
if pid == 0:
    os.execv({bin:?}, {argv:?})
seen = b""
while True:
    if not select.select([fd], [], [], 120)[0]:
        break
    try:
        data = os.read(fd, 4096)
    except OSError:
        break
    if not data:
        break
    seen += data
_, status = os.waitpid(pid, 0)
sys.stdout.write(repr((os.waitstatus_to_exitcode(status), seen.decode("utf-8", "replace"))))
"#,
        bin = common::bin(),
        argv = argv,
    );
    common::python(&script)
}

#[test]
fn progress_is_drawn_on_a_terminal_unless_quiet() {
    // The bar counts the grid's cells; with --quiet only the result is printed.
    let model = common::data_dir().join("models/tiny-stories-a");
    let trace = |extra: &[&str]| {
        let mut args = trace_args(&model);
        args.extend(extra.iter().map(|s| s.to_string()));
        run_on_pty(&args)
    };
    let shown = trace(&[]);
    assert!(shown.starts_with("(0, "), "{shown}");
    assert!(shown.contains(" cells "), "a bar over the cells: {shown}");
    assert!(shown.contains("p_clean"), "and the result: {shown}");
    let quiet = trace(&["--quiet"]);
    assert!(quiet.starts_with("(0, ") && quiet.contains("p_clean"), "{quiet}");
    assert!(!quiet.contains(" cells "), "--quiet draws no bar: {quiet}");

    // export: a bar over the jobs it runs, then its summary line.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    let canonical = common::repo().join("sample_logs/canonical.jsonl");
    assert!(run(&["ingest", "--quiet", "--out", data.to_str().unwrap(), canonical.to_str().unwrap()]).status.success());
    let export = |extra: &[&str]| {
        let mut args: Vec<String> = ["export", "--data", data.to_str().unwrap(), "--to"].map(String::from).to_vec();
        args.push(dir.path().join("site").to_str().unwrap().to_string());
        args.extend(extra.iter().map(|s| s.to_string()));
        run_on_pty(&args)
    };
    let shown = export(&[]);
    assert!(shown.starts_with("(0, ") && shown.contains("exported "), "{shown}");
    assert!(shown.contains(" jobs "), "a bar over the jobs: {shown}");
    let quiet = export(&["--quiet"]);
    assert!(quiet.starts_with("(0, ") && quiet.contains("exported "), "{quiet}");
    assert!(!quiet.contains(" jobs "), "--quiet draws no bar: {quiet}");
}
