//! Hand-made result tables shaped like tokscope's SQL jobs (sql/report.sql,
//! sql/replay.sql, sql/mediation_heatmap.sql, sql/mediation_layers.sql, the daily and A/B tables, the load
//! test's, the engine's and the model internals' tables),
//! with plausible numbers from a seeded generator. Shared by the tests and the
//! `realistic` example.
#![allow(dead_code)]

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use tokscope::export::dashboard::DashboardInput;

pub const BINS: [&str; 9] = ["0-1K", "1K-2K", "2K-4K", "4K-8K", "8K-16K", "16K-32K", "32K-64K", "64K-128K", "128K+"];
pub const MODELS: [&str; 3] = ["llama-3.1-8b-instruct", "qwen2.5-72b-instruct", "gpt-4o-2024-08-06"];
/// 2025-06-30 as days since 1970-01-01.
pub const LAST_DAY: i32 = 20_269;

/// xorshift64*: deterministic, no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// Uniform in [0, 1).
    pub fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn around(&mut self, centre: f64, spread: f64) -> f64 {
        centre * (1.0 + spread * (2.0 * self.next() - 1.0))
    }
}

fn strings(values: Vec<String>) -> ArrayRef {
    Arc::new(StringArray::from(values))
}
fn ints(values: Vec<i64>) -> ArrayRef {
    Arc::new(Int64Array::from(values))
}
fn floats(values: Vec<Option<f64>>) -> ArrayRef {
    Arc::new(Float64Array::from(values))
}

/// Per-model price scale (USD per 1K tokens at the first bin).
fn price(m: usize) -> f64 {
    [0.00018, 0.0009, 0.0042][m % 3] * (1.0 + (m / 3) as f64 * 0.07)
}

/// The `report` table (sql/report.sql), rows ordered by model then bin.
pub fn report(models: &[String], rng: &mut Rng) -> RecordBatch {
    let mut c: Vec<Vec<Option<f64>>> = vec![Vec::new(); 17];
    let (mut model, mut bin) = (Vec::new(), Vec::new());
    let (mut requests, mut eos, mut length, mut truncated, mut unknown, mut unpriced) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (m, name) in models.iter().enumerate() {
        for (b, label) in BINS.iter().enumerate() {
            model.push(name.clone());
            bin.push(label.to_string());
            let n = (rng.around(4000.0, 0.3) / (1.0 + b as f64 * 0.6)).round() as i64 + 20;
            let trunc_rate = 0.004 * (1.0 + b as f64 * b as f64 * 0.12) * [1.0, 1.8, 0.6][m % 3];
            let t = ((n as f64) * trunc_rate.min(0.4)).round() as i64;
            let l = ((n as f64) * 0.03).round() as i64;
            let e = n - t - l;
            requests.push(n);
            eos.push(e);
            length.push(l);
            truncated.push(t);
            unknown.push(0);
            unpriced.push(0);
            let ttft = rng.around(120.0 + 35.0 * (1u64 << b) as f64 / 4.0, 0.1) * [0.7, 1.4, 1.0][m % 3];
            let tpot = rng.around(18.0 + b as f64 * 1.6, 0.1) * [0.6, 1.5, 1.0][m % 3];
            let per_1k = rng.around(price(m) * (1.0 + b as f64 * 0.05), 0.05);
            let tokens = n as f64 * 512.0 * (1u64 << b) as f64 * 0.75;
            let values = [
                e as f64 / (e + t) as f64,
                t as f64 / n as f64,
                ttft,
                ttft * 2.3,
                ttft * 3.1,
                tpot,
                tpot * 1.7,
                ttft + tpot * 300.0,
                (ttft + tpot * 300.0) * 1.9,
                1000.0 / tpot,
                1000.0 / tpot * 0.8,
                per_1k * tokens / 1000.0,
                per_1k,
                0.55,
                0.15,
                0.30,
                0.0,
            ];
            for (i, v) in values.iter().enumerate() {
                c[i].push(Some(*v));
            }
        }
    }
    let mut c = c.into_iter();
    let mut next = || floats(c.next().unwrap());
    RecordBatch::try_from_iter([
        ("model", strings(model)),
        ("context_bin", strings(bin)),
        ("requests", ints(requests)),
        ("eos", ints(eos)),
        ("length", ints(length)),
        ("implicit_truncation", ints(truncated)),
        ("unknown", ints(unknown)),
        ("eos_compliance_rate", next()),
        ("implicit_truncation_rate", next()),
        ("ttft_p50_ms", next()),
        ("ttft_p95_ms", next()),
        ("ttft_p99_ms", next()),
        ("tpot_p50_ms", next()),
        ("tpot_p95_ms", next()),
        ("latency_p50_ms", next()),
        ("latency_p95_ms", next()),
        ("decode_tps_p50", next()),
        ("e2e_tps_mean", next()),
        ("unpriced_requests", ints(unpriced)),
        ("cost_usd", next()),
        ("cost_per_1k_tokens", next()),
        ("input_share", next()),
        ("cached_share", next()),
        ("output_share", next()),
    ])
    .unwrap()
}

/// The `kv_cache` table (sql/kv_cache.sql).
pub fn kv_cache(models: &[String], rng: &mut Rng) -> RecordBatch {
    let (mut model, mut bin, mut requests, mut unknown, mut mean, mut max) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (m, name) in models.iter().enumerate() {
        // GiB per token: llama 8B 128 KiB, qwen 72B 320 KiB, gpt-4o unknown.
        let per_token = [Some(131_072.0), Some(327_680.0), None][m % 3];
        for (b, label) in BINS.iter().enumerate() {
            model.push(name.clone());
            bin.push(label.to_string());
            requests.push(100);
            unknown.push(if per_token.is_none() { 100 } else { 0 });
            let tokens = 768.0 * (1u64 << b) as f64;
            mean.push(per_token.map(|p| rng.around(p * tokens / 1_073_741_824.0, 0.05)));
            max.push(per_token.map(|p| p * tokens * 1.6 / 1_073_741_824.0));
        }
    }
    // Tensor parallelism: 1 GPU for the small model, 4 for the large one.
    let tp: Vec<i64> = model.iter().map(|m| if m.contains("72b") { 4 } else { 1 }).collect();
    let per_gpu = |values: &[Option<f64>]| -> Vec<Option<f64>> {
        values.iter().zip(&tp).map(|(v, tp)| v.map(|v| v / *tp as f64)).collect()
    };
    let (per_gpu_mean, per_gpu_max) = (per_gpu(&mean), per_gpu(&max));
    RecordBatch::try_from_iter([
        ("model", strings(model)),
        ("context_bin", strings(bin)),
        ("requests", ints(requests)),
        ("unknown_architecture_requests", ints(unknown)),
        ("tensor_parallel", ints(tp)),
        ("kv_cache_gib_mean", floats(mean)),
        ("kv_cache_gib_max", floats(max)),
        ("kv_cache_gib_per_gpu_mean", floats(per_gpu_mean)),
        ("kv_cache_gib_per_gpu_max", floats(per_gpu_max)),
    ])
    .unwrap()
}

/// The `daily` table: per UTC date x model, `days` days ending on [`LAST_DAY`].
pub fn daily(models: &[String], days: i32, rng: &mut Rng) -> RecordBatch {
    daily_by("model", models, days, rng)
}

/// The `daily` table grouped by `column` (`--param by=`): per UTC date x group.
pub fn daily_by(column: &str, models: &[String], days: i32, rng: &mut Rng) -> RecordBatch {
    let mut date = Vec::new();
    let mut model = Vec::new();
    let (mut requests, mut tokens) = (Vec::new(), Vec::new());
    let mut f: Vec<Vec<Option<f64>>> = vec![Vec::new(); 6];
    for day in LAST_DAY - days + 1..=LAST_DAY {
        let t = (day - (LAST_DAY - days + 1)) as f64;
        let weekend = matches!((day + 4).rem_euclid(7), 0 | 6);
        for (m, name) in models.iter().enumerate() {
            date.push(day);
            model.push(name.clone());
            let n = rng.around(9000.0 / (1.0 + m as f64 * 0.5), 0.15) * if weekend { 0.6 } else { 1.0 };
            let tok = n * rng.around(2400.0, 0.1);
            // A price cut for the second model two thirds through the window.
            let cut = if m % 3 == 1 && t > days as f64 * 0.66 { 0.7 } else { 1.0 };
            let per_1k = rng.around(price(m) * 1.2, 0.04) * cut;
            let trunc = rng.around(0.012 * [1.0, 1.8, 0.6][m % 3] * (1.0 + t / 60.0), 0.25);
            requests.push(n.round() as i64);
            tokens.push(tok.round() as i64);
            let ttft = rng.around(180.0 * [0.7, 1.4, 1.0][m % 3], 0.08);
            let values = [per_1k * tok / 1000.0, per_1k, 1.0 - trunc * 0.9, trunc, ttft, ttft * rng.around(2.6, 0.1)];
            for (i, v) in values.iter().enumerate() {
                f[i].push(Some(*v));
            }
        }
    }
    let mut f = f.into_iter();
    let mut next = || floats(f.next().unwrap());
    RecordBatch::try_from_iter([
        ("date", Arc::new(Date32Array::from(date)) as ArrayRef),
        (column, strings(model)),
        ("requests", ints(requests)),
        ("tokens", ints(tokens)),
        ("cost_usd", next()),
        ("cost_per_1k_tokens", next()),
        ("eos_compliance_rate", next()),
        ("implicit_truncation_rate", next()),
        ("ttft_p50_ms", next()),
        ("ttft_p95_ms", next()),
    ])
    .unwrap()
}

/// Who spends: 8 teams that spend most and the rest as `(other)`.
pub const TEAMS: [&str; 9] =
    ["search", "ads", "ml-platform", "support-bot", "growth", "legal", "finance", "infra", "(other)"];

/// The `spend` table (sql/spend.sql) grouped by `column`, one row per group, most spent first.
pub fn spend(column: &str, groups: &[&str], rng: &mut Rng) -> RecordBatch {
    let (mut requests, mut tokens, mut unpriced) = (Vec::new(), Vec::new(), Vec::new());
    let mut f: Vec<Vec<Option<f64>>> = vec![Vec::new(); 5];
    for g in 0..groups.len() {
        let n = rng.around(40_000.0 / (1.0 + g as f64 * 0.7), 0.2).round() as i64 + 10;
        let tok = n as f64 * rng.around(2200.0, 0.2);
        let per_1k = rng.around(0.002, 0.5);
        requests.push(n);
        tokens.push(tok.round() as i64);
        unpriced.push((n as f64 * 0.01).round() as i64);
        let trunc = rng.around(0.01, 0.5);
        let values = [per_1k * tok / 1000.0, per_1k, 1.0 - trunc, trunc, rng.around(4000.0, 0.3)];
        for (i, v) in values.iter().enumerate() {
            f[i].push(Some(*v));
        }
    }
    let mut f = f.into_iter();
    let mut next = || floats(f.next().unwrap());
    RecordBatch::try_from_iter([
        (column, strings(groups.iter().map(|g| g.to_string()).collect())),
        ("requests", ints(requests)),
        ("tokens", ints(tokens)),
        ("unpriced_requests", ints(unpriced)),
        ("cost_usd", next()),
        ("cost_per_1k_tokens", next()),
        ("eos_compliance_rate", next()),
        ("implicit_truncation_rate", next()),
        ("latency_p95_ms", next()),
    ])
    .unwrap()
}

/// The `replay` table (sql/replay.sql), ordered by bin then model.
pub fn replay(models: &[String], rng: &mut Rng) -> RecordBatch {
    let (mut model, mut bin) = (Vec::new(), Vec::new());
    let mut counts: Vec<Vec<i64>> = vec![Vec::new(); 5];
    let (mut rate, mut p_eos) = (Vec::new(), Vec::new());
    for (b, label) in BINS.iter().enumerate() {
        for (m, name) in models.iter().enumerate() {
            model.push(name.clone());
            bin.push(label.to_string());
            let replayed = (rng.around(60.0, 0.3) + b as f64 * 4.0).round() as i64;
            let confirmed = (replayed as f64 * (0.15 + 0.05 * b as f64) * [1.0, 1.5, 0.7][m % 3]).round() as i64;
            let prompt_truncated = if b >= 7 { (replayed as f64 * 0.1).round() as i64 } else { 0 };
            let error = (rng.next() * 3.0).floor() as i64;
            let natural = (replayed - confirmed - prompt_truncated - error).max(0);
            for (i, v) in [replayed, natural, confirmed, prompt_truncated, error].iter().enumerate() {
                counts[i].push(*v);
            }
            rate.push(Some(confirmed as f64 / (natural + confirmed).max(1) as f64));
            p_eos.push(Some(rng.around(0.3, 0.5)));
        }
    }
    let mut counts = counts.into_iter();
    let mut next = || ints(counts.next().unwrap());
    RecordBatch::try_from_iter([
        ("model", strings(model)),
        ("context_bin", strings(bin)),
        ("replayed", next()),
        ("natural_stop", next()),
        ("confirmed_truncation", next()),
        ("prompt_truncated", next()),
        ("error", next()),
        ("confirmed_truncation_rate", floats(rate)),
        ("mean_p_eos_at_cut", floats(p_eos)),
    ])
    .unwrap()
}

/// The `mediation_heatmap` table (sql/mediation_heatmap.sql): `layers` x
/// `positions` per metric, the effect concentrated on the subject's last token.
pub fn mediation_heatmap(metrics: &[&str], layers: i64, positions: i64, rng: &mut Rng) -> RecordBatch {
    let (mut metric, mut layer, mut position, mut ie, mut prompts) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (k, name) in metrics.iter().enumerate() {
        let scale = if k == 0 { 0.6 } else { 2.5 };
        for l in 0..layers {
            for p in 0..positions {
                metric.push(name.to_string());
                layer.push(l);
                position.push(p);
                let subject = if p == 4 { 1.0 } else { 0.08 };
                let last = if p == positions - 1 { 0.35 + 0.5 * l as f64 / layers as f64 } else { 0.0 };
                ie.push(Some(
                    scale * (subject * (1.0 - l as f64 / layers as f64 * 0.5) + last) + rng.around(0.0, 1.0) * 0.02
                        - 0.01,
                ));
                prompts.push(40);
            }
        }
    }
    RecordBatch::try_from_iter([
        ("metric", strings(metric)),
        ("layer", ints(layer)),
        ("position", ints(position)),
        ("ie", floats(ie)),
        ("prompts", ints(prompts)),
    ])
    .unwrap()
}

/// The `mediation_layers` table (sql/mediation_layers.sql): DE and IE with
/// their intervals for each of `layers` layers per study, the indirect effect
/// growing in the lower layers (what layers above them amplify).
pub fn mediation_layers(studies: &[&str], layers: i64, rng: &mut Rng) -> RecordBatch {
    let (mut study, mut layer, mut effect, mut n, mut mean, mut lo, mut hi) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for name in studies {
        for l in 0..layers {
            let depth = 1.0 - l as f64 / layers as f64;
            for (name_of_effect, centre) in [("de", -0.8 - 0.2 * depth), ("ie", -2.2 * depth)] {
                let m = centre + rng.next() * 0.2 - 0.1;
                let half = 0.3 + rng.next() * 0.3;
                study.push(name.to_string());
                layer.push(l);
                effect.push(name_of_effect.to_string());
                n.push(60);
                mean.push(Some(m));
                lo.push(Some(m - half));
                hi.push(Some(m + half));
            }
        }
    }
    RecordBatch::try_from_iter([
        ("study", strings(study)),
        ("layer", ints(layer)),
        ("effect", strings(effect)),
        ("n", ints(n)),
        ("mean", floats(mean)),
        ("ci_lo", floats(lo)),
        ("ci_hi", floats(hi)),
    ])
    .unwrap()
}

/// An A/B comparison table (sql/ab.sql: context_bin, metric, n_a, n_b, value_a,
/// value_b, effect, diff, ci_low, ci_high, p_value, p_value_holm,
/// sample_ratio_mismatch): one metric for each A/B chart.
pub fn ab(rng: &mut Rng) -> RecordBatch {
    let mut bin = Vec::new();
    let (mut metric, mut effect) = (Vec::new(), Vec::new());
    let (mut n_a, mut n_b) = (Vec::new(), Vec::new());
    let mut f: Vec<Vec<Option<f64>>> = vec![Vec::new(); 7];
    for (name, kind, a, scale) in [
        ("implicit_truncation_rate", "difference", 0.01, 0.002),
        ("ttft_p95_ms", "difference", 400.0, 20.0),
        ("cost_per_1k_tokens", "ratio", 0.002, 0.02),
    ] {
        for (b, label) in BINS.iter().enumerate() {
            bin.push(label.to_string());
            metric.push(name.to_string());
            effect.push(kind.to_string());
            n_a.push(2000 - b as i64 * 150);
            n_b.push(1980 - b as i64 * 150);
            let reference = if kind == "ratio" { 1.0 } else { 0.0 };
            let diff = reference - scale * b as f64 + rng.around(0.0, 1.0) * scale;
            let half = 1.5 * scale + 0.3 * scale * b as f64;
            let p = if (diff - reference).abs() > half { 0.004 } else { 0.3 };
            let value_b = if kind == "ratio" { a * diff } else { a + diff };
            for (i, v) in [a, value_b, diff, diff - half, diff + half, p, (p * 9.0).min(1.0)].iter().enumerate() {
                f[i].push(Some(*v));
            }
        }
    }
    let rows = bin.len();
    let mut f = f.into_iter();
    let mut next = || floats(f.next().unwrap());
    RecordBatch::try_from_iter([
        ("context_bin", strings(bin)),
        ("metric", strings(metric)),
        ("n_a", ints(n_a)),
        ("n_b", ints(n_b)),
        ("value_a", next()),
        ("value_b", next()),
        ("effect", strings(effect)),
        ("diff", next()),
        ("ci_low", next()),
        ("ci_high", next()),
        ("p_value", next()),
        ("p_value_holm", next()),
        ("sample_ratio_mismatch", Arc::new(BooleanArray::from(vec![false; rows])) as ArrayRef),
    ])
    .unwrap()
}

/// The `jitter` table (sql/jitter.sql): per model x the first six bins.
pub fn jitter(models: &[String], rng: &mut Rng) -> RecordBatch {
    let (mut model, mut bin, mut requests) = (Vec::new(), Vec::new(), Vec::new());
    let mut f: Vec<Vec<Option<f64>>> = vec![Vec::new(); 9];
    for name in models {
        for (b, label) in BINS.iter().take(6).enumerate() {
            model.push(name.clone());
            bin.push(label.to_string());
            requests.push(500 - 60 * b as i64);
            let first = rng.around(150.0 * (1.0 + b as f64 * 0.5), 0.1);
            let last = rng.around(2500.0 + 300.0 * b as f64, 0.1);
            let itl = rng.around(4.0 + b as f64, 0.2);
            let values = [itl, itl * 2.5, first, first * 1.8, first * 2.4, last, last * 1.6, last * 2.1, last * 0.2];
            for (i, v) in values.iter().enumerate() {
                f[i].push(Some(*v));
            }
        }
    }
    let mut f = f.into_iter();
    let mut next = || floats(f.next().unwrap());
    RecordBatch::try_from_iter([
        ("model", strings(model)),
        ("context_bin", strings(bin)),
        ("requests", ints(requests)),
        ("itl_std_p50_ms", next()),
        ("itl_std_p95_ms", next()),
        ("first_token_p50_ms", next()),
        ("first_token_p95_ms", next()),
        ("first_token_p99_ms", next()),
        ("last_token_p50_ms", next()),
        ("last_token_p95_ms", next()),
        ("last_token_p99_ms", next()),
        ("tail_token_jitter_ms", next()),
    ])
    .unwrap()
}

/// The `engine` table (sql/engine.sql): per model x two arms x the first four bins.
pub fn engine(models: &[String], rng: &mut Rng) -> RecordBatch {
    let (mut model, mut variant, mut bin) = (Vec::new(), Vec::new(), Vec::new());
    let (mut profiles, mut matched) = (Vec::new(), Vec::new());
    let mut f: Vec<Vec<Option<f64>>> = vec![Vec::new(); 13];
    for name in models {
        for arm in ["control", "candidate"] {
            for (b, label) in BINS.iter().take(4).enumerate() {
                model.push(name.clone());
                variant.push(arm.to_string());
                bin.push(label.to_string());
                profiles.push(200);
                matched.push(198);
                let queue = rng.around(8.0, 0.5);
                let prefill = rng.around(40.0 * (1u64 << b) as f64, 0.1);
                let decode = rng.around(900.0, 0.1);
                let overhead = queue + rng.around(12.0, 0.2);
                let kernel = rng.around(25.0, 0.2);
                let step = rng.around(1.5, 0.3);
                let values = [
                    queue,
                    queue * 3.0,
                    prefill,
                    prefill * 1.5,
                    decode,
                    decode * 1.3,
                    overhead,
                    overhead * 2.0,
                    rng.around(0.4, 0.5),
                    kernel,
                    kernel * 1.4,
                    step,
                    step * 2.2,
                ];
                for (i, v) in values.iter().enumerate() {
                    f[i].push(Some(*v));
                }
            }
        }
    }
    let mut f = f.into_iter();
    let mut next = || floats(f.next().unwrap());
    RecordBatch::try_from_iter([
        ("model", strings(model)),
        ("variant", strings(variant)),
        ("context_bin", strings(bin)),
        ("profiles", ints(profiles)),
        ("matched", ints(matched)),
        ("queue_p50_ms", next()),
        ("queue_p95_ms", next()),
        ("prefill_p50_ms", next()),
        ("prefill_p95_ms", next()),
        ("decode_p50_ms", next()),
        ("decode_p95_ms", next()),
        ("overhead_p50_ms", next()),
        ("overhead_p95_ms", next()),
        ("kv_cache_hit_rate", next()),
        ("cuda_kernel_us_p50", next()),
        ("cuda_kernel_us_p95", next()),
        ("decode_step_std_p50_ms", next()),
        ("decode_step_std_p95_ms", next()),
    ])
    .unwrap()
}

/// The `kv_cache_peak` table (sql/kv_cache_peak.sql): two 4-GPU engines and an
/// 8-GPU one, each GPU's peak a share of its engine's, the busiest GPU first.
pub fn kv_cache_peak(rng: &mut Rng) -> RecordBatch {
    let (mut engine, mut gpu, mut requests, mut peak_concurrency, mut peak, mut at) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let start_us = i64::from(LAST_DAY) * 86_400_000_000;
    for (name, gpus, gib) in [("vllm-a100-0", 4, 18.0), ("vllm-a100-1", 4, 15.0), ("sglang-h100-0", 8, 42.0)] {
        for g in 0..gpus {
            engine.push(name.to_string());
            gpu.push(g);
            requests.push((rng.around(1200.0, 0.2)).round() as i64);
            peak_concurrency.push((rng.around(24.0, 0.3)).round() as i64);
            peak.push(Some(rng.around(gib, 0.1)));
            at.push(start_us + (rng.next() * 86_400.0) as i64 * 1_000_000);
        }
    }
    let rows = engine.len();
    RecordBatch::try_from_iter([
        ("engine_id", strings(engine)),
        ("gpu_id", ints(gpu)),
        ("requests", ints(requests)),
        ("unknown_architecture_requests", ints(vec![0; rows])),
        ("peak_concurrency", ints(peak_concurrency)),
        ("kv_cache_gib_peak", floats(peak)),
        ("peak_at", Arc::new(TimestampMicrosecondArray::from(at).with_timezone("UTC")) as ArrayRef),
    ])
    .unwrap()
}

/// The `throughput` table (sql/throughput.sql): per model x `windows` windows of
/// `window_s` seconds from 2025-06-30 00:00 UTC.
pub fn throughput(models: &[String], windows: i64, window_s: i64, rng: &mut Rng) -> RecordBatch {
    let start_us = i64::from(LAST_DAY) * 86_400_000_000;
    let (mut model, mut window_start, mut requests, mut peak) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut f: Vec<Vec<Option<f64>>> = vec![Vec::new(); 9];
    for (m, name) in models.iter().enumerate() {
        for w in 0..windows {
            model.push(name.clone());
            window_start.push(start_us + w * window_s * 1_000_000);
            // A ramp up and a plateau, as in a load test.
            let load = (w as f64 / windows as f64 * 3.0).min(1.0) / (1.0 + m as f64 * 0.3);
            let n = (rng.around(40.0 * load, 0.2) * window_s as f64 / 60.0).round().max(1.0) as i64;
            requests.push(n);
            let concurrency = rng.around(12.0 * load, 0.15);
            peak.push((concurrency * 1.6).ceil() as i64);
            let ttft = rng.around(150.0 * (1.0 + load), 0.1);
            let e2e = ttft + rng.around(6000.0, 0.1);
            let values = [
                n as f64 / window_s as f64,
                n as f64 * rng.around(380.0, 0.1) / window_s as f64,
                concurrency,
                ttft,
                ttft * 2.4,
                ttft * 3.5,
                e2e,
                e2e * 1.8,
                e2e * 2.5,
            ];
            for (i, v) in values.iter().enumerate() {
                f[i].push(Some(*v));
            }
        }
    }
    let mut f = f.into_iter();
    let mut next = || floats(f.next().unwrap());
    RecordBatch::try_from_iter([
        ("model", strings(model)),
        ("window_start", Arc::new(TimestampMicrosecondArray::from(window_start).with_timezone("UTC")) as ArrayRef),
        ("requests", ints(requests)),
        ("qps", next()),
        ("output_tokens_per_s", next()),
        ("mean_concurrency", next()),
        ("peak_concurrency", ints(peak)),
        ("ttft_p50_ms", next()),
        ("ttft_p95_ms", next()),
        ("ttft_p99_ms", next()),
        ("e2e_p50_ms", next()),
        ("e2e_p95_ms", next()),
        ("e2e_p99_ms", next()),
    ])
    .unwrap()
}

/// The `load_summary` table (sql/load_summary.sql), the columns the dashboard reads.
pub fn load_summary(models: &[String], rng: &mut Rng) -> RecordBatch {
    let n = models.len();
    let mut f: Vec<Vec<Option<f64>>> = vec![Vec::new(); 10];
    for _ in models {
        let e2e = rng.around(6500.0, 0.2);
        let values = [3600.0, rng.around(0.6, 0.2), rng.around(220.0, 0.2), rng.around(1300.0, 0.2)];
        let more = [rng.around(8.0, 0.2), rng.around(160.0, 0.1), rng.around(420.0, 0.1), e2e, e2e * 1.9, e2e * 2.6];
        for (i, v) in values.iter().chain(&more).enumerate() {
            f[i].push(Some(*v));
        }
    }
    let mut f = f.into_iter();
    let mut next = || floats(f.next().unwrap());
    RecordBatch::try_from_iter([
        ("model", strings(models.to_vec())),
        ("requests", ints(vec![2000; n])),
        ("wall_s", next()),
        ("qps", next()),
        ("output_tokens_per_s", next()),
        ("tokens_per_s", next()),
        ("mean_concurrency", next()),
        ("peak_concurrency", ints(vec![14; n])),
        ("ttft_p50_ms", next()),
        ("ttft_p95_ms", next()),
        ("e2e_p50_ms", next()),
        ("e2e_p95_ms", next()),
        ("e2e_p99_ms", next()),
    ])
    .unwrap()
}

/// The `gateway_engine` table (sql/gateway_engine.sql): per model x the first four bins.
pub fn gateway_engine(models: &[String], rng: &mut Rng) -> RecordBatch {
    let (mut model, mut bin, mut matched, mut gateway_only) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut f: Vec<Vec<Option<f64>>> = vec![Vec::new(); 4];
    for name in models {
        for (b, label) in BINS.iter().take(4).enumerate() {
            model.push(name.clone());
            bin.push(label.to_string());
            matched.push(200);
            gateway_only.push(3);
            let prefill = rng.around(40.0 * (1u64 << b) as f64, 0.1);
            let values = [rng.around(2.0, 1.0), prefill, rng.around(900.0, 0.1), rng.around(35.0, 0.2)];
            for (i, v) in values.iter().enumerate() {
                f[i].push(Some(*v));
            }
        }
    }
    let rows = model.len();
    let mut f = f.into_iter();
    let mut next = || floats(f.next().unwrap());
    RecordBatch::try_from_iter([
        ("model", strings(model)),
        ("context_bin", strings(bin)),
        ("matched", ints(matched)),
        ("gateway_only", ints(gateway_only)),
        ("engine_only", ints(vec![0; rows])),
        ("clock_offset_ms", next()),
        ("prefill_ms_p50", next()),
        ("decode_ms_p50", next()),
        ("overhead_ms_p50", next()),
    ])
    .unwrap()
}

/// The `head_waste` table (sql/head_waste.sql): `layers` x `heads`.
pub fn head_waste(layers: i64, heads: i64, rng: &mut Rng) -> RecordBatch {
    let (mut layer, mut head, mut kernels, mut waste, mut flagged) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for l in 0..layers {
        for h in 0..heads {
            layer.push(l);
            head.push(h);
            kernels.push(4);
            let w = (0.2 + 0.6 * rng.next()).min(0.99);
            waste.push(Some(w));
            flagged.push(w > 0.5);
        }
    }
    let rows = layer.len();
    RecordBatch::try_from_iter([
        ("layer", ints(layer)),
        ("head", ints(head)),
        ("kernels", ints(kernels)),
        ("duration_us", floats(vec![Some(40.0); rows])),
        ("achieved_gflops_per_s", floats(vec![Some(180.0); rows])),
        ("waste_ratio", floats(waste)),
        ("flagged", Arc::new(BooleanArray::from(flagged)) as ArrayRef),
    ])
    .unwrap()
}

/// The `moe_load` table (sql/moe_load.sql), the columns the dashboard reads.
pub fn moe_load(layers: i64, rng: &mut Rng) -> RecordBatch {
    let n = layers as usize;
    let imbalance: Vec<Option<f64>> = (0..n).map(|_| Some(rng.around(1.8, 0.3))).collect();
    let cv: Vec<Option<f64>> = (0..n).map(|_| Some(rng.around(0.4, 0.3))).collect();
    RecordBatch::try_from_iter([
        ("layer", ints((0..layers).collect())),
        ("num_experts", ints(vec![8; n])),
        ("top_k", ints(vec![2; n])),
        ("routed_tokens", floats(vec![Some(100.0); n])),
        ("hot_share", floats(vec![Some(0.25); n])),
        ("imbalance_max_mean", floats(imbalance)),
        ("load_cv", floats(cv)),
        ("routing_entropy_bits", floats(vec![Some(2.9); n])),
    ])
    .unwrap()
}

/// The `quality` table (sql/quality.sql): per model x task.
pub fn quality(models: &[String], rng: &mut Rng) -> RecordBatch {
    let (mut model, mut task) = (Vec::new(), Vec::new());
    let mut f: Vec<Vec<Option<f64>>> = vec![Vec::new(); 3];
    for name in models {
        for t in ["qa", "rag", "chat"] {
            model.push(name.clone());
            task.push(t.to_string());
            let (bleu, fact) = (rng.around(0.35, 0.3), rng.around(0.7, 0.2));
            for (i, v) in [bleu, fact, 0.4 * bleu + 0.6 * fact].iter().enumerate() {
                f[i].push(Some(*v));
            }
        }
    }
    let rows = model.len();
    let mut f = f.into_iter();
    let mut next = || floats(f.next().unwrap());
    RecordBatch::try_from_iter([
        ("model", strings(model)),
        ("task", strings(task)),
        ("evals", ints(vec![50; rows])),
        ("bleu_scored", ints(vec![50; rows])),
        ("bleu4_mean", next()),
        ("factscore_scored", ints(vec![50; rows])),
        ("factscore_mean", next()),
        ("f1_fact", next()),
    ])
    .unwrap()
}

/// The `composite` table (sql/composite.sql).
pub fn composite(models: &[String], rng: &mut Rng) -> RecordBatch {
    let n = models.len();
    let mut f: Vec<Vec<Option<f64>>> = vec![Vec::new(); 5];
    for _ in models {
        let values = [rng.around(0.6, 0.2), rng.around(180.0, 0.3), rng.around(0.7, 0.2), rng.around(0.85, 0.1)];
        let composite =
            0.3 * values[0] / 1000.0 + 0.25 * (1.0 - values[1] / 200.0) + 0.25 * values[2] + 0.2 * values[3];
        for (i, v) in values.iter().chain(&[composite]).enumerate() {
            f[i].push(Some(*v));
        }
    }
    let mut f = f.into_iter();
    let mut next = || floats(f.next().unwrap());
    RecordBatch::try_from_iter([
        ("model", strings(models.to_vec())),
        ("requests", ints(vec![2000; n])),
        ("qps", next()),
        ("latency_p95_ms", next()),
        ("evals", ints(vec![50; n])),
        ("recall_mean", next()),
        ("semantic_similarity_mean", next()),
        ("composite", next()),
    ])
    .unwrap()
}

/// The `recall` table (sql/recall.sql): one row per model x context bin,
/// recall falling with the context's length.
pub fn recall(models: &[String], rng: &mut Rng) -> RecordBatch {
    let (mut model, mut bin, mut evals, mut scored, mut mean, mut p50, mut p10) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for m in models {
        for (i, b) in BINS.iter().enumerate() {
            let m_recall = (0.97 - 0.05 * i as f64 * rng.around(1.0, 0.3)).clamp(0.0, 1.0);
            model.push(m.clone());
            bin.push(b.to_string());
            evals.push(60);
            scored.push(58);
            mean.push(Some(m_recall));
            p50.push(Some((m_recall + 0.02).min(1.0)));
            p10.push(Some((m_recall - 0.2).max(0.0)));
        }
    }
    RecordBatch::try_from_iter([
        ("model", strings(model)),
        ("context_bin", strings(bin)),
        ("evals", ints(evals)),
        ("recall_scored", ints(scored)),
        ("recall_mean", floats(mean)),
        ("recall_p50", floats(p50)),
        ("recall_p10", floats(p10)),
    ])
    .unwrap()
}

/// The `recall_at_k` table (sql/recall_at_k.sql): one row per model x K =
/// 1..=100, recall rising with K towards the share retrieved at all.
pub fn recall_at_k(models: &[String], rng: &mut Rng) -> RecordBatch {
    let (mut model, mut k, mut records, mut recall) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for m in models {
        let (reach, speed) = (rng.around(0.9, 0.05).min(1.0), rng.around(0.1, 0.3));
        for i in 1..=100i64 {
            model.push(m.clone());
            k.push(i);
            records.push(40);
            recall.push(Some(reach * (1.0 - (-speed * i as f64).exp())));
        }
    }
    RecordBatch::try_from_iter([
        ("model", strings(model)),
        ("k", ints(k)),
        ("records", ints(records)),
        ("recall_at_k", floats(recall)),
    ])
    .unwrap()
}

/// The `drift` table (sql/drift.sql): one row per query-length bin.
pub fn drift(rng: &mut Rng) -> RecordBatch {
    let bins = ["short", "medium", "long"];
    let mean: Vec<Option<f64>> = bins.iter().map(|_| Some(rng.around(0.6, 0.4))).collect();
    let p95: Vec<Option<f64>> = mean.iter().map(|m| m.map(|m| m * 2.5)).collect();
    let share: Vec<Option<f64>> = bins.iter().map(|_| Some(rng.around(0.2, 0.5))).collect();
    RecordBatch::try_from_iter([
        ("word_bin", strings(bins.iter().map(|b| b.to_string()).collect())),
        ("word_bin_lo", ints(vec![1, 4, 7])),
        ("queries", ints(vec![120, 80, 40])),
        ("kl_bits_mean", floats(mean)),
        ("kl_bits_p95", floats(p95)),
        ("drift_share", floats(share)),
    ])
    .unwrap()
}

/// A full dashboard input: report, kv_cache, daily (`days` days), replay, a
/// 2-layer x 12-position mediation heatmap per metric, DE and IE of 4 layers, an A/B table, a load test
/// (120 one-minute windows, its summary, gateway vs engine), token timing
/// (jitter), engine profiles (two arms, the peak KV cache of 16 GPUs) and model internals (4 x 8 head waste,
/// 4 MoE layers, quality, recall, composite, drift) and who spends (cost per day by team, cost per team,
/// user, tag and provider).
pub fn realistic(models: &[String], days: i32) -> DashboardInput {
    let mut rng = Rng::new(7);
    let mut input = DashboardInput::new(
        "LLM serving: cost and quality",
        "prod-logs-2025-06",
        format!(
            "{} to {}",
            tokscope::export::dashboard::date_label(LAST_DAY - days + 1),
            tokscope::export::dashboard::date_label(LAST_DAY)
        ),
        "2025-07-01 06:00 UTC",
    );
    input.trend_days = days as u32;
    input
        .with_table("report", vec![report(models, &mut rng)])
        .with_table("kv_cache", vec![kv_cache(models, &mut rng)])
        .with_table("daily", vec![daily(models, days, &mut rng)])
        .with_table("replay", vec![replay(models, &mut rng)])
        .with_table(
            "mediation_heatmap",
            vec![mediation_heatmap(&["target_prob", "continuation_logprob"], 2, 12, &mut rng)],
        )
        .with_table(
            "mediation_layers",
            vec![mediation_layers(&["sacrebleu, weight-noise mlp.gate sigma 0.01"], 4, &mut rng)],
        )
        .with_table("ab", vec![ab(&mut rng)])
        .with_table("throughput", vec![throughput(models, 120, 60, &mut rng)])
        .with_table("load_summary", vec![load_summary(models, &mut rng)])
        .with_table("gateway_engine", vec![gateway_engine(models, &mut rng)])
        .with_table("jitter", vec![jitter(models, &mut rng)])
        .with_table("engine", vec![engine(models, &mut rng)])
        .with_table("head_waste", vec![head_waste(4, 8, &mut rng)])
        .with_table("moe_load", vec![moe_load(4, &mut rng)])
        .with_table("quality", vec![quality(models, &mut rng)])
        .with_table("composite", vec![composite(models, &mut rng)])
        .with_table("drift", vec![drift(&mut rng)])
        .with_table("kv_cache_peak", vec![kv_cache_peak(&mut rng)])
        .with_table("recall", vec![recall(models, &mut rng)])
        .with_table("recall_at_k", vec![recall_at_k(models, &mut rng)])
        .with_table("spend_daily_by_team", vec![daily_by("team", &TEAMS.map(String::from), days, &mut rng)])
        .with_table("spend_by_team", vec![spend("team", &TEAMS, &mut rng)])
        .with_table("spend_by_user", vec![spend("user_id", &["u-1042", "u-7", "u-311", "(other)"], &mut rng)])
        .with_table("spend_by_tag", vec![spend("tag", &["app:chat", "env:prod", "app:search", "(null)"], &mut rng)])
        .with_table("spend_by_provider", vec![spend("provider", &["openai", "anthropic", "vllm"], &mut rng)])
}

pub fn model_names(n: usize) -> Vec<String> {
    if n <= MODELS.len() {
        MODELS[..n].iter().map(|m| m.to_string()).collect()
    } else {
        (0..n).map(|i| format!("{}-v{}", MODELS[i % 3], i / 3)).collect()
    }
}
