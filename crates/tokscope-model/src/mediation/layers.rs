//! Per-layer direct and indirect effects (docs/mediation.md, "Per-layer
//! effects"): one decoder layer at a time is changed (noise on one of its
//! matrices, or the layer skipped) and each change is measured twice, by
//! every path (the total effect) and by the residual stream's direct path to
//! the unembedding alone (path patching: the direct effect). Storing the
//! outcomes as rows is the `tokscope` crate's `mediation::mediate`.

use super::interventions::{weight_noise, Metric, Subject};
use crate::error::Result;
use crate::replay::{EditPath, ForwardOptions, LayerEdit, LayerMatrix, LlamaModel, ReplayModel};

/// How each layer is changed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LayerChange {
    /// `N(0, sigma^2)` noise added to one matrix; one draw per seed.
    WeightNoise {
        /// The perturbed matrix of each layer.
        matrix: LayerMatrix,
        /// Standard deviation of the noise.
        sigma: f64,
    },
    /// The layer replaced by the identity on the residual stream (deterministic: one draw).
    Skip,
}

/// Seed of noise draw `sample` of `matrix` in `layer`:
/// `base ^ (layer << 40) ^ (i << 32) ^ sample`, `i` the matrix's index in
/// [`LayerMatrix::ALL`] (attn.q 0 .. mlp.down 6). It depends on neither the
/// prompt nor the metric: draw `sample` is one perturbed model, the same for
/// every prompt.
pub fn noise_seed(base: u64, layer: usize, matrix: LayerMatrix, sample: usize) -> u64 {
    let index = LayerMatrix::ALL.iter().position(|&m| m == matrix).unwrap_or(0) as u64;
    base ^ ((layer as u64) << 40) ^ (index << 32) ^ sample as u64
}

impl LayerChange {
    /// Draws the change of `layer` (`sample`: the noise draw; [`LayerChange::Skip`] has one).
    pub fn edit(self, model: &LlamaModel, layer: usize, base_seed: u64, sample: usize) -> Result<LayerEdit> {
        match self {
            LayerChange::WeightNoise { matrix, sigma } => {
                let seed = noise_seed(base_seed, layer, matrix, sample);
                Ok(LayerEdit::Weight(weight_noise(model, layer, matrix, sigma, seed)?))
            }
            LayerChange::Skip => {
                if layer >= model.config().num_hidden_layers {
                    return Err(config_err!("no layer {layer} to skip"));
                }
                Ok(LayerEdit::Skip { layer })
            }
        }
    }

    /// Noise draws per layer: `seeds` for weight noise, 1 for a skipped layer.
    pub fn draws(self, seeds: usize) -> usize {
        match self {
            LayerChange::WeightNoise { .. } => seeds,
            LayerChange::Skip => 1,
        }
    }
}

/// The outcome of one changed layer, by each path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathOutcomes {
    /// `y` with the change reaching the output by every path.
    pub total: f64,
    /// `y` with the change reaching the output by the residual stream's direct path only.
    pub direct: f64,
}

/// Measures `metric` of `subject` under `edit` by the total and the direct path.
/// With TE = `total - y(clean)` and DE = `direct - y(clean)`, IE = TE - DE =
/// `total - direct`.
pub fn measure_paths(
    replay: &ReplayModel,
    subject: &Subject,
    metric: Metric,
    edit: &LayerEdit,
) -> Result<PathOutcomes> {
    let run = |edit_path| {
        let options = ForwardOptions { layer_edit: Some(edit), edit_path, ..Default::default() };
        subject.measure(replay, metric, options)
    };
    Ok(PathOutcomes { total: run(EditPath::Total)?, direct: run(EditPath::Direct)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_seeds_differ_per_layer_matrix_and_draw_and_ignore_nothing_else() {
        assert_eq!(noise_seed(0, 0, LayerMatrix::AttnQ, 0), 0);
        assert_eq!(noise_seed(0, 3, LayerMatrix::MlpGate, 2), (3 << 40) | (4 << 32) | 2);
        assert_eq!(noise_seed(5, 0, LayerMatrix::AttnK, 0), 5 ^ (1 << 32));
        assert_ne!(noise_seed(0, 1, LayerMatrix::MlpUp, 0), noise_seed(0, 1, LayerMatrix::MlpUp, 1));
    }
}
