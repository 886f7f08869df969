//! `tokscope decode`, `score`, `replay` and `decode-bench`: flags, and the
//! JSON or text they print.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;
use tokscope::dataset::DatasetRoot;
use tokscope::replay::bench::bench_model_dir;
use tokscope::replay::run::{replay_dataset, ReplayRun};
use tokscope::replay::verdict::{ReplayOptions, CONTINUATION_TOKENS, DEFAULT_THRESHOLD};
use tokscope::replay::{Device, DeviceRequest, ReplayModel};

use super::args::{choice, QuietArgs};

/// The model directory and backend of every replay command.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// Model directory in Hugging Face layout (config.json, model.safetensors, tokenizer.json).
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// Backend for the forward pass; `auto` uses a CUDA GPU when the build and machine have one, else the CPU.
    #[arg(long, default_value_t = DeviceRequest::Auto, value_parser = choice::<DeviceRequest>(DeviceRequest::NAMES))]
    pub device: DeviceRequest,
}

impl ModelArgs {
    /// Loads the model on `device`, printing the one stderr line that says
    /// when `auto` fell back to the CPU (the same line for every command).
    pub fn load_on(&self, (device, note): (Device, Option<String>)) -> tokscope::Result<ReplayModel> {
        if let Some(note) = note {
            eprintln!("{note}");
        }
        Ok(ReplayModel::load_on(&self.model, device)?)
    }

    /// Loads the model on the backend `--device` resolves to.
    pub fn load(&self) -> tokscope::Result<ReplayModel> {
        self.load_on(self.device.resolve_with_note()?)
    }
}

/// `tokscope decode`: greedy continuation of a prompt.
#[derive(Debug, Clone, clap::Args)]
pub struct DecodeArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Prompt text; BOS is prepended, special tokens like `<|user|>` are recognised.
    #[arg(long)]
    prompt: String,
    /// Stop after this many generated tokens if no EOS came first.
    #[arg(long, default_value_t = 40)]
    max_new_tokens: usize,
    /// Print one JSON object (ids, text, P(EOS) per step, last prompt logits) instead of text.
    #[arg(long)]
    json: bool,
}

/// `tokscope score`: teacher-forced log-probabilities of a continuation.
#[derive(Debug, Clone, clap::Args)]
pub struct ScoreArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Prompt text; BOS is prepended.
    #[arg(long)]
    prompt: String,
    /// Continuation to score, tokenized on its own (write `</s>` to score the stop too).
    #[arg(long)]
    continuation: String,
    /// Print one JSON object instead of a per-token table.
    #[arg(long)]
    json: bool,
}

/// `tokscope replay`: verdicts on suspected silent truncations, written to
/// the dataset's `replay_verdicts` table.
#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// The dataset (local directory or object-store URL) to read suspects from and write verdicts to.
    #[arg(long)]
    data: String,
    #[command(flatten)]
    model: ModelArgs,
    /// SQL predicate over `requests` choosing the suspects; replaces the default
    /// `eos_status = 'implicit_truncation' AND prompt IS NOT NULL AND model_output IS NOT NULL`.
    #[arg(long = "where", value_name = "SQL")]
    predicate: Option<String>,
    /// Replay at most this many suspects (in request_id order).
    #[arg(long)]
    limit: Option<usize>,
    /// P(EOS) at the cut at or above which the output counts as a natural stop.
    #[arg(long, default_value_t = DEFAULT_THRESHOLD)]
    threshold: f64,
    /// Greedy tokens to decode after the cut.
    #[arg(long, default_value_t = CONTINUATION_TOKENS)]
    max_new_tokens: usize,
    /// Decode each suspect this many times and report any difference between runs.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Decode this many suspects together, one forward pass per step over all
    /// of them (fewer when memory would not hold them); 1 replays one suspect
    /// per thread. Verdicts are the same either way.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    batch: u16,
    /// Print the run summary as JSON instead of one text line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    quiet: QuietArgs,
}

/// `tokscope decode-bench` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct DecodeBenchArgs {
    /// Model directory (config.json + model.safetensors; no tokenizer needed).
    #[arg(long, value_name = "DIR")]
    model: PathBuf,
    /// Prompt length P: the prompt is the ids 1..=P, run as one prefill.
    #[arg(long, default_value_t = 128)]
    prompt_tokens: usize,
    /// Greedy decode steps N after the prefill (one token per forward pass).
    #[arg(long, default_value_t = 64)]
    new_tokens: usize,
    /// Backend; `cuda` runs the GPU forward pass (`--features cuda`).
    #[arg(long, default_value_t = DeviceRequest::Cpu, value_parser = choice::<DeviceRequest>(DeviceRequest::NAMES))]
    device: DeviceRequest,
    /// Print one JSON object instead of a text line.
    #[arg(long)]
    json: bool,
}

/// The JSON printed by `decode --json`; field names match the golden files.
#[derive(Debug, Serialize)]
struct DecodeReport<'a> {
    input_ids: &'a [u32],
    greedy_ids: &'a [u32],
    greedy_text: &'a str,
    ended_with_eos: bool,
    p_eos: &'a [f64],
    last_logits: &'a [f32],
}

/// The JSON printed by `score --json`.
#[derive(Debug, Serialize)]
struct ScoreReport<'a> {
    input_ids: &'a [u32],
    continuation_ids: &'a [u32],
    logprobs: &'a [f64],
    p_eos_after: f64,
}

/// Writes `value` as one line of JSON.
pub fn write_json(out: &mut impl Write, value: &impl Serialize) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}

/// Runs `tokscope decode`.
pub fn run_decode(args: &DecodeArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let replay = args.model.load()?;
    let (input_ids, decoded) = replay.greedy(&args.prompt, args.max_new_tokens)?;
    let greedy_text = replay.tokenizer.decode(&decoded.greedy_ids)?;
    if args.json {
        let report = DecodeReport {
            input_ids: &input_ids,
            greedy_ids: &decoded.greedy_ids,
            greedy_text: &greedy_text,
            ended_with_eos: decoded.ended_with_eos,
            p_eos: &decoded.p_eos,
            last_logits: &decoded.last_prompt_logits,
        };
        return write_json(out, &report);
    }
    let stop = if decoded.ended_with_eos { "stopped at EOS" } else { "token budget reached" };
    let p_eos_at_cut = decoded.p_eos.last().copied().unwrap_or(f64::NAN);
    writeln!(
        out,
        "{greedy_text}\n-- {} prompt tokens, {} generated ({stop}); P(EOS) after last token {p_eos_at_cut:.6}",
        input_ids.len(),
        decoded.greedy_ids.len()
    )?;
    Ok(())
}

/// Runs `tokscope score`.
pub fn run_score(args: &ScoreArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let replay = args.model.load()?;
    let (input_ids, continuation_ids, scored) = replay.score(&args.prompt, &args.continuation)?;
    if args.json {
        let report = ScoreReport {
            input_ids: &input_ids,
            continuation_ids: &continuation_ids,
            logprobs: &scored.logprobs,
            p_eos_after: scored.p_eos_after,
        };
        return write_json(out, &report);
    }
    let mut text = String::from("token_id\tlogprob\ttoken\n");
    for (&id, lp) in continuation_ids.iter().zip(&scored.logprobs) {
        // Special tokens decode to nothing with skip_special_tokens; show the id alone then.
        let token = replay.tokenizer.decode(&[id])?;
        text.push_str(&format!("{id}\t{lp:.6}\t{token:?}\n"));
    }
    let total: f64 = scored.logprobs.iter().sum();
    text.push_str(&format!("-- total logprob {total:.6}; P(EOS) after continuation {:.6}\n", scored.p_eos_after));
    out.write_all(text.as_bytes())?;
    Ok(())
}

/// Runs `tokscope replay`: the summary on `out`, per-request notes on stderr.
pub fn run_replay(args: &ReplayArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let dataset = DatasetRoot::parse(&args.data)?;
    let replay = args.model.load()?;
    let rt = tokscope::engine::runtime()?;
    let run = ReplayRun {
        predicate: args.predicate.clone(),
        limit: args.limit,
        options: ReplayOptions {
            threshold: args.threshold,
            max_new_tokens: args.max_new_tokens,
            repeat: args.repeat,
            batch: usize::from(args.batch),
        },
        model_name: ReplayModel::name_of(&args.model.model),
        progress: args.quiet.progress(),
    };
    let summary = replay_dataset(&replay, &dataset, &run, &rt)?;
    for id in &summary.nondeterministic_requests {
        eprintln!("replay: request {id} decoded differently across --repeat runs");
    }
    if args.json {
        return write_json(out, &summary);
    }
    writeln!(
        out,
        "replayed {} suspect(s) with {} on {}: natural_stop={} confirmed_truncation={} prompt_truncated={} error={} nondeterministic={} in {:.2}s",
        summary.suspects,
        summary.model,
        summary.device,
        summary.natural_stop,
        summary.confirmed_truncation,
        summary.prompt_truncated,
        summary.error,
        summary.nondeterministic,
        summary.elapsed_s
    )?;
    Ok(())
}

/// Runs `tokscope decode-bench`.
pub fn run_decode_bench(args: &DecodeBenchArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let report = bench_model_dir(&args.model, args.device, args.prompt_tokens, args.new_tokens)?;
    if args.json {
        return write_json(out, &report);
    }
    writeln!(
        out,
        "{} ({:.1}M params, {:.2} GB of weights per token, {} threads): loaded in {:.2}s; prefill {} tokens {:.1} tok/s; decode {} tokens {:.2} tok/s ({:.1} GB/s of weights){}",
        report.engine,
        report.params as f64 / 1e6,
        report.weight_bytes as f64 / 1e9,
        report.threads,
        report.load_s,
        report.prompt_tokens,
        report.prefill_tps,
        report.new_tokens,
        report.decode_tps,
        report.decode_weight_gb_s,
        report.peak_rss_bytes.map(|b| format!("; peak RSS {:.2} GB", b as f64 / 1e9)).unwrap_or_default()
    )?;
    Ok(())
}
