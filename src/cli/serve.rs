//! `tokscope serve`: the Flight SQL endpoint (src/serve/) over a dataset
//! opened as `tokscope query` opens it; who may call is settled here, before
//! the dataset is opened.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use tokscope::engine;
use tokscope::serve::{self, Access, ServeOptions, Token};

use super::args::{EngineArgs, UdfArgs};

/// The environment variable holding the token clients must present.
const TOKEN_VAR: &str = "TOKSCOPE_SERVE_TOKEN";

/// `tokscope serve`.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// The dataset (local directory or object-store URL).
    #[arg(long)]
    data: String,
    /// Address to listen on (port 0: any free port; the bound one is printed on stderr).
    #[arg(long, default_value = "127.0.0.1:50060")]
    listen: SocketAddr,
    /// File holding the token clients must present (bearer, or basic auth's
    /// password); default: the TOKSCOPE_SERVE_TOKEN environment variable.
    #[arg(long, value_name = "FILE", conflicts_with = "no_auth")]
    token_file: Option<PathBuf>,
    /// Answer without a token (only on a loopback --listen address).
    #[arg(long)]
    no_auth: bool,
    #[command(flatten)]
    udf: UdfArgs,
    #[command(flatten)]
    engine: EngineArgs,
}

impl ServeArgs {
    /// Who may call, from --no-auth, --token-file or the environment.
    fn access(&self) -> anyhow::Result<Access> {
        if self.no_auth {
            anyhow::ensure!(
                self.listen.ip().is_loopback(),
                "--no-auth is only allowed on a loopback address (127.0.0.1, ::1), not {}; \
                 give a token ({TOKEN_VAR} or --token-file) to listen there",
                self.listen.ip()
            );
            return Ok(Access::Open);
        }
        let text = match &self.token_file {
            Some(path) => {
                std::fs::read_to_string(path).with_context(|| format!("reading --token-file {}", path.display()))?
            }
            None => std::env::var(TOKEN_VAR).map_err(|_| {
                anyhow::anyhow!(
                    "tokscope serve needs a token: set {TOKEN_VAR} or give --token-file FILE \
                     (or --no-auth on a loopback address)"
                )
            })?,
        };
        Ok(Access::Token(Token::new(&text)?))
    }
}

/// Runs `tokscope serve` until stopped.
pub fn run_serve(args: &ServeArgs) -> anyhow::Result<()> {
    let access = args.access()?;
    let udf = args.udf.config()?;
    let options = ServeOptions { access, log_queries: super::verbose() };
    engine::runtime()?.block_on(async {
        let ctx =
            super::query::session(&args.data, &udf, args.engine.remote().as_ref(), &args.udf.memory.limit()).await?;
        let (bound, serving) = serve::bind(ctx, args.listen, options).await?;
        eprintln!("tokscope serve: Flight SQL on {bound} over {}", args.data);
        serving.await?;
        Ok::<_, anyhow::Error>(())
    })
}
