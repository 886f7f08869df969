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
enum Command {
    /// Greedy-decode a prompt with a local Llama-family model.
    Decode(tokscope::replay::cli::DecodeArgs),
    /// Teacher-forced log-probabilities of a continuation after a prompt.
    Score(tokscope::replay::cli::ScoreArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let mut stdout = std::io::stdout().lock();
    match cli.command {
        Command::Decode(args) => tokscope::replay::cli::run_decode(&args, &mut stdout)?,
        Command::Score(args) => tokscope::replay::cli::run_score(&args, &mut stdout)?,
    }
    Ok(())
}
