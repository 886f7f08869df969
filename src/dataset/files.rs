//! `_files.json`: the dataset's list of data files, with their sizes,
//! modification times and row counts.
//!
//! Every commit (`dataset::commit`: an ingest run, a compaction, a replay's or
//! a mediation's new file) replaces it with one put, after its files have
//! their final names and before the files it replaces are deleted. Queries
//! read their tables' files from it instead of listing the table
//! directories (`engine::register_dataset_with`), so
//!
//! - a run's files appear to queries all at once, and a compaction's merged
//!   file replaces its inputs all at once: no query sees both, or neither;
//! - a query costs one small read instead of a listing of every partition
//!   (object-store listings are slow and paged), and plans without reading
//!   any footer: the row counts are in the list (`count(*)` opens no file).
//!
//! A dataset written before the list existed is listed as before; its next
//! commit writes the list from a listing of its table directories.

use std::collections::BTreeMap;

use futures::{stream, StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use tokscope_core::catalog::CATALOG;

use super::paths::{object, relative, CONCURRENT_REQUESTS};
use crate::error::{Error, Result};

/// The list's file name at the dataset root.
pub const FILES: &str = "_files.json";

/// The format version this build writes and reads.
const VERSION: u32 = 1;

/// Every data file of the dataset, by path relative to its root.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FileList {
    /// Format version.
    pub version: u32,
    /// `table/[date=YYYY-MM-DD/]part-....parquet` -> what the store said of it.
    pub files: BTreeMap<String, FileEntry>,
}

/// One data file as the store described it when it was committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Bytes.
    pub size: u64,
    /// Last modification, milliseconds since the epoch.
    pub modified_ms: i64,
    /// Rows, as the file's writer counted them (from the commit record, or
    /// read from the footer at commit for a record without them; absent for
    /// files listed from a dataset written before the list existed). Queries take
    /// it as the file's row count instead of reading the footer to plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
}

impl FileEntry {
    fn of(meta: &ObjectMeta) -> Self {
        FileEntry { size: meta.size, modified_ms: meta.last_modified.timestamp_millis(), rows: None }
    }
}

/// The error for a listed file that is not there.
pub fn gone(path: impl std::fmt::Display) -> Error {
    Error::Gone { path: path.to_string() }
}

/// Bytes read from a file's end to find its footer in one request.
const FOOTER_READ: u64 = 64 << 10;

/// The row count in the footer of the Parquet file at `path` (`size` bytes).
async fn footer_rows(store: &dyn ObjectStore, path: &ObjectPath, size: u64) -> Result<u64> {
    let bad = |why: String| config_err!("{path} is not a readable Parquet file: {why}");
    if size < 12 {
        return Err(bad(format!("{size} bytes")));
    }
    let tail_len = size.min(FOOTER_READ);
    let tail = store.get_range(path, size - tail_len..size).await?;
    let n = tail.len();
    let (len, magic) = tail[n - 8..].split_at(4);
    if magic != b"PAR1" {
        return Err(bad("no PAR1 at its end".into()));
    }
    let len = u64::from(u32::from_le_bytes([len[0], len[1], len[2], len[3]]));
    let metadata = match len + 8 <= tail_len {
        true => tail.slice(n - 8 - len as usize..n - 8),
        false if len + 8 <= size => store.get_range(path, size - 8 - len..size - 8).await?,
        false => return Err(bad(format!("a {len}-byte footer in {size} bytes"))),
    };
    let metadata = parquet::file::metadata::ParquetMetaDataReader::decode_metadata(&metadata)?;
    u64::try_from(metadata.file_metadata().num_rows()).map_err(|_| bad("a negative row count".into()))
}

/// Whether a listed object is a visible data file (not a writer's hidden temporary file).
fn is_data_file(meta: &ObjectMeta) -> bool {
    meta.location.filename().is_some_and(|n| !n.starts_with('.') && n.ends_with(".parquet"))
}

impl FileList {
    /// The dataset's list; `None` when it has none (written before the list existed).
    pub async fn load(store: &dyn ObjectStore, root: &ObjectPath) -> Result<Option<Self>> {
        let path = object(root, FILES);
        let bytes = match store.get(&path).await {
            Ok(r) => r.bytes().await?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let list: FileList = serde_json::from_slice(&bytes).map_err(|e| {
            config_err!(
                "{path} is not readable ({e}): it was not written by tokscope or is corrupt; delete it and the \
                 dataset's files are listed instead (the next ingest or compact writes it again)"
            )
        })?;
        if list.version != VERSION {
            return Err(config_err!(
                "{path} has format version {}, this tokscope reads version {VERSION}: use the tokscope that wrote it",
                list.version
            ));
        }
        Ok(Some(list))
    }

    /// The list from a listing of every table directory (a dataset without one).
    pub async fn scan(store: &dyn ObjectStore, root: &ObjectPath) -> Result<Self> {
        let mut list = FileList { version: VERSION, files: BTreeMap::new() };
        for table in CATALOG {
            let listed: Vec<ObjectMeta> = store.list(Some(&object(root, table.name))).try_collect().await?;
            for meta in listed.iter().filter(|m| is_data_file(m)) {
                list.files.insert(relative(root, &meta.location), FileEntry::of(meta));
            }
        }
        Ok(list)
    }

    /// The dataset's list, or one from a listing when it has none.
    pub async fn load_or_scan(store: &dyn ObjectStore, root: &ObjectPath) -> Result<Self> {
        match Self::load(store, root).await? {
            Some(list) => Ok(list),
            None => Self::scan(store, root).await,
        }
    }

    /// `table`'s files (paths relative to the dataset root) in name order.
    pub fn table_entries<'a>(&'a self, table: &str) -> impl Iterator<Item = (&'a String, &'a FileEntry)> + 'a {
        let dir = format!("{table}/");
        self.files.range(dir.clone()..).take_while(move |(rel, _)| rel.starts_with(&dir))
    }

    /// The paths (relative to the dataset root) of `table`'s files, in name order.
    pub fn table_paths(&self, table: &str) -> Vec<String> {
        self.table_entries(table).map(|(rel, _)| rel.clone()).collect()
    }

    /// Replaces the dataset's list with this one (one put: readers see the old list or this one).
    pub async fn save(&self, store: &dyn ObjectStore, root: &ObjectPath) -> Result<()> {
        let bytes = serde_json::to_vec(self).map_err(|source| Error::Json { path: FILES.into(), source })?;
        store.put(&object(root, FILES), PutPayload::from(bytes)).await?;
        Ok(())
    }

    /// Adds the committed files `added` (asking the store for their size and
    /// time; their row counts from `rows`, or from their footers where it has
    /// none) and drops `removed` (paths relative to `root`), then saves.
    pub async fn commit(
        store: &dyn ObjectStore,
        root: &ObjectPath,
        added: &[String],
        rows: &BTreeMap<String, u64>,
        removed: &[String],
    ) -> Result<()> {
        let mut list = Self::load_or_scan(store, root).await?;
        let entries: Vec<(String, FileEntry)> = stream::iter(added)
            .map(|rel| async move {
                let path = object(root, rel);
                let meta = store.head(&path).await?;
                let rows = match rows.get(rel) {
                    Some(&n) => n,
                    None => footer_rows(store, &path, meta.size).await?,
                };
                Ok::<_, Error>((rel.clone(), FileEntry { rows: Some(rows), ..FileEntry::of(&meta) }))
            })
            .buffer_unordered(CONCURRENT_REQUESTS)
            .try_collect()
            .await?;
        list.files.extend(entries);
        for rel in removed {
            list.files.remove(rel);
        }
        list.save(store, root).await
    }

    /// The files of `table`, as object metadata under `table_prefix` (the
    /// table directory's path in the store the query engine reads), with
    /// their row counts where the list has them.
    pub fn table_files(&self, table: &str, table_prefix: &ObjectPath) -> Vec<(ObjectMeta, Option<u64>)> {
        self.table_entries(table)
            .map(|(rel, entry)| {
                let meta = ObjectMeta {
                    location: object(table_prefix, &rel[table.len() + 1..]),
                    last_modified: chrono::DateTime::from_timestamp_millis(entry.modified_ms).unwrap_or_default(),
                    size: entry.size,
                    e_tag: None,
                    version: None,
                };
                (meta, entry.rows)
            })
            .collect()
    }

    /// Checks that every listed file of a local dataset at `dir` is there
    /// with the size it was committed with (a few microseconds a file): a
    /// file changed or deleted outside tokscope is an error naming it, not a
    /// row count taken from the list for a file that no longer holds them.
    pub fn check_local(&self, dir: &std::path::Path) -> Result<()> {
        for (rel, entry) in &self.files {
            let path = dir.join(rel);
            match std::fs::metadata(&path) {
                Ok(m) if m.len() == entry.size => {}
                Ok(m) => {
                    return Err(config_err!(
                        "corrupt dataset file {}: {} bytes where the dataset's file list ({FILES}) says {}: it was \
                         changed outside tokscope (restore it from a backup, or delete it and {FILES}, then ingest \
                         its input again with --force)",
                        path.display(),
                        m.len(),
                        entry.size
                    ))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(gone(path.display())),
                Err(e) => return Err(Error::io(path.display(), e)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tables_files_are_those_under_its_directory() {
        let entry = FileEntry { size: 10, modified_ms: 1_700_000_000_000, rows: Some(3) };
        let mut list = FileList { version: VERSION, files: BTreeMap::new() };
        for rel in [
            "requests/date=2024-06-01/a.parquet",
            "requests/date=2024-06-02/b.parquet",
            "requests_x/c.parquet",
            "rejects/d.parquet",
        ] {
            list.files.insert(rel.to_string(), entry);
        }
        let prefix = ObjectPath::from("data/lake/requests");
        let files: Vec<String> =
            list.table_files("requests", &prefix).iter().map(|m| m.0.location.to_string()).collect();
        assert_eq!(
            files,
            ["data/lake/requests/date=2024-06-01/a.parquet", "data/lake/requests/date=2024-06-02/b.parquet"]
        );
        assert_eq!(list.table_files("rejects", &ObjectPath::from("rejects")).len(), 1);
        assert!(list.table_files("tokens", &ObjectPath::from("tokens")).is_empty());
    }
}
