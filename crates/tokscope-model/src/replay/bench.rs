//! `tokscope decode-bench`: prefill and greedy-decode throughput of the
//! forward pass on a model directory, with fixed token ids instead of a
//! tokenizer (the directory needs only `config.json` and the safetensors), so
//! it runs on the random checkpoints `bench/decode.sh` generates and compares
//! with candle-transformers on exactly the same ids: the prompt is `1..=P`,
//! then each of the `N` decode steps feeds the argmax of the previous logits.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::decode::{argmax, Decoder};
use super::{Device, DeviceRequest, LlamaModel, LogitsFor};
use crate::error::Result;

/// What `decode-bench` measures.
#[derive(Debug, Serialize)]
pub struct DecodeBenchReport {
    /// Which forward pass ran.
    pub engine: String,
    /// rayon threads.
    pub threads: usize,
    /// Model parameters (embeddings counted once when tied).
    pub params: usize,
    /// Bytes of weights streamed per decoded token, in the precision they are
    /// stored and read in (`ModelWeights::weight_bytes`; f32 on the GPU).
    pub weight_bytes: usize,
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
    /// Seconds to load the model (map the checkpoint, build the model; upload on a GPU).
    pub load_s: f64,
    /// Peak resident memory of the process at the end of the run (Linux `VmHWM`), bytes;
    /// `None` where the OS does not report it.
    pub peak_rss_bytes: Option<u64>,
    /// The N tokens fed to the decode steps (the greedy continuation of the prompt).
    pub greedy_ids: Vec<u32>,
}

/// Prefills `1..=P`, then runs `N` greedy one-token steps, timing both.
/// `params` is the model's parameter count, `weight_bytes` what one token
/// streams, `engine` names the backend.
pub fn decode_bench<M: Decoder + ?Sized>(
    model: &M,
    engine: &str,
    (params, weight_bytes): (usize, usize),
    prompt_tokens: usize,
    new_tokens: usize,
) -> Result<DecodeBenchReport> {
    let cfg = model.config();
    if prompt_tokens == 0 || prompt_tokens >= cfg.vocab_size {
        return Err(config_err!("--prompt-tokens must be in 1..{} (the prompt is the ids 1..=P)", cfg.vocab_size));
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
        weight_bytes,
        prompt_tokens,
        new_tokens,
        prefill_tps: prompt_tokens as f64 / prefill,
        decode_tps: new_tokens as f64 / decode,
        decode_weight_gb_s: weight_bytes as f64 * new_tokens as f64 / decode / 1e9,
        load_s: 0.0,
        peak_rss_bytes: None,
        greedy_ids,
    })
}

/// Loads the model in `dir` on `device` and measures it (`tokscope decode-bench`).
pub fn bench_model_dir(
    dir: &Path,
    device: DeviceRequest,
    prompt_tokens: usize,
    new_tokens: usize,
) -> Result<DecodeBenchReport> {
    let device = device.resolve()?;
    let start = Instant::now();
    let model = LlamaModel::from_dir(dir)?;
    let params = model.parameter_count();
    let mut report = match device {
        Device::Cpu => {
            let load_s = start.elapsed().as_secs_f64();
            let bytes = model.weights().weight_bytes();
            DecodeBenchReport {
                load_s,
                ..decode_bench(&model, "tokscope cpu", (params, bytes), prompt_tokens, new_tokens)?
            }
        }
        #[cfg(feature = "cuda")]
        Device::Cuda(ordinal) => {
            let gpu = super::cuda::CudaModel::upload(&model, ordinal)?;
            drop(model);
            let load_s = start.elapsed().as_secs_f64();
            let engine = format!("tokscope cuda:{ordinal}");
            DecodeBenchReport {
                load_s,
                ..decode_bench(&gpu, &engine, (params, params * 4), prompt_tokens, new_tokens)?
            }
        }
    };
    report.peak_rss_bytes = peak_rss_bytes();
    Ok(report)
}

/// The process's peak resident set (`VmHWM` in `/proc/self/status`), on Linux.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}
