//! Load-test jobs on a generated log: `throughput` per time window and
//! `load_summary` per model, against an independent computation in Python
//! from the raw JSON (windows by integer arithmetic, concurrency by clipping
//! and by a sweep over the intervals, quantiles by numpy).

use crate::common;

use common::{python, tokscope};
use serde_json::Value;

fn job(data: &std::path::Path, name: &str, params: &[&str]) -> String {
    let mut args = vec!["job", name, "--format", "json", "--data", data.to_str().unwrap()];
    for p in params {
        args.extend(["--param", p]);
    }
    tokscope(&args)
}

#[test]
fn throughput_and_load_summary_match_an_independent_computation() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("load.jsonl");
    tokscope(&[
        "generate",
        "--requests",
        "3000",
        "--seed",
        "3",
        "--output-chars",
        "20",
        "--out",
        log.to_str().unwrap(),
    ]);
    let out = dir.path().join("ds");
    common::ingest(&[log.to_str().unwrap()], &out, &[]);
    // The results go to files: the Python oracle reads them.
    let throughput = dir.path().join("throughput.jsonl");
    std::fs::write(&throughput, job(&out, "throughput", &["window=30s"])).unwrap();
    let summary = dir.path().join("summary.jsonl");
    std::fs::write(&summary, job(&out, "load_summary", &[])).unwrap();
    let script = format!(
        r#"
import json, datetime
import numpy as np
W = 30_000_000
def micros(ts):
    return int(round(datetime.datetime.fromisoformat(ts).timestamp() * 1000)) * 1000
reqs = []
for line in open({log:?}):
    v = json.loads(line)
    start = micros(v["ts"])
    end = start + int(round(v["latency_ms"] * 1000))
    reqs.append((v["model"], start, end, v["completion_tokens"], v["prompt_tokens"] + v["completion_tokens"], v["ttft_ms"], v["latency_ms"]))
def peak(spans):
    events = sorted([(s, 1) for s, e in spans if e > s] + [(e, -1) for s, e in spans if e > s], key=lambda x: (x[0], x[1]))
    run = best = 0
    for _, d in events:
        run += d; best = max(best, run)
    return best
def q(values, p):
    return float(np.quantile(values, p, method="linear")) if values else None
checked = 0
def close(a, e, what):
    global checked
    if e is None:
        assert a is None, (what, a); return
    assert a is not None and abs(a - e) <= 1e-9 * max(1.0, abs(e)), (what, a, e)
    checked += 1
rows = [json.loads(l) for l in open({throughput:?}) if l.strip()]
expected = {{}}
for m, s, e, out_tok, _, ttft, lat in reqs:
    a = s // W * W
    for w in range(a, max(a, (e - 1) // W * W) + 1, W):
        expected.setdefault((m, w), []).append((s, e, out_tok, ttft, lat, w == a))
assert len(rows) == len(expected), (len(rows), len(expected))
for r in rows:
    w = micros(r["window_start"].replace("Z", "+00:00"))
    group = expected[(r["model"], w)]
    arrived = [g for g in group if g[5]]
    assert r["requests"] == len(arrived), r
    close(r["qps"], len(arrived) / 30, "qps")
    close(r["output_tokens_per_s"], sum(g[2] for g in arrived) / 30, "tokens")
    close(r["mean_concurrency"], sum(max(0, min(g[1], w + W) - max(g[0], w)) for g in group) / W, "mean")
    assert r["peak_concurrency"] == peak([(max(g[0], w), min(g[1], w + W)) for g in group]), r
    for col, i, p in [("ttft_p50_ms", 3, .5), ("ttft_p95_ms", 3, .95), ("ttft_p99_ms", 3, .99),
                      ("e2e_p50_ms", 4, .5), ("e2e_p95_ms", 4, .95), ("e2e_p99_ms", 4, .99)]:
        close(r.get(col), q([g[i] for g in arrived], p), col)
for r in [json.loads(l) for l in open({summary:?}) if l.strip()]:
    mine = [x for x in reqs if x[0] == r["model"]]
    first, last = min(x[1] for x in mine), max(x[2] for x in mine)
    wall = (last - first) / 1e6
    assert r["requests"] == len(mine)
    close(r["wall_s"], wall, "wall")
    close(r["output_tokens_per_s"], sum(x[3] for x in mine) / wall, "out/s")
    close(r["tokens_per_s"], sum(x[4] for x in mine) / wall, "tok/s")
    close(r["qps"], len(mine) / wall, "qps")
    close(r["mean_concurrency"], sum(x[6] for x in mine) / 1000 / wall, "conc")
    assert r["peak_concurrency"] == peak([(x[1], x[2]) for x in mine]), r
    close(r["mean_latency_ms"], float(np.mean([x[6] for x in mine])), "mean latency")
    close(r["e2e_p99_ms"], q([x[6] for x in mine], .99), "e2e p99")
    close(r["ttft_p50_ms"], q([x[5] for x in mine], .5), "ttft p50")
print(json.dumps(dict(checked=checked, windows=len(rows))))
"#,
        log = log.to_str().unwrap(),
        throughput = throughput.to_str().unwrap(),
        summary = summary.to_str().unwrap(),
    );
    let report: Value = serde_json::from_str(python(&script).trim()).unwrap();
    assert!(report["windows"].as_u64().unwrap() > 100, "{report}");
    assert!(report["checked"].as_u64().unwrap() > 1000, "{report}");
}

#[test]
fn a_bad_window_is_refused_before_running() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["window=0s", "window=fast", "window=-5m"] {
        let out =
            common::tokscope_output(&["job", "throughput", "--param", bad, "--data", dir.path().to_str().unwrap()]);
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("positive duration"), "{bad}");
    }
}
