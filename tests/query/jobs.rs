//! SQL jobs end to end: small hand-made datasets whose expected values are
//! written out here, every column of every job; pricing (tiers, history,
//! cache tokens, LiteLLM import, unpriced); DuckDB computing eos, latency
//! and cost from their definitions over generated and hand-made logs; output
//! formats; a dataset on S3; the SQL shell.

use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{data_dir, ingest, python, repo, tokscope, tokscope_with_env, S3Server};
use serde_json::Value;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// Runs `tokscope job NAME --format json` with `extra` flags; returns the rows.
fn job(name: &str, data: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["job", name, "--format", "json", "--data", data.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = tokscope(&args);
    out.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A column of a JSON row (the JSON writer leaves null columns out).
fn col(row: &Value, c: &str) -> Value {
    row.get(c).cloned().unwrap_or(Value::Null)
}

/// Expected value of one cell: an integer, a float (relative 1e-12), a string, or null.
#[derive(Debug, Clone, Copy)]
enum V {
    I(i64),
    F(f64),
    S(&'static str),
    Null,
}

fn check(rows: &[Value], columns: &[&str], want: &[Vec<V>], what: &str) {
    assert_eq!(rows.len(), want.len(), "{what}: rows {rows:#?}");
    for (r, (row, w)) in rows.iter().zip(want).enumerate() {
        assert_eq!(
            row.as_object().unwrap().keys().filter(|k| !columns.contains(&k.as_str())).count(),
            0,
            "{what}: unexpected columns in {row}"
        );
        for (c, v) in columns.iter().zip(w) {
            let got = col(row, c);
            let ok = match v {
                V::I(i) => got.as_i64() == Some(*i),
                V::F(f) => got.as_f64().is_some_and(|g| (g - f).abs() <= 1e-12 * f.abs().max(1e-300)),
                V::S(s) => got.as_str() == Some(*s),
                V::Null => got.is_null(),
            };
            assert!(ok, "{what}: row {r} column {c}: got {got}, want {v:?}\nrow: {row}");
        }
    }
}

/// Requests with hand-checked statuses and timings (see the comments per line).
const HAND: &[&str] = &[
    // a1: eos (marker). tpot = (600 - 100) / 10 = 50, decode 20, e2e = 11000 / 600.
    r#"{"ts":"2024-06-01T00:00:00Z","request_id":"a1","model":"a","prompt_tokens":100,"completion_tokens":11,"max_tokens":100,"ttft_ms":100,"latency_ms":600,"model_output":"x<|eot_id|>"}"#,
    // a2: implicit truncation. tpot = (1400 - 200) / 20 = 60, decode 1000/60, e2e = 21000 / 1400 = 15.
    r#"{"ts":"2024-06-01T00:00:01Z","request_id":"a2","model":"a","prompt_tokens":200,"completion_tokens":21,"max_tokens":100,"ttft_ms":200,"latency_ms":1400,"model_output":"cut"}"#,
    // a3: length (at the cap). tpot = (2280 - 300) / 99 = 20, decode 50, e2e = 100000 / 2280.
    r#"{"ts":"2024-06-01T00:00:02Z","request_id":"a3","model":"a","prompt_tokens":300,"completion_tokens":100,"max_tokens":100,"ttft_ms":300,"latency_ms":2280,"model_output":"long"}"#,
    // a4: eos from finish_reason (no raw output). One token: no tpot; e2e = 1000 / 400 = 2.5.
    r#"{"ts":"2024-06-01T00:00:03Z","request_id":"a4","model":"a","prompt_tokens":400,"completion_tokens":1,"ttft_ms":400,"latency_ms":400,"finish_reason":"stop"}"#,
    // a5: unknown; no timings at all.
    r#"{"ts":"2024-06-01T00:00:04Z","request_id":"a5","model":"a","prompt_tokens":500,"completion_tokens":2}"#,
    // b1: 1K-2K, eos. tpot = 900 / 9 = 100, decode 10, e2e = 10000 / 950.
    r#"{"ts":"2024-06-01T00:00:05Z","request_id":"b1","model":"b","prompt_tokens":1500,"completion_tokens":10,"max_tokens":100,"ttft_ms":50,"latency_ms":950,"model_output":"ok</s>"}"#,
    // c1: length only: eos + implicit_truncation = 0, so the compliance rate is null.
    r#"{"ts":"2024-06-01T00:00:06Z","request_id":"c1","model":"c","prompt_tokens":10,"completion_tokens":5,"max_tokens":5,"model_output":"abc"}"#,
];

fn hand_dataset(dir: &Path) -> std::path::PathBuf {
    let input = write(dir, "hand.jsonl", &(HAND.join("\n") + "\n"));
    let out = dir.join("ds");
    ingest(&[&input], &out, &[]);
    out
}

const EOS_COLS: &[&str] = &[
    "model",
    "context_bin",
    "requests",
    "eos",
    "length",
    "implicit_truncation",
    "unknown",
    "eos_compliance_rate",
    "eos_marker_rate",
    "implicit_truncation_rate",
];
const LATENCY_COLS: &[&str] = &[
    "model",
    "context_bin",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p95_ms",
    "latency_p50_ms",
    "latency_p95_ms",
    "decode_tps_p50",
    "e2e_tps_mean",
];
const COST_COLS: &[&str] = &[
    "model",
    "context_bin",
    "requests",
    "unpriced_requests",
    "uncosted_requests",
    "cost_source",
    "cost_usd",
    "logged_cost_share",
    "cost_per_1k_tokens",
    "input_share",
    "cached_share",
    "output_share",
];

fn eos_want() -> Vec<Vec<V>> {
    use V::*;
    vec![
        // a: 5 requests; compliance = 2 / (2 + 1); of the 3 raw outputs (a1, a2, a3) one
        // ends with a marker: marker rate 1/3 (a4 is eos by its finish reason, without raw
        // output, so it is not counted); truncation rate = 1 / 5.
        vec![S("a"), S("0-1K"), I(5), I(2), I(1), I(1), I(1), F(2.0 / 3.0), F(1.0 / 3.0), F(0.2)],
        vec![S("b"), S("1K-2K"), I(1), I(1), I(0), I(0), I(0), F(1.0), F(1.0), F(0.0)],
        // c: a length stop with raw output and no marker: compliance null, marker rate 0.
        vec![S("c"), S("0-1K"), I(1), I(0), I(1), I(0), I(0), Null, F(0.0), F(0.0)],
    ]
}

fn latency_want() -> Vec<Vec<V>> {
    use V::*;
    // Type-7 quantiles: h = p * (n - 1), x[floor h] + frac(h) * (x[floor h + 1] - x[floor h]).
    // a: ttft [100, 200, 300, 400]: p50 h=1.5 -> 250; p95 h=2.85 -> 385; p99 h=2.97 -> 397.
    //    tpot [20, 50, 60]: p50 = 50; p95 h=1.9 -> 59. latency [400, 600, 1400, 2280]:
    //    p50 h=1.5 -> 1000; p95 h=2.85 -> 1400 + 0.85 * 880 = 2148. decode [16.67, 20, 50]: p50 20.
    vec![
        vec![
            S("a"),
            S("0-1K"),
            F(250.0),
            F(385.0),
            F(397.0),
            F(50.0),
            F(59.0),
            F(1000.0),
            F(2148.0),
            F(20.0),
            F((11000.0 / 600.0 + 15.0 + 100000.0 / 2280.0 + 2.5) / 4.0),
        ],
        // b: a single request: every quantile is its value.
        vec![
            S("b"),
            S("1K-2K"),
            F(50.0),
            F(50.0),
            F(50.0),
            F(100.0),
            F(100.0),
            F(950.0),
            F(950.0),
            F(10.0),
            F(10000.0 / 950.0),
        ],
        // c: no timings: all null.
        vec![S("c"), S("0-1K"), Null, Null, Null, Null, Null, Null, Null, Null, Null],
    ]
}

#[test]
fn eos_and_latency_jobs_match_hand_computed_values() {
    let dir = tempfile::tempdir().unwrap();
    let ds = hand_dataset(dir.path());
    check(&job("eos", &ds, &[]), EOS_COLS, &eos_want(), "eos");
    check(&job("latency", &ds, &[]), LATENCY_COLS, &latency_want(), "latency");
}

#[test]
fn report_is_eos_latency_and_cost_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let ds = hand_dataset(dir.path());
    let pricing = write(dir.path(), "p.toml", "[[model]]\nmodel = \"a\"\ninput = 1.0\noutput = 2.0\n");
    let report = job("report", &ds, &["--pricing", &pricing]);
    let (eos, lat, cost) = (job("eos", &ds, &[]), job("latency", &ds, &[]), job("cost", &ds, &["--pricing", &pricing]));
    assert_eq!(report.len(), 3);
    for (i, r) in report.iter().enumerate() {
        // Every column of the three jobs, same value, and nothing else (null columns are left out of JSON).
        let mut union = serde_json::Map::new();
        for part in [&eos[i], &lat[i], &cost[i]] {
            union.extend(part.as_object().unwrap().clone());
        }
        // The report leaves out the eos job's plain eos_marker_rate.
        union.remove("eos_marker_rate");
        assert_eq!(r.as_object().unwrap(), &union, "report row {i}");
    }
    let header = tokscope(&["job", "report", "--format", "csv", "--data", ds.to_str().unwrap()]);
    let mut want: Vec<&str> = EOS_COLS.iter().copied().filter(|c| *c != "eos_marker_rate").collect();
    want.extend(&LATENCY_COLS[2..]);
    want.extend(&COST_COLS[3..]);
    assert_eq!(header.lines().next().unwrap(), want.join(","));
    // a: (100+200+300+400+500 prompt) * 1 + (11+21+100+1+2) * 2 = 1500 + 270 = 1770 per 1M.
    assert!((col(&report[0], "cost_usd").as_f64().unwrap() - 1770e-6).abs() < 1e-15);
    assert_eq!(col(&report[1], "unpriced_requests"), 1);
}

/// The report reads `price_usd(..)`'s fields straight from the struct: the
/// session turns DataFusion's leaf-expression pushdown off (no table has a
/// struct column for it to prune), and its environment variable turns it back on.
#[test]
fn report_plan_reads_price_fields_without_leaf_pushdown_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let ds = hand_dataset(dir.path());
    let explain = format!("EXPLAIN {}", tokscope(&["job", "report", "--show-sql"]));
    let args = ["query", "--wide", "--format", "csv", "--data", ds.to_str().unwrap(), &explain];
    let plan = tokscope(&args);
    assert!(plan.contains("price_usd(") && !plan.contains("__datafusion_extracted"), "{plan}");
    let on = tokscope_with_env(&[("DATAFUSION_OPTIMIZER_ENABLE_LEAF_EXPRESSION_PUSHDOWN", "true")], &args);
    assert!(on.contains("__datafusion_extracted"), "{on}");
}

/// The report's quantiles of one column share one accumulator: TTFT's three
/// percentiles, TPOT's and latency's two each become one `quantiles_cont`
/// per column (engine::merge_quantiles); decode TPS's one stays as it is.
#[test]
fn report_plan_keeps_one_quantile_accumulator_per_column() {
    let dir = tempfile::tempdir().unwrap();
    let ds = hand_dataset(dir.path());
    let explain = format!("EXPLAIN {}", tokscope(&["job", "report", "--show-sql"]));
    let plan = tokscope(&["query", "--wide", "--format", "csv", "--data", ds.to_str().unwrap(), &explain]);
    let logical = &plan[..plan.find("physical_plan").unwrap_or(plan.len())];
    for merged in [
        "quantiles_cont(priced.ttft_ms,Float64(0.5),Float64(0.95),Float64(0.99))",
        "quantiles_cont(priced.tpot_ms,Float64(0.5),Float64(0.95))",
        "quantiles_cont(priced.latency_ms,Float64(0.5),Float64(0.95))",
    ] {
        assert!(logical.contains(merged), "{merged} not in {logical}");
    }
    assert!(logical.contains("quantile_cont(priced.decode_tps, Float64(0.5))"), "{logical}");
    assert!(!logical.contains("quantile_cont(priced.ttft_ms, Float64("), "{logical}");
}

/// Pricing cases: each model is one group, so each row is one hand-priced case.
#[test]
fn cost_job_prices_tiers_history_cache_tokens_and_counts_unpriced() {
    let dir = tempfile::tempdir().unwrap();
    let pricing = write(
        dir.path(),
        "pricing.toml",
        r#"
[[model]]
model = "flat"
input = 2.0
output = 8.0
cached_input = 0.5
cache_write = 2.5

[[model]]
model = "defaults"
input = 1.0
output = 2.0

[[model]]
pattern = "tiered-.*"
input = 1.0
output = 2.0
cached_input = 0.25
  [[model.tier]]
  above_prompt_tokens = 1000
  input = 3.0
  output = 6.0

[[model]]
model = "hist"
input = 1.0
output = 1.0

[[model]]
model = "hist"
effective_from = 2024-07-01
input = 2.0
output = 2.0

[[model]]
model = "late"
effective_from = "2025-01-01"
input = 1.0
output = 1.0
"#,
    );
    let line = |id: &str, ts: &str, model: &str, p: i64, c: i64, cw: i64, out: i64| {
        format!(
            r#"{{"ts":"{ts}","request_id":"{id}","model":"{model}","prompt_tokens":{p},"cached_tokens":{c},"cache_write_tokens":{cw},"completion_tokens":{out}}}"#
        )
    };
    let t = "2024-06-01T00:00:00Z";
    let lines = [
        line("f", t, "flat", 1000, 200, 100, 500),
        line("d", t, "defaults", 1000, 400, 100, 10),
        line("ta", t, "tiered-at", 1000, 0, 0, 100),
        line("to", t, "tiered-over", 1001, 1, 0, 100),
        line("h1", "2024-06-30T23:59:59Z", "hist", 100, 0, 0, 0),
        line("h2", "2024-07-01T00:00:00Z", "hist", 2000, 0, 0, 0),
        line("l1", "2024-12-31T23:59:59Z", "late", 100, 0, 0, 100),
        line("l2", "2025-01-02T00:00:00Z", "late", 300, 0, 0, 100),
        line("n1", t, "nobody", 10, 0, 0, 10),
        line("n2", t, "nobody", 20, 0, 0, 10),
    ];
    let input = write(dir.path(), "cost.jsonl", &(lines.join("\n") + "\n"));
    let ds = dir.path().join("ds");
    ingest(&[&input], &ds, &[]);
    use V::*;
    let m = 1e-6;
    let want = vec![
        // prompt includes cache tokens: uncached = 1000 - 400 - 100 = 500; rates default to input 1.
        // (500 + 400 + 100) * 1 + 10 * 2 = 1020; input share counts cache writes: (500 + 100) / 1020.
        vec![
            S("defaults"),
            S("0-1K"),
            I(1),
            I(0),
            I(0),
            S("priced"),
            F(1020.0 * m),
            F(0.0),
            F(1000.0 * 1020.0 * m / 1010.0),
            F(600.0 / 1020.0),
            F(400.0 / 1020.0),
            F(20.0 / 1020.0),
        ],
        // 700 * 2 + 200 * 0.5 + 100 * 2.5 + 500 * 8 = 1400 + 100 + 250 + 4000 = 5750.
        vec![
            S("flat"),
            S("0-1K"),
            I(1),
            I(0),
            I(0),
            S("priced"),
            F(5750.0 * m),
            F(0.0),
            F(1000.0 * 5750.0 * m / 1500.0),
            F(1650.0 / 5750.0),
            F(100.0 / 5750.0),
            F(4000.0 / 5750.0),
        ],
        // History: before 2024-07-01 at 1/1: 100 * 1.
        vec![
            S("hist"),
            S("0-1K"),
            I(1),
            I(0),
            I(0),
            S("priced"),
            F(100.0 * m),
            F(0.0),
            F(1000.0 * 100.0 * m / 100.0),
            F(1.0),
            F(0.0),
            F(0.0),
        ],
        // From 2024-07-01 at 2/2: 2000 * 2.
        vec![
            S("hist"),
            S("1K-2K"),
            I(1),
            I(0),
            I(0),
            S("priced"),
            F(4000.0 * m),
            F(0.0),
            F(1000.0 * 4000.0 * m / 2000.0),
            F(1.0),
            F(0.0),
            F(0.0),
        ],
        // l1 predates the only price: unpriced; l2 = 300 + 100; per-1K over priced tokens only.
        vec![
            S("late"),
            S("0-1K"),
            I(2),
            I(1),
            I(1),
            S("priced+none"),
            F(400.0 * m),
            F(0.0),
            F(1000.0 * 400.0 * m / 400.0),
            F(0.75),
            F(0.0),
            F(0.25),
        ],
        // No price: counted, never 0.
        vec![S("nobody"), S("0-1K"), I(2), I(2), I(2), S("none"), Null, Null, Null, Null, Null, Null],
        // prompt = 1000 is not above the tier: base 1000 * 1 + 100 * 2 = 1200.
        vec![
            S("tiered-at"),
            S("0-1K"),
            I(1),
            I(0),
            I(0),
            S("priced"),
            F(1200.0 * m),
            F(0.0),
            F(1000.0 * 1200.0 * m / 1100.0),
            F(1000.0 / 1200.0),
            F(0.0),
            F(200.0 / 1200.0),
        ],
        // prompt = 1001 > 1000: tier rates on ALL tokens: 1000 * 3 + 1 * 0.25 (tier keeps base cached) + 100 * 6.
        vec![
            S("tiered-over"),
            S("0-1K"),
            I(1),
            I(0),
            I(0),
            S("priced"),
            F(3600.25 * m),
            F(0.0),
            F(1000.0 * 3600.25 * m / 1101.0),
            F(3000.0 / 3600.25),
            F(0.25 / 3600.25),
            F(600.0 / 3600.25),
        ],
    ];
    check(&job("cost", &ds, &["--pricing", &pricing]), COST_COLS, &want, "cost");
    // The bundled LiteLLM table has none of these made-up names, and `--pricing none` no prices
    // at all: every request is unpriced, and with nothing logged, uncosted.
    for extra in [&[][..], &["--pricing", "none"]] {
        let rows = job("cost", &ds, extra);
        assert_eq!(rows.len(), 8, "{extra:?}");
        for r in rows {
            assert!(col(&r, "unpriced_requests") == col(&r, "requests"), "{extra:?}: {r}");
            assert!(col(&r, "uncosted_requests") == col(&r, "requests"), "{extra:?}: {r}");
            assert!(col(&r, "cost_source") == "none" && col(&r, "cost_usd").is_null(), "{extra:?}: {r}");
        }
    }
}

/// What a Python reading of the raw payloads and of the bundled LiteLLM table expects: for
/// each request its price (LiteLLM's per-token rates, the name looked up as logged, then
/// without its leading `provider/` parts) and its logged cost. LiteLLM's GCS payloads: the
/// model is the response's, else the payload's; the prompt is `prompt_tokens`, cache reads
/// `metadata.usage_object.prompt_tokens_details.cached_tokens`, the logged cost
/// `response_cost`. Anthropic's responses: prompt = `input_tokens` + cache reads + cache
/// writes, nothing logged.
const REAL_COST_ORACLE: &str = r#"
import json, sys
table = json.load(open(sys.argv[1]))
def lookup(name):
    while True:
        e = table.get(name)
        if name != "sample_spec" and e is not None and isinstance(e.get("input_cost_per_token"), (int, float)):
            return e
        if "/" not in name:
            return None
        name = name.split("/", 1)[1]
def price(model, prompt, cached, write, out):
    e = lookup(model)
    if e is None:
        return None
    assert prompt <= 128000, "no tiers in this input"
    rate = lambda k, d: e[k] if isinstance(e.get(k), (int, float)) else d
    i = e["input_cost_per_token"]
    return ((prompt - cached - write) * i + cached * rate("cache_read_input_token_cost", i)
            + write * rate("cache_creation_input_token_cost", i) + out * rate("output_cost_per_token", 0.0))
rows = []
for path in sys.argv[2].split(","):
    for line in open(path):
        r = json.loads(line)
        if "usage" in r and "input_tokens" in r["usage"]:
            u = r["usage"]
            cr, cw = u.get("cache_read_input_tokens") or 0, u.get("cache_creation_input_tokens") or 0
            rows.append(dict(id=r["id"], model=r["model"], prompt=u["input_tokens"] + cr + cw, cached=cr,
                             write=cw, out=u["output_tokens"], logged=None))
        else:
            usage = ((r.get("metadata") or {}).get("usage_object") or {})
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
            model = ((r.get("response") or {}).get("model")) or r["model"]
            rows.append(dict(id=r["id"], model=model, prompt=r["prompt_tokens"], cached=cached, write=0,
                             out=r["completion_tokens"], logged=r["response_cost"]))
for r in rows:
    r["priced"] = price(r["model"], r["prompt"], r["cached"], r["write"], r["out"])
    r["source"] = "priced" if r["priced"] is not None else ("logged" if r["logged"] is not None else "none")
print(json.dumps(rows))
"#;

/// The cost, `cost_source` and reconciliation of real LiteLLM and Anthropic payloads with the
/// bundled prices, against [`REAL_COST_ORACLE`]; with a copy of the LiteLLM payloads changed
/// where a gateway's log goes wrong (a cost logged 1.5 times too high, one 1e-9 USD off, a
/// `provider/model` name, a model no table prices).
#[test]
fn bundled_prices_logged_costs_and_reconcile_match_python_over_real_payloads() {
    let dir = tempfile::tempdir().unwrap();
    let real = data_dir().join("real");
    let gcs = real.join("litellm_gcs.ndjson");
    let anthropic = real.join("anthropic_sdk_messages.jsonl");
    let changed = dir.path().join("litellm_changed.ndjson");
    python(&format!(
        r#"
import json
out = []
for n, line in enumerate(open({gcs:?})):
    r = json.loads(line)
    r["id"] += "-changed"
    if n == 0:
        r["model"] = "openai/gpt-4o-mini"
        if r.get("response"): r["response"]["model"] = "openai/gpt-4o-mini"
    if n == 1: r["response_cost"] *= 1.5
    if n == 2: r["response_cost"] += 1e-9
    if n == 3:
        r["model"] = "my-finetune"
        if r.get("response"): r["response"]["model"] = "my-finetune"
    out.append(json.dumps(r))
open({changed:?}, "w").write("\n".join(out) + "\n")
"#,
        gcs = gcs.to_str().unwrap(),
        changed = changed.to_str().unwrap(),
    ));
    let inputs = [gcs.to_str().unwrap(), anthropic.to_str().unwrap(), changed.to_str().unwrap()];
    let ds = dir.path().join("ds");
    ingest(&inputs, &ds, &[]);
    let oracle = dir.path().join("oracle.py");
    std::fs::write(&oracle, REAL_COST_ORACLE).unwrap();
    let table = repo().join("config/litellm/model_prices_and_context_window.json");
    let out = Command::new("python3")
        .args([oracle.to_str().unwrap(), table.to_str().unwrap(), &inputs.join(",")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let want: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(want.len(), 11);
    let f = |v: &Value| v.as_f64();
    let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() <= 1e-12 * a.abs().max(b.abs()),
        (None, None) => true,
        _ => false,
    };
    let by_id = |id: &str| want.iter().find(|w| w["id"] == id).unwrap_or_else(|| panic!("{id} not in the oracle"));
    // What the oracle makes of the changes: the prefixed name priced, the unknown one logged only.
    assert_eq!(by_id("chatcmpl-real-1-changed")["source"], "priced");
    assert_eq!(by_id("chatcmpl-real-1-changed")["model"], "openai/gpt-4o-mini");
    assert_eq!(by_id("chatcmpl-real-1")["source"], "priced");
    assert!(want.iter().any(|w| w["model"] == "my-finetune" && w["source"] == "logged"));

    // Each request's price with the bundled table, as price_usd computes it.
    let sql = "SELECT request_id, model, price_usd(model, ts, prompt_tokens, cached_tokens, cache_write_tokens, \
               completion_tokens)['total_usd'] AS priced, logged_cost_usd FROM requests";
    let got = tokscope(&["query", "--format", "json", "--data", ds.to_str().unwrap(), sql]);
    let got: Vec<Value> = got.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(got.len(), want.len());
    for g in &got {
        let id = g["request_id"].as_str().unwrap();
        // LiteLLM's streamed call reuses the first call's id: the model tells them apart.
        let w = want.iter().find(|w| w["id"] == *id && w["model"] == g["model"]);
        let w = w.unwrap_or_else(|| panic!("{g} not in the oracle"));
        assert!(close(g.get("priced").and_then(f), f(&w["priced"])), "{g} vs {w}");
        assert!(close(g.get("logged_cost_usd").and_then(f), f(&w["logged"])), "{g} vs {w}");
    }

    // The cost job: per model, the sources present and the cost (price, else logged).
    let models: std::collections::BTreeSet<&str> = want.iter().map(|w| w["model"].as_str().unwrap()).collect();
    for (extra, priced) in [(&[][..], true), (&["--pricing", "none"][..], false)] {
        let cost = job("cost", &ds, extra);
        for model in &models {
            let mine: Vec<&Value> = want.iter().filter(|w| w["model"] == *model).collect();
            let source = |w: &Value| -> String {
                if priced {
                    w["source"].as_str().unwrap().to_string()
                } else if w["logged"].is_null() {
                    "none".into()
                } else {
                    "logged".into()
                }
            };
            let cost_of = |w: &Value| if priced && !w["priced"].is_null() { f(&w["priced"]) } else { f(&w["logged"]) };
            let rows: Vec<&Value> = cost.iter().filter(|r| r["model"] == *model).collect();
            let sum = |c: &str| rows.iter().map(|r| col(r, c).as_f64().unwrap_or(0.0)).sum::<f64>();
            assert_eq!(sum("requests") as usize, mine.len(), "{model}");
            let uncosted = mine.iter().filter(|w| source(w) == "none").count();
            assert_eq!(sum("uncosted_requests") as usize, uncosted, "{model} {extra:?}");
            let unpriced = mine.iter().filter(|w| source(w) != "priced").count();
            assert_eq!(sum("unpriced_requests") as usize, unpriced, "{model} {extra:?}");
            let mut want_sources: Vec<String> = mine.iter().map(|w| source(w)).collect();
            want_sources.sort_by_key(|s| ["priced", "logged", "none"].iter().position(|k| k == s));
            want_sources.dedup();
            // A model's requests may fall in several context bins: the sources of all its rows.
            let mut got_sources: Vec<String> = Vec::new();
            for r in &rows {
                for s in col(r, "cost_source").as_str().unwrap().split('+') {
                    if !got_sources.iter().any(|g| g == s) {
                        got_sources.push(s.to_string());
                    }
                }
            }
            got_sources.sort_by_key(|s| ["priced", "logged", "none"].iter().position(|k| k == s));
            assert_eq!(got_sources, want_sources, "{model} {extra:?}");
            let costs: Vec<f64> = mine.iter().filter_map(|w| cost_of(w)).collect();
            let want_cost = (!costs.is_empty()).then(|| costs.iter().sum::<f64>());
            let got_cost = rows.iter().filter_map(|r| col(r, "cost_usd").as_f64()).reduce(|a, b| a + b);
            assert!(close(got_cost, want_cost), "{model} {extra:?}: {got_cost:?} vs {want_cost:?}");
        }
    }

    // reconcile, per model (summed over days), and the requests it flags at two tolerances.
    for (tolerance, flagged) in [
        ("0.01", vec!["chatcmpl-real-2-changed"]),
        ("1e-6", vec!["chatcmpl-real-2-changed", "chatcmpl-real-3-changed"]),
    ] {
        let param = format!("tolerance={tolerance}");
        let t: f64 = tolerance.parse().unwrap();
        let mismatch = |w: &Value| match (f(&w["priced"]), f(&w["logged"])) {
            (Some(p), Some(l)) => (l - p).abs() > t * l.abs().max(p.abs()),
            _ => false,
        };
        let oracle_flagged: Vec<&str> =
            want.iter().filter(|w| mismatch(w)).map(|w| w["id"].as_str().unwrap()).collect();
        assert_eq!(oracle_flagged, flagged, "what the oracle flags at {tolerance}");
        let rows = job("reconcile", &ds, &["--param", &param]);
        for model in &models {
            let mine: Vec<&Value> = want.iter().filter(|w| w["model"] == *model).collect();
            let both: Vec<&&Value> = mine.iter().filter(|w| !w["priced"].is_null() && !w["logged"].is_null()).collect();
            let r: Vec<&Value> = rows.iter().filter(|r| r["model"] == *model).collect();
            let sum = |c: &str| r.iter().map(|r| col(r, c).as_f64().unwrap_or(0.0)).sum::<f64>();
            assert_eq!(sum("requests") as usize, mine.len());
            assert_eq!(sum("compared_requests") as usize, both.len(), "{model}");
            let only = |a: &str, b: &str| mine.iter().filter(|w| !w[a].is_null() && w[b].is_null()).count();
            assert_eq!(sum("priced_only_requests") as usize, only("priced", "logged"), "{model}");
            assert_eq!(sum("logged_only_requests") as usize, only("logged", "priced"), "{model}");
            assert_eq!(sum("mismatched_requests") as usize, mine.iter().filter(|w| mismatch(w)).count(), "{model}");
            let total = |k: &str| (!both.is_empty()).then(|| both.iter().map(|w| f(&w[k]).unwrap()).sum::<f64>());
            let got = |c: &str| r.iter().filter_map(|r| col(r, c).as_f64()).reduce(|a, b| a + b);
            assert!(close(got("priced_cost_usd"), total("priced")), "{model}");
            assert!(close(got("logged_cost_usd"), total("logged")), "{model}");
        }
        let listed = job("reconcile_requests", &ds, &["--param", &param]);
        let ids: Vec<&str> = listed.iter().map(|r| r["request_id"].as_str().unwrap()).collect();
        assert_eq!(ids, flagged, "largest difference first");
        for r in &listed {
            let w = by_id(r["request_id"].as_str().unwrap());
            assert!(
                close(f(&r["priced_cost_usd"]), f(&w["priced"])) && close(f(&r["logged_cost_usd"]), f(&w["logged"]))
            );
            let diff = f(&w["logged"]).unwrap() - f(&w["priced"]).unwrap();
            assert!((f(&r["difference_usd"]).unwrap() - diff).abs() <= 1e-12 * diff.abs(), "{r}");
        }
    }
}

#[test]
fn litellm_prices_import_with_the_200k_tier_and_ad_hoc_sql_sees_the_udfs() {
    let dir = tempfile::tempdir().unwrap();
    let json = repo().join("config/litellm/model_prices_and_context_window.json");
    let spec = format!("litellm:{}", json.display());
    // From the file: input 3e-6, output 1.5e-5, cache read 3e-7, cache creation 3.75e-6;
    // above 200k: 6e-6, 2.25e-5, 6e-7, 7.5e-6 (per token).
    let model = "anthropic.claude-sonnet-4-20250514-v1:0";
    let lines = [
        format!(
            r#"{{"ts":"2025-06-01T00:00:00Z","request_id":"at","model":"{model}","prompt_tokens":200000,"cached_tokens":50000,"cache_write_tokens":10000,"completion_tokens":1000}}"#
        ),
        format!(
            r#"{{"ts":"2025-06-01T00:00:01Z","request_id":"over","model":"{model}","prompt_tokens":200001,"cached_tokens":50000,"cache_write_tokens":10000,"completion_tokens":1000}}"#
        ),
    ];
    let input = write(dir.path(), "l.jsonl", &(lines.join("\n") + "\n"));
    let ds = dir.path().join("ds");
    ingest(&[&input], &ds, &[]);
    // at:   140000 * 3e-6 + 50000 * 3e-7 + 10000 * 3.75e-6 + 1000 * 1.5e-5  = 0.42 + 0.015 + 0.0375 + 0.015 = 0.4875
    // over: 140001 * 6e-6 + 50000 * 6e-7 + 10000 * 7.5e-6 + 1000 * 2.25e-5 = 0.840006 + 0.03 + 0.075 + 0.0225 = 0.967506
    let out = tokscope(&[
        "query", "--format", "json", "--pricing", &spec, "--data", ds.to_str().unwrap(),
        "SELECT request_id, price_usd(model, ts, prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens)['total_usd'] AS c, \
         quantile_cont(prompt_tokens, 0.5) OVER () AS q FROM requests ORDER BY request_id",
    ]);
    let rows: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows[0]["request_id"], "at");
    assert!((rows[0]["c"].as_f64().unwrap() - 0.4875).abs() < 1e-12, "{rows:?}");
    assert!((rows[1]["c"].as_f64().unwrap() - 0.967506).abs() < 1e-12, "{rows:?}");
    assert_eq!(rows[0]["q"].as_f64(), Some(200000.5));
    let cost = job("cost", &ds, &["--pricing", &spec]);
    assert!((col(&cost[0], "cost_usd").as_f64().unwrap() - (0.4875 + 0.967506)).abs() < 1e-12);
    assert_eq!(col(&cost[0], "unpriced_requests"), 0);
}

#[test]
fn kv_cache_job_uses_bundled_and_given_architectures() {
    let dir = tempfile::tempdir().unwrap();
    let hf = data_dir().join("models/tiny-stories-a/config.json");
    let arch = write(
        dir.path(),
        "arch.toml",
        &format!(
            "[[model]]\nmodel = \"tiny\"\nconfig = {:?}\n\n[[model]]\npattern = \"custom-.*\"\nlayers = 10\nkv_heads = 4\nhead_dim = 64\ndtype = \"fp8\"\ntensor_parallel = 2\n",
            hf.display().to_string()
        ),
    );
    let line = |id: &str, model: &str, p: i64, c: i64| {
        format!(
            r#"{{"ts":"2024-06-01T00:00:00Z","request_id":"{id}","model":"{model}","prompt_tokens":{p},"completion_tokens":{c}}}"#
        )
    };
    let lines = [
        line("c", "custom-1", 100, 28),
        line("l1", "llama-3.1-8b-instruct", 1000, 24),
        line("l2", "llama-3.1-8b-instruct", 1000, 1048),
        line("t", "tiny", 1000, 48),
        line("u", "unknown-model", 10, 10),
    ];
    let input = write(dir.path(), "kv.jsonl", &(lines.join("\n") + "\n"));
    let ds = dir.path().join("ds");
    ingest(&[&input], &ds, &[]);
    use V::*;
    let gib = (1u64 << 30) as f64;
    let (custom, tiny) = (5120.0 * 128.0 / gib, 512.0 * 1048.0 / gib);
    let want = vec![
        // custom: 2 * 10 * 4 * 64 * 1 byte = 5120 B/token, 128 tokens; served on 2 GPUs
        // (tensor_parallel = 2): 2 of the 4 KV heads each, half the bytes.
        vec![S("custom-1"), S("0-1K"), I(1), I(0), I(2), F(custom), F(custom), F(custom / 2.0), F(custom / 2.0)],
        // bundled llama-3.1-8b: 2 * 32 * 8 * 128 * 2 = 131072 B/token: 1024 tokens = 0.125 GiB, 2048 = 0.25 GiB; one GPU.
        vec![S("llama-3.1-8b-instruct"), S("0-1K"), I(2), I(0), I(1), F(0.1875), F(0.25), F(0.1875), F(0.25)],
        // tiny-stories-a config.json: 2 layers, 2 KV heads, head_dim 16, float32: 512 B/token * 1048.
        vec![S("tiny"), S("0-1K"), I(1), I(0), I(1), F(tiny), F(tiny), F(tiny), F(tiny)],
        vec![S("unknown-model"), S("0-1K"), I(1), I(1), Null, Null, Null, Null, Null],
    ];
    let cols = [
        "model",
        "context_bin",
        "requests",
        "unknown_architecture_requests",
        "tensor_parallel",
        "kv_cache_gib_mean",
        "kv_cache_gib_max",
        "kv_cache_gib_per_gpu_mean",
        "kv_cache_gib_per_gpu_max",
    ];
    check(&job("kv_cache", &ds, &["--architectures", &arch]), &cols, &want, "kv_cache");
    // --param tp=4 overrides the file: custom 1 of 4 heads per GPU, llama 2 of 8,
    // tiny's 2 heads replicated: 1 per GPU (half).
    let want_tp4 = vec![
        vec![S("custom-1"), S("0-1K"), I(1), I(0), I(4), F(custom), F(custom), F(custom / 4.0), F(custom / 4.0)],
        vec![S("llama-3.1-8b-instruct"), S("0-1K"), I(2), I(0), I(4), F(0.1875), F(0.25), F(0.046875), F(0.0625)],
        vec![S("tiny"), S("0-1K"), I(1), I(0), I(4), F(tiny), F(tiny), F(tiny / 2.0), F(tiny / 2.0)],
        vec![S("unknown-model"), S("0-1K"), I(1), I(1), Null, Null, Null, Null, Null],
    ];
    check(&job("kv_cache", &ds, &["--architectures", &arch, "--param", "tp=4"]), &cols, &want_tp4, "kv_cache tp=4");
}

#[test]
fn every_output_format_and_unknown_job() {
    let dir = tempfile::tempdir().unwrap();
    let ds = hand_dataset(dir.path());
    let d = ds.to_str().unwrap();
    let table = tokscope(&["job", "eos", "--data", d]);
    assert!(table.starts_with("model ") && table.lines().any(|l| l.starts_with("a ")), "{table}");
    let csv = tokscope(&["job", "eos", "--data", d, "--format", "csv"]);
    assert_eq!(csv.lines().next().unwrap(), EOS_COLS.join(","));
    assert!(
        csv.lines().nth(1).unwrap().starts_with("a,0-1K,5,2,1,1,1,0.6666666666666666,0.3333333333333333,0.2"),
        "{csv}"
    );
    let pq = dir.path().join("eos.parquet");
    tokscope(&["job", "eos", "--data", d, "--format", "parquet", "--output", pq.to_str().unwrap()]);
    let back = python(&format!(
        "import pyarrow.parquet as pq, json\nt = pq.read_table({:?})\nprint(json.dumps(t.to_pylist()))",
        pq.display().to_string()
    ));
    let rows: Vec<Value> = serde_json::from_str(back.trim()).unwrap();
    let want = eos_want();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[2]["eos_compliance_rate"], Value::Null);
    check(
        &rows
            .iter()
            .map(|r| {
                // pyarrow writes explicit nulls; drop them so `check` sees what the JSON writer gives.
                Value::Object(
                    r.as_object()
                        .unwrap()
                        .iter()
                        .filter(|(_, v)| !v.is_null())
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                )
            })
            .collect::<Vec<_>>(),
        EOS_COLS,
        &want,
        "parquet",
    );
    let csv_out = dir.path().join("eos.csv");
    tokscope(&["job", "eos", "--data", d, "--format", "csv", "--output", csv_out.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&csv_out).unwrap(), csv);
    let o = common::tokscope_output(&["job", "nope", "--data", d]);
    assert!(
        !o.status.success()
            && String::from_utf8_lossy(&o.stderr).contains("jobs: eos, latency, cost, kv_cache, report")
    );
    let o = common::tokscope_output(&["job", "eos", "--data", d, "--format", "parquet"]);
    assert!(!o.status.success(), "parquet needs --output");
}

#[test]
fn query_runs_a_sql_file_verbatim_and_times_it() {
    // Job SQL starts with a `--` comment: `query` must take it as SQL, not as
    // flags (bench/jobs.sh runs `job --show-sql` output this way and in DuckDB).
    let dir = tempfile::tempdir().unwrap();
    let ds = hand_dataset(dir.path());
    let d = ds.to_str().unwrap();
    let sql = tokscope(&["job", "eos", "--show-sql"]);
    assert!(sql.starts_with("--"));
    let o = common::tokscope_output(&["query", "--data", d, "--format", "csv", "--timing", &sql]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8(o.stdout).unwrap(), tokscope(&["job", "eos", "--data", d, "--format", "csv"]));
    let err = String::from_utf8_lossy(&o.stderr);
    let secs: f64 = err
        .strip_prefix("elapsed: ")
        .and_then(|r| r.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no timing line on stderr: {err}"));
    assert!(secs > 0.0 && err.contains("(3 rows; planning ") && err.contains("opening the dataset before it"), "{err}");
    // Planning is part of the elapsed time.
    let planning: f64 =
        err.split("planning ").nth(1).and_then(|r| r.split(' ').next()).and_then(|t| t.parse().ok()).unwrap();
    assert!(planning > 0.0 && planning <= secs, "{err}");
    // --repeat: the same query again in the same session, one timing line each, the output once.
    let o = common::tokscope_output(&["query", "--data", d, "--format", "csv", "--timing", "--repeat", "3", &sql]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8(o.stdout).unwrap(), tokscope(&["job", "eos", "--data", d, "--format", "csv"]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().filter(|l| l.starts_with("elapsed: ")).count(), 3, "{err}");
    assert_eq!(err.matches("run again in the same session").count(), 2, "{err}");
}

#[test]
fn sql_shell_runs_piped_statements_with_udfs_and_history() {
    let dir = tempfile::tempdir().unwrap();
    let ds = hand_dataset(dir.path());
    let hist = dir.path().join("history");
    let run = |stdin: &str| {
        let mut child = Command::new(common::bin())
            .args(["sql", "--format", "csv", "--data", ds.to_str().unwrap(), "--history", hist.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let o = run("SELECT count(*) AS n\n  FROM requests;\n\nSELECT quantile_cont(ttft_ms, 0.5) AS q FROM requests WHERE model = 'a';\nSELECT nope FROM requests;\n\\q\nSELECT 1;\n");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(stdout, "n\n7\nq\n250.0\n", "stderr: {}", String::from_utf8_lossy(&o.stderr));
    assert!(!o.status.success(), "a failed statement makes the exit status non-zero");
    assert!(String::from_utf8_lossy(&o.stderr).contains("nope"));
    let h = std::fs::read_to_string(&hist).unwrap();
    assert_eq!(h.lines().next().unwrap(), "SELECT count(*) AS n FROM requests;");
    // History survives the session: `!1` re-runs the first statement; writes stay refused.
    let o = run("!1\nCREATE TABLE x AS SELECT 1;\n");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("n\n7\n"), "{stdout}");
    assert!(!o.status.success());
}

#[test]
fn sql_shell_on_a_terminal_edits_lines_and_recalls_statements() {
    // A real pseudo-terminal (Python's pty): the shell must switch to the line
    // editor, which handles backspace, the up arrow, Ctrl-C and Ctrl-D.
    let dir = tempfile::tempdir().unwrap();
    let ds = hand_dataset(dir.path());
    let hist = dir.path().join("history");
    std::fs::write(&hist, "SELECT count(*) AS n FROM requests;\n").unwrap();
    let script = format!(
        r#"
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv({bin:?}, [{bin:?}, "sql", "--format", "csv", "--data", {ds:?}, "--history", {hist:?}])
seen = b""
def until(pattern, timeout=60):
    # Consumes the output up to and including `pattern`; exits with what it saw if it never comes.
    global seen
    end = time.time() + timeout
    while pattern not in seen:
        if time.time() > end:
            sys.exit("timed out waiting for %r; got %r" % (pattern, seen))
        if select.select([fd], [], [], 0.2)[0]:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                break
    seen = seen.split(pattern, 1)[1]
# Each step waits for its result and then for the next prompt (the editor also
# redraws the prompt while recalling, so the prompt alone is no sync point).
until(b"tokscope> ")
os.write(fd, b"SELECT 40 + 3x\x7f\x7f2 AS answer;\r")  # two backspaces: 40 + 2
until(b"answer\r\n42\r\n"); until(b"tokscope> ")
print("edited")
os.write(fd, b"\x1b[A\r")                             # up arrow: the same statement again
until(b"answer\r\n42\r\n"); until(b"tokscope> ")
print("recalled")
os.write(fd, b"\x1b[A\x1b[A\r")                       # two up: the statement from the history file
until(b"n\r\n7\r\n"); until(b"tokscope> ")
print("from file")
os.write(fd, b"SELECT nope_column +\r")
until(b"     -> ")
os.write(fd, b"\x03")                                 # Ctrl-C drops the unfinished statement
until(b"tokscope> ")
os.write(fd, b"\x04")                                 # Ctrl-D ends the session
_, status = os.waitpid(pid, 0)
print("exit:", os.waitstatus_to_exitcode(status))
"#,
        bin = common::bin(),
        ds = ds.to_str().unwrap(),
        hist = hist.to_str().unwrap()
    );
    let out = common::python(&script);
    assert_eq!(out, "edited\nrecalled\nfrom file\nexit: 0\n", "{out}");
    let h = std::fs::read_to_string(&hist).unwrap();
    let lines: Vec<&str> = h.lines().collect();
    assert_eq!(
        lines,
        [
            "SELECT count(*) AS n FROM requests;",
            "SELECT 40 + 2 AS answer;",
            "SELECT 40 + 2 AS answer;",
            "SELECT count(*) AS n FROM requests;"
        ],
        "the cancelled statement is neither run nor kept"
    );
}

#[test]
fn jobs_over_a_dataset_on_s3_match_the_local_dataset() {
    let s3 = S3Server::start();
    let samples = repo().join("sample_logs");
    s3.put(
        "logs",
        &[
            ("in/canonical.jsonl", &samples.join("canonical.jsonl")),
            ("in/anthropic.jsonl", &samples.join("anthropic.jsonl")),
        ],
    );
    s3.put("lake", &[]);
    s3.tokscope(&["ingest", "--quiet", "--out", "s3://lake/ds", "s3://logs/in/"]);
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("ds");
    ingest(
        &[samples.join("canonical.jsonl").to_str().unwrap(), samples.join("anthropic.jsonl").to_str().unwrap()],
        &local,
        &[],
    );
    let pricing = repo().join("config/pricing.example.toml");
    let p = pricing.to_str().unwrap();
    let remote = s3.tokscope(&["job", "report", "--format", "csv", "--pricing", p, "--data", "s3://lake/ds"]);
    let here = tokscope(&["job", "report", "--format", "csv", "--pricing", p, "--data", local.to_str().unwrap()]);
    assert!(remote.lines().count() > 20, "{remote}");
    assert_eq!(remote, here);
}

/// Hand-made lines beside the generated ones, for the corners of the
/// definitions the generator never reaches (canonical format).
const ORACLE_EDGES: &[&str] = &[
    // context_bin edges: 1023 | 1024, 131071 | 131072.
    r#"{"ts":"2024-06-01T00:01:00Z","request_id":"bin-1023","model":"edge","prompt_tokens":1023,"completion_tokens":5,"max_tokens":10,"ttft_ms":10,"latency_ms":50,"model_output":"a</s>"}"#,
    r#"{"ts":"2024-06-01T00:01:01Z","request_id":"bin-1024","model":"edge","prompt_tokens":1024,"completion_tokens":5,"max_tokens":10,"ttft_ms":20,"latency_ms":60,"model_output":"a</s>"}"#,
    r#"{"ts":"2024-06-01T00:01:02Z","request_id":"bin-131071","model":"edge","prompt_tokens":131071,"completion_tokens":5,"max_tokens":10,"ttft_ms":30,"latency_ms":90,"model_output":"a"}"#,
    r#"{"ts":"2024-06-01T00:01:03Z","request_id":"bin-131072","model":"edge","prompt_tokens":131072,"completion_tokens":5,"max_tokens":10,"ttft_ms":40,"latency_ms":80,"model_output":"a"}"#,
    // Raw output: a marker behind whitespace, other markers, one inside the text,
    // a marker at the cap (eos wins), no marker at the cap, by finish reason, neither.
    r#"{"ts":"2024-06-01T00:01:04Z","request_id":"raw-ws","model":"edge","prompt_tokens":10,"completion_tokens":3,"max_tokens":10,"ttft_ms":5,"latency_ms":25,"model_output":"done[EOS] \n\t"}"#,
    r#"{"ts":"2024-06-01T00:01:05Z","request_id":"raw-end","model":"edge","prompt_tokens":11,"completion_tokens":3,"max_tokens":10,"ttft_ms":6,"latency_ms":46,"model_output":"x<|end|>"}"#,
    r#"{"ts":"2024-06-01T00:01:06Z","request_id":"raw-inside","model":"edge","prompt_tokens":12,"completion_tokens":3,"max_tokens":10,"ttft_ms":7,"latency_ms":97,"model_output":"a<|endoftext|>b"}"#,
    r#"{"ts":"2024-06-01T00:01:07Z","request_id":"raw-cap-marker","model":"edge","prompt_tokens":13,"completion_tokens":10,"max_tokens":10,"finish_reason":"length","ttft_ms":8,"latency_ms":98,"model_output":"cut<|im_end|>"}"#,
    r#"{"ts":"2024-06-01T00:01:08Z","request_id":"raw-cap","model":"edge","prompt_tokens":14,"completion_tokens":10,"max_tokens":10,"finish_reason":"stop","ttft_ms":9,"latency_ms":189,"model_output":"no marker"}"#,
    r#"{"ts":"2024-06-01T00:01:09Z","request_id":"raw-length","model":"edge","prompt_tokens":15,"completion_tokens":3,"finish_reason":"length","model_output":"no marker"}"#,
    r#"{"ts":"2024-06-01T00:01:10Z","request_id":"raw-cut","model":"edge","prompt_tokens":16,"completion_tokens":3,"model_output":"no marker"}"#,
    // No raw output: the finish reason as logged (case and spaces aside) decides.
    r#"{"ts":"2024-06-01T00:01:11Z","request_id":"fr-upper","model":"edge","prompt_tokens":17,"completion_tokens":3,"max_tokens":10,"finish_reason":"STOP"}"#,
    r#"{"ts":"2024-06-01T00:01:12Z","request_id":"fr-spaced","model":"edge","prompt_tokens":18,"completion_tokens":3,"max_tokens":10,"finish_reason":" end_turn "}"#,
    r#"{"ts":"2024-06-01T00:01:13Z","request_id":"fr-tool","model":"edge","prompt_tokens":19,"completion_tokens":3,"max_tokens":10,"finish_reason":"tool_use"}"#,
    r#"{"ts":"2024-06-01T00:01:14Z","request_id":"fr-filter","model":"edge","prompt_tokens":20,"completion_tokens":3,"max_tokens":10,"finish_reason":"content_filter"}"#,
    r#"{"ts":"2024-06-01T00:01:15Z","request_id":"fr-max","model":"edge","prompt_tokens":21,"completion_tokens":3,"max_tokens":10,"finish_reason":"max_tokens"}"#,
    r#"{"ts":"2024-06-01T00:01:16Z","request_id":"fr-cap","model":"edge","prompt_tokens":22,"completion_tokens":10,"max_tokens":10}"#,
    r#"{"ts":"2024-06-01T00:01:17Z","request_id":"fr-empty","model":"edge","prompt_tokens":23,"completion_tokens":3,"max_tokens":10,"finish_reason":""}"#,
    r#"{"ts":"2024-06-01T00:01:18Z","request_id":"fr-new","model":"edge","prompt_tokens":24,"completion_tokens":3,"max_tokens":10,"finish_reason":"brand_new_reason"}"#,
    // Timings: one token (no tpot), latency below ttft, zero latency, no ttft.
    r#"{"ts":"2024-06-01T00:01:19Z","request_id":"t-one","model":"edge","prompt_tokens":25,"completion_tokens":1,"ttft_ms":30,"latency_ms":30,"model_output":"a</s>"}"#,
    r#"{"ts":"2024-06-01T00:01:20Z","request_id":"t-below","model":"edge","prompt_tokens":26,"completion_tokens":4,"ttft_ms":50,"latency_ms":40,"model_output":"a</s>"}"#,
    r#"{"ts":"2024-06-01T00:01:21Z","request_id":"t-zero","model":"edge","prompt_tokens":27,"completion_tokens":4,"ttft_ms":0,"latency_ms":0,"model_output":"a</s>"}"#,
    r#"{"ts":"2024-06-01T00:01:22Z","request_id":"t-no-ttft","model":"edge","prompt_tokens":28,"completion_tokens":4,"latency_ms":70,"model_output":"a</s>"}"#,
    // Cost: cache reads and writes at the default write rate (the input's), a
    // tiered model at and just above its threshold.
    r#"{"ts":"2024-06-01T00:01:23Z","request_id":"c-cache","model":"llama-3.1-8b-instruct","prompt_tokens":1000,"cached_tokens":100,"cache_write_tokens":300,"completion_tokens":50,"model_output":"a<|eot_id|>"}"#,
    r#"{"ts":"2024-06-01T00:01:24Z","request_id":"c-at-tier","model":"qwen2.5-72b-instruct","prompt_tokens":4096,"cached_tokens":1000,"cache_write_tokens":500,"completion_tokens":70,"model_output":"a<|im_end|>"}"#,
    r#"{"ts":"2024-06-01T00:01:25Z","request_id":"c-over-tier","model":"qwen2.5-72b-instruct","prompt_tokens":4097,"cached_tokens":1000,"cache_write_tokens":500,"completion_tokens":70,"model_output":"a<|im_end|>"}"#,
];

/// Two streams saved as sent, without usage: no prompt length, the `unknown`
/// bin (never priced, though the model has a price), no raw output.
fn unknown_bin_streams() -> String {
    let chunk = |id: &str, delta: &str, logprobs: &str, finish: &str| {
        format!(
            r#"data: {{"id": "{id}", "object": "chat.completion.chunk", "created": 1717200100, "model": "llama-3.1-8b-instruct", "choices": [{{"index": 0, "delta": {delta}, "logprobs": {logprobs}, "finish_reason": {finish}}}]}}"#
        ) + "\n\n"
    };
    let token = |t: &str| format!(r#"{{"content": [{{"token": "{t}", "logprob": -0.5, "top_logprobs": []}}]}}"#);
    let mut text = String::new();
    for (id, finish) in [("stream-stop", r#""stop""#), ("stream-length", r#""length""#)] {
        text += &chunk(id, r#"{"role": "assistant", "content": ""}"#, "null", "null");
        text += &chunk(id, r#"{"content": "Hi"}"#, &token("Hi"), "null");
        text += &chunk(id, r#"{"content": " there"}"#, &token(" there"), "null");
        text += &chunk(id, "{}", "null", finish);
        text += "data: [DONE]\n\n";
    }
    text
}

/// DuckDB computes eos, latency and cost from their definitions in
/// docs/metrics.md (`tests/oracles/request_metrics.sql`, the cost formula and
/// prices below), from the columns the logs gave: every derived column
/// (context_bin, eos_status, tpot_ms, ...) recomputed, nothing read from
/// sql/. Every cell of each job must agree, on generated canonical and
/// Anthropic logs plus hand-made corners.
#[test]
fn eos_latency_and_cost_agree_with_duckdb_computing_them_from_their_definitions() {
    let dir = tempfile::tempdir().unwrap();
    let gen = |format: &str, requests: &str, seed: &str| {
        let out = dir.path().join(format!("{format}.jsonl"));
        let args = ["--requests", requests, "--seed", seed, "--output-chars", "40", "--format", format];
        tokscope(&[&["generate", "--out", out.to_str().unwrap()][..], &args].concat());
        out.to_str().unwrap().to_string()
    };
    let canonical = gen("canonical", "1500", "11");
    let anthropic = gen("anthropic", "300", "12");
    let edges = write(dir.path(), "edges.jsonl", &(ORACLE_EDGES.join("\n") + "\n"));
    let streams = write(dir.path(), "streams.sse", &unknown_bin_streams());
    // Logged costs: `edge` has no price, so its logged cost is its cost (beside its uncosted
    // rows); llama's price wins over its logged cost.
    let logged = write(
        dir.path(),
        "logged.jsonl",
        r#"{"ts":"2024-06-01T00:02:00Z","request_id":"logged-edge","model":"edge","prompt_tokens":100,"completion_tokens":5,"max_tokens":10,"ttft_ms":10,"latency_ms":50,"model_output":"a</s>","logged_cost_usd":0.5}
{"ts":"2024-06-01T00:02:01Z","request_id":"logged-llama","model":"llama-3.1-8b-instruct","prompt_tokens":100,"completion_tokens":5,"max_tokens":10,"ttft_ms":10,"latency_ms":50,"model_output":"a</s>","logged_cost_usd":9.0}
"#,
    );
    let ds = dir.path().join("ds");
    let summary = ingest(&[&canonical, &anthropic, &edges, &streams, &logged], &ds, &[]);
    let want_rows = 1500 + 300 + ORACLE_EDGES.len() as u64 + 2 + 2;
    assert_eq!(summary["totals"]["rows_written"].as_u64(), Some(want_rows), "every line a request: {summary}");
    // mistral-7b-instruct and `edge` have no price: unpriced in both. deepseek-v3's
    // prices change at 00:10; qwen's tier keeps the base cached and cache-write
    // rates, the write rate being the base input's by default.
    let pricing = write(
        dir.path(),
        "p.toml",
        r#"
[[model]]
model = "llama-3.1-8b-instruct"
input = 0.1
output = 0.2
cached_input = 0.05
[[model]]
pattern = "qwen2\\.5-.*"
input = 1.0
output = 3.0
cached_input = 0.5
  [[model.tier]]
  above_prompt_tokens = 4096
  input = 2.0
  output = 6.0
[[model]]
model = "deepseek-v3"
input = 0.27
output = 1.1
cached_input = 0.07
cache_write = 0.3
[[model]]
model = "deepseek-v3"
effective_from = "2024-06-01T00:10:00Z"
input = 0.5
output = 2.0
cached_input = 0.1
cache_write = 0.6
"#,
    );
    // docs/metrics.md#cost with the prices above: rate = [input, cached_input,
    // cache_write, output] in force for the row, null when none is (or the
    // prompt length is unknown).
    let cost_sql = r#"
WITH rated AS (
  SELECT *, CAST(CASE
      WHEN context_bin = 'unknown' THEN NULL
      WHEN model = 'llama-3.1-8b-instruct' THEN [0.1, 0.05, 0.1, 0.2]
      WHEN model = 'deepseek-v3' AND ts >= TIMESTAMPTZ '2024-06-01 00:10:00+00' THEN [0.5, 0.1, 0.6, 2.0]
      WHEN model = 'deepseek-v3' THEN [0.27, 0.07, 0.3, 1.1]
      WHEN regexp_full_match(model, 'qwen2\.5-.*') AND prompt_tokens > 4096 THEN [2.0, 0.5, 1.0, 6.0]
      WHEN regexp_full_match(model, 'qwen2\.5-.*') THEN [1.0, 0.5, 1.0, 3.0]
    END AS DOUBLE[]) AS rate
  FROM requests_by_definition),
costed AS (
  SELECT *,
    greatest(prompt_tokens - cached_tokens - cache_write_tokens, 0) * rate[1] / 1e6 AS uncached_usd,
    cached_tokens * rate[2] / 1e6 AS cached_usd,
    cache_write_tokens * rate[3] / 1e6 AS write_usd,
    completion_tokens * rate[4] / 1e6 AS output_usd
  FROM rated),
priced AS (SELECT *, uncached_usd + cached_usd + write_usd + output_usd AS price FROM costed),
-- A request's cost: its price, else its logged cost; the source says which.
totalled AS (
  SELECT *, coalesce(price, logged_cost_usd) AS cost,
    CASE WHEN price IS NOT NULL THEN 'priced' WHEN logged_cost_usd IS NOT NULL THEN 'logged' ELSE 'none' END AS source
  FROM priced)
SELECT model, context_bin, count(*) AS requests, count(*) FILTER (WHERE rate IS NULL) AS unpriced_requests,
  count(*) FILTER (WHERE source = 'none') AS uncosted_requests,
  concat_ws('+', CASE WHEN bool_or(source = 'priced') THEN 'priced' END,
                 CASE WHEN bool_or(source = 'logged') THEN 'logged' END,
                 CASE WHEN bool_or(source = 'none') THEN 'none' END) AS cost_source,
  sum(cost) AS cost_usd,
  coalesce(sum(cost) FILTER (WHERE source = 'logged'), 0) / nullif(sum(cost), 0) AS logged_cost_share,
  1000 * sum(cost) FILTER (WHERE prompt_tokens IS NOT NULL AND completion_tokens IS NOT NULL)
    / nullif(sum(prompt_tokens + completion_tokens) FILTER (WHERE cost IS NOT NULL), 0) AS cost_per_1k_tokens,
  sum(uncached_usd + write_usd) / nullif(sum(price), 0) AS input_share,
  sum(cached_usd) / nullif(sum(price), 0) AS cached_share,
  sum(output_usd) / nullif(sum(price), 0) AS output_share
FROM totalled GROUP BY model, context_bin, context_bin_lo ORDER BY model, context_bin_lo NULLS LAST
"#;
    let in_order =
        |view: &str| format!("SELECT * EXCLUDE (context_bin_lo) FROM {view} ORDER BY model, context_bin_lo NULLS LAST");
    let queries = [
        in_order("eos_by_definition"),
        in_order("latency_by_definition"),
        cost_sql.to_string(),
        "SELECT eos_status, count(*) AS n FROM requests_by_definition GROUP BY ALL ORDER BY ALL".to_string(),
    ];
    let oracle = common::duckdb_rows(&common::request_metrics_oracle(&ds), &queries);
    // The data reach every status, the unknown bin and its unpriced rows.
    let statuses: Vec<(&str, i64)> =
        oracle[3].iter().map(|r| (r["eos_status"].as_str().unwrap(), r["n"].as_i64().unwrap())).collect();
    assert_eq!(statuses.iter().map(|s| s.0).collect::<Vec<_>>(), ["eos", "implicit_truncation", "length", "unknown"]);
    assert!(statuses.iter().all(|s| s.1 >= 3), "{statuses:?}");
    let unknown_bin = oracle[2].iter().find(|r| r["context_bin"] == "unknown").expect("an unknown bin");
    assert_eq!((unknown_bin["requests"].as_i64(), unknown_bin["unpriced_requests"].as_i64()), (Some(2), Some(2)));
    let sources: std::collections::BTreeSet<&str> =
        oracle[2].iter().filter_map(|r| r["cost_source"].as_str()).collect();
    assert!(sources.contains("logged+none") && sources.contains("priced") && sources.contains("none"), "{sources:?}");
    let jobs = [("eos", vec![]), ("latency", vec![]), ("cost", vec!["--pricing", pricing.as_str()])];
    for ((name, extra), theirs) in jobs.into_iter().zip(&oracle) {
        let ours = job(name, &ds, &extra);
        assert!(ours.len() > 20, "{name}: several models x bins: {}", ours.len());
        common::assert_rows_match(name, &ours, theirs, 1e-9);
    }
}

/// A dataset of the sample logs and every format's example file, in `dir/ds`.
fn samples_and_formats(dir: &Path) -> std::path::PathBuf {
    let data = dir.join("ds");
    let samples = repo().join("sample_logs");
    let formats = repo().join("tests/data/formats");
    ingest(&[samples.to_str().unwrap(), formats.to_str().unwrap()], &data, &[]);
    data
}

/// `export` runs its jobs' queries several at once by default: each job
/// gives the rows it gives when the jobs run one after another, the jobs
/// keep their order, whatever the number at once.
#[test]
fn export_jobs_run_at_once_write_what_they_write_in_turn() {
    let dir = tempfile::tempdir().unwrap();
    let data = samples_and_formats(dir.path());
    let pricing = repo().join("config/pricing.example.toml");
    let export = |site: &str, at_once: Option<&str>| -> Value {
        let to = dir.path().join(site);
        let mut args = vec!["export", "--quiet", "--json", "--data", data.to_str().unwrap()];
        args.extend(["--to", to.to_str().unwrap(), "--pricing", pricing.to_str().unwrap(), "--date", "2024-06-03"]);
        if let Some(n) = at_once {
            args.extend(["--jobs-at-once", n]);
        }
        serde_json::from_str(&tokscope(&args)).unwrap()
    };
    let in_turn = export("one", Some("1"));
    let jobs: Vec<&str> = in_turn["jobs"].as_array().unwrap().iter().map(|j| j.as_str().unwrap()).collect();
    assert!(jobs.len() >= 8, "{jobs:?}");
    assert_eq!(in_turn["jobs_at_once"], 1);
    for (site, at_once, reported) in [("default", None, 4), ("many", Some("64"), 64)] {
        let summary = export(site, at_once);
        assert_eq!(summary["jobs"], in_turn["jobs"], "the same jobs in the same order");
        assert_eq!(summary["jobs_at_once"], reported);
        for job in &jobs {
            let rows = |s: &str| -> Vec<Value> {
                let text = std::fs::read_to_string(dir.path().join(s).join("2024-06-03").join(format!("{job}.json")));
                text.unwrap()
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect()
            };
            let (at_once_rows, in_turn_rows) = (rows(site), rows("one"));
            assert_eq!(at_once_rows.len(), in_turn_rows.len(), "{job} with {at_once:?} at once");
            for (a, b) in at_once_rows.iter().zip(&in_turn_rows) {
                assert!(same_within_sum_order(a, b), "{job} with {at_once:?} at once:\n{a}\n{b}");
            }
        }
    }
    let zero =
        common::tokscope_output(&["export", "--data", data.to_str().unwrap(), "--to", "x", "--jobs-at-once", "0"]);
    assert!(!zero.status.success());
}

/// Equal, numbers within a relative 1e-9: a parallel sum adds its partial
/// sums in the order they finish, in one job run alone as among several.
fn same_within_sum_order(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs())
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_within_sum_order(v, w)))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same_within_sum_order(v, w))
        }
        _ => a == b,
    }
}

/// A job's SQL run again in one session (its kept plan, with fresh
/// operators where the physical plan is kept) gives the rows a fresh
/// session gives, for every job the dataset holds the tables of.
#[test]
fn every_job_run_again_in_a_session_gives_the_rows_of_its_first_run() {
    let dir = tempfile::tempdir().unwrap();
    let data = samples_and_formats(dir.path());
    let (d, pricing) = (data.to_str().unwrap(), repo().join("config/pricing.example.toml"));
    let pricing = pricing.to_str().unwrap();
    let rows = |out: std::process::Output| -> Vec<Value> {
        let text = String::from_utf8(out.stdout).unwrap();
        text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let mut ran = Vec::new();
    for job in tokscope::jobs::JOBS {
        let fresh = common::tokscope_output(&["job", job.name, "--data", d, "--pricing", pricing, "--format", "json"]);
        if !fresh.status.success() {
            // A table this dataset lacks: an error on every run alike.
            continue;
        }
        let sql = tokscope(&["job", job.name, "--show-sql"]);
        let args = ["query", "--data", d, "--pricing", pricing, "--format", "json", "--timing", "--repeat", "3", &sql];
        let again = common::tokscope_output(&args);
        assert!(again.status.success(), "{}: {}", job.name, String::from_utf8_lossy(&again.stderr));
        let (want, got) = (rows(fresh), rows(again));
        assert_eq!(want.len(), got.len(), "{}", job.name);
        for (a, b) in want.iter().zip(&got) {
            assert!(same_within_sum_order(a, b), "{} run a third time:\n{a}\n{b}", job.name);
        }
        ran.push(job.name);
    }
    assert!(ran.len() >= 15 && ran.contains(&"ab") && ran.contains(&"report"), "{ran:?}");
}
