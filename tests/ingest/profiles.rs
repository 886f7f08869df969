//! The `profile` format end to end: engine profiling records ingested next to
//! the gateway's access log, joined by `request_id` in the `gateway_engine`
//! job. Expected values are computed by hand from the sample pair in
//! `tests/data/profile/` (gateway.jsonl: 12 canonical requests; profile.jsonl:
//! 11 records and one truncated line) and from the small logs below.

use crate::common;

use common::{data_dir, ingest, query, tokscope, write_file};
use serde_json::Value;

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

fn job_rows(data: &std::path::Path, job: &str) -> Vec<Value> {
    let out = tokscope(&["job", job, "--format", "json", "--data", data.to_str().unwrap()]);
    out.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn sample_dataset() -> (tempfile::TempDir, std::path::PathBuf, Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let (gateway, profile) = (data_dir().join("profile/gateway.jsonl"), data_dir().join("profile/profile.jsonl"));
    // The engine file first: the join does not depend on ingest order.
    let summary = ingest(&[profile.to_str().unwrap(), gateway.to_str().unwrap()], &out, &[]);
    (dir, out, summary)
}

#[test]
fn valid_profiles_become_rows_and_engine_token_rows() {
    let (_dir, out, s) = sample_dataset();
    let t = &s["totals"];
    // 12 gateway lines + 12 profile lines, the last profile line truncated JSON.
    assert_eq!((t["lines_read"].as_u64(), t["lines_rejected"].as_u64()), (Some(24), Some(1)));
    assert_eq!((t["rows_written"].as_u64(), t["profiles_written"].as_u64()), (Some(12), Some(11)));
    // Decode steps: 4 + 5 + 3 + 6 + 8 + 4 + 5 + 3 + 4 + 2 + 2 = 46 engine token rows.
    assert_eq!(t["tokens_written"], 46);
    let files = s["files"].as_array().unwrap();
    assert!(files.iter().any(|f| f["format"] == "profile"), "{files:?}");
    let rows = query(
        &out,
        "SELECT request_id, ts IS NULL AS no_ts, model, engine_id, gpu_id, inference_steps, kv_cache_hit_ratio, \
         cuda_kernel_avg_us, prefill_latency_ms, decode_tokens, decode_ms, engine_ms, issues FROM profiles ORDER BY request_id",
    );
    assert_eq!(rows.len(), 11);
    let row = |id: &str| rows.iter().find(|r| r["request_id"] == id).unwrap();
    let gw01 = row("gw-01");
    assert_eq!(
        (gw01["model"].as_str(), gw01["engine_id"].as_str(), gw01["gpu_id"].as_i64()),
        (Some("llama-3.1-8b-instruct"), Some("vllm-0"), Some(0))
    );
    assert_eq!((gw01["inference_steps"].as_i64(), num(&gw01["cuda_kernel_avg_us"])), (Some(4), Some(18.4)));
    // 12.5 + 10 + 10.5 + 11 = 44; engine time 45 + 44 = 89.
    assert_eq!(
        (num(&gw01["decode_ms"]), num(&gw01["engine_ms"]), gw01["decode_tokens"].as_i64()),
        (Some(44.0), Some(89.0), Some(4))
    );
    // gw-07 logs neither ts nor model: kept, both null.
    let gw07 = row("gw-07");
    assert_eq!((gw07["no_ts"].as_bool(), gw07.get("model").is_none_or(Value::is_null)), (Some(true), true));
    // gw-08 has "n/a" among its decode latencies: kept, no decode sum, flagged.
    let gw08 = row("gw-08");
    assert!(gw08.get("decode_ms").is_none_or(Value::is_null), "{gw08}");
    assert_eq!(gw08["issues"], serde_json::json!(["bad_decode_latency"]));
    // The per-token decode latencies of gw-01 are its engine token rows.
    let itl = query(&out, "SELECT position, itl_ms, context_bin FROM tokens WHERE request_id = 'gw-01' AND source = 'engine' ORDER BY position");
    let itls: Vec<f64> = itl.iter().map(|r| r["itl_ms"].as_f64().unwrap()).collect();
    assert_eq!(itls, vec![12.5, 10.0, 10.5, 11.0]);
    assert!(itl[0].get("context_bin").is_none_or(Value::is_null));
    // The rejected line is in `rejects`, with the reason.
    let rejects = query(&out, "SELECT source_line, error FROM rejects");
    assert_eq!(rejects.len(), 1);
    assert_eq!(rejects[0]["source_line"], 12);
    assert!(rejects[0]["error"].as_str().unwrap().contains("invalid JSON"), "{rejects:?}");
}

#[test]
fn gateway_engine_job_on_the_sample_pair() {
    let (_dir, out, _) = sample_dataset();
    let rows = job_rows(&out, "gateway_engine");
    let row = |model: &str, bin: Option<&str>| {
        rows.iter()
            .find(|r| r["model"] == model && r["context_bin"].as_str() == bin)
            .unwrap_or_else(|| panic!("no row {model} {bin:?} in {rows:?}"))
    };
    // llama 0-1K: gw-01, 03, 06, 08, 11 matched; gw-04 has no profile.
    // Offsets gateway - engine: -250, -251, -252, -249, -253 -> median -251.
    // prefill {12, 20, 30, 45, 60}: p50 30, p95 h = 3.8 -> 45 + 0.8 * 15 = 57.
    // decode {25.5, 44, 48, 80} (gw-08 none): p50 46, p95 h = 2.85 -> 48 + 0.85 * 32 = 75.2.
    // overhead 140-45-44 = 51, 95-30-25.5 = 39.5, 180-12-80 = 88, 120-20-48 = 52:
    //   p50 (51 + 52) / 2 = 51.5, p95 52 + 0.85 * 36 = 82.6.
    // e2e {95, 120, 140, 180, 200}: p50 140, p95 180 + 0.8 * 20 = 196.
    let l = row("llama-3.1-8b-instruct", Some("0-1K"));
    assert_eq!(
        (l["matched"].as_i64(), l["gateway_only"].as_i64(), l["engine_only"].as_i64()),
        (Some(5), Some(1), Some(0))
    );
    let close = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-9;
    for (col, want) in [
        ("clock_offset_ms", -251.0),
        ("prefill_ms_p50", 30.0),
        ("prefill_ms_p95", 57.0),
        ("decode_ms_p50", 46.0),
        ("decode_ms_p95", 75.2),
        ("overhead_ms_p50", 51.5),
        ("overhead_ms_p95", 82.6),
        ("e2e_ms_p50", 140.0),
        ("e2e_ms_p95", 196.0),
    ] {
        assert!(close(&l[col], want), "llama 0-1K {col}: {} vs {want}", l[col]);
    }
    // The engine-only record: the profile's model, no context bin.
    let e = row("llama-3.1-8b-instruct", None);
    assert_eq!((e["matched"].as_i64(), e["engine_only"].as_i64()), (Some(0), Some(1)));
    // qwen 0-1K: gw-07 matched without an engine ts (no offset), gw-09 gateway only.
    let q = row("qwen2.5-72b-instruct", Some("0-1K"));
    assert_eq!((q["matched"].as_i64(), q["gateway_only"].as_i64()), (Some(1), Some(1)));
    assert!(q.get("clock_offset_ms").is_none_or(Value::is_null));
    assert!(close(&q["overhead_ms_p50"], 100.0));
    // qwen 2K-4K: gw-02 (-248 ms; overhead 410-150-150 = 110) and gw-10 (-250 ms; 420-300-105 = 15).
    let q2 = row("qwen2.5-72b-instruct", Some("2K-4K"));
    assert!(close(&q2["clock_offset_ms"], -249.0) && close(&q2["overhead_ms_p50"], 62.5));
    assert!(close(&q2["overhead_ms_p95"], 15.0 + 0.95 * 95.0));
    // Totals: 10 matched, 2 gateway only, 1 engine only.
    let sum = |c: &str| rows.iter().map(|r| r[c].as_i64().unwrap()).sum::<i64>();
    assert_eq!((sum("matched"), sum("gateway_only"), sum("engine_only")), (10, 2, 1));
}

#[test]
fn engine_job_agrees_with_numpy_on_the_sample_pair() {
    let (dir, out, _) = sample_dataset();
    let ours = dir.path().join("engine.json");
    std::fs::write(&ours, serde_json::to_string(&job_rows(&out, "engine")).unwrap()).unwrap();
    // Python joins the raw files by request_id and recomputes every column (docs/metrics.md,
    // "engine"): default context bins, decode sums of usable entries, decode-step standard
    // deviations (ddof 1), overhead = gateway latency - prefill - decode, type-7 quantiles.
    let script = format!(
        r#"
import json, math
import numpy as np
EDGES = [131072, 65536, 32768, 16384, 8192, 4096, 2048, 1024, 0]
LABELS = ["128K+", "64K-128K", "32K-64K", "16K-32K", "8K-16K", "4K-8K", "2K-4K", "1K-2K", "0-1K"]
gateway = {{}}
for line in open({gateway:?}):
    v = json.loads(line)
    gateway[v["request_id"]] = v
groups = {{}}
for line in open({profile:?}):
    try:
        p = json.loads(line)
    except ValueError:
        continue  # the truncated line is rejected
    g = gateway.get(p["request_id"])
    steps = p["decode_latency_ms"]
    usable = [x for x in steps if isinstance(x, (int, float)) and x >= 0]
    decode = sum(usable) if len(usable) == len(steps) else None
    binned = next((LABELS[i] for i, e in enumerate(EDGES) if g["prompt_tokens"] >= e), None) if g else None
    key = ((g or p).get("model") or p.get("model"), binned)
    groups.setdefault(key, []).append(dict(
        matched=g is not None, prefill=p["prefill_latency_ms"], decode=decode,
        overhead=g["latency_ms"] - p["prefill_latency_ms"] - decode if g and decode is not None else None,
        hit=p.get("kv_cache_hit_ratio"), kernel=p.get("cuda_kernel_avg_us"),
        step_std=float(np.std(usable, ddof=1)) if len(usable) >= 2 else None))
ours = json.load(open({ours:?}))
assert len(ours) == len(groups), (len(ours), sorted(groups))
checked = 0
for r in ours:
    rows = groups[(r["model"], r.get("context_bin"))]
    assert r["profiles"] == len(rows) and r["matched"] == sum(x["matched"] for x in rows), r
    assert r.get("variant") is None and r.get("queue_p50_ms") is None, r  # no arms, no queue times logged
    for column, key, q in [("prefill_p50_ms", "prefill", .5), ("prefill_p95_ms", "prefill", .95),
                           ("decode_p50_ms", "decode", .5), ("decode_p95_ms", "decode", .95),
                           ("overhead_p50_ms", "overhead", .5), ("overhead_p95_ms", "overhead", .95),
                           ("cuda_kernel_us_p50", "kernel", .5), ("cuda_kernel_us_p95", "kernel", .95),
                           ("decode_step_std_p50_ms", "step_std", .5), ("decode_step_std_p95_ms", "step_std", .95),
                           ("kv_cache_hit_rate", "hit", None)]:
        values = [x[key] for x in rows if x[key] is not None]
        if not values:
            assert r.get(column) is None, (column, r)
            continue
        want = float(np.mean(values)) if q is None else float(np.quantile(values, q))
        assert abs(r[column] - want) <= 1e-9 * max(1.0, abs(want)), (column, r[column], want)
        checked += 1
print(checked)
"#,
        gateway = data_dir().join("profile/gateway.jsonl").to_str().unwrap(),
        profile = data_dir().join("profile/profile.jsonl").to_str().unwrap(),
        ours = ours.to_str().unwrap(),
    );
    let checked: u64 = common::python(&script).trim().parse().unwrap();
    assert!(checked >= 40, "{checked} values checked");
}

#[test]
fn records_missing_required_fields_are_rejected_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        // Valid: detection needs one of the engine fields.
        r#"{"request_id":"ok","inference_steps":2,"prefill_latency_ms":10,"decode_latency_ms":[5,6]}"#,
        r#"{"inference_steps":2,"prefill_latency_ms":10,"decode_latency_ms":[5,6]}"#,
        r#"{"request_id":"p","inference_steps":2,"decode_latency_ms":[5,6]}"#,
        r#"{"request_id":"d","inference_steps":2,"prefill_latency_ms":10}"#,
        r#"{"request_id":"n","inference_steps":2,"prefill_latency_ms":-1,"decode_latency_ms":[5]}"#,
        r#"{"request_id":"t","ts":"not a time","inference_steps":2,"prefill_latency_ms":1,"decode_latency_ms":[5]}"#,
        r#"{"request_id":"k","kv_cache_hit_ratio":2,"prefill_latency_ms":1,"decode_latency_ms":[5]}"#,
    ];
    let input = write_file(dir.path(), "p.jsonl", lines.join("\n") + "\n");
    let out = dir.path().join("ds");
    let s = ingest(&[&input], &out, &[]);
    let t = &s["totals"];
    assert_eq!(
        (t["lines_read"].as_u64(), t["lines_ingested"].as_u64(), t["lines_rejected"].as_u64()),
        (Some(7), Some(1), Some(6))
    );
    let errors: Vec<String> = query(&out, "SELECT error FROM rejects ORDER BY source_line")
        .iter()
        .map(|r| r["error"].as_str().unwrap().to_string())
        .collect();
    for (error, want) in errors.iter().zip([
        "request_id",
        "prefill_latency_ms",
        "decode_latency_ms",
        "non-negative",
        "timestamp",
        "[0, 1]",
    ]) {
        assert!(error.contains(want), "{error:?} should mention {want}");
    }
    assert_eq!(query(&out, "SELECT request_id FROM profiles")[0]["request_id"], "ok");
}

#[test]
fn bad_decode_arrays_reject_the_line_or_flag_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        // Not an array: the line is rejected.
        r#"{"request_id":"s","inference_steps":2,"prefill_latency_ms":10,"decode_latency_ms":"5,6"}"#,
        r#"{"request_id":"o","inference_steps":2,"prefill_latency_ms":10,"decode_latency_ms":{"0":5}}"#,
        // Bad entries: kept, no decode sum, flagged; the good entries stay per-token rows.
        r#"{"request_id":"b","inference_steps":4,"prefill_latency_ms":10,"decode_latency_ms":[5,"x",null,-2]}"#,
        // Python's NaN: read as null, flagged twice.
        r#"{"request_id":"nan","inference_steps":2,"prefill_latency_ms":10,"decode_latency_ms":[5,NaN]}"#,
        // Empty: a record of no decode step (0 ms).
        r#"{"request_id":"e","inference_steps":1,"prefill_latency_ms":10,"decode_latency_ms":[]}"#,
    ];
    let input = write_file(dir.path(), "p.jsonl", lines.join("\n") + "\n");
    let out = dir.path().join("ds");
    let s = ingest(&[&input], &out, &["--format", "profile"]);
    assert_eq!((s["totals"]["lines_rejected"].as_u64(), s["totals"]["profiles_written"].as_u64()), (Some(2), Some(3)));
    let rows = query(&out, "SELECT request_id, decode_ms, decode_tokens, issues FROM profiles ORDER BY request_id");
    let row = |id: &str| rows.iter().find(|r| r["request_id"] == id).unwrap().clone();
    assert_eq!(row("b")["issues"], serde_json::json!(["bad_decode_latency"]));
    assert_eq!(row("b")["decode_tokens"], 4);
    assert!(row("b").get("decode_ms").is_none_or(Value::is_null));
    assert_eq!(row("nan")["issues"], serde_json::json!(["bad_decode_latency", "non_finite_number"]));
    assert_eq!(row("e")["decode_ms"].as_f64(), Some(0.0));
    let b = query(&out, "SELECT position, itl_ms FROM tokens WHERE request_id = 'b' ORDER BY position");
    let itl: Vec<Option<f64>> = b.iter().map(|r| r.get("itl_ms").and_then(Value::as_f64)).collect();
    assert_eq!(itl, vec![Some(5.0), None, None, None]);
    let rejects = query(&out, "SELECT error FROM rejects");
    assert!(rejects.iter().all(|r| r["error"].as_str().unwrap().contains("must be an array")), "{rejects:?}");
}

#[test]
fn clock_skew_does_not_break_the_join_even_across_midnight() {
    let dir = tempfile::tempdir().unwrap();
    // Engine a: 400 ms ahead of the gateway, across midnight (the profile lands in
    // the next day's partition). Engine b: 1.5 s behind.
    let gateway = [
        r#"{"ts":"2024-06-01T23:59:59.900Z","request_id":"r1","model":"m","prompt_tokens":10,"completion_tokens":2,"latency_ms":300}"#,
        r#"{"ts":"2024-06-02T00:00:10.000Z","request_id":"r2","model":"m","prompt_tokens":10,"completion_tokens":2,"latency_ms":300}"#,
    ];
    let profiles = [
        r#"{"request_id":"r1","ts":"2024-06-02T00:00:00.300Z","engine_id":"a","inference_steps":2,"prefill_latency_ms":100,"decode_latency_ms":[50,50]}"#,
        r#"{"request_id":"r2","ts":"2024-06-02T00:00:08.500Z","engine_id":"b","inference_steps":2,"prefill_latency_ms":100,"decode_latency_ms":[40,60]}"#,
    ];
    let g = write_file(dir.path(), "gateway.jsonl", gateway.join("\n") + "\n");
    let p = write_file(dir.path(), "engine.jsonl", profiles.join("\n") + "\n");
    let out = dir.path().join("ds");
    ingest(&[&g, &p], &out, &[]);
    let dates = query(&out, "SELECT request_id, CAST(date AS VARCHAR) AS d FROM profiles ORDER BY request_id");
    assert_eq!((dates[0]["d"].as_str(), dates[1]["d"].as_str()), (Some("2024-06-02"), Some("2024-06-02")));
    let gw_dates = query(&out, "SELECT CAST(date AS VARCHAR) AS d FROM requests WHERE request_id = 'r1'");
    assert_eq!(gw_dates[0]["d"], "2024-06-01");
    // Per pair: gateway - engine = -400 ms and +1500 ms; median of the two = 550.
    // Overhead: 300 - 100 - 100 = 100 for both, whatever the clocks say.
    let rows = job_rows(&out, "gateway_engine");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["matched"], 2);
    assert_eq!(rows[0]["clock_offset_ms"].as_f64(), Some(550.0));
    assert_eq!(rows[0]["overhead_ms_p50"].as_f64(), Some(100.0));
    let per_engine = query(
        &out,
        "SELECT p.engine_id, (CAST(CAST(r.ts AS TIMESTAMP) AS BIGINT) - CAST(CAST(p.ts AS TIMESTAMP) AS BIGINT)) / 1000000 AS offset_ms \
         FROM requests r JOIN profiles p USING (request_id) ORDER BY p.engine_id",
    );
    assert_eq!((per_engine[0]["offset_ms"].as_i64(), per_engine[1]["offset_ms"].as_i64()), (Some(-400), Some(1500)));
}

#[test]
fn gateway_and_engine_token_rows_of_one_request_are_both_kept() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = r#"{"ts":"2024-06-01T00:00:00Z","request_id":"r","model":"m","prompt_tokens":10,"completion_tokens":3,"token_times_ms":[100,110,125]}"#;
    let profile = r#"{"request_id":"r","inference_steps":3,"prefill_latency_ms":90,"decode_latency_ms":[8,9,14]}"#;
    let g = write_file(dir.path(), "g.jsonl", format!("{gateway}\n"));
    let p = write_file(dir.path(), "p.jsonl", format!("{profile}\n"));
    let out = dir.path().join("ds");
    ingest(&[&g, &p], &out, &[]);
    let rows = query(&out, "SELECT source, position, itl_ms FROM tokens ORDER BY source, position");
    let got: Vec<(String, i64, Option<f64>)> = rows
        .iter()
        .map(|r| {
            (
                r["source"].as_str().unwrap().to_string(),
                r["position"].as_i64().unwrap(),
                r.get("itl_ms").and_then(Value::as_f64),
            )
        })
        .collect();
    let want = [
        ("engine", 0, Some(8.0)),
        ("engine", 1, Some(9.0)),
        ("engine", 2, Some(14.0)),
        ("gateway", 0, None),
        ("gateway", 1, Some(10.0)),
        ("gateway", 2, Some(15.0)),
    ];
    assert_eq!(got, want.iter().map(|(s, p, i)| (s.to_string(), *p, *i)).collect::<Vec<_>>());
    // The key (request_id, source, position) is unique.
    let dup = query(&out, "SELECT count(*) AS n FROM (SELECT request_id, source, position FROM tokens GROUP BY 1, 2, 3 HAVING count(*) > 1)");
    assert_eq!(dup[0]["n"], 0);
    // The jitter columns come from the gateway's rows only: the gateway ITLs {10, 15}.
    let jitter = job_rows(&out, "jitter_requests");
    assert_eq!(jitter[0]["tokens"], 3);
    assert!((jitter[0]["itl_std_ms"].as_f64().unwrap() - 12.5f64.sqrt()).abs() < 1e-12);
}

/// vLLM's own records (tests/data/real/vllm_request_outputs.jsonl) are their
/// requests and the engine's profiles of them: the `engine` job reads the
/// metrics' queue, prefill and decode times. By hand: both records queued
/// 15.625 ms, prefilled 62.5 ms and decoded 125 ms; prompts of 8 and 24
/// tokens (one 0-1K bin), 0 and 16 of them from the prefix cache; the
/// overhead is latency - prefill - decode = 203.125 - 62.5 - 125 = 15.625 ms.
#[test]
fn vllm_metrics_feed_the_engine_job() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let file = data_dir().join("real/vllm_request_outputs.jsonl");
    let summary = ingest(&[file.to_str().unwrap()], &out, &[]);
    assert_eq!(summary["totals"]["profiles_written"], 2, "{summary}");
    let rows = job_rows(&out, "engine");
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!((r["profiles"].as_u64(), r["matched"].as_u64()), (Some(2), Some(2)), "{r}");
    assert_eq!(r["context_bin"], "0-1K", "{r}");
    for (column, expected) in [
        ("queue_p50_ms", 15.625),
        ("queue_p95_ms", 15.625),
        ("prefill_p50_ms", 62.5),
        ("decode_p50_ms", 125.0),
        ("overhead_p50_ms", 15.625),
        ("kv_cache_hit_rate", 1.0 / 3.0),
    ] {
        let got = num(&r[column]).unwrap_or_else(|| panic!("{column} is null: {r}"));
        assert!((got - expected).abs() < 1e-9, "{column}: {got} != {expected}");
    }
    assert!(r["decode_step_std_p50_ms"].is_null(), "vLLM logs no per-step times: {r}");
}
