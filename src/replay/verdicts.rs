//! The `replay_verdicts` table: selecting suspects from `requests`, and
//! writing verdict rows back into the dataset as Parquet.
//!
//! The table is keyed by `request_id`. A write replaces the verdicts of the
//! request ids it carries: the rows of every existing file that are not
//! re-replayed are copied into one new file with the new rows, and one commit
//! (`dataset::commit`) replaces the old files with it: queries see the old
//! files or the new one, never both.

use std::collections::HashSet;

use arrow::array::{Array, BooleanArray, StringArray};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use object_store::ObjectStoreExt;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
pub use tokscope_core::catalog::replay_verdicts::RunInfo;
use tokscope_core::catalog::replay_verdicts::{VerdictRow, VerdictsBuilder};

use super::verdict::Suspect;
use crate::dataset::DatasetRoot;
use crate::engine;
use crate::error::{Error, Result};

/// Name of the table and of its directory in a dataset.
pub const TABLE: &str = VerdictsBuilder::DEF.name;

/// The default suspect predicate: outputs without an EOS marker, below the
/// token cap, that can be replayed.
pub const DEFAULT_WHERE: &str = "eos_status = 'implicit_truncation'";

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
    let sql =
        format!("SELECT request_id, prompt, model_output FROM requests WHERE {predicate} ORDER BY request_id{limit}");
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
                prompt: text(prompts),
                model_output: text(outputs),
            });
        }
    }
    Ok(suspects)
}

fn string_column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a StringArray> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| config_err!("column {name} is missing or not a string"))
}

/// Arrow form of verdict rows.
pub fn to_batch(rows: &[VerdictRow], run: &RunInfo) -> Result<RecordBatch> {
    let mut builder = VerdictsBuilder::new();
    for row in rows {
        builder.append(row, run);
    }
    Ok(builder.finish()?)
}

/// Writes `batch` into the dataset's `replay_verdicts`, replacing the rows of
/// the request ids it holds (see the module docs). Returns the new file's location.
pub fn write_verdicts(dataset: &DatasetRoot, batch: &RecordBatch, rt: &tokio::runtime::Runtime) -> Result<String> {
    let replaced: HashSet<String> = string_column(batch, "request_id")?.iter().flatten().map(str::to_string).collect();
    dataset.write_table_file(&VerdictsBuilder::DEF, rt, |store, old| {
        let mut kept = rt.block_on(async {
            let mut kept = Vec::new();
            for path in old {
                let bytes = store.get(path).await?.bytes().await?;
                for old_batch in read_parquet(bytes)? {
                    kept.push(drop_ids(&old_batch, &replaced)?);
                }
            }
            Ok::<_, Error>(kept)
        })?;
        kept.push(batch.clone());
        Ok((kept, true))
    })
}

fn read_parquet(bytes: Bytes) -> Result<Vec<RecordBatch>> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)?.build()?;
    let batches = reader.collect::<std::result::Result<Vec<_>, _>>()?;
    // Cast to the current schema so the rewrite fails loudly on an incompatible old file.
    batches.into_iter().map(|b| Ok(RecordBatch::try_new(VerdictsBuilder::schema(), b.columns().to_vec())?)).collect()
}

fn drop_ids(batch: &RecordBatch, replaced: &HashSet<String>) -> Result<RecordBatch> {
    let ids = string_column(batch, "request_id")?;
    let keep: BooleanArray = ids.iter().map(|id| Some(!id.is_some_and(|id| replaced.contains(id)))).collect();
    Ok(arrow::compute::filter_record_batch(batch, &keep)?)
}
