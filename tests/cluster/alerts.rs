//! Budgets and alerts of `tokscope run --config`: thresholds above and below
//! firing where a job's row crosses them and nowhere else, budgets on spend
//! and on the month-end forecast, one notification per breach across reruns
//! (and after a `kill -9` between evaluation and publish), a failing
//! `on_alert` reported without failing the run, the banner in the page.
//!
//! The logs are written here line by line, so every expected value is
//! worked out by hand below from the prices in `config/pricing.example.toml`
//! (gpt-4o-2024-08-06: $2.50 per 1M input tokens, $10 per 1M output).

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{bin, S3Server};

/// The run's date: June 2024 has 30 days, 10 of them elapsed.
const DATE: &str = "2024-06-10";

/// A priced request of exactly $1.00: 396,000 input tokens ($0.99) and
/// 1,000 output tokens ($0.01).
fn dollar(ts: &str, team: &str, tags: &[&str]) -> String {
    serde_json::json!({
        "ts": ts, "model": "gpt-4o-2024-08-06", "prompt_tokens": 396_000, "completion_tokens": 1000,
        "max_tokens": 4000, "ttft_ms": 100, "latency_ms": 900, "finish_reason": "stop",
        "model_output": "done</s>", "team": team, "tags": tags,
    })
    .to_string()
}

/// An unpriced request of `model` on June 3rd; `eos`: its output ends with
/// an EOS marker, else it stops short of `max_tokens` without one (an
/// implicit truncation).
fn unpriced(model: &str, ttft_ms: u32, eos: bool) -> String {
    serde_json::json!({
        "ts": "2024-06-03T12:00:00Z", "model": model, "prompt_tokens": 100, "completion_tokens": 10,
        "max_tokens": 500, "ttft_ms": ttft_ms, "latency_ms": ttft_ms + 500, "finish_reason": "stop",
        "model_output": if eos { "fine</s>" } else { "cut" },
    })
    .to_string()
}

/// The log of the first run:
/// - team `search`: $1 on each of June 1-4 ($4: forecast 4 / 10 x 30 = $12);
/// - team `ads`: six $1 requests on June 2, tagged `cc:42` ($6; that day's
///   gpt-4o cost is $7 with search's);
/// - team `infra`: $1 on June 5, and $1 on May 31 and June 20, outside the
///   month to date ($1: forecast $3);
/// - `m-slow`: TTFT 3 s, 4 of its 5 outputs with an EOS marker (compliance
///   0.8, implicit truncation 0.2); `m-fast`: TTFT 0.1 s, all 3 with one.
fn first_log() -> Vec<String> {
    let mut lines = Vec::new();
    for day in 1..=4 {
        lines.push(dollar(&format!("2024-06-0{day}T09:00:00Z"), "search", &[]));
    }
    for _ in 0..6 {
        lines.push(dollar("2024-06-02T10:00:00Z", "ads", &["cc:42"]));
    }
    for ts in ["2024-06-05T08:00:00Z", "2024-05-31T08:00:00Z", "2024-06-20T08:00:00Z"] {
        lines.push(dollar(ts, "infra", &[]));
    }
    for i in 0..5 {
        lines.push(unpriced("m-slow", 3000, i != 0));
    }
    for _ in 0..3 {
        lines.push(unpriced("m-fast", 100, true));
    }
    lines
}

fn write_log(dir: &Path, name: &str, lines: &[String]) {
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::write(logs.join(name), lines.join("\n") + "\n").unwrap();
}

/// `on_alert`: appends the JSON it reads to `sent.jsonl` as one line.
const RECORD: &str =
    "python3 -c \"import json,sys; d=json.load(sys.stdin); open('sent.jsonl','a').write(json.dumps(d)+'\\\\n')\"";

/// A run file in `dir` with the dataset `lake`, the export `site` and `rules`.
fn config(dir: &Path, top: &str, rules: &str) -> PathBuf {
    config_at(dir, "lake", "logs", "site", top, rules)
}

/// A run file in `dir` with `dataset`, one source, the export to `to`, and `rules`.
fn config_at(dir: &Path, dataset: &str, source: &str, to: &str, top: &str, rules: &str) -> PathBuf {
    let pricing = common::repo().join("config/pricing.example.toml");
    let text = format!(
        "dataset = {dataset:?}\nsources = [{source:?}]\npricing = {:?}\n{top}\n[export]\nto = {to:?}\njobs = [\"daily\", \"eos\"]\n{rules}",
        pricing.display().to_string()
    );
    let path = dir.join("job.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn run(config: &Path) -> Output {
    run_with(config, &[])
}

fn run_with(config: &Path, env: &[(&str, String)]) -> Output {
    Command::new(bin())
        .args(["run", "--config", config.to_str().unwrap(), "--quiet", "--json", "--date", DATE])
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

fn report(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("--json report: {e}\n{}", text(o)))
}

/// The active alerts of a report as (rule, keys as `k=v,...`, value rounded to 1e-6).
fn active(report: &serde_json::Value) -> BTreeSet<(String, String, String)> {
    report["alerts"]["active"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let keys: Vec<String> =
                a["keys"].as_object().unwrap().iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap())).collect();
            (a["rule"].as_str().unwrap().to_string(), keys.join(","), format!("{:.6}", a["value"].as_f64().unwrap()))
        })
        .collect()
}

fn set(items: &[(&str, &str, &str)]) -> BTreeSet<(String, String, String)> {
    items.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())).collect()
}

/// The documents `on_alert` received, one per call.
fn sent(dir: &Path) -> Vec<serde_json::Value> {
    match std::fs::read_to_string(dir.join("sent.jsonl")) {
        Ok(text) => text.lines().map(|l| serde_json::from_str(l).unwrap()).collect(),
        Err(_) => Vec::new(),
    }
}

const THRESHOLDS: &str = r#"
[[alerts]]
name = "slow first token"
job = "latency"
column = "ttft_p95_ms"
above = 2000

[[alerts]]
name = "EOS compliance m-slow"
job = "eos"
column = "eos_compliance_rate"
below = 0.98
where = { model = "m-slow" }

[[alerts]]
name = "EOS compliance m-fast"
job = "eos"
column = "eos_compliance_rate"
below = 0.98
where = { model = "m-fast" }

[[alerts]]
name = "a day's cost"
job = "daily"
column = "cost_usd"
above = 5

[[alerts]]
name = "truncation per team"
job = "eos"
column = "implicit_truncation_rate"
above = 0.01
params = { by = "team" }
"#;

const BUDGETS: &str = r#"
[[budgets]]
team = "search"
usd_per_month = 5

[[budgets]]
team = "ads"
usd_per_month = 5

[[budgets]]
team = "infra"
usd_per_month = 5

[[budgets]]
name = "cost centre <42> & co"
tag = "cc:42"
usd_per_month = 10
"#;

#[test]
fn thresholds_and_budgets_fire_where_crossed_and_nowhere_else() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), "a.jsonl", &first_log());
    let cfg = config(dir.path(), &format!("on_alert = {RECORD:?}"), &format!("{THRESHOLDS}{BUDGETS}"));
    let out = run(&cfg);
    assert_eq!(code(&out), 5, "an alert fired: exit 5\n{}", text(&out));
    let report = report(&out);
    // By hand: m-slow's TTFT P95 is 3000 ms (above 2000), m-fast's and gpt-4o's 100;
    // m-slow's compliance 4/5 (below 0.98), m-fast's 3/3; June 2 cost $7 (above 5),
    // the other days $1; implicit truncation above 1% only in the requests
    // without a team (m-slow's: 1 of 8 unteamed requests = 0.125).
    // Budgets: search forecast $12 > $5 with $4 spent; ads spent $6 > $5;
    // infra $1 spent, forecast $3: none; cc:42 $6 spent, forecast $18 > $10.
    assert_eq!(
        active(&report),
        set(&[
            ("slow first token", "context_bin=0-1K,model=m-slow", "3000.000000"),
            ("EOS compliance m-slow", "context_bin=0-1K,model=m-slow", "0.800000"),
            ("a day's cost", "date=2024-06-02,model=gpt-4o-2024-08-06", "7.000000"),
            ("truncation per team", "context_bin=0-1K", "0.125000"),
            ("team=search", "month=2024-06,team=search", "12.000000"),
            ("team=ads", "month=2024-06,team=ads", "6.000000"),
            ("cost centre <42> & co", "month=2024-06,tag=cc:42", "18.000000"),
        ]),
        "{}",
        text(&out)
    );
    let alerts = report["alerts"]["active"].as_array().unwrap();
    let by_rule = |rule: &str| alerts.iter().find(|a| a["rule"] == rule).unwrap();
    assert_eq!(by_rule("team=search")["column"], "forecast_usd");
    assert!((by_rule("team=search")["budget"]["spend_usd"].as_f64().unwrap() - 4.0).abs() < 1e-9);
    assert_eq!(by_rule("team=search")["budget"]["days_elapsed"], 10);
    assert_eq!(by_rule("team=search")["budget"]["days_in_month"], 30);
    assert_eq!(by_rule("team=ads")["column"], "spend_usd");
    assert_eq!(by_rule("EOS compliance m-slow")["direction"], "below");
    assert_eq!(report["alerts"]["fired"], 7);
    assert_eq!(report["alerts"]["on_alert"]["ok"], true);

    // on_alert got the seven, as the report has them.
    let sent = sent(dir.path());
    assert_eq!(sent.len(), 1, "one call");
    assert_eq!(sent[0]["date"], DATE);
    assert_eq!(sent[0]["alerts"].as_array().unwrap(), alerts);
    // alerts.json in the export, and the banner at the top of the page, escaped.
    let site = dir.path().join("site/latest");
    let exported: serde_json::Value =
        serde_json::from_slice(&std::fs::read(site.join("alerts.json")).unwrap()).unwrap();
    assert_eq!(exported["alerts"].as_array().unwrap(), alerts);
    let page = std::fs::read_to_string(site.join("index.html")).unwrap();
    let banner_at = page.find(r#"<div class="alerts" role="alert" data-alerts="7">"#).expect("the banner");
    assert!(banner_at < page.find("<h1>").unwrap(), "the banner comes first");
    assert!(page.contains("<li>budget cost centre &lt;42&gt; &amp; co: 2024-06 forecast $18.00 is above $10.00 a month ($6.00 spent in 10 of 30 days)</li>"), "{page}");
    assert!(page.contains("<li>budget team=ads: 2024-06 spend $6.00 is above $5.00 a month (forecast $18.00)</li>"));
    assert!(page.contains(
        "<li>EOS compliance m-slow: eos_compliance_rate 0.8 is below 0.98 (model=m-slow, context_bin=0-1K)</li>"
    ));
}

#[test]
fn rules_not_crossed_fire_nothing_and_the_page_has_no_banner() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), "a.jsonl", &first_log());
    // Each threshold just past the value: m-slow's TTFT P95 3000 ms, its
    // compliance 0.8, the largest day's cost $7, infra's forecast $3.
    let rules = r#"
[[alerts]]
job = "latency"
column = "ttft_p95_ms"
above = 3000
[[alerts]]
job = "eos"
column = "eos_compliance_rate"
below = 0.8
[[alerts]]
job = "daily"
column = "cost_usd"
above = 7.000001
[[budgets]]
team = "infra"
usd_per_month = 3.000001
"#;
    let cfg = config(dir.path(), &format!("on_alert = {RECORD:?}"), rules);
    let out = run(&cfg);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let report = report(&out);
    assert_eq!(report["alerts"]["active"], serde_json::json!([]));
    assert_eq!(report["alerts"]["fired"], 0);
    assert!(report["alerts"]["on_alert"].is_null(), "no call without an alert");
    assert!(sent(dir.path()).is_empty());
    let site = dir.path().join("site/latest");
    let exported: serde_json::Value =
        serde_json::from_slice(&std::fs::read(site.join("alerts.json")).unwrap()).unwrap();
    assert_eq!(exported["alerts"], serde_json::json!([]));
    assert!(!std::fs::read_to_string(site.join("index.html")).unwrap().contains("class=\"alerts\""));
}

#[test]
fn an_alert_fires_once_across_reruns_and_again_when_it_recurs() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), "a.jsonl", &first_log());
    let rule =
        "[[alerts]]\njob = \"eos\"\ncolumn = \"eos_compliance_rate\"\nbelow = 0.98\nwhere = { model = \"m-slow\" }\n";
    let cfg = config(dir.path(), &format!("on_alert = {RECORD:?}"), rule);
    let first = run(&cfg);
    assert_eq!(code(&first), 5, "{}", text(&first));
    let second = run(&cfg);
    assert_eq!(code(&second), 3, "still breached, already notified: nothing new, no alert\n{}", text(&second));
    assert_eq!(report(&second)["alerts"]["active"].as_array().unwrap().len(), 1, "still active");
    assert_eq!(report(&second)["alerts"]["fired"], 0);
    assert_eq!(sent(dir.path()).len(), 1, "one notification over two runs");
    // 45 more good outputs: 49 of 50 = 0.98, no longer below: the breach ends.
    write_log(dir.path(), "b.jsonl", &vec![unpriced("m-slow", 3000, true); 45]);
    let third = run(&cfg);
    assert_eq!(code(&third), 0, "{}", text(&third));
    assert_eq!(report(&third)["alerts"]["active"], serde_json::json!([]));
    // One more truncation: 49 of 51, below again: it fires again.
    write_log(dir.path(), "c.jsonl", &[unpriced("m-slow", 3000, false)]);
    let fourth = run(&cfg);
    assert_eq!(code(&fourth), 5, "{}", text(&fourth));
    let sent = sent(dir.path());
    assert_eq!(sent.len(), 2, "the recurrence is a new notification");
    let value = sent[1]["alerts"][0]["value"].as_f64().unwrap();
    assert!((value - 49.0 / 51.0).abs() < 1e-12, "{value}");
}

#[test]
fn kill_9_between_evaluation_and_publish_leaves_exactly_one_notification() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), "a.jsonl", &first_log());
    let rule =
        "[[alerts]]\njob = \"eos\"\ncolumn = \"eos_compliance_rate\"\nbelow = 0.98\nwhere = { model = \"m-slow\" }\n";
    // The export runs every dashboard job: the window between the state's
    // write and the export's publication is most of a second or more.
    let cfg = config(dir.path(), &format!("on_alert = {RECORD:?}"), rule).to_str().unwrap().to_string();
    let every_job = std::fs::read_to_string(&cfg).unwrap().replace("jobs = [\"daily\", \"eos\"]\n", "");
    std::fs::write(&cfg, every_job).unwrap();
    let state = dir.path().join("lake/_alerts.json");
    let mut child = Command::new(bin())
        .args(["run", "--config", &cfg, "--quiet", "--date", DATE])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed as soon as the breach is recorded pending.
    let started = Instant::now();
    loop {
        if std::fs::read_to_string(&state).is_ok_and(|s| s.contains("\"pending\"")) {
            child.kill().unwrap();
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it recorded a pending breach");
        assert!(started.elapsed() < Duration::from_secs(300), "no pending breach after 5 minutes");
        std::thread::sleep(Duration::from_millis(1));
    }
    child.wait().unwrap();
    assert!(!dir.path().join("site/latest").exists(), "killed before the export was published");
    assert!(sent(dir.path()).is_empty(), "killed before on_alert");

    let rerun = Command::new(bin()).args(["run", "--config", &cfg, "--quiet", "--date", DATE]).output().unwrap();
    // Nothing new to ingest (the killed run committed it), but the pending breach is sent.
    assert_eq!(code(&rerun), 5, "{}", text(&rerun));
    let again = Command::new(bin()).args(["run", "--config", &cfg, "--quiet", "--date", DATE]).output().unwrap();
    assert_eq!(code(&again), 3, "{}", text(&again));
    let sent = sent(dir.path());
    assert_eq!(sent.len(), 1, "exactly one notification: {sent:?}");
    assert_eq!(sent[0]["alerts"].as_array().unwrap().len(), 1);
    assert!(std::fs::read_to_string(&state).unwrap().contains("\"notified\""));
}

#[test]
fn a_failing_on_alert_is_reported_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), "a.jsonl", &first_log());
    let rule = "[[alerts]]\njob = \"latency\"\ncolumn = \"ttft_p95_ms\"\nabove = 2000\n";
    let cfg = config(dir.path(), "on_alert = \"cat >/dev/null; echo paging failed >&2; exit 7\"", rule);
    let out = run(&cfg);
    assert_eq!(code(&out), 5, "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("warning: on_alert failed (exited with status 7)"), "{stderr}");
    assert!(stderr.contains("paging failed"), "the command's own output is on stderr: {stderr}");
    let report = report(&out);
    assert_eq!(report["alerts"]["on_alert"]["ok"], false);
    assert_eq!(report["alerts"]["on_alert"]["error"], "exited with status 7");
    assert!(dir.path().join("site/latest/alerts.json").is_file(), "the export is published");
    // Still pending: the next run, with a command that works, sends it.
    let cfg = config(dir.path(), &format!("on_alert = {RECORD:?}"), rule);
    let retried = run(&cfg);
    assert_eq!(code(&retried), 5, "{}", text(&retried));
    assert_eq!(sent(dir.path()).len(), 1);
    assert_eq!(code(&run(&cfg)), 3);
    assert_eq!(sent(dir.path()).len(), 1, "sent once it succeeded");
}

#[test]
fn on_an_object_store_the_state_lives_with_the_dataset_and_alerts_json_with_the_export() {
    let s3 = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), "a.jsonl", &first_log());
    s3.put("logs", &[("gateway/a.jsonl", dir.path().join("logs/a.jsonl").as_path())]);
    s3.put("lake", &[]);
    s3.put("site", &[]);
    let rule =
        "[[alerts]]\njob = \"eos\"\ncolumn = \"eos_compliance_rate\"\nbelow = 0.98\nwhere = { model = \"m-slow\" }\n";
    let top = format!("on_alert = {RECORD:?}");
    let cfg = config_at(dir.path(), "s3://lake/ds", "s3://logs/gateway/", "s3://site/dash", &top, rule);
    let env = s3.env();
    let first = run_with(&cfg, &env);
    assert_eq!(code(&first), 5, "{}", text(&first));
    let state: serde_json::Value = serde_json::from_slice(&s3.get("lake", "ds/_alerts.json")).unwrap();
    let breaches = state["breaches"].as_object().unwrap();
    assert_eq!(breaches.len(), 1, "{state}");
    assert_eq!(breaches.values().next().unwrap()["status"], "notified");
    let exported: serde_json::Value = serde_json::from_slice(&s3.get("site", "dash/2024-06-10/alerts.json")).unwrap();
    assert_eq!(exported["alerts"][0]["keys"]["model"], "m-slow");
    let pointer: serde_json::Value = serde_json::from_slice(&s3.get("site", "dash/latest.json")).unwrap();
    assert!(pointer["files"].as_array().unwrap().contains(&serde_json::json!("alerts.json")), "{pointer}");
    let page = String::from_utf8(s3.get("site", "dash/latest/index.html")).unwrap();
    assert!(page.contains("data-alerts=\"1\""));
    let lake = s3.list("lake");
    let second = run_with(&cfg, &env);
    assert_eq!(code(&second), 3, "{}", text(&second));
    assert_eq!(s3.list("lake"), lake, "nothing new, nothing fired: the dataset's objects are unchanged");
    assert_eq!(sent(dir.path()).len(), 1);
}

#[test]
fn the_banner_is_text_in_chromium_not_markup() {
    if !common::chromium_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), "a.jsonl", &first_log());
    let budget = "[[budgets]]\nname = \"<script>document.title='owned'</script>\"\nteam = \"ads\"\nusd_per_month = 5\n";
    let cfg = config(dir.path(), "", budget);
    let out = run(&cfg);
    assert_eq!(code(&out), 5, "{}", text(&out));
    let page = dir.path().join("site/latest/index.html");
    let dom = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("file://{}", page.canonicalize().unwrap().display()))
        .output()
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&dom.stdout);
    let banner = dom.find("<div class=\"alerts\"").map(|at| &dom[at..]).expect("the banner in the DOM");
    // The name is the list item's text, as written; no script of it ran.
    assert!(
        banner.starts_with(
            "<div class=\"alerts\" role=\"alert\" data-alerts=\"1\"><b>1 alert</b><ul>\n<li>budget \
             &lt;script&gt;document.title='owned'&lt;/script&gt;: 2024-06 spend $6.00 is above $5.00 a month"
        ),
        "{banner}"
    );
    assert!(!dom.contains("<title>owned"), "{dom}");
}

#[test]
fn an_on_alert_past_its_timeout_is_killed_with_what_it_started() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), "a.jsonl", &first_log());
    let rule = "[[alerts]]\njob = \"latency\"\ncolumn = \"ttft_p95_ms\"\nabove = 2000\n";
    let cfg = config(dir.path(), "on_alert = \"sleep 60; echo late\"\non_alert_timeout_s = 1", rule);
    let started = Instant::now();
    let out = run(&cfg);
    // `run` waits for the end of tokscope's stdout and stderr, which `sleep` would hold open.
    assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
    assert_eq!(code(&out), 5, "{}", text(&out));
    assert_eq!(report(&out)["alerts"]["on_alert"]["error"], "still running after 1s: killed");
}
