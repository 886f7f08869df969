//! Reads the columns a chart needs out of a table's record batches into plain
//! cells: text, number (every numeric Arrow type, via `arrow-cast`) or day.
//! Charts and data tables work on these, never on Arrow arrays directly.

use std::collections::HashMap;

use arrow::array::cast::AsArray;
use arrow::array::types::{Date32Type, Float64Type, Int64Type};
use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, TimeUnit};

use crate::error::Result;

/// One value of a column, as the dashboard uses it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cell {
    Null,
    Text(String),
    Num(f64),
    /// Days since 1970-01-01 (`Date32`).
    Day(i32),
    /// Milliseconds since 1970-01-01 00:00 UTC (any `Timestamp`).
    Time(i64),
}

impl Cell {
    pub(crate) fn num(&self) -> Option<f64> {
        match self {
            Cell::Num(v) if v.is_finite() => Some(*v),
            _ => None,
        }
    }

    /// The cell as a category label (a series, facet or x value).
    pub(crate) fn label(&self) -> String {
        match self {
            Cell::Null => "(null)".to_string(),
            Cell::Text(text) => text.clone(),
            Cell::Num(v) if v.fract() == 0.0 && v.abs() < 1e15 => format!("{v:.0}"),
            Cell::Num(v) => super::format::significant(*v, 4),
            Cell::Day(d) => super::format::date_label(*d),
            Cell::Time(ms) => super::format::time_label(*ms),
        }
    }

    /// The cell as seconds since the epoch, for a time axis (days start at 00:00 UTC).
    pub(crate) fn seconds(&self) -> Option<f64> {
        match self {
            Cell::Day(d) => Some(f64::from(*d) * 86_400.0),
            Cell::Time(ms) => Some(*ms as f64 / 1000.0),
            _ => None,
        }
    }
}

/// The needed columns of one table, all the same length.
pub(crate) struct Frame {
    columns: HashMap<String, Vec<Cell>>,
    /// Column names in the order of the table's schema.
    order: Vec<String>,
    rows: usize,
}

impl Frame {
    /// Reads `names` (duplicates allowed) from `batches` of table `table`.
    pub(crate) fn read(table: &str, batches: &[RecordBatch], names: &[&str]) -> Result<Frame> {
        let mut wanted: Vec<&str> = Vec::new();
        for name in names {
            if !wanted.contains(name) {
                wanted.push(name);
            }
        }
        let rows = batches.iter().map(RecordBatch::num_rows).sum();
        let mut columns = HashMap::new();
        for name in &wanted {
            let mut cells = Vec::with_capacity(rows);
            for batch in batches {
                let Ok(index) = batch.schema().index_of(name) else {
                    let available: Vec<String> = batch.schema().fields().iter().map(|f| f.name().clone()).collect();
                    return Err(config_err!(
                        "dashboard: table `{table}` has no column `{name}` (it has: {})",
                        available.join(", ")
                    ));
                };
                read_cells(table, name, batch.column(index), &mut cells)?;
            }
            columns.insert(name.to_string(), cells);
        }
        let mut order: Vec<String> = wanted.iter().map(|n| n.to_string()).collect();
        if let Some(batch) = batches.first() {
            let schema = batch.schema();
            order.sort_by_key(|name| schema.index_of(name).unwrap_or(usize::MAX));
        }
        Ok(Frame { columns, order, rows })
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Whether `read` was asked for (and found) `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.columns.contains_key(name)
    }

    /// A column that `read` was asked for.
    pub(crate) fn column(&self, name: &str) -> &[Cell] {
        self.columns.get(name).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Position of `name` in the table's schema order.
    pub(crate) fn schema_rank(&self, name: &str) -> usize {
        self.order.iter().position(|n| n == name).unwrap_or(usize::MAX)
    }
}

fn read_cells(table: &str, column: &str, array: &ArrayRef, cells: &mut Vec<Cell>) -> Result<()> {
    let arrow_err = |source: arrow::error::ArrowError| {
        config_err!("dashboard: cannot read column `{column}` of table `{table}`: {source}")
    };
    match array.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Dictionary(_, _) | DataType::Boolean => {
            let strings = cast(array, &DataType::Utf8).map_err(arrow_err)?;
            let strings = strings.as_string::<i32>();
            cells.extend((0..strings.len()).map(|i| {
                if strings.is_null(i) {
                    Cell::Null
                } else {
                    Cell::Text(strings.value(i).to_string())
                }
            }));
        }
        DataType::Timestamp(_, _) => {
            let millis = cast(array, &DataType::Timestamp(TimeUnit::Millisecond, None)).map_err(arrow_err)?;
            let millis = cast(&millis, &DataType::Int64).map_err(arrow_err)?;
            let millis = millis.as_primitive::<Int64Type>();
            cells.extend((0..millis.len()).map(|i| {
                if millis.is_null(i) {
                    Cell::Null
                } else {
                    Cell::Time(millis.value(i))
                }
            }));
        }
        DataType::Date32 | DataType::Date64 => {
            let days = cast(array, &DataType::Date32).map_err(arrow_err)?;
            let days = days.as_primitive::<Date32Type>();
            cells.extend((0..days.len()).map(|i| if days.is_null(i) { Cell::Null } else { Cell::Day(days.value(i)) }));
        }
        data_type if data_type.is_numeric() => {
            let values = cast(array, &DataType::Float64).map_err(arrow_err)?;
            let values = values.as_primitive::<Float64Type>();
            cells.extend((0..values.len()).map(|i| {
                let v = values.value(i);
                if values.is_null(i) || !v.is_finite() {
                    Cell::Null
                } else {
                    Cell::Num(v)
                }
            }));
        }
        DataType::Null => cells.extend((0..array.len()).map(|_| Cell::Null)),
        other => {
            return Err(config_err!(
                "dashboard: column `{column}` of table `{table}` is {other}; the dashboard reads text, numbers and dates"
            ));
        }
    }
    Ok(())
}
