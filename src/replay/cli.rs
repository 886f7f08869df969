//! The `tokscope decode` and `tokscope score` commands: flags, and the JSON or
//! text they print. `main.rs` only dispatches here.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::device::DeviceRequest;
use super::ReplayModel;
use crate::error::{Error, Result};

/// Flags shared by every replay command.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// Model directory in Hugging Face layout (config.json, model.safetensors, tokenizer.json).
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// Backend for the forward pass; `auto` picks the CPU until a GPU backend exists.
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
    let replay = ReplayModel::load(&args.model.model, args.model.device)?;
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
    let replay = ReplayModel::load(&args.model.model, args.model.device)?;
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
