//! Grouped bars: per category, one bar per (series, value column); a series'
//! second and third value column are lighter shades of its colour. With an
//! interval, each bar of the first value column carries its `[low, high]`
//! whisker (an estimate drawn as a bar from 0, with its 95% interval).

use std::collections::HashMap;

use plotters::prelude::*;

use super::axis::{ordered_labels, value_ticks};
use super::canvas::{categorical_svgs, draw_whisker, err, Plot};
use super::palette::{self, hex, shade, TEXT};
use super::{LegendEntry, Parts, SeriesChoice};
use crate::export::dashboard::frame::Frame;
use crate::export::dashboard::spec::ChartSpec;

/// `interval`: the columns of the whiskers' lower and upper ends, if any.
pub(super) fn draw(
    spec: &ChartSpec,
    frame: &Frame,
    rows: &[usize],
    series: &SeriesChoice,
    interval: Option<(&str, &str)>,
) -> Result<Parts, String> {
    let x = frame.column(spec.x.column);
    let categories = ordered_labels(rows.iter().map(|&r| &x[r]));
    let category_index: HashMap<&str, usize> = categories.iter().enumerate().map(|(i, c)| (c.as_str(), i)).collect();
    let per_series = spec.values.len();
    let groups = series.labels.len() * per_series;
    let scale = spec.unit.plot_scale();

    // values[category][series * per_series + value column], and the whiskers of
    // the first value column's bars at the same places.
    let mut values = vec![vec![None; groups]; categories.len()];
    let mut whiskers = vec![vec![None; groups]; categories.len()];
    for &r in rows {
        let category = category_index[x[r].label().as_str()];
        let label = spec.series.map(|c| frame.column(c)[r].label());
        let Some(s) = series.index_of(&label) else { continue };
        for (v, column) in spec.values.iter().enumerate() {
            values[category][s * per_series + v] = frame.column(column.column)[r].num().map(|y| y * scale);
        }
        if let Some((low, high)) = interval {
            let (lo, hi) = (frame.column(low)[r].num(), frame.column(high)[r].num());
            let bar = values[category][s * per_series];
            whiskers[category][s * per_series] = bar.and(lo.zip(hi)).map(|(lo, hi)| (lo * scale, hi * scale));
        }
    }
    let colour_of = |group: usize| {
        let (s, v) = (group / per_series, group % per_series);
        if spec.series.is_some() {
            (series.colours[s], shade(v))
        } else {
            (palette::SERIES[v % palette::SERIES.len()], 1.0)
        }
    };
    let ends = whiskers.iter().flatten().flatten().flat_map(|&(lo, hi)| [lo, hi]);
    let ticks = value_ticks(values.iter().flatten().flatten().copied().chain(ends), 5);

    let paint = |chart: &mut Plot<'_, '_>, at: &super::canvas::Placer| -> Result<(), String> {
        let band = 0.8;
        let slot = band / groups as f64;
        let bars = values
            .iter()
            .enumerate()
            .flat_map(|(c, row)| row.iter().enumerate().filter_map(move |(g, v)| v.map(|v| (c, g, v))));
        chart
            .draw_series(bars.map(|(c, g, v)| {
                let offset = -band / 2.0 + slot * (g as f64 + 0.5);
                let half = slot * 0.42;
                let (colour, opacity) = colour_of(g);
                Rectangle::new([at.at(c, offset - half, 0.0), at.at(c, offset + half, v)], colour.mix(opacity).filled())
            }))
            .map_err(err)?;
        for (c, row) in whiskers.iter().enumerate() {
            for (g, whisker) in row.iter().enumerate() {
                let Some(ends) = *whisker else { continue };
                let offset = -band / 2.0 + slot * (g as f64 + 0.5);
                draw_whisker(chart, at, (c, offset, slot * 0.2), ends, TEXT.stroke_width(2))?;
            }
        }
        Ok(())
    };
    let (wide, narrow) = categorical_svgs(spec, &categories, &ticks, groups, &paint)?;

    let mut legend = Vec::new();
    if spec.series.is_some() {
        for (label, colour) in series.labels.iter().zip(&series.colours) {
            legend.push(LegendEntry {
                label: label.clone().unwrap_or_default(),
                colour: hex(*colour),
                opacity: 1.0,
                mark: "bar",
            });
        }
        if per_series > 1 {
            for (v, column) in spec.values.iter().enumerate() {
                legend.push(LegendEntry {
                    label: column.label.to_string(),
                    colour: "#555555".into(),
                    opacity: shade(v),
                    mark: "bar",
                });
            }
        }
    } else {
        for (v, column) in spec.values.iter().enumerate() {
            let colour = palette::SERIES[v % palette::SERIES.len()];
            legend.push(LegendEntry {
                label: column.label.to_string(),
                colour: hex(colour),
                opacity: 1.0,
                mark: "bar",
            });
        }
    }
    if interval.is_some() {
        legend.push(LegendEntry {
            label: "95% interval".to_string(),
            colour: hex(TEXT),
            opacity: 1.0,
            mark: "whisker",
        });
    }
    Ok(Parts { wide, narrow, legend, notes: Vec::new() })
}
