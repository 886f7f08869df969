//! `interventions`: one row per measured causal-mediation run (docs/mediation.md).
//! Written by `tokscope mediate` (or imported from an external tool's JSONL),
//! read by the `mediation` job.

use serde::{Deserialize, Serialize};

use super::columns::table;

/// The intervention kinds a row may hold.
pub const KINDS: [&str; 4] = ["clean", "corrupt", "restore", "perturb"];

/// One measured run. `layer`/`position` are `None` where they do not apply:
/// clean and corrupt runs have neither; a layer-level restore (every corrupted
/// position restored at `layer`) and a perturbation have no position; a
/// heatmap cell has both.
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
    /// `clean`, `corrupt`, `restore` or `perturb`.
    pub intervention: String,
    /// Outcome metric name (`target_prob`, `continuation_logprob`, `bleu4`, `p_eos`, or any).
    pub metric: String,
    /// The outcome `y` of this run.
    pub value: f64,
    /// Noise / perturbation sample index; effects average over samples first.
    #[serde(default)]
    pub sample: i32,
}

table! {
    /// One row per measured mediation run (clean, corrupted, restored, perturbed).
    pub table InterventionsBuilder(r: &InterventionRow) {
        name: "interventions",
        key: ["prompt_id", "metric", "intervention", "layer", "position", "sample"],
        partition: None,
        written_by: Mediate,
    } {
        /// Identifies the prompt: the first 16 hex digits of the SHA-256 of its text.
        prompt_id: Utf8 = r.prompt_id.as_str(),
        /// The logged request it came from, if any.
        request_id: Utf8 nullable = r.request_id.as_deref(),
        /// Decoder layer restored or perturbed; null for clean and corrupt runs.
        layer: Int32 nullable = r.layer,
        /// Restored position (absolute, BOS = 0); null except for heatmap cells.
        position: Int32 nullable = r.position,
        /// clean|corrupt|restore|perturb.
        intervention: Utf8 [Dictionary] = r.intervention.as_str(),
        /// Outcome metric (target_prob, continuation_logprob, bleu4, p_eos, or any imported name).
        metric: Utf8 [Dictionary] = r.metric.as_str(),
        /// The outcome y of this run.
        value: Float64 = r.value,
        /// Noise / perturbation sample index; effects average over samples first.
        sample: Int32 = r.sample,
    }
}
