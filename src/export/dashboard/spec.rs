//! Chart specs: what to draw, as data. The renderer walks `DashboardInput::charts`
//! (by default [`BUILTIN_CHARTS`]) in order; a new result table gets its chart by
//! adding one `ChartSpec` entry, with no drawing code of its own.

/// How a chart draws its rows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ChartKind {
    /// One bar per (series, value column) side by side in each `x` category
    /// (vertical bars on wide screens, horizontal on narrow ones).
    GroupedBars,
    /// Grouped bars from 0 to the first value column, each with a `[low, high]`
    /// whisker: an estimate and its interval per `x` category and series (DE and
    /// IE side by side per layer, say).
    BarsWithIntervals {
        /// Column holding the interval's lower end.
        low: &'static str,
        /// Column holding the interval's upper end.
        high: &'static str,
    },
    /// One bar per `x` category, one segment per series stacked in the legend's
    /// order, each from the sum of the segments below it to that plus its value
    /// (the first value column): a day's cost by team, the bar its total. Over a
    /// date `x` column, the newest `DashboardInput::trend_days` days.
    StackedBars,
    /// One line per (series, value column) over a date `x` column, restricted to the
    /// newest `DashboardInput::trend_days` days of the table.
    LinesOverTime,
    /// One line per (series, value column) over a numeric `x` column (K of a
    /// recall@K curve, say), every row drawn.
    Lines,
    /// Colour = the first value column, `x` across, `rows` up; one heatmap per facet.
    Heatmap {
        /// The vertical axis (e.g. `layer`), drawn lowest value at the bottom.
        rows: Axis,
    },
    /// The first value column as a point with a `[low, high]` whisker per `x`
    /// category and series, and a reference line at zero. A point is filled when
    /// it is significant: its `significant` p-value is below 0.05, or, without
    /// such a column or where the row has no p-value (no test applies), its
    /// interval excludes the reference; else it is hollow.
    Interval {
        /// Column holding the interval's lower end.
        low: &'static str,
        /// Column holding the interval's upper end.
        high: &'static str,
        /// Column holding the p-value that decides significance (e.g. a
        /// multiple-testing-adjusted one); `None`: the interval decides.
        significant: Option<&'static str>,
        /// Column naming each row's effect: a figure whose rows are all
        /// `ratio` is drawn against a reference line at 1 instead of 0.
        effect: Option<&'static str>,
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

/// The rows a chart draws: those whose `column` holds one of `values` (the A/B
/// metrics of one unit, say), in the table's order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowFilter {
    /// Column compared.
    pub column: &'static str,
    /// Values kept.
    pub values: &'static [&'static str],
}

/// A warning shown above a chart when a boolean column is true on any of its
/// rows (a failed sample-ratio check, say), naming those rows' `x` categories.
/// A table without the column raises none.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Flag {
    /// Boolean column.
    pub column: &'static str,
    /// The warning, completed by the flagged categories.
    pub warning: &'static str,
}

/// The K of the recall@K curve drawn on the page, those retrieval
/// benchmarks report (the job gives every K, in the exported table): its
/// shape at 1% of a large page's bytes.
const RECALL_CURVE_K: &[&str] = &["1", "5", "10", "20", "50", "100"];

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
    /// Draw only these rows; `None`: all.
    pub only: Option<RowFilter>,
    /// A warning raised by the rows.
    pub flag: Option<Flag>,
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
        only: None,
        flag: None,
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

/// The `window_start` axis of the per-window load-test tables (a UTC timestamp).
pub const WINDOW_START: Axis = Axis { column: "window_start", label: "Window start", unit: Unit::Date };

/// A `model` category axis, for per-model tables drawn without series.
pub const MODEL: Axis = Axis { column: "model", label: "Model", unit: Unit::Category("") };

/// The `word_bin` axis of the drift job (query length in words).
pub const WORD_BIN: Axis = Axis { column: "word_bin", label: "Query length", unit: Unit::Category("words") };

/// The `date` axis of daily tables.
pub const DATE: Axis = Axis { column: "date", label: "Date", unit: Unit::Date };

/// What the A/B charts share: B against A per metric (one chart each) and
/// context bin, significance from Holm's p-value, sizes and values in the
/// table, and the sample-ratio warning.
const AB_CHART: ChartSpec = ChartSpec {
    kind: ChartKind::Interval {
        low: "ci_low",
        high: "ci_high",
        significant: Some("p_value_holm"),
        effect: Some("effect"),
    },
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
    flag: Some(Flag {
        column: "sample_ratio_mismatch",
        warning: "Sample ratio mismatch: the arms' split is not the intended one (the ab job's split \
                  parameter), so requests were lost or moved between arms and these comparisons may be biased",
    }),
    ..ChartSpec::BASE
};

/// What the "Who spends" tables show beside each group's cost (the `spend` job's columns).
const SPEND_TABLE: &[TableColumn] = &[
    TableColumn { column: "requests", label: "Requests", unit: Unit::Count("requests") },
    TableColumn { column: "tokens", label: "Tokens", unit: Unit::Count("tokens") },
    TableColumn { column: "cost_per_1k_tokens", label: "Cost per 1K tokens", unit: Unit::Usd },
    TableColumn { column: "eos_compliance_rate", label: "EOS compliance", unit: Unit::Rate },
    TableColumn { column: "implicit_truncation_rate", label: "Implicit truncation", unit: Unit::Rate },
    TableColumn { column: "latency_p95_ms", label: "Latency P95", unit: Unit::Ms },
    TableColumn { column: "unpriced_requests", label: "Unpriced", unit: Unit::Count("requests") },
];

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
        caption: "Spend per 1,000 prompt + completion tokens: each request's price, else its logged cost.",
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
        caption: "Where the money goes: total cost per bin (each request's price, else its logged cost).",
        values: &[ValueColumn::new("cost_usd", "cost")],
        value_label: "Cost",
        unit: Unit::Usd,
        table_only: &[TableColumn { column: "unpriced_requests", label: "Unpriced", unit: Unit::Count("requests") }],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "spend_daily_by_team",
        section: "Who spends",
        tables: &["spend_daily_by_team"],
        title: "Cost per day by team",
        caption: "Each UTC day's spend, one segment per team stacked (the 8 teams that spend most, the rest as \
                  (other), requests without a team as (null)): the bar is the day's total.",
        kind: ChartKind::StackedBars,
        x: DATE,
        series: Some("team"),
        values: &[ValueColumn::new("cost_usd", "cost")],
        value_label: "Cost per day",
        unit: Unit::Usd,
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "spend_by_team",
        section: "Who spends",
        tables: &["spend_by_team"],
        title: "Cost by team",
        caption: "Spend per team, most first; the table adds each team's requests, tokens, cost per 1K tokens, EOS \
                  compliance, implicit truncation and P95 latency.",
        x: Axis { column: "team", label: "Team", unit: Unit::Category("") },
        series: None,
        values: &[ValueColumn::new("cost_usd", "cost")],
        value_label: "Cost",
        unit: Unit::Usd,
        table_only: SPEND_TABLE,
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "spend_by_user",
        section: "Who spends",
        tables: &["spend_by_user"],
        title: "Cost by user",
        caption: "Spend per user id (hashed when the dataset was ingested with --redact hash), the 8 that spend most \
                  and the rest as (other).",
        x: Axis { column: "user_id", label: "User", unit: Unit::Category("") },
        series: None,
        values: &[ValueColumn::new("cost_usd", "cost")],
        value_label: "Cost",
        unit: Unit::Usd,
        table_only: SPEND_TABLE,
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "spend_by_tag",
        section: "Who spends",
        tables: &["spend_by_tag"],
        title: "Cost by tag",
        caption: "Spend per request tag, the 8 that spend most and the rest as (other); a request with several tags \
                  counts under each, so the bars add up to more than the total.",
        x: Axis { column: "tag", label: "Tag", unit: Unit::Category("") },
        series: None,
        values: &[ValueColumn::new("cost_usd", "cost")],
        value_label: "Cost",
        unit: Unit::Usd,
        table_only: SPEND_TABLE,
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "spend_by_provider",
        section: "Who spends",
        tables: &["spend_by_provider"],
        title: "Cost by provider",
        caption: "Spend per provider that served the requests (openai, azure, anthropic, bedrock, ..., or the \
                  engine of a self-hosted model).",
        x: Axis { column: "provider", label: "Provider", unit: Unit::Category("") },
        series: None,
        values: &[ValueColumn::new("cost_usd", "cost")],
        value_label: "Cost",
        unit: Unit::Usd,
        table_only: SPEND_TABLE,
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
        id: "first_token",
        section: "Token timing",
        tables: &["jitter"],
        title: "First-token latency by context bin",
        caption: "Exact P50 (solid), P95 and P99 (lighter) of the first token's emission time, over requests logged \
                  with per-token times.",
        values: &[
            ValueColumn::new("first_token_p50_ms", "P50"),
            ValueColumn::new("first_token_p95_ms", "P95"),
            ValueColumn::new("first_token_p99_ms", "P99"),
        ],
        value_label: "First token",
        unit: Unit::Ms,
        table_only: &[TableColumn { column: "requests", label: "Requests", unit: Unit::Count("requests") }],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "last_token",
        section: "Token timing",
        tables: &["jitter"],
        title: "Last-token latency by context bin",
        caption: "Exact P50 (solid), P95 and P99 (lighter) of the last token's emission time: the tail a user waits \
                  for, kept apart from the first token.",
        values: &[
            ValueColumn::new("last_token_p50_ms", "P50"),
            ValueColumn::new("last_token_p95_ms", "P95"),
            ValueColumn::new("last_token_p99_ms", "P99"),
        ],
        value_label: "Last token",
        unit: Unit::Ms,
        table_only: &[TableColumn { column: "requests", label: "Requests", unit: Unit::Count("requests") }],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "itl_jitter",
        section: "Token timing",
        tables: &["jitter"],
        title: "Inter-token jitter by context bin",
        caption: "P50 (solid) and P95 (light) over requests of each request's standard deviation of its inter-token \
                  latencies.",
        values: &[ValueColumn::new("itl_std_p50_ms", "P50"), ValueColumn::new("itl_std_p95_ms", "P95")],
        value_label: "ITL standard deviation",
        unit: Unit::Ms,
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "tail_jitter",
        section: "Token timing",
        tables: &["jitter"],
        title: "Tail-token jitter by context bin",
        caption: "The standard deviation across requests of the last token's time after the first: how much the end \
                  of a response moves from request to request.",
        values: &[ValueColumn::new("tail_token_jitter_ms", "tail-token jitter")],
        value_label: "Tail-token jitter",
        unit: Unit::Ms,
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "kv_cache",
        section: "KV cache",
        tables: &["kv_cache"],
        title: "KV-cache size per request by context bin",
        caption: "Cache size at the end of the request; solid = mean, light = max, lightest = mean per GPU \
                  (split over the tensor-parallel GPUs). Unknown architectures are left out.",
        values: &[
            ValueColumn::new("kv_cache_gib_mean", "mean"),
            ValueColumn::new("kv_cache_gib_max", "max"),
            ValueColumn::new("kv_cache_gib_per_gpu_mean", "per-GPU mean"),
        ],
        value_label: "KV cache",
        unit: Unit::Gib,
        table_only: &[
            TableColumn { column: "tensor_parallel", label: "Tensor parallel", unit: Unit::Count("GPUs") },
            TableColumn {
                column: "unknown_architecture_requests",
                label: "Unknown architecture",
                unit: Unit::Count("requests"),
            },
        ],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "throughput_qps",
        section: "Load test",
        tables: &["throughput"],
        title: "Requests per second over time",
        caption: "Requests arriving per second in each window (the `throughput` job's `window`), per model.",
        kind: ChartKind::LinesOverTime,
        x: WINDOW_START,
        values: &[ValueColumn::new("qps", "requests/s")],
        value_label: "Arrivals",
        unit: Unit::Other("requests/s"),
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "throughput_tokens",
        section: "Load test",
        tables: &["throughput"],
        title: "Output tokens per second over time",
        caption: "Completion tokens of the requests that arrived in each window, per second of window.",
        kind: ChartKind::LinesOverTime,
        x: WINDOW_START,
        values: &[ValueColumn::new("output_tokens_per_s", "output tokens/s")],
        value_label: "Output throughput",
        unit: Unit::Other("tokens/s"),
        ..ChartSpec::BASE
    },
    // Mean and peak concurrency are two charts, not one with a dashed line: plotters
    // draws a dashed line as one element per dash, which for 50 models is most of the page.
    ChartSpec {
        id: "concurrency_mean",
        section: "Load test",
        tables: &["throughput"],
        title: "Mean requests in flight over time",
        caption: "Mean concurrency: the request time that falls inside the window / the window's length.",
        kind: ChartKind::LinesOverTime,
        x: WINDOW_START,
        values: &[ValueColumn::new("mean_concurrency", "mean concurrency")],
        value_label: "Mean concurrency",
        unit: Unit::Other("requests in flight"),
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "concurrency_peak",
        section: "Load test",
        tables: &["throughput"],
        title: "Peak requests in flight over time",
        caption: "Peak concurrency: the most requests in flight at one instant of the window.",
        kind: ChartKind::LinesOverTime,
        x: WINDOW_START,
        values: &[ValueColumn::new("peak_concurrency", "peak concurrency")],
        value_label: "Peak concurrency",
        unit: Unit::Other("requests in flight"),
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "load_summary",
        section: "Load test",
        tables: &["load_summary"],
        title: "End-to-end latency over the whole run",
        caption: "Exact percentiles of request latency per model; the table adds throughput over wall time and \
                  concurrency.",
        x: MODEL,
        series: None,
        values: &[
            ValueColumn::new("e2e_p50_ms", "P50"),
            ValueColumn::new("e2e_p95_ms", "P95"),
            ValueColumn::new("e2e_p99_ms", "P99"),
        ],
        value_label: "End-to-end latency",
        unit: Unit::Ms,
        table_only: &[
            TableColumn { column: "requests", label: "Requests", unit: Unit::Count("requests") },
            TableColumn { column: "wall_s", label: "Wall time", unit: Unit::Other("s") },
            TableColumn { column: "qps", label: "Requests/s", unit: Unit::Other("requests/s") },
            TableColumn { column: "output_tokens_per_s", label: "Output tokens/s", unit: Unit::Other("tokens/s") },
            TableColumn { column: "tokens_per_s", label: "Tokens/s", unit: Unit::Other("tokens/s") },
            TableColumn { column: "mean_concurrency", label: "Mean concurrency", unit: Unit::Other("requests") },
            TableColumn { column: "peak_concurrency", label: "Peak concurrency", unit: Unit::Count("requests") },
            TableColumn { column: "ttft_p50_ms", label: "TTFT P50", unit: Unit::Ms },
            TableColumn { column: "ttft_p95_ms", label: "TTFT P95", unit: Unit::Ms },
        ],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "gateway_engine",
        section: "Load test",
        tables: &["gateway_engine"],
        title: "Where a request's time goes: engine prefill, decode and the rest",
        caption: "Medians over gateway requests matched to an engine profile; overhead = gateway latency minus \
                  prefill and decode (queueing, network, gateway). Solid = prefill, lighter = decode, lightest = \
                  overhead.",
        values: &[
            ValueColumn::new("prefill_ms_p50", "prefill P50"),
            ValueColumn::new("decode_ms_p50", "decode P50"),
            ValueColumn::new("overhead_ms_p50", "overhead P50"),
        ],
        value_label: "Time per request",
        unit: Unit::Ms,
        table_only: &[
            TableColumn { column: "matched", label: "Matched", unit: Unit::Count("requests") },
            TableColumn { column: "gateway_only", label: "Gateway only", unit: Unit::Count("requests") },
            TableColumn { column: "engine_only", label: "Engine only", unit: Unit::Count("profiles") },
            TableColumn { column: "clock_offset_ms", label: "Clock offset", unit: Unit::Ms },
        ],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "engine_time",
        section: "Engine",
        tables: &["engine"],
        title: "Engine time per request: queue, prefill and decode",
        caption: "Medians over the engine's profiles, one chart per experiment arm: solid = time in the engine's \
                  queue, lighter = prefill, lightest = decode. The table adds P95s and the gateway's overhead \
                  (its latency minus prefill and decode, queueing included).",
        facet: Some("variant"),
        values: &[
            ValueColumn::new("queue_p50_ms", "queue P50"),
            ValueColumn::new("prefill_p50_ms", "prefill P50"),
            ValueColumn::new("decode_p50_ms", "decode P50"),
        ],
        value_label: "Time per request",
        unit: Unit::Ms,
        table_only: &[
            TableColumn { column: "profiles", label: "Profiles", unit: Unit::Count("profiles") },
            TableColumn { column: "queue_p95_ms", label: "Queue P95", unit: Unit::Ms },
            TableColumn { column: "prefill_p95_ms", label: "Prefill P95", unit: Unit::Ms },
            TableColumn { column: "decode_p95_ms", label: "Decode P95", unit: Unit::Ms },
            TableColumn { column: "overhead_p50_ms", label: "Overhead P50", unit: Unit::Ms },
            TableColumn { column: "overhead_p95_ms", label: "Overhead P95", unit: Unit::Ms },
        ],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "engine_kv_hit",
        section: "Engine",
        tables: &["engine"],
        title: "KV-cache hit rate by context bin",
        caption: "Mean share of the prompt served from the engine's KV / prefix cache, one chart per experiment arm.",
        facet: Some("variant"),
        values: &[ValueColumn::new("kv_cache_hit_rate", "KV-cache hits")],
        value_label: "KV-cache hit rate",
        unit: Unit::Rate,
        table_only: &[
            TableColumn { column: "cuda_kernel_us_p50", label: "CUDA kernel P50", unit: Unit::Other("µs") },
            TableColumn { column: "cuda_kernel_us_p95", label: "CUDA kernel P95", unit: Unit::Other("µs") },
        ],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "engine_step_jitter",
        section: "Engine",
        tables: &["engine"],
        title: "Decode-step jitter by context bin",
        caption: "P50 (solid) and P95 (light) of each profile's standard deviation of its decode-step latencies, one \
                  chart per experiment arm.",
        facet: Some("variant"),
        values: &[ValueColumn::new("decode_step_std_p50_ms", "P50"), ValueColumn::new("decode_step_std_p95_ms", "P95")],
        value_label: "Decode-step std",
        unit: Unit::Ms,
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "kv_cache_peak",
        section: "Engine",
        tables: &["kv_cache_peak"],
        title: "Peak KV cache held on each GPU",
        caption: "The most KV cache the requests in flight on one GPU held at once (each request's cache at its \
                  end, one GPU's share under tensor parallelism), from the GPU its engine profile names; one bar \
                  per engine on each GPU id.",
        x: Axis { column: "gpu_id", label: "GPU", unit: Unit::Index },
        series: Some("engine_id"),
        values: &[ValueColumn::new("kv_cache_gib_peak", "peak KV cache")],
        value_label: "Peak KV cache",
        unit: Unit::Gib,
        table_only: &[
            TableColumn { column: "requests", label: "Requests", unit: Unit::Count("requests") },
            TableColumn { column: "peak_concurrency", label: "Peak concurrency", unit: Unit::Count("requests") },
            TableColumn {
                column: "unknown_architecture_requests",
                label: "Unknown architecture",
                unit: Unit::Count("requests"),
            },
        ],
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
        id: "mediation_layers",
        section: "Mediation",
        tables: &["mediation_layers"],
        title: "Direct and indirect effect of each changed layer",
        caption: "Each layer changed in turn (weight noise or skipped): DE = y(change by the residual stream's \
                  direct path only) - y(clean), IE = TE - DE, side by side per layer; a bar is the mean over \
                  prompts x noise draws, its whisker the 95% bootstrap interval; one chart per metric and change.",
        kind: ChartKind::BarsWithIntervals { low: "ci_lo", high: "ci_hi" },
        x: Axis { column: "layer", label: "Layer", unit: Unit::Index },
        series: Some("effect"),
        facet: Some("study"),
        values: &[ValueColumn::new("mean", "effect")],
        value_label: "Effect",
        unit: Unit::Other("metric units"),
        table_only: &[TableColumn { column: "n", label: "Cells", unit: Unit::Count("prompt x draw cells") }],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "ab_rates",
        section: "A/B comparison",
        tables: &["ab"],
        title: "Arm B minus arm A: split and rates by context bin",
        caption: "B - A per metric with its 95% interval, in percentage points: B's share of the requests against \
                  the intended split, then the rates; a filled point is significant after Holm's correction across \
                  the bins of its metric.",
        only: Some(RowFilter {
            column: "metric",
            values: &["sample_ratio", "eos_compliance_rate", "eos_marker_rate", "implicit_truncation_rate"],
        }),
        unit: Unit::Rate,
        ..AB_CHART
    },
    ChartSpec {
        id: "ab_latency",
        section: "A/B comparison",
        tables: &["ab"],
        title: "Arm B minus arm A: latency and jitter by context bin",
        caption: "B - A of medians (TTFT, TPOT, ITL standard deviation), P95s (TTFT, TPOT, end-to-end) and the \
                  standard deviation of the last token's time after the first, with 95% intervals; a filled point \
                  is significant (Holm), or, for a metric without a test, its interval excludes 0.",
        only: Some(RowFilter {
            column: "metric",
            values: &[
                "ttft_p50_ms",
                "ttft_p95_ms",
                "tpot_p50_ms",
                "tpot_p95_ms",
                "e2e_p95_ms",
                "itl_std_p50_ms",
                "tail_token_jitter_ms",
            ],
        }),
        unit: Unit::Ms,
        ..AB_CHART
    },
    ChartSpec {
        id: "ab_capacity",
        section: "A/B comparison",
        tables: &["ab"],
        title: "Arm B against arm A: decode speed, KV cache and cost by context bin",
        caption: "B - A of median decode tokens/s and KV-cache GiB per request, B / A of cost per 1K tokens (read \
                  against 1), with 95% intervals. Output tokens/s per arm over the experiment window has no interval: \
                  it is in the job's table, not drawn.",
        only: Some(RowFilter {
            column: "metric",
            values: &["decode_tps_p50", "kv_cache_gib_p50", "cost_per_1k_tokens"],
        }),
        ..AB_CHART
    },
    ChartSpec {
        id: "head_waste",
        section: "Model internals",
        tables: &["head_waste"],
        title: "Wasted attention compute per layer and head",
        caption: "waste_ratio = 1 - actual / expected FLOPs of the head's attention kernels; a head above the \
                  job's threshold is flagged.",
        kind: ChartKind::Heatmap { rows: Axis { column: "layer", label: "Layer", unit: Unit::Index } },
        x: Axis { column: "head", label: "Head", unit: Unit::Index },
        series: None,
        values: &[ValueColumn::new("waste_ratio", "waste ratio")],
        value_label: "Waste ratio",
        unit: Unit::Rate,
        table_only: &[
            TableColumn { column: "kernels", label: "Kernels", unit: Unit::Count("kernels") },
            TableColumn { column: "duration_us", label: "Duration", unit: Unit::Other("µs") },
            TableColumn { column: "achieved_gflops_per_s", label: "Achieved", unit: Unit::Other("GFLOP/s") },
        ],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "moe_load",
        section: "Model internals",
        tables: &["moe_load"],
        title: "MoE router load imbalance per layer",
        caption: "Solid = busiest expert's load / mean load (1 = perfectly even), light = coefficient of \
                  variation of the expert loads.",
        x: Axis { column: "layer", label: "Layer", unit: Unit::Index },
        series: None,
        values: &[ValueColumn::new("imbalance_max_mean", "max / mean"), ValueColumn::new("load_cv", "CV")],
        value_label: "Imbalance",
        unit: Unit::Other("ratio"),
        table_only: &[
            TableColumn { column: "num_experts", label: "Experts", unit: Unit::Count("experts") },
            TableColumn { column: "top_k", label: "Top k", unit: Unit::Count("experts") },
            TableColumn { column: "routed_tokens", label: "Routed", unit: Unit::Count("tokens") },
            TableColumn { column: "hot_share", label: "Hot experts' share", unit: Unit::Rate },
            TableColumn { column: "routing_entropy_bits", label: "Routing entropy", unit: Unit::Other("bits") },
        ],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "quality",
        section: "Model internals",
        tables: &["quality"],
        title: "Answer quality per task",
        caption: "Mean BLEU-4 against the reference (solid), mean FactScore (lighter) and their weighted \
                  f1_fact (lightest), per model.",
        x: Axis { column: "task", label: "Task", unit: Unit::Category("") },
        values: &[
            ValueColumn::new("bleu4_mean", "BLEU-4"),
            ValueColumn::new("factscore_mean", "FactScore"),
            ValueColumn::new("f1_fact", "f1_fact"),
        ],
        value_label: "Score",
        unit: Unit::Other("0-1"),
        table_only: &[
            TableColumn { column: "evals", label: "Evaluations", unit: Unit::Count("records") },
            TableColumn { column: "bleu_scored", label: "BLEU scored", unit: Unit::Count("records") },
            TableColumn { column: "factscore_scored", label: "FactScore scored", unit: Unit::Count("records") },
        ],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "recall",
        section: "Model internals",
        tables: &["recall"],
        title: "Retrieval recall per context length",
        caption: "Mean recall of the evaluation records (solid) and its 10th percentile (lighter), per model and \
                  context bin of the request each record scores: where long contexts lose facts.",
        x: Axis { column: "context_bin", label: "Context bin", unit: Unit::Category("") },
        values: &[ValueColumn::new("recall_mean", "mean"), ValueColumn::new("recall_p10", "P10")],
        value_label: "Recall",
        unit: Unit::Other("0-1"),
        table_only: &[
            TableColumn { column: "evals", label: "Evaluations", unit: Unit::Count("records") },
            TableColumn { column: "recall_scored", label: "Recall scored", unit: Unit::Count("records") },
            TableColumn { column: "recall_p50", label: "Recall P50", unit: Unit::Other("0-1") },
        ],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "recall_at_k",
        section: "Model internals",
        tables: &["recall_at_k"],
        title: "Top-K retrieval recall",
        caption: "Mean share of each evaluation record's relevant ids found among the first K retrieved, per \
                  model: how deep retrieval must reach to find the facts (at K = 1, 5, 10, 20, 50 and 100, as \
                  retrieval benchmarks report it; the exported table has every K).",
        kind: ChartKind::Lines,
        only: Some(RowFilter { column: "k", values: RECALL_CURVE_K }),
        x: Axis { column: "k", label: "K", unit: Unit::Count("results retrieved") },
        values: &[ValueColumn::new("recall_at_k", "recall@K")],
        value_label: "Recall@K",
        unit: Unit::Other("0-1"),
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "composite",
        section: "Model internals",
        tables: &["composite"],
        title: "Composite serving score per model",
        caption: "w1 qps / qps_scale + w2 (1 - p95 latency / budget) + w3 recall + w4 semantic similarity; \
                  models without evaluations have no score.",
        x: MODEL,
        series: None,
        values: &[ValueColumn::new("composite", "composite")],
        value_label: "Composite score",
        unit: Unit::Other("score"),
        table_only: &[
            TableColumn { column: "requests", label: "Requests", unit: Unit::Count("requests") },
            TableColumn { column: "qps", label: "Requests/s", unit: Unit::Other("requests/s") },
            TableColumn { column: "latency_p95_ms", label: "Latency P95", unit: Unit::Ms },
            TableColumn { column: "evals", label: "Evaluations", unit: Unit::Count("records") },
            TableColumn { column: "recall_mean", label: "Recall", unit: Unit::Other("0-1") },
            TableColumn { column: "semantic_similarity_mean", label: "Similarity", unit: Unit::Other("0-1") },
        ],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "drift_kl",
        section: "Model internals",
        tables: &["drift"],
        title: "Intent drift by query length",
        caption: "KL divergence of the model's relevance distribution from the gold one; solid = mean, light = P95.",
        x: WORD_BIN,
        series: None,
        values: &[ValueColumn::new("kl_bits_mean", "mean"), ValueColumn::new("kl_bits_p95", "P95")],
        value_label: "KL divergence",
        unit: Unit::Other("bits"),
        table_only: &[TableColumn { column: "queries", label: "Queries", unit: Unit::Count("queries") }],
        ..ChartSpec::BASE
    },
    ChartSpec {
        id: "drift_share",
        section: "Model internals",
        tables: &["drift"],
        title: "Share of drifted queries by query length",
        caption: "Share of queries whose KL divergence is above the job's threshold.",
        x: WORD_BIN,
        series: None,
        values: &[ValueColumn::new("drift_share", "drifted")],
        value_label: "Drifted queries",
        unit: Unit::Rate,
        table_only: &[TableColumn { column: "queries", label: "Queries", unit: Unit::Count("queries") }],
        ..ChartSpec::BASE
    },
];

/// [`BUILTIN_CHARTS`] as an owned list, to extend with more specs.
pub fn builtin_charts() -> Vec<ChartSpec> {
    BUILTIN_CHARTS.to_vec()
}
