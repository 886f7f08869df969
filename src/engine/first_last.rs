//! An optimizer rule for `first_value` / `last_value` ordered by one integer.
//!
//! DataFusion's grouped `first_value(x ORDER BY k)` compares rows through a
//! generic lexicographic comparator and, for every batch, walks the whole
//! table of groups: with one group per request (the token jobs group 12M
//! token rows by 200k request ids), that walk is most of the aggregate's
//! time. When the call has a single `ORDER BY` key of an integer type (a
//! token's `position`), no `DISTINCT` and no `IGNORE NULLS`, this rule gives
//! it to `first_last_by` ([`udfs::first_last`]), which compares the keys as
//! integers and touches only the groups a batch holds. The result is the same
//! row's value (ties: the row seen first, as DataFusion keeps it), under the
//! same output name.

use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr::{AggregateFunction, NullTreatment};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{lit, Aggregate, Expr, ExprSchemable, LogicalPlan};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

use super::udfs::first_last::{self, is_key_type};

/// See the module documentation.
#[derive(Debug, Default)]
pub struct FirstLastByInteger;

/// `first_last_by(...)` for a call this rule takes, else `None`.
fn rewrite(expr: &Expr, input: &DFSchema) -> Option<Expr> {
    let Expr::AggregateFunction(AggregateFunction { func, params }) = expr else { return None };
    let last = match func.name() {
        "first_value" => false,
        "last_value" => true,
        _ => return None,
    };
    let ([value], [order]) = (params.args.as_slice(), params.order_by.as_slice()) else { return None };
    if params.distinct || matches!(params.null_treatment, Some(NullTreatment::IgnoreNulls)) {
        return None;
    }
    if !order.expr.get_type(input).is_ok_and(|t| is_key_type(&t)) {
        return None;
    }
    let flag = |b: bool| lit(i64::from(b));
    let args = vec![value.clone(), order.expr.clone(), flag(last), flag(!order.asc), flag(order.nulls_first)];
    let call = AggregateFunction::new_udf(
        Arc::new(first_last::first_last_by()),
        args,
        false,
        params.filter.clone(),
        vec![],
        None,
    );
    Some(Expr::AggregateFunction(call))
}

impl OptimizerRule for FirstLastByInteger {
    fn name(&self) -> &str {
        "first_last_by_integer"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        let LogicalPlan::Aggregate(agg) = plan else { return Ok(Transformed::no(plan)) };
        let names = NamePreserver::new_for_projection();
        let mut changed = false;
        let aggr_expr: Vec<Expr> = agg
            .aggr_expr
            .iter()
            .map(|e| {
                let inner = match e {
                    Expr::Alias(alias) => alias.expr.as_ref(),
                    other => other,
                };
                match rewrite(inner, agg.input.schema()) {
                    Some(new) => {
                        changed = true;
                        names.save(e).restore(new)
                    }
                    None => e.clone(),
                }
            })
            .collect();
        if !changed {
            return Ok(Transformed::no(LogicalPlan::Aggregate(agg)));
        }
        let new = Aggregate::try_new_with_schema(
            Arc::clone(&agg.input),
            agg.group_expr.clone(),
            aggr_expr,
            Arc::clone(&agg.schema),
        )?;
        Ok(Transformed::yes(LogicalPlan::Aggregate(new)))
    }
}
