//! Chart specs: what to draw, as data. The renderer walks `DashboardInput::charts`
//! (by default [`BUILTIN_CHARTS`]) in order; a new result table gets its chart by
//! adding one `ChartSpec` entry, with no drawing code of its own.

/// How a chart draws its rows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ChartKind {
    /// One bar per (series, value column) side by side in each `x` category
    /// (vertical bars on wide screens, horizontal on narrow ones).
    GroupedBars,
    /// One line per (series, value column) over a date `x` column, restricted to the
    /// newest `DashboardInput::trend_days` days of the table.
    LinesOverTime,
    /// Colour = the first value column, `x` across, `rows` up; one heatmap per facet.
    Heatmap {
        /// The vertical axis (e.g. `layer`), drawn lowest value at the bottom.
        rows: Axis,
    },
    /// The first value column as a point with a `[low, high]` whisker per `x`
    /// category and series, and a reference line at zero.
    Interval {
        /// Column holding the interval's lower end.
        low: &'static str,
        /// Column holding the interval's upper end.
        high: &'static str,
    },
}

/// The unit of an axis or a value column: it is printed in the axis label and
/// decides how numbers are rounded in the tables.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unit {
    /// US dollars; tables show 4 significant digits (integer digits are kept).
    Usd,
    /// A fraction in [0, 1], drawn and shown as a percentage with one decimal.
    Rate,
    /// Milliseconds, one decimal.
    Ms,
    /// Gibibytes (2^30 bytes), 3 significant digits.
    Gib,
    /// A count of the named things (e.g. `Count("requests")`), whole numbers.
    Count(&'static str),
    /// A 0-based index (layer, position), whole numbers.
    Index,
    /// A UTC calendar date (`Date32`), shown as `YYYY-MM-DD`.
    Date,
    /// Category labels measured in the named unit (e.g. context bins in prompt tokens).
    Category(&'static str),
    /// Any other unit, named; tables show 4 significant digits.
    Other(&'static str),
}

/// One axis: the column it reads, its label and unit (the label printed is
/// `"{label} ({unit})"`, so every axis carries its unit).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Axis {
    /// Column name in the table.
    pub column: &'static str,
    /// Human label without the unit.
    pub label: &'static str,
    /// Unit of the column.
    pub unit: Unit,
}

/// A value column drawn as one series (or one shade of each series).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValueColumn {
    /// Column name in the table.
    pub column: &'static str,
    /// Legend / table header label (e.g. `"P95"`).
    pub label: &'static str,
}

/// A column shown only in the chart's data table, with its own unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TableColumn {
    /// Column name in the table.
    pub column: &'static str,
    /// Table header label without the unit.
    pub label: &'static str,
    /// Unit (decides rounding).
    pub unit: Unit,
}

/// One chart, as data. See the crate docs for how to add one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChartSpec {
    /// Stable id: the `data-chart` attribute of the chart's SVGs (letters, digits, `_`).
    pub id: &'static str,
    /// Section heading; consecutive specs with the same section render together.
    pub section: &'static str,
    /// Input tables to draw from, by name: the first one present is used.
    pub tables: &'static [&'static str],
    /// Chart title.
    pub title: &'static str,
    /// One sentence under the title: what to read from the chart.
    pub caption: &'static str,
    /// How to draw it.
    pub kind: ChartKind,
    /// The horizontal axis (categories, dates, or heatmap columns).
    pub x: Axis,
    /// Column whose distinct values are the coloured series (usually `model`).
    pub series: Option<&'static str>,
    /// Column whose distinct values each get their own chart (e.g. `metric`).
    pub facet: Option<&'static str>,
    /// Value columns; more than one with a `series` are told apart by shade / dash.
    pub values: &'static [ValueColumn],
    /// Label of the value axis (or of the heatmap's colour scale), without the unit.
    pub value_label: &'static str,
    /// Unit of every value column (and of the interval's low / high).
    pub unit: Unit,
    /// Columns shown in the data table only (e.g. sample sizes, p-values).
    pub table_only: &'static [TableColumn],
}

impl ChartSpec {
    /// Defaults for `..ChartSpec::BASE` in spec literals.
    pub const BASE: ChartSpec = ChartSpec {
        id: "",
        section: "",
        tables: &[],
        title: "",
        caption: "",
        kind: ChartKind::GroupedBars,
        x: CONTEXT_BIN,
        series: Some("model"),
        facet: None,
        values: &[],
        value_label: "",
        unit: Unit::Other(""),
        table_only: &[],
    };
}

impl ValueColumn {
    /// A value column with its legend label.
    pub const fn new(column: &'static str, label: &'static str) -> Self {
        ValueColumn { column, label }
    }
}

/// The `context_bin` axis every per-bin job shares.
pub const CONTEXT_BIN: Axis =
    Axis { column: "context_bin", label: "Context bin", unit: Unit::Category("prompt tokens") };

/// The `date` axis of daily tables.
pub const DATE: Axis = Axis { column: "date", label: "Date", unit: Unit::Date };

/// The charts drawn by default, in page order. Each table is looked up by name in
/// `DashboardInput::tables`; a chart whose tables are all absent is replaced by a
/// "not in this dataset" note.
// Every entry ends in `..ChartSpec::BASE`, even when it names every field, so a
// field added later needs no edit here.
#[allow(clippy::needless_update)]
pub const BUILTIN_CHARTS: &[ChartSpec] = &[
    ChartSpec {
        id: "cost_per_1k",
        section: "Cost",
        tables: &["cost", "report"],
        title: "Cost per 1K tokens by context bin",
        caption: "Spend per 1,000 prompt + completion tokens, priced requests only.",
        values: &[ValueColumn::new("cost_per_1k_tokens", "cost per 1K tokens")],
        value_label: "Cost per 1K tokens",
        unit: Unit::Usd,
        table_only: &[
            TableColumn { column: "cost_usd", label: "Cost", unit: Unit::Usd },
            TableColumn { column: "requests", label: "Requests", unit: Unit::Count("requests") },
        ],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "cost_total",
        section: "Cost",
        tables: &["cost", "report"],
        title: "Spend by context bin",
        caption: "Where the money goes: total cost of priced requests per bin.",
        values: &[ValueColumn::new("cost_usd", "cost")],
        value_label: "Cost",
        unit: Unit::Usd,
        table_only: &[TableColumn { column: "unpriced_requests", label: "Unpriced", unit: Unit::Count("requests") }],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "eos_compliance",
        section: "Quality: EOS",
        tables: &["eos", "report"],
        title: "EOS compliance rate by context bin",
        caption: "eos / (eos + implicit_truncation): how often an unforced stop was a real end of sequence.",
        values: &[ValueColumn::new("eos_compliance_rate", "EOS compliance")],
        value_label: "EOS compliance",
        unit: Unit::Rate,
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "implicit_truncation",
        section: "Quality: EOS",
        tables: &["eos", "report"],
        title: "Implicit truncation rate by context bin",
        caption: "Share of requests that stopped without an EOS marker and without hitting max_tokens.",
        values: &[ValueColumn::new("implicit_truncation_rate", "implicit truncation")],
        value_label: "Implicit truncation",
        unit: Unit::Rate,
        table_only: &[TableColumn { column: "requests", label: "Requests", unit: Unit::Count("requests") }],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "ttft",
        section: "Latency",
        tables: &["latency", "report"],
        title: "Time to first token by context bin",
        caption: "Exact quantiles of TTFT; the light bar is P95, the solid bar P50.",
        values: &[ValueColumn::new("ttft_p50_ms", "P50"), ValueColumn::new("ttft_p95_ms", "P95")],
        value_label: "TTFT",
        unit: Unit::Ms,
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "tpot",
        section: "Latency",
        tables: &["latency", "report"],
        title: "Time per output token (P50) by context bin",
        caption: "Median decode time per generated token after the first.",
        values: &[ValueColumn::new("tpot_p50_ms", "P50")],
        value_label: "TPOT P50",
        unit: Unit::Ms,
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "kv_cache",
        section: "KV cache",
        tables: &["kv_cache"],
        title: "KV-cache size per request by context bin",
        caption: "Cache size at the end of the request; solid = mean, light = max. Unknown architectures are left out.",
        values: &[ValueColumn::new("kv_cache_gib_mean", "mean"), ValueColumn::new("kv_cache_gib_max", "max")],
        value_label: "KV cache",
        unit: Unit::Gib,
        table_only: &[TableColumn {
            column: "unknown_architecture_requests",
            label: "Unknown architecture",
            unit: Unit::Count("requests"),
        }],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "daily_cost",
        section: "Daily trends",
        tables: &["daily"],
        title: "Cost per day",
        caption: "Total spend per UTC day.",
        kind: ChartKind::LinesOverTime,
        x: DATE,
        values: &[ValueColumn::new("cost_usd", "cost")],
        value_label: "Cost per day",
        unit: Unit::Usd,
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "daily_cost_per_1k",
        section: "Daily trends",
        tables: &["daily"],
        title: "Cost per 1K tokens per day",
        caption: "Daily spend per 1,000 tokens: price changes and prompt-cache hits show here first.",
        kind: ChartKind::LinesOverTime,
        x: DATE,
        values: &[ValueColumn::new("cost_per_1k_tokens", "cost per 1K tokens")],
        value_label: "Cost per 1K tokens",
        unit: Unit::Usd,
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "daily_truncation",
        section: "Daily trends",
        tables: &["daily"],
        title: "Implicit truncation rate per day",
        caption: "Share of each day's requests that were silently truncated.",
        kind: ChartKind::LinesOverTime,
        x: DATE,
        values: &[ValueColumn::new("implicit_truncation_rate", "implicit truncation")],
        value_label: "Implicit truncation",
        unit: Unit::Rate,
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "daily_ttft_p95",
        section: "Daily trends",
        tables: &["daily"],
        title: "TTFT P95 per day",
        caption: "95th percentile of time to first token per UTC day.",
        kind: ChartKind::LinesOverTime,
        x: DATE,
        values: &[ValueColumn::new("ttft_p95_ms", "TTFT P95")],
        value_label: "TTFT P95",
        unit: Unit::Ms,
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "replay_confirmed",
        section: "Replay",
        tables: &["replay"],
        title: "Confirmed truncation rate by context bin",
        caption: "confirmed_truncation / (natural_stop + confirmed_truncation) among replayed requests.",
        values: &[ValueColumn::new("confirmed_truncation_rate", "confirmed truncation")],
        value_label: "Confirmed truncation",
        unit: Unit::Rate,
        table_only: &[TableColumn { column: "replayed", label: "Replayed", unit: Unit::Count("requests") }],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "replay_verdicts",
        section: "Replay",
        tables: &["replay"],
        title: "Replay verdicts by context bin",
        caption: "Replayed requests by verdict, one chart per model.",
        series: None,
        facet: Some("model"),
        values: &[
            ValueColumn::new("natural_stop", "natural stop"),
            ValueColumn::new("confirmed_truncation", "confirmed truncation"),
            ValueColumn::new("prompt_truncated", "prompt truncated"),
            ValueColumn::new("error", "error"),
        ],
        value_label: "Replayed",
        unit: Unit::Count("requests"),
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "mediation_ie",
        section: "Mediation",
        tables: &["mediation_heatmap"],
        title: "Indirect effect of restoring one layer at one position",
        caption: "Mean IE(layer, position) = y(corrupt, restore) - y(corrupt) over prompts, one heatmap per metric.",
        kind: ChartKind::Heatmap { rows: Axis { column: "layer", label: "Layer", unit: Unit::Index } },
        x: Axis { column: "position", label: "Token position", unit: Unit::Index },
        series: None,
        facet: Some("metric"),
        values: &[ValueColumn::new("ie", "IE")],
        value_label: "IE",
        unit: Unit::Other("metric units"),
        table_only: &[TableColumn { column: "prompts", label: "Prompts", unit: Unit::Count("prompts") }],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "ab_diff",
        section: "A/B comparison",
        tables: &["ab"],
        title: "Arm B minus arm A by context bin",
        caption: "Difference of means with its 95% interval; an interval that excludes 0 is a real difference.",
        kind: ChartKind::Interval { low: "ci_low", high: "ci_high" },
        series: None,
        facet: Some("metric"),
        values: &[ValueColumn::new("diff", "B - A")],
        value_label: "B - A",
        unit: Unit::Other("metric units"),
        table_only: &[
            TableColumn { column: "n_a", label: "n A", unit: Unit::Count("requests") },
            TableColumn { column: "n_b", label: "n B", unit: Unit::Count("requests") },
            TableColumn { column: "value_a", label: "A", unit: Unit::Other("metric units") },
            TableColumn { column: "value_b", label: "B", unit: Unit::Other("metric units") },
            TableColumn { column: "p_value", label: "p", unit: Unit::Other("p") },
            TableColumn { column: "p_value_holm", label: "p (Holm)", unit: Unit::Other("p") },
        ],
        ..ChartSpec::BASE
    },
];

/// [`BUILTIN_CHARTS`] as an owned list, to extend with more specs.
pub fn builtin_charts() -> Vec<ChartSpec> {
    BUILTIN_CHARTS.to_vec()
}
