//! Causal mediation: `tokscope trace` against golden.json's causal_trace, the
//! activation-reuse cost, weight perturbation, and `mediate` ->
//! `interventions` -> `mediation-report` end to end.

use crate::common;

use std::path::PathBuf;

use serde_json::Value;
use tokscope::mediation::interventions;
use tokscope::mediation::interventions::{weight_noise, Metric, Subject};
use tokscope::mediation::trace::{causal_trace, expected_forward_equivalents};
use tokscope::replay::{DeviceRequest, LayerEdit, LayerMatrix, ReplayModel};

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
    let gate_perturbation =
        |layer, sigma, seed| LayerEdit::Weight(weight_noise(model, layer, LayerMatrix::MlpGate, sigma, seed).unwrap());
    for metric in [Metric::TargetProb, Metric::ContinuationLogprob, Metric::PEos, Metric::Bleu4] {
        let clean = subject.measure(model, metric, None, None).unwrap();
        let zero = gate_perturbation(1, 0.0, 3);
        // The perturbation delta y(perturb) - y(clean) (docs/metrics.md).
        let delta = subject.measure(model, metric, None, Some(&zero)).unwrap() - clean;
        assert_eq!(delta, 0.0, "{metric:?}");
        let big = gate_perturbation(0, 0.5, 3);
        subject.measure(model, metric, None, Some(&big)).unwrap();
    }
    assert!(subject.measure(model, Metric::Bleu4, None, None).unwrap() == 1.0);
    let big = gate_perturbation(0, 0.5, 3);
    let moved = subject.measure(model, Metric::TargetProb, None, Some(&big)).unwrap();
    assert_ne!(moved, subject.measure(model, Metric::TargetProb, None, None).unwrap());
    assert_eq!(model.weights_checksum(), before, "a perturbed run must not modify the model");
}

/// Hand-computed effects through the job: two prompts, one layer.
/// p1: clean 0.9, corrupt 0.2 (samples 0.1, 0.3), restore 0.6 -> TE 0.7, IE 0.4, DE 0.3.
/// p2: clean 0.5, corrupt 0.3, restore 0.4, perturb 0.45 -> TE 0.2, IE 0.1, DE 0.1, perturb -0.05.
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
    for (effect, mean) in [("te", 0.45), ("ie", 0.25), ("de", 0.2)] {
        let r = get(0, effect);
        assert_eq!(r["n"], 2);
        assert!((r["mean"].as_f64().unwrap() - mean).abs() < 1e-9, "{effect}: {r}");
        let (lo, hi) = (r["ci_lo"].as_f64().unwrap(), r["ci_hi"].as_f64().unwrap());
        assert!(lo <= mean + 1e-12 && mean <= hi + 1e-12, "{effect}: {r}");
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
    assert_eq!(names, ["metric", "layer", "effect", "n", "mean", "ci_lo", "ci_hi"]);
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), rows.len());
    // The table is queryable like any other.
    let counted = common::query(&data, "SELECT count(*) AS n FROM interventions");
    assert_eq!(counted[0]["n"], 10);
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
    assert!(report.starts_with("metric,layer,effect,n,mean,ci_lo,ci_hi"), "{report}");
    assert_eq!(report.lines().count(), 1 + 2 * 4, "{report}");
}
