//! A/B experiments end to end: the `variant` column from logged fields and
//! from `--variants`, the `ab` job on a generated A/B log in which one arm
//! silently truncates 12% of its responses to prompts of 16K tokens or more,
//! and a version migration's metrics on a log with per-token times. Every
//! effect is arm B (the treatment) against arm A (the control). The expected
//! values, p-values and intervals are recomputed from the raw log by NumPy,
//! SciPy and statsmodels (the definitions of docs/metrics.md, in Python): the
//! Wilson and Newcombe intervals to 1e-9, the bootstrap intervals against
//! SciPy's percentile bootstrap within their Monte Carlo error
//! (tests/oracles/percentile_bootstrap.py says how far).

use crate::common;

use std::path::{Path, PathBuf};

use common::{ingest, python, query, tokscope, write_file};
use serde_json::Value;

/// A generated A/B log (20,000 requests, arms `control` and `candidate`, the
/// candidate truncating 12% above 16K) ingested with bins 0, 1K, 4K, 16K, so
/// that one bin, `16K+`, holds every prompt above 16K.
fn ab_dataset(dir: &Path) -> (PathBuf, PathBuf) {
    let log = dir.join("ab.jsonl");
    tokscope(&[
        "generate",
        "--requests",
        "20000",
        "--seed",
        "11",
        "--output-chars",
        "40",
        "--arms",
        "control,candidate",
        "--arm-truncation",
        "candidate:0.12:16K",
        "--out",
        log.to_str().unwrap(),
    ]);
    let out = dir.join("ds");
    ingest(&[log.to_str().unwrap()], &out, &["--bins", "0,1K,4K,16K"]);
    (log, out)
}

fn ab_rows(data: &Path, params: &[&str]) -> Vec<Value> {
    let mut args = vec!["job", "ab", "--format", "json", "--data", data.to_str().unwrap()];
    for p in params {
        args.extend(["--param", p]);
    }
    let out = tokscope(&args);
    out.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn f(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// The `resamples` the bootstrap checks give the job, and SciPy's resamples: enough
/// that an endpoint taken at the 5% point for the 2.5% point (0.025 off in level) lies
/// outside `percentile_bootstrap.check_interval`'s tolerance, 0.015 in level (0.019
/// for the cost ratio, whose job resamples draw request by request: fewer of them,
/// `COST_RESAMPLES`, keep the test short).
const JOB_RESAMPLES: usize = 10_000;
const COST_RESAMPLES: usize = 3_000;
const SCIPY_RESAMPLES: usize = 4_000;

/// The Python lines that import tests/oracles/percentile_bootstrap.py as `pb`.
fn import_percentile_bootstrap() -> String {
    format!(
        "import sys; sys.path.insert(0, {:?}); import percentile_bootstrap as pb",
        common::repo().join("tests/oracles")
    )
}

#[test]
fn the_truncating_arm_is_significant_after_holm_in_its_bin_only() {
    let dir = tempfile::tempdir().unwrap();
    let (_, out) = ab_dataset(dir.path());
    let rows = ab_rows(&out, &["a=control", "b=candidate"]);
    for metric in ["eos_compliance_rate", "implicit_truncation_rate"] {
        for bin in ["0-1K", "1K-4K", "4K-16K", "16K+"] {
            let r = rows.iter().find(|r| r["metric"] == metric && r["context_bin"] == bin).unwrap();
            let holm = f(&r["p_value_holm"]).unwrap();
            if bin == "16K+" {
                assert!(holm < 0.001, "{metric} {bin}: Holm p {holm} should be significant: {r}");
                // The interval of candidate - control excludes 0: fewer EOS stops, more truncations.
                let (lo, hi) = (f(&r["ci_low"]).unwrap(), f(&r["ci_high"]).unwrap());
                assert!(if metric == "eos_compliance_rate" { hi < 0.0 } else { lo > 0.0 }, "{r}");
            } else {
                assert!(holm > 0.05, "{metric} {bin}: Holm p {holm} should not be significant: {r}");
            }
            assert!(f(&r["p_value"]).unwrap() <= holm, "Holm never lowers a p-value: {r}");
        }
    }
    // The arms are the same traffic otherwise: no latency difference survives Holm.
    for r in rows.iter().filter(|r| r["metric"] == "ttft_p50_ms" && r["context_bin"] != "all") {
        assert!(f(&r["p_value_holm"]).unwrap() > 0.05, "{r}");
    }
}

#[test]
fn ab_agrees_with_scipy_and_statsmodels_on_the_raw_log() {
    let dir = tempfile::tempdir().unwrap();
    let (log, out) = ab_dataset(dir.path());
    let pricing = write_file(
        dir.path(),
        "prices.toml",
        "[[model]]\npattern = \".*\"\ninput = 1.0\noutput = 4.0\ncached_input = 0.5\n",
    );
    let rows = ab_rows(&out, &[&format!("resamples={JOB_RESAMPLES}")]);
    let ours = dir.path().join("ab.json");
    std::fs::write(&ours, serde_json::to_string(&rows).unwrap()).unwrap();
    // The cost rows need prices: every model at the same rates, so both arms pay alike.
    let resamples = format!("resamples={COST_RESAMPLES}");
    let data = out.to_str().unwrap();
    let priced =
        tokscope(&["job", "ab", "--format", "json", "--pricing", &pricing, "--param", &resamples, "--data", data]);
    let cost: Vec<Value> = priced
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["metric"] == "cost_per_1k_tokens")
        .collect();
    assert_eq!(cost.len(), 5);
    let priced = dir.path().join("priced.json");
    std::fs::write(&priced, serde_json::to_string(&cost).unwrap()).unwrap();
    // Python recomputes every derived column from the raw JSON (definitions in
    // docs/metrics.md), then the statistics with SciPy and statsmodels.
    let script = format!(
        r#"
import json, math, warnings
import numpy as np
from scipy.stats import mannwhitneyu
from statsmodels.stats.proportion import confint_proportions_2indep, proportions_ztest
from statsmodels.stats.multitest import multipletests
{import_pb}
warnings.simplefilter("ignore")
MARKERS = ["<|eot_id|>", "<|im_end|>", "<｜end▁of▁sentence｜>", "</s>"]
EDGES = [(16384, "16K+"), (4096, "4K-16K"), (1024, "1K-4K"), (0, "0-1K")]
arms = {{}}
for line in open({log:?}):
    v = json.loads(line)
    out = v["model_output"].rstrip()
    if any(out.endswith(m) for m in MARKERS):
        status = "eos"
    elif v["finish_reason"] == "length" or v["completion_tokens"] >= v["max_tokens"]:
        status = "length"
    else:
        status = "implicit_truncation"
    b = next(label for lo, label in EDGES if v["prompt_tokens"] >= lo)
    n = v["completion_tokens"]
    tpot = (v["latency_ms"] - v["ttft_ms"]) / (n - 1) if n > 1 and v["latency_ms"] >= v["ttft_ms"] else None
    # The cost job's formula at prices.toml's rates (USD per 1M tokens): input 1, cached input 0.5, output 4.
    p, cached = v["prompt_tokens"], v.get("cached_tokens") or 0
    cost = (max(p - cached, 0) * 1.0 + cached * 0.5 + n * 4.0) / 1e6
    for key in (b, "all"):
        arms.setdefault((key, v["variant"]), []).append((status, v["ttft_ms"], tpot, cost, p + n))
ours = json.load(open({ours:?}))
priced = json.load(open({priced:?}))
def row(metric, b, rows=ours):
    return next(r for r in rows if r["metric"] == metric and r["context_bin"] == b)
checked, worst, intervals, worst_sigma = 0, 0.0, 0, 0.0
def close(a, e, what):
    global checked, worst
    if e is None or (isinstance(e, float) and math.isnan(e)):
        assert a is None, (what, a, e)
        return
    rel = abs(a - e) / max(abs(e), 1e-300)
    worst = max(worst, rel)
    assert rel < 1e-9, (what, a, e)
    checked += 1
def bootstrap(r, what, samples, statistic, resamples={job_resamples}):
    # The job's interval against SciPy's percentile bootstrap of the same statistic.
    global intervals, worst_sigma
    sigma = pb.check(what, (r["ci_low"], r["ci_high"]), samples, statistic, resamples, {scipy_resamples}, 1)
    worst_sigma = max(worst_sigma, sigma)
    intervals += 1
families = {{}}
for b in ["0-1K", "1K-4K", "4K-16K", "16K+", "all"]:
    A, B = arms[(b, "candidate")], arms[(b, "control")]  # default arms: name order
    for metric, succ, trials in [("eos_compliance_rate", ["eos"], ["eos", "implicit_truncation"]),
                                 ("implicit_truncation_rate", ["implicit_truncation"], None)]:
        xa = sum(x[0] in succ for x in A); na = sum(trials is None or x[0] in trials for x in A)
        xb = sum(x[0] in succ for x in B); nb = sum(trials is None or x[0] in trials for x in B)
        r = row(metric, b)
        assert (r["arm_a"], r["arm_b"], r["n_a"], r["n_b"]) == ("candidate", "control", na, nb), (r, na, nb)
        # B against A.
        lo, hi = confint_proportions_2indep(xb, nb, xa, na, method="newcomb", compare="diff")
        z, p = proportions_ztest([xb, xa], [nb, na])
        close(r["value_a"], xa / na, metric); close(r["diff"], xb / nb - xa / na, metric)
        close(r["ci_low"], lo, metric); close(r["ci_high"], hi, metric); close(r["p_value"], p, metric)
        families.setdefault(metric, []).append((b, p))
    for metric, i in [("ttft_p50_ms", 1), ("tpot_p50_ms", 2)]:
        a = [x[i] for x in A if x[i] is not None]; c = [x[i] for x in B if x[i] is not None]
        r = row(metric, b)
        assert (r["n_a"], r["n_b"]) == (len(a), len(c)), (r, len(a), len(c))
        p = mannwhitneyu(a, c, alternative="two-sided", method="asymptotic", use_continuity=True).pvalue
        close(r["value_a"], float(np.median(a)), metric); close(r["value_b"], float(np.median(c)), metric)
        close(r["diff"], float(np.median(c)) - float(np.median(a)), metric)
        close(r["p_value"], float(p), metric)
        bootstrap(r, f"{{metric}} {{b}}", (a, c), pb.quantile_difference(0.5))
        families.setdefault(metric, []).append((b, float(p)))
    # Cost per 1K tokens: B / A, its interval a bootstrap of whole requests.
    r = row("cost_per_1k_tokens", b, priced)
    assert (r["effect"], r["n_a"], r["n_b"]) == ("ratio", len(A), len(B)), (r, len(A), len(B))
    per_1k = [1000 * sum(x[3] for x in arm) / sum(x[4] for x in arm) for arm in (A, B)]
    close(r["value_a"], per_1k[0], "cost"); close(r["value_b"], per_1k[1], "cost")
    close(r["diff"], per_1k[1] / per_1k[0], "cost ratio")
    samples, ratio = pb.cost_ratio([x[3] for x in A], [x[4] for x in A], [x[3] for x in B], [x[4] for x in B])
    bootstrap(r, f"cost_per_1k_tokens {{b}}", samples, ratio, {cost_resamples})
for metric, ps in families.items():
    bins = [(b, p) for b, p in ps if b != "all" and not math.isnan(p)]
    adj = multipletests([p for _, p in bins], method="holm")[1]
    for (b, _), a in zip(bins, adj):
        close(row(metric, b)["p_value_holm"], float(a), metric + " holm")
print(json.dumps(dict(checked=checked, worst=worst, intervals=intervals, worst_sigma=worst_sigma)))
"#,
        import_pb = import_percentile_bootstrap(),
        log = log.to_str().unwrap(),
        ours = ours.to_str().unwrap(),
        priced = priced.to_str().unwrap(),
        job_resamples = JOB_RESAMPLES,
        cost_resamples = COST_RESAMPLES,
        scipy_resamples = SCIPY_RESAMPLES,
    );
    let report: Value = serde_json::from_str(python(&script).trim()).unwrap();
    assert!(report["checked"].as_u64().unwrap() >= 120, "{report}");

    // Medians of TTFT and TPOT, and the cost ratio, in every bin and overall.
    assert_eq!(report["intervals"], 15, "{report}");
    // Both arms pay the same rates: the ratio's interval holds 1 (B / A: control over candidate).
    let all = cost.iter().find(|r| r["context_bin"] == "all").unwrap();
    let (lo, hi) = (f(&all["ci_low"]).unwrap(), f(&all["ci_high"]).unwrap());
    assert!(lo < 1.0 && 1.0 < hi, "{all}");
}

/// A version migration: 6,000 generated requests with per-token times, half on
/// `v1.2.0` (arm A, the control) and half on `v1.3.0`, ingested with bins 0, 1K,
/// 4K, 16K.
fn migration_dataset(dir: &Path) -> (PathBuf, PathBuf) {
    let log = dir.join("migration.jsonl");
    tokscope(&[
        "generate",
        "--requests",
        "6000",
        "--seed",
        "5",
        "--output-chars",
        "40",
        "--token-data",
        "--arms",
        "v1.2.0,v1.3.0",
        "--out",
        log.to_str().unwrap(),
    ]);
    let out = dir.join("ds");
    ingest(&[log.to_str().unwrap()], &out, &["--bins", "0,1K,4K,16K"]);
    (log, out)
}

fn job_rows(data: &Path, job: &str, params: &[&str]) -> Vec<Value> {
    let mut args = vec!["job", job, "--format", "json", "--data", data.to_str().unwrap()];
    for p in params {
        args.extend(["--param", p]);
    }
    tokscope(&args).lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn the_migration_metrics_agree_with_numpy_and_scipy_on_the_raw_log() {
    let dir = tempfile::tempdir().unwrap();
    let (log, out) = migration_dataset(dir.path());
    let results = dir.path().join("results.json");
    let all = serde_json::json!({
        "ab": job_rows(&out, "ab", &[&format!("resamples={JOB_RESAMPLES}")]),
        "latency": job_rows(&out, "latency", &["by=variant"]),
        "jitter": job_rows(&out, "jitter", &["by=variant"]),
        "load_summary": job_rows(&out, "load_summary", &["by=variant"]),
    });
    std::fs::write(&results, all.to_string()).unwrap();
    // Python derives every per-request column from the raw JSON (docs/metrics.md): TPOT,
    // decode tokens/s, the ITLs between token times and their standard deviation, the
    // first and last token times, the EOS marker, KV-cache bytes from the architectures'
    // shapes (config/architectures.toml), then each arm's statistics and intervals.
    let script = format!(
        r#"
import json, math
from datetime import datetime
import numpy as np
from scipy.stats import mannwhitneyu, chisquare
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint, proportions_ztest
{import_pb}
MARKERS = ["<|eot_id|>", "<|im_end|>", "<｜end▁of▁sentence｜>", "</s>"]
EDGES = [(16384, "16K+"), (4096, "4K-16K"), (1024, "1K-4K"), (0, "0-1K")]
KV_PER_TOKEN = {{"llama-3.1-8b-instruct": 2 * 32 * 8 * 128 * 2, "mistral-7b-instruct": 2 * 32 * 8 * 128 * 2,
                "qwen2.5-72b-instruct": 2 * 80 * 8 * 128 * 2, "deepseek-v3": 2 * 61 * 1 * 288 * 2}}
reqs = []
for line in open({log:?}):
    v = json.loads(line)
    n = v["completion_tokens"]
    tt = v["token_times_ms"]
    itl = [b - a for a, b in zip(tt, tt[1:])]
    tpot = (v["latency_ms"] - v["ttft_ms"]) / (n - 1) if n > 1 and v["latency_ms"] >= v["ttft_ms"] else None
    start = datetime.fromisoformat(v["ts"]).timestamp()
    reqs.append(dict(
        arm=v["variant"], bin=next(label for lo, label in EDGES if v["prompt_tokens"] >= lo),
        marker=any(v["model_output"].rstrip().endswith(m) for m in MARKERS),
        ttft=v["ttft_ms"], tpot=tpot, latency=v["latency_ms"], tps=1000 / tpot if tpot else None,
        itl_std=float(np.std(itl, ddof=1)) if len(itl) >= 2 else None, first=tt[0], last=tt[-1],
        kv=KV_PER_TOKEN[v["model"]] * (v["prompt_tokens"] + n) / 2**30, tokens=n,
        start_us=round(start * 1e6), end_us=round(start * 1e6) + round(v["latency_ms"] * 1000)))
res = json.load(open({results:?}))
checked, intervals = 0, 0
def close(a, e, what):
    global checked
    assert a is not None and abs(a - e) <= 1e-9 * max(abs(e), 1.0), (what, a, e)
    checked += 1
def values(rs, key):
    return [r[key] for r in rs if r[key] is not None]
window_s = (max(r["end_us"] for r in reqs) - min(r["start_us"] for r in reqs)) / 1e6
for b in ["0-1K", "1K-4K", "4K-16K", "16K+", "all"]:
    A = [r for r in reqs if r["arm"] == "v1.2.0" and b in (r["bin"], "all")]
    B = [r for r in reqs if r["arm"] == "v1.3.0" and b in (r["bin"], "all")]
    rows = {{r["metric"]: r for r in res["ab"] if r["context_bin"] == b}}
    def check(metric, a, c, n_a, n_b, p=None, diff=None, ci=None, boot=None):
        global intervals
        r = rows[metric]
        assert (r["arm_a"], r["arm_b"], r["n_a"], r["n_b"]) == ("v1.2.0", "v1.3.0", n_a, n_b), (metric, b, r)
        close(r["value_a"], a, metric); close(r["value_b"], c, metric)
        close(r["diff"], diff if diff is not None else c / a if r["effect"] == "ratio" else c - a, metric + " diff")
        if p is not None:
            close(r["p_value"], p, metric + " p")
        if ci is not None:  # a closed form: statsmodels' interval
            close(r["ci_low"], ci[0], metric + " ci_low"); close(r["ci_high"], ci[1], metric + " ci_high")
            intervals += 1
        if boot is not None:  # (samples, statistic): SciPy's percentile bootstrap
            pb.check(f"{{metric}} {{b}}", (r["ci_low"], r["ci_high"]), *boot, {job_resamples}, {scipy_resamples}, 2)
            intervals += 1
    # The split against 50/50: SciPy's chisquare; the interval, B's Wilson interval minus the split.
    na, nb = len(A), len(B)
    wilson = [x - 0.5 for x in proportion_confint(nb, na + nb, alpha=0.05, method="wilson")]
    check("sample_ratio", na / (na + nb), nb / (na + nb), na, nb, chisquare([na, nb]).pvalue, nb / (na + nb) - 0.5,
          ci=wilson)
    assert rows["sample_ratio"]["sample_ratio_mismatch"] is False, rows["sample_ratio"]
    xa, xb = sum(r["marker"] for r in A), sum(r["marker"] for r in B)
    check("eos_marker_rate", xa / na, xb / nb, na, nb, proportions_ztest([xb, xa], [nb, na])[1],
          ci=confint_proportions_2indep(xb, nb, xa, na, method="newcomb", compare="diff"))
    for metric, key, q in [("ttft_p95_ms", "ttft", .95), ("tpot_p95_ms", "tpot", .95), ("e2e_p95_ms", "latency", .95)]:
        a, c = values(A, key), values(B, key)
        check(metric, float(np.quantile(a, q)), float(np.quantile(c, q)), len(a), len(c),
              boot=((a, c), pb.quantile_difference(q)))
        assert rows[metric].get("p_value") is None, rows[metric]
    for metric, key in [("decode_tps_p50", "tps"), ("itl_std_p50_ms", "itl_std"), ("kv_cache_gib_p50", "kv")]:
        a, c = values(A, key), values(B, key)
        p = mannwhitneyu(a, c, alternative="two-sided", method="asymptotic", use_continuity=True).pvalue
        check(metric, float(np.median(a)), float(np.median(c)), len(a), len(c), float(p),
              boot=((a, c), pb.quantile_difference(0.5)))
    ta, tb = [r["last"] - r["first"] for r in A], [r["last"] - r["first"] for r in B]
    check("tail_token_jitter_ms", float(np.std(ta, ddof=1)), float(np.std(tb, ddof=1)), len(ta), len(tb),
          boot=((ta, tb), pb.std_dev_difference))
    check("output_tokens_per_s", sum(r["tokens"] for r in A) / window_s, sum(r["tokens"] for r in B) / window_s, na, nb)
    if b == "all":
        continue
    # The version table: latency and jitter by arm and bin, one command each.
    for arm, rs in [("v1.2.0", A), ("v1.3.0", B)]:
        lat = next(r for r in res["latency"] if r["variant"] == arm and r["context_bin"] == b)
        for column, key, q in [("ttft_p95_ms", "ttft", .95), ("tpot_p95_ms", "tpot", .95),
                               ("latency_p95_ms", "latency", .95), ("decode_tps_p50", "tps", .5)]:
            close(lat[column], float(np.quantile(values(rs, key), q)), column)
        jit = next(r for r in res["jitter"] if r["variant"] == arm and r["context_bin"] == b)
        close(jit["itl_std_p50_ms"], float(np.quantile(values(rs, "itl_std"), .5)), "itl_std_p50_ms")
        close(jit["tail_token_jitter_ms"], float(np.std([r["last"] - r["first"] for r in rs], ddof=1)), "tail")
        for column, key, q in [("first_token_p99_ms", "first", .99), ("last_token_p95_ms", "last", .95)]:
            close(jit[column], float(np.quantile(values(rs, key), q)), column)
for arm in ["v1.2.0", "v1.3.0"]:
    rs = [r for r in reqs if r["arm"] == arm]
    run = next(r for r in res["load_summary"] if r["variant"] == arm)
    wall = (max(r["end_us"] for r in rs) - min(r["start_us"] for r in rs)) / 1e6
    close(run["output_tokens_per_s"], sum(r["tokens"] for r in rs) / wall, "load_summary output_tokens_per_s")
print(json.dumps(dict(checked=checked, intervals=intervals)))
"#,
        import_pb = import_percentile_bootstrap(),
        log = log.to_str().unwrap(),
        results = results.to_str().unwrap(),
        job_resamples = JOB_RESAMPLES,
        scipy_resamples = SCIPY_RESAMPLES,
    );
    let report: Value = serde_json::from_str(python(&script).trim()).unwrap();
    assert!(report["checked"].as_u64().unwrap() >= 260, "{report}");

    // Per bin and overall: the Wilson and Newcombe intervals, and seven bootstraps.
    assert_eq!(report["intervals"], 5 * 9, "{report}");
}

#[test]
fn variant_comes_from_logged_fields_or_the_variants_file() {
    let dir = tempfile::tempdir().unwrap();
    let canonical = [
        r#"{"ts":1717200000000,"request_id":"c1","model":"llama-ft","prompt_tokens":5,"completion_tokens":2,"variant":"treatment","arm":"ignored"}"#,
        r#"{"ts":1717200000000,"request_id":"c2","model":"llama-ft","prompt_tokens":5,"completion_tokens":2,"arm":"B"}"#,
        r#"{"ts":1717200000000,"request_id":"c3","model":"llama-ft","prompt_tokens":5,"completion_tokens":2,"experiment":{"id":"e1"}}"#,
        r#"{"ts":1717200000000,"request_id":"c4","model":"llama-base","model_version":"2024-08","prompt_tokens":5,"completion_tokens":2}"#,
        r#"{"ts":1717200000000,"request_id":"c5","model":"other","prompt_tokens":5,"completion_tokens":2}"#,
    ];
    let openai = r#"{"ts":1717200000000,"arm":"gateway-arm","response":{"id":"o1","object":"chat.completion","created":1717200000,"model":"gpt-4o","choices":[{"index":0,"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}}"#;
    let c = write_file(dir.path(), "c.jsonl", canonical.join("\n") + "\n");
    let o = write_file(dir.path(), "o.jsonl", format!("{openai}\n"));
    let variants = write_file(
        dir.path(),
        "arms.json",
        r#"[{"arm": "candidate", "model_pattern": "llama-ft"}, {"arm": "control", "model": "llama-base", "model_version_pattern": "2024-.*"}]"#,
    );
    let out = dir.path().join("ds");
    ingest(&[&c, &o], &out, &["--variants", &variants]);
    let rows = query(&out, "SELECT request_id, variant, extra FROM requests ORDER BY request_id");
    let variant =
        |id: &str| rows.iter().find(|r| r["request_id"] == id).and_then(|r| r["variant"].as_str()).map(String::from);
    assert_eq!(variant("c1").as_deref(), Some("treatment"), "a logged variant wins over arm and the file");
    assert_eq!(variant("c2").as_deref(), Some("B"));
    assert_eq!(variant("c3").as_deref(), Some("candidate"), "an object names no arm: the file's rule applies");
    assert_eq!(variant("c4").as_deref(), Some("control"));
    assert_eq!(variant("c5"), None);
    assert_eq!(variant("o1").as_deref(), Some("gateway-arm"));
    let c3 = rows.iter().find(|r| r["request_id"] == "c3").unwrap();
    assert_eq!(c3["extra"], r#"{"experiment":{"id":"e1"}}"#);
    // A bad file stops ingest before any work, with the rule that is wrong.
    let bad = write_file(dir.path(), "bad.json", r#"[{"arm": "x"}]"#);
    let failed = common::tokscope_output(&[
        "ingest",
        "--quiet",
        "--out",
        dir.path().join("ds2").to_str().unwrap(),
        "--variants",
        &bad,
        &c,
    ]);
    assert!(!failed.status.success());
    assert!(String::from_utf8_lossy(&failed.stderr).contains("rule 1"), "{}", String::from_utf8_lossy(&failed.stderr));
}
