//! An optimizer rule that gives every column one quantile accumulator.
//!
//! Each `quantile_cont(x, p)` of an aggregate keeps its own copy of every
//! value of `x` for every group, and hands that copy from the partial to the
//! final stage: the report's three TTFT percentiles held the TTFT column three
//! times. This rule rewrites the `quantile_cont` calls of one aggregate that
//! share their column and their `FILTER` into one `quantiles_cont(x, p1, ...,
//! pk)` (one copy of the values, one sort), and a projection above picks each
//! quantile out of its list under the name the aggregate gave it, so the plan
//! above sees the same columns. Values are the same to the last bit: the same
//! order statistics, interpolated the same way (`udfs::quantile_type7`).

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, Result, ScalarValue};
use datafusion::functions_nested::expr_fn::array_element;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::{lit, Aggregate, Expr, LogicalPlan, Projection};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

use super::udfs;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct MergeQuantiles;

/// A merge candidate: `quantile_cont(x, p)` with a constant `p`, no `DISTINCT`
/// and no `ORDER BY`, perhaps under an alias (the optimizer keeps names so);
/// returns `(x, filter, p)`.
fn candidate(expr: &Expr) -> Option<(&Expr, Option<&Expr>, ScalarValue)> {
    let expr = match expr {
        Expr::Alias(alias) => alias.expr.as_ref(),
        other => other,
    };
    let Expr::AggregateFunction(AggregateFunction { func, params }) = expr else { return None };
    if !udfs::is_quantile_cont(func)
        || params.distinct
        || !params.order_by.is_empty()
        || params.null_treatment.is_some()
    {
        return None;
    }
    match params.args.as_slice() {
        [x, Expr::Literal(p, _)] if !p.is_null() => Some((x, params.filter.as_deref(), p.clone())),
        _ => None,
    }
}

impl OptimizerRule for MergeQuantiles {
    fn name(&self) -> &str {
        "merge_quantiles"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        let LogicalPlan::Aggregate(agg) = plan else { return Ok(Transformed::no(plan)) };
        if agg.group_expr.iter().any(|e| matches!(e, Expr::GroupingSet(_))) {
            return Ok(Transformed::no(LogicalPlan::Aggregate(agg)));
        }
        let candidates: Vec<_> = agg.aggr_expr.iter().map(candidate).collect();
        // The calls of each (column, filter), in the aggregate's order.
        let mut calls: HashMap<(&Expr, Option<&Expr>), Vec<usize>> = HashMap::new();
        for (i, c) in candidates.iter().enumerate() {
            if let Some((x, filter, _)) = c {
                calls.entry((*x, *filter)).or_default().push(i);
            }
        }
        let mut merged: Vec<Vec<usize>> = calls.into_values().filter(|c| c.len() > 1).collect();
        if merged.is_empty() {
            return Ok(Transformed::no(LogicalPlan::Aggregate(agg)));
        }
        merged.sort();
        // The new aggregate: every other call as it was, then one quantiles_cont per merged group.
        // `place[i]`: where call i's value comes from (its own column, or a list and a position).
        let mut place: Vec<(usize, Option<i64>)> = vec![(usize::MAX, None); agg.aggr_expr.len()];
        let mut aggr_expr = Vec::new();
        for (i, e) in agg.aggr_expr.iter().enumerate() {
            if !merged.iter().any(|m| m.contains(&i)) {
                place[i] = (aggr_expr.len(), None);
                aggr_expr.push(e.clone());
            }
        }
        for group in &merged {
            let mut args = Vec::with_capacity(group.len() + 1);
            let mut filter = None;
            for (k, (i, (x, f, p))) in group.iter().filter_map(|&i| Some((i, candidates[i].clone()?))).enumerate() {
                if k == 0 {
                    args.push(x.clone());
                    filter = f.cloned().map(Box::new);
                }
                args.push(Expr::Literal(p, None));
                place[i] = (aggr_expr.len(), Some(k as i64 + 1));
            }
            let call = AggregateFunction::new_udf(Arc::new(udfs::quantiles_cont()), args, false, filter, vec![], None);
            aggr_expr.push(Expr::AggregateFunction(call));
        }
        let groups = agg.group_expr.len();
        let schema = Arc::clone(&agg.schema);
        let new_agg = Aggregate::try_new(Arc::clone(&agg.input), agg.group_expr.clone(), aggr_expr)?;
        let new_schema = Arc::clone(&new_agg.schema);
        let column = |i: usize| Expr::Column(Column::from(new_schema.qualified_field(i)));
        // The same columns as before, under the same names.
        let mut exprs: Vec<Expr> = (0..groups).map(column).collect();
        for (i, &(from, position)) in place.iter().enumerate() {
            let value = match position {
                None => column(groups + from),
                Some(k) => array_element(column(groups + from), lit(k)),
            };
            let (qualifier, field) = schema.qualified_field(groups + i);
            exprs.push(value.alias_qualified(qualifier.cloned(), field.name()));
        }
        let projection = Projection::try_new_with_schema(exprs, Arc::new(LogicalPlan::Aggregate(new_agg)), schema)?;
        Ok(Transformed::yes(LogicalPlan::Projection(projection)))
    }
}
