//! `tokscope formats`: the input formats, and a conformance report of how
//! each file of a folder reads (`--check`) before anything is ingested.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use tokscope::formats::Format;
use tokscope::ingest::{self, InputCheck};
use tokscope::reader::ReaderBuilder;

use super::args::input_format;
use super::ingest::EXIT_PARTIAL;

/// `tokscope formats`.
#[derive(clap::Args)]
pub struct FormatsArgs {
    /// Read these inputs (directories, files, globs, object-store URLs, as
    /// ingest takes them) and report, per file, the format detected, how it
    /// was cut, rows, rejects, finish reasons outside the table and the
    /// first error; writes nothing. Exit 0 when every file read without a
    /// reject, 4 when some line or record was rejected.
    #[arg(long, value_name = "INPUT", num_args = 1..)]
    check: Vec<String>,
    /// With --check: read every file in this format instead of detecting it.
    #[arg(long, requires = "check", value_parser = input_format())]
    format: Option<Format>,
    /// With --check: print the reports as JSON on stdout.
    #[arg(long, requires = "check")]
    json: bool,
}

/// Runs `tokscope formats`: the list of formats, or the report of `--check`.
pub fn run_formats(args: &FormatsArgs, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    if args.check.is_empty() {
        for f in Format::all() {
            writeln!(out, "{:<18} {}", f.name(), f.about())?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let reader = ReaderBuilder::new().with_format(args.format);
    let checks = ingest::check_inputs(&args.check, &reader, &Default::default())?;
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&checks)?)?;
    } else {
        write_report(&checks, out)?;
    }
    Ok(if checks.iter().all(InputCheck::is_clean) { ExitCode::SUCCESS } else { ExitCode::from(EXIT_PARTIAL) })
}

/// The report as a table: one row per file, columns aligned, numbers to the right.
fn write_report(checks: &[InputCheck], out: &mut impl Write) -> std::io::Result<()> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let header =
        ["file", "format", "framing", "lines", "rows", "rejected", "records_rejected", "unmapped", "first_error"];
    let rows: Vec<[String; 9]> = checks
        .iter()
        .map(|c| {
            let n = &c.check.counts;
            [
                Path::new(&c.file).strip_prefix(&cwd).map_or(c.file.clone(), |p| p.display().to_string()),
                c.check.format.unwrap_or("-").to_string(),
                c.check.framing.to_string(),
                n.lines_read.to_string(),
                n.rows_written.to_string(),
                n.lines_rejected.to_string(),
                n.records_rejected.to_string(),
                n.finish_reasons_unmapped.to_string(),
                c.check.first_error.as_deref().map_or("-".to_string(), one_line),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 9]| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            match i {
                0..=2 => text.push_str(&format!("{cell:<w$}  ")),
                8 => text.push_str(cell),
                _ => text.push_str(&format!("{cell:>w$}  ")),
            }
        }
        text
    };
    writeln!(out, "{}", line(header).trim_end())?;
    for row in &rows {
        writeln!(out, "{}", line(row.each_ref().map(String::as_str)).trim_end())?;
    }
    let rejected = checks.iter().filter(|c| !c.is_clean()).count();
    writeln!(out, "{} file(s), {rejected} with rejects", checks.len())
}

/// An error message on one line of the table.
fn one_line(error: &str) -> String {
    error.split_whitespace().collect::<Vec<_>>().join(" ")
}
