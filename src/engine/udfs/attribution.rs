//! SQL functions of attribution (docs/metrics.md, "Attribution"):
//!
//! - `group_tags(tags, prefix)`: the tags a request is counted under when a
//!   job groups by tag: those starting with `prefix` (all when it is null),
//!   or one null when it has none, so that every request is counted.
//! - `extra_field(extra, path)`: the field at `path` in the request's `extra`
//!   as an attribution value (what `--attribute` reads at ingest), null when
//!   absent; [`tokscope_core::attribution::lookup`].
//! - `extra_tags(extra, path)`: the same field as tags; null when absent.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, ListBuilder, StringBuilder};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ScalarUDF, Signature, SimpleScalarUDF, Volatility};
use serde_json::Value;
use tokscope_core::attribution::{lookup, scalar, tags_of};

fn string_list() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)))
}

/// The argument `i` as plain strings (`Utf8View` and dictionaries cast).
fn strings(arrays: &[ArrayRef], i: usize) -> DfResult<ArrayRef> {
    Ok(cast(&arrays[i], &DataType::Utf8)?)
}

/// `group_tags(tags, prefix)`.
pub fn group_tags() -> ScalarUDF {
    ScalarUDF::from(SimpleScalarUDF::new_with_signature(
        "group_tags",
        Signature::any(2, Volatility::Immutable),
        string_list(),
        Arc::new(|args: &[ColumnarValue]| {
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let tags = cast(&arrays[0], &string_list())?;
            let prefixes = strings(&arrays, 1)?;
            let (tags, prefixes) = (tags.as_list::<i32>(), prefixes.as_string::<i32>());
            let mut out = ListBuilder::new(StringBuilder::new());
            for row in 0..tags.len() {
                let prefix = (!prefixes.is_null(row)).then(|| prefixes.value(row));
                let mut kept = 0;
                if !tags.is_null(row) {
                    let values = tags.value(row);
                    for tag in values.as_string::<i32>().iter().flatten() {
                        if prefix.is_none_or(|p| tag.starts_with(p)) {
                            out.values().append_value(tag);
                            kept += 1;
                        }
                    }
                }
                if kept == 0 {
                    out.values().append_null();
                }
                out.append(true);
            }
            Ok(ColumnarValue::Array(Arc::new(out.finish())))
        }),
    ))
}

/// The JSON object of each row's `extra` with the value at that row's path.
fn fields_at<'a>(extra: &'a ArrayRef, paths: &'a ArrayRef) -> impl Iterator<Item = Option<Value>> + 'a {
    let (extra, paths) = (extra.as_string::<i32>(), paths.as_string::<i32>());
    (0..extra.len()).map(move |row| {
        if extra.is_null(row) || paths.is_null(row) {
            return None;
        }
        match serde_json::from_str::<Value>(extra.value(row)) {
            Ok(Value::Object(o)) => lookup(&o, paths.value(row)).cloned(),
            _ => None,
        }
    })
}

/// `extra_field(extra, path)`.
pub fn extra_field() -> ScalarUDF {
    ScalarUDF::from(SimpleScalarUDF::new_with_signature(
        "extra_field",
        Signature::any(2, Volatility::Immutable),
        DataType::Utf8,
        Arc::new(|args: &[ColumnarValue]| {
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let (extra, paths) = (strings(&arrays, 0)?, strings(&arrays, 1)?);
            let out: arrow::array::StringArray =
                fields_at(&extra, &paths).map(|v| v.as_ref().and_then(scalar)).collect();
            Ok(ColumnarValue::Array(Arc::new(out)))
        }),
    ))
}

/// `extra_tags(extra, path)`.
pub fn extra_tags() -> ScalarUDF {
    ScalarUDF::from(SimpleScalarUDF::new_with_signature(
        "extra_tags",
        Signature::any(2, Volatility::Immutable),
        string_list(),
        Arc::new(|args: &[ColumnarValue]| {
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let (extra, paths) = (strings(&arrays, 0)?, strings(&arrays, 1)?);
            let mut out = ListBuilder::new(StringBuilder::new());
            for value in fields_at(&extra, &paths) {
                let tags = value.as_ref().map(tags_of).unwrap_or_default();
                if tags.is_empty() {
                    out.append(false);
                } else {
                    for t in tags {
                        out.values().append_value(t);
                    }
                    out.append(true);
                }
            }
            Ok(ColumnarValue::Array(Arc::new(out.finish())))
        }),
    ))
}
