//! Lines: one line per (series, value column) over a `Date32` column (date
//! ticks), a timestamp column (clock-time ticks) or a numeric column (number
//! ticks); a null value breaks the line, a missing day, window or number is
//! bridged.

use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::axis::{date_ticks, nice_ticks, time_ticks, value_ticks};
use super::canvas::{err, AxisDef, Canvas, Plot};
use super::{Layout, LegendEntry, Parts, SeriesChoice};
use crate::export::dashboard::format;
use crate::export::dashboard::frame::{Cell, Frame};
use crate::export::dashboard::spec::ChartSpec;

struct Line {
    colour: RGBColor,
    dashed: bool,
    /// (x, value) sorted by x: days for dates, seconds for timestamps.
    points: Vec<(f64, Option<f64>)>,
}

/// Formats a tick's position as its label.
type TickFormat = Box<dyn Fn(&f64) -> String>;

/// How the `x` column is placed and labelled.
#[derive(Clone, Copy, PartialEq)]
enum XScale {
    /// Days since the epoch, date ticks.
    Days,
    /// Seconds since the epoch, clock-time ticks.
    Seconds,
    /// The number itself, number ticks.
    Number,
}

pub(super) fn draw(spec: &ChartSpec, frame: &Frame, rows: &[usize], series: &SeriesChoice) -> Result<Parts, String> {
    let days = frame.column(spec.x.column);
    let scale = spec.unit.plot_scale();
    let mut lines: Vec<Line> = Vec::new();
    for colour in &series.colours {
        for v in 0..spec.values.len() {
            lines.push(Line { colour: *colour, dashed: v > 0, points: Vec::new() });
        }
    }
    // Dates are placed in days (date ticks), timestamps in seconds (clock
    // ticks), numbers as they are.
    let scale_x = if rows.iter().all(|&r| matches!(days[r], Cell::Day(_) | Cell::Null)) {
        XScale::Days
    } else if rows.iter().all(|&r| matches!(days[r], Cell::Time(_) | Cell::Null)) {
        XScale::Seconds
    } else {
        XScale::Number
    };
    let position = |cell: &Cell| match (scale_x, cell) {
        (XScale::Days, Cell::Day(d)) => Some(f64::from(*d)),
        (XScale::Seconds, Cell::Time(_)) => cell.seconds(),
        (XScale::Number, _) => cell.num(),
        _ => None,
    };
    let (mut first, mut last) = (f64::INFINITY, f64::NEG_INFINITY);
    for &r in rows {
        let Some(day) = position(&days[r]) else { continue };
        let label = spec.series.map(|c| frame.column(c)[r].label());
        let Some(s) = series.index_of(&label) else { continue };
        first = first.min(day);
        last = last.max(day);
        for (v, column) in spec.values.iter().enumerate() {
            let value = frame.column(column.column)[r].num().map(|y| y * scale);
            lines[s * spec.values.len() + v].points.push((day, value));
        }
    }
    if first > last {
        return Err(format!("no rows with a value in `{}`", spec.x.column));
    }
    for line in &mut lines {
        line.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let ticks = value_ticks(lines.iter().flat_map(|l| l.points.iter().filter_map(|(_, v)| *v)), 5);

    let paint = |chart: &mut Plot<'_, '_>| -> Result<(), String> {
        for line in &lines {
            for segment in line.points.split(|(_, v)| v.is_none()) {
                let points: Vec<(f64, f64)> = segment.iter().map(|(d, v)| (*d, v.unwrap_or(0.0))).collect();
                let style = line.colour.stroke_width(2);
                match points.len() {
                    0 => {}
                    1 => {
                        chart
                            .draw_series(std::iter::once(Circle::new(points[0], 3, line.colour.filled())))
                            .map_err(err)?;
                    }
                    _ if line.dashed => {
                        chart.draw_series(std::iter::once(DashedPathElement::new(points, 6, 4, style))).map_err(err)?;
                    }
                    _ => {
                        chart.draw_series(std::iter::once(PathElement::new(points, style))).map_err(err)?;
                    }
                }
            }
        }
        Ok(())
    };
    let svg = |layout: Layout| {
        let max_labels = if layout == Layout::Wide { 8 } else { 4 };
        let (keys, format): (Vec<f64>, TickFormat) = match scale_x {
            XScale::Days => {
                let (keys, step) = date_ticks(first as i32, last as i32, max_labels);
                (keys, Box::new(move |d| format::date_tick(d.round() as i32, step)))
            }
            XScale::Seconds => {
                let (keys, step) = time_ticks(first, last, max_labels);
                (keys, Box::new(move |s| format::time_tick(*s, step)))
            }
            XScale::Number => {
                let ticks = nice_ticks(first, last, max_labels);
                let step = ticks.step;
                let keys = ticks.values.into_iter().filter(|k| (first..=last).contains(k)).collect();
                (keys, Box::new(move |v| format::tick(*v, step)))
            }
        };
        let pad = match (scale_x, first == last) {
            (XScale::Days, true) => 1.0,
            (XScale::Days, false) => 0.3,
            (XScale::Seconds, true) => 60.0,
            (XScale::Number, true) => 1.0,
            (_, false) => (last - first) / 50.0,
        };
        let value_step = ticks.step;
        let canvas = Canvas {
            width: layout.width(),
            height: if layout == Layout::Wide { 320 } else { 280 },
            x_area: 52,
            y_area: if layout == Layout::Wide { 72 } else { 64 },
            side: 0,
            font_px: if layout == Layout::Wide { 13.0 } else { 12.0 },
            x: AxisDef {
                range: first - pad..last + pad,
                keys,
                format,
                label: spec.x.unit.label(spec.x.label),
                grid: true,
            },
            y: AxisDef {
                range: ticks.lo()..ticks.hi(),
                keys: ticks.values.clone(),
                format: Box::new(move |v| format::tick(*v, value_step)),
                label: spec.unit.label(spec.value_label),
                grid: true,
            },
        };
        canvas.draw(&paint, None)
    };

    let mut legend: Vec<LegendEntry> = Vec::new();
    for (label, colour) in series.labels.iter().zip(&series.colours) {
        let label = label.clone().unwrap_or_else(|| spec.values[0].label.to_string());
        legend.push(LegendEntry { label, colour: super::hex(*colour), opacity: 1.0, mark: "line" });
    }
    if spec.values.len() > 1 {
        for (v, column) in spec.values.iter().enumerate() {
            let mark = if v == 0 { "line" } else { "dash" };
            legend.push(LegendEntry { label: column.label.to_string(), colour: "#555555".into(), opacity: 1.0, mark });
        }
    }
    let mut notes = Vec::new();
    match scale_x {
        XScale::Days => {
            notes.push(format!("{} to {} (UTC).", format::date_label(first as i32), format::date_label(last as i32)));
        }
        XScale::Seconds => {
            let (from, to) = (format::time_label((first * 1000.0) as i64), format::time_label((last * 1000.0) as i64));
            notes.push(format!("{from} to {to} (UTC)."));
        }
        XScale::Number => {}
    }
    Ok(Parts { wide: svg(Layout::Wide)?, narrow: svg(Layout::Narrow)?, legend, notes })
}
