//! The `tokscope` command line: parse flags, call the library, map errors to
//! an exit code. All real work lives in the library crate.

use clap::{Parser, Subcommand};

/// Token-level analytics for LLM serving logs.
#[derive(Parser)]
#[command(name = "tokscope", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {}
}
