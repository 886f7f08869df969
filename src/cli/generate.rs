//! `tokscope generate`: synthetic logs.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use tokscope::generate::{self, ArmTruncation, GenFormat, GenOptions};

use super::args::choice;

/// `tokscope generate`.
#[derive(clap::Args)]
pub struct GenerateArgs {
    /// Number of requests.
    #[arg(long, default_value_t = 1000)]
    requests: usize,
    /// Log format to write.
    #[arg(long, default_value_t = GenFormat::Canonical, value_parser = choice::<GenFormat>(GenFormat::NAMES))]
    format: GenFormat,
    /// Output file (`-` for stdout).
    #[arg(long)]
    out: PathBuf,
    /// Random seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Include per-token logprobs and emission times.
    #[arg(long)]
    token_data: bool,
    /// Approximate characters of output text per request.
    #[arg(long, default_value_t = 600)]
    output_chars: usize,
    /// Spread the requests over this many days from 2024-06-01 (default: one a second on average).
    #[arg(long)]
    days: Option<u32>,
    /// Experiment arms, comma-separated: each request is in one of them at
    /// random (logged as `variant`); the rest of the log is the same as without.
    #[arg(long, value_delimiter = ',', value_name = "ARM,ARM")]
    arms: Vec<String>,
    /// An arm that silently truncates a share of its responses to long prompts:
    /// ARM:SHARE:MIN_PROMPT_TOKENS, e.g. candidate:0.12:16K (canonical format).
    #[arg(long, value_name = "ARM:SHARE:MIN")]
    arm_truncation: Option<String>,
    /// Log who each request ran for: `team` (12, the first busier), `user_id`
    /// (500), `tags` (0-2) and `provider`; the rest of the log is the same as without.
    #[arg(long)]
    attribution: bool,
}

/// Runs `tokscope generate`.
pub fn run_generate(args: &GenerateArgs) -> anyhow::Result<()> {
    let opts = GenOptions {
        requests: args.requests,
        format: args.format,
        seed: args.seed,
        token_data: args.token_data,
        output_chars: args.output_chars,
        days: args.days,
        arms: args.arms.iter().map(|a| a.trim().to_string()).filter(|a| !a.is_empty()).collect(),
        arm_truncation: args.arm_truncation.as_deref().map(ArmTruncation::parse).transpose()?,
        attribution: args.attribution,
    };
    let mut out: Box<dyn Write> = if args.out.as_os_str() == "-" {
        Box::new(std::io::stdout().lock())
    } else {
        let file = std::fs::File::create(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
        Box::new(std::io::BufWriter::new(file))
    };
    generate::generate(&opts, &mut out)?;
    out.flush()?;
    Ok(())
}
