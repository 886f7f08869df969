//! Queries and the command line: jobs, output, SQL safety, readers, the catalog, the docs.
//!
//! One test binary per area, each area's files as modules: every binary
//! links DataFusion, so a few binaries build and link far faster than one
//! per file (docs/ARCHITECTURE.md, "Tests").

#[path = "../common/mod.rs"]
mod common;

mod ab;
mod architecture;
mod attribution;
mod catalog;
mod cli;
mod docs_paths;
mod first_last;
mod jobs;
mod load;
mod output_formats;
mod readers;
mod secrets;
mod sql_safety;
mod token_jobs;
