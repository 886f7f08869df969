//! Heatmap: the first value column as colour over `x` (across) and `rows` (up,
//! lowest at the bottom), with a colour bar; diverging around zero when the
//! values have both signs.

use std::collections::HashMap;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::{nice_ticks, ordered_labels, thinned};
use super::canvas::{err, Area, AxisDef, Canvas, Plot};
use super::palette::{hex, HeatScale, MISSING, TEXT};
use super::{font, Layout, LegendEntry, Parts};
use crate::export::dashboard::format;
use crate::export::dashboard::frame::Frame;
use crate::export::dashboard::spec::{Axis, ChartSpec};

pub(super) fn draw(spec: &ChartSpec, row_axis: Axis, frame: &Frame, rows: &[usize]) -> Result<Parts, String> {
    let x = frame.column(spec.x.column);
    let y = frame.column(row_axis.column);
    let value_column = frame.column(spec.values.first().map(|v| v.column).unwrap_or_default());
    let columns = ordered_labels(rows.iter().map(|&r| &x[r]));
    let row_labels = ordered_labels(rows.iter().map(|&r| &y[r]));
    let column_index: HashMap<&str, usize> = columns.iter().enumerate().map(|(i, c)| (c.as_str(), i)).collect();
    let row_index: HashMap<&str, usize> = row_labels.iter().enumerate().map(|(i, c)| (c.as_str(), i)).collect();
    let scale = spec.unit.plot_scale();

    let mut cells: Vec<Vec<Option<f64>>> = vec![vec![None; columns.len()]; row_labels.len()];
    let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
    for &r in rows {
        let value = value_column[r].num().map(|v| v * scale);
        if let Some(v) = value {
            min = min.min(v);
            max = max.max(v);
        }
        cells[row_index[y[r].label().as_str()]][column_index[x[r].label().as_str()]] = value;
    }
    let heat = HeatScale::new(min, max);
    let heat_ticks = nice_ticks(heat.lo, heat.hi, 4);
    let scale_label = spec.unit.label(spec.value_label);

    let paint = |chart: &mut Plot<'_, '_>| -> Result<(), String> {
        let rects = cells.iter().enumerate().flat_map(|(r, row)| {
            row.iter().enumerate().map(move |(c, v)| {
                let (cx, cy) = (c as f64, r as f64);
                let colour = v.map(|v| heat.colour(v)).unwrap_or(MISSING);
                Rectangle::new([(cx - 0.5, cy - 0.5), (cx + 0.5, cy + 0.5)], colour.filled())
            })
        });
        chart.draw_series(rects).map_err(err)?;
        Ok(())
    };
    let colour_bar = |panel: &Area<'_>, plot_y: std::ops::Range<i32>| -> Result<(), String> {
        let (top, bottom) = (plot_y.start, plot_y.end);
        let (x0, x1) = (10, 24);
        let steps = 48;
        let height = (bottom - top) as f64;
        for i in 0..steps {
            let t0 = i as f64 / steps as f64;
            let t1 = (i + 1) as f64 / steps as f64;
            let value = heat.lo + (heat.hi - heat.lo) * (t0 + t1) / 2.0;
            // One pixel of overlap: abutting rectangles leave hairline gaps when scaled.
            let (ya, yb) = (bottom - (t0 * height) as i32 + 1, bottom - (t1 * height).ceil() as i32);
            panel.draw(&Rectangle::new([(x0, yb), (x1, ya)], heat.colour(value).filled())).map_err(err)?;
        }
        let style = ("sans-serif", font(11.0)).into_font().color(&TEXT);
        for tick in heat_ticks.values.iter().filter(|t| **t >= heat.lo - 1e-12 && **t <= heat.hi + 1e-12) {
            let t = (tick - heat.lo) / (heat.hi - heat.lo);
            let py = bottom - (t * height) as i32;
            panel.draw(&PathElement::new([(x1, py), (x1 + 4, py)], TEXT.stroke_width(1))).map_err(err)?;
            let text = format::tick(*tick, heat_ticks.step);
            panel
                .draw(&Text::new(text, (x1 + 6, py), style.clone().pos(Pos::new(HPos::Left, VPos::Center))))
                .map_err(err)?;
        }
        let desc = ("sans-serif", font(12.0)).into_font().color(&TEXT).transform(FontTransform::Rotate270);
        let mid = (top + bottom) / 2;
        panel
            .draw(&Text::new(scale_label.clone(), (x1 + 50, mid), desc.pos(Pos::new(HPos::Center, VPos::Center))))
            .map_err(err)?;
        Ok(())
    };
    let svg = |layout: Layout| {
        let wide = layout == Layout::Wide;
        let cell_px = if wide { 26.0 } else { 20.0 };
        let plot_height = (row_labels.len() as f64 * cell_px).clamp(120.0, 420.0);
        let x_keys = thinned(columns.len(), if wide { 24 } else { 12 });
        let y_keys = thinned(row_labels.len(), 16);
        let cols = &columns;
        let rls = &row_labels;
        let canvas = Canvas {
            width: layout.width(),
            height: plot_height as u32 + 20 + 52,
            x_area: 52,
            y_area: if wide { 64 } else { 56 },
            side: 92,
            font_px: if wide { 13.0 } else { 12.0 },
            x: AxisDef {
                range: -0.5..columns.len() as f64 - 0.5,
                keys: x_keys,
                format: Box::new(move |v| cols.get(v.round() as usize).cloned().unwrap_or_default()),
                label: spec.x.unit.label(spec.x.label),
                grid: false,
            },
            y: AxisDef {
                range: -0.5..row_labels.len() as f64 - 0.5,
                keys: y_keys,
                format: Box::new(move |v| rls.get(v.round() as usize).cloned().unwrap_or_default()),
                label: row_axis.unit.label(row_axis.label),
                grid: false,
            },
        };
        canvas.draw(&paint, Some(&colour_bar))
    };
    let legend = vec![
        LegendEntry {
            label: format!("{scale_label}: low"),
            colour: hex(heat.colour(heat.lo)),
            opacity: 1.0,
            mark: "bar",
        },
        LegendEntry { label: "high".into(), colour: hex(heat.colour(heat.hi)), opacity: 1.0, mark: "bar" },
        LegendEntry { label: "no data".into(), colour: hex(MISSING), opacity: 1.0, mark: "bar" },
    ];
    Ok(Parts { wide: svg(Layout::Wide)?, narrow: svg(Layout::Narrow)?, legend, notes: Vec::new() })
}
