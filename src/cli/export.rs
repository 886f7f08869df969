//! `tokscope export`: the dashboard and every job's result, published as
//! `DEST/<date>/` and `DEST/latest/`.

use chrono::NaiveDate;
use tokscope::engine;
use tokscope::export::publish::{self, ExportOptions};

use super::args::{EngineArgs, UdfArgs};
use super::query::session;

/// `tokscope export`.
#[derive(clap::Args)]
pub struct ExportArgs {
    /// The dataset (local directory or object-store URL).
    #[arg(long)]
    data: String,
    /// Where exports go (local directory or object-store URL): `<to>/<date>/` and `<to>/latest/`.
    #[arg(long)]
    to: String,
    /// The export's date, YYYY-MM-DD (default: today, UTC).
    #[arg(long)]
    date: Option<NaiveDate>,
    /// Jobs to run, comma-separated: job names, or the dashboard's named runs such as
    /// `spend_by_team` (default: the dashboard's runs whose tables hold rows; a run grouped by a column only when some request has a value in it).
    #[arg(long, value_delimiter = ',')]
    jobs: Option<Vec<String>>,
    /// Keep this many dated exports; older ones are removed.
    #[arg(long)]
    keep: Option<usize>,
    /// Days the trend charts show.
    #[arg(long, default_value_t = 30)]
    trend_days: u32,
    /// Jobs whose queries run at once (1: one after another).
    #[arg(long, default_value_t = publish::DEFAULT_JOBS_AT_ONCE, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64))]
    jobs_at_once: usize,
    /// Print the export summary as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// No progress bar on stderr.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    udf: UdfArgs,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Runs `tokscope export`.
pub fn run_export(args: &ExportArgs) -> anyhow::Result<()> {
    let udf = args.udf.config()?;
    let options = ExportOptions {
        to: args.to.clone(),
        date: args.date.unwrap_or_else(|| chrono::Utc::now().date_naive()),
        jobs: args.jobs.clone(),
        keep: args.keep,
        trend_days: args.trend_days,
        dataset: args.data.clone(),
        store: Default::default(),
        progress: !args.quiet,
        banner: Vec::new(),
        extra_files: Vec::new(),
        jobs_at_once: args.jobs_at_once,
    };
    let summary = engine::runtime()?.block_on(engine::retry_vanished(|| async {
        let ctx = session(&args.data, &udf, args.engine.remote().as_ref(), &args.udf.memory.limit()).await?;
        publish::export(&ctx, &options).await
    }))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!(
            "exported {} job(s) to {} and {} ({} files, page {} KB{}) in {:.2}s",
            summary.jobs.len(),
            summary.location,
            summary.latest,
            summary.files,
            summary.page_bytes.div_ceil(1024),
            if summary.removed.is_empty() { String::new() } else { format!(", removed {}", summary.removed.join(" ")) },
            summary.elapsed_s
        );
    }
    Ok(())
}
