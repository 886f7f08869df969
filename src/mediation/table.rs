//! The `interventions` table: one row per measured run. Written by
//! `tokscope mediate` (or imported from an external tool's JSONL) as Parquet
//! under `<DATASET>/interventions/`, read by the `mediation` job.

use std::path::Path;

use arrow::record_batch::RecordBatch;
pub use tokscope_core::catalog::interventions::InterventionRow;
use tokscope_core::catalog::interventions::{InterventionsBuilder, KINDS, PATHS};

use crate::dataset::DatasetRoot;
use crate::error::{Error, Result};

/// Directory of the table inside a dataset.
pub const TABLE: &str = InterventionsBuilder::DEF.name;

/// Rows to one Arrow batch.
pub fn to_batch(rows: &[InterventionRow]) -> Result<RecordBatch> {
    let mut builder = InterventionsBuilder::new();
    for row in rows {
        builder.append(row);
    }
    Ok(builder.finish()?)
}

/// Reads an external tool's JSONL (one [`InterventionRow`] per line; blank lines skipped).
pub fn read_jsonl(path: &Path) -> Result<Vec<InterventionRow>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path.display(), e))?;
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let row: InterventionRow =
            serde_json::from_str(line).map_err(|e| config_err!("{} line {}: {e}", path.display(), n + 1))?;
        if !KINDS.contains(&row.intervention.as_str()) {
            return Err(config_err!(
                "{} line {}: intervention {:?} is not one of {KINDS:?}",
                path.display(),
                n + 1,
                row.intervention
            ));
        }
        if let Some(effect_path) = row.path.as_deref().filter(|p| !PATHS.contains(p)) {
            return Err(config_err!("{} line {}: path {effect_path:?} is not one of {PATHS:?}", path.display(), n + 1));
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Appends `rows` to the dataset's table as one new Parquet file (never
/// rewriting existing ones); returns the file's location.
pub fn append(dataset: &DatasetRoot, rows: &[InterventionRow], rt: &tokio::runtime::Runtime) -> Result<String> {
    dataset.add_table_file(&InterventionsBuilder::DEF, &[to_batch(rows)?], rt)
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
        std::fs::write(&p, "{\"prompt_id\":\"a\",\"intervention\":\"clean\",\"metric\":\"m\",\"value\":0.5}\n\n")
            .unwrap();
        let rows = read_jsonl(&p).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].layer, rows[0].sample), (None, 0));
        std::fs::write(&p, "{\"prompt_id\":\"a\",\"intervention\":\"zap\",\"metric\":\"m\",\"value\":0.5}\n").unwrap();
        assert!(read_jsonl(&p).is_err());
        let sideways = r#"{"prompt_id":"a","intervention":"skip-layer","metric":"m","value":0.5,"path":"sideways"}"#;
        std::fs::write(&p, sideways).unwrap();
        assert!(read_jsonl(&p).is_err());
        assert_eq!(to_batch(&rows).unwrap().num_rows(), 1);
    }
}
