//! The dashboard page (src/export/dashboard), read as a user and a reviewer would: which charts are there,
//! what the notes say, how numbers read, that user data is escaped, and its size.

mod dashboard_support;
use dashboard_support as support;

use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use tokscope::export::dashboard::{
    render, Axis, ChartKind, ChartSpec, DashboardInput, Unit, ValueColumn, BUILTIN_CHARTS,
};

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

#[test]
fn each_chart_has_a_wide_and_a_narrow_svg_with_a_viewbox() {
    let html = render(&support::realistic(&support::model_names(3), 30)).unwrap();
    let wide = html.matches(r#"data-layout="wide" viewBox="0 0 640 "#).count();
    let narrow = html.matches(r#"data-layout="narrow" viewBox="0 0 360 "#).count();
    assert_eq!(wide, narrow);
    // 15 specs; replay verdicts are per model (3 figures), mediation per metric (2).
    assert_eq!(wide, 15 + 2 + 1);
    assert!(!html.contains(r#"<svg width="#), "plotters' fixed-size root must be replaced");
}

#[test]
fn absent_tables_become_not_in_this_dataset_notes() {
    let html = render(&empty_input().with_table("report", vec![one_row_report("m")])).unwrap();
    assert!(html.contains("Not in this dataset (no `daily` table)."));
    assert!(html.contains("Not in this dataset (no `kv_cache` table)."));
    assert!(html.contains("Not in this dataset (no `mediation_heatmap` table)."));
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
fn charts_draw_at_most_eight_series_and_say_so() {
    let html = render(&support::realistic(&support::model_names(11), 5)).unwrap();
    assert!(html.contains("Showing the 8 series with the most requests; 3 more are in the table only."));
    assert!(html.contains("Data: 99 rows from <code>report</code>"), "the table keeps every model");
}

#[test]
fn a_new_table_gets_its_chart_from_one_spec_entry() {
    const HEAD_WASTE: ChartSpec = ChartSpec {
        id: "head_waste",
        section: "Attention heads",
        tables: &["head_waste"],
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
    let html = render(&empty_input().with_chart(HEAD_WASTE).with_table("head_waste", vec![head_waste])).unwrap();
    assert!(html.contains(r#"data-chart="head_waste""#));
    assert!(html.contains("<td>40.0%"));
    assert!(html.contains("Wasted attention (%)"));
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
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("large.html"), &html).unwrap();
    println!("50 models x 9 bins x 90 days: {} bytes", html.len());
    assert!(html.len() < 2_000_000, "page is {} bytes", html.len());
}
