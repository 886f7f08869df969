//! Replay: run logged prompts through a real Llama-family decoder on the CPU
//! to get what the model itself says about them: greedy continuations, the
//! probability of stopping (EOS) at each step, and teacher-forced
//! log-probabilities of logged completions.
//!
//! The pipeline is `config` (shape) + `weights` (safetensors to f32) ->
//! [`LlamaModel`] (forward pass with KV cache, optional hidden states and
//! [`Intervention`]s for causal tracing) -> `decode` (greedy, scoring), with
//! [`PromptTokenizer`] at both ends. [`ReplayModel`] bundles a model and its
//! tokenizer; `verdict` classifies a suspected truncation. (Selecting
//! suspects from a dataset and storing verdicts is the `tokscope` crate's
//! `replay::run` and `replay::verdicts`.)
//!
//! ```no_run
//! use tokscope_model::replay::{DeviceRequest, ReplayModel};
//! let replay = ReplayModel::load("models/tiny-stories-a".as_ref(), DeviceRequest::Auto)?;
//! let (prompt_ids, greedy) = replay.greedy("Once upon a time,", 40)?;
//! println!("{} -> {}", prompt_ids.len(), replay.tokenizer.decode(&greedy.greedy_ids)?);
//! # Ok::<(), tokscope_model::Error>(())
//! ```

pub mod bench;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod decode;
pub mod device;
pub mod intervention;
pub mod kernels;
pub mod kv_cache;
pub mod linear;
pub mod model;
pub mod verdict;
pub mod weights;

// A model directory's files are parsed in the engine-free core (fuzzed there).
pub use tokscope_core::model::{config, tokenizer};

use std::path::Path;

pub use config::ModelConfig;
pub use decode::{greedy_decode, greedy_decode_batch, score_continuation, ContinuationScore, Decoder, GreedyDecode};
pub use device::{Device, DeviceRequest};
pub use intervention::{EmbeddingNoise, HiddenPatch, Intervention};
pub use kv_cache::KvCache;
pub use model::{EditPath, ForwardOptions, ForwardOutput, LayerEdit, LayerMatrix, LlamaModel, LogitsFor, WeightDelta};
pub use tokenizer::PromptTokenizer;

use crate::error::Result;

/// A model directory loaded for replay: the decoder and its tokenizer.
#[derive(Debug)]
pub struct ReplayModel {
    /// The forward pass.
    pub model: LlamaModel,
    /// The model's tokenizer, with its BOS convention.
    pub tokenizer: PromptTokenizer,
    /// Where the forward pass runs.
    pub device: Device,
    /// The model's weights on the GPU, when `device` is CUDA.
    #[cfg(feature = "cuda")]
    pub gpu: Option<cuda::CudaModel>,
}

impl ReplayModel {
    /// Loads `config.json`, the safetensors weights and `tokenizer.json` from
    /// `dir`, after checking that `device` is available in this build.
    pub fn load(dir: &Path, device: DeviceRequest) -> Result<Self> {
        Self::load_on(dir, device.resolve()?)
    }

    /// The checkpoint's name: its directory's name.
    pub fn name_of(dir: &Path) -> String {
        dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| dir.display().to_string())
    }

    /// Loads the model for an already resolved device.
    pub fn load_on(dir: &Path, device: Device) -> Result<Self> {
        let model = LlamaModel::from_dir(dir)?;
        let tokenizer = PromptTokenizer::from_dir(dir, model.config().bos_token_id)?;
        #[cfg(feature = "cuda")]
        let gpu = match device {
            Device::Cuda(ordinal) => Some(cuda::CudaModel::upload(&model, ordinal)?),
            Device::Cpu => None,
        };
        Ok(ReplayModel {
            model,
            tokenizer,
            device,
            #[cfg(feature = "cuda")]
            gpu,
        })
    }

    /// Greedy decoding of already tokenized ids on this model's device.
    pub fn greedy_ids(&self, prompt_ids: &[u32], max_new_tokens: usize) -> Result<GreedyDecode> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = &self.gpu {
            return greedy_decode(gpu, prompt_ids, max_new_tokens);
        }
        greedy_decode(&self.model, prompt_ids, max_new_tokens)
    }

    /// Greedy decoding of several prompts, each `(ids, max new tokens)`, as
    /// one batch on this model's device ([`greedy_decode_batch`]).
    pub fn greedy_ids_batch(&self, prompts: &[(&[u32], usize)]) -> Result<Vec<GreedyDecode>> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = &self.gpu {
            return greedy_decode_batch(gpu, prompts);
        }
        greedy_decode_batch(&self.model, prompts)
    }

    /// Teacher-forced scoring of already tokenized ids on this model's device.
    pub fn score_ids(&self, prompt_ids: &[u32], continuation_ids: &[u32]) -> Result<ContinuationScore> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = &self.gpu {
            return score_continuation(gpu, prompt_ids, continuation_ids);
        }
        score_continuation(&self.model, prompt_ids, continuation_ids)
    }

    /// Tokenizes `prompt` (BOS first) and decodes greedily; returns the prompt ids too.
    pub fn greedy(&self, prompt: &str, max_new_tokens: usize) -> Result<(Vec<u32>, GreedyDecode)> {
        let prompt_ids = self.tokenizer.encode_prompt(prompt)?;
        let decoded = self.greedy_ids(&prompt_ids, max_new_tokens)?;
        Ok((prompt_ids, decoded))
    }

    /// Tokenizes `prompt` (BOS first) and `continuation` (no BOS; special tokens such
    /// as `</s>` recognised) and scores the continuation; returns both id lists too.
    pub fn score(&self, prompt: &str, continuation: &str) -> Result<(Vec<u32>, Vec<u32>, ContinuationScore)> {
        let prompt_ids = self.tokenizer.encode_prompt(prompt)?;
        let continuation_ids = self.tokenizer.encode_continuation(continuation)?;
        let scored = self.score_ids(&prompt_ids, &continuation_ids)?;
        Ok((prompt_ids, continuation_ids, scored))
    }
}
