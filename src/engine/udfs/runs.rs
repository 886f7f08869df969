//! `longest_run(x)`: the length of the longest run of consecutive integers
//! among a group's values — with a `FILTER`, the longest stretch of flagged
//! positions (`confidence`'s longest low-confidence span; docs/metrics.md).
//! One aggregate over the rows, where SQL alone needs a window sort and a
//! second grouping (gaps and islands).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array};
use arrow::datatypes::{DataType, FieldRef, Int64Type};
use datafusion::common::{plan_err, ScalarValue};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, Signature, Volatility,
};

use super::{int64s, int_list_of, list_state_field, passes};

/// The longest-run aggregate.
pub fn longest_run() -> AggregateUDF {
    AggregateUDF::from(LongestRun { signature: Signature::any(1, Volatility::Immutable) })
}

/// The most values `v, v + 1, ..., v + k - 1` all present in `values`
/// (a value present twice counts once); 0 for none. Sorts `values`.
pub fn longest_run_of(values: &mut [i64]) -> i64 {
    values.sort_unstable();
    let (mut best, mut current, mut previous) = (0i64, 0i64, None::<i64>);
    for &v in values.iter() {
        if previous == Some(v) {
            continue;
        }
        current = if previous.and_then(|p| p.checked_add(1)) == Some(v) { current + 1 } else { 1 };
        best = best.max(current);
        previous = Some(v);
    }
    best
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct LongestRun {
    signature: Signature,
}

impl AggregateUDFImpl for LongestRun {
    fn name(&self) -> &str {
        "longest_run"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        match arg_types {
            [t] if t.is_integer() || t.is_null() => Ok(DataType::Int64),
            _ => plan_err!("longest_run needs one integer column, got {arg_types:?}"),
        }
    }
    fn is_nullable(&self) -> bool {
        false
    }
    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        Ok(vec![list_state_field(args.name, "values", DataType::Int64)])
    }
    fn accumulator(&self, _args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        Ok(Box::new(ValuesAcc::default()))
    }
    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }
    fn create_groups_accumulator(&self, _args: AccumulatorArgs) -> DfResult<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(ValueGroups::default()))
    }
    fn default_value(&self, _data_type: &DataType) -> DfResult<ScalarValue> {
        Ok(ScalarValue::Int64(Some(0)))
    }
}

/// The integers of the list at row `i` of a state column.
fn listed(state: &ArrayRef, i: usize) -> impl Iterator<Item = i64> + '_ {
    let lists = state.as_list::<i32>();
    let (start, end) = (lists.value_offsets()[i] as usize, lists.value_offsets()[i + 1] as usize);
    let items = lists.values().as_primitive::<Int64Type>();
    (start..end).filter(|&j| items.is_valid(j)).map(|j| items.value(j))
}

/// One group's values.
#[derive(Debug, Default)]
struct ValuesAcc {
    values: Vec<i64>,
}

impl Accumulator for ValuesAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        self.values.extend(int64s(&values[0])?.iter().flatten());
        Ok(())
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        for i in (0..states[0].len()).filter(|&i| states[0].is_valid(i)) {
            self.values.extend(listed(&states[0], i));
        }
        Ok(())
    }
    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        let list = int_list_of(vec![std::mem::take(&mut self.values)]);
        Ok(vec![ScalarValue::List(Arc::new(list.as_list::<i32>().clone()))])
    }
    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        Ok(ScalarValue::Int64(Some(longest_run_of(&mut self.values))))
    }
    fn size(&self) -> usize {
        size_of_val(self) + self.values.capacity() * size_of::<i64>()
    }
}

/// Every group's values, in group-index order.
#[derive(Debug, Default)]
struct ValueGroups {
    groups: Vec<Vec<i64>>,
}

impl GroupsAccumulator for ValueGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> DfResult<()> {
        self.groups.resize_with(total_num_groups, Vec::new);
        let values = int64s(&values[0])?;
        for (i, &g) in group_indices.iter().enumerate() {
            if values.is_valid(i) && passes(opt_filter, i) {
                self.groups[g].push(values.value(i));
            }
        }
        Ok(())
    }
    fn evaluate(&mut self, emit_to: EmitTo) -> DfResult<ArrayRef> {
        let mut groups = emit_to.take_needed(&mut self.groups);
        let out: Int64Array = groups.iter_mut().map(|g| Some(longest_run_of(g))).collect();
        Ok(Arc::new(out))
    }
    fn state(&mut self, emit_to: EmitTo) -> DfResult<Vec<ArrayRef>> {
        Ok(vec![int_list_of(emit_to.take_needed(&mut self.groups))])
    }
    fn merge_batch(&mut self, values: &[ArrayRef], group_indices: &[usize], total_num_groups: usize) -> DfResult<()> {
        self.groups.resize_with(total_num_groups, Vec::new);
        for (i, &g) in group_indices.iter().enumerate() {
            if values[0].is_valid(i) {
                self.groups[g].extend(listed(&values[0], i));
            }
        }
        Ok(())
    }
    fn convert_to_state(&self, values: &[ArrayRef], opt_filter: Option<&BooleanArray>) -> DfResult<Vec<ArrayRef>> {
        // One list per row: its value, or none (null or filtered out).
        let values = int64s(&values[0])?;
        let keep = |i: usize| values.is_valid(i) && passes(opt_filter, i);
        Ok(vec![int_list_of(
            (0..values.len()).map(|i| if keep(i) { vec![values.value(i)] } else { Vec::new() }).collect(),
        )])
    }
    fn size(&self) -> usize {
        size_of_val(self)
            + self.groups.iter().map(|g| g.capacity() * size_of::<i64>() + size_of::<Vec<i64>>()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::longest_run_of;

    #[test]
    fn longest_run_counts_consecutive_integers_once_each() {
        // 1 2 3 | 5 6 | 9: the longest run is 1..=3.
        assert_eq!(longest_run_of(&mut [9, 1, 5, 2, 6, 3]), 3);
        // Duplicates neither lengthen nor break a run.
        assert_eq!(longest_run_of(&mut [4, 4, 5, 5, 6]), 3);
        assert_eq!(longest_run_of(&mut [7]), 1);
        assert_eq!(longest_run_of(&mut []), 0);
        // Negative values and the ends of the range.
        assert_eq!(longest_run_of(&mut [-2, -1, 0, 2]), 3);
        assert_eq!(longest_run_of(&mut [i64::MAX, i64::MIN, i64::MAX - 1]), 2);
    }
}
