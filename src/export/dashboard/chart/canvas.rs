//! The plotters canvas every chart kind draws on: a 2-D f64 plot with explicit
//! tick positions and formatters (categories, dates and values are all mapped to
//! f64), axis labels with units, and an optional side panel (heatmap colour bar).

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::axis::{thinned, Ticks};
use super::palette::{AXIS, GRID, TEXT};
use super::{font, svg_body, Layout, Svg, MARKS_BEGIN, MARKS_END};
use crate::export::dashboard::format;
use crate::export::dashboard::spec::ChartSpec;

pub(crate) type Plot<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<KeyedAxis, KeyedAxis>>;
pub(crate) type Area<'b> = DrawingArea<SVGBackend<'b>, Shift>;

pub(crate) type Paint<'p> = &'p dyn Fn(&mut Plot<'_, '_>) -> Result<(), String>;
pub(crate) type PaintSide<'p> = &'p dyn Fn(&Area<'_>, Range<i32>) -> Result<(), String>;

pub(crate) fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A linear f64 axis with ticks exactly at `keys`. (plotters' own
/// `with_key_points` wrapper loses the f64 label formatter, so the mesh cannot
/// be configured on it.)
#[derive(Clone)]
pub(crate) struct KeyedAxis {
    range: Range<f64>,
    keys: Vec<f64>,
}

impl Ranged for KeyedAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let t = (value - self.range.start) / (self.range.end - self.range.start);
        (f64::from(limit.0) + t * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.keys.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

/// One axis of the canvas.
pub(crate) struct AxisDef<'a> {
    pub range: Range<f64>,
    pub keys: Vec<f64>,
    pub format: Box<dyn Fn(&f64) -> String + 'a>,
    /// Axis label with its unit.
    pub label: String,
    /// Draw grid lines at the keys.
    pub grid: bool,
}

/// Size and axes of one SVG.
pub(crate) struct Canvas<'a> {
    pub width: u32,
    pub height: u32,
    /// Height of the bottom label area (ticks + axis label).
    pub x_area: u32,
    /// Width of the left label area.
    pub y_area: u32,
    /// Width of a panel right of the plot (0 = none).
    pub side: u32,
    pub font_px: f64,
    pub x: AxisDef<'a>,
    pub y: AxisDef<'a>,
}

impl Canvas<'_> {
    pub(crate) fn draw(self, paint: Paint<'_>, side: Option<PaintSide<'_>>) -> Result<Svg, String> {
        let mut document = String::new();
        {
            let root = SVGBackend::with_string(&mut document, (self.width, self.height)).into_drawing_area();
            root.fill(&WHITE).map_err(err)?;
            let (main, panel) = root.split_horizontally(self.width - self.side);
            let x_range = KeyedAxis { range: self.x.range.clone(), keys: self.x.keys.clone() };
            let y_range = KeyedAxis { range: self.y.range.clone(), keys: self.y.keys.clone() };
            let mut chart = ChartBuilder::on(&main)
                .margin(10)
                .margin_right(if self.side > 0 { 4 } else { 18 })
                .x_label_area_size(self.x_area)
                .y_label_area_size(self.y_area)
                .build_cartesian_2d(x_range, y_range)
                .map_err(err)?;
            let labels = ("sans-serif", font(self.font_px)).into_font().color(&TEXT);
            let descs = ("sans-serif", font(self.font_px + 1.0)).into_font().color(&TEXT);
            let mut mesh = chart.configure_mesh();
            mesh.x_label_formatter(&self.x.format)
                .y_label_formatter(&self.y.format)
                .x_desc(self.x.label.clone())
                .y_desc(self.y.label.clone())
                .label_style(labels)
                .axis_desc_style(descs)
                .bold_line_style(GRID)
                .light_line_style(TRANSPARENT)
                .axis_style(AXIS);
            if !self.x.grid {
                mesh.disable_x_mesh();
            }
            if !self.y.grid {
                mesh.disable_y_mesh();
            }
            mesh.draw().map_err(err)?;
            // Sentinels around the data marks; `svg_body` turns them into `<g class="marks">`.
            let sentinel = ("sans-serif", 1.0).into_font();
            root.draw(&Text::new(MARKS_BEGIN, (0, 0), sentinel.clone())).map_err(err)?;
            paint(&mut chart)?;
            root.draw(&Text::new(MARKS_END, (0, 0), sentinel)).map_err(err)?;
            if let Some(paint_side) = side {
                let (_, plot_y) = chart.plotting_area().get_pixel_range();
                paint_side(&panel, plot_y)?;
            }
            root.present().map_err(err)?;
        }
        Ok(Svg { width: self.width, height: self.height, body: svg_body(&document) })
    }
}

/// Maps (category, offset within its band, value) to plot coordinates: categories
/// along x on wide screens, down y (first on top) on narrow ones.
pub(crate) struct Placer {
    pub horizontal: bool,
    pub n: usize,
}

impl Placer {
    pub(crate) fn at(&self, category: usize, offset: f64, value: f64) -> (f64, f64) {
        if self.horizontal {
            (value, (self.n - 1 - category) as f64 - offset)
        } else {
            (category as f64 + offset, value)
        }
    }
}

/// An interval's whisker at `offset` in `category`'s band: a stroke from `lo` to
/// `hi` and a cap `cap` wide on each side at both ends (three paths).
pub(crate) fn draw_whisker(
    chart: &mut Plot<'_, '_>,
    at: &Placer,
    (category, offset, cap): (usize, f64, f64),
    (lo, hi): (f64, f64),
    style: ShapeStyle,
) -> Result<(), String> {
    chart
        .draw_series([
            PathElement::new([at.at(category, offset, lo), at.at(category, offset, hi)], style),
            PathElement::new([at.at(category, offset - cap, lo), at.at(category, offset + cap, lo)], style),
            PathElement::new([at.at(category, offset - cap, hi), at.at(category, offset + cap, hi)], style),
        ])
        .map_err(err)?;
    Ok(())
}

/// `spec`'s chart of categories x values (bars, intervals) drawn by `paint`,
/// at the wide and at the narrow layout; `groups` is the number of marks per
/// category (sets the band height on narrow screens).
pub(crate) fn categorical_svgs(
    spec: &ChartSpec,
    categories: &[String],
    ticks: &Ticks,
    groups: usize,
    paint: &dyn Fn(&mut Plot<'_, '_>, &Placer) -> Result<(), String>,
) -> Result<(Svg, Svg), String> {
    let svg = |layout: Layout| {
        let (canvas, placer) = categorical(
            layout,
            categories,
            spec.x.unit.label(spec.x.label),
            ticks,
            spec.unit.label(spec.value_label),
            groups,
        );
        canvas.draw(&|chart| paint(chart, &placer), None)
    };
    Ok((svg(Layout::Wide)?, svg(Layout::Narrow)?))
}

/// A canvas for categories x values in `layout` (see [`categorical_svgs`]).
fn categorical<'a>(
    layout: Layout,
    categories: &'a [String],
    category_label: String,
    ticks: &'a Ticks,
    value_label: String,
    groups: usize,
) -> (Canvas<'a>, Placer) {
    let n = categories.len();
    let horizontal = layout == Layout::Narrow;
    let step = ticks.step;
    let value_axis = AxisDef {
        range: ticks.lo()..ticks.hi(),
        keys: ticks.values.clone(),
        format: Box::new(move |v| format::tick(*v, step)),
        label: value_label,
        grid: true,
    };
    let label_of = move |v: &f64| {
        let i = v.round() as isize;
        let i = if horizontal { n as isize - 1 - i } else { i };
        usize::try_from(i).ok().and_then(|i| categories.get(i)).cloned().unwrap_or_default()
    };
    // Category names are all labelled (up to 12 across); dates, read in order, as
    // many as fit side by side without overlapping (`2025-06-01` is about 70 px).
    let across = if categories.iter().all(|c| is_date(c)) { 7 } else { 12 };
    let keys: Vec<f64> = thinned(n, if horizontal { 40 } else { across })
        .into_iter()
        .map(|i| if horizontal { (n - 1) as f64 - i } else { i })
        .collect();
    let category_axis =
        AxisDef { range: -0.5..n as f64 - 0.5, keys, format: Box::new(label_of), label: category_label, grid: false };
    let placer = Placer { horizontal, n };
    let canvas = if horizontal {
        let longest = categories.iter().map(|c| c.chars().count()).max().unwrap_or(1) as f64;
        let band = (groups * 9 + 10).max(24) as u32;
        Canvas {
            width: layout.width(),
            height: 20 + n as u32 * band + 52,
            x_area: 52,
            y_area: (longest * 7.0 + 34.0).clamp(60.0, 150.0) as u32,
            side: 0,
            font_px: 12.0,
            x: value_axis,
            y: category_axis,
        }
    } else {
        Canvas {
            width: layout.width(),
            height: 340,
            x_area: 52,
            y_area: 72,
            side: 0,
            font_px: 13.0,
            x: category_axis,
            y: value_axis,
        }
    };
    (canvas, placer)
}

/// A `YYYY-MM-DD` label.
fn is_date(label: &str) -> bool {
    chrono::NaiveDate::parse_from_str(label, "%Y-%m-%d").is_ok()
}
