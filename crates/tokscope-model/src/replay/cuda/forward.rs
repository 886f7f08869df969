//! The Llama forward pass on a CUDA GPU, mirroring [`LlamaModel::forward`]:
//! cuBLAS sgemm for every projection (FP32, TF32 off), the NVRTC kernels of
//! [`super::kernels`] for RMSNorm, RoPE, attention, SwiGLU and the residual and
//! bias adds, and the KV cache on the device. Results match the CPU path up to
//! floating-point summation order (cuBLAS's blocking and FMA), ~1e-5 on logits.
//!
//! Not supported here (the CPU path has them): hidden states and interventions.

use std::sync::{Arc, Mutex};

use cudarc::cublas::{sys as blas_sys, CudaBlas, Gemm, GemmConfig};
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;

use super::kernels;
use crate::error::{Error, Result};
use crate::replay::linear::Linear;
use crate::replay::{LlamaModel, LogitsFor, ModelConfig};

/// Attention keeps one score per visible position in dynamic shared memory;
/// with the 2 KiB of its static reduction buffers it must stay under the
/// 48 KiB a block gets without opt-in, so sequences are limited to this many
/// positions on the GPU (44 KiB of scores).
pub const MAX_ATTENTION_POSITIONS: usize = 44 * 1024 / 4;

fn cuda_err(e: impl std::fmt::Debug) -> Error {
    model_err!("CUDA: {e:?}")
}

struct GpuLinear {
    weight: CudaSlice<f32>,
    bias: Option<CudaSlice<f32>>,
    out_features: usize,
    in_features: usize,
}

struct GpuLayer {
    input_layernorm: CudaSlice<f32>,
    q_proj: GpuLinear,
    k_proj: GpuLinear,
    v_proj: GpuLinear,
    o_proj: GpuLinear,
    post_attention_layernorm: CudaSlice<f32>,
    gate_proj: GpuLinear,
    up_proj: GpuLinear,
    down_proj: GpuLinear,
}

struct Kernels {
    rms_norm: CudaFunction,
    rope: CudaFunction,
    attention: CudaFunction,
    swiglu: CudaFunction,
    add_in_place: CudaFunction,
    add_bias: CudaFunction,
}

/// A [`LlamaModel`]'s weights uploaded to one GPU, ready to run forward passes.
pub struct CudaModel {
    config: ModelConfig,
    ordinal: usize,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    kernels: Kernels,
    embed_tokens: GpuLinear,
    layers: Vec<GpuLayer>,
    norm: CudaSlice<f32>,
    lm_head: Option<GpuLinear>,
    inv_freq: CudaSlice<f32>,
    /// One forward pass at a time: rayon tasks share the model, and the
    /// stream, cuBLAS handle and kernels are used strictly in order.
    running: Mutex<()>,
}

impl std::fmt::Debug for CudaModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaModel")
            .field("ordinal", &self.ordinal)
            .field("layers", &self.layers.len())
            .finish_non_exhaustive()
    }
}

/// Keys and values of one sequence, on the GPU: per layer `[capacity, kv_width]`,
/// grown (doubling) as positions are added.
pub struct CudaKvCache {
    keys: Vec<CudaSlice<f32>>,
    values: Vec<CudaSlice<f32>>,
    len: usize,
    capacity: usize,
}

impl CudaKvCache {
    /// Number of positions cached.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True before the first forward pass.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl CudaModel {
    /// Uploads `model` to GPU `ordinal` and compiles the kernels (NVRTC).
    pub fn upload(model: &LlamaModel, ordinal: usize) -> Result<Self> {
        let ctx = CudaContext::new(ordinal).map_err(cuda_err)?;
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(stream.clone()).map_err(cuda_err)?;
        // Plain FP32 sgemm: no TF32 tensor-op rounding of the inputs.
        // SAFETY: the handle is live; the mode is a valid enum value.
        let status =
            unsafe { blas_sys::cublasSetMathMode(*blas.handle(), blas_sys::cublasMath_t::CUBLAS_DEFAULT_MATH) };
        if status != blas_sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return Err(cuda_err(status));
        }
        let ptx = kernels::compile_ptx(&[])?;
        let module = ctx.load_module(Ptx::from_src(ptx)).map_err(cuda_err)?;
        let f = |name: &str| module.load_function(name).map_err(cuda_err);
        let kernels = Kernels {
            rms_norm: f("rms_norm")?,
            rope: f("rope")?,
            attention: f("attention")?,
            swiglu: f("swiglu")?,
            add_in_place: f("add_in_place")?,
            add_bias: f("add_bias")?,
        };
        let vec = |v: &[f32]| stream.clone_htod(v).map_err(cuda_err);
        let lin = |l: &Linear| -> Result<GpuLinear> {
            Ok(GpuLinear {
                weight: vec(&l.to_f32())?,
                bias: l.bias().map(vec).transpose()?,
                out_features: l.out_features(),
                in_features: l.in_features(),
            })
        };
        let w = model.weights();
        let layers = w
            .layers
            .iter()
            .map(|l| {
                Ok(GpuLayer {
                    input_layernorm: vec(&l.input_layernorm)?,
                    q_proj: lin(&l.q_proj)?,
                    k_proj: lin(&l.k_proj)?,
                    v_proj: lin(&l.v_proj)?,
                    o_proj: lin(&l.o_proj)?,
                    post_attention_layernorm: vec(&l.post_attention_layernorm)?,
                    gate_proj: lin(&l.gate_proj)?,
                    up_proj: lin(&l.up_proj)?,
                    down_proj: lin(&l.down_proj)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let config = model.config().clone();
        let inv_freq = vec(&crate::replay::kernels::rope_inv_freq(config.rope_theta, config.head_dim))?;
        let gpu = CudaModel {
            embed_tokens: lin(&w.embed_tokens)?,
            norm: vec(&w.norm)?,
            lm_head: w.lm_head.as_ref().map(lin).transpose()?,
            layers,
            inv_freq,
            kernels,
            blas,
            stream,
            ordinal,
            config,
            running: Mutex::new(()),
        };
        gpu.stream.synchronize().map_err(cuda_err)?;
        Ok(gpu)
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// An empty cache for one sequence (device memory is allocated on first use).
    pub fn new_cache(&self) -> CudaKvCache {
        CudaKvCache { keys: Vec::new(), values: Vec::new(), len: 0, capacity: 0 }
    }

    /// Runs `tokens` after the positions in `cache`, appends their keys and
    /// values, and returns the logits rows `which` asks for (like
    /// [`LlamaModel::forward`] without hidden states or interventions).
    pub fn forward(&self, tokens: &[u32], cache: &mut CudaKvCache, which: LogitsFor) -> Result<Vec<Vec<f32>>> {
        let _running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let cfg = &self.config;
        let (h, n, start) = (cfg.hidden_size, tokens.len(), cache.len);
        cfg.check_sequence(start, n)?;
        if start + n > MAX_ATTENTION_POSITIONS {
            return Err(model_err!(
                "sequence of {} tokens exceeds the CUDA attention limit of {MAX_ATTENTION_POSITIONS} positions",
                start + n
            ));
        }
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= cfg.vocab_size) {
            return Err(model_err!("token id {t} is outside the vocabulary of {}", cfg.vocab_size));
        }
        self.reserve(cache, start + n)?;
        let s = &self.stream;
        let (qw, kvw, hd) = (cfg.q_width(), cfg.kv_width(), cfg.head_dim);

        let mut x = s.alloc_zeros::<f32>(n * h).map_err(cuda_err)?;
        for (i, &t) in tokens.iter().enumerate() {
            let t = t as usize;
            s.memcpy_dtod(&self.embed_tokens.weight.slice(t * h..(t + 1) * h), &mut x.slice_mut(i * h..(i + 1) * h))
                .map_err(cuda_err)?;
        }
        for (l, layer) in self.layers.iter().enumerate() {
            // Attention block.
            let normed = self.rms_norm(&x, &layer.input_layernorm, n)?;
            let mut q = self.linear(&layer.q_proj, &normed, n)?;
            let mut k = self.linear(&layer.k_proj, &normed, n)?;
            let v = self.linear(&layer.v_proj, &normed, n)?;
            self.rope(&mut q, n, cfg.num_attention_heads, start)?;
            self.rope(&mut k, n, cfg.num_key_value_heads, start)?;
            s.memcpy_dtod(&k, &mut cache.keys[l].slice_mut(start * kvw..(start + n) * kvw)).map_err(cuda_err)?;
            s.memcpy_dtod(&v, &mut cache.values[l].slice_mut(start * kvw..(start + n) * kvw)).map_err(cuda_err)?;
            let mut attn = s.alloc_zeros::<f32>(n * qw).map_err(cuda_err)?;
            let launch = LaunchConfig {
                grid_dim: (n as u32, cfg.num_attention_heads as u32, 1),
                block_dim: (kernels::BLOCK, 1, 1),
                shared_mem_bytes: ((start + n) * 4) as u32,
            };
            let (heads, kv_heads, hd_i, start_i) =
                (cfg.num_attention_heads as i32, cfg.num_key_value_heads as i32, hd as i32, start as i32);
            let scale = 1.0 / (hd as f32).sqrt();
            // SAFETY: argument types and buffer sizes match the kernel's signature and shapes.
            unsafe {
                s.launch_builder(&self.kernels.attention)
                    .arg(&q)
                    .arg(&cache.keys[l])
                    .arg(&cache.values[l])
                    .arg(&mut attn)
                    .arg(&heads)
                    .arg(&kv_heads)
                    .arg(&hd_i)
                    .arg(&start_i)
                    .arg(&scale)
                    .launch(launch)
            }
            .map_err(cuda_err)?;
            let projected = self.linear(&layer.o_proj, &attn, n)?;
            self.add_in_place(&mut x, &projected)?;
            // MLP block.
            let normed = self.rms_norm(&x, &layer.post_attention_layernorm, n)?;
            let gate = self.linear(&layer.gate_proj, &normed, n)?;
            let up = self.linear(&layer.up_proj, &normed, n)?;
            let mut act = s.alloc_zeros::<f32>(gate.len()).map_err(cuda_err)?;
            let count = gate.len() as i32;
            // SAFETY: three buffers of `count` floats.
            unsafe {
                s.launch_builder(&self.kernels.swiglu)
                    .arg(&gate)
                    .arg(&up)
                    .arg(&mut act)
                    .arg(&count)
                    .launch(LaunchConfig::for_num_elems(count as u32))
            }
            .map_err(cuda_err)?;
            let down = self.linear(&layer.down_proj, &act, n)?;
            self.add_in_place(&mut x, &down)?;
        }
        cache.len += n;

        let rows = match which {
            LogitsFor::LastPosition => 1,
            LogitsFor::AllPositions => n,
        };
        let last = if rows == n {
            x
        } else {
            let mut last = s.alloc_zeros::<f32>(h).map_err(cuda_err)?;
            s.memcpy_dtod(&x.slice((n - 1) * h..), &mut last).map_err(cuda_err)?;
            last
        };
        let normed = self.rms_norm(&last, &self.norm, rows)?;
        let head = self.lm_head.as_ref().unwrap_or(&self.embed_tokens);
        let logits = self.linear(head, &normed, rows)?;
        let host = s.clone_dtoh(&logits).map_err(cuda_err)?;
        // A copy to pageable memory already waits for completion; be explicit.
        s.synchronize().map_err(cuda_err)?;
        Ok(host.chunks_exact(head.out_features).map(<[f32]>::to_vec).collect())
    }

    /// [`Self::forward`] for several sequences, `tokens[s]` after the
    /// positions of `caches[s]`, one sequence after another.
    pub fn forward_batch(
        &self,
        tokens: &[&[u32]],
        caches: &mut [&mut CudaKvCache],
        which: LogitsFor,
    ) -> Result<Vec<Vec<Vec<f32>>>> {
        tokens.iter().zip(caches.iter_mut()).map(|(t, c)| self.forward(t, c, which)).collect()
    }

    /// Makes room for `positions` positions in every layer of `cache`.
    fn reserve(&self, cache: &mut CudaKvCache, positions: usize) -> Result<()> {
        if positions <= cache.capacity {
            return Ok(());
        }
        let kvw = self.config.kv_width();
        let capacity = positions.next_power_of_two().max(256).min(self.config.max_position_embeddings.max(positions));
        let grow = |old: Option<&CudaSlice<f32>>| -> Result<CudaSlice<f32>> {
            let mut new = self.stream.alloc_zeros::<f32>(capacity * kvw).map_err(cuda_err)?;
            if let Some(old) = old {
                if cache.len > 0 {
                    self.stream
                        .memcpy_dtod(&old.slice(..cache.len * kvw), &mut new.slice_mut(..cache.len * kvw))
                        .map_err(cuda_err)?;
                }
            }
            Ok(new)
        };
        let layers = self.config.num_hidden_layers;
        let keys = (0..layers).map(|l| grow(cache.keys.get(l))).collect::<Result<Vec<_>>>()?;
        let values = (0..layers).map(|l| grow(cache.values.get(l))).collect::<Result<Vec<_>>>()?;
        cache.keys = keys;
        cache.values = values;
        cache.capacity = capacity;
        Ok(())
    }

    /// `y = x W^T (+ b)` for `n` rows. Row-major W `[out, in]` is column-major
    /// `[in, out]`, row-major x `[n, in]` column-major `[in, n]`, and row-major
    /// y `[n, out]` column-major `[out, n]`: so `y = op_T(W) x` in cuBLAS terms.
    fn linear(&self, lin: &GpuLinear, x: &CudaSlice<f32>, n: usize) -> Result<CudaSlice<f32>> {
        let (out, inp) = (lin.out_features, lin.in_features);
        let mut y = self.stream.alloc_zeros::<f32>(n * out).map_err(cuda_err)?;
        let cfg = GemmConfig {
            transa: blas_sys::cublasOperation_t::CUBLAS_OP_T,
            transb: blas_sys::cublasOperation_t::CUBLAS_OP_N,
            m: out as i32,
            n: n as i32,
            k: inp as i32,
            alpha: 1.0f32,
            lda: inp as i32,
            ldb: inp as i32,
            beta: 0.0f32,
            ldc: out as i32,
        };
        // SAFETY: W holds out*in, x n*in and y n*out floats, matching m, n, k and the leading dimensions.
        unsafe { self.blas.gemm(cfg, &lin.weight, x, &mut y) }.map_err(cuda_err)?;
        if let Some(bias) = &lin.bias {
            let (width, count) = (out as i32, (n * out) as i32);
            // SAFETY: y holds count floats, bias width floats.
            unsafe {
                self.stream
                    .launch_builder(&self.kernels.add_bias)
                    .arg(&mut y)
                    .arg(bias)
                    .arg(&width)
                    .arg(&count)
                    .launch(LaunchConfig::for_num_elems(count as u32))
            }
            .map_err(cuda_err)?;
        }
        Ok(y)
    }

    fn rms_norm(&self, x: &CudaSlice<f32>, weight: &CudaSlice<f32>, rows: usize) -> Result<CudaSlice<f32>> {
        let dim = weight.len();
        let mut y = self.stream.alloc_zeros::<f32>(rows * dim).map_err(cuda_err)?;
        let (dim_i, eps) = (dim as i32, self.config.rms_norm_eps);
        let launch =
            LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (kernels::BLOCK, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: x and y hold rows*dim floats, weight dim.
        unsafe {
            self.stream
                .launch_builder(&self.kernels.rms_norm)
                .arg(x)
                .arg(weight)
                .arg(&mut y)
                .arg(&dim_i)
                .arg(&eps)
                .launch(launch)
        }
        .map_err(cuda_err)?;
        Ok(y)
    }

    fn rope(&self, x: &mut CudaSlice<f32>, tokens: usize, heads: usize, start: usize) -> Result<()> {
        let hd = self.config.head_dim;
        let launch = LaunchConfig {
            grid_dim: (tokens as u32, heads as u32, 1),
            block_dim: ((hd / 2).clamp(1, 1024) as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let (heads_i, hd_i, start_i) = (heads as i32, hd as i32, start as i32);
        // SAFETY: x holds tokens*heads*head_dim floats, inv_freq head_dim/2.
        unsafe {
            self.stream
                .launch_builder(&self.kernels.rope)
                .arg(x)
                .arg(&self.inv_freq)
                .arg(&heads_i)
                .arg(&hd_i)
                .arg(&start_i)
                .launch(launch)
        }
        .map_err(cuda_err)?;
        Ok(())
    }

    fn add_in_place(&self, x: &mut CudaSlice<f32>, y: &CudaSlice<f32>) -> Result<()> {
        let count = x.len() as i32;
        // SAFETY: x and y hold count floats each.
        unsafe {
            self.stream
                .launch_builder(&self.kernels.add_in_place)
                .arg(x)
                .arg(y)
                .arg(&count)
                .launch(LaunchConfig::for_num_elems(count as u32))
        }
        .map_err(cuda_err)?;
        Ok(())
    }
}
