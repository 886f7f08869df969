//! CUDA C sources of the replay kernels (RMSNorm, RoPE, attention with
//! softmax, SwiGLU, residual and bias adds), compiled with NVRTC at run time.
//! The source lives in `kernels.cu` beside this file so editors and `nvcc`
//! can read it as CUDA.

/// The whole kernel source.
pub const SOURCE: &str = include_str!("kernels.cu");

/// Names of the `extern "C"` kernels in [`SOURCE`].
pub const KERNELS: &[&str] = &["rms_norm", "rope", "attention", "swiglu", "add_in_place", "add_bias"];

/// Threads per block of the row kernels (`TOKSCOPE_BLOCK` in the source).
pub const BLOCK: u32 = 256;

/// NVRTC options used everywhere (the test compiles with exactly these):
/// no fused multiply-add contraction and IEEE division/sqrt, so the GPU rounds
/// like the CPU path, whose Rust arithmetic is never contracted.
pub fn compile_options(defines: &[(&str, &str)]) -> cudarc::nvrtc::CompileOptions {
    cudarc::nvrtc::CompileOptions {
        fmad: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        ftz: Some(false),
        options: defines.iter().map(|(k, v)| format!("-D{k}={v}")).collect(),
        name: Some("tokscope_replay.cu".into()),
        ..Default::default()
    }
}

/// Compiles [`SOURCE`] to PTX text. Needs `libnvrtc` (see
/// [`super::nvrtc_available`]); `defines` become `-DNAME=VALUE`.
pub fn compile_ptx(defines: &[(&str, &str)]) -> crate::error::Result<String> {
    let ptx =
        cudarc::nvrtc::compile_ptx_with_opts(SOURCE, compile_options(defines)).map_err(|e| model_err!("NVRTC: {e}"))?;
    Ok(ptx.to_src())
}
