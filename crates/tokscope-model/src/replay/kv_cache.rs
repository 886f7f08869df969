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

/// The key/value cache of one sequence.
#[derive(Debug, Clone)]
pub struct KvCache {
    pub(crate) layers: Vec<LayerCache>,
    len: usize,
    kv_width: usize,
}

impl KvCache {
    /// An empty cache shaped for `config`.
    pub fn new(config: &ModelConfig) -> Self {
        KvCache { layers: vec![LayerCache::default(); config.num_hidden_layers], len: 0, kv_width: config.kv_width() }
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
            for layer in &mut self.layers {
                layer.keys.truncate(len * self.kv_width);
                layer.values.truncate(len * self.kv_width);
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
            .map(|(l, layer)| {
                if l < first_layer {
                    LayerCache::default()
                } else {
                    LayerCache { keys: layer.keys[..width].to_vec(), values: layer.values[..width].to_vec() }
                }
            })
            .collect();
        KvCache { layers, len: len.min(self.len), kv_width: self.kv_width }
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
