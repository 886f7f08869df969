//! Throughput of the CPU decoder on a synthetic Llama-shaped model (random
//! weights, no files needed): batched prefill and cached one-token decode.
//!
//! `cargo run --release --example replay_bench -- [hidden] [layers] [prompt_len] [new_tokens]`

use std::time::Instant;

use tokscope::replay::linear::Linear;
use tokscope::replay::weights::{LayerWeights, ModelWeights};
use tokscope::replay::{ForwardOptions, LlamaModel, ModelConfig};

fn arg(i: usize, default: usize) -> usize {
    std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

/// Deterministic small weights; the values do not matter for timing.
fn matrix(out: usize, inp: usize, seed: &mut u32) -> Linear {
    let data = (0..out * inp)
        .map(|_| {
            *seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((*seed >> 9) as f32 / (1u32 << 23) as f32 - 0.5) * 0.05
        })
        .collect();
    Linear::new(data, None, out, inp).expect("shape matches")
}

fn main() -> tokscope::Result<()> {
    let (hidden, layers, prompt_len, new_tokens) = (arg(1, 1024), arg(2, 8), arg(3, 128), arg(4, 32));
    let heads = hidden / 64;
    let config = ModelConfig::from_json(&format!(
        r#"{{"hidden_size": {hidden}, "intermediate_size": {}, "num_hidden_layers": {layers},
            "num_attention_heads": {heads}, "num_key_value_heads": {}, "vocab_size": 32000,
            "max_position_embeddings": 4096, "eos_token_id": 2}}"#,
        hidden * 11 / 4,
        (heads / 4).max(1)
    ))?;
    let mut seed = 7;
    let (h, i, q, kv) = (hidden, config.intermediate_size, config.q_width(), config.kv_width());
    let weights = ModelWeights {
        embed_tokens: matrix(config.vocab_size, h, &mut seed),
        layers: (0..layers)
            .map(|_| LayerWeights {
                input_layernorm: vec![1.0; h],
                q_proj: matrix(q, h, &mut seed),
                k_proj: matrix(kv, h, &mut seed),
                v_proj: matrix(kv, h, &mut seed),
                o_proj: matrix(h, q, &mut seed),
                post_attention_layernorm: vec![1.0; h],
                gate_proj: matrix(i, h, &mut seed),
                up_proj: matrix(i, h, &mut seed),
                down_proj: matrix(h, i, &mut seed),
            })
            .collect(),
        norm: vec![1.0; h],
        lm_head: None,
    };
    let params = layers * (2 * q * h + 2 * kv * h + 3 * i * h) + config.vocab_size * h;
    let model = LlamaModel::new(config, weights);
    let prompt: Vec<u32> = (0..prompt_len as u32).map(|t| 3 + t % 1000).collect();

    let mut cache = model.new_cache();
    let start = Instant::now();
    let mut logits = model.forward(&prompt, &mut cache, ForwardOptions::default())?.logits;
    let prefill = start.elapsed().as_secs_f64();
    let start = Instant::now();
    for _ in 0..new_tokens {
        let next = tokscope::replay::decode::argmax(&logits[0]);
        logits = model.forward(&[next], &mut cache, ForwardOptions::default())?.logits;
    }
    let decode = start.elapsed().as_secs_f64();
    let per_token = decode / new_tokens as f64;
    println!(
        "{:.0}M params, {} threads: prefill {prompt_len} tokens {:.0} tok/s; decode {:.1} tok/s ({:.1} GB/s of f32 weights)",
        params as f64 / 1e6,
        rayon::current_num_threads(),
        prompt_len as f64 / prefill,
        1.0 / per_token,
        params as f64 * 4.0 / per_token / 1e9
    );
    Ok(())
}
