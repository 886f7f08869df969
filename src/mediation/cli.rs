//! `tokscope trace`, `tokscope mediate` and `tokscope mediation-report`:
//! flags, orchestration and output. `main.rs` only dispatches here.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use arrow::array::{Array, StringArray};
use serde::Serialize;

use super::effects::{DEFAULT_RESAMPLES, DEFAULT_SEED};
use super::interventions::{
    gate_perturbation, gaussian_noise, read_noise_file, subject_positions, Metric, Subject,
    DEFAULT_NOISE_SCALE, DEFAULT_PERTURB_SIGMA,
};
use super::table::{self, InterventionRow};
use super::trace::{causal_trace, CausalTrace};
use crate::dataset::DatasetRoot;
use crate::engine;
use crate::error::{Error, Result};
use crate::export::{self, OutputFormat};
use crate::replay::cli::ModelArgs;
use crate::replay::{DeviceRequest, ForwardOptions, HiddenPatch, Intervention, ReplayModel};

/// `tokscope trace`: the causal-tracing grid of one prompt.
#[derive(Debug, Clone, clap::Args)]
pub struct TraceArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Prompt text; BOS is prepended.
    #[arg(long)]
    pub prompt: String,
    /// Text inside the prompt whose tokens are corrupted (its last occurrence);
    /// without it (and without --noise) every prompt token after BOS is.
    #[arg(long)]
    pub subject: Option<String>,
    /// JSON array of noise rows, row i added at position i (zero rows: untouched);
    /// makes the run exactly reproducible. Excludes --seed/--samples.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["seed", "samples"])]
    pub noise: Option<PathBuf>,
    /// Seed of the Gaussian noise (sample s uses seed + s).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Noise samples to average over.
    #[arg(long)]
    pub samples: Option<usize>,
    /// Noise std as a multiple of the embedding matrix's std.
    #[arg(long, default_value_t = DEFAULT_NOISE_SCALE)]
    pub noise_scale: f64,
    /// Recompute every cell with a full forward pass (for benchmarks).
    #[arg(long)]
    pub no_reuse: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The JSON of `trace --json`.
#[derive(Serialize)]
struct TraceReport<'a> {
    #[serde(flatten)]
    trace: &'a CausalTrace,
    /// Noise std used (None with --noise FILE).
    noise_std: Option<f64>,
    wall_ms: f64,
}

/// Runs `tokscope trace`, writing to `out`.
pub fn run_trace(args: &TraceArgs, out: &mut impl Write) -> Result<()> {
    let replay = ReplayModel::load(&args.model.model, args.model.device)?;
    let model = &replay.model;
    let hidden = model.config().hidden_size;
    let prompt_ids = replay.tokenizer.encode_prompt(&args.prompt)?;
    let (noise_samples, noise_std) = match &args.noise {
        Some(path) => (vec![read_noise_file(path, hidden)?], None),
        None => {
            let positions = match &args.subject {
                Some(s) => subject_positions(&replay.tokenizer, &args.prompt, s)?,
                None => (1..prompt_ids.len()).collect(),
            };
            let std = args.noise_scale * model.embedding_std();
            let seed = args.seed.unwrap_or(0);
            let samples = (0..args.samples.unwrap_or(1).max(1))
                .map(|s| gaussian_noise(&positions, hidden, std, seed.wrapping_add(s as u64)))
                .collect::<Result<Vec<_>>>()?;
            (samples, Some(std))
        }
    };
    if let Some(bad) = noise_samples
        .iter()
        .flatten()
        .find(|n| n.position >= prompt_ids.len())
    {
        return Err(Error::Config(format!(
            "noise at position {} but the prompt has {} tokens",
            bad.position,
            prompt_ids.len()
        )));
    }
    let started = Instant::now();
    let trace = causal_trace(model, &prompt_ids, &noise_samples, !args.no_reuse)?;
    let wall_ms = started.elapsed().as_secs_f64() * 1e3;
    if args.json {
        let report = TraceReport {
            trace: &trace,
            noise_std,
            wall_ms,
        };
        serde_json::to_writer(&mut *out, &report).map_err(|e| Error::Json {
            path: "<stdout>".into(),
            source: e,
        })?;
        return writeln!(out).map_err(stdout_error);
    }
    let mut text = format!(
        "target {} {:?}: p_clean {:.6}  p_corrupt {:.6}  (subject positions {:?}, {} sample(s), {:.1} forward equivalents, {wall_ms:.0} ms)\nlayer",
        trace.target_id,
        replay.tokenizer.decode(&[trace.target_id])?,
        trace.p_clean,
        trace.p_corrupt,
        trace.subject_positions,
        trace.samples,
        trace.forward_equivalents
    );
    for i in 0..prompt_ids.len() {
        text.push_str(&format!("\tpos{i}"));
    }
    text.push('\n');
    for (l, row) in trace.p_restored.iter().enumerate() {
        text.push_str(&l.to_string());
        for p in row {
            text.push_str(&format!("\t{p:.4}"));
        }
        text.push('\n');
    }
    out.write_all(text.as_bytes()).map_err(stdout_error)
}

/// Which interventions `tokscope mediate` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Clean and corrupted runs (total effect).
    Corrupt,
    /// Corrupted runs with each layer restored (indirect effects); implies corrupt.
    Restore,
    /// Gate-weight perturbation of each layer.
    Perturb,
}

/// `tokscope mediate`: run interventions for logged requests, append to `interventions`.
#[derive(Debug, Clone, clap::Args)]
pub struct MediateArgs {
    /// The dataset (local directory or object-store URL).
    #[arg(long)]
    pub data: String,
    /// Model directory (not needed with --import).
    #[arg(long, value_name = "DIR", required_unless_present = "import")]
    pub model: Option<PathBuf>,
    /// Replay backend.
    #[arg(long, value_enum, default_value_t = DeviceRequest::Auto)]
    pub device: DeviceRequest,
    /// SQL condition on `requests` selecting the prompts.
    #[arg(long = "where", value_name = "SQL")]
    pub filter: Option<String>,
    /// At most this many requests (ordered by request_id).
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Interventions to run (comma-separated); default all.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Kind::Corrupt, Kind::Restore, Kind::Perturb])]
    pub intervention: Vec<Kind>,
    /// Outcome metric.
    #[arg(long, value_enum, default_value_t = Metric::TargetProb)]
    pub metric: Metric,
    /// Text whose tokens are corrupted where it occurs; otherwise every prompt
    /// token between BOS and the last one.
    #[arg(long)]
    pub subject: Option<String>,
    /// Noise / perturbation samples per prompt.
    #[arg(long, default_value_t = 3)]
    pub samples: usize,
    /// Base seed of noise and perturbations.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Noise std as a multiple of the embedding matrix's std.
    #[arg(long, default_value_t = DEFAULT_NOISE_SCALE)]
    pub noise_scale: f64,
    /// Std of the gate-weight perturbation.
    #[arg(long, default_value_t = DEFAULT_PERTURB_SIGMA)]
    pub sigma: f64,
    /// Also restore every (layer, position) cell (heatmap rows).
    #[arg(long)]
    pub cells: bool,
    /// Greedy budget for the bleu4 metric.
    #[arg(long, default_value_t = 40)]
    pub max_new_tokens: usize,
    /// Import rows from an external tool's JSONL instead of running the model.
    #[arg(long, value_name = "FILE")]
    pub import: Option<PathBuf>,
}

/// Runs `tokscope mediate`; reports the rows written on `out`.
pub fn run_mediate(args: &MediateArgs, out: &mut impl Write) -> Result<()> {
    let rt = engine::runtime()?;
    let dataset = DatasetRoot::parse(&args.data)?;
    let rows = match (&args.import, &args.model) {
        (Some(file), _) => table::read_jsonl(file)?,
        (None, Some(dir)) => {
            let replay = ReplayModel::load(dir, args.device)?;
            let requests = rt.block_on(select_requests(
                &dataset,
                args.filter.as_deref(),
                args.limit,
            ))?;
            let mut rows = Vec::new();
            for (request_id, prompt, output) in requests {
                match mediate_one(&replay, args, &request_id, &prompt, &output) {
                    Ok(r) => rows.extend(r),
                    // One unusable prompt (too long, nothing to corrupt) must not sink the batch.
                    Err(e) => eprintln!("skipping request {request_id}: {e}"),
                }
            }
            rows
        }
        (None, None) => {
            return Err(Error::Config(
                "mediate needs --model DIR or --import FILE".into(),
            ))
        }
    };
    if rows.is_empty() {
        return writeln!(out, "no intervention rows to write").map_err(stdout_error);
    }
    let location = table::append(&dataset, &rows, &rt)?;
    writeln!(out, "wrote {} intervention rows to {location}", rows.len()).map_err(stdout_error)
}

/// `(request_id, prompt, model_output)` of the selected requests.
async fn select_requests(
    dataset: &DatasetRoot,
    filter: Option<&str>,
    limit: usize,
) -> Result<Vec<(String, String, String)>> {
    let ctx = engine::new_session()?;
    engine::register_dataset(&ctx, dataset).await?;
    let condition = filter.map(|f| format!(" AND ({f})")).unwrap_or_default();
    let sql = format!(
        "SELECT request_id, prompt, coalesce(model_output, '') AS model_output FROM requests \
         WHERE prompt IS NOT NULL{condition} ORDER BY request_id LIMIT {limit}"
    );
    let batches = engine::run_sql(&ctx, &sql, false).await?;
    let mut rows = Vec::new();
    for b in &batches {
        let col = |i: usize| {
            b.column(i)
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| Error::Config(format!("requests column {i} is not a string")))
        };
        let (ids, prompts, outputs) = (col(0)?, col(1)?, col(2)?);
        for r in 0..b.num_rows() {
            if prompts.is_valid(r) {
                rows.push((
                    ids.value(r).to_string(),
                    prompts.value(r).to_string(),
                    outputs.value(r).to_string(),
                ));
            }
        }
    }
    Ok(rows)
}

/// All intervention rows for one request.
fn mediate_one(
    replay: &ReplayModel,
    args: &MediateArgs,
    request_id: &str,
    prompt: &str,
    output: &str,
) -> Result<Vec<InterventionRow>> {
    let model = &replay.model;
    let (layers, hidden) = (model.config().num_hidden_layers, model.config().hidden_size);
    let prompt_ids = replay.tokenizer.encode_prompt(prompt)?;
    let mut continuation_ids = replay.tokenizer.encode_continuation(output)?;
    // Keep prompt + continuation inside the model's positions (the cut point moves earlier).
    continuation_ids.truncate(
        model
            .config()
            .max_position_embeddings
            .saturating_sub(prompt_ids.len()),
    );
    let positions = match &args.subject {
        Some(s) => subject_positions(&replay.tokenizer, prompt, s)?,
        // The context before the cut point: BOS carries nothing to corrupt,
        // and corrupting the last token too would leave restores nothing to mediate.
        None => (1..prompt_ids.len().saturating_sub(1)).collect(),
    };
    let subject = Subject::new(
        model,
        prompt_ids.clone(),
        continuation_ids,
        args.max_new_tokens,
    )?;
    let pid = table::prompt_id(prompt);
    let metric = args.metric;
    let row = |intervention: &str,
               layer: Option<usize>,
               position: Option<usize>,
               sample: usize,
               value: f64| InterventionRow {
        prompt_id: pid.clone(),
        request_id: Some(request_id.to_string()),
        layer: layer.map(|l| l as i32),
        position: position.map(|p| p as i32),
        intervention: intervention.into(),
        metric: metric.name().into(),
        value,
        sample: sample as i32,
    };
    let mut rows = vec![row(
        "clean",
        None,
        None,
        0,
        subject.measure(model, metric, None, None)?,
    )];
    // Per-prompt seeds: distinct prompts get independent noise, reruns the same.
    let prompt_seed = u64::from_str_radix(&pid, 16).unwrap_or(0) ^ args.seed;
    let wants = |k: Kind| args.intervention.contains(&k);
    if wants(Kind::Corrupt) || wants(Kind::Restore) {
        if positions.is_empty() {
            return Err(Error::Config(
                "prompt too short: no token to corrupt".into(),
            ));
        }
        let clean = model.forward(
            &prompt_ids,
            &mut model.new_cache(),
            ForwardOptions {
                hidden_states: true,
                ..Default::default()
            },
        )?;
        let std = args.noise_scale * model.embedding_std();
        for s in 0..args.samples {
            let noise =
                gaussian_noise(&positions, hidden, std, prompt_seed.wrapping_add(s as u64))?;
            let corrupted = Intervention {
                embedding_noise: noise.clone(),
                hidden_patches: vec![],
            };
            rows.push(row(
                "corrupt",
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
                    .map(|&i| HiddenPatch {
                        layer: l,
                        position: i,
                        hidden: clean.hidden_states[l + 1][i].clone(),
                    })
                    .collect();
                let iv = Intervention {
                    embedding_noise: noise.clone(),
                    hidden_patches: patches,
                };
                subject.measure(model, metric, Some(&iv), None)
            };
            for l in 0..layers {
                rows.push(row("restore", Some(l), None, s, restore(l, &positions)?));
                if args.cells {
                    for i in 0..prompt_ids.len() {
                        rows.push(row("restore", Some(l), Some(i), s, restore(l, &[i])?));
                    }
                }
            }
        }
    }
    if wants(Kind::Perturb) {
        for l in 0..layers {
            for s in 0..args.samples {
                let seed = prompt_seed.wrapping_add(((l as u64) << 32) | s as u64);
                let delta = gate_perturbation(model, l, args.sigma, seed)?;
                rows.push(row(
                    "perturb",
                    Some(l),
                    None,
                    s,
                    subject.measure(model, metric, None, Some(&delta))?,
                ));
            }
        }
    }
    Ok(rows)
}

/// `tokscope mediation-report`: the `mediation` job (until `tokscope job` wires it) and the heatmap.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// The dataset (local directory or object-store URL).
    #[arg(long)]
    pub data: String,
    /// Bootstrap resamples.
    #[arg(long, default_value_t = DEFAULT_RESAMPLES)]
    pub resamples: usize,
    /// Bootstrap seed.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// Print the layer x position heatmap instead (`--format json`: dense grids).
    #[arg(long)]
    pub heatmap: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
}

/// Runs `tokscope mediation-report`, writing to `out`.
pub fn run_report(args: &ReportArgs, out: &mut impl Write) -> Result<()> {
    if args.format == OutputFormat::Parquet {
        return Err(Error::Config(
            "mediation-report prints table, csv or json".into(),
        ));
    }
    let rt = engine::runtime()?;
    let dataset = DatasetRoot::parse(&args.data)?;
    let batches = rt.block_on(async {
        let ctx = engine::new_session()?;
        engine::register_dataset(&ctx, &dataset).await?;
        if args.heatmap {
            super::heatmap(&ctx).await
        } else {
            super::run_job(&ctx, args.resamples, args.seed).await
        }
    })?;
    if args.heatmap && args.format == OutputFormat::Json {
        for grid in super::heatmap_grids(&batches)? {
            serde_json::to_writer(&mut *out, &grid).map_err(|e| Error::Json {
                path: "<stdout>".into(),
                source: e,
            })?;
            writeln!(out).map_err(stdout_error)?;
        }
        return Ok(());
    }
    export::write_batches(&batches, args.format, out)
}

fn stdout_error(e: std::io::Error) -> Error {
    Error::io("<stdout>", e)
}
