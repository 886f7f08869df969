//! Where the forward pass runs: the CPU, or (with the `cuda` feature) an
//! NVIDIA GPU. The choice is validated before any model is loaded, so a CUDA
//! request fails fast, and `auto` falls back to the CPU with one stderr line.

use crate::error::Result;

tokscope_core::named_enum! {
    /// The `--device` a user asked for.
    #[derive(Default)]
    pub enum DeviceRequest as "device" {
        /// A CUDA GPU when this build has the feature and the machine a driver and device; else the CPU.
        #[default]
        Auto = "auto",
        /// The rayon CPU backend.
        Cpu = "cpu",
        /// An NVIDIA GPU (needs the `cuda` feature).
        Cuda = "cuda",
    }
}

/// A backend that can actually run the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    /// Plain Rust with rayon.
    Cpu,
    /// CUDA device with this ordinal (cuBLAS + NVRTC kernels).
    #[cfg(feature = "cuda")]
    Cuda(usize),
}

impl Device {
    /// The name stored in `replay_verdicts.device`: `cpu` or `cuda:N`.
    pub fn label(&self) -> String {
        match self {
            Device::Cpu => "cpu".into(),
            #[cfg(feature = "cuda")]
            Device::Cuda(n) => format!("cuda:{n}"),
        }
    }
}

/// The stderr line printed when `--device auto` runs on the CPU.
pub const AUTO_CPU_NOTE: &str = "device auto: using the CPU";

impl DeviceRequest {
    /// Resolves the request against this build and this machine.
    pub fn resolve(self) -> Result<Device> {
        self.resolve_with_note().map(|(device, _)| device)
    }

    /// Like [`Self::resolve`], plus the one line to print on stderr when
    /// `auto` had to fall back to the CPU (and why). The CUDA libraries are
    /// probed (dlopen) before any CUDA call: creating a context without them panics.
    pub fn resolve_with_note(self) -> Result<(Device, Option<String>)> {
        match self {
            DeviceRequest::Cpu => Ok((Device::Cpu, None)),
            DeviceRequest::Auto => match cuda_probe() {
                Ok(device) => Ok((device, None)),
                Err(why) => Ok((Device::Cpu, Some(format!("{AUTO_CPU_NOTE} ({why})")))),
            },
            DeviceRequest::Cuda => cuda_probe().map(|d| (d, None)).map_err(|why| config_err!("--device cuda: {why}")),
        }
    }
}

/// Why the commands that intervene in the forward pass (`trace`, `mediate`)
/// run on the CPU decoder only.
pub const INTERVENTIONS_NEED_CPU: &str =
    "causal tracing and mediation patch hidden states and weights inside the forward pass, \
     and only the CPU decoder has those hooks";

impl DeviceRequest {
    /// Resolves the request for a command that intervenes in the forward
    /// pass: `cpu` as is, `auto` to the CPU (with the same stderr note as
    /// [`Self::resolve_with_note`]), `cuda` refused with the reason.
    pub fn resolve_for_interventions(self) -> Result<(Device, Option<String>)> {
        match self {
            DeviceRequest::Cpu => Ok((Device::Cpu, None)),
            DeviceRequest::Auto => Ok((Device::Cpu, Some(format!("{AUTO_CPU_NOTE} ({INTERVENTIONS_NEED_CPU})")))),
            DeviceRequest::Cuda => Err(config_err!("--device cuda: {INTERVENTIONS_NEED_CPU}; use --device cpu")),
        }
    }
}

#[cfg(feature = "cuda")]
fn cuda_probe() -> std::result::Result<Device, String> {
    super::cuda::probe()?;
    require_library(super::cuda::nvrtc_available(), "NVRTC", "libnvrtc.so.13", "nvidia-cuda-nvrtc")?;
    require_library(super::cuda::cublas_available(), "cuBLAS", "libcublas.so.13", "nvidia-cublas")?;
    if !super::cuda::forward_enabled() {
        return Err(format!(
            "a GPU is present but the CUDA forward pass is not enabled yet (not implemented as the default until it passes \
             the GPU parity test; {}=1 opts in)",
            super::cuda::FORWARD_OPT_IN
        ));
    }
    Ok(Device::Cuda(0))
}

/// cudarc panics at the first call into a library it cannot load: say which one is missing instead.
#[cfg(feature = "cuda")]
fn require_library(present: bool, name: &str, soname: &str, wheel: &str) -> std::result::Result<(), String> {
    if present {
        return Ok(());
    }
    Err(format!(
        "a GPU is present but {name} ({soname}) was not found: pip install {wheel} and \
         put site-packages/nvidia/cu13/lib on LD_LIBRARY_PATH, or install the CUDA toolkit"
    ))
}

#[cfg(not(feature = "cuda"))]
fn cuda_probe() -> std::result::Result<Device, String> {
    Err("built without the cuda feature; rebuild with --features cuda or use --device cpu".into())
}

#[cfg(all(test, not(feature = "cuda")))]
mod tests {
    use super::*;

    #[test]
    fn auto_resolves_to_cpu() {
        assert_eq!(DeviceRequest::Auto.resolve().unwrap(), Device::Cpu);
    }

    #[test]
    fn cuda_without_the_feature_says_how_to_fix_it() {
        let message = DeviceRequest::Cuda.resolve().unwrap_err().to_string();
        assert!(message.contains("built without the cuda feature; rebuild with --features cuda or use --device cpu"));
    }
}

#[cfg(all(test, feature = "cuda"))]
mod cuda_tests {
    use super::*;

    #[test]
    fn a_missing_cuda_library_is_named_with_its_wheel() {
        assert!(require_library(true, "NVRTC", "libnvrtc.so.13", "nvidia-cuda-nvrtc").is_ok());
        let message = require_library(false, "cuBLAS", "libcublas.so.13", "nvidia-cublas").unwrap_err();
        assert!(message.contains("cuBLAS (libcublas.so.13) was not found: pip install nvidia-cublas and put"));
    }
}
