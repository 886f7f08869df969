//! Where tests find the shared reference checkpoints.

use std::path::PathBuf;

/// The shared fixtures directory: `$TOKSCOPE_SHARED` when set (local worktrees),
/// else `shared/` next to the crate (the CI layout).
pub fn shared_dir() -> PathBuf {
    std::env::var_os("TOKSCOPE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared")))
}

/// A reference model directory under `shared/models/`.
pub fn model_dir(name: &str) -> PathBuf {
    shared_dir().join("models").join(name)
}
