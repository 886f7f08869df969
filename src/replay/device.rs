//! Where the forward pass runs. Only the CPU backend exists; the choice is
//! validated before any model is loaded, so a CUDA request fails fast.

use crate::error::{Error, Result};

/// The `--device` a user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum DeviceRequest {
    /// The best backend this build has (the CPU, for now).
    #[default]
    Auto,
    /// The rayon CPU backend.
    Cpu,
    /// An NVIDIA GPU (needs the `cuda` feature).
    Cuda,
}

/// A backend that can actually run the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    /// Plain Rust with rayon.
    Cpu,
}

impl DeviceRequest {
    /// Resolves the request against what this build supports.
    pub fn resolve(self) -> Result<Device> {
        match self {
            DeviceRequest::Auto | DeviceRequest::Cpu => Ok(Device::Cpu),
            DeviceRequest::Cuda if cfg!(feature = "cuda") => Err(Error::Config(
                "the CUDA replay backend is not implemented yet; use --device cpu".into(),
            )),
            DeviceRequest::Cuda => Err(Error::Config(
                "built without the cuda feature; rebuild with --features cuda or use --device cpu"
                    .into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_resolves_to_cpu() {
        assert_eq!(DeviceRequest::Auto.resolve().unwrap(), Device::Cpu);
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_says_how_to_fix_it() {
        let message = DeviceRequest::Cuda.resolve().unwrap_err().to_string();
        assert!(message.contains(
            "built without the cuda feature; rebuild with --features cuda or use --device cpu"
        ));
    }
}
