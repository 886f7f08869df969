//! A tokscope dataset: a local directory or an object-store prefix holding
//! one directory of Parquet files per table of the catalog
//! (`tokscope_core::catalog`) and the side files `_manifest.jsonl` and
//! `_ingest_summary.json`. [`writer`] writes the files.

pub mod commit;
pub mod compact;
pub mod files;
pub mod lease;
pub mod manifest;
pub mod paths;
pub mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use url::Url;

use tokscope_core::catalog::{TableDef, CATALOG};

use crate::error::{Error, Result};
use crate::store::{self, StoreOptions};

/// The ingest manifest's file name (see `ingest::manifest`).
pub const MANIFEST: &str = "_manifest.jsonl";

/// How much of a remote run's staged files its staging holds in memory
/// ([`DatasetRoot::stage_for_commit`]).
#[derive(Debug, Clone, Copy)]
struct StagingLimits {
    /// The most bytes of files read whole and put at once; a larger file is
    /// streamed in parts instead.
    in_memory: u64,
    /// The size of a streamed file's parts.
    part: usize,
}

impl Default for StagingLimits {
    fn default() -> Self {
        // `TOKSCOPE_UPLOAD_PART=BYTES` (bench/soak.sh): files over one part of
        // that size are streamed in such parts, so that the small files of a
        // soak go through multipart uploads as a large dataset's do.
        match std::env::var("TOKSCOPE_UPLOAD_PART").ok().and_then(|v| v.parse::<usize>().ok()) {
            Some(part) if part > 0 => StagingLimits { in_memory: part as u64, part },
            _ => StagingLimits { in_memory: 64 << 20, part: 8 << 20 },
        }
    }
}

/// Parts of one streamed file uploading at once (with the part being
/// filled, at most five parts of [`StagingLimits::part`] in memory).
const STREAMED_PARTS_IN_FLIGHT: usize = 4;

/// The size of a local file.
fn file_size(path: &Path) -> Result<u64> {
    Ok(std::fs::metadata(path).map_err(|e| Error::io(path.display(), e))?.len())
}

/// How long a command that adds a file to a table (replay, mediate) waits
/// for the dataset's lease while an ingest or compaction holds it.
pub const WRITE_LEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// A fresh id per run: UTC time plus process id, sortable and unique.
pub fn new_run_id() -> String {
    format!("{}-{:x}", chrono::Utc::now().format("%Y%m%dT%H%M%S%3f"), std::process::id())
}

/// What a dataset root holds ([`DatasetRoot::contents`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contents {
    /// Whether `_manifest.jsonl` is there (an ingest wrote the dataset).
    pub manifest: bool,
    /// The catalog tables that have a directory, in catalog order.
    pub tables: Vec<&'static str>,
}

/// Where a dataset lives.
#[derive(Clone)]
pub enum DatasetRoot {
    /// A local directory.
    Local(PathBuf),
    /// An object-store prefix.
    Remote {
        /// `scheme://bucket/prefix` without a trailing slash.
        url: Url,
        /// The store serving it.
        store: Arc<dyn ObjectStore>,
        /// The prefix inside the store.
        prefix: object_store::path::Path,
    },
}

impl std::fmt::Debug for DatasetRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.display())
    }
}

impl DatasetRoot {
    /// A local path, `file://` URL, or object-store URL, with the default
    /// object-store client settings.
    pub fn parse(s: &str) -> Result<Self> {
        Self::parse_with(s, &StoreOptions::default())
    }

    /// [`Self::parse`] with explicit object-store client settings.
    pub fn parse_with(s: &str, options: &StoreOptions) -> Result<Self> {
        if let Some(p) = s.strip_prefix("file://") {
            return Ok(DatasetRoot::Local(PathBuf::from(p)));
        }
        if !store::is_url(s) {
            return Ok(DatasetRoot::Local(PathBuf::from(s)));
        }
        let url = store::parse_url(s.trim_end_matches('/'))?;
        let store = store::store_for(&url, options)?;
        let prefix = store::object_path(&url)?;
        Ok(DatasetRoot::Remote { url, store, prefix })
    }

    /// Human-readable location.
    pub fn display(&self) -> String {
        match self {
            DatasetRoot::Local(p) => p.display().to_string(),
            DatasetRoot::Remote { url, .. } => url.to_string(),
        }
    }

    /// What the dataset holds: its side files and table directories. A root
    /// that does not exist, or holds neither a manifest nor a table
    /// directory, is not a dataset: an [`Error::NotFound`] (a typo in `--data`
    /// must not read as an empty dataset).
    pub async fn contents(&self) -> Result<Contents> {
        let (manifest, names) = match self {
            DatasetRoot::Local(p) => {
                let entries = match std::fs::read_dir(p) {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return Err(self.not_a_dataset("the directory does not exist"))
                    }
                    Err(e) => return Err(Error::io(p.display(), e)),
                };
                let mut names = Vec::new();
                let mut manifest = false;
                for entry in entries {
                    let entry = entry.map_err(|e| Error::io(p.display(), e))?;
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if entry.path().is_dir() {
                        names.push(name);
                    } else if name == MANIFEST {
                        manifest = true;
                    }
                }
                (manifest, names)
            }
            DatasetRoot::Remote { store, prefix, .. } => {
                let listing = store.list_with_delimiter(Some(prefix)).await?;
                let manifest = listing.objects.iter().any(|o| o.location.filename() == Some(MANIFEST));
                let names = listing.common_prefixes.iter().filter_map(|d| d.filename().map(str::to_string)).collect();
                (manifest, names)
            }
        };
        let tables: Vec<&'static str> =
            CATALOG.iter().map(|t| t.name).filter(|t| names.iter().any(|n| n == t)).collect();
        if !manifest && tables.is_empty() {
            let why = match self {
                DatasetRoot::Local(_) => "no _manifest.jsonl and no table directory in it",
                DatasetRoot::Remote { .. } => "no _manifest.jsonl and no table under that prefix",
            };
            return Err(self.not_a_dataset(why));
        }
        Ok(Contents { manifest, tables })
    }

    fn not_a_dataset(&self, why: &str) -> Error {
        Error::NotFound {
            what: format!("no tokscope dataset at {}: {why}", self.display()),
            hint: format!(
                "check --data, or write a dataset there with `tokscope ingest LOGS --out {}`",
                self.display()
            ),
        }
    }

    /// URL of a table directory, as DataFusion's listing tables want it (trailing slash).
    pub fn table_url(&self, table: &str) -> Result<String> {
        Ok(match self {
            DatasetRoot::Local(p) => {
                let abs = std::path::absolute(p).map_err(|e| Error::io(p.display(), e))?;
                format!("{}/{table}/", abs.display())
            }
            DatasetRoot::Remote { url, .. } => format!("{}/{table}/", url.as_str().trim_end_matches('/')),
        })
    }

    /// The object path of `rel` (a `/`-separated path below the dataset root).
    fn object(&self, rel: &str) -> object_store::path::Path {
        let parts = rel.split('/').filter(|p| !p.is_empty()).map(object_store::path::PathPart::from);
        match self {
            DatasetRoot::Remote { prefix, .. } => prefix.parts().chain(parts).collect(),
            DatasetRoot::Local(_) => parts.collect(),
        }
    }

    /// The object store holding this dataset and the path of its root inside
    /// it (a local directory is served by a `LocalFileSystem` rooted there, so
    /// table rewrites use one code path for local and remote datasets).
    pub fn store_and_root(&self) -> Result<(Arc<dyn ObjectStore>, object_store::path::Path)> {
        match self {
            DatasetRoot::Local(p) => {
                std::fs::create_dir_all(p).map_err(|e| Error::io(p.display(), e))?;
                let fs = object_store::local::LocalFileSystem::new_with_prefix(p)?;
                Ok((Arc::new(fs), object_store::path::Path::default()))
            }
            DatasetRoot::Remote { store, prefix, .. } => Ok((Arc::clone(store), prefix.clone())),
        }
    }

    /// Reads a side file; `None` when it does not exist.
    pub fn read_side_file(&self, name: &str, rt: &tokio::runtime::Runtime) -> Result<Option<Vec<u8>>> {
        match self {
            DatasetRoot::Local(p) => match std::fs::read(p.join(name)) {
                Ok(b) => Ok(Some(b)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(Error::io(p.join(name).display(), e)),
            },
            DatasetRoot::Remote { store, .. } => {
                let path = self.object(name);
                let at = || Error::store_at(format!("{}/{name}", self.display()));
                rt.block_on(async {
                    match store.get(&path).await {
                        Ok(r) => Ok(Some(r.bytes().await.map_err(at())?.to_vec())),
                        Err(object_store::Error::NotFound { .. }) => Ok(None),
                        Err(e) => Err(at()(e)),
                    }
                })
            }
        }
    }

    /// Writes (replaces) a side file.
    pub fn write_side_file(&self, name: &str, bytes: Vec<u8>, rt: &tokio::runtime::Runtime) -> Result<()> {
        match self {
            DatasetRoot::Local(p) => {
                std::fs::create_dir_all(p).map_err(|e| Error::io(p.display(), e))?;
                let tmp = p.join(format!(".{name}.tmp"));
                std::fs::write(&tmp, bytes).map_err(|e| Error::io(tmp.display(), e))?;
                std::fs::rename(&tmp, p.join(name)).map_err(|e| Error::io(p.join(name).display(), e))
            }
            DatasetRoot::Remote { store, .. } => {
                let path = self.object(name);
                rt.block_on(store.put(&path, PutPayload::from(bytes)))
                    .map_err(Error::store_at(format!("{}/{name}", self.display())))?;
                Ok(())
            }
        }
    }

    /// Where ingest writes files before they are published: the dataset
    /// itself when local, else a local staging directory.
    pub fn staging_dir(&self) -> Result<PathBuf> {
        match self {
            DatasetRoot::Local(p) => Ok(p.clone()),
            DatasetRoot::Remote { .. } => {
                let dir = std::env::temp_dir().join(format!("tokscope-staging-{}", std::process::id()));
                std::fs::create_dir_all(&dir).map_err(|e| Error::io(dir.display(), e))?;
                Ok(dir)
            }
        }
    }

    /// Makes a run's finished files (final paths under `staging`, each still
    /// under its temporary name) ready for `commit::commit`: for a remote
    /// dataset each is put under its temporary name and the staging copy
    /// removed; a local dataset is its own staging.
    pub fn stage_for_commit(
        &self,
        staging: &Path,
        files: &[writer::WrittenFile],
        rt: &tokio::runtime::Runtime,
    ) -> Result<commit::Staged> {
        let rels = files
            .iter()
            .map(|f| {
                let rel = f
                    .path
                    .strip_prefix(staging)
                    .map_err(|_| internal_err!("{} is outside staging", f.path.display()))?;
                Ok(rel.to_string_lossy().replace(std::path::MAIN_SEPARATOR, "/"))
            })
            .collect::<Result<Vec<String>>>()?;
        if let DatasetRoot::Remote { store, .. } = self {
            let staged: Vec<(PathBuf, &str)> =
                files.iter().zip(&rels).map(|(f, rel)| (writer::temporary_path(&f.path), rel.as_str())).collect();
            rt.block_on(self.put_staged(store, &staged, StagingLimits::default()))?;
            std::fs::remove_dir_all(staging).map_err(|e| Error::io(staging.display(), e))?;
        }
        let rows = rels.iter().cloned().zip(files.iter().map(|f| f.rows)).collect();
        Ok(commit::Staged { files: rels, rows })
    }

    /// Puts each staged file (local path, path relative to the dataset root)
    /// under its temporary name in the store, several at a time (each put is
    /// a round trip or more), holding at most `limits.in_memory` bytes of them
    /// in memory at once; a larger file is streamed alone as a multipart
    /// upload of `limits.part`-byte parts.
    async fn put_staged(
        &self,
        store: &Arc<dyn ObjectStore>,
        staged: &[(PathBuf, &str)],
        limits: StagingLimits,
    ) -> Result<()> {
        let sizes = staged.iter().map(|(path, _)| file_size(path)).collect::<Result<Vec<u64>>>()?;
        let mut start = 0;
        while start < staged.len() {
            if sizes[start] > limits.in_memory {
                self.put_streamed(store, &staged[start], limits.part).await?;
                start += 1;
                continue;
            }
            let (mut end, mut bytes) = (start, 0);
            while end < staged.len()
                && end - start < paths::CONCURRENT_REQUESTS
                && (end == start || bytes + sizes[end] <= limits.in_memory)
            {
                bytes += sizes[end];
                end += 1;
            }
            futures::future::try_join_all(staged[start..end].iter().map(|(path, rel)| async move {
                let data = std::fs::read(path).map_err(|e| Error::io(path.display(), e))?;
                store.put(&self.object(&commit::temporary_name(rel)), PutPayload::from(data)).await?;
                Ok::<_, Error>(())
            }))
            .await?;
            start = end;
        }
        Ok(())
    }

    /// Streams one staged file into the store as a multipart upload of
    /// `part`-byte parts, a few in flight, so that its size does not decide
    /// the memory a run holds. An upload that fails is aborted whichever of
    /// its requests failed (a part, or the completion after every part was
    /// put), so that it leaves no incomplete upload behind unless the abort
    /// fails too.
    async fn put_streamed(&self, store: &Arc<dyn ObjectStore>, staged: &(PathBuf, &str), part: usize) -> Result<()> {
        use futures::stream::{FuturesUnordered, StreamExt};
        use tokio::io::AsyncReadExt;
        let (path, rel) = staged;
        let object = self.object(&commit::temporary_name(rel));
        let at =
            || Error::store_at(format!("{}/{}", self.display().trim_end_matches('/'), commit::temporary_name(rel)));
        let read = |e: std::io::Error| Error::io(path.display(), e);
        let mut file = tokio::fs::File::open(path).await.map_err(read)?;
        let mut upload = store.put_multipart(&object).await.map_err(at())?;
        let sent = async {
            let mut in_flight: FuturesUnordered<object_store::UploadPart> = FuturesUnordered::new();
            loop {
                let mut bytes = vec![0; part];
                let mut filled = 0;
                while filled < part {
                    match file.read(&mut bytes[filled..]).await.map_err(read)? {
                        0 => break,
                        n => filled += n,
                    }
                }
                if filled == 0 {
                    break;
                }
                bytes.truncate(filled);
                while in_flight.len() >= STREAMED_PARTS_IN_FLIGHT {
                    if let Some(done) = in_flight.next().await {
                        done.map_err(at())?;
                    }
                }
                in_flight.push(upload.put_part(PutPayload::from(bytes)));
                if filled < part {
                    break;
                }
            }
            while let Some(done) = in_flight.next().await {
                done.map_err(at())?;
            }
            upload.complete().await.map_err(at())?;
            Ok::<_, Error>(())
        }
        .await;
        if sent.is_err() {
            let _ = upload.abort().await;
        }
        sent
    }

    /// Adds one new Parquet file holding `batches` to `table`, beside its
    /// files (see [`Self::write_table_file`]); returns its location.
    pub fn add_table_file(
        &self,
        table: &TableDef,
        batches: &[RecordBatch],
        rt: &tokio::runtime::Runtime,
    ) -> Result<String> {
        self.write_table_file(table, rt, |_, _| Ok((batches.to_vec(), false)))
    }

    /// Writes one new Parquet file of `table` in one commit, holding the
    /// dataset's lease (waiting up to [`WRITE_LEASE_WAIT`] for a running
    /// ingest): `rows` gets the store and the table's current files, and
    /// returns the new file's batches and whether they replace those files
    /// (a rewrite: the commit deletes them) or go beside them. Returns the new
    /// file's location.
    pub fn write_table_file(
        &self,
        table: &TableDef,
        rt: &tokio::runtime::Runtime,
        rows: impl FnOnce(&dyn ObjectStore, &[object_store::path::Path]) -> Result<(Vec<RecordBatch>, bool)>,
    ) -> Result<String> {
        let run_id = new_run_id();
        let wait = lease::LeaseOptions { wait: WRITE_LEASE_WAIT, ..Default::default() };
        let _lease = lease::Lease::acquire(self, &run_id, wait, rt)?;
        commit::recover(self, rt)?;
        let (store, root) = self.store_and_root()?;
        let list = rt.block_on(files::FileList::load_or_scan(store.as_ref(), &root))?;
        let current = list.table_paths(table.name);
        let paths: Vec<_> = current.iter().map(|rel| self.object(rel)).collect();
        let (batches, replace) = rows(store.as_ref(), &paths)?;
        let staging = self.staging_dir()?;
        let dest = staging.join(table.name).join(format!("part-{run_id}.parquet"));
        let mut file = writer::OpenFile::create(table, dest, writer::default_compression(), writer::Integers::Delta)?;
        for batch in batches.iter().filter(|b| b.num_rows() > 0) {
            file.write(batch)?;
        }
        let written = file.finish()?;
        let staged = self.stage_for_commit(&staging, std::slice::from_ref(&written), rt)?;
        let rel = staged.files.first().ok_or_else(|| internal_err!("the new {} file was not staged", table.name))?;
        let location = format!("{}/{rel}", self.display().trim_end_matches('/'));
        let replaces = if replace { current } else { Vec::new() };
        commit::commit(self, &commit::Commit { replaces, ..commit::Commit::of(&run_id, staged) }, rt)?;
        Ok(location)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Staged files reach the store byte for byte whichever way they go: read
    /// whole and put together while they fit the in-memory limit, streamed
    /// alone above it (a file larger than one part as a multipart upload).
    #[test]
    fn staged_files_are_put_whole_or_streamed_in_parts() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let dataset = DatasetRoot::Remote {
            url: Url::parse("memory://bucket/lake").unwrap(),
            store: Arc::clone(&store),
            prefix: object_store::path::Path::from("lake"),
        };
        let sizes = [1_000, 2_000, 5_000, (5 << 20) / 2, 0];
        let mut files = Vec::new();
        for (i, size) in sizes.into_iter().enumerate() {
            let rel = format!("requests/date=2024-06-01/part-{i}.parquet");
            let path = dir.path().join(commit::temporary_name(&rel));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let bytes: Vec<u8> = (0..size).map(|b: usize| (b.wrapping_mul(31) ^ i) as u8).collect();
            std::fs::write(&path, &bytes).unwrap();
            files.push((path, rel, bytes));
        }
        let staged: Vec<(PathBuf, &str)> = files.iter().map(|(p, rel, _)| (p.clone(), rel.as_str())).collect();
        let limits = StagingLimits { in_memory: 4_096, part: 1 << 20 };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(dataset.put_staged(&store, &staged, limits)).unwrap();
        for (_, rel, bytes) in &files {
            let object = dataset.object(&commit::temporary_name(rel));
            let got = rt.block_on(async { store.get(&object).await.unwrap().bytes().await.unwrap() });
            assert_eq!(got.len(), bytes.len(), "{rel}");
            assert!(got.as_ref() == bytes.as_slice(), "{rel}: other bytes");
        }
    }
}
