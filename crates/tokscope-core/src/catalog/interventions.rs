//! `interventions`: one row per measured causal-mediation run (docs/mediation.md).
//! Written by `tokscope mediate` (or imported from an external tool's JSONL),
//! read by the `mediation` job.

use serde::{Deserialize, Serialize};

use super::columns::table;

/// The intervention kinds a row may hold.
pub const KINDS: [&str; 6] = ["clean", "corrupt", "restore", "perturb", "weight-noise", "skip-layer"];

/// The paths a `weight-noise` or `skip-layer` row's change reached the output by.
pub const PATHS: [&str; 2] = ["total", "direct"];

/// One measured run. `layer`/`position` are `None` where they do not apply:
/// clean and corrupt runs have neither; a layer-level restore (every corrupted
/// position restored at `layer`), a perturbation and a changed layer have no
/// position; a heatmap cell has both. `weight`, `sigma` and `path` belong to
/// the per-layer changes (`weight-noise`, `skip-layer`) only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterventionRow {
    /// Identifies the prompt (tokscope uses the first 16 hex digits of its SHA-256).
    pub prompt_id: String,
    /// The logged request it came from, if any.
    #[serde(default)]
    pub request_id: Option<String>,
    /// Decoder layer restored or perturbed.
    #[serde(default)]
    pub layer: Option<i32>,
    /// Restored position (absolute, BOS = 0).
    #[serde(default)]
    pub position: Option<i32>,
    /// One of [`KINDS`].
    pub intervention: String,
    /// Outcome metric name (`target_prob`, `continuation_logprob`, `bleu4`, `p_eos`, or any).
    pub metric: String,
    /// The outcome `y` of this run.
    pub value: f64,
    /// Noise / perturbation sample index (for `weight-noise`, the noise seed's draw).
    #[serde(default)]
    pub sample: i32,
    /// The perturbed matrix of a `weight-noise` row (`mlp.gate`, `attn.q`, ...).
    #[serde(default)]
    pub weight: Option<String>,
    /// Standard deviation of a `weight-noise` row's noise.
    #[serde(default)]
    pub sigma: Option<f64>,
    /// `total` or `direct` ([`PATHS`]) for `weight-noise` and `skip-layer` rows.
    #[serde(default)]
    pub path: Option<String>,
}

table! {
    /// One row per measured mediation run (clean, corrupted, restored, perturbed, layer changed by one path).
    pub table InterventionsBuilder(r: &InterventionRow) {
        name: "interventions",
        key: ["prompt_id", "metric", "intervention", "weight", "sigma", "layer", "position", "path", "sample"],
        partition: None,
        written_by: Mediate,
    } {
        /// Identifies the prompt: the first 16 hex digits of the SHA-256 of its text.
        prompt_id: Utf8 = r.prompt_id.as_str(),
        /// The logged request it came from, if any.
        request_id: Utf8 nullable = r.request_id.as_deref(),
        /// Decoder layer restored, perturbed or changed; null for clean and corrupt runs.
        layer: Int32 nullable = r.layer,
        /// Restored position (absolute, BOS = 0); null except for heatmap cells.
        position: Int32 nullable = r.position,
        /// clean|corrupt|restore|perturb|weight-noise|skip-layer.
        intervention: Utf8 [Dictionary] = r.intervention.as_str(),
        /// Outcome metric (target_prob, continuation_logprob, bleu4, p_eos, sacrebleu, sacrebleu_ref, or any imported name).
        metric: Utf8 [Dictionary] = r.metric.as_str(),
        /// The outcome y of this run.
        value: Float64 = r.value,
        /// Noise / perturbation sample index; weight-noise: the noise seed's draw (one perturbed model for every prompt).
        sample: Int32 = r.sample,
        /// weight-noise: the perturbed matrix (attn.q|attn.k|attn.v|attn.o|mlp.gate|mlp.up|mlp.down); null otherwise.
        weight: Utf8 nullable [Dictionary] = r.weight.as_deref(),
        /// weight-noise: standard deviation of the noise; null otherwise.
        sigma: Float64 nullable = r.sigma,
        /// weight-noise and skip-layer: total (every path) or direct (the residual stream's direct path to the unembedding only); null otherwise.
        path: Utf8 nullable [Dictionary] = r.path.as_deref(),
    }
}
