//! Build script: the git commit that `tokscope --version` names.
//!
//! `git rev-parse --short=12 HEAD`, with `-dirty` when tracked files differ
//! from it; `TOKSCOPE_COMMIT` in the build environment wins (packagers
//! building from a tarball set it); without either the commit is `unknown`.
//! The script reruns when HEAD, the branch it points to, or the index change
//! (a commit, a checkout, `git add`); an edit not yet staged is not seen.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=TOKSCOPE_COMMIT");
    let commit = match std::env::var("TOKSCOPE_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => from_git().unwrap_or_else(|| "unknown".to_string()),
    };
    println!("cargo:rustc-env=TOKSCOPE_VERSION={} (commit {commit})", env!("CARGO_PKG_VERSION"));
}

/// The commit of the checkout being built, and the files to watch for it.
fn from_git() -> Option<String> {
    let git_dir = git(&["rev-parse", "--absolute-git-dir"])?;
    println!("cargo:rerun-if-changed={git_dir}/HEAD");
    println!("cargo:rerun-if-changed={git_dir}/index");
    if let Some(common) = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]) {
        println!("cargo:rerun-if-changed={common}/packed-refs");
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={common}/{branch}");
        }
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    // --no-optional-locks: status must not rewrite the index it is watched through.
    let dirty =
        git(&["--no-optional-locks", "status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{commit}-dirty") } else { commit })
}
