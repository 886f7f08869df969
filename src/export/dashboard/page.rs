//! The page: groups drawn charts into sections, adds the headline numbers, and
//! renders `templates/index.html` (embedded) with minijinja, which escapes every
//! value except the SVG bodies plotters drew.

use std::collections::{BTreeSet, HashMap};

use minijinja::value::Serde;
use minijinja::{Environment, Value};
use serde::Serialize;

use super::chart::{self, Context, DataTable, Drawn, Figure, LegendEntry, Svg};
use super::frame::Frame;
use super::input::DashboardInput;
use super::spec::{ChartSpec, Unit};
use crate::error::Result;

const TEMPLATE: &str = include_str!("templates/index.html");

#[derive(Serialize)]
struct PageView<'a> {
    title: &'a str,
    dataset: &'a str,
    date: &'a str,
    generated_at: &'a str,
    kpis: Vec<Kpi>,
    sections: Vec<SectionView>,
}

#[derive(Serialize)]
struct Kpi {
    label: &'static str,
    value: String,
    detail: String,
}

#[derive(Serialize)]
struct SectionView {
    anchor: String,
    title: &'static str,
    /// Set when none of the section's tables is in the dataset.
    absent: Option<String>,
    charts: Vec<ChartView>,
}

#[derive(Serialize)]
struct ChartView {
    id: &'static str,
    title: &'static str,
    caption: &'static str,
    table: String,
    facet_column: Option<&'static str>,
    /// Why nothing is drawn (table absent or empty).
    note: Option<String>,
    notes: Vec<String>,
    /// Raised by the rows (a failed sample-ratio check): shown first, as an alert.
    warnings: Vec<String>,
    figures: Vec<FigureView>,
}

#[derive(Serialize)]
struct FigureView {
    dom_id: String,
    facet: Option<String>,
    wide: SvgView,
    narrow: SvgView,
    legend: Vec<LegendView>,
    notes: Vec<String>,
    table: TableView,
}

#[derive(Serialize)]
struct SvgView {
    width: u32,
    height: u32,
    /// Drawn by plotters, which escapes its text; passed through unescaped.
    body: Value,
}

#[derive(Serialize)]
struct LegendView {
    label: String,
    colour: String,
    opacity: f64,
    mark: &'static str,
}

#[derive(Serialize)]
struct TableView {
    headers: Vec<HeaderView>,
    first_numeric: usize,
    rows: Vec<Vec<String>>,
}

#[derive(Serialize)]
struct HeaderView {
    name: String,
    unit: String,
}

/// Renders the whole page.
pub(crate) fn render(input: &DashboardInput) -> Result<String> {
    for spec in &input.charts {
        check_spec(spec)?;
    }
    let ctx = Context { rank: series_rank(input), trend_days: input.trend_days };

    let mut sections: Vec<SectionView> = Vec::new();
    let mut figure_count = 0usize;
    for spec in &input.charts {
        let chart = chart_view(spec, input, &ctx, &mut figure_count)?;
        match sections.last_mut() {
            Some(section) if section.title == spec.section => section.charts.push(chart),
            _ => sections.push(SectionView {
                anchor: anchor(spec.section, sections.len()),
                title: spec.section,
                absent: None,
                charts: vec![chart],
            }),
        }
    }
    for section in &mut sections {
        if section.charts.iter().all(|c| c.table.is_empty()) {
            let tables: BTreeSet<String> = input
                .charts
                .iter()
                .filter(|s| s.section == section.title)
                .flat_map(|s| s.tables.iter().map(|t| format!("`{t}`")))
                .collect();
            let tables: Vec<String> = tables.into_iter().collect();
            section.absent = Some(format!("Not in this dataset (no {} table).", tables.join(" or ")));
        }
    }

    let page = PageView {
        title: &input.title,
        dataset: &input.dataset,
        date: &input.date,
        generated_at: &input.generated_at,
        kpis: kpis(input),
        sections,
    };
    let mut env = Environment::new();
    // The name ends in .html: minijinja escapes every `{{ }}` for HTML.
    env.add_template("index.html", TEMPLATE).map_err(template_error)?;
    let template = env.get_template("index.html").map_err(template_error)?;
    template.render(Value::from(Serde(&page))).map_err(template_error)
}

fn check_spec(spec: &ChartSpec) -> Result<()> {
    let plain = !spec.id.is_empty() && spec.id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    let problem = if !plain {
        Some("id must be letters, digits and `_`")
    } else if spec.values.is_empty() {
        Some("needs at least one value column")
    } else if spec.tables.is_empty() {
        Some("names no table")
    } else {
        None
    };
    match problem {
        Some(message) => Err(internal_err!("dashboard chart `{}`: {message}", spec.id)),
        None => Ok(()),
    }
}

fn chart_view(spec: &ChartSpec, input: &DashboardInput, ctx: &Context, figure_count: &mut usize) -> Result<ChartView> {
    let mut view = ChartView {
        id: spec.id,
        title: spec.title,
        caption: spec.caption,
        table: String::new(),
        facet_column: spec.facet,
        note: None,
        notes: Vec::new(),
        warnings: Vec::new(),
        figures: Vec::new(),
    };
    let Some((table, batches)) = spec.tables.iter().find_map(|t| input.tables.get(*t).map(|b| (*t, b))) else {
        let names: Vec<String> = spec.tables.iter().map(|t| format!("`{t}`")).collect();
        view.note = Some(format!("Not in this dataset (no {} table).", names.join(" or ")));
        return Ok(view);
    };
    view.table = table.to_string();
    match chart::draw(spec, table, batches, ctx)? {
        Drawn::Empty(reason) => view.note = Some(reason),
        Drawn::Figures { figures, notes, warnings } => {
            view.notes = notes;
            view.warnings = warnings;
            view.figures = figures
                .into_iter()
                .map(|figure| {
                    *figure_count += 1;
                    figure_view(spec, figure, *figure_count)
                })
                .collect();
        }
    }
    Ok(view)
}

fn figure_view(spec: &ChartSpec, figure: Figure, number: usize) -> FigureView {
    let svg = |svg: Svg| SvgView { width: svg.width, height: svg.height, body: Value::from_safe_string(svg.body) };
    let legend = |entry: LegendEntry| LegendView {
        label: entry.label,
        colour: entry.colour,
        opacity: entry.opacity,
        mark: entry.mark,
    };
    let table = |table: DataTable| TableView {
        headers: table.headers.into_iter().map(|(name, unit)| HeaderView { name, unit }).collect(),
        first_numeric: table.first_numeric,
        rows: table.rows,
    };
    FigureView {
        dom_id: format!("chart-{}-{number}", spec.id),
        facet: figure.facet,
        wide: svg(figure.wide),
        narrow: svg(figure.narrow),
        legend: figure.legend.into_iter().map(legend).collect(),
        notes: figure.notes,
        table: table(figure.table),
    }
}

fn anchor(section: &str, index: usize) -> String {
    let slug: String =
        section.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    let slug = slug.split('-').filter(|p| !p.is_empty()).collect::<Vec<_>>().join("-");
    if slug.is_empty() {
        format!("section-{index}")
    } else {
        slug
    }
}

/// Series values (models) ranked by total requests, busiest first, so a model
/// keeps its colour on every chart.
fn series_rank(input: &DashboardInput) -> HashMap<String, usize> {
    for table in ["report", "eos", "cost", "daily", "kv_cache"] {
        let Some(batches) = input.tables.get(table) else { continue };
        let Ok(frame) = Frame::read(table, batches, &["model", "requests"]) else { continue };
        let mut totals: HashMap<String, f64> = HashMap::new();
        for (model, requests) in frame.column("model").iter().zip(frame.column("requests")) {
            *totals.entry(model.label()).or_default() += requests.num().unwrap_or(0.0);
        }
        let mut models: Vec<(String, f64)> = totals.into_iter().collect();
        models.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        return models.into_iter().enumerate().map(|(rank, (model, _))| (model, rank)).collect();
    }
    HashMap::new()
}

/// Headline numbers over all models and bins, from `report` (or `eos` + `cost`).
fn kpis(input: &DashboardInput) -> Vec<Kpi> {
    let sum = |tables: &[&str], column: &str| -> Option<(f64, usize)> {
        let (table, batches) = tables.iter().find_map(|t| input.tables.get(*t).map(|b| (*t, b)))?;
        let frame = Frame::read(table, batches, &[column]).ok()?;
        let values: Vec<f64> = frame.column(column).iter().filter_map(|c| c.num()).collect();
        Some((values.iter().sum(), values.len()))
    };
    let mut kpis = Vec::new();
    let requests = sum(&["report", "eos"], "requests");
    if let Some((requests, _)) = requests {
        kpis.push(Kpi { label: "Requests", value: Unit::Count("").cell(requests), detail: String::new() });
    }
    if let Some((cost, costed)) = sum(&["report", "cost"], "cost_usd") {
        let uncosted = sum(&["report", "cost"], "uncosted_requests").map(|(n, _)| n).unwrap_or(0.0);
        let value = if costed == 0 { "no cost".to_string() } else { format!("${}", Unit::Usd.cell(cost)) };
        let detail = if uncosted > 0.0 {
            format!("{} requests without a cost", Unit::Count("").cell(uncosted))
        } else {
            String::new()
        };
        kpis.push(Kpi { label: "Cost", value, detail });
    }
    if let (Some((eos, _)), Some((truncated, _))) =
        (sum(&["report", "eos"], "eos"), sum(&["report", "eos"], "implicit_truncation"))
    {
        if eos + truncated > 0.0 {
            let detail = "eos / (eos + implicit truncation)".to_string();
            kpis.push(Kpi { label: "EOS compliance", value: Unit::Rate.cell(eos / (eos + truncated)), detail });
        }
        if let Some((requests, _)) = requests.filter(|(n, _)| *n > 0.0) {
            let detail = format!("{} requests", Unit::Count("").cell(truncated));
            kpis.push(Kpi { label: "Implicit truncation", value: Unit::Rate.cell(truncated / requests), detail });
        }
    }
    kpis
}

fn template_error(e: minijinja::Error) -> crate::Error {
    internal_err!("dashboard template: {e}")
}
