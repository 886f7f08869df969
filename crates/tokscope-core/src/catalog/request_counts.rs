//! `request_counts`: the rows of `requests` counted per UTC day and per value
//! of the low-cardinality columns the EOS metrics group and filter by. Ingest
//! counts each run's own rows as they are written ([`RequestCounts`]) and
//! commits the counts with them, so the table always covers `requests`
//! exactly (docs/metrics.md#request_counts); jobs that need only these
//! columns read a few thousand rows instead of scanning every request.
//!
//! Adding a column: a field of [`CountKey`], its value in
//! [`RequestCounts::add`], and one line below (plus the column in
//! `sql/views/request_counts.sql`, the same definition in SQL).

use std::collections::{BTreeMap, HashMap};

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;

use super::columns::table;
use super::DatedBatch;
use crate::error::{Error, Result};

/// The values one row of `request_counts` counts requests for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CountKey {
    /// Partition day (days since the epoch).
    pub day: i32,
    /// `requests.model`.
    pub model: String,
    /// `requests.variant`.
    pub variant: Option<String>,
    /// `requests.context_bin`.
    pub context_bin: String,
    /// `requests.context_bin_lo` (null for the `unknown` bin).
    pub context_bin_lo: Option<i64>,
    /// `requests.eos_status`.
    pub eos_status: String,
    /// `requests.has_eos_marker`.
    pub has_eos_marker: Option<bool>,
}

table! {
    /// Requests counted per UTC day, model, experiment arm, context bin, EOS status and marker; written by ingest with the requests it counts.
    pub table RequestCountsBuilder(k: &CountKey, n: i64) {
        name: "request_counts",
        key: ["model", "variant", "context_bin", "eos_status", "has_eos_marker"],
        partition: Date,
        written_by: Ingest,
        codec: None,
    } {
        /// As in `requests`.
        model: Utf8 [Dictionary] = k.model.as_str(),
        /// As in `requests`.
        variant: Utf8 nullable [Dictionary] = k.variant.as_deref(),
        /// As in `requests`.
        context_bin: Utf8 [Dictionary] = k.context_bin.as_str(),
        /// As in `requests`.
        context_bin_lo: Int64 nullable [Dictionary] = k.context_bin_lo,
        /// As in `requests`.
        eos_status: Utf8 [Dictionary] = k.eos_status.as_str(),
        /// As in `requests`.
        has_eos_marker: Boolean nullable = k.has_eos_marker,
        /// Number of `requests` rows of that day with these values (at least 1).
        requests: Int64 = n,
    }
}

/// Counts of `requests` rows by [`CountKey`], added batch by batch.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct RequestCounts {
    counts: HashMap<CountKey, i64, foldhash::fast::RandomState>,
}

/// A borrowed [`CountKey`]: one lookup per row without allocating.
type RowKey<'a> = (i32, &'a str, Option<&'a str>, &'a str, Option<i64>, &'a str, Option<bool>);

fn column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a dyn Array> {
    batch
        .column_by_name(name)
        .map(|c| c.as_ref())
        .ok_or_else(|| internal_err!("request_counts: a requests batch has no column {name}"))
}

fn strings<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a arrow_array::StringArray> {
    let array = column(batch, name)?;
    array.as_string_opt::<i32>().ok_or_else(|| wrong_type(name, array.data_type()))
}

fn wrong_type(name: &str, t: &DataType) -> Error {
    internal_err!("request_counts: requests.{name} is {t}, not the catalog's type")
}

impl RequestCounts {
    /// Counts the rows of one `requests` batch (its `days` give each row's partition).
    pub fn add(&mut self, dated: &DatedBatch) -> Result<()> {
        let batch = &dated.batch;
        if dated.days.len() != batch.num_rows() {
            return Err(internal_err!("request_counts: a requests batch without a day per row"));
        }
        let (model, variant, bin, status) = (
            strings(batch, "model")?,
            strings(batch, "variant")?,
            strings(batch, "context_bin")?,
            strings(batch, "eos_status")?,
        );
        let lo = column(batch, "context_bin_lo")?;
        let lo = lo.as_primitive_opt::<Int64Type>().ok_or_else(|| wrong_type("context_bin_lo", lo.data_type()))?;
        let marker = column(batch, "has_eos_marker")?;
        let marker = marker.as_boolean_opt().ok_or_else(|| wrong_type("has_eos_marker", marker.data_type()))?;
        // Hashed once per row: foldhash rather than SipHash (keys come from the
        // log, so the hasher stays seeded per process).
        let mut local: HashMap<RowKey<'_>, i64, foldhash::fast::RandomState> = HashMap::default();
        for (i, day) in dated.days.iter().enumerate() {
            let key = (
                *day,
                model.value(i),
                variant.is_valid(i).then(|| variant.value(i)),
                bin.value(i),
                lo.is_valid(i).then(|| lo.value(i)),
                status.value(i),
                marker.is_valid(i).then(|| marker.value(i)),
            );
            *local.entry(key).or_default() += 1;
        }
        for ((day, model, variant, context_bin, context_bin_lo, eos_status, has_eos_marker), n) in local {
            let key = CountKey {
                day,
                model: model.to_string(),
                variant: variant.map(str::to_string),
                context_bin: context_bin.to_string(),
                context_bin_lo,
                eos_status: eos_status.to_string(),
                has_eos_marker,
            };
            *self.counts.entry(key).or_default() += n;
        }
        Ok(())
    }

    /// Adds another accumulator's counts (one per writer thread).
    pub fn merge(&mut self, other: RequestCounts) {
        for (key, n) in other.counts {
            *self.counts.entry(key).or_default() += n;
        }
    }

    /// The counts as `request_counts` rows, one batch per day, rows in key order.
    pub fn into_batches(self) -> Result<Vec<DatedBatch>> {
        let mut by_day: BTreeMap<i32, Vec<(CountKey, i64)>> = BTreeMap::new();
        for (key, n) in self.counts {
            by_day.entry(key.day).or_default().push((key, n));
        }
        by_day
            .into_iter()
            .map(|(day, mut rows)| {
                rows.sort_unstable();
                let mut builder = RequestCountsBuilder::new();
                for (key, n) in &rows {
                    builder.append(key, *n);
                }
                Ok(DatedBatch { batch: builder.finish()?, days: vec![day; rows.len()] })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, BooleanArray, Int64Array, StringArray};

    use super::*;

    /// day, model, variant, has_eos_marker
    type Row<'a> = (i32, &'a str, Option<&'a str>, Option<bool>);

    fn requests(rows: &[Row<'_>]) -> DatedBatch {
        let text = |f: &dyn Fn(&Row<'_>) -> Option<String>| -> ArrayRef {
            Arc::new(rows.iter().map(f).collect::<StringArray>())
        };
        let batch = RecordBatch::try_from_iter([
            ("model", text(&|r| Some(r.1.to_string()))),
            ("variant", text(&|r| r.2.map(str::to_string))),
            ("context_bin", text(&|_| Some("0-1K".to_string()))),
            ("context_bin_lo", Arc::new(Int64Array::from(vec![0; rows.len()])) as ArrayRef),
            ("eos_status", text(&|r| Some(if r.3 == Some(true) { "eos" } else { "unknown" }.to_string()))),
            ("has_eos_marker", Arc::new(rows.iter().map(|r| r.3).collect::<BooleanArray>()) as ArrayRef),
        ])
        .unwrap();
        DatedBatch { batch, days: rows.iter().map(|r| r.0).collect() }
    }

    #[test]
    fn rows_are_counted_per_day_and_key_nulls_included() {
        let mut a = RequestCounts::default();
        a.add(&requests(&[(1, "m", None, Some(true)), (1, "m", None, Some(true)), (2, "m", Some("x"), None)])).unwrap();
        let mut b = RequestCounts::default();
        b.add(&requests(&[(1, "m", None, Some(true)), (1, "n", None, Some(true)), (2, "m", Some("x"), Some(false))]))
            .unwrap();
        a.merge(b);
        let batches = a.into_batches().unwrap();
        assert_eq!(batches.iter().map(|b| b.days.clone()).collect::<Vec<_>>(), vec![vec![1, 1], vec![2, 2]]);
        let n = |i: usize| {
            batches[i].batch.column_by_name("requests").unwrap().as_primitive::<Int64Type>().values().to_vec()
        };
        // Day 1: m x3, n x1 (key order); day 2: the null marker and the false one apart.
        assert_eq!(n(0), vec![3, 1]);
        assert_eq!(n(1), vec![1, 1]);
        assert_eq!(batches[0].batch.schema(), RequestCountsBuilder::schema());
        let bad = DatedBatch { batch: requests(&[(1, "m", None, None)]).batch, days: vec![] };
        assert!(RequestCounts::default().add(&bad).is_err());
    }
}
