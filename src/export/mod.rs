//! Output of query and job results: a terminal table, CSV, JSON lines, or
//! Parquet; and the dashboard ([`dashboard`]).

pub mod dashboard;
pub mod publish;

use std::io::Write;

use arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};

tokscope_core::named_enum! {
    /// Result formats.
    #[derive(Default)]
    pub enum OutputFormat as "output format" {
        /// An aligned text table.
        #[default]
        Table = "table",
        /// CSV with a header.
        Csv = "csv",
        /// JSON lines, one object per row.
        Json = "json",
        /// Parquet (needs `--output`).
        Parquet = "parquet",
    }
}

/// Checks that `format` can go to `output` before any work is done: Parquet
/// is binary and needs a file.
pub fn check_destination(format: OutputFormat, output: Option<&std::path::Path>) -> Result<()> {
    if format == OutputFormat::Parquet && output.is_none() {
        return Err(config_err!("--format parquet needs --output FILE"));
    }
    Ok(())
}

/// Writes `batches` in `format` to the file `path`, or to stdout, and
/// flushes it, so a failed write is an error and not a short output.
pub fn write_output(batches: &[RecordBatch], format: OutputFormat, path: Option<&std::path::Path>) -> Result<()> {
    let mut out: Box<dyn Write> = match path {
        Some(p) => Box::new(std::fs::File::create(p).map_err(|e| Error::io(p.display(), e))?),
        None => Box::new(std::io::stdout().lock()),
    };
    write_batches(batches, format, &mut *out)?;
    out.flush().map_err(|e| Error::io("output", e))
}

/// Writes `batches` to `out` in `format`.
pub fn write_batches(batches: &[RecordBatch], format: OutputFormat, out: &mut dyn Write) -> Result<()> {
    match format {
        OutputFormat::Table => {
            let table = arrow::util::pretty::pretty_format_batches(batches)?;
            writeln!(out, "{table}").map_err(|e| Error::io("output", e))?;
        }
        OutputFormat::Csv => {
            let mut w = arrow::csv::WriterBuilder::new().with_header(true).build(out);
            for b in batches {
                w.write(b)?;
            }
        }
        OutputFormat::Json => {
            let mut w = arrow::json::LineDelimitedWriter::new(out);
            for b in batches {
                w.write(b)?;
            }
            w.finish()?;
        }
        OutputFormat::Parquet => {
            let Some(schema) = batches.first().map(|b| b.schema()) else {
                return Err(config_err!("no rows to write as Parquet"));
            };
            let mut buf = Vec::new();
            let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, schema, None)?;
            for b in batches {
                w.write(b)?;
            }
            w.close()?;
            out.write_all(&buf).map_err(|e| Error::io("output", e))?;
        }
    }
    Ok(())
}
