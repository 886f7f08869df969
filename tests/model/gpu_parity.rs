//! GPU kernels against the CPU path (needs `--features cuda` and a GPU; skips
//! with a message otherwise). Run on a lent GPU through `bench/gpu_check.sh`.
#![cfg(feature = "cuda")]

use std::sync::Arc;

use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;
use tokscope::replay::cuda::{self, kernels as gpu};
use tokscope::replay::kernels as cpu;

use crate::common;

fn context() -> Option<Arc<CudaContext>> {
    match cuda::probe() {
        Ok(_) => Some(CudaContext::new(0).expect("CUDA context")),
        Err(why) => {
            eprintln!("skip: no GPU ({why})");
            None
        }
    }
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    // Deterministic values in [-2, 2) without an RNG dependency.
    (0..n).map(|i| ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 4000) as f32 / 1000.0 - 2.0).collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn rms_norm_rope_and_swiglu_match_the_cpu() {
    let Some(ctx) = context() else { return };
    let stream = ctx.default_stream();
    let ptx = gpu::compile_ptx(&[]).expect("NVRTC");
    let module = ctx.load_module(Ptx::from_src(ptx)).expect("module");

    // RMSNorm over 5 rows of 300 (more than one block's stride).
    let (rows, dim) = (5usize, 300usize);
    let (x, w) = (values(rows * dim, 1), values(dim, 2));
    let expected = cpu::rms_norm(&x, &w, 1e-5);
    let dx = stream.clone_htod(&x).unwrap();
    let dw = stream.clone_htod(&w).unwrap();
    let mut dy = stream.alloc_zeros::<f32>(rows * dim).unwrap();
    let f = module.load_function("rms_norm").unwrap();
    let cfg = LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (gpu::BLOCK, 1, 1), shared_mem_bytes: 0 };
    let (dim_i, eps) = (dim as i32, 1e-5f32);
    unsafe { stream.launch_builder(&f).arg(&dx).arg(&dw).arg(&mut dy).arg(&dim_i).arg(&eps).launch(cfg) }.unwrap();
    let got = stream.clone_dtoh(&dy).unwrap();
    assert!(max_diff(&got, &expected) < 1e-5, "rms_norm differs by {}", max_diff(&got, &expected));

    // RoPE: 3 tokens x 4 heads x 16, starting at position 7.
    let (tokens, heads, head_dim, start) = (3usize, 4usize, 16usize, 7usize);
    let inv_freq = cpu::rope_inv_freq(10000.0, head_dim);
    let q = values(tokens * heads * head_dim, 3);
    let mut expected = q.clone();
    for (t, row) in expected.chunks_exact_mut(heads * head_dim).enumerate() {
        cpu::apply_rope(row, start + t, &inv_freq);
    }
    let mut dq = stream.clone_htod(&q).unwrap();
    let df = stream.clone_htod(&inv_freq).unwrap();
    let f = module.load_function("rope").unwrap();
    let cfg = LaunchConfig { grid_dim: (tokens as u32, heads as u32, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
    let (h_i, d_i, s_i) = (heads as i32, head_dim as i32, start as i32);
    unsafe { stream.launch_builder(&f).arg(&mut dq).arg(&df).arg(&h_i).arg(&d_i).arg(&s_i).launch(cfg) }.unwrap();
    let got = stream.clone_dtoh(&dq).unwrap();
    assert!(max_diff(&got, &expected) < 1e-5, "rope differs by {}", max_diff(&got, &expected));

    // SwiGLU over 1000 values.
    let (g, u) = (values(1000, 4), values(1000, 5));
    let expected: Vec<f32> = g.iter().zip(&u).map(|(g, u)| cpu::silu(*g) * u).collect();
    let (dg, du) = (stream.clone_htod(&g).unwrap(), stream.clone_htod(&u).unwrap());
    let mut dout = stream.alloc_zeros::<f32>(1000).unwrap();
    let f = module.load_function("swiglu").unwrap();
    let n = 1000i32;
    unsafe {
        stream.launch_builder(&f).arg(&dg).arg(&du).arg(&mut dout).arg(&n).launch(LaunchConfig::for_num_elems(1000))
    }
    .unwrap();
    let got = stream.clone_dtoh(&dout).unwrap();
    assert!(max_diff(&got, &expected) < 1e-6, "swiglu differs by {}", max_diff(&got, &expected));
}

#[test]
fn device_cuda_on_a_gpu_follows_the_forward_switch() {
    if context().is_none() {
        return;
    }
    let resolved = tokscope::replay::DeviceRequest::Cuda.resolve();
    if cuda::forward_enabled() {
        assert_eq!(resolved.unwrap(), tokscope::replay::Device::Cuda(0));
    } else {
        let message = resolved.unwrap_err().to_string();
        assert!(message.contains("not enabled") && message.contains(cuda::FORWARD_OPT_IN), "{message}");
    }
}

/// Largest logit difference allowed between the GPU and CPU forward passes:
/// cuBLAS sums in another order (and fuses multiply-adds), nothing else differs.
const LOGITS_TOLERANCE: f32 = 1e-3;

/// Runs `prompt` through both models (logits at every position), then `steps`
/// cached one-token steps, each fed the CPU's argmax, and hands every pair of
/// logits rows to `check` with a label (`prefill`, `decode step N`).
fn prefill_then_decode(
    cpu_model: &tokscope::replay::LlamaModel,
    gpu_model: &cuda::CudaModel,
    prompt: &[u32],
    steps: usize,
    mut check: impl FnMut(&str, &[Vec<f32>], &[Vec<f32>]),
) {
    use tokscope::replay::{decode::argmax, Decoder, LogitsFor};
    let (mut cpu_cache, mut gpu_cache) = (Decoder::new_cache(cpu_model), gpu_model.new_cache());
    let cpu = cpu_model.logits(prompt, &mut cpu_cache, LogitsFor::AllPositions).unwrap();
    let gpu = gpu_model.logits(prompt, &mut gpu_cache, LogitsFor::AllPositions).unwrap();
    check("prefill", &cpu, &gpu);
    let mut next = argmax(cpu.last().unwrap());
    for step in 0..steps {
        let cpu = cpu_model.logits(&[next], &mut cpu_cache, LogitsFor::LastPosition).unwrap();
        let gpu = gpu_model.logits(&[next], &mut gpu_cache, LogitsFor::LastPosition).unwrap();
        check(&format!("decode step {step}"), &cpu, &gpu);
        next = argmax(&cpu[0]);
    }
}

/// The whole model on the GPU against the CPU on the reference checkpoint:
/// prefill logits at every position, then cached greedy decoding (ids must be
/// identical, logits within [`LOGITS_TOLERANCE`]), then teacher-forced scoring.
#[test]
fn full_model_logits_match_the_cpu_on_tiny_stories_a() {
    if context().is_none() {
        return;
    }
    use tokscope::replay::LlamaModel;
    let dir = common::data_dir().join("models/tiny-stories-a");
    let cpu_model = LlamaModel::from_dir(&dir).expect("reference model");
    let gpu_model = cuda::CudaModel::upload(&cpu_model, 0).expect("upload");
    let tokenizer = tokscope::replay::PromptTokenizer::from_dir(&dir, cpu_model.config().bos_token_id).unwrap();
    let prompt = tokenizer.encode_prompt("Once upon a time, there was a little girl named Lily. She").unwrap();

    let mut worst = 0.0f32;
    let mut check = |what: &str, a: &[Vec<f32>], b: &[Vec<f32>]| {
        assert_eq!(a.len(), b.len(), "{what}: row count");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            let d = max_diff(x, y);
            worst = worst.max(d);
            assert!(d < LOGITS_TOLERANCE, "{what} row {i}: max abs logit diff {d}");
        }
        if what.starts_with("decode") {
            let (a, b) = (tokscope::replay::decode::argmax(&a[0]), tokscope::replay::decode::argmax(&b[0]));
            assert_eq!(a, b, "greedy id differs at {what}");
        }
    };
    prefill_then_decode(&cpu_model, &gpu_model, &prompt, 24, &mut check);
    let cpu_greedy = tokscope::replay::greedy_decode(&cpu_model, &prompt, 16).unwrap();
    let gpu_greedy = tokscope::replay::greedy_decode(&gpu_model, &prompt, 16).unwrap();
    assert_eq!(cpu_greedy.greedy_ids, gpu_greedy.greedy_ids);
    let p_eos = cpu_greedy.p_eos.iter().zip(&gpu_greedy.p_eos).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(p_eos < 1e-4, "P(EOS) differs by {p_eos}");
    let cont = &cpu_greedy.greedy_ids;
    let cpu_score = tokscope::replay::score_continuation(&cpu_model, &prompt, cont).unwrap();
    let gpu_score = tokscope::replay::score_continuation(&gpu_model, &prompt, cont).unwrap();
    let lp = cpu_score.logprobs.iter().zip(&gpu_score.logprobs).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(lp < 1e-3, "teacher-forced logprobs differ by {lp}");
    eprintln!("full-model parity: max abs logit diff {worst:e}, P(EOS) {p_eos:e}, logprob {lp:e}");
}

/// Relative L2 error allowed between the GPU and CPU logits of the large
/// checkpoint: both compute in f32 from the same (exactly widened) weights and
/// differ only in summation order over up to `intermediate_size` terms.
const LARGE_RELATIVE_TOLERANCE: f64 = 1e-4;

/// `‖a - b‖ / ‖a‖` in f64.
fn relative_error(reference: &[f32], other: &[f32]) -> f64 {
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (r, o) in reference.iter().zip(other) {
        diff += (f64::from(*r) - f64::from(*o)).powi(2);
        norm += f64::from(*r).powi(2);
    }
    (diff / norm).sqrt()
}

/// The whole model on the GPU against the CPU on the checkpoint in the
/// directory `TOKSCOPE_GPU_PARITY_MODEL` names (`bench/gpu_check.sh` writes a
/// random one with Llama-3.2-1B's shape in bf16; the CPU keeps bf16, the GPU
/// widens to f32 at upload). Prefill logits at every position of the ids
/// `1..=32`, then 16 decode steps fed the CPU's argmax: every row within
/// [`LARGE_RELATIVE_TOLERANCE`], and the GPU's argmax the CPU's wherever the
/// CPU's top two logits are further apart than twice the row's largest
/// difference (a closer pair may swap under any summation order). Skips when
/// unset.
#[test]
fn full_model_logits_match_the_cpu_on_a_large_checkpoint() {
    let Some(dir) = std::env::var_os("TOKSCOPE_GPU_PARITY_MODEL") else {
        eprintln!("skip: TOKSCOPE_GPU_PARITY_MODEL names no checkpoint");
        return;
    };
    if context().is_none() {
        return;
    }
    use tokscope::replay::LlamaModel;
    let cpu_model = LlamaModel::from_dir(std::path::Path::new(&dir)).expect("checkpoint");
    let gpu_model = cuda::CudaModel::upload(&cpu_model, 0).expect("upload");
    let (mut worst_relative, mut worst_abs, mut argmax_checked) = (0.0f64, 0.0f32, 0usize);
    let mut check = |what: &str, cpu: &[Vec<f32>], gpu: &[Vec<f32>]| {
        assert_eq!(cpu.len(), gpu.len(), "{what}: row count");
        for (i, (c, g)) in cpu.iter().zip(gpu).enumerate() {
            assert!(g.iter().all(|v| v.is_finite()), "{what} row {i}: non-finite GPU logit");
            let (relative, abs) = (relative_error(c, g), max_diff(c, g));
            assert!(relative < LARGE_RELATIVE_TOLERANCE, "{what} row {i}: relative logit error {relative:e}");
            worst_relative = worst_relative.max(relative);
            worst_abs = worst_abs.max(abs);
            let mut sorted = c.clone();
            sorted.sort_by(|a, b| b.total_cmp(a));
            if sorted[0] - sorted[1] > 2.0 * abs {
                let (a, b) = (tokscope::replay::decode::argmax(c), tokscope::replay::decode::argmax(g));
                assert_eq!(a, b, "{what} row {i}: argmax differs");
                argmax_checked += 1;
            }
        }
    };
    let prompt: Vec<u32> = (1..=32).collect();
    prefill_then_decode(&cpu_model, &gpu_model, &prompt, 16, &mut check);
    assert!(argmax_checked >= 24, "only {argmax_checked} of 48 rows had a clear argmax");
    eprintln!(
        "large-checkpoint parity ({} parameters): worst relative logit error {worst_relative:e}, \
         max abs logit diff {worst_abs:e}, argmax equal on {argmax_checked} of 48 rows",
        cpu_model.parameter_count()
    );
}
