//! `tokscope mediate` as a library procedure: select logged requests, run
//! the clean / corrupted / restored / perturbed measurements for each, and
//! return the `interventions` rows (docs/mediation.md).

use tokscope_core::catalog::interventions::InterventionRow;

use super::interventions::{gaussian_noise, subject_positions, weight_noise, Metric, Subject};
use super::table;
use crate::dataset::DatasetRoot;
use crate::error::Result;
use crate::progress::Progress;
use crate::replay::{self, ForwardOptions, HiddenPatch, Intervention, LayerEdit, LayerMatrix, ReplayModel};

tokscope_core::named_enum! {
    /// Which interventions [`mediate`] runs.
    pub enum Kind as "intervention" {
        /// Clean and corrupted runs (total effect).
        Corrupt = "corrupt",
        /// Corrupted runs with each layer restored (indirect effects); implies corrupt.
        Restore = "restore",
        /// Gate-weight perturbation of each layer.
        Perturb = "perturb",
    }
}

/// Settings of a mediation run.
#[derive(Debug, Clone)]
pub struct MediateOptions {
    /// SQL condition on `requests` selecting the prompts (besides a non-null prompt).
    pub filter: Option<String>,
    /// At most this many requests (ordered by request_id).
    pub limit: usize,
    /// Interventions to run.
    pub kinds: Vec<Kind>,
    /// Outcome metric.
    pub metric: Metric,
    /// Text whose tokens are corrupted where it occurs; otherwise every prompt
    /// token between BOS and the last one.
    pub subject: Option<String>,
    /// Noise / perturbation samples per prompt.
    pub samples: usize,
    /// Base seed of noise and perturbations.
    pub seed: u64,
    /// Noise std as a multiple of the embedding matrix's std.
    pub noise_scale: f64,
    /// Std of the gate-weight perturbation.
    pub sigma: f64,
    /// Also restore every (layer, position) cell (heatmap rows).
    pub cells: bool,
    /// Greedy budget for the bleu4 metric.
    pub max_new_tokens: usize,
    /// Show progress over the selected prompts on a terminal ([`crate::progress`]).
    pub progress: bool,
}

/// Runs the interventions for the requests of `dataset` that `options`
/// selects. A request that cannot be measured (too long, nothing to corrupt)
/// is reported through `skipped` and does not stop the others.
pub fn mediate(
    replay: &ReplayModel,
    dataset: &DatasetRoot,
    options: &MediateOptions,
    rt: &tokio::runtime::Runtime,
    mut skipped: impl FnMut(&str, &crate::Error),
) -> Result<Vec<InterventionRow>> {
    let predicate = match &options.filter {
        Some(f) => format!("prompt IS NOT NULL AND ({f})"),
        None => "prompt IS NOT NULL".to_string(),
    };
    let requests = rt.block_on(replay::verdicts::select_suspects(dataset, Some(&predicate), Some(options.limit)))?;
    let progress = Progress::items(options.progress, requests.len() as u64, "prompts");
    let mut rows = Vec::new();
    for r in requests {
        progress.inc(1);
        let (Some(prompt), output) = (r.prompt.as_deref(), r.model_output.as_deref().unwrap_or_default()) else {
            continue;
        };
        match mediate_one(replay, options, &r.request_id, prompt, output) {
            Ok(measured) => rows.extend(measured),
            Err(e) => progress.suspend(|| skipped(&r.request_id, &e)),
        }
    }
    Ok(rows)
}

/// All intervention rows for one request.
pub fn mediate_one(
    replay: &ReplayModel,
    options: &MediateOptions,
    request_id: &str,
    prompt: &str,
    output: &str,
) -> Result<Vec<InterventionRow>> {
    let model = &replay.model;
    let (layers, hidden) = (model.config().num_hidden_layers, model.config().hidden_size);
    let prompt_ids = replay.tokenizer.encode_prompt(prompt)?;
    let mut continuation_ids = replay.tokenizer.encode_continuation(output)?;
    // Keep prompt + continuation inside the model's positions (the cut point moves earlier).
    continuation_ids.truncate(model.config().max_position_embeddings.saturating_sub(prompt_ids.len()));
    let positions = match &options.subject {
        Some(s) => subject_positions(&replay.tokenizer, prompt, s)?,
        // The context before the cut point: BOS carries nothing to corrupt,
        // and corrupting the last token too would leave restores nothing to mediate.
        None => (1..prompt_ids.len().saturating_sub(1)).collect(),
    };
    let subject = Subject::new(model, prompt_ids.clone(), continuation_ids, options.max_new_tokens)?;
    let pid = table::prompt_id(prompt);
    let metric = options.metric;
    let row = |intervention: &str, layer: Option<usize>, position: Option<usize>, sample: usize, value: f64| {
        InterventionRow {
            prompt_id: pid.clone(),
            request_id: Some(request_id.to_string()),
            layer: layer.map(|l| l as i32),
            position: position.map(|p| p as i32),
            intervention: intervention.into(),
            metric: metric.name().into(),
            value,
            sample: sample as i32,
        }
    };
    let mut rows = vec![row("clean", None, None, 0, subject.measure(model, metric, None, None)?)];
    // Per-prompt seeds: distinct prompts get independent noise, reruns the same.
    let prompt_seed = u64::from_str_radix(&pid, 16).unwrap_or(0) ^ options.seed;
    let wants = |k: Kind| options.kinds.contains(&k);
    if wants(Kind::Corrupt) || wants(Kind::Restore) {
        if positions.is_empty() {
            return Err(config_err!("prompt too short: no token to corrupt"));
        }
        let clean = model.forward(
            &prompt_ids,
            &mut model.new_cache(),
            ForwardOptions { hidden_states: true, ..Default::default() },
        )?;
        let std = options.noise_scale * model.embedding_std();
        for s in 0..options.samples {
            let noise = gaussian_noise(&positions, hidden, std, prompt_seed.wrapping_add(s as u64))?;
            let corrupted = Intervention { embedding_noise: noise.clone(), hidden_patches: vec![] };
            rows.push(row(
                Kind::Corrupt.name(),
                None,
                None,
                s,
                subject.measure(model, metric, Some(&corrupted), None)?,
            ));
            if !wants(Kind::Restore) {
                continue;
            }
            let restore = |l: usize, at: &[usize]| -> Result<f64> {
                let patches = at
                    .iter()
                    .map(|&i| HiddenPatch { layer: l, position: i, hidden: clean.hidden_states[l + 1][i].clone() })
                    .collect();
                let iv = Intervention { embedding_noise: noise.clone(), hidden_patches: patches };
                Ok(subject.measure(model, metric, Some(&iv), None)?)
            };
            for l in 0..layers {
                rows.push(row(Kind::Restore.name(), Some(l), None, s, restore(l, &positions)?));
                if options.cells {
                    for i in 0..prompt_ids.len() {
                        rows.push(row(Kind::Restore.name(), Some(l), Some(i), s, restore(l, &[i])?));
                    }
                }
            }
        }
    }
    if wants(Kind::Perturb) {
        for l in 0..layers {
            for s in 0..options.samples {
                let seed = prompt_seed.wrapping_add(((l as u64) << 32) | s as u64);
                let edit = LayerEdit::Weight(weight_noise(model, l, LayerMatrix::MlpGate, options.sigma, seed)?);
                rows.push(row(
                    Kind::Perturb.name(),
                    Some(l),
                    None,
                    s,
                    subject.measure(model, metric, None, Some(&edit))?,
                ));
            }
        }
    }
    Ok(rows)
}
