//! candle-transformers' llama on the CPU, for `bench/decode.sh`: loads a
//! Hugging Face layout directory (config.json + model.safetensors; no
//! tokenizer, the ids are given), prefills the prompt ids 1..=P in one pass,
//! then decodes N tokens greedily with the KV cache (each step feeds the argmax
//! of the previous logits), and prints one JSON line:
//! {"prefill_tps", "decode_tps", "threads", "greedy_ids"}.
//!
//! `candle-llama-bench --model DIR --prompt-tokens P --new-tokens N`

use std::time::Instant;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::llama::{Cache, Llama, LlamaConfig};

fn args() -> Result<(String, usize, usize)> {
    let mut model = None;
    let (mut p, mut n) = (128, 64);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let v = it.next().with_context(|| format!("{a} needs a value"))?;
        match a.as_str() {
            "--model" => model = Some(v),
            "--prompt-tokens" => p = v.parse()?,
            "--new-tokens" => n = v.parse()?,
            _ => bail!("unknown argument {a}"),
        }
    }
    Ok((model.context("--model DIR is required")?, p, n))
}

fn argmax(logits: &Tensor) -> Result<u32> {
    // First index on ties, like torch.argmax and tokscope's decode::argmax.
    let v: Vec<f32> = logits.flatten_all()?.to_vec1()?;
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    Ok(best as u32)
}

fn main() -> Result<()> {
    let (dir, p, n) = args()?;
    let dir = std::path::Path::new(&dir);
    let device = Device::Cpu;
    let config: LlamaConfig =
        serde_json::from_slice(&std::fs::read(dir.join("config.json"))?)?;
    let config = config.into_config(false);
    let vb = unsafe {
        VarBuilder::from_mmaped_safetensors(&[dir.join("model.safetensors")], DType::F32, &device)?
    };
    let llama = Llama::load(vb, &config)?;
    let mut cache = Cache::new(true, DType::F32, &config, &device)?;

    let prompt: Vec<u32> = (1..=p as u32).collect();
    let start = Instant::now();
    let input = Tensor::new(prompt.as_slice(), &device)?.unsqueeze(0)?;
    let mut logits = llama.forward(&input, 0, &mut cache)?;
    let mut next = argmax(&logits)?;
    let prefill = start.elapsed().as_secs_f64();

    let mut greedy = Vec::with_capacity(n);
    let start = Instant::now();
    for step in 0..n {
        greedy.push(next);
        let input = Tensor::new(&[next], &device)?.unsqueeze(0)?;
        logits = llama.forward(&input, p + step, &mut cache)?;
        next = argmax(&logits)?;
    }
    let decode = start.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "engine": "candle-transformers 0.11 llama",
            "threads": candle_core::utils::get_num_threads(),
            "prompt_tokens": p,
            "new_tokens": n,
            "prefill_tps": p as f64 / prefill,
            "decode_tps": n as f64 / decode,
            "greedy_ids": greedy,
        })
    );
    Ok(())
}
