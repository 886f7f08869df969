//! The cost-and-quality dashboard: job results in, one self-contained
//! `index.html` out (inline CSS and SVG charts drawn with plotters; no
//! scripts, fonts or network; the page from `templates/index.html` through
//! minijinja, which escapes every value).
//!
//! The charts are data: [`ChartSpec`] entries (kind, tables, x column, series
//! column, value columns, units, title) in [`BUILTIN_CHARTS`]. A chart whose
//! table is absent becomes a "not in this dataset" note; each drawn chart has
//! a legend, axis labels with units, and its rows in a `<details>` table under
//! it. Adding a chart for a new job is one more entry in `BUILTIN_CHARTS`,
//! beside the job's run in `jobs::DASHBOARD` (what the export runs).

mod chart;
mod format;
mod frame;
mod input;
mod page;
mod spec;

pub use format::date_label;
pub use input::DashboardInput;
pub use spec::{
    builtin_charts, Axis, ChartKind, ChartSpec, Flag, RowFilter, TableColumn, Unit, ValueColumn, BUILTIN_CHARTS,
    CONTEXT_BIN, DATE,
};

use crate::error::Result;

/// Renders `input` as one self-contained HTML page. Fails when a present
/// table lacks a column a chart needs or has a column of a type the dashboard
/// cannot read; absent tables are not errors.
pub fn render(input: &DashboardInput) -> Result<String> {
    page::render(input)
}
