//! The `tokscope decode`, `score` and `replay` commands: flags, and the JSON
//! or text they print. `main.rs` only dispatches here.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use rayon::prelude::*;

use super::device::DeviceRequest;
use super::verdict::{replay_suspect, ReplayOptions, Verdict, CONTINUATION_TOKENS, DEFAULT_THRESHOLD};
use super::verdicts::{self, RunInfo};
use super::ReplayModel;
use crate::dataset::DatasetRoot;
use crate::error::{Error, Result};

/// Flags shared by every replay command.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// Model directory in Hugging Face layout (config.json, model.safetensors, tokenizer.json).
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// Backend for the forward pass; `auto` uses a CUDA GPU when the build and machine have one, else the CPU.
    #[arg(long, value_enum, default_value_t = DeviceRequest::Auto)]
    pub device: DeviceRequest,
}

/// `tokscope decode`: greedy continuation of a prompt.
#[derive(Debug, Clone, clap::Args)]
pub struct DecodeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Prompt text; BOS is prepended, special tokens like `<|user|>` are recognised.
    #[arg(long)]
    pub prompt: String,
    /// Stop after this many generated tokens if no EOS came first.
    #[arg(long, default_value_t = 40)]
    pub max_new_tokens: usize,
    /// Print one JSON object (ids, text, P(EOS) per step, last prompt logits) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `tokscope score`: teacher-forced log-probabilities of a continuation.
#[derive(Debug, Clone, clap::Args)]
pub struct ScoreArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Prompt text; BOS is prepended.
    #[arg(long)]
    pub prompt: String,
    /// Continuation to score, tokenized on its own (write `</s>` to score the stop too).
    #[arg(long)]
    pub continuation: String,
    /// Print one JSON object instead of a per-token table.
    #[arg(long)]
    pub json: bool,
}

/// `tokscope replay`: verdicts on suspected silent truncations, written to
/// the dataset's `replay_verdicts` table.
#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// The dataset (local directory or object-store URL) to read suspects from and write verdicts to.
    #[arg(long)]
    pub data: String,
    #[command(flatten)]
    pub model: ModelArgs,
    /// SQL predicate over `requests` choosing the suspects; replaces the default
    /// `eos_status = 'implicit_truncation' AND prompt IS NOT NULL AND model_output IS NOT NULL`.
    #[arg(long = "where", value_name = "SQL")]
    pub predicate: Option<String>,
    /// Replay at most this many suspects (in request_id order).
    #[arg(long)]
    pub limit: Option<usize>,
    /// P(EOS) at the cut at or above which the output counts as a natural stop.
    #[arg(long, default_value_t = DEFAULT_THRESHOLD)]
    pub threshold: f64,
    /// Greedy tokens to decode after the cut.
    #[arg(long, default_value_t = CONTINUATION_TOKENS)]
    pub max_new_tokens: usize,
    /// Decode each suspect this many times and report any difference between runs.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Print the run summary as JSON instead of one text line.
    #[arg(long)]
    pub json: bool,
}

/// What `tokscope replay` reports after writing its verdicts.
#[derive(Debug, Default, Serialize)]
pub struct ReplaySummary {
    /// Suspects selected and replayed.
    pub suspects: usize,
    /// Verdict counts.
    pub natural_stop: usize,
    /// Verdict counts.
    pub confirmed_truncation: usize,
    /// Verdict counts.
    pub prompt_truncated: usize,
    /// Verdict counts.
    pub error: usize,
    /// Suspects whose repeated decodes differed (`--repeat 2` or more).
    pub nondeterministic: usize,
    /// The backend used.
    pub device: String,
    /// The replayed checkpoint.
    pub model: String,
    /// The verdict file written (none when there were no suspects).
    pub written: Option<String>,
    /// Wall time of the run.
    pub elapsed_s: f64,
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

/// Runs `tokscope decode`, writing to `out`.
pub fn run_decode(args: &DecodeArgs, out: &mut impl Write) -> Result<()> {
    let replay = load_model(&args.model)?;
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
        write_json(out, &report)
    } else {
        let stop = if decoded.ended_with_eos {
            "stopped at EOS"
        } else {
            "token budget reached"
        };
        let p_eos_at_cut = decoded.p_eos.last().copied().unwrap_or(f64::NAN);
        writeln!(
            out,
            "{greedy_text}\n-- {} prompt tokens, {} generated ({stop}); P(EOS) after last token {p_eos_at_cut:.6}",
            input_ids.len(),
            decoded.greedy_ids.len()
        )
        .map_err(stdout_error)
    }
}

/// Runs `tokscope score`, writing to `out`.
pub fn run_score(args: &ScoreArgs, out: &mut impl Write) -> Result<()> {
    let replay = load_model(&args.model)?;
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
    text.push_str(&format!(
        "-- total logprob {total:.6}; P(EOS) after continuation {:.6}\n",
        scored.p_eos_after
    ));
    out.write_all(text.as_bytes()).map_err(stdout_error)
}

/// Runs `tokscope replay`, writing the summary to `out` (progress and
/// per-request notes go to stderr).
///
/// Batching: suspects run in parallel with rayon (one task per request, the
/// model shared read-only); within a request, prompt + logged output is one
/// prefill (every projection a matrix-matrix product over all positions), and
/// the greedy continuation reuses that KV cache one token per step.
pub fn run_replay(args: &ReplayArgs, out: &mut impl Write) -> Result<()> {
    if !(0.0..=1.0).contains(&args.threshold) {
        return Err(Error::Config(format!("--threshold {} is not a probability in [0, 1]", args.threshold)));
    }
    if args.repeat == 0 {
        return Err(Error::Config("--repeat must be at least 1".into()));
    }
    let started = std::time::Instant::now();
    let replayed_at_micros = chrono::Utc::now().timestamp_micros();
    let dataset = DatasetRoot::parse(&args.data)?;
    let replay = load_model(&args.model)?;
    let rt = crate::engine::runtime()?;
    let suspects = rt.block_on(verdicts::select_suspects(&dataset, args.predicate.as_deref(), args.limit))?;
    let options = ReplayOptions {
        threshold: args.threshold,
        max_new_tokens: args.max_new_tokens,
        repeat: args.repeat,
    };
    let rows: Vec<_> = suspects
        .par_iter()
        .map(|s| replay_suspect(&replay, s, &options))
        .collect();
    let model = args
        .model
        .model
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| args.model.model.display().to_string());
    let mut summary = ReplaySummary {
        suspects: rows.len(),
        device: replay.device.label(),
        model,
        ..Default::default()
    };
    for row in &rows {
        match row.verdict {
            Verdict::NaturalStop => summary.natural_stop += 1,
            Verdict::ConfirmedTruncation => summary.confirmed_truncation += 1,
            Verdict::PromptTruncated => summary.prompt_truncated += 1,
            Verdict::Error => summary.error += 1,
        }
        if row.deterministic == Some(false) {
            summary.nondeterministic += 1;
            eprintln!("replay: request {} decoded differently across --repeat runs", row.request_id);
        }
    }
    if !rows.is_empty() {
        let run = RunInfo {
            model: summary.model.clone(),
            device: summary.device.clone(),
            threshold: args.threshold,
            replayed_at_micros,
        };
        let batch = verdicts::to_batch(&rows, &run)?;
        summary.written = Some(rt.block_on(verdicts::write_verdicts(&dataset, &batch))?);
    }
    summary.elapsed_s = started.elapsed().as_secs_f64();
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
    )
    .map_err(stdout_error)
}

/// Resolves the device (printing the `auto` fallback line on stderr) and loads the model.
fn load_model(args: &ModelArgs) -> Result<ReplayModel> {
    let (device, note) = args.device.resolve_with_note()?;
    if let Some(note) = note {
        eprintln!("{note}");
    }
    ReplayModel::load_on(&args.model, device)
}

fn write_json(out: &mut impl Write, value: &impl Serialize) -> Result<()> {
    serde_json::to_writer(&mut *out, value).map_err(|e| Error::Json {
        path: PathBuf::from("<stdout>"),
        source: e,
    })?;
    writeln!(out).map_err(stdout_error)
}

fn stdout_error(e: std::io::Error) -> Error {
    Error::io("<stdout>", e)
}
