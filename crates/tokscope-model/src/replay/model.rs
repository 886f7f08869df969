//! The Llama-family forward pass on the CPU: embeddings, `L` decoder layers
//! (RMSNorm, grouped-query attention with RoPE, SwiGLU MLP, residual adds),
//! final norm and output projection. One entry point handles both a batched
//! prefill of a whole prompt and the one-token steps of decoding, because both
//! are "run these new positions against the cache".

use std::path::Path;

use rayon::prelude::*;

use super::config::ModelConfig;
use super::intervention::Intervention;
use super::kernels::{apply_rope, rms_norm, rope_inv_freq, silu, softmax_in_place};
use super::kv_cache::{KvCache, LayerCache};
use super::linear::{dot, Linear};
use super::weights::{LayerWeights, ModelWeights};
use crate::error::Result;

/// Below this many (query, key) dot products attention runs on the calling thread.
const PARALLEL_MIN_ATTENTION_PAIRS: usize = 4096;

/// Which positions of a forward pass get logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogitsFor {
    /// Only the last new position: all that decoding needs, and it skips
    /// a `[positions, vocab]` projection that dominates long prefills.
    #[default]
    LastPosition,
    /// Every new position, for scoring and comparisons.
    AllPositions,
}

/// What a forward pass should compute besides the cache update.
#[derive(Debug, Clone, Copy, Default)]
pub struct ForwardOptions<'a> {
    /// Positions that get logits.
    pub logits: LogitsFor,
    /// Also return the residual stream after each layer.
    pub hidden_states: bool,
    /// Edits to the residual stream (causal tracing); `None` for a clean run.
    pub intervention: Option<&'a Intervention>,
    /// A change to one decoder layer (weight noise, or the layer skipped) for
    /// per-layer mediation; `None` runs the model as it is. A sequence must
    /// run every one of its forward passes with the same edit (its keys and
    /// values are cached).
    pub layer_edit: Option<&'a LayerEdit>,
    /// Which paths `layer_edit` reaches the output by.
    pub edit_path: EditPath,
}

tokscope_core::named_enum! {
    /// One projection matrix of a decoder layer, by the name `--weight` takes.
    pub enum LayerMatrix as "weight" {
        /// Attention query projection.
        AttnQ = "attn.q",
        /// Attention key projection.
        AttnK = "attn.k",
        /// Attention value projection.
        AttnV = "attn.v",
        /// Attention output projection.
        AttnO = "attn.o",
        /// SwiGLU gate projection.
        MlpGate = "mlp.gate",
        /// SwiGLU up projection.
        MlpUp = "mlp.up",
        /// SwiGLU down projection.
        MlpDown = "mlp.down",
    }
}

impl LayerMatrix {
    /// The matrix in `layer`'s weights.
    fn of(self, layer: &LayerWeights) -> &Linear {
        match self {
            LayerMatrix::AttnQ => &layer.q_proj,
            LayerMatrix::AttnK => &layer.k_proj,
            LayerMatrix::AttnV => &layer.v_proj,
            LayerMatrix::AttnO => &layer.o_proj,
            LayerMatrix::MlpGate => &layer.gate_proj,
            LayerMatrix::MlpUp => &layer.up_proj,
            LayerMatrix::MlpDown => &layer.down_proj,
        }
    }
}

/// `delta` is added to one projection matrix of one layer during a forward
/// pass: the projection becomes `W x + D x = (W + D) x`. Only this one matrix
/// is held, so perturbing a layer never copies (or mutates) the model's weights.
#[derive(Debug, Clone)]
pub struct WeightDelta {
    /// Decoder layer whose matrix is perturbed.
    pub layer: usize,
    /// Which of its matrices.
    pub matrix: LayerMatrix,
    /// `D`, shaped like the matrix (`[out, in]`, no bias).
    pub delta: Linear,
}

/// A change to one decoder layer.
#[derive(Debug, Clone)]
pub enum LayerEdit {
    /// One of the layer's matrices plus a delta.
    Weight(WeightDelta),
    /// The layer replaced by the identity on the residual stream: its
    /// attention and MLP add nothing.
    Skip {
        /// The skipped layer.
        layer: usize,
    },
}

impl LayerEdit {
    /// The edited layer.
    pub fn layer(&self) -> usize {
        match self {
            LayerEdit::Weight(delta) => delta.layer,
            LayerEdit::Skip { layer } => *layer,
        }
    }
}

/// The paths by which a [`LayerEdit`] of layer `L` reaches the output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EditPath {
    /// Every path: the layers above `L` read the edited stream (the total effect).
    #[default]
    Total,
    /// The residual stream's direct path to the final norm only (path
    /// patching): the layers above `L` read the stream of the unedited layer,
    /// so each computes its clean output, and `d = edited output - clean
    /// output` of layer `L` (on the same input) is added to the stream after
    /// the last layer, before the final norm (docs/mediation.md).
    Direct,
}

/// The result of one forward pass over `n` new positions.
#[derive(Debug, Clone)]
pub struct ForwardOutput {
    /// One vocab-size row per requested position ([`LogitsFor`]).
    pub logits: Vec<Vec<f32>>,
    /// With [`ForwardOptions::hidden_states`]: `hidden_states[k][i]` is the
    /// residual stream of new position `i` after `k` layers (`k = 0`: the
    /// embeddings, after any noise), before the final norm. Empty otherwise.
    /// With [`EditPath::Direct`] these are the streams the layers read, without
    /// the edit's direct contribution (which only the final norm sees).
    pub hidden_states: Vec<Vec<Vec<f32>>>,
}

/// A loaded Llama-family causal language model.
#[derive(Debug, Clone)]
pub struct LlamaModel {
    config: ModelConfig,
    weights: ModelWeights,
    inv_freq: Vec<f32>,
}

impl LlamaModel {
    /// Loads `config.json` and the safetensors weights of a model directory.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let config = ModelConfig::from_dir(dir)?;
        let weights = ModelWeights::from_dir(dir, &config)?;
        Ok(Self::new(config, weights))
    }

    /// Assembles a model from parts already loaded (the loader checks shapes against the config).
    pub fn new(config: ModelConfig, weights: ModelWeights) -> Self {
        let inv_freq = rope_inv_freq(config.rope_theta, config.head_dim);
        LlamaModel { config, weights, inv_freq }
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The weights (read-only), e.g. to upload them to another device.
    pub fn weights(&self) -> &ModelWeights {
        &self.weights
    }

    /// Number of parameters (a tied output projection counted once).
    pub fn parameter_count(&self) -> usize {
        self.weights.parameter_count()
    }

    /// An empty key/value cache for one sequence.
    pub fn new_cache(&self) -> KvCache {
        KvCache::new(&self.config)
    }

    /// Runs `tokens` at the positions following those in `cache`, appends
    /// their keys and values to it, and returns what `options` asks for.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache, options: ForwardOptions<'_>) -> Result<ForwardOutput> {
        let mut outputs = self.forward_batch(&[tokens], &mut [cache], options)?;
        Ok(outputs.pop().expect("one output per sequence"))
    }

    /// [`Self::forward`] for several sequences at once, each after the
    /// positions of its own cache (`tokens[s]` runs on `caches[s]`; lengths
    /// and cached positions may differ). Their rows are stacked, so every
    /// projection is one matrix-matrix product over all rows of all sequences
    /// and each weight is read once per pass for the whole batch; attention
    /// reads each sequence's own cache, so sequences never see each other.
    /// Every row is computed as in a pass of its sequence alone (the kernels'
    /// summation order does not depend on the row count), so the outputs are
    /// bit-identical to one [`Self::forward`] per sequence. `options` apply
    /// to every sequence (an intervention's positions are each sequence's own).
    /// Nothing runs, and no cache changes, unless every sequence is valid.
    pub fn forward_batch(
        &self,
        tokens: &[&[u32]],
        caches: &mut [&mut KvCache],
        options: ForwardOptions<'_>,
    ) -> Result<Vec<ForwardOutput>> {
        let cfg = &self.config;
        let h = cfg.hidden_size;
        if tokens.len() != caches.len() || tokens.is_empty() {
            return Err(model_err!("a batch of {} token lists and {} caches", tokens.len(), caches.len()));
        }
        for (seq, cache) in tokens.iter().zip(caches.iter()) {
            cfg.check_sequence(cache.len(), seq.len())?;
            if !cache.fits(cfg) {
                return Err(model_err!("KV cache was made for a model of another shape"));
            }
            if let Some(&t) = seq.iter().find(|&&t| t as usize >= cfg.vocab_size) {
                return Err(model_err!("token id {t} is outside the vocabulary of {}", cfg.vocab_size));
            }
        }
        self.validate(options)?;
        let rows = StackedRows::new(tokens.iter().zip(caches.iter()).map(|(seq, cache)| (cache.len(), seq.len())));

        let mut x = Vec::with_capacity(rows.len() * h);
        for &t in tokens.iter().copied().flatten() {
            self.weights.embed_tokens.extend_row(t as usize, &mut x);
        }
        if let Some(intervention) = options.intervention {
            for (s, range) in rows.ranges().enumerate() {
                intervention.add_embedding_noise(&mut x[range.start * h..range.end * h], rows.starts[s], h);
            }
        }
        let mut hidden_states = Vec::new();
        if options.hidden_states {
            hidden_states.push(split_rows(&x, h));
        }
        self.run_layers(&mut x, &rows, 0, caches, options, &mut hidden_states);
        for (cache, range) in caches.iter_mut().zip(rows.ranges()) {
            cache.advance(range.len());
        }
        Ok(self.finish(x, &rows, options, hidden_states))
    }

    /// Runs layers `first_layer..L` (then the final norm and head) over the
    /// positions `start..start + n`, starting from `residual`, their `[n, hidden]`
    /// residual stream entering layer `first_layer` (i.e. after `first_layer`
    /// layers); attention reads the keys and values of positions `< start` from
    /// `prefix` (layers `>= first_layer`; it must hold at least `start`
    /// positions and is not modified). Causal tracing uses it to restore a clean
    /// state at layer `l` and position `i` in a corrupted run: layers `0..=l`
    /// and positions `< i` are exactly the corrupted run's, so only layers
    /// `l + 1..L` at positions `i..T` are computed. Embedding noise is not
    /// applied (it is already in `residual`); hidden patches and `gate_delta`
    /// for layers `>= first_layer` are. `hidden_states[k]` then holds the
    /// stream of positions `start..` after `first_layer + k` layers.
    /// `first_layer == L` only applies the head. A [`LayerEdit`] of a layer
    /// below `first_layer` has no effect.
    pub fn forward_from_layer(
        &self,
        prefix: &KvCache,
        start: usize,
        residual: &[f32],
        first_layer: usize,
        options: ForwardOptions<'_>,
    ) -> Result<ForwardOutput> {
        let cfg = &self.config;
        let h = cfg.hidden_size;
        if residual.is_empty() || !residual.len().is_multiple_of(h) {
            return Err(model_err!(
                "residual stream of {} values is not a non-empty multiple of hidden_size {h}",
                residual.len()
            ));
        }
        let n = residual.len() / h;
        if first_layer > cfg.num_hidden_layers {
            return Err(model_err!("cannot start at layer {first_layer} of {}", cfg.num_hidden_layers));
        }
        if !prefix.fits(cfg) || prefix.len() < start {
            return Err(model_err!("the prefix cache holds {} positions, {start} needed", prefix.len()));
        }
        cfg.check_sequence(start, n)?;
        self.validate(options)?;
        let mut x = residual.to_vec();
        let mut hidden_states = Vec::new();
        if options.hidden_states {
            hidden_states.push(split_rows(&x, h));
        }
        // Layers below first_layer stay empty in the scratch cache and are never read.
        let mut cache = prefix.prefix(start, first_layer);
        let rows = StackedRows::new([(start, n)]);
        self.run_layers(&mut x, &rows, first_layer, &mut [&mut cache], options, &mut hidden_states);
        Ok(self.finish(x, &rows, options, hidden_states).pop().expect("one sequence"))
    }

    /// Checks an intervention's and a layer edit's shapes against the model.
    fn validate(&self, options: ForwardOptions<'_>) -> Result<()> {
        let cfg = &self.config;
        if let Some(intervention) = options.intervention {
            intervention.validate(cfg.hidden_size, cfg.num_hidden_layers)?;
        }
        if let Some(edit) = options.layer_edit {
            let layer = self.weights.layers.get(edit.layer()).ok_or_else(|| {
                model_err!("cannot edit layer {} of a {}-layer model", edit.layer(), cfg.num_hidden_layers)
            })?;
            if let LayerEdit::Weight(d) = edit {
                let w = d.matrix.of(layer);
                if (d.delta.out_features(), d.delta.in_features()) != (w.out_features(), w.in_features()) {
                    return Err(model_err!(
                        "{} delta of layer {} is {} x {}, the matrix {} x {}",
                        d.matrix,
                        d.layer,
                        d.delta.out_features(),
                        d.delta.in_features(),
                        w.out_features(),
                        w.in_features()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Runs layers `first_layer..L` over the stacked rows of every sequence.
    fn run_layers(
        &self,
        x: &mut [f32],
        rows: &StackedRows,
        first_layer: usize,
        caches: &mut [&mut KvCache],
        options: ForwardOptions<'_>,
        hidden_states: &mut Vec<Vec<Vec<f32>>>,
    ) {
        let h = self.config.hidden_size;
        // With EditPath::Direct: the edited layer's output minus its clean output.
        let mut direct: Option<Vec<f32>> = None;
        for (l, layer) in self.weights.layers.iter().enumerate().skip(first_layer) {
            let mut layer_caches: Vec<&mut LayerCache> = caches.iter_mut().map(|c| &mut c.layers[l]).collect();
            match (options.layer_edit.filter(|e| e.layer() == l), options.edit_path) {
                (None, _) => self.layer_block(layer, x, rows, &mut layer_caches, None),
                (Some(LayerEdit::Skip { .. }), EditPath::Total) => {
                    // The identity adds nothing; the layer's cache rows (never
                    // read: this sequence skips the layer at every position)
                    // keep every layer at the same length.
                    for (cache, range) in layer_caches.iter_mut().zip(rows.ranges()) {
                        cache.push_zeros(range.len() * self.config.kv_width());
                    }
                }
                (Some(LayerEdit::Weight(delta)), EditPath::Total) => {
                    self.layer_block(layer, x, rows, &mut layer_caches, Some(delta));
                }
                (Some(edit), EditPath::Direct) => {
                    // The edited layer on the same (clean) input, with keys and
                    // values of its own; the stream goes on with the clean output.
                    let mut edited = x.to_vec();
                    if let LayerEdit::Weight(delta) = edit {
                        let mut own: Vec<&mut LayerCache> = caches.iter_mut().map(|c| &mut c.direct).collect();
                        self.layer_block(layer, &mut edited, rows, &mut own, Some(delta));
                    }
                    let mut layer_caches: Vec<&mut LayerCache> = caches.iter_mut().map(|c| &mut c.layers[l]).collect();
                    self.layer_block(layer, x, rows, &mut layer_caches, None);
                    edited.iter_mut().zip(x.iter()).for_each(|(e, c)| *e -= c);
                    direct = Some(edited);
                }
            }
            if let Some(intervention) = options.intervention {
                for (s, range) in rows.ranges().enumerate() {
                    intervention.patch_layer_output(l, &mut x[range.start * h..range.end * h], rows.starts[s], h);
                }
            }
            if options.hidden_states {
                hidden_states.push(split_rows(x, h));
            }
        }
        if let Some(d) = direct {
            // The edit's only path to the output: the residual stream, straight to the final norm.
            x.iter_mut().zip(&d).for_each(|(a, b)| *a += b);
        }
    }

    /// One decoder layer: `x += attention(x)`, then `x += mlp(x)`, with
    /// `delta` added to its matrix.
    fn layer_block(
        &self,
        layer: &LayerWeights,
        x: &mut [f32],
        rows: &StackedRows,
        caches: &mut [&mut LayerCache],
        delta: Option<&WeightDelta>,
    ) {
        self.attention_block(layer, x, rows, caches, delta);
        self.mlp_block(layer, x, rows.len(), delta);
    }

    /// Final norm and output projection of the rows `options` asks for (all
    /// sequences' in one product), split back into one output per sequence.
    fn finish(
        &self,
        x: Vec<f32>,
        rows: &StackedRows,
        options: ForwardOptions<'_>,
        mut hidden_states: Vec<Vec<Vec<f32>>>,
    ) -> Vec<ForwardOutput> {
        let (cfg, h) = (&self.config, self.config.hidden_size);
        let (selected, per_sequence): (Vec<f32>, Vec<usize>) = match options.logits {
            LogitsFor::LastPosition => {
                let last = rows.ranges().flat_map(|r| x[(r.end - 1) * h..r.end * h].iter().copied()).collect();
                (last, vec![1; rows.sequences()])
            }
            LogitsFor::AllPositions => (x, rows.ranges().map(|r| r.len()).collect()),
        };
        let normed = rms_norm(&selected, &self.weights.norm, cfg.rms_norm_eps);
        let head = self.weights.output_projection();
        let mut logits = split_rows(&head.forward(&normed, normed.len() / h), head.out_features());
        // Split from the back, so each split moves only the last sequence's rows.
        let mut outputs: Vec<ForwardOutput> = rows
            .ranges()
            .zip(per_sequence)
            .rev()
            .map(|(range, count)| ForwardOutput {
                logits: logits.split_off(logits.len() - count),
                hidden_states: hidden_states.iter_mut().map(|layer| layer.split_off(range.start)).collect(),
            })
            .collect();
        outputs.reverse();
        outputs
    }

    /// A [`WeightDelta`] for `matrix` of `layer` whose values are `noise()`
    /// drawn row-major (`[out, in]`), so callers can perturb a matrix without
    /// seeing the model's weights.
    pub fn weight_delta(
        &self,
        layer: usize,
        matrix: LayerMatrix,
        mut noise: impl FnMut() -> f32,
    ) -> Result<WeightDelta> {
        let weights = self.weights.layers.get(layer).ok_or_else(|| model_err!("no layer {layer} to perturb"))?;
        let w = matrix.of(weights);
        let (out, inp) = (w.out_features(), w.in_features());
        let values = (0..out * inp).map(|_| noise()).collect();
        Ok(WeightDelta { layer, matrix, delta: Linear::new(values, None, out, inp)? })
    }

    /// Standard deviation of every value in the input embedding matrix; the
    /// default corruption noise is a multiple of it (Meng et al. 2022 use 3x).
    pub fn embedding_std(&self) -> f64 {
        let e = &self.weights.embed_tokens;
        let rows = e.out_features();
        let (mut sum, mut sum_sq, mut count) = (0.0f64, 0.0f64, 0usize);
        for r in 0..rows {
            for v in e.row_f32(r) {
                sum += v as f64;
                sum_sq += (v as f64) * (v as f64);
                count += 1;
            }
        }
        if count < 2 {
            return 0.0;
        }
        let mean = sum / count as f64;
        // Sample variance (n - 1), like torch.std's default.
        ((sum_sq - count as f64 * mean * mean) / (count as f64 - 1.0)).max(0.0).sqrt()
    }

    /// A fingerprint of every weight (sum of bit patterns), for tests that
    /// check a run left the model's weights untouched.
    pub fn weights_checksum(&self) -> u64 {
        let w = &self.weights;
        let mut sum = 0u64;
        let mut add = |m: &Linear| {
            for r in 0..m.out_features() {
                for v in m.row_f32(r) {
                    sum = sum.wrapping_mul(31).wrapping_add(v.to_bits() as u64);
                }
            }
        };
        add(&w.embed_tokens);
        for layer in &w.layers {
            for m in [
                &layer.q_proj,
                &layer.k_proj,
                &layer.v_proj,
                &layer.o_proj,
                &layer.gate_proj,
                &layer.up_proj,
                &layer.down_proj,
            ] {
                add(m);
            }
        }
        sum
    }

    /// `x += o_proj(attention(rope(q), rope(k), v))` over each sequence's cache
    /// plus its new positions.
    fn attention_block(
        &self,
        layer: &LayerWeights,
        x: &mut [f32],
        rows: &StackedRows,
        caches: &mut [&mut LayerCache],
        delta: Option<&WeightDelta>,
    ) {
        let cfg = &self.config;
        let (hd, qw, kvw, n) = (cfg.head_dim, cfg.q_width(), cfg.kv_width(), rows.len());
        let normed = rms_norm(x, &layer.input_layernorm, cfg.rms_norm_eps);
        let mut q = project(layer, LayerMatrix::AttnQ, delta, &normed, n);
        let mut k = project(layer, LayerMatrix::AttnK, delta, &normed, n);
        let v = project(layer, LayerMatrix::AttnV, delta, &normed, n);
        for (r, &(_, position)) in rows.positions.iter().enumerate() {
            apply_rope(&mut q[r * qw..(r + 1) * qw], position, &self.inv_freq);
            apply_rope(&mut k[r * kvw..(r + 1) * kvw], position, &self.inv_freq);
        }
        for (cache, range) in caches.iter_mut().zip(rows.ranges()) {
            cache.keys.extend_from_slice(&k[range.start * kvw..range.end * kvw]);
            cache.values.extend_from_slice(&v[range.start * kvw..range.end * kvw]);
        }

        let caches: Vec<&LayerCache> = caches.iter().map(|c| &**c).collect();
        let (heads, group) = (cfg.num_attention_heads, cfg.group_size());
        let scale = 1.0 / (hd as f32).sqrt();
        let mut attn = vec![0.0f32; n * qw];
        // One task per (row, query head): it owns head_dim outputs.
        let head_output = |(idx, out): (usize, &mut [f32])| {
            let (r, head) = (idx / heads, idx % heads);
            let (sequence, position) = rows.positions[r];
            let (keys, values) = (&caches[sequence].keys, &caches[sequence].values);
            let query = &q[r * qw + head * hd..r * qw + (head + 1) * hd];
            let kv_offset = (head / group) * hd;
            // Causal mask: a position sees its own sequence's keys 0..=position.
            let visible = position + 1;
            let mut scores: Vec<f32> = (0..visible)
                .map(|s| dot(query, &keys[s * kvw + kv_offset..s * kvw + kv_offset + hd]) * scale)
                .collect();
            softmax_in_place(&mut scores);
            for (s, p) in scores.iter().enumerate() {
                let value = &values[s * kvw + kv_offset..s * kvw + kv_offset + hd];
                out.iter_mut().zip(value).for_each(|(o, v)| *o += p * v);
            }
        };
        let pairs: usize = heads * rows.positions.iter().map(|&(_, p)| p + 1).sum::<usize>();
        if pairs < PARALLEL_MIN_ATTENTION_PAIRS {
            attn.chunks_mut(hd).enumerate().for_each(head_output);
        } else {
            attn.par_chunks_mut(hd).enumerate().for_each(head_output);
        }
        let projected = project(layer, LayerMatrix::AttnO, delta, &attn, n);
        x.iter_mut().zip(&projected).for_each(|(a, b)| *a += b);
    }

    /// `x += down(silu(gate(norm(x))) * up(norm(x)))` over `n` rows.
    fn mlp_block(&self, layer: &LayerWeights, x: &mut [f32], n: usize, delta: Option<&WeightDelta>) {
        let normed = rms_norm(x, &layer.post_attention_layernorm, self.config.rms_norm_eps);
        let mut gate = project(layer, LayerMatrix::MlpGate, delta, &normed, n);
        let up = project(layer, LayerMatrix::MlpUp, delta, &normed, n);
        gate.iter_mut().zip(&up).for_each(|(g, u)| *g = silu(*g) * u);
        let down = project(layer, LayerMatrix::MlpDown, delta, &gate, n);
        x.iter_mut().zip(&down).for_each(|(a, b)| *a += b);
    }
}

/// The rows of a forward pass, every sequence's new positions stacked in
/// order: sequence `s` owns rows `offsets[s]..offsets[s + 1]` of the
/// `[rows, hidden]` activations, at positions `starts[s]..` of its own cache.
struct StackedRows {
    offsets: Vec<usize>,
    starts: Vec<usize>,
    /// Per row: its sequence and absolute position.
    positions: Vec<(usize, usize)>,
}

impl StackedRows {
    /// From each sequence's `(cached positions, new positions)`.
    fn new(sequences: impl IntoIterator<Item = (usize, usize)>) -> Self {
        let (mut offsets, mut starts, mut positions) = (vec![0], Vec::new(), Vec::new());
        for (s, (start, n)) in sequences.into_iter().enumerate() {
            positions.extend((start..start + n).map(|p| (s, p)));
            offsets.push(positions.len());
            starts.push(start);
        }
        StackedRows { offsets, starts, positions }
    }

    /// Rows of all sequences.
    fn len(&self) -> usize {
        self.positions.len()
    }

    fn sequences(&self) -> usize {
        self.starts.len()
    }

    /// Each sequence's rows.
    fn ranges(&self) -> impl DoubleEndedIterator<Item = std::ops::Range<usize>> + ExactSizeIterator + '_ {
        self.offsets.windows(2).map(|w| w[0]..w[1])
    }
}

/// `matrix` of `layer` applied to `n` rows of `input`, plus `delta` when it is
/// that matrix's: `(W + D) x = W x + D x`, without a copy of `W`.
fn project(
    layer: &LayerWeights,
    matrix: LayerMatrix,
    delta: Option<&WeightDelta>,
    input: &[f32],
    n: usize,
) -> Vec<f32> {
    let mut out = matrix.of(layer).forward(input, n);
    if let Some(delta) = delta.filter(|d| d.matrix == matrix) {
        out.iter_mut().zip(&delta.delta.forward(input, n)).for_each(|(o, e)| *o += e);
    }
    out
}

fn split_rows(flat: &[f32], width: usize) -> Vec<Vec<f32>> {
    flat.chunks_exact(width).map(<[f32]>::to_vec).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::replay::intervention::{EmbeddingNoise, HiddenPatch};
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;

    const HIDDEN: usize = 8;
    const INTERMEDIATE: usize = 12;
    const VOCAB: usize = 11;
    const KV_WIDTH: usize = 4; // 1 kv head of width 4, shared by 2 query heads

    /// Deterministic values in [-0.5, 0.5) (xorshift), so tests need no fixtures.
    fn pseudo_random(len: usize, seed: &mut u64) -> Vec<f32> {
        (0..len)
            .map(|_| {
                *seed ^= *seed << 13;
                *seed ^= *seed >> 7;
                *seed ^= *seed << 17;
                (*seed % 10_000) as f32 / 10_000.0 - 0.5
            })
            .collect()
    }

    /// How the tiny checkpoint is stored on disk.
    #[derive(Clone, Copy)]
    enum Storage {
        /// One `model.safetensors`, f32.
        SingleF32,
        /// Two bf16 shards named by `model.safetensors.index.json`.
        ShardedBf16,
    }

    /// Writes a 1-layer, hidden-8, 2-head, 1-kv-head model with tied embeddings
    /// (no `lm_head.weight` in the file) into `dir`. Weights are rounded to bf16
    /// values so every storage holds exactly the same numbers.
    fn write_tiny_tied_model(dir: &Path, storage: Storage) {
        let config = format!(
            r#"{{"hidden_size": {HIDDEN}, "intermediate_size": {INTERMEDIATE}, "num_hidden_layers": 1,
               "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": {VOCAB},
               "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "bos_token_id": 1, "eos_token_id": 2,
               "tie_word_embeddings": true, "max_position_embeddings": 32}}"#
        );
        std::fs::write(dir.join("config.json"), config).unwrap();
        let shapes: Vec<(&str, Vec<usize>)> = vec![
            ("model.embed_tokens.weight", vec![VOCAB, HIDDEN]),
            ("model.layers.0.input_layernorm.weight", vec![HIDDEN]),
            ("model.layers.0.self_attn.q_proj.weight", vec![HIDDEN, HIDDEN]),
            ("model.layers.0.self_attn.k_proj.weight", vec![KV_WIDTH, HIDDEN]),
            ("model.layers.0.self_attn.v_proj.weight", vec![KV_WIDTH, HIDDEN]),
            ("model.layers.0.self_attn.o_proj.weight", vec![HIDDEN, HIDDEN]),
            ("model.layers.0.post_attention_layernorm.weight", vec![HIDDEN]),
            ("model.layers.0.mlp.gate_proj.weight", vec![INTERMEDIATE, HIDDEN]),
            ("model.layers.0.mlp.up_proj.weight", vec![INTERMEDIATE, HIDDEN]),
            ("model.layers.0.mlp.down_proj.weight", vec![HIDDEN, INTERMEDIATE]),
            ("model.norm.weight", vec![HIDDEN]),
        ];
        let mut seed = 0x9E37_79B9_7F4A_7C15;
        let (dtype, bytes): (Dtype, Vec<Vec<u8>>) = {
            let values = shapes.iter().map(|(_, shape)| {
                // Scale 2 so attention and the MLP do visibly non-linear things.
                let v = pseudo_random(shape.iter().product(), &mut seed);
                v.into_iter().map(|x| half::bf16::from_f32(2.0 * x)).collect::<Vec<_>>()
            });
            match storage {
                Storage::SingleF32 => {
                    (Dtype::F32, values.map(|v| v.iter().flat_map(|x| x.to_f32().to_le_bytes()).collect()).collect())
                }
                Storage::ShardedBf16 => {
                    (Dtype::BF16, values.map(|v| v.iter().flat_map(|x| x.to_le_bytes()).collect()).collect())
                }
            }
        };
        let views: Vec<(&str, TensorView<'_>)> = shapes
            .iter()
            .zip(&bytes)
            .map(|((name, shape), data)| (*name, TensorView::new(dtype, shape.clone(), data).unwrap()))
            .collect();
        match storage {
            Storage::SingleF32 => {
                safetensors::serialize_to_file(views, None, &dir.join("model.safetensors")).unwrap();
            }
            Storage::ShardedBf16 => {
                // Embeddings and the layer in one shard, the final norm in the other.
                let (first, second) = views.split_at(views.len() - 1);
                let mut weight_map = serde_json::Map::new();
                for (file, part) in
                    [("model-00001-of-00002.safetensors", first), ("model-00002-of-00002.safetensors", second)]
                {
                    for (name, _) in part {
                        weight_map.insert(name.to_string(), file.into());
                    }
                    safetensors::serialize_to_file(part.iter().cloned(), None, &dir.join(file)).unwrap();
                }
                let index = serde_json::json!({ "metadata": {}, "weight_map": weight_map });
                std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
            }
        }
    }

    fn tiny_model_stored(storage: Storage) -> LlamaModel {
        let dir = tempfile::tempdir().unwrap();
        write_tiny_tied_model(dir.path(), storage);
        LlamaModel::from_dir(dir.path()).unwrap()
    }

    pub(crate) fn tiny_model() -> LlamaModel {
        tiny_model_stored(Storage::SingleF32)
    }

    /// Logits of [`TOKENS`] after the first `prefill`, run one at a time through the cache
    /// (one row per position from `prefill - 1`).
    fn stepped_logits(model: &LlamaModel, prefill: usize, options: ForwardOptions<'_>) -> Vec<Vec<f32>> {
        let mut cache = model.new_cache();
        let mut stepped = model.forward(&TOKENS[..prefill], &mut cache, options).unwrap().logits;
        for &t in &TOKENS[prefill..] {
            stepped.extend(model.forward(&[t], &mut cache, options).unwrap().logits);
        }
        assert_eq!(cache.len(), TOKENS.len());
        stepped
    }

    fn all_logits(model: &LlamaModel, tokens: &[u32]) -> Vec<Vec<f32>> {
        let options = ForwardOptions { logits: LogitsFor::AllPositions, ..Default::default() };
        model.forward(tokens, &mut model.new_cache(), options).unwrap().logits
    }

    fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
    }

    const TOKENS: [u32; 6] = [1, 5, 9, 3, 10, 4];

    #[test]
    fn tied_checkpoint_uses_embeddings_as_output_projection() {
        let model = tiny_model();
        assert!(model.config.tie_word_embeddings);
        assert!(model.weights.lm_head.is_none());
        assert!(std::ptr::eq(model.weights.output_projection(), &model.weights.embed_tokens));
    }

    #[test]
    fn sharded_bf16_checkpoint_loads_the_same_model() {
        let single = tiny_model();
        let sharded = tiny_model_stored(Storage::ShardedBf16);
        assert!(sharded.weights.lm_head.is_none());
        assert_eq!(all_logits(&sharded, &TOKENS), all_logits(&single, &TOKENS));
    }

    #[test]
    fn cached_incremental_decode_equals_full_recompute() {
        let model = tiny_model();
        let full = all_logits(&model, &TOKENS);
        // Prefill two tokens, then feed the rest one at a time through the cache.
        let stepped = stepped_logits(&model, 2, ForwardOptions::default());
        for (i, row) in stepped.iter().enumerate() {
            let d = max_abs_diff(row, &full[i + 1]);
            assert!(d < 1e-5, "position {}: max diff {d}", i + 1);
        }
    }

    #[test]
    fn truncated_cache_recomputes_the_same_logits() {
        let model = tiny_model();
        let mut cache = model.new_cache();
        let first = model.forward(&TOKENS, &mut cache, ForwardOptions::default()).unwrap().logits;
        cache.truncate(4);
        let again = model.forward(&TOKENS[4..], &mut cache, ForwardOptions::default()).unwrap().logits;
        assert!(max_abs_diff(&first[0], &again[0]) < 1e-6);
    }

    #[test]
    fn hidden_states_hold_embeddings_then_each_layer_output() {
        let model = tiny_model();
        let options = ForwardOptions { hidden_states: true, ..Default::default() };
        let out = model.forward(&TOKENS, &mut model.new_cache(), options).unwrap();
        assert_eq!(out.hidden_states.len(), 2);
        assert_eq!(out.hidden_states[0][2], model.weights.embed_tokens.row_f32(TOKENS[2] as usize));
        // Final norm + output projection of the last layer's output gives the logits.
        let last = &out.hidden_states[1][TOKENS.len() - 1];
        let normed = rms_norm(last, &model.weights.norm, model.config.rms_norm_eps);
        let logits = model.weights.output_projection().forward(&normed, 1);
        assert!(max_abs_diff(&logits, &out.logits[0]) < 1e-6);
    }

    #[test]
    fn restoring_clean_layer_output_undoes_embedding_noise_at_that_position() {
        let model = tiny_model();
        let clean_options = ForwardOptions { hidden_states: true, ..Default::default() };
        let clean = model.forward(&TOKENS[..2], &mut model.new_cache(), clean_options).unwrap();
        let noise = vec![EmbeddingNoise { position: 1, delta: vec![1.0; HIDDEN] }];
        let corrupted = Intervention { embedding_noise: noise.clone(), hidden_patches: vec![] };
        let run = |iv: &Intervention| {
            let options = ForwardOptions { intervention: Some(iv), ..Default::default() };
            model.forward(&TOKENS[..2], &mut model.new_cache(), options).unwrap().logits
        };
        assert!(max_abs_diff(&run(&corrupted)[0], &clean.logits[0]) > 1e-3);
        // Position 0 is untouched by the noise, so restoring layer 0 at position 1 restores everything.
        let restored = Intervention {
            embedding_noise: noise,
            hidden_patches: vec![HiddenPatch { layer: 0, position: 1, hidden: clean.hidden_states[1][1].clone() }],
        };
        assert!(max_abs_diff(&run(&restored)[0], &clean.logits[0]) < 1e-6);
    }

    #[test]
    fn forward_from_layer_continues_a_run_from_its_hidden_states() {
        let model = tiny_model();
        let options = ForwardOptions { hidden_states: true, logits: LogitsFor::AllPositions, ..Default::default() };
        let mut cache = model.new_cache();
        let full = model.forward(&TOKENS, &mut cache, options).unwrap();
        let empty = model.new_cache();
        for k in 0..=1 {
            let residual = full.hidden_states[k].concat();
            let resumed = model.forward_from_layer(&empty, 0, &residual, k, options).unwrap();
            for (a, b) in resumed.logits.iter().zip(&full.logits) {
                assert_eq!(a, b, "resumed at layer {k}");
            }
            assert_eq!(resumed.hidden_states.last(), full.hidden_states.last());
            // Resumed at position 4 too, reading positions 0..4 from the full run's cache.
            let tail = full.hidden_states[k][4..].concat();
            let resumed = model.forward_from_layer(&cache, 4, &tail, k, options).unwrap();
            assert_eq!(resumed.logits, full.logits[4..], "resumed at layer {k}, position 4");
            assert_eq!(cache.len(), TOKENS.len(), "the prefix cache is left as it was");
        }
        assert!(model.forward_from_layer(&empty, 0, &[0.0; 3], 0, options).is_err());
        assert!(model.forward_from_layer(&empty, 0, &full.hidden_states[0].concat(), 2, options).is_err());
        assert!(model.forward_from_layer(&empty, 1, &full.hidden_states[0][1..].concat(), 0, options).is_err());
    }

    fn run_edited(model: &LlamaModel, edit: &LayerEdit, path: EditPath) -> Vec<Vec<f32>> {
        let options = ForwardOptions {
            logits: LogitsFor::AllPositions,
            layer_edit: Some(edit),
            edit_path: path,
            ..Default::default()
        };
        model.forward(&TOKENS, &mut model.new_cache(), options).unwrap().logits
    }

    fn noise_edit(model: &LlamaModel, matrix: LayerMatrix, value: f32) -> LayerEdit {
        LayerEdit::Weight(model.weight_delta(0, matrix, || value).unwrap())
    }

    #[test]
    fn a_zero_delta_is_exact_and_a_nonzero_one_changes_the_output_for_every_matrix() {
        let model = tiny_model();
        let clean = all_logits(&model, &TOKENS);
        for &matrix in LayerMatrix::ALL {
            // Direct path: d = (x + f(x)) - (x + f(x)) = 0 exactly; adding it changes nothing.
            for path in [EditPath::Total, EditPath::Direct] {
                assert_eq!(run_edited(&model, &noise_edit(&model, matrix, 0.0), path), clean, "{matrix} {path:?}");
            }
            let moved = run_edited(&model, &noise_edit(&model, matrix, 0.1), EditPath::Total);
            assert!(max_abs_diff(&moved[5], &clean[5]) > 1e-4, "{matrix}");
        }
        assert!(model.weight_delta(1, LayerMatrix::MlpGate, || 0.0).is_err());
    }

    #[test]
    fn an_edit_of_the_top_layer_has_no_layer_above_it_to_mediate() {
        // One layer: the direct path is every path, so the two runs agree (up to the
        // rounding of adding d = edited - clean back onto the clean output).
        let model = tiny_model();
        for edit in [noise_edit(&model, LayerMatrix::AttnK, 0.1), LayerEdit::Skip { layer: 0 }] {
            let total = run_edited(&model, &edit, EditPath::Total);
            let direct = run_edited(&model, &edit, EditPath::Direct);
            for (t, d) in total.iter().zip(&direct) {
                assert!(max_abs_diff(t, d) < 1e-5, "{edit:?}: {}", max_abs_diff(t, d));
            }
        }
    }

    #[test]
    fn skipping_the_only_layer_reads_the_embeddings_out() {
        let model = tiny_model();
        let logits = run_edited(&model, &LayerEdit::Skip { layer: 0 }, EditPath::Total);
        for (i, &t) in TOKENS.iter().enumerate() {
            let embedding = model.weights.embed_tokens.row_f32(t as usize);
            let normed = rms_norm(&embedding, &model.weights.norm, model.config.rms_norm_eps);
            let by_hand = model.weights.output_projection().forward(&normed, 1);
            assert!(max_abs_diff(&logits[i], &by_hand) < 1e-6, "position {i}");
        }
    }

    #[test]
    fn cached_decoding_under_an_edit_equals_one_pass_over_the_sequence() {
        // The direct path keeps the edited layer's keys and values apart from the clean ones.
        let model = tiny_model();
        for edit in [noise_edit(&model, LayerMatrix::AttnV, 0.2), LayerEdit::Skip { layer: 0 }] {
            for path in [EditPath::Total, EditPath::Direct] {
                let full = run_edited(&model, &edit, path);
                let options = ForwardOptions { layer_edit: Some(&edit), edit_path: path, ..Default::default() };
                for (i, row) in stepped_logits(&model, 3, options).iter().enumerate() {
                    let d = max_abs_diff(row, &full[i + 2]);
                    assert!(d < 1e-5, "{edit:?} {path:?} position {}: {d}", i + 2);
                }
            }
        }
    }

    #[test]
    fn an_edit_of_a_missing_layer_or_of_the_wrong_shape_is_refused() {
        let model = tiny_model();
        let run = |edit: &LayerEdit| {
            let options = ForwardOptions { layer_edit: Some(edit), ..Default::default() };
            model.forward(&TOKENS, &mut model.new_cache(), options)
        };
        assert!(run(&LayerEdit::Skip { layer: 1 }).is_err());
        let mut wrong = model.weight_delta(0, LayerMatrix::MlpGate, || 0.0).unwrap();
        wrong.matrix = LayerMatrix::MlpDown;
        assert!(run(&LayerEdit::Weight(wrong)).is_err());
    }

    /// A random model built in memory: `layers` layers of width `hidden`,
    /// `heads` query heads sharing `kv_heads` key/value heads (grouped-query
    /// attention), an untied output projection.
    pub(crate) fn random_model(layers: usize, hidden: usize, heads: usize, kv_heads: usize, seed: u64) -> LlamaModel {
        let (inter, vocab) = (3 * hidden, 53);
        let config = ModelConfig::from_json(&format!(
            r#"{{"hidden_size": {hidden}, "intermediate_size": {inter}, "num_hidden_layers": {layers},
               "num_attention_heads": {heads}, "num_key_value_heads": {kv_heads}, "vocab_size": {vocab},
               "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "bos_token_id": 1, "eos_token_id": 2,
               "tie_word_embeddings": false, "max_position_embeddings": 64}}"#
        ))
        .unwrap();
        let mut seed = seed;
        let mut matrix =
            |out: usize, inp: usize| Linear::new(pseudo_random(out * inp, &mut seed), None, out, inp).unwrap();
        let (qw, kvw) = (config.q_width(), config.kv_width());
        let layers = (0..layers)
            .map(|_| LayerWeights {
                input_layernorm: vec![1.0; hidden],
                q_proj: matrix(qw, hidden),
                k_proj: matrix(kvw, hidden),
                v_proj: matrix(kvw, hidden),
                o_proj: matrix(hidden, qw),
                post_attention_layernorm: vec![1.0; hidden],
                gate_proj: matrix(inter, hidden),
                up_proj: matrix(inter, hidden),
                down_proj: matrix(hidden, inter),
            })
            .collect();
        let weights = ModelWeights {
            embed_tokens: matrix(vocab, hidden),
            layers,
            norm: vec![1.0; hidden],
            lm_head: Some(matrix(vocab, hidden)),
        };
        LlamaModel::new(config, weights)
    }

    fn bits(rows: &[Vec<f32>]) -> Vec<Vec<u32>> {
        rows.iter().map(|r| r.iter().map(|v| v.to_bits()).collect()).collect()
    }

    /// Sequences of different lengths, after different numbers of cached
    /// positions (none, 2, 5), in one pass: each gets the logits and hidden
    /// states of its own pass, bit for bit, and its cache the same keys and
    /// values; then decode steps of all three at once, likewise.
    fn check_batch_equals_one_at_a_time(model: &LlamaModel) {
        let sequences: [&[u32]; 3] = [&[1, 5, 9, 3, 10, 4, 7], &[2, 8, 8, 1], &[6, 3, 9, 1, 1, 2, 5, 4, 10]];
        let cached = [0, 2, 5];
        let options = ForwardOptions { logits: LogitsFor::AllPositions, hidden_states: true, ..Default::default() };
        let prefixed = |s: usize| {
            let mut cache = model.new_cache();
            if cached[s] > 0 {
                model.forward(&sequences[s][..cached[s]], &mut cache, options).unwrap();
            }
            cache
        };
        let mut alone: Vec<KvCache> = (0..3).map(prefixed).collect();
        let mut together: Vec<KvCache> = (0..3).map(prefixed).collect();
        let expected: Vec<ForwardOutput> =
            (0..3).map(|s| model.forward(&sequences[s][cached[s]..], &mut alone[s], options).unwrap()).collect();
        let tails: Vec<&[u32]> = (0..3).map(|s| &sequences[s][cached[s]..]).collect();
        let got = model.forward_batch(&tails, &mut together.iter_mut().collect::<Vec<_>>(), options).unwrap();
        assert_eq!(got.len(), 3);
        for s in 0..3 {
            assert_eq!(bits(&got[s].logits), bits(&expected[s].logits), "sequence {s} logits");
            assert_eq!(got[s].logits.len(), tails[s].len());
            assert_eq!(got[s].hidden_states, expected[s].hidden_states, "sequence {s} hidden states");
            assert_eq!(together[s].len(), sequences[s].len());
            for (a, b) in together[s].layers.iter().zip(&alone[s].layers) {
                assert_eq!((&a.keys, &a.values), (&b.keys, &b.values), "sequence {s} cache");
            }
        }
        // Decode steps: one token each, last-position logits.
        for step in 0..3u32 {
            let ids: Vec<[u32; 1]> = (0..3).map(|s| [(step * 3 + s + 1) % 11]).collect();
            let expected: Vec<Vec<Vec<f32>>> = (0..3)
                .map(|s| model.forward(&ids[s], &mut alone[s], ForwardOptions::default()).unwrap().logits)
                .collect();
            let tokens: Vec<&[u32]> = ids.iter().map(|t| &t[..]).collect();
            let got = model
                .forward_batch(&tokens, &mut together.iter_mut().collect::<Vec<_>>(), ForwardOptions::default())
                .unwrap();
            for s in 0..3 {
                assert_eq!(bits(&got[s].logits), bits(&expected[s]), "step {step} sequence {s}");
            }
        }
    }

    #[test]
    fn a_batch_of_sequences_of_different_lengths_equals_each_alone_bit_for_bit() {
        check_batch_equals_one_at_a_time(&tiny_model());
        check_batch_equals_one_at_a_time(&tiny_model_stored(Storage::ShardedBf16));
    }

    #[test]
    fn a_batch_on_grouped_query_attention_checkpoints_equals_each_alone_bit_for_bit() {
        // 4 query heads on 2 KV heads, and 8 on 1; width 48 (not a multiple of the
        // 16-row blocks, an eight-lane tail in head_dim 12) and 64.
        check_batch_equals_one_at_a_time(&random_model(2, 48, 4, 2, 7));
        check_batch_equals_one_at_a_time(&random_model(3, 64, 8, 1, 11));
    }

    #[test]
    fn a_batch_with_one_bad_sequence_runs_nothing() {
        let model = tiny_model();
        let (mut a, mut b) = (model.new_cache(), model.new_cache());
        let tokens: [&[u32]; 2] = [&[1, 2, 3], &[VOCAB as u32]];
        assert!(model.forward_batch(&tokens, &mut [&mut a, &mut b], ForwardOptions::default()).is_err());
        assert_eq!((a.len(), a.layers[0].keys.len()), (0, 0), "the valid sequence's cache is untouched");
        let empty: [&[u32]; 2] = [&[1], &[]];
        assert!(model.forward_batch(&empty, &mut [&mut a, &mut b], ForwardOptions::default()).is_err());
        assert!(model.forward_batch(&tokens[..1], &mut [&mut a, &mut b], ForwardOptions::default()).is_err());
    }

    #[test]
    fn out_of_vocabulary_token_is_an_error_not_a_panic() {
        let model = tiny_model();
        assert!(model.forward(&[VOCAB as u32], &mut model.new_cache(), ForwardOptions::default()).is_err());
    }

    #[test]
    fn patch_for_a_missing_layer_is_refused() {
        let model = tiny_model();
        let bad = Intervention {
            embedding_noise: vec![],
            hidden_patches: vec![HiddenPatch { layer: 1, position: 0, hidden: vec![0.0; HIDDEN] }],
        };
        let options = ForwardOptions { intervention: Some(&bad), ..Default::default() };
        assert!(model.forward(&TOKENS, &mut model.new_cache(), options).is_err());
    }
}
