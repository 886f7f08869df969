//! `tokscope completions` and `tokscope man`: shell completion scripts and
//! man pages generated from the clap definitions, so they list exactly the
//! commands and flags `--help` does.

use std::io::Write;
use std::path::PathBuf;

use clap::CommandFactory;

use super::Cli;

/// `tokscope completions`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// `tokscope man`.
#[derive(Debug, Clone, clap::Args)]
pub struct ManArgs {
    /// Write `tokscope.1` and one `tokscope-<command>.1` per command into this directory
    /// instead of printing the main page.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
}

/// Runs `tokscope completions`.
pub fn run_completions(args: &CompletionsArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let mut cmd = Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "tokscope", out);
    Ok(())
}

/// Runs `tokscope man`.
pub fn run_man(args: &ManArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let cmd = Cli::command();
    match &args.out_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| tokscope::Error::io(dir.display(), e))?;
            clap_mangen::generate_to(cmd, dir).map_err(|e| tokscope::Error::io(dir.display(), e))?;
        }
        None => clap_mangen::Man::new(cmd).render(out)?,
    }
    Ok(())
}
