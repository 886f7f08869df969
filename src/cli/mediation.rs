//! `tokscope trace`, `tokscope mediate` and `tokscope mediation-report`.

use std::io::Write;
use std::path::PathBuf;

use tokscope::dataset::DatasetRoot;
use tokscope::export::{self, OutputFormat};
use tokscope::mediation::interventions::{Metric, DEFAULT_NOISE_SCALE, DEFAULT_PERTURB_SIGMA};
use tokscope::mediation::mediate::{mediate, Kind, MediateOptions};
use tokscope::mediation::trace::{trace_prompt, Noise, TraceOptions};
use tokscope::mediation::{heatmap_grids, table};
use tokscope::replay::{DeviceRequest, LayerMatrix};
use tokscope::{engine, jobs};

use super::args::{choice, QuietArgs, TableArgs};
use super::query::session;
use super::replay::{write_json, ModelArgs};

/// `tokscope trace`: the causal-tracing grid of one prompt.
#[derive(Debug, Clone, clap::Args)]
pub struct TraceArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Prompt text; BOS is prepended.
    #[arg(long)]
    prompt: String,
    /// Text inside the prompt whose tokens are corrupted (its last occurrence);
    /// without it (and without --noise) every prompt token after BOS is.
    #[arg(long)]
    subject: Option<String>,
    /// JSON array of noise rows, row i added at position i (zero rows: untouched);
    /// makes the run exactly reproducible. Excludes --seed/--samples.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["seed", "samples"])]
    noise: Option<PathBuf>,
    /// Seed of the Gaussian noise (sample s uses seed + s).
    #[arg(long)]
    seed: Option<u64>,
    /// Noise samples to average over.
    #[arg(long)]
    samples: Option<usize>,
    /// Noise std as a multiple of the embedding matrix's std.
    #[arg(long, default_value_t = DEFAULT_NOISE_SCALE)]
    noise_scale: f64,
    /// Recompute every cell with a full forward pass (for benchmarks).
    #[arg(long)]
    no_reuse: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    quiet: QuietArgs,
}

/// `tokscope mediate`: run interventions for logged requests, append to `interventions`.
#[derive(Debug, Clone, clap::Args)]
pub struct MediateArgs {
    /// The dataset (local directory or object-store URL).
    #[arg(long)]
    data: String,
    /// Model directory (not needed with --import).
    #[arg(long, value_name = "DIR", required_unless_present = "import")]
    model: Option<PathBuf>,
    /// Replay backend (interventions run on the CPU decoder).
    #[arg(long, default_value_t = DeviceRequest::Auto, value_parser = choice::<DeviceRequest>(DeviceRequest::NAMES))]
    device: DeviceRequest,
    /// SQL condition on `requests` selecting the prompts.
    #[arg(long = "where", value_name = "SQL")]
    filter: Option<String>,
    /// At most this many requests (ordered by request_id).
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// Interventions to run (comma-separated); default corrupt, restore and perturb.
    /// weight-noise and skip-layer change each layer in turn and measure it by the
    /// total and the direct path (docs/mediation.md, "Per-layer effects").
    #[arg(long, value_delimiter = ',', default_values_t = [Kind::Corrupt, Kind::Restore, Kind::Perturb],
          value_parser = choice::<Kind>(Kind::NAMES))]
    intervention: Vec<Kind>,
    /// The matrix weight-noise perturbs in each layer.
    #[arg(long, default_value_t = LayerMatrix::MlpGate, value_parser = choice::<LayerMatrix>(LayerMatrix::NAMES))]
    weight: LayerMatrix,
    /// Outcome metric.
    #[arg(long, default_value_t = Metric::TargetProb, value_parser = choice::<Metric>(Metric::NAMES))]
    metric: Metric,
    /// Text whose tokens are corrupted where it occurs; otherwise every prompt
    /// token between BOS and the last one.
    #[arg(long)]
    subject: Option<String>,
    /// Noise / perturbation samples per prompt; for weight-noise, the noise seeds
    /// per layer (each one perturbed model, the same for every prompt).
    #[arg(long, visible_alias = "seeds", default_value_t = 3)]
    samples: usize,
    /// Base seed of noise and perturbations.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Noise std as a multiple of the embedding matrix's std.
    #[arg(long, default_value_t = DEFAULT_NOISE_SCALE)]
    noise_scale: f64,
    /// Std of the weight noise (perturb and weight-noise).
    #[arg(long, default_value_t = DEFAULT_PERTURB_SIGMA)]
    sigma: f64,
    /// Also restore every (layer, position) cell (heatmap rows).
    #[arg(long)]
    cells: bool,
    /// Greedy budget for the BLEU metrics (bleu4, sacrebleu, sacrebleu_ref).
    #[arg(long, default_value_t = 40)]
    max_new_tokens: usize,
    /// Import rows from an external tool's JSONL instead of running the model.
    #[arg(long, value_name = "FILE")]
    import: Option<PathBuf>,
    #[command(flatten)]
    quiet: QuietArgs,
}

/// `tokscope mediation-report`: the `mediation` job, or the `mediation_heatmap` job.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// The dataset (local directory or object-store URL).
    #[arg(long)]
    data: String,
    /// Bootstrap resamples.
    #[arg(long, default_value_t = 1000)]
    resamples: usize,
    /// Bootstrap seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print the layer x position heatmap instead (`--format json`: dense grids).
    #[arg(long)]
    heatmap: bool,
    /// Output format (table, csv or json).
    #[arg(long, default_value_t = OutputFormat::Table, value_parser = choice::<OutputFormat>(OutputFormat::NAMES))]
    format: OutputFormat,
    #[command(flatten)]
    table: TableArgs,
}

/// Runs `tokscope trace`.
pub fn run_trace(args: &TraceArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let replay = args.model.load_on(args.model.device.resolve_for_interventions()?)?;
    let noise = match &args.noise {
        Some(path) => Noise::File(path.clone()),
        None => Noise::Gaussian {
            subject: args.subject.clone(),
            seed: args.seed.unwrap_or(0),
            samples: args.samples.unwrap_or(1),
            scale: args.noise_scale,
        },
    };
    let options = TraceOptions { prompt: args.prompt.clone(), noise, reuse: !args.no_reuse };
    let progress = tokscope::progress::Progress::items(args.quiet.progress(), 0, "cells");
    let run = trace_prompt(&replay, &options, &progress)?;
    drop(progress);
    if args.json {
        return write_json(out, &run);
    }
    let trace = &run.trace;
    let mut text = format!(
        "target {} {:?}: p_clean {:.6}  p_corrupt {:.6}  (subject positions {:?}, {} sample(s), {:.2} forward equivalents (L T / 4 = {:.2}), {:.0} ms)\nlayer",
        trace.target_id,
        replay.tokenizer.decode(&[trace.target_id])?,
        trace.p_clean,
        trace.p_corrupt,
        trace.subject_positions,
        trace.samples,
        trace.forward_equivalents,
        (trace.p_restored.len() * trace.input_ids.len()) as f64 / 4.0,
        run.wall_ms
    );
    for i in 0..trace.input_ids.len() {
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
    out.write_all(text.as_bytes())?;
    Ok(())
}

/// Runs `tokscope mediate`; reports the rows written on `out`.
pub fn run_mediate(args: &MediateArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let rt = engine::runtime()?;
    let dataset = DatasetRoot::parse(&args.data)?;
    let rows = match (&args.import, &args.model) {
        (Some(file), _) => table::read_jsonl(file)?,
        (None, Some(dir)) => {
            let model = ModelArgs { model: dir.clone(), device: args.device };
            let replay = model.load_on(args.device.resolve_for_interventions()?)?;
            let options = MediateOptions {
                filter: args.filter.clone(),
                limit: args.limit,
                kinds: args.intervention.clone(),
                metric: args.metric,
                subject: args.subject.clone(),
                samples: args.samples,
                seed: args.seed,
                noise_scale: args.noise_scale,
                sigma: args.sigma,
                weight: args.weight,
                cells: args.cells,
                max_new_tokens: args.max_new_tokens,
                progress: args.quiet.progress(),
            };
            // One unusable prompt (too long, nothing to corrupt) must not sink the batch.
            mediate(&replay, &dataset, &options, &rt, |id, e| eprintln!("skipping request {id}: {e}"))?
        }
        (None, None) => anyhow::bail!("mediate needs --model DIR or --import FILE"),
    };
    if rows.is_empty() {
        writeln!(out, "no intervention rows to write")?;
        return Ok(());
    }
    let location = table::append(&dataset, &rows, &rt)?;
    writeln!(out, "wrote {} intervention rows to {location}", rows.len())?;
    Ok(())
}

/// Runs `tokscope mediation-report`.
pub fn run_report(args: &ReportArgs, out: &mut impl Write) -> anyhow::Result<()> {
    if args.format == OutputFormat::Parquet {
        anyhow::bail!(
            "mediation-report prints table, csv or json; use `tokscope job mediation --format parquet --output F`"
        );
    }
    let udf = engine::UdfConfig::new()?;
    let batches = engine::runtime()?.block_on(async {
        let ctx = session(&args.data, &udf, None, &Default::default()).await?;
        if args.heatmap {
            jobs::run_job(&ctx, jobs::job("mediation_heatmap")?).await
        } else {
            let params =
                [("resamples".to_string(), args.resamples.to_string()), ("seed".to_string(), args.seed.to_string())];
            jobs::run_job_with(&ctx, jobs::job("mediation")?, &params).await
        }
    })?;
    if args.heatmap && args.format == OutputFormat::Json {
        for grid in heatmap_grids(&batches)? {
            write_json(out, &grid)?;
        }
        return Ok(());
    }
    export::write_batches(&batches, args.format, out, &args.table.layout(&[]))?;
    Ok(())
}
