//! Stacked bars: per category one bar, one segment per series stacked in the
//! legend's order, each from the sum of the segments below it (a day's cost
//! by team: the bar's height is the day's total). Negative values stack
//! downwards from 0 the same way.

use std::collections::HashMap;

use plotters::prelude::*;

use super::axis::{ordered_labels, value_ticks};
use super::canvas::{categorical_svgs, err, Plot};
use super::palette::hex;
use super::{LegendEntry, Parts, SeriesChoice};
use crate::export::dashboard::frame::Frame;
use crate::export::dashboard::spec::ChartSpec;

/// One segment: (category, series, from, to) in plot units.
type Segment = (usize, usize, f64, f64);

/// The categories, and each segment, bottom first within a category.
fn segments(spec: &ChartSpec, frame: &Frame, rows: &[usize], series: &SeriesChoice) -> (Vec<String>, Vec<Segment>) {
    let x = frame.column(spec.x.column);
    let categories = ordered_labels(rows.iter().map(|&r| &x[r]));
    let category_index: HashMap<&str, usize> = categories.iter().enumerate().map(|(i, c)| (c.as_str(), i)).collect();
    let scale = spec.unit.plot_scale();
    let value = spec.values[0].column;
    // values[category][series]; a category and series with several rows adds them up.
    let mut values = vec![vec![None::<f64>; series.labels.len()]; categories.len()];
    for &r in rows {
        let label = spec.series.map(|c| frame.column(c)[r].label());
        let Some(s) = series.index_of(&label) else { continue };
        if let Some(v) = frame.column(value)[r].num() {
            let cell = &mut values[category_index[x[r].label().as_str()]][s];
            *cell = Some(cell.unwrap_or(0.0) + v * scale);
        }
    }
    let mut segments = Vec::new();
    for (c, row) in values.iter().enumerate() {
        let (mut up, mut down) = (0.0, 0.0);
        for (s, v) in row.iter().enumerate() {
            let Some(v) = *v else { continue };
            let base = if v >= 0.0 { &mut up } else { &mut down };
            segments.push((c, s, *base, *base + v));
            *base += v;
        }
    }
    (categories, segments)
}

pub(super) fn draw(spec: &ChartSpec, frame: &Frame, rows: &[usize], series: &SeriesChoice) -> Result<Parts, String> {
    let (categories, segments) = segments(spec, frame, rows, series);
    let ticks = value_ticks(segments.iter().flat_map(|&(_, _, from, to)| [from, to]), 5);
    let paint = |chart: &mut Plot<'_, '_>, at: &super::canvas::Placer| -> Result<(), String> {
        let half = 0.34;
        chart
            .draw_series(segments.iter().map(|&(c, s, from, to)| {
                Rectangle::new([at.at(c, -half, from), at.at(c, half, to)], series.colours[s].filled())
            }))
            .map_err(err)?;
        Ok(())
    };
    let (wide, narrow) = categorical_svgs(spec, &categories, &ticks, 1, &paint)?;
    let legend = series
        .labels
        .iter()
        .zip(&series.colours)
        .map(|(label, colour)| LegendEntry {
            label: label.clone().unwrap_or_else(|| spec.values[0].label.to_string()),
            colour: hex(*colour),
            opacity: 1.0,
            mark: "bar",
        })
        .collect();
    Ok(Parts { wide, narrow, legend, notes: Vec::new() })
}
