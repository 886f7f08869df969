//! The `interventions` table: one row per measured run. Written by
//! `tokscope mediate` (or imported from an external tool's JSONL) as Parquet
//! under `<DATASET>/interventions/`, read by the `mediation` job.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, Float64Array, Int32Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use serde::{Deserialize, Serialize};

use crate::dataset::DatasetRoot;
use crate::error::{Error, Result};

/// Directory of the table inside a dataset.
pub const TABLE: &str = "interventions";

/// One measured run. `layer`/`position` are `None` where they do not apply:
/// clean and corrupt runs have neither; a layer-level restore (every corrupted
/// position restored at `layer`) and a perturbation have no position; a
/// heatmap cell has both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterventionRow {
    /// Identifies the prompt (tokscope uses the first 16 hex digits of its SHA-256).
    pub prompt_id: String,
    /// The logged request it came from, if any.
    #[serde(default)]
    pub request_id: Option<String>,
    /// Decoder layer restored or perturbed.
    #[serde(default)]
    pub layer: Option<i32>,
    /// Restored position (absolute, BOS = 0).
    #[serde(default)]
    pub position: Option<i32>,
    /// `clean`, `corrupt`, `restore` or `perturb`.
    pub intervention: String,
    /// Outcome metric name (`target_prob`, `continuation_logprob`, `bleu4`, `p_eos`, or any).
    pub metric: String,
    /// The outcome `y` of this run.
    pub value: f64,
    /// Noise / perturbation sample index; effects average over samples first.
    #[serde(default)]
    pub sample: i32,
}

/// Arrow schema of the table (documented in docs/ARCHITECTURE.md and docs/mediation.md).
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("prompt_id", DataType::Utf8, false),
        Field::new("request_id", DataType::Utf8, true),
        Field::new("layer", DataType::Int32, true),
        Field::new("position", DataType::Int32, true),
        Field::new("intervention", DataType::Utf8, false),
        Field::new("metric", DataType::Utf8, false),
        Field::new("value", DataType::Float64, false),
        Field::new("sample", DataType::Int32, false),
    ]))
}

/// Rows to one Arrow batch.
pub fn to_batch(rows: &[InterventionRow]) -> Result<RecordBatch> {
    let strings = |f: fn(&InterventionRow) -> Option<&str>| {
        Arc::new(rows.iter().map(f).collect::<StringArray>()) as Arc<dyn Array>
    };
    let columns: Vec<Arc<dyn Array>> = vec![
        strings(|r| Some(&r.prompt_id)),
        strings(|r| r.request_id.as_deref()),
        Arc::new(rows.iter().map(|r| r.layer).collect::<Int32Array>()),
        Arc::new(rows.iter().map(|r| r.position).collect::<Int32Array>()),
        strings(|r| Some(&r.intervention)),
        strings(|r| Some(&r.metric)),
        Arc::new(rows.iter().map(|r| Some(r.value)).collect::<Float64Array>()),
        Arc::new(rows.iter().map(|r| Some(r.sample)).collect::<Int32Array>()),
    ];
    Ok(RecordBatch::try_new(schema(), columns)?)
}

/// Reads an external tool's JSONL (one [`InterventionRow`] per line; blank lines skipped).
pub fn read_jsonl(path: &Path) -> Result<Vec<InterventionRow>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path.display(), e))?;
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let row: InterventionRow = serde_json::from_str(line)
            .map_err(|e| Error::Config(format!("{} line {}: {e}", path.display(), n + 1)))?;
        const KINDS: [&str; 4] = ["clean", "corrupt", "restore", "perturb"];
        if !KINDS.contains(&row.intervention.as_str()) {
            return Err(Error::Config(format!(
                "{} line {}: intervention {:?} is not one of {KINDS:?}",
                path.display(),
                n + 1,
                row.intervention
            )));
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Appends `rows` to the dataset's table as one new Parquet file (never
/// rewriting existing ones); returns the file's location.
pub fn append(
    dataset: &DatasetRoot,
    rows: &[InterventionRow],
    rt: &tokio::runtime::Runtime,
) -> Result<String> {
    let batch = to_batch(rows)?;
    let staging = dataset.staging_dir()?;
    let dir = staging.join(TABLE);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(dir.display(), e))?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.6f");
    let name = format!("part-{stamp}-{}.parquet", std::process::id());
    // Written under a dot name, then renamed: readers never list a half-written file.
    let tmp = dir.join(format!(".{name}.tmp"));
    let file = std::fs::File::create(&tmp).map_err(|e| Error::io(tmp.display(), e))?;
    let mut writer = ArrowWriter::try_new(file, schema(), None)?;
    writer.write(&batch)?;
    writer.close()?;
    let path = dir.join(&name);
    std::fs::rename(&tmp, &path).map_err(|e| Error::io(path.display(), e))?;
    if matches!(dataset, DatasetRoot::Remote { .. }) {
        dataset.publish(&staging, std::slice::from_ref(&path), rt)?;
    }
    Ok(format!("{}/{TABLE}/{name}", dataset.display()))
}

/// A prompt's id: the first 16 hex digits of SHA-256 of its text, so the same
/// prompt logged by several requests groups together.
pub fn prompt_id(prompt: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(prompt.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_rows_default_missing_optional_fields() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.jsonl");
        std::fs::write(
            &p,
            "{\"prompt_id\":\"a\",\"intervention\":\"clean\",\"metric\":\"m\",\"value\":0.5}\n\n",
        )
        .unwrap();
        let rows = read_jsonl(&p).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].layer, rows[0].sample), (None, 0));
        std::fs::write(
            &p,
            "{\"prompt_id\":\"a\",\"intervention\":\"zap\",\"metric\":\"m\",\"value\":0.5}\n",
        )
        .unwrap();
        assert!(read_jsonl(&p).is_err());
        assert_eq!(to_batch(&rows).unwrap().num_rows(), 1);
    }
}
