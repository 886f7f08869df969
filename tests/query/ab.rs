//! A/B experiments end to end: the `variant` column from logged fields and
//! from `--variants`, and the `ab` job on a generated A/B log in which one arm
//! silently truncates 12% of its responses to prompts of 16K tokens or more.
//! The expected p-values and intervals are recomputed from the raw log by
//! SciPy and statsmodels (the definitions of docs/metrics.md, in Python).

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
                // The interval of the difference excludes 0, on the candidate's side.
                let (lo, hi) = (f(&r["ci_low"]).unwrap(), f(&r["ci_high"]).unwrap());
                assert!(if metric == "eos_compliance_rate" { lo > 0.0 } else { hi < 0.0 }, "{r}");
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
    let rows = ab_rows(&out, &[]);
    let ours = dir.path().join("ab.json");
    std::fs::write(&ours, serde_json::to_string(&rows).unwrap()).unwrap();
    // Python recomputes every derived column from the raw JSON (definitions in
    // docs/metrics.md), then the statistics with SciPy and statsmodels.
    let script = format!(
        r#"
import json, math, warnings
import numpy as np
from scipy.stats import mannwhitneyu
from statsmodels.stats.proportion import confint_proportions_2indep, proportions_ztest
from statsmodels.stats.multitest import multipletests
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
    for key in (b, "all"):
        arms.setdefault((key, v["variant"]), []).append((status, v["ttft_ms"], tpot))
ours = json.load(open({ours:?}))
def row(metric, b):
    return next(r for r in ours if r["metric"] == metric and r["context_bin"] == b)
checked, worst = 0, 0.0
def close(a, e, what):
    global checked, worst
    if e is None or (isinstance(e, float) and math.isnan(e)):
        assert a is None, (what, a, e)
        return
    rel = abs(a - e) / max(abs(e), 1e-300)
    worst = max(worst, rel)
    assert rel < 1e-9, (what, a, e)
    checked += 1
families = {{}}
for b in ["0-1K", "1K-4K", "4K-16K", "16K+", "all"]:
    A, B = arms[(b, "candidate")], arms[(b, "control")]  # default arms: name order
    for metric, succ, trials in [("eos_compliance_rate", ["eos"], ["eos", "implicit_truncation"]),
                                 ("implicit_truncation_rate", ["implicit_truncation"], None)]:
        xa = sum(s in succ for s, _, _ in A); na = sum(trials is None or s in trials for s, _, _ in A)
        xb = sum(s in succ for s, _, _ in B); nb = sum(trials is None or s in trials for s, _, _ in B)
        r = row(metric, b)
        assert (r["arm_a"], r["arm_b"], r["n_a"], r["n_b"]) == ("candidate", "control", na, nb), (r, na, nb)
        lo, hi = confint_proportions_2indep(xa, na, xb, nb, method="newcomb", compare="diff")
        z, p = proportions_ztest([xa, xb], [na, nb])
        close(r["value_a"], xa / na, metric); close(r["diff"], xa / na - xb / nb, metric)
        close(r["ci_low"], lo, metric); close(r["ci_high"], hi, metric); close(r["p_value"], p, metric)
        families.setdefault(metric, []).append((b, p))
    for metric, i in [("ttft_p50_ms", 1), ("tpot_p50_ms", 2)]:
        a = [x[i] for x in A if x[i] is not None]; c = [x[i] for x in B if x[i] is not None]
        r = row(metric, b)
        assert (r["n_a"], r["n_b"]) == (len(a), len(c)), (r, len(a), len(c))
        p = mannwhitneyu(a, c, alternative="two-sided", method="asymptotic", use_continuity=True).pvalue
        close(r["value_a"], float(np.median(a)), metric); close(r["value_b"], float(np.median(c)), metric)
        close(r["p_value"], float(p), metric)
        families.setdefault(metric, []).append((b, float(p)))
for metric, ps in families.items():
    bins = [(b, p) for b, p in ps if b != "all" and not math.isnan(p)]
    adj = multipletests([p for _, p in bins], method="holm")[1]
    for (b, _), a in zip(bins, adj):
        close(row(metric, b)["p_value_holm"], float(a), metric + " holm")
print(json.dumps(dict(checked=checked, worst=worst)))
"#,
        log = log.to_str().unwrap(),
        ours = ours.to_str().unwrap(),
    );
    let report: Value = serde_json::from_str(python(&script).trim()).unwrap();
    assert!(report["checked"].as_u64().unwrap() >= 80, "{report}");
    // The cost rows need prices: every model at the same rates, so both arms pay alike
    // and the ratio's interval holds 1.
    let priced = tokscope(&["job", "ab", "--format", "json", "--pricing", &pricing, "--data", out.to_str().unwrap()]);
    let cost: Vec<Value> = priced
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["metric"] == "cost_per_1k_tokens")
        .collect();
    assert_eq!(cost.len(), 5);
    let all = cost.iter().find(|r| r["context_bin"] == "all").unwrap();
    assert_eq!(all["effect"], "ratio");
    let (lo, ratio, hi) = (f(&all["ci_low"]).unwrap(), f(&all["diff"]).unwrap(), f(&all["ci_high"]).unwrap());
    assert!(lo <= ratio && ratio <= hi && lo < 1.0 && 1.0 < hi, "{all}");
    assert!((ratio - f(&all["value_a"]).unwrap() / f(&all["value_b"]).unwrap()).abs() < 1e-12);
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
