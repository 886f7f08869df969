//! `tokscope decode-bench`: prefill and greedy-decode throughput of the
//! forward pass on a model directory, with fixed token ids instead of a
//! tokenizer (the directory needs only `config.json` and the safetensors), so
//! it runs on the random checkpoints `bench/decode.sh` generates and compares
//! with candle-transformers on exactly the same ids: the prompt is `1..=P`,
//! then each of the `N` decode steps feeds the argmax of the previous logits.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use super::decode::{argmax, Decoder};
use super::{Device, DeviceRequest, LlamaModel, LogitsFor};
use crate::error::{Error, Result};

/// `tokscope decode-bench` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct DecodeBenchArgs {
    /// Model directory (config.json + model.safetensors; no tokenizer needed).
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// Prompt length P: the prompt is the ids 1..=P, run as one prefill.
    #[arg(long, default_value_t = 128)]
    pub prompt_tokens: usize,
    /// Greedy decode steps N after the prefill (one token per forward pass).
    #[arg(long, default_value_t = 64)]
    pub new_tokens: usize,
    /// Backend; `cuda` runs the GPU forward pass (`--features cuda`).
    #[arg(long, value_enum, default_value_t = DeviceRequest::Cpu)]
    pub device: DeviceRequest,
    /// Print one JSON object instead of a text line.
    #[arg(long)]
    pub json: bool,
}

/// What `decode-bench` measures.
#[derive(Debug, Serialize)]
pub struct DecodeBenchReport {
    /// Which forward pass ran.
    pub engine: String,
    /// rayon threads.
    pub threads: usize,
    /// Model parameters (embeddings counted once when tied).
    pub params: usize,
    /// P.
    pub prompt_tokens: usize,
    /// N.
    pub new_tokens: usize,
    /// P / prefill seconds (the prefill includes the argmax of its last logits).
    pub prefill_tps: f64,
    /// N / seconds of the N one-token forward passes (argmax included).
    pub decode_tps: f64,
    /// Weight bytes read per decoded token / seconds per token: bandwidth the decode sustains.
    pub decode_weight_gb_s: f64,
    /// The N tokens fed to the decode steps (the greedy continuation of the prompt).
    pub greedy_ids: Vec<u32>,
}

/// Prefills `1..=P`, then runs `N` greedy one-token steps, timing both.
/// `params` is the model's parameter count, `engine` names the backend.
pub fn decode_bench<M: Decoder + ?Sized>(
    model: &M,
    engine: &str,
    params: usize,
    prompt_tokens: usize,
    new_tokens: usize,
) -> Result<DecodeBenchReport> {
    let cfg = model.config();
    if prompt_tokens == 0 || prompt_tokens >= cfg.vocab_size {
        return Err(Error::Config(format!(
            "--prompt-tokens must be in 1..{} (the prompt is the ids 1..=P)",
            cfg.vocab_size
        )));
    }
    let prompt: Vec<u32> = (1..=prompt_tokens as u32).collect();
    let mut cache = model.new_cache();
    let start = Instant::now();
    let logits = model.logits(&prompt, &mut cache, LogitsFor::LastPosition)?;
    let mut next = argmax(&logits[0]);
    let prefill = start.elapsed().as_secs_f64();
    let mut greedy_ids = Vec::with_capacity(new_tokens);
    let start = Instant::now();
    for _ in 0..new_tokens {
        greedy_ids.push(next);
        let logits = model.logits(&[next], &mut cache, LogitsFor::LastPosition)?;
        next = argmax(&logits[0]);
    }
    let decode = start.elapsed().as_secs_f64();
    Ok(DecodeBenchReport {
        engine: engine.into(),
        threads: rayon::current_num_threads(),
        params,
        prompt_tokens,
        new_tokens,
        prefill_tps: prompt_tokens as f64 / prefill,
        decode_tps: new_tokens as f64 / decode,
        decode_weight_gb_s: params as f64 * 4.0 * new_tokens as f64 / decode / 1e9,
        greedy_ids,
    })
}

/// Runs `tokscope decode-bench`, writing to `out`.
pub fn run_decode_bench(args: &DecodeBenchArgs, out: &mut impl Write) -> Result<()> {
    let device = args.device.resolve()?;
    let model = LlamaModel::from_dir(&args.model)?;
    let params = model.parameter_count();
    let (p, n) = (args.prompt_tokens, args.new_tokens);
    let report = match device {
        Device::Cpu => decode_bench(&model, "tokscope cpu", params, p, n)?,
        #[cfg(feature = "cuda")]
        Device::Cuda(ordinal) => {
            let gpu = super::cuda::CudaModel::upload(&model, ordinal)?;
            drop(model);
            decode_bench(&gpu, &format!("tokscope cuda:{ordinal}"), params, p, n)?
        }
    };
    let text = if args.json {
        serde_json::to_string(&report).map_err(|e| Error::Json {
            path: PathBuf::from("<stdout>"),
            source: e,
        })?
    } else {
        format!(
            "{} ({:.1}M params, {} threads): prefill {} tokens {:.1} tok/s; decode {} tokens {:.2} tok/s ({:.1} GB/s of f32 weights)",
            report.engine,
            report.params as f64 / 1e6,
            report.threads,
            report.prompt_tokens,
            report.prefill_tps,
            report.new_tokens,
            report.decode_tps,
            report.decode_weight_gb_s
        )
    };
    writeln!(out, "{text}").map_err(|e| Error::io("<stdout>", e))
}
