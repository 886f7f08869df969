//! Maps a checkpoint's safetensors files (one file or a sharded index) and
//! wraps each projection matrix in place: weights keep their stored precision
//! (f32, f16 or bf16) and are never copied, so resident memory is the file's
//! pages the forward pass touches; the kernels widen values to f32 as they
//! stream them (`linear.rs`). Norm scales and biases (a few KB) are decoded
//! to f32 vectors.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;
use safetensors::Dtype;
use tokscope_core::model::tensors::{shard_files, tensor_infos, to_f32};

use super::config::ModelConfig;
use super::linear::{Linear, SharedBytes, WeightDtype};
use crate::error::{Error, Result};

/// The weights of one decoder layer.
#[derive(Debug, Clone)]
pub struct LayerWeights {
    /// RMSNorm scale before attention.
    pub input_layernorm: Vec<f32>,
    /// Query projection, `[heads * head_dim, hidden]`.
    pub q_proj: Linear,
    /// Key projection, `[kv_heads * head_dim, hidden]`.
    pub k_proj: Linear,
    /// Value projection, `[kv_heads * head_dim, hidden]`.
    pub v_proj: Linear,
    /// Attention output projection, `[hidden, heads * head_dim]`.
    pub o_proj: Linear,
    /// RMSNorm scale before the MLP.
    pub post_attention_layernorm: Vec<f32>,
    /// SwiGLU gate, `[intermediate, hidden]`.
    pub gate_proj: Linear,
    /// SwiGLU up projection, `[intermediate, hidden]`.
    pub up_proj: Linear,
    /// SwiGLU down projection, `[hidden, intermediate]`.
    pub down_proj: Linear,
}

/// All weights of a Llama-family causal LM, matrices in their stored precision.
#[derive(Debug, Clone)]
pub struct ModelWeights {
    /// Token embeddings, `[vocab, hidden]`; also the output projection when tied.
    pub embed_tokens: Linear,
    /// Decoder layers, bottom first.
    pub layers: Vec<LayerWeights>,
    /// Final RMSNorm scale.
    pub norm: Vec<f32>,
    /// Output projection `[vocab, hidden]`; `None` when tied to [`Self::embed_tokens`].
    pub lm_head: Option<Linear>,
}

impl ModelWeights {
    /// Number of parameters (a tied output projection counted once).
    pub fn parameter_count(&self) -> usize {
        let lin = |l: &Linear| l.out_features() * l.in_features();
        let layers: usize = self
            .layers
            .iter()
            .map(|l| {
                l.input_layernorm.len()
                    + l.post_attention_layernorm.len()
                    + [&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj]
                        .into_iter()
                        .map(lin)
                        .sum::<usize>()
            })
            .sum();
        lin(&self.embed_tokens) + layers + self.norm.len() + self.lm_head.as_ref().map_or(0, lin)
    }

    /// Bytes of weights one forward pass over one position streams: every
    /// matrix in its stored precision (the embedding matrix once when tied,
    /// since a lookup reads one row), plus the f32 norm scales.
    pub fn weight_bytes(&self) -> usize {
        let layers: usize = self
            .layers
            .iter()
            .map(|l| {
                4 * (l.input_layernorm.len() + l.post_attention_layernorm.len())
                    + [&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj]
                        .into_iter()
                        .map(Linear::weight_bytes)
                        .sum::<usize>()
            })
            .sum();
        layers + 4 * self.norm.len() + self.output_projection().weight_bytes()
    }

    /// The matrix that turns the final hidden state into logits.
    pub fn output_projection(&self) -> &Linear {
        self.lm_head.as_ref().unwrap_or(&self.embed_tokens)
    }

    /// Loads `model.safetensors`, or every shard named by `model.safetensors.index.json`.
    pub fn from_dir(dir: &Path, config: &ModelConfig) -> Result<Self> {
        let mut tensors = TensorStore::default();
        let single = dir.join("model.safetensors");
        let index = dir.join("model.safetensors.index.json");
        if single.exists() {
            tensors.load_file(&single)?;
        } else if index.exists() {
            let text = std::fs::read_to_string(&index).map_err(|e| Error::io(index.display(), e))?;
            for shard in shard_files(&text).map_err(|e| model_err!("{}: {e}", index.display()))? {
                tensors.load_file(&dir.join(shard))?;
            }
        } else {
            return Err(model_err!(
                "{}: neither model.safetensors nor model.safetensors.index.json found",
                dir.display()
            ));
        }
        Self::from_tensors(tensors, config)
    }

    fn from_tensors(mut t: TensorStore, cfg: &ModelConfig) -> Result<Self> {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let embed_tokens = t.linear("model.embed_tokens", cfg.vocab_size, h)?;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for l in 0..cfg.num_hidden_layers {
            let p = format!("model.layers.{l}");
            layers.push(LayerWeights {
                input_layernorm: t.vector(&format!("{p}.input_layernorm.weight"), h)?,
                q_proj: t.linear(&format!("{p}.self_attn.q_proj"), cfg.q_width(), h)?,
                k_proj: t.linear(&format!("{p}.self_attn.k_proj"), cfg.kv_width(), h)?,
                v_proj: t.linear(&format!("{p}.self_attn.v_proj"), cfg.kv_width(), h)?,
                o_proj: t.linear(&format!("{p}.self_attn.o_proj"), h, cfg.q_width())?,
                post_attention_layernorm: t.vector(&format!("{p}.post_attention_layernorm.weight"), h)?,
                gate_proj: t.linear(&format!("{p}.mlp.gate_proj"), i, h)?,
                up_proj: t.linear(&format!("{p}.mlp.up_proj"), i, h)?,
                down_proj: t.linear(&format!("{p}.mlp.down_proj"), h, i)?,
            });
        }
        let norm = t.vector("model.norm.weight", h)?;
        // Tied checkpoints usually omit lm_head; some still ship a copy, which we ignore
        // so that the config, not the file, decides.
        let lm_head = if cfg.tie_word_embeddings || !t.contains("lm_head.weight") {
            None
        } else {
            Some(t.linear("lm_head", cfg.vocab_size, h)?)
        };
        Ok(ModelWeights { embed_tokens, layers, norm, lm_head })
    }
}

/// Where one tensor lives: its shape, dtype and byte range inside a mapped file.
struct TensorLocation {
    shape: Vec<usize>,
    dtype: Dtype,
    file: SharedBytes,
    offset: usize,
    len: usize,
}

/// The tensors of every mapped shard, keyed by name. Only the headers are
/// read at load; the data pages are faulted in by the first forward pass.
#[derive(Default)]
struct TensorStore {
    tensors: HashMap<String, TensorLocation>,
}

impl TensorStore {
    fn load_file(&mut self, path: &Path) -> Result<()> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path.display(), e))?;
        // SAFETY: the mapping is read-only and the checkpoint must not be modified or truncated
        // while a model built from it is alive (the contract of every mmap-based safetensors
        // loader: transformers, candle); nothing here writes through it.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path.display(), e))?;
        self.load_mapped(Arc::new(map)).map_err(|e| model_err!("{}: {e}", path.display()))
    }

    fn load_mapped(&mut self, file: Arc<Mmap>) -> Result<()> {
        let shared: SharedBytes = file.clone();
        for info in tensor_infos(&file)? {
            let location = TensorLocation {
                shape: info.shape,
                dtype: info.dtype,
                file: shared.clone(),
                offset: info.range.start,
                len: info.range.len(),
            };
            self.tensors.insert(info.name, location);
        }
        Ok(())
    }

    fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// Removes a tensor, checking it has exactly the shape the config implies.
    fn take(&mut self, name: &str, shape: &[usize]) -> Result<TensorLocation> {
        let found = self.tensors.remove(name).ok_or_else(|| model_err!("tensor {name} missing from checkpoint"))?;
        if found.shape != shape {
            return Err(model_err!("tensor {name} has shape {:?}, config implies {shape:?}", found.shape));
        }
        Ok(found)
    }

    /// A small tensor (norm scale, bias) decoded to f32.
    fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>> {
        let t = self.take(name, &[len])?;
        to_f32(t.dtype, &(*t.file).as_ref()[t.offset..t.offset + t.len]).map_err(|e| model_err!("tensor {name}: {e}"))
    }

    /// A `[out, in]` projection `{prefix}.weight`, with `{prefix}.bias` when the checkpoint has one
    /// (Qwen2-style attention biases). The matrix stays in the mapped file in its stored precision.
    fn linear(&mut self, prefix: &str, out_features: usize, in_features: usize) -> Result<Linear> {
        let name = format!("{prefix}.weight");
        let t = self.take(&name, &[out_features, in_features])?;
        let bias_name = format!("{prefix}.bias");
        let bias = if self.contains(&bias_name) { Some(self.vector(&bias_name, out_features)?) } else { None };
        let dtype = match t.dtype {
            Dtype::F32 => WeightDtype::F32,
            Dtype::F16 => WeightDtype::F16,
            Dtype::BF16 => WeightDtype::BF16,
            other => return Err(model_err!("tensor {name}: unsupported dtype {other:?} (expected F32, F16 or BF16)")),
        };
        if cfg!(target_endian = "big") {
            // The file is little-endian; the kernels read native order.
            let values = to_f32(t.dtype, &(*t.file).as_ref()[t.offset..t.offset + t.len])?;
            return Linear::new(values, bias, out_features, in_features);
        }
        Linear::shared(t.file, t.offset, dtype, bias, out_features, in_features)
            .map_err(|e| model_err!("tensor {name}: {e}"))
    }
}
