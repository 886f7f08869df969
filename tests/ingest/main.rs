//! Ingest: formats, derived columns, bad input, memory, compaction, faults.
//!
//! One test binary per area, each area's files as modules: every binary
//! links DataFusion, so a few binaries build and link far faster than one
//! per file (docs/ARCHITECTURE.md, "Tests").

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod compact;
mod faults;
mod formats;
mod ingest;
mod internals;
mod machines;
mod memory;
mod objects;
mod profiles;
mod real_logs;
mod request_counts;
mod roundtrip;
mod tokens;
