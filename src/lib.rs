//! tokscope: token-level analytics for LLM serving logs.
//!
//! The data path, left to right: [`ingest`] resolves access logs (local files
//! or object-store URLs) and feeds them to the core's [`reader`], which parses
//! each line with one of the [`formats`] into a [`record`], derives the
//! analytic columns once ([`derive`]) and builds Arrow batches of the tables
//! declared in the [`catalog`]; [`dataset`] writes them as Parquet; [`engine`]
//! registers the catalog's tables and tokscope's UDFs in a DataFusion
//! `SessionContext` for the SQL [`jobs`] and ad-hoc queries; [`replay`] runs
//! suspect prompts through a real Llama-family decoder, and [`mediation`] uses
//! its hooks for causal tracing and layer attribution. See
//! `docs/ARCHITECTURE.md` for the whole map.

// First, so that its error macros are in scope in every module below.
#[macro_use]
pub mod error;

pub mod dataset;
pub mod engine;
pub mod export;
pub mod generate;
pub mod ingest;
pub mod jobs;
pub mod mediation;
pub mod pipeline;
pub mod progress;
pub mod replay;
pub mod resources;
pub mod samples;
pub mod serve;
pub mod size;
pub mod store;

pub use error::{Error, Result};
/// The engine-free core, re-exported: records, derived columns, the table
/// catalog, input formats, the line splitter and the batch reader.
pub use tokscope_core::{attribution, catalog, derive, formats, lines, reader, record, redact};
