//! The CUDA kernels compile to PTX with NVRTC, and their PTX does not change
//! with the batch size (batch invariance: no kernel specialises its memory
//! access or arithmetic on how many rows run together). Needs no GPU, only
//! `libnvrtc`: `pip install nvidia-cuda-nvrtc` (13.x) and put
//! `site-packages/nvidia/cu13/lib` on `LD_LIBRARY_PATH`, or let this test find
//! that directory through `python3` and rerun itself with it. It skips with a
//! message when NVRTC is missing, unless `TOKSCOPE_REQUIRE_NVRTC` is set.
#![cfg(feature = "cuda")]

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;

use sha2::{Digest, Sha256};
use tokscope::replay::cuda::{self, kernels};

const RERUN_MARKER: &str = "TOKSCOPE_NVRTC_RERUN";

/// The pip wheel's directories holding NVRTC (`site-packages/nvidia/cu13/lib`,
/// or `cuda_nvrtc/lib` of the CUDA 12 wheels), found by the helper script that
/// `bench/gpu_check.sh` uses too.
fn pip_nvrtc_dir() -> Option<String> {
    let script = common::repo().join("tests/support/cuda_lib_dirs.py");
    let out = Command::new("python3").arg(script).arg("nvrtc").output().ok()?;
    let dir = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!dir.is_empty()).then_some(dir)
}

/// NVRTC loads, or this test reran itself with the pip wheel's directory on
/// `LD_LIBRARY_PATH` (the dynamic loader reads it only at start) and the
/// rerun's result is returned as `Some(passed)`.
fn nvrtc_or_rerun(test: &str) -> Result<(), Option<bool>> {
    if cuda::nvrtc_available() {
        return Ok(());
    }
    if std::env::var_os(RERUN_MARKER).is_none() {
        if let Some(dir) = pip_nvrtc_dir() {
            let path = match std::env::var("LD_LIBRARY_PATH") {
                Ok(p) if !p.is_empty() => format!("{dir}:{p}"),
                _ => dir,
            };
            // The test's full name in this binary (`cuda_kernels::<test>`).
            let full = format!("{}::{test}", module_path!().split_once("::").map_or("", |(_, m)| m));
            let out = Command::new(std::env::current_exe().expect("test exe"))
                .args([full.as_str(), "--exact", "--nocapture", "--test-threads=1"])
                .env("LD_LIBRARY_PATH", path)
                .env(RERUN_MARKER, "1")
                .output()
                .expect("rerun test");
            let stdout = String::from_utf8_lossy(&out.stdout);
            eprint!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
            // A rerun that matched no test must not pass as one that ran.
            return Err(Some(out.status.success() && stdout.contains("1 passed")));
        }
    }
    let message =
        "libnvrtc not found: pip install nvidia-cuda-nvrtc and put site-packages/nvidia/cu13/lib on LD_LIBRARY_PATH";
    assert!(std::env::var_os("TOKSCOPE_REQUIRE_NVRTC").is_none(), "TOKSCOPE_REQUIRE_NVRTC is set but {message}");
    eprintln!("skip: {message}");
    Err(None)
}

/// Per kernel: the hash of its global loads/stores, MMA and FMA instructions
/// (the memory-access and arithmetic skeleton of the kernel).
fn kernel_skeletons(ptx: &str) -> BTreeMap<String, (usize, String)> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, Vec<String>)> = None;
    for line in ptx.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix(".visible .entry ").or_else(|| line.strip_prefix(".entry ")) {
            let name = rest.split('(').next().unwrap_or(rest).trim().to_string();
            current = Some((name, Vec::new()));
        } else if line == "}" {
            if let Some((name, instructions)) = current.take() {
                let digest = Sha256::digest(instructions.join("\n").as_bytes());
                let hex = digest.iter().map(|b| format!("{b:02x}")).collect::<String>();
                out.insert(name, (instructions.len(), hex));
            }
        } else if let Some((_, instructions)) = current.as_mut() {
            let op = line.split_whitespace().next().unwrap_or("");
            if ["ld.global", "st.global", "mma", "fma"].iter().any(|p| op.starts_with(p)) {
                instructions.push(line.to_string());
            }
        }
    }
    out
}

#[test]
fn kernels_compile_and_are_batch_invariant() {
    match nvrtc_or_rerun("kernels_compile_and_are_batch_invariant") {
        Ok(()) => {}
        Err(Some(passed)) => return assert!(passed, "the rerun with the pip NVRTC on LD_LIBRARY_PATH failed"),
        Err(None) => return,
    }
    let mut reference = None;
    for batch in ["1", "7", "64"] {
        let ptx = kernels::compile_ptx(&[("TOKSCOPE_BATCH", batch)]).expect("NVRTC compiles the kernels");
        let skeletons = kernel_skeletons(&ptx);
        for name in kernels::KERNELS {
            let (count, _) = skeletons.get(*name).unwrap_or_else(|| panic!("kernel {name} missing from PTX"));
            assert!(*count > 0, "kernel {name} has no global memory access");
        }
        eprintln!("batch {batch}: {skeletons:?}");
        match &reference {
            None => reference = Some(skeletons),
            Some(r) => assert_eq!(r, &skeletons, "PTX changed with TOKSCOPE_BATCH={batch}"),
        }
    }
}

#[test]
fn kernel_sources_are_plain_cuda() {
    // Cheap checks that run even without NVRTC: every listed kernel is extern "C".
    for name in kernels::KERNELS {
        assert!(
            kernels::SOURCE.contains(&format!("extern \"C\" __global__ void {name}(")),
            "{name} is not an extern \"C\" kernel"
        );
    }
}
