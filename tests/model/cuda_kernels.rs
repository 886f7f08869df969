//! The CUDA kernels compile to PTX with NVRTC, and the PTX has what the
//! forward pass's launches rely on. A batch of sequences (`replay --batch`)
//! runs on the GPU one sequence after another (`CudaModel::forward_batch`), so
//! the batch size reaches no kernel; what changes from one launch to the next
//! is how many tokens one call runs (the grid's rows) and how many positions
//! are cached. Each row is one block: no kernel reads the grid's size or
//! combines blocks through atomics, so a token's row does not depend on how
//! many rows run with it. The row reductions' shared buffers hold one float per
//! thread of the launch (`kernels::BLOCK`), and attention's fit beside the
//! scores of its longest sequence in a block's 48 KiB. Needs no GPU, only
//! `libnvrtc`: `pip install nvidia-cuda-nvrtc` (13.x) and put
//! `site-packages/nvidia/cu13/lib` on `LD_LIBRARY_PATH`, or let this test find
//! that directory through `python3` and rerun itself with it. It skips with a
//! message when NVRTC is missing, unless `TOKSCOPE_REQUIRE_NVRTC` is set.
#![cfg(feature = "cuda")]

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;

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

/// One kernel of the PTX module: its body's instruction lines, and the
/// shared arrays it declares itself.
#[derive(Debug, Default)]
struct Kernel {
    instructions: Vec<String>,
    own_shared: Vec<(String, usize)>,
}

/// The module's kernels by name, and its module-level shared arrays (name and
/// bytes): `.shared .align 4 .b8 name[1024];`. A body ends at the closing
/// brace of its own block (call sequences nest blocks inside it).
fn parse_ptx(ptx: &str) -> (BTreeMap<String, Kernel>, BTreeMap<String, usize>) {
    let shared_array = |line: &str| -> Option<(String, usize)> {
        let rest = line.strip_prefix(".shared ")?;
        let declared = rest.split_whitespace().last()?.strip_suffix("];")?;
        let (name, bytes) = declared.split_once('[')?;
        Some((name.to_string(), bytes.parse().ok()?))
    };
    let (mut kernels, mut module_shared) = (BTreeMap::new(), BTreeMap::new());
    let mut current: Option<(String, Kernel)> = None;
    let mut depth = 0usize;
    for line in ptx.lines() {
        let line = line.split("//").next().unwrap_or("").trim();
        if let Some(rest) = line.strip_prefix(".visible .entry ").or_else(|| line.strip_prefix(".entry ")) {
            let name = rest.split('(').next().unwrap_or(rest).trim().to_string();
            current = Some((name, Kernel::default()));
            depth = 0;
            continue;
        }
        let Some((_, kernel)) = current.as_mut() else {
            if let Some((name, bytes)) = shared_array(line) {
                module_shared.insert(name, bytes);
            }
            continue;
        };
        match line {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if depth == 0 {
                    let (name, kernel) = current.take().expect("inside a kernel");
                    kernels.insert(name, kernel);
                }
            }
            _ if depth > 0 => {
                if let Some(array) = shared_array(line) {
                    kernel.own_shared.push(array);
                } else if !line.is_empty() && !line.starts_with('.') {
                    kernel.instructions.push(line.to_string());
                }
            }
            _ => {}
        }
    }
    (kernels, module_shared)
}

/// The PTX as the forward pass compiles it (`CudaModel::upload`), its
/// kernels and its module-level shared arrays.
fn compiled() -> (String, BTreeMap<String, Kernel>, BTreeMap<String, usize>) {
    let ptx = kernels::compile_ptx(&[]).expect("NVRTC compiles the kernels");
    let (kernels, module_shared) = parse_ptx(&ptx);
    for name in kernels::KERNELS {
        assert!(kernels.contains_key(*name), "kernel {name} missing from the PTX:\n{ptx}");
    }
    (ptx, kernels, module_shared)
}

/// The static shared arrays `kernel` uses: its own, and the module's it names.
fn static_shared(kernel: &Kernel, module_shared: &BTreeMap<String, usize>) -> Vec<(String, usize)> {
    let used = module_shared.iter().filter(|(name, _)| kernel.instructions.iter().any(|i| i.contains(name.as_str())));
    kernel.own_shared.iter().cloned().chain(used.map(|(name, &bytes)| (name.clone(), bytes))).collect()
}

/// Runs a test body once NVRTC is loaded (see [`nvrtc_or_rerun`]).
fn with_nvrtc(test: &str, body: impl FnOnce()) {
    match nvrtc_or_rerun(test) {
        Ok(()) => body(),
        Err(Some(passed)) => assert!(passed, "the rerun with the pip NVRTC on LD_LIBRARY_PATH failed"),
        Err(None) => {}
    }
}

#[test]
fn every_kernel_compiles_and_reads_and_writes_global_memory() {
    with_nvrtc("every_kernel_compiles_and_reads_and_writes_global_memory", || {
        let (_, kernels, _) = compiled();
        for name in kernels::KERNELS {
            let ops: Vec<&str> =
                kernels[*name].instructions.iter().filter_map(|i| i.split_whitespace().next()).collect();
            assert!(ops.iter().any(|op| op.starts_with("ld.global")), "kernel {name} reads no global memory");
            assert!(ops.iter().any(|op| op.starts_with("st.global")), "kernel {name} writes no global memory");
        }
    });
}

/// What the grid's rows are (tokens of one call) never reaches a block: no
/// kernel reads the grid's size (`%nctaid`, CUDA's `gridDim`) or adds across
/// blocks with atomics (`atom`, `red`), so a row's result is the same in a
/// launch of one row or of many.
#[test]
fn no_kernel_reads_the_grid_size_or_uses_atomics() {
    with_nvrtc("no_kernel_reads_the_grid_size_or_uses_atomics", || {
        let (ptx, kernels, _) = compiled();
        let forbidden = |instruction: &str| {
            let op = instruction.split_whitespace().next().unwrap_or("");
            instruction.contains("%nctaid") || op.starts_with("atom.") || op.starts_with("red.")
        };
        for (name, kernel) in &kernels {
            if let Some(instruction) = kernel.instructions.iter().find(|i| forbidden(i)) {
                panic!("kernel {name} reads the grid's size or combines blocks with an atomic: {instruction}");
            }
        }
        // The device functions the kernels call, too.
        let elsewhere: Vec<&str> = ptx.lines().map(str::trim).filter(|l| forbidden(l)).collect();
        assert!(elsewhere.is_empty(), "the module reads the grid's size or uses atomics: {elsewhere:?}");
    });
}

/// The block reductions of RMSNorm and attention keep one float per thread,
/// and the forward pass launches them with `kernels::BLOCK` threads: each
/// static shared array is that many floats. Attention's scores (dynamic
/// shared memory, one float per position) fit beside its static arrays in the
/// 48 KiB a block gets without opting in, at its longest sequence.
#[test]
fn shared_memory_fits_the_launches() {
    with_nvrtc("shared_memory_fits_the_launches", || {
        let (_, kernels, module_shared) = compiled();
        let block_floats = kernels::BLOCK as usize * 4;
        for name in ["rms_norm", "attention"] {
            let arrays = static_shared(&kernels[name], &module_shared);
            assert!(!arrays.is_empty(), "kernel {name} reduces without a shared buffer");
            for (array, bytes) in &arrays {
                assert_eq!(*bytes, block_floats, "kernel {name}: {array} is not one float per thread of the launch");
            }
        }
        let attention_static: usize = static_shared(&kernels["attention"], &module_shared).iter().map(|(_, b)| b).sum();
        let scores = cuda::forward::MAX_ATTENTION_POSITIONS * 4;
        assert!(
            attention_static + scores <= 48 * 1024,
            "attention: {attention_static} bytes of static shared memory and {scores} of scores exceed 48 KiB"
        );
    });
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
