//! Causal mediation: `tokscope trace` against golden.json's causal_trace, the
//! activation-reuse cost, weight perturbation, per-layer TE / DE / IE against
//! an independent NumPy decoder, and `mediate` -> `interventions` ->
//! `mediation-report` end to end, its bootstrap intervals by hand and against
//! SciPy's percentile bootstrap (tests/oracles/percentile_bootstrap.py).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use tokscope::mediation::interventions;
use tokscope::mediation::interventions::{weight_noise, Metric, Subject};
use tokscope::mediation::layers::{measure_paths, LayerChange};
use tokscope::mediation::trace::{causal_trace, expected_forward_equivalents};
use tokscope::replay::{DeviceRequest, ForwardOptions, LayerEdit, LayerMatrix, ReplayModel};

fn model_dir() -> PathBuf {
    common::data_dir().join("models/tiny-stories-a")
}

fn golden_trace() -> Value {
    let text = std::fs::read_to_string(model_dir().join("golden.json")).expect("golden.json");
    let golden: Value = serde_json::from_str(&text).expect("golden json");
    golden["causal_trace"].clone()
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array().expect("array").iter().map(|x| x.as_f64().expect("number")).collect()
}

const PROMPT: &str = "Once upon a time, Lily";

#[test]
fn trace_cli_with_golden_noise_reproduces_the_golden_grid() {
    let golden = golden_trace();
    let dir = tempfile::tempdir().unwrap();
    let noise = common::write_file(dir.path(), "noise.json", golden["noise"].to_string());
    let model = model_dir();
    let out = common::tokscope(&[
        "trace",
        "--model",
        model.to_str().unwrap(),
        "--prompt",
        PROMPT,
        "--noise",
        &noise,
        "--json",
    ]);
    let got: Value = serde_json::from_str(&out).expect("trace json");
    assert_eq!(got["input_ids"], golden["input_ids"]);
    assert_eq!(got["target_id"], golden["target_id"]);
    assert_eq!(got["subject_positions"], golden["subject_positions"]);
    let close = |a: f64, b: f64, what: &str| assert!((a - b).abs() < 1e-4, "{what}: {a} vs golden {b}");
    close(got["p_clean"].as_f64().unwrap(), golden["p_clean"].as_f64().unwrap(), "p_clean");
    close(got["p_corrupt"].as_f64().unwrap(), golden["p_corrupt"].as_f64().unwrap(), "p_corrupt");
    let grid = golden["p_restored_layer_position"].as_array().unwrap();
    assert_eq!(got["p_restored"].as_array().unwrap().len(), grid.len());
    for (l, row) in grid.iter().enumerate() {
        let actual = f64s(&got["p_restored"][l]);
        let expected = f64s(row);
        assert_eq!(actual.len(), expected.len());
        for (i, (a, e)) in actual.iter().zip(&expected).enumerate() {
            close(*a, *e, &format!("p_restored[{l}][{i}]"));
        }
    }
    // 2 layers x 7 positions = 14 (layer, position) evaluations per forward pass; noise at
    // position 6 only: clean 14 + corrupted run from position 6 (2 layers x 1 position) + the
    // restore of layer 0 at position 6 (layer 1 at position 6: 1) = 17; cells 0..5 are no-ops.
    assert_eq!(got["forward_equivalents"].as_f64(), Some(17.0 / 14.0));
}

#[test]
fn subject_text_locates_the_golden_subject_positions() {
    let replay = ReplayModel::load(&model_dir(), DeviceRequest::Auto).unwrap();
    for subject in ["Lily", " Lily"] {
        assert_eq!(interventions::subject_positions(&replay.tokenizer, PROMPT, subject).unwrap(), vec![6]);
    }
    assert!(interventions::subject_positions(&replay.tokenizer, PROMPT, "Tom").is_err());
}

#[test]
fn reuse_gives_the_same_grid_for_far_fewer_forward_passes() {
    let replay = ReplayModel::load(&model_dir(), DeviceRequest::Auto).unwrap();
    let model = &replay.model;
    let ids = replay.tokenizer.encode_prompt(PROMPT).unwrap();
    let std = 3.0 * model.embedding_std();
    let samples: Vec<_> = (0..2)
        .map(|s| interventions::gaussian_noise(&[4, 5, 6], model.config().hidden_size, std, s).unwrap())
        .collect();
    let fast = causal_trace(model, &ids, &samples, true).unwrap();
    let slow = causal_trace(model, &ids, &samples, false).unwrap();
    for (a, b) in fast.p_restored.iter().flatten().zip(slow.p_restored.iter().flatten()) {
        assert!((a - b).abs() < 1e-9, "{a} vs {b}");
    }
    assert_eq!(fast.p_corrupt, slow.p_corrupt);
    let (layers, t) = (model.config().num_hidden_layers, ids.len());
    let formula = |reuse| expected_forward_equivalents(layers, t, 4, 2, reuse);
    assert!(
        (fast.forward_equivalents - formula(true)).abs() < 1e-12,
        "{} vs {}",
        fast.forward_equivalents,
        formula(true)
    );
    assert!((slow.forward_equivalents - formula(false)).abs() < 1e-12);
    // In (layer, position) evaluations, 14 per full pass: clean 14; per sample the corrupted
    // run from position 4 (2 x 3 = 6) and the restores of layer 0 at positions 4, 5, 6, each
    // running layer 1 at positions i..7 (3 + 2 + 1 = 6); layer 1's restores only apply the head.
    assert_eq!(fast.forward_equivalents, (14.0 + 2.0 * (6.0 + 6.0)) / 14.0);
    assert_eq!(slow.forward_equivalents, 1.0 + 2.0 * (1.0 + 14.0));
}

#[test]
fn default_trace_prints_its_cost_under_a_quarter_of_layers_times_positions() {
    let model = model_dir();
    let out = common::tokscope(&["trace", "--model", model.to_str().unwrap(), "--prompt", PROMPT]);
    // Every token after BOS corrupted (positions 1..=6 of 7), 1 sample, 2 layers: clean 14,
    // corrupted run 2 x 6 = 12, restores of layer 0 at positions 1..=6: 6 + 5 + 4 + 3 + 2 + 1 = 21;
    // 47 / 14 = 3.357 forward equivalents, under L T / 4 = 3.5 (a full recompute costs 1 + 1 + 14).
    assert!(out.contains("3.36 forward equivalents (L T / 4 = 3.50)"), "{out}");
    let ids = ReplayModel::load(&model_dir(), DeviceRequest::Auto).unwrap().tokenizer.encode_prompt(PROMPT).unwrap();
    assert_eq!(ids.len(), 7);
    assert!((expected_forward_equivalents(2, 7, 1, 1, true) - 47.0 / 14.0).abs() < 1e-12);
}

#[test]
fn zero_sigma_perturbation_changes_nothing_and_weights_stay_untouched() {
    let replay = ReplayModel::load(&model_dir(), DeviceRequest::Auto).unwrap();
    let model = &replay.model;
    let before = model.weights_checksum();
    let ids = replay.tokenizer.encode_prompt(PROMPT).unwrap();
    let cont = replay.tokenizer.encode_continuation(" saw a cat.</s>").unwrap();
    let subject = Subject::new(model, ids, cont, 10).unwrap();
    let gate = |layer, sigma| LayerEdit::Weight(weight_noise(model, layer, LayerMatrix::MlpGate, sigma, 3).unwrap());
    let (zero, big) = (gate(1, 0.0), gate(0, 0.5));
    let zero_run = ForwardOptions { layer_edit: Some(&zero), ..Default::default() };
    let big_run = ForwardOptions { layer_edit: Some(&big), ..Default::default() };
    let clean_run = ForwardOptions::default();
    for metric in [Metric::TargetProb, Metric::ContinuationLogprob, Metric::PEos, Metric::Bleu4, Metric::SacreBleu] {
        let clean = subject.measure(&replay, metric, clean_run).unwrap();
        // The perturbation delta y(perturb) - y(clean) (docs/metrics.md).
        let delta = subject.measure(&replay, metric, zero_run).unwrap() - clean;
        assert_eq!(delta, 0.0, "{metric:?}");
        subject.measure(&replay, metric, big_run).unwrap();
    }
    assert!(subject.measure(&replay, Metric::Bleu4, clean_run).unwrap() == 1.0);
    // sacreBLEU of a text against itself, in points: 100 up to its percent arithmetic.
    assert!((subject.measure(&replay, Metric::SacreBleu, clean_run).unwrap() - 100.0).abs() < 1e-9);
    assert!(subject.measure(&replay, Metric::SacreBleuRef, clean_run).is_err(), "no reference to score against");
    let moved = subject.measure(&replay, Metric::TargetProb, big_run).unwrap();
    assert_ne!(moved, subject.measure(&replay, Metric::TargetProb, clean_run).unwrap());
    assert_eq!(model.weights_checksum(), before, "a perturbed run must not modify the model");
}

// ------------------------------------------------------------------ per-layer effects

/// Prompts of the per-layer tests, with the reference answers `sacrebleu_ref` scores against.
const LAYER_PROMPTS: [(&str, &str); 2] =
    [("Once upon a time, Lily", " saw a big star in the sky."), ("Tom had a big", " dog and a red ball.")];
/// Large enough to move the tiny model's greedy outputs (at 0.01 it keeps every token).
const LAYER_SIGMA: f64 = 0.3;
/// Greedy budget of the BLEU metrics in these tests.
const LAYER_TOKENS: usize = 12;
const LAYER_METRICS: [Metric; 3] = [Metric::TargetProb, Metric::SacreBleu, Metric::SacreBleuRef];

/// `tests/oracles/llama_numpy.py mediate`: the per-layer effects computed from their
/// definitions by an independent float64 decoder, for `changes` (each layer's edit, drawn
/// here: its noise written to a file as raw f32 for the oracle to add to the weights).
fn numpy_layer_effects(replay: &ReplayModel, changes: &[(LayerEdit, usize)], dir: &Path) -> Value {
    let mut specs = Vec::new();
    for (k, (edit, sample)) in changes.iter().enumerate() {
        specs.push(match edit {
            LayerEdit::Skip { layer } => json!({"layer": layer, "sample": sample, "skip": true}),
            LayerEdit::Weight(delta) => {
                let bytes: Vec<u8> = delta.delta.to_f32().iter().flat_map(|v| v.to_le_bytes()).collect();
                let noise = common::write_file(dir, &format!("noise-{k}.f32"), bytes);
                json!({"layer": delta.layer, "sample": sample, "weight": delta.matrix.name(), "noise": noise})
            }
        });
    }
    let prompts: Vec<Value> = LAYER_PROMPTS
        .iter()
        .map(|(prompt, reference)| json!({"ids": replay.tokenizer.encode_prompt(prompt).unwrap(), "reference": reference}))
        .collect();
    let spec = json!({
        "model_dir": model_dir(),
        "max_new_tokens": LAYER_TOKENS,
        "metrics": LAYER_METRICS.map(|m| m.name()),
        "prompts": prompts,
        "changes": specs,
    });
    let spec = common::write_file(dir, "spec.json", spec.to_string());
    let script = common::repo().join("tests/oracles/llama_numpy.py");
    let out = Command::new("python3").arg(script).arg("mediate").arg(spec).output().expect("python3 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let oracle: Value = serde_json::from_slice(&out.stdout).expect("oracle prints JSON");
    // Every greedy choice of the oracle wins by far more than f32 rounding moves a logit
    // (under 1e-4 on this model), so both decoders pick the same tokens.
    let margin = oracle["min_margin"].as_f64().unwrap();
    assert!(margin > 1e-3, "a greedy choice of the oracle is a near tie ({margin}): pick other noise");
    oracle
}

/// Every matrix of every layer, and every layer skipped: TE, DE and IE of each prompt and
/// metric equal the NumPy decoder's within 1e-4 (BLEU in points, 0-100).
#[test]
fn per_layer_effects_of_every_matrix_and_skipped_layer_match_a_numpy_decoder() {
    let replay = ReplayModel::load(&model_dir(), DeviceRequest::Auto).unwrap();
    let model = &replay.model;
    let mut changes = Vec::new();
    for layer in 0..model.config().num_hidden_layers {
        for &matrix in LayerMatrix::ALL {
            let change = LayerChange::WeightNoise { matrix, sigma: LAYER_SIGMA };
            changes.push((change.edit(model, layer, 0, 0).unwrap(), 0));
        }
        changes.push((LayerChange::Skip.edit(model, layer, 0, 0).unwrap(), 0));
    }
    let dir = tempfile::tempdir().unwrap();
    let oracle = numpy_layer_effects(&replay, &changes, dir.path());
    let cells = oracle["cells"].as_array().unwrap();
    let mut compared = 0;
    let mut moved = [0usize; 3];
    for (p, (prompt, reference)) in LAYER_PROMPTS.iter().enumerate() {
        let ids = replay.tokenizer.encode_prompt(prompt).unwrap();
        let subject =
            Subject::new(model, ids, Vec::new(), LAYER_TOKENS).unwrap().with_reference(Some(reference.to_string()));
        for (m, metric) in LAYER_METRICS.into_iter().enumerate() {
            let clean = subject.measure(&replay, metric, ForwardOptions::default()).unwrap();
            for (edit, _) in &changes {
                let y = measure_paths(&replay, &subject, metric, edit).unwrap();
                let (te, de, ie) = (y.total - clean, y.direct - clean, y.total - y.direct);
                let weight = match edit {
                    LayerEdit::Weight(delta) => Value::from(delta.matrix.name()),
                    LayerEdit::Skip { .. } => Value::Null,
                };
                let cell = cells
                    .iter()
                    .find(|c| {
                        c["prompt"] == p
                            && c["metric"] == metric.name()
                            && c["layer"] == edit.layer()
                            && c["weight"] == weight
                    })
                    .unwrap_or_else(|| panic!("no oracle cell for {metric} {edit:?}"));
                for (name, ours) in [("clean", clean), ("te", te), ("de", de), ("ie", ie)] {
                    let theirs = cell[name].as_f64().unwrap();
                    assert!(
                        (ours - theirs).abs() < 1e-4,
                        "prompt {p} {metric} {edit:?} {name}: {ours} vs numpy {theirs}"
                    );
                }
                compared += 1;
                moved[m] += usize::from(te.abs() > 1e-3 && (de - te).abs() > 1e-3);
            }
        }
    }
    assert_eq!(compared, 2 * 3 * (2 * 7 + 2));
    // The check can fail: the changes move every metric, and not only by the direct path.
    assert!(moved.iter().all(|&k| k > 0), "changes with TE != DE per metric: {moved:?}");
}

/// Hand-computed effects through the job: two prompts, one layer.
/// p1: clean 0.9, corrupt 0.2 (samples 0.1, 0.3), restore 0.6 -> TE 0.7, IE 0.4, DE 0.3.
/// p2: clean 0.5, corrupt 0.3, restore 0.4, perturb 0.45 -> TE 0.2, IE 0.1, DE 0.1, perturb -0.05.
/// The bootstrap of two values draws the mean of the smaller twice with probability 1/4,
/// the larger's twice 1/4, else their mean: among the default 1000 resamples the type-7
/// 2.5% point (between the 25th and 26th smallest) is the smaller value unless at most
/// 25 resamples drew it twice (P[Binomial(1000, 1/4) <= 25] < 1e-80), and the 97.5%
/// point the larger likewise: the interval is [smaller, larger].
#[test]
fn imported_rows_give_hand_computed_effects_and_heatmap() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    let rows = [
        r#"{"prompt_id":"p1","intervention":"clean","metric":"m","value":0.9}"#,
        r#"{"prompt_id":"p1","intervention":"corrupt","metric":"m","value":0.1,"sample":0}"#,
        r#"{"prompt_id":"p1","intervention":"corrupt","metric":"m","value":0.3,"sample":1}"#,
        r#"{"prompt_id":"p1","intervention":"restore","metric":"m","layer":0,"value":0.6}"#,
        r#"{"prompt_id":"p1","intervention":"restore","metric":"m","layer":0,"position":2,"value":0.5}"#,
        r#"{"prompt_id":"p2","request_id":"r2","intervention":"clean","metric":"m","value":0.5}"#,
        r#"{"prompt_id":"p2","intervention":"corrupt","metric":"m","value":0.3}"#,
        r#"{"prompt_id":"p2","intervention":"restore","metric":"m","layer":0,"value":0.4}"#,
        r#"{"prompt_id":"p2","intervention":"restore","metric":"m","layer":0,"position":2,"value":0.4}"#,
        r#"{"prompt_id":"p2","intervention":"perturb","metric":"m","layer":1,"value":0.45}"#,
    ];
    let file = common::write_file(dir.path(), "rows.jsonl", rows.join("\n"));
    let ds = data.to_str().unwrap();
    let out = common::tokscope(&["mediate", "--data", ds, "--import", &file]);
    assert!(out.contains("wrote 10 intervention rows"), "{out}");
    let report = common::tokscope(&["mediation-report", "--data", ds, "--format", "json"]);
    // `tokscope job mediation` is the same seeded summary.
    assert_eq!(common::tokscope(&["job", "mediation", "--data", ds, "--format", "json"]), report);
    let rows: Vec<Value> = report.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let get = |layer: i64, effect: &str| {
        rows.iter()
            .find(|r| r["layer"] == layer && r["effect"] == effect)
            .unwrap_or_else(|| panic!("{effect} in {report}"))
    };
    for (effect, mean, ci) in [("te", 0.45, [0.2, 0.7]), ("ie", 0.25, [0.1, 0.4]), ("de", 0.2, [0.1, 0.3])] {
        let r = get(0, effect);
        assert_eq!(r["n"], 2);
        assert!((r["mean"].as_f64().unwrap() - mean).abs() < 1e-9, "{effect}: {r}");
        let (lo, hi) = (r["ci_lo"].as_f64().unwrap(), r["ci_hi"].as_f64().unwrap());
        assert!((lo - ci[0]).abs() < 1e-12 && (hi - ci[1]).abs() < 1e-12, "{effect}: {r}, expected {ci:?}");
    }
    let p = get(1, "perturb");
    assert!((p["mean"].as_f64().unwrap() + 0.05).abs() < 1e-9);
    assert_eq!((p["ci_lo"].as_f64(), p["ci_hi"].as_f64()), (p["mean"].as_f64(), p["mean"].as_f64()));
    // Heatmap: IE(0, 2) = mean(0.5 - 0.2, 0.4 - 0.3) = 0.2.
    let grid: Value = serde_json::from_str(
        common::tokscope(&["mediation-report", "--data", ds, "--heatmap", "--format", "json"]).trim(),
    )
    .unwrap();
    assert_eq!((grid["layers"].as_u64(), grid["positions"].as_u64()), (Some(1), Some(3)));
    assert!((grid["ie"][0][2].as_f64().unwrap() - 0.2).abs() < 1e-9);
    assert!(grid["ie"][0][0].is_null());
    // `jobs::run_job` (what `tokscope job mediation` calls) gives the same summary.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let batches = rt.block_on(async {
        let ctx = tokscope::engine::new_session().unwrap();
        let root = tokscope::dataset::DatasetRoot::parse(ds).unwrap();
        tokscope::engine::register_dataset(&ctx, &root).await.unwrap();
        let job = tokscope::jobs::job("mediation").unwrap();
        tokscope::jobs::run_job(&ctx, job).await.unwrap()
    });
    let names: Vec<String> = batches[0].schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names, ["metric", "intervention", "weight", "sigma", "layer", "effect", "n", "mean", "ci_lo", "ci_hi"]);
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), rows.len());
    // The table is queryable like any other.
    let counted = common::query(&data, "SELECT count(*) AS n FROM interventions");
    assert_eq!(counted[0]["n"], 10);
}

/// Imported runs of 40 prompts: corruption restored at layer 0 (the effects per prompt,
/// noise samples averaged first) and `attn.k` noise at layer 1 in two draws (the effects
/// per (prompt, draw) cell). Python recomputes every effect from the rows by the
/// definitions of docs/metrics.md ("Mediation"), and each interval of the job, run with
/// 20,000 resamples, agrees with SciPy's percentile bootstrap of the mean of the same
/// values within its Monte Carlo error (tests/oracles/percentile_bootstrap.py: 5 sigma,
/// sigma = 0.0012 in level here).
#[test]
fn job_intervals_agree_with_scipy_percentile_bootstrap() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    // Values spread unevenly from a multiplicative hash, so the effects are skewed and the
    // interval is not symmetric about the mean.
    let u = |k: u64| (k.wrapping_mul(2_654_435_761) % 1_000) as f64 / 1_000.0;
    let mut rows = Vec::new();
    for i in 0..40u64 {
        let id = format!("p{i:02}");
        let row =
            |kind: &str, value: f64| json!({"prompt_id": id, "intervention": kind, "metric": "m", "value": value});
        let clean = 0.5 + 0.5 * u(i).powi(2);
        rows.push(row("clean", clean));
        for sample in 0..2 {
            let mut r = row("corrupt", 0.1 * u(7 * i + sample + 1));
            r["sample"] = json!(sample);
            rows.push(r);
        }
        let mut restore = row("restore", 0.4 * u(3 * i + 11).powi(3));
        restore["layer"] = json!(0);
        rows.push(restore);
        for sample in 0..2 {
            for (path, value) in
                [("total", clean - 0.3 * u(5 * i + sample + 2)), ("direct", clean - 0.1 * u(11 * i + sample))]
            {
                let mut r = row("weight-noise", value);
                for (k, v) in [
                    ("layer", json!(1)),
                    ("sample", json!(sample)),
                    ("weight", json!("attn.k")),
                    ("sigma", json!(0.2)),
                    ("path", json!(path)),
                ] {
                    r[k] = v;
                }
                rows.push(r);
            }
        }
    }
    let lines: Vec<String> = rows.iter().map(Value::to_string).collect();
    let file = common::write_file(dir.path(), "rows.jsonl", lines.join("\n"));
    let ds = data.to_str().unwrap();
    common::tokscope(&["mediate", "--data", ds, "--import", &file]);
    let report = common::tokscope(&[
        "job",
        "mediation",
        "--data",
        ds,
        "--format",
        "json",
        "--param",
        "resamples=20000",
        "--param",
        "seed=5",
    ]);
    let ours = common::write_file(dir.path(), "ours.jsonl", &report);
    let script = format!(
        r#"
import json
from collections import defaultdict
import numpy as np
import sys; sys.path.insert(0, {oracles:?}); import percentile_bootstrap as pb
runs = defaultdict(list)
for line in open({rows:?}):
    v = json.loads(line)
    runs[(v["prompt_id"], v["intervention"], v.get("layer"), v.get("sample", 0), v.get("path"))].append(v["value"])
y = {{k: float(np.mean(vs)) for k, vs in runs.items()}}
prompts = sorted({{k[0] for k in y}})
clean = {{p: y[(p, "clean", None, 0, None)] for p in prompts}}
corrupt = {{p: np.mean([v for k, v in y.items() if k[:2] == (p, "corrupt")]) for p in prompts}}
values = defaultdict(list)
for p in prompts:
    te, ie = clean[p] - corrupt[p], y[(p, "restore", 0, 0, None)] - corrupt[p]
    values[("corrupt", 0, "te")].append(te); values[("corrupt", 0, "ie")].append(ie)
    values[("corrupt", 0, "de")].append(te - ie)
    for s in (0, 1):
        total, direct = y[(p, "weight-noise", 1, s, "total")], y[(p, "weight-noise", 1, s, "direct")]
        values[("weight-noise", 1, "te")].append(total - clean[p])
        values[("weight-noise", 1, "de")].append(direct - clean[p])
        values[("weight-noise", 1, "ie")].append(total - direct)
ours = [json.loads(l) for l in open({ours:?}) if l.strip()]
assert len(ours) == len(values), ours
sigmas = []
for r in ours:
    x = values[(r["intervention"], r["layer"], r["effect"])]
    assert r["n"] == len(x), (r, len(x))
    assert abs(r["mean"] - np.mean(x)) < 1e-12, (r, np.mean(x))
    sigmas.append(pb.check(f"{{r['intervention']}} {{r['effect']}}", (r["ci_lo"], r["ci_hi"]), (x,), pb.mean, 20000,
                           100000, 3))
print(json.dumps(dict(intervals=len(sigmas), worst_sigma=max(sigmas))))
"#,
        oracles = common::repo().join("tests/oracles"),
        rows = file,
        ours = ours,
    );
    let checked: Value = serde_json::from_str(common::python(&script).trim()).unwrap();
    // TE, DE and IE of the corruption and of the noise.
    assert_eq!(checked["intervals"], 6, "{checked}");
}

#[test]
fn mediate_runs_logged_requests_into_the_interventions_table() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    let lines = [
        r#"{"ts": 1717200000000, "request_id": "a", "model": "tiny", "prompt_tokens": 7, "completion_tokens": 3, "finish_reason": "stop", "prompt": "Once upon a time, Lily", "model_output": " saw a cat.</s>"}"#,
        r#"{"ts": 1717200000000, "request_id": "b", "model": "tiny", "prompt_tokens": 5, "completion_tokens": 3, "finish_reason": "stop", "prompt": "Tom had a big", "model_output": " dog."}"#,
    ];
    let log = common::write_file(dir.path(), "log.jsonl", lines.join("\n"));
    common::ingest(&[&log], &data, &[]);
    let ds = data.to_str().unwrap();
    let model = model_dir();
    let out = common::tokscope(&[
        "mediate",
        "--data",
        ds,
        "--model",
        model.to_str().unwrap(),
        "--samples",
        "2",
        "--metric",
        "p_eos",
        "--cells",
    ]);
    // Per request: clean 1 + samples 2 x (corrupt 1 + layers 2 x (1 + cells T)) + perturb 2 x 2.
    let replay = ReplayModel::load(&model, DeviceRequest::Auto).unwrap();
    let t = |p: &str| replay.tokenizer.encode_prompt(p).unwrap().len();
    let per = |t: usize| 1 + 2 * (1 + 2 * (1 + t)) + 4;
    let expected = per(t("Once upon a time, Lily")) + per(t("Tom had a big"));
    assert!(out.contains(&format!("wrote {expected} intervention rows")), "{out}");
    let rows = common::query(
        &data,
        "SELECT request_id, count(DISTINCT prompt_id) AS prompts, min(metric) AS metric FROM interventions GROUP BY request_id ORDER BY request_id",
    );
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["metric"], "p_eos");
    let report = common::tokscope(&["mediation-report", "--data", ds, "--format", "csv"]);
    assert!(report.starts_with("metric,intervention,weight,sigma,layer,effect,n,mean,ci_lo,ci_hi"), "{report}");
    assert_eq!(report.lines().count(), 1 + 2 * 4, "{report}");
}

/// `tokscope mediate --intervention weight-noise,skip-layer` on logged requests (their
/// reference answers in `evals`), then the `mediation` and `mediation_layers` jobs: per
/// metric and layer, the mean TE, DE and IE over prompts x noise seeds equal the NumPy
/// decoder's within 1e-4, and each interval holds its mean.
#[test]
fn mediate_per_layer_effects_through_the_jobs_match_a_numpy_decoder() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    let mut requests = Vec::new();
    let mut evals = Vec::new();
    for (k, (prompt, reference)) in LAYER_PROMPTS.iter().enumerate() {
        let id = format!("r{k}");
        requests.push(json!({"ts": 1717200000000u64, "request_id": id, "model": "tiny", "prompt_tokens": 7,
            "completion_tokens": 3, "finish_reason": "stop", "prompt": prompt, "model_output": " saw a cat."}));
        evals.push(json!({"request_id": id, "task": "qa", "reference": reference}));
    }
    let lines = |rows: &[Value]| rows.iter().map(Value::to_string).collect::<Vec<_>>().join("\n");
    let log = common::write_file(dir.path(), "log.jsonl", lines(&requests));
    let evals = common::write_file(dir.path(), "evals.jsonl", lines(&evals));
    common::ingest(&[&log, &evals], &data, &[]);
    let (ds, model) = (data.to_str().unwrap(), model_dir());
    let sigma = LAYER_SIGMA.to_string();
    let tokens = LAYER_TOKENS.to_string();
    for metric in LAYER_METRICS {
        let out = common::tokscope(&[
            "mediate",
            "--data",
            ds,
            "--model",
            model.to_str().unwrap(),
            "--intervention",
            "weight-noise,skip-layer",
            "--weight",
            "attn.k",
            "--sigma",
            &sigma,
            "--seeds",
            "2",
            "--metric",
            metric.name(),
            "--max-new-tokens",
            &tokens,
        ]);
        // Per request: clean 1 + 2 layers x (2 seeds + 1 skip) x 2 paths.
        assert!(out.contains(&format!("wrote {} intervention rows", 2 * (1 + 2 * 3 * 2))), "{out}");
    }

    let replay = ReplayModel::load(&model, DeviceRequest::Auto).unwrap();
    let mut changes = Vec::new();
    for layer in 0..2 {
        let noise = LayerChange::WeightNoise { matrix: LayerMatrix::AttnK, sigma: LAYER_SIGMA };
        for seed in 0..2 {
            changes.push((noise.edit(&replay.model, layer, 0, seed).unwrap(), seed));
        }
        changes.push((LayerChange::Skip.edit(&replay.model, layer, 0, 0).unwrap(), 0));
    }
    let oracle = numpy_layer_effects(&replay, &changes, dir.path());

    let report = common::tokscope(&["mediation-report", "--data", ds, "--format", "json"]);
    let rows: Vec<Value> = report.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let layers = common::tokscope(&["job", "mediation_layers", "--data", ds, "--format", "json"]);
    let chart_rows: Vec<Value> = layers.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let means = oracle["means"].as_array().unwrap();
    // 3 metrics x 2 layers x (weight-noise, skip-layer) x (te, de, ie).
    assert_eq!(means.len(), 3 * 2 * 2 * 3);
    assert_eq!(rows.len(), means.len(), "{report}");
    for expected in means {
        let row = rows
            .iter()
            .find(|r| ["metric", "intervention", "weight", "layer", "effect"].iter().all(|k| r[*k] == expected[*k]))
            .unwrap_or_else(|| panic!("no report row for {expected}"));
        let (mean, theirs) = (row["mean"].as_f64().unwrap(), expected["mean"].as_f64().unwrap());
        assert!((mean - theirs).abs() < 1e-4, "{row} vs numpy {expected}");
        // Cells: 2 prompts x 2 seeds of noise, 2 prompts of a skipped layer.
        assert_eq!(row["n"], expected["n"], "{row}");
        let (lo, hi) = (row["ci_lo"].as_f64().unwrap(), row["ci_hi"].as_f64().unwrap());
        assert!(lo <= mean + 1e-12 && mean <= hi + 1e-12, "{row}");
        let sigma = if expected["intervention"] == "weight-noise" { json!(LAYER_SIGMA) } else { Value::Null };
        assert_eq!(row["sigma"], sigma, "{row}");
        if expected["effect"] != "te" {
            let study = match expected["weight"].as_str() {
                Some(weight) => {
                    format!("{}, weight-noise {weight} sigma {LAYER_SIGMA}", expected["metric"].as_str().unwrap())
                }
                None => format!("{}, skip-layer", expected["metric"].as_str().unwrap()),
            };
            let chart = chart_rows
                .iter()
                .find(|r| {
                    r["study"] == study.as_str() && r["layer"] == expected["layer"] && r["effect"] == expected["effect"]
                })
                .unwrap_or_else(|| panic!("no mediation_layers row for {study} in {layers}"));
            for column in ["mean", "ci_lo", "ci_hi"] {
                let (a, b) = (chart[column].as_f64().unwrap(), row[column].as_f64().unwrap());
                assert!((a - b).abs() < 1e-12, "{column}: mediation_layers {chart} vs mediation {row}");
            }
        }
    }
}
