//! Causal tracing (Meng et al. 2022): corrupt the subject's embeddings, then
//! restore one clean layer output at one position at a time and record the
//! probability of the clean run's top token. Built to cost far less than one
//! forward pass per grid cell: the clean and corrupted runs are made once
//! (with their hidden states and keys/values kept), and restoring layer `l` at
//! position `i` restarts the corrupted residual stream at layer `l + 1` and
//! position `i`, attending to the corrupted run's keys and values of positions
//! `< i`: layers `0..=l` and earlier positions are exactly the corrupted run's
//! (causal attention), so only layers `l + 1..L` at positions `i..T` are
//! computed. Positions before the first corrupted one are the clean run's: the
//! corrupted run starts from the clean cache there, and their cells need no
//! work at all.

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use super::interventions::{gaussian_noise, last_row, read_noise_file, subject_positions};
use crate::error::Result;
use crate::progress::ProgressSink;
use crate::replay::decode::argmax;
use crate::replay::kernels::log_softmax;
use crate::replay::ReplayModel;
use crate::replay::{EmbeddingNoise, ForwardOptions, HiddenPatch, Intervention, LlamaModel};

/// The result of [`causal_trace`]; also the JSON of `tokscope trace --json`.
#[derive(Debug, Clone, Serialize)]
pub struct CausalTrace {
    /// Prompt ids, BOS first.
    pub input_ids: Vec<u32>,
    /// Positions that were corrupted (union over samples).
    pub subject_positions: Vec<usize>,
    /// The clean run's top next token.
    pub target_id: u32,
    /// P(target) after the clean prompt.
    pub p_clean: f64,
    /// P(target) in the corrupted run, mean over noise samples.
    pub p_corrupt: f64,
    /// `p_restored[l][i]`: P(target) in the corrupted run with layer `l`'s output
    /// at position `i` restored to its clean value, mean over samples.
    pub p_restored: Vec<Vec<f64>>,
    /// Noise samples averaged.
    pub samples: usize,
    /// Work done, in forward-pass equivalents: (layer, position) evaluations
    /// divided by `L T`, the evaluations of one full forward pass over the
    /// prompt (output heads not counted).
    pub forward_equivalents: f64,
}

/// Where the noise of a causal trace comes from.
#[derive(Debug, Clone)]
pub enum Noise {
    /// A JSON array of noise rows, row i added at position i (zero rows:
    /// untouched): exactly reproducible.
    File(PathBuf),
    /// Seeded Gaussian noise on the subject's tokens.
    Gaussian {
        /// Text inside the prompt whose tokens are corrupted (its last
        /// occurrence); `None`: every prompt token after BOS.
        subject: Option<String>,
        /// Seed of sample 0 (sample s uses seed + s).
        seed: u64,
        /// Samples to average over.
        samples: usize,
        /// Std as a multiple of the embedding matrix's std.
        scale: f64,
    },
}

/// A causal trace to run.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// Prompt text; BOS is prepended.
    pub prompt: String,
    /// The corruption.
    pub noise: Noise,
    /// Reuse the clean and corrupted activations (the default); `false`
    /// recomputes every cell with a full forward pass (for benchmarks).
    pub reuse: bool,
}

/// What [`trace_prompt`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct TraceRun {
    /// The grid.
    #[serde(flatten)]
    pub trace: CausalTrace,
    /// Noise std used (`None` with a noise file).
    pub noise_std: Option<f64>,
    /// Wall time of the trace itself (model loading excluded).
    pub wall_ms: f64,
}

/// Builds the noise `options` asks for and traces the prompt, counting the
/// grid's cells on `progress`.
pub fn trace_prompt(replay: &ReplayModel, options: &TraceOptions, progress: &dyn ProgressSink) -> Result<TraceRun> {
    let model = &replay.model;
    let hidden = model.config().hidden_size;
    let prompt_ids = replay.tokenizer.encode_prompt(&options.prompt)?;
    let (noise_samples, noise_std) = match &options.noise {
        Noise::File(path) => (vec![read_noise_file(path, hidden)?], None),
        Noise::Gaussian { subject, seed, samples, scale } => {
            let positions = match subject {
                Some(s) => subject_positions(&replay.tokenizer, &options.prompt, s)?,
                None => (1..prompt_ids.len()).collect(),
            };
            let std = scale * model.embedding_std();
            let samples = (0..(*samples).max(1))
                .map(|s| gaussian_noise(&positions, hidden, std, seed.wrapping_add(s as u64)))
                .collect::<Result<Vec<_>>>()?;
            (samples, Some(std))
        }
    };
    if let Some(bad) = noise_samples.iter().flatten().find(|n| n.position >= prompt_ids.len()) {
        return Err(config_err!("noise at position {} but the prompt has {} tokens", bad.position, prompt_ids.len()));
    }
    let started = Instant::now();
    let cells = noise_samples.len() * model.config().num_hidden_layers * prompt_ids.len();
    progress.begin(cells as u64, "cells");
    let trace = causal_trace_with(model, &prompt_ids, &noise_samples, options.reuse, progress)?;
    Ok(TraceRun { trace, noise_std, wall_ms: started.elapsed().as_secs_f64() * 1e3 })
}

/// Counts (layer, position) evaluations, so the cost claim is measured rather than assumed.
#[derive(Debug, Default)]
struct Cost {
    layer_positions: usize,
}

/// Traces `prompt_ids` under each noise sample in `noise_samples` (one
/// `Vec<EmbeddingNoise>` per sample). With `reuse == false` every cell is a
/// full corrupted forward pass with one patch (the reference the fast path
/// is tested against and benchmarked with).
pub fn causal_trace(
    model: &LlamaModel,
    prompt_ids: &[u32],
    noise_samples: &[Vec<EmbeddingNoise>],
    reuse: bool,
) -> Result<CausalTrace> {
    causal_trace_with(model, prompt_ids, noise_samples, reuse, &())
}

/// [`causal_trace`], counting each (sample, layer, position) cell on `progress`.
pub fn causal_trace_with(
    model: &LlamaModel,
    prompt_ids: &[u32],
    noise_samples: &[Vec<EmbeddingNoise>],
    reuse: bool,
    progress: &dyn ProgressSink,
) -> Result<CausalTrace> {
    if noise_samples.is_empty() {
        return Err(config_err!("causal trace needs at least one noise sample"));
    }
    let layers = model.config().num_hidden_layers;
    let (t, h) = (prompt_ids.len(), model.config().hidden_size);
    let mut cost = Cost::default();
    let with_states = ForwardOptions { hidden_states: true, ..Default::default() };
    let mut clean_cache = model.new_cache();
    let clean = model.forward(prompt_ids, &mut clean_cache, with_states)?;
    cost.layer_positions += layers * t;
    let clean_logits = last_row(clean.logits)?;
    let target_id = argmax(&clean_logits);
    let p = |logits: &[f32]| log_softmax(logits)[target_id as usize].exp();
    let p_clean = p(&clean_logits);

    let mut p_corrupt = 0.0;
    let mut p_restored = vec![vec![0.0; t]; layers];
    for noise in noise_samples {
        let corrupted = Intervention { embedding_noise: noise.clone(), hidden_patches: vec![] };
        // Positions before the first noisy one are the clean run's, bit for bit (causal
        // attention): with reuse the corrupted run starts from the clean cache there.
        let first = if reuse { noise.iter().map(|n| n.position).min().unwrap_or(0).min(t - 1) } else { 0 };
        let mut corrupt_cache = clean_cache.prefix(first, 0);
        let options = ForwardOptions { hidden_states: reuse, intervention: Some(&corrupted), ..Default::default() };
        let run = model.forward(&prompt_ids[first..], &mut corrupt_cache, options)?;
        cost.layer_positions += layers * (t - first);
        let p_sample = p(&last_row(run.logits)?);
        p_corrupt += p_sample;
        for (l, row) in p_restored.iter_mut().enumerate() {
            for (i, cell) in row.iter_mut().enumerate() {
                progress.inc(1);
                let clean_state = &clean.hidden_states[l + 1][i];
                if reuse && (i < first || run.hidden_states[l + 1][i - first] == *clean_state) {
                    // Restoring a state the noise never reached (positions before the first
                    // corrupted token: causal attention, same rows, bit-identical) is a no-op.
                    *cell += p_sample;
                    continue;
                }
                let logits = if reuse {
                    // Layers 0..=l and positions < i are the corrupted run's: the corrupted
                    // stream of positions i.. after layer l, with position i restored, enters
                    // layer l + 1, attending to the corrupted keys and values of positions < i.
                    let mut residual: Vec<f32> = run.hidden_states[l + 1][i - first..].concat();
                    residual[..h].copy_from_slice(clean_state);
                    cost.layer_positions += (layers - l - 1) * (t - i);
                    model.forward_from_layer(&corrupt_cache, i, &residual, l + 1, ForwardOptions::default())?.logits
                } else {
                    let patched = Intervention {
                        embedding_noise: noise.clone(),
                        hidden_patches: vec![HiddenPatch { layer: l, position: i, hidden: clean_state.clone() }],
                    };
                    cost.layer_positions += layers * t;
                    let options = ForwardOptions { intervention: Some(&patched), ..Default::default() };
                    model.forward(prompt_ids, &mut model.new_cache(), options)?.logits
                };
                *cell += p(&last_row(logits)?);
            }
        }
    }
    let samples = noise_samples.len();
    let k = samples as f64;
    p_restored.iter_mut().flatten().for_each(|v| *v /= k);
    let mut subject_positions: Vec<usize> = noise_samples.iter().flatten().map(|n| n.position).collect();
    subject_positions.sort_unstable();
    subject_positions.dedup();
    Ok(CausalTrace {
        input_ids: prompt_ids.to_vec(),
        subject_positions,
        target_id,
        p_clean,
        p_corrupt: p_corrupt / k,
        p_restored,
        samples,
        forward_equivalents: cost.layer_positions as f64 / (layers * t) as f64,
    })
}

/// Forward-pass equivalents [`causal_trace`] spends on `samples` samples of a
/// `t`-token prompt through `layers` layers whose first corrupted position is
/// `first`, in (layer, position) evaluations / `L T`. Without reuse
/// `1 + samples (1 + L T)`: the clean run, and per sample the corrupted run and
/// one full run per cell. With reuse the corrupted run computes positions
/// `first..T` only (`(T - f) / T`), and the restore of layer `l` at position
/// `i >= f` runs layers `l + 1..L` at positions `i..T` only: summed over the
/// grid `(L - 1) L / 2 x (T - f)(T - f + 1) / 2` evaluations, so
/// `1 + samples ((T - f) + (L - 1)(T - f)(T - f + 1) / 4) / T` (cells before `f`
/// are no-ops and cost nothing).
pub fn expected_forward_equivalents(layers: usize, t: usize, first: usize, samples: usize, reuse: bool) -> f64 {
    let (l, t) = (layers as f64, t as f64);
    let per_sample = if reuse {
        let rest = (t as usize).saturating_sub(first) as f64;
        (rest + (l - 1.0) * rest * (rest + 1.0) / 4.0) / t
    } else {
        1.0 + l * t
    };
    1.0 + samples as f64 * per_sample
}
