//! Turns one `ChartSpec` and its table into figures: an SVG for wide screens, one
//! for narrow screens, a legend and the data table the chart was drawn from. The
//! kinds share the reading, faceting, series choice and table code here.

mod axis;
mod bars;
mod canvas;
mod heatmap;
mod interval;
mod lines;
mod palette;
mod stacked;

use std::collections::HashMap;

use arrow::array::RecordBatch;

use crate::error::Result;
use crate::export::dashboard::frame::{Cell, Frame};
use crate::export::dashboard::spec::{ChartKind, ChartSpec, Flag, Unit};

pub(crate) use palette::hex;

/// At most this many series per chart (the palette's size) and facets per spec.
pub(crate) const MAX_SERIES: usize = palette::SERIES.len();
pub(crate) const MAX_FACETS: usize = 8;

/// An SVG document body drawn by plotters (its root element stripped: the page
/// template writes the root with the chart's id and a `viewBox`).
#[derive(Clone, Debug)]
pub(crate) struct Svg {
    pub width: u32,
    pub height: u32,
    pub body: String,
}

/// One legend line: a swatch and its label.
#[derive(Clone, Debug)]
pub(crate) struct LegendEntry {
    pub label: String,
    pub colour: String,
    pub opacity: f64,
    /// `bar`, `line`, `dash`, `point`, `hollow`, `whisker` or `ramp`.
    pub mark: &'static str,
}

/// The rows a figure was drawn from, formatted for reading.
#[derive(Clone, Debug)]
pub(crate) struct DataTable {
    pub headers: Vec<(String, String)>,
    /// Index of the first numeric (right-aligned) column.
    pub first_numeric: usize,
    pub rows: Vec<Vec<String>>,
}

/// One drawn chart (one per facet value).
#[derive(Clone, Debug)]
pub(crate) struct Figure {
    pub facet: Option<String>,
    pub wide: Svg,
    pub narrow: Svg,
    pub legend: Vec<LegendEntry>,
    pub notes: Vec<String>,
    pub table: DataTable,
}

/// What a spec produced from a present table.
pub(crate) enum Drawn {
    Figures {
        figures: Vec<Figure>,
        notes: Vec<String>,
        /// Raised by the spec's [`Flag`]: shown above the chart, apart from notes.
        warnings: Vec<String>,
    },
    /// The table is there but has nothing to draw; the reason.
    Empty(String),
}

/// The two layouts every chart is drawn in; CSS shows one of them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Layout {
    /// Laptop and up: 640 px wide viewBox, categories along x.
    Wide,
    /// Phone: 360 px wide viewBox, categories down the y axis.
    Narrow,
}

impl Layout {
    pub(crate) fn width(self) -> u32 {
        match self {
            Layout::Wide => 640,
            Layout::Narrow => 360,
        }
    }
}

/// Page-wide drawing settings: one colour per series value across all charts.
pub(crate) struct Context {
    /// Series value -> rank (0 = most requests); decides colour and order.
    pub rank: HashMap<String, usize>,
    pub trend_days: u32,
}

/// Pieces a chart kind returns for one facet.
pub(crate) struct Parts {
    pub wide: Svg,
    pub narrow: Svg,
    pub legend: Vec<LegendEntry>,
    pub notes: Vec<String>,
}

/// Series values to draw (at most [`MAX_SERIES`] named ones, by rank, then
/// `(other)` and `(null)` where present) and their colours.
pub(crate) struct SeriesChoice {
    /// `None` when the spec has no series column: one unnamed series.
    pub labels: Vec<Option<String>>,
    pub colours: Vec<plotters::style::RGBColor>,
    pub omitted: usize,
}

impl SeriesChoice {
    pub(crate) fn index_of(&self, label: &Option<String>) -> Option<usize> {
        self.labels.iter().position(|l| l == label)
    }
}

impl Context {
    fn series(&self, spec: &ChartSpec, frame: &Frame, rows: &[usize]) -> SeriesChoice {
        let Some(column) = spec.series else {
            return SeriesChoice { labels: vec![None], colours: vec![palette::SERIES[0]], omitted: 0 };
        };
        let cells = frame.column(column);
        let mut labels: Vec<String> = Vec::new();
        for &r in rows {
            let label = cells[r].label();
            if !labels.contains(&label) {
                labels.push(label);
            }
        }
        let first_seen: HashMap<String, usize> = labels.iter().enumerate().map(|(i, l)| (l.clone(), i)).collect();
        labels.sort_by_key(|l| (self.rank.get(l).copied().unwrap_or(usize::MAX), first_seen[l]));
        // `(other)` and `(null)` take no place among the named series: they come last, in greys.
        let neutral: Vec<(String, plotters::style::RGBColor)> = palette::NEUTRAL_SERIES
            .iter()
            .filter(|(label, _)| labels.iter().any(|l| l == label))
            .map(|(label, colour)| (label.to_string(), *colour))
            .collect();
        labels.retain(|l| neutral.iter().all(|(n, _)| n != l));
        let omitted = labels.len().saturating_sub(MAX_SERIES);
        labels.truncate(MAX_SERIES);
        // Page-wide colours while every drawn series has one; else colours by position.
        let global: Option<Vec<usize>> =
            labels.iter().map(|l| self.rank.get(l).copied().filter(|r| *r < MAX_SERIES)).collect();
        let mut colours: Vec<plotters::style::RGBColor> = match global {
            Some(ranks) => ranks.into_iter().map(|r| palette::SERIES[r]).collect(),
            None => (0..labels.len()).map(|i| palette::SERIES[i]).collect(),
        };
        colours.extend(neutral.iter().map(|(_, colour)| *colour));
        labels.extend(neutral.into_iter().map(|(label, _)| label));
        SeriesChoice { labels: labels.into_iter().map(Some).collect(), colours, omitted }
    }
}

/// Draws `spec` from `batches` (the table named `table`).
pub(crate) fn draw(spec: &ChartSpec, table: &str, batches: &[RecordBatch], ctx: &Context) -> Result<Drawn> {
    // Table-only columns are extras: a table without one just shows less.
    let present = |column: &str| batches.first().is_none_or(|b| b.schema().index_of(column).is_ok());
    let extras: Vec<&'static str> = spec.table_only.iter().map(|c| c.column).filter(|c| present(c)).collect();
    let flag = spec.flag.filter(|f| present(f.column));
    let mut names = needed_columns(spec);
    names.extend(&extras);
    names.extend(flag.map(|f| f.column));
    let frame = Frame::read(table, batches, &names)?;
    let mut rows: Vec<usize> = (0..frame.rows()).collect();
    if let Some(only) = spec.only {
        let cells = frame.column(only.column);
        rows.retain(|&r| only.values.contains(&cells[r].label().as_str()));
    }
    if spec.kind == ChartKind::LinesOverTime || (spec.kind == ChartKind::StackedBars && spec.x.unit == Unit::Date) {
        // The newest `trend_days` UTC days, for dates and timestamps alike.
        let day_of = |cell: &Cell| cell.seconds().map(|s| (s / 86_400.0).floor() as i64);
        let x = frame.column(spec.x.column);
        if let Some(last) = x.iter().filter_map(day_of).max() {
            let first = last - i64::from(ctx.trend_days.max(1)) + 1;
            rows.retain(|&r| day_of(&x[r]).is_some_and(|d| d >= first));
        }
    }
    if rows.is_empty() {
        return Ok(Drawn::Empty(format!("Table `{table}` has no rows.")));
    }
    let has_value = rows.iter().any(|&r| spec.values.iter().any(|v| frame.column(v.column)[r].num().is_some()));
    if !has_value {
        let columns: Vec<&str> = spec.values.iter().map(|v| v.column).collect();
        return Ok(Drawn::Empty(format!("Table `{table}` has no values in {}.", columns.join(", "))));
    }

    let warnings = flag.map(|f| flagged(&f, spec, &frame, &rows)).into_iter().flatten().collect();
    let mut notes = Vec::new();
    let mut facets: Vec<(Option<String>, Vec<usize>)> = Vec::new();
    match spec.facet {
        None => facets.push((None, rows)),
        Some(column) => {
            let cells = frame.column(column);
            for r in rows {
                let label = cells[r].label();
                match facets.iter_mut().find(|(f, _)| f.as_deref() == Some(label.as_str())) {
                    Some((_, facet_rows)) => facet_rows.push(r),
                    None => facets.push((Some(label), vec![r])),
                }
            }
            // A facet without a value to draw (an A/B metric the data cannot give) is named, not drawn blank.
            let empty: Vec<String> = facets
                .iter()
                .filter(|(_, rows)| {
                    !rows.iter().any(|&r| spec.values.iter().any(|v| frame.column(v.column)[r].num().is_some()))
                })
                .filter_map(|(label, _)| label.clone())
                .collect();
            if !empty.is_empty() {
                notes.push(format!("No values to draw for `{column}` = {}.", empty.join(", ")));
                facets.retain(|(label, _)| label.as_ref().is_none_or(|l| !empty.contains(l)));
            }
            facets
                .sort_by_key(|(label, _)| label.as_ref().and_then(|l| ctx.rank.get(l).copied()).unwrap_or(usize::MAX));
            if facets.len() > MAX_FACETS {
                notes.push(format!(
                    "Drawn for the first {MAX_FACETS} values of `{column}` (busiest first); {} more are not drawn.",
                    facets.len() - MAX_FACETS
                ));
                facets.truncate(MAX_FACETS);
            }
        }
    }

    let mut figures = Vec::new();
    for (facet, rows) in facets {
        let series = ctx.series(spec, &frame, &rows);
        let drawn = match spec.kind {
            ChartKind::GroupedBars => bars::draw(spec, &frame, &rows, &series, None),
            ChartKind::BarsWithIntervals { low, high } => bars::draw(spec, &frame, &rows, &series, Some((low, high))),
            ChartKind::StackedBars => stacked::draw(spec, &frame, &rows, &series),
            ChartKind::LinesOverTime | ChartKind::Lines => lines::draw(spec, &frame, &rows, &series),
            ChartKind::Heatmap { rows: row_axis } => heatmap::draw(spec, row_axis, &frame, &rows),
            ChartKind::Interval { low, high, significant, effect } => {
                interval::draw(spec, (low, high, significant, effect), &frame, &rows, &series)
            }
        };
        let mut parts =
            drawn.map_err(|message| internal_err!("drawing dashboard chart `{}` failed: {message}", spec.id))?;
        if series.omitted > 0 {
            parts.notes.push(format!(
                "Showing the {MAX_SERIES} series with the most requests; {} more are in the table only.",
                series.omitted
            ));
        }
        figures.push(Figure {
            facet,
            wide: parts.wide,
            narrow: parts.narrow,
            legend: parts.legend,
            notes: parts.notes,
            table: data_table(spec, &frame, &rows, ctx),
        });
    }
    Ok(Drawn::Figures { figures, notes, warnings })
}

/// The flag's warning, naming the `x` categories of the rows where its column
/// is true; `None` when it is true on none.
fn flagged(flag: &Flag, spec: &ChartSpec, frame: &Frame, rows: &[usize]) -> Option<String> {
    let (raised, x) = (frame.column(flag.column), frame.column(spec.x.column));
    let categories = axis::ordered_labels(
        rows.iter().filter(|&&r| matches!(&raised[r], Cell::Text(t) if t == "true")).map(|&r| &x[r]),
    );
    (!categories.is_empty()).then(|| format!("{} ({}: {}).", flag.warning, spec.x.label, categories.join(", ")))
}

fn needed_columns(spec: &ChartSpec) -> Vec<&'static str> {
    let mut names = vec![spec.x.column];
    names.extend(spec.only.map(|only| only.column));
    names.extend(spec.series);
    names.extend(spec.facet);
    names.extend(spec.values.iter().map(|v| v.column));
    match spec.kind {
        ChartKind::Heatmap { rows } => names.push(rows.column),
        ChartKind::Interval { low, high, significant, effect } => {
            names.extend([low, high]);
            names.extend(significant);
            names.extend(effect);
        }
        ChartKind::BarsWithIntervals { low, high } => names.extend([low, high]),
        _ => {}
    }
    names
}

/// The figure's rows: key columns (in the table's order) then values, rounded per unit.
fn data_table(spec: &ChartSpec, frame: &Frame, rows: &[usize], ctx: &Context) -> DataTable {
    if let (ChartKind::LinesOverTime | ChartKind::StackedBars, Some(series), Unit::Date) =
        (spec.kind, spec.series, spec.x.unit)
    {
        return pivot_by_date(spec, series, frame, rows, ctx);
    }
    let mut keys: Vec<&str> = vec![spec.x.column];
    keys.extend(spec.series);
    keys.extend(spec.facet);
    match spec.kind {
        ChartKind::Heatmap { rows } => keys.push(rows.column),
        ChartKind::Interval { effect, .. } => keys.extend(effect),
        _ => {}
    }
    keys.sort_by_key(|k| frame.schema_rank(k));
    keys.dedup();

    let mut numeric: Vec<(&str, Unit)> = spec.values.iter().map(|v| (v.column, spec.unit)).collect();
    match spec.kind {
        ChartKind::Interval { low, high, significant, .. } => {
            numeric.extend([(low, spec.unit), (high, spec.unit)]);
            let listed = |column: &str| spec.table_only.iter().any(|c| c.column == column);
            numeric.extend(significant.filter(|c| !listed(c)).map(|c| (c, Unit::Other("p"))));
        }
        ChartKind::BarsWithIntervals { low, high } => numeric.extend([(low, spec.unit), (high, spec.unit)]),
        _ => {}
    }
    numeric.extend(spec.table_only.iter().filter(|c| frame.has(c.column)).map(|c| (c.column, c.unit)));

    let unit_of_key = |key: &str| {
        if key == spec.x.column {
            spec.x.unit.suffix()
        } else if let ChartKind::Heatmap { rows } = spec.kind {
            if key == rows.column {
                rows.unit.suffix()
            } else {
                ""
            }
        } else {
            ""
        }
    };
    let mut headers: Vec<(String, String)> = keys.iter().map(|k| (k.to_string(), unit_of_key(k).to_string())).collect();
    headers.extend(numeric.iter().map(|(c, u)| (c.to_string(), u.suffix().to_string())));

    let rows = rows
        .iter()
        .map(|&r| {
            let mut cells: Vec<String> = keys.iter().map(|k| frame.column(k)[r].label()).collect();
            cells.extend(numeric.iter().map(|(c, unit)| match frame.column(c)[r].num() {
                Some(v) => unit.cell(v),
                None => "—".to_string(),
            }));
            cells
        })
        .collect();
    DataTable { headers, first_numeric: keys.len(), rows }
}

/// A time series as one row per date and one column per series (and value
/// column): the long form repeats every date and series name, which for 50 models
/// x 90 days is most of the page.
fn pivot_by_date(spec: &ChartSpec, series: &str, frame: &Frame, rows: &[usize], ctx: &Context) -> DataTable {
    let dates = axis::ordered_labels(rows.iter().map(|&r| &frame.column(spec.x.column)[r]));
    let mut labels: Vec<String> = Vec::new();
    for &r in rows {
        let label = frame.column(series)[r].label();
        if !labels.contains(&label) {
            labels.push(label);
        }
    }
    labels.sort_by_key(|l| ctx.rank.get(l).copied().unwrap_or(usize::MAX));
    let date_index: HashMap<&str, usize> = dates.iter().enumerate().map(|(i, d)| (d.as_str(), i)).collect();
    let label_index: HashMap<&str, usize> = labels.iter().enumerate().map(|(i, l)| (l.as_str(), i)).collect();
    let per_series = spec.values.len();
    let mut cells = vec![vec!["—".to_string(); labels.len() * per_series]; dates.len()];
    for &r in rows {
        let d = date_index[frame.column(spec.x.column)[r].label().as_str()];
        let s = label_index[frame.column(series)[r].label().as_str()];
        for (v, value) in spec.values.iter().enumerate() {
            if let Some(x) = frame.column(value.column)[r].num() {
                cells[d][s * per_series + v] = spec.unit.cell(x);
            }
        }
    }
    let mut headers = vec![(spec.x.column.to_string(), spec.x.unit.suffix().to_string())];
    for label in &labels {
        for value in spec.values {
            let name = if per_series > 1 { format!("{label} {}", value.column) } else { label.clone() };
            headers.push((name, spec.unit.suffix().to_string()));
        }
    }
    let rows =
        dates.into_iter().zip(cells).map(|(date, values)| std::iter::once(date).chain(values).collect()).collect();
    DataTable { headers, first_numeric: 1, rows }
}

/// Texts drawn before and after a chart's data marks (bars, cells, lines,
/// points), replaced by `svg_body` with a `<g class="marks">` around them, so a
/// reader (or a test) can tell the data from axes and grid.
pub(crate) const MARKS_BEGIN: &str = "tokscope-marks-begin";
pub(crate) const MARKS_END: &str = "tokscope-marks-end";

/// The plotters SVG with its root element removed and the data marks grouped.
pub(crate) fn svg_body(document: &str) -> String {
    let start = document.find("<svg").and_then(|i| document[i..].find('>').map(|j| i + j + 1)).unwrap_or(0);
    let end = document.rfind("</svg>").unwrap_or(document.len());
    let body = document[start..end].trim();
    let body = replace_text_element(body, MARKS_BEGIN, r#"<g class="marks">"#);
    compact(&replace_text_element(&body, MARKS_END, "</g>"))
}

/// plotters' attributes that say nothing, left out: `opacity="1"` and
/// `stroke="none"` (SVG's defaults, and no element of the page sets another
/// for its children to inherit) on every element, and font sizes with float
/// noise (`13.000000000000002`) written to two decimals. A page of many
/// charts is a tenth smaller for the opacities, a twentieth for the strokes.
fn compact(body: &str) -> String {
    static FONT_SIZE: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r#"font-size="(\d+\.\d{3,})""#).expect("a valid pattern"));
    let body = body.replace(r#" opacity="1""#, "").replace(r#" stroke="none""#, "");
    FONT_SIZE
        .replace_all(&body, |c: &regex::Captures<'_>| {
            let size: f64 = c[1].parse().unwrap_or_default();
            format!(r#"font-size="{}""#, (size * 100.0).round() / 100.0)
        })
        .into_owned()
}

/// `body` with the `<text ...>{content}</text>` element (plotters puts the
/// text on a line of its own) replaced by `with`.
fn replace_text_element(body: &str, content: &str, with: &str) -> String {
    let Some(at) = body.find(content) else { return body.to_string() };
    let (Some(open), Some(close)) = (body[..at].rfind("<text"), body[at..].find("</text>")) else {
        return body.to_string();
    };
    let end = at + close + "</text>".len();
    format!("{}{with}{}", &body[..open], &body[end..])
}

/// Text style sizes: plotters writes `font-size = size / 1.24`, so ask for 1.24x.
pub(crate) fn font(px: f64) -> f64 {
    px * 1.24
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marks_between_the_sentinels_are_grouped() {
        let document = format!(
            "<svg width=\"10\">\n<line/>\n<text x=\"0\" font-size=\"1\">\n{MARKS_BEGIN}\n</text>\n<rect/>\n<rect/>\n\
             <text x=\"0\">\n{MARKS_END}\n</text>\n<text x=\"5\">\nlabel\n</text>\n</svg>"
        );
        assert_eq!(
            svg_body(&document),
            "<line/>\n<g class=\"marks\">\n<rect/>\n<rect/>\n</g>\n<text x=\"5\">\nlabel\n</text>"
        );
    }

    #[test]
    fn default_opacity_and_stroke_and_float_noise_are_left_out() {
        let document =
            "<svg width=\"10\">\n<rect opacity=\"1\" fill-opacity=\"1\" stroke=\"none\" stroke-opacity=\"0.5\"/>\n\
                        <text font-size=\"13.000000000000002\" opacity=\"0.5\">\na\n</text>\n\
                        <text font-size=\"12.5\">\nb\n</text>\n</svg>";
        assert_eq!(
            svg_body(document),
            "<rect fill-opacity=\"1\" stroke-opacity=\"0.5\"/>\n<text font-size=\"13\" opacity=\"0.5\">\na\n</text>\n\
             <text font-size=\"12.5\">\nb\n</text>"
        );
    }
}
