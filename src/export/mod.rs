//! Output of query and job results: a terminal table ([`table`]: rounded
//! for reading, fitted to the terminal), CSV, JSON lines, or Parquet (full
//! precision); and the dashboard ([`dashboard`]) with its publishing ([`publish`]).

pub mod dashboard;
pub mod publish;
pub mod table;

use std::io::Write;

use arrow::array::{Array, ArrayRef, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use std::sync::Arc;

use crate::error::{Error, Result};
pub use table::TableLayout;

tokscope_core::named_enum! {
    /// Result formats.
    #[derive(Default)]
    pub enum OutputFormat as "output format" {
        /// An aligned text table, rounded for reading (docs/cli.md).
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
/// flushes it, so a failed write is an error and not a short output. A table
/// written to a file has no width limit.
pub fn write_output(
    batches: &[RecordBatch],
    format: OutputFormat,
    path: Option<&std::path::Path>,
    layout: &TableLayout,
) -> Result<()> {
    let mut out: Box<dyn Write> = match path {
        Some(p) => Box::new(std::fs::File::create(p).map_err(|e| Error::io(p.display(), e))?),
        None => Box::new(std::io::stdout().lock()),
    };
    let file_layout;
    let layout = if path.is_some() {
        file_layout = TableLayout { width: None, ..layout.clone() };
        &file_layout
    } else {
        layout
    };
    write_batches(batches, format, &mut *out, layout)?;
    out.flush().map_err(|e| Error::io("output", e))
}

/// Writes `batches` to `out` in `format`; `layout` shapes a table.
pub fn write_batches(
    batches: &[RecordBatch],
    format: OutputFormat,
    out: &mut dyn Write,
    layout: &TableLayout,
) -> Result<()> {
    match format {
        OutputFormat::Table => table::write_table(batches, layout, out)?,
        OutputFormat::Csv => {
            let mut w = arrow::csv::WriterBuilder::new().with_header(true).build(out);
            for b in batches {
                w.write(&nested_as_text(b)?)?;
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

/// `batch` with every nested column (list, struct, map), which CSV cannot hold,
/// replaced by its text as the terminal table shows it (`[0.25, 0.75]`); nulls stay null.
fn nested_as_text(batch: &RecordBatch) -> Result<RecordBatch> {
    let schema = batch.schema();
    if !schema.fields().iter().any(|f| f.data_type().is_nested()) {
        return Ok(batch.clone());
    }
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        if !field.data_type().is_nested() {
            fields.push(field.as_ref().clone());
            columns.push(column.clone());
            continue;
        }
        let formatter = ArrayFormatter::try_new(column.as_ref(), &FormatOptions::default())?;
        let text: StringArray =
            (0..column.len()).map(|i| column.is_valid(i).then(|| formatter.value(i).to_string())).collect();
        fields.push(Field::new(field.name(), DataType::Utf8, true));
        columns.push(Arc::new(text));
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}
