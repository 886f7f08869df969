//! Causal mediation analysis on the replay decoder: which layers carry the
//! effect of a prompt's content on an outcome (next-token probability,
//! continuation log-prob, BLEU of the greedy output, P(EOS)).
//!
//! `interventions` (corrupt / restore / perturb through the replay hooks) and
//! `trace` (the causal-tracing grid, with activation reuse) run the model;
//! `mediate` measures logged requests and `table` stores each run as a row of
//! the `interventions` table; the `mediation` SQL job (`sql/mediation.sql`)
//! turns rows into TE / IE / DE with percentile-bootstrap intervals.
//! Formulas: `docs/metrics.md` ("Mediation"); overview: `docs/mediation.md`.

pub mod mediate;
pub mod table;

// The interventions run the decoder: the `tokscope-model` crate's.
pub use tokscope_model::mediation::{bleu, interventions, layers, trace};

use arrow::array::{Array, Float64Array, Int32Array, StringArray};
use arrow::record_batch::RecordBatch;
use serde::Serialize;

use crate::error::Result;

/// One metric's heatmap as a dense grid, for JSON export and dashboards.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HeatmapGrid {
    /// Outcome metric.
    pub metric: String,
    /// Number of layers (rows).
    pub layers: usize,
    /// Number of positions (columns).
    pub positions: usize,
    /// `ie[layer][position]`: mean indirect effect; `None` where no prompt had that cell.
    pub ie: Vec<Vec<Option<f64>>>,
}

/// Dense grids from the `mediation_heatmap` job's rows, one per metric.
pub fn heatmap_grids(batches: &[RecordBatch]) -> Result<Vec<HeatmapGrid>> {
    let mut cells: Vec<(String, usize, usize, f64)> = Vec::new();
    for b in batches {
        let (metric, layer) = (column::<StringArray>(b, 0)?, column::<Int32Array>(b, 1)?);
        let (position, ie) = (column::<Int32Array>(b, 2)?, column::<Float64Array>(b, 3)?);
        for r in 0..b.num_rows() {
            let (l, p) = (usize::try_from(layer.value(r)), usize::try_from(position.value(r)));
            if let (Ok(l), Ok(p)) = (l, p) {
                cells.push((metric.value(r).to_string(), l, p, ie.value(r)));
            }
        }
    }
    let mut grids: Vec<HeatmapGrid> = Vec::new();
    for (metric, l, p, v) in cells {
        if grids.last().is_none_or(|g| g.metric != metric) {
            grids.push(HeatmapGrid { metric: metric.clone(), layers: 0, positions: 0, ie: Vec::new() });
        }
        let Some(g) = grids.last_mut() else { continue };
        g.layers = g.layers.max(l + 1);
        g.positions = g.positions.max(p + 1);
        g.ie.resize_with(g.layers, Vec::new);
        for row in &mut g.ie {
            row.resize(g.positions, None);
        }
        g.ie[l][p] = Some(v);
    }
    Ok(grids)
}

fn column<T: 'static>(batch: &RecordBatch, i: usize) -> Result<&T> {
    batch
        .column(i)
        .as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| config_err!("mediation SQL column {i} has type {}", batch.column(i).data_type()))
}
