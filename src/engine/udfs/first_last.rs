//! `first_last_by(value, key, last, descending, nulls_first)`: `first_value`
//! or `last_value` of `value` ordered by one integer `key`, the form the
//! optimizer rule [`crate::engine::first_last`] gives those calls.
//!
//! Each group holds the key and value of its best row so far; a row replaces
//! it when its key sorts strictly before (first) or after (last) the held one
//! (ties keep the row seen first), and a value is copied out of a batch once
//! per group that batch changed.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array};
use arrow::datatypes::{DataType, Field, FieldRef, Int64Type};
use datafusion::common::{plan_err, ScalarValue};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, Signature, Volatility,
};

use super::{constant_arg, int64s, passes};

const NAME: &str = "first_last_by";

/// The aggregate.
pub fn first_last_by() -> AggregateUDF {
    AggregateUDF::from(FirstLastBy { signature: Signature::any(5, Volatility::Immutable) })
}

/// Which row of a group is kept: the first or the last in the order of
/// `key` (ascending or descending, nulls first or last), as `ORDER BY` sorts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    /// `last_value` rather than `first_value`.
    pub last: bool,
    /// `ORDER BY key DESC`.
    pub descending: bool,
    /// `NULLS FIRST`.
    pub nulls_first: bool,
}

impl Pick {
    /// Whether a row with key `new` replaces the held row with key `held`.
    pub fn replaces(self, new: Option<i64>, held: Option<i64>) -> bool {
        use std::cmp::Ordering;
        let order = match (new, held) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => {
                if self.nulls_first {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (Some(_), None) => {
                if self.nulls_first {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
            (Some(a), Some(b)) => {
                if self.descending {
                    b.cmp(&a)
                } else {
                    a.cmp(&b)
                }
            }
        };
        order == if self.last { Ordering::Greater } else { Ordering::Less }
    }
}

/// Whether `first_last_by` takes keys of this type (they fit in an `i64`).
pub fn is_key_type(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
    )
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct FirstLastBy {
    signature: Signature,
}

impl FirstLastBy {
    fn pick(args: &AccumulatorArgs) -> DfResult<Pick> {
        let flag = |i: usize, what: &str| constant_arg(args, i, NAME, what).map(|x| x != 0.0);
        Ok(Pick {
            last: flag(2, "last flag")?,
            descending: flag(3, "descending flag")?,
            nulls_first: flag(4, "nulls_first flag")?,
        })
    }
}

impl AggregateUDFImpl for FirstLastBy {
    fn name(&self) -> &str {
        NAME
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        match arg_types {
            [value, key, ..] if is_key_type(key) || key.is_null() => Ok(value.clone()),
            _ => plan_err!("{NAME}(value, key, last, descending, nulls_first) needs an integer key, got {arg_types:?}"),
        }
    }
    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        let name = args.name;
        Ok(vec![
            Arc::new(Field::new(format!("{name}[value]"), args.return_field.data_type().clone(), true)),
            Arc::new(Field::new(format!("{name}[key]"), DataType::Int64, true)),
            Arc::new(Field::new(format!("{name}[is_set]"), DataType::Boolean, true)),
        ])
    }
    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        Ok(Box::new(OneGroup(Groups::new(Self::pick(&args)?, args.return_field.data_type().clone()))))
    }
    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }
    fn create_groups_accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(Groups::new(Self::pick(&args)?, args.return_field.data_type().clone())))
    }
}

/// No row of this batch is pending for the group.
const NONE: usize = usize::MAX;

/// Every group's held row, in group-index order.
#[derive(Debug)]
struct Groups {
    pick: Pick,
    data_type: DataType,
    keys: Vec<Option<i64>>,
    values: Vec<ScalarValue>,
    set: Vec<bool>,
    /// Per group, the best row of the batch being read (`NONE` if none yet);
    /// `touched` lists the groups that have one.
    pending: Vec<usize>,
    touched: Vec<usize>,
    /// The sum of `values`' sizes, kept as they change: `size()` is asked
    /// after every batch, and summing it there walked every group.
    value_bytes: usize,
}

impl Groups {
    fn new(pick: Pick, data_type: DataType) -> Self {
        Groups {
            pick,
            data_type,
            keys: Vec::new(),
            values: Vec::new(),
            set: Vec::new(),
            pending: Vec::new(),
            touched: Vec::new(),
            value_bytes: 0,
        }
    }

    fn resize(&mut self, total: usize) -> DfResult<()> {
        let null = ScalarValue::try_from(&self.data_type)?;
        self.value_bytes += total.saturating_sub(self.values.len()) * null.size();
        self.keys.resize(total, None);
        self.values.resize(total, null);
        self.set.resize(total, false);
        self.pending.resize(total, NONE);
        Ok(())
    }

    /// Offers rows `rows` of one batch (`values`, `keys`) to their groups, then
    /// copies out the value of each group's new best row.
    fn offer(
        &mut self,
        values: &ArrayRef,
        keys: &Int64Array,
        group_indices: &[usize],
        rows: impl Iterator<Item = usize>,
    ) -> DfResult<()> {
        let key = |i: usize| keys.is_valid(i).then(|| keys.value(i));
        for i in rows {
            let g = group_indices[i];
            let held = match self.pending[g] {
                NONE if !self.set[g] => None,
                NONE => Some(self.keys[g]),
                row => Some(key(row)),
            };
            if held.is_none_or(|h| self.pick.replaces(key(i), h)) {
                if self.pending[g] == NONE {
                    self.touched.push(g);
                }
                self.pending[g] = i;
            }
        }
        for g in self.touched.drain(..) {
            let row = std::mem::replace(&mut self.pending[g], NONE);
            self.keys[g] = key(row);
            let value = ScalarValue::try_from_array(values, row)?;
            self.value_bytes = self.value_bytes - self.values[g].size() + value.size();
            self.values[g] = value;
            self.set[g] = true;
        }
        Ok(())
    }

    fn take(&mut self, emit_to: EmitTo) -> (Vec<Option<i64>>, Vec<ScalarValue>, Vec<bool>) {
        let taken = (
            emit_to.take_needed(&mut self.keys),
            emit_to.take_needed(&mut self.values),
            emit_to.take_needed(&mut self.set),
        );
        let _ = emit_to.take_needed(&mut self.pending);
        self.value_bytes = self.values.iter().map(ScalarValue::size).sum();
        taken
    }

    fn values_array(&self, values: Vec<ScalarValue>) -> DfResult<ArrayRef> {
        if values.is_empty() {
            return Ok(arrow::array::new_empty_array(&self.data_type));
        }
        ScalarValue::iter_to_array(values)
    }
}

impl GroupsAccumulator for Groups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> DfResult<()> {
        self.resize(total_num_groups)?;
        let keys = int64s(&values[1])?;
        let rows = (0..group_indices.len()).filter(|&i| passes(opt_filter, i));
        self.offer(&values[0], &keys, group_indices, rows)
    }
    fn evaluate(&mut self, emit_to: EmitTo) -> DfResult<ArrayRef> {
        let (_, values, _) = self.take(emit_to);
        self.values_array(values)
    }
    fn state(&mut self, emit_to: EmitTo) -> DfResult<Vec<ArrayRef>> {
        let (keys, values, set) = self.take(emit_to);
        Ok(vec![self.values_array(values)?, Arc::new(Int64Array::from(keys)), Arc::new(BooleanArray::from(set))])
    }
    fn merge_batch(&mut self, values: &[ArrayRef], group_indices: &[usize], total_num_groups: usize) -> DfResult<()> {
        self.resize(total_num_groups)?;
        let keys = values[1].as_primitive::<Int64Type>().clone();
        // A state row counts when its group had a row (`is_set`): the flag filters like a FILTER.
        let set = Some(values[2].as_boolean());
        let rows = (0..group_indices.len()).filter(|&i| passes(set, i));
        self.offer(&values[0], &keys, group_indices, rows)
    }
    fn convert_to_state(&self, values: &[ArrayRef], opt_filter: Option<&BooleanArray>) -> DfResult<Vec<ArrayRef>> {
        let set: BooleanArray = (0..values[0].len()).map(|i| Some(passes(opt_filter, i))).collect();
        Ok(vec![Arc::clone(&values[0]), Arc::new(int64s(&values[1])?), Arc::new(set)])
    }
    fn size(&self) -> usize {
        size_of_val(self)
            + self.keys.capacity() * size_of::<Option<i64>>()
            + self.value_bytes
            + self.set.capacity()
            + (self.pending.capacity() + self.touched.capacity()) * size_of::<usize>()
    }
}

/// The aggregate without grouping: one group.
#[derive(Debug)]
struct OneGroup(Groups);

impl Accumulator for OneGroup {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        self.0.update_batch(values, &vec![0; values[0].len()], None, 1)
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        self.0.merge_batch(states, &vec![0; states[0].len()], 1)
    }
    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        self.0.resize(1)?;
        self.0.state(EmitTo::All)?.iter().map(|a| ScalarValue::try_from_array(a, 0)).collect()
    }
    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        self.0.resize(1)?;
        ScalarValue::try_from_array(&self.0.evaluate(EmitTo::All)?, 0)
    }
    fn size(&self) -> usize {
        GroupsAccumulator::size(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::Pick;

    #[test]
    fn a_row_replaces_the_held_one_only_when_it_sorts_strictly_beyond_it() {
        let first = Pick { last: false, descending: false, nulls_first: false };
        assert!(first.replaces(Some(1), Some(2)));
        assert!(!first.replaces(Some(2), Some(2)), "ties keep the row seen first");
        assert!(first.replaces(Some(5), None), "nulls last: any key sorts before a null");
        let last = Pick { last: true, ..first };
        assert!(last.replaces(Some(3), Some(2)));
        assert!(last.replaces(None, Some(9)), "nulls last: a null key is the last row");
        let last_desc_nulls_first = Pick { last: true, descending: true, nulls_first: true };
        assert!(last_desc_nulls_first.replaces(Some(1), Some(2)), "descending: 1 comes after 2");
        assert!(!last_desc_nulls_first.replaces(None, Some(2)), "nulls first: a null key comes first");
    }
}
