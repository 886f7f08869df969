//! Runs the SQL job specs: each `sql/<job>.slt` sits next to `sql/<job>.sql`
//! and holds the job's expected rows, written out by hand, over small tables
//! the spec creates itself (`CREATE TABLE requests AS VALUES ...`). A line
//! `{{job NAME}}` (or `{{job NAME param=value ...}}`) inside a `query` block
//! stands for the job's SQL as `tokscope job NAME --show-sql` prints it.
//!
//! The specs run on DataFusion's own sqllogictest runner
//! (`datafusion-sqllogictest`, the version matching tokscope's DataFusion)
//! with tokscope's SQL functions registered: prices from
//! `tests/data/slt_pricing.toml`, EOS markers from `tests/data/slt_eos_markers.json`.
//! Floats are compared rounded to 12 decimals (DataFusion's normalisation).
//! Run one spec: `cargo test --test slt -- eos`.

use std::path::{Path, PathBuf};

use datafusion_sqllogictest::{df_value_validator, value_normalizer, DataFusion};
use sqllogictest::strict_column_validator;
use tokscope::engine::{self, UdfConfig};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The spec's text with every `{{job ...}}` line replaced by the job's SQL.
fn expand_jobs(spec: &str, file: &Path) -> Result<String, String> {
    let mut out = String::with_capacity(spec.len() * 4);
    for (n, line) in spec.lines().enumerate() {
        let Some(call) = line.trim().strip_prefix("{{job ").and_then(|l| l.strip_suffix("}}")) else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let mut words = call.split_whitespace();
        let name = words.next().ok_or_else(|| format!("{}:{}: {{{{job}}}} without a name", file.display(), n + 1))?;
        let params: Vec<(String, String)> = words
            .map(|w| w.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect::<Option<_>>()
            .ok_or_else(|| format!("{}:{}: parameters are NAME=VALUE", file.display(), n + 1))?;
        let sql = tokscope::jobs::job(name)
            .and_then(|j| j.sql_with(&params))
            .map_err(|e| format!("{}:{}: {e}", file.display(), n + 1))?;
        // A query block ends at its first blank line: the job's SQL has none,
        // and its `--` comments are dropped so only SQL remains.
        for sql_line in sql.lines().filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("--")) {
            out.push_str(sql_line);
            out.push('\n');
        }
    }
    Ok(out)
}

async fn run_spec(path: &Path, scratch: &Path) -> Result<(), String> {
    let spec = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let expanded = scratch.join(path.file_name().ok_or("spec without a name")?);
    std::fs::write(&expanded, expand_jobs(&spec, path)?).map_err(|e| e.to_string())?;
    let data = repo().join("tests/data");
    let config = UdfConfig::load(
        Some(data.join("slt_pricing.toml").to_str().ok_or("non UTF-8 path")?),
        None,
        Some(&data.join("slt_eos_markers.json")),
    )
    .map_err(|e| e.to_string())?;
    let relative = PathBuf::from(path.file_name().ok_or("spec without a name")?);
    let mut runner = sqllogictest::Runner::new(|| {
        let relative = relative.clone();
        let config = config.clone();
        async move {
            let ctx = engine::new_session()
                .map_err(|e| datafusion_sqllogictest::DFSqlLogicTestError::Other(e.to_string()))?;
            engine::register_udfs(&ctx, &config);
            Ok(DataFusion::new(ctx, relative, indicatif::ProgressBar::hidden()))
        }
    });
    runner.with_column_validator(strict_column_validator);
    runner.with_normalizer(value_normalizer);
    runner.with_validator(df_value_validator);
    runner.run_file_async(&expanded).await.map_err(|e| format!("{}: {e}", path.display()))
}

fn main() {
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let mut specs: Vec<PathBuf> = std::fs::read_dir(repo().join("sql"))
        .expect("sql/ exists")
        .map(|e| e.expect("readable sql/").path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .filter(|p| filter.is_empty() || filter.iter().any(|f| p.to_string_lossy().contains(f.as_str())))
        .collect();
    specs.sort();
    let (mut passed, mut failed) = (0, 0);
    if filter.is_empty() {
        for job in tokscope::jobs::JOBS.iter().filter(|j| !repo().join(format!("sql/{}.slt", j.name)).is_file()) {
            failed += 1;
            println!("test sql/{}.slt ... FAILED\nthe job {} has no spec", job.name, job.name);
        }
    }
    let scratch = tempfile::tempdir().expect("scratch dir");
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    for spec in &specs {
        match rt.block_on(run_spec(spec, scratch.path())) {
            Ok(()) => {
                passed += 1;
                println!("test {} ... ok", spec.display());
            }
            Err(e) => {
                failed += 1;
                println!("test {} ... FAILED\n{e}", spec.display());
            }
        }
    }
    println!("\ntest result: {}. {passed} passed; {failed} failed", if failed == 0 { "ok" } else { "FAILED" });
    if failed > 0 {
        std::process::exit(1);
    }
}
