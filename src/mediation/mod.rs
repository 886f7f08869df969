//! Causal mediation analysis on the replay decoder: which layers carry the
//! effect of a prompt's content on an outcome (next-token probability,
//! continuation log-prob, BLEU of the greedy output, P(EOS)).
//!
//! `interventions` (corrupt / restore / perturb through the replay hooks) and
//! `trace` (the causal-tracing grid, with activation reuse) run the model;
//! `table` stores each run as a row of the `interventions` table; `effects`
//! turns rows into TE / IE / DE with percentile-bootstrap intervals; `cli`
//! holds `tokscope trace`, `tokscope mediate` and `tokscope mediation-report`.
//! Formulas: `docs/metrics.md` ("Mediation"); overview: `docs/mediation.md`.

pub mod bleu;
pub mod cli;
pub mod effects;
pub mod interventions;
pub mod table;
pub mod trace;

use std::sync::Arc;

use arrow::array::{Array, Float64Array, Int32Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use datafusion::prelude::SessionContext;
use serde::Serialize;

use crate::engine;
use crate::error::{Error, Result};

/// SQL of the per-prompt effects (`sql/mediation.sql`); also the `mediation` entry of `jobs::JOBS`.
pub const EFFECTS_SQL: &str = include_str!("../../sql/mediation.sql");
/// SQL of the layer x position heatmap (`sql/mediation_heatmap.sql`).
pub const HEATMAP_SQL: &str = include_str!("../../sql/mediation_heatmap.sql");

/// The `mediation` job: per metric x layer x effect (`te`, `ie`, `de`,
/// `perturb`), the number of prompts, the mean and the 95% percentile-bootstrap
/// interval (`resamples` resamples, seeded). Columns: metric, layer, effect,
/// n, mean, ci_lo, ci_hi.
pub async fn run_job(
    ctx: &SessionContext,
    resamples: usize,
    seed: u64,
) -> Result<Vec<RecordBatch>> {
    let batches = engine::run_sql(ctx, EFFECTS_SQL, false).await?;
    // Rows arrive ordered by (metric, layer, effect): group consecutive runs.
    let mut groups: Vec<(GroupKey, Vec<f64>)> = Vec::new();
    for b in &batches {
        let metric = column::<StringArray>(b, 0)?;
        let layer = column::<Int32Array>(b, 1)?;
        let effect = column::<StringArray>(b, 2)?;
        let value = column::<Float64Array>(b, 4)?;
        for r in 0..b.num_rows() {
            let key = (
                metric.value(r).to_string(),
                layer.is_valid(r).then(|| layer.value(r)),
                effect.value(r).to_string(),
            );
            match groups.last_mut() {
                Some((k, values)) if *k == key => values.push(value.value(r)),
                _ => groups.push((key, vec![value.value(r)])),
            }
        }
    }
    let summaries: Vec<_> = groups
        .iter()
        .map(|(_, v)| effects::summarize(v, resamples, seed))
        .collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("metric", DataType::Utf8, false),
        Field::new("layer", DataType::Int32, true),
        Field::new("effect", DataType::Utf8, false),
        Field::new("n", DataType::Int64, false),
        Field::new("mean", DataType::Float64, true),
        Field::new("ci_lo", DataType::Float64, true),
        Field::new("ci_hi", DataType::Float64, true),
    ]));
    let columns: Vec<Arc<dyn Array>> = vec![
        Arc::new(
            groups
                .iter()
                .map(|((m, _, _), _)| Some(m.as_str()))
                .collect::<StringArray>(),
        ),
        Arc::new(
            groups
                .iter()
                .map(|((_, l, _), _)| *l)
                .collect::<Int32Array>(),
        ),
        Arc::new(
            groups
                .iter()
                .map(|((_, _, e), _)| Some(e.as_str()))
                .collect::<StringArray>(),
        ),
        Arc::new(
            summaries
                .iter()
                .map(|s| Some(s.n as i64))
                .collect::<Int64Array>(),
        ),
        Arc::new(
            summaries
                .iter()
                .map(|s| Some(s.mean))
                .collect::<Float64Array>(),
        ),
        Arc::new(
            summaries
                .iter()
                .map(|s| Some(s.ci_lo))
                .collect::<Float64Array>(),
        ),
        Arc::new(
            summaries
                .iter()
                .map(|s| Some(s.ci_hi))
                .collect::<Float64Array>(),
        ),
    ];
    Ok(vec![RecordBatch::try_new(schema, columns)?])
}

/// (metric, layer, effect) of one summarised group.
type GroupKey = (String, Option<i32>, String);

/// The heatmap as rows: metric, layer, position, mean IE over prompts, prompts.
pub async fn heatmap(ctx: &SessionContext) -> Result<Vec<RecordBatch>> {
    engine::run_sql(ctx, HEATMAP_SQL, false).await
}

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

/// Dense grids from [`heatmap`] rows, one per metric.
pub fn heatmap_grids(batches: &[RecordBatch]) -> Result<Vec<HeatmapGrid>> {
    let mut cells: Vec<(String, usize, usize, f64)> = Vec::new();
    for b in batches {
        let (metric, layer) = (column::<StringArray>(b, 0)?, column::<Int32Array>(b, 1)?);
        let (position, ie) = (column::<Int32Array>(b, 2)?, column::<Float64Array>(b, 3)?);
        for r in 0..b.num_rows() {
            let (l, p) = (
                usize::try_from(layer.value(r)),
                usize::try_from(position.value(r)),
            );
            if let (Ok(l), Ok(p)) = (l, p) {
                cells.push((metric.value(r).to_string(), l, p, ie.value(r)));
            }
        }
    }
    let mut grids: Vec<HeatmapGrid> = Vec::new();
    for (metric, l, p, v) in cells {
        if grids.last().is_none_or(|g| g.metric != metric) {
            grids.push(HeatmapGrid {
                metric: metric.clone(),
                layers: 0,
                positions: 0,
                ie: Vec::new(),
            });
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
    batch.column(i).as_any().downcast_ref::<T>().ok_or_else(|| {
        Error::Config(format!(
            "mediation SQL column {i} has type {}",
            batch.column(i).data_type()
        ))
    })
}
