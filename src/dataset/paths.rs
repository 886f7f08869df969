//! Where a dataset's objects are and how many store requests run at once:
//! shared by the commit, the file list and staging.

use object_store::path::Path as ObjectPath;

/// Requests to the store a commit keeps in flight at once (renames, sizes,
/// footers): one file's steps take a few round trips to an object store, and
/// a run over a month of logs commits a file per day and writer thread.
pub const CONCURRENT_REQUESTS: usize = 16;

/// The object path of `rel` (a `/`-separated path below the dataset root) under `root`.
pub fn object(root: &ObjectPath, rel: &str) -> ObjectPath {
    rel.split('/').filter(|p| !p.is_empty()).fold(root.clone(), |p, part| p.join(part))
}

/// `path` relative to `root`: the inverse of [`object`].
pub fn relative(root: &ObjectPath, path: &ObjectPath) -> String {
    path.as_ref().strip_prefix(root.as_ref()).unwrap_or(path.as_ref()).trim_start_matches('/').to_string()
}
