//! The interventions of causal mediation analysis on the CPU decoder, all
//! expressed through the replay hooks ([`Intervention`] on the residual
//! stream, a [`LayerEdit`] of one layer's weights or of the whole layer) so
//! no model weights are copied, and the outcome metrics they are measured with.

use std::path::Path;

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Normal};

use tokscope_core::stats::bleu::sentence_bleu;

use super::bleu::bleu4;
use crate::error::{Error, Result};
use crate::replay::decode::{argmax, eos_probability};
use crate::replay::kernels::log_softmax;
use crate::replay::{EmbeddingNoise, ForwardOptions, LayerMatrix, LlamaModel, LogitsFor, ReplayModel, WeightDelta};

#[cfg(doc)]
use crate::replay::{Intervention, LayerEdit};

/// Meng et al. (2022) corrupt with noise of 3x the embedding matrix's std.
pub const DEFAULT_NOISE_SCALE: f64 = 3.0;
/// Default sigma of weight noise (the gate perturbation and `weight-noise`).
pub const DEFAULT_PERTURB_SIGMA: f64 = 0.01;

/// Gaussian noise rows for `positions`, `N(0, std^2)` per value, from a seeded RNG:
/// the same seed gives the same corruption on every machine.
pub fn gaussian_noise(positions: &[usize], hidden_size: usize, std: f64, seed: u64) -> Result<Vec<EmbeddingNoise>> {
    let normal = Normal::new(0.0f64, std).map_err(|e| config_err!("noise std {std}: {e}"))?;
    let mut rng = StdRng::seed_from_u64(seed);
    Ok(positions
        .iter()
        .map(|&position| EmbeddingNoise {
            position,
            delta: (0..hidden_size).map(|_| normal.sample(&mut rng) as f32).collect(),
        })
        .collect())
}

/// Reads `--noise FILE`: a JSON array of rows, row `i` added at position `i`
/// (the layout of golden.json's `causal_trace.noise`). All-zero rows are
/// dropped, so the corrupted positions are exactly the non-zero rows.
pub fn read_noise_file(path: &Path, hidden_size: usize) -> Result<Vec<EmbeddingNoise>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path.display(), e))?;
    let rows: Vec<Vec<f32>> =
        serde_json::from_slice(&bytes).map_err(|e| Error::Json { path: path.to_path_buf(), source: e })?;
    let mut noise = Vec::new();
    for (position, delta) in rows.into_iter().enumerate() {
        if delta.len() != hidden_size {
            return Err(config_err!(
                "{}: noise row {position} has {} values, the model's hidden_size is {hidden_size}",
                path.display(),
                delta.len()
            ));
        }
        if delta.iter().any(|v| *v != 0.0) {
            noise.push(EmbeddingNoise { position, delta });
        }
    }
    Ok(noise)
}

/// `N(0, sigma^2)` noise for `matrix` of layer `layer`, seeded: the values
/// are drawn row-major (`[out, in]`) from a `StdRng` seeded with `seed`
/// (rand 0.9) through `rand_distr::Normal`, each rounded to f32.
pub fn weight_noise(
    model: &LlamaModel,
    layer: usize,
    matrix: LayerMatrix,
    sigma: f64,
    seed: u64,
) -> Result<WeightDelta> {
    let normal = Normal::new(0.0f64, sigma).map_err(|e| config_err!("perturbation sigma {sigma}: {e}"))?;
    let mut rng = StdRng::seed_from_u64(seed);
    model.weight_delta(layer, matrix, || normal.sample(&mut rng) as f32)
}

/// Token span of `subject` inside `prompt`, as positions in `prompt_ids`
/// (BOS at 0). Found by tokenizing the prompt's prefix before and through the
/// subject's last occurrence, so it works for BPE tokenizers where the
/// subject's tokens depend on the preceding space.
pub fn subject_positions(
    tokenizer: &crate::replay::PromptTokenizer,
    prompt: &str,
    subject: &str,
) -> Result<Vec<usize>> {
    let start = prompt
        .rfind(subject)
        .filter(|_| !subject.is_empty())
        .ok_or_else(|| config_err!("subject {subject:?} does not occur in the prompt"))?;
    let before = tokenizer.encode_prompt(&prompt[..start])?.len();
    let through = tokenizer.encode_prompt(&prompt[..start + subject.len()])?.len();
    // A subject that merges with the text before it into one token still gets that token.
    let first = if through > before { before } else { before.saturating_sub(1) };
    Ok((first..through.max(first + 1)).collect())
}

tokscope_core::named_enum! {
    /// The outcome `y` a mediation effect is measured on.
    pub enum Metric as "metric" {
        /// Probability of the target token (the clean run's top next token) after the prompt.
        TargetProb = "target_prob",
        /// Teacher-forced log-probability (sum) of the logged continuation.
        ContinuationLogprob = "continuation_logprob",
        /// BLEU-4 of the greedy output against the clean run's greedy output.
        Bleu4 = "bleu4",
        /// P(EOS) at the cut point: after the prompt and the logged continuation.
        PEos = "p_eos",
        /// sacreBLEU's sentence BLEU (0-100) of the greedy output's text against
        /// the clean run's greedy output's text.
        SacreBleu = "sacrebleu",
        /// sacreBLEU's sentence BLEU (0-100) of the greedy output's text against
        /// the logged reference answer.
        SacreBleuRef = "sacrebleu_ref",
    }
}

/// One prompt prepared for measurement: ids, the logged continuation, and the
/// clean run's references (target token, greedy output) the metrics compare to.
#[derive(Debug, Clone)]
pub struct Subject {
    /// Prompt ids, BOS first.
    pub prompt_ids: Vec<u32>,
    /// Logged continuation ids (may be empty).
    pub continuation_ids: Vec<u32>,
    /// The clean run's top next token after the prompt.
    pub target_id: u32,
    /// The clean run's greedy output (BLEU reference), decoded on first use:
    /// only the BLEU metrics need it, and it costs `max_new_tokens` steps.
    clean_greedy: std::sync::OnceLock<Vec<u32>>,
    /// Greedy budget for the BLEU metrics.
    pub max_new_tokens: usize,
    /// The logged reference answer, for [`Metric::SacreBleuRef`].
    pub reference: Option<String>,
}

impl Subject {
    /// Runs the clean next-token reference once.
    pub fn new(
        model: &LlamaModel,
        prompt_ids: Vec<u32>,
        continuation_ids: Vec<u32>,
        max_new_tokens: usize,
    ) -> Result<Self> {
        let logits = last_row(model.forward(&prompt_ids, &mut model.new_cache(), ForwardOptions::default())?.logits)?;
        Ok(Subject {
            target_id: argmax(&logits),
            prompt_ids,
            continuation_ids,
            clean_greedy: std::sync::OnceLock::new(),
            max_new_tokens,
            reference: None,
        })
    }

    /// The same subject with a logged reference answer ([`Metric::SacreBleuRef`]).
    pub fn with_reference(self, reference: Option<String>) -> Self {
        Subject { reference, ..self }
    }

    /// `y` under the intervention and layer edit of `options` (none: the
    /// clean run); its `logits` and `hidden_states` are the metric's business.
    pub fn measure(&self, replay: &ReplayModel, metric: Metric, options: ForwardOptions<'_>) -> Result<f64> {
        let model = &replay.model;
        let options = ForwardOptions { logits: LogitsFor::LastPosition, hidden_states: false, ..options };
        match metric {
            Metric::TargetProb => {
                let row = last_row(model.forward(&self.prompt_ids, &mut model.new_cache(), options)?.logits)?;
                Ok(log_softmax(&row)[self.target_id as usize].exp())
            }
            Metric::ContinuationLogprob | Metric::PEos => {
                let ids: Vec<u32> = self.prompt_ids.iter().chain(&self.continuation_ids).copied().collect();
                let options = ForwardOptions { logits: LogitsFor::AllPositions, ..options };
                let rows = model.forward(&ids, &mut model.new_cache(), options)?.logits;
                if metric == Metric::PEos {
                    let last = rows.last().ok_or_else(|| model_err!("no logits"))?;
                    return Ok(eos_probability(last, &model.config().eos_token_ids));
                }
                // rows[p] predicts token p + 1.
                let first = self.prompt_ids.len() - 1;
                Ok(self
                    .continuation_ids
                    .iter()
                    .enumerate()
                    .map(|(j, &id)| log_softmax(&rows[first + j])[id as usize])
                    .sum())
            }
            Metric::Bleu4 => {
                let out = greedy(model, &self.prompt_ids, self.max_new_tokens, options)?;
                Ok(bleu4(&out, self.clean_greedy(model)?))
            }
            Metric::SacreBleu | Metric::SacreBleuRef => {
                let out = replay.tokenizer.decode(&greedy(model, &self.prompt_ids, self.max_new_tokens, options)?)?;
                let reference = match (metric, &self.reference) {
                    (Metric::SacreBleu, _) => replay.tokenizer.decode(self.clean_greedy(model)?)?,
                    (_, Some(reference)) => reference.clone(),
                    (_, None) => return Err(config_err!("no logged reference to score {metric} against")),
                };
                Ok(100.0 * sentence_bleu(&out, &reference))
            }
        }
    }

    /// The clean run's greedy output, decoded on first use.
    fn clean_greedy(&self, model: &LlamaModel) -> Result<&[u32]> {
        if let Some(ids) = self.clean_greedy.get() {
            return Ok(ids);
        }
        let ids = greedy(model, &self.prompt_ids, self.max_new_tokens, ForwardOptions::default())?;
        Ok(self.clean_greedy.get_or_init(|| ids))
    }
}

/// Greedy decoding with the intervention and layer edit active in the prefill
/// and in every step (noise and patches address prompt positions, so steps
/// are only affected through the cache; an edited layer runs at every
/// position, its direct path too).
fn greedy(
    model: &LlamaModel,
    prompt_ids: &[u32],
    max_new_tokens: usize,
    options: ForwardOptions<'_>,
) -> Result<Vec<u32>> {
    let eos = &model.config().eos_token_ids;
    let mut cache = model.new_cache();
    let options = ForwardOptions { logits: LogitsFor::LastPosition, hidden_states: false, ..options };
    let mut logits = last_row(model.forward(prompt_ids, &mut cache, options)?.logits)?;
    let mut out = Vec::new();
    while out.len() < max_new_tokens && prompt_ids.len() + out.len() < model.config().max_position_embeddings {
        let next = argmax(&logits);
        out.push(next);
        if eos.contains(&next) {
            break;
        }
        logits = last_row(model.forward(&[next], &mut cache, options)?.logits)?;
    }
    Ok(out)
}

pub(crate) fn last_row(mut rows: Vec<Vec<f32>>) -> Result<Vec<f32>> {
    rows.pop().ok_or_else(|| model_err!("forward pass returned no logits"))
}
