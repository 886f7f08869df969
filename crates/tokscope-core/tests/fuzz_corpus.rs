//! Replays the fuzz corpora and crash reproducers on stable: every file of
//! `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` goes through the
//! target's entry point (`tokscope_core::fuzz::run`), so a crash found once
//! stays fixed, and a parser change that breaks an invariant on a kept input
//! fails here without a fuzzer. Also keeps `fuzz/src/bin/` and the target
//! registry in step: every target has its one-file binary, every binary and
//! corpus directory is a known target.

use std::path::{Path, PathBuf};

use tokscope_core::fuzz;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.path()).collect(),
        Err(_) => Vec::new(),
    };
    paths.sort();
    paths
}

fn name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

#[test]
fn every_target_has_its_binary_and_every_binary_a_target() {
    let targets = fuzz::target_names();
    let bins: Vec<String> = entries(&fuzz_dir().join("src/bin"))
        .iter()
        .filter_map(|p| name(p).strip_suffix(".rs").map(str::to_string))
        .collect();
    for t in &targets {
        assert!(
            bins.contains(t),
            "fuzz target {t} has no binary: add fuzz/src/bin/{t}.rs (copy a format_* file and change the name)"
        );
    }
    for b in &bins {
        assert!(targets.contains(b), "fuzz/src/bin/{b}.rs is not a target of tokscope_core::fuzz");
    }
}

#[test]
fn corpora_and_regressions_replay_without_a_failure() {
    let mut failures = Vec::new();
    let mut replayed = 0;
    for kind in ["corpus", "regressions"] {
        for dir in entries(&fuzz_dir().join(kind)) {
            let target = name(&dir);
            for file in entries(&dir) {
                let data = std::fs::read(&file).expect("read corpus file");
                let outcome = std::panic::catch_unwind(|| fuzz::run(&target, &data));
                match outcome {
                    Ok(true) => replayed += 1,
                    Ok(false) => panic!("fuzz/{kind}/{target} is not a fuzz target"),
                    Err(_) => failures.push(file.display().to_string()),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} input(s) fail their target:\n{}", failures.len(), failures.join("\n"));
    assert!(replayed > 0, "no corpus found under {}", fuzz_dir().display());
}
