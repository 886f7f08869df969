//! The CUDA replay backend (`--features cuda`): cuBLAS for every projection,
//! NVRTC-compiled kernels ([`kernels`]) for the rest. CUDA libraries are
//! loaded at run time (cudarc `dynamic-loading`), so the feature builds
//! without CUDA; [`probe`] checks they are present before any CUDA call,
//! because cudarc panics when a call needs a library that is missing.

pub mod forward;
pub mod kernels;

pub use forward::{CudaKvCache, CudaModel};

/// Whether the cuBLAS forward pass ([`CudaModel`]) is used for `--device
/// cuda|auto`. It is implemented and wired in, but has not yet passed the
/// full-model parity test (`tests/model/gpu_parity.rs`, run by `bench/gpu_check.sh`)
/// on a real GPU; until it has, `auto` stays on the CPU and `--device cuda`
/// refuses, unless `TOKSCOPE_CUDA_FORWARD=1` opts in (what the GPU check does).
pub const FORWARD_AVAILABLE: bool = false;

/// The environment variable that enables the not-yet-verified CUDA forward pass.
pub const FORWARD_OPT_IN: &str = "TOKSCOPE_CUDA_FORWARD";

/// [`FORWARD_AVAILABLE`], or the [`FORWARD_OPT_IN`] variable set to `1`.
pub fn forward_enabled() -> bool {
    FORWARD_AVAILABLE || std::env::var(FORWARD_OPT_IN).is_ok_and(|v| v == "1")
}

/// Whether the driver library (`libcuda.so`) can be loaded and reports a
/// device: `Ok(device count)`, or why not, in words for the `--device` line.
pub fn probe() -> Result<usize, String> {
    // SAFETY: only tries to dlopen the driver library by its usual names.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("no CUDA driver: libcuda.so not found".into());
    }
    // SAFETY (of what follows): the library is present, so cudarc's lazy
    // symbol loading does not panic.
    match cudarc::driver::CudaContext::device_count() {
        Ok(n) if n > 0 => Ok(n as usize),
        Ok(_) => Err("the CUDA driver reports no device".into()),
        Err(e) => Err(format!("CUDA driver error: {e}")),
    }
}

/// Whether NVRTC (`libnvrtc.so`, e.g. from `pip install nvidia-cuda-nvrtc`
/// with its `lib` directory on `LD_LIBRARY_PATH`) can be loaded.
pub fn nvrtc_available() -> bool {
    // SAFETY: only tries to dlopen the library by its usual names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Whether cuBLAS can be loaded.
pub fn cublas_available() -> bool {
    // SAFETY: only tries to dlopen the library by its usual names.
    unsafe { cudarc::cublas::sys::is_culib_present() }
}
