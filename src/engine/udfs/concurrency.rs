//! `max_overlap(start, end)`: the most half-open intervals `[start, end)` of a
//! group that contain one common instant — the peak concurrency of requests
//! in flight (`throughput`, `load_summary`; docs/metrics.md).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array};
use arrow::compute::cast;
use arrow::datatypes::{DataType, FieldRef, Float64Type};
use datafusion::common::{plan_err, ScalarValue};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, Signature, Volatility,
};

use super::{list_of, list_state_field, passes};

/// The peak-concurrency aggregate.
pub fn max_overlap() -> AggregateUDF {
    AggregateUDF::from(MaxOverlap { signature: Signature::any(2, Volatility::Immutable) })
}

/// The most intervals `[start, end)` that contain one instant: events sorted
/// by time, ends before starts at the same time (an interval that ends at `t`
/// is not in flight at `t`), and the running count's maximum. Empty or
/// reversed intervals (`end <= start`) contain no instant; no interval gives 0.
pub fn max_overlap_of(starts: &[f64], ends: &[f64]) -> i64 {
    let mut events: Vec<(f64, i64)> = Vec::with_capacity(starts.len() * 2);
    for (&s, &e) in starts.iter().zip(ends) {
        if e > s {
            events.push((s, 1));
            events.push((e, -1));
        }
    }
    events.sort_unstable_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    let (mut running, mut peak) = (0i64, 0i64);
    for (_, delta) in events {
        running += delta;
        peak = peak.max(running);
    }
    peak
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct MaxOverlap {
    signature: Signature,
}

impl AggregateUDFImpl for MaxOverlap {
    fn name(&self) -> &str {
        "max_overlap"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        for t in arg_types {
            if !(t.is_numeric() || t.is_null() || matches!(t, DataType::Timestamp(_, _))) {
                return plan_err!("max_overlap needs numeric or timestamp bounds, got {t}");
            }
        }
        if arg_types.first() != arg_types.get(1) && arg_types.iter().any(|t| matches!(t, DataType::Timestamp(_, _))) {
            return plan_err!("max_overlap: start and end must have the same type, got {arg_types:?}");
        }
        Ok(DataType::Int64)
    }
    fn is_nullable(&self) -> bool {
        false
    }
    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        Ok(vec![
            list_state_field(args.name, "starts", DataType::Float64),
            list_state_field(args.name, "ends", DataType::Float64),
        ])
    }
    fn accumulator(&self, _args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        Ok(Box::new(IntervalsAcc::default()))
    }
    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }
    fn create_groups_accumulator(&self, _args: AccumulatorArgs) -> DfResult<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(IntervalGroups::default()))
    }
    fn default_value(&self, _data_type: &DataType) -> DfResult<ScalarValue> {
        Ok(ScalarValue::Int64(Some(0)))
    }
}

/// A bound column as floats: timestamps by their integer value, numbers as they are.
fn bounds(array: &ArrayRef) -> DfResult<ArrayRef> {
    let array = match array.data_type() {
        DataType::Timestamp(_, _) => cast(array, &DataType::Int64)?,
        _ => Arc::clone(array),
    };
    Ok(cast(&array, &DataType::Float64)?)
}

/// The intervals of row `i` of `(starts, ends)` that are usable: both bounds non-null.
fn valid(starts: &Float64Array, ends: &Float64Array, i: usize) -> bool {
    starts.is_valid(i) && ends.is_valid(i)
}

/// One group's intervals.
#[derive(Debug, Default)]
struct IntervalsAcc {
    starts: Vec<f64>,
    ends: Vec<f64>,
}

impl Accumulator for IntervalsAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        let (s, e) = (bounds(&values[0])?, bounds(&values[1])?);
        let (s, e) = (s.as_primitive::<Float64Type>(), e.as_primitive::<Float64Type>());
        for i in (0..s.len()).filter(|&i| valid(s, e, i)) {
            self.starts.push(s.value(i));
            self.ends.push(e.value(i));
        }
        Ok(())
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let (s, e) = (states[0].as_list::<i32>(), states[1].as_list::<i32>());
        for i in (0..s.len()).filter(|&i| s.is_valid(i) && e.is_valid(i)) {
            self.starts.extend(s.value(i).as_primitive::<Float64Type>().values().iter());
            self.ends.extend(e.value(i).as_primitive::<Float64Type>().values().iter());
        }
        Ok(())
    }
    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        let starts = list_of(vec![std::mem::take(&mut self.starts)]);
        let ends = list_of(vec![std::mem::take(&mut self.ends)]);
        Ok(vec![
            ScalarValue::List(Arc::new(starts.as_list::<i32>().clone())),
            ScalarValue::List(Arc::new(ends.as_list::<i32>().clone())),
        ])
    }
    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        Ok(ScalarValue::Int64(Some(max_overlap_of(&self.starts, &self.ends))))
    }
    fn size(&self) -> usize {
        size_of_val(self) + (self.starts.capacity() + self.ends.capacity()) * size_of::<f64>()
    }
}

/// Every group's intervals, in group-index order.
#[derive(Debug, Default)]
struct IntervalGroups {
    starts: Vec<Vec<f64>>,
    ends: Vec<Vec<f64>>,
}

impl IntervalGroups {
    fn resize(&mut self, total: usize) {
        self.starts.resize_with(total, Vec::new);
        self.ends.resize_with(total, Vec::new);
    }
}

impl GroupsAccumulator for IntervalGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> DfResult<()> {
        self.resize(total_num_groups);
        let (s, e) = (bounds(&values[0])?, bounds(&values[1])?);
        let (s, e) = (s.as_primitive::<Float64Type>(), e.as_primitive::<Float64Type>());
        for (i, &g) in group_indices.iter().enumerate() {
            if valid(s, e, i) && passes(opt_filter, i) {
                self.starts[g].push(s.value(i));
                self.ends[g].push(e.value(i));
            }
        }
        Ok(())
    }
    fn evaluate(&mut self, emit_to: EmitTo) -> DfResult<ArrayRef> {
        let starts = emit_to.take_needed(&mut self.starts);
        let ends = emit_to.take_needed(&mut self.ends);
        let out: Int64Array = starts.iter().zip(&ends).map(|(s, e)| Some(max_overlap_of(s, e))).collect();
        Ok(Arc::new(out))
    }
    fn state(&mut self, emit_to: EmitTo) -> DfResult<Vec<ArrayRef>> {
        Ok(vec![list_of(emit_to.take_needed(&mut self.starts)), list_of(emit_to.take_needed(&mut self.ends))])
    }
    fn merge_batch(&mut self, values: &[ArrayRef], group_indices: &[usize], total_num_groups: usize) -> DfResult<()> {
        self.resize(total_num_groups);
        let (s, e) = (values[0].as_list::<i32>(), values[1].as_list::<i32>());
        let (flat_s, flat_e) =
            (s.values().as_primitive::<Float64Type>().values(), e.values().as_primitive::<Float64Type>().values());
        let (off_s, off_e) = (s.value_offsets(), e.value_offsets());
        for (i, &g) in group_indices.iter().enumerate() {
            if s.is_valid(i) && e.is_valid(i) {
                self.starts[g].extend_from_slice(&flat_s[off_s[i] as usize..off_s[i + 1] as usize]);
                self.ends[g].extend_from_slice(&flat_e[off_e[i] as usize..off_e[i + 1] as usize]);
            }
        }
        Ok(())
    }
    fn convert_to_state(&self, values: &[ArrayRef], opt_filter: Option<&BooleanArray>) -> DfResult<Vec<ArrayRef>> {
        let (s, e) = (bounds(&values[0])?, bounds(&values[1])?);
        let (s, e) = (s.as_primitive::<Float64Type>(), e.as_primitive::<Float64Type>());
        let keep = |i: usize| valid(s, e, i) && passes(opt_filter, i);
        let one = |a: &Float64Array, i: usize| if keep(i) { vec![a.value(i)] } else { Vec::new() };
        Ok(vec![list_of((0..s.len()).map(|i| one(s, i)).collect()), list_of((0..e.len()).map(|i| one(e, i)).collect())])
    }
    fn size(&self) -> usize {
        size_of_val(self)
            + self
                .starts
                .iter()
                .chain(&self.ends)
                .map(|g| g.capacity() * size_of::<f64>() + size_of::<Vec<f64>>())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::max_overlap_of;

    #[test]
    fn peak_counts_intervals_in_flight_at_one_instant() {
        // [0,10) [5,15) [10,20): at t = 5..10 two are in flight; at t = 10 the
        // first has ended as the third starts: still two.
        assert_eq!(max_overlap_of(&[0.0, 5.0, 10.0], &[10.0, 15.0, 20.0]), 2);
        // Nested: [0,100) holds [10,20) and [15,30): three at t = 15..20.
        assert_eq!(max_overlap_of(&[0.0, 10.0, 15.0], &[100.0, 20.0, 30.0]), 3);
        // Back to back never overlap; empty and reversed intervals never count.
        assert_eq!(max_overlap_of(&[0.0, 1.0, 2.0], &[1.0, 2.0, 3.0]), 1);
        assert_eq!(max_overlap_of(&[5.0, 7.0], &[5.0, 6.0]), 0);
        assert_eq!(max_overlap_of(&[], &[]), 0);
    }
}
