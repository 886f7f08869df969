//! Interval plot: a point estimate with its [low, high] whisker per category and
//! series, and a reference line at zero (at one for a figure of ratios). A
//! filled point is significant: its p-value (when the spec names a column and
//! the row has one) is below 0.05, else its interval excludes the reference.

use std::collections::HashMap;

use plotters::prelude::*;

use super::axis::{ordered_labels, value_ticks};
use super::canvas::{categorical_svgs, draw_whisker, err, Placer, Plot};
use super::palette::{hex, AXIS};
use super::{LegendEntry, Parts, SeriesChoice};
use crate::export::dashboard::frame::Frame;
use crate::export::dashboard::spec::ChartSpec;

struct Estimate {
    category: usize,
    series: usize,
    value: f64,
    low: Option<f64>,
    high: Option<f64>,
    significant: bool,
}

/// The significance level a p-value column is read at.
const ALPHA: f64 = 0.05;

pub(super) fn draw(
    spec: &ChartSpec,
    (low, high, p_value, effect): (&str, &str, Option<&str>, Option<&str>),
    frame: &Frame,
    rows: &[usize],
    series: &SeriesChoice,
) -> Result<Parts, String> {
    let x = frame.column(spec.x.column);
    let categories = ordered_labels(rows.iter().map(|&r| &x[r]));
    let category_index: HashMap<&str, usize> = categories.iter().enumerate().map(|(i, c)| (c.as_str(), i)).collect();
    let scale = spec.unit.plot_scale();
    let estimate_column = spec.values.first().map(|v| v.column).unwrap_or_default();

    // Ratios (B / A) are compared with 1, differences with 0.
    let ratios = effect.is_some_and(|column| {
        let cells = frame.column(column);
        rows.iter().all(|&r| matches!(&cells[r], crate::export::dashboard::frame::Cell::Text(t) if t == "ratio"))
    });
    let reference = if ratios { 1.0 } else { 0.0 };
    let mut estimates = Vec::new();
    // Rows without a p-value (no test applies) are read by their interval.
    let mut untested = false;
    for &r in rows {
        let label = spec.series.map(|c| frame.column(c)[r].label());
        let Some(s) = series.index_of(&label) else { continue };
        let Some(value) = frame.column(estimate_column)[r].num() else { continue };
        let low = frame.column(low)[r].num();
        let high = frame.column(high)[r].num();
        let excludes_reference = matches!((low, high), (Some(lo), Some(hi)) if lo > reference || hi < reference);
        let significant = match p_value.and_then(|column| frame.column(column)[r].num()) {
            Some(p) => p < ALPHA,
            None => {
                untested |= p_value.is_some() && low.is_some() && high.is_some();
                excludes_reference
            }
        };
        estimates.push(Estimate {
            category: category_index[x[r].label().as_str()],
            series: s,
            value: value * scale,
            low: low.map(|v| v * scale),
            high: high.map(|v| v * scale),
            significant,
        });
    }
    let marks = estimates.iter().flat_map(|e| [Some(e.value), e.low, e.high]).flatten();
    let ticks = value_ticks(marks.chain([reference * scale]), 5);
    let groups = series.labels.len();

    let paint = |chart: &mut Plot<'_, '_>, at: &Placer| -> Result<(), String> {
        let line = [at.at(0, -0.5, reference * scale), at.at(categories.len() - 1, 0.5, reference * scale)];
        chart.draw_series(std::iter::once(PathElement::new(line, AXIS.stroke_width(1)))).map_err(err)?;
        let band = 0.6;
        let slot = band / groups as f64;
        for e in &estimates {
            let offset = -band / 2.0 + slot * (e.series as f64 + 0.5);
            let colour = series.colours[e.series];
            let style = colour.stroke_width(2);
            if let (Some(lo), Some(hi)) = (e.low, e.high) {
                draw_whisker(chart, at, (e.category, offset, 0.12_f64.min(slot * 0.4)), (lo, hi), style)?;
            }
            let point = at.at(e.category, offset, e.value);
            chart.draw_series(std::iter::once(Circle::new(point, 5, WHITE.filled()))).map_err(err)?;
            let mark = if e.significant { colour.filled() } else { colour.stroke_width(2) };
            chart.draw_series(std::iter::once(Circle::new(point, 5, mark))).map_err(err)?;
        }
        Ok(())
    };
    let (wide, narrow) = categorical_svgs(spec, &categories, &ticks, groups, &paint)?;

    let mut legend: Vec<LegendEntry> = series
        .labels
        .iter()
        .zip(&series.colours)
        .map(|(label, colour)| LegendEntry {
            label: label
                .clone()
                .unwrap_or_else(|| spec.values.first().map(|v| v.label).unwrap_or_default().to_string()),
            colour: hex(*colour),
            opacity: 1.0,
            mark: "point",
        })
        .collect();
    let (filled, hollow) = match p_value {
        Some(column) if untested => (
            format!("significant ({column} < {ALPHA}; without a test, the 95% interval excludes {reference})"),
            "not significant".to_string(),
        ),
        Some(column) => (format!("significant ({column} < {ALPHA})"), "not significant".to_string()),
        None => (format!("95% interval excludes {reference}"), format!("includes {reference}")),
    };
    legend.push(LegendEntry { label: filled, colour: "#555555".into(), opacity: 1.0, mark: "point" });
    legend.push(LegendEntry { label: hollow, colour: "#555555".into(), opacity: 1.0, mark: "hollow" });
    let notes = if ratios { vec!["Ratios of B to A: the reference line is at 1.".to_string()] } else { Vec::new() };
    Ok(Parts { wide, narrow, legend, notes })
}
