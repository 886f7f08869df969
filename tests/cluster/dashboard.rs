//! The dashboard page (src/export/dashboard), read as a user and a reviewer would: which charts are there,
//! what the notes say, how numbers read, that user data is escaped, its size, and, in Chromium, each mark
//! read off its chart's axes against the exported job result.

use crate::common;
use crate::dashboard_support as support;

use std::io::Write;
use std::process::Output;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use tokscope::export::dashboard::{
    render, Axis, ChartKind, ChartSpec, DashboardInput, Unit, ValueColumn, BUILTIN_CHARTS,
};
use tokscope::jobs::DashboardRun;

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(columns).unwrap()
}

fn strings(values: &[&str]) -> ArrayRef {
    Arc::new(StringArray::from(values.to_vec()))
}

fn floats(values: &[Option<f64>]) -> ArrayRef {
    Arc::new(Float64Array::from(values.to_vec()))
}

fn ints(values: &[i64]) -> ArrayRef {
    Arc::new(Int64Array::from(values.to_vec()))
}

fn empty_input() -> DashboardInput {
    DashboardInput::new("t", "d", "2025-06-01", "now")
}

/// A one-row `report` (sql/report.sql columns) for `model` in bin `0-1K`.
fn one_row_report(model: &str) -> RecordBatch {
    let f = |v: f64| floats(&[Some(v)]);
    batch(vec![
        ("model", strings(&[model])),
        ("context_bin", strings(&["0-1K"])),
        ("requests", ints(&[1000])),
        ("eos", ints(&[900])),
        ("length", ints(&[20])),
        ("implicit_truncation", ints(&[80])),
        ("unknown", ints(&[0])),
        ("eos_compliance_rate", f(900.0 / 980.0)),
        ("implicit_truncation_rate", f(0.12345)),
        ("ttft_p50_ms", f(182.449)),
        ("ttft_p95_ms", f(640.0)),
        ("ttft_p99_ms", f(900.0)),
        ("tpot_p50_ms", f(21.06)),
        ("tpot_p95_ms", f(30.0)),
        ("latency_p50_ms", f(2000.0)),
        ("latency_p95_ms", f(4000.0)),
        ("decode_tps_p50", f(47.0)),
        ("e2e_tps_mean", f(40.0)),
        ("unpriced_requests", ints(&[0])),
        ("cost_usd", f(1234.5678)),
        ("cost_per_1k_tokens", f(0.0012345678)),
        ("input_share", f(0.5)),
        ("cached_share", f(0.2)),
        ("output_share", f(0.3)),
    ])
}

fn chart_ids(html: &str) -> Vec<String> {
    let mut ids: Vec<String> =
        html.split("data-chart=\"").skip(1).map(|rest| rest[..rest.find('"').unwrap()].to_string()).collect();
    ids.dedup();
    ids
}

#[test]
fn every_builtin_chart_is_drawn_from_a_full_dataset() {
    let html = render(&support::realistic(&support::model_names(3), 30)).unwrap();
    let ids = chart_ids(&html);
    for spec in BUILTIN_CHARTS {
        assert!(ids.iter().any(|id| id == spec.id), "chart {} missing; drawn: {ids:?}", spec.id);
    }
    assert!(!html.contains("Not in this dataset"));
}

/// A column of `batches` as text cells (`None` for null).
fn text_column(batches: &[RecordBatch], column: &str) -> Vec<Option<String>> {
    let mut cells = Vec::new();
    for batch in batches {
        let array = batch.column(batch.schema().index_of(column).unwrap_or_else(|_| panic!("no column {column}")));
        let text = arrow::compute::cast(array, &arrow::datatypes::DataType::Utf8).unwrap();
        let text = text.as_any().downcast_ref::<StringArray>().unwrap();
        cells.extend((0..text.len()).map(|i| text.is_valid(i).then(|| text.value(i).to_string())));
    }
    cells
}

/// The figures a spec draws from `tables`, read off the rows: none without a
/// table or a value in its rows (those `only` keeps), one per facet value with
/// a value (at most 8), else one.
fn expected_figures(spec: &ChartSpec, tables: &std::collections::BTreeMap<String, Vec<RecordBatch>>) -> usize {
    let Some(batches) = spec.tables.iter().find_map(|t| tables.get(*t)) else { return 0 };
    let rows = batches.iter().map(RecordBatch::num_rows).sum::<usize>();
    let kept: Vec<usize> = match spec.only {
        Some(only) => {
            let cells = text_column(batches, only.column);
            (0..rows).filter(|&r| cells[r].as_deref().is_some_and(|v| only.values.contains(&v))).collect()
        }
        None => (0..rows).collect(),
    };
    let values: Vec<Vec<Option<String>>> = spec.values.iter().map(|v| text_column(batches, v.column)).collect();
    let has_value = |r: usize| values.iter().any(|column| column[r].is_some());
    let kept: Vec<usize> = kept.into_iter().filter(|&r| has_value(r)).collect();
    match spec.facet {
        _ if kept.is_empty() => 0,
        None => 1,
        Some(facet) => {
            let cells = text_column(batches, facet);
            distinct(&kept.iter().map(|&r| cells[r].clone().unwrap_or_default()).collect::<Vec<_>>()).len().min(8)
        }
    }
}

#[test]
fn each_chart_has_a_wide_and_a_narrow_svg_with_a_viewbox() {
    let input = support::realistic(&support::model_names(3), 30);
    let html = render(&input).unwrap();
    let wide = html.matches(r#"data-layout="wide" viewBox="0 0 640 "#).count();
    let narrow = html.matches(r#"data-layout="narrow" viewBox="0 0 360 "#).count();
    assert_eq!(wide, narrow);
    // One figure per spec, or per facet value (replay verdicts per model, mediation per
    // metric, the engine charts per arm, each A/B chart per metric it keeps).
    let expected: usize = BUILTIN_CHARTS.iter().map(|spec| expected_figures(spec, &input.tables)).sum();
    assert!(expected > BUILTIN_CHARTS.len(), "some specs draw a figure per facet");
    assert_eq!(wide, expected);
    assert!(!html.contains(r#"<svg width="#), "plotters' fixed-size root must be replaced");
}

#[test]
fn absent_tables_become_not_in_this_dataset_notes() {
    let html = render(&empty_input().with_table("report", vec![one_row_report("m")])).unwrap();
    assert!(html.contains("Not in this dataset (no `daily` table)."));
    assert!(html.contains("Not in this dataset (no `kv_cache` table)."));
    assert!(html.contains("Not in this dataset (no `mediation_heatmap` or `mediation_layers` table)."));
    assert!(html.contains(r#"data-chart="cost_per_1k""#), "cost falls back to the report table");
    assert!(html.contains(r#"data-chart="ttft""#), "latency falls back to the report table");
}

#[test]
fn an_empty_dataset_still_renders_a_page() {
    let html = render(&empty_input()).unwrap();
    assert!(html.starts_with("<!doctype html>"));
    assert_eq!(chart_ids(&html), Vec::<String>::new());
}

#[test]
fn table_cells_are_rounded_for_reading() {
    let html = render(&empty_input().with_table("report", vec![one_row_report("m")])).unwrap();
    assert!(html.contains("<td>12.3%"), "rate as a percentage with one decimal");
    assert!(html.contains("<td>91.8%"), "EOS compliance 900/980");
    assert!(html.contains("<td>182.4"), "ms with one decimal");
    assert!(html.contains("<td>21.1"), "ms with one decimal");
    assert!(html.contains("<td>0.001235"), "USD with 4 significant digits");
    assert!(html.contains("<td>1235"), "USD with 4 significant digits");
}

#[test]
fn headline_numbers_sum_over_the_report() {
    let html = render(&empty_input().with_table("report", vec![one_row_report("m")])).unwrap();
    assert!(html.contains("<b>1000</b>"), "requests");
    assert!(html.contains("<b>$1235</b>"), "cost");
    assert!(html.contains("<b>8.0%</b>"), "implicit truncation 80 / 1000");
}

#[test]
fn model_names_are_escaped_everywhere() {
    let hostile = "<script>alert('x')</script>";
    let mut input = support::realistic(&[hostile.to_string(), "ok-model".to_string()], 10);
    input.title = "<b>title</b>".into();
    let html = render(&input).unwrap();
    assert!(!html.contains("<script"), "a model name became markup");
    assert!(!html.contains("<b>title</b>"));
    assert!(html.contains("&lt;script&gt;"), "the escaped name is shown");
}

#[test]
fn category_labels_drawn_inside_svg_are_escaped() {
    let cost = batch(vec![
        ("model", strings(&["m"])),
        ("context_bin", strings(&["<img src=x onerror=alert(1)>"])),
        ("requests", ints(&[1])),
        ("cost_usd", floats(&[Some(1.0)])),
        ("cost_per_1k_tokens", floats(&[Some(0.5)])),
        ("unpriced_requests", ints(&[0])),
    ]);
    let html = render(&empty_input().with_table("cost", vec![cost])).unwrap();
    assert!(!html.contains("<img"));
    assert!(html.contains("&lt;img src=x"));
}

#[test]
fn a_table_without_values_gives_a_note_instead_of_an_empty_chart() {
    let cost = batch(vec![
        ("model", strings(&["m", "m"])),
        ("context_bin", strings(&["0-1K", "1K-2K"])),
        ("requests", ints(&[3, 4])),
        ("unpriced_requests", ints(&[3, 4])),
        ("cost_usd", floats(&[None, None])),
        ("cost_per_1k_tokens", floats(&[None, None])),
    ]);
    let html = render(&empty_input().with_table("cost", vec![cost])).unwrap();
    assert!(html.contains("Table `cost` has no values in cost_per_1k_tokens."));
    assert!(!html.contains(r#"data-chart="cost_per_1k""#));
}

#[test]
fn a_missing_column_is_an_error_naming_table_and_column() {
    let cost = batch(vec![("model", strings(&["m"])), ("context_bin", strings(&["0-1K"]))]);
    let error = render(&empty_input().with_table("cost", vec![cost])).unwrap_err();
    assert!(matches!(&error, tokscope::Error::Config(_)), "{error}");
    assert!(error.to_string().contains("dashboard: table `cost` has no column `cost_per_1k_tokens`"), "{error}");
}

#[test]
fn daily_charts_show_the_last_trend_days_only() {
    let mut input = support::realistic(&support::model_names(2), 40);
    input.trend_days = 30;
    let html = render(&input).unwrap();
    assert!(html.contains("Data: 30 rows from <code>daily</code>"), "one row per date, one column per model");
    assert!(html.contains("2025-06-01 to 2025-06-30 (UTC)."));
}

#[test]
fn bars_over_90_days_label_at_most_7_dates_across_so_they_do_not_overlap() {
    let mut input = support::realistic(&support::model_names(3), 90);
    input.trend_days = 90;
    let html = render(&input).unwrap();
    let wide = html.split(r#"data-chart="spend_daily_by_team" data-layout="wide""#).nth(1).unwrap();
    let svg = &wide[..wide.find("</svg>").unwrap()];
    // A date label is 10 characters, about 70 px: 7 fit the plot's 540 px.
    let dates = svg.split("<text").skip(1).filter(|t| t.contains("\n2025-")).count();
    assert!((2..=7).contains(&dates), "{dates} date labels across 90 bars");
    assert!(html.contains("Data: 90 rows from <code>spend_daily_by_team</code>"), "every day is drawn and tabled");
}

#[test]
fn charts_draw_at_most_eight_series_and_say_so() {
    let html = render(&support::realistic(&support::model_names(11), 5)).unwrap();
    assert!(html.contains("Showing the 8 series with the most requests; 3 more are in the table only."));
    assert!(html.contains("Data: 99 rows from <code>report</code>"), "the table keeps every model");
}

#[test]
fn a_new_table_gets_its_chart_from_one_spec_entry() {
    const HEAD_WASTE: ChartSpec = ChartSpec {
        id: "waste_share",
        section: "Attention heads",
        tables: &["attention_waste"],
        title: "Wasted attention per head",
        kind: ChartKind::Heatmap { rows: Axis { column: "layer", label: "Layer", unit: Unit::Index } },
        x: Axis { column: "head", label: "Head", unit: Unit::Index },
        series: None,
        values: &[ValueColumn::new("waste_share", "waste")],
        value_label: "Wasted attention",
        unit: Unit::Rate,
        ..ChartSpec::BASE
    };
    let head_waste = batch(vec![
        ("layer", ints(&[0, 0, 1, 1])),
        ("head", ints(&[0, 1, 0, 1])),
        ("waste_share", floats(&[Some(0.1), Some(0.4), Some(0.05), None])),
    ]);
    let html = render(&empty_input().with_chart(HEAD_WASTE).with_table("attention_waste", vec![head_waste])).unwrap();
    assert!(html.contains(r#"data-chart="waste_share""#));
    assert!(html.contains("<td>40.0%"));
    assert!(html.contains("Wasted attention (%)"));
}

#[test]
fn ab_points_are_filled_when_significant_after_holm_and_ratios_are_read_against_one() {
    let f = |values: &[f64]| floats(&values.iter().map(|v| Some(*v)).collect::<Vec<_>>());
    let ab = batch(vec![
        ("context_bin", strings(&["0-1K", "16K+", "0-1K", "16K+"])),
        (
            "metric",
            strings(&[
                "implicit_truncation_rate",
                "implicit_truncation_rate",
                "cost_per_1k_tokens",
                "cost_per_1k_tokens",
            ]),
        ),
        ("effect", strings(&["difference", "difference", "ratio", "ratio"])),
        ("diff", f(&[0.001, 0.05, 1.02, 0.7])),
        ("ci_low", f(&[-0.01, 0.03, 0.95, 0.6])),
        ("ci_high", f(&[0.012, 0.07, 1.09, 0.8])),
        // The second row's interval excludes 0, but Holm's correction says no.
        ("p_value_holm", f(&[0.8, 0.09, 0.6, 0.001])),
    ]);
    let html = render(&empty_input().with_table("ab", vec![ab])).unwrap();
    // Each metric in the A/B chart of its kind: the rates, and cost with decode speed and KV cache.
    assert_eq!(html.matches(r#"data-chart="ab_rates" data-layout="wide""#).count(), 1);
    assert_eq!(html.matches(r#"data-chart="ab_capacity" data-layout="wide""#).count(), 1);
    assert!(html.contains("Table `ab` has no rows."), "the latency chart has none of its metrics");
    assert_eq!(html.matches("Ratios of B to A: the reference line is at 1.").count(), 1, "only the cost chart");
    assert!(html.contains("significant (p_value_holm &lt; 0.05)"), "the legend names the test");
    assert!(html.contains("<td>ratio"), "the table shows each row's effect");
    assert!(!html.contains("Sample ratio mismatch"), "a table without the check raises no warning");
}

#[test]
fn ab_rows_without_a_test_are_read_by_their_interval() {
    // A P95 has no test (null p): its point is filled when its interval excludes 0.
    let f = |values: &[Option<f64>]| floats(values);
    let ab = batch(vec![
        ("context_bin", strings(&["0-1K", "16K+"])),
        ("metric", strings(&["ttft_p95_ms", "ttft_p95_ms"])),
        ("effect", strings(&["difference", "difference"])),
        ("diff", f(&[Some(12.0), Some(3.0)])),
        ("ci_low", f(&[Some(4.0), Some(-2.0)])),
        ("ci_high", f(&[Some(20.0), Some(8.0)])),
        ("p_value_holm", f(&[None, None])),
    ]);
    let html = render(&empty_input().with_table("ab", vec![ab])).unwrap();
    let wide = html.split(r#"data-chart="ab_latency" data-layout="wide""#).nth(1).unwrap();
    let marks = &wide[wide.find(r#"<g class="marks">"#).unwrap()..wide.find("</svg>").unwrap()];
    // Each point is a white disc and its mark; only the 0-1K mark is filled with the series colour.
    let fills: Vec<&str> = marks
        .split("<circle")
        .skip(1)
        .map(|circle| circle.split("fill=\"").nth(1).and_then(|f| f.split('"').next()).unwrap_or(""))
        .collect();
    assert_eq!(fills.len(), 4, "{fills:?}");
    let coloured = fills.iter().filter(|f| !["none", "#FFFFFF", "#ffffff", ""].contains(f)).count();
    assert_eq!(coloured, 1, "one filled point, 0-1K: {fills:?}");
    assert!(html.contains("without a test, the 95% interval excludes 0"), "the legend says how it was read");
}

#[test]
fn a_failed_sample_ratio_check_raises_a_warning_naming_its_bins() {
    let f = |values: &[f64]| floats(&values.iter().map(|v| Some(*v)).collect::<Vec<_>>());
    let ab = batch(vec![
        ("context_bin", strings(&["0-1K", "16K+", "all", "0-1K", "16K+", "all"])),
        (
            "metric",
            strings(&[
                "sample_ratio",
                "sample_ratio",
                "sample_ratio",
                "implicit_truncation_rate",
                "implicit_truncation_rate",
                "implicit_truncation_rate",
            ]),
        ),
        ("effect", strings(&["difference"; 6])),
        ("diff", f(&[0.0, -0.08, -0.01, 0.001, 0.05, 0.01])),
        ("ci_low", f(&[-0.01, -0.1, -0.02, -0.01, 0.03, 0.0])),
        ("ci_high", f(&[0.01, -0.06, 0.0, 0.012, 0.07, 0.02])),
        ("p_value_holm", f(&[0.9, 1e-9, 1e-4, 0.8, 0.001, 0.04])),
        ("sample_ratio_mismatch", Arc::new(BooleanArray::from(vec![false, true, true, false, true, true])) as ArrayRef),
    ]);
    let html = render(&empty_input().with_table("ab", vec![ab])).unwrap();
    let warning = r#"<p class="warning span" role="alert" data-flag="ab_rates">Sample ratio mismatch"#;
    assert_eq!(html.matches(warning).count(), 1, "one warning above the rates");
    assert!(html.contains("may be biased (Context bin: 16K+, all).</p>"), "it names the flagged bins");
    assert!(!html.contains(r#"data-flag="ab_latency""#), "a chart without rows raises none");
}

#[test]
fn changed_layers_draw_de_and_ie_bars_with_whiskers_per_layer_one_chart_per_study() {
    let f = |values: &[f64]| floats(&values.iter().map(|v| Some(*v)).collect::<Vec<_>>());
    let studies = ["sacrebleu, skip-layer", "sacrebleu, weight-noise mlp.gate sigma 0.01"];
    let table = batch(vec![
        ("study", strings(&[studies[0], studies[0], studies[1], studies[1], studies[1], studies[1]])),
        ("layer", ints(&[0, 0, 0, 0, 1, 1])),
        ("effect", strings(&["de", "ie", "de", "ie", "de", "ie"])),
        ("n", ints(&[3, 3, 6, 6, 6, 6])),
        ("mean", f(&[-40.0, -12.5, -0.82, -2.17, -0.1, -0.4])),
        ("ci_lo", f(&[-55.0, -20.0, -1.4, -3.0, -0.5, -0.9])),
        ("ci_hi", f(&[-25.0, -5.0, -0.3, -1.2, 0.2, 0.1])),
    ]);
    let html = render(&empty_input().with_table("mediation_layers", vec![table])).unwrap();
    assert_eq!(html.matches(r#"data-chart="mediation_layers" data-layout="wide""#).count(), 2, "one per study");
    for study in studies {
        assert!(html.contains(study), "{study} names its chart");
    }
    assert!(html.contains("Layer (index)"), "layers along x");
    // Per layer a DE and an IE bar from 0 to its mean, each with its whisker (3 strokes).
    let wide = html.split(r#"data-chart="mediation_layers" data-layout="wide""#).nth(2).unwrap();
    let marks = &wide[wide.find(r#"<g class="marks">"#).unwrap()..wide.find("</svg>").unwrap()];
    assert_eq!(marks.matches("<rect").count(), 4, "the second study's 2 layers x (DE, IE)");
    assert_eq!(marks.matches("<polyline").count(), 4 * 3, "a whisker per bar");
    assert!(!marks.contains("<circle"), "bars, not points");
    assert!(html.contains("</svg>95% interval"), "the legend names the whiskers");
    assert!(html.contains("<td>-0.82") && html.contains("<td>-2.17"), "layer 0's DE and IE in the table");
    assert!(html.contains("<td>-1.4") && html.contains("<td>-0.3"), "and DE's interval");
}

#[test]
fn a_spec_id_must_be_a_plain_identifier() {
    const SPEC: ChartSpec =
        ChartSpec { id: "bad id\"", tables: &["x"], values: &[ValueColumn::new("v", "v")], ..ChartSpec::BASE };
    let spec = SPEC;
    let error = render(&empty_input().with_chart(spec)).unwrap_err();
    assert!(error.to_string().contains("dashboard chart `bad id\"`"), "{error}");
}

#[test]
fn the_page_is_self_contained() {
    let html = render(&support::realistic(&support::model_names(3), 30)).unwrap();
    for forbidden in ["<script", "<link", "<img", "src=", "@import", "url("] {
        assert!(!html.contains(forbidden), "page contains {forbidden}");
    }
    let external = html.matches("http").count();
    let svg_namespace = html.matches("http://www.w3.org/2000/svg").count();
    assert_eq!(external, svg_namespace, "only the SVG namespace may be a URL");
}

#[test]
fn page_for_50_models_9_bins_90_days_is_under_2_mib() {
    let mut input = support::realistic(&support::model_names(50), 90);
    input.trend_days = 90;
    let html = render(&input).unwrap();
    // Kept for a look in a browser, under the build directory (never in the source tree).
    let page = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-50-models.html");
    std::fs::write(&page, &html).unwrap();
    println!("50 models x 9 bins x 90 days: {} bytes ({})", html.len(), page.display());
    assert!(html.len() < 2 << 20, "page is {} bytes", html.len());
}

// ---------------------------------------------------------------- exported studies

/// Generates 20,000 requests with per-token data over 3 days (`arms`: `--arms`
/// if any, the candidate truncating 12% above 16K), adds `extra` inputs from
/// tests/data, ingests with bins 0, 1K, 4K, 16K and exports with prices;
/// returns `site/latest`.
fn export_dataset(dir: &std::path::Path, arms: Option<&str>, extra: &[&str]) -> std::path::PathBuf {
    let log = dir.join("requests.jsonl");
    let mut args =
        vec!["generate", "--requests", "20000", "--seed", "11", "--days", "3", "--output-chars", "40", "--token-data"];
    if let Some(arms) = arms {
        args.extend(["--arms", arms]);
        if arms.contains("candidate") {
            args.extend(["--arm-truncation", "candidate:0.12:16K"]);
        }
    }
    args.extend(["--out", log.to_str().unwrap()]);
    common::tokscope(&args);
    let extra: Vec<String> = extra.iter().map(|p| common::data_dir().join(p).display().to_string()).collect();
    let mut inputs = vec![log.to_str().unwrap()];
    inputs.extend(extra.iter().map(String::as_str));
    let data = dir.join("ds");
    common::ingest(&inputs, &data, &["--bins", "0,1K,4K,16K"]);
    common::export_priced(&data, &dir.join("site"), "2024-06-03")
}

/// A job's CSV as header -> column of cells (quoted cells may hold commas).
fn read_csv(path: &std::path::Path) -> std::collections::HashMap<String, Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let split = |line: &str| -> Vec<String> {
        let (mut cells, mut cell, mut quoted) = (Vec::new(), String::new(), false);
        for c in line.chars() {
            match c {
                '"' => quoted = !quoted,
                ',' if !quoted => cells.push(std::mem::take(&mut cell)),
                c => cell.push(c),
            }
        }
        cells.push(cell);
        cells
    };
    let mut lines = text.lines();
    let header = split(lines.next().unwrap_or_default());
    let rows: Vec<Vec<String>> = lines.map(split).collect();
    header.iter().enumerate().map(|(i, name)| (name.clone(), rows.iter().map(|r| r[i].clone()).collect())).collect()
}

fn distinct(cells: &[String]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for cell in cells {
        if !seen.contains(cell) {
            seen.push(cell.clone());
        }
    }
    seen
}

// ------------------------------------------------------- marks read off their axes in Chromium

/// How far (page pixels) a mark may lie from where its value puts it: every
/// coordinate of the SVG is a whole unit (a bar's ends, a tick), drawn at about
/// 0.9 px, so a bar's end and the tick it is read against are each up to half a
/// unit off.
const TOLERANCE_PX: f64 = 1.5;

type Table = std::collections::HashMap<String, Vec<String>>;

/// A number in a CSV cell.
fn number(cell: &str) -> Option<f64> {
    cell.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// A CSV key cell as the page names it: an empty (null) cell is `(null)`.
fn shown(cell: &str) -> &str {
    if cell.is_empty() {
        "(null)"
    } else {
        cell
    }
}

/// The value axis of a drawn chart: the page position of a value.
struct ValueAxis {
    at_zero: f64,
    per_unit: f64,
}

impl ValueAxis {
    fn px(&self, value: f64) -> f64 {
        self.at_zero + self.per_unit * value
    }
}

/// One displayed chart as `browser_check.py --geometry` wrote it (page pixels),
/// read as a person reads it: a value off the value axis' tick labels, a mark's
/// category from the label it stands over, its series and value column from
/// the legend's colours and shades. Wide charts run categories along x, narrow
/// ones down y.
struct Drawn<'a> {
    figure: &'a serde_json::Value,
    wide: bool,
    name: String,
}

impl<'a> Drawn<'a> {
    fn new(figure: &'a serde_json::Value) -> Self {
        let wide = figure["layout"] == "wide";
        let name = format!("{} ({}, {})", figure["id"], figure["layout"], figure["facet"]);
        Drawn { figure, wide, name }
    }

    /// Index of a point's coordinate along the value axis, and across it.
    fn along(&self) -> usize {
        usize::from(self.wide)
    }
    fn across(&self) -> usize {
        usize::from(!self.wide)
    }

    /// The unrotated texts outside the marks anchored at `anchor`: (text, [x, y]).
    fn texts(&self, anchor: &str) -> Vec<(String, [f64; 2])> {
        let f = |v: &serde_json::Value| v.as_f64().unwrap();
        self.figure["texts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["anchor"] == anchor && t["rotated"] == false)
            .map(|t| (t["text"].as_str().unwrap().to_string(), [f(&t["x"]), f(&t["y"])]))
            .collect()
    }

    /// The value axis through its tick labels (right-aligned left of a wide
    /// chart, centred under a narrow one), fitted by least squares; values grow
    /// upwards on wide charts and to the right on narrow ones.
    fn value_axis(&self) -> ValueAxis {
        let ticks: Vec<(f64, f64)> = self
            .texts(if self.wide { "end" } else { "middle" })
            .into_iter()
            .filter_map(|(text, at)| text.replace(',', "").parse::<f64>().ok().map(|v| (v, at[self.along()])))
            .collect();
        assert!(ticks.len() >= 2, "{}: no value axis ticks: {ticks:?}", self.name);
        let n = ticks.len() as f64;
        let (mean_v, mean_p) = (ticks.iter().map(|t| t.0).sum::<f64>() / n, ticks.iter().map(|t| t.1).sum::<f64>() / n);
        let per_unit = ticks.iter().map(|(v, p)| (v - mean_v) * (p - mean_p)).sum::<f64>()
            / ticks.iter().map(|(v, _)| (v - mean_v).powi(2)).sum::<f64>();
        let axis = ValueAxis { at_zero: mean_p - per_unit * mean_v, per_unit };
        for (v, p) in &ticks {
            assert!((axis.px(*v) - p).abs() < 1.0, "{}: tick {v} at {p} px is off its axis: {ticks:?}", self.name);
        }
        assert!(if self.wide { per_unit < 0.0 } else { per_unit > 0.0 }, "{}: axis runs backwards", self.name);
        axis
    }

    /// Each of `categories` with the page position of its label across the
    /// value axis (centred under a wide chart, right-aligned left of a narrow one).
    fn category_labels(&self, categories: &[String]) -> Vec<(String, f64)> {
        let labels: Vec<(String, f64)> = self
            .texts(if self.wide { "middle" } else { "end" })
            .into_iter()
            .filter(|(text, _)| categories.contains(text))
            .map(|(text, at)| (text, at[self.across()]))
            .collect();
        let mut named: Vec<&String> = labels.iter().map(|(text, _)| text).collect();
        named.sort();
        let mut expected: Vec<&String> = categories.iter().collect();
        expected.sort();
        assert_eq!(named, expected, "{}: one label per category", self.name);
        labels
    }

    /// The category whose band holds `position` (across the value axis): the
    /// nearest label, nearer than half the distance between labels.
    fn category_at<'l>(&self, labels: &'l [(String, f64)], position: f64) -> &'l str {
        let (label, distance) =
            labels.iter().map(|(label, at)| (label, (at - position).abs())).min_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
        assert!(distance < half_band(labels), "{}: a mark at {position} px is in no category's band", self.name);
        label
    }

    /// The legend's swatches: (label, colour, opacity).
    fn legend(&self) -> Vec<(String, String, f64)> {
        self.figure["legend"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                let label = l["label"].as_str().unwrap().to_string();
                (label, l["colour"].as_str().unwrap().to_string(), l["opacity"].as_f64().unwrap())
            })
            .collect()
    }

    /// The rows of `table` this figure draws: its facet's, those the spec keeps.
    fn rows(&self, spec: &ChartSpec, table: &Table) -> Vec<usize> {
        let facet = self.figure["facet"].as_str().map(|f| f.split_once(" = ").unwrap().1.to_string());
        (0..table[spec.x.column].len())
            .filter(|&r| spec.facet.is_none_or(|column| Some(shown(&table[column][r])) == facet.as_deref()))
            .filter(|&r| spec.only.is_none_or(|only| only.values.contains(&table[only.column][r].as_str())))
            .collect()
    }

    /// A polyline's two points, if it is a straight stroke.
    fn strokes(&self) -> Vec<[[f64; 2]; 2]> {
        let point = |p: &serde_json::Value| [p[0].as_f64().unwrap(), p[1].as_f64().unwrap()];
        self.figure["polylines"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|line| match line.as_array().unwrap().as_slice() {
                [a, b] => Some([point(a), point(b)]),
                _ => None,
            })
            .collect()
    }

    /// Asserts a whisker at `centre` (across the value axis) from page position
    /// `lo` to `hi` along it: its stroke, and a cap across each end, shorter than
    /// `half_band` (longer strokes are reference lines).
    fn assert_whisker(&self, centre: f64, (lo, hi): (f64, f64), half_band: f64, what: &str) {
        let (a, c) = (self.along(), self.across());
        let near = |x: f64, y: f64| (x - y).abs() <= TOLERANCE_PX;
        let strokes = self.strokes();
        let stroke = strokes.iter().any(|[p, q]| {
            near(p[c], centre)
                && near(q[c], centre)
                && near(p[a].min(q[a]), lo.min(hi))
                && near(p[a].max(q[a]), lo.max(hi))
        });
        assert!(stroke, "{}: {what}: no whisker stroke at {centre:.1} px from {lo:.1} to {hi:.1} px", self.name);
        for end in [lo, hi] {
            let cap = strokes.iter().any(|[p, q]| {
                near(p[a], end) && near(q[a], end) && near((p[c] + q[c]) / 2.0, centre) && {
                    let length = (p[c] - q[c]).abs();
                    length > 0.0 && length < half_band
                }
            });
            assert!(cap, "{}: {what}: no whisker cap at {end:.1} px", self.name);
        }
    }
}

/// Half the distance between neighbouring category labels (page pixels): how
/// far a category's marks reach from its label.
fn half_band(labels: &[(String, f64)]) -> f64 {
    let mut at: Vec<f64> = labels.iter().map(|l| l.1).collect();
    at.sort_by(f64::total_cmp);
    at.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min) / 2.0
}

/// What the readers of bar and interval charts start from: the chart as
/// drawn, its value axis, the factor its unit is drawn at (rates as
/// percentages), the table rows it draws, and its categories with the
/// positions of their labels.
struct ChartReading<'a> {
    drawn: Drawn<'a>,
    axis: ValueAxis,
    scale: f64,
    rows: Vec<usize>,
    categories: Vec<String>,
    labels: Vec<(String, f64)>,
}

impl<'a> ChartReading<'a> {
    fn new(figure: &'a serde_json::Value, spec: &ChartSpec, table: &Table) -> Self {
        let drawn = Drawn::new(figure);
        let axis = drawn.value_axis();
        let scale = if spec.unit == Unit::Rate { 100.0 } else { 1.0 };
        let rows = drawn.rows(spec, table);
        let categories =
            distinct(&rows.iter().map(|&r| shown(&table[spec.x.column][r]).to_string()).collect::<Vec<_>>());
        let labels = drawn.category_labels(&categories);
        ChartReading { drawn, axis, scale, rows, categories, labels }
    }
}

/// Checks every bar of a bar chart of `spec` against the exported `table`:
/// each value in the figure's rows has one bar, in the band of its category's
/// label, in the legend's order of series then value columns, from the value
/// axis' 0 to the value (and, for bars with intervals, a whisker from the row's
/// lower to its upper bound), within [`TOLERANCE_PX`].
fn assert_bars_read_as(figure: &serde_json::Value, spec: &ChartSpec, table: &Table) {
    let interval = match spec.kind {
        ChartKind::BarsWithIntervals { low, high } => Some((low, high)),
        _ => None,
    };
    let ChartReading { drawn, axis, scale, rows, categories, labels } = ChartReading::new(figure, spec, table);
    let name = &drawn.name;
    let legend = drawn.legend();
    let value_labels: Vec<&str> = spec.values.iter().map(|v| v.label).collect();
    // The series the legend names (at most 8 are drawn, the busiest), in its order.
    let series: Vec<&(String, String, f64)> = match spec.series {
        Some(column) => {
            legend.iter().filter(|(label, ..)| rows.iter().any(|&r| shown(&table[column][r]) == label)).collect()
        }
        None => Vec::new(),
    };
    if let Some(column) = spec.series {
        assert_eq!(series.len(), drawn_series(&rows, column, table), "{name}: a legend entry per series: {legend:?}");
    }
    let row_of = |category: &str, series_label: Option<&str>| -> usize {
        let found: Vec<usize> = rows
            .iter()
            .copied()
            .filter(|&r| shown(&table[spec.x.column][r]) == category)
            .filter(|&r| spec.series.is_none_or(|column| Some(shown(&table[column][r])) == series_label))
            .collect();
        assert_eq!(found.len(), 1, "{name}: one row for {category} {series_label:?}");
        found[0]
    };

    // (category, series index, value index, position across the axis) of each bar.
    let mut bars: Vec<(String, usize, usize, f64)> = Vec::new();
    let (a, c) = (drawn.along(), drawn.across());
    for rect in figure["rects"].as_array().unwrap() {
        let edge = |key: &str| rect[key].as_f64().unwrap();
        let (start, end) = ([edge("left"), edge("top")], [edge("right"), edge("bottom")]);
        let centre = (start[c] + end[c]) / 2.0;
        let category = drawn.category_at(&labels, centre).to_string();
        let (fill, opacity) = (rect["fill"].as_str().unwrap(), rect["opacity"].as_f64().unwrap());
        let swatch = |labels: &[&str], colour: Option<&str>, shade: Option<f64>| -> String {
            let found: Vec<&String> = legend
                .iter()
                .filter(|(label, swatch, alpha)| {
                    labels.contains(&label.as_str())
                        && colour.is_none_or(|c| c == swatch)
                        && shade.is_none_or(|s| (s - alpha).abs() < 1e-6)
                })
                .map(|(label, ..)| label)
                .collect();
            assert_eq!(found.len(), 1, "{name}: a {fill} bar at opacity {opacity} has no legend entry: {legend:?}");
            found[0].clone()
        };
        let (s, v) = if spec.series.is_some() {
            let series_labels: Vec<&str> = series.iter().map(|(label, ..)| label.as_str()).collect();
            let label = swatch(&series_labels, Some(fill), None);
            let s = series_labels.iter().position(|l| *l == label).unwrap();
            let v = if value_labels.len() == 1 {
                0
            } else {
                value_labels.iter().position(|l| *l == swatch(&value_labels, None, Some(opacity))).unwrap()
            };
            (s, v)
        } else {
            (0, value_labels.iter().position(|l| *l == swatch(&value_labels, Some(fill), None)).unwrap())
        };
        let series_label = series.get(s).map(|(label, ..)| label.as_str());
        let r = row_of(&category, series_label);
        let column = spec.values[v].column;
        let what = format!("{column} of {category} {}", series_label.unwrap_or_default());
        let value = number(&table[column][r]).unwrap_or_else(|| panic!("{name}: a bar for {what}, which has no value"));
        let (zero, top) = (axis.px(0.0), axis.px(value * scale));
        let (from, to) = (start[a].min(end[a]), start[a].max(end[a]));
        assert!(
            (from - zero.min(top)).abs() <= TOLERANCE_PX && (to - zero.max(top)).abs() <= TOLERANCE_PX,
            "{name}: the bar of {what} = {value} spans {from:.1}..{to:.1} px; the axis puts 0 at {zero:.1} px and \
             the value at {top:.1} px"
        );
        if let Some((low, high)) = interval.filter(|_| v == 0) {
            if let (Some(lo), Some(hi)) = (number(&table[low][r]), number(&table[high][r])) {
                drawn.assert_whisker(centre, (axis.px(lo * scale), axis.px(hi * scale)), half_band(&labels), &what);
            }
        }
        bars.push((category, s, v, centre));
    }

    // One bar per value of the drawn series, each in reading order within its category.
    let drawn_series =
        |r: usize| spec.series.is_none_or(|column| series.iter().any(|(l, ..)| l == shown(&table[column][r])));
    let values: usize = rows
        .iter()
        .filter(|&&r| drawn_series(r))
        .map(|&r| spec.values.iter().filter(|v| number(&table[v.column][r]).is_some()).count())
        .sum();
    assert!(values > 0, "{name}: no values to draw");
    assert_eq!(bars.len(), values, "{name}: one bar per value");
    for category in &categories {
        let mut in_band: Vec<&(String, usize, usize, f64)> = bars.iter().filter(|b| &b.0 == category).collect();
        in_band.sort_by(|x, y| x.3.total_cmp(&y.3));
        let order: Vec<(usize, usize)> = in_band.iter().map(|b| (b.1, b.2)).collect();
        let mut sorted = order.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(order, sorted, "{name}: {category}'s bars out of the legend's order (series, value)");
    }
}

/// How many series of `column` a chart of `rows` draws: the named ones, at
/// most 8, then `(other)` and `(null)` where present.
fn drawn_series(rows: &[usize], column: &str, table: &Table) -> usize {
    let all = distinct(&rows.iter().map(|&r| shown(&table[column][r]).to_string()).collect::<Vec<_>>());
    let neutral = all.iter().filter(|s| NEUTRAL_SERIES.contains(&s.as_str())).count();
    (all.len() - neutral).min(8) + neutral
}

/// Checks every segment of a stacked bar chart of `spec` against the exported
/// `table`: per category (its label's band) one segment per series with a
/// value, told by the legend's colour, from the sum of the values of the
/// series before it in the legend (the segments below it) to that sum plus
/// its value, read off the value axis within [`TOLERANCE_PX`].
fn assert_stacks_read_as(figure: &serde_json::Value, spec: &ChartSpec, table: &Table) {
    let ChartReading { drawn, axis, scale, rows, categories, labels } = ChartReading::new(figure, spec, table);
    let name = &drawn.name;
    let column = spec.series.expect("a stacked chart has series");
    let value = spec.values[0].column;
    let legend = drawn.legend();
    assert_eq!(legend.len(), drawn_series(&rows, column, table), "{name}: a legend entry per series: {legend:?}");
    // The row of each category and series, and the stacks as the table gives them.
    let value_of = |category: &str, series: &str| -> Option<f64> {
        let found: Vec<usize> = rows
            .iter()
            .copied()
            .filter(|&r| shown(&table[spec.x.column][r]) == category && shown(&table[column][r]) == series)
            .collect();
        assert!(found.len() <= 1, "{name}: one row for {category} {series}");
        found.first().and_then(|&r| number(&table[value][r]))
    };
    let (a, c) = (drawn.along(), drawn.across());
    let mut seen: Vec<(String, String)> = Vec::new();
    for rect in figure["rects"].as_array().unwrap() {
        let edge = |key: &str| rect[key].as_f64().unwrap();
        let (start, end) = ([edge("left"), edge("top")], [edge("right"), edge("bottom")]);
        let category = drawn.category_at(&labels, (start[c] + end[c]) / 2.0).to_string();
        let fill = rect["fill"].as_str().unwrap();
        let in_legend: Vec<usize> = (0..legend.len()).filter(|&i| legend[i].1 == fill).collect();
        assert_eq!(in_legend.len(), 1, "{name}: a {fill} segment has no legend entry of its own: {legend:?}");
        let s = in_legend[0];
        let series = &legend[s].0;
        let v = value_of(&category, series)
            .unwrap_or_else(|| panic!("{name}: a segment for {category} {series}, which has no value"));
        // The segments below: the series before it in the legend, of the same sign.
        let base: f64 = legend[..s]
            .iter()
            .filter_map(|(below, ..)| value_of(&category, below))
            .filter(|b| (*b >= 0.0) == (v >= 0.0))
            .sum();
        let (low, high) = (axis.px(base * scale), axis.px((base + v) * scale));
        let (from, to) = (start[a].min(end[a]), start[a].max(end[a]));
        assert!(
            (from - low.min(high)).abs() <= TOLERANCE_PX && (to - low.max(high)).abs() <= TOLERANCE_PX,
            "{name}: the segment of {series} on {category} = {v} over {base} spans {from:.1}..{to:.1} px; the axis \
             puts {base} at {low:.1} px and {} at {high:.1} px",
            base + v
        );
        seen.push((category, series.clone()));
    }
    let values = categories
        .iter()
        .flat_map(|category| legend.iter().filter(|(series, ..)| value_of(category, series).is_some()))
        .count();
    assert!(values > 0, "{name}: no values to draw");
    assert_eq!(seen.len(), values, "{name}: one segment per value");
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "{name}: one segment per category and series");
}

/// Checks every point of an interval chart of `spec` (one series) against the
/// exported `table`: each row with an estimate has a point (a white disc and
/// its mark) at the estimate, in its category's band, and a whisker from its
/// lower to its upper bound; the reference line crosses the chart at 0, or at 1
/// for a figure of ratios.
fn assert_points_read_as(figure: &serde_json::Value, spec: &ChartSpec, table: &Table) {
    let ChartKind::Interval { low, high, effect, .. } = spec.kind else { panic!("{} is no interval chart", spec.id) };
    let ChartReading { drawn, axis, scale, rows, labels, .. } = ChartReading::new(figure, spec, table);
    let name = &drawn.name;
    let (a, c) = (drawn.along(), drawn.across());
    let mut centres: Vec<[f64; 2]> = Vec::new();
    for circle in figure["circles"].as_array().unwrap() {
        let centre = [circle["cx"].as_f64().unwrap(), circle["cy"].as_f64().unwrap()];
        if !centres.contains(&centre) {
            centres.push(centre);
        }
    }
    let estimate = spec.values[0].column;
    let mut seen = Vec::new();
    for centre in &centres {
        let category = drawn.category_at(&labels, centre[c]);
        let r = *rows.iter().find(|&&r| shown(&table[spec.x.column][r]) == category).unwrap();
        let value =
            number(&table[estimate][r]).unwrap_or_else(|| panic!("{name}: a point for {category} without a value"));
        assert!(
            (centre[a] - axis.px(value * scale)).abs() <= TOLERANCE_PX,
            "{name}: {category}'s {estimate} = {value} is drawn at {:.1} px; the axis puts it at {:.1} px",
            centre[a],
            axis.px(value * scale)
        );
        if let (Some(lo), Some(hi)) = (number(&table[low][r]), number(&table[high][r])) {
            drawn.assert_whisker(centre[c], (axis.px(lo * scale), axis.px(hi * scale)), half_band(&labels), category);
        }
        seen.push(category);
    }
    let with_value = rows.iter().filter(|&&r| number(&table[estimate][r]).is_some()).count();
    assert!(with_value > 0, "{name}: no values to draw");
    assert_eq!(seen.len(), with_value, "{name}: one point per row with {estimate}");
    let ratios = effect.is_some_and(|column| rows.iter().all(|&r| table[column][r] == "ratio"));
    let reference = axis.px(if ratios { scale } else { 0.0 });
    let (first, last) =
        labels.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), l| (lo.min(l.1), hi.max(l.1)));
    let crossing = drawn.strokes().into_iter().any(|[p, q]| {
        (p[a] - reference).abs() <= TOLERANCE_PX
            && (q[a] - reference).abs() <= TOLERANCE_PX
            && p[c].min(q[c]) < first
            && p[c].max(q[c]) > last
    });
    assert!(crossing, "{name}: no reference line at {reference:.1} px");
}

/// The tables (catalog names) a run of the export needs rows of, from the job registry.
fn run_needs(run: &DashboardRun) -> Vec<&'static str> {
    run.job().unwrap().tables.iter().map(|t| t.name).collect()
}

/// The run a chart draws from in the export at `latest`: the first of its
/// tables with an exported CSV.
fn exported_table(spec: &ChartSpec, latest: &std::path::Path) -> Option<&'static str> {
    spec.tables.iter().copied().find(|t| latest.join(format!("{t}.csv")).is_file())
}

/// The rows of `table` a figure of `spec` may draw: those its `only` keeps.
fn kept_rows(spec: &ChartSpec, table: &Table) -> Vec<usize> {
    (0..table[spec.x.column].len())
        .filter(|&r| spec.only.is_none_or(|only| only.values.contains(&table[only.column][r].as_str())))
        .collect()
}

/// Named series drawn in their own colour at most; `(other)` and `(null)` come on top, in greys.
const NEUTRAL_SERIES: [&str; 2] = ["(other)", "(null)"];

/// Checks each chart of `ids` in the export at `latest` against the CSV of the
/// run it draws from, as the registry describes it (`BUILTIN_CHARTS`: kind,
/// value columns, facet, rows kept), in Chromium at desktop and phone width:
/// one figure per facet value; bars: one rect per value, each read off the
/// axes from 0 to its value (stacked: from the sum of the segments below it);
/// intervals: a point and whisker per estimate; heatmaps: a cell per x x row;
/// lines: a vertex per value, a line per series. Returns the browser check's
/// output (`None` without Chromium).
fn check_exported_charts(latest: &std::path::Path, dir: &std::path::Path, ids: &[&str]) -> Option<Output> {
    let page = latest.join("index.html");
    let html = std::fs::read_to_string(&page).unwrap();
    for id in ids {
        assert!(html.contains(&format!(r#"data-chart="{id}""#)), "chart {id} is not drawn");
    }
    if !common::chromium_available() {
        return None;
    }
    let counts_path = dir.join("counts.json");
    let geometry_path = dir.join("geometry.json");
    let out = common::browser_check(
        &page,
        ids,
        dir,
        &[format!("--counts={}", counts_path.display()), format!("--geometry={}", geometry_path.display())],
    );
    assert!(
        out.status.success(),
        "browser check failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let counts: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&counts_path).unwrap()).unwrap();
    let geometry: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&geometry_path).unwrap()).unwrap();
    let n = |v: &serde_json::Value, key: &str| v[key].as_u64().unwrap() as usize;
    for id in ids {
        let spec = BUILTIN_CHARTS.iter().find(|s| s.id == *id).unwrap_or_else(|| panic!("{id} is no chart"));
        let job = exported_table(spec, latest).unwrap_or_else(|| panic!("{id}: none of {:?} exported", spec.tables));
        let table = read_csv(&latest.join(format!("{job}.csv")));
        let rows = kept_rows(spec, &table);
        let values: Vec<&str> = spec.values.iter().map(|v| v.column).collect();
        let with_value: Vec<usize> =
            rows.iter().copied().filter(|&r| values.iter().any(|c| number(&table[*c][r]).is_some())).collect();
        assert!(!with_value.is_empty(), "{id}: {job}.csv has no values to draw");
        let facets = match spec.facet {
            Some(column) => distinct(&with_value.iter().map(|&r| table[column][r].clone()).collect::<Vec<_>>()),
            None => vec![String::new()],
        };
        // The wide SVGs, as Chromium parsed them at desktop width, in page order.
        let figures: Vec<&serde_json::Value> =
            counts["desktop"].as_array().unwrap().iter().filter(|c| c["id"] == *id && c["layout"] == "wide").collect();
        assert_eq!(figures.len(), facets.len().min(8), "{id}: one chart per value of {:?}", spec.facet);
        let filled = |rows: &[usize]| -> usize {
            values.iter().map(|c| rows.iter().filter(|&&r| number(&table[*c][r]).is_some()).count()).sum()
        };
        if let Some(column) = spec.series {
            let series = distinct(&rows.iter().map(|&r| shown(&table[column][r]).to_string()).collect::<Vec<_>>());
            let named = series.iter().filter(|s| !NEUTRAL_SERIES.contains(&s.as_str())).count();
            assert!(named <= 8, "{id}: every series is drawn here, {named} are named");
        }
        match spec.kind {
            ChartKind::GroupedBars | ChartKind::BarsWithIntervals { .. } | ChartKind::StackedBars => {
                let bars: usize = figures.iter().map(|f| n(f, "rects")).sum();
                assert_eq!(bars, filled(&rows), "{id}: one bar (or segment) per value of {job}.csv");
            }
            ChartKind::Heatmap { rows: row_axis } => {
                for (facet, figure) in facets.iter().zip(&figures) {
                    let in_facet: Vec<usize> =
                        rows.iter().copied().filter(|&r| spec.facet.is_none_or(|c| &table[c][r] == facet)).collect();
                    let cells = |column: &str| {
                        distinct(&in_facet.iter().map(|&r| table[column][r].clone()).collect::<Vec<_>>()).len()
                    };
                    assert_eq!(n(figure, "rects"), cells(spec.x.column) * cells(row_axis.column), "{id}: x by rows");
                }
            }
            ChartKind::LinesOverTime | ChartKind::Lines => {
                let figure = figures[0];
                assert!(spec.facet.is_none(), "{id}: lines are drawn whole");
                // One vertex per value (a lone point is a circle).
                assert_eq!(n(figure, "points") + n(figure, "circles"), filled(&rows), "{id}: a vertex per value");
                if let (Some(column), [value]) = (spec.series, spec.values) {
                    // Per series in x order, a line through each run of values a null does not break.
                    let x = &table[spec.x.column];
                    let numeric = rows.iter().all(|&r| number(&x[r]).is_some());
                    let (mut lines, mut lone) = (0, 0);
                    for series in distinct(&rows.iter().map(|&r| table[column][r].clone()).collect::<Vec<_>>()) {
                        let mut own: Vec<usize> =
                            rows.iter().copied().filter(|&r| table[column][r] == series).collect();
                        if numeric {
                            own.sort_by(|&a, &b| number(&x[a]).unwrap().total_cmp(&number(&x[b]).unwrap()));
                        } else {
                            own.sort_by(|&a, &b| x[a].cmp(&x[b]));
                        }
                        let cells: Vec<Option<f64>> = own.iter().map(|&r| number(&table[value.column][r])).collect();
                        for run in cells.split(Option::is_none).filter(|run| !run.is_empty()) {
                            if run.len() == 1 {
                                lone += 1
                            } else {
                                lines += 1
                            }
                        }
                    }
                    assert_eq!(n(figure, "polylines"), lines, "{id}: a line per {column} (and per run between nulls)");
                    assert_eq!(n(figure, "circles"), lone, "{id}: a point per lone value");
                }
            }
            ChartKind::Interval { .. } => {}
        }
        // Read off the axes at both widths.
        for viewport in ["desktop", "phone"] {
            let layout = if viewport == "desktop" { "wide" } else { "narrow" };
            let laid_out: Vec<&serde_json::Value> = geometry[viewport]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["id"] == *id && f["layout"] == layout)
                .collect();
            assert_eq!(laid_out.len(), figures.len(), "{id}: every chart displayed at {viewport} width");
            for figure in laid_out {
                match spec.kind {
                    ChartKind::GroupedBars | ChartKind::BarsWithIntervals { .. } => {
                        assert_bars_read_as(figure, spec, &table)
                    }
                    ChartKind::StackedBars => assert_stacks_read_as(figure, spec, &table),
                    ChartKind::Interval { .. } => assert_points_read_as(figure, spec, &table),
                    ChartKind::Heatmap { .. } | ChartKind::LinesOverTime | ChartKind::Lines => {}
                }
            }
        }
    }
    Some(out)
}

/// The charts an export draws where every run it may draw from needs only
/// `held` tables and none of `left_out` (runs the export leaves out for
/// other reasons: `ab` without two arms, runs grouped by a column the data lacks).
fn charts_drawn_from(held: &[&str], left_out: &[&str]) -> Vec<&'static str> {
    let runs: Vec<&str> = tokscope::jobs::DASHBOARD
        .iter()
        .filter(|run| !left_out.contains(&run.name) && run_needs(run).iter().all(|t| held.contains(t)))
        .map(|run| run.name)
        .collect();
    BUILTIN_CHARTS.iter().filter(|spec| spec.tables.iter().any(|t| runs.contains(t))).map(|spec| spec.id).collect()
}

/// The runs grouped by an attribution column: a generated log names no team, user, tag or provider.
fn attributed_runs() -> Vec<&'static str> {
    let attribution = ["user_id", "team", "project", "environment", "tag", "key_alias", "provider"];
    tokscope::jobs::DASHBOARD
        .iter()
        .filter(|run| run.params.iter().any(|(name, value)| *name == "by" && attribution.contains(value)))
        .map(|run| run.name)
        .collect()
}

#[test]
fn exported_charts_draw_each_value_of_their_job_where_their_axes_read_it_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let latest = export_dataset(
        dir.path(),
        Some("control,candidate"),
        &[
            "profile/gateway.jsonl",
            "profile/profile.jsonl",
            "formats/eval.sample.jsonl",
            "formats/kernel_trace.sample.json",
            "formats/moe_routing.sample.csv",
        ],
    );
    let html = std::fs::read_to_string(latest.join("index.html")).unwrap();
    let size = html.len();
    assert!(size < 2_000_000, "the page is {size} bytes");
    // Every chart but those of replay and mediation (no verdicts, no interventions) and
    // who spends (the generated log names no team, user, tag or provider).
    let held = ["requests", "request_counts", "tokens", "profiles", "evals", "kernels", "moe_routing"];
    let ids = charts_drawn_from(&held, &attributed_runs());
    assert!(ids.len() >= 30, "{ids:?}");
    for spec in BUILTIN_CHARTS.iter().filter(|s| !ids.contains(&s.id)) {
        assert!(!html.contains(&format!(r#"data-chart="{}""#, spec.id)), "{} drawn without its table", spec.id);
    }
    let Some(out) = check_exported_charts(&latest, dir.path(), &ids) else { return };
    let csv = |job: &str| read_csv(&latest.join(format!("{job}.csv")));

    let peaks = csv("kv_cache_peak");
    assert!(distinct(&peaks["engine_id"]).len() >= 2, "one series per engine: {:?}", peaks["engine_id"]);
    assert!(peaks["kv_cache_gib_peak"].iter().any(|g| g.parse::<f64>().is_ok_and(|g| g > 0.0)), "no cache held");
    assert!(csv("gateway_engine")["matched"].iter().any(|m| m != "0"), "engine profiles joined no request");
    // The recall@K curve: the exported table has every K, the chart draws 1, 5, 10, 20, 50, 100.
    let curve = csv("recall_at_k");
    assert_eq!(curve["k"].len(), 100 * distinct(&curve["model"]).len(), "K = 1..100 per model: {:?}", curve["k"]);

    // Intervals: per metric (in the order of ab.csv) in the chart of its kind, a
    // point (white disc + mark) per row, filled when Holm's p < 0.05 (without a
    // test: when the interval excludes the reference), whiskers of 3 strokes, and
    // the reference line.
    let counts: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("counts.json")).unwrap()).unwrap();
    let drawn = |id: &str| -> Vec<serde_json::Value> {
        counts["desktop"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["id"] == id && c["layout"] == "wide")
            .cloned()
            .collect()
    };
    let n = |v: &serde_json::Value, key: &str| v[key].as_u64().unwrap() as usize;
    let ab = csv("ab");
    let metrics = distinct(&ab["metric"]);
    assert_eq!(metrics.len(), 15, "{metrics:?}");
    let mut significant_total = 0;
    let num = |column: &str, r: usize| ab[column][r].parse::<f64>().ok();
    let interval_charts = BUILTIN_CHARTS.iter().filter(|s| matches!(s.kind, ChartKind::Interval { .. }));
    for spec in interval_charts.filter(|s| s.tables.contains(&"ab")) {
        let id = spec.id;
        // The chart's metrics with a value to draw.
        let charted: Vec<&String> = metrics
            .iter()
            .filter(|m| spec.only.unwrap().values.contains(&m.as_str()))
            .filter(|m| (0..ab["metric"].len()).any(|r| &&ab["metric"][r] == m && num("diff", r).is_some()))
            .collect();
        let figures = drawn(id);
        assert_eq!(figures.len(), charted.len(), "{id}: one chart per metric");
        for (metric, figure) in charted.into_iter().zip(&figures) {
            let rows: Vec<usize> = (0..ab["metric"].len()).filter(|&r| &ab["metric"][r] == metric).collect();
            let reference = if rows.iter().all(|&r| ab["effect"][r] == "ratio") { 1.0 } else { 0.0 };
            let points = rows.iter().filter(|&&r| num("diff", r).is_some()).count();
            let whiskers = rows
                .iter()
                .filter(|&&r| num("diff", r).is_some() && num("ci_low", r).is_some() && num("ci_high", r).is_some());
            let significant = rows.iter().filter(|&&r| {
                num("diff", r).is_some()
                    && match num("p_value_holm", r) {
                        Some(p) => p < 0.05,
                        None => {
                            num("ci_low", r).is_some_and(|lo| lo > reference)
                                || num("ci_high", r).is_some_and(|hi| hi < reference)
                        }
                    }
            });
            let significant = significant.count();
            significant_total += significant;
            assert_eq!(n(figure, "circles"), 2 * points, "{metric}: a point per row");
            assert_eq!(n(figure, "filled_circles"), significant, "{metric}: filled = significant");
            assert_eq!(n(figure, "polylines"), 1 + 3 * whiskers.count(), "{metric}: whiskers and the reference line");
        }
    }
    assert!(significant_total > 0, "the candidate's truncation above 16K must show as significant");
    // The arms were drawn 50/50, as the job's default split says: no warning.
    assert!(ab["sample_ratio_mismatch"].iter().all(|flag| flag == "false"), "generated arms fail the split check");
    assert!(!html.contains("Sample ratio mismatch"));
    std::io::stdout().write_all(&out.stdout).unwrap();
}

/// Mediation rows (the `interventions` table's JSONL): per prompt a clean run, and per
/// layer 0..3 two noise draws of mlp.gate by each path plus the layer skipped by each
/// path, the effects growing with depth and spread across prompts.
fn changed_layer_rows() -> Vec<String> {
    let mut rows = Vec::new();
    for (p, clean) in [("p1", 60.0), ("p2", 80.0), ("p3", 70.0)] {
        rows.push(format!(r#"{{"prompt_id":"{p}","intervention":"clean","metric":"sacrebleu","value":{clean}}}"#));
        let spread = clean / 70.0;
        for layer in 0..4 {
            let depth = f64::from(4 - layer);
            for draw in 0..2 {
                let (direct, total) = (clean - 0.5 * depth * spread, clean - (2.0 * depth + f64::from(draw)) * spread);
                for (path, y) in [("direct", direct), ("total", total)] {
                    rows.push(format!(
                        r#"{{"prompt_id":"{p}","intervention":"weight-noise","weight":"mlp.gate","sigma":0.01,"metric":"sacrebleu","layer":{layer},"sample":{draw},"path":"{path}","value":{y}}}"#
                    ));
                }
            }
            // Skipping a layer: its direct path carries a small loss with either sign.
            let skip_direct = clean + (f64::from(layer) - 1.5) * spread;
            for (path, y) in [("direct", skip_direct), ("total", clean - 10.0 * depth)] {
                rows.push(format!(
                    r#"{{"prompt_id":"{p}","intervention":"skip-layer","metric":"sacrebleu","layer":{layer},"path":"{path}","value":{y}}}"#
                ));
            }
        }
    }
    rows
}

#[test]
fn exported_changed_layers_draw_two_bars_with_whiskers_per_layer_at_their_values_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let rows = common::write_file(dir.path(), "rows.jsonl", changed_layer_rows().join("\n"));
    let data = dir.path().join("ds");
    let ds = data.to_str().unwrap();
    common::tokscope(&["mediate", "--data", ds, "--import", &rows]);
    let site = dir.path().join("site");
    common::tokscope(&["export", "--data", ds, "--to", site.to_str().unwrap(), "--date", "2024-06-03"]);
    let latest = site.join("latest");
    let page = latest.join("index.html");
    let html = std::fs::read_to_string(&page).unwrap();
    let table = read_csv(&latest.join("mediation_layers.csv"));
    let studies = distinct(&table["study"]);
    assert_eq!(studies, ["sacrebleu, skip-layer", "sacrebleu, weight-noise mlp.gate sigma 0.01"]);
    // 4 layers x (DE, IE) per study, each over its (prompt, draw) cells.
    assert_eq!(table["layer"].len(), 2 * 8);
    let cells: Vec<&str> = table["n"].iter().map(String::as_str).collect();
    assert_eq!(cells, [vec!["3"; 8], vec!["6"; 8]].concat());
    assert!(html.contains(r#"data-chart="mediation_layers""#));

    if !common::chromium_available() {
        return;
    }
    let counts_path = dir.path().join("counts.json");
    let geometry_path = dir.path().join("geometry.json");
    let out = common::browser_check(
        &page,
        &["mediation_layers"],
        dir.path(),
        &[format!("--counts={}", counts_path.display()), format!("--geometry={}", geometry_path.display())],
    );
    assert!(
        out.status.success(),
        "browser check failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let counts: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&counts_path).unwrap()).unwrap();
    let n = |v: &serde_json::Value, key: &str| v[key].as_u64().unwrap() as usize;
    for viewport in ["desktop", "phone"] {
        let layout = if viewport == "desktop" { "wide" } else { "narrow" };
        let figures: Vec<&serde_json::Value> = counts[viewport]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["id"] == "mediation_layers" && c["layout"] == layout)
            .collect();
        assert_eq!(figures.len(), studies.len(), "{viewport}: one chart per study");
        for (study, figure) in studies.iter().zip(figures) {
            let rows: Vec<usize> = (0..table["study"].len()).filter(|&r| &table["study"][r] == study).collect();
            let number = |column: &str, r: usize| table[column][r].parse::<f64>().ok();
            let bars = rows.iter().filter(|&&r| number("mean", r).is_some()).count();
            let whiskers =
                rows.iter().filter(|&&r| ["mean", "ci_lo", "ci_hi"].iter().all(|c| number(c, r).is_some())).count();
            // Per layer a DE and an IE bar, each with a 3-stroke whisker for its interval.
            assert_eq!(bars, rows.len(), "{study}: every row has a mean");
            assert_eq!(n(figure, "rects"), bars, "{viewport} {study}: a bar per row");
            assert_eq!(n(figure, "polylines"), 3 * whiskers, "{viewport} {study}: a whisker per interval");
            assert_eq!(n(figure, "circles"), 0, "{viewport} {study}: no points");
        }
    }
    // Read off their axes: each bar from 0 to its mean, its whisker from ci_lo to ci_hi.
    let geometry: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&geometry_path).unwrap()).unwrap();
    let spec = BUILTIN_CHARTS.iter().find(|s| s.id == "mediation_layers").unwrap();
    for viewport in ["desktop", "phone"] {
        let figures: Vec<&serde_json::Value> =
            geometry[viewport].as_array().unwrap().iter().filter(|f| f["id"] == "mediation_layers").collect();
        assert_eq!(figures.len(), studies.len(), "{viewport}: one displayed chart per study");
        for figure in figures {
            assert_bars_read_as(figure, spec, &table);
        }
    }
    std::io::stdout().write_all(&out.stdout).unwrap();
}

#[test]
fn studies_whose_tables_are_absent_are_left_out_of_the_export() {
    // One arm only, no attribution, and no profiles, kernels, routing, evaluations,
    // verdicts or interventions: requests and their tokens.
    let dir = tempfile::tempdir().unwrap();
    let latest = export_dataset(dir.path(), Some("control"), &[]);
    let html = std::fs::read_to_string(latest.join("index.html")).unwrap();
    let mut left_out = attributed_runs();
    left_out.push("ab");
    let held = ["requests", "request_counts", "tokens"];
    let drawn = charts_drawn_from(&held, &left_out);
    for spec in BUILTIN_CHARTS {
        let shown = html.contains(&format!(r#"data-chart="{}""#, spec.id));
        assert_eq!(shown, drawn.contains(&spec.id), "{}: drawn {shown}", spec.id);
    }
    for run in tokscope::jobs::DASHBOARD {
        let present = !left_out.contains(&run.name) && run_needs(run).iter().all(|t| held.contains(t));
        // `confidence` and the jitter and EOS-logprob runs read tokens; all hold rows here.
        let exported = latest.join(format!("{}.csv", run.name)).exists();
        assert_eq!(exported, present, "{}: exported {exported}", run.name);
    }
    // A section with none of its charts drawn says which tables it lacks, once.
    let mut sections: Vec<&str> = BUILTIN_CHARTS.iter().map(|s| s.section).collect();
    sections.dedup();
    for section in sections {
        let specs: Vec<&ChartSpec> = BUILTIN_CHARTS.iter().filter(|s| s.section == section).collect();
        if specs.iter().any(|s| drawn.contains(&s.id)) {
            continue;
        }
        let mut tables: Vec<String> = specs.iter().flat_map(|s| s.tables.iter().map(|t| format!("`{t}`"))).collect();
        tables.sort();
        tables.dedup();
        let note = format!("Not in this dataset (no {} table).", tables.join(" or "));
        assert!(html.contains(&note), "{section}: missing note: {note}");
    }
    for note in [
        "Not in this dataset (no `gateway_engine` table).",
        "Not in this dataset (no `ab` table).",
        "Not in this dataset (no `spend_by_provider` or `spend_by_tag` or `spend_by_team` or `spend_by_user` or \
         `spend_daily_by_team` table).",
    ] {
        assert!(html.contains(note), "missing note: {note}");
    }
    // The load test needs requests only.
    for id in ["throughput_qps", "concurrency_peak", "load_summary"] {
        assert!(html.contains(&format!(r#"data-chart="{id}""#)), "{id} missing");
    }
}

/// A canonical log of `n` requests over 3 days with team (11 teams, two
/// requests in 13 without), user id (12 users), tags and provider, in models the
/// example prices know, with raw output (one in 8 without its EOS marker: truncated).
fn attributed_log(n: u64) -> String {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |m: u64| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % m
    };
    let tag_sets: [&[&str]; 4] = [&[], &["app:chat"], &["app:search", "env:prod"], &["env:prod"]];
    let mut out = String::new();
    for i in 0..n {
        let model = ["gpt-4o-2024-08-06", "llama-3.1-8b-instruct", "gpt-4o-mini"][next(3) as usize];
        let finish = ["stop", "length", "stop"][next(3) as usize];
        let tags = tag_sets[next(4) as usize];
        let provider = ["openai", "azure", "vllm"][next(3) as usize];
        // Teams spend unevenly: their prompts are 1 to 3 times as long.
        let team = next(13);
        let mut rec = serde_json::json!({
            "ts": format!("2024-06-0{}T{:02}:{:02}:00Z", 1 + next(3), next(24), next(60)),
            "request_id": format!("a{i}"),
            "model": model,
            "prompt_tokens": 100 + next(4000) * (1 + team % 3),
            "completion_tokens": 1 + next(800),
            "max_tokens": 800,
            "ttft_ms": 20 + next(900),
            "latency_ms": 800 + next(4000),
            "finish_reason": finish,
            // One in 8 stops without its EOS marker: an implicit truncation.
            "model_output": if next(8) == 0 { "the answer is" } else { "the answer is<|eot_id|>" },
            "user_id": format!("user-{}", next(12)),
            "tags": tags,
            "provider": provider,
        });
        if team < 11 {
            rec["team"] = serde_json::json!(format!("team-{}", char::from(b'a' + team as u8)));
        }
        out.push_str(&rec.to_string());
        out.push('\n');
    }
    out
}

#[test]
fn exported_who_spends_charts_draw_each_group_s_cost_where_their_axes_read_it_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let log = common::write_file(dir.path(), "attributed.jsonl", attributed_log(3000));
    let data = dir.path().join("ds");
    common::ingest(&[log.as_str()], &data, &["--bins", "0,1K,4K"]);
    let latest = common::export_priced(&data, &dir.path().join("site"), "2024-06-03");
    let csv = |name: &str| read_csv(&latest.join(format!("{name}.csv")));
    let who_spends: Vec<&str> = BUILTIN_CHARTS.iter().filter(|s| s.section == "Who spends").map(|s| s.id).collect();
    assert_eq!(who_spends.len(), 5, "{who_spends:?}");
    // Top 8 teams, the other 3 as (other), and the requests without a team.
    let teams = csv("spend_by_team");
    let mut names = teams["team"].clone();
    names.sort();
    assert_eq!(names.len(), 10, "{names:?}");
    assert_eq!(&names[..2], ["", "(other)"], "a null team and (other)");
    let requests: u64 = teams["requests"].iter().map(|r| r.parse::<u64>().unwrap()).sum();
    assert_eq!(requests, 3000, "top=8 keeps every request");
    // The cost per day stacks 10 series on each of 3 days.
    let daily = csv("spend_daily_by_team");
    assert_eq!(distinct(&daily["date"]).len(), 3);
    assert_eq!(distinct(&daily["team"]).len(), 10);
    assert!(daily["cost_usd"].iter().all(|c| number(c).is_some()), "every team priced on every day");
    assert_eq!(distinct(&csv("spend_by_provider")["provider"]).len(), 3);
    // The per-team table: each team's row with the spend job's columns.
    let html = std::fs::read_to_string(latest.join("index.html")).unwrap();
    let section =
        &html[html.find(r#"data-chart="spend_by_team""#).unwrap()..html.find(r#"data-chart="spend_by_user""#).unwrap()];
    for column in [
        "team",
        "cost_usd",
        "requests",
        "tokens",
        "cost_per_1k_tokens",
        "eos_compliance_rate",
        "implicit_truncation_rate",
        "latency_p95_ms",
    ] {
        assert!(section.contains(&format!("<th>{column}")), "the team table has no {column}");
    }
    assert!(section.contains("Data: 10 rows from <code>spend_by_team</code>"), "a row per team");
    // --jobs takes a run's name as it takes a job's.
    let only = dir.path().join("only");
    let pricing = common::repo().join("config/pricing.example.toml");
    common::tokscope(&[
        "export",
        "--data",
        data.to_str().unwrap(),
        "--to",
        only.to_str().unwrap(),
        "--pricing",
        pricing.to_str().unwrap(),
        "--date",
        "2024-06-03",
        "--jobs",
        "spend_by_team,eos",
    ]);
    let alone = read_csv(&only.join("latest/spend_by_team.csv"));
    // (Floats summed in another order may differ in the last digit.)
    assert_eq!(
        (&alone["team"], &alone["requests"]),
        (&teams["team"], &teams["requests"]),
        "the run alone, the same groups"
    );
    assert!(only.join("latest/eos.csv").is_file() && !only.join("latest/spend_by_user.csv").exists());
    let Some(out) = check_exported_charts(&latest, dir.path(), &who_spends) else { return };
    std::io::stdout().write_all(&out.stdout).unwrap();
}

/// The job registry and the chart specs agree: every chart draws from runs
/// the export makes (a chart naming another would never be drawn). Runs
/// without a chart (`confidence`, ...) are exported as files only.
#[test]
fn every_chart_draws_from_jobs_the_export_runs() {
    let on_page: Vec<&str> = tokscope::jobs::DASHBOARD.iter().map(|r| r.name).collect();
    for spec in BUILTIN_CHARTS {
        for table in spec.tables {
            assert!(on_page.contains(table), "chart {} draws from {table}, not a run of the export", spec.id);
        }
    }
}
