//! The manifest of ingested objects (`_manifest.jsonl` in the dataset): one
//! JSON line per object and run, keyed by location, size and version
//! (modification time, plus ETag for objects). Re-running ingest over the
//! same inputs skips listed objects, so no row is written twice.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::{DatasetRoot, MANIFEST};
use crate::error::{Error, Result};

/// One ingested object.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ManifestEntry {
    /// Input location.
    pub location: String,
    /// Stored size.
    pub size: u64,
    /// Modification time / ETag.
    pub version: String,
    /// The run that ingested it.
    pub run_id: String,
    /// Rows it produced.
    pub rows_written: u64,
    /// Lines rejected.
    pub lines_rejected: u64,
}

/// The manifest of a dataset.
#[derive(Debug, Default)]
pub struct Manifest {
    entries: Vec<ManifestEntry>,
    keys: HashSet<(String, u64, String)>,
}

impl Manifest {
    /// Loads the dataset's manifest (empty when there is none yet).
    pub fn load(dataset: &DatasetRoot, rt: &tokio::runtime::Runtime) -> Result<Self> {
        let mut m = Manifest::default();
        if let Some(bytes) = dataset.read_side_file(MANIFEST, rt)? {
            for line in bytes.split(|&b| b == b'\n').filter(|l| !l.trim_ascii().is_empty()) {
                let e: ManifestEntry =
                    serde_json::from_slice(line).map_err(|source| Error::Json { path: MANIFEST.into(), source })?;
                m.keys.insert((e.location.clone(), e.size, e.version.clone()));
                m.entries.push(e);
            }
        }
        Ok(m)
    }

    /// Whether this exact object version was ingested before.
    pub fn contains(&self, location: &str, size: u64, version: &str) -> bool {
        self.keys.contains(&(location.to_string(), size, version.to_string()))
    }

    /// Adds an ingested object, unless this version of it is listed already
    /// (so a commit applied twice adds its entries once).
    pub fn add(&mut self, entry: ManifestEntry) {
        if self.keys.insert((entry.location.clone(), entry.size, entry.version.clone())) {
            self.entries.push(entry);
        }
    }

    /// Writes the manifest back.
    pub fn save(&self, dataset: &DatasetRoot, rt: &tokio::runtime::Runtime) -> Result<()> {
        let mut out = Vec::new();
        for e in &self.entries {
            serde_json::to_writer(&mut out, e).map_err(|source| Error::Json { path: MANIFEST.into(), source })?;
            out.push(b'\n');
        }
        dataset.write_side_file(MANIFEST, out, rt)
    }
}
