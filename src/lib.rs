//! tokscope: token-level analytics for LLM serving logs.
//!
//! The data path, left to right: [`ingest`] reads access logs (local files or
//! object-store URLs) into Arrow batches with the canonical schema of
//! [`schema`], derives the analytic columns once ([`derive`]) and writes a
//! Parquet [`dataset`]; [`engine`] registers that dataset and tokscope's UDFs
//! in a DataFusion `SessionContext` for SQL jobs and ad-hoc queries;
//! [`replay`] runs suspect prompts through a real Llama-family decoder, and
//! [`mediation`] uses its hooks for causal tracing and layer attribution.
//! See `docs/ARCHITECTURE.md` for the whole map.

pub mod dataset;
pub mod derive;
pub mod engine;
pub mod error;
pub mod export;
pub mod generate;
pub mod ingest;
pub mod jobs;
pub mod mediation;
pub mod record;
pub mod replay;
pub mod samples;
pub mod schema;
pub mod store;

pub use error::{Error, Result};
