//! The decoder: golden files, replay, mediation, CUDA kernels and GPU parity.
//!
//! One test binary per area, each area's files as modules: every binary
//! links DataFusion, so a few binaries build and link far faster than one
//! per file (docs/ARCHITECTURE.md, "Tests").

#[path = "../common/mod.rs"]
mod common;

mod cuda_kernels;
mod decoder_golden;
mod gpu_parity;
mod mediation;
mod replay;
