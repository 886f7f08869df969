//! `tokscope mediate` as a library procedure: select logged requests, run
//! the clean / corrupted / restored / perturbed / per-layer measurements for
//! each, and return the `interventions` rows (docs/mediation.md).

use std::collections::HashMap;

use arrow::array::{Array, StringArray};
use tokscope_core::catalog::interventions::InterventionRow;

use super::interventions::{gaussian_noise, subject_positions, weight_noise, Metric, Subject};
use super::layers::{measure_paths, LayerChange};
use super::table;
use crate::dataset::DatasetRoot;
use crate::engine;
use crate::error::Result;
use crate::progress::Progress;
use crate::replay::{self, ForwardOptions, HiddenPatch, Intervention, LayerMatrix, ReplayModel};

tokscope_core::named_enum! {
    /// Which interventions [`mediate`] runs.
    pub enum Kind as "intervention" {
        /// Clean and corrupted runs (total effect).
        Corrupt = "corrupt",
        /// Corrupted runs with each layer restored (indirect effects); implies corrupt.
        Restore = "restore",
        /// Gate-weight perturbation of each layer (per-prompt noise, total effect only).
        Perturb = "perturb",
        /// Noise on one matrix of each layer in turn, by the total and the direct path.
        WeightNoise = "weight-noise",
        /// Each layer in turn replaced by the identity, by the total and the direct path.
        SkipLayer = "skip-layer",
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
    /// Noise / perturbation samples per prompt (`weight-noise`: noise seeds per layer).
    pub samples: usize,
    /// Base seed of noise and perturbations.
    pub seed: u64,
    /// Noise std as a multiple of the embedding matrix's std.
    pub noise_scale: f64,
    /// Std of the gate-weight perturbation and of `weight-noise`.
    pub sigma: f64,
    /// The matrix `weight-noise` perturbs in each layer.
    pub weight: LayerMatrix,
    /// Also restore every (layer, position) cell (heatmap rows).
    pub cells: bool,
    /// Greedy budget for the BLEU metrics.
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
    let references = match options.metric {
        Metric::SacreBleuRef => rt.block_on(logged_references(dataset))?,
        _ => HashMap::new(),
    };
    let progress = Progress::items(options.progress, requests.len() as u64, "prompts");
    let mut rows = Vec::new();
    for r in requests {
        progress.inc(1);
        let (Some(prompt), output) = (r.prompt.as_deref(), r.model_output.as_deref().unwrap_or_default()) else {
            continue;
        };
        let logged = LoggedRequest {
            request_id: &r.request_id,
            prompt,
            output,
            reference: references.get(&r.request_id).map(String::as_str),
        };
        match mediate_one(replay, options, &logged) {
            Ok(measured) => rows.extend(measured),
            Err(e) => progress.suspend(|| skipped(&r.request_id, &e)),
        }
    }
    Ok(rows)
}

/// Each request's logged reference answer: `evals.reference` of its
/// `request_id` (the first by input file and line when several records have one).
async fn logged_references(dataset: &DatasetRoot) -> Result<HashMap<String, String>> {
    let ctx = engine::new_session()?;
    engine::register_dataset(&ctx, dataset).await?;
    let sql = "SELECT request_id, first_value(reference ORDER BY source_file, source_line) AS reference \
               FROM evals WHERE reference IS NOT NULL GROUP BY request_id";
    let mut references = HashMap::new();
    for batch in engine::run_sql(&ctx, sql, false).await? {
        let column = |i: usize| {
            batch
                .column(i)
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| internal_err!("evals column {i} is not text"))
        };
        let (ids, texts) = (column(0)?, column(1)?);
        for i in (0..batch.num_rows()).filter(|&i| !ids.is_null(i) && !texts.is_null(i)) {
            references.insert(ids.value(i).to_string(), texts.value(i).to_string());
        }
    }
    Ok(references)
}

/// One logged request to measure.
#[derive(Debug, Clone, Copy)]
pub struct LoggedRequest<'a> {
    /// Its id.
    pub request_id: &'a str,
    /// The prompt text.
    pub prompt: &'a str,
    /// The logged output (the continuation `continuation_logprob` and `p_eos` read).
    pub output: &'a str,
    /// The logged reference answer, if any (`sacrebleu_ref`).
    pub reference: Option<&'a str>,
}

/// All intervention rows for one request.
pub fn mediate_one(
    replay: &ReplayModel,
    options: &MediateOptions,
    request: &LoggedRequest<'_>,
) -> Result<Vec<InterventionRow>> {
    let (request_id, prompt, output) = (request.request_id, request.prompt, request.output);
    if options.metric == Metric::SacreBleuRef && request.reference.is_none() {
        return Err(config_err!("no logged reference (evals.reference) to score sacrebleu_ref against"));
    }
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
    let subject = Subject::new(model, prompt_ids.clone(), continuation_ids, options.max_new_tokens)?
        .with_reference(request.reference.map(str::to_string));
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
            weight: None,
            sigma: None,
            path: None,
        }
    };
    let measure = |options: ForwardOptions<'_>| subject.measure(replay, metric, options);
    let measure_corrupted =
        |iv: &Intervention| measure(ForwardOptions { intervention: Some(iv), ..Default::default() });
    let mut rows = vec![row("clean", None, None, 0, measure(ForwardOptions::default())?)];
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
            rows.push(row(Kind::Corrupt.name(), None, None, s, measure_corrupted(&corrupted)?));
            if !wants(Kind::Restore) {
                continue;
            }
            let restore = |l: usize, at: &[usize]| -> Result<f64> {
                let patches = at
                    .iter()
                    .map(|&i| HiddenPatch { layer: l, position: i, hidden: clean.hidden_states[l + 1][i].clone() })
                    .collect();
                let iv = Intervention { embedding_noise: noise.clone(), hidden_patches: patches };
                Ok(measure_corrupted(&iv)?)
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
                let edit =
                    replay::LayerEdit::Weight(weight_noise(model, l, LayerMatrix::MlpGate, options.sigma, seed)?);
                let value = measure(ForwardOptions { layer_edit: Some(&edit), ..Default::default() })?;
                rows.push(row(Kind::Perturb.name(), Some(l), None, s, value));
            }
        }
    }
    let changes = [
        (Kind::WeightNoise, LayerChange::WeightNoise { matrix: options.weight, sigma: options.sigma }),
        (Kind::SkipLayer, LayerChange::Skip),
    ];
    for (kind, change) in changes.into_iter().filter(|(k, _)| wants(*k)) {
        let (weight, sigma) = match change {
            LayerChange::WeightNoise { matrix, sigma } => (Some(matrix.name().to_string()), Some(sigma)),
            LayerChange::Skip => (None, None),
        };
        for l in 0..layers {
            for s in 0..change.draws(options.samples) {
                // Seeded per (layer, matrix, draw) only: draw s is the same perturbed model for every prompt.
                let edit = change.edit(model, l, options.seed, s)?;
                let y = measure_paths(replay, &subject, metric, &edit)?;
                for (path, value) in [("total", y.total), ("direct", y.direct)] {
                    rows.push(InterventionRow {
                        weight: weight.clone(),
                        sigma,
                        path: Some(path.into()),
                        ..row(kind.name(), Some(l), None, s, value)
                    });
                }
            }
        }
    }
    Ok(rows)
}
