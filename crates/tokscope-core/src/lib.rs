//! The part of tokscope that needs no query engine: what a parsed log line
//! is ([`record`]), the columns derived from it once at ingest ([`derive`]),
//! every table's declaration ([`catalog`]), the input formats ([`formats`]),
//! the streaming splitters of lines ([`lines`], over local files read in
//! blocks by several threads, [`file_blocks`]) and of JSON event documents
//! ([`event_array`]), the reader that turns lines
//! into Arrow batches ([`reader`]), and the statistics the SQL functions
//! compute ([`stats`]).
//!
//! It builds in seconds, so parser tests and fuzz targets do not wait for
//! DataFusion; the `tokscope` crate re-exports it.

// First, so that its error macros are in scope in every module below.
#[macro_use]
pub mod error;

#[macro_use]
pub mod named;

pub mod architectures;
pub mod attribution;
pub mod catalog;
pub mod derive;
pub mod event_array;
pub mod event_stream;
pub mod file_blocks;
pub mod formats;
pub mod fuzz;
pub mod lines;
#[cfg(feature = "model")]
pub mod model;
pub mod pricing;
pub mod prompt;
pub mod reader;
pub mod record;
pub mod redact;
pub mod stats;

pub use error::{Error, Result};
