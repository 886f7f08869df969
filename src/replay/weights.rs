//! A checkpoint's tensors (read and converted to f32 by
//! `tokscope_core::model::tensors`) assembled into the matrices of each
//! layer, laid out the way the forward pass reads them.

use std::path::Path;

use tokscope_core::model::tensors::TensorStore;

use super::config::ModelConfig;
use super::linear::Linear;
use crate::error::Result;

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

/// All weights of a Llama-family causal LM, in f32.
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

    /// The matrix that turns the final hidden state into logits.
    pub fn output_projection(&self) -> &Linear {
        self.lm_head.as_ref().unwrap_or(&self.embed_tokens)
    }

    /// Loads `model.safetensors`, or every shard named by `model.safetensors.index.json`.
    pub fn from_dir(dir: &Path, config: &ModelConfig) -> Result<Self> {
        Self::from_tensors(TensorStore::from_dir(dir)?, config)
    }

    fn from_tensors(mut t: TensorStore, cfg: &ModelConfig) -> Result<Self> {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let embed_tokens = linear(&mut t, "model.embed_tokens", cfg.vocab_size, h)?;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for l in 0..cfg.num_hidden_layers {
            let p = format!("model.layers.{l}");
            layers.push(LayerWeights {
                input_layernorm: t.take(&format!("{p}.input_layernorm.weight"), &[h])?,
                q_proj: linear(&mut t, &format!("{p}.self_attn.q_proj"), cfg.q_width(), h)?,
                k_proj: linear(&mut t, &format!("{p}.self_attn.k_proj"), cfg.kv_width(), h)?,
                v_proj: linear(&mut t, &format!("{p}.self_attn.v_proj"), cfg.kv_width(), h)?,
                o_proj: linear(&mut t, &format!("{p}.self_attn.o_proj"), h, cfg.q_width())?,
                post_attention_layernorm: t.take(&format!("{p}.post_attention_layernorm.weight"), &[h])?,
                gate_proj: linear(&mut t, &format!("{p}.mlp.gate_proj"), i, h)?,
                up_proj: linear(&mut t, &format!("{p}.mlp.up_proj"), i, h)?,
                down_proj: linear(&mut t, &format!("{p}.mlp.down_proj"), h, i)?,
            });
        }
        let norm = t.take("model.norm.weight", &[h])?;
        // Tied checkpoints usually omit lm_head; some still ship a copy, which we ignore
        // so that the config, not the file, decides.
        let lm_head = if cfg.tie_word_embeddings || !t.contains("lm_head.weight") {
            None
        } else {
            Some(linear(&mut t, "lm_head", cfg.vocab_size, h)?)
        };
        Ok(ModelWeights { embed_tokens, layers, norm, lm_head })
    }
}

/// A `[out, in]` projection `{prefix}.weight`, with `{prefix}.bias` when the
/// checkpoint has one (Qwen2-style attention biases).
fn linear(t: &mut TensorStore, prefix: &str, out_features: usize, in_features: usize) -> Result<Linear> {
    let weight = t.take(&format!("{prefix}.weight"), &[out_features, in_features])?;
    let bias_name = format!("{prefix}.bias");
    let bias = if t.contains(&bias_name) { Some(t.take(&bias_name, &[out_features])?) } else { None };
    Linear::new(weight, bias, out_features, in_features)
}
