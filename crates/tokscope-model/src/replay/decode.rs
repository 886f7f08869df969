//! What tokscope asks of a replayed model: the greedy continuation of a
//! prompt with the stop probability along the way, and teacher-forced
//! log-probabilities of a logged continuation.

use super::config::ModelConfig;
use super::kernels::log_softmax;
use super::kv_cache::KvCache;
use super::model::{ForwardOptions, LlamaModel, LogitsFor};
use crate::error::Result;

/// A forward pass that decoding and scoring can drive: the CPU [`LlamaModel`],
/// or (with the `cuda` feature) its GPU copy `cuda::CudaModel`.
pub trait Decoder {
    /// The per-sequence key/value cache.
    type Cache;
    /// The model's hyper-parameters.
    fn config(&self) -> &ModelConfig;
    /// An empty cache for one sequence.
    fn new_cache(&self) -> Self::Cache;
    /// Runs `tokens[s]` after the positions cached in `caches[s]`, for every
    /// sequence `s` of the batch in one forward pass, and returns each
    /// sequence's logits rows that `which` asks for.
    fn logits_batch(
        &self,
        tokens: &[&[u32]],
        caches: &mut [&mut Self::Cache],
        which: LogitsFor,
    ) -> Result<Vec<Vec<Vec<f32>>>>;
    /// Runs `tokens` after the cached positions and returns the logits rows `which` asks for.
    fn logits(&self, tokens: &[u32], cache: &mut Self::Cache, which: LogitsFor) -> Result<Vec<Vec<f32>>> {
        let mut rows = self.logits_batch(&[tokens], &mut [cache], which)?;
        rows.pop().ok_or_else(|| model_err!("forward pass returned no sequence"))
    }
}

impl Decoder for LlamaModel {
    type Cache = KvCache;

    fn config(&self) -> &ModelConfig {
        LlamaModel::config(self)
    }

    fn new_cache(&self) -> KvCache {
        LlamaModel::new_cache(self)
    }

    fn logits_batch(
        &self,
        tokens: &[&[u32]],
        caches: &mut [&mut KvCache],
        which: LogitsFor,
    ) -> Result<Vec<Vec<Vec<f32>>>> {
        let options = ForwardOptions { logits: which, ..Default::default() };
        Ok(self.forward_batch(tokens, caches, options)?.into_iter().map(|out| out.logits).collect())
    }
}

#[cfg(feature = "cuda")]
impl Decoder for super::cuda::CudaModel {
    type Cache = super::cuda::CudaKvCache;

    fn config(&self) -> &ModelConfig {
        super::cuda::CudaModel::config(self)
    }

    fn new_cache(&self) -> Self::Cache {
        super::cuda::CudaModel::new_cache(self)
    }

    fn logits_batch(
        &self,
        tokens: &[&[u32]],
        caches: &mut [&mut Self::Cache],
        which: LogitsFor,
    ) -> Result<Vec<Vec<Vec<f32>>>> {
        self.forward_batch(tokens, caches, which)
    }
}

/// The greedy continuation of one prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct GreedyDecode {
    /// Generated ids; the last one is an EOS id when [`Self::ended_with_eos`].
    pub greedy_ids: Vec<u32>,
    /// Whether decoding stopped on EOS rather than on the token budget.
    pub ended_with_eos: bool,
    /// `p_eos[i]`: probability of EOS given the prompt and `greedy_ids[..i]`.
    /// One entry more than `greedy_ids`: the last is P(EOS) after the final
    /// token (after the EOS itself, when decoding stopped there).
    pub p_eos: Vec<f64>,
    /// Logits at the last prompt position (the distribution of the first new token).
    pub last_prompt_logits: Vec<f32>,
}

/// Teacher-forced scores of a continuation.
#[derive(Debug, Clone, PartialEq)]
pub struct ContinuationScore {
    /// `logprobs[j]`: natural log-probability of continuation token `j` given
    /// the prompt and the continuation tokens before it.
    pub logprobs: Vec<f64>,
    /// Probability of EOS right after the whole continuation.
    pub p_eos_after: f64,
}

/// Decodes greedily from `prompt_ids` until an EOS id or `max_new_tokens` tokens.
/// The prompt is prefilled in one batched pass; each new token is one cached step.
pub fn greedy_decode<M: Decoder + ?Sized>(
    model: &M,
    prompt_ids: &[u32],
    max_new_tokens: usize,
) -> Result<GreedyDecode> {
    let mut decoded = greedy_decode_batch(model, &[(prompt_ids, max_new_tokens)])?;
    decoded.pop().ok_or_else(|| model_err!("greedy decoding returned no sequence"))
}

/// [`greedy_decode`] of several prompts at once, each `(prompt ids, max new
/// tokens)`: one batched prefill of every prompt, then one forward pass per
/// step over the sequences still going (each stops on its own EOS or budget
/// and leaves the batch). Each result is what [`greedy_decode`] gives for its
/// prompt alone on a backend whose rows do not depend on the batch (the CPU:
/// bit for bit).
pub fn greedy_decode_batch<M: Decoder + ?Sized>(model: &M, prompts: &[(&[u32], usize)]) -> Result<Vec<GreedyDecode>> {
    let eos = &model.config().eos_token_ids;
    if prompts.is_empty() {
        return Ok(Vec::new());
    }
    let mut caches: Vec<M::Cache> = prompts.iter().map(|_| model.new_cache()).collect();
    let ids: Vec<&[u32]> = prompts.iter().map(|&(ids, _)| ids).collect();
    let first = model.logits_batch(&ids, &mut caches.iter_mut().collect::<Vec<_>>(), LogitsFor::LastPosition)?;
    let mut logits = first.into_iter().map(last_logits).collect::<Result<Vec<_>>>()?;
    let mut decoded: Vec<GreedyDecode> = logits
        .iter()
        .map(|l| GreedyDecode {
            greedy_ids: Vec::new(),
            ended_with_eos: false,
            p_eos: Vec::new(),
            last_prompt_logits: l.clone(),
        })
        .collect();
    let mut going = vec![true; prompts.len()];
    loop {
        let mut next = Vec::new();
        for (s, d) in decoded.iter_mut().enumerate() {
            if !going[s] {
                continue;
            }
            d.p_eos.push(eos_probability(&logits[s], eos));
            if d.ended_with_eos || d.greedy_ids.len() == prompts[s].1 {
                going[s] = false;
                continue;
            }
            let id = argmax(&logits[s]);
            d.greedy_ids.push(id);
            d.ended_with_eos = eos.contains(&id);
            // Run even the EOS (or last budgeted) token: its P(EOS) is the final entry.
            next.push((s, [id]));
        }
        if next.is_empty() {
            return Ok(decoded);
        }
        let tokens: Vec<&[u32]> = next.iter().map(|(_, id)| &id[..]).collect();
        let mut stepping: Vec<&mut M::Cache> =
            caches.iter_mut().enumerate().filter(|(s, _)| going[*s]).map(|(_, c)| c).collect();
        let rows = model.logits_batch(&tokens, &mut stepping, LogitsFor::LastPosition)?;
        for ((s, _), rows) in next.iter().zip(rows) {
            logits[*s] = last_logits(rows)?;
        }
    }
}

/// Scores `continuation_ids` after `prompt_ids` by teacher forcing: the prompt
/// is prefilled, then the whole continuation runs in one pass with logits at
/// every position.
pub fn score_continuation<M: Decoder + ?Sized>(
    model: &M,
    prompt_ids: &[u32],
    continuation_ids: &[u32],
) -> Result<ContinuationScore> {
    let eos = &model.config().eos_token_ids;
    let mut cache = model.new_cache();
    let mut rows = model.logits(prompt_ids, &mut cache, LogitsFor::LastPosition)?;
    if !continuation_ids.is_empty() {
        rows.extend(model.logits(continuation_ids, &mut cache, LogitsFor::AllPositions)?);
    }
    // rows[j] predicts continuation token j; the extra last row predicts what follows.
    let logprobs = continuation_ids.iter().zip(&rows).map(|(&id, row)| log_softmax(row)[id as usize]).collect();
    let p_eos_after = eos_probability(&last_logits(rows)?, eos);
    Ok(ContinuationScore { logprobs, p_eos_after })
}

/// Probability that the next token is any of the EOS ids (their softmax mass summed:
/// chat models with several stop tokens stop on each).
pub fn eos_probability(logits: &[f32], eos_ids: &[u32]) -> f64 {
    let logp = log_softmax(logits);
    eos_ids.iter().filter_map(|&id| logp.get(id as usize)).map(|lp| lp.exp()).sum()
}

/// Index of the largest logit; the first one on ties, as `torch.argmax` does.
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

fn last_logits(mut rows: Vec<Vec<f32>>) -> Result<Vec<f32>> {
    rows.pop().ok_or_else(|| model_err!("forward pass returned no logits"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_decoding_in_a_batch_stops_each_sequence_on_its_own() {
        use super::super::model::tests::{random_model, tiny_model};
        for model in [tiny_model(), random_model(2, 48, 4, 2, 3)] {
            // Budgets 0, 1, 5 and 9: sequences leave the batch at different steps.
            let prompts: [(&[u32], usize); 4] = [(&[1, 5, 9], 5), (&[1, 2], 0), (&[4, 4, 4, 4, 4, 10], 9), (&[7], 1)];
            let batch = greedy_decode_batch(&model, &prompts).unwrap();
            for (&(ids, budget), got) in prompts.iter().zip(&batch) {
                let alone = greedy_decode(&model, ids, budget).unwrap();
                assert_eq!(got.greedy_ids, alone.greedy_ids, "{ids:?}");
                assert_eq!(got.ended_with_eos, alone.ended_with_eos);
                let p = |d: &GreedyDecode| d.p_eos.iter().map(|p| p.to_bits()).collect::<Vec<_>>();
                assert_eq!(p(got), p(&alone), "{ids:?}");
                assert_eq!(got.last_prompt_logits, alone.last_prompt_logits);
                assert!(got.greedy_ids.len() <= budget);
            }
            assert!(greedy_decode_batch(&model, &[]).unwrap().is_empty());
        }
    }

    #[test]
    fn argmax_prefers_the_first_of_equal_maxima() {
        assert_eq!(argmax(&[0.0, 3.0, 1.0, 3.0]), 1);
    }

    #[test]
    fn eos_probability_sums_every_stop_token() {
        // Four equal logits: each token has probability 1/4.
        let p = eos_probability(&[1.0, 1.0, 1.0, 1.0], &[1, 3]);
        assert!((p - 0.5).abs() < 1e-12);
    }
}
