//! The `replay_verdicts` table: selecting suspects from `requests`, and
//! writing verdict rows back into the dataset as Parquet.
//!
//! The table is keyed by `request_id`. A write replaces the verdicts of the
//! request ids it carries: the rows of every existing file that are not
//! re-replayed are copied into one new file with the new rows, the new file is
//! published, and only then are the old files deleted. A crash between the two
//! steps can leave duplicates (never lose rows); the next write removes them.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, BooleanBuilder, Float64Array, Int64Array, StringArray,
    StringBuilder, TimestampMicrosecondArray,
};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::verdict::{Suspect, VerdictRow};
use crate::dataset::DatasetRoot;
use crate::engine;
use crate::error::{Error, Result};
use crate::schema::replay_verdicts_schema;

/// Name of the table and of its directory in a dataset.
pub const TABLE: &str = "replay_verdicts";

/// The default suspect predicate: outputs without an EOS marker, below the
/// token cap, that can be replayed.
pub const DEFAULT_WHERE: &str = "eos_status = 'implicit_truncation'";

/// Columns shared by every row of one replay run.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// The replayed checkpoint (model directory name).
    pub model: String,
    /// The backend that ran it (`cpu`, `cuda:0`).
    pub device: String,
    /// The `--threshold` used.
    pub threshold: f64,
    /// When the run started, microseconds since the epoch (UTC).
    pub replayed_at_micros: i64,
}

/// Selects suspects: rows of `requests` matching `predicate` (the default one
/// when `None`) with a non-null prompt and output, ordered by `request_id` so
/// `--limit` is reproducible. A user predicate replaces the default one whole,
/// null prompts included: those then get an `error` verdict.
pub async fn select_suspects(
    dataset: &DatasetRoot,
    predicate: Option<&str>,
    limit: Option<usize>,
) -> Result<Vec<Suspect>> {
    let ctx = engine::new_session()?;
    engine::register_dataset(&ctx, dataset).await?;
    let predicate = match predicate {
        Some(p) => format!("({p})"),
        None => format!("{DEFAULT_WHERE} AND prompt IS NOT NULL AND model_output IS NOT NULL"),
    };
    let limit = limit.map(|n| format!(" LIMIT {n}")).unwrap_or_default();
    let sql = format!(
        "SELECT request_id, prompt, model_output FROM requests WHERE {predicate} ORDER BY request_id{limit}"
    );
    let batches = engine::run_sql(&ctx, &sql, false).await?;
    let mut suspects = Vec::new();
    for batch in &batches {
        let ids = string_column(batch, "request_id")?;
        let prompts = string_column(batch, "prompt")?;
        let outputs = string_column(batch, "model_output")?;
        for i in 0..batch.num_rows() {
            let text = |a: &StringArray| (!a.is_null(i)).then(|| a.value(i).to_string());
            suspects.push(Suspect {
                request_id: ids.value(i).to_string(),
                prompt: text(&prompts),
                model_output: text(&outputs),
            });
        }
    }
    Ok(suspects)
}

fn string_column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a StringArray> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| Error::Config(format!("column {name} is missing or not a string")))
}

/// Arrow form of verdict rows.
pub fn to_batch(rows: &[VerdictRow], run: &RunInfo) -> Result<RecordBatch> {
    let strings = |f: &dyn Fn(&VerdictRow) -> Option<&str>| -> ArrayRef {
        let mut b = StringBuilder::new();
        for r in rows {
            b.append_option(f(r));
        }
        Arc::new(b.finish())
    };
    let bools = |f: &dyn Fn(&VerdictRow) -> Option<bool>| -> ArrayRef {
        let mut b = BooleanBuilder::new();
        for r in rows {
            b.append_option(f(r));
        }
        Arc::new(b.finish())
    };
    let n = rows.len();
    let columns: Vec<ArrayRef> = vec![
        strings(&|r| Some(&r.request_id)),
        strings(&|r| Some(r.verdict.as_str())),
        strings(&|r| r.reason.as_deref()),
        Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.p_eos_at_cut))),
        Arc::new(Float64Array::from(vec![run.threshold; n])),
        strings(&|r| r.continuation.as_deref()),
        bools(&|r| r.continuation_ended_with_eos),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.prompt_tokens_replayed))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.output_tokens_replayed))),
        bools(&|r| Some(r.cut_in_special_token)),
        bools(&|r| Some(r.cut_in_utf8_char)),
        bools(&|r| r.deterministic),
        Arc::new(StringArray::from(vec![run.device.as_str(); n])),
        Arc::new(StringArray::from(vec![run.model.as_str(); n])),
        Arc::new(
            TimestampMicrosecondArray::from(vec![run.replayed_at_micros; n]).with_timezone("UTC"),
        ),
    ];
    Ok(RecordBatch::try_new(replay_verdicts_schema(), columns)?)
}

/// Writes `batch` into the dataset's `replay_verdicts`, replacing the rows of
/// the request ids it holds (see the module docs). Returns the new file's path.
pub async fn write_verdicts(dataset: &DatasetRoot, batch: &RecordBatch) -> Result<String> {
    let (store, root) = dataset.store_and_root()?;
    let dir = child(&root, TABLE);
    let replaced: HashSet<String> = string_column(batch, "request_id")?
        .iter()
        .flatten()
        .map(str::to_string)
        .collect();
    let old: Vec<ObjectPath> = store
        .list(Some(&dir))
        .map_ok(|m| m.location)
        .try_filter(|p| futures::future::ready(p.as_ref().ends_with(".parquet")))
        .try_collect()
        .await?;
    let mut kept = Vec::new();
    for path in &old {
        let bytes = store.get(path).await?.bytes().await?;
        for old_batch in read_parquet(bytes)? {
            kept.push(drop_ids(&old_batch, &replaced)?);
        }
    }
    kept.push(batch.clone());

    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    let mut buffer = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut buffer, replay_verdicts_schema(), Some(props))?;
    for b in &kept {
        if b.num_rows() > 0 {
            writer.write(b)?;
        }
    }
    writer.close()?;
    let name = format!(
        "part-{}-{}.parquet",
        chrono::Utc::now().format("%Y%m%dT%H%M%S%6f"),
        std::process::id()
    );
    let new_path = child(&dir, &name);
    store.put(&new_path, PutPayload::from(buffer)).await?;
    for path in old.iter().filter(|p| **p != new_path) {
        store.delete(path).await?;
    }
    Ok(format!("{}/{TABLE}/{name}", dataset.display().trim_end_matches('/')))
}

fn child(parent: &ObjectPath, name: &str) -> ObjectPath {
    parent.clone().join(name)
}

fn read_parquet(bytes: Bytes) -> Result<Vec<RecordBatch>> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)?.build()?;
    let batches = reader.collect::<std::result::Result<Vec<_>, _>>()?;
    // Cast to the current schema so the rewrite fails loudly on an incompatible old file.
    batches
        .into_iter()
        .map(|b| Ok(RecordBatch::try_new(replay_verdicts_schema(), b.columns().to_vec())?))
        .collect()
}

fn drop_ids(batch: &RecordBatch, replaced: &HashSet<String>) -> Result<RecordBatch> {
    let ids = string_column(batch, "request_id")?;
    let keep: BooleanArray = ids
        .iter()
        .map(|id| Some(!id.is_some_and(|id| replaced.contains(id))))
        .collect();
    Ok(arrow::compute::filter_record_batch(batch, &keep)?)
}
