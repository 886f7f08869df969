//! The writer's lease on a dataset: at most one process writes a dataset at
//! a time (ingest, a scheduled run), so two overlapping runs can never
//! ingest the same objects twice, and a run may clean up what a dead one left.
//!
//! - A local dataset is locked with an OS file lock on `<dataset>/_lease`.
//!   The kernel releases it when the process ends, however it ends (even
//!   `kill -9`), so a local lease never goes stale.
//! - On an object store the lease is the object `_lease.json`, created with a
//!   conditional put (`If-None-Match: *`) and holding its owner and expiry. A
//!   lease past its expiry is taken over with a conditional update on its
//!   ETag (`If-Match`), so of two runs that find it expired only one wins.
//!   The holder renews it between steps; a run that dies leaves a lease that
//!   expires (default: one hour).
//!
//! A run that finds the lease held waits up to `wait` for it, then fails
//! with [`LeaseBusy`](crate::Error::LeaseBusy) naming the holder.

use std::fs::File;
use std::time::{Duration, Instant};

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};

use super::DatasetRoot;
use crate::error::{Error, Result};

/// Name of the lease file (local) or object (remote) at the dataset root.
pub const LEASE_FILE: &str = "_lease";
/// Name of the lease object on object stores.
pub const LEASE_OBJECT: &str = "_lease.json";

/// Attempts at the conditional put of an object-store lease that fail
/// without an answer (time-outs, connection errors) before giving up.
const LEASE_PUT_ATTEMPTS: u32 = 5;

/// How a lease is taken.
#[derive(Debug, Clone, Copy)]
pub struct LeaseOptions {
    /// An object-store lease not renewed for this long may be taken over.
    pub expiry: Duration,
    /// Wait this long for a held lease before failing (zero: fail at once).
    pub wait: Duration,
}

impl Default for LeaseOptions {
    fn default() -> Self {
        LeaseOptions { expiry: Duration::from_secs(3600), wait: Duration::ZERO }
    }
}

/// Who holds a lease, as stored in the lease object (and shown to a run that waits).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Holder {
    /// Host name of the holder.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// Its run id.
    pub run_id: String,
    /// When it expires, seconds since the epoch (object stores only).
    pub expires_at: i64,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "run {} (pid {} on {})", self.run_id, self.pid, self.host)
    }
}

/// A held lease; released when dropped.
pub struct Lease {
    kind: LeaseKind,
}

enum LeaseKind {
    /// The locked file; closing it releases the lock.
    Local(#[allow(dead_code)] File),
    Remote {
        store: std::sync::Arc<dyn ObjectStore>,
        path: ObjectPath,
        holder: Holder,
        version: UpdateVersion,
        expiry: Duration,
        rt: tokio::runtime::Handle,
    },
}

impl Lease {
    /// Takes the writer's lease on `dataset` for `run_id`.
    pub fn acquire(
        dataset: &DatasetRoot,
        run_id: &str,
        options: LeaseOptions,
        rt: &tokio::runtime::Runtime,
    ) -> Result<Lease> {
        let deadline = Instant::now() + options.wait;
        match dataset {
            DatasetRoot::Local(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display(), e))?;
                let path = dir.join(LEASE_FILE);
                let file = File::options()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(&path)
                    .map_err(|e| Error::io(path.display(), e))?;
                loop {
                    match file.try_lock() {
                        Ok(()) => return Ok(Lease { kind: LeaseKind::Local(file) }),
                        Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                            std::thread::sleep(Duration::from_millis(200))
                        }
                        Err(std::fs::TryLockError::WouldBlock) => {
                            return Err(Error::LeaseBusy {
                                dataset: dataset.display(),
                                holder: "another process on this host".into(),
                            })
                        }
                        Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(path.display(), e)),
                    }
                }
            }
            DatasetRoot::Remote { store, prefix, .. } => {
                let path = prefix.clone().join(LEASE_OBJECT);
                let holder = || Holder {
                    host: host_name(),
                    pid: std::process::id(),
                    run_id: run_id.to_string(),
                    expires_at: chrono::Utc::now().timestamp() + options.expiry.as_secs() as i64,
                };
                // The lease, once `holder` is what the object at `path` holds at `version`.
                let held = |holder: Holder, version: UpdateVersion| Lease {
                    kind: LeaseKind::Remote {
                        store: store.clone(),
                        path: path.clone(),
                        holder,
                        version,
                        expiry: options.expiry,
                        rt: rt.handle().clone(),
                    },
                };
                // A conditional put is not retried by the client when it times
                // out (it may have happened): such failures are retried here,
                // and a lease found holding our own run id is ours.
                let mut failures = 0;
                loop {
                    let mine = holder();
                    let taken = rt.block_on(put_lease(store.as_ref(), &path, &mine, PutMode::Create));
                    match taken {
                        Ok(version) => return Ok(held(mine, version)),
                        Err(object_store::Error::AlreadyExists { .. }) => {}
                        Err(e) if failures < LEASE_PUT_ATTEMPTS => {
                            failures += 1;
                            drop(e);
                            std::thread::sleep(Duration::from_millis(200 * failures as u64));
                            continue;
                        }
                        Err(e) => return Err(e.into()),
                    }
                    // Held: take it over if it expired, else wait or give up.
                    let (current, version) = match rt.block_on(read_lease(store.as_ref(), &path)) {
                        Ok(found) => found,
                        // Released between our put and our read: try again.
                        Err(object_store::Error::NotFound { .. }) => continue,
                        Err(e) => return Err(e.into()),
                    };
                    if current.run_id == run_id && current.pid == std::process::id() {
                        // Our own earlier put, whose answer was lost.
                        return Ok(held(current, version));
                    }
                    if current.expires_at <= chrono::Utc::now().timestamp() {
                        let mine = holder();
                        match rt.block_on(put_lease(store.as_ref(), &path, &mine, PutMode::Update(version))) {
                            Ok(version) => return Ok(held(mine, version)),
                            // Someone else took it over first.
                            Err(object_store::Error::Precondition { .. }) => {}
                            Err(e) => return Err(e.into()),
                        }
                    }
                    if Instant::now() >= deadline {
                        return Err(Error::LeaseBusy { dataset: dataset.display(), holder: current.to_string() });
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
            }
        }
    }

    /// Extends an object-store lease by its expiry from now (a no-op for a
    /// local lease, which lasts as long as the process). Fails when the lease
    /// was taken over meanwhile: the run must stop writing.
    pub fn renew(&mut self) -> Result<()> {
        let LeaseKind::Remote { store, path, holder, version, expiry, rt } = &mut self.kind else { return Ok(()) };
        holder.expires_at = chrono::Utc::now().timestamp() + expiry.as_secs() as i64;
        let renewed = rt.block_on(put_lease(store.as_ref(), path, holder, PutMode::Update(version.clone())));
        match renewed {
            Ok(v) => {
                *version = v;
                Ok(())
            }
            Err(object_store::Error::Precondition { .. }) => Err(config_err!(
                "the lease on the dataset expired and another run took it over; this run stopped writing"
            )),
            Err(e) => Err(e.into()),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let LeaseKind::Remote { store, path, version, rt, .. } = &self.kind {
            // Delete only our own lease: if it was taken over, its ETag changed.
            let ours = rt.block_on(read_lease(store.as_ref(), path)).is_ok_and(|(_, v)| v.e_tag == version.e_tag);
            if ours {
                // A failed delete leaves a lease that expires; nothing more to do here.
                let _ = rt.block_on(store.delete(path));
            }
        }
    }
}

async fn put_lease(
    store: &dyn ObjectStore,
    path: &ObjectPath,
    holder: &Holder,
    mode: PutMode,
) -> object_store::Result<UpdateVersion> {
    let body = serde_json::to_vec(holder).unwrap_or_default();
    let result = store.put_opts(path, PutPayload::from(body), PutOptions { mode, ..Default::default() }).await?;
    Ok(UpdateVersion { e_tag: result.e_tag, version: result.version })
}

async fn read_lease(store: &dyn ObjectStore, path: &ObjectPath) -> object_store::Result<(Holder, UpdateVersion)> {
    let result = store.get(path).await?;
    let version = UpdateVersion { e_tag: result.meta.e_tag.clone(), version: result.meta.version.clone() };
    let bytes = result.bytes().await?;
    // An unreadable lease object counts as expired: it can be taken over.
    let holder = serde_json::from_slice(&bytes).unwrap_or(Holder {
        host: "unknown".into(),
        pid: 0,
        run_id: "unknown".into(),
        expires_at: 0,
    });
    Ok((holder, version))
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "unknown".into())
}
