//! What the dashboard is rendered from: page metadata, the result tables by
//! name, and the chart specs to draw from them.

use std::collections::BTreeMap;

use arrow::array::RecordBatch;

use super::spec::{builtin_charts, ChartSpec};

/// Everything [`render`](crate::render) needs. Tables are looked up by name
/// (`report`, `eos`, `latency`, `cost`, `kv_cache`, `daily`, `replay`,
/// `mediation_heatmap`, `ab`, or any name a custom [`ChartSpec`] uses); a chart
/// whose table is absent becomes a "not in this dataset" note.
#[derive(Clone, Debug)]
pub struct DashboardInput {
    /// Page title.
    pub title: String,
    /// When the dashboard was generated, as the caller wants it printed.
    pub generated_at: String,
    /// Dataset name (e.g. the `--data` directory).
    pub dataset: String,
    /// Date or date range the data covers, as printed.
    pub date: String,
    /// Result tables by name.
    pub tables: BTreeMap<String, Vec<RecordBatch>>,
    /// Charts to draw, in page order; [`builtin_charts`] by default.
    pub charts: Vec<ChartSpec>,
    /// Time charts show the newest `trend_days` days of their table (default 30).
    pub trend_days: u32,
    /// Alerts active now, one line each, shown as a banner at the top of the page.
    pub alerts: Vec<String>,
}

impl DashboardInput {
    /// An input with no tables, the built-in charts and 30-day trends.
    pub fn new(
        title: impl Into<String>,
        dataset: impl Into<String>,
        date: impl Into<String>,
        generated_at: impl Into<String>,
    ) -> Self {
        DashboardInput {
            title: title.into(),
            generated_at: generated_at.into(),
            dataset: dataset.into(),
            date: date.into(),
            tables: BTreeMap::new(),
            charts: builtin_charts(),
            trend_days: 30,
            alerts: Vec::new(),
        }
    }

    /// Adds (or replaces) the table `name`.
    pub fn with_table(mut self, name: impl Into<String>, batches: Vec<RecordBatch>) -> Self {
        self.tables.insert(name.into(), batches);
        self
    }

    /// Appends a chart spec (e.g. for a table the built-in charts do not know).
    pub fn with_chart(mut self, spec: ChartSpec) -> Self {
        self.charts.push(spec);
        self
    }
}
