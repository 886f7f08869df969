//! Keys and values of every position already seen, per layer, so decoding a
//! new token costs one position's projections instead of the whole prefix.

use super::config::ModelConfig;

/// One layer's cached keys and values, row-major `[position, kv_heads * head_dim]`
/// (keys already rotated by RoPE).
#[derive(Debug, Clone, Default)]
pub(crate) struct LayerCache {
    pub(crate) keys: Vec<f32>,
    pub(crate) values: Vec<f32>,
}

impl LayerCache {
    /// Appends `len` zero keys and values (a skipped layer's rows).
    pub(crate) fn push_zeros(&mut self, len: usize) {
        self.keys.resize(self.keys.len() + len, 0.0);
        self.values.resize(self.values.len() + len, 0.0);
    }

    fn truncate(&mut self, len: usize) {
        self.keys.truncate(len);
        self.values.truncate(len);
    }

    /// The first `len` values of keys and values, copied.
    fn prefix(&self, len: usize) -> LayerCache {
        let take = |v: &[f32]| v[..len.min(v.len())].to_vec();
        LayerCache { keys: take(&self.keys), values: take(&self.values) }
    }
}

/// The key/value cache of one sequence.
#[derive(Debug, Clone)]
pub struct KvCache {
    pub(crate) layers: Vec<LayerCache>,
    /// The edited layer's own keys and values when an edit reaches the output
    /// by the direct path only (`EditPath::Direct`): that layer runs twice,
    /// edited and clean, and the clean run's go in `layers`.
    pub(crate) direct: LayerCache,
    len: usize,
    kv_width: usize,
}

/// About what replaying one sequence of `tokens` positions holds at its
/// peak, in bytes: its key/value cache (f32, every layer) and the prefill's
/// activations of one layer at a time (hidden states, the projections, the
/// MLP's gate and up rows, one head's attention scores) and the logits of a
/// position. An estimate for sizing how many sequences run at once, not a
/// bound.
pub fn sequence_bytes(config: &ModelConfig, tokens: usize) -> usize {
    let f32s = 4;
    let kv = config.num_hidden_layers * 2 * tokens * config.kv_width() * f32s;
    let activations = tokens * (6 * config.hidden_size + 3 * config.intermediate_size) * f32s;
    let scores = tokens * tokens * f32s;
    kv + activations + scores + config.vocab_size * f32s
}

impl KvCache {
    /// An empty cache shaped for `config`.
    pub fn new(config: &ModelConfig) -> Self {
        KvCache {
            layers: vec![LayerCache::default(); config.num_hidden_layers],
            direct: LayerCache::default(),
            len: 0,
            kv_width: config.kv_width(),
        }
    }

    /// Number of positions cached; the next token goes at this position.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True before the first forward pass.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets every position from `len` on, e.g. to score several
    /// continuations of one prompt after a single prefill.
    pub fn truncate(&mut self, len: usize) {
        if len < self.len {
            for layer in self.layers.iter_mut().chain([&mut self.direct]) {
                layer.truncate(len * self.kv_width);
            }
            self.len = len;
        }
    }

    /// The first `len` positions of layers `first_layer..`, copied (layers
    /// below `first_layer` left empty): the read-only prefix a resumed forward
    /// pass appends to without touching the cache it came from.
    pub(crate) fn prefix(&self, len: usize, first_layer: usize) -> KvCache {
        let width = len.min(self.len) * self.kv_width;
        let layers = self
            .layers
            .iter()
            .enumerate()
            .map(|(l, layer)| if l < first_layer { LayerCache::default() } else { layer.prefix(width) })
            .collect();
        KvCache { layers, direct: self.direct.prefix(width), len: len.min(self.len), kv_width: self.kv_width }
    }

    /// Whether this cache has the layer count and key width of `config`.
    pub(crate) fn fits(&self, config: &ModelConfig) -> bool {
        self.layers.len() == config.num_hidden_layers && self.kv_width == config.kv_width()
    }

    /// Records that a forward pass appended `n` positions to every layer.
    pub(crate) fn advance(&mut self, n: usize) {
        self.len += n;
    }
}

#[cfg(test)]
mod tests {
    use super::{sequence_bytes, ModelConfig};

    #[test]
    fn a_sequence_holds_its_cache_its_activations_and_one_heads_scores() {
        let config = ModelConfig::from_json(
            r#"{"hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
                "max_position_embeddings": 512}"#,
        )
        .unwrap();
        // kv width 2 heads x 16 = 32; by hand, f32:
        // cache 2 layers x 2 x 10 x 32, activations 10 x (6 x 64 + 3 x 256), scores 10 x 10, logits 100.
        let by_hand = 4 * (2 * 2 * 10 * 32 + 10 * (6 * 64 + 3 * 256) + 10 * 10 + 100);
        assert_eq!(sequence_bytes(&config, 10), by_hand);
    }
}
