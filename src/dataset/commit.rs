//! How a run's files become part of the dataset exactly once, even when the
//! run is killed at any point.
//!
//! 1. The run writes every data file under a hidden temporary name
//!    (`<dir>/.<name>.tmp`), which no reader lists.
//! 2. It writes a commit record, `_commits/<run_id>.json`: the files' final
//!    names and row counts and the manifest entries of the inputs they
//!    hold. Writing it is the commit point.
//! 3. It renames each file to its final name, replaces the dataset's file
//!    list (`_files.json`, what queries read: [`super::files`]) with one that
//!    holds the new files and not the files the commit replaces (`compact`
//!    merges small files into one), deletes the replaced files, adds the
//!    entries to the manifest, and deletes the record.
//!
//! The next writer (under the lease) first [`recover`]s: it finishes every
//! commit record it finds (step 3 is idempotent), then deletes the
//! temporary files no record names: those of runs that died before their
//! commit point, whose inputs the manifest does not list and so are
//! ingested again. Rows therefore land once, and no orphan file survives
//! the next run. On an object store a rename is a server-side copy plus a
//! delete; a copy that finished before a crash is detected by the final
//! object being present.

use std::collections::BTreeMap;

use futures::{stream, StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

use super::files::FileList;
use super::manifest::{Manifest, ManifestEntry};
pub(crate) use super::paths::{object, relative, CONCURRENT_REQUESTS};
use super::DatasetRoot;
use crate::error::{Error, Result};

/// Directory of commit records at the dataset root.
pub const COMMITS: &str = "_commits";

/// What a run adds to the dataset.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Commit {
    /// The run.
    pub run_id: String,
    /// Final paths of its data files, relative to the dataset root.
    pub files: Vec<String>,
    /// Rows of each of `files`, as its writer wrote them: the file list
    /// takes them from here instead of reading every footer back from the
    /// store. A file missing here (a record of an older tokscope) has its
    /// footer read.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rows: BTreeMap<String, u64>,
    /// Manifest entries of the inputs those files hold.
    pub manifest: Vec<ManifestEntry>,
    /// Files (relative to the dataset root) whose rows `files` now hold,
    /// deleted once `files` have their final names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaces: Vec<String>,
}

/// A run's files ready for its commit (`DatasetRoot::stage_for_commit`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Staged {
    /// Final paths, relative to the dataset root.
    pub files: Vec<String>,
    /// Rows of each file.
    pub rows: BTreeMap<String, u64>,
}

impl Commit {
    /// Run `run_id`'s commit of `staged`, which replaces no file and ingests no input.
    pub fn of(run_id: &str, staged: Staged) -> Self {
        let Staged { files, rows } = staged;
        Commit { run_id: run_id.to_string(), files, rows, manifest: Vec::new(), replaces: Vec::new() }
    }
}

/// The hidden temporary name of the final path `rel` (`a/b/x.parquet` -> `a/b/.x.parquet.tmp`).
pub fn temporary_name(rel: &str) -> String {
    match rel.rsplit_once('/') {
        Some((dir, name)) => format!("{dir}/.{name}.tmp"),
        None => format!(".{rel}.tmp"),
    }
}

/// Whether `rel`'s last component is a hidden temporary file of a writer.
fn is_temporary(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name.starts_with('.') && name.ends_with(".tmp")
}

/// Whether `name` is the staging file of a local put that did not finish
/// (`object_store` writes `name#N`, then renames it to `name`; its listings
/// skip such files).
fn is_staged_put(name: &str) -> bool {
    name.rsplit_once('#').is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Records `commit` (the commit point) and applies it.
pub fn commit(dataset: &DatasetRoot, commit: &Commit, rt: &tokio::runtime::Runtime) -> Result<()> {
    commit_to(dataset, commit, None, rt)
}

/// [`commit`], its manifest entries added to `manifest`: the dataset's
/// manifest as the run read it, under its lease (so not read again).
pub fn commit_adding_to(
    dataset: &DatasetRoot,
    commit: &Commit,
    manifest: Manifest,
    rt: &tokio::runtime::Runtime,
) -> Result<()> {
    commit_to(dataset, commit, Some(manifest), rt)
}

fn commit_to(
    dataset: &DatasetRoot,
    commit: &Commit,
    manifest: Option<Manifest>,
    rt: &tokio::runtime::Runtime,
) -> Result<()> {
    let (store, root) = dataset.store_and_root()?;
    let record = object(&root, &format!("{COMMITS}/{}.json", commit.run_id));
    let bytes = serde_json::to_vec(commit).map_err(|source| Error::Json { path: record.to_string().into(), source })?;
    // One put: the record is either absent or whole (a local store writes and renames).
    rt.block_on(store.put(&record, PutPayload::from(bytes)))?;
    crash_point("recorded");
    apply(dataset, store.as_ref(), &root, commit, &record, manifest, rt)
}

/// Finishes `commit`: final names, replaced files deleted, manifest entries,
/// then the record goes. Every step is idempotent, so recovery can run it again.
fn apply(
    dataset: &DatasetRoot,
    store: &dyn ObjectStore,
    root: &ObjectPath,
    commit: &Commit,
    record: &ObjectPath,
    manifest: Option<Manifest>,
    rt: &tokio::runtime::Runtime,
) -> Result<()> {
    rt.block_on(async {
        // Each file's final name is independent of the others': on an object
        // store every one is a few round trips, so they go out together.
        stream::iter(&commit.files)
            .map(|rel| finalize(dataset, store, root, commit, rel))
            .buffer_unordered(CONCURRENT_REQUESTS)
            .try_collect::<()>()
            .await?;
        crash_point("renamed");
        // The visibility point: queries read the file list, not the directories.
        FileList::commit(store, root, &commit.files, &commit.rows, &commit.replaces).await?;
        crash_point("listed");
        for rel in &commit.replaces {
            match store.delete(&object(root, rel)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(Error::from(e)),
            }
        }
        Ok(())
    })?;
    crash_point("replaced");
    if commit.manifest.is_empty() {
        return Ok(rt.block_on(store.delete(record))?);
    }
    let mut manifest = match manifest {
        Some(m) => m,
        None => Manifest::load(dataset, rt)?,
    };
    manifest.append(dataset, &commit.manifest, rt)?;
    crash_point("manifested");
    rt.block_on(store.delete(record))?;
    Ok(())
}

/// Gives `rel` its final name: renames its temporary file, or, when a
/// commit run before got that far, deletes the temporary copy left beside it.
async fn finalize(
    dataset: &DatasetRoot,
    store: &dyn ObjectStore,
    root: &ObjectPath,
    commit: &Commit,
    rel: &str,
) -> Result<()> {
    let (tmp, dest) = (object(root, &temporary_name(rel)), object(root, rel));
    match store.head(&dest).await {
        // Renamed (or copied) before: only a leftover temporary copy may remain.
        Ok(_) => match store.delete(&tmp).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(Error::from(e)),
        },
        Err(object_store::Error::NotFound { .. }) => store.rename(&tmp, &dest).await.map_err(|e| match e {
            object_store::Error::NotFound { .. } => config_err!(
                "dataset {}: commit {} names {rel}, but neither it nor its temporary file exists; \
                 the dataset was changed by something other than tokscope",
                dataset.display(),
                commit.run_id
            ),
            other => Error::from(other),
        }),
        Err(e) => Err(Error::from(e)),
    }
}

/// The environment variable that makes a commit stop dead after one of its
/// steps (`recorded`, `renamed`, `listed`, `replaced`), as `kill -9` would:
/// the crash tests use it to land exactly between two steps.
pub const CRASH_AT: &str = "TOKSCOPE_CRASH_AT";

/// Aborts the process here when [`CRASH_AT`] names `step`.
fn crash_point(step: &str) {
    if std::env::var_os(CRASH_AT).is_some_and(|v| v == step) {
        eprintln!("{CRASH_AT}={step}: aborting after the commit's `{step}` step");
        std::process::abort();
    }
}

/// What [`recover`] did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Recovery {
    /// Commits of earlier runs that were finished.
    pub commits_finished: Vec<String>,
    /// Temporary files of runs that died before their commit point, removed.
    pub orphans_removed: Vec<String>,
}

/// Finishes the commits of runs that died after their commit point and
/// removes the temporary files of runs that died before it. Call it holding
/// the dataset's lease, so no live writer's files are touched.
pub fn recover(dataset: &DatasetRoot, rt: &tokio::runtime::Runtime) -> Result<Recovery> {
    if matches!(dataset, DatasetRoot::Local(p) if !p.exists()) {
        return Ok(Recovery::default());
    }
    let (store, root) = dataset.store_and_root()?;
    let mut recovery = Recovery::default();
    let records: Vec<ObjectPath> = rt.block_on(async {
        use futures::TryStreamExt;
        store.list(Some(&object(&root, COMMITS))).map_ok(|m| m.location).try_collect().await
    })?;
    for record in records.iter().filter(|r| r.as_ref().ends_with(".json")) {
        let bytes = rt.block_on(async { store.get(record).await?.bytes().await })?;
        let commit: Commit = serde_json::from_slice(&bytes).map_err(|e| {
            config_err!(
                "dataset {}: the commit record {record} is not readable ({e}); it was not written by tokscope or \
                 is corrupt: move it away to go on (its files will be ingested again)",
                dataset.display()
            )
        })?;
        apply(dataset, store.as_ref(), &root, &commit, record, None, rt)?;
        recovery.commits_finished.push(commit.run_id);
    }
    let all: Vec<ObjectPath> = rt.block_on(async {
        use futures::TryStreamExt;
        store.list(Some(&root)).map_ok(|m| m.location).try_collect().await
    })?;
    for path in all {
        let rel = relative(&root, &path);
        if is_temporary(&rel) {
            rt.block_on(store.delete(&path))?;
            recovery.orphans_removed.push(rel);
        }
    }
    // Side files and commit records of a local dataset put by a killed run.
    if let DatasetRoot::Local(dir) = dataset {
        for sub in ["", COMMITS] {
            let Ok(entries) = std::fs::read_dir(dir.join(sub)) else { continue };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if is_staged_put(&name) {
                    std::fs::remove_file(entry.path()).map_err(|e| Error::io(entry.path().display(), e))?;
                    recovery.orphans_removed.push(if sub.is_empty() { name } else { format!("{sub}/{name}") });
                }
            }
        }
    }
    Ok(recovery)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_are_hidden_beside_the_final_file() {
        assert_eq!(
            temporary_name("requests/date=2024-06-01/part-a.parquet"),
            "requests/date=2024-06-01/.part-a.parquet.tmp"
        );
        assert_eq!(temporary_name("x.parquet"), ".x.parquet.tmp");
        assert!(is_temporary("requests/date=2024-06-01/.part-a.parquet.tmp"));
        assert!(!is_temporary("requests/date=2024-06-01/part-a.parquet"));
        assert!(is_staged_put("_files.json#3") && is_staged_put("run.json#12"));
        assert!(!is_staged_put("_files.json") && !is_staged_put("a#b.parquet") && !is_staged_put("x#"));
    }

    /// More files than the requests kept in flight: every one gets its final
    /// name and its own row count in the file list, and applying the same
    /// commit again (as recovery does) changes nothing. Even files have their
    /// rows in the record and are not even Parquet (their footers are not
    /// read); odd ones have none there (a record of an older tokscope), so
    /// their footers are.
    #[test]
    fn a_commit_of_many_files_names_and_lists_each_once() {
        use arrow::array::{ArrayRef, Int64Array, RecordBatch};
        let dir = tempfile::tempdir().unwrap();
        let dataset = DatasetRoot::Local(dir.path().to_path_buf());
        let n = 3 * CONCURRENT_REQUESTS + 1;
        let files: Vec<String> =
            (0..n).map(|i| format!("requests/date=2024-06-{:02}/part-r-{i}.parquet", i % 28 + 1)).collect();
        let mut rows = BTreeMap::new();
        for (i, rel) in files.iter().enumerate() {
            let tmp = dir.path().join(temporary_name(rel));
            std::fs::create_dir_all(tmp.parent().unwrap()).unwrap();
            if i % 2 == 0 {
                std::fs::write(&tmp, b"rows counted by its writer").unwrap();
                rows.insert(rel.clone(), i as u64 + 1);
                continue;
            }
            let column: ArrayRef = std::sync::Arc::new(Int64Array::from_iter_values(0..=i as i64));
            let batch = RecordBatch::try_from_iter([("x", column)]).unwrap();
            let mut writer =
                parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&tmp).unwrap(), batch.schema(), None)
                    .unwrap();
            writer.write(&batch).unwrap();
            writer.close().unwrap();
        }
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let run = Commit::of("r", Staged { files: files.clone(), rows });
        commit(&dataset, &run, &rt).unwrap();
        let (store, root) = dataset.store_and_root().unwrap();
        for again in [false, true] {
            let list = rt.block_on(FileList::load(store.as_ref(), &root)).unwrap().unwrap();
            assert_eq!(list.files.len(), n, "recovered again: {again}");
            for (i, rel) in files.iter().enumerate() {
                assert_eq!(list.files[rel].rows, Some(i as u64 + 1), "{rel}");
                assert!(dir.path().join(rel).is_file() && !dir.path().join(temporary_name(rel)).exists(), "{rel}");
            }
            commit(&dataset, &run, &rt).unwrap();
        }
    }
}
