//! Model internals and answer quality end to end: the `kernel_trace`,
//! `moe_routing` and `eval` formats ingested (detected and forced; valid,
//! malformed, truncated and large inputs), and the `head_waste`, `moe_load`,
//! `drift`, `quality` and `composite` jobs on them, with expectations
//! computed by hand (the samples in `tests/data/formats/`) or by independent
//! references run here: NumPy (moe_load), SciPy (kl_divergence, drift) and
//! sacreBLEU (bleu4, quality).

use crate::common;

use std::path::Path;

use common::{data_dir, ingest, python, query, repo, tokscope, tokscope_output, write_file};
use serde_json::Value;

fn job(data: &Path, name: &str, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["job", name, "--format", "json", "--data", data.to_str().unwrap()];
    args.extend_from_slice(extra);
    tokscope(&args).lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A column of a JSON row (the JSON writer leaves nulls out).
fn col(row: &Value, c: &str) -> Value {
    row.get(c).cloned().unwrap_or(Value::Null)
}

fn close(got: &Value, want: f64, what: &str) {
    let g = got.as_f64().unwrap_or_else(|| panic!("{what}: not a number: {got}"));
    assert!((g - want).abs() <= 1e-9 * want.abs().max(1.0), "{what}: got {g}, want {want}");
}

fn totals(s: &Value) -> [u64; 5] {
    let t = &s["totals"];
    ["lines_read", "lines_ingested", "rows_written", "lines_rejected", "lines_skipped"]
        .map(|k| t[k].as_u64().unwrap_or_else(|| panic!("{k} in {t}")))
}

fn formats(dir: &Path) -> String {
    data_dir().join("formats").join(dir).to_str().unwrap().to_string()
}

// ------------------------------------------------------------------ kernel_trace

#[test]
fn kernel_trace_sample_is_detected_counted_and_feeds_head_waste() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let sample = formats(Path::new("kernel_trace.sample.json"));
    let s = ingest(&[&sample], &out, &[]);
    assert_eq!(s["files"][0]["format"], "kernel_trace");
    // 19 events: 7 without rows (3 M, s, f, i, C); 7 X and 2 B/E pairs = 11
    // events, 9 rows; the last event (X without ts) rejected.
    assert_eq!(totals(&s), [12, 11, 9, 1, 7]);

    // The rejected event: where it starts in the file, found here independently.
    let text = std::fs::read_to_string(&sample).unwrap();
    let start = text[..text.find(r#""dur": "n/a""#).unwrap()].rfind('{').unwrap();
    let line = text[..start].matches('\n').count() as u64 + 1;
    let rejects = query(&out, "SELECT source_format, source_line, byte_offset, error FROM rejects");
    assert_eq!(rejects.len(), 1);
    assert_eq!(rejects[0]["source_format"], "kernel_trace");
    assert_eq!(
        (rejects[0]["source_line"].as_u64(), rejects[0]["byte_offset"].as_u64()),
        (Some(line), Some(start as u64))
    );
    assert!(rejects[0]["error"].as_str().unwrap().contains("numeric ts (missing)"), "{rejects:?}");

    let rows = query(
        &out,
        "SELECT name, phase, pid, tid, ts_us, dur_us, layer, head, flops FROM kernels ORDER BY byte_offset",
    );
    let got: Vec<String> = rows
        .iter()
        .map(|r| {
            ["name", "phase", "pid", "tid", "ts_us", "dur_us", "layer", "head", "flops"]
                .map(|c| match col(r, c) {
                    Value::String(s) => s,
                    other => other.to_string(),
                })
                .join(" ")
        })
        .collect();
    assert_eq!(
        got,
        [
            "aten::mm X 1 1 100.0 50.0 null null 1000000.0",
            "layer_0.attn_head_0 X 0 7 200.0 12.5 0 0 2000000.0",
            "layer_0.attn_head_1 X 0 7 215.0 10.0 0 1 1800000.0",
            "flash_fwd_kernel X 0 7 230.0 20.0 1 0 4000000.0",
            "flash_fwd_kernel X 0 7 255.0 18.0 1 1 3600000.0",
            "decode_step B 0 8 290.0 30.0 null null null",
            "layer_0.attn_head_0 B 0 8 300.0 11.5 0 0 2000000.0",
            "layer_1.attn_head_1 X 0 7 400.0 17.5 1 1 3600000.0",
            "layer_1.attn_head_0 X 0 7 450.0 21.0 1 0 null",
        ]
    );

    // head_waste at 0.25 TFLOP/s = 0.25e6 FLOP/us (docs/metrics.md#head_waste):
    // (layer, head, kernels, duration, missing, actual, expected, GFLOP/s, waste).
    let want = [
        (0, 0, 2, 24.0, 0, 4e6, 6e6, 4e6 / 24.0 / 1e3, 1.0 - 4.0 / 6.0),
        (0, 1, 1, 10.0, 0, 1.8e6, 2.5e6, 180.0, 0.28),
        (1, 0, 2, 41.0, 1, 4e6, 5e6, 200.0, 0.2),
        (1, 1, 2, 35.5, 0, 7.2e6, 8.875e6, 7.2e6 / 35.5 / 1e3, 1.0 - 7.2 / 8.875),
    ];
    let heads = job(&out, "head_waste", &["--param", "peak_tflops=0.25", "--param", "threshold=0.25"]);
    assert_eq!(heads.len(), want.len());
    for (r, (layer, head, kernels, dur, missing, actual, expected, gflops, waste)) in heads.iter().zip(want) {
        let what = format!("head_waste ({layer}, {head})");
        assert_eq!((col(r, "layer"), col(r, "head")), (layer.into(), head.into()), "{what}");
        assert_eq!((col(r, "kernels"), col(r, "flops_missing")), (kernels.into(), missing.into()), "{what}");
        close(&col(r, "duration_us"), dur, &what);
        close(&col(r, "actual_flops"), actual, &what);
        close(&col(r, "expected_flops"), expected, &what);
        close(&col(r, "achieved_gflops_per_s"), gflops, &what);
        close(&col(r, "waste_ratio"), waste, &what);
        assert_eq!(col(r, "flagged"), Value::Bool(waste > 0.25), "{what}");
    }
}

#[test]
fn kernel_trace_forced_on_a_gzipped_one_line_bare_array() {
    let dir = tempfile::tempdir().unwrap();
    let doc = r#"[{"ph":"M","name":"process_name","pid":"GPU 0","args":{"name":"x"}},{"ph":"X","name":"layer_3.attn_head_2","pid":"GPU 0","tid":"stream 7","ts":10.125,"dur":2.5,"args":{"flops":1e6}},{"ph":"B","name":"step","pid":"GPU 0","tid":"stream 7","ts":20},{"ph":"E","pid":"GPU 0","tid":"stream 7","ts":21.5,"args":{"layer":4,"head":"0","flops":5}}]"#;
    let input = write_file(dir.path(), "trace.json.gz", common::gzip(doc.as_bytes(), flate2::Compression::default()));
    let out = dir.path().join("ds");
    let s = ingest(&[&input], &out, &["--format", "kernel_trace"]);
    assert_eq!(totals(&s), [3, 3, 2, 0, 1]);
    let rows = query(&out, "SELECT name, pid, tid, ts_us, dur_us, layer, head, flops FROM kernels ORDER BY ts_us");
    assert_eq!(rows[0]["pid"], "GPU 0");
    assert_eq!(rows[0]["tid"], "stream 7");
    assert_eq!((rows[0]["ts_us"].as_f64(), rows[0]["dur_us"].as_f64()), (Some(10.125), Some(2.5)));
    assert_eq!(
        (rows[0]["layer"].as_i64(), rows[0]["head"].as_i64(), rows[0]["flops"].as_f64()),
        (Some(3), Some(2), Some(1e6))
    );
    // The pair takes its layer and head from the end event's args (merged).
    assert_eq!(rows[1]["name"], "step");
    assert_eq!(
        (rows[1]["dur_us"].as_f64(), rows[1]["layer"].as_i64(), rows[1]["head"].as_i64()),
        (Some(1.5), Some(4), Some(0))
    );
}

#[test]
fn broken_and_truncated_traces_keep_every_complete_event() {
    let dir = tempfile::tempdir().unwrap();
    let event = |ts: u32| format!("{{\"ph\": \"X\", \"name\": \"k\", \"ts\": {ts}, \"dur\": 1}}");
    // A structure break after two events: the rest (holding a third) is one reject.
    let broken = format!("{{\"traceEvents\": [\n{},\n{}\n{}\n]}}\n", event(1), event(2), event(3));
    // A gzip stream cut short inside the second of three events.
    let full = format!("{{\"traceEvents\": [{}, {}, {}]}}", event(1), event(2), event(3));
    let gz = common::gzip(full.as_bytes(), flate2::Compression::none());
    let cut = &gz[..gz.len() - full.len() + full.find("\"ts\": 2").unwrap()];
    let (a, b) = (write_file(dir.path(), "broken.json", broken), write_file(dir.path(), "cut.json.gz", cut));
    let out = dir.path().join("ds");
    let s = ingest(&[&a, &b], &out, &[]);
    assert_eq!(totals(&s), [5, 3, 3, 2, 0]);
    let errors = query(&out, "SELECT source_file, source_line, byte_offset, error FROM rejects ORDER BY source_file");
    let broken_at = format!("{{\"traceEvents\": [\n{},\n{}\n", event(1), event(2)).len() as u64;
    assert!(errors[0]["source_file"].as_str().unwrap().ends_with("broken.json"));
    assert_eq!((errors[0]["source_line"].as_u64(), errors[0]["byte_offset"].as_u64()), (Some(4), Some(broken_at)));
    assert!(errors[0]["error"].as_str().unwrap().contains("expected `,` or `]` after an event"), "{errors:?}");
    assert!(errors[1]["error"].as_str().unwrap().contains("input stream failed"), "{errors:?}");
}

#[test]
fn a_generated_trace_with_a_truncated_tail_is_ingested_whole() {
    // bench/gen_kernel_trace.py: ~6 MB, pretty-printed, a 0.6 MB string before
    // the events, every phase, the last event cut off. It prints what must be found.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("gen.pt.trace.json");
    let script = repo().join("bench/gen_kernel_trace.py");
    let out = std::process::Command::new("python3")
        .args([script.to_str().unwrap(), "--mb", "6", "--out", trace.to_str().unwrap(), "--truncate"])
        .output()
        .expect("python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let want: Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = |k: &str| want[k].as_u64().unwrap();

    let ds = dir.path().join("ds");
    let rss = dir.path().join("rss");
    let status = std::process::Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o", rss.to_str().unwrap(), common::bin(), "ingest", "--quiet", "--json", "--out"])
        .args([ds.to_str().unwrap(), trace.to_str().unwrap()])
        .output()
        .expect("/usr/bin/time");
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let s: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(totals(&s), [n("events_read"), n("events_read") - 1, n("rows"), 1, n("skipped")]);
    let peak_kb: u64 = std::fs::read_to_string(&rss).unwrap().trim().parse().unwrap();
    assert!(peak_kb < 1 << 20, "peak RSS {peak_kb} KiB");

    let sums =
        query(&ds, "SELECT count(*) AS n, sum(dur_us) AS d, sum(flops) AS f FROM kernels WHERE layer IS NOT NULL");
    assert_eq!(sums[0]["n"].as_u64(), Some(n("attention_kernels")));
    close(&sums[0]["d"], want["attention_duration_us"].as_f64().unwrap(), "attention duration");
    close(&sums[0]["f"], want["attention_flops"].as_f64().unwrap(), "attention flops");
    let per_head = job(&ds, "head_waste", &[]);
    let expected: Vec<(u64, u64, u64)> = want["per_head_kernels"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .flat_map(|(l, heads)| {
            heads.as_array().unwrap().iter().enumerate().map(move |(h, k)| (l as u64, h as u64, k.as_u64().unwrap()))
        })
        .filter(|(_, _, k)| *k > 0)
        .collect();
    let got: Vec<(u64, u64, u64)> = per_head
        .iter()
        .map(|r| {
            (col(r, "layer").as_u64().unwrap(), col(r, "head").as_u64().unwrap(), col(r, "kernels").as_u64().unwrap())
        })
        .collect();
    assert_eq!(got, expected);
    let rejects = query(&ds, "SELECT error FROM rejects");
    assert!(rejects[0]["error"].as_str().unwrap().contains("ends inside this event"), "{rejects:?}");
}

// ------------------------------------------------------------------ moe_routing

#[test]
fn moe_routing_sample_csv_is_detected_and_feeds_moe_load() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let s = ingest(&[&formats(Path::new("moe_routing.sample.csv"))], &out, &[]);
    assert_eq!(s["files"][0]["format"], "moe_routing");
    // Header skipped; 16 rows; the last row (tokens = abc) rejected.
    assert_eq!(totals(&s), [17, 16, 16, 1, 1]);
    let rejects = query(&out, "SELECT source_line, error FROM rejects");
    assert_eq!(rejects[0]["source_line"], 18);
    assert!(rejects[0]["error"].as_str().unwrap().contains("tokens must be an integer"), "{rejects:?}");
    let inherited = query(&out, "SELECT count(*) AS n FROM moe_routing WHERE k IS NULL AND num_experts IS NULL");
    assert_eq!(inherited[0]["n"], 2);

    // By hand (docs/metrics.md#moe_load): layer 0 loads 40 30 25 25 20 20 20 20,
    // layer 1 loads 60 10 10 20 30 25 25 20; p90 33 and 39: expert 0 hot in both.
    let layers = job(&out, "moe_load", &[]);
    assert_eq!(layers.len(), 2);
    let h0 = -(0.2f64 * 0.2f64.log2() + 0.15 * 0.15f64.log2() + 0.25 * 0.125f64.log2() + 0.4 * 0.1f64.log2());
    let h1 = -(0.3f64 * 0.3f64.log2()
        + 0.1 * 0.05f64.log2()
        + 0.2 * 0.1f64.log2()
        + 0.15 * 0.15f64.log2()
        + 0.25 * 0.125f64.log2());
    for (r, (hot_share, imbalance, cv, h)) in layers
        .iter()
        .zip([(0.2, 1.6, (350.0f64 / 8.0).sqrt() / 25.0, h0), (0.3, 2.4, (1750.0f64 / 8.0).sqrt() / 25.0, h1)])
    {
        assert_eq!((col(r, "num_experts"), col(r, "top_k"), col(r, "assignments")), (8.into(), 2.into(), 200.into()));
        close(&col(r, "sparsity"), 0.25, "sparsity");
        close(&col(r, "routed_tokens"), 100.0, "routed tokens");
        assert_eq!(col(r, "hot_experts"), serde_json::json!([0]));
        close(&col(r, "hot_share"), hot_share, "hot share");
        close(&col(r, "imbalance_max_mean"), imbalance, "imbalance");
        close(&col(r, "load_cv"), cv, "cv");
        close(&col(r, "routing_entropy_bits"), h, "entropy");
        close(&col(r, "redundancy_bound"), 0.45 - 0.3 * h / 3.0 + 0.02 * 2.0, "redundancy bound");
        assert_eq!(col(r, "inconsistent"), Value::Bool(false));
    }
}

#[test]
fn moe_routing_json_lines_forced_and_an_over_long_line_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let long = format!(r#"{{"layer":0,"expert_id":1,"tokens":1,"request_id":"{}"}}"#, "x".repeat(5000));
    let lines = [
        r#"{"layer":0,"expert_id":0,"tokens":30,"k":1,"num_experts":2}"#.to_string(),
        r#"{"layer":0,"expert_id":1,"tokens":10,"request_id":"r9"}"#.to_string(),
        long,
        r#"{"layer":0,"expert_id":2,"tokens":10,"k":1,"num_experts":2}"#.to_string(),
    ];
    let input = write_file(dir.path(), "routing.log", lines.join("\n") + "\n");
    let out = dir.path().join("ds");
    let s = ingest(&[&input], &out, &["--format", "moe_routing", "--max-line-bytes", "1000"]);
    assert_eq!(totals(&s), [4, 2, 2, 2, 0]);
    let errors: Vec<String> =
        query(&out, "SELECT error FROM rejects ORDER BY source_line").iter().map(|r| r["error"].to_string()).collect();
    assert!(
        errors[0].contains("longer than --max-line-bytes") && errors[1].contains("not below num_experts 2"),
        "{errors:?}"
    );
    let l = &job(&out, "moe_load", &[])[0];
    // Loads 30, 10: p90 = 10 + 0.9 * 20 = 28: expert 0 hot (share 0.75).
    assert_eq!(
        (col(l, "num_experts"), col(l, "top_k"), col(l, "hot_experts")),
        (2.into(), 1.into(), serde_json::json!([0]))
    );
    close(&col(l, "hot_share"), 0.75, "hot share");
}

#[test]
fn moe_load_matches_numpy_on_generated_routing_logs() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("routing.csv");
    // Four layers x 16 experts, top-2 routing of 150 requests each, skewed
    // router probabilities, two experts of layer 2 never chosen; CSV columns in
    // another order, k and num_experts left empty on every fifth row.
    let expected = python(&format!(
        r#"
import csv, json, math
import numpy as np
rng = np.random.default_rng(11)
L, K, k = 4, 16, 2
rows = []
for layer in range(L):
    logits = rng.normal(0, 1.0 + layer, K)
    if layer == 2:
        logits[[3, 15]] = -np.inf
    p = np.exp(logits - logits[np.isfinite(logits)].max())
    p /= p.sum()
    for r in range(150):
        counts = np.zeros(K, int)
        for _ in range(int(rng.integers(1, 30))):
            counts[rng.choice(K, size=k, replace=False, p=p)] += 1
        for e in np.nonzero(counts)[0]:
            rows.append((f"req-{{r}}", layer, int(e), int(counts[e])))
with open({csv:?}, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["tokens", "expert_id", "request_id", "layer", "k", "num_experts"])
    for i, (req, layer, e, t) in enumerate(rows):
        w.writerow([t, e, req, layer, "" if i % 5 == 0 else k, "" if i % 5 == 0 else K])
out = []
for layer in range(L):
    loads = np.zeros(K)
    for req, l, e, t in rows:
        if l == layer:
            loads[e] += t
    share = loads / loads.sum()
    p90 = np.quantile(loads, 0.9)
    h = float(-sum(s * math.log2(s) for s in share if s > 0))
    out.append(dict(layer=layer, assignments=int(loads.sum()), shares=share.tolist(),
                    hot=[int(i) for i in np.nonzero(loads > p90)[0]], hot_share=float(share[loads > p90].sum()),
                    imbalance=float(loads.max() / loads.mean()), cv=float(loads.std() / loads.mean()),
                    entropy=h, bound=0.45 - 0.3 * h / math.log2(K) + 0.02 * k, rows=sum(1 for x in rows if x[1] == layer)))
print(json.dumps(out))
"#
    ));
    let want: Vec<Value> = serde_json::from_str(&expected).unwrap();
    let out = dir.path().join("ds");
    let s = ingest(&[csv.to_str().unwrap()], &out, &[]);
    assert_eq!(s["files"][0]["format"], "moe_routing");
    let rows: u64 = want.iter().map(|w| w["rows"].as_u64().unwrap()).sum();
    assert_eq!(totals(&s), [rows, rows, rows, 0, 1]);
    let got = job(&out, "moe_load", &[]);
    assert_eq!(got.len(), 4);
    for (g, w) in got.iter().zip(&want) {
        let what = format!("layer {}", w["layer"]);
        assert_eq!(col(g, "layer"), w["layer"], "{what}");
        assert_eq!((col(g, "num_experts"), col(g, "top_k")), (16.into(), 2.into()), "{what}");
        assert_eq!(col(g, "assignments"), w["assignments"], "{what}");
        close(&col(g, "routed_tokens"), w["assignments"].as_f64().unwrap() / 2.0, &what);
        let shares = col(g, "expert_shares");
        for (a, b) in shares.as_array().unwrap().iter().zip(w["shares"].as_array().unwrap()) {
            close(a, b.as_f64().unwrap(), &what);
        }
        assert_eq!(col(g, "hot_experts"), w["hot"], "{what}");
        for (c, k) in [
            ("hot_share", "hot_share"),
            ("imbalance_max_mean", "imbalance"),
            ("load_cv", "cv"),
            ("routing_entropy_bits", "entropy"),
            ("redundancy_bound", "bound"),
        ] {
            close(&col(g, c), w[k].as_f64().unwrap(), &format!("{what} {c}"));
        }
    }
}

// ------------------------------------------------------------------ eval

#[test]
fn eval_sample_joins_the_gateway_requests() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let s = ingest(
        &[&formats(Path::new("eval.sample.jsonl")), &formats(Path::new("profile_gateway.sample.jsonl"))],
        &out,
        &[],
    );
    let format_of = |name: &str| {
        s["files"].as_array().unwrap().iter().find(|f| f["location"].as_str().unwrap().ends_with(name)).unwrap()
            ["format"]
            .clone()
    };
    assert_eq!(
        (format_of("eval.sample.jsonl"), format_of("profile_gateway.sample.jsonl")),
        ("eval".into(), "canonical".into())
    );
    // 9 eval lines (8 rows, the truncated last one rejected) + 12 requests.
    assert_eq!(totals(&s), [21, 20, 20, 1, 0]);
    let rows = query(
        &out,
        "SELECT e.request_id, e.task, e.recall, e.factscore, e.issues, e.candidates, r.finish_reason, r.completion_tokens \
         FROM evals e LEFT JOIN requests r ON e.request_id = r.request_id ORDER BY e.request_id",
    );
    assert_eq!(rows.len(), 8);
    assert!(rows.iter().all(|r| !col(r, "completion_tokens").is_null()), "every record joins: {rows:?}");
    let by_id = |id: &str| rows.iter().find(|r| r["request_id"] == id).unwrap();
    assert_eq!(
        (
            col(by_id("gw-05"), "finish_reason"),
            col(by_id("gw-05"), "completion_tokens"),
            col(by_id("gw-05"), "factscore")
        ),
        ("length".into(), 6.into(), 0.3.into())
    );
    assert_eq!(col(by_id("gw-12"), "issues"), serde_json::json!(["recall_out_of_range"]));
    assert!(col(by_id("gw-12"), "recall").is_null());
    assert_eq!(col(by_id("gw-07"), "issues"), serde_json::json!(["candidate_mismatch"]));
    assert_eq!(col(by_id("gw-01"), "candidates"), serde_json::json!(["d1", "d2", "d3"]));
    let ranked = query(&out, "SELECT retrieved, relevant FROM evals WHERE request_id = 'gw-03'");
    assert_eq!(ranked[0]["retrieved"], serde_json::json!(["doc-1", "doc-4"]), "in ranked order");
    assert_eq!(ranked[0]["relevant"], serde_json::json!(["doc-4", "doc-5"]));
    // Top-K recall by hand: gw-02 (qwen) finds its one relevant id 2nd: 0 at K = 1, then 1;
    // gw-03 (llama) finds doc-4 2nd and never doc-5: 0, then 1/2.
    let curve = common::tokscope(&[
        "job",
        "recall_at_k",
        "--param",
        "max_k=3",
        "--format",
        "json",
        "--data",
        out.to_str().unwrap(),
    ]);
    let points: Vec<(String, i64, i64, f64)> = curve
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|r| {
            let model = r["model"].as_str().unwrap().to_string();
            (model, r["k"].as_i64().unwrap(), r["records"].as_i64().unwrap(), r["recall_at_k"].as_f64().unwrap())
        })
        .collect();
    let llama = "llama-3.1-8b-instruct".to_string();
    let qwen = "qwen2.5-72b-instruct".to_string();
    assert_eq!(
        points,
        vec![
            (llama.clone(), 1, 1, 0.0),
            (llama.clone(), 2, 1, 0.5),
            (llama, 3, 1, 0.5),
            (qwen.clone(), 1, 1, 0.0),
            (qwen.clone(), 2, 1, 1.0),
            (qwen, 3, 1, 1.0)
        ]
    );
    let reject = query(&out, "SELECT source_line, error FROM rejects");
    assert_eq!(reject[0]["source_line"], 9);

    // KL per record with the shipped UDF, against SciPy on the logged dicts
    // (gw-05's zero of q: SciPy says inf, the definition uses 1e-12).
    let kl = query(
        &out,
        "SELECT request_id, kl_divergence(relevance_true, relevance_model) AS kl FROM evals \
         WHERE relevance_true IS NOT NULL ORDER BY request_id",
    );
    let scipy = python(&format!(
        r#"
import json, math
from scipy.stats import entropy
out = {{}}
for line in open({path:?}):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    t, m = r.get("relevance_true"), r.get("relevance_model")
    if t is None or m is None or set(t) != set(m):
        continue
    keys = sorted(t)
    d = float(entropy([t[k] for k in keys], [m[k] for k in keys], base=2))
    if math.isinf(d):
        d = sum(t[k] * math.log2(t[k] / (m[k] if m[k] > 0 else 1e-12)) for k in keys if t[k] > 0)
    out[r["request_id"]] = d
print(json.dumps(out))
"#,
        path = formats(Path::new("eval.sample.jsonl"))
    ));
    let scipy: serde_json::Map<String, Value> = serde_json::from_str(&scipy).unwrap();
    assert_eq!(kl.len(), scipy.len());
    for r in &kl {
        let id = r["request_id"].as_str().unwrap();
        close(&r["kl"], scipy[id].as_f64().unwrap(), id);
    }
    // The hand values of the format's notes: gw-01 0.25 bits, gw-10 0.25 - 0.25 log2 1.5.
    close(&kl[0]["kl"], 0.25, "gw-01");
    close(&kl[4]["kl"], 0.25 - 0.25 * 1.5f64.log2(), "gw-10");
}

#[test]
fn eval_references_are_redacted_like_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let key = "eval-test-key-0123456789";
    let sample = formats(Path::new("eval.sample.jsonl"));
    common::tokscope_with_env(
        &[("TOKSCOPE_REDACT_KEY", key)],
        &["ingest", "--quiet", "--redact", "hash", "--out", out.to_str().unwrap(), &sample],
    );
    let hashed = query(&out, "SELECT reference FROM evals WHERE request_id = 'gw-01'");
    // The keyed hash (HMAC-SHA-256 under TOKSCOPE_REDACT_KEY), by Python's hmac.
    let mac =
        python(&format!("import hmac, hashlib; print(hmac.new(b'{key}', b'Hello!', hashlib.sha256).hexdigest())"));
    assert_eq!(hashed[0]["reference"], mac.trim());
    let out = dir.path().join("dropped");
    ingest(&[&formats(Path::new("eval.sample.jsonl"))], &out, &["--redact", "drop"]);
    assert_eq!(query(&out, "SELECT count(reference) AS n FROM evals")[0]["n"], 0);
}

#[test]
fn eval_rejects_bad_lines_and_over_long_ones() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"request_id":"a","factscore":0.5}"#.to_string(),
        r#"{"request_id":"b","recall":"high"}"#.to_string(),
        r#"{"request_id":"","factscore":0.5}"#.to_string(),
        r#"{"request_id":"c","relevance_true":{"x":"1"},"relevance_model":{"x":1}}"#.to_string(),
        format!(r#"{{"request_id":"d","reference":"{}"}}"#, "word ".repeat(400)),
        r#"{"request_id":"e","relevance_true":{"x":0.7,"y":0.7},"relevance_model":{"x":0.5,"y":0.5},"human_score":9}"#
            .to_string(),
    ];
    let input = write_file(dir.path(), "evals.jsonl", lines.join("\n") + "\n");
    let out = dir.path().join("ds");
    let s = ingest(&[&input], &out, &["--format", "eval", "--max-line-bytes", "1000"]);
    assert_eq!(totals(&s), [6, 2, 2, 4, 0]);
    let errors: Vec<String> =
        query(&out, "SELECT error FROM rejects ORDER BY source_line").iter().map(|r| r["error"].to_string()).collect();
    assert!(errors[0].contains("recall must be a number"), "{errors:?}");
    assert!(errors[1].contains("request_id"), "{errors:?}");
    assert!(errors[2].contains("relevance_true.x must be a number"), "{errors:?}");
    assert!(errors[3].contains("longer than --max-line-bytes"), "{errors:?}");
    let e = query(&out, "SELECT issues, human_score, relevance_true FROM evals WHERE request_id = 'e'");
    assert_eq!(col(&e[0], "issues"), serde_json::json!(["human_score_out_of_range", "not_normalized"]));
    assert_eq!(col(&e[0], "relevance_true"), serde_json::json!([0.7, 0.7]));
    // kl_divergence refuses such a pair, naming why; the drift job leaves it out.
    let failed = tokscope_output(&[
        "query",
        "--data",
        out.to_str().unwrap(),
        "SELECT kl_divergence(relevance_true, relevance_model) FROM evals WHERE request_id = 'e'",
    ]);
    assert!(!failed.status.success());
    assert!(
        String::from_utf8_lossy(&failed.stderr).contains("p sums to 1.4"),
        "{}",
        String::from_utf8_lossy(&failed.stderr)
    );
    assert!(job(&out, "drift", &[]).is_empty());
}

/// Writes `requests.jsonl` and `evals.jsonl` (80 queries, two models,
/// plain-text and chat prompts of 1..10 words, Dirichlet relevance
/// distributions) and returns the expected drift and quality rows computed
/// with SciPy, NumPy and sacreBLEU.
fn generated_evaluations(dir: &Path) -> Value {
    let expected = python(&format!(
        r#"
import json, random
import numpy as np
import sacrebleu
from scipy.stats import entropy
rnd = random.Random(5)
rng = np.random.default_rng(5)
words = "the a model cache token latency gpu fast slow blue key door report total refund policy answer question".split()
sent = lambda n: " ".join(rnd.choice(words) for _ in range(n))
reqs, evals, kl, qual = [], [], {{}}, {{}}
for i in range(80):
    rid, model = f"q-{{i}}", ["m1", "m2"][i % 2]
    n = rnd.randint(1, 10)
    msg = sent(n)
    prompt = [{{"role": "system", "content": "Be brief."}}, {{"role": "user", "content": "an earlier question"}},
              {{"role": "assistant", "content": "ok"}}, {{"role": "user", "content": msg}}] if i % 3 == 0 else msg
    output = sent(rnd.randint(1, 12)) + rnd.choice(["", ".", "!", " ?", ", really."])
    reference = sent(rnd.randint(1, 12)) + rnd.choice(["", ".", "!"])
    if rnd.random() < 0.3:
        output = reference
    reqs.append({{"ts": f"2024-06-01T12:{{i // 60:02d}}:{{i % 60:02d}}Z", "request_id": rid, "model": model,
                 "prompt_tokens": 10, "completion_tokens": 5, "prompt": prompt, "model_output": output}})
    task = ["qa", "rag", "chat"][i % 3]
    ev = {{"request_id": rid, "task": task, "reference": reference, "factscore": round(rnd.random(), 3)}}
    if i % 7 != 0:
        c = rnd.randint(2, 6)
        names = [f"d{{j}}" for j in range(c)]
        rnd.shuffle(names)
        t, m = rng.dirichlet(np.ones(c) * 0.7), rng.dirichlet(np.ones(c) * 0.7)
        ev["relevance_true"], ev["relevance_model"] = dict(zip(names, t.tolist())), dict(zip(names, m.tolist()))
        b = "1-3" if n <= 3 else "4-6" if n <= 6 else "7+"
        kl.setdefault(b, []).append(float(entropy(t, m, base=2)))
    evals.append(ev)
    bleu = sacrebleu.sentence_bleu(output, [reference]).score / 100
    q = qual.setdefault((model, task), {{"bleu": [], "fact": []}})
    q["bleu"].append(bleu)
    q["fact"].append(ev["factscore"])
with open({req:?}, "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in reqs)
with open({ev:?}, "w") as f:
    f.writelines(json.dumps(e) + "\n" for e in evals)
drift = [dict(word_bin=b, queries=len(v), mean=float(np.mean(v)), p95=float(np.quantile(v, 0.95)),
              share=float(np.mean(np.array(v) > 0.85))) for b, v in sorted(kl.items())]
quality = [dict(model=m, task=t, evals=len(q["bleu"]), bleu=float(np.mean(q["bleu"])), fact=float(np.mean(q["fact"])),
                f1=0.4 * float(np.mean(q["bleu"])) + 0.6 * float(np.mean(q["fact"])))
           for (m, t), q in sorted(qual.items())]
print(json.dumps(dict(drift=drift, quality=quality)))
"#,
        req = dir.join("requests.jsonl").to_str().unwrap(),
        ev = dir.join("evals.jsonl").to_str().unwrap(),
    ));
    serde_json::from_str(&expected).unwrap()
}

#[test]
fn drift_and_quality_match_scipy_and_sacrebleu_on_generated_evaluations() {
    let dir = tempfile::tempdir().unwrap();
    let want = generated_evaluations(dir.path());
    let out = dir.path().join("ds");
    let inputs = [dir.path().join("requests.jsonl"), dir.path().join("evals.jsonl")];
    ingest(&[inputs[0].to_str().unwrap(), inputs[1].to_str().unwrap()], &out, &[]);

    let drift = job(&out, "drift", &[]);
    let expected = want["drift"].as_array().unwrap();
    assert_eq!(drift.len(), expected.len(), "{drift:?}");
    for (g, w) in drift.iter().zip(expected) {
        let what = format!("drift {}", w["word_bin"]);
        assert_eq!((col(g, "word_bin"), col(g, "queries")), (w["word_bin"].clone(), w["queries"].clone()), "{what}");
        close(&col(g, "kl_bits_mean"), w["mean"].as_f64().unwrap(), &what);
        close(&col(g, "kl_bits_p95"), w["p95"].as_f64().unwrap(), &what);
        close(&col(g, "drift_share"), w["share"].as_f64().unwrap(), &what);
    }

    let quality = job(&out, "quality", &[]);
    let expected = want["quality"].as_array().unwrap();
    assert_eq!(quality.len(), expected.len());
    for (g, w) in quality.iter().zip(expected) {
        let what = format!("quality {} {}", w["model"], w["task"]);
        assert_eq!(
            (col(g, "model"), col(g, "task"), col(g, "evals")),
            (w["model"].clone(), w["task"].clone(), w["evals"].clone())
        );
        assert_eq!(col(g, "bleu_scored"), w["evals"], "{what}");
        close(&col(g, "bleu4_mean"), w["bleu"].as_f64().unwrap(), &what);
        close(&col(g, "factscore_mean"), w["fact"].as_f64().unwrap(), &what);
        close(&col(g, "f1_fact"), w["f1"].as_f64().unwrap(), &what);
    }
}

#[test]
fn bleu4_equals_sacrebleu_on_72_sentence_pairs_through_the_quality_job() {
    // The pairs of the core's sacreBLEU fixture (empty, one-word and
    // punctuation-heavy ones among them), one task each, scored here by
    // sacreBLEU itself.
    let dir = tempfile::tempdir().unwrap();
    let fixture = repo().join("crates/tokscope-core/tests/oracle/bleu.json");
    let expected = python(&format!(
        r#"
import json
import sacrebleu
pairs = [(c["hyp"], c["ref"]) for c in json.load(open({fixture:?}))["sentence_bleu"]]
with open({req:?}, "w") as f:
    for i, (h, r) in enumerate(pairs):
        f.write(json.dumps({{"ts": "2024-06-01T00:00:00Z", "request_id": f"p{{i:02d}}", "model": "m",
                             "prompt_tokens": 1, "completion_tokens": 1, "model_output": h}}) + "\n")
with open({ev:?}, "w") as f:
    for i, (h, r) in enumerate(pairs):
        f.write(json.dumps({{"request_id": f"p{{i:02d}}", "task": f"p{{i:02d}}", "reference": r}}) + "\n")
print(json.dumps([sacrebleu.sentence_bleu(h, [r]).score / 100 for h, r in pairs]))
"#,
        fixture = fixture.to_str().unwrap(),
        req = dir.path().join("requests.jsonl").to_str().unwrap(),
        ev = dir.path().join("evals.jsonl").to_str().unwrap(),
    ));
    let expected: Vec<f64> = serde_json::from_str(&expected).unwrap();
    assert!(expected.len() >= 50);
    let out = dir.path().join("ds");
    let (req, ev) = (dir.path().join("requests.jsonl"), dir.path().join("evals.jsonl"));
    ingest(&[req.to_str().unwrap(), ev.to_str().unwrap()], &out, &[]);
    let rows = job(&out, "quality", &[]);
    assert_eq!(rows.len(), expected.len());
    for (i, (r, want)) in rows.iter().zip(&expected).enumerate() {
        assert_eq!(col(r, "task"), format!("p{i:02}"));
        let got = col(r, "bleu4_mean").as_f64().unwrap();
        assert!((got - want).abs() <= 1e-12, "pair {i}: {got} vs sacreBLEU {want}");
    }
}

#[test]
fn composite_on_the_gateway_sample() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    ingest(&[&formats(Path::new("eval.sample.jsonl")), &formats(Path::new("profile_gateway.sample.jsonl"))], &out, &[]);
    // llama: 6 requests over 50 s (0.1 qps), p95 of 95..400 ms = 350; recall
    // (0.8 + 0.5 + 0.6) / 3, similarity 0.91. qwen: 0.1 qps, p95 630; recall
    // (1 + 0.75) / 2 (gw-12's 1.2 is out of range), similarity (0.97 + 0.42 + 0.88) / 3.
    let rows = job(&out, "composite", &[]);
    let llama = 0.3 * 0.1 / 1000.0 + 0.25 * (1.0 - 350.0 / 200.0) + 0.25 * (1.9 / 3.0) + 0.2 * 0.91;
    let qwen = 0.3 * 0.1 / 1000.0 + 0.25 * (1.0 - 630.0 / 200.0) + 0.25 * 0.875 + 0.2 * (2.27 / 3.0);
    assert_eq!(rows.len(), 2);
    assert_eq!((col(&rows[0], "model"), col(&rows[0], "evals")), ("llama-3.1-8b-instruct".into(), 3.into()));
    close(&col(&rows[0], "qps"), 0.1, "llama qps");
    close(&col(&rows[0], "latency_p95_ms"), 350.0, "llama p95");
    close(&col(&rows[0], "composite"), llama, "llama composite");
    assert_eq!((col(&rows[1], "model"), col(&rows[1], "evals")), ("qwen2.5-72b-instruct".into(), 5.into()));
    close(&col(&rows[1], "latency_p95_ms"), 630.0, "qwen p95");
    close(&col(&rows[1], "composite"), qwen, "qwen composite");
}
