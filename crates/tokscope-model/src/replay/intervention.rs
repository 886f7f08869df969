//! Edits to the residual stream during a forward pass, for causal tracing
//! (ROME-style): corrupt the subject's input embeddings with noise, then
//! restore one layer's clean output at one position and see what recovers.

use crate::error::Result;

/// Noise added to the input embedding at one absolute position.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingNoise {
    /// Absolute position in the sequence (0 = BOS).
    pub position: usize,
    /// Added element-wise to the embedding; `hidden_size` values.
    pub delta: Vec<f32>,
}

/// A replacement for one decoder layer's output at one position.
#[derive(Debug, Clone, PartialEq)]
pub struct HiddenPatch {
    /// Decoder layer index; the patch replaces that layer's output (the
    /// residual stream after layer `layer`, before the next layer or the final norm).
    pub layer: usize,
    /// Absolute position in the sequence.
    pub position: usize,
    /// The new hidden state; `hidden_size` values.
    pub hidden: Vec<f32>,
}

/// Everything a forward pass should change in the residual stream.
/// The default is no change, i.e. a clean run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Intervention {
    /// Applied to the embeddings before the first layer.
    pub embedding_noise: Vec<EmbeddingNoise>,
    /// Applied after the named layers, in order.
    pub hidden_patches: Vec<HiddenPatch>,
}

impl Intervention {
    /// Checks widths and layer indices once, so the forward pass can apply
    /// the edits without bounds failures.
    pub(crate) fn validate(&self, hidden_size: usize, num_layers: usize) -> Result<()> {
        for noise in &self.embedding_noise {
            if noise.delta.len() != hidden_size {
                return Err(model_err!(
                    "embedding noise at position {} has {} values, hidden_size is {hidden_size}",
                    noise.position,
                    noise.delta.len()
                ));
            }
        }
        for patch in &self.hidden_patches {
            if patch.layer >= num_layers || patch.hidden.len() != hidden_size {
                return Err(model_err!(
                    "hidden patch for layer {} position {} has {} values; the model has {num_layers} layers of width {hidden_size}",
                    patch.layer,
                    patch.position,
                    patch.hidden.len()
                ));
            }
        }
        Ok(())
    }

    /// Adds the noise that falls in the chunk `[start, start + rows)` of `embeddings`.
    pub(crate) fn add_embedding_noise(&self, embeddings: &mut [f32], start: usize, hidden_size: usize) {
        for noise in &self.embedding_noise {
            if let Some(row) = chunk_row(embeddings, noise.position, start, hidden_size) {
                row.iter_mut().zip(&noise.delta).for_each(|(x, d)| *x += d);
            }
        }
    }

    /// Overwrites layer `layer`'s output rows that have a patch in this chunk.
    pub(crate) fn patch_layer_output(&self, layer: usize, hidden: &mut [f32], start: usize, hidden_size: usize) {
        for patch in self.hidden_patches.iter().filter(|p| p.layer == layer) {
            if let Some(row) = chunk_row(hidden, patch.position, start, hidden_size) {
                row.copy_from_slice(&patch.hidden);
            }
        }
    }
}

/// The row of absolute `position` in a chunk starting at `start`, if the chunk holds it.
fn chunk_row(rows: &mut [f32], position: usize, start: usize, width: usize) -> Option<&mut [f32]> {
    let i = position.checked_sub(start)?;
    rows.get_mut(i * width..(i + 1) * width)
}
