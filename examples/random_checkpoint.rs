//! Writes a randomly initialised Llama checkpoint in Hugging Face layout
//! (config.json + model.safetensors, lm_head tied to the embeddings: ~100M parameters at the
//! defaults) for `bench/decode.sh`, stored as f32, bf16 or f16 (values rounded to nearest even).
//! Weights are normal(0, 0.02) (xorshift + Box-Muller, fixed seeds, filled in parallel), norms 1.
//!
//! (also used by `bench/gpu_check.sh`; no tokenizer: `tokscope decode-bench` takes ids).
//!
//! `cargo run --example random_checkpoint -- DIR [hidden 768] [layers 12] [heads 12] [kv_heads 4] [intermediate 2048] [vocab 32000] [dtype f32|bf16|f16]`
//!
//! Llama-3.2-1B's shape (1.24B parameters, 2.47 GB in bf16):
//! `cargo run --example random_checkpoint -- DIR 2048 16 32 8 8192 128256 bf16`

use std::io::Write;

use rayon::prelude::*;
use safetensors::tensor::TensorView;
use safetensors::Dtype;

fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(a.get(1).expect("usage: random_checkpoint DIR [...]"));
    let num = |i: usize, d: usize| a.get(i).and_then(|v| v.parse().ok()).unwrap_or(d);
    let (h, layers, heads, kv_heads, inter, vocab) =
        (num(2, 768), num(3, 12), num(4, 12), num(5, 4), num(6, 2048), num(7, 32000));
    let dtype = match a.get(8).map(String::as_str).unwrap_or("f32") {
        "f32" => Dtype::F32,
        "bf16" => Dtype::BF16,
        "f16" => Dtype::F16,
        other => anyhow::bail!("dtype {other}: expected f32, bf16 or f16"),
    };
    let hd = h / heads;
    std::fs::create_dir_all(&dir)?;
    let config = serde_json::json!({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": h, "intermediate_size": inter, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "vocab_size": vocab,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 2048,
        "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": true,
        "hidden_act": "silu",
        "torch_dtype": match dtype { Dtype::BF16 => "bfloat16", Dtype::F16 => "float16", _ => "float32" }
    });
    std::fs::File::create(dir.join("config.json"))?.write_all(config.to_string().as_bytes())?;

    let mut shapes: Vec<(String, Vec<usize>)> = vec![("model.embed_tokens.weight".into(), vec![vocab, h])];
    for l in 0..layers {
        let p = format!("model.layers.{l}");
        shapes.extend([
            (format!("{p}.input_layernorm.weight"), vec![h]),
            (format!("{p}.self_attn.q_proj.weight"), vec![heads * hd, h]),
            (format!("{p}.self_attn.k_proj.weight"), vec![kv_heads * hd, h]),
            (format!("{p}.self_attn.v_proj.weight"), vec![kv_heads * hd, h]),
            (format!("{p}.self_attn.o_proj.weight"), vec![h, heads * hd]),
            (format!("{p}.post_attention_layernorm.weight"), vec![h]),
            (format!("{p}.mlp.gate_proj.weight"), vec![inter, h]),
            (format!("{p}.mlp.up_proj.weight"), vec![inter, h]),
            (format!("{p}.mlp.down_proj.weight"), vec![h, inter]),
        ]);
    }
    shapes.push(("model.norm.weight".into(), vec![h]));

    // Values come in chunks of CHUNK, each from its own xorshift stream seeded
    // by (tensor, chunk), so rayon fills them in parallel and the checkpoint
    // is the same on any number of threads.
    const CHUNK: usize = 1 << 20;
    let value_bytes = dtype.bitsize() / 8;
    let params: usize = shapes.iter().map(|(_, shape)| shape.iter().product::<usize>()).sum();
    let bytes: Vec<Vec<u8>> = shapes
        .iter()
        .enumerate()
        .map(|(t, (name, shape))| {
            let len: usize = shape.iter().product();
            let mut out = vec![0u8; len * value_bytes];
            out.par_chunks_mut(CHUNK * value_bytes).enumerate().for_each(|(c, chunk)| {
                let mut state = splitmix64(((t as u64) << 32) | c as u64) | 1;
                let mut uniform = move || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
                };
                for out in chunk.chunks_exact_mut(value_bytes) {
                    let v = if name.ends_with("norm.weight") {
                        1.0f32
                    } else {
                        let (u1, u2) = (uniform(), uniform());
                        ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos() * 0.02) as f32
                    };
                    match dtype {
                        Dtype::BF16 => out.copy_from_slice(&half::bf16::from_f32(v).to_le_bytes()),
                        Dtype::F16 => out.copy_from_slice(&half::f16::from_f32(v).to_le_bytes()),
                        _ => out.copy_from_slice(&v.to_le_bytes()),
                    }
                }
            });
            out
        })
        .collect();
    let views: Vec<(&str, TensorView<'_>)> = shapes
        .iter()
        .zip(&bytes)
        .map(|((n, s), b)| Ok((n.as_str(), TensorView::new(dtype, s.clone(), b)?)))
        .collect::<anyhow::Result<_>>()?;
    safetensors::serialize_to_file(views, None, &dir.join("model.safetensors"))?;
    eprintln!("wrote {} ({:.1}M params, {dtype:?})", dir.display(), params as f64 / 1e6);
    Ok(())
}

/// A well-mixed 64-bit seed from a counter (Steele et al.'s SplitMix64 finaliser).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
