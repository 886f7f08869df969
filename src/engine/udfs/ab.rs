//! SQL functions that compare the two arms of an A/B experiment (the `ab`
//! job): each arm's values are collected by an aggregate (`count`,
//! `array_agg`), and these scalar functions compare the collected values, so
//! every step stays plain SQL (and runs on any engine that has the functions).
//! Holm's correction across bins is a window function. Definitions:
//! docs/metrics.md, "ab"; implementations: `tokscope_core::stats::ab`.
//!
//! Arm A is the control, arm B the treatment: every comparison is B against
//! A (`diff = value_b - value_a`, or `value_b / value_a` for the cost ratio),
//! and every one returns the same struct ([`COMPARISON_FIELDS`]), so a job
//! lists them side by side.
//!
//! - `compare_proportions(x_a, n_a, x_b, n_b)`: rates, Newcombe interval of
//!   the difference, two-proportion z-test.
//! - `compare_medians(a, b, resamples, seed)`: medians of two lists, bootstrap
//!   interval of the difference, Mann-Whitney U test.
//! - `compare_quantiles(a, b, p, resamples, seed)`: type-7 quantiles of two
//!   lists, bootstrap interval of the difference, no test.
//! - `compare_std_devs(a, b, resamples, seed)`: sample standard deviations,
//!   bootstrap interval of the difference, no test.
//! - `compare_cost_per_1k(cost_a, tokens_a, cost_b, tokens_b, resamples, seed)`:
//!   cost per 1K tokens of each arm, bootstrap interval of the ratio.
//! - `sample_ratio_test(n_a, n_b, share_b)`: each arm's share of the requests,
//!   chi-square test of the split against the intended one.
//! - `holm_adjust(p) OVER (PARTITION BY ...)`: Holm-adjusted p-values of a family.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Float64Array, Float64Builder, ListArray, StructArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, FieldRef, Fields, Float64Type, Int64Type};
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::function::{PartitionEvaluatorArgs, WindowUDFFieldArgs};
use datafusion::logical_expr::{
    ColumnarValue, PartitionEvaluator, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility, WindowUDF,
    WindowUDFImpl,
};
use rayon::prelude::*;
use tokscope_core::stats::ab::{self, AbError, BootstrapConfig, BootstrapInterval, Proportion, RequestCost};

/// The fields of every comparison: each arm's value, the effect of B against
/// A (`diff`: a difference, or the cost ratio) with its 95% interval, and the
/// p-value of its test (null where none applies).
pub const COMPARISON_FIELDS: [&str; 6] = ["value_a", "value_b", "diff", "ci_low", "ci_high", "p_value"];

fn struct_fields(names: &[&str]) -> Fields {
    names.iter().map(|n| Field::new(*n, DataType::Float64, true)).collect()
}

/// `compare_proportions(x_a, n_a, x_b, n_b)`.
pub fn compare_proportions() -> ScalarUDF {
    Comparison::udf(Kind::Proportions)
}

/// `compare_medians(a, b, resamples, seed)`.
pub fn compare_medians() -> ScalarUDF {
    Comparison::udf(Kind::Medians)
}

/// `compare_quantiles(a, b, p, resamples, seed)`.
pub fn compare_quantiles() -> ScalarUDF {
    Comparison::udf(Kind::Quantiles)
}

/// `compare_std_devs(a, b, resamples, seed)`.
pub fn compare_std_devs() -> ScalarUDF {
    Comparison::udf(Kind::StdDevs)
}

/// `compare_cost_per_1k(cost_a, tokens_a, cost_b, tokens_b, resamples, seed)`.
pub fn compare_cost_per_1k() -> ScalarUDF {
    Comparison::udf(Kind::CostPer1k)
}

/// `sample_ratio_test(n_a, n_b, share_b)`.
pub fn sample_ratio_test() -> ScalarUDF {
    Comparison::udf(Kind::SampleRatio)
}

/// Which comparison a [`Comparison`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Proportions,
    Medians,
    Quantiles,
    StdDevs,
    CostPer1k,
    SampleRatio,
}

impl Kind {
    /// The SQL name and the number of arguments.
    fn name_and_arity(self) -> (&'static str, usize) {
        match self {
            Kind::Proportions => ("compare_proportions", 4),
            Kind::Medians => ("compare_medians", 4),
            Kind::Quantiles => ("compare_quantiles", 5),
            Kind::StdDevs => ("compare_std_devs", 4),
            Kind::CostPer1k => ("compare_cost_per_1k", 6),
            Kind::SampleRatio => ("sample_ratio_test", 3),
        }
    }
}

/// Every comparison function: the same struct out ([`COMPARISON_FIELDS`]),
/// its rows computed by the function of its kind.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Comparison {
    kind: Kind,
    signature: Signature,
}

impl Comparison {
    fn udf(kind: Kind) -> ScalarUDF {
        ScalarUDF::from(Comparison { kind, signature: Signature::any(kind.name_and_arity().1, Volatility::Immutable) })
    }
}

impl ScalarUDFImpl for Comparison {
    fn name(&self) -> &str {
        self.kind.name_and_arity().0
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(comparison_type())
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let name = self.name();
        match self.kind {
            Kind::Proportions => invoke_proportions(&args),
            Kind::Medians => compare_lists(&args, name, 2, |a, b, config, _| medians_row(a, b, config)),
            Kind::Quantiles => invoke_quantiles(&args, name),
            Kind::StdDevs => compare_lists(&args, name, 2, |a, b, config, _| std_devs_row(a, b, config)),
            Kind::CostPer1k => invoke_cost_per_1k(&args, name),
            Kind::SampleRatio => invoke_sample_ratio(&args),
        }
    }
}

/// `holm_adjust(p) OVER (PARTITION BY family)`.
pub fn holm_adjust() -> WindowUDF {
    WindowUDF::from(HolmAdjust { signature: Signature::any(1, Volatility::Immutable) })
}

/// One output row of a comparison: each field `None` where undefined.
type Row = Vec<Option<f64>>;

/// A comparison's struct column from rows of optional floats (a field is
/// null where the row has `None`; the struct itself is never null).
fn struct_of(rows: Vec<Row>) -> DfResult<ColumnarValue> {
    let names = &COMPARISON_FIELDS;
    let mut builders: Vec<Float64Builder> = names.iter().map(|_| Float64Builder::with_capacity(rows.len())).collect();
    for row in rows {
        for (b, v) in builders.iter_mut().zip(row) {
            b.append_option(v.filter(|x| x.is_finite()));
        }
    }
    let children: Vec<ArrayRef> = builders.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef).collect();
    Ok(ColumnarValue::Array(Arc::new(StructArray::try_new(struct_fields(names), children, None)?)))
}

/// The return type of every comparison.
fn comparison_type() -> DataType {
    DataType::Struct(struct_fields(&COMPARISON_FIELDS))
}

/// A comparison whose effect exists: values, `diff` and its interval, `p`.
fn compared(value_a: f64, value_b: f64, diff: &BootstrapInterval, p_value: Option<f64>) -> Row {
    vec![Some(value_a), Some(value_b), Some(diff.estimate), Some(diff.lo), Some(diff.hi), p_value]
}

/// A comparison without an effect: the arms' values where they exist.
fn values_only(value_a: Option<f64>, value_b: Option<f64>) -> Row {
    vec![value_a, value_b, None, None, None, None]
}

/// Row `i` of two list columns as finite values (nulls and non-finite values
/// left out, as `quantile_cont` leaves out NaN).
fn finite_arms(a: &ListArray, b: &ListArray, i: usize) -> (Vec<f64>, Vec<f64>) {
    let finite = |v: Vec<Option<f64>>| -> Vec<f64> { v.into_iter().flatten().filter(|x| x.is_finite()).collect() };
    (finite(row_values(a, i)), finite(row_values(b, i)))
}

/// Rows of a comparison of two lists per row (`a`, `b` the first two
/// arguments, bootstrap settings at `config_at`), computed in parallel: each
/// row sorts its two arms.
fn compare_lists(
    args: &ScalarFunctionArgs,
    function: &str,
    config_at: usize,
    row: impl Fn(Vec<f64>, Vec<f64>, BootstrapConfig, usize) -> DfResult<Row> + Sync,
) -> DfResult<ColumnarValue> {
    let arrays = arrays(args)?;
    let (a, b) = (float_lists(&arrays[0], function)?, float_lists(&arrays[1], function)?);
    let configs = (0..args.number_rows)
        .map(|i| bootstrap_config(&arrays[config_at], &arrays[config_at + 1], i, function))
        .collect::<DfResult<Vec<_>>>()?;
    let rows = configs
        .into_par_iter()
        .enumerate()
        .map(|(i, config)| {
            let (a, b) = finite_arms(&a, &b, i);
            row(a, b, config, i)
        })
        .collect::<DfResult<Vec<_>>>()?;
    struct_of(rows)
}

/// The arguments as arrays of one length (scalars expanded).
fn arrays(args: &ScalarFunctionArgs) -> DfResult<Vec<ArrayRef>> {
    ColumnarValue::values_to_arrays(&args.args)
}

fn list_of_f64() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true)))
}

/// Argument `array` as a list of floats (lists of integers are converted).
fn float_lists(array: &ArrayRef, function: &str) -> DfResult<ListArray> {
    match array.data_type() {
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(_, _) | DataType::Null => {
            Ok(cast(array, &list_of_f64())?.as_list::<i32>().clone())
        }
        other => exec_err!("{function}: expected a list (array_agg of the arm's values), got {other}"),
    }
}

/// Row `i` of a list column: its non-null values (an empty list when the row is null).
fn row_values(lists: &ListArray, i: usize) -> Vec<Option<f64>> {
    if lists.is_null(i) {
        return Vec::new();
    }
    lists.value(i).as_primitive::<Float64Type>().iter().collect()
}

/// `resamples` and `seed` of row `i`: a positive integer and a non-negative one.
fn bootstrap_config(resamples: &ArrayRef, seed: &ArrayRef, i: usize, function: &str) -> DfResult<BootstrapConfig> {
    let r = cast(resamples, &DataType::Float64)?;
    let s = cast(seed, &DataType::Float64)?;
    let (r, s) = (r.as_primitive::<Float64Type>(), s.as_primitive::<Float64Type>());
    match (r.is_valid(i).then(|| r.value(i)), s.is_valid(i).then(|| s.value(i))) {
        (Some(r), Some(s)) if r >= 1.0 && r.fract() == 0.0 && s >= 0.0 && s.fract() == 0.0 && r <= 1e7 => {
            Ok(BootstrapConfig { resamples: r as usize, seed: s as u64 })
        }
        _ => exec_err!("{function}: resamples must be an integer in 1..=10000000 and seed a non-negative integer"),
    }
}

// ---------------------------------------------------------------- compare_proportions

/// The comparison of `x_a / n_a` with `x_b / n_b` (docs/metrics.md, "ab").
fn proportions_row(xa: i64, na: i64, xb: i64, nb: i64) -> DfResult<Row> {
    let arm = |x: i64, n: i64| -> DfResult<Option<Proportion>> {
        if x < 0 || n < 0 {
            return exec_err!("compare_proportions: counts must be non-negative, got {x} of {n}");
        }
        match Proportion::new(x as u64, n as u64) {
            Ok(p) => Ok(Some(p)),
            Err(AbError::EmptyArm) => Ok(None),
            Err(e) => exec_err!("compare_proportions: {e}"),
        }
    };
    let (a, b) = (arm(xa, na)?, arm(xb, nb)?);
    let (value_a, value_b) = (a.map(|p| p.rate()), b.map(|p| p.rate()));
    let Some((a, b)) = a.zip(b) else { return Ok(values_only(value_a, value_b)) };
    // B - A: the building blocks compute first minus second.
    let ci = ab::newcombe_difference_interval(b, a);
    let test = ab::two_proportion_z_test(b, a);
    Ok(vec![value_a, value_b, Some(b.rate() - a.rate()), Some(ci.lo), Some(ci.hi), Some(test.p_value)])
}

/// Rows of `compare_proportions`.
fn invoke_proportions(args: &ScalarFunctionArgs) -> DfResult<ColumnarValue> {
    let arrays = arrays(args)?;
    let ints = arrays.iter().map(|a| cast(a, &DataType::Int64)).collect::<Result<Vec<_>, _>>()?;
    let ints: Vec<_> = ints.iter().map(|a| a.as_primitive::<Int64Type>()).collect();
    let rows = (0..args.number_rows)
        .map(|i| {
            if ints.iter().any(|a| a.is_null(i)) {
                return Ok(vec![None; COMPARISON_FIELDS.len()]);
            }
            proportions_row(ints[0].value(i), ints[1].value(i), ints[2].value(i), ints[3].value(i))
        })
        .collect::<DfResult<Vec<_>>>()?;
    struct_of(rows)
}

// ---------------------------------------------------------------- compare_medians

/// The comparison of the medians of two samples; an empty arm has no median.
fn medians_row(a: Vec<f64>, b: Vec<f64>, config: BootstrapConfig) -> DfResult<Row> {
    match ab::compare_medians(&a, &b, config) {
        Ok(c) => Ok(compared(c.median_a, c.median_b, &c.difference, Some(c.mann_whitney.p_value))),
        Err(AbError::EmptyArm) => Ok(values_only(ab::median(&a), ab::median(&b))),
        Err(e) => exec_err!("compare_medians: {e}"),
    }
}

// ---------------------------------------------------------------- compare_quantiles

/// The type-7 `p`-quantile of a sorted copy of `values`; `None` when empty.
fn quantile_of(values: &[f64], p: f64) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    (!sorted.is_empty()).then(|| tokscope_core::stats::quantile_sorted(&sorted, p))
}

/// The comparison of one quantile of two samples: no test (null p-value).
fn quantiles_row(a: Vec<f64>, b: Vec<f64>, p: f64, config: BootstrapConfig) -> DfResult<Row> {
    match ab::compare_quantiles(&a, &b, p, config) {
        Ok(c) => Ok(compared(c.quantile_a, c.quantile_b, &c.difference, None)),
        Err(AbError::EmptyArm) => Ok(values_only(quantile_of(&a, p), quantile_of(&b, p))),
        Err(e) => exec_err!("compare_quantiles: {e}"),
    }
}

/// Rows of `compare_quantiles`: the probability is the third argument.
fn invoke_quantiles(args: &ScalarFunctionArgs, name: &str) -> DfResult<ColumnarValue> {
    let probability = cast(&arrays(args)?[2], &DataType::Float64)?;
    let probability = probability.as_primitive::<Float64Type>().clone();
    compare_lists(args, name, 3, |a, b, config, i| {
        match probability.is_valid(i).then(|| probability.value(i)).filter(|p| (0.0..=1.0).contains(p)) {
            Some(p) => quantiles_row(a, b, p, config),
            None => exec_err!("compare_quantiles: p must be a number in [0, 1]"),
        }
    })
}

// ---------------------------------------------------------------- compare_std_devs

/// The comparison of the sample standard deviations of two samples: no test;
/// an arm of fewer than two values has none.
fn std_devs_row(a: Vec<f64>, b: Vec<f64>, config: BootstrapConfig) -> DfResult<Row> {
    match ab::compare_std_devs(&a, &b, config) {
        Ok(c) => Ok(compared(c.std_dev_a, c.std_dev_b, &c.difference, None)),
        Err(AbError::EmptyArm | AbError::SingleValue) => {
            let std_dev = |v: &[f64]| tokscope_core::stats::sample_std_dev(v.iter().copied());
            Ok(values_only(std_dev(&a), std_dev(&b)))
        }
        Err(e) => exec_err!("compare_std_devs: {e}"),
    }
}

// ---------------------------------------------------------------- compare_cost_per_1k

/// An arm's priced requests, in `(cost, tokens)` order (so the values do not
/// depend on the order rows arrive in): pairs with a null cost or null tokens
/// are left out.
fn request_costs(cost: Vec<Option<f64>>, tokens: Vec<Option<f64>>) -> DfResult<Vec<RequestCost>> {
    if cost.len() != tokens.len() {
        return exec_err!(
            "compare_cost_per_1k: an arm's cost and tokens lists differ in length ({} and {})",
            cost.len(),
            tokens.len()
        );
    }
    cost.into_iter()
        .zip(tokens)
        .filter_map(|(c, t)| Some((c?, t?)))
        .map(|(cost_usd, t)| {
            if t < 0.0 || t.fract() != 0.0 || !t.is_finite() {
                return exec_err!("compare_cost_per_1k: tokens must be non-negative integers, got {t}");
            }
            Ok(RequestCost { tokens: t as u64, cost_usd })
        })
        .collect::<DfResult<Vec<_>>>()
        .map(|arm| ab::sorted_requests(&arm))
}

fn cost_row(a: Vec<RequestCost>, b: Vec<RequestCost>, config: BootstrapConfig) -> DfResult<Row> {
    let per_1k = |arm: &[RequestCost]| Some(ab::cost_per_1k(arm)).filter(|v| v.is_finite());
    let (value_a, value_b) = (per_1k(&a), per_1k(&b));
    match ab::bootstrap_cost_ratio(&a, &b, config) {
        Ok(r) => Ok(vec![value_a, value_b, Some(r.estimate), Some(r.lo), Some(r.hi), None]),
        Err(AbError::EmptyArm | AbError::UndefinedRatio) => Ok(values_only(value_a, value_b)),
        Err(e) => exec_err!("compare_cost_per_1k: {e}"),
    }
}

/// Rows of `compare_cost_per_1k`.
fn invoke_cost_per_1k(args: &ScalarFunctionArgs, name: &str) -> DfResult<ColumnarValue> {
    let arrays = arrays(args)?;
    let lists = arrays[..4].iter().map(|a| float_lists(a, name)).collect::<DfResult<Vec<_>>>()?;
    let arms = (0..args.number_rows)
        .map(|i| {
            let a = request_costs(row_values(&lists[0], i), row_values(&lists[1], i))?;
            let b = request_costs(row_values(&lists[2], i), row_values(&lists[3], i))?;
            Ok((a, b, bootstrap_config(&arrays[4], &arrays[5], i, name)?))
        })
        .collect::<DfResult<Vec<_>>>()?;
    let rows = arms.into_par_iter().map(|(a, b, config)| cost_row(a, b, config)).collect::<DfResult<Vec<_>>>()?;
    struct_of(rows)
}

// ---------------------------------------------------------------- sample_ratio_test

/// Each arm's share of `n_a + n_b` requests; `diff` = B's share minus the
/// intended `share_b`, its interval the Wilson interval of B's share minus
/// `share_b`, and the chi-square test of the split (docs/metrics.md, "ab").
fn sample_ratio_row(n_a: i64, n_b: i64, share_b: f64) -> DfResult<Row> {
    if n_a < 0 || n_b < 0 {
        return exec_err!("sample_ratio_test: counts must be non-negative, got {n_a} and {n_b}");
    }
    match ab::sample_ratio_test(n_a as u64, n_b as u64, share_b) {
        Ok(t) => Ok(vec![
            Some(1.0 - t.share_b),
            Some(t.share_b),
            Some(t.share_b - share_b),
            Some(t.share_b_interval.lo - share_b),
            Some(t.share_b_interval.hi - share_b),
            Some(t.p_value),
        ]),
        Err(AbError::EmptyArm) => Ok(values_only(None, None)),
        Err(e) => exec_err!("sample_ratio_test: {e}"),
    }
}

/// Rows of `sample_ratio_test`.
fn invoke_sample_ratio(args: &ScalarFunctionArgs) -> DfResult<ColumnarValue> {
    let arrays = arrays(args)?;
    let counts = arrays[..2].iter().map(|a| cast(a, &DataType::Int64)).collect::<Result<Vec<_>, _>>()?;
    let (n_a, n_b) = (counts[0].as_primitive::<Int64Type>(), counts[1].as_primitive::<Int64Type>());
    let share = cast(&arrays[2], &DataType::Float64)?;
    let share = share.as_primitive::<Float64Type>();
    let rows = (0..args.number_rows)
        .map(|i| {
            if n_a.is_null(i) || n_b.is_null(i) || share.is_null(i) {
                return Ok(vec![None; COMPARISON_FIELDS.len()]);
            }
            sample_ratio_row(n_a.value(i), n_b.value(i), share.value(i))
        })
        .collect::<DfResult<Vec<_>>>()?;
    struct_of(rows)
}

// ---------------------------------------------------------------- holm_adjust

#[derive(Debug, PartialEq, Eq, Hash)]
struct HolmAdjust {
    signature: Signature,
}

impl WindowUDFImpl for HolmAdjust {
    fn name(&self) -> &str {
        "holm_adjust"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn field(&self, field_args: WindowUDFFieldArgs) -> DfResult<FieldRef> {
        match field_args.get_input_field(0).map(|f| f.data_type().clone()) {
            Some(t) if t.is_numeric() || t.is_null() => {
                Ok(Arc::new(Field::new(field_args.name(), DataType::Float64, true)))
            }
            Some(t) => plan_err!("holm_adjust needs a numeric p-value, got {t}"),
            None => plan_err!("holm_adjust takes one argument, the p-value"),
        }
    }
    fn partition_evaluator(&self, _args: PartitionEvaluatorArgs) -> DfResult<Box<dyn PartitionEvaluator>> {
        Ok(Box::new(HolmEvaluator))
    }
}

/// Adjusts all p-values of a partition at once (the family is the partition;
/// the window frame and ordering play no part).
#[derive(Debug)]
struct HolmEvaluator;

impl PartitionEvaluator for HolmEvaluator {
    fn evaluate_all(&mut self, values: &[ArrayRef], _num_rows: usize) -> DfResult<ArrayRef> {
        let p = cast(&values[0], &DataType::Float64)?;
        let p: Vec<Option<f64>> = p.as_primitive::<Float64Type>().iter().collect();
        match ab::holm_adjust(&p) {
            Ok(adjusted) => Ok(Arc::new(Float64Array::from(adjusted))),
            Err(e) => exec_err!("holm_adjust: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proportions_with_an_empty_arm_have_only_the_other_rate() {
        assert_eq!(proportions_row(3, 4, 0, 0).unwrap(), vec![Some(0.75), None, None, None, None, None]);
        assert!(proportions_row(5, 4, 1, 2).is_err());
        assert!(proportions_row(-1, 4, 1, 2).is_err());
    }

    #[test]
    fn proportions_compare_b_against_a() {
        // 5/10 in A, 8/10 in B: B - A = 0.3, Newcombe's interval of B - A
        // (statsmodels: [-0.1092, 0.6165] for 8/10 - 5/10), z-test p 0.1649.
        let row = proportions_row(5, 10, 8, 10).unwrap();
        assert_eq!(row[..2], [Some(0.5), Some(0.8)]);
        assert!((row[2].unwrap() - 0.3).abs() < 1e-15);
        assert!(row[3].unwrap() < 0.0 && row[4].unwrap() > 0.3, "{row:?}");
    }

    #[test]
    fn sample_ratio_rows_give_each_arms_share() {
        // 60 vs 40 against 50/50: B's share 0.4, 0.1 below the split; chi2 = 4.
        let row = sample_ratio_row(60, 40, 0.5).unwrap();
        assert_eq!(row[..2], [Some(0.6), Some(0.4)]);
        assert!((row[2].unwrap() + 0.1).abs() < 1e-15);
        assert!((row[5].unwrap() - 2.0 * ab::normal_sf(2.0)).abs() < 1e-15);
        assert_eq!(sample_ratio_row(0, 0, 0.5).unwrap(), vec![None; 6]);
        assert!(sample_ratio_row(1, 1, 0.0).is_err());
        assert!(sample_ratio_row(-1, 1, 0.5).is_err());
    }

    #[test]
    fn cost_lists_must_align_and_skip_unpriced_requests() {
        let a = request_costs(vec![Some(0.5), None, Some(1.0)], vec![Some(100.0), Some(50.0), Some(300.0)]).unwrap();
        assert_eq!(a, vec![RequestCost { tokens: 100, cost_usd: 0.5 }, RequestCost { tokens: 300, cost_usd: 1.0 }]);
        let b = request_costs(vec![Some(2.0), Some(1.0)], vec![Some(10.0), Some(20.0)]).unwrap();
        assert_eq!(b, vec![RequestCost { tokens: 20, cost_usd: 1.0 }, RequestCost { tokens: 10, cost_usd: 2.0 }]);
        assert!(request_costs(vec![Some(1.0)], vec![]).is_err());
        assert!(request_costs(vec![Some(1.0)], vec![Some(1.5)]).is_err());
    }
}
