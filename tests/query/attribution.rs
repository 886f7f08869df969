//! Who spends what: the grouping jobs by attribution column and by tag,
//! `top=N` with `(other)`, redacted user ids and `--attribute` mappings, on a
//! generated canonical log, against a Python computation from the raw lines
//! and the price file (docs/metrics.md, "Attribution").

use std::collections::BTreeMap;
use std::path::Path;

use crate::common;

use common::{python, tokscope, tokscope_with_env};
use serde_json::{json, Value};

const PRICES: &str = r#"
[[model]]
model = "a"
input = 1.0
output = 2.0

[[model]]
model = "b"
input = 10.0
output = 20.0
"#;

/// A deterministic log of `n` requests with teams, users, tags, providers
/// and a cost centre of the user's own under `metadata` (model `c` has no price).
fn log(n: u64) -> String {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |m: u64| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % m
    };
    let teams = [Some("search"), Some("ads"), Some("infra"), Some("billing"), None];
    let tag_sets: [&[&str]; 5] = [&[], &["team:x"], &["env:prod", "team:y"], &["beta"], &["team:x", "beta"]];
    let mut out = String::new();
    for i in 0..n {
        let (day, hour) = (1 + next(3), next(24));
        let model = ["a", "b", "c"][next(3) as usize];
        let (prompt, completion, ttft, latency) = (10 + next(5000), 1 + next(600), 10 + next(900), 1000 + next(3000));
        let finish = ["stop", "length", "stop"][next(3) as usize];
        let user = format!("user-{}", next(7));
        let tags = tag_sets[next(5) as usize];
        let provider = ["openai", "vllm", "anthropic"][next(3) as usize];
        let mut rec = json!({
            "ts": format!("2024-06-0{day}T{hour:02}:00:00Z"),
            "request_id": format!("r{i}"),
            "model": model,
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "max_tokens": 600,
            "ttft_ms": ttft,
            "latency_ms": latency,
            "finish_reason": finish,
            "user_id": user,
            "tags": tags,
            "provider": provider,
            "token_times_ms": [5.0, 12.5, 30.0],
        });
        if let Some(team) = teams[next(5) as usize] {
            rec["team"] = json!(team);
        }
        if next(4) > 0 {
            rec["metadata"] = json!({"cost_center": format!("cc-{}", next(3))});
        }
        out.push_str(&rec.to_string());
        out.push('\n');
    }
    out
}

/// Python's totals per group from the raw lines: requests, priced requests
/// and cost, for each grouping given as (name, how) with how one of
/// `column:<key>`, `tags`, `tags:<prefix>`, `field:<path>` (the field where
/// present, else `team`).
fn python_totals(log: &Path, prices: &Path, groupings: &[(&str, &str)]) -> Value {
    let script = format!(
        r#"
import json, tomllib
from collections import defaultdict
prices = {{m["model"]: m for m in tomllib.load(open({prices:?}, "rb"))["model"]}}
rows = [json.loads(l) for l in open({log:?})]
def cost(r):
    p = prices.get(r["model"])
    if p is None:
        return None
    return (r["prompt_tokens"] * p["input"] + r["completion_tokens"] * p["output"]) / 1e6
def keys(r, how):
    if how.startswith("column:"):
        return [r.get(how[7:])]
    if how.startswith("field:"):
        return [r.get("metadata", {{}}).get(how[6:], r.get("team"))]
    prefix = how[5:] if how.startswith("tags:") else ""
    kept = [t for t in r["tags"] if t.startswith(prefix)]
    return kept or [None]
out = {{}}
for name, how in {groupings}:
    groups = defaultdict(lambda: {{"requests": 0, "priced": 0, "cost": 0.0, "eos": 0}})
    for r in rows:
        for k in keys(r, how):
            g = groups["" if k is None else k]
            g["requests"] += 1
            g["eos"] += r["finish_reason"] == "stop"
            c = cost(r)
            if c is not None:
                g["priced"] += 1
                g["cost"] += c
    out[name] = groups
print(json.dumps(out))
"#,
        prices = prices.to_str().unwrap(),
        log = log.to_str().unwrap(),
        groupings = serde_json::to_string(&groupings.iter().map(|(n, h)| [n, h]).collect::<Vec<_>>()).unwrap(),
    );
    serde_json::from_str(&python(&script)).unwrap()
}

/// A job's JSON rows.
fn job(data: &Path, name: &str, params: &[&str], extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["job", name, "--format", "json", "--data", data.to_str().unwrap()];
    for p in params {
        args.extend(["--param", p]);
    }
    args.extend(extra);
    tokscope(&args).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The job's rows summed per group (its first column; null as ""): requests,
/// priced requests (requests - unpriced_requests) and cost.
fn totals(rows: &[Value], key: &str) -> BTreeMap<String, (i64, i64, f64)> {
    let mut out = BTreeMap::new();
    for r in rows {
        let group = r[key].as_str().unwrap_or("").to_string();
        let e = out.entry(group).or_insert((0, 0, 0.0));
        let requests = r["requests"].as_i64().unwrap();
        e.0 += requests;
        e.1 += requests - r["unpriced_requests"].as_i64().unwrap();
        e.2 += r["cost_usd"].as_f64().unwrap_or(0.0);
    }
    out
}

fn assert_totals(what: &str, ours: &BTreeMap<String, (i64, i64, f64)>, python: &Value) {
    let python = python.as_object().unwrap();
    assert_eq!(ours.len(), python.len(), "{what}: groups {:?} vs {:?}", ours.keys(), python.keys());
    for (group, (requests, priced, cost)) in ours {
        let p = &python[group];
        assert_eq!(*requests, p["requests"].as_i64().unwrap(), "{what} {group}: requests");
        assert_eq!(*priced, p["priced"].as_i64().unwrap(), "{what} {group}: priced requests");
        let expected = p["cost"].as_f64().unwrap();
        assert!((cost - expected).abs() <= 1e-9 * expected.max(1.0), "{what} {group}: cost {cost} vs {expected}");
    }
}

fn setup(dir: &Path, extra: &[&str]) -> (String, String, std::path::PathBuf) {
    let log = common::write_file(dir, "log.jsonl", log(400));
    let prices = common::write_file(dir, "prices.toml", PRICES);
    let data = dir.join(format!("ds{}", extra.len()));
    common::ingest(&[&log], &data, extra);
    (log, prices, data)
}

#[test]
fn cost_per_team_user_provider_and_tag_equals_a_python_sum() {
    let dir = tempfile::tempdir().unwrap();
    let (log, prices, data) = setup(dir.path(), &[]);
    let groupings = [
        ("team", "column:team"),
        ("user_id", "column:user_id"),
        ("provider", "column:provider"),
        ("tag", "tags"),
        ("team_tags", "tags:team:"),
    ];
    let expected = python_totals(Path::new(&log), Path::new(&prices), &groupings);
    let pricing = ["--pricing", prices.as_str()];
    for by in ["team", "user_id", "provider", "tag"] {
        let rows = job(&data, "cost", &[&format!("by={by}")], &pricing);
        assert_totals(&format!("cost by {by}"), &totals(&rows, by), &expected[by]);
    }
    let rows = job(&data, "cost", &["by=tag", "tag_prefix=team:"], &pricing);
    assert_totals("cost by tag with prefix team:", &totals(&rows, "tag"), &expected["team_tags"]);
    // A request is counted once under each of its tags: more rows than requests.
    let per_tag: i64 = totals(&job(&data, "cost", &["by=tag"], &pricing), "tag").values().map(|t| t.0).sum();
    assert!(per_tag > 400, "{per_tag}");
}

#[test]
fn top_n_keeps_the_largest_groups_and_other_keeps_totals() {
    let dir = tempfile::tempdir().unwrap();
    let (log, prices, data) = setup(dir.path(), &[]);
    let expected = python_totals(Path::new(&log), Path::new(&prices), &[("team", "column:team")]);
    let pricing = ["--pricing", prices.as_str()];
    let all = totals(&job(&data, "cost", &["by=team"], &pricing), "team");
    let top = totals(&job(&data, "cost", &["by=team", "top=2"], &pricing), "team");
    // Python's two largest teams by cost (requests without a team are never folded).
    let mut ranked: Vec<(&String, f64)> = expected["team"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k, v["cost"].as_f64().unwrap()))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    let kept: Vec<&str> = ranked[..2].iter().map(|(k, _)| k.as_str()).collect();
    let mut groups: Vec<&str> = top.keys().map(String::as_str).collect();
    groups.sort();
    let mut want = vec!["", "(other)", kept[0], kept[1]];
    want.sort();
    assert_eq!(groups, want);
    let other: (i64, i64, f64) = ranked[2..].iter().fold((0, 0, 0.0), |acc, (k, _)| {
        let t = all[*k];
        (acc.0 + t.0, acc.1 + t.1, acc.2 + t.2)
    });
    assert_eq!((top["(other)"].0, top["(other)"].1), (other.0, other.1));
    assert!((top["(other)"].2 - other.2).abs() < 1e-9);
    let sum = |t: &BTreeMap<String, (i64, i64, f64)>| t.values().fold((0, 0.0), |a, v| (a.0 + v.0, a.1 + v.2));
    let (a, b) = (sum(&all), sum(&top));
    assert_eq!(a.0, b.0);
    assert!((a.1 - b.1).abs() < 1e-9, "totals change with top: {a:?} vs {b:?}");
    // By requests where a job prices nothing: eos's (other) is the rest's count.
    let eos = job(&data, "eos", &["by=team", "top=1"], &[]);
    let requests: i64 = eos.iter().map(|r| r["requests"].as_i64().unwrap()).sum();
    assert_eq!(requests, 400);
    let mut by_requests: Vec<(String, i64)> = expected["team"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k.clone(), v["requests"].as_i64().unwrap()))
        .collect();
    by_requests.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let named: std::collections::BTreeSet<&str> = eos.iter().filter_map(|r| r["team"].as_str()).collect();
    assert_eq!(named, [by_requests[0].0.as_str(), "(other)"].into_iter().collect());
}

#[test]
fn every_grouping_job_groups_by_team_tag_and_top() {
    let dir = tempfile::tempdir().unwrap();
    let (log, prices, data) = setup(dir.path(), &[]);
    let expected = python_totals(Path::new(&log), Path::new(&prices), &[("team", "column:team"), ("tag", "tags")]);
    for name in ["cost", "daily", "latency", "eos", "report", "load_summary", "throughput", "jitter"] {
        for params in [vec!["by=team"], vec!["by=tag"], vec!["by=team", "top=2"], vec!["by=tag", "tag_prefix=team:"]] {
            let by = params[0].trim_start_matches("by=");
            let rows = job(&data, name, &params, &["--pricing", prices.as_str()]);
            assert!(!rows.is_empty(), "{name} {params:?}");
            // JSON lines leave nulls out: the rows without a team or tag have no key.
            assert!(rows.iter().any(|r| r.get(by).is_some()), "{name} {params:?}: no {by} column");
            // Jobs that count requests count each once per group (a request once per tag).
            if rows[0].get("requests").is_some() && params.len() == 1 {
                let mut per: BTreeMap<String, i64> = BTreeMap::new();
                for r in &rows {
                    *per.entry(r[by].as_str().unwrap_or("").to_string()).or_default() +=
                        r["requests"].as_i64().unwrap();
                }
                for (group, n) in per {
                    assert_eq!(n, expected[by][&group]["requests"].as_i64().unwrap(), "{name} by {by}: {group}");
                }
            }
        }
    }
    // eos counts the requests that stopped, per team, as the log says.
    let eos = job(&data, "eos", &["by=team"], &[]);
    let mut stopped: BTreeMap<String, i64> = BTreeMap::new();
    for r in &eos {
        *stopped.entry(r["team"].as_str().unwrap_or("").to_string()).or_default() += r["eos"].as_i64().unwrap();
    }
    for (team, n) in stopped {
        assert_eq!(n, expected["team"][&team]["eos"].as_i64().unwrap(), "eos by team {team}");
    }
}

#[test]
fn a_redacted_user_id_still_groups() {
    let dir = tempfile::tempdir().unwrap();
    let log = common::write_file(dir.path(), "log.jsonl", log(200));
    let (plain, hashed, dropped) = (dir.path().join("plain"), dir.path().join("hashed"), dir.path().join("dropped"));
    common::ingest(&[&log], &plain, &[]);
    let key = [("TOKSCOPE_REDACT_KEY", "0123456789abcdef0123456789abcdef")];
    tokscope_with_env(&key, &["ingest", &log, "--out", hashed.to_str().unwrap(), "--redact", "hash", "-q"]);
    common::ingest(&[&log], &dropped, &["--redact", "drop"]);
    let sizes = |data: &Path| {
        let mut n: Vec<i64> = common::query(data, "SELECT user_id, count(*) AS n FROM requests GROUP BY user_id")
            .iter()
            .map(|r| r["n"].as_i64().unwrap())
            .collect();
        n.sort();
        n
    };
    assert_eq!(sizes(&plain), sizes(&hashed));
    let ids = common::query(&hashed, "SELECT DISTINCT user_id FROM requests");
    assert!(ids.iter().all(|r| r["user_id"].as_str().is_some_and(|id| id.len() == 64 && !id.starts_with("user-"))));
    assert_eq!(common::query(&dropped, "SELECT count(user_id) AS n FROM requests")[0]["n"], 0);
    // Other attribution columns are no personal data: kept under both.
    assert_eq!(
        common::query(&hashed, "SELECT count(team) AS n FROM requests"),
        common::query(&plain, "SELECT count(team) AS n FROM requests")
    );
}

#[test]
fn a_mapping_added_later_applies_to_data_already_ingested() {
    let dir = tempfile::tempdir().unwrap();
    let (log, prices, before) = setup(dir.path(), &[]);
    let (_, _, mapped) = setup(dir.path(), &["--attribute", "team=metadata.cost_center"]);
    let expected = python_totals(Path::new(&log), Path::new(&prices), &[("cc", "field:cost_center")]);
    let pricing = ["--pricing", prices.as_str()];
    let at_ingest = totals(&job(&mapped, "cost", &["by=team"], &pricing), "team");
    let attribute = ["--pricing", prices.as_str(), "--attribute", "team=metadata.cost_center"];
    let at_query = totals(&job(&before, "cost", &["by=team"], &attribute), "team");
    assert_totals("cost centre mapped at ingest", &at_ingest, &expected["cc"]);
    assert_totals("cost centre mapped at query time", &at_query, &expected["cc"]);
    // Without the mapping, the data ingested before it still has the logged teams.
    assert!(totals(&job(&before, "cost", &["by=team"], &pricing), "team").contains_key("search"));
}

#[test]
fn bad_groupings_and_mappings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, data) = setup(dir.path(), &[]);
    let d = data.to_str().unwrap();
    for (args, says) in [
        (vec!["job", "cost", "--data", d, "--param", "by=prompt"], "must be one of"),
        (vec!["job", "cost", "--data", d, "--param", "top=-1"], "whole number"),
        (vec!["job", "cost", "--data", d, "--attribute", "teams=x"], "attribution column"),
        (vec!["job", "cost", "--data", d, "--attribute", "team"], "COLUMN=FIELD"),
    ] {
        let out = common::tokscope_output(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(says), "{args:?}: {stderr}");
    }
}
