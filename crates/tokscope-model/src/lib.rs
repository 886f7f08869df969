//! tokscope's decoder: a Llama-family forward pass on the CPU (rayon) and on
//! CUDA (`cuda` feature: cudarc, NVRTC kernels, cuBLAS), greedy decoding and
//! teacher-forced scoring with P(EOS) per step, the verdict on a suspected
//! truncation, and the interventions of causal mediation analysis.
//!
//! It depends on the engine-free core (model files, the catalog's verdict
//! rows, BLEU) and on neither DataFusion nor Ballista, so its tests build in
//! a fraction of the time the `tokscope` crate's do; `tokscope` reads
//! requests from a dataset and writes verdicts and interventions around it.

#[macro_use]
extern crate tokscope_core;

/// The core's error type: model, configuration and I/O errors.
pub mod error {
    pub use tokscope_core::error::{Error, Result};
}

pub mod mediation;
pub mod progress;
pub mod replay;

pub use error::{Error, Result};
