//! The model's shape, read from a Hugging Face `config.json`. Everything the
//! forward pass needs to size its buffers comes from here, validated once so
//! the kernels can index without re-checking.

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};

/// Hyper-parameters of a Llama-family decoder.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Width of the SwiGLU MLP's inner layer.
    pub intermediate_size: usize,
    /// Number of decoder layers.
    pub num_hidden_layers: usize,
    /// Number of query heads.
    pub num_attention_heads: usize,
    /// Number of key/value heads (grouped-query attention); equals the query heads for plain MHA.
    pub num_key_value_heads: usize,
    /// Width of one attention head.
    pub head_dim: usize,
    /// Epsilon inside RMSNorm's square root.
    pub rms_norm_eps: f32,
    /// Base of the rotary position embedding frequencies.
    pub rope_theta: f64,
    /// Number of rows of the embedding and output matrices.
    pub vocab_size: usize,
    /// Beginning-of-sequence token, prepended to prompts when present.
    pub bos_token_id: Option<u32>,
    /// End-of-sequence tokens; any of them stops greedy decoding.
    pub eos_token_ids: Vec<u32>,
    /// Whether the output projection reuses the input embedding matrix.
    pub tie_word_embeddings: bool,
    /// Longest sequence the model was trained for; longer inputs are refused.
    pub max_position_embeddings: usize,
}

/// `eos_token_id` is an integer in most configs and a list in newer chat models.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum TokenIds {
    One(u32),
    Many(Vec<u32>),
}

impl TokenIds {
    fn into_vec(self) -> Vec<u32> {
        match self {
            TokenIds::One(id) => vec![id],
            TokenIds::Many(ids) => ids,
        }
    }
}

/// Newer transformers releases move `rope_theta` into this object.
#[derive(Debug, Default, Deserialize)]
struct RopeParameters {
    rope_theta: Option<f64>,
}

/// The JSON as written; optional fields get their transformers defaults in [`ModelConfig::from_json`].
#[derive(Debug, Deserialize)]
struct RawConfig {
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    #[serde(default = "default_rms_norm_eps")]
    rms_norm_eps: f32,
    rope_theta: Option<f64>,
    rope_parameters: Option<RopeParameters>,
    vocab_size: usize,
    bos_token_id: Option<u32>,
    eos_token_id: Option<TokenIds>,
    #[serde(default)]
    tie_word_embeddings: bool,
    #[serde(default = "default_max_position_embeddings")]
    max_position_embeddings: usize,
}

fn default_rms_norm_eps() -> f32 {
    1e-6
}

fn default_max_position_embeddings() -> usize {
    2048
}

/// transformers' `LlamaConfig` default when neither place names a theta.
const DEFAULT_ROPE_THETA: f64 = 10_000.0;

impl ModelConfig {
    /// Checks that `n` more tokens after `start` cached positions form a
    /// non-empty sequence inside the context window; every backend's forward
    /// pass calls this first.
    pub fn check_sequence(&self, start: usize, n: usize) -> Result<()> {
        if n == 0 {
            return Err(model_err!("forward pass over zero tokens"));
        }
        if start.saturating_add(n) > self.max_position_embeddings {
            return Err(model_err!(
                "sequence of {} tokens exceeds max_position_embeddings {}",
                start.saturating_add(n),
                self.max_position_embeddings
            ));
        }
        Ok(())
    }

    /// Reads and validates `config.json` in a model directory.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(path.display(), e))?;
        Self::from_json(&text).map_err(|e| model_err!("{}: {e}", path.display()))
    }

    /// Parses the text of a `config.json`, filling transformers' defaults.
    pub fn from_json(text: &str) -> Result<Self> {
        let raw: RawConfig = serde_json::from_str(text).map_err(|e| model_err!("config.json: {e}"))?;
        let heads = raw.num_attention_heads;
        if heads == 0 || raw.hidden_size == 0 || raw.vocab_size == 0 {
            return Err(model_err!("config.json: hidden_size, num_attention_heads and vocab_size must be positive"));
        }
        let kv_heads = raw.num_key_value_heads.unwrap_or(heads);
        if kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
            return Err(model_err!(
                "config.json: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}"
            ));
        }
        let head_dim = raw.head_dim.unwrap_or(raw.hidden_size / heads);
        // RoPE rotates pairs (j, j + head_dim/2), so the head width must be even.
        if head_dim == 0 || !head_dim.is_multiple_of(2) {
            return Err(model_err!("config.json: head_dim {head_dim} must be even and positive"));
        }
        // The widths of the attention projections index every buffer: they must fit in a usize.
        if heads.checked_mul(head_dim).is_none() {
            return Err(model_err!("config.json: num_attention_heads {heads} x head_dim {head_dim} is too large"));
        }
        let rope_theta =
            raw.rope_theta.or(raw.rope_parameters.and_then(|p| p.rope_theta)).unwrap_or(DEFAULT_ROPE_THETA);
        // A negative epsilon takes the square root of a negative mean square, a theta of 0 or
        // less makes the rotation frequencies infinite or NaN: every activation would be NaN.
        if !(raw.rms_norm_eps.is_finite() && raw.rms_norm_eps >= 0.0) {
            return Err(model_err!("config.json: rms_norm_eps {} must be finite and non-negative", raw.rms_norm_eps));
        }
        if !(rope_theta.is_finite() && rope_theta > 0.0) {
            return Err(model_err!("config.json: rope_theta {rope_theta} must be finite and positive"));
        }
        Ok(ModelConfig {
            hidden_size: raw.hidden_size,
            intermediate_size: raw.intermediate_size,
            num_hidden_layers: raw.num_hidden_layers,
            num_attention_heads: heads,
            num_key_value_heads: kv_heads,
            head_dim,
            rms_norm_eps: raw.rms_norm_eps,
            rope_theta,
            vocab_size: raw.vocab_size,
            bos_token_id: raw.bos_token_id,
            eos_token_ids: raw.eos_token_id.map(TokenIds::into_vec).unwrap_or_default(),
            tie_word_embeddings: raw.tie_word_embeddings,
            max_position_embeddings: raw.max_position_embeddings,
        })
    }

    /// Query heads sharing one key/value head.
    pub fn group_size(&self) -> usize {
        self.num_attention_heads / self.num_key_value_heads
    }

    /// Width of the concatenated query heads (`q_proj` output).
    pub fn q_width(&self) -> usize {
        self.num_attention_heads * self.head_dim
    }

    /// Width of the concatenated key (or value) heads (`k_proj`/`v_proj` output).
    pub fn kv_width(&self) -> usize {
        self.num_key_value_heads * self.head_dim
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#""hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
        "num_attention_heads": 2, "vocab_size": 10"#;

    #[test]
    fn rope_theta_is_read_at_top_level() {
        let cfg = ModelConfig::from_json(&format!(r#"{{{BASE}, "rope_theta": 500000.0}}"#)).unwrap();
        assert_eq!(cfg.rope_theta, 500000.0);
    }

    #[test]
    fn rope_theta_is_read_from_rope_parameters() {
        let json = format!(r#"{{{BASE}, "rope_parameters": {{"rope_theta": 20000.0, "rope_type": "default"}}}}"#);
        assert_eq!(ModelConfig::from_json(&json).unwrap().rope_theta, 20000.0);
    }

    #[test]
    fn missing_fields_take_transformers_defaults() {
        let cfg = ModelConfig::from_json(&format!("{{{BASE}}}")).unwrap();
        assert_eq!(cfg.rope_theta, 10000.0);
        assert_eq!(cfg.num_key_value_heads, 2);
        assert_eq!(cfg.head_dim, 4);
        assert!(!cfg.tie_word_embeddings);
        assert_eq!(cfg.eos_token_ids, Vec::<u32>::new());
    }

    #[test]
    fn eos_token_id_may_be_a_list() {
        let cfg = ModelConfig::from_json(&format!(r#"{{{BASE}, "eos_token_id": [2, 7]}}"#)).unwrap();
        assert_eq!(cfg.eos_token_ids, vec![2, 7]);
        let cfg = ModelConfig::from_json(&format!(r#"{{{BASE}, "eos_token_id": 2}}"#)).unwrap();
        assert_eq!(cfg.eos_token_ids, vec![2]);
    }

    #[test]
    fn widths_over_usize_and_a_negative_epsilon_or_theta_are_refused() {
        // 2^32 query heads of width 2^32: 2^64 columns.
        let wide = r#"{"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "vocab_size": 10,
            "num_attention_heads": 4294967296, "head_dim": 4294967296}"#;
        assert!(ModelConfig::from_json(wide).unwrap_err().to_string().contains("too large"));
        for extra in [r#""rms_norm_eps": -1e-6"#, r#""rope_theta": 0.0"#, r#""rope_parameters": {"rope_theta": -1.0}"#]
        {
            let json = format!("{{{BASE}, {extra}}}");
            assert!(ModelConfig::from_json(&json).is_err(), "{json}");
        }
    }

    #[test]
    fn heads_not_divisible_by_kv_heads_are_refused() {
        let json = format!(r#"{{{BASE}, "num_key_value_heads": 3}}"#);
        assert!(ModelConfig::from_json(&json).is_err());
    }
}
